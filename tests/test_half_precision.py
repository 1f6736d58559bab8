"""float16 and bfloat16: products add in float32 and round once on every backend and layout, as the dense
product does; systems, factorizations and decompositions compute in float32 ("Half precision" in
docs/decisions.md)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import xsparse as xs
import xsparse.backends

if importlib.util.find_spec("jax") is not None:
    import jax

    jax.config.update("jax_enable_x64", True)

HALF_CASES = [
    pytest.param(backend, dtype, marks=pytest.mark.skip(reason=f"{backend} is not installed") if importlib.util.find_spec(backend.split(".")[0]) is None else ())
    for backend, dtype in [("numpy", "float16"), ("torch", "float16"), ("torch", "bfloat16"), ("jax.numpy", "float16"), ("jax.numpy", "bfloat16")]
]
LAYOUTS: dict[str, Callable[..., Any]] = {
    "coo": xs.to_sparse_coo,
    "csr": xs.to_sparse_csr,
    "csc": xs.to_sparse_csc,
    "bsr": lambda x: xs.to_sparse_bsr(x, blocksize=(1, 1)),
    "bsc": lambda x: xs.to_sparse_bsc(x, blocksize=(1, 1)),
}


@pytest.fixture(autouse=True, scope="module")
def _registry_as_it_was() -> Iterator[None]:
    """The generic jax.numpy backend these tests make leaves the registry with them (as in test_jax_backend)."""
    saved = dict(xsparse.backends._EXTRA)
    yield
    xsparse.backends._EXTRA.clear()
    xsparse.backends._EXTRA.update(saved)


def make(backend: str, host: Any, dtype: str) -> Any:
    data = np.asarray(host, dtype=np.float64)
    if backend == "torch":
        import torch

        return torch.tensor(data, dtype=getattr(torch, dtype))
    xp = xs.get_backend(backend).namespace()
    return xp.asarray(data.astype(np.float32), dtype=getattr(xp, dtype)) if backend != "numpy" else data.astype(dtype)


def host(x: Any) -> np.ndarray:
    if isinstance(x, xs.SparseArray):
        x = xs.to_dense(x)
    if type(x).__module__.startswith("torch"):
        return np.asarray(x.detach().to(dtype=__import__("torch").float64).numpy())
    return np.asarray(x).astype(np.float64)


def products(backend: str, dtype: str, sparse: Callable[..., Any]) -> dict[str, tuple[Any, Any]]:
    """Each product of a row of 10000 ones with ones, and the dense product it must equal."""
    k = 10000
    row, col, vec = make(backend, np.ones((1, k)), dtype), make(backend, np.ones((k, 1)), dtype), make(backend, np.ones(k), dtype)
    zero = make(backend, np.zeros((1, 1)), dtype)
    dense = row @ col
    cases = {
        "sparse @ strided": (lambda: sparse(row) @ col, dense),
        "strided @ sparse": (lambda: row @ sparse(col), dense),
        "sparse @ sparse": (lambda: sparse(row) @ sparse(col), dense),
        "mv": (lambda: xs.mv(sparse(row), vec), row @ vec),
        "addmm": (lambda: xs.addmm(zero, sparse(row), col), dense),
        "tensordot": (lambda: xs.tensordot(sparse(row), col, axes=1), dense),
        "vecdot": (lambda: xs.vecdot(sparse(row), row), row @ col[:, 0]),
    }
    if sparse is xs.to_sparse_coo:
        cases.update({
            "vecdot of vectors": (lambda: xs.vecdot(xs.to_sparse_coo(vec), vec), row @ col[:, 0]),
            "hspmm": (lambda: xs.hspmm(sparse(row), col), dense),
            "smm": (lambda: xs.smm(sparse(row), col), dense),
            "sspaddmm": (lambda: xs.sspaddmm(sparse(zero), sparse(row), col), dense),
        })  # fmt: skip
    if sparse is xs.to_sparse_csr:
        mask = xs.to_sparse_csr(make(backend, np.ones((1, 1)), dtype))
        cases["sampled_addmm"] = (lambda: xs.sampled_addmm(mask, row, col, beta=0), dense)
    return cases


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("backend", "dtype"), HALF_CASES)
def test_half_products_add_in_float32_like_the_dense_product(backend: str, dtype: str, layout: str) -> None:
    # torch's COO kernels added in the values' dtype: 2048 (float16) and 256 (bfloat16) for 10000 ones
    for name, (product, dense) in products(backend, dtype, LAYOUTS[layout]).items():
        result = product()
        assert str(result.dtype).endswith(dtype), name
        np.testing.assert_array_equal(host(result).ravel(), host(dense).ravel(), err_msg=name)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("backend", "dtype"), HALF_CASES)
def test_half_products_of_large_partial_sums_agree_with_dense(backend: str, dtype: str, layout: str) -> None:
    # the example of docs/decisions.md: a float16 partial sum of 120000 overflowed on torch's COO kernels
    row = make(backend, [[60000.0, 60000.0, -60000.0]], dtype)
    ones = make(backend, np.ones((3, 1)), dtype)
    dense = host(row @ ones)
    assert dense.item() == (60000.0 if dtype == "float16" else 59904.0)
    np.testing.assert_array_equal(host(LAYOUTS[layout](row) @ ones), dense)
    np.testing.assert_array_equal(host(xs.addmm(make(backend, np.zeros((1, 1)), dtype), LAYOUTS[layout](row), ones)), dense)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("backend", "dtype"), HALF_CASES)
def test_half_precision_norms_compute_in_float32_like_the_dense_ones(backend: str, dtype: str, layout: str) -> None:
    # the square of 21840 is inf in float16: the sparse norms overflowed where the dense ones (float32
    # inside) do not; ord=0 of a CSR array along its rows came back as float32
    # the oracle: the norms in float64 of the same elements (NumPy's and JAX's dense float16 norms overflow
    # or round in float16 themselves), within the rounding of the half-precision result
    data = [[21840.0, 0.0, 3.0], [0.0, 0.0, 4.0]]
    exact = host(make(backend, data, dtype))
    rtol = 2.0**-10 if dtype == "float16" else 2.0**-7
    a = LAYOUTS[layout](make(backend, data, dtype))
    for ord_ in (2, 3, 1, 0, xs.inf, -xs.inf, 0.5):
        for axis in (None, 0, 1):
            got = xs.linalg.vector_norm(a, ord=ord_, axis=axis)
            assert str(got.dtype).endswith(dtype), (ord_, axis)
            want = np.linalg.norm(exact.ravel(), ord=ord_) if axis is None else np.linalg.norm(exact, ord=ord_, axis=axis)
            np.testing.assert_allclose(host(got), want, rtol=rtol, err_msg=f"ord={ord_}, axis={axis}")
    for ord_ in ("fro", 1, -1, xs.inf, -xs.inf):
        got = xs.linalg.matrix_norm(a, ord=ord_)
        assert str(got.dtype).endswith(dtype)
        np.testing.assert_allclose(host(got), np.linalg.norm(exact, ord=ord_), rtol=rtol, err_msg=f"ord={ord_}")


def test_torch_smm_and_sspaddmm_decline_half_precision() -> None:
    torch = pytest.importorskip("torch")
    for dtype in (torch.float16, torch.bfloat16):
        a = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=dtype)
        b = torch.ones(2, 2, dtype=dtype)
        coo = xs.to_sparse_coo(a)
        reasons = [k.supports(coo._xp, coo, b) for k in xs.kernels("smm") if k.backend == "torch"]
        assert any(r is not None and "no torch." in r for r in reasons)
        assert xs.to_dense(xs.smm(coo, b)).equal(a @ b)
        assert xs.to_dense(xs.sspaddmm(coo, coo, b, beta=2)).equal(2 * a + a @ b)


SYSTEMS = {
    "3x3": (np.diag([4.0, 3.0, 2.0]) + 0.5, np.array([1.0, 2.0, 3.0])),
    "tridiagonal": (
        np.diag(np.full(50, 4.0)) + np.diag(np.full(49, -1.0), 1) + np.diag(np.full(49, -1.0), -1),
        np.linspace(-2.0, 2.0, 50),
    ),
}


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("backend", "dtype"), HALF_CASES)
def test_half_precision_systems_are_solved_in_float32(backend: str, dtype: str, layout: str, system: str) -> None:
    # GMRES to 100 float16 (bfloat16) epsilons was 7% (36%) off on the 3 x 3 system, whose inputs are exact
    a64, b64 = SYSTEMS[system]
    a, b = make(backend, a64, dtype), make(backend, b64, dtype)
    # the oracle: NumPy's float64 solve of the half-precision inputs
    exact = np.linalg.solve(host(a), host(b))
    for x in (xs.spsolve(LAYOUTS[layout](a), b), xs.linalg.solve(LAYOUTS[layout](a), b), xs.spsolve(a, b)):
        assert str(x.dtype).endswith("float32")
        np.testing.assert_allclose(host(x), exact, rtol=1e-5, atol=1e-6)
    # a wider right-hand side takes the system to its dtype (torch's SuperLU route read no bfloat16)
    x = xs.linalg.solve(LAYOUTS[layout](a), make(backend, host(b), "float64"))
    assert str(x.dtype).endswith("float64")
    np.testing.assert_allclose(host(x), exact, rtol=1e-10)


SPD = np.asarray([[4.0, 1.0, 0.0, 0.0], [1.0, 3.0, 0.0, 0.5], [0.0, 0.0, 2.0, 0.0], [0.0, 0.5, 0.0, 1.0]])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("backend", "dtype"), HALF_CASES)
def test_half_precision_factorizations_compute_in_float32(backend: str, dtype: str, layout: str) -> None:
    # no backend's dense factorizations take float16 or bfloat16: NumPy's, torch's and JAX's raised their own errors
    a = make(backend, SPD, dtype)
    s = LAYOUTS[layout](a)
    exact = host(a)  # the oracle: NumPy's float64 routines on the half-precision values
    tol = {"rtol": 1e-5, "atol": 1e-5}
    cases = {
        "det": (xs.linalg.det(s), np.linalg.det(exact)),
        "inv": (xs.linalg.inv(s), np.linalg.inv(exact)),
        "slogdet": (xs.linalg.slogdet(s).logabsdet, np.linalg.slogdet(exact).logabsdet),
        "svdvals": (xs.linalg.svdvals(s), np.linalg.svd(exact, compute_uv=False)),
        "eigvalsh": (xs.linalg.eigvalsh(s), np.linalg.eigvalsh(exact)),
        "cholesky": (xs.linalg.cholesky(s), np.linalg.cholesky(exact)),
        "pinv": (xs.linalg.pinv(s), np.linalg.pinv(exact)),
        "matrix_power(-2)": (xs.linalg.matrix_power(s, -2), np.linalg.matrix_power(exact, -2)),
    }
    for name, (got, want) in cases.items():
        assert str(got.dtype).endswith("float32"), name
        np.testing.assert_allclose(host(got), want, err_msg=name, **tol)
    assert int(host(xs.linalg.matrix_rank(s))) == 4
    # a norm keeps the array's dtype, as the norms computed by sparse reductions do
    for ord in (2, "nuc"):
        norm = xs.linalg.matrix_norm(s, ord=ord)
        assert str(norm.dtype).endswith(dtype)
        np.testing.assert_allclose(host(norm), np.linalg.norm(exact, ord=ord), rtol=1e-2)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("backend", "dtype"), HALF_CASES)
def test_half_precision_decompositions_compute_in_float32(backend: str, dtype: str, layout: str) -> None:
    # torch's svd_lowrank of a float16 tensor raised "geqrf_cpu not implemented for 'Half'", NumPy's and JAX's QR theirs
    low_rank = np.outer([1.0, 2.0, 0.0, -1.0, 0.5, 0.0], [2.0, 0.0, 1.0, 1.0]) + np.outer([0.0, 1.0, 1.0, 0.0, 0.0, 2.0], [0.0, 1.0, 0.0, -1.0])
    a = make(backend, low_rank, dtype)
    exact = host(a)
    u, s, v = xs.svd_lowrank(LAYOUTS[layout](a), q=2, seed=0)
    assert all(str(f.dtype).endswith("float32") for f in (u, s, v))
    np.testing.assert_allclose(host(u) @ np.diag(host(s)) @ host(v).T, exact, atol=1e-4)
    u, s, v = xs.pca_lowrank(LAYOUTS[layout](a), q=4, seed=0)
    assert str(s.dtype).endswith("float32")
    np.testing.assert_allclose(host(s), np.linalg.svd(exact - exact.mean(axis=0), compute_uv=False), rtol=1e-4, atol=1e-4)
    e, x = xs.lobpcg(LAYOUTS[layout](make(backend, np.diag(np.arange(1.0, 10.0)), dtype)), k=1, seed=0)
    assert str(e.dtype).endswith("float32") and str(x.dtype).endswith("float32")
    np.testing.assert_allclose(host(e), [9.0], rtol=1e-4)


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
@pytest.mark.parametrize(("backend", "dtype"), HALF_CASES)
def test_half_precision_softmax_rounds_once(backend: str, dtype: str, layout: str) -> None:
    # computed in float16, a log_softmax was 7 units in the last place off (NumPy); in float32 and rounded
    # once, within half a unit of the float64 result (a unit for bfloat16's fewer bits, relative)
    rng = np.random.default_rng(3)
    data = np.round(rng.standard_normal((4, 6)) * 3, 2)
    data[rng.random((4, 6)) < 0.3] = 0.0
    x = make(backend, data, dtype)
    exact_in = host(x)  # the elements as the half-precision array holds them
    stored = exact_in != 0
    masked = np.where(stored, exact_in, -np.inf)
    top = masked.max(axis=1, keepdims=True)
    lse = np.log(np.exp(masked - top).sum(axis=1, keepdims=True)) + top
    # half a unit in the last place, relative; for float16's subnormals (below 2**-14) half their spacing 2**-24
    tol, tiny = (2.0**-11, 2.0**-25) if dtype == "float16" else (2.0**-8, 0.0)
    for op, want in (("softmax", np.exp(masked - lse)), ("log_softmax", masked - lse)):
        got = getattr(xs, op)(LAYOUTS[layout](x), axis=1)
        assert str(got.dtype).endswith(dtype)
        err = np.abs(host(got)[stored] - want[stored])
        assert np.all(err <= tol * np.abs(want[stored]) + tiny), (op, err.max())
