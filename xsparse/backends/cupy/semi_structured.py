"""cuSPARSELt kernels of the CuPy backend for the semi-structured (2:4) layout.

**Not yet run on a GPU with cuSPARSELt** (see ``docs/backends.md``, "The CuPy backend's 2:4 path"): CuPy's wheels have no
cuSPARSELt binding, so ``_cusparselt.py`` binds the NVIDIA wheel's library through ctypes.

A semi-structured array converted on the CuPy backend carries, next to the portable reference encoding
(values and metadata, built and validated by the generic kernel), a second encoding of the same stored
matrix ``W`` (``rows x cols``, the 2:4 pattern along each row): cuSPARSELt's compressed buffer, in the
array's ``packed`` slot (:class:`CusparseLtPacked`). The products read only that buffer.

**Conversion.** The generic kernel encodes the dense matrix and raises ``ss.11`` for a group with too many
specified elements, so user data is never pruned here: cuSPARSELt's prune *check* runs on the already
valid matrix (a disagreement keeps the reference encoding only, with a warning), then
``cusparseLtSpMMACompress2`` packs it. The structured descriptor is always ``W`` itself: ``rows x cols``,
row-major, leading dimension ``cols``, the pattern along ``cols`` (the ``K`` of cuSPARSELt's ``op(A)``).

**Products.** cuSPARSELt computes ``D = op(A) @ op(B)`` with the structured matrix as ``A = W``, ``opA = N``
(the descriptor it was compressed with); the pattern must run along the contracted dimension, so the two
accelerated orientations are

* ``S @ B`` (``S`` untransposed): ``D = W @ B``, with ``B`` (``cols x n``) passed row-major with ``opB = N``,
  or, when ``B`` is the transpose of a row-major array (a ``.T`` view), that array with ``opB = T``;
* ``A @ S.t()`` (``linear``, ``addmm(bias, A, S.t())``): ``(A @ W.T).T = W @ A.T``, so ``A`` (``m x cols``,
  row-major) is passed as is with ``opB = T``, and the result is the transpose of the row-major ``D``
  (``rows x m``) as a view, as torch's ``linear`` returns it (not C-contiguous). A column-ordered ``D``
  would be that result in row order (torch's ``transpose_result``), but cuSPARSELt 0.8.0's algorithm
  search of one failed on an H200 with an internal error and an illegal instruction that poisoned the
  CUDA context, so ``D`` is always row-major.

int8 takes only ``opB = T`` (cuSPARSELt rejects ``opB = N`` for it), so a row-major ``B`` is transposed into
a copy there; int8 products are computed into int32 and narrowed with wrap-around, as the generic kernel's
int8 arithmetic does. A dense operand whose free dimension is not a multiple of 16 is copied into a
zero-padded buffer (cuSPARSELt's minimum for dense operands is 8 or 16 rows and columns) and the result
sliced. ``S.t() @ B`` and ``A @ S`` contract along the other dimension, which the hardware does not
accelerate: those kernels decline and the generic gather runs.

cuSPARSELt's library handle is created once per device, the first time a kernel runs there; CuPy and
cuSPARSELt are imported at that moment too, never when xsparse or this module is imported.
"""

from __future__ import annotations

import functools
import math
import threading
import warnings
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._errors import SparseEfficiencyWarning
from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, sparse_coo, sparse_semi_structured, strided
from ...formats._invariants import dtype_name
from ...formats._semi_structured import PATTERNS, SemiStructuredArray
from ...formats._spec import Target
from ..array_api.conversion import compressed_to_coo
from ..array_api.semi_structured import _scalar_reason, combine, coo_to_semi_structured, dense_to_semi_structured, semi_structured_to_dense
from .conversion import INT32_MAX, cupy_module

__all__ = ["CusparseLtPacked", "plan_key"]

# Every descriptor is declared 16-byte aligned (cuSPARSELt's minimum); operands that are not are copied.
_ALIGNMENT = 16
# Dense operands are padded to a multiple of this many rows or columns along their free dimension: 16 is
# cuSPARSELt's minimum for 8-bit dense operands and a multiple of its minimum (8) for 16-bit ones.
_PAD = 16
# cuSPARSELt's int8 product accumulates in int32; whether its epilogue (alpha * acc, then the cast to the
# int32 output) passes through float32 is not documented, and float32 holds every integer only up to 2**24.
# With at most cols / 2 kept products of |128 * 128| per result, cols <= 2048 keeps every sum below 2**24,
# so the result is exact (and wraps to int8 like the generic kernel) whichever way the epilogue goes.
_INT8_EXACT_COLS = 2048


@dataclass(frozen=True)
class _Types:
    """The cudaDataType of the operands and of the result, and the compute type, of one value dtype."""

    value: int  # A and B
    output: int  # C and D
    compute: str  # the name of the cusparseComputeType in CuPy's binding
    b_transposed_only: bool  # cuSPARSELt takes B only with opB = T


# cudaDataType values (library_types.h); CuPy's runtime module names all of them but CUDA_R_32I.
_CUDA_R_16F, _CUDA_R_8I, _CUDA_R_32I, _CUDA_R_16BF = 2, 3, 10, 14
_TYPES = {
    "float16": _Types(_CUDA_R_16F, _CUDA_R_16F, "CUSPARSE_COMPUTE_32F", False),
    "bfloat16": _Types(_CUDA_R_16BF, _CUDA_R_16BF, "CUSPARSE_COMPUTE_32F", False),
    "int8": _Types(_CUDA_R_8I, _CUDA_R_32I, "CUSPARSE_COMPUTE_32I", True),
}


_BINDING: list[Any] = []


def _cusparselt() -> Any:
    """The cuSPARSELt binding, found on first use: CuPy's where its build has one, else xsparse's ctypes
    binding of the library of the NVIDIA wheel (``_cusparselt.py``; CuPy's wheels ship no binding)."""
    if _BINDING:
        return _BINDING[0]
    try:
        from cupy_backends.cuda.libs import cusparselt as binding
    except ModuleNotFoundError:
        from . import _cusparselt as ours

        binding = ours.load()
    _BINDING.append(binding)
    return binding


def _cusparse() -> Any:
    """CuPy's cuSPARSE binding (for the order and operation enumerators), imported on first use."""
    from cupy_backends.cuda.libs import cusparse

    return cusparse


# -- the packed form ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Choice:
    """What the first product of one shape settled: cuSPARSELt's algorithm id, the split-K settings the
    search picked with it (``(attribute name, value)`` pairs, set again on every later plan)."""

    alg_id: int
    split_k: tuple[tuple[str, int], ...] = ()


# The algorithm attributes the search settles besides the configuration id (what torch keeps too): the
# number of splits of the contracted dimension and how they are reduced; kept where it splits.
_SPLIT_K_ATTRIBUTES = ("CUSPARSELT_MATMUL_SPLIT_K", "CUSPARSELT_MATMUL_SPLIT_K_MODE")


def plan_key(n: int, b_rows_are_n: bool) -> tuple[int, str]:
    """The memo key of one product ``W @ B`` of a packed array: the shape and memory order of ``B``.

    ``n`` is ``B``'s free (non-contracted) size after padding; ``b_rows_are_n`` says that ``B`` is given as
    the row-major ``n x cols`` array (``opB = T``) rather than the row-major ``cols x n`` one (``opB = N``).
    The stored matrix and its dtype are fixed per array, and the result ``D`` is always row-major, so
    these are all that select a plan.

    Examples
    --------
    >>> from xsparse.backends.cupy.semi_structured import plan_key
    >>> plan_key(64, True)
    (64, 'nk')
    >>> plan_key(64, False) == plan_key(64, True)
    False
    """
    return (int(n), "nk" if b_rows_are_n else "kn")


class CusparseLtPacked:
    """cuSPARSELt's compressed form of the stored matrix of a semi-structured CuPy array.

    Built once by the CuPy backend's conversion kernel and kept in the array's ``packed`` slot (shared
    by its transpose views, dropped by anything that changes the values). It holds what a product needs:

    Attributes
    ----------
    buffer
        The compressed matrix (kept values and tensor-core metadata) as a 1-D ``uint8`` CuPy array, written
        by ``cusparseLtSpMMACompress2``.
    shape
        The stored matrix's ``(rows, cols)``; its structured descriptor is ``rows x cols``, row-major, leading
        dimension ``cols``, 16-byte aligned, 50% sparsity (the one it was compressed with).
    dtype
        The value dtype's name: ``"float16"``, ``"bfloat16"`` or ``"int8"``.
    device_id
        The CUDA device holding the buffer.

    Examples
    --------
    A stand-in buffer shows the bookkeeping on a machine without a GPU (on one, the conversion builds it):

    >>> import numpy as np
    >>> from xsparse.backends.cupy.semi_structured import CusparseLtPacked, plan_key
    >>> p = CusparseLtPacked(np.zeros(16, dtype=np.uint8), (64, 128), "float16", 0)
    >>> p.shape, p.dtype, p.device_id, p.planned(plan_key(16, True))
    ((64, 128), 'float16', 0, None)
    """

    __slots__ = ("buffer", "shape", "dtype", "device_id", "_plans", "_made", "__weakref__")

    def __init__(self, buffer: Any, shape: tuple[int, int], dtype: str, device_id: int) -> None:
        self.buffer = buffer
        self.shape = (int(shape[0]), int(shape[1]))
        self.dtype = dtype
        self.device_id = device_id
        # A performance memo, not canonical state: for each product shape (plan_key) it records the
        # algorithm cusparseLtMatmulSearch found fastest the first time, and the result order that
        # cuSPARSELt accepted. Every algorithm computes the same product, so an empty memo changes only
        # the time of the next product (which searches again), never what the array is or what the
        # product means; the array and its buffer stay immutable. Concurrent first uses may both search;
        # the later answer wins, and either is valid.
        self._plans: dict[tuple[int, str], _Choice] = {}
        # The plans made with those choices, kept for the next products of the same shape: making a plan
        # (cusparseLtMatmulPlanInit) costs far more host time than a small product. At most _KEPT_PLANS,
        # the oldest dropped first; a plan is destroyed when the last product using it lets it go.
        self._made: dict[tuple[int, str], _Plan] = {}

    def planned(self, key: tuple[int, str]) -> _Choice | None:
        """What the memo holds for a product shape (:func:`plan_key`), or ``None`` before its first product."""
        return self._plans.get(key)

    def __repr__(self) -> str:
        return f"CusparseLtPacked(shape={self.shape}, dtype={self.dtype}, device={self.device_id}, bytes={int(self.buffer.size)})"


# -- the library handle ------------------------------------------------------------------------------

# One cuSPARSELt handle per device, created the first time a kernel runs on it. A handle holds only host
# resources (the device's properties) and is read-only after cusparseLtInit, so one per device serves
# every thread. It lives as long as the process: cusparseLtDestroy at interpreter exit could run after
# CUDA has been torn down, and the handle costs nothing while idle.
_HANDLES: dict[int, Any] = {}
_HANDLE_LOCK = threading.Lock()


def _handle(device_id: int) -> Any:
    found = _HANDLES.get(device_id)
    if found is None:
        with _HANDLE_LOCK:
            found = _HANDLES.get(device_id)
            if found is None:
                lt = _cusparselt()
                found = lt.Handle()
                with cupy_module().cuda.Device(device_id):
                    lt.init(found)
                _HANDLES[device_id] = found
    return found


@functools.lru_cache(maxsize=None)
def _library_reason() -> str | None:
    """Why cuSPARSELt cannot be used in this process, or None (the environment does not change)."""
    try:
        _cusparselt()
    except Exception as exc:  # OSError from the loader, ImportError for a release before 0.5
        return f"cuSPARSELt cannot be loaded ({type(exc).__name__}: {exc})"
    return None


@functools.lru_cache(maxsize=None)
def _compute_capability(device_id: int) -> int:
    return int(cupy_module().cuda.Device(device_id).compute_capability)


def _device_id(x: Any) -> Any:
    """The CUDA device number of a CuPy array, or whatever else ``x.device`` is (NumPy's ``"cpu"``)."""
    device = getattr(x, "device", None)
    return getattr(device, "id", device)


def _environment_reason(device: Any) -> str | None:
    reason = _library_reason()
    if reason is not None:
        return reason
    if not isinstance(device, int):
        return f"the array is not on a CUDA device (device={device!r})"
    cc = _compute_capability(device)
    if cc < 80:
        return f"cuSPARSELt needs a GPU of compute capability 8.0 or newer (sparse tensor cores); device {device} has {cc // 10}.{cc % 10}"
    return None


# -- conversion: validate, prune-check, compress -----------------------------------------------------


def _pack_reason(dtype: Any, shape: tuple[int, ...], fill: Any, device: Any) -> str | None:
    name = dtype_name(dtype)
    if name == "float32":
        return "cuSPARSELt multiplies float32 (1:2) values in TF32, with 10 bits of mantissa; the generic kernels keep float32's precision"
    if name not in _TYPES:
        return f"cuSPARSELt's 2:4 kernels take float16, bfloat16 and int8 values, got {name}"
    if fill != 0:
        return f"cuSPARSELt reads the pruned elements as 0, and the fill value is {fill!r}"
    pattern = PATTERNS[name]
    if len(shape) != 2 or min(shape) <= 0 or shape[0] % pattern.min_rows or shape[1] % pattern.min_cols:
        return f"the shape {tuple(shape)} is outside the {name} table (the generic conversion raises the error that names it)"
    if shape[0] * shape[1] > INT32_MAX:
        return f"cuSPARSELt's structured matrices hold at most 2**31 - 1 elements, got {shape[0] * shape[1]}"
    return _environment_reason(device)


def _pack(dense: Any) -> CusparseLtPacked | None:
    """cuSPARSELt's compressed form of a valid 2:4 CuPy matrix, or None if cuSPARSELt's check disagrees."""
    cp, lt, sp = cupy_module(), _cusparselt(), _cusparse()
    rows, cols = int(dense.shape[0]), int(dense.shape[1])
    name = dtype_name(dense.dtype)
    device = _device_id(dense)
    with cp.cuda.Device(device):
        handle = _handle(device)
        x = dense if dense.flags.c_contiguous and dense.data.ptr % _ALIGNMENT == 0 else dense.copy(order="C")
        desc = lt.MatDescriptor()
        lt.structuredDescriptorInit(
            handle, desc, rows, cols, cols, _ALIGNMENT, _TYPES[name].value, sp.CUSPARSE_ORDER_ROW,
            lt.CUSPARSELT_SPARSITY_50_PERCENT,
        )  # fmt: skip
        # CuPy's binding queues the check and the compression on the current stream, xsparse's ctypes binding
        # on the legacy default stream, and the products run on the legacy one (see _spmm). Where the current
        # stream is another, each waits for the other on the device around both calls, whichever binding
        # runs: the inputs are written on the current stream, the check's result is read and the buffers
        # go back to the pool there, and the products must follow the compression.
        stream, legacy = cp.cuda.get_current_stream(), cp.cuda.Stream.null
        other_stream = stream.ptr != 0
        try:
            op = sp.CUSPARSE_OPERATION_NON_TRANSPOSE
            valid = cp.zeros(1, dtype=cp.int32)
            if other_stream:
                legacy.wait_event(stream.record())
            lt.spMMAPruneCheck2(handle, desc, 1, op, x.data.ptr, valid.data.ptr)
            if other_stream:
                stream.wait_event(legacy.record())
            if int(valid.get()[0]) != 0:
                return None
            size, scratch_size = lt.spMMACompressedSize2(handle, desc)
            buffer = cp.empty(int(size), dtype=cp.uint8)
            scratch = cp.empty(int(scratch_size), dtype=cp.uint8)
            if other_stream:
                legacy.wait_event(stream.record())
            try:
                lt.spMMACompress2(handle, desc, 1, op, x.data.ptr, buffer.data.ptr, scratch.data.ptr)
            finally:
                if other_stream:
                    stream.wait_event(legacy.record())
                    legacy.wait_event(stream.record())
        finally:
            lt.matDescriptorDestroy(desc)
    return CusparseLtPacked(buffer, (rows, cols), name, device)


def _with_packed(ref: SemiStructuredArray, dense: Any) -> SemiStructuredArray:
    packed = _pack(dense)
    if packed is None:
        warnings.warn(
            "to_sparse_semi_structured: cuSPARSELt's prune check rejects a matrix that xsparse's validator accepted "
            f"(shape={ref.shape}, dtype={dtype_name(ref.dtype)}); the array keeps the portable encoding only and its "
            "products run on the generic kernels. Please report this as a bug of xsparse.",
            SparseEfficiencyWarning,
            stacklevel=4,
        )
        return ref
    return SemiStructuredArray(
        ref.values(), ref.indices(), ref.shape, backend=ref._backend, xp=ref._xp, fill_value=ref.fill_value,
        check=False, packed=packed,
    )  # fmt: skip


def _supports_strided(xp: Any, x: Any, target: Target) -> str | None:
    return _pack_reason(x.dtype, tuple(x.shape), target.fill_value, _device_id(x))


def _supports_sparse(xp: Any, a: COOArray | CompressedArray, target: Target) -> str | None:
    if a.dense_dim() or a.ndim != 2:
        return "a semi-structured array is one 2-D matrix (the generic conversion raises the error that names it)"
    return _pack_reason(a.dtype, tuple(a.shape), a.fill_value, _device_id(a._vals))


@register("convert", (strided, sparse_semi_structured), backend="cupy", supports=_supports_strided)
def _convert_strided_semi_structured_cupy(xp: Any, x: Any, target: Target) -> SemiStructuredArray:
    """to_sparse_semi_structured(strided) with the cuSPARSELt-packed form: generic encoding and check, cuSPARSELt prune check and compress; O(numel)."""
    return _with_packed(dense_to_semi_structured(xp, x, target), x)


@register("convert", (sparse_coo, sparse_semi_structured), backend="cupy", supports=_supports_sparse)
def _convert_coo_semi_structured_cupy(xp: Any, a: COOArray, target: Target) -> SemiStructuredArray:
    """to_sparse_semi_structured(COO) with the cuSPARSELt-packed form, compressed from the encoding's dense matrix; O(nnz log nnz + numel)."""
    ref = coo_to_semi_structured(xp, a, target)
    return _with_packed(ref, semi_structured_to_dense(xp, ref))


@register("convert", (COMPRESSED, sparse_semi_structured), backend="cupy", supports=_supports_sparse)
def _convert_compressed_semi_structured_cupy(xp: Any, a: CompressedArray, target: Target) -> SemiStructuredArray:
    """to_sparse_semi_structured(CSR, CSC, BSR, BSC) with the cuSPARSELt-packed form, through the element COO; O(nnz log nnz + numel)."""
    ref = coo_to_semi_structured(xp, compressed_to_coo(xp, a), target)
    return _with_packed(ref, semi_structured_to_dense(xp, ref))


# -- the product W @ B ---------------------------------------------------------------------------------


class _Plan:
    """The descriptors, algorithm selection and plan of one product ``D = W @ op(B)``, destroyed after use."""

    def __init__(
        self, handle: Any, packed: CusparseLtPacked, n: int, b_rows_are_n: bool, choice: _Choice | None,
    ) -> None:  # fmt: skip
        lt, sp = _cusparselt(), _cusparse()
        types = _TYPES[packed.dtype]
        rows, k = packed.shape
        row = sp.CUSPARSE_ORDER_ROW
        # (destroy function, object), in creation order; destroyed in reverse
        self._made: list[tuple[Any, Any]] = []
        try:
            a = lt.MatDescriptor()
            lt.structuredDescriptorInit(handle, a, rows, k, k, _ALIGNMENT, types.value, row, lt.CUSPARSELT_SPARSITY_50_PERCENT)
            self._made.append((lt.matDescriptorDestroy, a))
            b = lt.MatDescriptor()
            if b_rows_are_n:
                lt.denseDescriptorInit(handle, b, n, k, k, _ALIGNMENT, types.value, row)
            else:
                lt.denseDescriptorInit(handle, b, k, n, n, _ALIGNMENT, types.value, row)
            self._made.append((lt.matDescriptorDestroy, b))
            d = lt.MatDescriptor()
            # D row-major (the module's docstring says why not in column order)
            lt.denseDescriptorInit(handle, d, rows, n, n, _ALIGNMENT, types.output, row)
            self._made.append((lt.matDescriptorDestroy, d))
            # cuSPARSELt has no destroy function for a matmul descriptor
            self.matmul = lt.MatmulDescriptor()
            op_b = sp.CUSPARSE_OPERATION_TRANSPOSE if b_rows_are_n else sp.CUSPARSE_OPERATION_NON_TRANSPOSE
            lt.matmulDescriptorInit(handle, self.matmul, sp.CUSPARSE_OPERATION_NON_TRANSPOSE, op_b, a, b, d, d, getattr(lt, types.compute))
            self.selection = lt.MatmulAlgSelection()
            lt.matmulAlgSelectionInit(handle, self.selection, self.matmul, lt.CUSPARSELT_MATMUL_ALG_DEFAULT)
            self._made.append((lt.matmulAlgSelectionDestroy, self.selection))
            if choice is not None:
                for name, setting in (("CUSPARSELT_MATMUL_ALG_CONFIG_ID", choice.alg_id), *choice.split_k):
                    value = np.asarray([setting], dtype=np.int32)
                    lt.matmulAlgSetAttribute(handle, self.selection, getattr(lt, name), value.ctypes.data, value.itemsize)
            self.plan = lt.MatmulPlan()
            lt.matmulPlanInit(handle, self.plan, self.matmul, self.selection)
            self._made.append((lt.matmulPlanDestroy, self.plan))
            self.workspace_size = int(lt.matmulGetWorkspace(handle, self.plan))
        except BaseException:
            self.destroy()
            raise
        # a kept plan is destroyed when it is let go; not at interpreter exit, where CUDA may be gone
        weakref.finalize(self, _destroy_made, self._made).atexit = False

    def destroy(self) -> None:
        """Destroy every object made (each tried, the first failure raised after the others)."""
        _destroy_made(self._made)


def _destroy_made(made: list[tuple[Any, Any]]) -> None:
    failure: Exception | None = None
    while made:
        destroy, obj = made.pop()
        try:
            destroy(obj)
        except Exception as exc:
            failure = failure or exc
    if failure is not None:
        raise failure


# the plans one packed array keeps, one per product shape (CusparseLtPacked._made)
_KEPT_PLANS = 16


def _kept_plan(handle: Any, packed: CusparseLtPacked, key: tuple[int, str], n: int, b_rows_are_n: bool, choice: _Choice) -> _Plan:
    """The plan of this product shape, made once and kept on ``packed`` (the oldest dropped past _KEPT_PLANS)."""
    plan = packed._made.get(key)
    if plan is None:
        plan = _Plan(handle, packed, n, b_rows_are_n, choice)
        with _PLANS_LOCK:  # (the eviction iterates the memo, which another thread may be filling)
            made = packed._made
            while len(made) >= _KEPT_PLANS:
                made.pop(next(iter(made)), None)  # destroyed once no product in flight holds it
            made[key] = plan
    return plan


_PLANS_LOCK = threading.Lock()


def _spmm(packed: CusparseLtPacked, dense: Any, b_rows_are_n: bool, n: int) -> Any:
    """``D = W @ B`` (``rows x n``, row-major) for the packed ``W`` and a dense ``B`` of free size ``n`` (a multiple of ``_PAD``).

    ``dense`` is ``B`` as a C-contiguous, aligned CuPy array: ``cols x n`` (``opB = N``) or, with
    ``b_rows_are_n``, ``n x cols`` (``opB = T``). int8 gives int32.
    """
    cp, lt = cupy_module(), _cusparselt()
    rows, _ = packed.shape
    out_dtype = cp.int32 if packed.dtype == "int8" else dense.dtype
    key = plan_key(n, b_rows_are_n)
    alpha, beta = np.ones(1, dtype=np.float32), np.zeros(1, dtype=np.float32)
    with cp.cuda.Device(packed.device_id):
        handle = _handle(packed.device_id)
        # CuPy's binding runs cusparseLtMatmul(Search) on the legacy default stream (no stream array), while
        # CuPy's own work runs on the current stream: where the two differ, each waits for the other on the
        # device (events: a non-blocking stream is not ordered with the legacy one), the host never waits
        stream, legacy = cp.cuda.get_current_stream(), cp.cuda.Stream.null
        other_stream = stream.ptr != 0
        if other_stream:
            legacy.wait_event(stream.record())
        try:
            choice = packed.planned(key)
            out = None
            if choice is None:
                choice, out = _search(handle, packed, dense, b_rows_are_n, n, out_dtype, alpha, beta)
                packed._plans[key] = choice
            if out is None:
                out = cp.empty((rows, n), dtype=out_dtype)
            plan = _kept_plan(handle, packed, key, n, b_rows_are_n, choice)
            workspace = cp.empty(plan.workspace_size, dtype=cp.uint8)
            lt.matmul(
                handle, plan.plan, alpha.ctypes.data, packed.buffer.data.ptr, dense.data.ptr, beta.ctypes.data,
                out.data.ptr, out.data.ptr, workspace.data.ptr,
            )  # fmt: skip
        finally:
            if other_stream:
                # the result, and the buffers going back to the pool, are the current stream's again (also
                # after a failure: what was queued on the legacy stream may still read them)
                stream.wait_event(legacy.record())
    return out


def _search(
    handle: Any, packed: CusparseLtPacked, dense: Any, b_rows_are_n: bool, n: int, out_dtype: Any, alpha: Any, beta: Any,
) -> tuple[_Choice, Any]:  # fmt: skip
    """The first product of a shape: cuSPARSELt's fastest algorithm for it, and the product it computed."""
    cp, lt = cupy_module(), _cusparselt()
    rows, _ = packed.shape
    plan = _Plan(handle, packed, n, b_rows_are_n, None)
    try:
        out = cp.empty((rows, n), dtype=out_dtype)
        workspace = cp.empty(plan.workspace_size, dtype=cp.uint8)
        lt.matmulSearch(
            handle, plan.plan, alpha.ctypes.data, packed.buffer.data.ptr, dense.data.ptr, beta.ctypes.data,
            out.data.ptr, out.data.ptr, workspace.data.ptr,
        )  # fmt: skip
        settled = []
        for name in ("CUSPARSELT_MATMUL_ALG_CONFIG_ID", *_SPLIT_K_ATTRIBUTES):
            value = np.zeros(1, dtype=np.int32)
            lt.matmulAlgGetAttribute(handle, plan.selection, getattr(lt, name), value.ctypes.data, value.itemsize)
            settled.append((name, int(value[0])))
    finally:
        plan.destroy()
    split_k = tuple(settled[1:]) if settled[1][1] > 1 else ()
    return _Choice(settled[0][1], split_k), out


def _round_up(n: int) -> int:
    return -(-n // _PAD) * _PAD


def _usable(x: Any) -> bool:
    """Whether cuSPARSELt can read the CuPy matrix ``x`` as it is: C-contiguous and aligned."""
    return bool(x.flags.c_contiguous) and x.data.ptr % _ALIGNMENT == 0


def _padded_rows(x: Any, n: int) -> Any:
    """A C-contiguous zero-padded copy of the ``m x cols`` matrix ``x`` with ``n >= m`` rows."""
    cp = cupy_module()
    out = cp.zeros((n, x.shape[1]), dtype=x.dtype)
    out[: x.shape[0]] = x
    return out


def _narrow(y: Any, packed: CusparseLtPacked, order: str = "C") -> Any:
    """The result in the operands' dtype (int32 wraps to int8 as int8 arithmetic does): C-contiguous, or
    with ``order="K"`` in ``y``'s memory order (``y`` itself for the 16-bit dtypes)."""
    cp = cupy_module()
    if packed.dtype == "int8":
        return y.astype(cp.int8, order=order)
    return cp.ascontiguousarray(y) if order == "C" else y


def _left_2d(packed: CusparseLtPacked, b: Any) -> Any:
    """``W @ b`` for a 2-D CuPy ``b`` (``cols x n``)."""
    cp = cupy_module()
    rows, _ = packed.shape
    n = int(b.shape[1])
    if n == 0:
        return cp.zeros((rows, 0), dtype=b.dtype)
    np_ = _round_up(n)
    bt = b.T
    if np_ == n and _usable(b) and not _TYPES[packed.dtype].b_transposed_only:
        dense, rows_are_n = b, False  # B itself, row-major, opB = N
    elif np_ == n and _usable(bt):
        dense, rows_are_n = bt, True  # b is a .T view: B as the row-major n x cols array, opB = T
    else:
        # one copy either way: into the n x cols form, zero-padded, which every dtype takes
        dense, rows_are_n = _padded_rows(bt, np_), True
    return _narrow(_spmm(packed, dense, rows_are_n, np_)[:, :n], packed)


def _left_product(packed: CusparseLtPacked, b: Any) -> Any:
    """``W @ b`` for a 1-D, 2-D or batched CuPy ``b``; a batch is folded into the columns of one matrix."""
    cp = cupy_module()
    rows, k = packed.shape
    if b.ndim == 1:
        return cp.ascontiguousarray(_left_2d(packed, b[:, None])[:, 0])
    if b.ndim == 2:
        return _left_2d(packed, b)
    batch, n = tuple(b.shape[:-2]), int(b.shape[-1])
    nb = math.prod(batch)
    folded = b.reshape(nb, k, n).transpose(1, 0, 2).reshape(k, nb * n)
    out = _left_2d(packed, folded)
    return cp.ascontiguousarray(out.reshape(rows, nb, n).transpose(1, 0, 2)).reshape(*batch, rows, n)


def _right_product(packed: CusparseLtPacked, a: Any) -> Any:
    """``a @ W.T`` for a 1-D, 2-D or batched CuPy ``a`` (``..., cols``), computed as ``(W @ a.T).T``."""
    cp = cupy_module()
    rows, k = packed.shape
    lead = tuple(a.shape[:-1])
    a2 = a.reshape(-1, k)
    m = int(a2.shape[0])
    if m == 0:
        return cp.zeros((*lead, rows), dtype=a.dtype)
    mp = _round_up(m)
    if mp == m and _usable(a2):
        dense, rows_are_n = a2, True  # B = a2.T, given as a2 itself with opB = T
    elif mp == m and _usable(a2.T) and not _TYPES[packed.dtype].b_transposed_only:
        dense, rows_are_n = a2.T, False  # a2 is a .T view: a2.T is B itself, row-major
    else:
        dense, rows_are_n = _padded_rows(a2, mp), True
    # D = W @ a2.T (rows x mp); the result is its transpose as a view, as torch's linear returns it (a
    # copy into row order would read and write the whole result once more, across its memory order)
    return _narrow(_spmm(packed, dense, rows_are_n, mp).T[:m], packed, "K").reshape(*lead, rows)


# -- product kernels -------------------------------------------------------------------------------------


def _product_reason(s: SemiStructuredArray, dense: Any, transposed: bool) -> str | None:
    """Why cuSPARSELt cannot multiply ``s`` (stored ``W``, ``transposed`` as required) with the strided ``dense``."""
    packed = s.packed
    if not isinstance(packed, CusparseLtPacked):
        return (
            "the semi-structured operand carries no cuSPARSELt-packed form (it was converted on another backend or "
            "from a dtype cuSPARSELt does not take, or built by an operation that keeps only the portable encoding)"
        )
    if s.transposed is not transposed:
        return (
            "the 2:4 pattern runs along the non-contracted dimension in this orientation (A @ S or S.t() @ B), which "
            "the sparse tensor cores do not accelerate; S @ B and A @ S.t() are the accelerated ones"
        )
    if s.fill_value != 0:
        return f"cuSPARSELt reads the pruned elements as 0, and the fill value is {s.fill_value!r}"
    name = dtype_name(dense.dtype)
    if name != packed.dtype:
        return f"cuSPARSELt multiplies operands of one dtype, got {packed.dtype} and {name} (the generic kernel promotes them)"
    if dense.ndim == 0:
        return "the strided operand is 0-D"
    rows, k = packed.shape
    if packed.dtype == "int8" and k > _INT8_EXACT_COLS:
        return (
            f"an int8 product over {k} columns may pass sums beyond 2**24 through cuSPARSELt's epilogue, where "
            f"float32 rounds them; the int8 path is limited to {_INT8_EXACT_COLS} columns until that is checked"
        )
    n = _round_up(math.prod(dense.shape) // k)
    if max(n * k, n * rows) > INT32_MAX:
        return f"cuSPARSELt's dense matrices hold at most 2**31 - 1 elements, and this product needs {max(n * k, n * rows)}"
    device = _device_id(dense)
    if device != packed.device_id:
        return f"the strided operand is on device {device!r} and the packed matrix on device {packed.device_id}"
    return None


def _supports_matmul(xp: Any, a: Any, b: Any) -> str | None:
    if isinstance(a, SemiStructuredArray):
        return _product_reason(a, b, transposed=False)
    return _product_reason(b, a, transposed=True)


def _supports_addmm(xp: Any, input: Any, a: Any, b: Any, beta: Any, alpha: Any) -> str | None:
    sparse = a if isinstance(a, SemiStructuredArray) else b
    if dtype_name(input.dtype) != dtype_name(sparse.dtype):
        return f"the input's dtype {dtype_name(input.dtype)} differs from the operands' {dtype_name(sparse.dtype)} (the generic kernel promotes them)"
    return (
        _scalar_reason(xp, input.dtype, "beta", beta) or _scalar_reason(xp, input.dtype, "alpha", alpha)
        or _supports_matmul(xp, a, b)
    )  # fmt: skip




@register("matmul", (sparse_semi_structured, strided), backend="cupy", supports=_supports_matmul)
def _matmul_semi_structured_strided_cupy(xp: Any, a: SemiStructuredArray, b: Any) -> Any:
    """semi-structured @ strided -> strided: cuSPARSELt's sparse tensor-core product on the packed form, batches folded; O(nnz * n)."""
    return _left_product(a.packed, b)


@register("matmul", (strided, sparse_semi_structured), backend="cupy", supports=_supports_matmul)
def _matmul_strided_semi_structured_cupy(xp: Any, a: Any, b: SemiStructuredArray) -> Any:
    """strided @ semi-structured.t() -> strided (the linear case): cuSPARSELt computes W @ a.T, returned transposed (a view); O(nnz * m)."""
    return _right_product(b.packed, a)


@register("addmm", (strided, sparse_semi_structured, strided), backend="cupy", supports=_supports_addmm)
def _addmm_strided_semi_structured_strided_cupy(xp: Any, input: Any, a: SemiStructuredArray, b: Any, beta: Any, alpha: Any) -> Any:
    """addmm(strided, semi-structured, strided) -> strided: the cuSPARSELt product, then beta * input + alpha * product; O(nnz * n)."""
    return combine(xp, input, _left_product(a.packed, b), beta, alpha)


@register("addmm", (strided, strided, sparse_semi_structured), backend="cupy", supports=_supports_addmm)
def _addmm_strided_strided_semi_structured_cupy(xp: Any, input: Any, a: Any, b: SemiStructuredArray, beta: Any, alpha: Any) -> Any:
    """addmm(strided, strided, semi-structured.t()) -> strided, linear with a bias: the cuSPARSELt product, then the bias; O(nnz * m)."""
    return combine(xp, input, _right_product(b.packed, a), beta, alpha)
