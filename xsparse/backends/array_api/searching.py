"""Generic kernels of ``searchsorted``.

A sparse ``x2`` (the values searched for) keeps its structure: every stored value is looked up, and the
fill value once, which gives the result's fill value. A sparse ``x1`` (the sorted sequence, 1-D) is
never densified: the insertion index of ``v`` is the number of elements before it, that is the
specified elements before it (a search in their sorted values) plus, when the fill value sorts before
``v``, every unspecified element. That count does not depend on the order of ``x1``, so ``sorter`` is
not needed.
"""

from __future__ import annotations

from typing import Any

import array_api_compat

from ...dispatch import register
from ...formats import INDEXED, COOArray, SparseArray, sparse_coo, strided
from .conversion import coalesce_coo, result_dtype, signed_twin, to_ordered

__all__ = ["map_values", "search_values"]


def map_values(xp: Any, x: Any, fn: Any, fill_fn: Any) -> Any:
    """``fn`` applied to a strided ``x``, or to a sparse ``x``'s stored values with ``fill_fn(fill value)``
    as the new fill value (structure and indices shared)."""
    if not isinstance(x, SparseArray):
        return fn(x)
    if isinstance(x, COOArray):
        x = coalesce_coo(xp, x)  # duplicates add up before a value is mapped
    vals = x._vals
    mapped = xp.reshape(fn(xp.reshape(vals, (-1,))), tuple(vals.shape))
    return x._with_values(mapped, fill_fn(x.fill_value))


def _comparable(xp: Any, *arrays: Any) -> tuple[Any, ...]:
    """``arrays`` promoted by the standard's table (torch searches no two dtypes together), and on the
    order-preserving signed twin (conversion.to_ordered) where the backend compares no elements of their
    unsigned dtype (torch's uint16/32/64)."""
    dtype = result_dtype(xp, *(a.dtype for a in arrays))
    arrays = tuple(xp.astype(a, dtype, copy=False) for a in arrays)
    probe = xp.zeros((1,), dtype=dtype, device=array_api_compat.device(arrays[0]))
    try:
        xp.searchsorted(probe, probe)
        return arrays
    except (NotImplementedError, RuntimeError):
        if signed_twin(xp, dtype) is None:
            raise
    return tuple(to_ordered(xp, a) for a in arrays)


def search_values(xp: Any, x1: Any, x2: Any, side: str, sorter: Any) -> Any:
    """``xp.searchsorted`` of strided arrays, of any real dtypes: the plain call, or on :func:`_comparable`
    operands where the backend refuses their dtypes."""
    try:
        return xp.searchsorted(x1, x2, side=side, sorter=sorter)
    except (NotImplementedError, RuntimeError):
        if x1.dtype == x2.dtype and signed_twin(xp, x1.dtype) is None:
            raise
    s, v = _comparable(xp, x1, x2)
    return xp.searchsorted(s, v, side=side, sorter=sorter)


def _scalar(xp: Any, x: Any, value: Any) -> Any:
    return xp.asarray([value], dtype=x.dtype, device=array_api_compat.device(x))


@register("searchsorted", (strided, INDEXED))
def _searchsorted_strided_sparse(xp: Any, x1: Any, x2: SparseArray, side: str, sorter: Any) -> Any:
    """searchsorted(strided, sparse) -> x2's layout: search the stored values and the fill value; O(nnz log n)."""

    def search(v: Any) -> Any:
        return search_values(xp, x1, v, side, sorter)

    return map_values(xp, x2, search, lambda f: int(search(_scalar(xp, x2._vals, f))[0]))


@register("searchsorted", (sparse_coo, strided))
@register("searchsorted", (sparse_coo, INDEXED))
def _searchsorted_coo_any(xp: Any, x1: COOArray, x2: Any, side: str, sorter: Any) -> Any:
    """searchsorted(COO vector, any) -> x2's layout: count of the elements before each value; O((nnz + m) log nnz)."""
    c = coalesce_coo(xp, x1)
    # only comparisons read the sorted values, so the default (non-stable, faster) sort serves
    specified = xp.sort(c._vals, stable=False)
    n_unspecified = x1.shape[0] - int(specified.shape[0])
    fill = _scalar(xp, specified, x1.fill_value)

    def count(v: Any) -> Any:
        s, f, w = _comparable(xp, specified, fill, v)
        fill_before = (f < w) if side == "left" else (f <= w)
        if not xp.isdtype(w.dtype, "real floating"):
            found = xp.searchsorted(s, w, side=side)
        else:
            # NaN sorts last (NumPy's order; torch's search is undefined with NaN among the sorted values):
            # the values before the NaNs are searched, and a NaN query comes after all of them (left) or
            # after the NaNs too (right), and after a fill value that is not NaN (left) or any (right)
            k = int(xp.sum(xp.astype(~xp.isnan(s), xp.int64)))
            nan_query = xp.isnan(w)
            found = xp.searchsorted(s[:k], w, side=side)
            found = xp.where(nan_query, xp.asarray(k if side == "left" else int(s.shape[0]), dtype=found.dtype, device=array_api_compat.device(found)), found)
            fill_before = fill_before | (nan_query & (~xp.isnan(f) if side == "left" else True))
        return found + xp.astype(fill_before, found.dtype) * n_unspecified

    vals = x2._vals if isinstance(x2, SparseArray) else x2
    return map_values(xp, x2, count, lambda f: int(count(_scalar(xp, vals, f))[0]))
