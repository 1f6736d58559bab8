"""The CuPy backend's direct cuSPARSE calls (``_spmv`` and ``_spmm_row_major`` in
``xsparse/backends/cupy/linalg.py``) on the stand-in of CuPy's low-level cuSPARSE binding
(``tests/cupy_standin.py``: :class:`Library`), without a GPU.

The stand-in computes each product from the memory its descriptors name, so a wrong size, leading
dimension, order or pointer shows as a wrong product; it is no test of cuSPARSE
(``tests/test_cupy_backend.py`` runs the real thing on a GPU).
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cupy_standin import Library, SparseDescriptor
from xsparse.backends.cupy import linalg as cupy_linalg

DTYPES = ["float32", "float64", "complex64", "complex128"]


class Cupy:
    int8 = np.int8

    @staticmethod
    def empty(shape: Any, dtype: Any) -> np.ndarray:
        # garbage, as a fresh device buffer may hold: beta = 0 must not read it
        return np.full(shape, np.nan if np.dtype(dtype).kind in "fc" else 7, dtype=dtype)


@pytest.fixture()
def library(monkeypatch: pytest.MonkeyPatch) -> Library:
    lib = Library()
    monkeypatch.setattr(cupy_linalg, "_binding", lambda: (lib, SparseDescriptor, lambda: "handle"))
    monkeypatch.setattr(cupy_linalg, "cupy_module", lambda: Cupy)
    return lib


def _integer_matrix(rng: np.random.Generator, m: int, k: int, density: float, dtype: str) -> Any:
    # integer values: every product and sum is exact in each dtype
    return sp.random(m, k, density=density, format="csr", random_state=rng, data_rvs=lambda size: rng.integers(-3, 4, size)).astype(dtype)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # the library is reusable
@given(
    m=st.integers(1, 9), k=st.integers(1, 9), n=st.integers(2, 6), density=st.floats(0, 1),
    dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_row_major_spmm_computes_the_product(library: Library, m: int, k: int, n: int, density: float, dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = _integer_matrix(rng, m, k, density, dtype)
    x = np.ascontiguousarray(rng.integers(-3, 4, (k, n)).astype(dtype))
    out = cupy_linalg._spmm_row_major(a, x, np.dtype(dtype))
    assert out.shape == (m, n) and out.dtype == np.dtype(dtype) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, a.toarray() @ x)
    assert library.calls[-2:] == ["spMM_bufferSize", "spMM"] and not library.dense, "every dense descriptor is destroyed"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 9), k=st.integers(1, 9), density=st.floats(0, 1), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1))
def test_spmv_computes_the_product(library: Library, m: int, k: int, density: float, dtype: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = _integer_matrix(rng, m, k, density, dtype)
    x = rng.integers(-3, 4, k).astype(dtype)
    out = cupy_linalg._spmv(a, x, np.dtype(dtype))
    assert out.shape == (m,) and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, a.toarray() @ x)
    assert library.calls[-2:] == ["spMV_bufferSize", "spMV"] and not library.dense, "every dense descriptor is destroyed"


@pytest.mark.parametrize("route", ["spmv", "spmm"])
def test_a_failing_product_still_destroys_the_descriptors(library: Library, monkeypatch: pytest.MonkeyPatch, route: str) -> None:
    def failing(*args: Any) -> None:
        raise RuntimeError("CUSPARSE_STATUS_INSUFFICIENT_RESOURCES")

    monkeypatch.setattr(library, "spMV" if route == "spmv" else "spMM", failing)
    a = sp.eye(3, format="csr")
    with pytest.raises(RuntimeError, match="INSUFFICIENT_RESOURCES"):
        if route == "spmv":
            cupy_linalg._spmv(a, np.ones(3), np.dtype("float64"))
        else:
            cupy_linalg._spmm_row_major(a, np.ones((3, 2)), np.dtype("float64"))
    assert not library.dense


def test_the_sparse_descriptor_is_made_once_per_array(library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    # the kept cupyx matrix of an array has one cuSPARSE descriptor, made on its first product and gone with
    # the array; a matrix of cast values (made per call) gets its own, per call
    import cupy_standin
    import xsparse as xs
    from xsparse.backends.cupy import conversion

    cupy_standin.install(monkeypatch)
    monkeypatch.setattr(cupy_linalg, "_binding", lambda: (library, SparseDescriptor, lambda: "handle"))
    dense = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]])
    a = xs.to_sparse_csr(dense)
    made = len(SparseDescriptor.made)
    for x in (np.array([1.0, 2.0, 3.0]), np.arange(6.0).reshape(3, 2), np.array([4.0, 5.0, 6.0])):
        mat = conversion.to_cupyx(a)
        np.testing.assert_array_equal(cupy_linalg._product(mat, x, np.dtype("float64"), a), dense @ x)
    assert len(SparseDescriptor.made) == made + 1, "SpMV and SpMM share the array's one descriptor"
    key = id(a)
    described, kept = conversion._WRAPPED[key]["csr descriptor"]
    assert described is mat
    handle = kept.desc
    cast = conversion.to_cupyx(a, np.float32)
    for _ in range(2):
        np.testing.assert_array_equal(cupy_linalg._product(cast, np.ones(3, np.float32), np.dtype("float32")), dense.sum(axis=1))
    assert len(SparseDescriptor.made) == made + 3
    del a, mat, described, kept
    gc.collect()
    assert key not in conversion._WRAPPED and handle not in SparseDescriptor.live, "the descriptor goes with its array"
    assert not library.dense, "the SpMV plan's dense descriptors go with it"


def test_an_arrays_spmvs_reuse_one_plan(library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    # the SpMVs of an array's kept matrix make its two dense descriptors and buffer once, and point them at
    # each call's vectors (cusparseDnVecSetValues): every product is the right one, with its own vectors
    import cupy_standin
    import xsparse as xs
    from xsparse.backends.cupy import conversion

    cupy_standin.install(monkeypatch)
    monkeypatch.setattr(cupy_linalg, "_binding", lambda: (library, SparseDescriptor, lambda: "handle"))
    dense = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]])
    a = xs.to_sparse_csr(dense)
    mat = conversion.to_cupyx(a)
    results = [cupy_linalg._product(mat, np.array(x, dtype=np.float64), np.dtype("float64"), a) for x in ([1, 2, 3], [4, 5, 6], [-1, 0, 1])]
    for x, r in zip(([1, 2, 3], [4, 5, 6], [-1, 0, 1]), results):
        np.testing.assert_array_equal(r, dense @ np.array(x, dtype=np.float64))
    assert library.calls.count("createDnVec") == 2 and library.calls.count("spMV_bufferSize") == 1
    assert library.calls.count("spMV") == 3 and library.calls.count("dnVecSetValues") == 6
    # a matrix made for one call (a cast) has no array to keep a plan with: descriptors made and destroyed
    cast = conversion.to_cupyx(a, np.float32)
    np.testing.assert_array_equal(cupy_linalg._product(cast, np.ones(3, np.float32), np.dtype("float32")), dense.sum(axis=1))
    assert library.calls.count("createDnVec") == 4 and len(library.dense) == 2, "the plan's two remain, the cast's are gone"


def test_threads_sharing_a_plan_get_their_own_products(library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    # the plan's lock holds the pointers and the SpMV together: threads on one stream never run with each
    # other's vectors
    import threading

    import cupy_standin
    import xsparse as xs
    from xsparse.backends.cupy import conversion

    cupy_standin.install(monkeypatch)
    monkeypatch.setattr(cupy_linalg, "_binding", lambda: (library, SparseDescriptor, lambda: "handle"))
    rng = np.random.default_rng(5)
    dense = rng.integers(-3, 4, (40, 30)).astype(np.float64)
    a = xs.to_sparse_csr(dense)
    mat = conversion.to_cupyx(a)
    wrong: list[int] = []

    def work(seed: int) -> None:
        local = np.random.default_rng(seed)
        for _ in range(60):
            x = local.integers(-3, 4, 30).astype(np.float64)
            if not np.array_equal(cupy_linalg._product(mat, x, np.dtype("float64"), a), dense @ x):
                wrong.append(seed)

    import time

    set_values = library.dnVecSetValues

    def set_and_yield(handle: int, ptr: int) -> None:
        set_values(handle, ptr)
        time.sleep(0)  # another thread's turn between setting a pointer and the product, as often as can be

    monkeypatch.setattr(library, "dnVecSetValues", set_and_yield)
    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong and library.calls.count("createDnVec") == 2
