"""Tests of the CuPy backend's native kernels (``xsparse.backends.cupy``): cupyx/cuSPARSE conversions and
products, and the custom SDDMM and BSR @ strided kernels.

Every registered CuPy kernel is run directly (asserting it accepts the input) on Hypothesis inputs, and its
result compared with the dense CuPy computation and with the generic kernel of the same operation; then
each reason to decline is checked. The module skips as a whole where CuPy or a CUDA device is absent,
unless ``XSPARSE_CUPY_STANDIN=1``: then NumPy and SciPy stand in for CuPy and cupyx
(``tests/cupy_standin.py``, which also runs the two custom kernels' C bodies translated into Python), so
the kernels run without a GPU; the tests that need device buffers or CuPy arrays skip
(``tests/test_cupy_standin.py`` runs the module so).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import backend_skip_reason

_SKIP = backend_skip_reason("cupy")
STANDIN = _SKIP is not None and os.environ.get("XSPARSE_CUPY_STANDIN") == "1"
if _SKIP is not None and not STANDIN:
    pytest.skip(_SKIP, allow_module_level=True)

if STANDIN:
    import cupy_standin

    cp: Any = cupy_standin.install()
else:
    import cupy as cp  # noqa: E402

import xsparse as xs  # noqa: E402
from strategies import dense_cases, uncoalesced_coo  # noqa: E402
from xsparse import dispatch  # noqa: E402
from xsparse._conversion import _target  # noqa: E402
from xsparse.backends.array_api.conversion import same_fill  # noqa: E402
from xsparse.backends.cupy import conversion as cupy_conversion  # noqa: E402
from xsparse.backends.cupy import elementwise as cupy_elementwise  # noqa: E402
from xsparse.backends.cupy import linalg as cupy_linalg  # noqa: E402
from xsparse.formats import CompressedArray  # noqa: E402
from xsparse.formats._spec import Target  # noqa: E402
from xsparse.testing import assert_sparse_equal, check_invariants, to_numpy  # noqa: E402

BACKEND = xs.get_backend("numpy" if STANDIN else "cupy")
XP = BACKEND.load()
# the tests that read device buffers or go through the public functions (which dispatch on the arrays'
# backend) need CuPy itself
gpu_only = pytest.mark.skipif(STANDIN, reason="needs CuPy itself (device buffers, or the backend of its arrays)")
FLOAT = ("float32", "float64", "complex64", "complex128")
CSR, CSC, COO, BSR, STRIDED = xs.sparse_csr, xs.sparse_csc, xs.sparse_coo, xs.sparse_bsr, xs.strided
# deadline None and no too_slow check: CuPy compiles each kernel on its first call, inside the first draws
examples = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])

# every (operation, signature) this module runs a CuPy kernel for; test_every_kernel_is_tested keeps it whole
TESTED = {
    ("convert", (CSR, CSC)), ("convert", (CSC, CSR)),
    ("convert", (COO, CSR)), ("convert", (COO, CSC)),
    ("convert", (STRIDED, CSR)), ("convert", (STRIDED, CSC)), ("convert", (STRIDED, COO)),
    ("convert", (CSR, STRIDED)), ("convert", (CSC, STRIDED)), ("convert", (COO, STRIDED)),
    ("matmul", (CSR, STRIDED)), ("matmul", (CSC, STRIDED)),
    ("matmul", (STRIDED, CSR)), ("matmul", (STRIDED, CSC)),
    ("matmul", (CSR, CSR)), ("matmul", (CSC, CSC)),
    ("matmul", (BSR, STRIDED)),
    ("sampled_addmm", (CSR, STRIDED, STRIDED)),
    ("erf", (STRIDED,)), ("erfinv", (STRIDED,)),
}  # fmt: skip


# -- helpers -------------------------------------------------------------------------------------------


def native(op: str, layouts: tuple[Any, ...]) -> dispatch.Kernel:
    found = [k for k in dispatch.resolve(op, layouts, "cupy") if k.kind == "native"]
    assert found, f"no native cupy kernel for {op}{layouts}"
    return found[0]


def generic(op: str, layouts: tuple[Any, ...]) -> dispatch.Kernel:
    found = [k for k in dispatch.resolve(op, layouts, "cupy") if k.kind == "generic"]
    assert found, f"no generic kernel for {op}{layouts}"
    return found[0]


def run_native(op: str, layouts: tuple[Any, ...], *args: Any) -> Any:
    """Run the CuPy kernel, asserting that it accepts the arguments."""
    kernel = native(op, layouts)
    reason = kernel.supports(XP, *args) if kernel.supports else None
    assert reason is None, f"{kernel.describe()} declined: {reason}"
    return kernel.func(XP, *args)


def run_generic(op: str, layouts: tuple[Any, ...], *args: Any) -> Any:
    return generic(op, layouts).func(XP, *args)


def reason_of(op: str, layouts: tuple[Any, ...], *args: Any) -> str | None:
    kernel = native(op, layouts)
    return kernel.supports(XP, *args) if kernel.supports else None


def target(x: Any, layout: xs.Layout, index_dtype: str = "int64", **kwargs: Any) -> Target:
    if layout is STRIDED:
        return Target(STRIDED, BACKEND, XP, tuple(x.shape), x.ndim, 0, (1, 1), XP.int64, x.fill_value)
    return _target(
        "test", x, layout, BACKEND, XP, kwargs.get("sparse_dim"), kwargs.get("dense_dim"), kwargs.get("blocksize"),
        index_dtype, kwargs.get("fill_value"),
    )  # fmt: skip


def make(x: Any, layout: xs.Layout, index_dtype: str, **kwargs: Any) -> Any:
    """``x`` converted to ``layout`` by the generic kernel (so the input does not depend on the kernels under test)."""
    return run_generic("convert", (STRIDED, layout), x, target(x, layout, index_dtype, **kwargs))


def tolerance(dtype: Any) -> dict[str, Any]:
    single = np.dtype(dtype) in (np.float32, np.complex64)
    return {"rtol": 2e-5, "atol": 2e-5} if single else {"rtol": 1e-12, "atol": 1e-12}


def product_tolerance(dtype: Any) -> dict[str, Any]:
    """The comparison of a sparse product: within a tolerance, and not the signs of zeros, which follow
    the summation order (docs/decisions.md, "Signs of zeros that xsparse does not track")."""
    return {**tolerance(dtype), "check_signed_zeros": False}


def positive_zeros(x: Any) -> Any:
    """``x`` with every -0.0 made +0.0 (cuSPARSE drops or rewrites -0.0; its decline is tested apart)."""
    return cp.where(x == 0, cp.zeros((), dtype=x.dtype), x)


def random(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> Any:
    out = rng.integers(-3, 4, shape).astype(np.float64)
    if dtype.startswith("complex"):
        out = out + 1j * rng.integers(-3, 4, shape)
    return cp.asarray(out.astype(dtype))


def same_components(a: Any, b: Any) -> None:
    """The two canonical arrays hold the same indices (and index dtype) and values."""
    assert a.layout is b.layout and tuple(a.shape) == tuple(b.shape)
    if a.layout is COO:
        pairs = [(a.indices(), b.indices()), (a.values(), b.values())]
    else:
        pairs = [(a.compressed_indices(), b.compressed_indices()), (a.plain_indices(), b.plain_indices()), (a.values(), b.values())]
    for x, y in pairs:
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(to_numpy(x), to_numpy(y))


def finite(x: Any) -> Any:
    """``x`` with every NaN made 1 (a stored NaN meets only the other operand's stored elements in a sparse
    product, every element in the dense one)."""
    return cp.where(cp.isnan(x), cp.ones((), dtype=x.dtype), x)


@st.composite
def float_cases(draw: Any, max_batch_dims: int = 0, max_grid: int = 4, fill: bool | None = False) -> Any:
    dtype = draw(st.sampled_from(FLOAT))
    return draw(dense_cases(XP, dtype=dtype, fill=fill, max_batch_dims=max_batch_dims, max_dense_dims=0, max_grid=max_grid))


def test_every_kernel_is_tested() -> None:
    # the kernels of the modules this file covers (other CuPy modules, such as the 2:4 one, have their own tests)
    modules = {cupy_conversion.__name__, cupy_linalg.__name__, cupy_elementwise.__name__}
    registered = {(k.op, k.signature) for k in xs.kernels() if k.backend == "cupy" and k.func.__module__ in modules}
    assert registered == TESTED


def test_importing_the_kernels_does_not_import_cupy() -> None:
    # the modules register at import; CuPy is imported only through cupy_module() when a kernel runs
    code = "import sys, xsparse.backends.cupy; print('cupy' in sys.modules, 'cupyx' in sys.modules, 'scipy' in sys.modules)"
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.strip() == "False False False"
    assert cupy_conversion.cupy_module() is cp


@gpu_only
def test_to_cupyx_shares_buffers_and_is_canonical() -> None:
    dense = np.asarray([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [0.0, 3.0, 0.0]])
    a = xs.sparse_csr_array(
        cp.asarray([0, 2, 2, 3], dtype=cp.int32), cp.asarray([0, 2, 1], dtype=cp.int32), cp.asarray([1.0, 2.0, 3.0]), (3, 3)
    )
    for b, expected in ((a, dense), (a.transpose_sparse(), dense.T)):
        m = cupy_conversion.to_cupyx(b)
        assert m.format == ("csr" if b.layout is CSR else "csc") and tuple(m.shape) == tuple(b.shape)
        # zero-copy: int32 indices and values are the array's own buffers
        for mine, theirs in [(b.values(), m.data), (b.plain_indices(), m.indices), (b.compressed_indices(), m.indptr)]:
            assert mine.data.ptr == theirs.data.ptr
        # flagged canonical up front (cupyx's cached flag, set without its check kernel and synchronisation)
        assert getattr(m, "_has_canonical_format", None) is True
        np.testing.assert_array_equal(to_numpy(m.toarray()), expected)


def test_wrapped_matrices_are_made_once_per_array() -> None:
    x = cp.asarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    a = make(x, CSR, "int64", dense_dim=0)  # int64 indices: the narrowed int32 copy is made once too
    m = cupy_conversion.to_cupyx(a)
    assert cupy_conversion.to_cupyx(a) is m and cupy_conversion.to_cupyx(a, dtype=a.dtype) is m
    t = cupy_conversion.to_cupyx(a, transposed=True)
    assert t.format == "csc" and tuple(t.shape) == (4, 3) and cupy_conversion.to_cupyx(a, transposed=True) is t
    # cuSPARSE gets int32 indices, narrowed once for both orientations
    for mine, theirs in ((m.indices, t.indices), (m.indptr, t.indptr)):
        assert mine.dtype == theirs.dtype == cp.int32
        assert mine.data.ptr == theirs.data.ptr if hasattr(mine.data, "ptr") else np.shares_memory(mine, theirs)
    np.testing.assert_array_equal(to_numpy(t.toarray()), to_numpy(x).T)
    cast_ = cupy_conversion.to_cupyx(a, dtype=cp.float32)
    assert cast_.dtype == cp.float32 and cupy_conversion.to_cupyx(a, dtype=cp.float32) is not cast_, "casts are not kept"
    key = id(a)
    del a, m, t
    gc.collect()
    assert key not in cupy_conversion._WRAPPED, "the entries go with the array"


# -- conversions ---------------------------------------------------------------------------------------


@examples
@given(case=float_cases(), dst=st.sampled_from([CSR, CSC, COO]), index_dtype=st.sampled_from(["int32", "int64"]))
def test_strided_to_sparse(case: Any, dst: xs.Layout, index_dtype: str) -> None:
    x = positive_zeros(case.array)
    kw = {"sparse_dim": 2} if dst is COO else {"dense_dim": 0}
    t = target(x, dst, index_dtype, **kw)
    result = run_native("convert", (STRIDED, dst), x, t)
    assert_sparse_equal(result, x, check_layout=dst, check_signed_zeros=True)
    assert result.index_dtype == t.index_dtype
    same_components(result, run_generic("convert", (STRIDED, dst), x, t))


@examples
@given(case=float_cases(), src=st.sampled_from([CSR, CSC]), index_dtype=st.sampled_from(["int32", "int64"]))
def test_csr_csc(case: Any, src: xs.Layout, index_dtype: str) -> None:
    x = positive_zeros(case.array)
    dst = CSC if src is CSR else CSR
    a = make(x, src, index_dtype, dense_dim=0)
    t = target(a, dst, index_dtype, dense_dim=0)
    result = run_native("convert", (src, dst), a, t)
    assert_sparse_equal(result, x, check_layout=dst, check_signed_zeros=True)
    same_components(result, run_generic("convert", (src, dst), a, t))


@examples
@given(data=st.data(), dst=st.sampled_from([CSR, CSC]), index_dtype=st.sampled_from(["int32", "int64"]))
def test_coo_to_compressed_sums_duplicates(data: Any, dst: xs.Layout, index_dtype: str) -> None:
    coo, expected = data.draw(uncoalesced_coo(XP, min_sparse_dims=2, max_sparse_dims=2, max_dense_dims=0))
    assume(str(coo.dtype) in FLOAT)
    t = target(coo, dst, index_dtype, dense_dim=0)
    result = run_native("convert", (COO, dst), coo, t)
    assert result.index_dtype == t.index_dtype
    assert_sparse_equal(result, cp.asarray(expected), check_layout=dst)
    assert_sparse_equal(result, run_generic("convert", (COO, dst), coo, t))


@examples
@given(case=float_cases(), src=st.sampled_from([CSR, CSC, COO]), index_dtype=st.sampled_from(["int32", "int64"]))
def test_sparse_to_strided(case: Any, src: xs.Layout, index_dtype: str) -> None:
    x = positive_zeros(case.array)
    a = make(x, src, index_dtype, **({"sparse_dim": 2} if src is COO else {"dense_dim": 0}))
    t = target(a, STRIDED)
    result = run_native("convert", (src, STRIDED), a, t)
    assert isinstance(result, cp.ndarray) and result.flags.c_contiguous
    assert_sparse_equal(result, x, check_signed_zeros=True)
    assert_sparse_equal(result, run_generic("convert", (src, STRIDED), a, t), check_signed_zeros=True)


@examples
@given(data=st.data())
def test_uncoalesced_coo_to_strided(data: Any) -> None:
    coo, expected = data.draw(uncoalesced_coo(XP, min_sparse_dims=2, max_sparse_dims=2, max_dense_dims=0))
    assume(str(coo.dtype) in FLOAT)
    result = run_native("convert", (COO, STRIDED), coo, target(coo, STRIDED))
    np.testing.assert_allclose(to_numpy(result), expected, equal_nan=True)


# -- products ------------------------------------------------------------------------------------------


@examples
@given(
    case=float_cases(max_batch_dims=2), layout=st.sampled_from([CSR, CSC]), index_dtype=st.sampled_from(["int32", "int64"]),
    form=st.sampled_from(["vector", "matrix", "batched"]), n=st.integers(0, 5),
    other=st.sampled_from(FLOAT), seed=st.integers(0, 2**32 - 1), order=st.sampled_from(["C", "F", "strided"]),
)  # fmt: skip
def test_matmul_compressed_strided(
    case: Any, layout: xs.Layout, index_dtype: str, form: str, n: int, other: str, seed: int, order: str
) -> None:
    rng = np.random.default_rng(seed)
    a = make(case.array, layout, index_dtype, dense_dim=0)
    k = case.sparse_shape[1]
    shape = {"vector": (k,), "matrix": (k, n), "batched": (*case.batch_shape, k, n)}[form]
    b = random(rng, shape, other)
    # a row-major operand goes to SpMM transposed (no copy), a column-major or strided one through cupyx
    if order == "F":
        b = cp.asfortranarray(b)
    elif order == "strided" and b.ndim:
        b = cp.concatenate([b, b], axis=-1)[..., ::2]
    result = run_native("matmul", (layout, STRIDED), a, b)
    expected = run_generic("matmul", (layout, STRIDED), a, b)
    assert result.dtype == expected.dtype
    tol = tolerance(result.dtype)
    np.testing.assert_allclose(to_numpy(result), to_numpy(expected), equal_nan=True, **tol)
    np.testing.assert_allclose(to_numpy(result), to_numpy(cp.matmul(case.array.astype(result.dtype), b.astype(result.dtype))), equal_nan=True, **tol)


def _calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """A list that the CuPy linalg module's function ``name`` appends to on every call (which it still makes)."""
    calls: list[int] = []
    original = getattr(cupy_linalg, name)
    monkeypatch.setattr(cupy_linalg, name, lambda *args: calls.append(1) or original(*args))
    return calls


def _integer_matrix(rng: np.random.Generator, shape: tuple[int, int], layout: xs.Layout) -> tuple[np.ndarray, Any]:
    """A host matrix of small integers, about half of them 0 (products exact in float64), and its CuPy
    array in ``layout`` with int32 indices."""
    dense = np.where(rng.random(shape) < 0.5, rng.integers(-3, 4, shape), 0).astype(np.float64)
    dense[0, 0] = 1.0  # never empty
    return dense, make(cp.asarray(dense), layout, "int32", dense_dim=0)


@pytest.mark.parametrize("layout", [CSR, CSC])
@pytest.mark.parametrize("side", ["sparse @ dense", "dense @ sparse"])
def test_products_of_row_major_operands(layout: xs.Layout, side: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # a row-major dense operand of at least 2 x 2 goes to SpMM described row-major, result row-major too
    # (CSR @ dense), or with transb (CSC @ dense), or is the column-major transpose cupyx takes as it is
    # (dense @ sparse); CSC goes to cuSPARSE as a transposed CSR
    row_major = _calls(monkeypatch, "_spmm_row_major")
    rng = np.random.default_rng(7)
    dense, a = _integer_matrix(rng, (5, 6), layout)
    if side == "sparse @ dense":
        host = rng.integers(-3, 4, (6, 4)).astype(np.float64)
        result, expected = run_native("matmul", (layout, STRIDED), a, cp.asarray(host)), dense @ host
    else:
        host = rng.integers(-3, 4, (4, 5)).astype(np.float64)
        result, expected = run_native("matmul", (STRIDED, layout), cp.asarray(host), a), host @ dense
    assert result.flags.c_contiguous and result.dtype == cp.float64
    np.testing.assert_array_equal(to_numpy(result), expected)
    assert row_major == ([1] if (layout is CSR and side == "sparse @ dense") else [])


@pytest.mark.parametrize("layout", [CSR, CSC])
@pytest.mark.parametrize("side", ["sparse @ vector", "vector @ sparse"])
def test_vector_products_call_spmv_directly(layout: xs.Layout, side: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the matrix whose kept cupyx form is CSR (CSR @ x, x @ CSC: the transposed view) goes to cuSPARSE's SpMV
    # directly, its descriptor kept with the array; the result is written over memory that held NaNs (a
    # freed buffer of the same size, which the memory pool hands out again): beta = 0 reads none of it
    # each product has a vector of its own: the array keeps its SpMV descriptors and buffer, and points them
    # at each call's vectors
    direct = _calls(monkeypatch, "_spmv")
    rng = np.random.default_rng(11)
    dense, a = _integer_matrix(rng, (7, 7), layout)
    for _ in range(3):
        host = rng.integers(-3, 4, 7).astype(np.float64)
        x = cp.asarray(host)
        signature, operands = ((layout, STRIDED), (a, x)) if side == "sparse @ vector" else ((STRIDED, layout), (x, a))
        expected = dense @ host if side == "sparse @ vector" else host @ dense
        held = cp.full(7, np.nan)
        del held  # the pool's next 7-element buffer, the result's, held NaNs
        np.testing.assert_array_equal(to_numpy(run_native("matmul", signature, *operands)), expected)
    assert len(direct) == (3 if (layout is CSR) == (side == "sparse @ vector") else 0)


@examples
@given(
    case=float_cases(), layout=st.sampled_from([CSR, CSC]), index_dtype=st.sampled_from(["int32", "int64"]),
    vector=st.booleans(), p=st.integers(0, 5), seed=st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_matmul_strided_compressed(case: Any, layout: xs.Layout, index_dtype: str, vector: bool, p: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    b = make(case.array, layout, index_dtype, dense_dim=0)
    m = case.sparse_shape[0]
    a = random(rng, (m,) if vector else (p, m), case.dtype)
    result = run_native("matmul", (STRIDED, layout), a, b)
    tol = tolerance(result.dtype)
    np.testing.assert_allclose(to_numpy(result), to_numpy(run_generic("matmul", (STRIDED, layout), a, b)), equal_nan=True, **tol)
    np.testing.assert_allclose(to_numpy(result), to_numpy(cp.matmul(a, case.array)), equal_nan=True, **tol)


@examples
@given(
    case=float_cases(), layout=st.sampled_from([CSR, CSC]), index_dtype=st.sampled_from(["int32", "int64"]),
    n=st.integers(0, 6), density=st.sampled_from([0.0, 0.3, 1.0]), seed=st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_spgemm(case: Any, layout: xs.Layout, index_dtype: str, n: int, density: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = case.sparse_shape[1]
    left = finite(case.array)
    right = cp.where(cp.asarray(rng.random((k, n)) < density), random(rng, (k, n), case.dtype), cp.zeros((), dtype=case.dtype))
    a = make(left, layout, index_dtype, dense_dim=0)
    b = make(right, layout, index_dtype, dense_dim=0)
    result = run_native("matmul", (layout, layout), a, b)
    assert result.layout is layout and result.index_dtype == a.index_dtype
    check_invariants(result)
    assert_sparse_equal(result, run_generic("matmul", (layout, layout), a, b), **product_tolerance(result.dtype))
    assert_sparse_equal(result, cp.matmul(left, right), **product_tolerance(result.dtype))


@examples
@given(
    case=float_cases(max_batch_dims=2), index_dtype=st.sampled_from(["int32", "int64"]),
    form=st.sampled_from(["vector", "matrix", "batched"]), n=st.integers(0, 4), seed=st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_matmul_bsr_strided(case: Any, index_dtype: str, form: str, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = make(case.array, BSR, index_dtype, dense_dim=0, blocksize=case.blocksize)
    k = case.sparse_shape[1]
    shape = {"vector": (k,), "matrix": (k, n), "batched": (*case.batch_shape, k, n)}[form]
    b = random(rng, shape, case.dtype)
    result = run_native("matmul", (BSR, STRIDED), a, b)
    tol = tolerance(result.dtype)
    np.testing.assert_allclose(to_numpy(result), to_numpy(run_generic("matmul", (BSR, STRIDED), a, b)), equal_nan=True, **tol)
    np.testing.assert_allclose(to_numpy(result), to_numpy(cp.matmul(case.array, b)), equal_nan=True, **tol)


@examples
@given(
    case=float_cases(max_batch_dims=2, fill=None), index_dtype=st.sampled_from(["int32", "int64"]), kk=st.integers(0, 5),
    beta=st.sampled_from([0, 1, 0.5]), alpha=st.sampled_from([1, -2.0]), shared=st.booleans(), seed=st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_sampled_addmm(case: Any, index_dtype: str, kk: int, beta: Any, alpha: Any, shared: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = case.sparse_shape
    mask = make(case.array, CSR, index_dtype, dense_dim=0, **({"fill_value": case.fill_value} if case.has_fill else {}))
    batch = () if shared else case.batch_shape
    a = random(rng, (*batch, m, kk), case.dtype)
    b = random(rng, (*case.batch_shape, kk, n), case.dtype)
    result = run_native("sampled_addmm", (CSR, STRIDED, STRIDED), mask, a, b, beta, alpha)
    expected = run_generic("sampled_addmm", (CSR, STRIDED, STRIDED), mask, a, b, beta, alpha)
    tol = tolerance(result.dtype)
    assert same_fill(result.fill_value, expected.fill_value)
    for x, y in [(result.crow_indices(), mask.crow_indices()), (result.col_indices(), mask.col_indices())]:
        np.testing.assert_array_equal(to_numpy(x), to_numpy(y))
    np.testing.assert_allclose(to_numpy(result.values()), to_numpy(expected.values()), equal_nan=True, **tol)
    # the dense computation: alpha * (a @ b) + beta * mask on the pattern, beta * fill elsewhere
    pattern = to_numpy(xs.to_dense(mask._with_values(cp.ones_like(mask.values()), 0))) != 0
    product = to_numpy(cp.matmul(a, b))
    own = to_numpy(xs.to_dense(mask))
    with np.errstate(invalid="ignore"):
        dense = np.where(pattern, alpha * product + (beta * own if beta else 0), beta * case.fill_value if beta else 0)
    np.testing.assert_allclose(to_numpy(xs.to_dense(result)), dense, equal_nan=True, **tol)


# -- reasons to decline --------------------------------------------------------------------------------


# -- erf and erfinv -------------------------------------------------------------------------------------

ERF_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint64", "float16", "float32", "float64")


@examples
@given(
    name=st.sampled_from(["erf", "erfinv"]), dtype=st.sampled_from(ERF_DTYPES),
    shape=st.lists(st.integers(0, 4), max_size=3), seed=st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_error_functions(name: str, dtype: str, shape: list[int], seed: int) -> None:
    """The CuPy kernels against the NumPy backend's (SciPy's, on the host): the same dtype, the same values
    to a few ulps, NaN and infinities where SciPy has them, the signs of zeros."""
    rng = np.random.default_rng(seed)
    specials = np.asarray([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, np.inf, -np.inf, np.nan])
    host = np.where(rng.random(shape) < 0.3, rng.choice(specials, shape), rng.uniform(-1.2, 1.2, shape) * (1 if name == "erfinv" else 4))
    if dtype == "bool":
        host = host > 0
    elif not dtype.startswith("float"):
        host = np.nan_to_num(host, nan=0.0, posinf=3.0, neginf=-3.0)
        host = np.abs(host) if dtype.startswith("uint") else host
    host = host.astype(dtype)
    expected = getattr(xs, name)(host)  # the NumPy backend: SciPy
    result = run_native(name, (STRIDED,), cp.asarray(host))
    got = np.asarray(result if STANDIN else result.get())  # SciPy standing in gives a 0-d operand a scalar
    assert got.dtype == expected.dtype and got.shape == expected.shape
    single = expected.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5 if single else 1e-12, atol=1e-6 if single else 1e-14, equal_nan=True)
    np.testing.assert_array_equal(np.signbit(got[got == 0]), np.signbit(expected[got == 0]))


def _csr(values: list[Any], dtype: str = "float64", **kwargs: Any) -> Any:
    return xs.sparse_csr_array(cp.asarray([0, 1, 2]), cp.asarray([0, 1]), cp.asarray(values, dtype=dtype), (2, 2), **kwargs)


def test_declines_other_dtypes() -> None:
    a = _csr([1, 2], dtype="int32")
    assert "float32, float64, complex64 and complex128" in str(reason_of("convert", (CSR, CSC), a, target(a, CSC)))
    b = _csr([1.0, 2.0])
    assert "got int64" in str(reason_of("matmul", (CSR, STRIDED), b, cp.ones(2, dtype=cp.int64)))
    assert "got int32" in str(reason_of("matmul", (BSR, STRIDED), xs.to_sparse_bsr(a, (1, 1)), cp.ones(2)))


def test_declines_other_fill_values() -> None:
    a = _csr([1.0, 2.0], fill_value=1.0)
    assert "fill value is 1.0" in str(reason_of("convert", (CSR, STRIDED), a, target(a, STRIDED)))
    assert "fill value is 1.0" in str(reason_of("matmul", (CSR, STRIDED), a, cp.ones(2)))
    x = cp.ones((2, 2))
    assert "fill value is 2.0" in str(reason_of("convert", (STRIDED, CSR), x, target(x, CSR, fill_value=2.0)))


def test_declines_dense_dimensions() -> None:
    a = xs.to_sparse_csr(cp.ones((2, 2, 3)), dense_dim=1)
    assert "no dense dimensions" in str(reason_of("convert", (CSR, CSC), a, target(a, CSC, dense_dim=1)))
    assert "no dense dimensions" in str(reason_of("matmul", (CSR, STRIDED), a, cp.ones(2)))
    assert "no dense dimensions" in str(reason_of("sampled_addmm", (CSR, STRIDED, STRIDED), a, cp.ones((2, 2)), cp.ones((2, 2)), 1, 1))


def test_declines_batches_where_not_folded() -> None:
    a = xs.to_sparse_csr(cp.ones((3, 2, 2)))
    assert "are 2-D" in str(reason_of("convert", (CSR, CSC), a, target(a, CSC)))
    assert "2-D sparse matrices only" in str(reason_of("matmul", (CSR, CSR), a, a))
    assert "by a vector or a matrix only" in str(reason_of("matmul", (STRIDED, CSR), cp.ones((2, 2)), a))
    assert "must broadcast" in str(reason_of("matmul", (CSR, STRIDED), a, cp.ones((4, 2, 2))))
    b = xs.to_sparse_csr(cp.ones((2, 2)))
    assert "must broadcast" in str(reason_of("sampled_addmm", (CSR, STRIDED, STRIDED), b, cp.ones((3, 2, 2)), cp.ones((2, 2)), 1, 1))
    assert "takes matrices" in str(reason_of("sampled_addmm", (CSR, STRIDED, STRIDED), b, cp.ones(2), cp.ones((2, 2)), 1, 1))


def test_declines_negative_zeros() -> None:
    x = cp.asarray([[-0.0, 1.0], [0.0, 2.0]])
    assert "leaves out -0.0" in str(reason_of("convert", (STRIDED, CSR), x, target(x, CSR)))
    a = _csr([-0.0, 1.0])
    assert "may turn a stored -0.0 into +0.0" in str(reason_of("convert", (CSR, STRIDED), a, target(a, STRIDED)))
    coo = xs.sparse_coo_array(cp.asarray([[0, 1], [0, 1]]), cp.asarray([-0.0, 1.0]), (2, 2))
    assert "duplicate sum turns a stored -0.0" in str(reason_of("convert", (COO, CSR), coo, target(coo, CSR)))


@pytest.mark.parametrize("dst", [CSR, CSC])
def test_coalesced_coo_keeps_negative_zeros(dst: xs.Layout) -> None:
    # a coalesced COO is flagged canonical: cupyx only permutes its values, so the kernel accepts a -0.0
    indices = cp.asarray([[0, 0, 1, 2], [1, 2, 0, 2]])
    coo = xs.sparse_coo_array(indices, cp.asarray([-0.0, 1.0, -0.0, 2.0]), (3, 3), is_coalesced=True)
    t = target(coo, dst, dense_dim=0)
    result = run_native("convert", (COO, dst), coo, t)
    expected = run_generic("convert", (COO, dst), coo, t)
    same_components(result, expected)
    # assert_array_equal takes -0.0 for +0.0: compare the sign bits too
    np.testing.assert_array_equal(to_numpy(cp.signbit(result.values())), to_numpy(cp.signbit(expected.values())))
    assert int(cp.signbit(result.values()).sum()) == 2


def test_indices_are_checked_once_before_the_kernels_read_them() -> None:
    # cuSPARSE and the custom kernels trust indices: an array built without the index checks is checked on
    # its first CuPy kernel (an InvariantError, not an access outside a device buffer), and only once
    def unchecked(cols: list[int]) -> CompressedArray:
        return CompressedArray(
            cp.asarray([0, 1, 2]), cp.asarray(cols), cp.asarray([1.0, 2.0]), (2, 2),
            layout=CSR, backend=BACKEND, xp=XP, check=False,
        )  # fmt: skip

    for op, layouts, extra in [("convert", (CSR, STRIDED), None), ("matmul", (CSR, STRIDED), cp.ones((2, 3)))]:
        bad = unchecked([0, 5])
        args = (bad, target(bad, STRIDED)) if extra is None else (bad, extra)
        with pytest.raises(xs.InvariantError, match=r"invariant 5\.\d violated"):
            run_native(op, layouts, *args)
        good = unchecked([1, 0])
        assert not good._bounds_checked
        run_native(op, layouts, *((good, target(good, STRIDED)) if extra is None else (good, extra)))
        assert good._bounds_checked
    # a result cuSPARSE made needs no check
    a = unchecked([1, 0])
    assert run_native("convert", (CSR, CSC), a, target(a, CSC))._bounds_checked


def test_declines_sizes_past_int32() -> None:
    assert cupy_conversion.index_reason(3, 2**31) == "cuSPARSE takes int32 indices, which cannot address 2147483648 elements"
    assert cupy_conversion.index_reason(2**31 - 1) is None


@gpu_only
def test_public_functions_run_the_cupy_kernels() -> None:
    x = cp.asarray([[0.0, 1.5], [2.0, 0.0]])
    # the CuPy kernels come first in dispatch's order and accept these operands, so these are what run
    for op, layouts in [("convert", (STRIDED, CSR)), ("matmul", (CSR, STRIDED)), ("convert", (CSR, CSC)), ("matmul", (CSR, CSR))]:
        assert dispatch.resolve(op, layouts, "cupy")[0] is native(op, layouts)
    assert reason_of("convert", (STRIDED, CSR), x, target(x, CSR)) is None
    a = xs.to_sparse_csr(x)
    assert reason_of("matmul", (CSR, STRIDED), a, cp.ones(2)) is None
    assert reason_of("convert", (CSR, CSC), a, target(a, CSC)) is None
    assert reason_of("matmul", (CSR, CSR), a, a) is None
    assert_sparse_equal(a, x)
    np.testing.assert_allclose(to_numpy(xs.matmul(a, cp.ones(2))), [1.5, 2.0])
    assert_sparse_equal(xs.to_sparse_csc(a), x)
    assert_sparse_equal(xs.matmul(a, a), x @ x, check_signed_zeros=False)
    # erf keeps the layout (fill value erf(0) = 0) and runs the CuPy kernel on the values
    np.testing.assert_allclose(to_numpy(xs.to_dense(xs.erf(a))), xs.erf(to_numpy(x)), rtol=1e-12)
    assert xs.erf(a).layout is CSR


@gpu_only
def test_to_backend_copies_device_arrays_to_the_host() -> None:
    # NumPy's DLPack import takes host memory only: the move copies the CuPy buffers to the host
    x = cp.asarray([[0.0, 1.5], [2.0, 0.0]])
    for a in (x, xs.to_sparse_coo(x), xs.to_sparse_csr(x)):
        moved = xs.to_backend(a, "numpy")
        assert moved.backend == "numpy" if isinstance(moved, xs.SparseArray) else isinstance(moved, np.ndarray)
        np.testing.assert_array_equal(xs.to_dense(moved), cp.asnumpy(x))


@gpu_only
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_buffers_off_a_16_byte_boundary_reach_cusparse_aligned(index_dtype: str) -> None:
    # 7 stored elements: the column row of the (2, 7) int32 COO indices starts 28 bytes in (sparseToDense
    # faulted with a misaligned address there); a dense operand x[1:] starts 8 bytes in
    host = np.zeros((5, 6))
    host[[0, 1, 1, 2, 3, 4, 4], [1, 0, 5, 2, 3, 0, 4]] = np.arange(1.0, 8.0)
    a = xs.to_sparse_coo(cp.asarray(host), index_dtype=index_dtype)
    assert a.nnz == 7 and a.is_coalesced()
    np.testing.assert_array_equal(to_numpy(xs.to_dense(a)), host)
    m = cupy_conversion.to_cupyx(a)
    assert all(buf.data.ptr % 16 == 0 for buf in (m.row, m.col, m.data))
    x = cp.arange(7.0)
    csr = xs.to_sparse_csr(a)
    np.testing.assert_allclose(to_numpy(xs.matmul(csr, x[1:])), host @ np.arange(1.0, 7.0))
    cp.cuda.runtime.deviceSynchronize()


def test_aligned_copies_only_buffers_off_a_16_byte_boundary() -> None:
    def address(x: Any) -> int:
        return int(x.data.ptr) if hasattr(x.data, "ptr") else int(x.ctypes.data)

    x = cp.arange(9, dtype=cp.int32)
    assert address(x) % 16 == 0 and cupy_conversion.aligned(x) is x
    for view in (x[1:], x[2:], x[3:]):  # 4, 8 and 12 bytes in
        moved = cupy_conversion.aligned(view)
        assert moved is not view and address(moved) % 16 == 0
        np.testing.assert_array_equal(to_numpy(moved), to_numpy(view))
    view = x[4:]  # 16 bytes in: the view itself
    assert address(view) % 16 == 0 and cupy_conversion.aligned(view) is view
