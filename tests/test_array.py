"""The sparse array classes: attributes, transposes, named indices, namespaces, protocols and repr."""

from __future__ import annotations

import re
from typing import Any

import array_api_compat
import numpy as np
import pytest

import xsparse as xs
from xsparse.backends import backend_of_array
from xsparse.testing import assert_sparse_equal, to_numpy

# 4 x 6 with an empty row; in 2 x 3 blocks the top-right block is empty
DENSE = [
    [0, 1, 0, 0, 0, 0],
    [0, 0, 0, 0, 0, 0],
    [3, 0, 4, 0, 0, 5],
    [0, 0, 0, 6, 0, 0],
]
NNZ = {xs.sparse_coo: 5, xs.sparse_csr: 5, xs.sparse_csc: 5, xs.sparse_bsr: 3, xs.sparse_bsc: 3}
COMPONENTS = {
    xs.sparse_coo: ["indices", "values"],
    xs.sparse_csr: ["crow_indices", "col_indices", "values"],
    xs.sparse_bsr: ["crow_indices", "col_indices", "values"],
    xs.sparse_csc: ["ccol_indices", "row_indices", "values"],
    xs.sparse_bsc: ["ccol_indices", "row_indices", "values"],
}


def _host(x: Any) -> np.ndarray:
    """The values of an array of any backend, on any device, as a NumPy copy."""
    return to_numpy(x)


def _make(xp: Any, layout: xs.Layout, dense: Any = DENSE, dtype: str = "float64", **kwargs: Any) -> xs.SparseArray:
    if layout.is_blocked:
        kwargs.setdefault("blocksize", (2, 3))
    return xs.to_sparse(xp.asarray(np.asarray(dense, dtype=dtype)), layout=layout, **kwargs)


def _hybrid(xp: Any, layout: xs.Layout) -> xs.SparseArray:
    """Shape (4, 6, 2): the sparse pattern of DENSE with a dense dimension of 2."""
    d = np.asarray(DENSE, dtype=np.float64)
    kwargs: dict[str, Any] = {"sparse_dim": 2} if layout is xs.sparse_coo else {"dense_dim": 1}
    return _make(xp, layout, np.stack([d, -d], axis=-1) + 0.0, **kwargs)  # + 0.0: no negative zeros


def _batched(xp: Any, layout: xs.Layout) -> xs.SparseArray:
    """Shape (2, 4, 6): two batches with the same number of specified elements."""
    d = np.asarray(DENSE, dtype=np.float64)
    return _make(xp, layout, np.stack([d, 2 * d[::-1, ::-1]]))


def _filled(fill: Any) -> np.ndarray:
    """DENSE with ``fill`` where it has zeros: converted with that fill value, the same pattern."""
    return np.where(np.asarray(DENSE) == 0, fill, np.asarray(DENSE))


# -- attributes -----------------------------------------------------------------------------------


def test_attributes(backend: str, xp: Any, layout: xs.Layout) -> None:
    dense = xp.asarray(np.asarray(DENSE, dtype=np.float64))
    s = _make(xp, layout)
    assert isinstance(s, xs.SparseArray)
    assert s.shape == (4, 6) and s.ndim == 2 and s.size == 24
    assert s.dtype == xp.float64
    assert s.device == array_api_compat.device(dense)
    assert s.layout is layout and s.backend == backend and s._backend is xs.get_backend(backend)
    assert s.fill_value == 0
    assert s.nnz == NNZ[layout]
    assert (s.sparse_dim(), s.dense_dim()) == (2, 0)
    assert s.is_sparse and s.is_coalesced()
    assert xs.layout_of(s) is layout
    assert list(s._components()) == COMPONENTS[layout]
    np.testing.assert_array_equal(_host(s.to_dense()), DENSE)


def test_attributes_batched_and_hybrid(xp: Any, layout: xs.Layout) -> None:
    h = _hybrid(xp, layout)
    assert (h.shape, h.ndim, h.size) == ((4, 6, 2), 3, 48)
    assert (h.sparse_dim(), h.dense_dim(), h.nnz) == (2, 1, NNZ[layout])
    b = _batched(xp, layout)
    assert (b.shape, b.ndim, b.size) == ((2, 4, 6), 3, 48)
    if layout is xs.sparse_coo:
        assert (b.sparse_dim(), b.dense_dim(), b.nnz) == (3, 0, 2 * NNZ[layout])
    else:
        assert (b.sparse_dim(), b.dense_dim(), b.nnz) == (2, 0, NNZ[layout]), "nnz counts one batch"
        assert b.batch_dim() == 1


def test_fill_value_and_dtypes(xp: Any, layout: xs.Layout) -> None:
    s = _make(xp, layout, dtype="int32")
    assert s.dtype == xp.int32 and s.fill_value == 0 and type(s.fill_value) is int
    c = _make(xp, layout, _filled(1.5), dtype="complex128", fill_value=1.5)
    assert c.dtype == xp.complex128 and c.fill_value == 1.5 and type(c.fill_value) is complex
    assert c.nnz == NNZ[layout]
    np.testing.assert_array_equal(_host(c.to_dense()), _filled(1.5))
    r = _make(xp, layout, _filled(-1), fill_value=-1)
    assert r.fill_value == -1.0 and type(r.fill_value) is float and r.nnz == NNZ[layout]


# -- transposes -----------------------------------------------------------------------------------


def _shares_memory(a: Any, b: Any) -> bool:
    if hasattr(a, "get"):  # CuPy
        import cupy

        return bool(cupy.shares_memory(a, b))
    if hasattr(a, "untyped_storage"):  # torch, CUDA tensors too
        return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())
    return bool(np.shares_memory(np.from_dlpack(a), np.from_dlpack(b)))


def test_transpose(xp: Any, layout: xs.Layout) -> None:
    s = _make(xp, layout)
    for t in (s.T, s.mT, xs.matrix_transpose(s)):
        assert t.layout is layout.transposed
        assert t.shape == (6, 4) and t.dtype == s.dtype and t.backend == s.backend
        np.testing.assert_array_equal(_host(t.to_dense()), np.asarray(DENSE).T)
        if layout.is_compressed:
            # a view: the same index arrays, reinterpreted, and the values (block-transposed for BSR/BSC)
            assert t.compressed_indices() is s.compressed_indices()
            assert t.plain_indices() is s.plain_indices()
            assert t.nnz == s.nnz
            if layout.is_blocked:
                assert t.blocksize == s.blocksize[::-1]
                assert _shares_memory(t.values(), s.values())
            else:
                assert t.values() is s.values()
        else:
            np.testing.assert_array_equal(_host(t._indices()), _host(s._indices())[::-1])
            assert t._values() is s._values()
    back = s.T.T
    assert back.layout is layout
    np.testing.assert_array_equal(_host(back.to_dense()), DENSE)


def test_transpose_of_batched(xp: Any, layout: xs.Layout) -> None:
    b = _batched(xp, layout)
    with pytest.raises(ValueError, match=r"T: the array must be 2-D, got ndim=3\. Use mT"):
        b.T
    t = b.mT
    assert t.layout is layout.transposed and t.shape == (2, 6, 4)
    np.testing.assert_array_equal(_host(t.to_dense()), np.swapaxes(_host(b.to_dense()), -1, -2))


def test_transpose_mixing_sparse_and_dense_dimensions(xp: Any, layout: xs.Layout) -> None:
    h = _hybrid(xp, layout)  # the last two dimensions are one sparse and one dense
    with pytest.raises(
        xs.LayoutError,
        match=rf"matrix_transpose: the last two dimensions of this {layout} array mix sparse and dense dimensions "
        r"\(shape=\(4, 6, 2\), dense_dim=1\)\. Convert with to_dense\(\) first",
    ):
        h.mT
    with pytest.raises(xs.LayoutError, match="mix sparse and dense"):
        xs.matrix_transpose(h)


def test_transpose_of_coo_dense_dimensions(xp: Any) -> None:
    d = np.arange(24.0).reshape(4, 3, 2)
    d[1] = 0
    s = xs.to_sparse_coo(xp.asarray(d), sparse_dim=1)
    t = s.mT
    assert (t.shape, t.sparse_dim(), t.dense_dim()) == ((4, 2, 3), 1, 2)
    assert t._indices() is s._indices()
    np.testing.assert_array_equal(_host(t.to_dense()), np.swapaxes(d, -1, -2))


# -- named indices --------------------------------------------------------------------------------

COMPRESSED_LAYOUTS = [xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
NAMES = ["crow_indices", "col_indices", "ccol_indices", "row_indices"]


@pytest.mark.parametrize("layout", COMPRESSED_LAYOUTS, ids=str)
def test_named_indices(xp: Any, layout: xs.Layout) -> None:
    s = _make(xp, layout)
    own = layout.index_names
    assert getattr(s, own[0])() is s.compressed_indices()
    assert getattr(s, own[1])() is s.plain_indices()
    for name in NAMES:
        if name in own:
            continue
        with pytest.raises(
            xs.LayoutError,
            match=rf"^{name}: a {layout} array has no {name} \(it has {own[0]} and {own[1]}\)\. Use {own[0]}\(\) / "
            rf"{own[1]}\(\), or compressed_indices\(\) / plain_indices\(\) which work for every compressed layout\.$",
        ):
            getattr(s, name)()


def test_crow_indices_of_csc(xp: Any) -> None:
    csc = _make(xp, xs.sparse_csc)
    with pytest.raises(xs.LayoutError, match=r"crow_indices: a sparse_csc array has no crow_indices"):
        csc.crow_indices()
    # and it is a TypeError, as torch raises for the wrong layout
    with pytest.raises(TypeError):
        csc.crow_indices()
    np.testing.assert_array_equal(_host(csc.ccol_indices()), [0, 1, 2, 3, 4, 4, 5])
    np.testing.assert_array_equal(_host(csc.row_indices()), [2, 0, 2, 3, 2])


# -- namespaces -----------------------------------------------------------------------------------


def test_array_namespace(backend: str, xp: Any, layout: xs.Layout) -> None:
    s = _make(xp, layout)
    ns = s.__array_namespace__()
    assert ns is xs.bound_namespace(backend)
    assert ns.__array_api_version__ == "2024.12"
    assert s.__array_namespace__(api_version="2023.12").__array_api_version__ == "2023.12"
    for name in ("float64", "float32", "int32", "int64", "bool", "complex128"):
        assert getattr(ns, name) is getattr(xp, name), name
    z = ns.zeros((2, 3), layout=xs.sparse_csr)
    assert isinstance(z, xs.SparseArray) and z.layout is xs.sparse_csr and z.backend == backend
    strided = ns.zeros((2, 3))
    # an empty sparse array takes the backend's default float dtype, as the strided zeros do
    assert z.dtype == strided.dtype and z.nnz == 0
    assert not isinstance(strided, xs.SparseArray) and backend_of_array(strided).name == backend
    assert backend_of_array(ns.asarray([1.0, 2.0])).name == backend
    # the sparse functions of xsparse, and dtypes that compare with the array's
    np.testing.assert_array_equal(_host(ns.to_dense(s)), DENSE)
    assert s.dtype == ns.float64
    # constructors that reach backend= only through **kwargs create on the namespace's backend too
    assert ns.sparse_csr_array([0, 1, 1], [0], [1.0]).backend == backend
    assert ns.sparse_bsc_array([0, 1], [0], [[[1.0]]]).backend == backend
    assert ns.sparse_coo_array([[0]], [1.0]).backend == backend
    # to_backend's backend is its target, not bound to the namespace's
    assert ns.to_backend(s, "numpy").backend == "numpy"
    assert xs.get_default_backend().name == "numpy", "the namespace's backend is the default only during a call"
    assert ns.set_default_backend is xs.set_default_backend and ns.to_dense is xs.to_dense, "nothing to bind"
    with pytest.raises(AttributeError, match="the xsparse namespace has no attribute 'no_such_function'"):
        ns.no_such_function


@pytest.mark.parametrize("backend_name", ["numpy", "array_api_strict"])
def test_bound_namespace_default_layout(backend_name: str, layout: xs.Layout) -> None:
    ns = xs.bound_namespace(backend_name, layout=layout)
    assert repr(ns) == f"xsparse namespace(backend={backend_name}, layout={layout})"
    kwargs: dict[str, Any] = {"blocksize": (2, 3)} if layout.is_blocked else {}
    for make in (ns.zeros, ns.empty):
        z = make((4, 6), **kwargs)
        assert isinstance(z, xs.SparseArray)
        assert (z.layout, z.shape, z.nnz, z.backend) == (layout, (4, 6), 0, backend_name)
    z32 = ns.zeros((4, 6), dtype=ns.float32, **kwargs)
    assert z32.dtype == ns.float32
    dense = ns.zeros((2, 3), layout=xs.strided)
    assert backend_of_array(dense).name == backend_name


def test_bound_namespace_csr_zeros() -> None:
    z = xs.bound_namespace("numpy", layout=xs.sparse_csr).zeros((2, 3))
    assert z.layout is xs.sparse_csr and z.backend == "numpy" and z.shape == (2, 3)
    np.testing.assert_array_equal(z.to_dense(), np.zeros((2, 3)))
    assert repr(xs.bound_namespace("torch")) == "xsparse namespace(backend=torch)"


# -- no implicit densification --------------------------------------------------------------------


def test_no_implicit_densification(xp: Any, layout: xs.Layout) -> None:
    s = _make(xp, layout)
    with pytest.raises(
        xs.DensificationError,
        match=rf"__array__: a {layout} array is not converted to a dense array implicitly \(shape=\(4, 6\)\)\. "
        r"Call to_dense\(\)",
    ):
        np.asarray(s)
    with pytest.raises(xs.DensificationError, match=r"Call to_dense\(\)"):
        np.array(s, dtype=np.float64)
    with pytest.raises(xs.DensificationError, match=rf"__dlpack__: a {layout} array has no DLPack representation.* Call to_dense\(\) first"):
        np.from_dlpack(s)
    # the device is the components' (nothing is exported), so that DLPack consumers can ask before __dlpack__
    if hasattr(s.values(), "get"):  # CuPy: kDLCUDA, the current GPU
        import cupy

        assert s.__dlpack_device__() == s.values().__dlpack_device__() == (2, cupy.cuda.Device().id)
    else:
        assert s.__dlpack_device__() == s.values().__dlpack_device__() == (1, 0)


def test_no_implicit_densification_torch(layout: xs.Layout) -> None:
    torch = pytest.importorskip("torch")
    s = _make(torch, layout)
    with pytest.raises(xs.DensificationError, match=r"a .* array has no DLPack representation.* Call to_dense\(\) first"):
        torch.from_dlpack(s)
    n = _make(np, layout)
    with pytest.raises(xs.DensificationError, match=r"Call to_dense\(\)"):
        torch.from_dlpack(n)


# -- repr -----------------------------------------------------------------------------------------


def _cases(xp: Any, layout: xs.Layout) -> dict[str, xs.SparseArray]:
    return {
        "plain": _make(xp, layout),
        "int32 indices": _make(xp, layout, dtype="int32", index_dtype="int32"),
        "empty": _make(xp, layout, np.zeros((4, 6))),
        "batched": _batched(xp, layout),
        "hybrid": _hybrid(xp, layout),
        "fill value": _make(xp, layout, _filled(-1.0), fill_value=-1.0),
    }


def test_repr_same_across_backends(backend: str, xp: Any, layout: xs.Layout) -> None:
    reference = _cases(np, layout)
    here = _cases(xp, layout)
    for case, s in here.items():
        assert repr(s).endswith(f", backend={backend})"), case
        expected = repr(reference[case]).replace("backend=numpy)", f"backend={backend})")
        assert repr(s) == expected, case
        assert repr(xs.to_backend(reference[case], backend)) == expected, case


def test_repr_format(layout: xs.Layout) -> None:
    s = _make(np, layout)
    text = repr(s)
    assert text.startswith("sparse_array(")
    assert re.findall(r"(\w+)=", text.split("shape=")[0]) == COMPONENTS[layout]
    assert text.endswith(f"shape=(4, 6), nnz={NNZ[layout]}, dtype=float64, layout={layout}, backend=numpy)")
    assert "fill_value" not in text
    lines = text.splitlines()
    assert all(line.startswith(" " * len("sparse_array(")) for line in lines[1:] if line), "components are aligned"


def test_repr_csr_exact() -> None:
    s = xs.to_sparse_csr(np.asarray([[0, 0, 1, 0], [1, 2, 0, 0], [0, 0, 0, 0]], dtype=np.float64))
    assert repr(s) == (
        "sparse_array(crow_indices=[0, 1, 3, 3],\n"
        "             col_indices=[2, 0, 1],\n"
        "             values=[1., 1., 2.],\n"
        "             shape=(3, 4), nnz=3, dtype=float64, layout=sparse_csr, backend=numpy)"
    )


def test_repr_fill_value_only_when_nonzero(xp: Any, layout: xs.Layout) -> None:
    assert "fill_value" not in repr(_make(xp, layout, fill_value=0))
    assert "fill_value" not in repr(_make(xp, layout, dtype="complex128"))
    text = repr(_make(xp, layout, _filled(-1.0), fill_value=-1.0))
    assert re.search(r"layout=\w+, fill_value=-1\.0, backend=", text)
    assert "fill_value=True" in repr(_make(xp, layout, _filled(1) == 0, dtype="bool", fill_value=True))


def test_repr_empty(xp: Any, layout: xs.Layout) -> None:
    s = _make(xp, layout, np.zeros((4, 6)))
    text = repr(s)
    assert "nnz=0" in text and "values=[]" in text
    if layout is xs.sparse_coo:
        assert "indices=[], shape=(2, 0)" in text
    else:
        compressed = 2 if layout.is_blocked else (4 if layout.compressed_dim == 0 else 6)
        assert f"{layout.index_names[0]}=[{', '.join(['0'] * (compressed + 1))}]" in text
        assert f"{layout.index_names[1]}=[], shape=(0,)" in text


def test_repr_batched_and_hybrid(xp: Any, layout: xs.Layout) -> None:
    b = repr(_batched(xp, layout))
    assert "shape=(2, 4, 6)" in b
    h = repr(_hybrid(xp, layout))
    assert f"shape=(4, 6, 2), nnz={NNZ[layout]}" in h
    if layout.is_compressed:
        # one row of compressed indices per batch
        assert re.search(rf"{layout.index_names[0]}=\[\[0, [^\]]*\],\n\s+\[0, ", b)


def test_repr_of_torch_values_that_do_not_export() -> None:
    """Values that require grad, carry a lazy conjugate or have a dtype NumPy lacks still print."""
    torch = pytest.importorskip("torch")
    indices = torch.tensor([[0, 2]])
    grad = xs.sparse_coo_array(indices, torch.tensor([1.0, 2.0], requires_grad=True), (3,))
    assert "values=[1., 2.]," in repr(grad)
    conj = xs.sparse_coo_array(indices, torch.tensor([1 + 2j, 3j]).conj(), (3,))
    assert "values=[1.-2.j, 0.-3.j]," in repr(conj)
    neg = xs.sparse_coo_array(indices, torch.tensor([1 + 2j, 3j])._neg_view(), (3,))
    assert "values=[-1.-2.j, -0.-3.j]," in repr(neg)
    bf16 = xs.sparse_coo_array(indices, torch.tensor([1.0, 2.5], dtype=torch.bfloat16), (3,))
    assert "values=[1. , 2.5]," in repr(bf16) and "dtype=bfloat16" in repr(bf16)


def test_bool_of_one_element_and_ambiguity(backend: str, xp: Any) -> None:
    one = xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([2.0]), (1,))
    assert bool(one) is True
    assert bool(xs.sparse_coo_array(shape=(1, 1), backend=backend)) is False
    many = xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([2.0]), (3,))
    with pytest.raises(ValueError, match=r"^__bool__: the truth value of an array with 3 elements is ambiguous \(shape=\(3,\)\)\. Reduce it first"):
        bool(many)


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_bsc], ids=str)
def test_matrix_transpose_of_two_dense_dimensions(xp: Any, layout: xs.Layout) -> None:
    dense = np.arange(2 * 4 * 2 * 3, dtype=np.float64).reshape(2, 4, 2, 3)
    blocksize = (1, 2) if layout.is_blocked else None
    a = xs.to_sparse(xp.asarray(dense), layout=layout, dense_dim=2, blocksize=blocksize)
    t = a.mT
    assert t.layout is layout and t.shape == (2, 4, 3, 2)
    assert_sparse_equal(t, xp.asarray(np.swapaxes(dense, -1, -2)))


def test_to_backend_resolves_torch_views_and_autograd() -> None:
    torch = pytest.importorskip("torch")
    conj = torch.tensor([1 + 2j, 3j]).conj()
    np.testing.assert_array_equal(xs.to_backend(conj, "numpy"), np.asarray([1 - 2j, -3j]))
    neg = torch.tensor([1.0, 2.0]).neg().conj()  # a lazily negated view for complex, a plain negation for real
    np.testing.assert_array_equal(xs.to_backend(neg, "numpy"), np.asarray([-1.0, -2.0]))
    grad = torch.tensor([1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(xs.to_backend(grad, "numpy"), np.asarray([1.0, 2.0]))


def test_pickle_and_deepcopy(backend: str, xp: Any, layout: xs.Layout) -> None:
    import copy
    import pickle

    d = xp.asarray(np.asarray([[[0.0, 1.5, 0.0, 2.0], [3.0, 0.0, 0.0, 0.0]], [[0.0, 0.0, 4.0, 0.0], [0.0, 6.0, 0.0, 7.0]]]))
    a = xs.to_sparse(d, layout=layout, **({"blocksize": (1, 2)} if layout.is_blocked else {}))
    for r in (pickle.loads(pickle.dumps(a)), copy.deepcopy(a)):
        assert type(r) is type(a) and r.layout is a.layout and r.shape == a.shape and r.fill_value == a.fill_value
        assert r._backend is a._backend and r._xp is a._xp
        assert_sparse_equal(r, d)
    # an uncoalesced COO array keeps its duplicates, and its flag
    u = xs.sparse_coo_array(xp.asarray([[0, 0], [1, 1]]), xp.asarray([1.0, 2.0]), (2, 2))
    r = pickle.loads(pickle.dumps(u))
    assert not r.is_coalesced() and r.nnz == 2
    assert_sparse_equal(r, xs.to_dense(u))
    f = pickle.loads(pickle.dumps(xs.to_sparse(xp.asarray([1.0, 2.0, 2.0]), fill_value=2.0)))
    assert f.fill_value == 2.0 and f.nnz == 1


def test_iteration(xp: Any) -> None:
    a = xs.to_sparse(xp.asarray(np.asarray([[1.0, 0.0], [0.0, 2.0]])), layout=xs.sparse_csr)
    rows = list(a)
    assert len(rows) == 2 and all(r.layout is xs.sparse_coo for r in rows)
    assert [np.asarray(to_numpy(xs.to_dense(r))).tolist() for r in rows] == [[1.0, 0.0], [0.0, 2.0]]
    with pytest.raises(TypeError, match=r"^__iter__: iteration over a 0-d array \(shape=\(\)\)\. Read its value"):
        list(a[0, 0])


def test_torch_in_place_operators_write_into_the_tensor() -> None:
    # torch's own D += S updates D in place; so does D op= A for an xsparse A (not a rebinding of D)
    torch = pytest.importorskip("torch")
    import operator

    s = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    a = xs.to_sparse(s)
    for op, dense_op in [(operator.iadd, operator.add), (operator.isub, operator.sub), (operator.imul, operator.mul), (operator.ipow, operator.pow)]:
        d = torch.arange(4.0).reshape(2, 2) + 1
        expected = dense_op(d.clone(), s)
        target = d
        d = op(d, a)
        assert d is target and type(d) is torch.Tensor
        torch.testing.assert_close(target, expected)
    i = torch.full((2, 2), 12)
    target = i
    i >>= xs.to_sparse(torch.tensor([[1, 0], [0, 3]]))
    assert i is target and i.tolist() == [[6, 12], [12, 1]]
    d = torch.ones(2, 2)
    d.add_(a)
    assert d.tolist() == [[2.0, 1.0], [1.0, 3.0]]
    assert type(torch.ones(2, 2) + a) is torch.Tensor  # the reflected operator still runs
    i = torch.ones(2, 2, dtype=torch.int64)
    with pytest.raises(ValueError, match=r"^add: an in-place operator keeps its left operand's dtype, which cannot hold the result's \(x1\.dtype=int64, result dtype=float32\)"):
        i += a
    assert i.dtype == torch.int64 and i.tolist() == [[1, 1], [1, 1]]
    v = torch.ones(2)
    with pytest.raises(ValueError, match=r"^add: an in-place operator writes into its left operand, and the result's shape differs"):
        v += a
