"""Native sorting kernels of the NumPy backend: ``sort`` of CSR and CSC arrays, ``unique`` of COO and
compressed arrays.

Every result is the generic kernel's, bit for bit; only the sorts change. NumPy's default sort (SIMD
introsort) is several times faster than its stable one (for 200k float64: 0.8 ms for ``np.sort``,
2.7 ms for ``np.argsort``, 17 ms for a stable argsort), and equal values have equal bits except the two
zeros and the NaNs, whose runs ``ascending_order`` puts back in index order. A lane sort (``sort``
along a sparse dimension) sorts all the values once, then regroups them by lane with a stable sort of
the lane ids: NumPy's radix sort (``kind="stable"`` on 16-bit keys, O(n)) for up to 65536 lanes, else
one default sort of the distinct keys ``lane * n + rank``. Along the plain dimension a compressed array
keeps its compressed indices: each slice is a lane, and its specified elements stay as many.

``unique`` of COO and compressed arrays sorts as the generic kernel does (``ascending_order``, or
``sorted_values`` for the values and counts alone) and gives every output from that one sort with
NumPy's O(n) tools where the generic kernel sorts again: the inverse indices scattered through the
permutation (the generic kernel argsorts it), each group's first index as the least position among its
members (``np.minimum.reduceat``; the generic kernel sorts once more for a stable order), the group ids
repeated from the counts. A compressed array's first indices come from the row-major positions of its
stored values, computed from its indices, where the generic kernel runs ``unique`` a second time on the
element COO.

COO ``sort`` has no NumPy kernel: the generic one, which coalesces through the NumPy kernel (as every
generic kernel does) and sorts without stability where it cannot show, runs at NumPy's speed.
``searchsorted`` in a COO vector has one for strided queries of the vector's dtype: NumPy's sort puts
NaN last and its ``searchsorted`` orders NaN last too, which is the rule the generic kernel implements
with a count of the NaNs and a second search for NaN queries (a third of the call's time on 200,000
values); whether the fill value sorts before each query is one more search, in the one-element array of
the fill value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, SparseArray, sparse_coo, sparse_csc, sparse_csr, strided
from ...formats._ops import prod
from ..array_api.conversion import coalesce_coo
from ..array_api.set import Unique, _supports_unique, outputs_of, sorted_unique, unique_compressed, unique_coo
from ..array_api.sorting import ascending_order, lane_sort_reason, sort_by_lane, sorted_values

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


def _supports_sort_compressed(xp: Any, a: CompressedArray, axis: int, descending: bool, stable: bool) -> str | None:
    return lane_sort_reason(xp, a, axis, descending, stable, "NumPy")


@register("sort", (sparse_csr,), backend="numpy", supports=_supports_sort_compressed)
@register("sort", (sparse_csc,), backend="numpy", supports=_supports_sort_compressed)
def _sort_compressed_numpy(xp: Any, a: CompressedArray, axis: int, descending: bool, stable: bool) -> SparseArray:
    """sort(CSR, CSC) -> same layout: one sort of the values, a radix regrouping by lane; O(nnz log nnz)."""
    return sort_by_lane(xp, a, axis, descending, _stable_order)


# -- unique ------------------------------------------------------------------------------------------


def _sorted_unique(xp: Any, v: Any, outputs: str, key: np.ndarray | None = None) -> tuple[Any, Any, Any, Any]:
    """``set.sorted_unique`` of the 1-D real ``v``, bit for bit, from one sort: the first index of a
    group is its least ``key`` (default: its least index, the first occurrence); O(n log n)."""
    v = np.asarray(v)
    n = v.shape[0]
    if n == 0:
        return sorted_unique(xp, v, outputs)
    order = None if outputs in ("counts", "values") else np.asarray(ascending_order(xp, v))
    s = np.asarray(sorted_values(xp, v)) if order is None else v[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    if outputs == "values":
        return s[new], None, None, None  # no positions: one array fewer to allocate
    starts = np.flatnonzero(new)
    counts = np.empty(starts.shape[0], dtype=np.int64)  # one new array: fresh memory is what costs here
    np.subtract(starts[1:], starts[:-1], out=counts[:-1])
    counts[-1] = n - starts[-1]
    first = inverse = None
    if order is not None:
        if outputs == "all":
            # each group's members are together in order: the least index (or key) is its first occurrence
            first = np.minimum.reduceat(order if key is None else key[order], starts).astype(np.int64, copy=False)
        # np.cumsum is slower than one repeat; the inverse of a permutation is a scatter, not a sort
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.repeat(np.arange(starts.shape[0], dtype=np.int64), counts)
    return s[starts], first, inverse, counts


def _supports_unique_numpy(xp: Any, a: SparseArray, ravel_positions: bool | str) -> str | None:
    if np.asarray(a._vals).dtype.kind == "c":
        return "complex values are ordered by two stable sorts, the generic kernel's"
    return _supports_unique(xp, a, ravel_positions)


@register("unique", (sparse_coo,), backend="numpy", supports=_supports_unique_numpy)
def _unique_coo_numpy(xp: Any, a: COOArray, ravel_positions: bool | str) -> Unique:
    """unique_all(COO) -> strided values/indices/counts, COO inverse: one sort, O(n) outputs; O(nnz log nnz)."""
    return unique_coo(xp, a, outputs_of(ravel_positions), _sorted_unique)


def _row_major_positions(a: CompressedArray) -> np.ndarray:
    """The row-major flat position of every scalar of ``a``'s values, in storage order (int64)."""
    nb = a.batch_dim()
    batches = prod(tuple(a.shape[:nb]))
    comp = np.asarray(a._compressed).reshape(batches, -1).astype(np.int64)
    plain = np.asarray(a._plain).reshape(-1).astype(np.int64)
    ncomp = comp.shape[1] - 1
    lane = np.repeat(np.arange(batches * ncomp, dtype=np.int64), np.diff(comp, axis=1).reshape(-1))
    major, minor = (lane % ncomp, plain) if a.layout.compressed_dim == 0 else (plain, lane % ncomp)
    (m, n), (r, c) = a.shape[nb : nb + 2], a.blocksize
    dense = prod(tuple(a.shape[nb + 2 :]))
    corner = ((lane // ncomp) * m + major * r) * n + minor * c
    within = np.arange(r, dtype=np.int64)[:, None] * n + np.arange(c, dtype=np.int64)[None, :]
    cells = (corner[:, None, None] + within[None]).reshape(-1, 1) * dense
    return np.asarray((cells + np.arange(dense, dtype=np.int64)[None, :]).reshape(-1))


@register("unique", (COMPRESSED,), backend="numpy", supports=_supports_unique_numpy)
def _unique_compressed_numpy(xp: Any, a: CompressedArray, ravel_positions: bool | str) -> Unique:
    """unique_all(compressed) -> strided outputs, inverse in a's layout: one sort, first indices from row-major positions; O(nnz log nnz)."""
    outputs = outputs_of(ravel_positions)
    vals = np.asarray(a._vals)
    flat = vals.reshape(-1)
    nnz = flat.shape[0]
    if outputs != "all" or nnz == 0:
        return unique_compressed(xp, a, outputs, _sorted_unique)
    key = _row_major_positions(a)
    unspecified = a.size - nnz
    v = flat
    if unspecified:
        # the fill value's own position: the first row-major position that no stored value holds
        held = np.zeros(nnz + 1, dtype=bool)
        held[key[key <= nnz]] = True
        v = np.concatenate([flat, np.asarray([a.fill_value], dtype=flat.dtype)])
        key = np.concatenate([key, np.asarray([np.argmin(held)], dtype=np.int64)])
    # every NaN is a group of its own, whose least key is its own row-major position: the first index
    # that the NaN its inverse points at has, as in NumPy, whatever the storage order
    values, first, inverse, counts = _sorted_unique(xp, v, "all", key)
    fill_group = 0
    if unspecified:
        fill_group = int(inverse[nnz])
        counts[fill_group] += unspecified - 1
    return Unique(values, first, a._with_values(inverse[:nnz].reshape(vals.shape), fill_group), counts)


def _supports_searchsorted_coo(xp: Any, x1: COOArray, x2: Any, side: str, sorter: Any) -> str | None:
    if x1.dtype != x2.dtype:
        return "operands of two dtypes are promoted by the standard's table, which the generic kernel applies"
    if np.dtype(x1.dtype).kind not in "iuf":
        return f"NumPy's order is the generic kernel's for real numbers, not dtype {np.dtype(x1.dtype).name}"
    return None


@register("searchsorted", (sparse_coo, strided), backend="numpy", supports=_supports_searchsorted_coo)
def _searchsorted_coo_strided_numpy(xp: Any, x1: COOArray, x2: Any, side: str, sorter: Any) -> Any:
    """searchsorted(COO vector, strided): NumPy's sort and search of the stored values, NaN last, plus the unspecified elements where the fill value sorts first; O((nnz + m) log nnz)."""
    c = coalesce_coo(xp, x1)
    # a vector without sparse dimensions stores its elements as one row of values: the same list
    specified = np.sort(np.asarray(c._vals).reshape(-1))
    queries = np.asarray(x2)
    where: Any = side  # "left" or "right", checked by the public function
    found = np.searchsorted(specified, queries, side=where)
    unspecified = x1.shape[0] - specified.shape[0]
    if unspecified:
        # 1 where the fill value sorts before the query (left) or not after it (right), NaN last
        fill = np.asarray([x1.fill_value], dtype=specified.dtype)
        found = found + np.searchsorted(fill, queries, side=where) * unspecified
    return np.asarray(found, dtype=np.int64)
