"""Generic kernels of the set functions (``unique_*``, ``isin``).

A sparse array's unspecified elements count as values: with at least one unspecified element the fill
value is one of the unique values, counted once per unspecified element (plus its specified
occurrences), and its first occurrence is the first unspecified position in row-major order (or an
earlier specified element equal to it). ``unique_values`` and ``unique_counts`` read only the stored
values; ``inverse_indices`` keeps the operand's structure (the fill value's index becomes its fill
value); the ``indices`` of ``unique_all`` read the positions of the element COO.

The unique values come from one sort (``_sorted_unique``), in ascending order with every NaN distinct,
as the standard asks, on every backend (torch has no ``unique_all``). No sort asks for stability (a
stable sort is several times slower than the default one): equal values have equal bits except the
zeros (``-0.0 == +0.0``) and the NaNs, and ``sorting.ascending_order`` / ``sorting.sorted_values`` put
those runs back in index order, so every output is a stable sort's, bit for bit: the zero found first
stands for the zeros, the NaNs come in index order. ``unique_all``'s first indices need each run in
index order: ``sorting.stable_order`` gives exactly a stable argsort from two default sorts. Complex
values keep their two stable sorts.

What the caller needs (``outputs``) picks the work: ``"all"`` (``unique_all``: first indices too),
``"inverse"`` (no first indices), ``"counts"`` (values and counts only: a sort of the values, no
permutation) or ``"values"`` (the NumPy and torch kernels skip the counts too). The operation's
boolean argument reads ``True`` as ``"all"`` and ``False`` as ``"inverse"``.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, cast

import array_api_compat

from ...dispatch import register
from ...formats import ANY_SPARSE, COMPRESSED, INDEXED, COOArray, CompressedArray, SparseArray, sparse_coo, strided
from ...formats._ops import prod
from .conversion import _linearize, coalesce_coo, compressed_to_coo, float64_on, result_dtype, signed_twin, take_values
from .sorting import ascending_order, sorted_values, stable_order

__all__ = ["Unique", "unique", "outputs_of", "coo_positions", "sorted_unique", "isin_values", "unspecified_nans"]


class Unique(NamedTuple):
    """Every output of ``unique_all``, for a strided or sparse operand."""

    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


def _ascending(xp: Any, v: Any) -> Any:
    """The stable ascending order of the 1-D ``v``; complex values in lexicographic (real, imag) order.

    Complex numbers have no order in the standard, and torch cannot sort them on the CPU, so they are
    ordered by two stable sorts (by the imaginary part, then by the real part), the order NumPy uses.
    """
    if not xp.isdtype(v.dtype, "complex floating"):
        return xp.argsort(v, stable=True)
    by_imag = xp.argsort(xp.imag(v), stable=True)
    return xp.take(by_imag, xp.argsort(xp.take(xp.real(v), by_imag), stable=True))


def outputs_of(ravel_positions: bool | str) -> str:
    """The outputs the ``unique`` operation's argument asks for: ``"all"``, ``"inverse"``, ``"counts"`` or
    ``"values"`` (which a backend's kernel may compute without the counts)."""
    if isinstance(ravel_positions, str):
        return ravel_positions
    return "all" if ravel_positions else "inverse"


def sorted_unique(xp: Any, v: Any, outputs: str) -> tuple[Any, Any, Any, Any]:
    """Unique values of the 1-D ``v`` (ascending, NaNs distinct), first indices (``"all"``), inverse
    (``"all"``, ``"inverse"``) and counts; the outputs not asked for are None."""
    dev = array_api_compat.device(v)
    n = int(v.shape[0])
    order = None
    if xp.isdtype(v.dtype, "complex floating"):
        order = _ascending(xp, v)
    elif outputs == "all":
        # a stable order keeps equal values in their original order: the first of a run is the first occurrence
        order = stable_order(xp, v)
    elif outputs == "inverse":
        order = ascending_order(xp, v)
    s = take_values(xp, v, order, axis=0) if order is not None else sorted_values(xp, v)
    if n == 0:
        empty = xp.zeros((0,), dtype=xp.int64, device=dev)
        return s, empty if outputs == "all" else None, empty if outputs in ("all", "inverse") else None, None if outputs == "values" else empty
    new = xp.concat([xp.ones((1,), dtype=xp.bool, device=dev), s[1:] != s[:-1]])
    starts = xp.nonzero(new)[0]
    bounds = xp.concat([starts, xp.asarray([n], dtype=starts.dtype, device=dev)])
    counts = xp.astype(bounds[1:] - bounds[:-1], xp.int64)
    first = inverse = None
    if outputs == "all" and order is not None:
        first = xp.astype(xp.take(order, starts), xp.int64)
    if outputs != "counts" and order is not None:
        group = xp.cumulative_sum(xp.astype(new, xp.int64)) - 1
        # order is a permutation: its distinct elements sort the same stably or not
        inverse = xp.take(group, xp.argsort(order, stable=False))
    return take_values(xp, s, starts, axis=0), first, inverse, None if outputs == "values" else counts


@register("unique", (strided,))
def _unique_strided(xp: Any, x: Any, ravel_positions: bool | str) -> Unique:
    """unique_all(strided) -> strided outputs: one sort (stable for the first indices); O(n log n)."""
    values, first, inverse, counts = sorted_unique(xp, xp.reshape(x, (-1,)), outputs_of(ravel_positions))
    return Unique(values, first, None if inverse is None else xp.reshape(inverse, tuple(x.shape)), counts)


def unspecified_nans(xp: Any, a: SparseArray) -> bool:
    """Whether ``a`` has a NaN fill value and an unspecified element: each would be a distinct unique value."""
    f = a.fill_value
    if not (isinstance(f, (float, complex)) and f != f):
        return False
    if a.size > prod(tuple(a._vals.shape)):
        return True  # duplicates would only leave fewer elements specified
    # duplicates are one element: the distinct ones
    return isinstance(a, COOArray) and a.size > prod(tuple(coalesce_coo(xp, a)._vals.shape))


def _supports_unique(xp: Any, a: SparseArray, ravel_positions: bool | str) -> str | None:
    if unspecified_nans(xp, a):
        return "the fill value is NaN and every NaN is a distinct value, so each unspecified element would be one"
    return None


Core = Callable[[Any, Any, str], "tuple[Any, Any, Any, Any]"]


def unique(xp: Any, a: SparseArray, positions: Any, outputs: str = "all", core: Core = sorted_unique) -> Unique:
    """``unique_all`` of a sparse ``a`` (coalesced) whose scalar values sit at the flat ``positions``
    (ascending; ``None`` when the caller needs no ``indices``), computing ``outputs`` (the others are
    None) with ``core`` (:func:`sorted_unique` or a backend's). O(nnz log nnz)."""
    if positions is None and outputs == "all":
        outputs = "inverse"
    vals = a._vals
    dev = array_api_compat.device(vals)
    flat = xp.reshape(vals, (-1,))
    nnz = int(flat.shape[0])
    n_unspecified = a.size - nnz
    if n_unspecified == 0:
        values, first, inverse, counts = core(xp, flat, outputs)
        if positions is not None and nnz:
            first = xp.take(positions, first)
        inv = None if inverse is None else a._with_values(xp.reshape(inverse, tuple(vals.shape)), 0)
        return Unique(values, first, inv, counts)
    fill = xp.asarray([a.fill_value], dtype=vals.dtype, device=dev)
    values, first, inverse, counts = core(xp, xp.concat([flat, fill]), outputs)
    # the fill value is not NaN here (_supports_unique): its group is the one unique value equal to it
    if counts is None:  # the values alone
        return Unique(values, None, None, None)
    fill_group = int(inverse[nnz]) if inverse is not None else int(xp.nonzero(values == fill)[0][0])
    # the fill value's group counts every unspecified element: one new array, the others' counts copied
    if a.size > 2**63 - 1:
        counts = None  # past int64: only unique_inverse, which reads none, gets here (unique_counts refuses)
    else:
        counts = xp.concat([counts[:fill_group], counts[fill_group : fill_group + 1] + (n_unspecified - 1), counts[fill_group + 1 :]])
    if positions is not None:
        # the first unspecified position: the first i where the i-th specified position is not i
        gaps = xp.nonzero(positions != xp.arange(nnz, dtype=xp.int64, device=dev))[0]
        gap = int(gaps[0]) if int(gaps.shape[0]) else nnz
        ext = xp.concat([positions, xp.asarray([gap], dtype=xp.int64, device=dev)])
        mapped = xp.take(ext, first)
        is_fill = xp.arange(int(values.shape[0]), dtype=xp.int64, device=dev) == fill_group
        first = xp.where(is_fill, xp.minimum(mapped, xp.asarray(gap, dtype=xp.int64, device=dev)), mapped)
    inv = None if inverse is None else a._with_values(xp.reshape(inverse[:nnz], tuple(vals.shape)), fill_group)
    return Unique(values, first, inv, counts)


def coo_positions(xp: Any, c: COOArray) -> Any:
    """The flat row-major position of every scalar of a coalesced COO array's values, ascending."""
    sd = c.sparse_dim()
    dense = tuple(c.shape[sd:])
    dense_size = prod(dense)
    dev = array_api_compat.device(c._vals)
    base = _linearize(xp, c._idx, tuple(c.shape[:sd])) if sd else xp.zeros((int(c._vals.shape[0]),), dtype=xp.int64, device=dev)
    offsets = xp.arange(dense_size, dtype=xp.int64, device=dev)
    return xp.reshape(base[:, None] * dense_size + offsets[None, :], (-1,))


@register("unique", (sparse_coo,), supports=_supports_unique)
def _unique_coo(xp: Any, a: COOArray, ravel_positions: bool | str) -> Unique:
    """unique_all(COO) -> strided values/indices/counts, COO inverse: sort of the stored values; O(nnz log nnz)."""
    return unique_coo(xp, a, outputs_of(ravel_positions))


def unique_coo(xp: Any, a: COOArray, outputs: str, core: Core = sorted_unique) -> Unique:
    """The ``unique`` operation on a COO array (coalesced first), with ``core``."""
    c = coalesce_coo(xp, a)
    return unique(xp, c, coo_positions(xp, c) if outputs == "all" else None, outputs, core)


@register("unique", (COMPRESSED,), supports=_supports_unique)
def _unique_compressed(xp: Any, a: CompressedArray, ravel_positions: bool | str) -> Unique:
    """unique_all(compressed) -> strided values/indices/counts, inverse in a's layout; O(nnz log nnz)."""
    return unique_compressed(xp, a, outputs_of(ravel_positions))


def unique_compressed(xp: Any, a: CompressedArray, outputs: str, core: Core = sorted_unique) -> Unique:
    """The ``unique`` operation on a compressed array, with ``core``."""
    own = unique(xp, a, None, "inverse" if outputs == "all" else outputs, core)
    if outputs != "all":
        return own
    # the element COO lists the same scalars in row-major order, so the same unique values in the same
    # order; the zeros' representative is the first zero of the storage order (own's), as before
    c = compressed_to_coo(xp, a)
    indices = unique(xp, c, coo_positions(xp, c), "all", core).indices
    return Unique(own.values, _nan_indices(xp, a, own, indices), own.inverse_indices, own.counts)


def _nan_indices(xp: Any, a: CompressedArray, own: Unique, indices: Any) -> Any:
    """``indices`` with each NaN group's entry the row-major position of its own NaN.

    Every NaN is a group of its own, and ``own`` (values and inverse) numbers them in storage order
    (CSC: column-major), while the element COO's first indices list the NaNs in row-major order: so that
    ``x.flat[indices[inverse[i]]]`` is element ``i`` itself, as in NumPy, each NaN group takes the position
    of the NaN its inverse points at. O(nnz log nnz), only where two NaNs are stored."""
    flat = xp.reshape(a._vals, (-1,))
    if xp.isdtype(flat.dtype, ("bool", "integral")):
        return indices
    nan_at = xp.nonzero(xp.isnan(flat))[0]
    if int(nan_at.shape[0]) < 2:
        return indices
    dev = array_api_compat.device(flat)
    n = int(flat.shape[0])
    # the row-major position of every stored scalar, in storage order: the element COO of a twin of ``a``
    # whose values are their storage indices
    twin = compressed_to_coo(xp, a._with_values(xp.reshape(xp.arange(n, dtype=xp.int64, device=dev), tuple(a._vals.shape)), -1))
    by_storage = xp.take(coo_positions(xp, twin), xp.argsort(xp.reshape(twin._vals, (-1,)), stable=False))
    groups = xp.take(xp.reshape(own.inverse_indices._vals, (-1,)), nan_at)
    # each NaN group has one member: their positions in group order, then in place of the NaN groups' entries
    positions = xp.take(xp.take(by_storage, nan_at), xp.argsort(groups, stable=False))
    is_nan = xp.isnan(own.values)
    rank = xp.maximum(xp.cumulative_sum(xp.astype(is_nan, xp.int64)) - 1, xp.zeros((), dtype=xp.int64, device=dev))
    return xp.where(is_nan, xp.take(positions, rank), indices)


@register("isin", (INDEXED, strided))
def _isin_sparse_strided(xp: Any, x1: SparseArray, x2: Any, invert: bool) -> SparseArray:
    """isin(sparse, strided) -> x1's layout (bool): the stored values and the fill value; O(nnz log m)."""
    if isinstance(x1, COOArray):
        x1 = coalesce_coo(xp, x1)
    vals = x1._vals
    found = xp.reshape(isin_values(xp, xp.reshape(vals, (-1,)), x2, invert), tuple(vals.shape))
    fill = xp.asarray([x1.fill_value], dtype=vals.dtype, device=array_api_compat.device(vals))
    return x1._with_values(found, bool(isin_values(xp, fill, x2, invert)[0]))


@register("isin", (INDEXED, ANY_SPARSE))
def _isin_sparse_sparse(xp: Any, x1: SparseArray, x2: SparseArray, invert: bool) -> SparseArray:
    """isin(sparse, sparse) -> x1's layout (bool): against the unique values of x2; O((nnz1 + nnz2) log nnz2)."""
    return cast(SparseArray, _isin_sparse_strided(xp, x1, _unique_values(xp, x2), invert))


@register("isin", (strided, ANY_SPARSE))
def _isin_strided_sparse(xp: Any, x1: Any, x2: SparseArray, invert: bool) -> Any:
    """isin(strided, sparse) -> strided: against the unique values of x2; O(n log nnz2)."""
    return isin_values(xp, x1, _unique_values(xp, x2), invert)


def isin_values(xp: Any, x1: Any, x2: Any, invert: bool) -> Any:
    """Whether each element of the strided ``x1`` is in the strided ``x2`` (is not, with ``invert``), NumPy's
    answer for operands of every real or bool dtype on every backend: ``xp.isin``, bool operands as their
    uint8 twin (torch and array-api-strict test no bool), on the signed twin where the backend compares no
    elements of an unsigned dtype (torch's uint16/32/64: both operands promoted, then cast, a bijection
    that keeps equality), and by a search where the backend's ``isin`` refuses the dtypes (:func:`_isin_by_search`).
    ``invert`` is applied here: array-api-strict's ``isin`` takes the argument and ignores it."""
    # bool as uint8, which promotes with every integer dtype (int8 has no common dtype with uint64)
    x1, x2 = (xp.astype(v, xp.uint8) if xp.isdtype(v.dtype, "bool") else v for v in (x1, x2))
    shape = tuple(x1.shape)
    # flat operands: torch's isin views them flat, which fails for a non-contiguous tensor (x.mT)
    x1, x2 = xp.reshape(x1, (-1,)), xp.reshape(x2, (-1,))
    mixed = xp.isdtype(x1.dtype, "integral") != xp.isdtype(x2.dtype, "integral")
    if not mixed and _no_common_dtype(xp, x1, x2):
        # uint64 beside signed integers, which the standard does not promote: compared exactly, as NumPy
        # does (in float64, distinct integers past 2**53 would be equal). A negative value equals no uint64
        # and the others convert to uint64 exactly
        if xp.isdtype(x1.dtype, "unsigned integer"):
            found = isin_values(xp, x1, xp.astype(x2[x2 >= 0], x1.dtype), False)
        else:
            nonnegative = x1 >= 0
            found = nonnegative & isin_values(xp, xp.astype(xp.where(nonnegative, x1, 0), x2.dtype), x2, False)
        found = xp.reshape(found, shape)
        return xp.logical_not(found) if invert else found
    if mixed:
        # integers beside floating values compare as NumPy compares them, in float64 (torch would compare
        # int32 with float16 in float16, where 2**31 - 1 is inf; the standard promotes neither kind)
        wide = float64_on(xp, array_api_compat.device(x1))
        x1, x2 = xp.astype(x1, wide), xp.astype(x2, wide)
    try:
        found = xp.isin(x1, x2)
    except (NotImplementedError, RuntimeError):
        # torch compares no uint16/32/64 elements, nor promotes them with other dtypes: both operands in the
        # standard's common dtype, on its signed twin where that is unsigned (a bijection that keeps equality)
        dtype = result_dtype(xp, x1.dtype, x2.dtype)
        twin = signed_twin(xp, dtype)
        if twin is None and x1.dtype == x2.dtype == dtype:
            raise  # nothing to cast: the backend's own refusal
        target = dtype if twin is None else twin
        found = xp.isin(xp.astype(xp.astype(x1, dtype), target), xp.astype(xp.astype(x2, dtype), target))
    except TypeError:
        # array-api-strict takes integer operands only, as the standard asks ("should"); the others compute
        # floating ones, and so does xsparse, for one answer on every backend
        found = _isin_by_search(xp, x1, x2)
    found = xp.reshape(found, shape)
    return xp.logical_not(found) if invert else found


def _no_common_dtype(xp: Any, x1: Any, x2: Any) -> bool:
    try:
        result_dtype(xp, x1.dtype, x2.dtype)
    except TypeError:
        return True
    return False


def _isin_by_search(xp: Any, x1: Any, x2: Any) -> Any:
    """``isin`` of real operands from a sort of ``x2`` and a search in it: ``v`` is in ``x2`` where the first
    element not below it equals it (never for NaN, which sorts last and equals nothing); O((n + m) log m)."""
    from ..._common import dtype_name

    try:
        dtype = xp.result_type(x1.dtype, x2.dtype)
    except TypeError:
        raise TypeError(
            f"isin: the backend promotes no {dtype_name(x1.dtype)} with {dtype_name(x2.dtype)} (x1.dtype={dtype_name(x1.dtype)}, "
            f"x2.dtype={dtype_name(x2.dtype)}). Cast one operand with xsparse.astype first."
        ) from None
    dev = array_api_compat.device(x1)
    values = xp.reshape(xp.astype(x1, dtype, copy=False), (-1,))
    s = xp.sort(xp.reshape(xp.astype(x2, dtype, copy=False), (-1,)), stable=False)
    m = int(s.shape[0])
    if m == 0:
        return xp.zeros(tuple(x1.shape), dtype=xp.bool, device=dev)
    at = xp.minimum(xp.searchsorted(s, values), xp.asarray(m - 1, dtype=xp.int64, device=dev))
    return xp.reshape(xp.take(s, at) == values, tuple(x1.shape))


def _unique_values(xp: Any, x: SparseArray) -> Any:
    """The distinct values of ``x`` (its stored values, and the fill value where an element is unspecified)."""
    if isinstance(x, COOArray):
        x = coalesce_coo(xp, x)
    flat = xp.reshape(x._vals, (-1,))
    if x.size > int(flat.shape[0]):
        fill = xp.asarray([x.fill_value], dtype=flat.dtype, device=array_api_compat.device(flat))
        flat = xp.concat([flat, fill])
    return flat
