"""Native indexing kernels of the NumPy backend: SciPy's compiled slicing of CSR and CSC matrices, ``take``
of COO arrays along a sparse dimension and of CSR/CSC matrices along the plain one by counting, and a
compiled binary search of the slices for ``x[rows, cols]`` and ``diagonal`` of one CSR/CSC matrix, and a
compiled filter of its slices for ``tril`` and ``triu``.

``take`` repeats each entry once per position of ``indices`` that names its index. The generic kernel
finds those positions with binary searches and restores a coalesced array's order with a lexicographic
sort; here the positions come from a count of ``indices`` (``bincount``), and the order from runs of the
first index (along axis 0 of a coalesced array, whose result is then sorted as built) or one sort of
int64 keys.
"""

from __future__ import annotations

from collections.abc import Sequence
import math
from typing import Any, cast

import numpy as np

from ..._index_key import Int, Item, Slice
from ...dispatch import register
from ...formats import COOArray, CompressedArray, sparse_coo, sparse_csc, sparse_csr
from ...formats._invariants import check_index_data
from .. import _cpu
from ..array_api.creation import supports_triangle
from ..array_api.indexing import points_on_pointers, supports_points_compressed
from ..array_api.linalg_ext import diagonal_on_pointers
from ..array_api.shape import wide_enough
from .conversion import check_offset_ends, fold

__all__: list[str] = []

_UNBLOCKED = frozenset({sparse_csr, sparse_csc})
# Above this many plain positions, and 8 per entry, work per position outweighs the entries.
_WIDE = 1 << 22
_SCIPY_DTYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "complex64", "complex128"}
)


def _python_slice(s: Slice) -> slice:
    # the progression's last element plus one step, or None where that would be -1 (read as "the end")
    stop = s.start + s.step * s.length if s.length else s.start
    return slice(s.start, stop if stop >= 0 else None, s.step)


def _supports_getitem(xp: Any, a: CompressedArray, items: Sequence[Item]) -> str | None:
    if a.batch_dim() or a.dense_dim():
        return "SciPy slices only 2-D CSR and CSC arrays, without batch or dense dimensions"
    if len(items) != 2 or not all(isinstance(it, Slice) for it in items):
        return "SciPy's kernel serves slices of both sparse dimensions only"
    if np.dtype(a.dtype).name not in _SCIPY_DTYPES:
        return f"SciPy's sparse matrices do not hold dtype {np.dtype(a.dtype).name}"
    plain, n_plain = items[1 - a.layout.compressed_dim], a.shape[1 - a.layout.compressed_dim]
    if isinstance(plain, Slice) and plain.is_identity(n_plain):
        return "whole plain slices: the generic kernel narrows the compressed ones on their pointers, without copies"
    # SciPy indexes a stepped plain slice through an array of offsets as long as the plain dimension, however
    # few positions the slice picks
    if isinstance(plain, Slice) and plain.step != 1 and n_plain > max(8 * a.nnz, _WIDE):
        return "SciPy indexes a stepped plain slice with one offset per position of the dimension; the generic kernel filters the entries"
    return None


@register("getitem", (_UNBLOCKED,), backend="numpy", supports=_supports_getitem)
def _getitem_unblocked_numpy(xp: Any, a: CompressedArray, items: Sequence[Item]) -> CompressedArray:
    """x[rows, cols] of a 2-D CSR/CSC with slices of any step: SciPy's compiled slicing; O(nnz of the slices)."""
    from scipy import sparse

    check_offset_ends(a)
    make = sparse.csr_array if a.layout is sparse_csr else sparse.csc_array
    m = make((a._vals, a._plain, a._compressed), shape=a.shape)
    rows, cols = (_python_slice(s) for s in items if isinstance(s, Slice))
    r = make(m[rows, cols])
    # a range of plain indices cut from sorted slices leaves them sorted: only other steps need the check
    plain = items[1 - a.layout.compressed_dim]
    if not (isinstance(plain, Slice) and plain.step == 1) and not r.has_sorted_indices:
        r = r.copy()
        r.sort_indices()
    idt = a.index_dtype
    return CompressedArray(
        np.ascontiguousarray(r.indptr, dtype=idt), np.ascontiguousarray(r.indices, dtype=idt),
        np.ascontiguousarray(r.data, dtype=a.dtype), tuple(int(s) for s in r.shape), layout=a.layout,
        backend=a._backend, xp=xp, fill_value=a.fill_value, check=False,
    )  # fmt: skip


def _supports_element(xp: Any, a: CompressedArray, items: Sequence[Item]) -> str | None:
    if a.batch_dim() or a.dense_dim() or len(items) != 2 or not all(isinstance(it, Int) for it in items):
        return "it reads one element of one CSR or CSC matrix; the general kernels index the rest"
    return None


@register("getitem", (_UNBLOCKED,), backend="numpy", supports=_supports_element, priority=1)
def _getitem_element_numpy(xp: Any, a: CompressedArray, items: Sequence[Item]) -> COOArray:
    """x[i, j] of a 2-D CSR/CSC -> 0-d COO: a binary search of one slice (its plain indices are sorted); O(log of the slice)."""
    major, minor = (it.index for it in cast("Sequence[Int]", items)[:: 1 - 2 * a.layout.compressed_dim])
    ptr, plain = a._compressed, a._plain
    lo, hi = int(ptr[major]), int(ptr[major + 1])
    if not a._bounds_checked and not (0 <= lo <= hi <= plain.shape[0] and int(ptr[0]) == 0 and int(ptr[-1]) == plain.shape[0]):
        check_index_data(a)  # a slice out of order or out of range (a negative start would wrap), or entries outside every slice
    at = lo + int(plain[lo:hi].searchsorted(minor))
    nse = int(at < hi and int(plain[at]) == minor)
    # valid by construction (no index, at most one value of the checked array): built without the checks
    return COOArray._trusted(
        np.zeros((0, nse), dtype=plain.dtype), a._vals[at : at + nse], (), backend=a._backend, xp=xp, coalesced=True,
        fill_value=a.fill_value,
    )  # fmt: skip


def _supports_take_coo(xp: Any, a: COOArray, indices: Any, axis: int) -> str | None:
    if axis >= a.sparse_dim():
        return "along a dense dimension take reads the values, which the generic kernel does in one call"
    shape = (*a.shape[:axis], int(indices.shape[0]), *a.shape[axis + 1 : a.sparse_dim()])
    if a.is_coalesced() and axis and math.prod(shape) > np.iinfo(np.int64).max:
        return "the result's sparse dimensions do not fit one int64 sort key"
    counted = not (a.is_coalesced() and axis == 0)
    if counted and a.shape[axis] > max(8 * (a.nnz + int(indices.shape[0])), _WIDE):
        return "a count per index of the axis would outweigh the entries; the generic kernel searches the picks instead"
    return None


def _runs_of_first(row: np.ndarray, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries (of sorted ``row``) whose first index is ``sel[j]``, for j in order, and each one's j."""
    lo, hi = np.searchsorted(row, sel, side="left"), np.searchsorted(row, sel, side="right")
    counts = hi - lo
    total = int(counts.sum())
    starts = np.cumsum(counts) - counts
    entry = np.arange(total, dtype=np.int64) + np.repeat(lo - starts, counts)
    return entry, np.repeat(np.arange(sel.shape[0], dtype=np.int64), counts)


def _repeated(row: np.ndarray, sel: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each entry repeated once per position j of ``sel`` naming its index ``row``, entries in order, and
    each copy's j (ascending within an entry)."""
    count = np.bincount(sel, minlength=n)
    order = np.argsort(sel, kind="stable")
    first = np.cumsum(count) - count
    c = count[row]
    entry = np.repeat(np.arange(row.shape[0], dtype=np.int64), c)
    rank = np.arange(entry.shape[0], dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
    return entry, order[first[row[entry]] + rank]


@register("take", (sparse_coo,), backend="numpy", supports=_supports_take_coo)
def _take_coo_numpy(xp: Any, a: COOArray, indices: Any, axis: int) -> COOArray:
    """take(COO) along a sparse dim: counted repeats, a coalesced result in runs (axis 0) or one int64 sort; O(nnz + total log total)."""
    idx = np.asarray(a._idx)
    sel = np.asarray(indices, dtype=np.int64)
    coalesced = a.is_coalesced()
    if coalesced and axis == 0:
        entry, position = _runs_of_first(idx[0], sel)
    else:
        entry, position = _repeated(idx[axis], sel, a.shape[axis])
    new_idx = np.take(idx, entry, axis=1)
    new_idx[axis] = position
    vals = np.take(np.asarray(a._vals), entry, axis=0)
    shape = (*a.shape[:axis], sel.shape[0], *a.shape[axis + 1 :])
    if coalesced and axis and entry.shape[0] > 1:
        perm = np.argsort(fold(new_idx, shape))  # the keys are distinct: the input's indices are, and so are the positions
        new_idx, vals = np.take(new_idx, perm, axis=1), np.take(vals, perm, axis=0)
    return COOArray(new_idx, vals, shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


def _supports_take_sparse(xp: Any, a: CompressedArray, indices: Any, axis: int) -> str | None:
    if a.layout not in _UNBLOCKED or a.batch_dim() or axis > 1:
        return "it takes along a sparse dimension of one CSR or CSC matrix; the generic kernel takes the rest"
    if axis != a.layout.compressed_dim and a.shape[axis] > max(8 * (a.nnz + int(indices.shape[0])), _WIDE):
        return "a count per plain index would outweigh the entries; the generic kernel searches the picks instead"
    return _cpu.unavailable_reason()


@register("take", (_UNBLOCKED,), backend="numpy", supports=_supports_take_sparse)
def _take_unblocked_numpy(xp: Any, a: CompressedArray, indices: Any, axis: int) -> CompressedArray:
    """take(CSR/CSC) along a sparse dim: whole slices copied (A[rows]), or picks counted and copies written slice by slice (A[:, cols]); compiled, in parallel; O(nnz + result)."""
    check_offset_ends(a)
    sel = np.asarray(indices, dtype=np.int64)
    k = int(sel.shape[0])
    shape = (*a.shape[:axis], k, *a.shape[axis + 1 :])
    if axis == a.layout.compressed_dim:
        new_ptr, plain, vals = _cpu.gather_slices(np.asarray(a._compressed), np.asarray(a._plain), np.asarray(a._vals), sel)
        idt = np.dtype(wide_enough(xp, a.index_dtype, int(plain.shape[0])))  # repeated slices can outgrow int32
        return CompressedArray._trusted(
            new_ptr.astype(idt, copy=False), plain.astype(idt, copy=False), vals, shape,
            layout=a.layout, backend=a._backend, xp=xp, fill_value=a.fill_value,
        )  # fmt: skip
    new_ptr, entry, position = _cpu.take_plain(np.asarray(a._compressed), np.asarray(a._plain), sel, a.shape[axis])
    idt = np.dtype(wide_enough(xp, a.index_dtype, int(entry.shape[0]), k))
    return CompressedArray._trusted(
        new_ptr.astype(idt, copy=False), position.astype(idt, copy=False), np.take(np.asarray(a._vals), entry, axis=0), shape,
        layout=a.layout, backend=a._backend, xp=xp, fill_value=a.fill_value,
    )  # fmt: skip


# -- searches within the slices of one matrix: one compiled binary search per query -------------------


def _find(xp: Any, ptr: Any, plain: Any, major: Any, minor: Any) -> tuple[np.ndarray, np.ndarray]:
    pos = _cpu.compressed_find(np.asarray(ptr), np.asarray(plain), np.asarray(major), np.asarray(minor))
    return pos, pos >= 0


def _supports_points(xp: Any, a: CompressedArray, positions: list[Any], shape: tuple[int, ...]) -> str | None:
    return supports_points_compressed(xp, a, positions, shape) or _cpu.unavailable_reason()


@register("gather_points", (_UNBLOCKED,), backend="numpy", supports=_supports_points)
def _gather_points_unblocked_numpy(xp: Any, a: CompressedArray, positions: list[Any], shape: tuple[int, ...]) -> COOArray:
    """x[rows, cols] of one CSR/CSC matrix: a compiled binary search per point, in parallel; O(points * log of a slice)."""
    check_offset_ends(a)
    return points_on_pointers(xp, a, positions, shape, _find)


def _supports_diagonal(xp: Any, a: CompressedArray, offset: int) -> str | None:
    if a.ndim != 2:
        return "it searches the slices of one matrix; the generic kernel reads batches through the element COO"
    return _cpu.unavailable_reason()


@register("diagonal", (_UNBLOCKED,), backend="numpy", supports=_supports_diagonal)
def _diagonal_unblocked_numpy(xp: Any, a: CompressedArray, offset: int) -> COOArray:
    """diagonal(CSR/CSC) -> COO: a compiled binary search of each slice for its diagonal element; O(n log of a slice)."""
    check_offset_ends(a)
    return diagonal_on_pointers(xp, a, offset, _find)


# -- triangles of one matrix: a compiled filter of its slices ------------------------------------------


def _supports_band(xp: Any, a: CompressedArray, k: int, lower: bool) -> str | None:
    if a.ndim != 2:
        return "it filters the slices of one matrix; the generic kernel reads batch and dense dimensions through the element COO"
    if a._vals.dtype.hasobject:
        return "the compiled kernel moves values as bytes, which Python objects are not"
    return supports_triangle(xp, a, k, lower) or _cpu.unavailable_reason()


def _supports_tril(xp: Any, a: CompressedArray, k: int) -> str | None:
    return _supports_band(xp, a, k, True)


def _supports_triu(xp: Any, a: CompressedArray, k: int) -> str | None:
    return _supports_band(xp, a, k, False)


def _band(xp: Any, a: CompressedArray, k: int, lower: bool) -> CompressedArray:
    check_offset_ends(a)
    m, n = a.shape
    k = min(max(int(k), -m - 1), n + 1)  # beyond the matrix every side is all or nothing; no overflow below
    # a CSR row i keeps the columns j with j - i <= k (tril); a CSC column i the rows j with i - j <= k,
    # that is j >= i - k: the same filter of the plain indices with the diagonal and the side mirrored
    d, below = (k, lower) if a.layout.compressed_dim == 0 else (-k, not lower)
    ptr, plain, vals = _cpu.band(np.asarray(a._compressed), np.asarray(a._plain), np.asarray(a._vals), d, below)
    return CompressedArray._trusted(
        ptr.astype(a.index_dtype, copy=False), plain, vals, a.shape, layout=a.layout, backend=a._backend, xp=xp, fill_value=a.fill_value
    )


@register("tril", (_UNBLOCKED,), backend="numpy", supports=_supports_tril)
def _tril_unblocked_numpy(xp: Any, a: CompressedArray, k: int) -> CompressedArray:
    """tril(CSR/CSC) of one matrix: each slice's kept entries counted and copied as runs, compiled, in parallel; O(nnz)."""
    return _band(xp, a, k, True)


@register("triu", (_UNBLOCKED,), backend="numpy", supports=_supports_triu)
def _triu_unblocked_numpy(xp: Any, a: CompressedArray, k: int) -> CompressedArray:
    """triu(CSR/CSC) of one matrix: each slice's kept entries counted and copied as runs, compiled, in parallel; O(nnz)."""
    return _band(xp, a, k, False)
