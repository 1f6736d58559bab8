"""The iterative solvers ``xs.linalg.cg``, ``bicgstab`` and ``gmres``: on random systems in every layout and
on every backend, against the same backend's dense solve; on NumPy against SciPy's solvers of the same
name; the generic (array-api-strict) route against the native one; and every error message."""

from __future__ import annotations

import importlib.util
import math
import re
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spl
from conftest import backend_params, load_native_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies as S
import xsparse as xs
from xsparse.testing import to_numpy

load_native_kernels()

HAS_TORCH = importlib.util.find_spec("torch") is not None
BACKENDS = ["numpy", "torch", "array_api_strict", "cupy"]
SOLVERS = {"cg": xs.linalg.cg, "bicgstab": xs.linalg.bicgstab, "gmres": xs.linalg.gmres}
SCIPY = {"cg": spl.cg, "bicgstab": spl.bicgstab, "gmres": spl.gmres}
SOME = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def namespace(backend: str) -> Any:
    return xs.get_backend(backend).load()


def random_system(rng: np.random.Generator, n: int, density: float, dtype: str, hermitian: bool) -> np.ndarray:
    """A sparse, strictly diagonally dominant matrix (so nonsingular and well conditioned); Hermitian with a
    positive diagonal (so positive definite) when ``hermitian``. Rows other than the diagonal's may be empty."""
    a = rng.standard_normal((n, n)) * (rng.random((n, n)) < density)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal((n, n)) * (rng.random((n, n)) < density)
    np.fill_diagonal(a, 0)
    if hermitian:
        a = a + a.conj().T
    a = a + np.diag(np.abs(a).sum(axis=1) + rng.uniform(0.5, 2.0, n))
    return a.astype(dtype)


def as_layout(xp: Any, host: np.ndarray, layout: xs.Layout, index_dtype: str, rng: np.random.Generator) -> Any:
    if layout is xs.strided:
        return xp.asarray(host)
    blocksize = (1, 1) if layout.is_blocked else None
    coo = xs.to_sparse_coo(xp.asarray(host))
    if layout is xs.sparse_coo:
        # duplicates that sum to the matrix's entries, in random order
        return S.uncoalesced_like(xp, rng, coo, index_dtype) if coo.nnz else coo
    indexed = xs.sparse_coo_array(xp.astype(coo.indices(), getattr(xp, index_dtype)), coo.values(), coo.shape)
    return xs.to_sparse(indexed, layout=layout, blocksize=blocksize)


def tolerance(dtype: str) -> float:
    return 1e-4 if dtype in ("float32", "complex64") else 1e-10


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
@pytest.mark.parametrize("solver", list(SOLVERS))
@SOME
@given(
    n=st.integers(1, 24),
    density=st.sampled_from([0.0, 0.1, 0.4]),
    dtype=st.sampled_from(["float64", "float32", "complex128"]),
    layout=st.sampled_from([xs.strided, xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr]),
    index_dtype=S.index_dtypes(),
    seed=st.integers(0, 2**32 - 1),
    preconditioned=st.booleans(),
)
def test_solvers_against_the_dense_solve(
    backend: str, xp: Any, solver: str, n: int, density: float, dtype: str, layout: xs.Layout, index_dtype: str, seed: int, preconditioned: bool
) -> None:
    # xp creates on the device that --device names (torch=cuda on a GPU machine)
    rng = np.random.default_rng(seed)
    host = random_system(rng, n, density, dtype, hermitian=solver == "cg")
    rhs = rng.standard_normal(n).astype(dtype)
    a = as_layout(xp, host, layout, index_dtype, rng)
    b = xp.asarray(rhs)
    rtol = tolerance(dtype)
    # the Jacobi preconditioner, as a callable and as a sparse diagonal matrix in turn
    inverse_diagonal = (1.0 / np.diag(host)).astype(dtype)
    m = None
    if preconditioned:
        m = xs.to_sparse_csr(xp.asarray(np.diag(inverse_diagonal))) if seed % 2 else (lambda r, d=xp.asarray(inverse_diagonal): d * r)
    x, info = SOLVERS[solver](a, b, rtol=rtol, maxiter=20 * n + 20, M=m)
    assert info == 0
    assert x.dtype == getattr(xp, dtype) and tuple(x.shape) == (n,)
    got = to_numpy(x).astype(np.complex128)
    # the backend's own dense solve, the oracle, and the stopping rule itself
    expected = to_numpy(xp.linalg.solve(xp.asarray(host), b)).astype(np.complex128)
    residual = np.linalg.norm(host.astype(np.complex128) @ got - rhs) / max(np.linalg.norm(rhs), 1e-300)
    assert residual <= 2 * rtol + 1e-12
    condition = np.linalg.cond(host.astype(np.complex128))
    np.testing.assert_allclose(got, expected, rtol=0, atol=10 * condition * rtol * max(np.linalg.norm(expected), 1.0))


@pytest.mark.parametrize("solver", list(SOLVERS))
@pytest.mark.parametrize("seed", range(4))
def test_numpy_solvers_follow_scipy(solver: str, seed: int) -> None:
    # the same recurrences as SciPy's (GMRES preconditions from the other side, and is compared unpreconditioned):
    # equal iterates within rounding, the same info when the iterations run out
    rng = np.random.default_rng(seed)
    n = 60
    host = sp.csr_array(random_system(rng, n, 0.05, "float64", hermitian=solver == "cg"))
    b = rng.standard_normal(n)
    x0 = rng.standard_normal(n)
    x, info = SOLVERS[solver](xs.asarray(host), b, x0, rtol=1e-9)
    y, yinfo = SCIPY[solver](host, b, x0, rtol=1e-9)
    assert info == yinfo == 0
    np.testing.assert_allclose(x, y, rtol=0, atol=1e-7 * np.linalg.norm(y))
    for maxiter in (1, 2):
        x, info = SOLVERS[solver](xs.asarray(host), b, rtol=1e-14, maxiter=maxiter)
        y, yinfo = SCIPY[solver](host, b, rtol=1e-14, maxiter=maxiter, **({"restart": 3} if solver == "gmres" else {}))
        assert info == maxiter and yinfo > 0
        if solver == "cg":
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_generic_route_matches_the_native_one(solver: str) -> None:
    # NumPy's products run its compiled kernels, array_api_strict's the generic ones: the same iterates
    rng = np.random.default_rng(7)
    host = random_system(rng, 30, 0.2, "float64", hermitian=solver == "cg")
    b = rng.standard_normal(30)
    strict = namespace("array_api_strict")
    x, info = SOLVERS[solver](xs.to_sparse_csr(host), b, rtol=1e-12)
    y, yinfo = SOLVERS[solver](xs.to_sparse_csr(strict.asarray(host)), strict.asarray(b), rtol=1e-12)
    assert info == yinfo == 0
    np.testing.assert_allclose(x, to_numpy(y), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
@pytest.mark.parametrize("solver", list(SOLVERS))
def test_edges(backend: str, solver: str) -> None:
    xp = namespace(backend)
    f = SOLVERS[solver]
    eye = xs.eye(3, layout=xs.sparse_csr, backend=backend)
    b = xp.asarray([1.0, -2.0, 0.5])
    # b = 0: x = 0 at once, whatever x0
    x, info = f(eye, xp.zeros(3, dtype=xp.float64), xp.asarray([5.0, 5.0, 5.0]))
    assert info == 0 and to_numpy(x).tolist() == [0.0, 0.0, 0.0]
    # the identity: one iteration; an exact x0: none (the callback is never called)
    calls: list[Any] = []
    x, info = f(eye, b, rtol=1e-12, callback=calls.append)
    assert info == 0 and np.allclose(to_numpy(x), [1.0, -2.0, 0.5]) and len(calls) == 1
    calls.clear()
    x, info = f(eye, b, b, callback=calls.append)
    assert info == 0 and calls == []
    # nnz = 0 with b != 0: no solution; the recurrence breaks down (GMRES: no direction reduces the residual)
    empty = xs.sparse_csr_array(xp.asarray([0, 0, 0, 0]), xp.asarray([], dtype=xp.int64), xp.asarray([], dtype=xp.float64), (3, 3))
    x, info = f(empty, b)
    assert info == -1 and to_numpy(x).tolist() == [0.0, 0.0, 0.0]
    # N = 0
    x, info = f(xs.eye(0, layout=xs.sparse_coo, backend=backend), xp.zeros(0, dtype=xp.float64))
    assert info == 0 and tuple(x.shape) == (0,)
    # integers solve in the backend's default floating dtype (torch's is float32); float16 in float32
    x, info = f(xs.eye(3, dtype=xp.int64, backend=backend), xp.asarray([1, 2, 3]))
    assert info == 0 and x.dtype == xp.__array_namespace_info__().default_dtypes()["real floating"] and to_numpy(x).tolist() == [1.0, 2.0, 3.0]
    if hasattr(xp, "float16"):
        x, info = f(eye, xp.asarray([1.0, 2.0, 3.0], dtype=xp.float16))
        assert info == 0 and x.dtype == eye.dtype
        x, info = f(xs.astype(eye, xp.float16), xp.asarray([1.0, 2.0, 3.0], dtype=xp.float16))
        assert info == 0 and x.dtype == xp.float32
    # the result layout
    x, info = f(eye, b, layout=xs.sparse_coo)
    assert info == 0 and x.layout is xs.sparse_coo


def test_breakdown_and_iterations_running_out() -> None:
    indefinite = xs.sparse_csr_array([0, 1, 2], [0, 1], [1.0, -1.0], (2, 2))
    x, info = xs.linalg.cg(indefinite, np.asarray([1.0, 1.0]))  # p^T A p = 0 at the first step
    assert info == -1 and x.tolist() == [0.0, 0.0]
    x, info = xs.linalg.gmres(indefinite, np.asarray([1.0, 1.0]))  # GMRES needs no definiteness
    assert info == 0 and np.allclose(x, [1.0, -1.0])
    laplacian = xs.asarray(sp.diags_array([-np.ones(99), 2 * np.ones(100), -np.ones(99)], offsets=[-1, 0, 1], format="csr"))
    x, info = xs.linalg.cg(laplacian, np.ones(100), rtol=1e-12, maxiter=3)
    assert info == 3
    x, info = xs.linalg.gmres(laplacian, np.ones(100), rtol=1e-12, restart=5, maxiter=2)
    assert info == 2


def test_callbacks() -> None:
    laplacian = xs.asarray(sp.diags_array([-np.ones(49), 2 * np.ones(50), -np.ones(49)], offsets=[-1, 0, 1], format="csr"))
    b = np.ones(50)
    norms: list[float] = []
    x, info = xs.linalg.gmres(laplacian, b, rtol=1e-10, restart=50, callback=norms.append, callback_type="pr_norm")
    assert info == 0 and len(norms) >= 2
    assert all(later <= earlier * (1 + 1e-12) for earlier, later in zip(norms, norms[1:]))  # GMRES minimises it
    assert norms[-1] <= 1e-10
    iterates: list[Any] = []
    x, info = xs.linalg.gmres(laplacian, b, rtol=1e-10, restart=10, callback=iterates.append)
    assert info == 0 and len(iterates) >= 2 and np.array_equal(iterates[-1], x)
    with pytest.raises(ValueError, match=r"^gmres: callback_type must be 'x' or 'pr_norm' \(callback_type='legacy'\)\. Pass 'x'"):
        xs.linalg.gmres(laplacian, b, callback=print, callback_type="legacy")


def test_linear_operators() -> None:
    # a SciPy LinearOperator is a callable: A and M
    host = random_system(np.random.default_rng(3), 20, 0.2, "float64", hermitian=True)
    operator = spl.aslinearoperator(host)
    b = np.arange(20.0)
    x, info = xs.linalg.cg(operator, b, rtol=1e-12, M=spl.aslinearoperator(np.diag(1 / np.diag(host))))
    assert info == 0
    np.testing.assert_allclose(x, np.linalg.solve(host, b), rtol=1e-9)
    with pytest.raises(ValueError, match=r"^cg: A must be \(20, 20\) for b of shape \(20,\) \(A\.shape=\(3, 3\)\)\. Pass a square operator"):
        xs.linalg.cg(spl.aslinearoperator(np.eye(3)), b)
    with pytest.raises(ValueError, match=r"^cg: the callable A returned no strided \(20,\) array for a vector of b's shape \(shape=\(19,\), type ndarray\)\. Return A @ v\."):
        xs.linalg.cg(lambda v: v[1:], b)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_records_no_gradient() -> None:
    import torch

    values = torch.tensor([2.0, 4.0], dtype=torch.float64, requires_grad=True)
    a = xs.sparse_coo_array(torch.tensor([[0, 1], [0, 1]]), values, (2, 2))
    b = torch.tensor([1.0, 1.0], dtype=torch.float64, requires_grad=True)
    for f in SOLVERS.values():
        x, info = f(a, b, rtol=1e-12)
        assert info == 0 and not x.requires_grad
        assert torch.allclose(x, torch.tensor([0.5, 0.25], dtype=torch.float64))


def test_errors() -> None:
    a = xs.sparse_csr_array([0, 1, 2], [0, 1], [1.0, 2.0], (2, 2))
    b = np.ones(2)
    with pytest.raises(TypeError, match=r"^cg: b must be a strided \(N,\) array of a backend \(layout=sparse_coo\)\. Pass xsparse\.to_dense\(b\)"):
        xs.linalg.cg(a, xs.to_sparse_coo(b))
    with pytest.raises(TypeError, match=r"^cg: b must be a strided \(N,\) array of a backend \(type list\)\."):
        xs.linalg.cg(a, [1.0, 1.0])
    with pytest.raises(ValueError, match=r"^bicgstab: b must be 1-D \(b\.shape=\(2, 1\)\)\. Solve for one right-hand side at a time"):
        xs.linalg.bicgstab(a, np.ones((2, 1)))
    with pytest.raises(ValueError, match=r"^gmres: A must be a \(3, 3\) matrix for b of shape \(3,\) \(A\.shape=\(2, 2\)\)\. Pass a square system"):
        xs.linalg.gmres(a, np.ones(3))
    with pytest.raises(ValueError, match=r"^cg: A must be a \(2, 2\) matrix for b of shape \(2,\) \(A\.shape=\(2, 2, 1\)\)"):
        xs.linalg.cg(xs.to_sparse_coo(np.ones((2, 2, 1))), b)
    with pytest.raises(TypeError, match=r"^cg: the operand is a SciPy sparse array \(csr_array\), .*Convert it with xsparse\.asarray\(x\) first"):
        xs.linalg.cg(sp.csr_array(np.eye(2)), b)
    with pytest.raises(TypeError, match=r"^cg: A has a boolean dtype \(A\.dtype=bool\)\. Convert it"):
        xs.linalg.cg(np.eye(2, dtype=bool), b)
    with pytest.raises(TypeError, match=r"^cg: b has a boolean dtype \(b\.dtype=bool\)\. Convert it"):
        xs.linalg.cg(a, np.ones(2, dtype=bool))
    with pytest.raises(ValueError, match=r"^cg: A holds a NaN or an infinity \(shape=\(2, 2\), nnz=2\)\. Pass a matrix of finite values\.$"):
        xs.linalg.cg(xs.sparse_csr_array([0, 1, 2], [0, 1], [1.0, math.nan], (2, 2)), b)
    with pytest.raises(ValueError, match=r"^cg: M holds a NaN or an infinity \(shape=\(2, 2\)\)\. Pass a matrix of finite values\.$"):
        xs.linalg.cg(a, b, M=np.asarray([[1.0, 0.0], [0.0, math.inf]]))
    with pytest.raises(ValueError, match=r"^cg: b holds a NaN or an infinity \(b\.shape=\(2,\)\)\. Pass finite values\.$"):
        xs.linalg.cg(a, np.asarray([1.0, math.nan]))
    with pytest.raises(ValueError, match=r"^cg: x0 holds a NaN or an infinity \(x0\.shape=\(2,\)\)\. Pass finite values\.$"):
        xs.linalg.cg(a, b, np.asarray([math.inf, 0.0]))
    with pytest.raises(ValueError, match=r"^cg: x0 must be a strided array of b's shape \(x0\.shape=\(3,\), b\.shape=\(2,\)\)\. Pass a strided \(2,\) guess\.$"):
        xs.linalg.cg(a, b, np.ones(3))
    with pytest.raises(ValueError, match=r"^cg: A has fill value 1\.0; a system matrix's unspecified elements are zeros\. Pass a matrix with fill value 0"):
        xs.linalg.cg(xs.sparse_coo_array([[0], [0]], [2.0], (2, 2), fill_value=1.0), b)
    for name in ("rtol", "atol"):
        for value in (-1.0, math.nan, "1e-5", True):
            message = f"cg: {name} must be a finite non-negative number ({name}={value!r}). Pass e.g. {name}=1e-5."
            with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
                xs.linalg.cg(a, b, **{name: value})
    with pytest.raises(ValueError, match=r"^cg: maxiter must be positive \(maxiter=0\)\. Pass a positive number of iterations\.$"):
        xs.linalg.cg(a, b, maxiter=0)
    with pytest.raises(TypeError, match=r"^cg: maxiter must be an integer, got float \(maxiter=2\.5\)\. Pass a positive number of iterations\.$"):
        xs.linalg.cg(a, b, maxiter=2.5)
    with pytest.raises(ValueError, match=r"^gmres: restart must be positive \(restart=0\)\. Pass a positive number"):
        xs.linalg.gmres(a, b, restart=0)
    with pytest.raises(TypeError, match=r"^cg: callback must be callable or None, got int\.$"):
        xs.linalg.cg(a, b, callback=3)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_mixed_backends() -> None:
    import torch

    a = xs.sparse_csr_array([0, 1, 2], [0, 1], [1.0, 2.0], (2, 2))
    with pytest.raises(xs.BackendMismatchError, match=r"^cg: the operands live on different backends \('torch', 'numpy'\)\. Move them to one"):
        xs.linalg.cg(a, torch.ones(2, dtype=torch.float64))


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch", "array_api_strict"]))
@pytest.mark.parametrize(("scale", "dtype"), [(1e-170, "float64"), (1e-300, "float64"), (1e200, "float64"), (1e19, "float32"), (1e-25, "float32")])
def test_a_right_hand_side_whose_squares_overflow_or_underflow(backend: str, scale: float, dtype: str) -> None:
    # the norm of b added unscaled squares: infinite or 0, the tolerance with it, and the solvers returned
    # their start with info=0 (spsolve's generic kernel zeros, or a refusal of a finite b)
    xp = namespace(backend)
    a = np.array([[4.0, 1.0, 0.0], [1.0, 4.0, 1.0], [0.0, 1.0, 4.0]])
    A = xs.to_sparse_csr(xp.asarray(a, dtype=getattr(xp, dtype)))
    b = xp.asarray(np.array([5.0, 6.0, 5.0]) * scale, dtype=getattr(xp, dtype))
    expected = np.full(3, scale)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        solution = to_numpy(xs.spsolve(A, b))
        np.testing.assert_allclose(solution, expected, rtol=1e-4)
        x, info = xs.linalg.gmres(A, b)
        assert info == 0
        np.testing.assert_allclose(to_numpy(x), expected, rtol=1e-4)
        for name in ("cg", "bicgstab"):
            # their inner products overflow or underflow too: a breakdown, never a start called converged
            x, info = SOLVERS[name](A, b)
            assert info != 0 or np.allclose(to_numpy(x), expected, rtol=1e-4), (name, to_numpy(x), info)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_norms_past_the_range_of_the_squares() -> None:
    from xsparse.backends.array_api import iterative

    for v, expected in (([3e200, 4e200], 5e200), ([3e-200, 4e-200], 5e-200), ([float("inf"), 1.0], math.inf), ([0.0, 0.0], 0.0), ([], 0.0)):
        assert iterative.norm(np, np.asarray(v, dtype=np.float64)) == pytest.approx(expected, rel=1e-12)
    assert math.isnan(iterative.norm(np, np.asarray([math.nan, 1e300])))
    assert iterative.norm(np, np.asarray([3e-30 + 4e-30j], dtype=np.complex64)) == pytest.approx(5e-30, rel=1e-6)


def test_a_complex_operator_with_a_real_right_hand_side_is_refused() -> None:
    # the solver worked in the real dtype of b and cast the operator's complex products to it, dropping their
    # imaginary parts: the solution of another system, reported as converged
    op = spl.aslinearoperator(sp.csr_array(np.array([[4.0, 1.0, 0.0], [1.0, 4.0, 1.0], [0.0, 1.0, 4.0]]) + 1j * np.eye(3)))
    b = np.array([5.0, 6.0, 5.0])
    for name, solve in SOLVERS.items():
        with pytest.raises(TypeError, match=rf"^{name}: the callable A returned complex values for a real right-hand side \(A\(v\)\.dtype=complex128, the solver's dtype=float64\)\. Pass b as a complex array"):
            solve(op, b)
    x, info = xs.linalg.gmres(op, b.astype(np.complex128), rtol=1e-12)
    reference, _ = spl.gmres(op, b.astype(np.complex128), rtol=1e-12)
    assert info == 0 and np.allclose(x, reference, rtol=1e-8)
