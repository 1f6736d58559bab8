"""Generic shape kernels (Array API only): permute, reshape, expand and squeeze, broadcast, flip, concat.

A COO array changes shape by moving its index rows and value axes. Where an operation would put a dense
dimension before a sparse one, the dense dimensions concerned are *regrouped*: every stored dense
sub-array is split into one entry per element (its fill values stay specified), which multiplies
``nnz`` but never materialises an unspecified element.

A compressed array (CSR, CSC, BSR, BSC) changes shape on its components wherever the result keeps the
compressed structure: its batch dimensions (all three components), its dense dimensions (the values),
and its two sparse dimensions as a whole (the CSR <-> CSC view, or a reordering of the specified
elements for ``flip`` and ``concat``). Elsewhere its kernel declines with a reason, and the declared
rewrite through COO computes a COO result (the dispatcher warns).

The public functions (``xsparse._shape``) have checked and normalised every argument: kernels get
axes in ``[0, ndim)``, resolved shapes, and, for ``concat``, operands of one layout, dtype and fill value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import array_api_compat

from ..._common import dtype_name, scalar_for
from ..._errors import InvariantError, LayoutError
from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, Layout, SparseArray, sparse_coo, strided
from ...formats._invariants import index_overflows
from ...formats._ops import contiguous, expand_compressed, lexsort_indices, prod
from ...formats._spec import Target
from .conversion import (
    _linearize,
    _unravel,
    block_coo_to_compressed,
    coalesce_coo,
    compressed_to_block_coo,
    compressed_to_coo,
    coo_to_block_coo,
    gather_or_fill,
    scalar_array,
    take_values,
    through_signed,
)

__all__ = [
    "wide_enough",
    "broadcast_coo",
    "regroup_coo",
    "pad_batches",
    "compress_like",
    "as_layout_of",
    "permute_coo",
    "reshape_coo",
    "align_coo",
    "supports_concat_compressed",
]


def _device(x: Any) -> Any:
    return array_api_compat.device(x)


def _arange(xp: Any, n: int, like: Any) -> Any:
    return xp.arange(n, dtype=xp.int64, device=_device(like))


def _positions(xp: Any, order: Sequence[int], like: Any) -> Any:
    return xp.asarray(list(order), dtype=xp.int64, device=_device(like))


def wide_enough(xp: Any, index_dtype: Any, *sizes: int) -> Any:
    """``index_dtype``, or int64 where int32 cannot address the largest of ``sizes`` (a number of
    entries or a dimension's size: invariant 1.3)."""
    if dtype_name(index_dtype) == "int32" and index_overflows("int32", max((*sizes, 0))):
        return xp.int64
    return index_dtype


def _is_identity(order: Sequence[int], start: int = 0) -> bool:
    return tuple(order) == tuple(range(start, start + len(order)))


def _n_block(a: CompressedArray) -> int:
    return 2 if a.layout.is_blocked else 0


def _compressed(a: CompressedArray, compressed: Any, plain: Any, values: Any, shape: tuple[int, ...], **kw: Any) -> CompressedArray:
    fill = kw.get("fill_value", a.fill_value)
    layout = kw.get("layout", a.layout)
    return CompressedArray(compressed, plain, values, shape, layout=layout, backend=a._backend, xp=a._xp, fill_value=fill)


# -- COO helpers ---------------------------------------------------------------------------------


def broadcast_coo(xp: Any, a: COOArray, shape: tuple[int, ...]) -> COOArray:
    """``a`` broadcast to ``shape`` (Array API rules): new leading and size-1 sparse dimensions repeat the
    entries, size-1 dense dimensions broadcast the values. O(nnz * repetition)."""
    shape = tuple(shape)
    if tuple(a.shape) == shape:
        return a
    extra = len(shape) - a.ndim
    sd = a.sparse_dim() + extra
    old = (1,) * extra + tuple(a.shape)
    grown = prod(shape[:sd]) // max(prod(old[:sd]), 1)
    idt = wide_enough(xp, a._idx.dtype, a.nnz * max(grown, 1), *shape[:sd])
    idx, vals = (a._idx if idt == a._idx.dtype else xp.astype(a._idx, idt)), a._vals
    dev = a.device
    if extra:
        # new leading dimensions are sparse, at index 0 until repeated below
        idx = xp.concat([xp.zeros((extra, idx.shape[1]), dtype=idt, device=dev), idx], axis=0)
    coalesced = a.is_coalesced()
    for d in range(sd):
        if old[d] == shape[d]:
            continue
        n, nnz = shape[d], idx.shape[1]
        # every entry once per index along d, entry-major: the order stays lexicographic only when no
        # later sparse dimension tells entries apart (all of size 1)
        rep = xp.reshape(xp.broadcast_to(idx[:, :, None], (sd, nnz, n)), (sd, nnz * n))
        along = xp.reshape(xp.broadcast_to(xp.arange(n, dtype=idt, device=dev)[None, :], (nnz, n)), (-1,))
        idx = xp.concat([rep[:d, :], along[None, :], rep[d + 1 :, :]], axis=0)
        vals = xp.reshape(xp.broadcast_to(vals[:, None, ...], (nnz, n, *vals.shape[1:])), (nnz * n, *vals.shape[1:]))
        coalesced = coalesced and all(shape[k] == 1 for k in range(d + 1, sd))
    if tuple(vals.shape[1:]) != shape[sd:]:
        vals = xp.broadcast_to(vals, (vals.shape[0], *shape[sd:]))
    # a reshape of a broadcast view may stay a view with zero strides (one entry repeated): copy it
    vals = contiguous(a._backend, xp, vals)
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


def regroup_coo(xp: Any, a: COOArray, k: int) -> COOArray:
    """``a`` with its first ``k`` dense dimensions made sparse: every stored dense sub-array becomes one
    entry per element of those dimensions (its fill values stay specified). The entries keep their order,
    so a coalesced array stays coalesced. O(nnz * prod(sizes of the k dimensions))."""
    if k == 0:
        return a
    sd, nnz = a.sparse_dim(), a.nnz
    lead = tuple(a.shape[sd : sd + k])
    n = prod(lead)
    idt = wide_enough(xp, a._idx.dtype, nnz * n, *a.shape[: sd + k])
    idx = xp.astype(a._idx, idt)
    repeated = xp.reshape(xp.broadcast_to(idx[:, :, None], (sd, nnz, n)), (sd, nnz * n))
    inner = xp.reshape(xp.broadcast_to(_arange(xp, n, idx)[None, :], (nnz, n)), (-1,))
    indices = xp.concat([repeated, xp.stack(_unravel(xp, inner, lead, idt))], axis=0)
    values = xp.reshape(a._vals, (nnz * n, *a.shape[sd + k :]))
    return COOArray(indices, values, a.shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)


# -- back to a compressed layout -----------------------------------------------------------------


def pad_batches(xp: Any, c: COOArray, nb_dims: int) -> COOArray:
    """A coalesced block COO whose batches (its first ``nb_dims`` sparse dimensions) all hold as many
    entries as the fullest one: the others get explicit entries holding the fill value, at the first
    positions of the grid that they leave unspecified. O(batch * most log nnz).

    Among the first ``most`` grid positions of a batch with ``count`` entries at least ``most - count`` are
    unspecified, so the candidates need not go beyond them.
    """
    batch = tuple(c.shape[:nb_dims])
    nbat = prod(batch)
    if not nb_dims or nbat <= 1 or c.nnz == 0:
        return c
    dev = c.device
    idx = c._idx
    b_lin = _linearize(xp, idx[:nb_dims, :], batch)
    bounds = xp.searchsorted(b_lin, xp.arange(nbat + 1, dtype=xp.int64, device=dev))
    counts = bounds[1:] - bounds[:-1]
    most = int(xp.max(counts))
    need = most - counts
    if not bool(xp.any(need > 0)):
        return c
    gm, gn = c.shape[nb_dims], c.shape[nb_dims + 1]
    cells = gm * gn
    keys = b_lin * cells + xp.astype(idx[nb_dims, :], xp.int64) * gn + xp.astype(idx[nb_dims + 1, :], xp.int64)
    batches = xp.arange(nbat, dtype=xp.int64, device=dev)[:, None]
    candidates = xp.reshape(batches * cells + xp.arange(most, dtype=xp.int64, device=dev)[None, :], (-1,))
    at = xp.clip(xp.searchsorted(keys, candidates), 0, c.nnz - 1)
    absent = xp.reshape(xp.take(keys, at) != candidates, (nbat, most))
    rank = xp.cumulative_sum(xp.astype(absent, xp.int64), axis=1)
    chosen = xp.nonzero(xp.reshape(absent & (rank <= need[:, None]), (-1,)))[0]
    cell = chosen % most
    idt = idx.dtype
    new_idx = xp.stack([*_unravel(xp, chosen // most, batch, idt), xp.astype(cell // gn, idt), xp.astype(cell % gn, idt)])
    fill = scalar_for(xp, c.dtype, c.fill_value)
    new_vals = xp.full((chosen.shape[0], *c._vals.shape[1:]), fill, dtype=c.dtype, device=dev)
    all_idx = xp.concat([idx, new_idx], axis=1)
    perm = lexsort_indices(xp, all_idx)
    return COOArray(
        xp.take(all_idx, perm, axis=1), take_values(xp, xp.concat([c._vals, new_vals], axis=0), perm, axis=0), c.shape,
        backend=c._backend, xp=xp, coalesced=True, fill_value=c.fill_value,
    )  # fmt: skip


def compress_like(xp: Any, c: COOArray, layout: Layout, blocksize: tuple[int, int], index_dtype: Any, op: str) -> CompressedArray:
    """The element COO ``c`` (sparse dimensions: batch..., rows, columns) in a compressed ``layout``; batches
    are padded to equal counts (:func:`pad_batches`). O(nnz log nnz)."""
    nb_dims = c.sparse_dim() - 2
    shape = tuple(c.shape)
    bm, bn = blocksize
    if shape[nb_dims] % bm or shape[nb_dims + 1] % bn:
        raise LayoutError(
            f"{op}: the result's sparse dimensions {shape[nb_dims : nb_dims + 2]} are not a whole number of blocks "
            f"(blocksize={blocksize}, shape={shape}). Index in whole blocks, or convert first with xsparse.to_sparse_csr(x) "
            "or xsparse.to_sparse_coo(x)."
        )
    # a result larger than the input (tile, repeat, take) may need wider indices than the input's
    index_dtype = wide_enough(xp, index_dtype, c.nnz, *shape[nb_dims : nb_dims + 2])
    if nb_dims == 0:
        # one matrix: the backend's fastest conversion
        from ..._conversion import to_sparse

        return cast(CompressedArray, to_sparse(c, layout=layout, blocksize=blocksize if layout.is_blocked else None, index_dtype=index_dtype))
    blocks = coo_to_block_coo(xp, c, nb_dims, blocksize) if layout.is_blocked else coalesce_coo(xp, c)
    blocks = pad_batches(xp, blocks, nb_dims)
    target = Target(layout, c._backend, xp, shape, 2, len(shape) - nb_dims - 2, blocksize, index_dtype, c.fill_value)
    return block_coo_to_compressed(xp, blocks, target)


def as_layout_of(xp: Any, c: COOArray, like: SparseArray, op: str) -> SparseArray:
    """The element COO ``c`` in the layout (blocksize, index dtype) of ``like``, whose batch and sparse
    dimensions are ``c``'s sparse ones; ``c`` itself for a COO ``like``."""
    if isinstance(like, CompressedArray):
        return compress_like(xp, c, like.layout, like.blocksize, like.index_dtype, op)
    return c


def _permute_within(xp: Any, a: COOArray, axes: Sequence[int]) -> COOArray:
    """Permute a COO array whose permutation keeps its sparse dimensions first (index rows and value axes)."""
    sd = a.sparse_dim()
    sparse_order, dense_order = axes[:sd], [ax - sd + 1 for ax in axes[sd:]]
    idx = a._idx if _is_identity(sparse_order) else xp.take(a._idx, _positions(xp, sparse_order, a._idx), axis=0)
    vals = a._vals if _is_identity(dense_order, 1) else xp.permute_dims(a._vals, (0, *dense_order))
    shape = tuple(a.shape[ax] for ax in axes)
    # entries sorted by the old index order are no longer sorted once the index rows move
    coalesced = a.is_coalesced() and _is_identity(sparse_order)
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


def permute_coo(xp: Any, a: COOArray, axes: Sequence[int]) -> COOArray:
    """``permute_dims`` of a COO array; dense dimensions moved before a sparse one are regrouped as sparse."""
    sd = a.sparse_dim()
    sparse_at = [p for p, ax in enumerate(axes) if ax < sd]
    k = sparse_at[-1] + 1 if sparse_at else 0
    moved = sorted(ax for ax in axes[:k] if ax >= sd)
    if moved:
        order = [*range(sd), *moved, *(d for d in range(sd, a.ndim) if d not in moved)]
        a = regroup_coo(xp, _permute_within(xp, a, order), len(moved))
        axes = [order.index(ax) for ax in axes]
    if _is_identity(axes):
        return a
    return _permute_within(xp, a, axes)


def _reshape_plan(a: COOArray, shape: tuple[int, ...]) -> tuple[int, int]:
    """``(r, p)``: regroup the first ``r`` dense dimensions of ``a`` (as few as possible), then its leading
    dimensions become the first ``p`` of ``shape`` and its remaining dense ones the rest. Among the ``p``
    that fit, one leaving the dense dimensions as they are comes first, then the smallest."""
    sd = a.sparse_dim()
    for r in range(a.dense_dim() + 1):
        lead = prod(a.shape[: sd + r])
        fits = [p for p in range(len(shape) + 1) if prod(shape[:p]) == lead]
        exact = [p for p in fits if tuple(shape[p:]) == tuple(a.shape[sd + r :])]
        if fits:
            return r, (exact or fits)[0]
    return a.dense_dim(), len(shape)


def reindex(xp: Any, indices: Any, old: tuple[int, ...], new: tuple[int, ...], dtype: Any) -> Any:
    """The ``(len(new), nnz)`` indices, of ``dtype``, of the positions that ``indices`` number in ``old``
    (both shapes of one size): row-major linear keys, then their digits in ``new``."""
    rows = _unravel(xp, _linearize(xp, indices, old), new, dtype)
    return xp.stack(rows) if rows else xp.zeros((0, indices.shape[1]), dtype=dtype, device=_device(indices))


def reshape_coo(
    xp: Any, a: COOArray, shape: tuple[int, ...], copy: bool | None, renumber: Callable[..., Any] = reindex
) -> COOArray:
    """Reshape a COO array: its sparse dimensions by linearising the indices, its dense dimensions among
    themselves (the values); dense dimensions the new shape merges with sparse ones are regrouped as
    sparse first. The row-major order, hence coalescedness, is kept. O(sparse_dim * nnz). ``renumber``
    computes the new indices (:func:`reindex`'s arguments and result): a backend may pass a faster one."""
    regroup, p = _reshape_plan(a, shape)
    old_lead, new_lead = tuple(a.shape[: a.sparse_dim() + regroup]), tuple(shape[:p])
    if regroup or old_lead != new_lead:
        if copy is False:
            raise ValueError(
                f"reshape: a reshape of the sparse dimensions of a sparse_coo array builds new indices, so it cannot "
                f"return a view (shape={a.shape}, new shape={shape}, copy=False). Pass copy=None or copy=True."
            )
        a = regroup_coo(xp, a, regroup)
        if prod(old_lead) > 2**63 - 1:
            raise ValueError(
                f"reshape: the sparse dimensions {old_lead} have more positions than int64 can number. Reshape "
                "fewer dimensions at once."
            )
        idt = wide_enough(xp, a._idx.dtype, a.nnz, *new_lead)
        idx = renumber(xp, a._idx, old_lead, new_lead, idt)
    else:
        idx = xp.asarray(a._idx, copy=True) if copy else a._idx
    vals = xp.reshape(a._vals, (a.nnz, *shape[p:]), copy=copy)
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)


def align_coo(xp: Any, arrays: Sequence[COOArray]) -> tuple[Any, list[Any]]:
    """The union of the specified positions of COO arrays of one sparse shape, and each array's values
    there (its fill value where it specifies none): ``(indices, [values, ...])``, sorted and unique.
    O(N log N) for N the total number of entries."""
    arrays = [coalesce_coo(xp, a) for a in arrays]
    first = arrays[0]
    sd = first.sparse_dim()
    sparse_shape = tuple(first.shape[:sd])
    if prod(sparse_shape) > 2**63 - 1:
        raise ValueError(
            f"concat: the sparse dimensions {sparse_shape} have more positions than int64 can number. Concatenate "
            "along a sparse dimension, or convert with to_dense() first."
        )
    keys = [_linearize(xp, a._idx, sparse_shape) for a in arrays]
    union = xp.sort(xp.unique_values(xp.concat(keys)))
    n = union.shape[0]
    out = []
    for a, key in zip(arrays, keys):
        tail = (1,) * (a._vals.ndim - 1)
        fill = scalar_array(xp, a.fill_value, a.dtype, a.device)
        if a.nnz == 0:
            out.append(xp.broadcast_to(xp.reshape(fill, (1, *tail)), (n, *a._vals.shape[1:])))
            continue
        pos = xp.clip(xp.searchsorted(key, union), 0, a.nnz - 1)
        found = xp.reshape(xp.take(key, pos) == union, (n, *tail))
        out.append(gather_or_fill(xp, a, pos, found))
    idt = first._idx.dtype
    rows = _unravel(xp, union, sparse_shape, idt)
    indices = xp.stack(rows) if rows else xp.zeros((0, n), dtype=idt, device=first.device)
    return indices, out


# -- strided -------------------------------------------------------------------------------------


@register("permute_dims", (strided,))
def _permute_dims_strided(xp: Any, x: Any, axes: tuple[int, ...]) -> Any:
    """permute_dims(strided) -> strided: the backend's function; a view where the backend makes one."""
    return xp.permute_dims(x, axes)


@register("reshape", (strided,))
def _reshape_strided(xp: Any, x: Any, shape: tuple[int, ...], copy: bool | None) -> Any:
    """reshape(strided) -> strided: the backend's function; a view or O(numel)."""
    return xp.reshape(x, shape, copy=copy)


@register("expand_dims", (strided,))
def _expand_dims_strided(xp: Any, x: Any, axis: int) -> Any:
    """expand_dims(strided) -> strided: the backend's function; a view."""
    return xp.expand_dims(x, axis=axis)


@register("squeeze", (strided,))
def _squeeze_strided(xp: Any, x: Any, axes: tuple[int, ...]) -> Any:
    """squeeze(strided) -> strided: the backend's function (a reshape when no axis goes); a view."""
    return xp.squeeze(x, axis=axes) if axes else x


@register("broadcast_to", (strided,))
def _broadcast_to_strided(xp: Any, x: Any, shape: tuple[int, ...]) -> Any:
    """broadcast_to(strided) -> strided: the backend's function; a view."""
    return xp.broadcast_to(x, shape)


@register("flip", (strided,))
def _flip_strided(xp: Any, x: Any, axes: tuple[int, ...]) -> Any:
    """flip(strided) -> strided: the backend's function; a view or O(numel)."""
    return through_signed(xp, x, lambda v: xp.flip(v, axis=axes)) if axes else x


@register("concat", (strided,))
def _concat_strided(xp: Any, arrays: list[Any], axis: int) -> Any:
    """concat(strided, ...) -> strided: the backend's function; O(total numel)."""
    return xp.concat(arrays, axis=axis)


# -- COO -----------------------------------------------------------------------------------------


@register("permute_dims", (sparse_coo,))
def _permute_dims_coo(xp: Any, a: COOArray, axes: tuple[int, ...]) -> COOArray:
    """permute_dims(COO) -> COO: moves index rows and value axes, regrouping dense dims put before sparse ones; O(sparse_dim * nnz)."""
    return permute_coo(xp, a, axes)


@register("reshape", (sparse_coo,))
def _reshape_coo(xp: Any, a: COOArray, shape: tuple[int, ...], copy: bool | None) -> COOArray:
    """reshape(COO) -> COO: linearised indices, values reshaped, regrouping only what the shape needs; O(sparse_dim * nnz)."""
    return reshape_coo(xp, a, shape, copy)


@register("expand_dims", (sparse_coo,))
def _expand_dims_coo(xp: Any, a: COOArray, axis: int) -> COOArray:
    """expand_dims(COO) -> COO: a zero index row (up to sparse_dim, as torch's unsqueeze) or a value axis; O(nnz)."""
    sd = a.sparse_dim()
    shape = (*a.shape[:axis], 1, *a.shape[axis:])
    if axis <= sd:
        zero = xp.zeros((1, a.nnz), dtype=a._idx.dtype, device=a.device)
        # row-major whatever the pieces' strides: NumPy lays out a concatenation of a stride-0 row (as a
        # reduction's x[None, :] is) and empty pieces column-major
        idx = contiguous(a._backend, xp, xp.concat([a._idx[:axis, :], zero, a._idx[axis:, :]], axis=0))
        return COOArray(idx, a._vals, shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)
    vals = xp.expand_dims(a._vals, axis=axis - sd + 1)
    return COOArray(a._idx, vals, shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)


@register("squeeze", (sparse_coo,))
def _squeeze_coo(xp: Any, a: COOArray, axes: tuple[int, ...]) -> COOArray:
    """squeeze(COO) -> COO: drops index rows (all zero) and value axes of size 1; O(sparse_dim * nnz)."""
    sd = a.sparse_dim()
    keep_rows = [d for d in range(sd) if d not in axes]
    idx = a._idx if len(keep_rows) == sd else xp.take(a._idx, _positions(xp, keep_rows, a._idx), axis=0)
    dense_axes = tuple(d - sd + 1 for d in axes if d >= sd)
    vals = xp.squeeze(a._vals, axis=dense_axes) if dense_axes else a._vals
    shape = tuple(s for d, s in enumerate(a.shape) if d not in axes)
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)


@register("broadcast_to", (sparse_coo,))
def _broadcast_to_coo(xp: Any, a: COOArray, shape: tuple[int, ...]) -> COOArray:
    """broadcast_to(COO) -> COO: repeats entries along new and size-1 sparse dims, broadcasts the values; O(nnz * repetition)."""
    return broadcast_coo(xp, a, shape)


@register("flip", (sparse_coo,))
def _flip_coo(xp: Any, a: COOArray, axes: tuple[int, ...]) -> COOArray:
    """flip(COO) -> COO: mirrors index rows (reversing the entries when all flip) and flips value axes; O(sparse_dim * nnz)."""
    sd = a.sparse_dim()
    sparse_axes = [d for d in axes if d < sd]
    idx, vals = a._idx, a._vals
    if sparse_axes:
        rows = [a.shape[d] - 1 - idx[d, :] if d in sparse_axes else idx[d, :] for d in range(sd)]
        idx = xp.stack(rows)
    dense_axes = tuple(d - sd + 1 for d in axes if d >= sd)
    if dense_axes:
        vals = through_signed(xp, vals, lambda v: xp.flip(v, axis=dense_axes))
    coalesced = a.is_coalesced()
    if sparse_axes and len(sparse_axes) == sd and coalesced:
        reverse = xp.flip(_arange(xp, a.nnz, idx))
        idx, vals = xp.take(idx, reverse, axis=1), take_values(xp, vals, reverse, axis=0)
    elif sparse_axes:
        coalesced = False
    return COOArray(idx, vals, a.shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


def _common_index_dtype(xp: Any, arrays: Sequence[Any], nse: int, shape: tuple[int, ...]) -> Any:
    wide = any(dtype_name(a.index_dtype) == "int64" for a in arrays)
    return wide_enough(xp, xp.int64 if wide else xp.int32, nse, *shape)


@register("concat", (sparse_coo,))
def _concat_coo(xp: Any, arrays: list[COOArray], axis: int) -> COOArray:
    """concat(COO, ...) -> COO: offsets indices along a sparse dim, O(N); aligns entries on their union along a dense dim, O(N log N)."""
    # operands with fewer sparse dimensions regroup their leading dense ones
    sd = max(a.sparse_dim() for a in arrays)
    arrays = [regroup_coo(xp, a, sd - a.sparse_dim()) for a in arrays]
    first = arrays[0]
    shape = list(first.shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    total = sum(a.nnz for a in arrays)
    idt = _common_index_dtype(xp, arrays, total, tuple(shape))
    if axis < sd:
        parts, offset = [], 0
        for a in arrays:
            idx = xp.astype(a._idx, idt, copy=False)  # concat copies it anyway
            if offset:
                shift = xp.reshape(_positions(xp, [offset if d == axis else 0 for d in range(sd)], idx), (sd, 1))
                idx = idx + xp.astype(shift, idt)
            parts.append(idx)
            offset += a.shape[axis]
        indices = xp.concat(parts, axis=1)
        values = xp.concat([a._vals for a in arrays], axis=0)
        # blocks of entries sorted along the first dimension follow each other in order
        coalesced = axis == 0 and all(a.is_coalesced() for a in arrays)
        return COOArray(indices, values, tuple(shape), backend=first._backend, xp=xp, coalesced=coalesced, fill_value=first.fill_value)
    indices, values = align_coo(xp, arrays)
    out = xp.concat(values, axis=axis - sd + 1)
    return COOArray(xp.astype(indices, idt), out, tuple(shape), backend=first._backend, xp=xp, coalesced=True, fill_value=first.fill_value)


# -- block_diag ------------------------------------------------------------------------------------


@register("block_diag", (strided,))
def _block_diag_strided(xp: Any, arrays: list[Any], shape: tuple[int, int]) -> Any:
    """block_diag(strided, ...) -> strided: each matrix between zeros, the rows joined; O(rows * columns)."""
    dev = array_api_compat.device(arrays[0])
    dtype = arrays[0].dtype
    rows, before = [], 0
    for a in arrays:
        m, n = (int(s) for s in a.shape)
        left = xp.zeros((m, before), dtype=dtype, device=dev)
        right = xp.zeros((m, shape[1] - before - n), dtype=dtype, device=dev)
        rows.append(xp.concat([left, a, right], axis=1))
        before += n
    return xp.concat(rows, axis=0)


@register("block_diag", (sparse_coo,))
def _block_diag_coo(xp: Any, arrays: list[COOArray], shape: tuple[int, int]) -> COOArray:
    """block_diag(COO, ...) -> COO: each operand's entries shifted to its diagonal block (dense dimensions regrouped); O(N)."""
    arrays = [regroup_coo(xp, a, a.dense_dim()) for a in arrays]
    first = arrays[0]
    total = sum(a.nnz for a in arrays)
    idt = _common_index_dtype(xp, arrays, total, shape)
    parts, corner = [], [0, 0]
    for a in arrays:
        idx = xp.astype(a._idx, idt)
        if corner != [0, 0]:
            idx = idx + xp.reshape(xp.asarray(corner, dtype=idt, device=first.device), (2, 1))
        parts.append(idx)
        corner = [corner[0] + a.shape[0], corner[1] + a.shape[1]]
    # the operands' entries follow one another down the rows
    coalesced = all(a.is_coalesced() for a in arrays)
    return COOArray(
        xp.concat(parts, axis=1), xp.concat([a._vals for a in arrays], axis=0), shape, backend=first._backend, xp=xp,
        coalesced=coalesced, fill_value=first.fill_value,
    )  # fmt: skip


@register("block_diag", (COMPRESSED,))
def _block_diag_compressed(xp: Any, arrays: list[CompressedArray], shape: tuple[int, int]) -> CompressedArray:
    """block_diag(compressed, ...) of one layout and block shape -> that layout: slices joined, plain indices shifted; O(N)."""
    first = arrays[0]
    cd = first.layout.compressed_dim
    block = first.blocksize[1 - cd]
    total = sum(a.nnz for a in arrays)
    idt = _common_index_dtype(xp, arrays, total, shape)
    pointers, plains, entries, shift = [], [], 0, 0
    for i, a in enumerate(arrays):
        c = xp.astype(a._compressed, idt)
        pointers.append((c if i == len(arrays) - 1 else c[:-1]) + entries)
        plains.append(xp.astype(a._plain, idt) + shift)
        entries += a.nnz
        shift += a.shape[1 - cd] // block
    values = contiguous(first._backend, xp, xp.concat([a._vals for a in arrays], axis=0))
    return _compressed(first, xp.concat(pointers), xp.concat(plains), values, shape)


# -- compressed ----------------------------------------------------------------------------------


def _groups_kept(a: CompressedArray, axes: Sequence[int]) -> bool:
    b = a.batch_dim()
    return sorted(axes[:b]) == list(range(b)) and sorted(axes[b : b + 2]) == [b, b + 1]


def _supports_permute_compressed(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> str | None:
    if _groups_kept(a, axes):
        return None
    return (
        f"the permutation {axes} moves a dimension between the batch ({a.batch_dim()}), sparse (2) and dense "
        f"({a.dense_dim()}) dimensions of a {a.layout} array, which the layout cannot hold"
    )


@register("permute_dims", (COMPRESSED,), supports=_supports_permute_compressed)
def _permute_dims_compressed(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> CompressedArray:
    """permute_dims(compressed) -> compressed: batch/dense axes of the components (a copy), the sparse swap as a view; O(batch * nse)."""
    b, nblk = a.batch_dim(), _n_block(a)
    batch_order = list(axes[:b])
    dense_order = [ax - b - 2 for ax in axes[b + 2 :]]
    ci, pi, vals = a._compressed, a._plain, a._vals
    if not _is_identity(batch_order):
        ci = contiguous(a._backend, xp, xp.permute_dims(ci, (*batch_order, b)))
        pi = contiguous(a._backend, xp, xp.permute_dims(pi, (*batch_order, b)))
        vals = xp.permute_dims(vals, (*batch_order, *range(b, vals.ndim)))
    if not _is_identity(dense_order):
        lead = b + 1 + nblk
        vals = xp.permute_dims(vals, (*range(lead), *(lead + j for j in dense_order)))
    if vals is not a._vals:
        vals = contiguous(a._backend, xp, vals)
    shape = (*(a.shape[d] for d in batch_order), *a.shape[b : b + 2], *(a.shape[b + 2 + j] for j in dense_order))
    out = _compressed(a, ci, pi, vals, shape)
    return out.transpose_sparse() if axes[b] == b + 1 else out


@register("permute_dims", (COMPRESSED,), rewrite=True)
def _permute_dims_compressed_through_coo(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> COOArray:
    """permute_dims(compressed) -> COO: the element COO, permuted (and regrouped); O(nnz log nnz)."""
    return permute_coo(xp, compressed_to_coo(xp, a), axes)


def _compressed_split(a: CompressedArray, shape: tuple[int, ...]) -> int | None:
    """Where the two sparse dimensions sit in ``shape`` if a reshape only regroups batch and dense ones."""
    b = a.batch_dim()
    sparse = tuple(a.shape[b : b + 2])
    nbatch, ndense = prod(a.shape[:b]), prod(a.shape[b + 2 :])
    found = [
        p for p in range(len(shape) - 1)
        if tuple(shape[p : p + 2]) == sparse and prod(shape[:p]) == nbatch and prod(shape[p + 2 :]) == ndense
    ]  # fmt: skip
    if not found:
        return None
    # with zero sizes several splits fit; prefer the one keeping the batch rank, then the first
    return b if b in found else found[0]


def _supports_reshape_compressed(xp: Any, a: CompressedArray, shape: tuple[int, ...], copy: bool | None) -> str | None:
    if _compressed_split(a, shape) is not None or copy is False:
        return None
    b = a.batch_dim()
    return (
        f"the new shape {shape} changes the sparse dimensions {tuple(a.shape[b : b + 2])} of a {a.layout} array "
        "(only its batch and dense dimensions reshape in place)"
    )


@register("reshape", (COMPRESSED,), supports=_supports_reshape_compressed)
def _reshape_compressed(xp: Any, a: CompressedArray, shape: tuple[int, ...], copy: bool | None) -> CompressedArray:
    """reshape(compressed) -> compressed within the batch and dense dimensions: reshaped components; a view."""
    p = _compressed_split(a, shape)
    if p is None:
        b = a.batch_dim()
        raise ValueError(
            f"reshape: the new shape changes the sparse dimensions of a {a.layout} array, which needs new indices, so "
            f"it cannot return a view (shape={a.shape}, new shape={shape}, sparse dimensions={tuple(a.shape[b : b + 2])}, "
            "copy=False). Pass copy=None to reshape through COO."
        )
    batch, dense = tuple(shape[:p]), tuple(shape[p + 2 :])
    block = tuple(a._vals.shape[a.batch_dim() + 1 : a.batch_dim() + 1 + _n_block(a)])
    ci = xp.reshape(a._compressed, (*batch, a._compressed.shape[-1]), copy=copy)
    pi = xp.reshape(a._plain, (*batch, a.nnz), copy=copy)
    vals = xp.reshape(a._vals, (*batch, a.nnz, *block, *dense), copy=copy)
    return _compressed(a, ci, pi, vals, shape)


@register("reshape", (COMPRESSED,), rewrite=True)
def _reshape_compressed_through_coo(xp: Any, a: CompressedArray, shape: tuple[int, ...], copy: bool | None) -> COOArray:
    """reshape(compressed) -> COO: the element COO, reshaped; O(nnz log nnz)."""
    return reshape_coo(xp, compressed_to_coo(xp, a), shape, copy)


def _supports_expand_compressed(xp: Any, a: CompressedArray, axis: int) -> str | None:
    if axis != a.batch_dim() + 1:
        return None
    return f"a new dimension at axis={axis} falls between the two sparse dimensions of a {a.layout} array"


@register("expand_dims", (COMPRESSED,), supports=_supports_expand_compressed)
def _expand_dims_compressed(xp: Any, a: CompressedArray, axis: int) -> CompressedArray:
    """expand_dims(compressed) -> compressed: a batch axis of every component or a dense axis of the values; a view."""
    b = a.batch_dim()
    shape = (*a.shape[:axis], 1, *a.shape[axis:])
    if axis <= b:
        ci, pi = xp.expand_dims(a._compressed, axis=axis), xp.expand_dims(a._plain, axis=axis)
        return _compressed(a, ci, pi, xp.expand_dims(a._vals, axis=axis), shape)
    vals = xp.expand_dims(a._vals, axis=axis - 1 + _n_block(a))
    return _compressed(a, a._compressed, a._plain, vals, shape)


@register("expand_dims", (COMPRESSED,), rewrite=True)
def _expand_dims_compressed_through_coo(xp: Any, a: CompressedArray, axis: int) -> COOArray:
    """expand_dims(compressed) -> COO: a zero index row in the element COO; O(nnz log nnz)."""
    return _expand_dims_coo(xp, compressed_to_coo(xp, a), axis)  # type: ignore[no-any-return]


def _supports_squeeze_compressed(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> str | None:
    b = a.batch_dim()
    if b in axes or b + 1 in axes:
        return f"squeezing axes {axes} removes a sparse dimension of a {a.layout} array, which has exactly two"
    return None


@register("squeeze", (COMPRESSED,), supports=_supports_squeeze_compressed)
def _squeeze_compressed(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> CompressedArray:
    """squeeze(compressed) -> compressed: batch axes of every component, dense axes of the values; a view."""
    b = a.batch_dim()
    batch_axes = tuple(d for d in axes if d < b)
    value_axes = (*batch_axes, *(d - 1 + _n_block(a) for d in axes if d >= b + 2))
    ci = xp.squeeze(a._compressed, axis=batch_axes) if batch_axes else a._compressed
    pi = xp.squeeze(a._plain, axis=batch_axes) if batch_axes else a._plain
    vals = xp.squeeze(a._vals, axis=value_axes) if value_axes else a._vals
    shape = tuple(s for d, s in enumerate(a.shape) if d not in axes)
    return _compressed(a, ci, pi, vals, shape)


@register("squeeze", (COMPRESSED,), rewrite=True)
def _squeeze_compressed_through_coo(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> COOArray:
    """squeeze(compressed) -> COO: drops index rows of the element COO; O(nnz log nnz)."""
    return _squeeze_coo(xp, compressed_to_coo(xp, a), axes)  # type: ignore[no-any-return]


def _target_like(a: CompressedArray, shape: tuple[int, ...], index_dtype: Any) -> Target:
    return Target(a.layout, a._backend, a._xp, shape, 2, a.dense_dim(), a.blocksize, index_dtype, a.fill_value)


@register("broadcast_to", (COMPRESSED,))
def _broadcast_to_compressed(xp: Any, a: CompressedArray, shape: tuple[int, ...]) -> CompressedArray:
    """broadcast_to(compressed) -> compressed: copies components along batch/dense dims, O(batch * nse); size-1 sparse dims via block COO."""
    if tuple(shape) == tuple(a.shape):
        return a
    b, nblk = a.batch_dim(), _n_block(a)
    extra = len(shape) - a.ndim
    batch, sparse, dense = shape[: extra + b], tuple(shape[extra + b : extra + b + 2]), shape[extra + b + 2 :]
    if sparse != tuple(a.shape[b : b + 2]):
        c = coalesce_coo(xp, compressed_to_block_coo(xp, a))
        bm, bn = a.blocksize
        grid = (*batch, sparse[0] // bm, sparse[1] // bn, *c.shape[b + 2 : b + 2 + nblk], *dense)
        c = _broadcast_to_coo(xp, c, grid)
        idt = wide_enough(xp, a.index_dtype, *sparse, c.nnz // max(prod(batch), 1))
        return block_coo_to_compressed(xp, coalesce_coo(xp, c), _target_like(a, shape, idt))
    lead = (1,) * extra
    block = tuple(a._vals.shape[b + 1 : b + 1 + nblk])

    def grow(x: Any, tail: tuple[int, ...]) -> Any:
        x = xp.reshape(x, (*lead, *x.shape))
        # astype, not asarray: torch's asarray(copy=True) warns about the autograd flag of values that require grad
        return contiguous(a._backend, xp, xp.astype(xp.broadcast_to(x, (*batch, *tail)), x.dtype, copy=True))

    # the extra dimensions are leading ones, so the dense dimensions keep their number
    vals = grow(a._vals, (a.nnz, *block, *dense))
    ci = grow(a._compressed, (a._compressed.shape[-1],))
    pi = grow(a._plain, (a.nnz,))
    return _compressed(a, ci, pi, vals, tuple(shape))


@register("flip", (COMPRESSED,))
def _flip_compressed(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> CompressedArray:
    """flip(compressed) -> compressed: flips batch/dense axes, reverses the slices and reorders elements for sparse axes; O(batch * nse)."""
    b, nblk = a.batch_dim(), _n_block(a)
    cd = a.layout.compressed_dim
    batch_axes = tuple(d for d in axes if d < b)
    ci, pi, vals = a._compressed, a._plain, a._vals
    if batch_axes:
        ci, pi = xp.flip(ci, axis=batch_axes), xp.flip(pi, axis=batch_axes)
        vals = through_signed(xp, vals, lambda v: xp.flip(v, axis=batch_axes))
    flip_major, flip_minor = b + cd in axes, b + 1 - cd in axes
    if flip_major or flip_minor:
        ci, pi, vals = _flip_sparse(xp, a, ci, pi, vals, flip_major, flip_minor)
    value_axes = tuple(d - 1 + nblk for d in axes if d >= b + 2)
    if nblk:
        # a flipped row (column) of the array flips the rows (columns) of every block
        value_axes = (*(d + 1 for d in axes if b <= d < b + 2), *value_axes)
    if value_axes:
        vals = through_signed(xp, vals, lambda v: xp.flip(v, axis=value_axes))
    fix = [contiguous(a._backend, xp, x) for x in (ci, pi, vals)]
    return _compressed(a, fix[0], fix[1], fix[2], a.shape)


def _flip_sparse(
    xp: Any, a: CompressedArray, ci: Any, pi: Any, vals: Any, flip_major: bool, flip_minor: bool
) -> tuple[Any, Any, Any]:
    """Mirror the compressed (major) and/or plain (minor) block index, keeping every slice sorted."""
    b = a.batch_dim()
    batch = tuple(a.shape[:b])
    nb, nse = prod(batch), a.nnz
    n_major = ci.shape[-1] - 1
    n_minor = (a.shape[b + 1 - a.layout.compressed_dim]) // a.blocksize[1 - a.layout.compressed_dim]
    c = xp.astype(xp.reshape(ci, (nb, n_major + 1)), xp.int64)
    counts = c[:, 1:] - c[:, :-1]
    new_counts = xp.flip(counts, axis=1) if flip_major else counts
    zero = xp.zeros((nb, 1), dtype=xp.int64, device=a.device)
    new_c = xp.concat([zero, xp.cumulative_sum(new_counts, axis=1)], axis=1)
    # for every new position: its new slice, the old slice it comes from, its offset there
    q = xp.broadcast_to(_arange(xp, nse, c)[None, :], (nb, nse))
    new_major = expand_compressed(xp, new_c, nse, a._backend)
    old_major = (n_major - 1 - new_major) if flip_major else new_major
    offset = q - xp.take_along_axis(new_c, new_major, axis=1)
    start = xp.take_along_axis(c, old_major, axis=1)
    if flip_minor:
        offset = xp.take_along_axis(counts, old_major, axis=1) - 1 - offset
    source = xp.reshape(start + offset + _arange(xp, nb, c)[:, None] * nse, (-1,))
    flat_pi = xp.take(xp.reshape(pi, (-1,)), source)
    if flip_minor:
        flat_pi = (n_minor - 1) - flat_pi
    flat_vals = take_values(xp, xp.reshape(vals, (nb * nse, *vals.shape[b + 1 :])), source, axis=0)
    return (
        xp.reshape(xp.astype(new_c, ci.dtype), ci.shape),
        xp.reshape(xp.astype(flat_pi, pi.dtype), pi.shape),
        xp.reshape(flat_vals, vals.shape),
    )


def _unequal(op: str, layout: Any, counts: Sequence[int], fix: str) -> InvariantError:
    return InvariantError(
        "3.9",
        f"every batch of a {layout} array must hold the same number of specified elements, and the result would "
        f"hold between {min(counts)} and {max(counts)} (nnz={list(counts)}). {fix}",
        op,
    )


def supports_concat_compressed(xp: Any, arrays: list[CompressedArray], axis: int) -> str | None:
    """Why compressed operands cannot be joined as they are: their batch / dense splits differ."""
    splits = sorted({(a.batch_dim(), a.dense_dim()) for a in arrays})
    if len(splits) > 1:
        return (
            f"the operands split their dimensions differently into batch, sparse and dense ones ((batch_dim, dense_dim) in "
            f"{splits}), which one {arrays[0].layout} array cannot hold"
        )
    return None


@register("concat", (COMPRESSED,), supports=supports_concat_compressed)
def _concat_compressed(xp: Any, arrays: list[CompressedArray], axis: int) -> CompressedArray:
    """concat(compressed, ...) -> compressed: components (batch), slices (compressed), merged slices or union (plain, dense); O(N log N)."""
    first = arrays[0]
    b = first.batch_dim()
    shape = list(first.shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    result_shape = tuple(shape)
    total = sum(a.nnz for a in arrays)
    idt = _common_index_dtype(xp, arrays, total, result_shape)
    if axis < b:
        counts = [a.nnz for a in arrays]
        if len(set(counts)) > 1:
            raise _unequal("concat", first.layout, counts, "Concatenate COO arrays instead (pass layout=xsparse.sparse_coo).")
        ci = xp.concat([xp.astype(a._compressed, idt) for a in arrays], axis=axis)
        pi = xp.concat([xp.astype(a._plain, idt) for a in arrays], axis=axis)
        vals = xp.concat([a._vals for a in arrays], axis=axis)
        return _compressed(first, ci, pi, contiguous(first._backend, xp, vals), result_shape)
    if axis < b + 2:
        merge = _concat_major if axis - b == first.layout.compressed_dim else _concat_minor
        ci, pi, vals = merge(xp, arrays, axis - b, idt)
        return _compressed(first, ci, pi, contiguous(first._backend, xp, vals), result_shape)
    return _concat_dense(xp, arrays, axis, result_shape, idt)


@register("concat", (COMPRESSED,), rewrite=True)
def _concat_compressed_through_coo(xp: Any, arrays: list[CompressedArray], axis: int) -> COOArray:
    """concat(compressed, ...) -> COO: the element COO of every operand, joined (and regrouped); O(N log N)."""
    return _concat_coo(xp, [compressed_to_coo(xp, a) for a in arrays], axis)  # type: ignore[no-any-return]


def _concat_major(xp: Any, arrays: list[CompressedArray], sparse_axis: int, idt: Any) -> tuple[Any, Any, Any]:
    b = arrays[0].batch_dim()
    parts, offset = [], 0
    for i, a in enumerate(arrays):
        c = xp.astype(a._compressed, idt)
        parts.append((c if i == len(arrays) - 1 else c[..., :-1]) + offset)
        offset += a.nnz
    ci = xp.concat(parts, axis=-1)
    pi = xp.concat([xp.astype(a._plain, idt) for a in arrays], axis=-1)
    return ci, pi, xp.concat([a._vals for a in arrays], axis=b)


def _concat_minor(xp: Any, arrays: list[CompressedArray], sparse_axis: int, idt: Any) -> tuple[Any, Any, Any]:
    """Merge the slices: every slice holds the first operand's elements, then the second's (shifted), ..."""
    first = arrays[0]
    b = first.batch_dim()
    nb = prod(first.shape[:b])
    block = first.blocksize[sparse_axis]
    majors, minors, values, offset = [], [], [], 0
    for a in arrays:
        majors.append(xp.reshape(xp.astype(expand_compressed(xp, a._compressed, a.nnz, a._backend), xp.int64), (nb, a.nnz)))
        minors.append(xp.reshape(xp.astype(a._plain, idt), (nb, a.nnz)) + offset)
        values.append(xp.reshape(a._vals, (nb, a.nnz, *a._vals.shape[b + 1 :])))
        offset += a.shape[b + sparse_axis] // block
    total = sum(a.nnz for a in arrays)
    order = xp.argsort(xp.concat(majors, axis=1), axis=1, stable=True)
    flat = xp.reshape(order + _arange(xp, nb, order)[:, None] * total, (-1,))
    pi = xp.take(xp.reshape(xp.concat(minors, axis=1), (-1,)), flat)
    vals = take_values(xp, xp.reshape(xp.concat(values, axis=1), (nb * total, *first._vals.shape[b + 1 :])), flat, axis=0)
    ci = xp.astype(arrays[0]._compressed, idt)
    for a in arrays[1:]:
        ci = ci + xp.astype(a._compressed, idt)
    batch = tuple(first.shape[:b])
    return ci, xp.reshape(pi, (*batch, total)), xp.reshape(vals, (*batch, total, *first._vals.shape[b + 1 :]))


def _concat_dense(xp: Any, arrays: list[CompressedArray], axis: int, shape: tuple[int, ...], idt: Any) -> CompressedArray:
    first = arrays[0]
    b, nblk = first.batch_dim(), _n_block(first)
    blocks = [coalesce_coo(xp, compressed_to_block_coo(xp, a)) for a in arrays]
    indices, values = align_coo(xp, blocks)
    vals = xp.concat(values, axis=axis - b - 1 + nblk)
    n = indices.shape[1]
    batch = tuple(first.shape[:b])
    nb = prod(batch)
    if b and nb and n:
        per = xp.searchsorted(_linearize(xp, indices[:b, :], batch), _arange(xp, nb + 1, indices))
        counts = per[1:] - per[:-1]
        if bool(xp.any(counts != counts[0])):
            raise _unequal(
                "concat", first.layout, [int(c) for c in counts],
                "Concatenate COO arrays instead (pass layout=xsparse.sparse_coo), or give the operands one sparsity structure.",
            )  # fmt: skip
    grid = blocks[0].shape[: b + 2]
    c = COOArray(xp.astype(indices, idt), vals, (*grid, *vals.shape[1:]), backend=first._backend, xp=xp, coalesced=True, fill_value=first.fill_value)
    return block_coo_to_compressed(xp, c, _target_like(first, shape, idt))


# -- roll ------------------------------------------------------------------------------------------


def roll_coo(xp: Any, a: COOArray, shift: tuple[int, ...], axes: tuple[int, ...] | None) -> COOArray:
    """``roll`` of a COO array: the index rows of rolled sparse dimensions move modulo their size (the
    entries stay unique, no longer sorted), rolled dense dimensions roll the values. ``axes=None`` rolls
    the flattened array: the dense dimensions are regrouped and the linear keys move. O(nnz * ndim)."""
    if axes is None:
        c = regroup_coo(xp, a, a.dense_dim())
        size = prod(a.shape)
        if not shift[0] or size <= 1 or c.nnz == 0:
            return c
        key = (_linearize(xp, c._idx, tuple(a.shape)) + shift[0]) % size
        idx = xp.stack(_unravel(xp, key, tuple(a.shape), c._idx.dtype))
        return COOArray(idx, c._vals, a.shape, backend=a._backend, xp=xp, coalesced=False, fill_value=a.fill_value)
    sd = a.sparse_dim()
    by_axis = dict(zip(axes, shift))
    idx, vals = a._idx, a._vals
    sparse_axes = [d for d in axes if d < sd]
    if sparse_axes:
        rows = [
            xp.astype((xp.astype(idx[d, :], xp.int64) + by_axis[d]) % a.shape[d], idx.dtype) if d in by_axis else idx[d, :]
            for d in range(sd)
        ]  # fmt: skip
        idx = xp.stack(rows)
    dense_axes = tuple(d for d in axes if d >= sd)
    if dense_axes:
        vals = xp.roll(vals, shift=tuple(by_axis[d] for d in dense_axes), axis=tuple(1 + d - sd for d in dense_axes))
    coalesced = a.is_coalesced() and not sparse_axes
    return COOArray(idx, vals, a.shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


@register("roll", (strided,))
def _roll_strided(xp: Any, x: Any, shift: tuple[int, ...], axes: tuple[int, ...] | None) -> Any:
    """roll(strided) -> strided: the backend's function; O(numel)."""
    if axes is not None and not axes:
        return x
    return xp.roll(x, shift=shift[0] if axes is None else shift, axis=axes)


@register("roll", (sparse_coo,))
def _roll_coo(xp: Any, a: COOArray, shift: tuple[int, ...], axes: tuple[int, ...] | None) -> COOArray:
    """roll(COO) -> COO: index rows modulo the size, values rolled along dense dims; O(nnz * ndim)."""
    return roll_coo(xp, a, shift, axes)


def _supports_roll_compressed(xp: Any, a: CompressedArray, shift: tuple[int, ...], axes: tuple[int, ...] | None) -> str | None:
    if axes is None and a.dense_dim():
        return f"rolling the flattened array mixes the dense dimensions of a {a.layout} array with its sparse ones"
    return None


@register("roll", (COMPRESSED,), supports=_supports_roll_compressed)
def _roll_compressed(xp: Any, a: CompressedArray, shift: tuple[int, ...], axes: tuple[int, ...] | None) -> CompressedArray:
    """roll(compressed) -> compressed: components along batch/dense dims (O(batch * nse)); element COO along sparse ones (O(nnz log nnz))."""
    b, nblk = a.batch_dim(), _n_block(a)
    if axes is None or any(b <= d < b + 2 for d in axes):
        rolled = roll_coo(xp, compressed_to_coo(xp, a), shift, axes)
        return compress_like(xp, rolled, a.layout, a.blocksize, a.index_dtype, "roll")
    by_axis = dict(zip(axes, shift))
    batch_axes = tuple(d for d in axes if d < b)
    ci, pi, vals = a._compressed, a._plain, a._vals
    if batch_axes:
        batch_shift = tuple(by_axis[d] for d in batch_axes)
        ci, pi, vals = (xp.roll(comp, shift=batch_shift, axis=batch_axes) for comp in (ci, pi, vals))
    dense_axes = tuple(d for d in axes if d >= b + 2)
    if dense_axes:
        vals = xp.roll(vals, shift=tuple(by_axis[d] for d in dense_axes), axis=tuple(d - 1 + nblk for d in dense_axes))
    fix = [contiguous(a._backend, xp, comp) for comp in (ci, pi, vals)]
    return _compressed(a, fix[0], fix[1], fix[2], a.shape)


@register("roll", (COMPRESSED,), rewrite=True)
def _roll_compressed_through_coo(xp: Any, a: CompressedArray, shift: tuple[int, ...], axes: tuple[int, ...] | None) -> COOArray:
    """roll(compressed) -> COO: the element COO, rolled (flattened, with its dense dims regrouped); O(nnz log nnz)."""
    return roll_coo(xp, compressed_to_coo(xp, a), shift, axes)


# -- repeat ----------------------------------------------------------------------------------------


def _repeat_total(xp: Any, repeats: Any, size: int) -> int:
    """The new size of a dimension of ``size`` whose elements repeat ``repeats`` times (an int or an array)."""
    return repeats * size if isinstance(repeats, int) else int(xp.sum(repeats)) if size else 0


def repeat_coo(xp: Any, a: COOArray, repeats: Any, axis: int) -> COOArray:
    """``repeat`` of a COO array along ``axis``: along a sparse dimension every entry becomes one entry per
    repetition of its index (consecutive new indices), along a dense one the values repeat. O(result nnz)."""
    sd, n = a.sparse_dim(), a.shape[axis]
    total = _repeat_total(xp, repeats, n)
    shape = (*a.shape[:axis], total, *a.shape[axis + 1 :])
    if axis >= sd:
        vals = xp.repeat(a._vals, repeats, axis=1 + axis - sd)
        return COOArray(a._idx, vals, shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)
    dev = a.device
    row = xp.astype(a._idx[axis, :], xp.int64)
    # where each entry's index starts along the new dimension, and how many copies it makes: for one repeat
    # count, arithmetic on the entries (an array the size of the dimension would be O(n), not O(nnz))
    if isinstance(repeats, int):
        counts = xp.full((a.nnz,), repeats, dtype=xp.int64, device=dev)
        row_start = row * repeats
    else:
        counts = xp.take(repeats, row) if a.nnz else xp.zeros((0,), dtype=xp.int64, device=dev)
        row_start = xp.take(xp.cumulative_sum(repeats, include_initial=True), row)
    first = xp.cumulative_sum(counts, include_initial=True)
    nse = int(first[-1])
    entry = xp.repeat(_arange(xp, a.nnz, row), counts) if a.nnz else xp.zeros((0,), dtype=xp.int64, device=dev)
    offset = _arange(xp, nse, row) - xp.take(first, entry)
    idt = wide_enough(xp, a._idx.dtype, nse, *shape[:sd])
    idx = xp.take(xp.astype(a._idx, idt), entry, axis=1)
    moved = xp.astype(xp.take(row_start, entry) + offset, idt)
    idx = xp.concat([idx[:axis, :], moved[None, :], idx[axis + 1 :, :]], axis=0)
    vals = take_values(xp, a._vals, entry, axis=0)
    # the copies of an entry follow each other, so the order stays lexicographic when they differ last
    coalesced = a.is_coalesced() and axis == sd - 1
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


def repeat_flat_coo(xp: Any, a: COOArray, repeats: Any) -> COOArray:
    """``repeat`` of the flattened COO array (``axis=None``): a 1-D COO array."""
    return repeat_coo(xp, reshape_coo(xp, a, (prod(a.shape),), None), repeats, 0)


@register("repeat", (strided,))
def _repeat_strided(xp: Any, x: Any, repeats: Any, axis: int | None) -> Any:
    """repeat(strided) -> strided: the backend's function; O(size of result)."""
    return xp.repeat(x, repeats, axis=axis)


@register("repeat", (sparse_coo,))
def _repeat_coo(xp: Any, a: COOArray, repeats: Any, axis: int | None) -> COOArray:
    """repeat(COO) -> COO: entries repeated along a sparse dim (or the flattened array), values along a dense one; O(result nnz)."""
    return repeat_flat_coo(xp, a, repeats) if axis is None else repeat_coo(xp, a, repeats, axis)


def _supports_repeat_compressed(xp: Any, a: CompressedArray, repeats: Any, axis: int | None) -> str | None:
    b = a.batch_dim()
    if axis is None or not (a.layout.is_blocked and b <= axis < b + 2):
        return None
    block = a.blocksize[axis - b]
    total = _repeat_total(xp, repeats, a.shape[axis])
    if total % block == 0:
        return None
    return f"the repeated dimension {axis} would have size {total}, not a whole number of blocks of {block} of a {a.layout} array"


@register("repeat", (COMPRESSED,), supports=_supports_repeat_compressed)
def _repeat_compressed(xp: Any, a: CompressedArray, repeats: Any, axis: int | None) -> SparseArray:
    """repeat(compressed) -> compressed: components along batch/dense dims, element COO along sparse ones; COO for axis=None; O(nnz log nnz)."""
    if axis is None:
        return repeat_flat_coo(xp, compressed_to_coo(xp, a), repeats)
    b, nblk = a.batch_dim(), _n_block(a)
    if b <= axis < b + 2:
        e = repeat_coo(xp, compressed_to_coo(xp, a), repeats, axis)
        return compress_like(xp, e, a.layout, a.blocksize, a.index_dtype, "repeat")
    total = _repeat_total(xp, repeats, a.shape[axis])
    shape = (*a.shape[:axis], total, *a.shape[axis + 1 :])
    if axis < b:
        ci, pi, vals = (xp.repeat(comp, repeats, axis=axis) for comp in (a._compressed, a._plain, a._vals))
        return _compressed(a, ci, pi, vals, shape)
    vals = contiguous(a._backend, xp, xp.repeat(a._vals, repeats, axis=axis - 1 + nblk))
    return _compressed(a, a._compressed, a._plain, vals, shape)


@register("repeat", (COMPRESSED,), rewrite=True)
def _repeat_compressed_through_coo(xp: Any, a: CompressedArray, repeats: Any, axis: int | None) -> COOArray:
    """repeat(compressed) -> COO: the element COO, repeated; O(nnz log nnz + result nnz)."""
    return _repeat_coo(xp, compressed_to_coo(xp, a), repeats, axis)  # type: ignore[no-any-return]


# -- tile ------------------------------------------------------------------------------------------


def tile_coo(xp: Any, a: COOArray, reps: tuple[int, ...]) -> COOArray:
    """``tile`` of a COO array (``len(reps) == a.ndim``): the entries once per copy of the sparse
    dimensions, copy after copy, each shifted by the copy's offsets; the values tiled along dense ones.
    O(result nnz)."""
    sd, nnz = a.sparse_dim(), a.nnz
    shape = tuple(s * r for s, r in zip(a.shape, reps))
    copies = prod(reps[:sd])
    idt = wide_enough(xp, a._idx.dtype, nnz * copies, *shape[:sd])
    idx, vals = xp.astype(a._idx, idt), a._vals
    if copies != 1:
        grid = _unravel(xp, _arange(xp, copies, idx), tuple(reps[:sd]), xp.int64)
        offset = xp.stack([g * a.shape[d] for d, g in enumerate(grid)]) if sd else xp.zeros((0, copies), dtype=xp.int64, device=a.device)
        moved = xp.astype(xp.astype(idx, xp.int64)[:, None, :] + offset[:, :, None], idt)
        idx = xp.reshape(moved, (sd, copies * nnz))
        vals = xp.reshape(xp.broadcast_to(vals[None, ...], (copies, *vals.shape)), (copies * nnz, *vals.shape[1:]))
    if any(r != 1 for r in reps[sd:]):
        vals = xp.tile(vals, (1, *reps[sd:]))
    # the reshape of a broadcast of one entry can stay a zero-stride view
    vals = contiguous(a._backend, xp, vals)
    # copies along the first dimension follow each other in order; other copies interleave
    coalesced = a.is_coalesced() and all(r == 1 for r in reps[1:sd])
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


@register("tile", (strided,))
def _tile_strided(xp: Any, x: Any, reps: tuple[int, ...]) -> Any:
    """tile(strided) -> strided: the backend's function; O(size of result)."""
    return xp.tile(x, reps)


@register("tile", (sparse_coo,))
def _tile_coo(xp: Any, a: COOArray, reps: tuple[int, ...]) -> COOArray:
    """tile(COO) -> COO: shifted copies of the entries, values tiled along dense dims; O(result nnz)."""
    return tile_coo(xp, a, reps)


@register("tile", (COMPRESSED,))
def _tile_compressed(xp: Any, a: CompressedArray, reps: tuple[int, ...]) -> CompressedArray:
    """tile(compressed) -> compressed: components along batch/dense dims (O(result nnz)); element COO along sparse ones (O(nnz log nnz))."""
    b, nblk = a.batch_dim(), _n_block(a)
    if reps[b : b + 2] != (1, 1):
        return compress_like(xp, tile_coo(xp, compressed_to_coo(xp, a), reps), a.layout, a.blocksize, a.index_dtype, "tile")
    batch = tuple(reps[:b])
    ci = xp.tile(a._compressed, (*batch, 1))
    pi = xp.tile(a._plain, (*batch, 1))
    vals = xp.tile(a._vals, (*batch, 1, *(1,) * nblk, *reps[b + 2 :]))
    shape = tuple(s * r for s, r in zip(a.shape, reps))
    fix = [contiguous(a._backend, xp, comp) for comp in (ci, pi, vals)]
    return _compressed(a, fix[0], fix[1], fix[2], shape)
