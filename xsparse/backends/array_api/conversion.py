"""The generic reference kernels, written against the Array API namespace ``xp`` alone.

They run on any compliant backend (array-api-strict included) and are the oracle the native kernels
are tested against. They favour plain, data-parallel formulations that need no scatter (the standard
has none): a dense array is filled by *gathering* each position's value through ``searchsorted`` on
the sorted keys of the specified elements, and duplicates are summed by a segmented scan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import array_api_compat
import numpy as np

from ... import dispatch
from ...dispatch import register
from ...formats import (
    COMPRESSED,
    COOArray,
    CompressedArray,
    sparse_coo,
    strided,
)
from ...formats._ops import compress, contiguous, expand_compressed, lexsort_indices, prod
from ...formats._invariants import index_overflows, unequal_batches
from ...formats._spec import Target

__all__: list[str] = []


def _device(x: Any) -> Any:
    return array_api_compat.device(x)


def to_host(x: Any) -> Any:
    """A NumPy copy (or view) of a strided array of any backend, on the host: for printing, for comparing,
    and for the few numbers an iterative method works on there (bfloat16, which NumPy lacks, widened)."""
    import numpy as np

    if hasattr(x, "resolve_conj"):
        # torch refuses to export a tensor that requires grad or carries a lazy conjugate, and exports a
        # lazy negation without applying it; values on an accelerator are copied to the host
        x = x.detach().resolve_conj().resolve_neg().cpu()
        try:
            return np.from_dlpack(x)
        except (TypeError, RuntimeError, BufferError):  # a dtype NumPy lacks (bfloat16): read it widened
            return np.from_dlpack(x.cfloat() if x.is_complex() else x.float())
    try:
        return np.from_dlpack(x)
    except (TypeError, ValueError, RuntimeError, BufferError, AttributeError):
        if hasattr(x, "get"):  # CuPy
            return np.asarray(x.get())
        return np.from_dlpack(x, device="cpu")


def _fill_scalar(xp: Any, dtype: Any, fill: Any) -> Any:
    from ..._common import scalar_for

    return scalar_for(xp, dtype, fill)


def fill_operand(xp: Any, x: Any, fill: Any) -> Any:
    """The fill value as the other operand of a comparison with ``x``: the Python scalar, except an integer
    past int64's range (the upper half of uint64), which becomes a 0-d array of ``x``'s dtype: JAX reads a
    Python int as int64 and raises OverflowError for it, where NumPy and torch compare it as it is."""
    if isinstance(fill, int) and not isinstance(fill, bool) and fill > 2**63 - 1:
        return xp.asarray(fill, dtype=x.dtype, device=_device(x))
    return fill


# Same-width signed dtypes of the unsigned ones that some backends only store: torch gathers, selects,
# adds and multiplies no uint16/uint32/uint64 values ("not implemented for 'UInt32'"). Two's complement
# integers of one width hold the same bits, and casts between them wrap, so a kernel that only moves
# values, or adds and multiplies them (arithmetic modulo 2**bits), gives the same bits on the twin.
_SIGNED_TWINS = {"uint16": "int16", "uint32": "int32", "uint64": "int64"}


def float64_on(xp: Any, device: Any) -> Any:
    """float64 where the namespace has it on ``device`` (torch's MPS devices, array_api_strict's no_x64
    one have none), else None: the dtype that comparisons and statistics widen to."""
    wide = getattr(xp, "float64", None)
    info = getattr(xp, "__array_namespace_info__", None)
    if wide is None or info is None:
        return wide
    return wide if wide in info().dtypes(device=device, kind="real floating").values() else None


def signed_twin(xp: Any, dtype: Any) -> Any:
    """The signed integer dtype of ``dtype``'s width for uint16, uint32 and uint64; None for any other dtype."""
    from ..._common import dtype_name

    name = _SIGNED_TWINS.get(dtype_name(dtype))
    return None if name is None else getattr(xp, name)


def through_signed(xp: Any, values: Any, move: Callable[[Any], Any]) -> Any:
    """``move(values)``, run on the same-width signed integers where the backend implements it for no such
    unsigned dtype (see ``_SIGNED_TWINS``); ``move`` must only move values, or add and multiply them.

    The first try is the plain call: a backend that supports the dtype pays nothing. The twin costs two
    casts of ``values`` and of the result (O(size)), the cost of the move itself.
    """
    try:
        return move(values)
    except (NotImplementedError, RuntimeError):
        twin = signed_twin(xp, values.dtype)
        if twin is None:
            raise
    return xp.astype(move(xp.astype(values, twin)), values.dtype)


def take_values(xp: Any, values: Any, indices: Any, *, axis: int) -> Any:
    """``xp.take(values, indices, axis=axis)`` for values of every dtype (:func:`through_signed`)."""
    return through_signed(xp, values, lambda v: xp.take(v, indices, axis=axis))


def gather_or_fill(xp: Any, a: Any, pos: Any, found: Any) -> Any:
    """``a``'s values at ``pos`` (along the entries) where ``found``, its fill value elsewhere, for values of
    every dtype (:func:`through_signed`)."""
    return through_signed(xp, a._vals, lambda v: xp.where(found, xp.take(v, pos, axis=0), fill_like(xp, v, a.fill_value, a.dtype)))


def fill_like(xp: Any, values: Any, fill: Any, dtype: Any) -> Any:
    """The fill value of an array of ``dtype`` as a 0-d array of ``values``' dtype (its signed twin inside
    :func:`through_signed`, where the cast wraps as the values' did)."""
    f = scalar_array(xp, _fill_scalar(xp, dtype, fill), dtype, _device(values))
    return f if values.dtype == dtype else xp.astype(f, values.dtype)


def result_dtype(xp: Any, *dtypes: Any) -> Any:
    """``xp.result_type(*dtypes)``, by the standard's promotion table where the backend refuses it (torch
    promotes no uint16, uint32 or uint64 with another dtype)."""
    try:
        return xp.result_type(*dtypes)
    except RuntimeError:
        from ..._dtypes import result_type

        return result_type(*dtypes)


# Order-preserving twins: the backends that only store uint16/uint32/uint64 compare none of them either
# ("lt_cpu" and "max_values_cpu" are not implemented for 'UInt32'). Subtracting 2**(bits-1) maps
# [0, 2**bits) onto the signed twin's range [-2**(bits-1), 2**(bits-1)) and keeps the order; on the bits
# that is the twin's wrapping cast with the sign bit flipped (an XOR with the twin's minimum), which no
# value overflows, uint64 included.


def _half_range(xp: Any, dtype: Any) -> int:
    """``2**(bits-1)`` for an integer ``dtype``: the shift of the order-preserving map."""
    return int(2 ** (xp.iinfo(dtype).bits - 1))


def _flip_sign_bit(xp: Any, values: Any) -> Any:
    low = xp.asarray(-_half_range(xp, values.dtype), dtype=values.dtype, device=_device(values))
    return xp.bitwise_xor(values, low)


def to_ordered(xp: Any, x: Any) -> Any:
    """``x`` (strided or sparse, of an unsigned dtype with a signed twin) as its twin with ``2**(bits-1)``
    subtracted from every element (the fill value too): comparisons and extrema of the result are those
    of ``x``. O(size of the values); an uncoalesced COO ``x`` is coalesced first (O(nnz log nnz))."""
    from ...formats import SparseArray

    twin = signed_twin(xp, x.dtype)
    if isinstance(x, COOArray):
        # the map is not additive: duplicates must add up (wrapping, in x's dtype) before it, or each
        # one would shift the element by another 2**(bits-1)
        x = coalesce_coo(xp, x)
    if isinstance(x, SparseArray):
        return x._with_values(_flip_sign_bit(xp, xp.astype(x._vals, twin)), int(x.fill_value) - _half_range(xp, twin))
    return _flip_sign_bit(xp, xp.astype(x, twin))


def from_ordered(xp: Any, x: Any, dtype: Any) -> Any:
    """The inverse of :func:`to_ordered`: ``x`` (strided or sparse, of the signed twin of ``dtype``) with
    ``2**(bits-1)`` added back, as ``dtype``."""
    from ...formats import SparseArray

    if isinstance(x, SparseArray):
        return x._with_values(xp.astype(_flip_sign_bit(xp, x._vals), dtype), int(x.fill_value) + _half_range(xp, dtype))
    return xp.astype(_flip_sign_bit(xp, x), dtype)


def through_ordered(xp: Any, x: Any, run: Callable[[Any, Any], Any], *, map_back: bool = True) -> Any:
    """``run(x, x.dtype)``, run as ``run(to_ordered(x), twin)`` where the backend compares no elements of
    ``x``'s unsigned dtype; ``run`` may only compare (max, min, argmax, sort, ...). Its result is mapped
    back with :func:`from_ordered` when ``map_back`` (it holds elements of ``x``), else returned as it is
    (positions, truth values).

    The first try is the plain call, free on a backend that supports the dtype; the twin costs a cast and
    an XOR of the values and of the result. ``x`` is strided or sparse.
    """
    try:
        return run(x, x.dtype)
    except (NotImplementedError, RuntimeError):
        twin = signed_twin(xp, x.dtype)
        if twin is None:
            raise
    out = run(to_ordered(xp, x), twin)
    return from_ordered(xp, out, x.dtype) if map_back else out


def is_plus_zero(fill: Any) -> bool:
    """Whether ``fill`` is zero with no sign bit set (``0``, ``False``, ``+0.0``, ``0j`` with both parts
    ``+0.0``): the fill value of the kernels that write zeros or leave out what compares equal to 0."""
    if isinstance(fill, (bool, int)):
        return fill == 0
    c = complex(fill)
    return c == 0 and math.copysign(1.0, c.real) > 0 and math.copysign(1.0, c.imag) > 0


def scalar_array(xp: Any, value: Any, dtype: Any = None, device: Any = None) -> Any:
    """``value`` (a Python or NumPy scalar) as a 0-d array of ``dtype`` on ``device``, the sign of a zero kept.

    A zero with a sign bit set (``-0.0``, or a complex zero with a ``-0.0`` part) is made from a one-element
    array: CuPy's ``asarray`` of a 0-d value fills the new array with a memset wherever the value compares
    equal to 0 (``ndarray.fill``, CuPy 14), which writes ``+0.0``, while it copies an array of one element
    as it is. Everything else is ``xp.asarray(value, ...)``.
    """
    if type(value) is float:  # the commonest (a fill value), tested first
        signed = value == 0 and math.copysign(1.0, value) < 0
    else:
        signed = not isinstance(value, (bool, int, np.bool_, np.integer)) and value == 0 and not is_plus_zero(value)
    if signed:
        return xp.reshape(xp.asarray([value], dtype=dtype, device=device), ())
    return xp.asarray(value, dtype=dtype, device=device)


def fill_array(xp: Any, a: Any) -> Any:
    """The fill value of the sparse array ``a`` as a 0-d array of ``a``'s dtype, on its device."""
    return scalar_array(xp, a.fill_value, a.dtype, a.device)


def from_host(xp: Any, host: Any, dtype: Any = None, device: Any = None) -> Any:
    """The NumPy array (or scalar) ``host`` on the backend of ``xp``, the signs of its zeros kept: a 0-d one
    goes through an array of one element, as in :func:`scalar_array`."""
    host = np.asarray(host)
    if host.ndim == 0:
        return xp.reshape(xp.asarray(np.reshape(host, (1,)), dtype=dtype, device=device), ())
    return xp.asarray(host, dtype=dtype, device=device)


def same_fill(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same fill value: equal with the same sign bits (per component), or
    both NaN."""
    if a != a or b != b:
        return bool(a != a and b != b)
    if a != b:
        return False
    if isinstance(a, (bool, int)) and isinstance(b, (bool, int)):
        return True
    ca, cb = complex(a), complex(b)
    return all(math.copysign(1.0, p) == math.copysign(1.0, q) for p, q in ((ca.real, cb.real), (ca.imag, cb.imag)))


def _sign_differs(xp: Any, part: Any, fill_part: float) -> Any:
    """Where the sign bit of the real floating ``part`` differs from ``fill_part``'s."""
    s = xp.signbit(part)
    return ~s if math.copysign(1.0, fill_part) < 0 else s


def _specified_mask(xp: Any, x: Any, fill: Any) -> Any:
    """Where ``x`` differs from the fill value by ``!=`` (NaN differs from every fill value but NaN), so a
    -0.0 counts as the fill value +0.0: the rule of the semi-structured encoding, where a group's
    zeros are the pruned positions and pruning by multiplying with a 0/1 mask leaves -0.0 there.
    Conversions to the other layouts use :func:`specified_mask`."""
    fill = _fill_scalar(xp, x.dtype, fill)
    if isinstance(fill, (float, complex)) and fill != fill:
        return ~xp.isnan(x)
    return x != fill_operand(xp, x, fill)


def specified_mask(xp: Any, x: Any, fill: Any) -> Any:
    """Where ``x`` is not the fill value, elementwise.

    An element is left out when it equals the fill value and, for floating and complex dtypes, has the
    same sign bit (per component): with fill value ``+0.0`` a ``-0.0`` is specified, and the reverse.
    NaN differs from every fill value but NaN; a complex value is compared part by part, so that with
    fill value ``nan + 0j`` the element ``1 + nanj`` is specified. Only a zero (component of the) fill
    value needs the sign test; any other fill value costs one comparison.
    """
    fill = _fill_scalar(xp, x.dtype, fill)
    if isinstance(fill, complex) and fill != fill:
        return _part_differs(xp, xp.real(x), fill.real) | _part_differs(xp, xp.imag(x), fill.imag)
    if isinstance(fill, float) and fill != fill:
        return ~xp.isnan(x)
    mask = x != fill_operand(xp, x, fill)
    if isinstance(fill, float) and fill == 0:
        mask = mask | _sign_differs(xp, x, fill)
    elif isinstance(fill, complex):
        if fill.real == 0:
            mask = mask | _sign_differs(xp, xp.real(x), fill.real)
        if fill.imag == 0:
            mask = mask | _sign_differs(xp, xp.imag(x), fill.imag)
    return mask


def _part_differs(xp: Any, part: Any, fill: float) -> Any:
    """Where a real ``part`` of complex values is not the same part of the fill value (NaN matches NaN)."""
    if fill != fill:
        return ~xp.isnan(part)
    mask = part != fill
    return mask | _sign_differs(xp, part, fill) if fill == 0 else mask


def _tail_shape(ndim: int) -> tuple[int, ...]:
    return (1,) * ndim


def _linearize(xp: Any, indices: Any, dims: tuple[int, ...]) -> Any:
    """Row-major linear int64 keys of the columns of ``indices`` (the caller ensures prod(dims) fits)."""
    key = xp.zeros((indices.shape[1],), dtype=xp.int64, device=_device(indices))
    for d, size in enumerate(dims):
        key = key * size + xp.astype(indices[d, :], xp.int64)
    return key


def _unravel(xp: Any, key: Any, dims: tuple[int, ...], dtype: Any) -> list[Any]:
    out = []
    for size in reversed(dims):
        out.append(xp.astype(key % size, dtype))
        key = key // size
    return out[::-1]


def _segment_sum(xp: Any, is_start: Any, values: Any) -> Any:
    """Sum runs of equal keys: ``values`` sorted by key, ``is_start`` marking each run's first element.

    A segmented inclusive scan by doubling (Hillis-Steele) takes ceil(log2(longest run)) passes, each
    a data-parallel step, then each run's last element holds its sum. Booleans combine with ``or``.
    """
    n = values.shape[0]
    starts = xp.nonzero(is_start)[0]
    if n == 0:
        return values
    seg = xp.cumulative_sum(xp.astype(is_start, xp.int64)) - 1
    bounds = xp.concat([starts, xp.asarray([n], dtype=starts.dtype, device=_device(starts))])
    longest = int(xp.max(bounds[1:] - bounds[:-1]))
    combine = xp.logical_or if xp.isdtype(values.dtype, "bool") else xp.add
    tail = _tail_shape(values.ndim - 1)
    v, step = values, 1
    while step < longest:
        same = xp.reshape(seg[step:] == seg[:-step], (n - step, *tail))
        v = xp.concat([v[:step, ...], xp.where(same, combine(v[step:, ...], v[:-step, ...]), v[step:, ...])], axis=0)
        step *= 2
    return xp.take(v, bounds[1:] - 1, axis=0)


def segment_sum(xp: Any, is_start: Any, values: Any) -> Any:
    """:func:`_segment_sum` for values of every dtype (sums wrap modulo 2**bits, as on the twin)."""
    return through_signed(xp, values, lambda v: _segment_sum(xp, is_start, v))


def coalesce_coo(xp: Any, a: COOArray) -> COOArray:
    """``a`` coalesced: as it is where its indices already increase strictly (one O(sparse_dim * nnz)
    pass), otherwise by the backend's fastest kernel (the generic one, :func:`_coalesce_coo`, where it has
    none, or under :func:`xsparse.dispatch.generic_only`)."""
    if a._coalesced:
        return a
    if strictly_increasing(xp, a._idx):
        return COOArray(a._idx, a._vals, a.shape, backend=a._backend, xp=xp, coalesced=True, fill_value=a.fill_value)
    return cast(COOArray, dispatch.call("coalesce", (sparse_coo,), a._backend.name, xp, a))


def summed_before_cast(xp: Any, a: Any, dtype: Any) -> Any:
    """``a`` coalesced first where it is an uncoalesced COO array whose values are to be cast to ``dtype``: the
    values mean their sums, in their own dtype, and a cast does not commute with the sum of duplicates
    (float32's 1e8 + 1 is 1e8, uint8's 200 + 100 is 44). Anything else as it is."""
    if isinstance(a, COOArray) and not a._coalesced and a.dtype != dtype:
        return coalesce_coo(xp, a)
    return a


def strictly_increasing(xp: Any, idx: Any) -> bool:
    """Whether the columns of ``idx`` (k, n) increase strictly in lexicographic order: sorted, no duplicates.

    A prefix is checked first, so that indices in random order cost next to nothing.
    """
    n = idx.shape[1]
    if n < 2:
        return True
    if n > 4096 and not strictly_increasing(xp, idx[:, :1024]):
        return False
    # from the last row up: a column precedes the next where its index there is less, or equal and the
    # rows below decide (one comparison for a vector, three per further row)
    last = idx.shape[0] - 1
    if last < 0:
        return False  # entries of no sparse dimension: every one at the one position
    less = idx[last, :-1] < idx[last, 1:]
    for d in range(last - 1, -1, -1):
        left, right = idx[d, :-1], idx[d, 1:]
        less = (left < right) | ((left == right) & less)
    return bool(xp.all(less))


@register("coalesce", (sparse_coo,))
def _coalesce_coo(xp: Any, a: COOArray) -> COOArray:
    """coalesce(COO) -> COO: lexicographic stable sort and segmented sum; O(sparse_dim * nnz log nnz)."""
    if a._coalesced:
        return a
    idx, vals = a._idx, a._vals
    perm = lexsort_indices(xp, idx)
    idx = xp.take(idx, perm, axis=1)
    vals = take_values(xp, vals, perm, axis=0)
    n = idx.shape[1]
    first = xp.ones((1,), dtype=xp.bool, device=_device(idx))
    if idx.shape[0]:
        is_start = xp.concat([first, xp.any(idx[:, 1:] != idx[:, :-1], axis=0)])
    else:
        is_start = xp.concat([first, xp.zeros((n - 1,), dtype=xp.bool, device=_device(idx))])
    starts = xp.nonzero(is_start)[0]
    return COOArray(
        xp.take(idx, starts, axis=1), segment_sum(xp, is_start, vals), a.shape,
        backend=a._backend, xp=xp, coalesced=True, fill_value=a.fill_value,
    )  # fmt: skip


def dense_to_coo(xp: Any, x: Any, sparse_dim: int, target: Target) -> COOArray:
    """The elements (or dense sub-arrays) of ``x`` that are not the fill value (:func:`specified_mask`:
    a zero of the other sign is specified), in row-major order."""
    mask = specified_mask(xp, x, target.fill_value)
    if x.ndim > sparse_dim:
        mask = xp.any(mask, axis=tuple(range(sparse_dim, x.ndim)))
    if sparse_dim == 0:
        nse = 1 if bool(mask) else 0
        indices = xp.zeros((0, nse), dtype=target.index_dtype, device=_device(x))
        values = xp.reshape(x, (1, *x.shape))[:nse, ...]
    else:
        nz = xp.nonzero(mask)
        indices = xp.stack([xp.astype(i, target.index_dtype) for i in nz])
        # torch lays out a boolean gather of a permuted tensor (a transposed input, the block view of a BSR
        # conversion) in the input's order of strides, not row-major, and invariant 3.7 wants row-major values
        values = contiguous(target.backend, xp, through_signed(xp, x, lambda v: v[mask]))
    return COOArray(indices, values, tuple(x.shape), backend=target.backend, xp=xp, coalesced=True, fill_value=target.fill_value)


def coo_to_dense(xp: Any, a: COOArray) -> Any:
    """Gather every position's value from the sorted keys; O(numel_sparse * log nnz)."""
    a = coalesce_coo(xp, a)
    sd = a.sparse_dim()
    fill = _fill_scalar(xp, a.dtype, a.fill_value)
    if a.nnz == 0:
        return xp.full(a.shape, fill, dtype=a.dtype, device=a.device)
    sparse_shape = a.shape[:sd]
    keys = _linearize(xp, a._idx, sparse_shape)
    positions = xp.arange(prod(sparse_shape), dtype=xp.int64, device=a.device)
    pos = xp.clip(xp.searchsorted(keys, positions), 0, a.nnz - 1)
    found = xp.reshape(xp.take(keys, pos) == positions, (-1, *_tail_shape(a.dense_dim())))
    out = gather_or_fill(xp, a, pos, found)
    return xp.reshape(out, a.shape)


@register("convert", (strided, sparse_coo))
def _convert_strided_coo(xp: Any, x: Any, target: Target) -> COOArray:
    """to_sparse_coo(strided) -> COO: nonzero + boolean gather; O(numel)."""
    return dense_to_coo(xp, x, target.sparse_dim, target)


@register("convert", (sparse_coo, strided))
def _convert_coo_strided(xp: Any, a: COOArray, target: Target) -> Any:
    """to_dense(COO) -> strided: coalesce, then gather by searchsorted; O(numel log nnz)."""
    return coo_to_dense(xp, a)


@register("convert", (sparse_coo, sparse_coo))
def _convert_coo_coo(xp: Any, a: COOArray, target: Target) -> COOArray:
    """to_sparse_coo(COO) -> COO with the requested index dtype; O(nnz)."""
    return COOArray(
        xp.astype(a._idx, target.index_dtype), a._vals, a.shape, backend=a._backend, xp=xp,
        coalesced=a._coalesced, fill_value=a.fill_value,
    )  # fmt: skip


# -- the compressed family ---------------------------------------------------------------------------
# A compressed array is a COO array over (batch..., row block, column block) whose dense dimensions are
# (block..., dense...): "block COO". Every conversion of the family goes through it.


def compressed_to_block_coo(xp: Any, a: CompressedArray) -> COOArray:
    """The block COO of a compressed array, entries in compressed order. O(batch * nse)."""
    nb_dims = a.batch_dim()
    batch = a.shape[:nb_dims]
    nb, nse = prod(batch), a.nnz
    major = xp.reshape(expand_compressed(xp, a._compressed, nse, a._backend), (-1,))
    minor = xp.reshape(a._plain, (-1,))
    index_dtype = a._compressed.dtype
    rows, cols = (major, minor) if a.layout.compressed_dim == 0 else (minor, major)
    b_lin = xp.reshape(
        xp.broadcast_to(xp.arange(nb, dtype=xp.int64, device=a.device)[:, None], (nb, nse)), (-1,)
    )
    batch_idx = _unravel(xp, b_lin, batch, index_dtype) if nb_dims else []
    bm, bn = a.blocksize
    grid = batch + (a.shape[nb_dims] // bm, a.shape[nb_dims + 1] // bn)
    values = xp.reshape(a._vals, (nb * nse, *a._vals.shape[nb_dims + 1 :]))
    indices = xp.stack([*batch_idx, rows, cols]) if nb * nse else xp.zeros((nb_dims + 2, 0), dtype=index_dtype, device=a.device)
    return COOArray(
        indices, values, grid + tuple(values.shape[1:]), backend=a._backend, xp=xp,
        coalesced=a.layout.compressed_dim == 0, fill_value=a.fill_value,
    )  # fmt: skip


def block_coo_to_compressed(xp: Any, c: COOArray, target: Target) -> CompressedArray:
    """Compress a coalesced block COO; every batch must hold the same number of entries. O(nnz log nnz)."""
    layout = target.layout
    nb_dims = c.sparse_dim() - 2
    batch = c.shape[:nb_dims]
    nb = prod(batch)
    idx, vals = c._idx, c._vals
    cd = layout.compressed_dim
    if cd == 1:
        order = list(range(nb_dims)) + [nb_dims + 1, nb_dims]
        perm = lexsort_indices(xp, xp.stack([idx[d, :] for d in order]) if idx.shape[1] else idx)
        idx = xp.take(idx, perm, axis=1)
        vals = take_values(xp, vals, perm, axis=0)
    total = c.nnz
    b_lin = _linearize(xp, idx[:nb_dims, :], batch) if nb_dims else xp.zeros((total,), dtype=xp.int64, device=c.device)
    if nb == 0:
        nse = 0
    else:
        per_batch = xp.searchsorted(b_lin, xp.arange(nb + 1, dtype=xp.int64, device=c.device))
        counts = per_batch[1:] - per_batch[:-1]
        nse = total // nb
        if total % nb or bool(xp.any(counts != nse)):
            raise unequal_batches(layout, batch, int(xp.min(counts)), int(xp.max(counts)))
    grid = c.shape[nb_dims : nb_dims + 2]
    n_compressed = grid[cd]
    majors, minors = idx[nb_dims + cd, :], idx[nb_dims + 1 - cd, :]
    compressed = compress(xp, b_lin, majors, nb, n_compressed, nse, target.index_dtype)
    return CompressedArray(
        xp.reshape(compressed, (*batch, n_compressed + 1)),
        xp.reshape(xp.astype(minors, target.index_dtype), (*batch, nse)),
        xp.reshape(vals, (*batch, nse, *vals.shape[1:])),
        target.shape, layout=layout, backend=target.backend, xp=xp, fill_value=c.fill_value,
    )  # fmt: skip


def coo_to_block_coo(xp: Any, a: COOArray, nb_dims: int, blocksize: tuple[int, int]) -> COOArray:
    """Group a COO array's elements into (bm, bn) blocks; in-block positions not given get the fill value."""
    a = coalesce_coo(xp, a)
    bm, bn = blocksize
    idx = a._idx
    rows, cols = idx[nb_dims, :], idx[nb_dims + 1, :]
    block_idx = xp.stack([*(idx[d, :] for d in range(nb_dims)), rows // bm, cols // bn])
    in_block = (rows % bm) * bn + (cols % bn)
    # sort by (block, position in block): the element keys become strictly increasing
    perm = lexsort_indices(xp, xp.concat([block_idx, xp.reshape(in_block, (1, -1))], axis=0))
    block_idx = xp.take(block_idx, perm, axis=1)
    in_block = xp.astype(xp.take(in_block, perm), xp.int64)
    vals = take_values(xp, a._vals, perm, axis=0)
    n = block_idx.shape[1]
    grid = a.shape[:nb_dims] + (a.shape[nb_dims] // bm, a.shape[nb_dims + 1] // bn)
    dense = a.shape[nb_dims + 2 :]
    if n == 0:
        values = xp.zeros((0, bm, bn, *dense), dtype=a.dtype, device=a.device)
        return COOArray(block_idx, values, grid + (bm, bn) + dense, backend=a._backend, xp=xp, coalesced=True, fill_value=a.fill_value)
    first = xp.ones((1,), dtype=xp.bool, device=a.device)
    is_start = xp.concat([first, xp.any(block_idx[:, 1:] != block_idx[:, :-1], axis=0)])
    block_ordinal = xp.cumulative_sum(xp.astype(is_start, xp.int64)) - 1
    starts = xp.nonzero(is_start)[0]
    nblocks = starts.shape[0]
    keys = block_ordinal * (bm * bn) + in_block
    wanted = xp.arange(nblocks * bm * bn, dtype=xp.int64, device=a.device)
    pos = xp.clip(xp.searchsorted(keys, wanted), 0, n - 1)
    found = xp.reshape(xp.take(keys, pos) == wanted, (-1, *_tail_shape(len(dense))))
    gathered = through_signed(xp, vals, lambda v: xp.where(found, xp.take(v, pos, axis=0), fill_like(xp, v, a.fill_value, a.dtype)))
    values = xp.reshape(gathered, (nblocks, bm, bn, *dense))
    return COOArray(
        xp.take(block_idx, starts, axis=1), values, grid + (bm, bn) + dense, backend=a._backend, xp=xp,
        coalesced=True, fill_value=a.fill_value,
    )  # fmt: skip


def block_coo_to_coo(xp: Any, c: COOArray, nb_dims: int, shape: tuple[int, ...]) -> COOArray:
    """Every element of every block as its own COO entry (in-block fill values stay specified)."""
    idx, vals = c._idx, c._vals
    n = idx.shape[1]
    bm, bn = vals.shape[1], vals.shape[2]
    if idx.dtype == xp.int32 and index_overflows("int32", max(shape[nb_dims], shape[nb_dims + 1])):
        # the block indices fit int32, the element indices need int64 (invariant 1.3 refuses int32 later,
        # where the result is asked in it, with its own message)
        idx = xp.astype(idx, xp.int64)
    if n == 0:
        # no block: nothing to expand (an index grid of a block of 2**31 elements would take 16 GB)
        empty = xp.zeros((nb_dims + 2, 0), dtype=idx.dtype, device=c.device)
        return COOArray(empty, xp.reshape(vals, (0, *vals.shape[3:])), shape, backend=c._backend, xp=xp, coalesced=True, fill_value=c.fill_value)
    dt = idx.dtype
    r = xp.arange(bm, dtype=dt, device=c.device)[None, :, None]
    q = xp.arange(bn, dtype=dt, device=c.device)[None, None, :]
    full = (n, bm, bn)
    rows = xp.reshape(xp.broadcast_to(idx[nb_dims, :][:, None, None] * bm + r, full), (-1,))
    cols = xp.reshape(xp.broadcast_to(idx[nb_dims + 1, :][:, None, None] * bn + q, full), (-1,))
    batch = [xp.reshape(xp.broadcast_to(idx[d, :][:, None, None], full), (-1,)) for d in range(nb_dims)]
    indices = xp.stack([*batch, rows, cols]) if n else xp.zeros((nb_dims + 2, 0), dtype=dt, device=c.device)
    values = xp.reshape(vals, (n * bm * bn, *vals.shape[3:]))
    return COOArray(indices, values, shape, backend=c._backend, xp=xp, coalesced=False, fill_value=c.fill_value)


def compressed_to_coo(xp: Any, a: CompressedArray, *, sort: bool = True) -> COOArray:
    """The coalesced element COO of a compressed array (batch dimensions become sparse dimensions); with
    ``sort=False`` its entries in storage order, unsorted but without duplicates."""
    c = compressed_to_block_coo(xp, a)
    if a.layout.is_blocked:
        c = block_coo_to_coo(xp, c, a.batch_dim(), a.shape)
    return coalesce_coo(xp, c) if sort else c


def coo_to_compressed(xp: Any, a: COOArray, target: Target) -> CompressedArray:
    nb_dims = a.sparse_dim() - 2
    if target.layout.is_blocked:
        c = coo_to_block_coo(xp, a, nb_dims, target.blocksize)
    else:
        c = coalesce_coo(xp, a)
    return block_coo_to_compressed(xp, c, target)


@register("convert", (sparse_coo, COMPRESSED))
def _convert_coo_compressed(xp: Any, a: COOArray, target: Target) -> CompressedArray:
    """to_sparse_{csr,csc,bsr,bsc}(COO): coalesce, block, compress; O(nnz log nnz)."""
    return coo_to_compressed(xp, a, target)


@register("convert", (COMPRESSED, sparse_coo))
def _convert_compressed_coo(xp: Any, a: CompressedArray, target: Target) -> COOArray:
    """to_sparse_coo(compressed): expand the compressed indices (and blocks); O(nnz log nnz)."""
    c = compressed_to_coo(xp, a)
    return cast(COOArray, _convert_coo_coo(xp, c, target))


@register("convert", (COMPRESSED, COMPRESSED))
def _convert_compressed_compressed(xp: Any, a: CompressedArray, target: Target) -> CompressedArray:
    """Between compressed layouts (and blocksizes) through the element COO; O(nnz log nnz)."""
    return coo_to_compressed(xp, compressed_to_coo(xp, a), target)


def _blocked_view(xp: Any, x: Any, nb_dims: int, blocksize: tuple[int, int]) -> Any:
    """``(*B, M, N, *D)`` as ``(*B, M/bm, N/bn, bm, bn, *D)``."""
    bm, bn = blocksize
    batch, (m, n), dense = x.shape[:nb_dims], x.shape[nb_dims : nb_dims + 2], x.shape[nb_dims + 2 :]
    y = xp.reshape(x, (*batch, m // bm, bm, n // bn, bn, *dense))
    axes = list(range(y.ndim))
    axes[nb_dims + 1], axes[nb_dims + 2] = axes[nb_dims + 2], axes[nb_dims + 1]
    return xp.permute_dims(y, tuple(axes))


@register("convert", (strided, COMPRESSED))
def _convert_strided_compressed(xp: Any, x: Any, target: Target) -> CompressedArray:
    """to_sparse_{csr,csc,bsr,bsc}(strided): nonzero blocks in row-major order, then compress; O(numel)."""
    nb_dims = target.batch_dim
    if target.layout.is_blocked:
        x = _blocked_view(xp, x, nb_dims, target.blocksize)
    c = dense_to_coo(xp, x, nb_dims + 2, target)
    return block_coo_to_compressed(xp, c, target)


@register("convert", (COMPRESSED, strided))
def _convert_compressed_strided(xp: Any, a: CompressedArray, target: Target | None) -> Any:
    """to_dense(compressed): block COO, gathered into the block grid, then un-blocked; O(numel log nnz)."""
    return block_coo_to_strided(xp, a, coalesce_coo(xp, compressed_to_block_coo(xp, a)))


def block_coo_to_strided(xp: Any, a: CompressedArray, c: COOArray) -> Any:
    """The dense array of the compressed ``a`` from ``c``, its block COO coalesced."""
    dense = coo_to_dense(xp, c)
    if not a.layout.is_blocked:
        return dense
    nb_dims = a.batch_dim()
    axes = list(range(dense.ndim))
    axes[nb_dims + 1], axes[nb_dims + 2] = axes[nb_dims + 2], axes[nb_dims + 1]
    return xp.reshape(xp.permute_dims(dense, tuple(axes)), a.shape)


