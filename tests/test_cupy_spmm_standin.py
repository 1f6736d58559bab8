"""The CuPy backend's row-major SpMM (``_spmm_row_major`` in ``xsparse/backends/cupy/linalg.py``) on a
stand-in of CuPy's low-level cuSPARSE binding, without a GPU.

The stand-in keeps what the call sequence must get right: a sparse descriptor of the CSR matrix, dense
descriptors whose rows, columns, leading dimension and order describe the memory their pointer names,
``opA = opB = N``, host-side ``alpha`` and ``beta`` of the value type, a buffer of the size asked, and every
dense descriptor destroyed. Its SpMM computes ``C = alpha A B + beta C`` from that memory, so a wrong
dimension, leading dimension, order or pointer shows as a wrong product. It is no test of cuSPARSE:
``tests/test_cupy_backend.py`` runs the real thing on a GPU.
"""

from __future__ import annotations

import ctypes
import types
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xsparse.backends.cupy import linalg as cupy_linalg

_ORDER_COL, _ORDER_ROW = 1, 2
_TYPES = {0: np.float32, 1: np.float64, 4: np.complex64, 5: np.complex128}


class DeviceArray(np.ndarray):
    """A NumPy array with the ``data.ptr`` of a CuPy array."""

    @property
    def data(self) -> Any:  # type: ignore[override]
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])


def _memory(ptr: int, rows: int, cols: int, ld: int, order: int, dtype: Any) -> np.ndarray:
    item = np.dtype(dtype).itemsize
    span = ((rows - 1) * ld + cols) if order == _ORDER_ROW else ((cols - 1) * ld + rows)
    raw = np.frombuffer((ctypes.c_char * (max(span, 0) * item)).from_address(ptr), dtype=dtype)
    strides = (ld * item, item) if order == _ORDER_ROW else (item, ld * item)
    return np.lib.stride_tricks.as_strided(raw, (rows, cols), strides)


class Library:
    """The stand-in of ``cupy_backends.cuda.libs.cusparse`` (the part the route calls)."""

    CUSPARSE_ORDER_ROW = _ORDER_ROW
    CUSPARSE_OPERATION_NON_TRANSPOSE = 0

    def __init__(self) -> None:
        self.dense: dict[int, tuple[int, int, int, int, int, int]] = {}
        self.calls: list[str] = []

    def createDnMat(self, rows: int, cols: int, ld: int, ptr: int, value_type: int, order: int) -> int:  # noqa: N802
        assert (ld >= cols) if order == _ORDER_ROW else (ld >= rows), "cuSPARSE refuses a leading dimension below the row length"
        handle = len(self.dense) + 1000
        self.dense[handle] = (rows, cols, ld, ptr, value_type, order)
        return handle

    def destroyDnMat(self, handle: int) -> None:  # noqa: N802
        del self.dense[handle]

    def spMM_bufferSize(self, handle: Any, op_a: int, op_b: int, alpha: int, a: Any, b: int, beta: int, c: int, value_type: int, alg: int) -> int:  # noqa: N802
        self.calls.append("bufferSize")
        return 7

    def spMM(self, handle: Any, op_a: int, op_b: int, alpha: int, a: Any, b: int, beta: int, c: int, value_type: int, alg: int, buffer: int) -> None:  # noqa: N802
        assert (op_a, op_b) == (0, 0) and handle == "handle" and buffer
        dtype = _TYPES[value_type]
        alpha_v, beta_v = (np.frombuffer((ctypes.c_char * np.dtype(dtype).itemsize).from_address(p), dtype=dtype)[0] for p in (alpha, beta))
        matrix = _SPARSE[a]
        rb, cb, ldb, pb, tb, ob = self.dense[b]
        rc, cc, ldc, pc, tc, oc = self.dense[c]
        assert tb == tc == value_type and matrix.dtype == dtype
        assert matrix.shape == (rc, rb) and cb == cc, "A (m x k) times B (k x n) into C (m x n)"
        B, C = _memory(pb, rb, cb, ldb, ob, dtype), _memory(pc, rc, cc, ldc, oc, dtype)
        C[...] = alpha_v * (matrix @ B) + (beta_v * C if beta_v else 0)
        self.calls.append("spMM")


# the sparse descriptors made, by handle (what CuPy's SpMatDescriptor.desc is: an integer)
_SPARSE: dict[int, Any] = {}


class Descriptor:
    """The stand-in of ``cupyx.cusparse.SpMatDescriptor``."""

    @classmethod
    def create(cls, matrix: Any) -> Any:
        assert matrix.format == "csr"
        handle = 5000 + len(_SPARSE)
        _SPARSE[handle] = matrix
        return types.SimpleNamespace(desc=handle)


class Cupy:
    int8 = np.int8

    @staticmethod
    def empty(shape: Any, dtype: Any) -> DeviceArray:
        # garbage, as cuSPARSE's output buffer would be: beta = 0 must not read it
        return np.full(shape, np.nan if np.dtype(dtype).kind in "fc" else 7, dtype=dtype).view(DeviceArray)


@pytest.fixture()
def library(monkeypatch: pytest.MonkeyPatch) -> Library:
    lib = Library()
    monkeypatch.setattr(cupy_linalg, "_row_major_spmm", lambda: (lib, Descriptor, lambda: "handle"))
    monkeypatch.setattr(cupy_linalg, "cupy_module", lambda: Cupy)
    return lib


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # the library is reusable
@given(
    m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(2, 6), density=st.floats(0, 1),
    dtype=st.sampled_from(["float32", "float64", "complex64", "complex128"]), seed=st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_row_major_spmm_computes_the_product(library: Library, m: int, k: int, n: int, density: float, dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    # integer values: every product and sum is exact in each dtype
    a = sp.random(m, k, density=density, format="csr", random_state=rng, data_rvs=lambda size: rng.integers(-3, 4, size)).astype(dtype)
    x = np.ascontiguousarray(rng.integers(-3, 4, (k, n)).astype(dtype)).view(DeviceArray)
    out = cupy_linalg._spmm_row_major(a, x, np.dtype(dtype))
    assert out.shape == (m, n) and out.dtype == np.dtype(dtype) and out.flags.c_contiguous
    np.testing.assert_array_equal(np.asarray(out), a.toarray() @ np.asarray(x))
    assert library.calls[-2:] == ["bufferSize", "spMM"] and not library.dense, "every dense descriptor is destroyed"


def test_a_failing_spmm_still_destroys_the_descriptors(library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: Any) -> None:
        raise RuntimeError("CUSPARSE_STATUS_INSUFFICIENT_RESOURCES")

    monkeypatch.setattr(library, "spMM", failing)
    a = sp.eye(3, format="csr")
    with pytest.raises(RuntimeError, match="INSUFFICIENT_RESOURCES"):
        cupy_linalg._spmm_row_major(a, np.ones((3, 2)).view(DeviceArray), np.dtype("float64"))
    assert not library.dense
