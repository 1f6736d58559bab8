"""Generic kernels of the linear-algebra extension that keep sparse operands sparse: ``diagonal`` and the
norms ``vector_norm`` and ``matrix_norm`` (the products live in ``linalg.py``).

``diagonal`` of a sparse array is a COO array (the diagonal of a compressed array has one dimension
less, which no compressed layout has in general): the stored elements on the diagonal, their fill
value kept. The norms are reductions of ``abs(x)``, computed by xsparse's sparse reductions, which count
every unspecified element as the fill value.
"""

from __future__ import annotations

from typing import Any

import array_api_compat

from ...dispatch import register
from ...formats import COMPRESSED, INDEXED, COOArray, CompressedArray, SparseArray, sparse_coo
from .conversion import compressed_to_coo, take_values

__all__ = ["diagonal_coo", "diagonal_length", "diagonal_on_pointers"]


def diagonal_length(m: int, n: int, offset: int) -> int:
    """The number of elements of the ``offset``-th diagonal of an ``m x n`` matrix."""
    return max(0, min(m, n - offset) if offset >= 0 else min(m + offset, n))


def diagonal_coo(xp: Any, a: COOArray, offset: int) -> COOArray:
    """The ``offset``-th diagonal of the last two dimensions of a COO array; O(nnz) (O(size of values)
    when both dimensions are dense)."""
    sd, dd = a.sparse_dim(), a.dense_dim()
    m, n = a.shape[-2], a.shape[-1]
    length = diagonal_length(m, n, offset)
    shape = (*a.shape[:-2], length)
    dev = array_api_compat.device(a._vals)
    if dd >= 2:
        return COOArray(
            a._idx, xp.linalg.diagonal(a._vals, offset=offset), shape,
            backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value,
        )  # fmt: skip
    idx, vals = a._idx, a._vals
    if dd == 0:
        rows, cols = xp.astype(idx[sd - 2, :], xp.int64), xp.astype(idx[sd - 1, :], xp.int64)
        keep = xp.nonzero(cols - rows == offset)[0]
        where = rows if offset >= 0 else cols
        new_idx = xp.concat([idx[: sd - 2, :], xp.astype(where, idx.dtype)[None, :]], axis=0)
        return COOArray(
            xp.take(new_idx, keep, axis=1), take_values(xp, vals, keep, axis=0), shape,
            backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value,
        )  # fmt: skip
    # the row is the last sparse dimension and the column the (only) dense one
    rows = xp.astype(idx[sd - 1, :], xp.int64)
    cols = rows + offset
    keep = xp.nonzero((cols >= 0) & (cols < n))[0]
    element = xp.arange(int(vals.shape[0]), dtype=xp.int64, device=dev)
    picked = take_values(xp, xp.reshape(vals, (-1,)), xp.take(element * n + cols, keep), axis=0)
    position = xp.astype(rows if offset >= 0 else cols, idx.dtype)
    new_idx = xp.concat([idx[: sd - 1, :], position[None, :]], axis=0)
    return COOArray(
        xp.take(new_idx, keep, axis=1), picked, shape,
        backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value,
    )  # fmt: skip


@register("diagonal", (sparse_coo,))
def _diagonal_coo(xp: Any, a: COOArray, offset: int) -> COOArray:
    """diagonal(COO) -> COO: the stored elements on the diagonal; O(nnz)."""
    return diagonal_coo(xp, a, offset)


def diagonal_on_pointers(xp: Any, a: CompressedArray, offset: int, find: Any = None) -> COOArray:
    """The diagonal of one CSR or CSC matrix: its points looked up in their slices (by ``find``, with
    :func:`~xsparse.backends.array_api.indexing.find_in_slices`'s signature)."""
    from .indexing import find_in_slices, points_on_pointers

    length = diagonal_length(a.shape[0], a.shape[1], offset)
    d = xp.arange(length, dtype=xp.int64, device=a.device)
    points = [d + max(0, -offset), d + max(0, offset)]
    return points_on_pointers(xp, a, points, (length,), find_in_slices if find is None else find)


@register("diagonal", (COMPRESSED,))
def _diagonal_compressed(xp: Any, a: CompressedArray, offset: int) -> COOArray:
    """diagonal(CSR, CSC, BSR, BSC) -> COO: bisection of each slice (one matrix), else the element COO; O(n log nnz)."""
    if a.ndim == 2 and not a.layout.is_blocked:
        return diagonal_on_pointers(xp, a, offset)
    return diagonal_coo(xp, compressed_to_coo(xp, a), offset)


@register("vector_norm", (INDEXED,))
def _vector_norm_sparse(xp: Any, a: SparseArray, axis: Any, keepdims: bool, ord: Any) -> Any:  # noqa: A002
    """vector_norm(sparse) -> reduction layout: sparse reductions of abs(a); O(nnz)."""
    from ... import _elementwise as ew
    from ... import _reduction as red

    mag = ew.abs(a)
    if ord == float("inf"):
        axes = range(a.ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
        if not all(a.shape[d] for d in axes):
            # the largest magnitude of no elements: 0, as NumPy's (the max's own rule would raise)
            return red.sum(mag, axis=axis, keepdims=keepdims)
        return red.max(mag, axis=axis, keepdims=keepdims)
    if ord == float("-inf"):
        return red.min(mag, axis=axis, keepdims=keepdims)
    if ord == 0:
        return red.sum(ew.not_equal(mag, 0), axis=axis, keepdims=keepdims, dtype=mag.dtype)
    if ord == 1:
        return red.sum(mag, axis=axis, keepdims=keepdims)
    if ord == 2:
        return ew.sqrt(red.sum(ew.square(mag), axis=axis, keepdims=keepdims))
    return ew.pow(red.sum(ew.pow(mag, float(ord)), axis=axis, keepdims=keepdims), 1.0 / float(ord))


def _supports_matrix_norm(xp: Any, a: SparseArray, keepdims: bool, ord: Any) -> str | None:
    if ord in ("nuc", 2, -2):
        return f"ord={ord!r} needs the singular values, which a dense factorization computes"
    return None


@register("matrix_norm", (INDEXED,), supports=_supports_matrix_norm)
def _matrix_norm_sparse(xp: Any, a: SparseArray, keepdims: bool, ord: Any) -> Any:  # noqa: A002
    """matrix_norm(sparse, 'fro' / 1 / -1 / inf / -inf) -> reduction layout: sparse reductions; O(nnz)."""
    from ... import _elementwise as ew
    from ... import _reduction as red

    mag = ew.abs(a)
    if ord == "fro":
        return ew.sqrt(red.sum(ew.square(mag), axis=(-2, -1), keepdims=keepdims))
    # 1: the largest column sum; inf: the largest row sum; negative: the smallest. Reduced without keepdims,
    # the kept dimensions added at the end: the result's layout is that of a reduction of both matrix
    # dimensions at once, as for 'fro' (strided for one matrix; a kept size-1 sparse dimension made the
    # second step's result sparse)
    summed = -2 if ord in (1, -1) else -1
    sums = red.sum(mag, axis=summed)
    if ord in (1, float("inf")) and not sums.shape[-1]:
        # the largest of no sums (no columns for 1, no rows for inf): 0, as NumPy's and torch's (max would raise)
        norm = red.sum(sums, axis=-1)
    else:
        norm = (red.max if ord in (1, float("inf")) else red.min)(sums, axis=-1)
    if not keepdims:
        return norm
    from ... import _shape

    return _shape.expand_dims(_shape.expand_dims(norm, axis=-1), axis=-1)
