"""A ctypes binding of the cuSPARSELt functions the CuPy backend's 2:4 kernels call.

CuPy's wheels (CuPy 14 among them) ship no ``cupy_backends.cuda.libs.cusparselt``: that module exists only
in CuPy builds made against the cuSPARSELt headers. The NVIDIA wheel ``nvidia-cusparselt-cu12``/``-cu13``
(what torch's CUDA wheels install) holds the library itself, ``libcusparseLt.so.0``. This module loads it
and offers the part of CuPy's binding that ``semi_structured.py`` uses, with the same names, arguments and
results, so the kernels run on either: the opaque objects (``Handle``, ``MatDescriptor``,
``MatmulDescriptor``, ``MatmulAlgSelection``, ``MatmulPlan``), the functions, and the enumerators. Device
pointers and host pointers are plain integers, as in CuPy's binding; nothing here imports CuPy.

What the C header fixes, and this module copies (cuSPARSELt 0.5 to 0.8; older releases number the compute
types differently and are refused by :func:`load`):

* every opaque object is a struct of bytes (512 in 0.7 and 0.8, 11024 in 0.4); each object here is a
  buffer of ``_OPAQUE_BYTES``, which holds any of them;
* ``cusparseComputeType``: ``CUSPARSE_COMPUTE_32I = 0``, ``CUSPARSE_COMPUTE_16F = 1``, ``CUSPARSE_COMPUTE_32F = 2``;
* ``cusparseLtMatmulAlgAttribute_t``: ``CONFIG_ID = 0``, ``CONFIG_MAX_ID = 1``, ``SEARCH_ITERATIONS = 2``,
  ``SPLIT_K = 3``, ``SPLIT_K_MODE = 4``, ``SPLIT_K_BUFFERS = 5``;
* ``CUSPARSELT_SPARSITY_50_PERCENT = 0``, ``CUSPARSELT_MATMUL_ALG_DEFAULT = 0``.

A call that returns a status other than success raises :class:`CuSparseLtError`, whose ``status`` is the
``cusparseStatus_t`` value (3: invalid value, 10: not supported), as CuPy's binding does.

The products and compressions are queued on the stream given (the legacy default stream, 0, unless one is
passed). CuPy's binding queues the products there too, but the prune check and the compression on CuPy's
current stream; the kernels order both streams around these calls, so they run with either binding.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["CuSparseLtError", "load"]

# Larger than any release's opaque struct (the library writes at most its own size)
_OPAQUE_BYTES = 16384
_SONAME = "libcusparseLt.so.0"
# where the NVIDIA wheels put the library, under a site-packages directory
_WHEEL_DIRS = ("nvidia/cusparselt/lib", "nvidia/cu13/lib", "nvidia/cu12/lib")
# libraryPropertyType
_MAJOR_VERSION, _MINOR_VERSION, _PATCH_LEVEL = 0, 1, 2
_STATUS_NAMES = {
    1: "CUSPARSE_STATUS_NOT_INITIALIZED", 2: "CUSPARSE_STATUS_ALLOC_FAILED", 3: "CUSPARSE_STATUS_INVALID_VALUE",
    4: "CUSPARSE_STATUS_ARCH_MISMATCH", 5: "CUSPARSE_STATUS_MAPPING_ERROR", 6: "CUSPARSE_STATUS_EXECUTION_FAILED",
    7: "CUSPARSE_STATUS_INTERNAL_ERROR", 8: "CUSPARSE_STATUS_MATRIX_TYPE_NOT_SUPPORTED", 9: "CUSPARSE_STATUS_ZERO_PIVOT",
    10: "CUSPARSE_STATUS_NOT_SUPPORTED", 11: "CUSPARSE_STATUS_INSUFFICIENT_RESOURCES",
}  # fmt: skip


class CuSparseLtError(RuntimeError):
    """A cuSPARSELt call that did not succeed; ``status`` is its ``cusparseStatus_t``."""

    def __init__(self, function: str, status: int) -> None:
        self.function = function
        self.status = status
        super().__init__(f"{function}: {_STATUS_NAMES.get(status, 'unknown status')} ({status})")


class _Opaque:
    """One of cuSPARSELt's opaque objects: a buffer the library fills, passed by its address."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = ctypes.create_string_buffer(_OPAQUE_BYTES)

    @property
    def _as_parameter_(self) -> ctypes.c_void_p:
        return ctypes.c_void_p(ctypes.addressof(self._buffer))


class _Handle(_Opaque):
    """``cusparseLtHandle_t``."""


class _MatDescriptor(_Opaque):
    """``cusparseLtMatDescriptor_t``."""


class _MatmulDescriptor(_Opaque):
    """``cusparseLtMatmulDescriptor_t``."""


class _MatmulAlgSelection(_Opaque):
    """``cusparseLtMatmulAlgSelection_t``."""


class _MatmulPlan(_Opaque):
    """``cusparseLtMatmulPlan_t``."""


_P, _I64, _U32, _I32, _SIZE = ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint32, ctypes.c_int, ctypes.c_size_t
# name -> argument types (every function returns a cusparseStatus_t, an int)
_SIGNATURES: dict[str, tuple[Any, ...]] = {
    "cusparseLtInit": (_P,),
    "cusparseLtGetProperty": (_I32, _P),
    "cusparseLtDenseDescriptorInit": (_P, _P, _I64, _I64, _I64, _U32, _I32, _I32),
    "cusparseLtStructuredDescriptorInit": (_P, _P, _I64, _I64, _I64, _U32, _I32, _I32, _I32),
    "cusparseLtMatDescriptorDestroy": (_P,),
    "cusparseLtMatmulDescriptorInit": (_P, _P, _I32, _I32, _P, _P, _P, _P, _I32),
    "cusparseLtMatmulAlgSelectionInit": (_P, _P, _P, _I32),
    "cusparseLtMatmulAlgSelectionDestroy": (_P,),
    "cusparseLtMatmulAlgSetAttribute": (_P, _P, _I32, _P, _SIZE),
    "cusparseLtMatmulAlgGetAttribute": (_P, _P, _I32, _P, _SIZE),
    "cusparseLtMatmulPlanInit": (_P, _P, _P, _P),
    "cusparseLtMatmulPlanDestroy": (_P,),
    "cusparseLtMatmulGetWorkspace": (_P, _P, _P),
    "cusparseLtMatmul": (_P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _I32),
    "cusparseLtMatmulSearch": (_P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _I32),
    "cusparseLtSpMMAPruneCheck2": (_P, _P, _I32, _I32, _P, _P, _P),
    "cusparseLtSpMMACompressedSize2": (_P, _P, _P, _P),
    "cusparseLtSpMMACompress2": (_P, _P, _I32, _I32, _P, _P, _P, _P),
}


# the functions a release before 0.8 lacks (0.8 introduced the destroying of an algorithm selection)
_SINCE_0_8 = frozenset({"cusparseLtMatmulAlgSelectionDestroy"})


class Binding:
    """The loaded library, with CuPy's binding's names (see the module docstring)."""

    CUSPARSELT_SPARSITY_50_PERCENT = 0
    CUSPARSELT_MATMUL_ALG_DEFAULT = 0
    CUSPARSELT_MATMUL_ALG_CONFIG_ID = 0
    CUSPARSELT_MATMUL_ALG_CONFIG_MAX_ID = 1
    CUSPARSELT_MATMUL_SEARCH_ITERATIONS = 2
    CUSPARSELT_MATMUL_SPLIT_K = 3
    CUSPARSELT_MATMUL_SPLIT_K_MODE = 4
    CUSPARSELT_MATMUL_SPLIT_K_BUFFERS = 5
    CUSPARSE_COMPUTE_32I = 0
    CUSPARSE_COMPUTE_16F = 1
    CUSPARSE_COMPUTE_32F = 2
    Handle = _Handle
    MatDescriptor = _MatDescriptor
    MatmulDescriptor = _MatmulDescriptor
    MatmulAlgSelection = _MatmulAlgSelection
    MatmulPlan = _MatmulPlan

    def __init__(self, library: Any, path: str) -> None:
        self.path = path
        self._fn: dict[str, Any] = {}
        for name, argtypes in _SIGNATURES.items():
            if name in _SINCE_0_8 and not hasattr(library, name):
                continue  # an older release: the object needs no destroying there
            fn = getattr(library, name)  # AttributeError names a missing symbol
            fn.argtypes, fn.restype = list(argtypes), ctypes.c_int
            self._fn[name] = fn
        self.version = tuple(self._property(p) for p in (_MAJOR_VERSION, _MINOR_VERSION, _PATCH_LEVEL))

    def _call(self, name: str, *args: Any) -> None:
        status = self._fn[name](*args)
        if status != 0:
            raise CuSparseLtError(name, int(status))

    def _property(self, which: int) -> int:
        value = ctypes.c_int(0)
        self._call("cusparseLtGetProperty", which, ctypes.byref(value))
        return int(value.value)

    @staticmethod
    def _streams(stream: int) -> tuple[Any, int]:
        if not stream:
            return None, 0
        return ctypes.byref(ctypes.c_void_p(stream)), 1

    # -- handle and descriptors ---------------------------------------------------------------------------

    def init(self, handle: _Handle) -> None:
        self._call("cusparseLtInit", handle)

    def denseDescriptorInit(self, handle: _Handle, desc: _MatDescriptor, rows: int, cols: int, ld: int, alignment: int, value_type: int, order: int) -> None:  # noqa: N802
        self._call("cusparseLtDenseDescriptorInit", handle, desc, rows, cols, ld, alignment, value_type, order)

    def structuredDescriptorInit(  # noqa: N802
        self, handle: _Handle, desc: _MatDescriptor, rows: int, cols: int, ld: int, alignment: int, value_type: int, order: int, sparsity: int,
    ) -> None:  # fmt: skip
        self._call("cusparseLtStructuredDescriptorInit", handle, desc, rows, cols, ld, alignment, value_type, order, sparsity)

    def matDescriptorDestroy(self, desc: _MatDescriptor) -> None:  # noqa: N802
        self._call("cusparseLtMatDescriptorDestroy", desc)

    def matmulDescriptorInit(  # noqa: N802
        self, handle: _Handle, matmul: _MatmulDescriptor, op_a: int, op_b: int, a: _MatDescriptor, b: _MatDescriptor,
        c: _MatDescriptor, d: _MatDescriptor, compute_type: int,
    ) -> None:  # fmt: skip
        self._call("cusparseLtMatmulDescriptorInit", handle, matmul, op_a, op_b, a, b, c, d, compute_type)

    # -- algorithm selection and plan ---------------------------------------------------------------------

    def matmulAlgSelectionInit(self, handle: _Handle, selection: _MatmulAlgSelection, matmul: _MatmulDescriptor, alg: int) -> None:  # noqa: N802
        self._call("cusparseLtMatmulAlgSelectionInit", handle, selection, matmul, alg)

    def matmulAlgSelectionDestroy(self, selection: _MatmulAlgSelection) -> None:  # noqa: N802
        if "cusparseLtMatmulAlgSelectionDestroy" in self._fn:  # 0.8 and later; before, nothing to destroy
            self._call("cusparseLtMatmulAlgSelectionDestroy", selection)

    def matmulAlgSetAttribute(self, handle: _Handle, selection: _MatmulAlgSelection, attribute: int, data: int, size: int) -> None:  # noqa: N802
        self._call("cusparseLtMatmulAlgSetAttribute", handle, selection, attribute, data, size)

    def matmulAlgGetAttribute(self, handle: _Handle, selection: _MatmulAlgSelection, attribute: int, data: int, size: int) -> None:  # noqa: N802
        self._call("cusparseLtMatmulAlgGetAttribute", handle, selection, attribute, data, size)

    def matmulPlanInit(self, handle: _Handle, plan: _MatmulPlan, matmul: _MatmulDescriptor, selection: _MatmulAlgSelection) -> None:  # noqa: N802
        self._call("cusparseLtMatmulPlanInit", handle, plan, matmul, selection)

    def matmulPlanDestroy(self, plan: _MatmulPlan) -> None:  # noqa: N802
        self._call("cusparseLtMatmulPlanDestroy", plan)

    def matmulGetWorkspace(self, handle: _Handle, plan: _MatmulPlan) -> int:  # noqa: N802
        size = ctypes.c_size_t(0)
        self._call("cusparseLtMatmulGetWorkspace", handle, plan, ctypes.byref(size))
        return int(size.value)

    # -- execution ----------------------------------------------------------------------------------------

    def matmul(
        self, handle: _Handle, plan: _MatmulPlan, alpha: int, d_a: int, d_b: int, beta: int, d_c: int, d_d: int, workspace: int,
        stream: int = 0,
    ) -> None:  # fmt: skip
        streams, count = self._streams(stream)
        self._call("cusparseLtMatmul", handle, plan, alpha, d_a, d_b, beta, d_c, d_d, workspace, streams, count)

    def matmulSearch(  # noqa: N802
        self, handle: _Handle, plan: _MatmulPlan, alpha: int, d_a: int, d_b: int, beta: int, d_c: int, d_d: int, workspace: int,
        stream: int = 0,
    ) -> None:  # fmt: skip
        streams, count = self._streams(stream)
        self._call("cusparseLtMatmulSearch", handle, plan, alpha, d_a, d_b, beta, d_c, d_d, workspace, streams, count)

    # -- pruning check and compression --------------------------------------------------------------------

    def spMMAPruneCheck2(self, handle: _Handle, desc: _MatDescriptor, is_sparse_a: int, op: int, d_in: int, d_valid: int, stream: int = 0) -> None:  # noqa: N802
        self._call("cusparseLtSpMMAPruneCheck2", handle, desc, is_sparse_a, op, d_in, d_valid, stream or None)

    def spMMACompressedSize2(self, handle: _Handle, desc: _MatDescriptor) -> tuple[int, int]:  # noqa: N802
        size, buffer_size = ctypes.c_size_t(0), ctypes.c_size_t(0)
        self._call("cusparseLtSpMMACompressedSize2", handle, desc, ctypes.byref(size), ctypes.byref(buffer_size))
        return int(size.value), int(buffer_size.value)

    def spMMACompress2(  # noqa: N802
        self, handle: _Handle, desc: _MatDescriptor, is_sparse_a: int, op: int, d_dense: int, d_compressed: int, d_buffer: int,
        stream: int = 0,
    ) -> None:  # fmt: skip
        self._call("cusparseLtSpMMACompress2", handle, desc, is_sparse_a, op, d_dense, d_compressed, d_buffer, stream or None)


def _candidates() -> list[str]:
    """Where the library may be: the NVIDIA wheels' folders on ``sys.path`` first (the copy torch's CUDA wheels
    load, and the newest a Python environment holds), then its name (already loaded, or on the loader's
    path: a system copy may be older), then a CUDA toolkit's folders."""
    wheels = [Path(base) / sub / _SONAME for base in sys.path if base for sub in _WHEEL_DIRS]
    toolkits = [Path(base) / sub / _SONAME for base in (os.environ.get("CUDA_PATH", ""), "/usr/local/cuda") if base for sub in ("lib64", "lib")]
    return [*(str(p) for p in wheels if p.is_file()), _SONAME, *(str(p) for p in toolkits if p.is_file())]


_LOADED: list[Binding] = []
_LOCK = threading.Lock()


def load() -> Binding:
    """The binding over ``libcusparseLt.so.0``, loaded once per process.

    Raises OSError naming where the library was looked for when no copy loads, and ImportError for a
    release before 0.5 (whose compute types are numbered differently).
    """
    if _LOADED:
        return _LOADED[0]
    with _LOCK:
        if _LOADED:
            return _LOADED[0]
        errors = []
        for candidate in _candidates():
            try:
                library = ctypes.CDLL(candidate, mode=ctypes.RTLD_GLOBAL)
                binding = Binding(library, candidate)
            except (OSError, AttributeError, CuSparseLtError) as exc:
                errors.append(f"{candidate}: {exc}")
                continue
            if binding.version[:2] < (0, 5):
                raise ImportError(
                    f"cuSPARSELt {'.'.join(map(str, binding.version))} at {candidate} is older than 0.5, which this "
                    "binding needs (the compute types are numbered differently before); install nvidia-cusparselt 0.5 or later"
                )
            _LOADED.append(binding)
            return binding
        raise OSError(
            f"cannot load cuSPARSELt ({_SONAME}): " + "; ".join(errors)
            + ". Install the nvidia-cusparselt-cu12 or -cu13 package matching CuPy's CUDA version"
        )  # fmt: skip
