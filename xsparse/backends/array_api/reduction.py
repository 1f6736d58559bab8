"""Generic reduction kernels (Array API only): sums, products, extrema, means, variances, arg-extrema,
counts, cumulative sums and products, and softmax over any axes of strided, COO and compressed arrays.

Every unspecified element counts as the fill value. Where the reduced axes are dense dimensions only,
each specified element reduces its own dense sub-array and the result keeps the input's structure
(indices shared); the fill value is reduced too (a sum over ``n`` dense positions makes it ``n * fill``).
Where they include sparse dimensions, the entries are *grouped* by their kept sparse indices: a stable
lexicographic sort, then a segmented scan (Hillis-Steele doubling, ``ceil(log2(longest group))``
data-parallel passes; the standard has no scatter), then each group is combined with the fill value
once per unspecified element it covers (``n_reduced - count`` of them). The result is a coalesced COO
array over the kept sparse dimensions, or the backend's strided array once every sparse dimension is
reduced (torch.sparse.sum's rule). A compressed array is reduced through its element COO (batch
dimensions become sparse dimensions); where every batch dimension is reduced and both sparse
dimensions survive, the result is compressed back to the input's layout.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import array_api_compat
import numpy as np

from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, SparseArray, sparse_coo, strided
from ...formats._ops import lexsort_indices
from ...formats._spec import Target
from .conversion import (
    _convert_compressed_strided,
    _linearize,
    coalesce_coo,
    compressed_to_block_coo,
    compressed_to_coo,
    coo_to_compressed,
    coo_to_dense,
    fill_array,
    is_plus_zero,
    scalar_array,
    through_ordered,
)
from .elementwise import broadcast_shapes, python_scalar

__all__ = [
    "ReduceSpec",
    "Monoid",
    "MONOIDS",
    "result_kind",
    "reduced_shape",
    "fill_array",
    "fill_of",
    "is_neutral",
    "with_fill",
    "assemble",
    "kept_cumulative_fill",
    "mean_of_sum",
    "wide_groups_reason",
    "monoid_coo",
    "Grouping",
    "quietly",
    "as_array",
]


@dataclass(frozen=True)
class ReduceSpec:
    """What a reduction kernel is asked for, resolved by the public layer before dispatch.

    Attributes
    ----------
    axes
        The reduced axes, non-negative and sorted (every axis for ``axis=None``); for ``argmax``,
        ``argmin``, ``cumulative_sum``, ``cumulative_prod``, ``softmax`` and ``log_softmax`` one axis, except that
        ``argmax``/``argmin`` with ``axis=None`` get every axis (a flat index).
    keepdims
        Whether reduced axes stay as size-1 dimensions.
    dtype
        The backend dtype of the result (of its values, for a sparse result).
    correction
        The degrees of freedom subtracted from the element count by ``std`` and ``var``.
    include_initial
        Whether ``cumulative_sum`` (``cumulative_prod``) starts with a zero (a one).
    layout
        The layout the caller will convert the result to (its ``layout=`` argument), or None. A kernel
        may produce that layout directly where it is cheaper; the caller converts whatever comes back.
    """

    axes: tuple[int, ...]
    keepdims: bool
    dtype: Any
    correction: float = 0.0
    include_initial: bool = False
    layout: Any = None


# -- shapes and result kinds -------------------------------------------------------------------------


def result_kind(ndim: int, indexed_dim: int, axes: tuple[int, ...]) -> str:
    """``"structure"``, ``"sparse"`` or ``"strided"``: what reducing ``axes`` of a sparse array gives.

    ``indexed_dim`` counts the leading dimensions that indices address (COO's sparse dimensions; a
    compressed array's batch and sparse dimensions). Reducing dense dimensions only keeps the
    structure; reducing every indexed dimension (or every dimension) gives a strided array; anything
    between gives a COO array over the indexed dimensions that survive.
    """
    reduced_indexed = [d for d in axes if d < indexed_dim]
    if len(axes) == ndim or (indexed_dim and len(reduced_indexed) == indexed_dim):
        return "strided"
    return "sparse" if reduced_indexed else "structure"


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...] | list[int], keepdims: bool) -> tuple[int, ...]:
    """``shape`` with ``axes`` removed, or set to 1 with ``keepdims``."""
    return tuple(1 if d in axes else s for d, s in enumerate(shape) if keepdims or d not in axes)


def _squeeze(xp: Any, v: Any, axes: tuple[int, ...]) -> Any:
    if not axes:
        return v
    return xp.reshape(v, tuple(s for i, s in enumerate(v.shape) if i not in axes))


def _size(x: Any) -> int:
    return math.prod(x.shape)


def _device(x: Any) -> Any:
    return array_api_compat.device(x)


def _truthy(xp: Any, v: Any) -> Any:
    return v if xp.isdtype(v.dtype, "bool") else v != 0


_FAMILIES = (("strided", strided), ("coo", sparse_coo), ("compressed", COMPRESSED))


def _register_family(name: str, *kernels: tuple[Callable[..., Any], str]) -> None:
    """Name (``_<op>_<layouts>``), document and register the ``(kernel, docstring)`` pairs that a factory
    built for ``name``: its strided, COO and compressed kernels, in that order."""
    for (func, doc), (suffix, family) in zip(kernels, _FAMILIES, strict=True):
        func.__name__ = func.__qualname__ = f"_{name}_{suffix}"
        func.__doc__ = doc
        register(name, (family,))(func)


# -- monoids: the reductions that combine groups and fill values alike ---------------------------------


def _astype(xp: Any, v: Any, dtype: Any) -> Any:
    return v if v.dtype == dtype else xp.astype(v, dtype)


@dataclass(frozen=True)
class Monoid:
    """A reduction that can be computed in pieces: the stored values of each group, then the fill value.

    ``premap`` turns values into what is reduced (cast to the result dtype, or truth values);
    ``reduce`` reduces along axes keeping them; ``combine`` merges two partial results; ``power`` is the
    reduction of ``n >= 1`` copies of the (premapped) fill value; ``identity`` that of none (for ``max``
    and ``min``, which have none, ``has_identity`` is False and the fill value stands in where no
    element is reduced into any result). ``linear`` reductions may run on the duplicates of an
    uncoalesced COO array as they are, when the fill is 0.
    """

    name: str
    premap: Callable[[Any, Any, Any], Any]
    reduce: Callable[[Any, Any, tuple[int, ...]], Any]
    combine: Callable[[Any, Any, Any], Any]
    power: Callable[[Any, Any, Any], Any]
    identity: Callable[[Any, Any], Any]
    linear: bool = False
    has_identity: bool = True

    @property
    def idempotent(self) -> bool:
        """Whether any number of copies of a value reduce to that value (``max``, ``min``, ``any``, ``all``)."""
        return self.power is _same


def _cast_premap(xp: Any, v: Any, dtype: Any) -> Any:
    return _astype(xp, v, dtype)


def _truth_premap(xp: Any, v: Any, dtype: Any) -> Any:
    return _truthy(xp, v)


def _count_premap(xp: Any, v: Any, dtype: Any) -> Any:
    return xp.astype(_truthy(xp, v), dtype)


def _scaled(xp: Any, f: Any, n: Any) -> Any:
    if xp.isdtype(f.dtype, "complex floating"):
        return _added_up(xp, f, n)
    return f * xp.astype(n, f.dtype)


def _added_up(xp: Any, f: Any, n: Any) -> Any:
    """``n`` copies of complex ``f`` added up (``n >= 1``, an int64 array broadcasting with ``f``), as the
    dense sum adds them: by doubling, O(log n) additions. A complex product by ``n + 0j`` would mix the
    parts (``(inf - 1.5j) * 4`` is ``inf + nanj``; ``(-0 - 1j) * 2`` has a ``+0`` real part). Each addition
    is :func:`_plus`."""
    shape = broadcast_shapes("sum", tuple(f.shape), tuple(n.shape))
    p, k = xp.broadcast_to(f, shape), xp.broadcast_to(n, shape)
    if not math.prod(shape):
        return p
    total, have = p, k < 0  # nothing added yet
    for _ in range(int(xp.max(k)).bit_length()):
        bit = (k % 2) == 1
        total = xp.where(bit, xp.where(have, _plus(xp, total, p), p), total)
        have = have | bit
        p, k = _plus(xp, p, p), k // 2
    return total


def _powered(xp: Any, f: Any, n: Any) -> Any:
    if xp.isdtype(f.dtype, ("integral", "complex floating")):
        return _multiplied_up(xp, f, n)
    return xp.pow(f, xp.astype(n, f.dtype))


def _multiplied_up(xp: Any, f: Any, n: Any, onto: Any = None) -> Any:
    """``n`` copies of the integer or complex ``f`` multiplied (``n >= 1``, an int64 array broadcasting with
    ``f``) onto ``onto``, or alone, as the dense product multiplies them: one factor after another, by
    squaring, O(log n) products. A backend's ``pow`` may compute otherwise: JAX's integer ``pow`` with an
    array exponent reads the exponent modulo the bit width (``2 ** 64`` is 1 in int64, where the product of
    64 twos wraps around to 0), and its complex ``pow`` computes ``exp(n * log(f))``, which loses the NaN of
    a product at an infinity (``(inf + 0j) ** 5`` is ``inf + 0j``, the dense product of five copies
    ``nan + nanj``). Alone, the copies are multiplied onto 1, as NumPy's and torch's ``prod`` start
    (``1 * (inf + 0j)`` is ``inf + nanj``; JAX's product of one element is the element)."""
    shape = broadcast_shapes("prod", *(tuple(v.shape) for v in (f, n) + (() if onto is None else (onto,))))
    p, k = xp.broadcast_to(f, shape), xp.broadcast_to(n, shape)
    total = xp.ones_like(p) if onto is None else xp.broadcast_to(onto, shape)
    if not math.prod(shape):
        return total

    def compute() -> Any:
        nonlocal p, k, total
        for _ in range(int(xp.max(k)).bit_length()):
            total = xp.where((k % 2) == 1, total * p, total)
            p, k = p * p, k // 2
        return total

    return quietly(xp, compute)


def _add_values(xp: Any, a: Any, b: Any) -> Any:
    if xp.isdtype(a.dtype, "complex floating"):
        return _plus(xp, a, b)
    return xp.add(a, b)


def _plus(xp: Any, a: Any, b: Any) -> Any:
    """``a + b`` as a sum of two: torch's complex ``+`` mixes the parts at an infinity (``(1 + 1j) +
    (inf - 3j)`` is ``inf + nanj``), its ``sum`` adds each part as the dense sum does."""
    return xp.sum(xp.stack(xp.broadcast_arrays(a, b)), axis=0)


def _same(xp: Any, f: Any, n: Any) -> Any:
    return f


def as_array(xp: Any, r: Any) -> Any:
    """``r``, a backend's result, as an array: NumPy gives scalars (``np.generic``) for 0-d results, made
    0-d arrays; an array is returned as it is (torch's ``asarray`` of a tensor that requires grad warns)."""
    return scalar_array(xp, r) if isinstance(r, (np.generic, int, float, complex)) else r


def quietly(xp: Any, compute: Callable[[], Any]) -> Any:
    """``compute()``, under ``numpy.errstate(all="ignore")`` on NumPy's namespace: a product that overflows
    is inf, silently, as the NumPy backend's own kernels give it ("No floating-point warnings on NumPy"
    in docs/decisions.md); array_api_strict's warnings come through, as documented there."""
    if not array_api_compat.is_numpy_namespace(xp):
        return compute()
    with np.errstate(all="ignore"):
        return compute()


def _same_fill(xp: Any, f: Any) -> Any:
    return f


def _zero(xp: Any, f: Any) -> Any:
    return xp.zeros_like(f)


def _one(xp: Any, f: Any) -> Any:
    return xp.ones_like(f)


def _false(xp: Any, f: Any) -> Any:
    return xp.zeros(f.shape, dtype=xp.bool, device=_device(f))


def _true(xp: Any, f: Any) -> Any:
    return xp.ones(f.shape, dtype=xp.bool, device=_device(f))


MONOIDS: dict[str, Monoid] = {
    "sum": Monoid(
        "sum", _cast_premap, lambda xp, v, ax: xp.sum(v, axis=ax, keepdims=True, dtype=v.dtype), _add_values,
        _scaled, _zero, linear=True,
    ),
    "prod": Monoid(
        "prod", _cast_premap, lambda xp, v, ax: quietly(xp, lambda: xp.prod(v, axis=ax, keepdims=True, dtype=v.dtype)),
        lambda xp, a, b: quietly(xp, lambda: xp.multiply(a, b)), _powered, _one,
    ),
    "max": Monoid(
        "max", _cast_premap, lambda xp, v, ax: xp.max(v, axis=ax, keepdims=True), lambda xp, a, b: xp.maximum(a, b),
        _same, _same_fill, has_identity=False,
    ),
    "min": Monoid(
        "min", _cast_premap, lambda xp, v, ax: xp.min(v, axis=ax, keepdims=True), lambda xp, a, b: xp.minimum(a, b),
        _same, _same_fill, has_identity=False,
    ),
    "any": Monoid(
        "any", _truth_premap, lambda xp, v, ax: xp.any(v, axis=ax, keepdims=True), lambda xp, a, b: xp.logical_or(a, b),
        _same, _false,
    ),
    "all": Monoid(
        "all", _truth_premap, lambda xp, v, ax: xp.all(v, axis=ax, keepdims=True), lambda xp, a, b: xp.logical_and(a, b),
        _same, _true,
    ),
    "count_nonzero": Monoid(
        "count_nonzero", _count_premap, lambda xp, v, ax: xp.sum(v, axis=ax, keepdims=True, dtype=v.dtype), _add_values,
        _scaled, _zero,
    ),
}  # fmt: skip
SUM = MONOIDS["sum"]


def local_reduction(xp: Any, monoid: Monoid, v: Any, axes: tuple[int, ...]) -> Any:
    """``v`` reduced along ``axes`` with the dimensions kept (an empty ``v`` gives the identity)."""
    if not axes:
        return v
    if _size(v) == 0:
        ident = monoid.identity(xp, xp.zeros((), dtype=v.dtype, device=_device(v)))
        return _full(xp, reduced_shape(tuple(v.shape), axes, True), ident)
    return monoid.reduce(xp, v, axes)


def _full(xp: Any, shape: tuple[int, ...], value: Any) -> Any:
    """An array of ``shape`` filled with the 0-d array ``value`` (its dtype and device)."""
    return xp.full(shape, python_scalar(xp, value), dtype=value.dtype, device=_device(value))


def fill_of(xp: Any, monoid: Monoid, f: Any, n: int) -> Any:
    """The reduction of ``n`` copies of the premapped fill value ``f`` (a 0-d array)."""
    if n == 0:
        return monoid.identity(xp, f)
    return xp.reshape(monoid.power(xp, f, xp.asarray(n, dtype=xp.int64, device=_device(f))), ())


def is_neutral(xp: Any, monoid: Monoid, f: Any) -> bool:
    """Whether the premapped fill value ``f`` changes no reduction (0 for a sum, 1 for a product)."""
    return monoid.has_identity and bool(monoid.identity(xp, f) == f)


def with_fill(xp: Any, monoid: Monoid, g: Any, f: Any, unspecified: Any) -> Any:
    """Combine each group's reduction ``g`` (groups along axis 0) with its ``unspecified`` fill values."""
    n = xp.reshape(unspecified, (-1, *(1,) * (g.ndim - 1)))
    has = n > 0
    # a count of 1 where there is none keeps ``power`` free of 0 * inf and 0 ** 0 (masked out below)
    safe = xp.where(has, n, xp.ones_like(n))
    p = monoid.power(xp, f, safe)
    if monoid.name == "prod" and xp.isdtype(g.dtype, ("real floating", "complex floating")):
        # inf * 0 is NaN; multiplied as NaN * 0, which NumPy does not warn about. xsparse.prod replaces
        # such a NaN with the exact product where the inf was an overflow of finite values
        g = xp.where(has & xp.isinf(g) & (p == 0), xp.full_like(g, float("nan")), g)
    if monoid.name == "prod" and xp.isdtype(g.dtype, "complex floating"):
        # the dense product goes on from the group's product of stored values, one factor at a time
        return xp.where(has, _multiplied_up(xp, f, safe, onto=g), g)
    return xp.where(has, monoid.combine(xp, g, p), g)


# -- grouping entries by their kept indices ------------------------------------------------------------


@dataclass(frozen=True)
class _Groups:
    perm: Any  # (nnz,) the order that sorts the entries by their kept index rows
    gid: Any  # (nnz,) int64 group of each entry, in sorted order
    starts: Any  # (ngroups,) position of each group's first entry, in sorted order
    counts: Any  # (ngroups,) int64 entries per group
    keys: Any  # (len(kept), ngroups) the kept index rows of each group

    @property
    def ngroups(self) -> int:
        return int(self.starts.shape[0])


def _group(xp: Any, idx: Any, kept: list[int], coalesced: bool, then: list[int] | None = None) -> _Groups:
    """Group the columns of ``idx`` by the rows ``kept``, sorted within a group by the rows ``then``."""
    n = idx.shape[1]
    dev = _device(idx)
    order = kept + (then or [])
    if coalesced and order == list(range(len(order))):
        # sorting coalesced entries by a prefix of their index rows leaves them where they are
        perm = xp.arange(n, dtype=xp.int64, device=dev)
    else:
        perm = lexsort_indices(xp, xp.stack([idx[d, :] for d in order])) if order and n else xp.arange(n, dtype=xp.int64, device=dev)
    keyrows = xp.take(xp.stack([idx[d, :] for d in kept]), perm, axis=1) if kept else xp.zeros((0, n), dtype=idx.dtype, device=dev)
    if n == 0:
        is_start = xp.zeros((0,), dtype=xp.bool, device=dev)
    else:
        differs = xp.any(keyrows[:, 1:] != keyrows[:, :-1], axis=0) if kept else xp.zeros((n - 1,), dtype=xp.bool, device=dev)
        is_start = xp.concat([xp.ones((1,), dtype=xp.bool, device=dev), differs])
    gid = xp.cumulative_sum(xp.astype(is_start, xp.int64)) - 1 if n else xp.zeros((0,), dtype=xp.int64, device=dev)
    starts = xp.astype(xp.nonzero(is_start)[0], xp.int64)
    ends = xp.concat([starts, xp.asarray([n], dtype=xp.int64, device=dev)])[1:]
    return _Groups(perm, gid, starts, ends - starts, xp.take(keyrows, starts, axis=1))


def _segment_scan(xp: Any, gid: Any, arrays: tuple[Any, ...], combine: Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, ...]], longest: int) -> tuple[Any, ...]:
    """Inclusive scan of ``arrays`` (entries along axis 0) within runs of equal ``gid``.

    ``combine(earlier, later)`` merges two partial results; after the scan each run's last entry
    holds the reduction of the whole run.
    """
    n = gid.shape[0]
    step = 1
    while step < longest:
        same = gid[step:] == gid[:-step]
        merged = combine(tuple(a[:-step, ...] for a in arrays), tuple(a[step:, ...] for a in arrays))
        arrays = tuple(
            xp.concat([a[:step, ...], xp.where(xp.reshape(same, (n - step, *(1,) * (a.ndim - 1))), m, a[step:, ...])], axis=0)
            for a, m in zip(arrays, merged)
        )
        step *= 2
    return arrays


def _segment_reduce(xp: Any, grp: _Groups, arrays: tuple[Any, ...], combine: Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, ...]]) -> tuple[Any, ...]:
    """Each group's reduction of ``arrays`` (entries in sorted order along axis 0)."""
    if grp.ngroups == 0:
        return arrays
    longest = int(xp.max(grp.counts))
    scanned = _segment_scan(xp, grp.gid, arrays, combine, longest)
    last = grp.starts + grp.counts - 1
    return tuple(xp.take(a, last, axis=0) for a in scanned)


def _monoid_combine(xp: Any, monoid: Monoid) -> Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, ...]]:
    def combine(left: tuple[Any, ...], right: tuple[Any, ...]) -> tuple[Any, ...]:
        return (monoid.combine(xp, left[0], right[0]),)

    return combine


def _add(xp: Any) -> Callable[[tuple[Any, ...], tuple[Any, ...]], tuple[Any, ...]]:
    return _monoid_combine(xp, SUM)


def assemble(
    xp: Any,
    backend: Any,
    shape: tuple[int, ...],
    indexed_dim: int,
    spec: ReduceSpec,
    keys: Any,
    g: Any,
    empty: Any,
) -> Any:
    """The result of a reduction over indexed dimensions from its groups.

    ``keys`` ``(kept, ngroups)`` are the kept indices of the groups (sorted lexicographically),
    ``g`` ``(ngroups, *dense)`` their results with the reduced dense axes kept as size 1, ``empty`` (0-d)
    the result of a group without entries. Gives a coalesced COO array over the kept indexed
    dimensions, or a strided array when none is kept.
    """
    axes = spec.axes
    dense_reduced = tuple(1 + d - indexed_dim for d in axes if d >= indexed_dim)
    out_shape = reduced_shape(shape, axes, spec.keepdims)
    if result_kind(len(shape), indexed_dim, axes) == "strided":
        dense_shape = tuple(g.shape[1:])
        res = g[0, ...] if g.shape[0] else _full(xp, dense_shape, xp.astype(xp.asarray(empty), g.dtype))
        return as_array(xp, xp.reshape(res, out_shape))
    values = g if spec.keepdims else _squeeze(xp, g, dense_reduced)
    kept = [d for d in range(indexed_dim) if d not in axes]
    if spec.keepdims:
        zero = xp.zeros((keys.shape[1],), dtype=keys.dtype, device=_device(keys))
        keys = xp.stack([keys[kept.index(d), :] if d in kept else zero for d in range(indexed_dim)])
    return COOArray(keys, values, out_shape, backend=backend, xp=xp, coalesced=True, fill_value=python_scalar(xp, empty))


def _dense_axes(a: SparseArray, axes: tuple[int, ...]) -> tuple[int, ...]:
    """The axes of ``a``'s values that hold the dense dimensions ``axes`` (dense ones are trailing)."""
    return tuple(a._vals.ndim - a.ndim + d for d in axes)


def _restore_layout(xp: Any, a: CompressedArray, out: Any, spec: ReduceSpec) -> Any:
    """Compress ``out`` back to ``a``'s layout where every batch dimension and no sparse one was reduced."""
    b = a.batch_dim()
    if not isinstance(out, COOArray) or b == 0 or any(d not in spec.axes for d in range(b)) or b in spec.axes or b + 1 in spec.axes:
        return out
    target = Target(a.layout, a._backend, xp, out.shape, 2, out.dense_dim(), a.blocksize, a.index_dtype, out.fill_value)
    return coo_to_compressed(xp, out, target)


def _via_coo(
    coo_impl: Callable[[Any, COOArray, ReduceSpec], Any], structure_impl: Callable[[Any, SparseArray, ReduceSpec], Any]
) -> Callable[[Any, CompressedArray, ReduceSpec], Any]:
    """A compressed kernel: the structure-keeping path, or the COO kernel on the element COO."""

    def kernel(xp: Any, a: CompressedArray, spec: ReduceSpec) -> Any:
        if result_kind(a.ndim, a.batch_dim() + 2, spec.axes) == "structure":
            return structure_impl(xp, a, spec)
        return _restore_layout(xp, a, coo_impl(xp, compressed_to_coo(xp, a), spec), spec)

    return kernel


# -- sum, prod, max, min, any, all, count_nonzero --------------------------------------------------------


def monoid_structure(xp: Any, monoid: Monoid, a: SparseArray, spec: ReduceSpec) -> SparseArray:
    """Reduce dense dimensions only: each specified element's dense sub-array, and the fill value."""
    axes_v = _dense_axes(a, spec.axes)
    f = monoid.premap(xp, fill_array(xp, a), spec.dtype)
    v = local_reduction(xp, monoid, monoid.premap(xp, a._vals, spec.dtype), axes_v)
    n = math.prod(a.shape[d] for d in spec.axes)
    return a._with_values(v if spec.keepdims else _squeeze(xp, v, axes_v), python_scalar(xp, fill_of(xp, monoid, f, n)))


Grouping = Callable[[Any, Monoid, COOArray, list[int], Any], tuple[Any, Any, Any]]


def sorted_groups(xp: Any, monoid: Monoid, c: COOArray, kept: list[int], v: Any) -> tuple[Any, Any, Any]:
    """The entries of ``c`` grouped by their ``kept`` sparse indices and each group's values ``v``
    reduced: ``(keys, g, counts)``, the groups' kept indices ``(len(kept), ngroups)`` in ``c``'s index
    dtype and lexicographic order, their results ``(ngroups, ...)`` and entry counts. Here by a stable
    sort of the kept index rows and a segmented scan; a backend may group faster (:func:`monoid_coo`)."""
    grp = _group(xp, c._idx, kept, c.is_coalesced())
    (g,) = _segment_reduce(xp, grp, (xp.take(v, grp.perm, axis=0),), _monoid_combine(xp, monoid))
    return grp.keys, g, grp.counts


def monoid_coo(xp: Any, monoid: Monoid, c: COOArray, spec: ReduceSpec, groups: Grouping = sorted_groups) -> Any:
    """Reduce a COO array over ``spec.axes``: group the entries by their kept sparse indices (``groups``,
    :func:`sorted_groups`'s arguments and result), then combine each group with its fill values."""
    sd = c.sparse_dim()
    # duplicates add up in the array's dtype (wrapping, rounding) before a cast to another result dtype
    as_they_are = monoid.linear and spec.dtype == c.dtype
    if result_kind(c.ndim, sd, spec.axes) == "structure":
        return monoid_structure(xp, monoid, c if as_they_are else coalesce_coo(xp, c), spec)
    if not (as_they_are and is_plus_zero(c.fill_value)):
        c = coalesce_coo(xp, c)
    r_s = [d for d in spec.axes if d < sd]
    axes_v = tuple(1 + d - sd for d in spec.axes if d >= sd)
    f = monoid.premap(xp, fill_array(xp, c), spec.dtype)
    v = local_reduction(xp, monoid, monoid.premap(xp, c._vals, spec.dtype), axes_v)
    kept = [d for d in range(sd) if d not in r_s]
    keys, g, counts = groups(xp, monoid, c, kept, v)
    n_s = math.prod(c.shape[d] for d in r_s)
    n_d = math.prod(c.shape[d] for d in spec.axes if d >= sd)
    g = with_fill(xp, monoid, g, f, (n_s - counts) * n_d)
    return assemble(xp, c._backend, c.shape, sd, spec, keys, g, fill_of(xp, monoid, f, n_s * n_d))


def _compared(kernel: Callable[[Any, Any, ReduceSpec], Any], map_back: bool) -> Callable[[Any, Any, ReduceSpec], Any]:
    """``kernel`` of a reduction that only compares elements, run on the order-preserving signed twin
    where the backend compares none of the operand's unsigned dtype (torch's uint16/32/64; see
    conversion.through_ordered); ``map_back`` for a result that holds elements (max, min), not positions."""

    def run(xp: Any, x: Any, spec: ReduceSpec) -> Any:
        def on(v: Any, dtype: Any) -> Any:
            return kernel(xp, v, dataclasses.replace(spec, dtype=dtype) if map_back else spec)

        return through_ordered(xp, x, on, map_back=map_back)

    return run


def _monoid_kernels(name: str) -> None:
    monoid = MONOIDS[name]

    def strided_kernel(xp: Any, x: Any, spec: ReduceSpec) -> Any:
        v = monoid.premap(xp, x, spec.dtype)
        r = local_reduction(xp, monoid, v, spec.axes)
        return as_array(xp, r if spec.keepdims else _squeeze(xp, r, spec.axes))

    def coo_kernel(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
        return monoid_coo(xp, monoid, a, spec)

    def structure(xp: Any, a: SparseArray, spec: ReduceSpec) -> Any:
        return monoid_structure(xp, monoid, a, spec)

    def coo_impl(xp: Any, c: COOArray, spec: ReduceSpec) -> Any:
        return monoid_coo(xp, monoid, c, spec)

    kernels: tuple[Callable[[Any, Any, ReduceSpec], Any], ...] = (strided_kernel, coo_kernel, _via_coo(coo_impl, structure))
    if name in ("max", "min"):
        kernels = tuple(_compared(k, True) for k in kernels)
    _register_family(
        name,
        (kernels[0], f"{name}(strided) -> strided: the backend's reduction; O(numel)."),
        (kernels[1], f"{name}(COO) -> COO or strided: group by the kept sparse indices, fill counted; O(nnz log nnz)."),
        (kernels[2], f"{name}(compressed) -> same layout, COO or strided, through the element COO; O(nnz log nnz)."),
    )


for _name in MONOIDS:
    _monoid_kernels(_name)


# -- mean, var, std -------------------------------------------------------------------------------------


def _nan_like(xp: Any, r: Any) -> Any:
    """``r`` (strided or sparse) with every element NaN (``nan + nanj`` for complex, as ``0j / 0``)."""
    nan = complex(math.nan, math.nan) if xp.isdtype(r.dtype, "complex floating") else math.nan
    if isinstance(r, SparseArray):
        return r._with_values(xp.full(r._vals.shape, nan, dtype=r.dtype, device=r.device), nan)
    return xp.full(r.shape, nan, dtype=r.dtype, device=_device(r))


def _divide(xp: Any, r: Any, n: float) -> Any:
    """``r`` (strided or sparse) divided by ``n``, NaN where ``n`` is 0."""
    if n <= 0:
        return _nan_like(xp, r)
    # a complex infinity over n is NaN in one part, which NumPy would warn about ("No floating-point
    # warnings on NumPy")
    if isinstance(r, SparseArray):
        return quietly(xp, lambda: r._with_values(r._vals / n, python_scalar(xp, fill_array(xp, r) / n)))
    return quietly(xp, lambda: as_array(xp, r / n))


def mean_of_sum(xp: Any, r: Any, a: SparseArray | Any, spec: ReduceSpec) -> Any:
    """The mean from ``r``, the (fill-aware) sum of ``a`` over ``spec.axes``: ``r`` over the element count."""
    return _divide(xp, r, math.prod(a.shape[d] for d in spec.axes))


def _mean_strided(xp: Any, x: Any, spec: ReduceSpec) -> Any:
    """mean(strided) -> strided: the backend's mean; O(numel)."""
    # an empty tuple of axes reduces nothing (some libraries read it as every axis)
    return as_array(xp, xp.mean(x, axis=spec.axes, keepdims=spec.keepdims)) if spec.axes else x


def _mean_coo(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
    """mean(COO) -> COO or strided: the fill-aware sum over the full count; O(nnz log nnz)."""
    return mean_of_sum(xp, monoid_coo(xp, SUM, a, spec), a, spec)


def _mean_structure(xp: Any, a: SparseArray, spec: ReduceSpec) -> Any:
    return mean_of_sum(xp, monoid_structure(xp, SUM, a, spec), a, spec)


_mean_compressed = _via_coo(_mean_coo, _mean_structure)
_mean_compressed.__name__ = _mean_compressed.__qualname__ = "_mean_compressed"
_mean_compressed.__doc__ = "mean(compressed) -> same layout, COO or strided: the fill-aware sum over the full count; O(nnz log nnz)."
register("mean", (strided,))(_mean_strided)
register("mean", (sparse_coo,))(_mean_coo)
register("mean", (COMPRESSED,))(_mean_compressed)


def _var_structure(xp: Any, a: SparseArray, spec: ReduceSpec) -> Any:
    axes_v = _dense_axes(a, spec.axes)
    n = math.prod(a.shape[d] for d in spec.axes)
    v = _astype(xp, a._vals, spec.dtype)
    if n - spec.correction <= 0:
        return _nan_like(xp, monoid_structure(xp, SUM, a, spec))
    m = local_reduction(xp, SUM, v, axes_v) / n
    dev = v - m
    q = local_reduction(xp, SUM, dev * dev, axes_v) / (n - spec.correction)
    return a._with_values(q if spec.keepdims else _squeeze(xp, q, axes_v), python_scalar(xp, _constant_var(xp, fill_array(xp, a))))


def _constant_var(xp: Any, f: Any) -> Any:
    """The variance of copies of ``f``: 0, or NaN for an infinite or NaN ``f``."""
    return xp.where(xp.isfinite(f), xp.zeros_like(f), xp.full_like(f, math.nan))


def _var_groups(xp: Any, c: COOArray, spec: ReduceSpec) -> Any:
    """Two passes over the groups: the fill-aware mean, then the fill-aware sum of squared deviations."""
    sd = c.sparse_dim()
    if result_kind(c.ndim, sd, spec.axes) == "structure":
        return _var_structure(xp, coalesce_coo(xp, c), spec)
    n = math.prod(c.shape[d] for d in spec.axes)
    if n - spec.correction <= 0:
        return _nan_like(xp, monoid_coo(xp, SUM, c, spec))
    c = coalesce_coo(xp, c)
    r_s = [d for d in spec.axes if d < sd]
    axes_v = tuple(1 + d - sd for d in spec.axes if d >= sd)
    kept = [d for d in range(sd) if d not in r_s]
    grp = _group(xp, c._idx, kept, True)
    f = fill_array(xp, c)
    v = xp.take(c._vals, grp.perm, axis=0)
    n_s = math.prod(c.shape[d] for d in r_s)
    n_d = n // n_s if n_s else 0
    unspecified = (n_s - grp.counts) * n_d
    (s,) = _segment_reduce(xp, grp, (local_reduction(xp, SUM, v, axes_v),), _add(xp))
    m = with_fill(xp, SUM, s, f, unspecified) / n
    dev = v - xp.take(m, grp.gid, axis=0)
    (q,) = _segment_reduce(xp, grp, (local_reduction(xp, SUM, dev * dev, axes_v),), _add(xp))
    # the unspecified elements of a group add (fill - mean)**2 each
    fdev = f - m
    u = xp.reshape(unspecified, (-1, *(1,) * (q.ndim - 1)))
    has = u > 0
    q = q + xp.where(has, fdev * fdev * xp.astype(xp.where(has, u, xp.ones_like(u)), q.dtype), xp.zeros_like(fdev))
    return assemble(xp, c._backend, c.shape, sd, spec, grp.keys, q / (n - spec.correction), _constant_var(xp, f))


def _too_few(x: Any, spec: ReduceSpec) -> bool:
    """Whether ``N - correction <= 0``, where the standard's variance is NaN (NumPy's and torch's are
    ``x / 0``, inf, where the squared deviations are not all 0)."""
    return bool(math.prod(int(x.shape[d]) for d in spec.axes) - spec.correction <= 0)


def _var_strided(xp: Any, x: Any, spec: ReduceSpec) -> Any:
    """var(strided) -> strided: the backend's var with the correction; O(numel)."""
    if not spec.axes:
        return _full(xp, tuple(x.shape), xp.asarray(0.0 if spec.correction < 1 else math.nan, dtype=x.dtype, device=_device(x)))
    if _too_few(x, spec):
        # NaN from x's sum, not a new array: an autograd graph through x stays (its gradient is NaN, as torch's)
        return quietly(xp, lambda: as_array(xp, xp.sum(x, axis=spec.axes, keepdims=spec.keepdims) * math.nan))
    return as_array(xp, xp.var(x, axis=spec.axes, correction=spec.correction, keepdims=spec.keepdims))


def _var_coo(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
    """var(COO) -> COO or strided: two fill-aware passes (mean, squared deviations); O(nnz log nnz)."""
    return _var_groups(xp, a, spec)


_var_compressed = _via_coo(_var_coo, _var_structure)
_var_compressed.__name__ = _var_compressed.__qualname__ = "_var_compressed"
_var_compressed.__doc__ = "var(compressed) -> same layout, COO or strided: two fill-aware passes; O(nnz log nnz)."


def _sqrt(xp: Any, r: Any) -> Any:
    if isinstance(r, SparseArray):
        return r._with_values(xp.sqrt(r._vals), python_scalar(xp, xp.sqrt(fill_array(xp, r))))
    return as_array(xp, xp.sqrt(r))


def _std_strided(xp: Any, x: Any, spec: ReduceSpec) -> Any:
    """std(strided) -> strided: the backend's std with the correction; O(numel)."""
    if not spec.axes or _too_few(x, spec):
        return _var_strided(xp, x, spec)
    try:
        return as_array(xp, xp.std(x, axis=spec.axes, correction=spec.correction, keepdims=spec.keepdims))
    except NotImplementedError:
        # array-api-compat's torch std takes only a whole correction (its var takes any): the root of the variance
        return xp.sqrt(_var_strided(xp, x, spec))


def _std_coo(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
    """std(COO) -> COO or strided: the square root of the fill-aware variance; O(nnz log nnz)."""
    return _sqrt(xp, _var_groups(xp, a, spec))


def _std_compressed(xp: Any, a: CompressedArray, spec: ReduceSpec) -> Any:
    """std(compressed) -> same layout, COO or strided: the square root of the fill-aware variance; O(nnz log nnz)."""
    return _sqrt(xp, _var_compressed(xp, a, spec))


register("var", (strided,))(_var_strided)
register("var", (sparse_coo,))(_var_coo)
register("var", (COMPRESSED,))(_var_compressed)
register("std", (strided,))(_std_strided)
register("std", (sparse_coo,))(_std_coo)
register("std", (COMPRESSED,))(_std_compressed)


# -- argmax, argmin --------------------------------------------------------------------------------------


def _better(xp: Any, x: Any, y: Any, largest: bool) -> Any:
    """Where ``x`` beats ``y``: larger (smaller), a NaN beating any number (NumPy's and torch's rule)."""
    out = x > y if largest else x < y
    if xp.isdtype(x.dtype, "real floating"):
        out = out | (xp.isnan(x) & ~xp.isnan(y))
    return out


def _equal(xp: Any, x: Any, y: Any) -> Any:
    out = x == y
    if xp.isdtype(x.dtype, "real floating"):
        out = out | (xp.isnan(x) & xp.isnan(y))
    return out


def _first_best(xp: Any, v: Any, largest: bool) -> int:
    """The position of the first best element of the 1-D ``v`` (the first NaN, if any)."""
    if xp.isdtype(v.dtype, "real floating"):
        nan = xp.isnan(v)
        if bool(xp.any(nan)):
            return int(xp.argmax(xp.astype(nan, xp.int8)))
    return int(xp.argmax(v) if largest else xp.argmin(v))


def _arg_structure(xp: Any, a: SparseArray, spec: ReduceSpec, largest: bool) -> SparseArray:
    (d,) = _dense_axes(a, spec.axes)
    v = a._vals
    if _size(v) == 0:
        r = xp.zeros(reduced_shape(tuple(v.shape), (d,), spec.keepdims), dtype=spec.dtype, device=a.device)
    else:
        r = xp.argmax(v, axis=d, keepdims=spec.keepdims) if largest else xp.argmin(v, axis=d, keepdims=spec.keepdims)
    # the dense sub-array of an unspecified element is the fill value throughout: its first position wins
    return a._with_values(xp.astype(r, spec.dtype), 0)


def _arg_flat(xp: Any, c: COOArray, spec: ReduceSpec, largest: bool) -> Any:
    """The flat (C-order) index of the first best element of the whole array."""
    sd = c.sparse_dim()
    dsize = math.prod(c.shape[sd:])
    cells = math.prod(c.shape[:sd])
    nnz = c.nnz
    keys = _linearize(xp, c._idx, c.shape[:sd]) if sd else xp.zeros((nnz,), dtype=xp.int64, device=c.device)
    gaps = xp.nonzero(keys != xp.arange(nnz, dtype=xp.int64, device=c.device))[0]
    # the first unspecified element: the first sparse index missing from the sorted keys
    gap = int(gaps[0]) if gaps.shape[0] else nnz
    pos_fill = gap * dsize
    result = pos_fill
    if nnz * dsize:
        v = xp.reshape(c._vals, (-1,))
        i = _first_best(xp, v, largest)
        best, pos = v[i], int(keys[i // dsize]) * dsize + i % dsize
        f = fill_array(xp, c)
        fill_wins = nnz < cells and (bool(_better(xp, f, best, largest)) or (bool(_equal(xp, f, best)) and pos_fill < pos))
        result = pos_fill if fill_wins else pos
    out = xp.asarray(result, dtype=spec.dtype, device=c.device)
    return xp.reshape(out, (1,) * c.ndim if spec.keepdims else ())


def _arg_coo(xp: Any, c: COOArray, spec: ReduceSpec, largest: bool) -> Any:
    c = coalesce_coo(xp, c)
    sd = c.sparse_dim()
    if len(spec.axes) != 1 or c.ndim == 1:
        # every axis (a 1-D array's one too, dense or not): a 0-d backend array, as every full reduction
        return _arg_flat(xp, c, spec, largest)
    (d,) = spec.axes
    if d >= sd:
        return _arg_structure(xp, c, spec, largest)
    kept = [k for k in range(sd) if k != d]
    grp = _group(xp, c._idx, kept, True, then=[d])
    n = c.nnz
    v = xp.take(c._vals, grp.perm, axis=0)
    coords = xp.astype(xp.take(c._idx[d, :], grp.perm), xp.int64)
    size = c.shape[d]
    # the first unspecified position of a group: the first rank whose (sorted, unique) coordinate is larger
    ranks = xp.arange(n, dtype=xp.int64, device=c.device) - xp.take(grp.starts, grp.gid)
    cand = xp.where(coords != ranks, ranks, xp.full_like(ranks, size))
    tail = (1,) * (v.ndim - 1)
    at = xp.broadcast_to(xp.reshape(coords, (n, *tail)), tuple(v.shape))

    def pick(left: tuple[Any, ...], right: tuple[Any, ...]) -> tuple[Any, ...]:
        take_right = _better(xp, right[0], left[0], largest)
        return xp.where(take_right, right[0], left[0]), xp.where(take_right, right[1], left[1]), xp.minimum(left[2], right[2])

    best, best_at, gap = _segment_reduce(xp, grp, (v, at, cand), pick)
    gap = xp.where(gap == size, grp.counts, gap)
    has = xp.reshape(grp.counts < size, (-1, *tail))
    gap = xp.reshape(gap, (-1, *tail))
    f = fill_array(xp, c)
    fill_wins = has & (_better(xp, f, best, largest) | (_equal(xp, f, best) & (gap < best_at)))
    res = xp.astype(xp.where(fill_wins, gap, best_at), spec.dtype)
    return assemble(xp, c._backend, c.shape, sd, spec, grp.keys, res, xp.zeros((), dtype=spec.dtype, device=c.device))


def _arg_kernels(name: str, largest: bool) -> None:
    def strided_kernel(xp: Any, x: Any, spec: ReduceSpec) -> Any:
        axis = spec.axes[0] if len(spec.axes) == 1 else None
        flat = x if axis is not None else xp.reshape(x, (-1,))
        r = xp.argmax(flat, axis=axis, keepdims=spec.keepdims) if largest else xp.argmin(flat, axis=axis, keepdims=spec.keepdims)
        if axis is None and spec.keepdims:
            r = xp.reshape(r, (1,) * x.ndim)
        return as_array(xp, xp.astype(r, spec.dtype))

    def coo_kernel(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
        return _arg_coo(xp, a, spec, largest)

    def structure(xp: Any, a: SparseArray, spec: ReduceSpec) -> Any:
        return _arg_structure(xp, a, spec, largest)

    def compressed_kernel(xp: Any, a: CompressedArray, spec: ReduceSpec) -> Any:
        if len(spec.axes) == 1 and result_kind(a.ndim, a.batch_dim() + 2, spec.axes) == "structure":
            return structure(xp, a, spec)
        return _restore_layout(xp, a, _arg_coo(xp, compressed_to_coo(xp, a), spec, largest), spec)

    kernels = tuple(_compared(k, False) for k in (strided_kernel, coo_kernel, compressed_kernel))
    _register_family(
        name,
        (kernels[0], f"{name}(strided) -> strided: the backend's {name}; O(numel)."),
        (kernels[1], f"{name}(COO) -> COO or strided: per group, the best entry against the first unspecified position; O(nnz log nnz)."),
        (kernels[2], f"{name}(compressed) -> same layout, COO or strided, through the element COO; O(nnz log nnz)."),
    )


_arg_kernels("argmax", True)
_arg_kernels("argmin", False)


# -- cumulative_sum, cumulative_prod ------------------------------------------------------------------


def kept_cumulative_fill(op: str, fill: Any, include_initial: bool) -> Any:
    """The fill value of a running sum (product) along a dense dimension, where the running results of
    an unspecified element's constant sub-array are all one value: 0 for sums of 0, 0 for products of 0
    (without a leading 1), 1 for products of 1. None where they differ, and the result is strided."""
    if op == "cumulative_sum":
        # running sums of -0.0 stay -0.0, unless they start from the leading +0 (which they then are)
        return 0 if is_plus_zero(fill) else fill if fill == 0 and not include_initial else None
    # running products of -0.0 alternate in sign
    if fill == 1 or (is_plus_zero(fill) and not include_initial):
        return fill
    return None


def _cumulative(op: str, xp: Any, a: SparseArray, spec: ReduceSpec, densify: Callable[[Any, Any], Any]) -> Any:
    (d,) = spec.axes
    running = getattr(xp, op)
    fill = kept_cumulative_fill(op, a.fill_value, spec.include_initial)
    if d >= a.ndim - a.dense_dim() and fill is not None:
        # along a dense dimension an unspecified element's running results stay its fill: the structure is kept
        v = running(_astype(xp, a._vals, spec.dtype), axis=_dense_axes(a, (d,))[0], dtype=spec.dtype, include_initial=spec.include_initial)
        # cast as the values are (a complex fill to a real dtype= keeps its real part, NumPy's cast)
        f = _astype(xp, scalar_array(xp, fill, a.dtype, a.device), spec.dtype)
        return a._with_values(v, python_scalar(xp, f))
    dense = _astype(xp, densify(xp, a), spec.dtype)
    # dtype= keeps the result dtype: without it a backend widens small integers again (uint32 -> uint64)
    return xp.asarray(running(dense, axis=d, dtype=spec.dtype, include_initial=spec.include_initial))


def _cumulative_kernels(name: str, what: str) -> None:
    def strided_kernel(xp: Any, x: Any, spec: ReduceSpec) -> Any:
        running = getattr(xp, name)
        return xp.asarray(running(_astype(xp, x, spec.dtype), axis=spec.axes[0], dtype=spec.dtype, include_initial=spec.include_initial))

    def coo_kernel(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
        # duplicates add up before a running product, or a cast (a running sum is linear: in the array's
        # dtype it may run on them as they are)
        as_they_are = name == "cumulative_sum" and spec.dtype == a.dtype
        return _cumulative(name, xp, a if as_they_are else coalesce_coo(xp, a), spec, coo_to_dense)

    def compressed_kernel(xp: Any, a: CompressedArray, spec: ReduceSpec) -> Any:
        return _cumulative(name, xp, a, spec, lambda xp, a: _convert_compressed_strided(xp, a, None))

    kept = "along a dense dimension with a fill the running results keep"
    _register_family(
        name,
        (strided_kernel, f"{name}(strided) -> strided: the backend's running {what}; O(numel)."),
        (coo_kernel, f"{name}(COO) -> COO {kept}, else strided; O(nnz) or O(numel)."),
        (compressed_kernel, f"{name}(compressed) -> same layout {kept}, else strided; O(nnz) or O(numel)."),
    )


_cumulative_kernels("cumulative_sum", "sum")
_cumulative_kernels("cumulative_prod", "product")


# -- softmax, log_softmax -------------------------------------------------------------------------------


def _normalise(xp: Any, z: Any, s: Any, log: bool) -> Any:
    """``exp(z) / s`` (or ``z - log(s)``), NaN where ``s`` is 0 or not finite, without a warning."""
    ok = (s > 0) & xp.isfinite(s)
    safe = xp.where(ok, s, xp.ones_like(s))
    out = z - xp.log(safe) if log else xp.exp(z) / safe
    return xp.where(ok, out, xp.full_like(out, math.nan))


def _shift(xp: Any, v: Any, m: Any) -> Any:
    """``v - m`` with an infinite maximum read as 0, so that no ``inf - inf`` is computed."""
    return v - xp.where(xp.isinf(m), xp.zeros_like(m), m)


def softmax_dense(xp: Any, x: Any, axis: int, log: bool) -> Any:
    """softmax (or log_softmax) of a strided array along ``axis``."""
    if _size(x) == 0:
        return x
    z = _shift(xp, x, xp.max(x, axis=axis, keepdims=True))
    return _normalise(xp, z, xp.sum(xp.exp(z), axis=axis, keepdims=True), log)


def _softmax_entries(xp: Any, idx: Any, vals: Any, row: int, inner: tuple[int, ...], log: bool, coalesced: bool) -> Any:
    """softmax of the entries (``idx`` columns, ``vals`` rows) over the groups that share every index row
    but ``row``, and over the in-entry axes ``inner``; the result is in the entries' own order."""
    n = idx.shape[1]
    if n == 0 or _size(vals) == 0:
        return vals
    kept = [k for k in range(idx.shape[0]) if k != row]
    grp = _group(xp, idx, kept, coalesced)
    v = xp.take(vals, grp.perm, axis=0)
    maximum = _monoid_combine(xp, MONOIDS["max"])
    (m,) = _segment_reduce(xp, grp, (xp.max(v, axis=inner, keepdims=True) if inner else v,), maximum)
    z = _shift(xp, v, xp.take(m, grp.gid, axis=0))
    e = xp.exp(z)
    (s,) = _segment_reduce(xp, grp, (xp.sum(e, axis=inner, keepdims=True) if inner else e,), _add(xp))
    out = _normalise(xp, z, xp.take(s, grp.gid, axis=0), log)
    return xp.take(out, xp.argsort(grp.perm), axis=0)


def _softmax_fill(log: bool) -> float:
    # the unspecified elements are -inf: probability 0, log-probability -inf
    return -math.inf if log else 0.0


def _softmax_coo(xp: Any, a: COOArray, spec: ReduceSpec, log: bool) -> COOArray:
    c = coalesce_coo(xp, a)
    (d,) = spec.axes
    v = _astype(xp, c._vals, spec.dtype)
    sd = c.sparse_dim()
    out = softmax_dense(xp, v, 1 + d - sd, log) if d >= sd else _softmax_entries(xp, c._idx, v, d, (), log, True)
    return c._with_values(out, _softmax_fill(log))


def _softmax_compressed(xp: Any, a: CompressedArray, spec: ReduceSpec, log: bool) -> CompressedArray:
    (d,) = spec.axes
    b = a.batch_dim()
    v = _astype(xp, a._vals, spec.dtype)
    if d >= b + 2:
        return a._with_values(softmax_dense(xp, v, _dense_axes(a, (d,))[0], log), _softmax_fill(log))
    # the block COO lists the blocks in the order of the values; a block's rows (columns) lie along
    # its axis 1 (2), which the softmax along the row (column) dimension reduces as well
    bc = compressed_to_block_coo(xp, a)
    inner = (1 + d - b,) if a.layout.is_blocked and d >= b else ()
    flat = xp.reshape(v, tuple(bc._vals.shape))
    out = _softmax_entries(xp, bc._idx, flat, d, inner, log, bc.is_coalesced())
    return a._with_values(xp.reshape(out, tuple(v.shape)), _softmax_fill(log))


def _softmax_kernels(name: str, log: bool) -> None:
    def strided_kernel(xp: Any, x: Any, spec: ReduceSpec) -> Any:
        return xp.asarray(softmax_dense(xp, _astype(xp, x, spec.dtype), spec.axes[0], log))

    def coo_kernel(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
        return _softmax_coo(xp, a, spec, log)

    def compressed_kernel(xp: Any, a: CompressedArray, spec: ReduceSpec) -> Any:
        return _softmax_compressed(xp, a, spec, log)

    _register_family(
        name,
        (strided_kernel, f"{name}(strided) -> strided: shifted exponentials over the axis; O(numel)."),
        (coo_kernel, f"{name}(COO) -> COO: over the specified elements of each slice, unspecified = -inf; O(nnz log nnz)."),
        (compressed_kernel, f"{name}(compressed) -> same layout: over the specified elements of each slice; O(nnz log nnz)."),
    )


_softmax_kernels("softmax", False)
_softmax_kernels("log_softmax", True)


# A reduction across the slices keeps one accumulator per plain index: past this many, and 8 per entry, the
# generic kernel (which sorts the entries' keys) needs memory for the entries only.
WIDE_GROUPS = 1 << 22


def wide_groups_reason(a: CompressedArray, axis: int) -> str | None:
    """Why one accumulator per plain index of ``a`` (a reduction along its compressed dimension ``axis``)
    would outweigh its entries, or None."""
    if axis != a.layout.compressed_dim:
        return None
    groups = a.shape[1 - a.layout.compressed_dim]
    if groups > max(8 * a.nnz, WIDE_GROUPS):
        return f"an accumulator per plain index ({groups}) would outweigh the entries ({a.nnz}); the generic kernel groups the entries instead"
    return None
