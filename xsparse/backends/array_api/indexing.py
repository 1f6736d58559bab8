"""Generic kernels of indexing, selection and construction (Array API only).

``getitem``, ``take``, ``sparse_mask``, ``where``, ``nonzero``, ``astype``, ``clone`` and ``spdiags``. COO is indexed in place: an integer or a slice of a sparse dimension filters the entries and
rewrites one index row (``(i - start) // step`` where the entry lies on the progression), a dimension
of ``None`` is a row of zeros, and the dense dimensions are indexed on the values. A compressed array is
indexed on its components where that keeps the format (batch and dense dimensions, which every component
shares); otherwise through its element COO, and compressed again when the result keeps both sparse
dimensions. A batched result whose batches would hold different numbers of specified elements (which
invariant 3.9 forbids) is padded with explicit elements holding the fill value, so indexing never fails
on the data. Lookups of elements at given positions (``sparse_mask``, ``where``) use ``searchsorted`` on
the sorted linear keys of a coalesced COO, as the conversions do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import array_api_compat

from ..._index_key import Int, Item, NewAxis, Slice
from ...dispatch import register
from ...formats import ANY_SPARSE, COMPRESSED, INDEXED, COOArray, CompressedArray, SparseArray, sparse_coo, strided
from ...formats._layout import LayoutFamily
from ...formats._ops import contiguous, expand_compressed, lexsort_indices, prod
from .conversion import (
    _linearize,
    _unravel,
    block_coo_to_coo,
    coalesce_coo,
    compressed_to_block_coo,
    compressed_to_coo,
    gather_or_fill,
    result_dtype,
    scalar_array,
    signed_twin,
    take_values,
    through_signed,
)
from .elementwise import _group_sparse, broadcast_shapes, python_scalar
from .shape import broadcast_coo, compress_like, regroup_coo, wide_enough

__all__ = [
    "apply_items",
    "expand_ranges",
    "points_on_pointers",
    "supports_points_compressed",
    "take_plain",
    "keep_entries",
    "find_in_slices",
    "index_coo",
    "lookup",
    "lookup_at",
    "element_coo",
    "SCALAR",
    "OPERAND",
]

# A Python scalar operand of ``where`` (the elementwise functions name it the same way).
SCALAR = "scalar"
_INT64_MAX = 2**63 - 1
# Any operand of ``where``: a strided or indexed sparse array, or a Python scalar.
OPERAND = LayoutFamily("OPERAND", cast(Any, (strided, *INDEXED, SCALAR)))
STRIDED_OR_INDEXED = LayoutFamily("STRIDED_OR_INDEXED", (strided, *INDEXED))
INDEXED_OR_SCALAR = LayoutFamily("INDEXED_OR_SCALAR", cast(Any, (*INDEXED, SCALAR)))


def _device(x: Any) -> Any:
    return array_api_compat.device(x)


def _fill_scalar(xp: Any, dtype: Any, fill: Any) -> Any:
    from ..._common import scalar_for

    return scalar_for(xp, dtype, fill)


def element_coo(xp: Any, a: SparseArray) -> COOArray:
    """The coalesced element COO of an indexed sparse array (a compressed array's batch dimensions become
    sparse ones, its blocks single elements)."""
    if isinstance(a, COOArray):
        return coalesce_coo(xp, a)
    return compressed_to_coo(xp, cast(CompressedArray, a))


# -- applying index items --------------------------------------------------------------------------


def apply_items(xp: Any, x: Any, items: Sequence[Item], axis: int = 0) -> Any:
    """Apply index items to the consecutive axes of a strided array from ``axis`` on; O(size of result).

    Slices gather with ``take`` (a copy, whatever the step: torch has no negative-step views), integers
    take one index and drop the axis, ``NewAxis`` inserts an axis of size 1.
    """
    for it in items:
        if isinstance(it, Int):
            x = take_values(xp, x, xp.asarray([it.index], dtype=xp.int64, device=_device(x)), axis=axis)
            x = xp.reshape(x, tuple(x.shape[:axis]) + tuple(x.shape[axis + 1 :]))
        elif isinstance(it, Slice):
            if not it.is_identity(x.shape[axis]):
                positions = xp.arange(it.start, it.stop, it.step, dtype=xp.int64, device=_device(x))
                x = take_values(xp, x, positions, axis=axis)
            axis += 1
        else:
            x = xp.expand_dims(x, axis=axis)
            axis += 1
    return x


def _is_identity(items: Sequence[Item], shape: Sequence[int]) -> bool:
    sizes = iter(shape)
    return all(isinstance(it, Slice) and it.is_identity(next(sizes)) for it in items)


def index_coo(xp: Any, a: COOArray, sparse_items: Sequence[Item], dense_items: Sequence[Item]) -> COOArray:
    """``a`` indexed by items covering its sparse dimensions, then its dense ones, in order; O(nnz * sparse_dim),
    or of the entries in the run that the key's leading integers select, for a coalesced ``a``.

    An entry is kept when every integer equals its index and every slice's progression holds it; its new
    index is its position on the progression. The result stays coalesced unless a slice of a sparse
    dimension has a negative step (which reverses the order); one with no sparse dimension left is summed.
    """
    idx, vals = _leading_range(xp, a, sparse_items) if a.is_coalesced() and a.nnz else (a._idx, a._vals)
    nnz = idx.shape[1]
    rows: list[Any] = []
    keep = None
    reverses = False
    shape: list[int] = []
    d = 0
    for it in sparse_items:
        if isinstance(it, NewAxis):
            rows.append(xp.zeros((nnz,), dtype=idx.dtype, device=_device(idx)))
            shape.append(1)
            continue
        row = idx[d, :]
        size = a.shape[d]
        d += 1
        if isinstance(it, Int):
            hit = row == it.index
        elif it.is_identity(size):
            rows.append(row)
            shape.append(size)
            continue
        else:
            diff = row - it.start
            q = diff // it.step
            hit = (diff % it.step == 0) & (q >= 0) & (q < it.length)
            rows.append(q)
            shape.append(it.length)
            reverses = reverses or it.step < 0
        keep = hit if keep is None else keep & hit
    if rows:
        new_idx = xp.stack(rows)
    else:
        new_idx = xp.zeros((0, nnz), dtype=idx.dtype, device=_device(idx))
    if keep is not None:
        where = xp.nonzero(keep)[0]
        new_idx = xp.take(new_idx, where, axis=1)
        vals = take_values(xp, vals, where, axis=0)
    vals = apply_items(xp, vals, dense_items, axis=1)
    out = COOArray(
        new_idx, vals, (*shape, *vals.shape[1:]), backend=a._backend, xp=xp,
        coalesced=a.is_coalesced() and not reverses, fill_value=a.fill_value,
    )  # fmt: skip
    if not rows and out.nnz > 1:
        out = coalesce_coo(xp, out)
    return out


def _leading_range(xp: Any, a: COOArray, sparse_items: Sequence[Item]) -> tuple[Any, Any]:
    """The indices and values of the entries of the coalesced ``a`` that the leading integers of the key, and
    the slice of positive step after them, can hold: a coalesced array's entries with one index along its
    first dimension are a run, sorted along the second, and so on. O(sparse_dim * log nnz); the filter of
    :func:`index_coo` then reads that run only (``X[7]`` of an n-D array reads its entries at 7)."""
    idx = a._idx
    lo, hi = 0, idx.shape[1]
    d = 0
    for it in sparse_items:
        if isinstance(it, NewAxis):
            continue
        if isinstance(it, Int):
            first = last = it.index
        elif it.step > 0 and it.length:
            first, last = it.start, it.start + it.step * (it.length - 1)
        else:
            break
        row = idx[d, lo:hi]
        # the ends of the run: both fit the index dtype (0 <= first <= last < size)
        ends = xp.asarray([first, last], dtype=row.dtype, device=_device(row))
        lo, hi = lo + int(xp.searchsorted(row, ends[:1], side="left")[0]), lo + int(xp.searchsorted(row, ends[1:], side="right")[0])
        d += 1
        if not isinstance(it, Int) or lo == hi:
            break  # the entries of a range of indices along d are not sorted along d + 1
    if (lo, hi) == (0, idx.shape[1]):
        return idx, a._vals
    return idx[:, lo:hi], a._vals[lo:hi, ...]


def _split_at_dense(items: Sequence[Item], sparse_dim: int) -> tuple[Sequence[Item], Sequence[Item]]:
    """The items of the sparse dimensions and those of the dense ones. A ``NewAxis`` between them is a new
    sparse dimension, as torch's ``unsqueeze`` makes one at ``dim <= sparse_dim``."""
    for k, it in enumerate(items):
        if not isinstance(it, NewAxis) and it.dim >= sparse_dim:
            return items[:k], items[k:]
    return items, ()


# -- getitem -----------------------------------------------------------------------------------------


@register("getitem", (strided,))
def _getitem_strided(xp: Any, x: Any, items: Sequence[Item]) -> Any:
    """x[key] of a strided array: take per sliced axis (any step, on every backend); O(size of result)."""
    return apply_items(xp, x, items)


@register("getitem", (sparse_coo,))
def _getitem_coo(xp: Any, a: COOArray, items: Sequence[Item]) -> COOArray:
    """x[key] of COO: filter and re-index the entries, index the values; O(nnz * ndim)."""
    return index_coo(xp, a, *_split_at_dense(items, a.sparse_dim()))


# -- the compressed slices of an unbatched, unblocked array, selected on their pointers --------------
# An entry range is a Python slice (the entries of consecutive compressed slices: views, no copy) or an
# int64 array of entry positions.


def expand_ranges(xp: Any, starts: Any, counts: Any, backend: Any) -> tuple[Any, Any, Any]:
    """The ranges ``[starts[g], starts[g] + counts[g])`` (1-D int64) laid end to end: their running count
    (pointers, from 0), and for every element its range ``g`` and its value; O(ranges + elements)."""
    running = xp.concat([xp.zeros((1,), dtype=xp.int64, device=_device(starts)), xp.cumulative_sum(counts)])
    total = int(running[-1])
    group = expand_compressed(xp, running, total, backend)
    at = xp.take(starts - running[:-1], group) + xp.arange(total, dtype=xp.int64, device=_device(starts))
    return running, group, at


def gather_slices(xp: Any, ptr: Any, positions: Any, backend: Any) -> tuple[Any, Any]:
    """The int64 pointers and the entry positions of the compressed slices at ``positions`` (1-D int64, in
    bounds, repeats allowed), in that order; O(len(positions) + entries selected)."""
    lo = xp.astype(xp.take(ptr, positions), xp.int64)
    counts = xp.astype(xp.take(ptr, positions + 1), xp.int64) - lo
    new_ptr, _, entries = expand_ranges(xp, lo, counts, backend)
    return new_ptr, entries


def _slice_range(xp: Any, ptr: Any, it: Slice, backend: Any) -> tuple[Any, Any]:
    """The pointers and entry range of the compressed slices a ``Slice`` keeps."""
    if it.step == 1:
        lo, hi = int(ptr[it.start]), int(ptr[it.stop])
        return xp.astype(ptr[it.start : it.stop + 1], xp.int64) - lo, slice(lo, hi)
    positions = xp.arange(it.start, it.stop, it.step, dtype=xp.int64, device=_device(ptr))
    return gather_slices(xp, ptr, positions, backend)


def _entries(xp: Any, x: Any, entries: Any) -> Any:
    return x[entries, ...] if isinstance(entries, slice) else take_values(xp, x, entries, axis=0)


def keep_entries(xp: Any, ptr: Any, keep: Any, reverse: bool, backend: Any) -> tuple[Any, Any]:
    """The pointers and positions of the entries where ``keep`` holds, each slice's order reversed or not."""
    running = xp.concat([xp.zeros((1,), dtype=xp.int64, device=_device(ptr)), xp.cumulative_sum(xp.astype(keep, xp.int64))])
    new_ptr = xp.take(running, ptr)
    where = xp.astype(xp.nonzero(keep)[0], xp.int64)
    if reverse:
        total = where.shape[0]
        s = expand_compressed(xp, new_ptr, total, backend)
        mirrored = xp.take(new_ptr[:-1] + new_ptr[1:] - 1, s) - xp.arange(total, dtype=xp.int64, device=_device(ptr))
        where = xp.take(where, mirrored)
    return new_ptr, where


def find_in_slices(xp: Any, ptr: Any, plain: Any, major: Any, minor: Any) -> tuple[Any, Any]:
    """Where plain index ``minor[k]`` lies in compressed slice ``major[k]`` (1-D int64 arrays), and whether it
    is there: a bisection of every slice at once; O(len(major) * log of the longest slice picked)."""
    lo = xp.astype(xp.take(ptr, major), xp.int64)
    end = xp.astype(xp.take(ptr, major + 1), xp.int64)
    nse = int(plain.shape[0])
    if nse == 0 or major.shape[0] == 0:
        return lo, xp.zeros(tuple(major.shape), dtype=xp.bool, device=_device(ptr))
    hi = end
    last = nse - 1
    for _ in range(int(xp.max(end - lo)).bit_length()):
        mid = (lo + hi) // 2
        right = (lo < hi) & (xp.astype(xp.take(plain, xp.minimum(mid, last)), xp.int64) < minor)
        lo, hi = xp.where(right, mid + 1, lo), xp.where(right, hi, mid)
    found = (lo < end) & (xp.astype(xp.take(plain, xp.minimum(lo, last)), xp.int64) == minor)
    return lo, found


def index_slices(xp: Any, a: CompressedArray, row: Int | Slice, col: Int | Slice, dense_items: Sequence[Item]) -> SparseArray:
    """``a[row, col, *dense]`` of an unbatched CSR/CSC array on its pointers: the compressed item picks whole
    slices, the plain item filters their entries only; O(slices picked + their entries)."""
    cd = a.layout.compressed_dim
    major, minor = (row, col) if cd == 0 else (col, row)
    ptr, plain, vals, backend = a._compressed, a._plain, a._vals, a._backend
    idt = ptr.dtype
    if isinstance(major, Int) and isinstance(minor, Int):
        # one element: a scan of its slice (the few calls of the general path cost more than the scan)
        lo, hi = int(ptr[major.index]), int(ptr[major.index + 1])
        where = xp.nonzero(plain[lo:hi] == minor.index)[0]
        found = vals[lo:hi, ...] if hi - lo == where.shape[0] else take_values(xp, vals[lo:hi, ...], where, axis=0)
        found = contiguous(backend, xp, apply_items(xp, found, dense_items, axis=1))
        nse = int(found.shape[0])
        return COOArray(
            xp.zeros((0, nse), dtype=idt, device=a.device), found, tuple(found.shape[1:]), backend=backend, xp=xp,
            coalesced=True, fill_value=a.fill_value,
        )  # fmt: skip
    if isinstance(major, Int):
        lo, hi = int(ptr[major.index]), int(ptr[major.index + 1])
        new_ptr, entries = xp.asarray([0, hi - lo], dtype=xp.int64, device=a.device), slice(lo, hi)
    else:
        new_ptr, entries = _slice_range(xp, ptr, major, backend)
    plain, vals = _entries(xp, plain, entries), _entries(xp, vals, entries)
    if isinstance(minor, Int):
        keep = plain == minor.index
    elif minor.is_identity(a.shape[1 - cd]):
        keep = None
    else:
        diff = xp.astype(plain, xp.int64) - minor.start
        q = diff // minor.step
        keep = (diff % minor.step == 0) & (q >= 0) & (q < minor.length)
        plain = xp.astype(q, idt)
    if keep is not None:
        reverse = isinstance(minor, Slice) and minor.step < 0
        if isinstance(major, Int):
            # one slice: its pointers are not needed, its order is reversed whole
            where = xp.nonzero(keep)[0]
            where = xp.flip(where) if reverse else where
        else:
            new_ptr, where = keep_entries(xp, new_ptr, keep, reverse, backend)
        plain, vals = xp.take(plain, where), take_values(xp, vals, where, axis=0)
    vals = contiguous(backend, xp, apply_items(xp, vals, dense_items, axis=1))
    dense = tuple(vals.shape[1:])
    if isinstance(major, Slice) and isinstance(minor, Slice):
        return CompressedArray(
            xp.astype(new_ptr, idt), plain, vals, (major.length, minor.length)[:: 1 - 2 * cd] + dense,
            layout=a.layout, backend=backend, xp=xp, fill_value=a.fill_value, check=False,
        )  # fmt: skip
    # one sparse dimension (or none) remains: COO over it, sorted as the slices are
    nse = int(plain.shape[0])
    if isinstance(major, Slice):
        idx = xp.reshape(expand_compressed(xp, xp.astype(new_ptr, idt), nse, backend), (1, nse))
    elif isinstance(minor, Slice):
        idx = xp.reshape(plain, (1, nse))
    else:
        idx = xp.zeros((0, nse), dtype=idt, device=a.device)
    kept = [it.length for it in (row, col) if isinstance(it, Slice)]
    return COOArray(idx, vals, (*kept, *dense), backend=backend, xp=xp, coalesced=True, fill_value=a.fill_value)


@register("getitem", (COMPRESSED,))
def _getitem_compressed(xp: Any, a: CompressedArray, items: Sequence[Item]) -> SparseArray:
    """x[key] of CSR/CSC/BSR/BSC: components for batch and dense dims, pointers or element COO for sparse ones; O(nnz log nnz)."""
    nb = a.batch_dim()
    r, c = (k for k, it in enumerate(items) if not isinstance(it, NewAxis) and it.dim in (nb, nb + 1))
    row, col = items[r], items[c]
    both_slices = isinstance(row, Slice) and isinstance(col, Slice)
    pointers = c == r + 1 and not a.layout.is_blocked and not any(isinstance(it, NewAxis) for it in items[:r])
    if not (pointers or (both_slices and c == r + 1)):
        # a sparse dimension is selected away, or split by a new one: the result is COO
        return index_coo(xp, compressed_to_coo(xp, a), *_split_at_dense(items, nb + 2))
    batch_items, dense_items = items[:r], items[c + 1 :]
    b = a
    if not _is_identity(batch_items, a.shape[:nb]):
        ci, pi, vals = (contiguous(a._backend, xp, apply_items(xp, comp, batch_items)) for comp in (a._compressed, a._plain, a._vals))
        b = CompressedArray(
            ci, pi, vals, (*ci.shape[:-1], *a.shape[nb:]), layout=a.layout, backend=a._backend, xp=xp,
            fill_value=a.fill_value, check=False,
        )  # fmt: skip
    nb2 = b.batch_dim()
    if pointers and nb2 == 0:
        return index_slices(xp, b, cast("Int | Slice", row), cast("Int | Slice", col), dense_items)
    if not (isinstance(row, Slice) and isinstance(col, Slice)):
        return index_coo(xp, compressed_to_coo(xp, a), *_split_at_dense(items, nb + 2))
    if not (row.is_identity(a.shape[nb]) and col.is_identity(a.shape[nb + 1])):
        keep_batch = [Slice(d, 0, 1, b.shape[d]) for d in range(nb2)]
        e = index_coo(xp, compressed_to_coo(xp, b), [*keep_batch, row, col], ())
        b = compress_like(xp, e, a.layout, a.blocksize, a.index_dtype, "getitem")
    if dense_items:
        axis = nb2 + 1 + (2 if a.layout.is_blocked else 0)
        b = b._with_values(contiguous(a._backend, xp, apply_items(xp, b._vals, dense_items, axis)), a.fill_value)
    return b


# -- gather_points (x[i, j, ...] with integer arrays) --------------------------------------------------


@register("gather_points", (INDEXED,))
def _gather_points_indexed(xp: Any, a: SparseArray, positions: list[Any], shape: tuple[int, ...]) -> SparseArray:
    """x[i, j, ...] (integer arrays) of COO/compressed: take along the leading dims merged into one; O(nnz log n + result)."""
    from ..._indexing import gather_by_take

    return cast(SparseArray, gather_by_take(a, positions, shape))


def supports_points_compressed(xp: Any, a: CompressedArray, positions: list[Any], shape: tuple[int, ...]) -> str | None:
    if a.batch_dim() or a.layout.is_blocked or len(positions) != 2:
        return "it looks up the points of one unblocked matrix indexed on both sparse dimensions"
    return None


def points_on_pointers(
    xp: Any, a: CompressedArray, positions: list[Any], shape: tuple[int, ...], find: Callable[..., tuple[Any, Any]] = find_in_slices
) -> COOArray:
    """``a[rows, cols]`` of one CSR or CSC matrix (``positions``: the in-bounds int64 rows and columns), each
    point searched in its slice by ``find`` (:func:`find_in_slices`'s signature); COO of dimensions ``shape``."""
    rows, cols = positions
    major, minor = (rows, cols) if a.layout.compressed_dim == 0 else (cols, rows)
    pos, found = find(xp, a._compressed, a._plain, major, minor)
    keep = xp.astype(xp.nonzero(found)[0], xp.int64, copy=False)
    idt = wide_enough(xp, a.index_dtype, *shape)
    # the points in row-major order of the result: sorted as ``keep`` is
    if len(shape) == 1:
        idx = xp.reshape(xp.astype(keep, idt), (1, -1))  # the points themselves (A[rows, cols] with 1-D arrays)
    elif prod(shape):
        idx = xp.stack(_unravel(xp, keep, shape, idt))
    else:
        idx = xp.zeros((len(shape), 0), dtype=idt, device=a.device)
    vals = take_values(xp, a._vals, xp.take(pos, keep), axis=0)
    # valid by construction (sorted, in-bounds points of a checked array): the cheap checks would cost a
    # tenth of the call
    return COOArray._trusted(idx, vals, (*shape, *a.shape[2:]), backend=a._backend, xp=xp, coalesced=True, fill_value=a.fill_value)


@register("gather_points", (COMPRESSED,), supports=supports_points_compressed)
def _gather_points_compressed(xp: Any, a: CompressedArray, positions: list[Any], shape: tuple[int, ...]) -> COOArray:
    """x[rows, cols] of one CSR/CSC matrix: each point found in its slice by bisection; O(points * log of a slice)."""
    return points_on_pointers(xp, a, positions, shape)


# -- take --------------------------------------------------------------------------------------------


@register("take", (strided,))
def _take_strided(xp: Any, x: Any, indices: Any, axis: int) -> Any:
    """take(strided) -> strided: the backend's take; O(size of result)."""
    return take_values(xp, x, indices, axis=axis)


def take_coo(xp: Any, a: COOArray, indices: Any, axis: int) -> COOArray:
    """``take`` of a COO array along ``axis``: along a sparse dimension each entry is repeated once per
    position of ``indices`` that names its index (found by ``searchsorted`` on the sorted indices)."""
    sd = a.sparse_dim()
    if axis >= sd:
        return COOArray(
            a._idx, take_values(xp, a._vals, indices, axis=1 + axis - sd), (*a.shape[:axis], indices.shape[0], *a.shape[axis + 1 :]),
            backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value,
        )  # fmt: skip
    dev = a.device
    idx = a._idx
    order = xp.argsort(indices, stable=True)
    ordered = xp.take(indices, order)
    row = xp.astype(idx[axis, :], xp.int64)
    lo = xp.searchsorted(ordered, row, side="left")
    counts = xp.searchsorted(ordered, row, side="right") - lo
    ends = xp.cumulative_sum(counts)
    total = int(ends[-1]) if a.nnz else 0
    k = xp.arange(total, dtype=xp.int64, device=dev)
    entry = xp.searchsorted(ends, k, side="right")
    rank = k - (xp.take(ends, entry) - xp.take(counts, entry))
    position = xp.take(order, xp.take(lo, entry) + rank)
    new_idx = xp.take(idx, entry, axis=1)
    new_idx = xp.concat([new_idx[:axis, :], xp.astype(position, idx.dtype)[None, :], new_idx[axis + 1 :, :]], axis=0)
    new_idx = contiguous(a._backend, xp, new_idx)  # row-major whatever the pieces' strides (see expand_dims of COO)
    vals = take_values(xp, a._vals, entry, axis=0)
    coalesced = a.is_coalesced()
    if coalesced and total > 1:
        perm = lexsort_indices(xp, new_idx)
        new_idx, vals = xp.take(new_idx, perm, axis=1), take_values(xp, vals, perm, axis=0)
    shape = (*a.shape[:axis], indices.shape[0], *a.shape[axis + 1 :])
    return COOArray(new_idx, vals, shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


@register("take", (sparse_coo,))
def _take_coo(xp: Any, a: COOArray, indices: Any, axis: int) -> COOArray:
    """take(COO): repeat the matching entries (sparse axis) or take on the values (dense axis); O(nnz log n)."""
    return take_coo(xp, a, indices, axis)


def take_plain(xp: Any, a: CompressedArray, indices: Any, counted: Callable[[Any], tuple[Any, Any, Any]] | None = None) -> CompressedArray:
    """``take`` along the plain dimension of one CSR or CSC matrix (``A[:, cols]``): each entry copied once
    per index naming its plain index, in slice order, then each slice sorted by the new positions when
    ``indices`` is not sorted; O(nnz log k + result).

    Each entry's copies are found by ``searchsorted`` in the sorted indices; ``counted(order)`` may give
    them instead (the entries picked at least once, ascending, and for each its first position in the
    sorted indices and its number of copies), where the backend counts faster than it searches.
    """
    backend = a._backend
    k = int(indices.shape[0])
    order = xp.argsort(indices, stable=True)
    kept = None
    if counted is not None:
        kept, lo, counts = counted(order)
    else:
        ordered = xp.take(indices, order)
        plain = xp.astype(a._plain, xp.int64)
        lo = xp.searchsorted(ordered, plain, side="left")
        counts = xp.searchsorted(ordered, plain, side="right") - lo
    # each entry's copies are a range of the sorted picks: its entry and the picks' positions
    running, entry, at = expand_ranges(xp, lo, counts, backend)
    total = int(running[-1])
    ptr = xp.astype(a._compressed, xp.int64)
    new_ptr = xp.take(running, ptr if kept is None else xp.searchsorted(kept, ptr))
    position = xp.take(order, at)
    entry = entry if kept is None else xp.take(kept, entry)
    if k > 1 and bool(xp.any(indices[1:] < indices[:-1])):
        major = expand_compressed(xp, new_ptr, total, backend)
        if (int(new_ptr.shape[0]) - 1) * k <= _INT64_MAX:
            perm = xp.argsort(major * k + position)
        else:
            perm = lexsort_indices(xp, xp.stack([major, position]))
        entry, position = xp.take(entry, perm), xp.take(position, perm)
    idt = wide_enough(xp, a.index_dtype, total, k)
    shape = (a.shape[0], k) if a.layout.compressed_dim == 0 else (k, a.shape[1])
    return CompressedArray(
        xp.astype(new_ptr, idt), xp.astype(position, idt), take_values(xp, a._vals, entry, axis=0), (*shape, *a.shape[2:]),
        layout=a.layout, backend=backend, xp=xp, fill_value=a.fill_value, check=False,
    )  # fmt: skip


@register("take", (COMPRESSED,))
def _take_compressed(xp: Any, a: CompressedArray, indices: Any, axis: int) -> CompressedArray:
    """take(compressed): on the pointers (sparse axes, one matrix), the components (batch, dense) or the element COO; O(nnz log nnz)."""
    nb = a.batch_dim()
    if nb == 0 and axis == a.layout.compressed_dim and not a.layout.is_blocked:
        # whole compressed slices, gathered on their pointers
        ptr, entries = gather_slices(xp, a._compressed, indices, a._backend)
        shape = (indices.shape[0], a.shape[1]) if axis == 0 else (a.shape[0], indices.shape[0])
        idt = wide_enough(xp, a.index_dtype, int(entries.shape[0]))  # repeated slices can outgrow int32
        return CompressedArray(
            xp.astype(ptr, idt), xp.astype(xp.take(a._plain, entries), idt), take_values(xp, a._vals, entries, axis=0),
            (*shape, *a.shape[2:]), layout=a.layout, backend=a._backend, xp=xp, fill_value=a.fill_value, check=False,
        )  # fmt: skip
    if nb == 0 and axis == 1 - a.layout.compressed_dim and not a.layout.is_blocked:
        return take_plain(xp, a, indices)
    if nb <= axis < nb + 2:
        e = take_coo(xp, compressed_to_coo(xp, a), indices, axis)
        return compress_like(xp, e, a.layout, a.blocksize, a.index_dtype, "take")
    if axis < nb:
        ci, pi, vals = (take_values(xp, comp, indices, axis=axis) for comp in (a._compressed, a._plain, a._vals))
        shape = (*a.shape[:axis], indices.shape[0], *a.shape[axis + 1 :])
        return CompressedArray(ci, pi, vals, shape, layout=a.layout, backend=a._backend, xp=xp, fill_value=a.fill_value, check=False)
    value_axis = nb + 1 + (2 if a.layout.is_blocked else 0) + axis - nb - 2
    return a._with_values(take_values(xp, a._vals, indices, axis=value_axis), a.fill_value)


# -- take_along_axis --------------------------------------------------------------------------------


def _along_shape(shape: tuple[int, ...], indices: Any, axis: int) -> tuple[int, ...]:
    """The result shape of ``take_along_axis``: the broadcast of the two shapes, with ``indices``' size along ``axis``."""
    return tuple(k if d == axis else (s if k == 1 else k) for d, (s, k) in enumerate(zip(shape, indices.shape)))


def take_along_coo(xp: Any, a: COOArray, indices: Any, axis: int) -> COOArray:
    """``take_along_axis`` of a COO array: every result position looks its source position up among the
    sorted linear keys of the (coalesced, dense dimensions regrouped) entries; the found ones are the
    result's entries, sorted. O(size(indices broadcast) * log nnz), never the size of ``a``."""
    c = regroup_coo(xp, coalesce_coo(xp, a), a.dense_dim())
    shape = _along_shape(tuple(a.shape), indices, axis)
    dev = a.device
    n = prod(shape)
    idt = wide_enough(xp, c._idx.dtype, n, *shape)
    if n == 0 or c.nnz == 0:
        empty_vals = xp.zeros((0,), dtype=a.dtype, device=dev)
        return COOArray(xp.zeros((len(shape), 0), dtype=idt, device=dev), empty_vals, shape, backend=a._backend, xp=xp, coalesced=True, fill_value=a.fill_value)
    positions = _unravel(xp, xp.arange(n, dtype=xp.int64, device=dev), shape, xp.int64)
    chosen = xp.reshape(xp.broadcast_to(indices, shape), (-1,))
    zero = xp.zeros((n,), dtype=xp.int64, device=dev)
    source = [chosen if d == axis else zero if a.shape[d] == 1 else p for d, p in enumerate(positions)]
    keys = _linearize(xp, c._idx, tuple(a.shape))
    wanted = _linearize(xp, xp.stack(source), tuple(a.shape))
    at = xp.clip(xp.searchsorted(keys, wanted), 0, c.nnz - 1)
    hit = xp.nonzero(xp.take(keys, at) == wanted)[0]
    idx = xp.astype(xp.take(xp.stack(positions), hit, axis=1), idt)
    vals = take_values(xp, c._vals, xp.take(at, hit), axis=0)
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=True, fill_value=a.fill_value)


@register("take_along_axis", (strided,))
def _take_along_axis_strided(xp: Any, x: Any, indices: Any, axis: int) -> Any:
    """take_along_axis(strided) -> strided: the backend's function (on the signed twin of an unsigned dtype it gathers not); O(size of result)."""
    return through_signed(xp, x, lambda v: xp.take_along_axis(v, indices, axis=axis))


@register("take_along_axis", (sparse_coo,))
def _take_along_axis_coo(xp: Any, a: COOArray, indices: Any, axis: int) -> COOArray:
    """take_along_axis(COO) -> COO (dense dims regrouped): lookups of the source positions; O(size(indices) log nnz)."""
    return take_along_coo(xp, a, indices, axis)


def _supports_take_along_compressed(xp: Any, a: CompressedArray, indices: Any, axis: int) -> str | None:
    if a.dense_dim():
        return f"the result's dense dimensions are regrouped as sparse ones, which a hybrid {a.layout} array cannot hold"
    b = a.batch_dim()
    shape = _along_shape(tuple(a.shape), indices, axis)
    if shape[b] % a.blocksize[0] or shape[b + 1] % a.blocksize[1]:
        return f"the result's sparse dimensions {shape[b : b + 2]} are not a whole number of blocks of {a.blocksize}"
    return None


@register("take_along_axis", (COMPRESSED,), supports=_supports_take_along_compressed)
def _take_along_axis_compressed(xp: Any, a: CompressedArray, indices: Any, axis: int) -> CompressedArray:
    """take_along_axis(compressed) -> compressed: lookups in the element COO, compressed back; O(size(indices) log nnz + nnz log nnz)."""
    e = take_along_coo(xp, compressed_to_coo(xp, a), indices, axis)
    return compress_like(xp, e, a.layout, a.blocksize, a.index_dtype, "take_along_axis")


@register("take_along_axis", (COMPRESSED,), rewrite=True)
def _take_along_axis_compressed_through_coo(xp: Any, a: CompressedArray, indices: Any, axis: int) -> COOArray:
    """take_along_axis(compressed) -> COO: lookups in the element COO; O(size(indices) log nnz)."""
    return take_along_coo(xp, compressed_to_coo(xp, a), indices, axis)


# -- lookups -----------------------------------------------------------------------------------------


def lookup(xp: Any, c: COOArray, positions: Any) -> Any:
    """The elements of the coalesced COO ``c`` at ``positions`` ``(sparse_dim, n)``: ``(n, *dense)``, the
    fill value where ``c`` specifies nothing. O(n log nnz)."""
    sd = c.sparse_dim()
    dense = tuple(c.shape[sd:])
    n = positions.shape[1]
    fill = _fill_scalar(xp, c.dtype, c.fill_value)
    if c.nnz == 0 or n == 0:
        return xp.full((n, *dense), fill, dtype=c.dtype, device=c.device)
    keys = _linearize(xp, c._idx, tuple(c.shape[:sd]))
    wanted = _linearize(xp, positions, tuple(c.shape[:sd]))
    at = xp.clip(xp.searchsorted(keys, wanted), 0, c.nnz - 1)
    found = xp.reshape(xp.take(keys, at) == wanted, (n, *(1,) * len(dense)))
    return gather_or_fill(xp, c, at, found)


def lookup_at(xp: Any, c: COOArray, positions: Any) -> Any:
    """The sub-arrays of the coalesced COO ``c`` at ``positions`` ``(k, n)`` over its first ``k`` dimensions,
    whatever its sparse_dim: ``(n, *c.shape[k:])``. O(n * prod(c.shape[k:sparse_dim]) log nnz)."""
    sd = c.sparse_dim()
    k, n = positions.shape
    dev = c.device
    if k == sd:
        return lookup(xp, c, positions)
    if k < sd:
        inner = tuple(c.shape[k:sd])
        size = prod(inner)
        if size == 0 or n == 0:
            fill = _fill_scalar(xp, c.dtype, c.fill_value)
            return xp.full((n, *c.shape[k:]), fill, dtype=c.dtype, device=dev)
        outer = xp.reshape(xp.broadcast_to(xp.astype(positions, xp.int64)[:, :, None], (k, n, size)), (k, n * size))
        sub = xp.reshape(xp.broadcast_to(xp.arange(size, dtype=xp.int64, device=dev)[None, :], (n, size)), (-1,))
        full = xp.concat([outer, xp.stack(_unravel(xp, sub, inner, xp.int64))], axis=0)
        return xp.reshape(lookup(xp, c, full), (n, *c.shape[k:]))
    rows = lookup(xp, c, positions[:sd, :])
    inner = tuple(c.shape[sd:k])
    size = prod(inner)
    if n == 0:
        return xp.reshape(rows, (0, *c.shape[k:]))
    flat = xp.reshape(rows, (n * size, *c.shape[k:]))
    sub = _linearize(xp, positions[sd:k, :], inner)
    return take_values(xp, flat, xp.arange(n, dtype=xp.int64, device=dev) * size + sub, axis=0)


def _gather_dense(xp: Any, x: Any, positions: Any) -> Any:
    """The sub-arrays of strided ``x`` at ``positions`` ``(k, n)`` over its first ``k`` dimensions."""
    k = positions.shape[0]
    flat = xp.reshape(x, (prod(tuple(x.shape[:k])), *x.shape[k:]))
    return take_values(xp, flat, _linearize(xp, positions, tuple(x.shape[:k])), axis=0)


# -- sparse_mask -------------------------------------------------------------------------------------


def _mask_coo(xp: Any, mask: COOArray, gather: Callable[[Any], Any], fill: Any) -> COOArray:
    m = coalesce_coo(xp, mask)
    return COOArray(m._idx, gather(m._idx), m.shape, backend=m._backend, xp=xp, coalesced=True, fill_value=fill)


def _mask_compressed(xp: Any, mask: CompressedArray, gather: Callable[[Any], Any], fill: Any) -> CompressedArray:
    nb = mask.batch_dim()
    blocks = compressed_to_block_coo(xp, mask)  # in the order of the mask's values
    if mask.layout.is_blocked:
        elements = block_coo_to_coo(xp, blocks, nb, mask.shape)
        values = gather(elements._idx)
        values = xp.reshape(values, (blocks.nnz, *mask.blocksize, *values.shape[1:]))
    else:
        values = gather(blocks._idx)
    values = xp.reshape(values, (*mask.shape[:nb], mask.nnz, *values.shape[1:]))
    return CompressedArray(
        mask._compressed, mask._plain, values, mask.shape, layout=mask.layout, backend=mask._backend, xp=xp,
        fill_value=fill, check=False,
    )  # fmt: skip


@register("sparse_mask", (strided, sparse_coo))
def _sparse_mask_strided_coo(xp: Any, x: Any, mask: COOArray) -> COOArray:
    """sparse_mask(strided, COO) -> COO: gather x at the mask's coalesced indices; O(nnz * dense size)."""
    return _mask_coo(xp, mask, lambda p: _gather_dense(xp, x, p), _fill_scalar(xp, x.dtype, 0))


@register("sparse_mask", (strided, COMPRESSED))
def _sparse_mask_strided_compressed(xp: Any, x: Any, mask: CompressedArray) -> CompressedArray:
    """sparse_mask(strided, compressed) -> compressed: gather x at every stored element; O(nnz * block * dense size)."""
    return _mask_compressed(xp, mask, lambda p: _gather_dense(xp, x, p), _fill_scalar(xp, x.dtype, 0))


@register("sparse_mask", (INDEXED, sparse_coo))
def _sparse_mask_indexed_coo(xp: Any, x: SparseArray, mask: COOArray) -> COOArray:
    """sparse_mask(sparse, COO) -> COO: look x's elements up at the mask's indices; O(nnz log nnz)."""
    c = element_coo(xp, x)
    return _mask_coo(xp, mask, lambda p: lookup_at(xp, c, p), x.fill_value)


@register("sparse_mask", (INDEXED, COMPRESSED))
def _sparse_mask_indexed_compressed(xp: Any, x: SparseArray, mask: CompressedArray) -> CompressedArray:
    """sparse_mask(sparse, compressed) -> compressed: look x's elements up at every stored element; O(nnz log nnz)."""
    c = element_coo(xp, x)
    return _mask_compressed(xp, mask, lambda p: lookup_at(xp, c, p), x.fill_value)


# -- where -------------------------------------------------------------------------------------------


def where_dtype(xp: Any, x1: Any, x2: Any) -> Any:
    """The result dtype of ``where(c, x1, x2)``: the arrays' promoted dtype; a Python scalar takes the other
    operand's dtype (the public layer has checked that its kind fits), two scalars the backend's default."""
    arrays = [v for v in (x1, x2) if not isinstance(v, (bool, int, float, complex))]
    if arrays:
        return result_dtype(xp, *(v.dtype for v in arrays))
    return xp.result_type(xp.asarray(x1), xp.asarray(x2))


def _operand(xp: Any, v: Any, dtype: Any, device: Any) -> Any:
    if isinstance(v, (bool, int, float, complex)):
        return scalar_array(xp, v, dtype, device)
    return xp.astype(v, dtype) if v.dtype != dtype else v


@register("where", (STRIDED_OR_INDEXED, OPERAND, OPERAND), supports=lambda xp, c, x1, x2: _dense_where_reason(c, x1, x2))
def _where_any_any_any(xp: Any, c: Any, x1: Any, x2: Any) -> Any:
    """where(...) -> strided when an operand is strided: the backend's where on dense operands; O(numel)."""
    from ..._conversion import to_dense

    dtype = where_dtype(xp, x1, x2)
    cd = to_dense(c)
    dev = _device(cd)
    return xp.where(cd, _operand(xp, to_dense(x1) if isinstance(x1, SparseArray) else x1, dtype, dev),
                    _operand(xp, to_dense(x2) if isinstance(x2, SparseArray) else x2, dtype, dev))  # fmt: skip


def _dense_where_reason(c: Any, x1: Any, x2: Any) -> str | None:
    if any(not isinstance(v, (SparseArray, bool, int, float, complex)) for v in (c, x1, x2)):
        return None
    return "no operand is strided, so the result is sparse and densifying the operands is not allowed"


def where_coo(xp: Any, c: SparseArray, x1: Any, x2: Any) -> COOArray:
    """``where`` of a sparse condition with sparse or scalar operands, as a coalesced COO over the union of
    the condition's pattern and the pattern of the operand its fill value chooses."""
    arrays = [v for v in (c, x1, x2) if isinstance(v, SparseArray)]
    shape = broadcast_shapes("where", *(tuple(v.shape) for v in arrays))
    coos = {id(v): coalesce_coo(xp, broadcast_coo(xp, element_coo(xp, v), shape)) for v in arrays}
    # the operands in the condition's split into sparse and dense dimensions, as the binary elementwise
    # kernels bring their second operand to the first's
    sd = coos[id(c)].sparse_dim()
    for key, v in coos.items():
        if v.sparse_dim() > sd:
            coos[key] = coalesce_coo(xp, _group_sparse(xp, v, v.sparse_dim() - sd))
        elif v.sparse_dim() < sd:
            coos[key] = regroup_coo(xp, v, sd - v.sparse_dim())
    dtype = where_dtype(xp, x1, x2)
    cc = coos[id(c)]
    chosen = x1 if c.fill_value else x2
    sources = [cc] + ([coos[id(chosen)]] if isinstance(chosen, SparseArray) else [])
    idx = xp.concat([xp.astype(s._idx, xp.int64) for s in sources], axis=1)
    if len(sources) > 1 and idx.shape[1] > 1:
        idx = xp.take(idx, lexsort_indices(xp, idx), axis=1)
        first = xp.ones((1,), dtype=xp.bool, device=cc.device)
        differs = xp.any(idx[:, 1:] != idx[:, :-1], axis=0) if idx.shape[0] else xp.zeros((idx.shape[1] - 1,), dtype=xp.bool, device=cc.device)
        idx = xp.take(idx, xp.nonzero(xp.concat([first, differs]))[0], axis=1)

    def values_of(v: Any) -> Any:
        if isinstance(v, SparseArray):
            return xp.astype(lookup(xp, coos[id(v)], idx), dtype)
        return scalar_array(xp, v, dtype, cc.device) if isinstance(v, (bool, int, float, complex)) else xp.asarray(v, dtype=dtype, device=cc.device)

    values = xp.where(lookup(xp, cc, idx), values_of(x1), values_of(x2))
    fill_of = chosen.fill_value if isinstance(chosen, SparseArray) else chosen
    fill = python_scalar(xp, scalar_array(xp, fill_of, dtype, cc.device))
    index_dtype = getattr(c, "index_dtype", xp.int64)
    return COOArray(xp.astype(idx, index_dtype), values, shape, backend=c._backend, xp=xp, coalesced=True, fill_value=fill)


@register("where", (sparse_coo, INDEXED_OR_SCALAR, INDEXED_OR_SCALAR))
def _where_coo_indexed_indexed(xp: Any, c: COOArray, x1: Any, x2: Any) -> COOArray:
    """where(COO, sparse|scalar, sparse|scalar) -> COO; fill chosen by the condition's fill; O(nnz log nnz)."""
    return where_coo(xp, c, x1, x2)


@register("where", (COMPRESSED, INDEXED_OR_SCALAR, INDEXED_OR_SCALAR))
def _where_compressed_indexed_indexed(xp: Any, c: CompressedArray, x1: Any, x2: Any) -> SparseArray:
    """where(compressed, sparse|scalar, sparse|scalar) -> the condition's layout (COO if broadcast); O(nnz log nnz)."""
    out = where_coo(xp, c, x1, x2)
    if tuple(out.shape) != tuple(c.shape):
        return out
    return compress_like(xp, out, c.layout, c.blocksize, c.index_dtype, "where")


# -- nonzero -----------------------------------------------------------------------------------------


@register("nonzero", (strided,))
def _nonzero_strided(xp: Any, x: Any) -> tuple[Any, ...]:
    """nonzero(strided): the backend's nonzero (of ``x != 0`` for an unsigned dtype it reads not); O(numel)."""
    try:
        return tuple(xp.nonzero(x))
    except (NotImplementedError, RuntimeError):
        # torch's nonzero reads no uint16/uint32/uint64, its comparison with zero does
        if signed_twin(xp, x.dtype) is None:
            raise
    return tuple(xp.nonzero(x != 0))


def nonzero_coo(xp: Any, c: COOArray) -> tuple[Any, ...]:
    """The row-major coordinates of the non-zero elements of a coalesced COO with fill value 0."""
    sd = c.sparse_dim()
    dense = tuple(c.shape[sd:])
    flat = xp.reshape(c._vals, (c.nnz, prod(dense)))
    nonzero = flat if xp.isdtype(flat.dtype, "bool") else flat != 0
    entry, sub = xp.nonzero(nonzero)
    coords = [xp.astype(xp.take(c._idx[d, :], entry), xp.int64) for d in range(sd)]
    if dense:
        coords += _unravel(xp, xp.astype(sub, xp.int64), dense, xp.int64)
    return tuple(coords)


@register("nonzero", (sparse_coo,))
def _nonzero_coo(xp: Any, a: COOArray) -> tuple[Any, ...]:
    """nonzero(COO): coalesce, then the non-zero entries and dense elements in row-major order; O(nnz log nnz)."""
    return nonzero_coo(xp, coalesce_coo(xp, a))


@register("nonzero", (COMPRESSED,))
def _nonzero_compressed(xp: Any, a: CompressedArray) -> tuple[Any, ...]:
    """nonzero(compressed): through the coalesced element COO; O(nnz log nnz)."""
    return nonzero_coo(xp, compressed_to_coo(xp, a))


# -- astype and clone --------------------------------------------------------------------------------


@register("astype", (strided,))
def _astype_strided(xp: Any, x: Any, dtype: Any, copy: bool) -> Any:
    """astype(strided): the backend's astype; O(numel)."""
    return xp.astype(x, dtype, copy=copy)


@register("astype", (INDEXED,))
def _astype_indexed(xp: Any, a: SparseArray, dtype: Any, copy: bool) -> SparseArray:
    """astype(sparse): cast values and fill (COO coalesced first), indices kept (copied with copy=True); O(nnz)."""
    if isinstance(a, COOArray):
        # a cast does not commute with the sum of duplicates (True + True, 0.5 + 0.5 to int, int8 overflow)
        a = coalesce_coo(xp, a)
    values = xp.astype(a._vals, dtype, copy=True)
    fill = python_scalar(xp, xp.astype(scalar_array(xp, a.fill_value, a.dtype, a.device), dtype))
    out = a._with_values(values, fill)
    if not copy:
        return out
    return out._map_components(lambda comp: comp if comp is values else xp.asarray(comp, copy=True), a._backend, xp)


@register("clone", (strided,))
def _clone_strided(xp: Any, x: Any) -> Any:
    """clone(strided): a copy; O(numel)."""
    return xp.asarray(x, copy=True)


@register("clone", (ANY_SPARSE,))
def _clone_sparse(xp: Any, a: SparseArray) -> SparseArray:
    """clone(sparse): a copy of every component, metadata kept; O(nnz)."""
    return a._map_components(lambda comp: xp.asarray(comp, copy=True), a._backend, xp)


# -- spdiags -----------------------------------------------------------------------------------------


@register("spdiags", (strided, strided))
def _spdiags_strided_strided(xp: Any, diagonals: Any, offsets: Any, shape: tuple[int, int], backend: Any) -> COOArray:
    """spdiags(diagonals, offsets) -> COO: diagonals[k, j] at (j - offsets[k], j), sorted; O(n_diag * n log)."""
    m, n = shape
    dev = _device(diagonals)
    width = min(int(diagonals.shape[1]), n)
    n_diag = int(diagonals.shape[0])
    cols = xp.broadcast_to(xp.arange(width, dtype=xp.int64, device=dev)[None, :], (n_diag, width))
    rows = cols - xp.astype(offsets, xp.int64)[:, None]
    inside = xp.reshape((rows >= 0) & (rows < m), (-1,))
    keep = xp.nonzero(inside)[0]
    idx = xp.stack([xp.take(xp.reshape(rows, (-1,)), keep), xp.take(xp.reshape(cols, (-1,)), keep)])
    values = take_values(xp, xp.reshape(diagonals[:, :width], (-1,)), keep, axis=0)
    perm = lexsort_indices(xp, idx)
    fill = _fill_scalar(xp, diagonals.dtype, 0)
    return COOArray(
        xp.take(idx, perm, axis=1), take_values(xp, values, perm, axis=0), (m, n), backend=backend, xp=xp, coalesced=True, fill_value=fill
    )
