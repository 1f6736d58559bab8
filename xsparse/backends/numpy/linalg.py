"""Native linear-algebra kernels of the NumPy backend: the compiled SpMV, SpMM, SpGEMM and SDDMM of ``_cpu``.

A product of a CSR or CSC matrix with a strided one runs in one of two compiled forms, chosen so that
the sparse operand is read as it is stored (a CSC matrix is the CSR matrix of its transpose; nothing is
converted, copied or re-indexed, whatever the index dtype):

=================  ============================================  =======
product            computed as (S: the stored CSR matrix)        form
=================  ============================================  =======
``CSR @ X``        ``S @ X``                                     gather
``CSC @ X``        ``S.T @ X``                                   scatter
``X @ CSR``        ``(S.T @ X.T).T``                             scatter
``X @ CSC``        ``(S @ X.T).T``                               gather
=================  ============================================  =======

A COO operand (a matrix, or a batch of matrices with a strided matrix on the right) takes the same two
forms as the CSR matrix ``S`` of its entries grouped by (batch, row), which a coalesced array already
is and any other becomes through a counting scatter; duplicates are summed by the product itself.
Two 2-D COO operands multiply as those CSR matrices (the compiled SpGEMM accumulates each row densely,
so neither needs coalescing), into a coalesced COO result.

The gather form is parallel over the sparse matrix's rows; the scatter form over batches, else over
the sparse rows into per-thread copies of the result that are summed (over the result's columns where
the copies would take more than 256 MiB).
The ``X @ sparse`` results are the transposes of C-contiguous arrays (Fortran-ordered for 2-D results):
a copy into C order would cost as much as a SpMV. Sparse-sparse products (SpGEMM) return the left
operand's layout: ``CSR @ CSR`` directly, ``CSC @ CSC`` as ``(S_b @ S_a)`` of the stored matrices.

Operands arrive as the user gave them (Array API matmul semantics): a 1-D strided operand is a vector,
batch dimensions broadcast, where the sparse operand's batch is either its own or shared by every batch.
Mixed dtypes are promoted (the operand of the other dtype is cast). The kernels decline, with a reason,
a fill value other than 0, dense dimensions, dtypes other than float32, float64, complex64 and
complex128, and batch shapes they cannot broadcast.
"""

from __future__ import annotations

import cmath
import math
from typing import Any, cast

import numpy as np

from ..._common import scalar_for
from ...dispatch import register
from ...formats import INDEXED, COOArray, CompressedArray, sparse_coo, sparse_csc, sparse_csr, strided
from ...formats._invariants import check_coo_bounds
from .. import _cpu
from ..array_api.shape import wide_enough
from .conversion import fold

__all__: list[str] = []

_LINALG_DTYPES = _cpu._LINALG_DTYPES
_INT32_MAX = np.iinfo(np.int32).max


# -- declining ---------------------------------------------------------------------------------------------


def _sparse_reason(a: CompressedArray) -> str | None:
    reason = _cpu.unavailable_reason()
    if reason is not None:
        return reason
    if a._fill_value != 0:
        return "the compiled kernels handle fill value 0 only"
    if a._vals.ndim != a._compressed.ndim:  # (*batch, nse) values: no dense dimensions
        return "the compiled kernels handle sparse operands without dense dimensions"
    return None


def _dtype_reason(*dtypes: Any) -> str | None:
    dtype = dtypes[0] if len(set(dtypes)) == 1 else np.result_type(*dtypes)
    if dtype not in _LINALG_DTYPES:
        return f"the compiled kernels handle float32, float64, complex64 and complex128 values, not {dtype}"
    return None


def _strided_reason(x: Any, what: str) -> str | None:
    if not isinstance(x, np.ndarray):
        return f"the compiled kernels take NumPy arrays, the {what} is a {type(x).__name__}"
    if x.ndim == 0:
        return f"the {what} is 0-dimensional; matmul needs at least one dimension"
    return None


def _batch_reason(sparse_batch: tuple[int, ...], other_batch: tuple[int, ...]) -> str | None:
    if sparse_batch == other_batch or not sparse_batch:
        return None
    try:
        batch = np.broadcast_shapes(sparse_batch, other_batch)
    except ValueError:
        return f"the batch shapes {sparse_batch} and {other_batch} do not broadcast"
    if sparse_batch != batch and math.prod(sparse_batch) != 1:
        return "broadcasting the sparse operand's batch dimensions is left to the generic kernel"
    return None


def _input_reason(c: Any) -> str | None:
    if not isinstance(c, np.ndarray):
        return f"the compiled kernels take NumPy arrays, the input is a {type(c).__name__}"
    return None


def _scalar_reason(dtype: Any, *scalars: Any) -> str | None:
    if np.dtype(dtype).kind != "c" and any(isinstance(s, complex) or np.iscomplexobj(s) for s in scalars):
        return "complex alpha or beta with real arrays is left to the generic kernel"
    return None


# -- operands as the kernels take them ---------------------------------------------------------------------


def _csr_components(a: CompressedArray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The stored compressed matrix as (nb, n) arrays (nb = 1 without batch dimensions), values as dtype."""
    ci, pi, vals = a._compressed, a._plain, a._vals
    if ci.ndim == 1:
        ci, pi, vals = ci[None], pi[None], vals[None]
    elif ci.ndim > 2:
        nb = math.prod(ci.shape[:-1])
        ci = ci.reshape(nb, ci.shape[-1])
        pi = pi.reshape(nb, pi.shape[-1])
        vals = vals.reshape(nb, vals.shape[-1])
    if vals.dtype != dtype:
        vals = vals.astype(dtype)
    return ci, pi, vals


def _as_batch3(x: np.ndarray, batch: tuple[int, ...], nb: int, dtype: np.dtype) -> np.ndarray:
    """A (*xbatch, r, c) array as (nb, r, c), broadcast over the batch (a view where NumPy can make one)."""
    if x.dtype != dtype:
        x = x.astype(dtype)
    if x.ndim == 2:
        return np.broadcast_to(x, (nb, *x.shape)) if nb != 1 else x[None]
    if x.shape[:-2] != batch:
        x = np.broadcast_to(x, (*batch, *x.shape[-2:]))
    return x.reshape(nb, *x.shape[-2:])


# -- sparse @ strided --------------------------------------------------------------------------------------


def _sparse_strided_reason(a: CompressedArray, b: Any) -> str | None:
    reason = _sparse_reason(a) or _strided_reason(b, "right operand") or _dtype_reason(a._vals.dtype, b.dtype)
    if reason is not None:
        return reason
    return _batch_reason(a._shape[:-2], b.shape[:-2]) if b.ndim > 2 else None


def _sparse_times_strided(a: CompressedArray, b: np.ndarray, c: Any = None, alpha: Any = 1.0, beta: Any = 0.0) -> np.ndarray:
    """alpha * a @ b + beta * c for compressed a (CSR or CSC) and strided b."""
    vals = a._vals
    csc = a._layout is sparse_csc
    if c is None and b.ndim <= 2 and vals.ndim == 1 and b.dtype == vals.dtype and (not csc or b.ndim == 1):
        # A matrix times a vector or matrix of its dtype: no reshaping, broadcasting or casting to do,
        # which is what makes a small product cost little more than the compiled kernel. The extension
        # is called directly (the wrapper's keyword handling is a tenth of a 10 x 10 SpMV); it answers
        # NotImplemented for index arrays it must first normalise, which the wrapper then does.
        m, n = a._shape
        native = _cpu._NATIVE[0] if _cpu._NATIVE else _cpu._native_module()
        ci, pi = a._compressed, a._plain
        out = _cpu.empty((m,) if b.ndim == 1 else (m, b.shape[1]), dtype=vals.dtype)
        # The kernel checks the bounds of the indices it reads (all of them, for one matrix) unless an
        # earlier product or the validator did: the array is immutable, so once is enough.
        checked = a._bounds_checked or a._in_range
        threads = _cpu.product_threads(pi.shape[0] * (b.shape[1] if b.ndim == 2 else 1))
        if native.csr_mm(ci, pi, vals, m if csc else n, b, out, None, 1.0, 0.0, csc, checked, threads) is NotImplemented:
            out = _cpu.csr_matmul(ci, pi, vals, m if csc else n, b, transpose=csc, checked=checked)
        if b.ndim == 1 or b.shape[1] > 0:  # with no columns, the scatter form reads no index
            a._in_range = True  # the bounds only: not the order (invariant 5.6), which spsolve needs
        return out
    dtype = vals.dtype if vals.dtype == b.dtype else np.result_type(vals.dtype, b.dtype)
    m, n = a._shape[-2], a._shape[-1]
    a_batch = a._shape[:-2]
    if b.ndim == 1:
        batch, k = a_batch, 1
        if b.dtype != dtype:
            b = b.astype(dtype)
        nb = math.prod(batch)
        d = b.reshape(1, n, 1)
        if nb != 1:
            d = np.broadcast_to(d, (nb, n, 1))
        shape: tuple[int, ...] = (*batch, m)
    else:
        batch = a_batch if b.ndim == 2 else np.broadcast_shapes(a_batch, b.shape[:-2])
        k = b.shape[-1]
        nb = math.prod(batch)
        d = _as_batch3(b, batch, nb, dtype)
        shape = (*batch, m, k)
    ci, pi, vals = _csr_components(a, dtype)
    if csc and k > 1 and d.strides[2] != d.itemsize:
        d = np.ascontiguousarray(d)  # the scatter form reads rows of d as vectors
    c3 = None
    if c is not None and beta != 0:
        c3 = np.broadcast_to(np.asarray(c, dtype=dtype), shape).reshape(nb, m, k)
    # CSR: S = A (m x n); CSC: S = A.T (n x m), A @ X = S.T @ X.
    out = _cpu.csr_matmul(ci, pi, vals, m if csc else n, d, transpose=csc, c=c3, alpha=alpha, beta=beta,
                          checked=a._bounds_checked or a._in_range)  # fmt: skip
    return out.reshape(shape)


def _supports_sparse_strided(xp: Any, a: CompressedArray, b: Any) -> str | None:
    return _sparse_strided_reason(a, b)


@register("matmul", (sparse_csr, strided), backend="numpy", supports=_supports_sparse_strided)
def _matmul_csr_strided_numpy(xp: Any, a: CompressedArray, b: Any) -> Any:
    """CSR @ strided: compiled SpMV / SpMM (row gather, register tiles); O(nnz * K), all cores."""
    return _sparse_times_strided(a, b)


@register("matmul", (sparse_csc, strided), backend="numpy", supports=_supports_sparse_strided)
def _matmul_csc_strided_numpy(xp: Any, a: CompressedArray, b: Any) -> Any:
    """CSC @ strided: compiled scatter over the stored columns; O(nnz * K + M * K), all cores."""
    return _sparse_times_strided(a, b)


# -- strided @ sparse --------------------------------------------------------------------------------------


def _strided_sparse_reason(x: Any, a: CompressedArray) -> str | None:
    reason = _sparse_reason(a) or _strided_reason(x, "left operand") or _dtype_reason(x.dtype, a._vals.dtype)
    if reason is not None:
        return reason
    return _batch_reason(a._shape[:-2], x.shape[:-2]) if x.ndim > 2 else None


def _strided_times_sparse(x: np.ndarray, a: CompressedArray, c: Any = None, alpha: Any = 1.0, beta: Any = 0.0) -> np.ndarray:
    """alpha * x @ a + beta * c for strided x and compressed a (CSR or CSC), as (a.T @ x.T).T."""
    dtype = a._vals.dtype if a._vals.dtype == x.dtype else np.result_type(a._vals.dtype, x.dtype)
    kk, n = a._shape[-2], a._shape[-1]
    a_batch = a._shape[:-2]
    if x.ndim == 1:
        batch, p = a_batch, 1
        nb = math.prod(batch)
        if x.dtype != dtype:
            x = x.astype(dtype)
        d = x.reshape(1, kk, 1)
        if nb != 1:
            d = np.broadcast_to(d, (nb, kk, 1))
        shape: tuple[int, ...] = (*batch, n)
    else:
        batch = a_batch if x.ndim == 2 else np.broadcast_shapes(a_batch, x.shape[:-2])
        p = x.shape[-2]
        nb = math.prod(batch)
        d = _as_batch3(x, batch, nb, dtype).swapaxes(1, 2)  # x.T, (nb, kk, p)
        shape = (*batch, p, n)
    ci, pi, vals = _csr_components(a, dtype)
    csr = a._layout is sparse_csr
    if csr and p > 1 and d.strides[2] != d.itemsize:
        d = np.ascontiguousarray(d)  # the scatter form reads rows of d (columns of x) as vectors
    c3 = None
    if c is not None and beta != 0:
        cb = np.broadcast_to(np.asarray(c, dtype=dtype), shape)
        c3 = cb.reshape(nb, n, 1) if x.ndim == 1 else cb.reshape(nb, p, n).swapaxes(1, 2)
    # CSR: S = A (kk x n), result.T = S.T @ x.T; CSC: S = A.T (n x kk), result.T = S @ x.T.
    out = _cpu.csr_matmul(ci, pi, vals, n if csr else kk, d, transpose=csr, c=c3, alpha=alpha, beta=beta,
                          checked=a._bounds_checked or a._in_range)  # fmt: skip
    if x.ndim == 1:
        return out.reshape(shape)
    return out.swapaxes(1, 2).reshape(shape)


def _supports_strided_sparse(xp: Any, x: Any, a: CompressedArray) -> str | None:
    return _strided_sparse_reason(x, a)


@register("matmul", (strided, sparse_csr), backend="numpy", supports=_supports_strided_sparse)
def _matmul_strided_csr_numpy(xp: Any, x: Any, a: CompressedArray) -> Any:
    """strided @ CSR as (CSR.T @ x.T).T: compiled scatter; O(nnz * P + N * P), all cores."""
    return _strided_times_sparse(x, a)


@register("matmul", (strided, sparse_csc), backend="numpy", supports=_supports_strided_sparse)
def _matmul_strided_csc_numpy(xp: Any, x: Any, a: CompressedArray) -> Any:
    """strided @ CSC as (S @ x.T).T, S the stored CSR: compiled row gather; O(nnz * P), all cores."""
    return _strided_times_sparse(x, a)


# -- COO with strided --------------------------------------------------------------------------------------
#
# A COO array (*batch, M, K) is the matrix of its (batch, row) pairs by its columns, (prod(batch) * M, K):
# its entries grouped by that folded row are a CSR matrix whose rows may hold their columns in any order
# and more than once, which the compiled SpMM sums as they come. Coalesced entries are already grouped
# (their indices are sorted lexicographically); others are grouped by a counting scatter.


def _coo_reason(a: COOArray) -> str | None:
    """:func:`_sparse_reason` of a COO operand."""
    reason = _cpu.unavailable_reason()
    if reason is not None:
        return reason
    if a._fill_value != 0:
        return "the compiled kernels handle fill value 0 only"
    if a.dense_dim():
        return "the compiled kernels handle sparse operands without dense dimensions"
    return None


def _supports_coo_strided(xp: Any, a: COOArray, b: Any) -> str | None:
    reason = _coo_reason(a)
    if reason is not None:
        return reason
    if a.ndim < 2:
        return "a COO vector is multiplied by the generic kernel"
    reason = _strided_reason(b, "right operand") or _dtype_reason(a._vals.dtype, b.dtype)
    if reason is None and b.ndim > 2 and a.ndim > 2:
        return "batches of COO matrices against batched strided operands are left to the generic kernel"
    return reason


def _supports_strided_coo(xp: Any, x: Any, a: COOArray) -> str | None:
    reason = _supports_coo_strided(xp, a, x)
    if reason is None and a.ndim > 2:
        return "a strided operand times a batch of COO matrices is left to the generic kernel"
    return reason


def _coo_as_csr(a: COOArray, dtype: np.dtype, *, kernel_checks: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The CSR components of ``a`` folded to ``(prod(batch) * M, K)`` (rows grouped, duplicates kept), and
    whether its indices are known to lie in range.

    The compiled kernels must not read outside their operands, so the indices are read once for their
    bounds, which also gives an out-of-range index a clear error wherever the array was built. Where the
    caller's kernel checks the column indices as it reads them (``kernel_checks``, and the caller passes
    the last item on as its ``checked``), a coalesced matrix's entries are grouped by the one pass that
    also checks the row indices, and nothing else reads them.
    """
    idx = np.asarray(a._idx)
    shape = a._shape
    nse = idx.shape[1]
    vals = np.asarray(a._vals)
    if vals.dtype != dtype:
        vals = vals.astype(dtype)
    checked = a._bounds_checked or nse == 0
    if not checked and not (kernel_checks and a._coalesced and a.ndim == 2):
        check_coo_bounds(a, f"shape={shape}")  # the dispatcher names the operation
        checked = True
    n_rows = math.prod(shape[:-1])
    rows = idx[-2]
    if a.ndim > 2:
        rows = fold(idx[:-1], shape[:-1])  # in range: checked above
    cols = idx[-1]
    wide = n_rows > _INT32_MAX or nse > _INT32_MAX or shape[-1] > _INT32_MAX
    work = np.dtype(np.int64) if wide or cols.dtype == np.int64 else np.dtype(np.int32)
    if a._coalesced:
        offsets = _cpu.sorted_offsets(rows, cols, n_rows)  # None where a row index is out of order or range
        if offsets is not None:
            return offsets.astype(work, copy=False), cols.astype(work, copy=False), vals, checked
        if not checked:
            check_coo_bounds(a, f"shape={shape}")
    indptr, indices, data = _cpu.coo_to_compressed(
        rows.astype(work, copy=False), cols.astype(work, copy=False), vals, n_rows, shape[-1], sum_duplicates=False
    )  # fmt: skip
    return indptr, indices, data, True


def _coo_operands(a: COOArray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
    """``a``'s folded CSR components and ``x``, both in their promoted dtype, and whether ``a``'s indices
    are known to lie in range (else the product checks its column indices)."""
    dtype = np.result_type(a._vals.dtype, x.dtype)
    indptr, cols, vals, checked = _coo_as_csr(a, dtype, kernel_checks=True)
    return indptr, cols, vals, x if x.dtype == dtype else x.astype(dtype), checked


def _coo_matmul(a: COOArray, indptr: np.ndarray, cols: np.ndarray, vals: np.ndarray, d: np.ndarray, *, checked: bool, transpose: bool = False) -> np.ndarray:
    """:func:`_cpu.csr_matmul` of ``a``'s folded components, whose error for an index out of range is the validator's."""
    try:
        return _cpu.csr_matmul(indptr, cols, vals, a._shape[-1], d, transpose=transpose, checked=checked)
    except ValueError:
        if not checked:
            check_coo_bounds(a, f"shape={a._shape}")  # names the index out of range
        raise


def _coo_one_pass(a: COOArray, x: np.ndarray, *, transpose: bool = False) -> np.ndarray | None:
    """``a @ x`` (``a.T @ x`` with ``transpose``) of a COO matrix and a strided vector or matrix by one pass
    over the entries, where the product would run on one thread anyway (small, or the machine busy):
    grouping the entries by row for the parallel kernel then costs more than the product. None otherwise."""
    k = x.shape[1] if x.ndim == 2 else 1
    if a.ndim != 2 or x.ndim > 2 or _cpu.product_threads(a.nnz * k) > 1:
        return None
    dtype = np.result_type(a._vals.dtype, x.dtype)
    idx = np.asarray(a._idx)
    vals = np.asarray(a._vals)
    out = _cpu.coo_matmul(idx[int(transpose)], idx[1 - int(transpose)], vals.astype(dtype, copy=False), x.astype(dtype, copy=False), a._shape[int(transpose)])
    if out is None:
        check_coo_bounds(a, f"shape={a._shape}")  # names the index out of range
    return out


@register("matmul", (sparse_coo, strided), backend="numpy", supports=_supports_coo_strided)
def _matmul_coo_strided_numpy(xp: Any, a: COOArray, b: Any) -> Any:
    """COO @ strided: one pass over the entries on one thread, else entries grouped by (batch, row), then the compiled SpMM; O(nnz * K + M), all cores."""
    out = _coo_one_pass(a, b)
    if out is not None:
        return out
    indptr, cols, vals, b, checked = _coo_operands(a, b)
    m, k = a._shape[-2], a._shape[-1]
    if b.ndim <= 2:
        out = _coo_matmul(a, indptr, cols, vals, b, checked=checked)
        return out.reshape(*a._shape[:-1], *b.shape[1:])
    # one 2-D matrix for every batch of b
    batch = b.shape[:-2]
    nb = math.prod(batch)
    out = _coo_matmul(a, indptr, cols, vals, b.reshape(nb, k, b.shape[-1]), checked=checked)
    return out.reshape(*batch, m, b.shape[-1])


@register("matmul", (strided, sparse_coo), backend="numpy", supports=_supports_strided_coo)
def _matmul_strided_coo_numpy(xp: Any, x: Any, a: COOArray) -> Any:
    """strided @ COO as (COO.T @ x.T).T: a vector by one pass on one thread, else entries grouped by row, then the compiled scatter; O(nnz * P + N * P)."""
    out = _coo_one_pass(a, x, transpose=True) if x.ndim == 1 else None
    if out is not None:
        return out
    indptr, cols, vals, x, checked = _coo_operands(a, x)
    kk, n = a._shape
    if x.ndim == 1:
        return _coo_matmul(a, indptr, cols, vals, x, checked=checked, transpose=True)
    batch = x.shape[:-2]
    p = x.shape[-2]
    nb = math.prod(batch)
    d = np.ascontiguousarray(x.reshape(nb, p, kk).swapaxes(1, 2))  # x.T, rows read as vectors by the scatter
    out = _coo_matmul(a, indptr, cols, vals, d, checked=checked, transpose=True)
    return out.swapaxes(1, 2).reshape(*batch, p, n)


def _supports_coo_coo(xp: Any, a: COOArray, b: COOArray) -> str | None:
    reason = _coo_reason(a) or _coo_reason(b)
    if reason is not None:
        return reason
    if a.ndim != 2 or b.ndim != 2:
        return "the compiled SpGEMM handles 2-D COO operands"
    return _dtype_reason(a._vals.dtype, b._vals.dtype) or _hypersparse_reason(
        a.nnz + b.nnz, rows=a._shape[0], contracted_dimension=a._shape[1], result_columns=b._shape[1]
    )  # fmt: skip


@register("matmul", (sparse_coo, sparse_coo), backend="numpy", supports=_supports_coo_coo)
def _matmul_coo_coo_numpy(xp: Any, a: COOArray, b: COOArray) -> COOArray:
    """COO @ COO -> coalesced COO: both grouped by row (duplicates kept), the compiled Gustavson SpGEMM; O(flops + nnz), all cores."""
    dtype = np.result_type(a._vals.dtype, b._vals.dtype)
    m, n = a._shape[0], b._shape[1]
    indptr, cols, data = _cpu.csr_spgemm(_coo_as_csr(a, dtype)[:3], _coo_as_csr(b, dtype)[:3], n)
    index_dtype = np.dtype(a.index_dtype)
    if index_dtype == np.int32 and max(m, n, cols.shape[0]) > _INT32_MAX:
        index_dtype = np.dtype(np.int64)
    indices = np.empty((2, cols.shape[0]), dtype=index_dtype)
    indices[0] = np.repeat(np.arange(m, dtype=index_dtype), np.diff(indptr))
    indices[1] = cols
    return COOArray(indices, data, (m, n), backend=a._backend, xp=xp, coalesced=True, fill_value=scalar_for(xp, data.dtype, 0))


# -- sparse @ sparse ---------------------------------------------------------------------------------------


# The compiled SpGEMM accumulates each row of the result densely (a row of the result's columns per
# thread), and COO operands get a row pointer per row: hypersparse operands, with far more positions
# than entries, go to the generic kernel, whose memory follows the entries.
_SPGEMM_DENSE_PER_ENTRY = 8
_SPGEMM_DENSE_MIN = 1 << 22


def _hypersparse_reason(nnz: int, **sizes: int) -> str | None:
    limit = max(_SPGEMM_DENSE_MIN, _SPGEMM_DENSE_PER_ENTRY * nnz)
    for name, size in sizes.items():
        if size > limit:
            return (
                f"the compiled SpGEMM keeps the {name} ({size}) densely, far more than the operands' {nnz} entries; "
                "the generic kernel's memory follows the entries"
            )
    return None


def _supports_sparse_sparse(xp: Any, a: CompressedArray, b: CompressedArray) -> str | None:
    reason = _sparse_reason(a) or _sparse_reason(b) or _dtype_reason(a._vals.dtype, b._vals.dtype)
    if reason is not None:
        return reason
    if a._compressed.ndim != 1 or b._compressed.ndim != 1:
        return "the compiled SpGEMM handles 2-D operands without batch dimensions"
    columns = b._shape[1] if a._layout is sparse_csr else a._shape[0]  # CSC: the product of the transposes
    return _hypersparse_reason(a.nnz + b.nnz, result_columns=columns)


def _spgemm(a: CompressedArray, b: CompressedArray) -> CompressedArray:
    dtype = a._vals.dtype if a._vals.dtype == b._vals.dtype else np.result_type(a._vals.dtype, b._vals.dtype)
    m, n = a._shape[0], b._shape[1]
    if a._layout is sparse_csr:
        left, right, n_cols = a, b, n
    else:  # (A @ B).T = B.T @ A.T, and the stored CSR matrices are B.T and A.T
        left, right, n_cols = b, a, m
    parts = [(s._compressed, s._plain, s._vals if s._vals.dtype == dtype else s._vals.astype(dtype)) for s in (left, right)]
    indptr, indices, data = _cpu.csr_spgemm(parts[0], parts[1], n_cols)
    fill = scalar_for(a._xp, data.dtype, 0)
    return CompressedArray(indptr, indices, data, (m, n), layout=a._layout, backend=a._backend, xp=a._xp, fill_value=fill)


@register("matmul", (sparse_csr, sparse_csr), backend="numpy", supports=_supports_sparse_sparse)
def _matmul_csr_csr_numpy(xp: Any, a: CompressedArray, b: CompressedArray) -> CompressedArray:
    """CSR @ CSR -> CSR: compiled two-pass Gustavson SpGEMM, sorted result; O(flops), all cores."""
    return _spgemm(a, b)


@register("matmul", (sparse_csc, sparse_csc), backend="numpy", supports=_supports_sparse_sparse)
def _matmul_csc_csc_numpy(xp: Any, a: CompressedArray, b: CompressedArray) -> CompressedArray:
    """CSC @ CSC -> CSC as the CSR product B.T @ A.T of the stored matrices; O(flops), all cores."""
    return _spgemm(a, b)


# -- addmm: beta * input + alpha * (a @ b), input strided --------------------------------------------------


def _supports_addmm_sparse_strided(xp: Any, c: Any, a: CompressedArray, b: Any, beta: Any, alpha: Any) -> str | None:
    reason = _sparse_strided_reason(a, b) or _input_reason(c) or _alpha_reason(alpha)
    if reason is not None:
        return reason
    return _dtype_reason(c.dtype, a._vals.dtype, b.dtype) or _scalar_reason(np.result_type(c, a._vals, b), beta, alpha)


def _supports_addmm_strided_sparse(xp: Any, c: Any, x: Any, a: CompressedArray, beta: Any, alpha: Any) -> str | None:
    reason = _strided_sparse_reason(x, a) or _input_reason(c) or _alpha_reason(alpha)
    if reason is not None:
        return reason
    return _dtype_reason(c.dtype, a._vals.dtype, x.dtype) or _scalar_reason(np.result_type(c, a._vals, x), beta, alpha)


def _alpha_reason(alpha: Any) -> str | None:
    if not cmath.isfinite(alpha):
        # the scatter forms multiply each term by alpha before adding it: inf * 2 + inf * -1 is NaN, where
        # alpha * (a @ b) is inf * 1
        return "the compiled kernels scale each product by alpha; the generic kernel scales their sum by a non-finite alpha"
    return None


def _addmm_dtype_cast(c: Any, dtype: np.dtype) -> Any:
    return c if c.dtype == dtype else c.astype(dtype)


@register("addmm", (strided, sparse_csr, strided), backend="numpy", supports=_supports_addmm_sparse_strided)
def _addmm_strided_csr_strided_numpy(xp: Any, c: Any, a: CompressedArray, b: Any, beta: Any, alpha: Any) -> Any:
    """beta * input + alpha * CSR @ strided, in the SpMM's single pass over its output; O(nnz * K)."""
    return _sparse_times_strided(a, _addmm_dtype_cast(b, np.result_type(c, a._vals, b)), c, alpha, beta)


@register("addmm", (strided, sparse_csc, strided), backend="numpy", supports=_supports_addmm_sparse_strided)
def _addmm_strided_csc_strided_numpy(xp: Any, c: Any, a: CompressedArray, b: Any, beta: Any, alpha: Any) -> Any:
    """beta * input + alpha * CSC @ strided: the output starts as beta * input, then the scatter; O(nnz * K)."""
    return _sparse_times_strided(a, _addmm_dtype_cast(b, np.result_type(c, a._vals, b)), c, alpha, beta)


@register("addmm", (strided, strided, sparse_csr), backend="numpy", supports=_supports_addmm_strided_sparse)
def _addmm_strided_strided_csr_numpy(xp: Any, c: Any, x: Any, a: CompressedArray, beta: Any, alpha: Any) -> Any:
    """beta * input + alpha * strided @ CSR: the output starts as beta * input, then the scatter; O(nnz * P)."""
    return _strided_times_sparse(_addmm_dtype_cast(x, np.result_type(c, a._vals, x)), a, c, alpha, beta)


@register("addmm", (strided, strided, sparse_csc), backend="numpy", supports=_supports_addmm_strided_sparse)
def _addmm_strided_strided_csc_numpy(xp: Any, c: Any, x: Any, a: CompressedArray, beta: Any, alpha: Any) -> Any:
    """beta * input + alpha * strided @ CSC, in the row gather's single pass over its output; O(nnz * P)."""
    return _strided_times_sparse(_addmm_dtype_cast(x, np.result_type(c, a._vals, x)), a, c, alpha, beta)


# -- sampled_addmm (SDDMM): beta * input + alpha * (a @ b) at input's pattern ------------------------------


def _supports_sampled_addmm(xp: Any, c: CompressedArray, a: Any, b: Any, beta: Any, alpha: Any) -> str | None:
    reason = (
        _sparse_reason(c) or _strided_reason(a, "left factor") or _strided_reason(b, "right factor")
        or _dtype_reason(c._vals.dtype, a.dtype, b.dtype)
    )  # fmt: skip
    if reason is not None:
        return reason
    if a.ndim < 2 or b.ndim < 2:
        return "sampled_addmm needs 2-D (or batched) factors"
    batch = c._shape[:-2]
    try:
        full = np.broadcast_shapes(batch, a.shape[:-2], b.shape[:-2])
    except ValueError:
        return f"the batch shapes {batch}, {a.shape[:-2]} and {b.shape[:-2]} do not broadcast"
    if full != batch:
        return "the compiled SDDMM broadcasts the factors over the input's batch, not the input over theirs"
    if a.shape[-2] != c._shape[-2] or b.shape[-1] != c._shape[-1] or a.shape[-1] != b.shape[-2]:
        return f"the shapes {c._shape}, {a.shape} and {b.shape} do not match"
    return _scalar_reason(np.result_type(c._vals, a, b), beta, alpha)


@register("sampled_addmm", (sparse_csr, strided, strided), backend="numpy", supports=_supports_sampled_addmm)
def _sampled_addmm_csr_strided_strided_numpy(
    xp: Any, c: CompressedArray, a: Any, b: Any, beta: Any, alpha: Any
) -> CompressedArray:
    """SDDMM: beta * input + alpha * (a @ b) at input's CSR pattern; compiled, O(nnz * K), all cores."""
    dtype = np.result_type(c._vals, a, b)
    batch = c._shape[:-2]
    nb = math.prod(batch)
    a3 = _as_batch3(a, batch, nb, dtype)
    b_t = np.swapaxes(b, -1, -2)  # (..., n, K): rows of b.T are read as vectors
    if b_t.shape[-1] > 1 and b_t.strides[-1] != b_t.itemsize:
        # One transposed copy of b (before it is broadcast over the batch) costs less than a strided
        # read per entry; b.T of a C-ordered array (``a @ x.T``) needs none.
        b_t = np.ascontiguousarray(b_t)
    bt = _as_batch3(b_t, batch, nb, dtype)
    ci, pi, vals = _csr_components(c, dtype)
    out = _cpu.csr_sddmm(ci, pi, vals if beta != 0 else None, a3, bt, alpha=alpha, beta=beta)
    # the unspecified elements are beta times the input's (NaN for a non-finite beta), as in the generic kernel
    return c._with_values(out.reshape(c._plain.shape), scalar_for(xp, dtype, 0 if beta == 0 else beta * c.fill_value))


# -- kron ----------------------------------------------------------------------------------------------


def _supports_kron(xp: Any, x1: Any, x2: Any, shape: tuple[int, ...]) -> str | None:
    reason = _cpu.unavailable_reason()
    if reason is not None:
        return reason
    if x1.ndim != 2 or x2.ndim != 2:
        return "it multiplies two matrices; the generic kernel takes other shapes"
    for x in (x1, x2):
        if x.dense_dim() or x.fill_value != 0:
            return "it multiplies matrices without dense dimensions, of fill value 0"
        if isinstance(x, COOArray) and x.shape[0] > 8 * x.nnz + 4096:
            # a tall, nearly empty matrix (the column of an outer product of long vectors): its CSR form
            # would be mostly offsets, O(rows) memory for a result of a few entries
            return "a COO operand has far more rows than entries; the generic kernel works on the entries alone"
    if not _cpu.supports_arith_dtype(np.result_type(x1.dtype, x2.dtype)):
        return "the compiled kernel multiplies int32, int64, floating and complex values only"
    return None


@register("kron", (INDEXED, INDEXED), backend="numpy", supports=_supports_kron)
def _kron_indexed_numpy(xp: Any, x1: Any, x2: Any, shape: tuple[int, ...]) -> COOArray:
    """kron of two sparse matrices -> coalesced COO: their CSR forms, one compiled pass over the result in parallel; O(nnz1 * nnz2)."""
    from ..._conversion import to_sparse

    a, b = (cast(CompressedArray, to_sparse(x, layout=sparse_csr)) for x in (x1, x2))
    dtype = np.result_type(a.dtype, b.dtype)
    wide = np.dtype(np.int64) if np.dtype(np.int64) in (a.index_dtype, b.index_dtype) else np.dtype(np.int32)
    idt = np.dtype(wide_enough(xp, wide, a.nnz * b.nnz, *shape))
    operands = [
        (np.asarray(c._compressed, dtype=idt), np.asarray(c._plain, dtype=idt), np.asarray(c._vals, dtype=dtype)) for c in (a, b)
    ]
    indices, values = _cpu.kron(operands[0], operands[1], b.shape[1])
    return COOArray(indices, values, shape, backend=x1._backend, xp=xp, coalesced=True, fill_value=0)
