"""Sparse arrays of other libraries (torch, SciPy, pydata/sparse, JAX BCOO and BCSR) and buffer objects: refused as
operands, converted by asarray from their components without densifying."""

from __future__ import annotations

import array
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import xsparse as xs
import xsparse.backends

torch = pytest.importorskip("torch")

D = np.array([[0, 1.5, 0, 2], [3, 0, 0, 0]])
TORCH_SPARSE = "torch sparse tensor .*Convert it with xsparse.asarray"


@pytest.fixture(autouse=True)
def _quiet() -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's "sparse CSR support is in beta"
        yield


def _dense(x: object) -> np.ndarray:
    return np.asarray(xs.to_backend(xs.to_dense(x), "numpy"))


# -- torch sparse tensors ---------------------------------------------------------------------------------


def test_torch_sparse_is_refused_as_operand() -> None:
    tc = torch.tensor(D).to_sparse()
    xs.layout_of(torch.tensor(D))  # a strided tensor puts torch.Tensor in the memo: the fast path must check too
    for call in (
        lambda: xs.layout_of(tc),
        lambda: xs.to_dense(tc),
        lambda: xs.to_sparse_csr(tc),
        lambda: xs.to_backend(tc, "numpy"),
        lambda: xs.sum(tc),
        lambda: xs.add(tc, 1.0),
        lambda: xs.matmul(xs.to_sparse_csr(torch.tensor(D)), tc.T),
    ):
        with pytest.raises(TypeError, match=TORCH_SPARSE):
            call()


def test_torch_sparse_refusal_names_the_function() -> None:
    """The refusal starts with the name of the function that was called, as every error of the namespace does."""
    tc = torch.tensor(D).to_sparse()
    a = xs.to_sparse_csr(torch.tensor(D))
    calls = {
        "add": lambda: xs.add(a, tc), "sin": lambda: xs.sin(tc), "matmul": lambda: xs.matmul(a, tc.T), "sum": lambda: xs.sum(tc),
        "sort": lambda: xs.sort(tc), "argmax": lambda: xs.argmax(tc), "unique_values": lambda: xs.unique_values(tc),
        "take": lambda: xs.take(a, tc, axis=0), "take_along_axis": lambda: xs.take_along_axis(a, tc, axis=0),
        "getitem": lambda: a[tc], "nonzero": lambda: xs.nonzero(tc), "sparse_mask": lambda: xs.sparse_mask(tc, a),
        "reshape": lambda: xs.reshape(tc, (8,)), "concat": lambda: xs.concat([a, tc]), "stack": lambda: xs.stack([tc]),
        "repeat": lambda: xs.repeat(a, tc), "tril": lambda: xs.tril(tc), "zeros_like": lambda: xs.zeros_like(tc),
        "astype": lambda: xs.astype(tc, "float32"), "result_type": lambda: xs.result_type(tc, a),
        "can_cast": lambda: xs.can_cast(tc, "float32"), "to_dense": lambda: xs.to_dense(tc),
        "to_backend": lambda: xs.to_backend(tc, "numpy"), "from_dlpack": lambda: xs.from_dlpack(tc),
        "meshgrid": lambda: xs.meshgrid(tc), "vecdot": lambda: xs.vecdot(a, tc), "clip": lambda: xs.clip(tc, 0, 1),
        "matrix_norm": lambda: xs.linalg.matrix_norm(tc), "to_sparse_semi_structured": lambda: xs.to_sparse_semi_structured(tc),
    }  # fmt: skip
    for name, call in calls.items():
        with pytest.raises(TypeError, match=f"^{name}: the operand is a torch sparse tensor .*Convert it with xsparse.asarray"):
            call()


def test_from_dlpack_refuses_what_has_no_dlpack() -> None:
    pytest.importorskip("scipy")
    import scipy.sparse as sp

    with pytest.raises(TypeError, match=r"^from_dlpack: the operand is a SciPy sparse matrix \(csr_matrix\).*xsparse.asarray"):
        xs.from_dlpack(sp.csr_matrix(D))
    with pytest.raises(TypeError, match=r"^from_dlpack: x must implement the DLPack protocol \(__dlpack__\), got list\. "):
        xs.from_dlpack([1, 2])


@pytest.mark.parametrize(
    "make",
    [
        lambda d: d.to_sparse(),
        lambda d: d.to_sparse_csr(),
        lambda d: d.to_sparse_csc(),
        lambda d: d.to_sparse_bsr((1, 2)),
        lambda d: d.to_sparse_bsc((2, 1)),
    ],
    ids=["coo", "csr", "csc", "bsr", "bsc"],
)
def test_asarray_torch_sparse_each_layout(make: object) -> None:
    t = make(torch.tensor(D))  # type: ignore[operator]
    a = xs.asarray(t)
    assert a.backend == "torch"
    assert a.layout.name == str(t.layout).removeprefix("torch.")
    np.testing.assert_array_equal(_dense(a), t.to_dense().numpy())
    b = xs.asarray(t, dtype="float32")
    assert str(b.dtype).split(".")[-1] == "float32"
    np.testing.assert_array_equal(_dense(b), D.astype(np.float32))
    c = xs.asarray(t, layout=xs.sparse_coo)
    assert c.layout is xs.sparse_coo
    np.testing.assert_array_equal(_dense(c), D)
    # complex values: a compressed tensor's values() alias refused torch.real ("Sparse CSR tensors do not
    # have strides"), so to_dense and real raised torch's error
    z = xs.asarray(make(torch.tensor(D) * (1 + 2j)))  # type: ignore[operator]
    np.testing.assert_array_equal(_dense(z), D * (1 + 2j))
    np.testing.assert_array_equal(_dense(xs.real(z)), D)


def test_asarray_torch_uncoalesced_hybrid_batched_empty() -> None:
    u = torch.sparse_coo_tensor([[0, 0, 1], [1, 1, 0]], [1.0, 2.0, 3.0], (2, 2))
    a = xs.asarray(u)
    assert a.nnz == 3 and not a.is_coalesced()
    np.testing.assert_array_equal(_dense(a), u.to_dense().numpy())
    h = torch.zeros(2, 3, 2, dtype=torch.float64)
    h[0, 1] = torch.tensor([1.0, 2.0])
    ht = h.to_sparse(2)
    np.testing.assert_array_equal(_dense(xs.asarray(ht)), h.numpy())
    bt = torch.stack([torch.tensor(D), 2 * torch.tensor(D)]).to_sparse_csr()
    np.testing.assert_array_equal(_dense(xs.asarray(bt)), bt.to_dense().numpy())
    z = torch.zeros(2, 3).to_sparse_csr()
    az = xs.asarray(z)
    assert az.nnz == 0
    np.testing.assert_array_equal(_dense(az), np.zeros((2, 3), np.float32))


def test_asarray_torch_sparse_keeps_autograd() -> None:
    d = torch.tensor(D, requires_grad=True)
    for t in (d.to_sparse(), d.to_sparse_csr()):
        a = xs.asarray(t)
        xs.sum(a).backward()
        assert d.grad is not None
        np.testing.assert_array_equal(d.grad.numpy(), (D != 0).astype(float))
        d.grad = None


# -- SciPy ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "bsr", "dia", "lil", "dok"])
@pytest.mark.parametrize("kind", ["array", "matrix"])
def test_asarray_scipy_each_format(fmt: str, kind: str) -> None:
    sp = pytest.importorskip("scipy.sparse")
    m = getattr(sp, f"{fmt}_{kind}")(D)
    a = xs.asarray(m)
    expected = {"csr": xs.sparse_csr, "csc": xs.sparse_csc, "coo": xs.sparse_coo, "bsr": xs.sparse_bsr}.get(fmt, xs.sparse_csr)
    assert a.layout is expected and a.backend == "numpy"
    np.testing.assert_array_equal(_dense(a), m.toarray())
    t = xs.asarray(m, backend="torch", dtype="float32", layout=xs.sparse_coo)
    assert t.backend == "torch" and t.layout is xs.sparse_coo and str(t.dtype).split(".")[-1] == "float32"
    np.testing.assert_array_equal(_dense(t), m.toarray().astype(np.float32))


@pytest.mark.parametrize("fmt", ["coo", "csr", "csc", "bsr"])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_asarray_scipy_keeps_the_index_dtype(fmt: str, index_dtype: Any) -> None:
    # COO's coordinates were widened to int64, where the compressed formats keep SciPy's int32 indices
    sp = pytest.importorskip("scipy.sparse")
    m = getattr(sp, f"{fmt}_array")(D)
    for name in ("coords", "indices", "indptr"):
        if hasattr(m, name):
            part = getattr(m, name)
            setattr(m, name, tuple(c.astype(index_dtype) for c in part) if isinstance(part, tuple) else part.astype(index_dtype))
    a = xs.asarray(m)
    assert a.index_dtype == index_dtype
    np.testing.assert_array_equal(_dense(a), D)


@pytest.mark.parametrize("fmt", ["csr", "coo", "dok"])
def test_asarray_scipy_one_dimensional(fmt: str) -> None:
    # SciPy's 1-D sparse arrays: a compressed layout has two sparse dimensions, so they become COO
    sp = pytest.importorskip("scipy.sparse")
    v = np.array([0.0, 1.5, 0.0, -2.0, 0.0])
    try:
        m = getattr(sp, f"{fmt}_array")(v)
    except (ValueError, TypeError):
        pytest.skip(f"this SciPy has no 1-D {fmt}_array")
    a = xs.asarray(m)
    assert a.layout is xs.sparse_coo and a.shape == (5,) and a.nnz == 2
    np.testing.assert_array_equal(_dense(a), v)
    with pytest.raises(ValueError, match="copy=False but the sparse array cannot be converted without a copy"):
        xs.asarray(m, copy=False)


def test_asarray_scipy_unsorted_and_uncoalesced() -> None:
    sp = pytest.importorskip("scipy.sparse")
    m = sp.csr_array((np.array([2.0, 1.0]), np.array([3, 1]), np.array([0, 2, 2])), shape=(2, 4))
    assert not m.has_sorted_indices
    a = xs.asarray(m)
    assert a.col_indices().tolist() == [1, 3]
    assert m.indices.tolist() == [3, 1]  # the user's matrix is not sorted in place
    with pytest.raises(ValueError, match="copy=False but the sparse array cannot be converted without a copy"):
        xs.asarray(m, copy=False)
    c = sp.coo_array((np.array([1.0, 2.0]), (np.array([0, 0]), np.array([1, 1]))), shape=(2, 2))
    ac = xs.asarray(c)
    assert not ac.is_coalesced() and ac.nnz == 2
    np.testing.assert_array_equal(_dense(ac), c.toarray())


@pytest.mark.parametrize("fmt", ["csr", "csc", "bsr"])
def test_asarray_scipy_compressed_with_duplicates_sums_them(fmt: str) -> None:
    # SciPy lets a compressed matrix repeat an index (the sum is meant): an element lookup read 1 of 3, and
    # torch refused the array (invariant 5.6); the sums keep a 0 (1 + -1)
    sp = pytest.importorskip("scipy.sparse")
    from xsparse.testing import check_invariants

    m = sp.csr_array((np.array([1.0, 2.0, 1.0, -1.0]), np.array([0, 0, 1, 1]), np.array([0, 2, 4])), shape=(2, 2))
    m = {"csr": m, "csc": sp.csc_array((m.data, m.indices, m.indptr), shape=(2, 2)), "bsr": sp.bsr_array((m.data.reshape(4, 1, 1), m.indices, m.indptr), shape=(2, 2))}[fmt]
    before = (m.data.copy(), m.indices.copy())
    for backend in ("numpy", "torch"):
        a = xs.asarray(m, backend=backend)
        check_invariants(a)
        assert a.nnz == 2
        np.testing.assert_array_equal(_dense(a), m.toarray())
        assert float(_dense(a[0, 0])) == 3.0
    np.testing.assert_array_equal(m.data, before[0])  # the user's matrix is summed on a copy
    np.testing.assert_array_equal(m.indices, before[1])


# -- pydata/sparse and JAX BCOO ---------------------------------------------------------------------------


def test_pydata_sparse_refused_and_converted() -> None:
    sparse = pytest.importorskip("sparse")
    s = sparse.COO.from_numpy(D)
    for call in (lambda: xs.to_dense(s), lambda: xs.to_backend(s, "numpy"), lambda: xs.layout_of(s)):
        with pytest.raises(TypeError, match="pydata/sparse array .*Convert it with xsparse.asarray"):
            call()
    with pytest.raises(TypeError, match="'sparse' is a library of sparse arrays, not a backend"):
        xs.to_backend(xs.to_sparse_csr(D), "sparse")
    a = xs.asarray(s)
    assert a.layout is xs.sparse_coo
    np.testing.assert_array_equal(_dense(a), D)
    np.testing.assert_array_equal(_dense(xs.asarray(sparse.GCXS.from_numpy(D), layout=xs.sparse_csr)), D)
    f = sparse.COO.from_numpy(np.array([[5.0, 1.0], [5.0, 5.0]]), fill_value=5.0)
    af = xs.asarray(f)
    assert af.fill_value == 5.0
    np.testing.assert_array_equal(_dense(af), f.todense())


def test_pydata_gcxs_matrices_become_csr_or_csc_over_their_buffers() -> None:
    sparse = pytest.importorskip("sparse")
    for axis, layout in ((0, xs.sparse_csr), (1, xs.sparse_csc)):
        g = sparse.GCXS.from_numpy(D, compressed_axes=[axis])
        a = xs.asarray(g, copy=False)
        assert a.layout is layout
        assert np.shares_memory(np.asarray(a.values()), g.data)
        np.testing.assert_array_equal(_dense(a), D)
    f = sparse.GCXS.from_numpy(np.where(D == 0, 5.0, D), compressed_axes=[0], fill_value=5.0)
    af = xs.asarray(f)
    assert af.layout is xs.sparse_csr and af.fill_value == 5.0
    np.testing.assert_array_equal(_dense(af), f.todense())
    # GCXS allows unsorted and repeated indices in a slice: sorted and summed on a copy, the layout kept
    for axes, indices in (([0], [1, 0]), ([1], [1, 1])):
        u = sparse.GCXS((np.array([1.0, 2.0]), np.array(indices), np.array([0, 2, 2])), shape=(2, 2), compressed_axes=axes)
        au = xs.asarray(u)
        assert au.layout is (xs.sparse_csr if axes == [0] else xs.sparse_csc)
        np.testing.assert_array_equal(_dense(au), u.todense())
        with pytest.raises(ValueError, match="copy=False but the sparse array cannot be converted without a copy"):
            xs.asarray(u, copy=False)
    # more than two dimensions, or several compressed axes: no compressed layout holds them, COO does
    g3 = sparse.GCXS.from_numpy(np.arange(8.0).reshape(2, 2, 2), compressed_axes=[0])
    assert xs.asarray(g3).layout is xs.sparse_coo
    np.testing.assert_array_equal(_dense(xs.asarray(g3)), np.arange(8.0).reshape(2, 2, 2))


@pytest.fixture
def jsp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """jax.experimental.sparse, in JAX's 64-bit mode. The generic backend registered for jax.numpy, and the
    mode, are undone afterwards: other tests list the registered backends."""
    jax = pytest.importorskip("jax")
    sparse = pytest.importorskip("jax.experimental.sparse")
    monkeypatch.setattr(xsparse.backends, "_EXTRA", dict(xsparse.backends._EXTRA))
    x64 = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        yield sparse
    finally:
        jax.config.update("jax_enable_x64", x64)


def test_asarray_jax_bcoo(jsp: Any) -> None:
    import jax.numpy as jnp

    b = jsp.BCOO.fromdense(jnp.asarray(D))
    a = xs.asarray(b)
    assert a.layout is xs.sparse_coo and a.backend == "jax.numpy"
    np.testing.assert_array_equal(_dense(a), D)
    # batch dimensions become sparse ones (JAX's own conversion, a copy), dense ones stay dense
    batched = jsp.BCOO.fromdense(jnp.asarray(np.stack([D, -D])), n_batch=1, n_dense=1, nse=3)
    a = xs.asarray(batched)
    assert a.layout is xs.sparse_coo and a.shape == (2, 2, 4) and a.sparse_dim() == 2 and a.dense_dim() == 1
    np.testing.assert_array_equal(_dense(a), np.stack([D, -D]))
    with pytest.raises(ValueError, match="copy=False but the sparse array cannot be converted without a copy"):
        xs.asarray(batched, copy=False)
    hybrid = xs.asarray(jsp.BCOO.fromdense(jnp.asarray(D), n_dense=1))
    assert hybrid.dense_dim() == 1 and hybrid.nnz == 2
    np.testing.assert_array_equal(_dense(hybrid), D)
    # padding entries (indices out of bounds, which JAX ignores) are left out
    from xsparse.testing import check_invariants

    padded = xs.asarray(jsp.BCOO.fromdense(jnp.asarray([[0.0, 1.0], [2.0, 0.0]]), nse=3))
    check_invariants(padded)
    assert padded.nnz == 2 and padded.is_coalesced()
    np.testing.assert_array_equal(_dense(xs.to_sparse_csr(padded)), [[0.0, 1.0], [2.0, 0.0]])
    out_of_bounds = jsp.BCOO((jnp.asarray([1.0, 5.0]), jnp.asarray([[0, 1], [2, 2]])), shape=(2, 2))
    assert float(xs.sum(xs.asarray(out_of_bounds))) == float(out_of_bounds.todense().sum()) == 1.0


def test_asarray_jax_bcsr(jsp: Any) -> None:
    import jax.numpy as jnp

    from xsparse.testing import check_invariants

    b = jsp.BCSR.fromdense(jnp.asarray(D))
    with pytest.raises(TypeError, match="matmul: the operand is a JAX BCSR array, a sparse array of another library"):
        xs.matmul(b, np.ones((4, 1)))  # refused as an operand, as a BCOO is
    a = xs.asarray(b, copy=False)  # the components as they are
    assert a.layout is xs.sparse_csr and a.backend == "jax.numpy"
    np.testing.assert_array_equal(_dense(a), D)
    # padding after the last row's entries (column indices out of bounds, which JAX ignores) is left out
    padded = xs.asarray(jsp.BCSR.fromdense(jnp.asarray(D), nse=5))
    check_invariants(padded)
    assert padded.nnz == 3
    np.testing.assert_array_equal(_dense(padded), D)
    # batch and dense dimensions are kept
    batched = xs.asarray(jsp.BCSR.fromdense(jnp.asarray(np.stack([D, 2 * D])), n_batch=1))
    assert batched.layout is xs.sparse_csr and batched.shape == (2, 2, 4) and batched.nnz == 3
    np.testing.assert_array_equal(_dense(batched), np.stack([D, 2 * D]))
    hybrid = xs.asarray(jsp.BCSR.fromdense(jnp.asarray(D)[:, :, None] * jnp.asarray([1.0, -1.0]), n_dense=1))
    assert hybrid.dense_dim() == 1
    np.testing.assert_array_equal(_dense(hybrid), D[:, :, None] * np.array([1.0, -1.0]))
    # a row with unsorted and repeated columns (JAX allows them, meaning their sum) is summed on a copy
    unsorted = jsp.BCSR((jnp.asarray([1.0, 2.0, 3.0]), jnp.asarray([2, 0, 2]), jnp.asarray([0, 3, 3])), shape=(2, 3))
    u = xs.asarray(unsorted)
    check_invariants(u)
    np.testing.assert_array_equal(_dense(u), np.asarray(unsorted.todense()))
    with pytest.raises(ValueError, match="copy=False but the sparse array cannot be converted without a copy"):
        xs.asarray(unsorted, copy=False)
    # batch elements with different numbers of entries have no batched compressed form
    ragged = jsp.BCSR.fromdense(jnp.asarray(np.stack([D, np.ones_like(D)])), n_batch=1)
    with pytest.raises(ValueError, match=r"asarray: a JAX BCSR array whose batch elements hold different numbers of entries .*x.to_bcoo\(\)"):
        xs.asarray(ragged)


# -- buffer objects ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_asarray_buffer_reads_the_buffer_format(backend: str) -> None:
    if backend == "array_api_strict":
        pytest.importorskip("array_api_strict")
    x = xs.asarray(array.array("d", [1, 2, 3]), backend=backend)
    assert x.shape == (3,) and str(x.dtype).split(".")[-1] == "float64"
    assert np.asarray(xs.to_backend(x, "numpy")).tolist() == [1.0, 2.0, 3.0]
    i = xs.asarray(array.array("i", [4, 5]), backend=backend)
    assert str(i.dtype).split(".")[-1] == "int32"
    assert np.asarray(xs.to_backend(i, "numpy")).tolist() == [4, 5]


def test_scipy_coo_edited_after_its_canonical_flag_is_not_trusted_as_coalesced() -> None:
    # SciPy's has_canonical_format is a cache: coordinates edited in place leave it True; an array taken as
    # coalesced with unsorted or repeated indices gave wrong answers to the kernels that trust the flag
    sp = pytest.importorskip("scipy.sparse")
    from xsparse.testing import assert_sparse_equal, to_numpy

    m = sp.coo_array((np.asarray([1.0, 2.0, 3.0]), (np.asarray([0, 1, 1]), np.asarray([2, 0, 1]))), shape=(2, 3))
    m.sum_duplicates()
    assert m.has_canonical_format and xs.asarray(m).is_coalesced()
    for cols in ([2, 1, 0], [2, 1, 1]):  # a row out of order, then a repeat
        m.coords[1][:] = cols
        assert m.has_canonical_format  # SciPy's stale flag
        a = xs.asarray(m)
        assert not a.is_coalesced()
        np.testing.assert_array_equal(to_numpy(xs.to_dense(a)), m.toarray())
        np.testing.assert_array_equal(to_numpy(xs.to_dense(xs.coalesce(a))), m.toarray())
        assert_sparse_equal(a @ np.ones(3), m.toarray() @ np.ones(3))
    # three dimensions: the order is lexicographic over every coordinate
    t = sp.coo_array((np.ones(3), (np.asarray([0, 0, 1]), np.asarray([1, 1, 0]), np.asarray([0, 2, 0]))), shape=(2, 2, 3))
    t.sum_duplicates()
    assert xs.asarray(t).is_coalesced()
    t.coords[2][:] = [2, 0, 0]
    assert not xs.asarray(t).is_coalesced()
