"""Generic kernels of ``searchsorted``.

A sparse ``x2`` (the values searched for) keeps its structure: every stored value is looked up, and the
fill value once, which gives the result's fill value. A sparse ``x1`` (the sorted sequence, 1-D) is
never densified: the insertion index of ``v`` is the number of elements before it, that is the
specified elements before it (a search in their sorted values) plus, when the fill value sorts before
``v``, every unspecified element. That count does not depend on the order of ``x1``, so ``sorter`` is
not needed.

Both kernels give NumPy's answer where NaN is among the values: NaN sorts last (as ``xsparse.sort`` puts
it), a NaN query comes after every value but the NaNs (``side="left"``) or after all of them (``"right"``).
torch's search is undefined with NaN among the sorted values, so the values before the NaNs are searched
and NaN queries are placed by rule (:func:`_search_nan_last`). The indices have the namespace's default
index dtype, as the standard says (``jax.numpy.searchsorted`` gives int32 even in 64-bit mode).
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


def index_dtype(xp: Any, x: Any) -> Any:
    """The namespace's default index dtype on ``x``'s device: the dtype of the standard's ``searchsorted``
    (int64 for a namespace older than the standard's inspection API, as xsparse computes indices in it)."""
    info = getattr(xp, "__array_namespace_info__", None)
    if info is None:
        return xp.int64
    return info().default_dtypes(device=array_api_compat.device(x))["indexing"]


def search_values(xp: Any, x1: Any, x2: Any, side: str, sorter: Any) -> Any:
    """``xp.searchsorted`` of strided arrays, of any real dtypes: the plain call, or on :func:`_comparable`
    operands where the backend refuses their dtypes; the indices in the default index dtype."""
    try:
        found = xp.searchsorted(x1, x2, side=side, sorter=sorter)
    except (NotImplementedError, RuntimeError):
        if x1.dtype == x2.dtype and signed_twin(xp, x1.dtype) is None:
            raise
        s, v = _comparable(xp, x1, x2)
        found = xp.searchsorted(s, v, side=side, sorter=sorter)
    return xp.astype(found, index_dtype(xp, found), copy=False)


def _nan_count(xp: Any, s: Any) -> int:
    """How many NaNs the real ``s`` holds (0 for an integer or bool one)."""
    return int(xp.count_nonzero(xp.isnan(s))) if xp.isdtype(s.dtype, "real floating") else 0


def _search_nan_last(xp: Any, s: Any, nans: int, w: Any, side: str, sorter: Any = None) -> Any:
    """:func:`search_values` of ``w`` in ``s`` (in order by ``sorter``) whose last ``nans`` elements in
    that order are NaN, with NumPy's answer for NaN: the elements before the NaNs are searched, and a NaN
    query comes after them (left) or after the NaNs too (right)."""
    n = int(s.shape[0])
    if nans:
        s = s if sorter is None else xp.take(s, sorter)
        s, sorter = s[: n - nans], None
    found = search_values(xp, s, w, side, sorter)
    if not xp.isdtype(w.dtype, "real floating"):
        return found
    at = xp.asarray(n - nans if side == "left" else n, dtype=found.dtype, device=array_api_compat.device(found))
    return xp.where(xp.isnan(w), at, found)


def _scalar(xp: Any, x: Any, value: Any) -> Any:
    return xp.asarray([value], dtype=x.dtype, device=array_api_compat.device(x))


@register("searchsorted", (strided, INDEXED))
def _searchsorted_strided_sparse(xp: Any, x1: Any, x2: SparseArray, side: str, sorter: Any) -> Any:
    """searchsorted(strided, sparse) -> x2's layout: search the stored values and the fill value; O(nnz log n)."""

    nans = _nan_count(xp, x1)

    def search(v: Any) -> Any:
        return _search_nan_last(xp, x1, nans, v, side, sorter)

    return map_values(xp, x2, search, lambda f: int(search(_scalar(xp, x2._vals, f))[0]))


@register("searchsorted", (sparse_coo, strided))
@register("searchsorted", (sparse_coo, INDEXED))
def _searchsorted_coo_any(xp: Any, x1: COOArray, x2: Any, side: str, sorter: Any) -> Any:
    """searchsorted(COO vector, any) -> x2's layout: count of the elements before each value; O((nnz + m) log nnz)."""
    c = coalesce_coo(xp, x1)
    # only comparisons read the sorted values, so the default (non-stable, faster) sort serves; a vector
    # with no sparse dimension (dense_dim=1) stores its elements as one row of values, which the reshape
    # makes the same list of specified elements
    specified = xp.sort(xp.reshape(c._vals, (-1,)), stable=False)
    n_unspecified = x1.shape[0] - int(specified.shape[0])
    fill = _scalar(xp, specified, x1.fill_value)

    def count(v: Any) -> Any:
        s, f, w = _comparable(xp, specified, fill, v)
        found = _search_nan_last(xp, s, _nan_count(xp, s), w, side)
        # NaN sorts last: a NaN fill value sorts before no query (left) or before a NaN one (right), and a
        # fill value that is not NaN before every NaN query
        fill_before = (f < w) if side == "left" else (f <= w)
        if xp.isdtype(w.dtype, "real floating"):
            nan_query = xp.isnan(w)
            fill_before = fill_before | (nan_query & (~xp.isnan(f) if side == "left" else True))
        # the one-element fill broadcasts a 0-d query to (1,): the result has the query's shape
        return xp.reshape(found + xp.astype(fill_before, found.dtype) * n_unspecified, tuple(v.shape))

    vals = x2._vals if isinstance(x2, SparseArray) else x2
    return map_values(xp, x2, count, lambda f: int(count(_scalar(xp, vals, f))[0]))
