"""Generic kernels of ``sort`` and ``argsort``.

``sort`` keeps a sparse array sparse. Along a *dense* dimension every stored sub-array is sorted and the
unspecified ones (all fill value) stay as they are. Along a *sparse* dimension every lane (the
elements that differ only in that index) is sorted with its unspecified elements counted as the fill
value: the lane's specified values that sort before the fill value move to its start, those that do
not to its end, and the unspecified elements fill the gap, so the number of specified elements is kept.
A descending sort is the ascending one reversed (as NumPy and torch order NaN: last ascending, first
descending).

``argsort`` of a sparse array is strided by definition: its result is a permutation of every lane, in
which no value repeats, so no element can be left unspecified. It is computed from the dense copy,
whose size is the result's.
"""

from __future__ import annotations

from typing import Any, cast

import array_api_compat

from ...dispatch import register
from ...formats import ANY_SPARSE, COMPRESSED, COOArray, CompressedArray, SparseArray, sparse_coo
from ...formats._ops import lexsort_indices
from .conversion import coalesce_coo, compressed_to_coo, take_values, through_ordered
from .shape import as_layout_of

__all__ = ["sort_coo"]


def _is_nan(value: Any) -> bool:
    return isinstance(value, (float, complex)) and value != value


def _supports_sort(xp: Any, a: SparseArray, axis: int, descending: bool, stable: bool) -> str | None:
    if _is_nan(a.fill_value):
        return "the fill value is NaN, whose place in an order differs between backends"
    dims = a.sparse_dim() + (a.batch_dim() if isinstance(a, CompressedArray) else 0)
    if a.dense_dim() and axis < dims:
        return (
            f"sorting along sparse dimension {axis} of a hybrid array (dense_dim={a.dense_dim()}) gives every dense "
            "position its own pattern; convert with xsparse.to_sparse_coo(xsparse.to_dense(x)) first"
        )
    return None


def sort_coo(xp: Any, a: COOArray, axis: int, descending: bool) -> COOArray:
    """Sort a COO array along ``axis`` (see the module docstring); O(nnz log nnz).

    An unsigned dtype that the backend compares not (torch's uint16/32/64) is sorted on its
    order-preserving signed twin (conversion.through_ordered)."""
    return cast(COOArray, through_ordered(xp, a, lambda c, dtype: _sort_coo_values(xp, c, axis, descending)))


def _sort_coo_values(xp: Any, a: COOArray, axis: int, descending: bool) -> COOArray:
    a = coalesce_coo(xp, a)
    sd = a.sparse_dim()
    if axis >= sd:
        vals = xp.sort(a._vals, axis=axis - sd + 1, descending=descending, stable=True)
        return a._with_values(vals, a.fill_value)
    idx, v = a._idx, a._vals
    nse = int(v.shape[0])
    if nse == 0:
        return a
    dev = array_api_compat.device(v)
    others = [d for d in range(sd) if d != axis]
    # group the entries by lane, each lane's entries in ascending order of value
    order = xp.argsort(v, stable=True)
    if others:
        lanes = xp.take(xp.take(idx, xp.asarray(others, device=dev), axis=0), order, axis=1)
        order = xp.take(order, lexsort_indices(xp, lanes), axis=0)
        lane = xp.take(xp.take(idx, xp.asarray(others, device=dev), axis=0), order, axis=1)
        first = xp.ones((1,), dtype=xp.bool, device=dev)
        is_start = xp.concat([first, xp.any(lane[:, 1:] != lane[:, :-1], axis=0)])
    else:
        is_start = xp.concat([xp.ones((1,), dtype=xp.bool, device=dev), xp.zeros((nse - 1,), dtype=xp.bool, device=dev)])
    sorted_v = take_values(xp, v, order, axis=0)
    starts = xp.nonzero(is_start)[0]
    lane_id = xp.cumulative_sum(xp.astype(is_start, xp.int64)) - 1
    bounds = xp.concat([starts, xp.asarray([nse], dtype=starts.dtype, device=dev)])
    counts = bounds[1:] - bounds[:-1]
    start = xp.take(starts, lane_id)
    count = xp.take(counts, lane_id)
    rank = xp.arange(nse, dtype=xp.int64, device=dev) - xp.astype(start, xp.int64)
    n = a.shape[axis]
    before = sorted_v < a.fill_value
    position = xp.where(before, rank, n - (xp.astype(count, xp.int64) - rank))
    if descending:
        position = (n - 1) - position
    new_idx = xp.take(idx, order, axis=1)
    rows = [new_idx[d, :] if d != axis else xp.astype(position, idx.dtype) for d in range(sd)]
    result = COOArray(
        xp.stack(rows, axis=0), sorted_v, a.shape, backend=a._backend, xp=xp, coalesced=False, fill_value=a.fill_value
    )
    return coalesce_coo(xp, result)


@register("sort", (sparse_coo,), supports=_supports_sort)
def _sort_coo(xp: Any, a: COOArray, axis: int, descending: bool, stable: bool) -> COOArray:
    """sort(COO) -> COO: lanes sorted with the fill value in its place; O(nnz log nnz)."""
    return sort_coo(xp, a, axis, descending)


@register("sort", (COMPRESSED,), supports=_supports_sort)
def _sort_compressed(xp: Any, a: CompressedArray, axis: int, descending: bool, stable: bool) -> SparseArray:
    """sort(CSR, CSC, BSR, BSC) -> same layout: on the element COO, compressed again; O(nnz log nnz)."""
    return as_layout_of(xp, sort_coo(xp, compressed_to_coo(xp, a), axis, descending), a, "sort")


@register("argsort", (ANY_SPARSE,))
def _argsort_sparse(xp: Any, a: SparseArray, axis: int, descending: bool, stable: bool) -> Any:
    """argsort(sparse) -> strided (a permutation: strided by definition): argsort of the dense copy; O(size log)."""
    from ..._conversion import to_dense

    return xp.argsort(to_dense(a), axis=axis, descending=descending, stable=stable)
