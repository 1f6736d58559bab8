"""Tests of the NumPy backend's compiled linear-algebra kernels (``_cpu.csr_matmul``, ``csr_spgemm``,
``csr_sddmm`` and the kernels of ``xsparse.backends.numpy.linalg``).

Every result is compared with a dense NumPy oracle and with SciPy where SciPy has the operation (2-D
CSR/CSC products), and the registered kernels also with the generic (Array API) kernel of the same
operation. Sizes are drawn small by Hypothesis; a few fixed large cases run the parallel paths
(chunked rows, column split, per-batch and per-thread copies).
"""

from __future__ import annotations

import contextlib
import math
from typing import Any
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import xsparse as xs
from xsparse import dispatch
from xsparse.backends import _cpu
from xsparse.testing import check_invariants, to_numpy

pytestmark = pytest.mark.skipif(_cpu.unavailable_reason() is not None, reason=str(_cpu.unavailable_reason()))

FLOAT_DTYPES = [np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128)]
INDEX_DTYPES = [np.dtype(np.int32), np.dtype(np.int64)]
# No deadline: the first call of a parallel kernel starts OpenMP's threads.
examples = settings(deadline=None, max_examples=120)

XP = xs.get_backend("numpy").load()


# --- data -------------------------------------------------------------------------------------------------


def tolerance(dtype: np.dtype) -> dict[str, float]:
    return {"rtol": 2e-5, "atol": 2e-5} if dtype in (np.float32, np.complex64) else {"rtol": 1e-12, "atol": 1e-12}


def random_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    out = rng.standard_normal(shape)
    if dtype.kind == "c":
        out = out + 1j * rng.standard_normal(shape)
    return np.asarray(out, dtype=dtype)


def random_csr(
    rng: np.random.Generator, m: int, n: int, density: float, dtype: np.dtype, index_dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A canonical CSR matrix (sorted, unique indices); rows are often empty at low density."""
    mask = rng.random((m, n)) < density
    rows, cols = np.nonzero(mask)
    indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=m))].astype(index_dtype)
    return indptr, cols.astype(index_dtype), random_values(rng, (cols.size,), dtype)


def dense_of(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    out = np.zeros(shape, dtype=data.dtype)
    rows = np.repeat(np.arange(shape[0]), np.diff(indptr))
    np.add.at(out, (rows, indices), data)
    return out


def relayout(x: np.ndarray, how: str) -> np.ndarray:
    """x with another memory layout: C order, Fortran order, a strided view, or reversed strides."""
    if how == "f":
        return np.asfortranarray(x)
    if how == "step":
        big = np.zeros((*x.shape[:-1], 2 * x.shape[-1]), x.dtype)
        big[..., ::2] = x
        return big[..., ::2]
    if how == "reversed":
        return np.ascontiguousarray(x[..., ::-1])[..., ::-1]
    return np.ascontiguousarray(x)


@st.composite
def csr_cases(draw: st.DrawFn, max_side: int = 12) -> dict[str, Any]:
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    index_dtype = draw(st.sampled_from(INDEX_DTYPES))
    m, n = draw(st.integers(0, max_side)), draw(st.integers(0, max_side))
    density = draw(st.sampled_from([0.0, 0.1, 0.4, 1.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    indptr, indices, data = random_csr(rng, m, n, density, dtype, index_dtype)
    return {"dtype": dtype, "index_dtype": index_dtype, "m": m, "n": n, "rng": rng, "csr": (indptr, indices, data)}


def sparse_array(case: dict[str, Any], layout: xs.Layout) -> Any:
    """The case's matrix as an xsparse CSR array, or a CSC array holding the same matrix."""
    indptr, indices, data = case["csr"]
    a = xs.sparse_csr_array(indptr, indices, data, (case["m"], case["n"]))
    return a if layout is xs.sparse_csr else xs.to_sparse_csc(a)


def scipy_of(a: Any) -> Any:
    container = sp.csr_array if a.layout is xs.sparse_csr else sp.csc_array
    return container((a.values(), a.plain_indices(), a.compressed_indices()), shape=a.shape)


def generic_kernel(op: str, layouts: tuple[Any, ...]) -> Any:
    """The generic kernel the dispatcher would use after the native ones, or None."""
    found = [k for k in dispatch.resolve(op, layouts, "numpy") if k.kind == "generic"]
    return found[0].func if found else None


def native_kernel(op: str, layouts: tuple[Any, ...]) -> Any:
    found = [k for k in dispatch.resolve(op, layouts, "numpy") if k.kind == "native"]
    assert found, f"no native numpy kernel for {op}{layouts}"
    return found[0]


def run_native(op: str, layouts: tuple[Any, ...], *args: Any) -> Any:
    """Run the numpy backend's native kernel, asserting it accepts the arguments."""
    kernel = native_kernel(op, layouts)
    reason = kernel.supports(XP, *args) if kernel.supports else None
    assert reason is None, f"{kernel.describe()} declined: {reason}"
    return kernel.func(XP, *args)


def assert_close(actual: Any, expected: Any, dtype: np.dtype) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    assert actual.dtype == dtype
    np.testing.assert_allclose(actual, expected, **tolerance(dtype))


# --- csr_matmul: both forms, every stride, batches, alpha/beta ---------------------------------------


@examples
@given(
    case=csr_cases(),
    k=st.sampled_from([1, 2, 3, 5, 16, 17, 40]),
    transpose=st.booleans(),
    how=st.sampled_from(["c", "f", "step", "reversed"]),
    nb=st.sampled_from([1, 2, 3]),
    shared=st.booleans(),
    scaled=st.booleans(),
)
def test_csr_matmul_matches_dense(
    case: dict[str, Any], k: int, transpose: bool, how: str, nb: int, shared: bool, scaled: bool
) -> None:
    rng, dtype, m, n = case["rng"], case["dtype"], case["m"], case["n"]
    mats = [case["csr"]] + [random_csr(rng, m, n, 0.3, dtype, case["index_dtype"]) for _ in range(nb - 1)]
    if shared:
        mats = mats[:1]
    nse = max(len(x[1]) for x in mats)
    # batches of equal nse: every matrix padded to the largest with explicit zeros at column 0 of its last
    # row (its offsets end at nse, as invariant 5.2 asks; a matrix without rows has no entries to pad)
    indptr = np.stack([np.r_[x[0][:-1], nse] if m else x[0] for x in mats])
    indices = np.stack([np.r_[x[1], np.zeros(nse - len(x[1]), x[1].dtype)] for x in mats])
    data = np.stack([np.r_[x[2], np.zeros(nse - len(x[2]), dtype)] for x in mats])
    rows_d, rows_out = (m, n) if transpose else (n, m)
    d = relayout(random_values(rng, (nb, rows_d, k), dtype), how)
    c = random_values(rng, (nb, rows_out, k), dtype) if scaled else None
    alpha, beta = (complex(1.5, -0.5) if dtype.kind == "c" else -2.0, 0.75) if scaled else (1.0, 0.0)
    out = _cpu.csr_matmul(indptr, indices, data, n, d, transpose=transpose, c=c, alpha=alpha, beta=beta)
    for b in range(nb):
        dense = dense_of(*mats[0 if shared else b], (m, n))
        op = dense.T if transpose else dense
        expected = (alpha if dtype.kind == "c" else alpha.real) * (op @ d[b])
        if scaled:
            expected = expected + beta * c[b]  # type: ignore[index]
        assert_close(out[b], expected.astype(dtype), dtype)


def test_csr_matmul_beta_zero_ignores_nan_in_c() -> None:
    indptr, indices, data = np.array([[0, 1, 1]]), np.array([[1]]), np.array([[2.0]])
    d = np.ones((1, 2, 1))
    c = np.full((1, 2, 1), np.nan)
    for transpose in (False, True):
        out = _cpu.csr_matmul(indptr, indices, data, 2, d, transpose=transpose, c=c, alpha=1.0, beta=0.0)
        assert not np.isnan(out).any()


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize(
    ("indptr", "indices"),
    [
        ([0, 2, 1], [0, 1]),  # decreasing offsets
        ([0, 1, 3], [0, 1]),  # past the indices' end
        ([-1, 1, 2], [0, 1]),  # negative
        ([0, 1, 2], [0, 5]),  # index out of range
        ([0, 1, 2], [0, -1]),  # negative index
    ],
)
def test_csr_matmul_rejects_bad_indices(indptr: list[int], indices: list[int], transpose: bool) -> None:
    ip, ix = np.array([indptr], np.int32), np.array([indices], np.int32)
    data = np.ones((1, len(indices)))
    with pytest.raises(ValueError, match="out of range"):
        _cpu.csr_matmul(ip, ix, data, 2, np.ones((1, 2, 1)), transpose=transpose)
    with pytest.raises(ValueError, match="out of range"):
        _cpu.csr_matmul(ip, ix, data, 2, np.ones((1, 2, 3)), transpose=transpose)


def test_csr_matmul_entries_without_columns_are_rejected() -> None:
    with pytest.raises(ValueError, match="out of range"):
        _cpu.csr_matmul(np.array([[0, 1]]), np.array([[0]]), np.ones((1, 1)), 0, np.ones((1, 0, 1)))


def test_csr_matmul_checks_shapes_and_dtypes() -> None:
    ip, ix, data = np.array([[0, 1]]), np.array([[0]]), np.ones((1, 1))
    with pytest.raises(ValueError, match="inconsistent"):
        _cpu.csr_matmul(ip, ix, data, 1, np.ones((1, 2, 1)))
    with pytest.raises(TypeError, match="one dtype"):
        _cpu.csr_matmul(ip, ix, data, 1, np.ones((1, 1, 1), np.float32))
    with pytest.raises(TypeError, match="one dtype"):  # complex64 and float64: one item size, two dtypes
        _cpu.csr_matmul(ip, ix, data, 1, np.ones((1, 1, 1), np.complex64), out=np.empty((1, 1, 1)))
    with pytest.raises(TypeError, match="unsupported value type"):
        _cpu.csr_matmul(ip, ix, np.ones((1, 1), np.int64), 1, np.ones((1, 1, 1), np.int64))


def test_csr_matmul_normalises_mixed_index_dtypes_and_strided_rows() -> None:
    indptr = np.array([0, 1, 2], np.int64)
    indices = np.array([1, 9, 0, 9], np.int32)[::2]  # strided, and int32 against int64 offsets
    data = np.array([2.0, 0.0, 3.0, 0.0])[::2]
    np.testing.assert_array_equal(_cpu.csr_matmul(indptr, indices, data, 2, np.array([1.0, 2.0])), [4.0, 3.0])


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.float64)])
@pytest.mark.parametrize("k", [1, 7, 64])
def test_parallel_paths_match_scipy(index_dtype: np.dtype, dtype: np.dtype, k: int) -> None:
    """Large enough for the parallel paths: chunked rows (gather), column split or per-thread copies (scatter)."""
    rng = np.random.default_rng(k)
    m, n = 3000, 2000
    a = sp.random_array((m, n), density=0.02, format="csr", random_state=rng, dtype=dtype)
    a.indptr, a.indices = a.indptr.astype(index_dtype), a.indices.astype(index_dtype)
    ip, ix, data = a.indptr[None], a.indices[None], a.data[None]
    d = random_values(rng, (1, n, k), dtype)
    assert_close(_cpu.csr_matmul(ip, ix, data, n, d)[0], a @ d[0], dtype)
    dt = random_values(rng, (1, m, k), dtype)
    assert_close(_cpu.csr_matmul(ip, ix, data, n, dt, transpose=True)[0], a.T @ dt[0], dtype)


@pytest.mark.parametrize("k", [2, 7, 64])
def test_parallel_scatter_column_split_matches_scipy(k: int) -> None:
    """An output too large for private copies is shared between the threads by columns (the limit is
    lowered here so that a small product takes that path)."""
    rng = np.random.default_rng(k)
    m, n = 3000, 2000
    a = sp.random_array((m, n), density=0.02, format="csr", random_state=rng, dtype=np.float64)
    dt = rng.standard_normal((1, m, k))
    with _cpu.scatter_copy_limit(0):
        out = _cpu.csr_matmul(a.indptr[None], a.indices[None], a.data[None], n, dt, transpose=True)
    np.testing.assert_allclose(out[0], a.T @ dt[0], rtol=1e-12, atol=1e-12)


def test_parallel_scatter_over_batches() -> None:
    rng = np.random.default_rng(1)
    nb, m, n = 6, 400, 300
    mats = [sp.random_array((m, n), density=0.1, format="csr", random_state=rng) for _ in range(nb)]
    nse = max(x.nnz for x in mats)
    indptr = np.stack([x.indptr for x in mats])
    indices = np.stack([np.r_[x.indices, np.zeros(nse - x.nnz, x.indices.dtype)] for x in mats])
    data = np.stack([np.r_[x.data, np.zeros(nse - x.nnz)] for x in mats])
    d = rng.standard_normal((nb, m, 1))
    out = _cpu.csr_matmul(indptr, indices, data, n, d, transpose=True)
    for b in range(nb):
        np.testing.assert_allclose(out[b], mats[b].T @ d[b], rtol=1e-12)


# --- matmul kernels through the registry -------------------------------------------------------------


def _check_product(actual: Any, a_dense: np.ndarray, b: np.ndarray, left_sparse: bool, dtype: np.dtype) -> None:
    expected = a_dense @ b if left_sparse else b @ a_dense
    assert_close(actual, expected.astype(dtype), dtype)


@examples
@given(case=csr_cases(), layout=st.sampled_from([xs.sparse_csr, xs.sparse_csc]), kind=st.sampled_from(["1d", "2d"]),
       k=st.sampled_from([1, 3, 33]), how=st.sampled_from(["c", "f", "step"]), left_sparse=st.booleans())  # fmt: skip
def test_matmul_sparse_strided(
    case: dict[str, Any], layout: xs.Layout, kind: str, k: int, how: str, left_sparse: bool
) -> None:
    rng, dtype, m, n = case["rng"], case["dtype"], case["m"], case["n"]
    a = sparse_array(case, layout)
    a_dense = dense_of(*case["csr"], (m, n))
    if left_sparse:
        b = random_values(rng, (n,) if kind == "1d" else (n, k), dtype)
        layouts: tuple[Any, ...] = (layout, xs.strided)
        args: tuple[Any, ...] = (a, relayout(b, how) if b.ndim == 2 else b)
    else:
        b = random_values(rng, (m,) if kind == "1d" else (k, m), dtype)
        layouts, args = (xs.strided, layout), (relayout(b, how) if b.ndim == 2 else b, a)
    result = run_native("matmul", layouts, *args)
    _check_product(result, a_dense, b, left_sparse, dtype)
    ref = scipy_of(a)
    assert_close(result, (ref @ b if left_sparse else b @ ref).astype(dtype), dtype)
    generic = generic_kernel("matmul", layouts)
    if generic is not None:
        assert_close(result, generic(XP, *args), dtype)


@examples
@given(case=csr_cases(max_side=6), layout=st.sampled_from([xs.sparse_csr, xs.sparse_csc]),
       batch=st.sampled_from([(2,), (3, 1), (2, 2)]), sparse_batched=st.booleans(), vector=st.booleans(),
       left_sparse=st.booleans())  # fmt: skip
def test_matmul_batches_broadcast(
    case: dict[str, Any], layout: xs.Layout, batch: tuple[int, ...], sparse_batched: bool, vector: bool, left_sparse: bool
) -> None:
    rng, dtype, m, n = case["rng"], case["dtype"], case["m"], case["n"]
    dense = np.stack([dense_of(*random_csr(rng, m, n, 0.4, dtype, case["index_dtype"]), (m, n)) for _ in range(int(np.prod(batch)))])
    dense = dense.reshape(*batch, m, n) if sparse_batched else dense[0]
    if sparse_batched:
        # every batch with the same nse: the union pattern, with explicit zeros where a batch has none
        a = _batched_sparse(dense, (dense != 0).any(axis=tuple(range(len(batch)))), layout)
    else:
        a = xs.to_sparse(dense, layout=layout)
    if left_sparse:
        b = random_values(rng, (n,) if vector else (*batch, n, 3), dtype)
        result = run_native("matmul", (layout, xs.strided), a, b)
        expected = np.matmul(dense, b)
    else:
        b = random_values(rng, (m,) if vector else (*batch, 3, m), dtype)
        result = run_native("matmul", (xs.strided, layout), b, a)
        expected = np.matmul(b, dense)
    assert_close(result, expected, dtype)


def _batched_sparse(dense: np.ndarray, pattern: np.ndarray, layout: xs.Layout) -> Any:
    """A batched CSR/CSC array of ``dense`` storing every element of ``pattern`` in each batch."""
    batch = dense.shape[:-2]
    m, n = dense.shape[-2:]
    p = pattern if layout is xs.sparse_csr else pattern.T
    rows, cols = np.nonzero(p)
    ci = np.r_[0, np.cumsum(np.bincount(rows, minlength=p.shape[0]))]
    flat = dense.reshape(int(np.prod(batch)), m, n)
    vals = np.stack([(x if layout is xs.sparse_csr else x.T)[rows, cols] for x in flat]).reshape(*batch, -1)
    ci_b = np.broadcast_to(ci, (*batch, ci.size)).copy()
    pi_b = np.broadcast_to(cols, (*batch, cols.size)).copy()
    return xs.sparse_compressed_array(ci_b, pi_b, vals, (*batch, m, n), layout=layout)


def test_matmul_promotes_dtypes() -> None:
    a = xs.sparse_csr_array([0, 1, 2], [1, 0], np.array([2.0, 3.0], np.float32), (2, 2))
    x = np.array([1.0, 2.0])
    out = run_native("matmul", (xs.sparse_csr, xs.strided), a, x)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [4.0, 3.0])


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: xs.sparse_csr_array([0, 1], [0], np.array([1], np.int64), (1, 1)), "float32, float64"),
        (lambda: xs.sparse_csr_array([0, 1], [0], [1.0], (1, 1), fill_value=2.0), "fill value 0"),
        (lambda: xs.sparse_csr_array([0, 1], [0], np.ones((1, 2)), (1, 1, 2)), "dense dimensions"),
    ],
)
def test_matmul_declines_with_a_reason(make: Any, reason: str) -> None:
    a = make()
    b = np.ones((1,) + ((2,) if a.ndim == 3 else ()), dtype=np.float64 if a.dtype != np.int64 else np.int64)
    kernel = native_kernel("matmul", (xs.sparse_csr, xs.strided))
    assert reason in kernel.supports(XP, a, b)


def test_matmul_declines_unbroadcastable_sparse_batches() -> None:
    a = xs.to_sparse_csr(np.ones((2, 1, 2, 2)))
    b = np.ones((3, 2, 2))
    kernel = native_kernel("matmul", (xs.sparse_csr, xs.strided))
    assert "generic kernel" in kernel.supports(XP, a, b)


def test_public_matmul_uses_the_native_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    # The spy sits on the extension itself: small products call it without the Python wrapper.
    calls = []
    native = _cpu._native_module()

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(native, name)

        def csr_mm(self, *args: Any) -> Any:
            calls.append(bool(args[9]))  # transpose
            return native.csr_mm(*args)

    monkeypatch.setattr(_cpu, "_NATIVE", [Spy()])
    a = xs.sparse_csr_array([0, 1, 2], [1, 0], [2.0, 3.0], (2, 2))
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(a @ x, [4.0, 3.0])
    np.testing.assert_array_equal(x @ a, [6.0, 2.0])
    assert calls == [False, True]


# --- bounds checked once per array ------------------------------------------------------------------------


class _CheckedSpy:
    """Stands in for the extension, recording csr_mm's `checked` argument."""

    def __init__(self) -> None:
        self.native = _cpu._native_module()
        self.checked: list[bool] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.native, name)

    def csr_mm(self, *args: Any) -> Any:
        self.checked.append(bool(args[10]) if len(args) > 10 else False)
        return self.native.csr_mm(*args)


@pytest.mark.parametrize("k", [None, 1, 3])
def test_products_check_an_arrays_bounds_once(monkeypatch: pytest.MonkeyPatch, k: int | None) -> None:
    spy = _CheckedSpy()
    monkeypatch.setattr(_cpu, "_NATIVE", [spy])
    a = xs.sparse_csr_array([0, 1, 3], [1, 0, 1], [2.0, 3.0, 4.0], (2, 2))
    x = np.array([1.0, 2.0]) if k is None else np.arange(2.0 * k).reshape(2, k)
    expected = xs.to_dense(a) @ x
    assert not a._in_range
    np.testing.assert_array_equal(a @ x, expected)
    # the product vouches for the bounds, not for the order of the indices (invariant 5.6)
    assert a._in_range and not a._bounds_checked
    np.testing.assert_array_equal(a @ x, expected)  # the second product skips the checks
    np.testing.assert_array_equal(x.T @ a.mT, expected.T)  # so does the transpose, a view
    assert spy.checked == [False, True, True]


def test_validated_arrays_skip_the_first_check(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = _CheckedSpy()
    monkeypatch.setattr(_cpu, "_NATIVE", [spy])
    a = xs.sparse_csr_array([0, 1, 3], [1, 0, 1], [2.0, 3.0, 4.0], (2, 2), check_invariants=True)
    assert a._bounds_checked
    np.testing.assert_array_equal(a @ np.ones(2), [2.0, 7.0])
    np.testing.assert_array_equal(xs.sin(a) @ np.ones(2), np.sin(xs.to_dense(a)) @ np.ones(2))  # same indices
    assert spy.checked == [True, True]


@pytest.mark.parametrize(
    ("indptr", "indices"),
    [([0, 2, 1], [0, 1]), ([0, 1, 3], [0, 1]), ([0, 1, 2], [0, 5]), ([0, 1, 2], [0, -1])],
)
@pytest.mark.parametrize("k", [None, 2])
def test_unchecked_arrays_with_bad_bounds_fail_every_product(indptr: list[int], indices: list[int], k: int | None) -> None:
    a = xs.sparse_csr_array(np.array(indptr, np.int32), np.array(indices, np.int32), np.ones(2), (2, 2))
    x = np.ones(2) if k is None else np.ones((2, k))
    for _ in range(2):  # a failed check leaves the array unchecked
        # the compiled kernel finds a bad index, and the validator then names the invariant
        with pytest.raises(xs.InvariantError, match=r"^invariant 5\.[0-9] violated: matmul: "):
            a @ x
        assert not a._bounds_checked


@examples
@given(case=csr_cases(max_side=40), layout=st.sampled_from([xs.sparse_csr, xs.sparse_csc]), k=st.sampled_from([None, 1, 4]))
def test_checked_products_match_unchecked_and_scipy(case: dict[str, Any], layout: xs.Layout, k: int | None) -> None:
    # SpMV sums each row in storage order, as SciPy does, two rows at a time: the results agree bitwise.
    rng, dtype, n = case["rng"], case["dtype"], case["n"]
    a = sparse_array(case, layout)
    x = random_values(rng, (n,) if k is None else (n, k), dtype)
    first = a @ x
    second = a @ x  # bounds known by now
    np.testing.assert_array_equal(first, second)
    expected = scipy_of(a) @ x
    if layout is xs.sparse_csr and k is None:
        np.testing.assert_array_equal(first, expected)
    assert_close(first, expected, dtype)
    assert_close(first, dense_of(*case["csr"], (case["m"], n)) @ x, dtype)


# --- SpGEMM --------------------------------------------------------------------------------------------


@examples
@given(left=csr_cases(max_side=10), k=st.integers(0, 10), layout=st.sampled_from([xs.sparse_csr, xs.sparse_csc]),
       right_index=st.sampled_from(INDEX_DTYPES))  # fmt: skip
def test_spgemm_matches_scipy(left: dict[str, Any], k: int, layout: xs.Layout, right_index: np.dtype) -> None:
    rng, dtype, m, n = left["rng"], left["dtype"], left["m"], left["n"]
    right = {"m": n, "n": k, "csr": random_csr(rng, n, k, 0.3, dtype, right_index)}
    a, b = sparse_array(left, layout), sparse_array(right, layout)
    result = run_native("matmul", (layout, layout), a, b)
    assert result.layout is layout and result.shape == (m, k)
    check_invariants(result)  # sorted, unique, in range
    expected = (scipy_of(a) @ scipy_of(b)).toarray()
    assert_close(xs.to_dense(result), expected.astype(dtype), dtype)
    if left["index_dtype"] == right_index == np.int32:
        assert result.index_dtype == np.int32
    generic = generic_kernel("matmul", (layout, layout))
    if generic is not None:
        assert_close(xs.to_dense(result), xs.to_dense(generic(XP, a, b)), dtype)


def test_spgemm_parallel_matches_scipy() -> None:
    rng = np.random.default_rng(2)
    a = sp.random_array((3000, 2500), density=0.004, format="csr", random_state=rng)
    b = sp.random_array((2500, 2000), density=0.004, format="csr", random_state=rng)
    indptr, indices, data = _cpu.csr_spgemm((a.indptr, a.indices, a.data), (b.indptr, b.indices, b.data), 2000)
    ref = (a @ b).tocsr()
    ref.sort_indices()
    np.testing.assert_array_equal(indptr, ref.indptr)
    np.testing.assert_array_equal(indices, ref.indices)
    np.testing.assert_allclose(data, ref.data, rtol=1e-12)


def test_spgemm_rejects_bad_indices() -> None:
    good = (np.array([0, 1]), np.array([0]), np.ones(1))
    with pytest.raises(ValueError, match="out of range"):
        _cpu.csr_spgemm((np.array([0, 1]), np.array([3]), np.ones(1)), good, 1)
    with pytest.raises(ValueError, match="out of range"):
        _cpu.csr_spgemm(good, (np.array([0, 1]), np.array([4]), np.ones(1)), 1)


def test_spgemm_declines_batches() -> None:
    a = xs.to_sparse_csr(np.ones((2, 2, 2)))
    assert "batch" in native_kernel("matmul", (xs.sparse_csr, xs.sparse_csr)).supports(XP, a, a)


# --- addmm -----------------------------------------------------------------------------------------


@examples
@given(case=csr_cases(max_side=10), layout=st.sampled_from([xs.sparse_csr, xs.sparse_csc]), left_sparse=st.booleans(),
       k=st.sampled_from([1, 4, 20]), bias=st.sampled_from(["full", "row", "scalar"]),
       beta=st.sampled_from([0.0, 1.0, -0.5]), alpha=st.sampled_from([1.0, 2.5]))  # fmt: skip
def test_addmm(
    case: dict[str, Any], layout: xs.Layout, left_sparse: bool, k: int, bias: str, beta: float, alpha: float
) -> None:
    rng, dtype, m, n = case["rng"], case["dtype"], case["m"], case["n"]
    a = sparse_array(case, layout)
    a_dense = dense_of(*case["csr"], (m, n))
    if left_sparse:
        b = random_values(rng, (n, k), dtype)
        shape, layouts = (m, k), (xs.strided, layout, xs.strided)
    else:
        b = random_values(rng, (k, m), dtype)
        shape, layouts = (k, n), (xs.strided, xs.strided, layout)
    c_shape = {"full": shape, "row": shape[1:], "scalar": ()}[bias]
    c = random_values(rng, c_shape, dtype)
    if beta == 0.0:
        c[...] = np.nan  # ignored, as in torch
    args = (c, a, b, beta, alpha) if left_sparse else (c, b, a, beta, alpha)
    result = run_native("addmm", layouts, *args)
    product = a_dense @ b if left_sparse else b @ a_dense
    expected = alpha * product + (beta * c if beta != 0 else 0)
    assert_close(result, np.broadcast_to(expected, shape).astype(dtype), dtype)
    generic = generic_kernel("addmm", layouts)
    if generic is not None:
        assert_close(result, generic(XP, *args), dtype)


def test_addmm_declines_complex_scalars_with_real_arrays() -> None:
    a = xs.sparse_csr_array([0, 1], [0], [1.0], (1, 1))
    kernel = native_kernel("addmm", (xs.strided, xs.sparse_csr, xs.strided))
    assert "complex" in kernel.supports(XP, np.ones((1, 1)), a, np.ones((1, 1)), 1.0, 1j)


# --- SDDMM -----------------------------------------------------------------------------------------


@examples
@given(case=csr_cases(max_side=10), k=st.sampled_from([0, 1, 3, 16]), beta=st.sampled_from([0.0, 1.0, 0.5]),
       alpha=st.sampled_from([1.0, -2.0]), how=st.sampled_from(["c", "f"]), batch=st.sampled_from([(), (2,)]))  # fmt: skip
def test_sampled_addmm(
    case: dict[str, Any], k: int, beta: float, alpha: float, how: str, batch: tuple[int, ...]
) -> None:
    rng, dtype, m, n = case["rng"], case["dtype"], case["m"], case["n"]
    indptr, indices, data = case["csr"]
    if batch:
        vals = np.stack([data, random_values(rng, data.shape, dtype)])
        mask = xs.sparse_csr_array(np.stack([indptr] * 2), np.stack([indices] * 2), vals, (*batch, m, n))
    else:
        vals = data
        mask = xs.sparse_csr_array(indptr, indices, data, (m, n))
    a = random_values(rng, (*batch, m, k), dtype)
    b = relayout(random_values(rng, (k, n), dtype), how)  # broadcast over the batch
    result = run_native("sampled_addmm", (xs.sparse_csr, xs.strided, xs.strided), mask, a, b, beta, alpha)
    assert result.layout is xs.sparse_csr and result.shape == mask.shape
    check_invariants(result)
    full = np.matmul(a, b)
    rows = np.repeat(np.arange(m), np.diff(indptr))
    expected = alpha * full[..., rows, indices] + beta * vals
    assert_close(result.values(), expected.astype(dtype), dtype)
    generic = generic_kernel("sampled_addmm", (xs.sparse_csr, xs.strided, xs.strided))
    if generic is not None:
        assert_close(result.values(), generic(XP, mask, a, b, beta, alpha).values(), dtype)


def test_sddmm_rejects_bad_indices() -> None:
    with pytest.raises(ValueError, match="out of range"):
        _cpu.csr_sddmm(np.array([[0, 1]]), np.array([[2]]), None, np.ones((1, 1, 2)), np.ones((1, 2, 2)))


def test_sampled_addmm_declines_batched_factors_over_an_unbatched_mask() -> None:
    mask = xs.sparse_csr_array([0, 1], [0], [1.0], (1, 1))
    kernel = native_kernel("sampled_addmm", (xs.sparse_csr, xs.strided, xs.strided))
    assert "broadcasts the factors" in kernel.supports(XP, mask, np.ones((2, 1, 1)), np.ones((1, 1)), 1.0, 1.0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("offset", [0, 16, 8])
def test_spmm_streams_large_outputs_at_any_alignment(dtype: Any, offset: int) -> None:
    # An output larger than the caches is written past them (streaming stores need 16- or 32-byte
    # aligned rows; other rows are written plainly): every alignment gives SciPy's result bit for bit.
    rng = np.random.default_rng(7)
    m, n, k = 70_000, 900, 64
    a = sp.random_array((m, n), density=3 / n, format="csr", random_state=rng, dtype=dtype)
    a.indptr, a.indices = a.indptr.astype(np.int32), a.indices.astype(np.int32)
    d = rng.standard_normal((n, k)).astype(dtype)
    raw = np.empty(m * k * np.dtype(dtype).itemsize + 64, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    out = raw[start : start + m * k * np.dtype(dtype).itemsize].view(dtype).reshape(m, k)
    _cpu.csr_matmul(a.indptr, a.indices, a.data, n, d, out=out)
    np.testing.assert_array_equal(out, a @ d)


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spmv_streams_the_output_of_a_matrix_larger_than_the_caches(index_dtype: np.dtype, dtype: Any) -> None:
    # The matrix holds more than 16 MiB of indices and values, so the loop writes y past the caches; an
    # odd row count leaves a last row to the loop's tail. SciPy's result, bit for bit.
    rng = np.random.default_rng(11)
    m, n, per_row = 700_001, 50_000, 7
    indptr = np.arange(0, m * per_row + 1, per_row).astype(index_dtype)
    indptr[m // 3 :] -= 1  # one row a short one: the pair loop's unequal lengths
    indices = rng.integers(0, n, indptr[-1]).astype(index_dtype)
    a = sp.csr_array((rng.standard_normal(indptr[-1]).astype(dtype), indices, indptr), shape=(m, n))
    x = rng.standard_normal(n).astype(dtype)
    assert indptr[-1] * (np.dtype(index_dtype).itemsize + np.dtype(dtype).itemsize) > (16 << 20)
    np.testing.assert_array_equal(_cpu.csr_matmul(a.indptr, a.indices, a.data, n, x[:, None])[:, 0], a @ x)
    np.testing.assert_array_equal(xs.sparse_csr_array(indptr, indices, a.data, shape=(m, n)) @ x, a @ x)
    # an output with a stride is written plainly (the prefetching loop without streamed stores)
    strided_out = np.zeros((m, 2), dtype)[:, :1]
    _cpu.csr_matmul(a.indptr, a.indices, a.data, n, x[:, None], out=strided_out)
    np.testing.assert_array_equal(strided_out[:, 0], a @ x)


# --- large outputs from the pool of freed blocks -----------------------------------------------------------


def test_large_outputs_reuse_freed_blocks_only_once_unviewed() -> None:
    native = _cpu._native_module()
    _cpu.release_cached_memory()
    shape = (5 << 20,)  # 40 MiB of float64: above the pooled size
    first = _cpu.empty(shape, np.float64)
    assert first.flags.c_contiguous and first.flags.writeable and first.shape == shape
    first[:] = 1.0
    view = first[10:20]
    address = first.ctypes.data
    del first
    assert native.pool_bytes() == 0  # the view still holds the block
    second = _cpu.empty(shape, np.float64)
    assert not np.shares_memory(second, view)
    np.testing.assert_array_equal(view, 1.0)
    del view
    assert native.pool_bytes() >= 40 << 20  # back in the pool
    third = _cpu.empty((9 << 20,), np.float32)  # smaller, but more than half of the pooled block: reused
    assert third.ctypes.data == address
    del second, third
    assert _cpu.release_cached_memory() >= 80 << 20
    assert native.pool_bytes() == 0


def test_the_pool_keeps_a_few_blocks() -> None:
    native = _cpu._native_module()
    _cpu.release_cached_memory()
    blocks = [_cpu.empty((33 << 20,), np.uint8) for _ in range(6)]
    del blocks
    assert native.pool_bytes() <= 4 * (34 << 20)  # at most four blocks (each rounded up to 2 MiB)
    assert _cpu.release_cached_memory() > 0


def test_small_outputs_are_plain_numpy_arrays() -> None:
    small = _cpu.empty((3, 4), np.float32)
    assert small.base is None and small.shape == (3, 4) and small.dtype == np.float32


def test_pooled_products_match_scipy() -> None:
    rng = np.random.default_rng(3)
    a = sp.random_array((300_000, 500), density=4 / 500, format="csr", random_state=rng)
    d = rng.standard_normal((500, 16))
    ours = xs.sparse_csr_array(a.indptr, a.indices, a.data, a.shape)
    results = [ours @ d for _ in range(3)]  # 38 MB each: pooled, and none shares another's memory
    for r in results:
        np.testing.assert_array_equal(r, a @ d)
    assert not np.shares_memory(results[0], results[1])
    with pytest.raises(ValueError, match="negative size"):
        _cpu._native_module().pool_block(-1)


# --- COO with strided -------------------------------------------------------------------------------------


@st.composite
def coo_cases(draw: st.DrawFn) -> dict[str, Any]:
    """A COO matrix or batch of matrices: random entries (duplicates and empty rows likely), coalesced or not."""
    dtype = draw(st.sampled_from(FLOAT_DTYPES))
    index_dtype = draw(st.sampled_from(INDEX_DTYPES))
    batch = draw(st.sampled_from([(), (), (2,), (2, 3), (1,)]))
    m, k = draw(st.integers(0, 7)), draw(st.integers(0, 7))
    shape = (*batch, m, k)
    nse = draw(st.integers(0, 30)) if math.prod(shape) else 0
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    idx = np.stack([rng.integers(0, s, nse) for s in shape]).astype(index_dtype) if nse else np.zeros((len(shape), 0), index_dtype)
    a = xs.sparse_coo_array(idx, random_values(rng, (nse,), dtype), shape)
    if draw(st.booleans()):
        a = a.coalesce()
    return {"a": a, "dense": xs.to_dense(a), "dtype": dtype, "rng": rng, "shape": shape}


def _grouped(on: bool) -> Any:
    """A context in which the COO products take their parallel form (the entries grouped by row, then the
    CSR kernel) however small, where ``on``; else the one-pass form, which small products take."""
    return mock.patch.object(_cpu, "product_threads", lambda work: 2) if on else contextlib.nullcontext()


@examples
@given(case=coo_cases(), kind=st.sampled_from(["1d", "2d", "batched"]), k=st.sampled_from([1, 3, 17]),
       how=st.sampled_from(["c", "f", "step"]), other=st.sampled_from([None, np.float32, np.float64]),
       grouped=st.booleans())  # fmt: skip
def test_matmul_coo_strided(case: dict[str, Any], kind: str, k: int, how: str, other: Any, grouped: bool) -> None:
    a, dense, rng = case["a"], case["dense"], case["rng"]
    n = case["shape"][-1]
    if kind == "batched" and a.ndim > 2:
        kind = "2d"
    shape = {"1d": (n,), "2d": (n, k), "batched": (2, n, k)}[kind]
    b = random_values(rng, shape, np.dtype(other) if other else case["dtype"])
    if b.ndim >= 2:
        b = relayout(b, how)
    dtype = np.result_type(case["dtype"], b.dtype)
    with _grouped(grouped):
        result = run_native("matmul", (xs.sparse_coo, xs.strided), a, b)
    assert result.dtype == dtype
    # the dense oracle sums duplicates in a's own precision: the looser tolerance of the two dtypes
    tol = tolerance(min(case["dtype"], b.dtype, key=lambda t: t.itemsize if t.kind == "f" else t.itemsize // 2))
    np.testing.assert_allclose(result, np.matmul(dense, b), **tol)
    np.testing.assert_allclose(result, generic_kernel("matmul", (xs.sparse_coo, xs.strided))(XP, a, b), **tol)


@examples
@given(case=coo_cases(), kind=st.sampled_from(["1d", "2d", "batched"]), k=st.sampled_from([1, 3, 17]),
       how=st.sampled_from(["c", "f", "step"]), grouped=st.booleans())  # fmt: skip
def test_matmul_strided_coo(case: dict[str, Any], kind: str, k: int, how: str, grouped: bool) -> None:
    a, dense, rng, dtype = case["a"], case["dense"], case["rng"], case["dtype"]
    if a.ndim > 2:
        assert "batch of COO matrices" in native_kernel("matmul", (xs.strided, xs.sparse_coo)).supports(XP, np.ones((1, a.shape[-2])), a)
        return
    m = a.shape[0]
    shape = {"1d": (m,), "2d": (k, m), "batched": (2, k, m)}[kind]
    x = random_values(rng, shape, dtype)
    if x.ndim >= 2:
        x = relayout(x, how)
    with _grouped(grouped):
        result = run_native("matmul", (xs.strided, xs.sparse_coo), x, a)
    assert_close(result, np.matmul(x, dense), dtype)
    assert_close(result, generic_kernel("matmul", (xs.strided, xs.sparse_coo))(XP, x, a), dtype)


def test_matmul_coo_public_and_tensordot() -> None:
    """Through the public functions: a 3-D COO array times a matrix, and tensordot over its last axis."""
    rng = np.random.default_rng(5)
    shape = (4, 5, 6)
    idx = np.stack([rng.integers(0, s, 40) for s in shape])
    a = xs.sparse_coo_array(idx, rng.standard_normal(40), shape)
    b = rng.standard_normal((6, 3))
    dense = xs.to_dense(a)
    np.testing.assert_allclose(a @ b, dense @ b, rtol=1e-12)
    np.testing.assert_allclose(xs.tensordot(a, b, axes=1), np.tensordot(dense, b, axes=1), rtol=1e-12)
    np.testing.assert_allclose(xs.tensordot(b.T, a, axes=([1], [2])), np.tensordot(b.T, dense, axes=([1], [2])), rtol=1e-12)


@pytest.mark.parametrize("left_sparse", [True, False])
@pytest.mark.parametrize("where", [0, 1])
@pytest.mark.parametrize("coalesced", [False, True])
@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("vector", [False, True])
def test_matmul_coo_index_out_of_range(left_sparse: bool, where: int, coalesced: bool, grouped: bool, vector: bool) -> None:
    idx = np.array([[0, 1], [2, 1]])
    idx[where, 1] = 7  # built without checking the indices: the kernel's own read finds it
    a = xs.sparse_coo_array(idx, [1.0, 2.0], (3, 3), is_coalesced=coalesced)
    other = np.ones(3) if vector else np.ones((3, 2))
    with _grouped(grouped), pytest.raises(xs.InvariantError, match=rf"^invariant coo.5 violated: matmul: indices\[{where}\] must lie in \[0, 3\), got 7 \(shape=\(3, 3\)\)"):
        if left_sparse:
            a @ other
        else:
            other.T @ a


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: xs.sparse_coo_array([[0], [1]], [1.0], (2, 2), fill_value=1.0), "fill value 0 only"),
        (lambda: xs.sparse_coo_array([[0]], [[1.0, 2.0]], (2, 2)), "without dense dimensions"),
        (lambda: xs.sparse_coo_array([[0]], [1.0], (2,)), "COO vector"),
        (lambda: xs.sparse_coo_array([[0], [1]], [1], (2, 2)), "float32, float64, complex64 and complex128"),
    ],
)
def test_matmul_coo_declines_to_the_generic_kernel(make: Any, reason: str) -> None:
    a = make()
    b = np.ones(a.shape[-1:] + ((2,) if a.ndim < 2 or a.dense_dim() == 0 else ()), dtype=a.dtype)
    kernel = native_kernel("matmul", (xs.sparse_coo, xs.strided))
    assert reason in kernel.supports(XP, a, b)


@examples
@given(left=coo_cases(), right=coo_cases(), uncoalesce=st.booleans())
def test_matmul_coo_coo(left: dict[str, Any], right: dict[str, Any], uncoalesce: bool) -> None:
    """COO @ COO against the dense product and the generic kernel: the same coalesced entries (explicit
    zeros of cancelling products included), whatever order and duplicates the operands hold."""
    a, b = left["a"], right["a"]
    if a.ndim != 2 or b.ndim != 2:
        assert "2-D COO" in native_kernel("matmul", (xs.sparse_coo, xs.sparse_coo)).supports(XP, a, b)
        return
    # b with as many rows as a has columns: its entries re-drawn in that shape
    k, n = a.shape[1], b.shape[1]
    rng = right["rng"]
    nse = b.nnz if k else 0
    idx = np.stack([rng.integers(0, k, nse), rng.integers(0, max(n, 1), nse)]).astype(b.index_dtype) if nse and n else np.zeros((2, 0), b.index_dtype)
    b = xs.sparse_coo_array(idx, random_values(rng, (idx.shape[1],), right["dtype"]), (k, n))
    if not uncoalesce:
        b = b.coalesce()
    dtype = np.result_type(left["dtype"], right["dtype"])
    result = run_native("matmul", (xs.sparse_coo, xs.sparse_coo), a, b)
    check_invariants(result)
    assert result.is_coalesced() and result.dtype == dtype and result.index_dtype == a.index_dtype
    tol = tolerance(min(left["dtype"], right["dtype"], key=lambda t: t.itemsize if t.kind == "f" else t.itemsize // 2))
    np.testing.assert_allclose(xs.to_dense(result), xs.to_dense(a) @ xs.to_dense(b), **tol)
    generic = generic_kernel("matmul", (xs.sparse_coo, xs.sparse_coo))(XP, a, b)
    np.testing.assert_array_equal(result.indices(), generic.indices())
    np.testing.assert_allclose(result.values(), generic.values(), **tol)


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr])
def test_spgemm_of_hypersparse_operands_goes_to_the_generic_kernel(layout: xs.Layout) -> None:
    """Ten billion columns and two entries: the compiled SpGEMM's dense row accumulator would need
    tens of GiB, so it declines and the generic kernel (memory following the entries) multiplies."""
    n = 10**10
    a = xs.to_sparse(xs.sparse_coo_array([[0, 1], [0, 2]], [1.0, 2.0], (2, 3)), layout=layout)
    b = xs.to_sparse(xs.sparse_coo_array([[0, 2], [9, n - 2]], [3.0, 4.0], (3, n)), layout=layout)
    kernel = native_kernel("matmul", (layout, layout))
    assert "result_columns (10000000000) densely" in kernel.supports(XP, a, b)
    r = xs.to_sparse_coo(a @ b)
    np.testing.assert_array_equal(r.indices(), [[0, 1], [9, n - 2]])
    np.testing.assert_array_equal(r.values(), [3.0, 8.0])


def test_torch_products_of_hypersparse_operands_go_to_the_generic_kernel() -> None:
    """2**40 positions and two entries: torch's sparse @ sparse, smm and sspaddmm keep work arrays per row
    and column (torch aborts the process where that allocation fails), so they decline, and the generic
    kernel, whose memory follows the entries, multiplies."""
    torch = pytest.importorskip("torch")
    n = 2**40
    a = xs.to_backend(xs.to_sparse_csr(np.array([[0, 2.0, 0, 0, 0], [0, 0, 0, 0, 3.0]])), "torch")
    wide = xs.to_backend(xs.sparse_coo_array([[1, 4], [7, n - 2]], [10.0, 100.0], (5, n)), "torch")
    tall = xs.to_backend(xs.sparse_coo_array([[1, n - 3], [0, 4]], [10.0, 100.0], (n, 5)), "torch")
    txp = xs.get_backend("torch").load()
    products = [  # (kernel's layouts, a, b, the product's entries)
        ((xs.sparse_csr, xs.sparse_csr), a, xs.to_sparse_csr(wide), ([[0, 1], [7, n - 2]], [20.0, 300.0])),
        ((xs.sparse_csc, xs.sparse_csc), xs.to_sparse_csr(wide).mT, a.mT, ([[7, n - 2], [0, 1]], [20.0, 300.0])),
        ((xs.sparse_coo, xs.sparse_coo), xs.to_sparse_coo(a), wide, ([[0, 1], [7, n - 2]], [20.0, 300.0])),
    ]
    for layouts, x, y, (indices, values) in products:
        for k in xs.kernels("matmul"):
            if k.backend == "torch" and k.signature == layouts:
                assert "work arrays per row and column" in str(k.supports(txp, x, y)), k.name
        r = xs.to_sparse_coo(x @ y)
        np.testing.assert_array_equal(to_numpy(r.indices()), indices)
        np.testing.assert_array_equal(to_numpy(r.values()), values)
    # a tall operand of 32 rows per entry is still torch's (its row pointers cost less than the generic sort)
    m = 2**18
    tall_ok = xs.to_backend(xs.sparse_coo_array(np.stack([np.arange(m) * 32, np.zeros(m, np.int64)]), np.ones(m), (32 * m, 5)), "torch")
    (coo_coo,) = [k for k in xs.kernels("matmul") if k.backend == "torch" and k.signature == (xs.sparse_coo, xs.sparse_coo)]
    assert coo_coo.supports(txp, tall_ok, xs.to_sparse_coo(a).mT) is None
    ones = torch.ones(5, 2, dtype=torch.float64)
    (smm,) = [k for k in xs.kernels("smm") if k.backend == "torch"]
    assert "work arrays per row and column" in str(smm.supports(txp, tall, ones))
    np.testing.assert_array_equal(to_numpy(xs.to_sparse_coo(xs.smm(tall, ones)).indices()), [[1, 1, n - 3, n - 3], [0, 1, 0, 1]])
    square = torch.ones(5, 5, dtype=torch.float64)
    (sspaddmm,) = [k for k in xs.kernels("sspaddmm") if k.backend == "torch"]
    assert "work arrays per row and column" in str(sspaddmm.supports(txp, tall, tall, square, 1, 1))
    r = xs.sspaddmm(tall, tall, square).coalesce()  # tall + tall @ ones: its two rows filled, plus tall
    np.testing.assert_array_equal(to_numpy(r.indices()), [[1] * 5 + [n - 3] * 5, list(range(5)) * 2])
    np.testing.assert_array_equal(to_numpy(r.values()), [20.0] + [10.0] * 4 + [100.0] * 4 + [200.0])


# -- torch: COO products with views and edge operands ---------------------------------------------------


def test_torch_batched_coo_times_a_conjugate_view() -> None:
    # torch's sparse bmm read the view's memory without its conjugate bit
    torch = pytest.importorskip("torch")
    a = torch.tensor([[[1 + 1j, 0], [0, 2j]], [[0, 3], [1j, 0]]], dtype=torch.complex128)
    b = torch.tensor([[[1j, 0], [0, 1]], [[2, 1j], [1, 0]]], dtype=torch.complex128).conj()
    s = xs.to_sparse_coo(a)
    torch.testing.assert_close(xs.matmul(s, b), torch.matmul(a, b))
    torch.testing.assert_close(xs.matmul(s, b[0]), torch.matmul(a, b[0]))
    torch.testing.assert_close(xs.bmm(s, b), torch.bmm(a, b))


def test_torch_addmm_beta_zero_with_an_empty_coo_operand() -> None:
    # beta = 0 ignores the input, NaN included; torch's addmm with an empty COO operand added it
    torch = pytest.importorskip("torch")
    a = xs.to_backend(xs.sparse_coo_array(np.zeros((2, 0), np.int64), np.zeros(0), (1, 1)), "torch")
    nan = torch.full((1, 1), math.nan, dtype=torch.float64)
    assert xs.addmm(nan, a, torch.zeros((1, 1), dtype=torch.float64), beta=0).tolist() == [[0.0]]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_torch_half_precision_batched_coo_product(dtype: str) -> None:
    # torch has no half-precision sparse bmm: the generic product runs instead of raising torch's error
    torch = pytest.importorskip("torch")
    dt = getattr(torch, dtype)
    a = torch.tensor([[[1.0, 0.0], [0.0, 2.0]], [[0.0, 3.0], [1.0, 0.0]]], dtype=dt)
    b = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=dt)
    got = xs.matmul(xs.to_sparse_coo(a), b)
    assert got.dtype == dt
    torch.testing.assert_close(got.float(), torch.matmul(a.float(), b.float()))


@pytest.mark.parametrize("threads", [1, 2])
def test_large_products_follow_the_machines_load(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    """Products from _PRODUCT_PARALLEL_MIN entries up take available_threads() (smaller ones one thread):
    the result is the same whatever the count, to the bit for a gather (each row summed by one thread)."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: threads)
    rng = np.random.default_rng(threads)
    a = sp.random_array((4000, 3000), density=_cpu._PRODUCT_PARALLEL_MIN / (4000 * 3000) * 1.5, format="csr", random_state=rng)
    assert a.nnz >= _cpu._PRODUCT_PARALLEL_MIN
    x = rng.standard_normal(3000)
    assert _cpu.product_threads(a.nnz) == threads and _cpu.product_threads(_cpu._PRODUCT_PARALLEL_MIN - 1) == 1
    got = _cpu.csr_matmul(a.indptr, a.indices, a.data, 3000, x)
    np.testing.assert_allclose(got, a @ x, rtol=1e-12, atol=1e-12)
    native = _cpu._native_module()
    for count in (1, 2):
        out = np.empty(4000)
        native.csr_mm(a.indptr, a.indices, a.data, 3000, x, out, None, 1.0, 0.0, False, False, count)
        np.testing.assert_array_equal(out, got)
