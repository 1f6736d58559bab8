"""Generic kernels of ``sort`` and ``argsort``.

``sort`` keeps a sparse array sparse. Along a *dense* dimension every stored sub-array is sorted and the
unspecified ones (all fill value) stay as they are. Along a *sparse* dimension every lane (the
elements that differ only in that index) is sorted with its unspecified elements counted as the fill
value: the lane's specified values that sort before the fill value move to its start, those that do
not to its end, and the unspecified elements fill the gap, so the number of specified elements is kept
(a BSR or BSC result stores every block that holds one of them, and a batched compressed result as
many in every batch as the fullest needs: there the nnz may grow; docs/namespace.md).
A descending sort is the ascending one reversed (as NumPy and torch order NaN: last ascending, first
descending).

``argsort`` of a sparse array is strided by definition: its result is a permutation of every lane, in
which no value repeats, so no element can be left unspecified. It is computed from the dense copy,
whose size is the result's.

No sort here is asked to be stable where stability cannot show in the result (a stable sort is several
times slower than the default one: 17 ms against 2.7 ms for 200k float64 on NumPy). Equal values
have equal bits except the two zeros and the NaNs, so :func:`ascending_order` sorts without stability
and puts those two runs back in index order: the sorted values are a stable sort's, bit for bit. The
lanes are then grouped by one sort of a unique integer key (lane, rank), and the result put in
index order by one sort of its unique linear indices; both keys are distinct, so no order of equal keys
can differ. Where a key would overflow int64 the stable lexicographic sorts of before run instead.

Bool values are sorted as their int8 twin (:func:`orderable`), False before True as in NumPy and torch:
the standard's ``sort`` and ``argsort`` take real numbers only (array-api-strict refuses bool), while
its ``unique_*`` functions, which sort here, take every dtype.
"""

from __future__ import annotations

from typing import Any, cast

import array_api_compat

from ...dispatch import register
from ...formats import ANY_SPARSE, COMPRESSED, COOArray, CompressedArray, SparseArray, sparse_coo
from ...formats._ops import contiguous, lexsort_indices, prod
from .conversion import _linearize, coalesce_coo, compressed_to_coo, fill_operand, take_values, through_ordered
from .shape import as_layout_of

__all__ = [
    "ascending_order",
    "group_by_lane",
    "lane_sort_reason",
    "orderable",
    "sort_by_lane",
    "sort_coo",
    "sorted_values",
    "stable_order",
]

_INT64_MAX = 2**63 - 1


def _count(xp: Any, mask: Any) -> int:
    # count_nonzero, not a sum of the mask cast to int64: no array of n integers to allocate
    return int(xp.count_nonzero(mask))


def orderable(xp: Any, v: Any) -> Any:
    """``v``, or its int8 twin where ``v`` is bool (False, True -> 0, 1): what the backend's sorts take, as
    the standard sorts real numbers only (array-api-strict refuses bool)."""
    return xp.astype(v, xp.int8) if xp.isdtype(v.dtype, "bool") else v


def ascending_order(xp: Any, v: Any) -> Any:
    """The ascending order of the 1-D real ``v`` whose sorted values are a stable sort's, bit for bit; O(n log n).

    A default (non-stable) argsort, with the two runs whose equal elements can differ in bits put back
    in index order: the zeros (``-0.0 == +0.0``) and the NaNs (last, as the standard sorts them, each
    with its own sign and payload). Other equal elements have equal bits and may come in any order.
    """
    order = xp.argsort(orderable(xp, v), stable=False)
    if not xp.isdtype(v.dtype, "real floating"):
        return order
    n = int(v.shape[0])
    lo, hi, nan = _count(xp, v < 0), _count(xp, v <= 0), n - _count(xp, xp.isnan(v))
    if hi - lo < 2 and n - nan < 2:
        return order
    runs = [order[:lo], xp.sort(order[lo:hi], stable=False), order[hi:nan], xp.sort(order[nan:], stable=False)]
    return xp.concat(runs)


def stable_order(xp: Any, v: Any) -> Any:
    """The stable argsort of the 1-D real ``v``, exactly, from default sorts: O(n log n).

    :func:`ascending_order` puts the runs of equal values together (the NaNs, each its own run, in index
    order); one default sort of the distinct keys ``run * n + index`` then orders each run by index.
    On NumPy that is a default argsort and a sort of int64, about a quarter of a stable argsort's time.
    """
    n = int(v.shape[0])
    if n * n > _INT64_MAX:
        return xp.argsort(orderable(xp, v), stable=True)
    order = ascending_order(xp, v)
    if n < 2:
        return order
    s = take_values(xp, v, order, axis=0)
    run = xp.cumulative_sum(xp.astype(s[1:] != s[:-1], xp.int64), include_initial=True)
    key = xp.sort(run * n + xp.astype(order, xp.int64), stable=False)
    return key % n


def sorted_values(xp: Any, v: Any) -> Any:
    """The 1-D ``v`` sorted ascending, bit for bit as a stable sort sorts it; O(n log n).

    A default (non-stable) sort of the values alone, with the run of zeros and the NaNs (see
    :func:`ascending_order`) replaced by those of ``v`` in index order: even a single NaN, as NumPy's
    SIMD sort writes every NaN back as the default quiet NaN, sign and payload lost.
    """
    if xp.isdtype(v.dtype, "bool"):
        return xp.astype(xp.sort(orderable(xp, v), stable=False), v.dtype)
    s = xp.sort(v, stable=False)
    if not xp.isdtype(v.dtype, "real floating"):
        return s
    n = int(v.shape[0])
    if n == 0:
        return s
    # the runs' bounds: the NaNs are last (counted only if there are any), and the zeros are found by
    # binary search in what comes before them (libraries' searches place a NaN differently)
    nan = n - _count(xp, xp.isnan(s)) if bool(xp.isnan(s[n - 1])) else n
    zero = xp.zeros((1,), dtype=v.dtype, device=array_api_compat.device(v))
    lo, hi = (int(xp.searchsorted(s[:nan], zero, side=side)[0]) for side in ("left", "right"))
    if hi - lo > 1:
        s = xp.concat([s[:lo], xp.take(v, xp.nonzero(v == 0)[0]), s[hi:]])
    if n - nan > 0:
        s = xp.concat([s[:nan], xp.take(v, xp.nonzero(xp.isnan(v))[0])])
    return s


def group_by_lane(xp: Any, order: Any, lane: Any, lane_count: int) -> tuple[Any, Any]:
    """``(order, lane)`` with ``order`` stably regrouped by ``lane`` (int64 lane of each element, ids in
    ``[0, lane_count)``), and the lane of each regrouped element; O(n log n).

    One non-stable sort of the distinct keys ``lane * n + rank`` (rank: the place in ``order``) where
    they fit int64, else a stable argsort of the lanes.
    """
    n = int(order.shape[0])
    dev = array_api_compat.device(order)
    by_order = xp.take(lane, order)
    if lane_count * max(n, 1) <= _INT64_MAX:
        key = xp.sort(by_order * n + xp.arange(n, dtype=xp.int64, device=dev), stable=False)
        return xp.take(order, key % n), key // n
    perm = xp.argsort(by_order, stable=True)
    return xp.take(order, perm), xp.take(by_order, perm)


def _is_nan(value: Any) -> bool:
    return isinstance(value, (float, complex)) and value != value


def _supports_sort(xp: Any, a: SparseArray, axis: int, descending: bool, stable: bool) -> str | None:
    if _is_nan(a.fill_value):
        return "the fill value is NaN: the kernel places a lane's unspecified elements by comparing its values with the fill value, and NaN compares with nothing"
    dims = a.sparse_dim() + (a.batch_dim() if isinstance(a, CompressedArray) else 0)
    if a.dense_dim() and axis < dims:
        return (
            f"sorting along sparse dimension {axis} of a hybrid array (dense_dim={a.dense_dim()}) gives every dense "
            "position its own pattern; convert with xsparse.to_sparse_coo(xsparse.to_dense(x)) first"
        )
    return None


def lane_sort_reason(xp: Any, a: CompressedArray, axis: int, descending: bool, stable: bool, kernel: str) -> str | None:
    """Why a backend's lane sort of the compressed ``a`` (a sort of the values, then a regrouping by lane
    with integer keys) cannot sort along ``axis``, or None; ``kernel`` names it in the reason."""
    reason = _supports_sort(xp, a, axis, descending, stable)
    if reason is not None:
        return reason
    if a.dense_dim():
        return f"the {kernel} kernel sorts arrays without dense dimensions (dense_dim={a.dense_dim()})"
    if axis < a.batch_dim():
        return f"the {kernel} kernel sorts along a sparse dimension, not along batch dimension {axis}"
    batches = prod(tuple(a.shape[: a.batch_dim()]))
    if (batches + 1) * (max(a.shape[-2:]) + 1) * (a.nnz + 1) > _INT64_MAX:
        return "its lane keys would overflow int64"
    if axis == a.batch_dim() + a.layout.compressed_dim:
        # one lane per plain index: offsets for each take memory and time in the plain dimension's size
        lanes = batches * a.shape[a.batch_dim() + 1 - a.layout.compressed_dim]
        if lanes > _LANES_PER_ENTRY * (batches * a.nnz) + _FEW_LANES:
            return (
                f"sorting along the compressed dimension takes one lane per plain index ({lanes} lanes for {batches * a.nnz} "
                "entries): the generic kernel sorts the entries alone"
            )
    return None


# The lane sort along the compressed dimension computes offsets for every lane: it declines where the
# lanes outnumber the entries by more than this factor (and a few), for the generic kernel's O(nnz log nnz).
_LANES_PER_ENTRY = 8
_FEW_LANES = 1 << 16


def _lane_bounds(xp: Any, sorted_lanes: Any, nlanes: int) -> Any:
    """Where each of the lanes ``0 .. nlanes`` starts in the ascending ``sorted_lanes`` (``nlanes + 1``
    offsets, the last one its length): the counts of a bincount, cumulated, without a scatter."""
    ids = xp.arange(nlanes + 1, dtype=xp.int64, device=array_api_compat.device(sorted_lanes))
    return xp.astype(xp.searchsorted(sorted_lanes, ids), xp.int64)


def sort_by_lane(xp: Any, a: CompressedArray, axis: int, descending: bool, stable_order: Any) -> CompressedArray:
    """sort(CSR, CSC) along a sparse dimension, the algorithm of the backends' native kernels (see
    :func:`lane_sort_reason` for what it takes): one sort of the values (:func:`ascending_order`), then a
    regrouping by lane with ``stable_order(key, nkeys)``, the backend's stable argsort of int64 keys in
    ``[0, nkeys)`` (a radix sort where it has one). Bit for bit the generic kernel's result; O(nnz log nnz).
    """
    nb = a.batch_dim()
    batches = prod(tuple(a.shape[:nb]))
    nse = a.nnz
    total = batches * nse
    if total == 0:
        return a
    dev = array_api_compat.device(a._vals)
    comp = xp.astype(xp.reshape(a._compressed, (batches, -1)), xp.int64)
    plain, vals, fill = a._plain, xp.reshape(a._vals, (total,)), a.fill_value
    ncomp = int(comp.shape[1]) - 1
    nplain = a.shape[nb + 1 - a.layout.compressed_dim]
    n = a.shape[axis]
    slots = xp.arange(total, dtype=xp.int64, device=dev)

    def by_lane(lane: Any, nlanes: int) -> Any:
        order = ascending_order(xp, vals)
        return xp.take(order, stable_order(xp.take(lane, order), nlanes))

    if axis != nb + a.layout.compressed_dim:
        # each compressed slice is a lane, stored contiguously: the structure stays
        counts = xp.reshape(xp.diff(comp, axis=1), (-1,))
        lane = xp.repeat(xp.arange(batches * ncomp, dtype=xp.int64, device=dev), counts)
        svals = xp.take(vals, by_lane(lane, batches * ncomp))
        offsets = xp.reshape(comp[:, :-1] + xp.arange(batches, dtype=xp.int64, device=dev)[:, None] * nse, (-1,))
        start, count = xp.take(offsets, lane), xp.take(counts, lane)
        rank = slots - start
        position = xp.where(svals < fill_operand(xp, svals, fill), rank, n - count + rank)
        if descending:
            reverse = start + count - 1 - rank
            svals, position = xp.take(svals, reverse), (n - 1) - xp.take(position, reverse)
        new_plain = xp.reshape(xp.astype(position, plain.dtype), tuple(plain.shape))
        return CompressedArray(
            a._compressed, new_plain, xp.reshape(svals, tuple(a._vals.shape)), a.shape, layout=a.layout,
            backend=a._backend, xp=xp, fill_value=fill,
        )  # fmt: skip
    # along the compressed dimension a lane is one plain index of one batch
    batch_of = xp.repeat(xp.arange(batches, dtype=xp.int64, device=dev), nse)
    lane = batch_of * nplain + xp.astype(xp.reshape(plain, (total,)), xp.int64)
    order = by_lane(lane, batches * nplain)
    svals, lane_sorted = xp.take(vals, order), xp.take(lane, order)
    bounds = _lane_bounds(xp, lane_sorted, batches * nplain)
    lane_starts = bounds[:-1]
    start = xp.take(lane_starts, lane_sorted)
    count = xp.take(bounds[1:] - lane_starts, lane_sorted)
    rank = slots - start
    position = xp.where(svals < fill_operand(xp, svals, fill), rank, n - count + rank)
    if descending:
        position = (n - 1) - position
    # compress again: a stable sort by (batch, new compressed index) keeps each one's plain indices ascending
    key = (lane_sorted // nplain) * ncomp + position
    perm = stable_order(key, batches * ncomp)
    new_plain = xp.reshape(xp.astype(xp.take(lane_sorted, perm) % nplain, plain.dtype), tuple(plain.shape))
    # the new compressed indices: where each (batch, slice) starts among the sorted keys, less the
    # entries of the batches before it
    starts = _lane_bounds(xp, xp.take(key, perm), batches * ncomp)
    batch_ids = xp.arange(batches, dtype=xp.int64, device=dev)[:, None]
    at = batch_ids * ncomp + xp.arange(ncomp + 1, dtype=xp.int64, device=dev)[None, :]
    new_comp = xp.reshape(xp.take(starts, xp.reshape(at, (-1,))), (batches, ncomp + 1)) - batch_ids * nse
    return CompressedArray(
        xp.reshape(xp.astype(new_comp, a._compressed.dtype), tuple(a._compressed.shape)), new_plain,
        xp.reshape(xp.take(svals, perm), tuple(a._vals.shape)), a.shape, layout=a.layout, backend=a._backend,
        xp=xp, fill_value=fill,
    )  # fmt: skip


def sort_coo(xp: Any, a: COOArray, axis: int, descending: bool) -> COOArray:
    """Sort a COO array along ``axis`` (see the module docstring); O(nnz log nnz).

    An unsigned dtype that the backend compares not (torch's uint16/32/64) is sorted on its
    order-preserving signed twin (conversion.through_ordered), a bool one on its int8 twin (:func:`orderable`)."""
    if xp.isdtype(a.dtype, "bool"):
        s = sort_coo(xp, a._with_values(orderable(xp, a._vals), int(a.fill_value)), axis, descending)
        return s._with_values(xp.astype(s._vals, a.dtype), bool(s.fill_value))
    return cast(COOArray, through_ordered(xp, a, lambda c, dtype: _sort_coo_values(xp, c, axis, descending)))


def _sort_coo_values(xp: Any, a: COOArray, axis: int, descending: bool) -> COOArray:
    a = coalesce_coo(xp, a)
    sd = a.sparse_dim()
    if axis >= sd:
        vals = xp.sort(a._vals, axis=axis - sd + 1, descending=descending, stable=True)
        # a descending sort may be a reversed view (NumPy's), and values must be contiguous (invariant 3.7)
        return a._with_values(contiguous(a._backend, xp, vals), a.fill_value)
    idx, v = a._idx, a._vals
    nse = int(v.shape[0])
    if nse == 0:
        return a
    dev = array_api_compat.device(v)
    others = [d for d in range(sd) if d != axis]
    other_shape = tuple(a.shape[d] for d in others)
    # group the entries by lane, each lane's entries in ascending order of value
    order = ascending_order(xp, v)
    if not others:
        lane = xp.zeros((nse,), dtype=xp.int64, device=dev)
    elif prod(other_shape) <= _INT64_MAX:
        lane_of = _linearize(xp, xp.take(idx, xp.asarray(others, device=dev), axis=0), other_shape)
        order, lane = group_by_lane(xp, order, lane_of, prod(other_shape))
    else:
        lanes = xp.take(xp.take(idx, xp.asarray(others, device=dev), axis=0), order, axis=1)
        order = xp.take(order, lexsort_indices(xp, lanes), axis=0)
        lane_idx = xp.take(xp.take(idx, xp.asarray(others, device=dev), axis=0), order, axis=1)
        lane = xp.cumulative_sum(xp.astype(xp.any(lane_idx[:, 1:] != lane_idx[:, :-1], axis=0), xp.int64), include_initial=True)
    is_start = xp.concat([xp.ones((1,), dtype=xp.bool, device=dev), lane[1:] != lane[:-1]])
    sorted_v = take_values(xp, v, order, axis=0)
    starts = xp.nonzero(is_start)[0]
    lane_id = xp.cumulative_sum(xp.astype(is_start, xp.int64)) - 1
    bounds = xp.concat([starts, xp.asarray([nse], dtype=starts.dtype, device=dev)])
    counts = bounds[1:] - bounds[:-1]
    start = xp.astype(xp.take(starts, lane_id), xp.int64)
    count = xp.astype(xp.take(counts, lane_id), xp.int64)
    rank = xp.arange(nse, dtype=xp.int64, device=dev) - start
    n = a.shape[axis]
    before = sorted_v < fill_operand(xp, sorted_v, a.fill_value)
    position = xp.where(before, rank, n - (count - rank))
    if descending:
        position = (n - 1) - position
    new_idx = xp.take(idx, order, axis=1)
    rows = [new_idx[d, :] if d != axis else xp.astype(position, idx.dtype) for d in range(sd)]
    new_idx = xp.stack(rows, axis=0)
    # the lanes come in index order and their positions in (descending: reverse) order, so the entries
    # are in index order along the last sparse dimension once each lane of a descending sort is reversed;
    # along another, one sort of the distinct linear indices puts them in order
    if axis == sd - 1:
        perm = (start + count - 1 - rank) if descending else None
    elif prod(tuple(a.shape[:sd])) <= _INT64_MAX:
        perm = xp.argsort(_linearize(xp, new_idx, tuple(a.shape[:sd])), stable=False)
    else:
        result = COOArray(new_idx, sorted_v, a.shape, backend=a._backend, xp=xp, coalesced=False, fill_value=a.fill_value)
        return coalesce_coo(xp, result)
    if perm is not None:
        new_idx = xp.take(new_idx, perm, axis=1)
        sorted_v = take_values(xp, sorted_v, perm, axis=0)
    return COOArray(new_idx, sorted_v, a.shape, backend=a._backend, xp=xp, coalesced=True, fill_value=a.fill_value)


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

    return xp.argsort(orderable(xp, to_dense(a)), axis=axis, descending=descending, stable=stable)
