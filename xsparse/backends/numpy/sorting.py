"""Native sorting kernels of the NumPy backend: ``sort`` of CSR and CSC arrays.

Every result is the generic kernel's, bit for bit; only the sorts change. NumPy's default sort (SIMD
introsort) is several times faster than its stable one (for 200k float64: 0.8 ms for ``np.sort``,
2.7 ms for ``np.argsort``, 17 ms for a stable argsort), and equal values have equal bits except the two
zeros and the NaNs, whose runs ``ascending_order`` puts back in index order. A lane sort (``sort``
along a sparse dimension) sorts all the values once, then regroups them by lane with a stable sort of
the lane ids: NumPy's radix sort (``kind="stable"`` on 16-bit keys, O(n)) for up to 65536 lanes, else
one default sort of the distinct keys ``lane * n + rank``. Along the plain dimension a compressed array
keeps its compressed indices: each slice is a lane, and its specified elements stay as many.

COO arrays, ``unique`` and ``searchsorted`` have no NumPy kernels: the generic ones, which sort
without stability where it cannot show, run at NumPy's speed. (A COO kernel that coalesced with NumPy's
compiled kernel would add duplicates in another order than the generic coalesce, which can change the
last bit of a floating sum.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dispatch import register
from ...formats import CompressedArray, SparseArray, sparse_csc, sparse_csr
from ...formats._ops import prod
from ..array_api.sorting import _supports_sort, ascending_order

__all__: list[str] = []

_INT64_MAX = 2**63 - 1
_RADIX_KEYS = 1 << 16


def _stable_order(key: np.ndarray, nkeys: int) -> np.ndarray:
    """The stable argsort of the int64 ``key`` (values in ``[0, nkeys)``); O(n) for 16-bit keys."""
    n = key.shape[0]
    if nkeys <= _RADIX_KEYS:
        return np.asarray(np.argsort(key.astype(np.uint16), kind="stable"))
    if nkeys * max(n, 1) <= _INT64_MAX:
        return np.asarray(np.sort(key * n + np.arange(n, dtype=np.int64)) % n)
    return np.asarray(np.argsort(key, kind="stable"))


def _by_lane(xp: Any, vals: np.ndarray, lane: np.ndarray, nlanes: int) -> np.ndarray:
    """The permutation that sorts ``vals`` within each lane, lanes in ascending order: the generic
    kernels' order wherever bits can tell (``ascending_order``), regrouped stably by lane."""
    order = np.asarray(ascending_order(xp, vals))
    return np.asarray(order[_stable_order(lane[order], nlanes)])


def _supports_sort_compressed(xp: Any, a: CompressedArray, axis: int, descending: bool, stable: bool) -> str | None:
    reason = _supports_sort(xp, a, axis, descending, stable)
    if reason is not None:
        return reason
    if a.dense_dim():
        return f"the NumPy kernel sorts arrays without dense dimensions (dense_dim={a.dense_dim()})"
    if axis < a.batch_dim():
        return f"the NumPy kernel sorts along a sparse dimension, not along batch dimension {axis}"
    if (prod(tuple(a.shape[: a.batch_dim()])) + 1) * (max(a.shape[-2:]) + 1) * (a.nnz + 1) > _INT64_MAX:
        return "its lane keys would overflow int64"
    return None


@register("sort", (sparse_csr,), backend="numpy", supports=_supports_sort_compressed)
@register("sort", (sparse_csc,), backend="numpy", supports=_supports_sort_compressed)
def _sort_compressed_numpy(xp: Any, a: CompressedArray, axis: int, descending: bool, stable: bool) -> SparseArray:
    """sort(CSR, CSC) -> same layout: one sort of the values, a radix regrouping by lane; O(nnz log nnz)."""
    nb = a.batch_dim()
    batches = prod(tuple(a.shape[:nb]))
    nse = a.nnz
    total = batches * nse
    if total == 0:
        return a
    comp = np.asarray(a._compressed).reshape(batches, -1).astype(np.int64)
    plain = np.asarray(a._plain)
    vals = np.asarray(a._vals).reshape(total)
    ncomp = comp.shape[1] - 1
    compressed_axis = nb + a.layout.compressed_dim
    nplain = a.shape[nb + 1 - a.layout.compressed_dim]
    n = a.shape[axis]
    slots = np.arange(total, dtype=np.int64)
    fill = a.fill_value
    if axis != compressed_axis:
        # each compressed slice is a lane, stored contiguously: the structure stays
        counts = np.diff(comp, axis=1).reshape(-1)
        lane = np.repeat(np.arange(batches * ncomp, dtype=np.int64), counts)
        order = _by_lane(xp, vals, lane, batches * ncomp)
        svals = vals[order]
        start = ((comp[:, :-1] + (np.arange(batches, dtype=np.int64) * nse)[:, None]).reshape(-1))[lane]
        count = counts[lane]
        rank = slots - start
        position = np.where(svals < fill, rank, n - count + rank)
        if descending:
            reverse = start + count - 1 - rank
            svals, position = svals[reverse], (n - 1) - position[reverse]
        new_plain = position.astype(plain.dtype).reshape(plain.shape)
        return CompressedArray(
            a._compressed, new_plain, svals.reshape(np.shape(a._vals)), a.shape, layout=a.layout,
            backend=a._backend, xp=xp, fill_value=fill,
        )  # fmt: skip
    # along the compressed dimension a lane is one plain index of one batch
    batch_of = np.repeat(np.arange(batches, dtype=np.int64), nse)
    lane = batch_of * nplain + plain.reshape(total).astype(np.int64)
    order = _by_lane(xp, vals, lane, batches * nplain)
    svals = vals[order]
    lane_sorted = lane[order]
    lane_counts = np.bincount(lane, minlength=batches * nplain)
    lane_starts = np.cumsum(lane_counts) - lane_counts
    start, count = lane_starts[lane_sorted], lane_counts[lane_sorted]
    rank = slots - start
    position = np.where(svals < fill, rank, n - count + rank)
    if descending:
        position = (n - 1) - position
    # compress again: a stable sort by (batch, new compressed index) keeps each one's plain indices ascending
    key = (lane_sorted // nplain) * ncomp + position
    perm = _stable_order(key, batches * ncomp)
    new_plain = (lane_sorted[perm] % nplain).astype(plain.dtype).reshape(plain.shape)
    per_slice = np.bincount(key, minlength=batches * ncomp).reshape(batches, ncomp)
    new_comp = np.zeros((batches, ncomp + 1), dtype=np.int64)
    np.cumsum(per_slice, axis=1, out=new_comp[:, 1:])
    comp_dtype = np.asarray(a._compressed).dtype
    return CompressedArray(
        new_comp.astype(comp_dtype).reshape(np.shape(a._compressed)), new_plain,
        svals[perm].reshape(np.shape(a._vals)), a.shape, layout=a.layout, backend=a._backend, xp=xp, fill_value=fill,
    )  # fmt: skip
