"""JAX as a backend: any Array API library works on the generic kernels, by its arrays or by the name of its
namespace (``jax.numpy``). The generic kernels need int64, which JAX gives only in its 64-bit mode; without
it xsparse refuses the arrays with a message that says how to turn it on (docs/backends.md)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="jax is not installed")
jax.config.update("jax_enable_x64", True)
jnp = pytest.importorskip("jax.numpy")

import xsparse as xs  # noqa: E402
import xsparse.backends  # noqa: E402
from xsparse.conformance import cases, runner  # noqa: E402
from xsparse.testing import assert_sparse_equal  # noqa: E402

# The operations a program moved to JAX meets first; the whole suite takes about an hour on JAX's eager
# dispatch (`python -m xsparse conformance --backend jax.numpy` runs it).
OPS = [
    "convert", "coalesce", "matmul", "addmm", "sampled_addmm", "add", "multiply", "sin", "sum",
    "max", "argmax", "getitem", "gather_points", "take", "concat", "reshape", "permute_dims", "sort", "unique",
    "where", "vector_norm", "diagonal", "tril",
]  # fmt: skip


@pytest.fixture(autouse=True, scope="module")
def _registry_as_it_was() -> Iterator[None]:
    """The generic jax.numpy backend these tests make leaves the registry with them (tests that list every
    registered backend compare it with a fresh process)."""
    saved = dict(xsparse.backends._EXTRA)
    yield
    xsparse.backends._EXTRA.clear()
    xsparse.backends._EXTRA.update(saved)


def test_conformance_on_jax() -> None:
    outcomes = runner.run("jax.numpy", max_examples=1, ops=OPS, shrink=False)
    failures = [f"{o.name}: {o.detail}" for o in outcomes if o.failed]
    assert not failures, "\n\n".join(failures)
    assert {o.op for o in outcomes if o.status == "pass"} == set(OPS)


def test_jax_arrays_in_and_out() -> None:
    """Sparse arrays over jax.numpy components: the backend follows the arrays, strided results are JAX arrays,
    and the values equal JAX's dense computation."""
    host = np.asarray([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    d = jnp.asarray(host)
    a = xs.to_sparse_csr(d)
    assert a.backend == "jax.numpy" and xs.get_backend("jax.numpy") is a._backend
    w = jnp.arange(6.0).reshape(3, 2)
    r = a @ w
    assert isinstance(r, jax.Array)
    np.testing.assert_allclose(np.asarray(r), host @ np.arange(6.0).reshape(3, 2))
    assert_sparse_equal(xs.sum(a.to_sparse_coo(), axis=0), jnp.sum(d, axis=0))
    assert_sparse_equal(a[1], d[1])
    assert_sparse_equal(xs.to_backend(a, "numpy"), host)
    assert_sparse_equal(xs.to_backend(xs.to_sparse_coo(host), "jax.numpy"), d)


def test_jax_without_64_bit_mode_is_refused() -> None:
    """Without x64, JAX makes int32 where int64 is asked, which would wrap index arithmetic around: refused."""
    code = (
        "import jax.numpy as jnp, xsparse as xs\n"
        "try:\n"
        "    xs.to_sparse_csr(jnp.eye(3))\n"
        "except TypeError as e:\n"
        "    print(e)\n"
    )
    env = {**os.environ, "JAX_ENABLE_X64": "0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert "backend 'jax.numpy': xsparse computes indices in int64, and this library gives int32" in out
    assert "jax.config.update('jax_enable_x64', True)" in out


def test_to_backend_copies_jax_arrays_for_torch() -> None:
    # JAX arrays are immutable; torch's DLPack import would hand out a writable tensor over their memory
    torch = pytest.importorskip("torch")
    j = jnp.asarray([[0.0, 1.5], [2.0, 0.0]])
    t = xs.to_backend(j, "torch")
    t.mul_(0)
    assert j.tolist() == [[0.0, 1.5], [2.0, 0.0]]
    s = xs.to_backend(xs.to_sparse_csr(np.asarray([[0.0, 1.5], [2.0, 0.0]])), "jax.numpy")
    st = xs.to_backend(s, "torch")
    for c in st._components().values():
        assert isinstance(c, torch.Tensor)
        c.zero_()
    assert s.values().tolist() == [1.5, 2.0] and s.crow_indices().tolist() == [0, 1, 2]


def test_to_backend_of_a_strided_bfloat16_tensor_to_jax() -> None:
    # JAX refuses a strided DLPack tensor, and the host fallback through NumPy has no bfloat16
    torch = pytest.importorskip("torch")
    x = torch.arange(8, dtype=torch.bfloat16).reshape(2, 4)[:, ::2]
    y = xs.to_backend(x, "jax.numpy")
    assert y.dtype == jnp.bfloat16
    assert y.astype(jnp.float32).tolist() == x.float().tolist()


def test_jax_creation_edges_agree_with_the_other_backends() -> None:
    """Review A on JAX: tril/triu with k at the int64 edge (F3: JAX overflowed and kept the wrong triangle),
    a device JAX cannot read (F9: a raw AttributeError), and an unsigned arange past the dtype's range
    (F12: JAX wrapped -3 to 65533)."""
    d = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    i, j = np.indices((2, 2))
    for k in (2**63 - 1, -(2**63), 2**62, 1, -1):
        for fn, keep in (("tril", j - i <= k), ("triu", j - i >= k)):
            expected = np.where(keep, np.asarray(d), 0.0)  # NumPy's definition of the triangle
            np.testing.assert_array_equal(np.asarray(getattr(xs, fn)(d, k=k)), expected)
            np.testing.assert_array_equal(np.asarray(xs.to_dense(getattr(xs, fn)(xs.to_sparse_csr(d), k=k))), expected)
    for layout in (xs.strided, xs.sparse_csr):
        with pytest.raises(ValueError, match=r"^zeros: device='cpu' is not a device of backend 'jax\.numpy' \(devices=\[CpuDevice\(id=0\)\]\)\. Pass one of xsparse\.__array_namespace_info__\(backend='jax\.numpy'\)\.devices\(\)\.$"):
            xs.zeros((2, 2), device="cpu", backend="jax.numpy", layout=layout)
    cpu = jax.devices("cpu")[0]
    assert xs.zeros((2, 2), device=cpu, backend="jax.numpy", layout=xs.sparse_csr).device == cpu
    with pytest.raises(OverflowError, match=r"^arange: the values from -3 to 4 do not fit in uint16 \(value=-3, dtype=uint16\)"):
        xs.arange(-3, 5, dtype="uint16", backend="jax.numpy")
    np.testing.assert_array_equal(np.asarray(xs.arange(5, 0, -2, dtype="uint16", backend="jax.numpy")), np.arange(5, 0, -2, dtype=np.uint16))


def test_searchsorted_gives_the_default_index_dtype() -> None:
    """The standard's searchsorted returns the default index dtype (int64 in 64-bit mode), where
    jnp.searchsorted gives int32: every path, strided and sparse, NaN in x1 too."""
    index = jnp.__array_namespace_info__().default_dtypes()["indexing"]
    assert index == jnp.int64
    edges = jnp.asarray([0.0, 1.0, 2.0, jnp.nan])
    queries = jnp.asarray([0.5, 0.0, jnp.nan, 3.0])
    want = np.searchsorted(np.asarray(edges), np.asarray(queries))
    for x1, x2 in (
        (edges, queries),
        (edges, xs.to_sparse_coo(queries)),
        (xs.to_sparse_coo(edges), queries),
        (xs.to_sparse_coo(edges), xs.to_sparse_csr(queries[None, :])),
    ):
        got = xs.searchsorted(x1, x2)
        assert got.dtype == index, (type(x1), type(x2), got.dtype)
        assert np.asarray(xs.to_dense(got)).reshape(-1).tolist() == want.tolist()


def test_uint64_fill_values_past_int64() -> None:
    """A uint64 fill value of 2**63 or more is compared as a uint64 array: JAX reads a Python int as int64
    and overflows (sort, the lane sorts and to_sparse compare values with the fill value)."""
    top = 2**64 - 1
    host = np.asarray([[1, top, 7, 2**63], [top, top, 0, 5]], dtype=np.uint64)
    d = jnp.asarray(host)
    for fill in (top, 2**63):
        for layout in (xs.sparse_coo, xs.sparse_csr, xs.sparse_csc):
            x = xs.to_sparse(d, layout=layout, fill_value=fill)
            assert x.fill_value == fill and np.asarray(xs.to_dense(x)).tolist() == host.tolist()
            for axis in (0, 1):
                for descending in (False, True):
                    s = xs.sort(x, axis=axis, descending=descending)
                    want = np.sort(host, axis=axis)
                    want = np.flip(want, axis=axis) if descending else want
                    assert s.layout is layout and np.asarray(xs.to_dense(s)).tolist() == want.tolist()
    a = xs.sparse_coo_array(jnp.asarray([[0, 2]]), jnp.asarray([1, 7], dtype=jnp.uint64), (4,), fill_value=top)
    assert np.asarray(xs.to_dense(xs.sort(a))).tolist() == [1, 7, top, top]


def test_result_type_of_jax_scalar_types_is_jax_promotion() -> None:
    # JAX's scalar types named the default backend (NumPy), whose int64 with float32 is float64; JAX's
    # products give float32 (docs/namespace.md)
    assert xs.result_type(jnp.int64, jnp.float32) == jnp.float32
    a = xs.to_sparse_csr(jnp.ones((2, 2), dtype=jnp.int64))
    product = a @ jnp.ones((2, 2), dtype=jnp.float32)
    assert product.dtype == xs.result_type(jnp.int64, jnp.float32) == xs.result_type(a, jnp.ones(2, dtype=jnp.float32))
    assert xs.result_type(jnp.float16, jnp.bfloat16) == jnp.result_type(jnp.float16, jnp.bfloat16)
    # JAX's dtype objects are NumPy's: they answer as NumPy, as documented
    assert xs.result_type(jnp.dtype("int64"), jnp.dtype("float32")) == np.float64


def test_any_and_all_of_complex_values_read_both_parts() -> None:
    # jax.numpy's any and all (0.10) read a complex element's real part only (all(-2j) is False); xsparse
    # gives the standard's answer, an element is true where it is not 0, and the conformance reference
    # computes that (it took jnp.all's answer: all(strided) and all(sparse_bsr) failed on JAX)
    host = np.asarray([[0 - 2j, 1 + 1j], [0 + 0j, 3j]], dtype=np.complex64)
    d = jnp.asarray(host)
    for x in (d, xs.to_sparse_coo(d), xs.to_sparse_bsr(d, blocksize=(1, 1)), xs.to_sparse_csr(d, fill_value=1j)):
        for name in ("any", "all"):
            for axis in (None, 0, 1):
                got = getattr(xs, name)(x, axis=axis)
                want = getattr(np, name)(np.asarray(xs.to_dense(x)) if not isinstance(x, jax.Array) else host, axis=axis)
                np.testing.assert_array_equal(np.asarray(xs.to_dense(got) if isinstance(got, xs.SparseArray) else got), want)
    outcomes = runner.run("jax.numpy", max_examples=3, ops=["all", "any"], shrink=False)
    assert not [o.name for o in outcomes if o.failed]


def test_conformance_reference_of_sign_and_sgn() -> None:
    # sgn of a real number is the namespace's sign, whose sign of -0.0 is JAX's -0.0 (the reference took
    # NumPy's +0.0 on the host: sgn failed on every layout on JAX); the sign of a complex zero is 0 + 0j, as
    # the Array API says and xsparse gives (jnp.sign(-0 + 0j) is -0 + 0j)
    ctx = runner.load_backend("jax.numpy")
    real = jnp.asarray([[-0.0, 0.0, jnp.nan, -2.0, 3.0]])
    complex_ = jnp.asarray([[complex(-0.0, 0.0), complex(-0.0, -0.0), 0j, 3 - 4j, -2j]])
    for op in ("sign", "sgn"):
        reference = cases._unary_reference(op, ctx)
        for d in (real, complex_):
            want = cases._documented_rule(op, ctx.xp, d, reference(d))
            for x in (d, xs.to_sparse_coo(d), xs.to_sparse_csr(d)):
                assert_sparse_equal(getattr(xs, op)(x), want)


def test_complex_products_with_a_non_finite_fill_value() -> None:
    # prod multiplies a group's product by k copies of the fill value. jax.numpy's complex pow computes
    # exp(k * log(f)), so (inf + 0j) ** 5 was inf + 0j where the dense product of five copies is nan + nanj;
    # the copies are multiplied now, as the dense product multiplies them (docs/decisions.md, "Reductions")
    inf = complex(math.inf, 0.0)
    host = np.asarray([[1 + 1j, inf, inf, inf, inf, inf], [inf, inf, inf, inf, inf, inf]])
    d = jnp.asarray(host)
    for layout in (xs.sparse_coo, xs.sparse_csr):
        a = xs.to_sparse(d, layout=layout, fill_value=inf)
        assert a.nnz == 1
        for axis in (None, 1):
            got = xs.prod(a, axis=axis)
            got = np.asarray(xs.to_dense(got) if isinstance(got, xs.SparseArray) else got)
            want = np.asarray(jnp.prod(d, axis=axis))
            np.testing.assert_array_equal(np.isnan(got.real), np.isnan(want.real))
            np.testing.assert_array_equal(np.isnan(got.imag), np.isnan(want.imag))


def test_integer_products_with_many_unspecified_elements_wrap_around() -> None:
    # jax.numpy's integer pow with an array exponent reads the exponent modulo the bit width (2 ** 64 is 1
    # in int64), so a product over 199 unspecified 2s was 5 * 2 ** 7 = 640; the dense product wraps to 0
    d = jnp.full((2, 200), 2, dtype=jnp.int64).at[0, 0].set(5)
    for layout in (xs.sparse_coo, xs.sparse_csr):
        a = xs.to_sparse(d, layout=layout, fill_value=2)
        assert a.nnz == 1
        assert int(xs.prod(a)) == int(jnp.prod(d)) == 0
        assert_sparse_equal(xs.prod(a, axis=1), jnp.prod(d, axis=1))
    c = xs.to_sparse_coo(jnp.full((70,), 3, dtype=jnp.int32), fill_value=3)
    assert int(xs.prod(c)) == int(jnp.prod(jnp.full((70,), 3, dtype=jnp.int32)))


@pytest.mark.parametrize("solver", ["cg", "bicgstab", "gmres"])
def test_iterative_solvers_on_immutable_arrays(solver: str) -> None:
    # GMRES keeps its basis in one array written in place; JAX's arrays cannot be written, so it stacks a list
    rng = np.random.default_rng(5)
    host = rng.standard_normal((12, 12)) * (rng.random((12, 12)) < 0.3)
    host = host + host.T if solver == "cg" else host
    host = host + np.diag(np.abs(host).sum(axis=1) + 1.0)
    b = np.arange(1.0, 13.0)
    kwargs = {"restart": 4} if solver == "gmres" else {}
    x, info = getattr(xs.linalg, solver)(xs.to_sparse_csr(jnp.asarray(host)), jnp.asarray(b), rtol=1e-12, **kwargs)
    assert info == 0 and isinstance(x, jax.Array)
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(host, b), rtol=1e-9)


@pytest.mark.parametrize("op", ["floor_divide", "remainder"])
def test_integer_division_by_zero_gives_zero_as_on_every_backend(op: str) -> None:
    """jax.numpy's own 7 // 0 is -2 (torch's on CUDA is -1): xsparse gives NumPy's 0 there too, so that a
    program moved between backends keeps its answer; the other elements are JAX's."""
    assert int(jnp.floor_divide(jnp.asarray(7), jnp.asarray(0))) != 0  # what the guard is for
    h1 = np.asarray([[7, 0, -7, 0], [0, 5, 0, -3]], dtype=np.int32)
    h2 = np.asarray([[0, 0, 2, 0], [3, 0, 0, 2]], dtype=np.int32)
    f = getattr(xs, op)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = getattr(np, op)(h1, h2)
    for layout in (xs.sparse_coo, xs.sparse_csr):
        x, y = xs.to_sparse(jnp.asarray(h1), layout=layout), xs.to_sparse(jnp.asarray(h2), layout=layout)
        r = f(x, y)
        assert r.fill_value == 0
        np.testing.assert_array_equal(np.asarray(xs.to_dense(r)), want)
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(h1), jnp.asarray(h2))), want)
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(h1), 0)), np.zeros_like(h1))
    np.testing.assert_array_equal(np.asarray(f(7, jnp.asarray(h2))), getattr(np, op)(np.int32(7), np.where(h2 == 0, 1, h2)) * (h2 != 0))
    # inside jax.jit the check of what the backend gives cannot read its result: the divisors are masked
    traced = jax.jit(lambda a, b: f(a, b))(jnp.asarray(h1), jnp.asarray(h2))
    np.testing.assert_array_equal(np.asarray(traced), want)
    # a bool dividend divides as the divisor's integer dtype: the check divides the call's own kinds
    flags = np.asarray([True, False, True])
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(flags), jnp.asarray([0, 0, 2]))), [0, 0, 0 if op == "floor_divide" else 1])


def test_matrix_rank_reads_rtol_relative_to_the_largest_singular_value() -> None:
    # jax.numpy's matrix_rank compares the singular values with rtol itself (3 here); the standard's
    # cutoff is rtol * the largest, 0.2 * 10 = 2
    x = jnp.asarray(np.diag([10.0, 4.0, 1.0]))
    for operand in (x, xs.to_sparse_csr(x)):
        assert int(xs.linalg.matrix_rank(operand, rtol=0.2)) == 2
        assert int(xs.linalg.matrix_rank(operand)) == 3
