"""Generic kernels of the creation functions that take an array: ``tril`` and ``triu``.

Every sparse operand is read as its element COO (batch dimensions of a compressed array becoming sparse
dimensions); an element is kept when some position of it (its dense sub-array, for a hybrid array
whose last dimensions are dense) lies on the kept side of the ``k``-th diagonal, and the positions of a
kept element that lie on the other side are set to zero. The result is converted back to the operand's
layout (blocksize and index dtype). One CSR or CSC matrix (no batch, block or dense dimensions) is
filtered on its pointers instead: its kept entries stay in order, so nothing is sorted again.
"""

from __future__ import annotations

from typing import Any

import array_api_compat

from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, SparseArray, sparse_coo
from ...formats._ops import expand_compressed, prod
from .conversion import compressed_to_coo, is_plus_zero, take_values
from .shape import as_layout_of

__all__ = ["supports_triangle", "triangle_coo"]


def supports_triangle(xp: Any, a: SparseArray, k: int, lower: bool) -> str | None:
    """Why no kernel takes the triangle of ``a``, or None: the other side's zeros and its fill value must agree."""
    f = a.fill_value
    if is_plus_zero(f):
        # the zeros written are +0.0: a -0.0 fill value would leave the other side's unspecified elements -0.0
        return None
    return (
        f"fill value {f!r} is not 0: the elements {'above' if lower else 'below'} the diagonal become 0 while the "
        "unspecified ones on the other side keep the fill value, which no single fill value describes"
    )


def _row_col(xp: Any, a: COOArray) -> tuple[Any, Any]:
    """Row and column index of every scalar of ``a``'s values, broadcastable to ``a._vals.shape``."""
    sd, dd = a.sparse_dim(), a.dense_dim()
    dev = array_api_compat.device(a._vals)
    m, n = a.shape[-2], a.shape[-1]
    lead = (a._vals.shape[0],)
    if dd == 0:
        return xp.astype(a._idx[sd - 2, :], xp.int64), xp.astype(a._idx[sd - 1, :], xp.int64)
    cols = xp.reshape(xp.arange(n, dtype=xp.int64, device=dev), (1,) * dd + (n,))
    if dd == 1:
        rows = xp.reshape(xp.astype(a._idx[sd - 1, :], xp.int64), lead + (1,))
        return rows, cols
    rows = xp.reshape(xp.arange(m, dtype=xp.int64, device=dev), (1,) * (dd - 1) + (m, 1))
    return rows, cols


def triangle_coo(xp: Any, a: COOArray, k: int, lower: bool) -> COOArray:
    """``tril``/``triu`` of a COO array with fill value 0; O(size of the values)."""
    rows, cols = _row_col(xp, a)
    keep = (cols - rows <= k) if lower else (cols - rows >= k)
    keep = xp.broadcast_to(keep, tuple(a._vals.shape))
    zero = xp.zeros((), dtype=a._vals.dtype, device=array_api_compat.device(a._vals))
    vals = xp.where(keep, a._vals, zero)
    if vals.ndim > 1:
        any_kept = xp.any(xp.reshape(keep, (keep.shape[0], prod(tuple(keep.shape[1:])))), axis=1)
    else:
        any_kept = keep
    where = xp.nonzero(any_kept)[0]
    return COOArray(
        xp.take(a._idx, where, axis=1), take_values(xp, vals, where, axis=0), a.shape,
        backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value,
    )  # fmt: skip


def _supports_tril(xp: Any, a: SparseArray, k: int) -> str | None:
    return supports_triangle(xp, a, k, True)


def _supports_triu(xp: Any, a: SparseArray, k: int) -> str | None:
    return supports_triangle(xp, a, k, False)


@register("tril", (sparse_coo,), supports=_supports_tril)
def _tril_coo(xp: Any, a: COOArray, k: int) -> COOArray:
    """tril(COO) -> COO: mask of the indices (and dense sub-arrays); O(nnz)."""
    return triangle_coo(xp, a, k, True)


@register("triu", (sparse_coo,), supports=_supports_triu)
def _triu_coo(xp: Any, a: COOArray, k: int) -> COOArray:
    """triu(COO) -> COO: mask of the indices (and dense sub-arrays); O(nnz)."""
    return triangle_coo(xp, a, k, False)


def _triangle_compressed(xp: Any, a: CompressedArray, k: int, lower: bool) -> SparseArray:
    """One CSR or CSC matrix: its kept entries filtered on the pointers, still sorted; any other array: the
    element COO's triangle, compressed again."""
    from .indexing import keep_entries

    if a.ndim != 2 or a.layout.is_blocked:
        return as_layout_of(xp, triangle_coo(xp, compressed_to_coo(xp, a), k, lower), a, "tril" if lower else "triu")
    major = xp.astype(expand_compressed(xp, a._compressed, a.nnz, a._backend), xp.int64)
    minor = xp.astype(a._plain, xp.int64)
    rows, cols = (major, minor) if a.layout.compressed_dim == 0 else (minor, major)
    ptr, where = keep_entries(xp, a._compressed, (cols - rows <= k) if lower else (cols - rows >= k), False, a._backend)
    return CompressedArray(
        xp.astype(ptr, a.index_dtype), xp.take(a._plain, where), take_values(xp, a._vals, where, axis=0), a.shape,
        layout=a.layout, backend=a._backend, xp=xp, fill_value=a.fill_value, check=False,
    )  # fmt: skip


@register("tril", (COMPRESSED,), supports=_supports_tril)
def _tril_compressed(xp: Any, a: CompressedArray, k: int) -> SparseArray:
    """tril(CSR, CSC, BSR, BSC) -> same layout: one matrix filtered on its pointers, else the element COO; O(nnz)."""
    return _triangle_compressed(xp, a, k, True)


@register("triu", (COMPRESSED,), supports=_supports_triu)
def _triu_compressed(xp: Any, a: CompressedArray, k: int) -> SparseArray:
    """triu(CSR, CSC, BSR, BSC) -> same layout: one matrix filtered on its pointers, else the element COO; O(nnz)."""
    return _triangle_compressed(xp, a, k, False)
