"""Native kernels of the CuPy backend: cupyx.scipy.sparse's conversions (cuSPARSE), zero-copy.

xsparse keeps CuPy components as plain ``cupy.ndarray`` objects; a kernel wraps them in a
``cupyx.scipy.sparse`` matrix (:func:`to_cupyx`: the buffers are shared, and a compressed array is marked
canonical, which it is by invariant 5.6), runs cupyx's conversion and unwraps the result's components
(:func:`from_cupyx`). cupyx's sparse matrices are 2-D, read the unspecified elements as 0 and run
cuSPARSE on float32, float64, complex64 and complex128 values, so the kernels decline the rest (a batch
or dense dimension, another fill value or dtype, sizes past int32) with a reason, and the generic kernels
take over. CuPy 14.2 also accepts int64 indices, but then runs its own CuPy fallbacks instead of
cuSPARSE for csr2csc, coo2csr and csr2coo (``cupyx/cusparse.py``), so int64 indices that fit are narrowed
explicitly (one copy of the indices) and the result's indices are cast back to the dtype asked for.

CuPy is imported the first time a kernel runs (on a CuPy array), never when this module is imported, so
the registry can list these kernels on a machine without CuPy.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from ...dispatch import register
from ...formats import COOArray, CompressedArray, SparseArray, sparse_coo, sparse_csc, sparse_csr, strided
# cuSPARSE and the custom kernels trust the indices they read: an index out of range is an access outside a
# device buffer (a write, for sparseToDense), which poisons the CUDA context; `verified` checks once per array
from ...formats._invariants import verified
from ...formats._spec import Target
from ..array_api.conversion import is_plus_zero

__all__ = ["cupy_module", "cupyx_sparse", "compressed_matrix", "to_cupyx", "kept_with", "from_cupyx", "verified", "aligned", "pointer"]

CUSPARSE_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "complex64", "complex128"))
INT32_MAX = 2**31 - 1


def cupy_module() -> Any:
    """The ``cupy`` module, imported on first use."""
    import cupy

    return cupy


def cupyx_sparse() -> Any:
    """The ``cupyx.scipy.sparse`` module, imported on first use."""
    import cupyx.scipy.sparse

    return cupyx.scipy.sparse


# -- reasons to decline -----------------------------------------------------------------------------


def dtype_reason(*dtypes: Any) -> str | None:
    """Why cuSPARSE cannot take values of these dtypes, or None."""
    for dtype in dtypes:
        if np.dtype(dtype) not in CUSPARSE_DTYPES:
            return f"cuSPARSE handles float32, float64, complex64 and complex128 values only, got {np.dtype(dtype)}"
    return None


def fill_reason(fill: Any) -> str | None:
    """Why a sparse operand with this fill value cannot go to cupyx, or None."""
    if not is_plus_zero(fill):
        return f"cupyx's sparse matrices read the unspecified elements as 0 (+0.0), and the fill value is {fill!r}"
    return None


def plain_2d_reason(ndim: int, dense_dim: int) -> str | None:
    """Why an array of this rank cannot be a cupyx sparse matrix, or None."""
    if dense_dim:
        return "cupyx's sparse matrices have no dense dimensions"
    if ndim != 2:
        return f"cupyx's sparse matrices are 2-D (no batch dimensions), got {ndim} dimensions"
    return None


def index_reason(*sizes: int) -> str | None:
    """Why indices addressing these sizes (dimensions, element counts) cannot be int32, or None."""
    if max(sizes, default=0) > INT32_MAX:
        return f"cuSPARSE takes int32 indices, which cannot address {max(sizes)} elements"
    return None


def holds_negative_zero(x: Any) -> bool:
    """Whether the CuPy array ``x`` holds a -0.0 (as either part of a complex value); one pass over ``x``."""
    cp = cupy_module()
    if x.dtype.kind == "c":
        return holds_negative_zero(x.real) or holds_negative_zero(x.imag)
    if x.dtype.kind != "f" or x.size == 0:
        return False
    return bool(cp.any(cp.signbit(x) & (x == 0)))


def _sparse_reason(a: SparseArray) -> str | None:
    return fill_reason(a.fill_value) or dtype_reason(a.dtype) or plain_2d_reason(a.ndim, a.dense_dim()) or index_reason(*a.shape, a.nnz)


# -- wrappers ------------------------------------------------------------------------------------------


def _int32(x: Any) -> Any:
    return aligned(x.astype(cupy_module().int32, copy=False))


# cuSPARSE's kernels load their arrays in vectors of up to 16 bytes: a buffer that starts elsewhere (the
# column row of a COO's (2, nnz) int32 indices when nnz is not a multiple of 4) faulted with a misaligned
# address in its sparseToDense on an H200, which poisons the CUDA context
_ALIGNMENT = 16


def pointer(x: Any) -> int:
    """The address of ``x``'s first element (a device address for a CuPy array)."""
    # (NumPy's host address where NumPy stands in for CuPy: tests/cupy_standin.py)
    data = x.data
    return int(data.ptr) if hasattr(data, "ptr") else int(x.ctypes.data)


def aligned(x: Any) -> Any:
    """``x`` itself where its buffer starts on a 16-byte boundary, else a copy (CuPy allocates on 256)."""
    return x if pointer(x) % _ALIGNMENT == 0 else x.copy()


def compressed_matrix(container: Any, data: Any, indices: Any, indptr: Any, shape: tuple[int, int]) -> Any:
    """The cupyx ``csr_matrix`` or ``csc_matrix`` (``container``) over these buffers (shared), marked canonical.

    The caller vouches for the structure (sorted, distinct indices in range; equal index dtypes). CuPy
    14.2's public ``(data, indices, indptr)`` constructor reads ``indptr[0]`` and ``indptr[-1]`` back to
    the host, a device synchronisation per call that a product wrapping its operand on every call cannot
    afford; the private ``_from_parts`` (``cupyx/scipy/sparse/_compressed.py``, CuPy 14.1 and later, same
    signature in both) builds the same matrix with host-side checks only, so it is used where it exists,
    and the public constructor elsewhere.
    """
    from_parts = getattr(container, "_from_parts", None)
    if from_parts is not None:
        return from_parts(data, indices, indptr, shape, has_canonical_format=True)
    m = container((data, indices, indptr), shape=shape)
    m.has_canonical_format = True
    return m


# The cupyx matrices wrapping an array's buffers, per array (by id) and orientation, made once: wrapping
# costs some microseconds of Python per call (cupyx's checks, the index casts: a copy where int64 indices
# are narrowed), a tenth of a product of a million rows on a GPU. A matrix shares the array's buffers (or
# the narrowed indices, kept once for both orientations) and holds no reference to the array; the entry
# goes with the array. Matrices of values cast to another dtype are not kept. Like the plan memo of the 2:4
# path, this is a memo of derived objects, not state of the array: the kernels never modify a kept matrix
# (cupyx's conversions copy first), and losing one costs only its rebuilding. The cuSPARSE descriptor of a kept
# CSR matrix (``kept_with``) is kept in the same entry, and goes with it.
_WRAPPED: dict[int, dict[str, Any]] = {}


def to_cupyx(a: SparseArray, dtype: Any = None, transposed: bool = False) -> Any:
    """The ``cupyx.scipy.sparse`` matrix holding the 2-D ``a`` (fill value 0), sharing its buffers.

    The values are cast to ``dtype`` when one is given (a copy only where the dtype differs), int64
    indices are narrowed to int32 (a copy of the indices), and a buffer that does not start on a 16-byte
    boundary is copied (``aligned``); everything else is shared. ``transposed`` (CSR
    and CSC) gives the matrix of ``a.T``: the other compressed format over the same buffers. The matrix
    is made once per array (see ``_WRAPPED``); callers do not modify it.
    """
    if transposed and not isinstance(a, CompressedArray):
        raise TypeError(f"to_cupyx: transposed=True takes a CSR or CSC array, got {a.layout}.")
    kept = _kept(a)
    if dtype is not None and np.dtype(dtype) != np.dtype(a.dtype):
        return _wrap(a, a._vals.astype(dtype), transposed, kept["indices"])
    name = "transposed" if transposed else "matrix"
    m = kept.get(name)
    if m is None:
        m = kept[name] = _wrap(a, a._vals, transposed, kept["indices"])
    return m


def kept_with(a: SparseArray, key: str, make: Callable[[], Any]) -> Any:
    """What ``make()`` derives from ``a``'s kept matrices (a cuSPARSE descriptor of one), made once and kept
    in ``a``'s entry of ``_WRAPPED``, so that it goes with the array and its matrices."""
    kept = _kept(a)
    found = kept.get(key)
    if found is None:
        found = kept[key] = make()
    return found


def _kept(a: SparseArray) -> dict[str, Any]:
    """``a``'s entry of ``_WRAPPED``, made with its int32 indices on first use (its indices checked first)."""
    kept = _WRAPPED.get(id(a))
    if kept is None:
        verified(a)
        # the entry goes when the array does (before its id can be reused); registered before the entry exists
        weakref.finalize(a, _WRAPPED.pop, id(a), None)
        kept = _WRAPPED[id(a)] = {"indices": _indices(a)}
    return kept


def _indices(a: SparseArray) -> tuple[Any, ...]:
    """``a``'s index arrays as int32 (COO: rows and columns; compressed: plain and compressed indices)."""
    if isinstance(a, COOArray):
        idx = a._idx.astype(cupy_module().int32, copy=False)
        return aligned(idx[0]), aligned(idx[1])
    c = cast(CompressedArray, a)
    return _int32(c._plain), _int32(c._compressed)


def _wrap(a: SparseArray, values: Any, transposed: bool, indices: tuple[Any, ...]) -> Any:
    sp = cupyx_sparse()
    values = aligned(values)
    rows, cols = int(a.shape[0]), int(a.shape[1])
    if isinstance(a, COOArray):
        row, col = indices
        # xsparse's coalesced order is row-major, cupyx's canonical order too
        canonical = a.is_coalesced()
        from_parts = getattr(sp.coo_matrix, "_from_parts", None)
        if from_parts is not None:  # CuPy 14.1 and later: host-side checks only, as for CSR and CSC
            return from_parts(values, row, col, (rows, cols), has_canonical_format=canonical)
        m = sp.coo_matrix((values, (row, col)), shape=(rows, cols))
        m.has_canonical_format = canonical
        return m
    # the transpose of a CSR matrix is the CSC matrix of the same buffers, and the other way round
    csr = (a.layout is sparse_csr) is not transposed
    container = sp.csr_matrix if csr else sp.csc_matrix
    shape = (cols, rows) if transposed else (rows, cols)
    plain, compressed = indices
    # invariant 5.6: sorted, distinct plain indices; telling cupyx spares it a check (and a sync) per call
    return compressed_matrix(container, values, plain, compressed, shape)


def from_cupyx(m: Any, target: Target, fill_value: Any = 0) -> CompressedArray:
    """The xsparse CSR or CSC array (``target.layout``) with the components of the cupyx matrix ``m``.

    ``m`` is made canonical first (sorted, distinct indices). That is free where cupyx flagged it canonical
    (its COO -> CSR/CSC, ``cupyx.cusparse.denseToSparse`` and SpGEMM results, and the CSR <-> CSC results,
    flagged here) and costs one check kernel and a synchronisation where it did not; its indices are
    cast to ``target.index_dtype`` (no copy where they already have it).
    """
    m.sum_duplicates()
    idt = target.index_dtype
    out = CompressedArray(
        m.indptr.astype(idt, copy=False), m.indices.astype(idt, copy=False), m.data, target.shape,
        layout=target.layout, backend=target.backend, xp=target.xp, fill_value=fill_value,
    )  # fmt: skip
    out._bounds_checked = True  # cuSPARSE made the structure: in range, no check needed before the next kernel
    return out


def _empty_compressed(target: Target, n_compressed: int, dtype: Any, fill_value: Any) -> CompressedArray:
    cp = cupy_module()
    idt = target.index_dtype
    return CompressedArray(
        cp.zeros(n_compressed + 1, dtype=idt), cp.zeros(0, dtype=idt), cp.zeros(0, dtype=dtype), target.shape,
        layout=target.layout, backend=target.backend, xp=target.xp, fill_value=fill_value,
    )  # fmt: skip


# -- CSR <-> CSC -----------------------------------------------------------------------------------------


def _supports_compressed_compressed(xp: Any, a: CompressedArray, target: Target) -> str | None:
    return _sparse_reason(a)


@register("convert", (sparse_csr, sparse_csc), backend="cupy", supports=_supports_compressed_compressed)
@register("convert", (sparse_csc, sparse_csr), backend="cupy", supports=_supports_compressed_compressed)
def _convert_compressed_compressed_cupy(xp: Any, a: CompressedArray, target: Target) -> CompressedArray:
    """CSR <-> CSC (2-D) through cupyx's tocsc / tocsr (cuSPARSE csr2cscEx2); O(nnz + M + N)."""
    m = to_cupyx(a)
    r = m.tocsc() if target.layout is sparse_csc else m.tocsr()
    # csr2cscEx2 (CUSPARSE_CSR2CSC_ALG1) moves the elements in order, so the transpose of a canonical matrix
    # is canonical; CuPy leaves it unflagged, and its check would cost a kernel and a synchronisation.
    # tests/test_cupy_backend.py compares the components with the generic kernel's, order included.
    r.has_canonical_format = True
    return from_cupyx(r, target, a.fill_value)


# -- COO -> CSR / CSC ----------------------------------------------------------------------------------


def _supports_coo_compressed(xp: Any, a: COOArray, target: Target) -> str | None:
    reason = _sparse_reason(a)
    if reason is None and not a.is_coalesced() and holds_negative_zero(a._vals):
        # cupyx's coo sum_duplicates, where some indices repeat, adds every value atomically into +0.0, and
        # +0.0 + -0.0 is +0.0; a coalesced array is flagged canonical and its values are only permuted
        return "cupyx's duplicate sum turns a stored -0.0 into +0.0"
    return reason


@register("convert", (sparse_coo, sparse_csr), backend="cupy", supports=_supports_coo_compressed)
@register("convert", (sparse_coo, sparse_csc), backend="cupy", supports=_supports_coo_compressed)
def _convert_coo_compressed_cupy(xp: Any, a: COOArray, target: Target) -> CompressedArray:
    """to_sparse_{csr,csc}(2-D COO) through cupyx's coo tocsr / tocsc (sort, duplicate sum, cuSPARSE coo2csr); O(nnz log nnz)."""
    n_compressed = a.shape[target.layout.compressed_dim]
    if a.nnz == 0:
        return _empty_compressed(target, n_compressed, a.dtype, a.fill_value)
    m = to_cupyx(a)
    return from_cupyx(m.tocsr() if target.layout is sparse_csr else m.tocsc(), target, a.fill_value)


# -- strided <-> CSR / CSC / COO -----------------------------------------------------------------------


def _supports_strided_sparse(xp: Any, x: Any, target: Target) -> str | None:
    dense_dim = target.dense_dim if target.layout is not sparse_coo else x.ndim - target.sparse_dim
    reason = (
        fill_reason(target.fill_value) or dtype_reason(x.dtype) or plain_2d_reason(x.ndim, dense_dim)
        or index_reason(*x.shape, math.prod(x.shape))
    )  # fmt: skip
    if reason is None and holds_negative_zero(x):
        # with fill value +0.0 a -0.0 is specified (docs/decisions.md, "Fill values"); cupyx leaves it out
        return "cupyx's conversion from dense leaves out -0.0, which is a specified element"
    return reason


@register("convert", (strided, sparse_csr), backend="cupy", supports=_supports_strided_sparse)
@register("convert", (strided, sparse_csc), backend="cupy", supports=_supports_strided_sparse)
def _convert_strided_compressed_cupy(xp: Any, x: Any, target: Target) -> CompressedArray:
    """to_sparse_{csr,csc}(2-D strided) through cuSPARSE denseToSparse (``cupyx.cusparse``); O(M * N)."""
    n_compressed = x.shape[target.layout.compressed_dim]
    if x.size == 0:
        return _empty_compressed(target, n_compressed, x.dtype, target.fill_value)
    return from_cupyx(_dense_to_sparse(x, "csr" if target.layout is sparse_csr else "csc"), target, target.fill_value)


def _dense_to_sparse(x: Any, form: str) -> Any:
    """The cupyx matrix (``"csr"`` or ``"csc"``) of the dense ``x``, flagged canonical.

    ``cupyx.cusparse.denseToSparse`` flags its result canonical (it is: cuSPARSE writes each row's or
    column's elements in order); the constructors ``csr_matrix(x)`` and ``csc_matrix(x)`` call it but
    rebuild the matrix without the flag, which costs a check kernel and a synchronisation later.
    """
    from cupyx import cusparse

    x = aligned(x)  # (cupyx passes an F-contiguous view on as it is, wherever it starts)
    if cusparse.check_availability("denseToSparse"):
        return cusparse.denseToSparse(x, format=form)
    sp = cupyx_sparse()
    return (sp.csr_matrix if form == "csr" else sp.csc_matrix)(x)


@register("convert", (strided, sparse_coo), backend="cupy", supports=_supports_strided_sparse)
def _convert_strided_coo_cupy(xp: Any, x: Any, target: Target) -> COOArray:
    """to_sparse_coo(2-D strided) through cuSPARSE denseToSparse and csr2coo (``tocoo``), row-major; O(M * N)."""
    cp = cupy_module()
    idt = target.index_dtype
    if x.size == 0:
        indices, values = cp.zeros((2, 0), dtype=idt), cp.zeros(0, dtype=x.dtype)
    else:
        coo = _dense_to_sparse(x, "csr").tocoo()
        indices, values = cp.stack([coo.row.astype(idt), coo.col.astype(idt)]), coo.data
    return COOArray(
        indices, values, tuple(x.shape), backend=target.backend, xp=xp, coalesced=True, fill_value=target.fill_value
    )


def _supports_sparse_strided(xp: Any, a: SparseArray, target: Target) -> str | None:
    reason = _sparse_reason(a)
    if reason is None and holds_negative_zero(a._vals):
        # toarray sums duplicates atomically into +0.0 (where indices repeat: +0.0 + -0.0 is +0.0), and
        # whether cuSPARSE's sparseToDense writes a -0.0 as it is, nothing documents
        return "cuSPARSE's sparseToDense (and toarray's duplicate sum) may turn a stored -0.0 into +0.0"
    return reason


@register("convert", (sparse_csr, strided), backend="cupy", supports=_supports_sparse_strided)
@register("convert", (sparse_csc, strided), backend="cupy", supports=_supports_sparse_strided)
@register("convert", (sparse_coo, strided), backend="cupy", supports=_supports_sparse_strided)
def _convert_indexed_strided_cupy(xp: Any, a: SparseArray, target: Target) -> Any:
    """to_dense(2-D CSR, CSC or COO) through cuSPARSE sparseToDense, row-major; O(M * N + nnz), O(M * N + nnz log nnz) for an uncoalesced COO."""
    from cupyx import cusparse

    cp = cupy_module()
    if a.nnz == 0 or math.prod(a.shape) == 0:
        return cp.zeros(tuple(a.shape), dtype=a.dtype)
    if not cusparse.check_availability("sparseToDense") or (isinstance(a, COOArray) and not a.is_coalesced()):
        # toarray sums the duplicates of a copy first (and canonicalises any input it is given); a matrix of
        # its own, not the kept one, in case a CuPy version sums in place
        return cp.ascontiguousarray(_wrap(verified(a), a._vals, False, _indices(a)).toarray())
    if isinstance(a, COOArray):
        return cp.ascontiguousarray(cusparse.sparseToDense(to_cupyx(a)))
    # sparseToDense writes the transpose column-major, which is this matrix row-major, with no copy
    return cusparse.sparseToDense(to_cupyx(a, transposed=True)).T
