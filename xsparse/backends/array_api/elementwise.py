"""Generic elementwise kernels (Array API only): unary and binary functions on strided and sparse arrays.

**Unary.** A function ``f`` is registered for ``strided`` (the backend's own function, or an Array API
expression for torch's extra names such as ``deg2rad``) and for the indexed sparse layouts, where the
kernel maps the stored values *through the strided kernel of the same operation* and maps the fill
value too. So ``cos`` of a sparse array stays sparse, with fill value ``cos(0) = 1``: nothing is
densified, and the unspecified elements still mean what they meant. Uncoalesced COO is coalesced first
unless ``f`` is linear (``sqrt(a + b) != sqrt(a) + sqrt(b)``).

**Binary.** ``f(x1, x2)`` follows the Array API's broadcasting and the backend's type promotion:

- with a Python scalar (or a 0-d strided array), the stored values and the fill value are mapped;
- sparse with strided gives strided (as in torch), except for the *annihilating* functions (``multiply``,
  ``logical_and``, ``bitwise_and``) of a sparse operand whose fill value is 0, whose result is 0 wherever
  that operand is: they keep the sparse operand's layout and structure (broadcast to the result shape);
- sparse with sparse, of any two layouts: both are broadcast as COO, the second is brought to the first
  one's split into sparse and dense dimensions, and the entries are merged; where one side has no entry
  it takes its fill value, and the result's fill value is ``f`` of the two fill values. The result has
  the first operand's layout. For the annihilating functions, an entry that only one side specifies and
  whose result equals the result's fill value is dropped, so a product stays as sparse as the sparser
  operand (an entry ``inf * 0 = nan`` is kept: fill values are honoured exactly, as IEEE 754 has it);
- COO + COO and COO - COO of one shape and fill value 0 concatenate the entries without coalescing, as
  torch does.

A compressed result with batch dimensions must hold equally many specified elements in every batch
(invariant 3.9); where the merged entries do not, the shorter batches are padded with explicit entries
holding the fill value (the first unspecified positions of the batch), which changes no element.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import array_api_compat

from ... import dispatch
from ...dispatch import register
from ...formats import INDEXED, COOArray, CompressedArray, SparseArray, sparse_coo, strided
from ...formats._ops import contiguous, lexsort_indices, prod
from ...formats._spec import Target
from .conversion import _linearize, _unravel, block_coo_to_compressed, coalesce_coo, coo_to_block_coo

__all__ = [
    "UNARY",
    "LINEAR_UNARY",
    "NATIVE_ONLY_UNARY",
    "BINARY",
    "ANNIHILATING",
    "python_scalar",
    "broadcast_shapes",
    "broadcast_coo",
    "merge_coo",
    "as_layout_of",
]

_INT32_MAX = 2**31 - 1


# -- unary functions -------------------------------------------------------------------------------


def _as_float(xp: Any, x: Any) -> Any:
    if xp.isdtype(x.dtype, ("real floating", "complex floating")):
        return x
    return xp.astype(x, xp.__array_namespace_info__().default_dtypes(device=x.device)["real floating"])


def _angle(xp: Any, x: Any) -> Any:
    if xp.isdtype(x.dtype, "complex floating"):
        return xp.atan2(xp.imag(x), xp.real(x))
    x = _as_float(xp, x)
    # torch's angle of a real number: pi below 0, else 0, and NaN stays NaN
    return xp.where(xp.isnan(x), x, xp.where(x < 0, xp.asarray(math.pi, dtype=x.dtype, device=x.device), xp.zeros_like(x)))


def _isposinf(xp: Any, x: Any) -> Any:
    if not xp.isdtype(x.dtype, "real floating"):
        return xp.zeros(x.shape, dtype=xp.bool, device=x.device)
    return xp.isinf(x) & (x > 0)


def _isneginf(xp: Any, x: Any) -> Any:
    if not xp.isdtype(x.dtype, "real floating"):
        return xp.zeros(x.shape, dtype=xp.bool, device=x.device)
    return xp.isinf(x) & (x < 0)


def _deg2rad(xp: Any, x: Any) -> Any:
    return _as_float(xp, x) * (math.pi / 180.0)


def _rad2deg(xp: Any, x: Any) -> Any:
    return _as_float(xp, x) * (180.0 / math.pi)


def _sign(xp: Any, x: Any) -> Any:
    if not xp.isdtype(x.dtype, "complex floating"):
        return xp.sign(x)
    # x / |x|, and 0 at 0: the divisor is 1 there, so that no 0 / 0 is ever computed
    magnitude = xp.abs(x)
    zero = magnitude == 0
    return xp.where(zero, xp.zeros_like(x), x / xp.astype(xp.where(zero, xp.ones_like(magnitude), magnitude), x.dtype))


def _standard(name: str) -> Callable[[Any, Any], Any]:
    def apply(xp: Any, x: Any) -> Any:
        return getattr(xp, name)(x)

    return apply


# name -> how the strided kernel computes it from ``xp``: the Array API standard's unary functions and
# torch's zero-preserving extras that have an Array API expression.
UNARY: dict[str, Callable[[Any, Any], Any]] = {
    name: _standard(name)
    for name in (
        "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "bitwise_invert", "ceil", "conj", "cos",
        "cosh", "exp", "expm1", "floor", "imag", "isfinite", "isinf", "isnan", "log", "log1p", "log2", "log10",
        "logical_not", "negative", "positive", "real", "reciprocal", "round", "signbit", "sin", "sinh",
        "square", "sqrt", "tan", "tanh", "trunc",
    )
}  # fmt: skip
UNARY.update(
    sign=_sign,
    angle=_angle,
    sgn=_sign,
    isposinf=_isposinf,
    isneginf=_isneginf,
    deg2rad=_deg2rad,
    rad2deg=_rad2deg,
    conj_physical=_standard("conj"),
)
# f(a + b) == f(a) + f(b): safe on uncoalesced data (up to rounding for deg2rad and rad2deg)
LINEAR_UNARY = frozenset({"negative", "positive", "conj", "conj_physical", "real", "imag", "deg2rad", "rad2deg"})
# no Array API expression: only backends with a native strided kernel compute these
NATIVE_ONLY_UNARY = ("erf", "erfinv")


def python_scalar(xp: Any, x: Any) -> Any:
    """The Python scalar of a 0-d array, of the kind its dtype mixes with."""
    if xp.isdtype(x.dtype, "bool"):
        return bool(x)
    if xp.isdtype(x.dtype, "integral"):
        return int(x)
    if xp.isdtype(x.dtype, "real floating"):
        return float(x)
    return complex(x)


def _fill_array(xp: Any, a: SparseArray) -> Any:
    """The fill value of ``a`` as a 0-d array of its dtype."""
    return xp.asarray(a.fill_value, dtype=a.dtype, device=a.device)


def _coalesced(xp: Any, a: COOArray) -> COOArray:
    """``a`` coalesced, by the backend's fastest kernel."""
    if a.is_coalesced():
        return a
    return cast(COOArray, dispatch.call("coalesce", (sparse_coo,), a._backend.name, xp, a))


def _strided_kernel(name: str, compute: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def kernel(xp: Any, x: Any) -> Any:
        return compute(xp, x)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_strided"
    kernel.__doc__ = f"{name}(strided) -> strided: the backend's elementwise function; O(numel)."
    return kernel


def _sparse_kernel(name: str) -> Callable[..., Any]:
    linear = name in LINEAR_UNARY

    def kernel(xp: Any, a: SparseArray) -> SparseArray:
        if not linear and isinstance(a, COOArray):
            a = _coalesced(xp, a)
        backend = a._backend.name
        # real and imag return strided views of the complex values, which the formats store contiguous
        values = contiguous(a._backend, xp, dispatch.call(name, (strided,), backend, xp, a._vals))
        fill = dispatch.call(name, (strided,), backend, xp, _fill_array(xp, a))
        return a._with_values(values, python_scalar(xp, fill))

    kernel.__name__ = kernel.__qualname__ = f"_{name}_indexed"
    kernel.__doc__ = f"{name}(sparse) -> sparse: maps the stored values and the fill value; O(nnz)."
    return kernel


def _native_only_message(name: str) -> str:
    return (
        f"the Array API standard has no {name}, so only backends with a native kernel compute it (numpy through "
        f"scipy.special.{name}, torch through torch.special.{name}); move the array with "
        "xsparse.to_backend(x, 'numpy') or xsparse.to_backend(x, 'torch')"
    )


def _native_only_strided(name: str) -> Callable[..., Any]:
    def supports(xp: Any, x: Any) -> str | None:
        # reached only where no native kernel of the backend took the call
        return _native_only_message(name)

    def kernel(xp: Any, x: Any) -> Any:
        raise AssertionError("unreachable: this kernel always declines")  # pragma: no cover

    kernel.__name__ = kernel.__qualname__ = f"_{name}_strided"
    kernel.__doc__ = f"{name}(strided): declines; the Array API has no {name} (native kernels compute it)."
    return register(name, (strided,), supports=supports)(kernel)


def _native_only_sparse(name: str) -> Callable[..., Any]:
    def supports(xp: Any, a: SparseArray) -> str | None:
        backend = a._backend.name
        native = any(k.backend == backend for k in dispatch.resolve(name, (strided,), backend))
        return None if native else _native_only_message(name)

    return register(name, (INDEXED,), supports=supports)(_sparse_kernel(name))


for _name, _compute in UNARY.items():
    register(_name, (strided,))(_strided_kernel(_name, _compute))
    register(_name, (INDEXED,))(_sparse_kernel(_name))
for _name in NATIVE_ONLY_UNARY:
    _native_only_strided(_name)
    _native_only_sparse(_name)


def _clip(xp: Any, x: Any, min: Any, max: Any) -> Any:
    return xp.clip(x, min=min, max=max)


@register("clip", (strided,))
def _clip_strided(xp: Any, x: Any, min: Any = None, max: Any = None) -> Any:
    """clip(strided, min, max) -> strided: the backend's clip with scalar bounds; O(numel)."""
    return _clip(xp, x, min, max)


@register("clip", (INDEXED,))
def _clip_indexed(xp: Any, a: SparseArray, min: Any = None, max: Any = None) -> SparseArray:
    """clip(sparse, min, max) -> sparse: clips the stored values and the fill value; O(nnz)."""
    if isinstance(a, COOArray):
        a = _coalesced(xp, a)
    values = _clip(xp, a._vals, min, max)
    return a._with_values(values, python_scalar(xp, _clip(xp, _fill_array(xp, a), min, max)))


# -- binary functions ------------------------------------------------------------------------------

BINARY = (
    "add", "atan2", "bitwise_and", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "copysign", "divide", "equal", "floor_divide", "greater", "greater_equal", "hypot", "less", "less_equal",
    "logaddexp", "logical_and", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "nextafter",
    "not_equal", "pow", "remainder", "subtract",
)  # fmt: skip
# f(0, y) == 0 for every y but, for multiply, the non-finite ones (0 * inf is NaN): where a sparse operand
# with fill value 0 leaves an element out, the result is 0, so a product keeps that operand's sparsity.
ANNIHILATING = frozenset({"multiply", "logical_and", "bitwise_and"})


def _binary_func(name: str) -> Callable[[Any, Any, Any], Any]:
    def apply(xp: Any, x: Any, y: Any) -> Any:
        return getattr(xp, name)(x, y)

    return apply


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The Array API broadcast of ``shapes``; a ValueError in xsparse's message shape when they do not broadcast."""
    ndim = max(len(s) for s in shapes)
    out = []
    for axis, dims in enumerate(zip(*((1,) * (ndim - len(s)) + tuple(s) for s in shapes))):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            listed = " and ".join(str(tuple(s)) for s in shapes)
            raise ValueError(
                f"{op}: the shapes {listed} do not broadcast (axis={axis - ndim}, sizes={sorted(sizes)}). Make the "
                "sizes of every axis equal, or 1 where an operand should be repeated."
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _index_dtype_for(xp: Any, index_dtype: Any, nse: int, shape: tuple[int, ...]) -> Any:
    """``index_dtype``, or int64 where int32 cannot address ``shape`` with ``nse`` entries (invariant 1.3)."""
    if index_dtype == xp.int32 and max([nse, *shape, 0]) > _INT32_MAX:
        return xp.int64
    return index_dtype


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
    idt = _index_dtype_for(xp, a._idx.dtype, a.nnz * max(grown, 1), shape[:sd])
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
        vals = contiguous(a._backend, xp, xp.broadcast_to(vals, (vals.shape[0], *shape[sd:])))
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


def _expand_dense(xp: Any, c: COOArray, k: int) -> COOArray:
    """``c`` with its first ``k`` dense dimensions made sparse: each entry becomes one entry per position of
    those dimensions (no fill value is materialised). O(nnz * their size)."""
    sd, n = c.sparse_dim(), c.nnz
    moved = tuple(c.shape[sd : sd + k])
    p = prod(moved)
    idt = _index_dtype_for(xp, c._idx.dtype, n * p, tuple(c.shape[: sd + k]))
    dev = c.device
    idx = xp.reshape(xp.broadcast_to(xp.astype(c._idx, idt)[:, :, None], (sd, n, p)), (sd, n * p))
    inner = _unravel(xp, xp.arange(p, dtype=xp.int64, device=dev), moved, idt)
    rows = [xp.reshape(xp.broadcast_to(r[None, :], (n, p)), (-1,)) for r in inner]
    indices = xp.concat([idx, xp.stack(rows)], axis=0) if k else idx
    values = xp.reshape(c._vals, (n * p, *c._vals.shape[1 + k :]))
    return COOArray(indices, values, c.shape, backend=c._backend, xp=xp, coalesced=c.is_coalesced(), fill_value=c.fill_value)


def _group_sparse(xp: Any, c: COOArray, k: int) -> COOArray:
    """``c`` with its last ``k`` sparse dimensions made dense: the entries that share the leading indices
    become one entry, whose positions no entry gave hold the fill value. O(groups * their size)."""
    c = _coalesced(xp, c)
    sd, n = c.sparse_dim(), c.nnz
    head = sd - k
    grouped = tuple(c.shape[head:sd])
    p = prod(grouped)
    dense = tuple(c.shape[sd:])
    dev = c.device
    if n == 0:
        values = xp.zeros((0, *grouped, *dense), dtype=c.dtype, device=dev)
        return COOArray(c._idx[:head, :], values, c.shape, backend=c._backend, xp=xp, coalesced=True, fill_value=c.fill_value)
    idx = c._idx
    first = xp.ones((1,), dtype=xp.bool, device=dev)
    if head:
        is_start = xp.concat([first, xp.any(idx[:head, 1:] != idx[:head, :-1], axis=0)])
    else:
        is_start = xp.concat([first, xp.zeros((n - 1,), dtype=xp.bool, device=dev)])
    ordinal = xp.cumulative_sum(xp.astype(is_start, xp.int64)) - 1
    starts = xp.nonzero(is_start)[0]
    groups = starts.shape[0]
    keys = ordinal * p + _linearize(xp, idx[head:, :], grouped)
    wanted = xp.arange(groups * p, dtype=xp.int64, device=dev)
    pos = xp.clip(xp.searchsorted(keys, wanted), 0, n - 1)
    found = xp.reshape(xp.take(keys, pos) == wanted, (-1, *((1,) * len(dense))))
    values = xp.where(found, xp.take(c._vals, pos, axis=0), _fill_array(xp, c))
    return COOArray(
        xp.take(idx[:head, :], starts, axis=1), xp.reshape(values, (groups, *grouped, *dense)), c.shape,
        backend=c._backend, xp=xp, coalesced=True, fill_value=c.fill_value,
    )  # fmt: skip


def _as_coo(xp: Any, a: SparseArray) -> COOArray:
    """``a`` as a COO array (batch and sparse dimensions sparse), by the backend's fastest conversion."""
    if isinstance(a, COOArray):
        return a
    from ..._conversion import to_sparse

    return cast(COOArray, to_sparse(a, layout=sparse_coo))


def _lexsort(xp: Any, idx: Any, shape: tuple[int, ...]) -> Any:
    """The stable permutation that sorts the int64 index columns ``idx`` lexicographically."""
    if idx.shape[0] and prod(shape) < 2**62:
        return xp.argsort(_linearize(xp, idx, shape), stable=True)
    return lexsort_indices(xp, idx)


def merge_coo(xp: Any, a: COOArray, b: COOArray) -> tuple[Any, Any, Any, Any, Any]:
    """Align two coalesced COO arrays of one shape and sparse_dim on the union of their entries.

    Returns ``(indices, va, vb, has_a, has_b)``: the sorted union's indices (in ``a``'s index dtype), each
    side's values there (its fill value where it has no entry; each in its own dtype), and where each
    side has an entry. O((nnz_a + nnz_b) log(nnz_a + nnz_b)).
    """
    na, nb = a.nnz, b.nnz
    dev = a.device
    sd = a.sparse_dim()
    idx = xp.concat([xp.astype(a._idx, xp.int64), xp.astype(b._idx, xp.int64)], axis=1)
    n = na + nb
    tail = (1,) * a.dense_dim()
    if n == 0:
        none = xp.zeros((0,), dtype=xp.bool, device=dev)
        return xp.astype(idx, a._idx.dtype), a._vals, b._vals, none, none
    # a's entries precede b's in the concatenation, and a stable sort keeps them first within a group
    perm = _lexsort(xp, idx, tuple(a.shape[:sd]))
    sidx = xp.take(idx, perm, axis=1)
    from_b = perm >= na
    first = xp.ones((1,), dtype=xp.bool, device=dev)
    if sd:
        differs = xp.any(sidx[:, 1:] != sidx[:, :-1], axis=0)
    else:
        differs = xp.zeros((n - 1,), dtype=xp.bool, device=dev)
    starts = xp.nonzero(xp.concat([first, differs]))[0]
    # a group holds one entry of a, one of b, or one of each (a's first): the pair is (start, start + 1)
    nxt = xp.clip(starts + 1, 0, n - 1)
    pair = (nxt != starts) & ~xp.take(xp.concat([differs, first]), starts)
    start_from_b = xp.take(from_b, starts)
    has_a = ~start_from_b
    has_b = start_from_b | pair
    pos_a = xp.where(has_a, xp.take(perm, starts), 0)
    pos_b = xp.where(has_b, xp.take(perm, xp.where(pair, nxt, starts)) - na, 0)
    va = _take_or_fill(xp, a, pos_a, has_a, tail)
    vb = _take_or_fill(xp, b, pos_b, has_b, tail)
    out_idx = xp.astype(xp.take(sidx, starts, axis=1), _index_dtype_for(xp, a._idx.dtype, starts.shape[0], a.shape[:sd]))
    return out_idx, va, vb, has_a, has_b


def _take_or_fill(xp: Any, a: COOArray, pos: Any, has: Any, tail: tuple[int, ...]) -> Any:
    if a.nnz == 0:
        return xp.broadcast_to(_fill_array(xp, a), (pos.shape[0], *a.shape[a.sparse_dim() :]))
    return xp.where(xp.reshape(has, (-1, *tail)), xp.take(a._vals, pos, axis=0), _fill_array(xp, a))


def _equals_fill(xp: Any, values: Any, fill: Any) -> Any:
    """Per entry, whether every element of ``values`` (nnz, *dense) equals ``fill`` (NaN equals NaN)."""
    same = values == fill
    if xp.isdtype(values.dtype, ("real floating", "complex floating")) and fill != fill:
        same = xp.isnan(values)
    if values.ndim > 1:
        same = xp.all(same, axis=tuple(range(1, values.ndim)))
    return same


def _combine(xp: Any, name: str, a: COOArray, b: COOArray) -> COOArray:
    """``name(a, b)`` of two coalesced COO arrays of one shape and sparse_dim, on the union of their entries."""
    f = _binary_func(name)
    fill = python_scalar(xp, f(xp, _fill_array(xp, a), _fill_array(xp, b)))
    idx, va, vb, has_a, has_b = merge_coo(xp, a, b)
    values = f(xp, va, vb)
    if name in ANNIHILATING and idx.shape[1]:
        keep = xp.nonzero((has_a & has_b) | ~_equals_fill(xp, values, fill))[0]
        if keep.shape[0] != idx.shape[1]:
            idx, values = xp.take(idx, keep, axis=1), xp.take(values, keep, axis=0)
    return COOArray(idx, values, a.shape, backend=a._backend, xp=xp, coalesced=True, fill_value=fill)


def _pad_batches(xp: Any, c: COOArray, nb_dims: int) -> COOArray:
    """Pad the batches of a coalesced (block) COO with entries holding the fill value, so that every batch
    holds as many entries as the fullest one (invariant 3.9); they go to each batch's first unspecified
    positions. O(nnz log nnz)."""
    batch = tuple(c.shape[:nb_dims])
    nb, n = prod(batch), c.nnz
    if nb_dims == 0 or nb <= 1:
        return c
    dev = c.device
    rows, cols = c.shape[nb_dims], c.shape[nb_dims + 1]
    cells = rows * cols
    idx = xp.astype(c._idx, xp.int64)
    b_lin = _linearize(xp, idx[:nb_dims, :], batch)
    bounds = xp.searchsorted(b_lin, xp.arange(nb + 1, dtype=xp.int64, device=dev))
    counts = bounds[1:] - bounds[:-1]
    most = int(xp.max(counts))
    need = most - counts
    if int(xp.sum(need)) == 0:
        return c
    # With the specified cells s_0 < s_1 < ... of a batch, the j-th unspecified cell is
    # j + #{i : s_i - i <= j}; offsetting each batch by b * (cells + 1) keeps the keys sorted.
    local = idx[nb_dims, :] * cols + idx[nb_dims + 1, :]
    rank = xp.arange(n, dtype=xp.int64, device=dev) - xp.take(bounds, b_lin)
    keys = b_lin * (cells + 1) + local - rank
    j = xp.arange(most, dtype=xp.int64, device=dev)[None, :]
    b = xp.arange(nb, dtype=xp.int64, device=dev)[:, None]
    below = xp.reshape(xp.searchsorted(keys, xp.reshape(b * (cells + 1) + j, (-1,)), side="right"), (nb, most))
    cell = j + below - bounds[:-1][:, None]
    chosen = xp.nonzero(xp.reshape(j < need[:, None], (-1,)))[0]
    cell = xp.take(xp.reshape(cell, (-1,)), chosen)
    owner = xp.take(xp.reshape(xp.broadcast_to(b, (nb, most)), (-1,)), chosen)
    idt = c._idx.dtype
    new_idx = xp.stack([*_unravel(xp, owner, batch, idt), xp.astype(cell // cols, idt), xp.astype(cell % cols, idt)])
    new_vals = xp.broadcast_to(_fill_array(xp, c), (chosen.shape[0], *c._vals.shape[1:]))
    padded = COOArray(
        xp.concat([c._idx, new_idx], axis=1), xp.concat([c._vals, new_vals], axis=0), c.shape,
        backend=c._backend, xp=xp, coalesced=False, fill_value=c.fill_value,
    )  # fmt: skip
    return coalesce_coo(xp, padded)


def as_layout_of(xp: Any, c: COOArray, like: SparseArray) -> SparseArray:
    """The COO array ``c`` (whose sparse and dense dimensions are those of ``like``'s COO form, possibly with
    more leading ones) in ``like``'s layout, blocksize, dense_dim and index dtype."""
    if isinstance(like, COOArray):
        return c
    assert isinstance(like, CompressedArray)
    nb_dims = c.sparse_dim() - 2
    blocksize = like.blocksize
    if nb_dims == 0:
        from ..._conversion import to_sparse

        blocks = blocksize if like.layout.is_blocked else None
        return to_sparse(c, layout=like.layout, blocksize=blocks, index_dtype=like.index_dtype)
    target = Target(like.layout, like._backend, xp, tuple(c.shape), 2, like.dense_dim(), blocksize, like.index_dtype, c.fill_value)
    block = coo_to_block_coo(xp, c, nb_dims, blocksize) if like.layout.is_blocked else _coalesced(xp, c)
    return block_coo_to_compressed(xp, _pad_batches(xp, block, nb_dims), target)


def _binary_strided_kernel(name: str, order: str) -> Callable[..., Any]:
    f = _binary_func(name)

    def kernel(xp: Any, x: Any, y: Any) -> Any:
        return f(xp, x, y)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_{order}"
    kernel.__doc__ = f"{name}({order.replace('_', ', ')}) -> strided: the backend's function; O(numel)."
    return kernel


def _linear_with(xp: Any, name: str, sparse_first: bool, a: SparseArray, s: Any, fill: Any) -> bool:
    """Whether ``name`` with the scalar ``s`` may map uncoalesced values: ``f(p + q) == f(p) + f(q)``.

    True for products with a finite scalar and for division of floating values by a finite non-zero
    one, when the result keeps ``a``'s dtype (integer sums wrap around, so a cast would not commute).
    """
    if name not in ("multiply", "divide") or (name == "divide" and not sparse_first):
        return False
    if getattr(s, "ndim", 0) or fill.dtype != a.dtype:
        return False
    value = complex(s) if not isinstance(s, bool) else complex(int(s))
    finite = math.isfinite(value.real) and math.isfinite(value.imag)
    if name == "divide":
        return finite and value != 0 and xp.isdtype(a.dtype, ("real floating", "complex floating"))
    return finite


def _binary_scalar_kernel(name: str, sparse_first: bool) -> Callable[..., Any]:
    f = _binary_func(name)

    def kernel(xp: Any, x: Any, y: Any) -> Any:
        a, s = (x, y) if sparse_first else (y, x)
        fill = _fill_array(xp, a)
        new_fill = f(xp, fill, s) if sparse_first else f(xp, s, fill)
        if isinstance(a, COOArray) and not _linear_with(xp, name, sparse_first, a, s, new_fill):
            a = _coalesced(xp, a)
        values = f(xp, a._vals, s) if sparse_first else f(xp, s, a._vals)
        return a._with_values(values, python_scalar(xp, new_fill))

    order = "indexed_scalar" if sparse_first else "scalar_indexed"
    kernel.__name__ = kernel.__qualname__ = f"_{name}_{order}"
    kernel.__doc__ = f"{name}({order.replace('_', ', ')}) -> sparse: maps the stored values and the fill value; O(nnz)."
    return kernel


def _gather(xp: Any, d: Any, idx: Any, shape: tuple[int, ...], sd: int) -> Any:
    """The elements (or dense sub-arrays) of ``d``, broadcast to ``shape``, at the sparse positions ``idx``
    (``(sd, n)``): shape ``(n, *shape[sd:])``. Reads ``d`` without materialising its broadcast."""
    d = xp.reshape(d, (1,) * (len(shape) - d.ndim) + tuple(d.shape))
    n = idx.shape[1]
    own = tuple(d.shape[:sd])
    key = xp.zeros((n,), dtype=xp.int64, device=array_api_compat.device(idx))
    for k, size in enumerate(own):
        if size > 1:
            key = key * size + xp.astype(idx[k, :], xp.int64)
    flat = xp.reshape(d, (prod(own), *d.shape[sd:]))
    return xp.broadcast_to(xp.take(flat, key, axis=0), (n, *shape[sd:]))


def _nonfinite_entries(xp: Any, d: Any, shape: tuple[int, ...], sd: int, like: COOArray) -> COOArray | None:
    """The positions (over the first ``sd`` dimensions of ``shape``) where the broadcast of ``d`` holds a
    non-finite element, as a COO array of zeros in ``like``'s dtype; None when there is none."""
    if not xp.isdtype(d.dtype, ("real floating", "complex floating")):
        return None
    # a finite sum means finite elements (inf and NaN propagate): one read of d in the common case
    if bool(xp.isfinite(xp.sum(d))):
        return None
    bad = ~xp.isfinite(d)
    if not bool(xp.any(bad)):
        return None
    full = xp.broadcast_to(xp.reshape(bad, (1,) * (len(shape) - d.ndim) + tuple(d.shape)), shape)
    if len(shape) > sd:
        full = xp.any(full, axis=tuple(range(sd, len(shape))))
    idt = like._idx.dtype
    if sd:
        indices = xp.stack([xp.astype(w, idt) for w in xp.nonzero(full)])
    else:
        indices = xp.zeros((0, 1), dtype=idt, device=like.device)
    values = xp.zeros((indices.shape[1], *shape[sd:]), dtype=like.dtype, device=like.device)
    return COOArray(indices, values, shape, backend=like._backend, xp=xp, coalesced=True, fill_value=like.fill_value)


def _annihilated(xp: Any, name: str, a: SparseArray, d: Any, sparse_first: bool) -> SparseArray:
    """``name(a, d)`` for an annihilating ``name`` and ``a`` with fill value 0: ``a``'s structure broadcast."""
    f = _binary_func(name)
    shape = broadcast_shapes(name, tuple(a.shape), tuple(d.shape))
    c = broadcast_coo(xp, _coalesced(xp, _as_coo(xp, a)), shape)
    sd = c.sparse_dim()
    zero = xp.zeros((), dtype=d.dtype, device=a.device)
    fill = python_scalar(xp, f(xp, _fill_array(xp, a), zero) if sparse_first else f(xp, zero, _fill_array(xp, a)))
    idx, vals = c._idx, c._vals
    # 0 * inf and 0 * nan are NaN: where d holds them, an element a leaves out is not the fill value
    extra = _nonfinite_entries(xp, d, shape, sd, c) if name == "multiply" else None
    if extra is not None:
        idx, vals, _, _, _ = merge_coo(xp, _coalesced(xp, c), extra)
    other = _gather(xp, d, idx, shape, sd)
    values = f(xp, vals, other) if sparse_first else f(xp, other, vals)
    coalesced = c.is_coalesced() or extra is not None
    out = COOArray(idx, values, shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=fill)
    return as_layout_of(xp, out, a)


def _binary_mixed_kernel(name: str, sparse_first: bool) -> Callable[..., Any]:
    f = _binary_func(name)
    scalar_kernel = _binary_scalar_kernel(name, sparse_first)

    def kernel(xp: Any, x: Any, y: Any) -> Any:
        a, d = (x, y) if sparse_first else (y, x)
        if d.ndim == 0:
            # a 0-d array acts as a scalar (with an array's dtype in the type promotion)
            return scalar_kernel(xp, x, y)
        if name in ANNIHILATING and a.fill_value == 0:
            return _annihilated(xp, name, a, d, sparse_first)
        from ..._conversion import to_dense

        broadcast_shapes(name, tuple(a.shape), tuple(d.shape))
        dense = to_dense(a)
        return f(xp, dense, d) if sparse_first else f(xp, d, dense)

    order = "indexed_strided" if sparse_first else "strided_indexed"
    kernel.__name__ = kernel.__qualname__ = f"_{name}_{order}"
    kernel.__doc__ = (
        f"{name}({order.replace('_', ', ')}): sparse where the product keeps the sparse operand's zeros "
        "(O(nnz * broadcast)), else strided as in torch (O(numel))."
    )
    return kernel


def _binary_sparse_kernel(name: str) -> Callable[..., Any]:
    def kernel(xp: Any, x: SparseArray, y: SparseArray) -> SparseArray:
        shape = broadcast_shapes(name, tuple(x.shape), tuple(y.shape))
        a = broadcast_coo(xp, _as_coo(xp, x), shape)
        b = broadcast_coo(xp, _as_coo(xp, y), shape)
        # bring b to a's split into sparse and dense dimensions: the result has a's (and x's) structure
        if b.sparse_dim() > a.sparse_dim():
            b = _group_sparse(xp, b, b.sparse_dim() - a.sparse_dim())
        elif b.sparse_dim() < a.sparse_dim():
            b = _expand_dense(xp, b, a.sparse_dim() - b.sparse_dim())
        out = _combine(xp, name, _coalesced(xp, a), _coalesced(xp, b))
        return as_layout_of(xp, out, x)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_indexed_indexed"
    kernel.__doc__ = (
        f"{name}(sparse, sparse) -> the first one's layout: merge of the broadcast entries (products drop those "
        "equal to the fill value that one side lacks); O(nnz log nnz)."
    )
    return kernel


def _supports_concat(xp: Any, x: COOArray, y: COOArray) -> str | None:
    if tuple(x.shape) != tuple(y.shape):
        return "concatenation needs operands of one shape (broadcasting merges the entries instead)"
    if x.sparse_dim() != y.sparse_dim():
        return "concatenation needs operands with the same sparse_dim"
    if x.fill_value != 0 or y.fill_value != 0:
        return "concatenation needs fill value 0 on both sides (duplicates add up, fill values do not)"
    return None


def _concat_kernel(name: str) -> Callable[..., Any]:
    def kernel(xp: Any, x: COOArray, y: COOArray) -> COOArray:
        dtype = xp.result_type(x.dtype, y.dtype)
        yv = xp.astype(y._vals, dtype)
        values = xp.concat([xp.astype(x._vals, dtype), yv if name == "add" else -yv], axis=0)
        nse = x.nnz + y.nnz
        idt = _index_dtype_for(xp, x._idx.dtype, nse, tuple(x.shape[: x.sparse_dim()]))
        indices = xp.concat([xp.astype(x._idx, idt), xp.astype(y._idx, idt)], axis=1)
        fill = python_scalar(xp, xp.zeros((), dtype=dtype, device=x.device))
        return COOArray(indices, values, x.shape, backend=x._backend, xp=xp, coalesced=False, fill_value=fill)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_coo_coo"
    kernel.__doc__ = f"{name}(COO, COO) -> COO (uncoalesced): concatenates the entries, as torch does; O(nnz)."
    return kernel


for _name in BINARY:
    register(_name, (strided, strided))(_binary_strided_kernel(_name, "strided_strided"))
    register(_name, (strided, "scalar"))(_binary_strided_kernel(_name, "strided_scalar"))
    register(_name, ("scalar", strided))(_binary_strided_kernel(_name, "scalar_strided"))
    register(_name, (INDEXED, "scalar"))(_binary_scalar_kernel(_name, True))
    register(_name, ("scalar", INDEXED))(_binary_scalar_kernel(_name, False))
    register(_name, (INDEXED, strided))(_binary_mixed_kernel(_name, True))
    register(_name, (strided, INDEXED))(_binary_mixed_kernel(_name, False))
    register(_name, (INDEXED, INDEXED))(_binary_sparse_kernel(_name))
for _name in ("add", "subtract"):
    register(_name, (sparse_coo, sparse_coo), supports=_supports_concat)(_concat_kernel(_name))
