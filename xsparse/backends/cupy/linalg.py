"""Native linear-algebra kernels of the CuPy backend: cuSPARSE (through CuPy's low-level binding and
through cupyx), and custom CUDA kernels.

* CSR/CSC @ strided runs cuSPARSE's SpMV for a vector, SpMM for a matrix: where the matrix cuSPARSE reads
  is CSR (CSR @ x; x @ CSC, whose transposed view is CSR), through CuPy's low-level binding directly (its
  descriptor kept with the array, a row-major operand and result described as they are), otherwise
  through cupyx (``matrix @ x``, ``cupyx.cusparse.spmm``). A batch of compressed matrices is folded into one
  block-diagonal matrix (each batch's indices offset), multiplied once and unfolded; strided @ CSR/CSC is
  ``(b.T @ a.T).T``, the transposed sparse operand a view.
* CSR @ CSR (and CSC @ CSC, as the transposed CSR product) runs cupyx's ``csr @ csr``: cuSPARSE SpGEMM.
* SDDMM (``sampled_addmm`` on a CSR mask) and BSR @ strided have no cupyx binding; they run as
  ``cupy.ElementwiseKernel`` kernels below, one thread per result element, reading int32 or int64 indices
  as they are.

Every kernel multiplies values of one of cuSPARSE's dtypes (float32, float64, complex64, complex128; the
operands are promoted to their common dtype first) and reads the unspecified elements as 0, so it declines
another fill value or dtype, dense dimensions, and sizes that int32 indices cannot address; the generic
kernels take over. CuPy is imported the first time a kernel runs.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from ...dispatch import register
from ...formats import CompressedArray, SparseArray, sparse_bsr, sparse_csc, sparse_csr, strided
from ..array_api.linalg import _broadcast_shapes
from .conversion import aligned, compressed_matrix, cupy_module, cupyx_sparse, dtype_reason, fill_reason, index_reason, kept_with, pointer, to_cupyx, verified

__all__: list[str] = []


# -- reasons to decline -----------------------------------------------------------------------------


def _sparse_reason(a: SparseArray) -> str | None:
    if a.dense_dim():
        return "cupyx's sparse matrices have no dense dimensions"
    return fill_reason(a.fill_value) or dtype_reason(a.dtype)


def _batch_reason(batch: tuple[int, ...], other: tuple[int, ...], what: str) -> str | None:
    if len(other) > len(batch) or _broadcast_shapes(batch, other) != batch:
        return f"the {what}'s batch dimensions {other} must broadcast to the sparse array's {batch}"
    return None


def _fold_reason(a: CompressedArray) -> str | None:
    """Why the block-diagonal fold of ``a``'s batches cannot have int32 indices, or None."""
    if a.ndim == 2:  # no batch (every small product: a few microseconds of Python less)
        return index_reason(*a.shape, a.nnz)
    nb = math.prod(a.shape[: a.batch_dim()])
    return index_reason(*(nb * s for s in a.shape[a.batch_dim() :]), nb * a.nnz)


def _result_dtype(*dtypes: Any) -> Any:
    # the four floating dtypes promote among themselves as the Array API's table says
    if all(d == dtypes[0] for d in dtypes[1:]):  # the common case, without result_type's cost
        return np.dtype(dtypes[0])
    return np.result_type(*(np.dtype(d) for d in dtypes))


# -- helpers -------------------------------------------------------------------------------------------


def _fold(a: CompressedArray, dtype: Any) -> Any:
    """The cupyx matrix of the block-diagonal 2-D matrix of ``a``'s batches (int32 indices)."""
    cp = cupy_module()
    verified(a)
    nbd = a.batch_dim()
    nb, nse = math.prod(a.shape[:nbd]), a.nnz
    m, k = a.shape[nbd], a.shape[nbd + 1]
    n_compressed, n_plain = (m, k) if a.layout.compressed_dim == 0 else (k, m)
    comp = a._compressed.reshape(nb, n_compressed + 1).astype(cp.int32)
    lin = cp.arange(nb, dtype=cp.int32)[:, None]
    indptr = cp.concatenate([(comp[:, :-1] + lin * nse).reshape(-1), cp.full(1, nb * nse, dtype=cp.int32)])
    indices = (a._plain.reshape(nb, nse).astype(cp.int32) + lin * n_plain).reshape(-1)
    values = aligned(a._vals.reshape(nb * nse).astype(dtype, copy=False))
    container = cupyx_sparse().csr_matrix if a.layout.compressed_dim == 0 else cupyx_sparse().csc_matrix
    # each block keeps its batch's sorted, distinct plain indices (invariant 5.6), offset by the block
    return compressed_matrix(container, values, indices, indptr, (nb * m, nb * k))


def _owner(a: CompressedArray, dtype: Any) -> CompressedArray | None:
    """``a`` where ``to_cupyx(a, dtype)`` is its kept matrix (its own dtype), else None (a cast, made per call)."""
    return a if np.dtype(dtype) == np.dtype(a.dtype) else None


def _c_order(x: Any) -> Any:
    """``x`` itself where it is C-contiguous, else a C-contiguous copy."""
    return x if x.flags.c_contiguous else cupy_module().ascontiguousarray(x)


def _product(mat: Any, x: Any, dtype: Any, owner: CompressedArray | None = None) -> Any:
    """``mat @ x`` for a cupyx matrix and a 1-D or 2-D CuPy array: cuSPARSE SpMV or SpMM (a matrix result
    comes back row-major from a CSR matrix and a row-major ``x``, column-major otherwise).

    ``owner`` is the array whose kept matrix ``mat`` is (``to_cupyx(owner)``, its own dtype), so that its
    cuSPARSE descriptor is kept with it too; None for a matrix made for this call (a cast, a fold).

    A CSR matrix goes to cuSPARSE's SpMV and SpMM directly (:func:`_spmv`, :func:`_spmm_row_major`) where CuPy
    has the low-level binding. Elsewhere, cupyx's ``mat @ x`` hands SpMM a column-major copy of ``x``; a
    row-major ``x`` is instead given as its transpose, which is column-major as it is, with ``transb`` (the
    same product, no copy).
    """
    from cupyx import cusparse

    cp = cupy_module()
    shape = (mat.shape[0], *x.shape[1:])
    if mat.nnz == 0 or 0 in shape or x.shape[0] == 0:
        # cuSPARSE gets no empty operand: an empty product is zeros
        return cp.zeros(shape, dtype=dtype)
    if x.dtype != dtype:
        x = x.astype(dtype)
    x = aligned(x)  # a view that starts off a 16-byte boundary (x[1:]) is copied, as the sparse operand's arrays are
    row_major = x.ndim == 2 and x.flags.c_contiguous and not x.flags.f_contiguous
    if mat.format == "csr" and _binding() is not None:
        if x.ndim == 1:
            return _spmv(mat, _c_order(x), dtype, owner)
        if row_major and x.shape[1] <= _ROW_MAJOR_MAX_COLUMNS:
            return _spmm_row_major(mat, x, dtype, owner)
    if row_major and cusparse.check_availability("spmm"):
        return cusparse.spmm(mat, x.T, transb=True)
    return mat @ x


# cudaDataType of the values cuSPARSE takes (library_types.h), by NumPy dtype (a dtype's name is a Python
# property of some microseconds, read twice a product where it was the key)
_CUDA_TYPES = {np.dtype(name): code for name, code in (("float32", 0), ("float64", 1), ("complex64", 4), ("complex128", 5))}
# CUSPARSE_SPMV_ALG_DEFAULT and CUSPARSE_SPMM_ALG_DEFAULT (cusparse.h): cuSPARSE picks the algorithm, as cupyx's
_ALG_DEFAULT = 0
_BINDING: list[Any] = []
# cuSPARSE before 12.7.20 (CUDA 13.2) overflows its grid past 65535 * 16 dense columns in SpMM; cupyx's spmm
# splits such an operand into pieces (CuPy #9850), so wider ones go there
_ROW_MAJOR_MAX_COLUMNS = 65535 * 16
# the host addresses of alpha = 1 and beta = 0 of each value dtype, and the arrays that hold them (cuSPARSE's
# default pointer mode reads them in host memory)
_SCALARS: dict[np.dtype[Any], tuple[int, int, np.ndarray, np.ndarray]] = {}


def _binding() -> Any:
    """CuPy's low-level cuSPARSE binding, cupyx's sparse descriptor and the handle getter, where CuPy has
    them and its cuSPARSE has the generic SpMV and SpMM (else None); looked up once, on the first product.

    cupyx asks ``check_availability`` on every product (three times for a vector); the answer cannot change
    within a process.
    """
    if not _BINDING:
        try:
            from cupy.cuda import device
            from cupy_backends.cuda.libs import cusparse as lib
            from cupyx import cusparse

            for name in (
                "createDnVec", "destroyDnVec", "spMV_bufferSize", "spMV", "createDnMat", "destroyDnMat", "spMM_bufferSize",
                "spMM", "CUSPARSE_ORDER_ROW", "CUSPARSE_OPERATION_NON_TRANSPOSE",
            ):  # fmt: skip
                getattr(lib, name)
            available = cusparse.check_availability("spmv") and cusparse.check_availability("spmm")
            found = (lib, cusparse.SpMatDescriptor, device.get_cusparse_handle) if available else None
        except (ImportError, AttributeError):
            found = None
        _BINDING.append(found)
    return _BINDING[0]


def _scalars(dtype: np.dtype[Any]) -> tuple[int, int]:
    """The host addresses of ``alpha = 1`` and ``beta = 0`` of ``dtype`` (a NumPy dtype)."""
    kept = _SCALARS.get(dtype)
    if kept is None:
        one, zero = np.ones(1, dtype=dtype), np.zeros(1, dtype=dtype)
        # setdefault: two threads' first products of a dtype read the one pair kept, never one dropped
        kept = _SCALARS.setdefault(dtype, (one.ctypes.data, zero.ctypes.data, one, zero))
    return kept[0], kept[1]


def _sparse_descriptor(mat: Any, owner: CompressedArray | None, descriptor: Any) -> Any:
    """cuSPARSE's descriptor of the CSR matrix ``mat``: kept with ``owner`` (whose kept matrix ``mat`` is), or
    made for this call (destroyed with the object)."""
    if owner is not None:
        # kept with the matrix it describes: an array has one CSR matrix (a CSR array's own, a CSC array's
        # transposed view), and a descriptor is handed out for that matrix only
        described, desc = kept_with(owner, "csr descriptor", lambda: (mat, descriptor.create(mat)))
        if described is mat:
            return desc
    return descriptor.create(mat)


class _SpmvPlan:
    """What the SpMVs of one array's kept CSR matrix on one CUDA stream reuse: cuSPARSE's descriptors of the
    two dense vectors and the SpMV's buffer. Each call points the descriptors at its vectors
    (``cusparseDnVecSetValues``) and runs the SpMV under the plan's lock, so that two threads sharing a
    stream never run with each other's pointers; calls on one stream run in order, so they may share the
    buffer, and another stream gets a plan of its own. The descriptors are destroyed with the plan, which
    goes with its array."""

    __slots__ = ("buffer", "lib", "lock", "shape", "x", "y")

    def __init__(self, lib: Any, handle: Any, mat: Any, desc_a: Any, dtype: np.dtype[Any]) -> None:
        cp = cupy_module()
        cuda_type = _CUDA_TYPES[dtype]
        alpha, beta = _scalars(dtype)
        m, k = int(mat.shape[0]), int(mat.shape[1])
        self.lib, self.lock, self.shape = lib, threading.Lock(), (m, k)
        # vectors of the right sizes for the buffer-size query; every call sets its own pointers first
        self.x = self.y = 0
        self.x = lib.createDnVec(k, pointer(cp.empty(k, dtype=dtype)), cuda_type)
        self.y = lib.createDnVec(m, pointer(cp.empty(m, dtype=dtype)), cuda_type)
        op = lib.CUSPARSE_OPERATION_NON_TRANSPOSE
        size = lib.spMV_bufferSize(handle, op, alpha, desc_a.desc, self.x, beta, self.y, cuda_type, _ALG_DEFAULT)
        self.buffer = cp.empty(max(int(size), 1), dtype=cp.int8)

    def __del__(self) -> None:
        for desc in (self.x, self.y):
            if desc:
                try:
                    self.lib.destroyDnVec(desc)
                except Exception:  # at the interpreter's exit CUDA may be gone before the plan
                    pass


def _spmv(mat: Any, x: Any, dtype: Any, owner: CompressedArray | None = None) -> Any:
    """``mat @ x`` for a canonical cupyx CSR matrix and a contiguous vector: cuSPARSE SpMV, called directly.

    cupyx's ``mat @ x`` costs some 40 us of Python per call (availability checked three times, the three
    descriptors made and destroyed, a zero-filled result); a small product is bound by it. Here the matrix's
    descriptor is kept with its array, and the result is not filled first: with ``beta = 0`` cuSPARSE writes
    every element of ``y`` without reading it. The kept matrix of an array (``owner``) also keeps the dense
    descriptors and the buffer (:class:`_SpmvPlan`), where CuPy's binding can repoint a descriptor.
    """
    lib, descriptor, handle_of = _binding()
    cp = cupy_module()
    m = int(mat.shape[0])
    dtype = np.dtype(dtype)
    out = cp.empty(m, dtype=dtype)
    cuda_type = _CUDA_TYPES[dtype]
    alpha, beta = _scalars(dtype)
    desc_a = _sparse_descriptor(mat, owner, descriptor)
    handle, op = handle_of(), lib.CUSPARSE_OPERATION_NON_TRANSPOSE
    if owner is not None and hasattr(lib, "dnVecSetValues"):
        stream = cp.cuda.get_current_stream().ptr
        plan = kept_with(owner, f"spmv plan {stream}", lambda: _SpmvPlan(lib, handle, mat, desc_a, dtype))
        if plan.shape == (m, int(x.shape[0])):  # (an array has one CSR matrix: always, short of a bug)
            with plan.lock:
                lib.dnVecSetValues(plan.x, pointer(x))
                lib.dnVecSetValues(plan.y, pointer(out))
                lib.spMV(handle, op, alpha, desc_a.desc, plan.x, beta, plan.y, cuda_type, _ALG_DEFAULT, pointer(plan.buffer))
            return out
    desc_x = lib.createDnVec(int(x.shape[0]), pointer(x), cuda_type)
    try:
        desc_y = lib.createDnVec(m, pointer(out), cuda_type)
        try:
            size = lib.spMV_bufferSize(handle, op, alpha, desc_a.desc, desc_x, beta, desc_y, cuda_type, _ALG_DEFAULT)
            buffer = cp.empty(max(int(size), 1), dtype=cp.int8)
            lib.spMV(handle, op, alpha, desc_a.desc, desc_x, beta, desc_y, cuda_type, _ALG_DEFAULT, pointer(buffer))
        finally:
            lib.destroyDnVec(desc_y)
    finally:
        lib.destroyDnVec(desc_x)
    return out


def _spmm_row_major(mat: Any, x: Any, dtype: Any, owner: CompressedArray | None = None) -> Any:
    """``mat @ x`` for a canonical cupyx CSR matrix and a C-contiguous 2-D ``x``: cuSPARSE SpMM with ``x`` and
    the result described row-major, as torch passes them, so nothing is copied on either side.

    cupyx's ``spmm`` takes column-major operands only: a row-major ``x`` goes in as its transpose with
    ``transb``, and the column-major result needs a copy into row order. On the H200 run that route took
    2.6 to 3.8 times torch's SpMM of the same matrices (a million rows, 64 columns).
    """
    lib, descriptor, handle_of = _binding()
    cp = cupy_module()
    (m, _), n = mat.shape, int(x.shape[1])
    out = cp.empty((m, n), dtype=dtype)
    dtype = np.dtype(dtype)
    cuda_type = _CUDA_TYPES[dtype]
    alpha, beta = _scalars(dtype)
    desc_a = _sparse_descriptor(mat, owner, descriptor)
    desc_b = lib.createDnMat(int(x.shape[0]), n, n, pointer(x), cuda_type, lib.CUSPARSE_ORDER_ROW)
    try:
        desc_c = lib.createDnMat(m, n, n, pointer(out), cuda_type, lib.CUSPARSE_ORDER_ROW)
        try:
            handle, op = handle_of(), lib.CUSPARSE_OPERATION_NON_TRANSPOSE
            size = lib.spMM_bufferSize(handle, op, op, alpha, desc_a.desc, desc_b, beta, desc_c, cuda_type, _ALG_DEFAULT)
            buffer = cp.empty(max(int(size), 1), dtype=cp.int8)
            lib.spMM(handle, op, op, alpha, desc_a.desc, desc_b, beta, desc_c, cuda_type, _ALG_DEFAULT, pointer(buffer))
        finally:
            lib.destroyDnMat(desc_c)
    finally:
        lib.destroyDnMat(desc_b)
    return out


# -- sparse @ strided ------------------------------------------------------------------------------


def _supports_compressed_strided(xp: Any, a: CompressedArray, b: Any) -> str | None:
    reason = _sparse_reason(a) or dtype_reason(b.dtype) or _fold_reason(a)
    if reason is None and b.ndim > 2:
        reason = _batch_reason(tuple(a.shape[: a.batch_dim()]), tuple(b.shape[:-2]), "strided operand")
    return reason


@register("matmul", (sparse_csr, strided), backend="cupy", supports=_supports_compressed_strided)
@register("matmul", (sparse_csc, strided), backend="cupy", supports=_supports_compressed_strided)
def _matmul_compressed_strided_cupy(xp: Any, a: CompressedArray, b: Any) -> Any:
    """matmul(CSR/CSC, strided) -> strided: cuSPARSE SpMV (vector) or SpMM (matrix), batches folded block-diagonally; O(nnz * N)."""
    cp = cupy_module()
    dtype = _result_dtype(a.dtype, b.dtype)
    nbd = a.batch_dim()
    if nbd == 0 and a.nnz:
        # one matrix (SpMV or SpMM): the path of every small product, kept free of CuPy calls it does not
        # need (CuPy's indexing and copies cost microseconds of Python each)
        return _c_order(_product(to_cupyx(a, dtype), b, dtype, _owner(a, dtype)))
    vector = b.ndim == 1
    b2 = b[:, None] if vector else b
    batch = tuple(a.shape[:nbd])
    nb = math.prod(batch)
    m, k, n = a.shape[nbd], a.shape[nbd + 1], b2.shape[-1]
    if a.nnz == 0 or nb * m * n == 0:
        # cuSPARSE gets no empty operand: an empty product is zeros
        out = cp.zeros((*batch, m, n), dtype=dtype)
    else:
        dense = cp.broadcast_to(b2, (*batch, k, n)).reshape(nb * k, n)
        out = cp.ascontiguousarray(_product(_fold(a, dtype), dense, dtype)).reshape(*batch, m, n)
    return cp.ascontiguousarray(out[..., 0]) if vector else out


def _supports_strided_compressed(xp: Any, a: Any, b: CompressedArray) -> str | None:
    reason = _sparse_reason(b) or dtype_reason(a.dtype) or index_reason(*b.shape, b.nnz)
    if reason is None and (b.ndim != 2 or a.ndim > 2):
        return "cupyx multiplies 2-D sparse matrices by a vector or a matrix only"
    return reason


@register("matmul", (strided, sparse_csr), backend="cupy", supports=_supports_strided_compressed)
@register("matmul", (strided, sparse_csc), backend="cupy", supports=_supports_strided_compressed)
def _matmul_strided_compressed_cupy(xp: Any, a: Any, b: CompressedArray) -> Any:
    """matmul(strided, CSR/CSC) -> strided: (b.T @ a.T).T, cuSPARSE SpMV or SpMM of the transposed view; O(nnz * M)."""
    cp = cupy_module()
    dtype = _result_dtype(a.dtype, b.dtype)
    out_shape = (*a.shape[:-1], b.shape[1])
    if b.nnz == 0 or 0 in out_shape:
        return cp.zeros(out_shape, dtype=dtype)
    bt, owner = to_cupyx(b, dtype, transposed=True), _owner(b, dtype)
    if a.ndim == 1:
        return _product(bt, a, dtype, owner)
    # SpMM's column-major (N, M) result is the row-major (M, N) one, transposed
    return cp.ascontiguousarray(_product(bt, a.T, dtype, owner).T)


# -- sparse @ sparse -----------------------------------------------------------------------------------


def _supports_sparse_sparse(xp: Any, a: CompressedArray, b: CompressedArray) -> str | None:
    reason = _sparse_reason(a) or _sparse_reason(b)
    if reason is None and (a.ndim != 2 or b.ndim != 2):
        return "cupyx multiplies 2-D sparse matrices only (no batch dimensions)"
    return reason or index_reason(*a.shape, *b.shape, a.nnz, b.nnz)


@register("matmul", (sparse_csr, sparse_csr), backend="cupy", supports=_supports_sparse_sparse)
@register("matmul", (sparse_csc, sparse_csc), backend="cupy", supports=_supports_sparse_sparse)
def _matmul_compressed_compressed_cupy(xp: Any, a: CompressedArray, b: CompressedArray) -> CompressedArray:
    """matmul(CSR, CSR) -> CSR, matmul(CSC, CSC) -> CSC: cuSPARSE SpGEMM via cupyx's csr @ csr (CSC as the transposed product); O(flops)."""
    cp = cupy_module()
    dtype = _result_dtype(a.dtype, b.dtype)
    # a CSC product is the transpose of a CSR one: (a @ b).T == b.T @ a.T, whose CSR components are a @ b's CSC ones
    csr = a.layout is sparse_csr
    left, right = (a, b) if csr else (b, a)
    m, n = (a.shape[0], b.shape[1]) if csr else (b.shape[1], a.shape[0])
    k = a.shape[1]
    idt = a.index_dtype
    if a.nnz == 0 or b.nnz == 0 or 0 in (m, k, n):
        # cuSPARSE gets no empty operand: the product of an empty pattern is empty
        crow, col, values = cp.zeros(m + 1, dtype=idt), cp.zeros(0, dtype=idt), cp.zeros(0, dtype=dtype)
    else:
        # the transposed CSC operands are CSR matrices over the same buffers
        r = to_cupyx(left, dtype, transposed=not csr) @ to_cupyx(right, dtype, transposed=not csr)
        # invariant 5.6 wants increasing, distinct columns in a row. CuPy 14.2 flags cuSPARSE SpGEMM's result
        # canonical (cupyx/cusparse.py, spgemm), which makes this a no-op there; where a CuPy version
        # leaves it unflagged, it checks (and sorts if need be). tests/test_cupy_backend.py checks the result.
        r.sum_duplicates()
        crow, col, values = r.indptr.astype(idt, copy=False), r.indices.astype(idt, copy=False), r.data
    return CompressedArray(crow, col, values, (a.shape[0], b.shape[1]), layout=a.layout, backend=a._backend, xp=xp)


# -- custom kernels: SDDMM and BSR @ strided ------------------------------------------------------
# One thread per result element; the loops read the operands' row-major, flattened buffers. Index
# arithmetic is 64-bit whatever the index dtype (I, J), so int32 and int64 indices run as they are.
# ElementwiseKernel refuses a parameter named i (the element index it defines) and names its own
# variables with a leading "_" (_ind, _raw_<param>), so parameters avoid both.

_SDDMM_BODY = """
const long long bt = row / nrows;
T acc = T(0);
for (long long p = 0; p < kdim; ++p) {
    acc += x[row * kdim + p] * y[(bt * kdim + p) * ncols + (long long)col];
}
out = acc;
"""

_BSR_MATMUL_BODY = """
const long long q = i % ncols;
const long long t = i / ncols;
const long long r = t % nrows;
const long long bt = t / nrows;
const long long base = bt * (mb + 1) + r / bm;
const long long rin = r % bm;
T acc = T(0);
for (long long e = (long long)crow[base]; e < (long long)crow[base + 1]; ++e) {
    const long long g = bt * nse + e;
    const long long j = (long long)col[g];
    for (long long c = 0; c < bn; ++c) {
        acc += vals[(g * bm + rin) * bn + c] * dense[(bt * kdim + j * bn + c) * ncols + q];
    }
}
out = acc;
"""

_KERNELS: dict[str, Any] = {}


def _kernel(name: str) -> Any:
    """The ElementwiseKernel ``name``, built on first use (CuPy compiles it per dtype on first call)."""
    if name not in _KERNELS:
        cp = cupy_module()
        if name == "sddmm":
            _KERNELS[name] = cp.ElementwiseKernel(
                "int64 row, J col, raw T x, raw T y, int64 nrows, int64 kdim, int64 ncols",
                "T out",
                _SDDMM_BODY,
                "xsparse_sddmm_csr",
            )
        else:
            _KERNELS[name] = cp.ElementwiseKernel(
                "raw I crow, raw J col, raw T vals, raw T dense, int64 nrows, int64 ncols, int64 kdim, "
                "int64 mb, int64 bm, int64 bn, int64 nse",
                "T out",
                _BSR_MATMUL_BODY,
                "xsparse_bsr_matmul",
            )
    return _KERNELS[name]


def _flat(x: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """``x`` broadcast to ``shape``, in ``dtype``, as a row-major 1-D CuPy array (a copy only where needed)."""
    cp = cupy_module()
    return cp.ascontiguousarray(cp.broadcast_to(x.astype(dtype, copy=False), shape)).reshape(-1)


def _supports_sampled(xp: Any, input: CompressedArray, a: Any, b: Any, beta: Any, alpha: Any) -> str | None:
    # a non-zero fill value is no obstacle: the result's is beta * fill, as in the generic kernel
    if input.dense_dim():
        return "the mask of a sampled product has no dense dimensions"
    reason = dtype_reason(input.dtype, a.dtype, b.dtype)
    if reason is None and (a.ndim < 2 or b.ndim < 2):
        return "the SDDMM kernel takes matrices (or batches of them) as mat1 and mat2"
    if reason is None:
        batch = tuple(input.shape[: input.batch_dim()])
        reason = _batch_reason(batch, tuple(a.shape[:-2]), "mat1") or _batch_reason(batch, tuple(b.shape[:-2]), "mat2")
    return reason


@register("sampled_addmm", (sparse_csr, strided, strided), backend="cupy", supports=_supports_sampled)
def _sampled_addmm_csr_strided_strided_cupy(
    xp: Any, input: CompressedArray, a: Any, b: Any, beta: Any, alpha: Any
) -> CompressedArray:
    """sampled_addmm(CSR, strided, strided) -> CSR: SDDMM as a custom CuPy kernel, one thread per specified element; O(nnz * K)."""
    cp = cupy_module()
    from ..._common import scalar_for

    dtype = _result_dtype(input.dtype, a.dtype, b.dtype)
    nbd = input.batch_dim()
    batch = tuple(input.shape[:nbd])
    nb, nse = math.prod(batch), input.nnz
    m, n, k = input.shape[nbd], input.shape[nbd + 1], a.shape[-1]
    if nb * nse == 0:
        sampled = cp.zeros((*batch, nse), dtype=dtype)
    else:
        # the global row (batch * m + row) of every specified element, from the folded compressed indices
        verified(input)
        comp = input._compressed.reshape(nb, m + 1).astype(cp.int64)
        lin = cp.arange(nb, dtype=cp.int64)[:, None]
        indptr = cp.concatenate([(comp[:, :-1] + lin * nse).reshape(-1), cp.full(1, nb * nse, dtype=cp.int64)])
        rows = (cp.searchsorted(indptr, cp.arange(nb * nse, dtype=cp.int64), side="right") - 1).astype(cp.int64, copy=False)
        x = _flat(a, (*batch, m, k), dtype)
        y = _flat(b, (*batch, k, n), dtype)
        cols = cp.ascontiguousarray(input._plain).reshape(-1)
        sampled = _kernel("sddmm")(rows, cols, x, y, m, k, n).reshape(*batch, nse)
    values = sampled if alpha == 1 else alpha * sampled
    fill = scalar_for(xp, dtype, 0 if beta == 0 else beta * input.fill_value)
    if beta != 0:
        own = input._vals.astype(dtype, copy=False)
        values = (own if beta == 1 else beta * own) + values
    return input._with_values(values, fill)


def _supports_bsr_strided(xp: Any, a: CompressedArray, b: Any) -> str | None:
    reason = _sparse_reason(a) or dtype_reason(b.dtype)
    if reason is None and b.ndim > 2:
        reason = _batch_reason(tuple(a.shape[: a.batch_dim()]), tuple(b.shape[:-2]), "strided operand")
    return reason


@register("matmul", (sparse_bsr, strided), backend="cupy", supports=_supports_bsr_strided)
def _matmul_bsr_strided_cupy(xp: Any, a: CompressedArray, b: Any) -> Any:
    """matmul(BSR, strided) -> strided: a custom CuPy kernel, one thread per result element, batched; O(nnz * bm * bn * N)."""
    cp = cupy_module()
    dtype = _result_dtype(a.dtype, b.dtype)
    nbd = a.batch_dim()
    batch = tuple(a.shape[:nbd])
    nb, nse = math.prod(batch), a.nnz
    m, k = a.shape[nbd], a.shape[nbd + 1]
    bm, bn = a.blocksize
    vector = b.ndim == 1
    b2 = b[:, None] if vector else b
    n = b2.shape[-1]
    out = cp.zeros((*batch, m, n), dtype=dtype)
    if out.size and nse:
        verified(a)
        crow = cp.ascontiguousarray(a._compressed).reshape(-1)
        col = cp.ascontiguousarray(a._plain).reshape(-1)
        vals = _flat(a._vals, tuple(a._vals.shape), dtype)
        dense = _flat(b2, (*batch, k, n), dtype)
        _kernel("bsr")(crow, col, vals, dense, m, n, k, m // bm, bm, bn, nse, out)
    return cp.ascontiguousarray(out[..., 0]) if vector else out
