"""Creation functions with ``layout=``: full, ones, eye, zeros_like / ones_like / full_like / empty_like,
and spdiags (every registered kernel, against the dense construction of the same backend).

A sparse ``full`` is the natural one: no specified element, and the fill value is the given value.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import load_native_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import strategies as S
import xsparse as xs
from xsparse.testing import assert_sparse_equal, to_numpy

SPARSE_LAYOUTS = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
LAYOUTS = [xs.strided, *SPARSE_LAYOUTS]

FEW = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SOME = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

load_native_kernels()


def _same_fill(a: Any, b: Any) -> bool:
    return bool(a == b) or (a != a and b != b)


@st.composite
def structures(draw: Any, layout: xs.Layout) -> dict[str, Any]:
    """A shape with the keyword arguments that give it batch, sparse and dense dimensions in ``layout``."""
    batch = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    bm, bn = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    m, n = draw(st.integers(0, 3)) * bm, draw(st.integers(0, 3)) * bn
    dense = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    shape = batch + (m, n) + dense
    kw: dict[str, Any] = {}
    if layout is xs.sparse_coo:
        kw["sparse_dim"] = draw(st.integers(0, len(shape)))
    elif layout is not xs.strided:
        kw["dense_dim"] = len(dense)
        if layout.is_blocked:
            kw["blocksize"] = (bm, bn)
    return {"shape": shape, "kw": kw}


def check_structure(r: Any, layout: xs.Layout, shape: tuple[int, ...], kw: dict[str, Any]) -> None:
    assert xs.layout_of(r) is layout and tuple(r.shape) == shape
    if layout is xs.strided:
        return
    assert r.nnz == 0
    if layout is xs.sparse_coo:
        assert r.sparse_dim() == kw["sparse_dim"]
    else:
        assert r.dense_dim() == kw["dense_dim"]
        assert r.blocksize == kw.get("blocksize", (1, 1))


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_full_and_ones(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """full(shape, v) is a sparse array with fill value v and no specified element; its dtype follows v."""
    s = data.draw(structures(layout), label="structure")
    value = data.draw(st.sampled_from([True, 3, -1.5, 2 + 1j, math.nan]), label="value")
    r = xs.full(s["shape"], value, layout=layout, backend=backend, **s["kw"])
    expected = xp.full(s["shape"], value)
    check_structure(r, layout, s["shape"], s["kw"])
    assert_sparse_equal(r, expected)
    if layout is not xs.strided:
        assert _same_fill(r.fill_value, value) and type(r.fill_value) is type(value)
    o = xs.ones(s["shape"], layout=layout, backend=backend, dtype="int32", **s["kw"])
    check_structure(o, layout, s["shape"], s["kw"])
    assert_sparse_equal(o, xp.ones(s["shape"], dtype=xp.int32))
    assert_sparse_equal(xs.ones(s["shape"], layout=layout, backend=backend, **s["kw"]), xp.ones(s["shape"]))
    f = xs.full(s["shape"], 2, dtype="float32", layout=layout, backend=backend, **s["kw"])
    assert_sparse_equal(f, xp.full(s["shape"], 2.0, dtype=xp.float32))


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_like_functions(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """zeros_like / ones_like / full_like / empty_like keep x's layout, structure and index dtype."""
    case = data.draw(S.dense_cases(xp, fill=None, max_batch_dims=1, max_dense_dims=1), label="case")
    x = case.sparse(layout)
    value = data.draw(st.sampled_from([0, 1, 7]), label="value")
    for r, fill in (
        (xs.zeros_like(x), 0), (xs.ones_like(x), 1), (xs.empty_like(x), 0), (xs.full_like(x, value), value)
    ):  # fmt: skip
        assert r.layout is layout and r.shape == x.shape and r.nnz == 0 and r.dtype == x.dtype
        assert r.dense_dim() == x.dense_dim() and r.index_dtype == x.index_dtype
        if layout is xs.sparse_coo:
            assert r.sparse_dim() == x.sparse_dim()
        else:
            assert r.blocksize == x.blocksize and r.batch_dim() == x.batch_dim()
        assert_sparse_equal(r, xp.astype(xp.full(x.shape, fill), x.dtype) if x.dtype != xp.bool else xp.full(x.shape, bool(fill)))
    other = xs.zeros_like(x, dtype="float32", layout=xs.sparse_coo)
    assert other.layout is xs.sparse_coo and other.dtype == xp.float32 and other.sparse_dim() == x.ndim - x.dense_dim()
    assert_sparse_equal(xs.ones_like(x, layout=xs.strided), xp.astype(xp.ones(x.shape), x.dtype), check_layout=xs.strided)
    d = case.array
    assert_sparse_equal(xs.zeros_like(d), xp.zeros_like(d), check_layout=xs.strided)
    # a strided x has no dense dimensions: with a compressed layout its leading ones become batch dimensions
    r = xs.full_like(d, 1, layout=xs.sparse_coo)
    assert r.sparse_dim() == d.ndim
    assert_sparse_equal(r, xp.astype(xp.ones_like(d), d.dtype))


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
@SOME
@given(n=st.integers(0, 4), m=st.none() | st.integers(0, 4), k=st.integers(-5, 5))
def test_eye(backend: str, xp: Any, layout: xs.Layout, n: int, m: int | None, k: int) -> None:
    """eye(n, m, k=) specifies exactly its diagonal (whole blocks of it for BSR/BSC)."""
    cols = n if m is None else m
    kw: dict[str, Any] = {"blocksize": (1, 1) if n * cols == 0 or math.gcd(n, cols) == 1 else (math.gcd(n, cols),) * 2} if layout.is_blocked else {}
    r = xs.eye(n, m, k=k, layout=layout, backend=backend, dtype="float64", **kw)
    assert_sparse_equal(r, xp.eye(n, m, k=k, dtype=xp.float64), check_layout=layout)
    if layout in (xs.sparse_coo, xs.sparse_csr, xs.sparse_csc):
        assert r.nnz == int(np.count_nonzero(np.eye(n, m, k=k)))
    assert xs.eye(2, layout=layout, backend=backend, **({"blocksize": (1, 1)} if layout.is_blocked else {})).dtype == xp.ones(1).dtype


def spdiags_reference(diagonals: np.ndarray, offsets: list[int], shape: tuple[int, int]) -> np.ndarray:
    out = np.zeros(shape, dtype=diagonals.dtype)
    for k, off in enumerate(offsets):
        for j in range(min(diagonals.shape[1], shape[1])):
            if 0 <= j - off < shape[0]:
                out[j - off, j] = diagonals[k, j]
    return out


@pytest.mark.parametrize("layout", [None, *LAYOUTS], ids=str)
@SOME
@given(data=st.data())
def test_spdiags_every_kernel(backend: str, xp: Any, layout: xs.Layout | None, data: st.DataObject) -> None:
    """spdiags puts diagonals[k, j] at (j - offsets[k], j), as torch and SciPy do; every kernel, every layout."""
    m, n = data.draw(st.integers(0, 5), label="m"), data.draw(st.integers(0, 5), label="n")
    offsets = data.draw(st.lists(st.integers(-m - 1, n + 1), unique=True, max_size=4), label="offsets")
    length = data.draw(st.integers(0, 7), label="length")
    dtype = data.draw(st.sampled_from(["float64", "int32", "bool", "complex64"]), label="dtype")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    host = S.nonzero_values(rng, dtype, len(offsets) * length, 0).reshape(len(offsets), length)
    index_dtype = data.draw(st.sampled_from(["int32", "int64"]), label="offsets dtype")
    diagonals, off = xp.asarray(host), xp.asarray(np.asarray(offsets, dtype=index_dtype))
    expected = xp.asarray(spdiags_reference(host, offsets, (m, n)))
    results = [
        k.func(xp, diagonals, off, (m, n), xs.get_backend(backend))
        for k in xs.kernels("spdiags")
        if k.backend in (None, backend) and (k.supports is None or k.supports(xp, diagonals, off, (m, n), xs.get_backend(backend)) is None)
    ]
    assert results
    for r in results:
        assert_sparse_equal(r, expected, check_layout=xs.sparse_coo)
        assert r.is_coalesced() and r.nnz == int(np.count_nonzero(spdiags_reference(np.ones_like(host, dtype=bool), offsets, (m, n))))
    kw = {"blocksize": (1, 1)} if layout is not None and layout.is_blocked else {}
    r = xs.spdiags(diagonals, off, (m, n), layout, **kw)
    assert_sparse_equal(r, expected, check_layout=layout or xs.sparse_coo)
    if backend == "torch" and layout in (None, xs.sparse_coo, xs.sparse_csr, xs.sparse_csc) and m == n == length and all(-n < o < n for o in offsets) and dtype != "bool":
        # torch 2.x agrees only on square shapes with rows of length n: it raises on shorter rows ("negative
        # dimension"), misplaces the extra elements of longer ones, and its CSR result of a wide shape keeps
        # elements outside the array
        import warnings

        import torch

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse (CSR|CSC) tensor support is in beta")
            t = torch.sparse.spdiags(diagonals, off.to(torch.int64), (m, n), layout=None if layout is None else getattr(torch, str(layout)))
            np.testing.assert_array_equal(to_numpy(t.to_dense()), to_numpy(xs.to_dense(r)))


def test_spdiags_examples_and_errors(xp: Any) -> None:
    d = xp.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], dtype=xp.float64)
    r = xs.spdiags(d, xp.asarray([0, -1, 2]), (3, 3))
    assert_sparse_equal(r, xp.asarray([[1.0, 0.0, 9.0], [4.0, 2.0, 0.0], [0.0, 5.0, 3.0]], dtype=xp.float64), check_layout=xs.sparse_coo)
    one = xs.spdiags(xp.asarray([1.0, 2.0, 3.0], dtype=xp.float64), xp.asarray(1), (3, 3), layout=xs.sparse_csr)
    assert_sparse_equal(one, xp.asarray([[0.0, 2.0, 0.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]], dtype=xp.float64), check_layout=xs.sparse_csr)
    assert_sparse_equal(xs.spdiags([[1, 2]], [0], (2, 2), xs.strided, backend="numpy"), np.asarray([[1, 0], [0, 2]]))
    with pytest.raises(ValueError, match=r"spdiags: offsets must be distinct \(offsets=\[0, 0, 2\]\)\. Sum the diagonals of equal offset first\."):
        xs.spdiags(d, xp.asarray([0, 0, 2]), (3, 3))
    with pytest.raises(ValueError, match=r"spdiags: diagonals must be 2-D and offsets 1-D with one offset per row of diagonals \(diagonals\.shape=\(3, 3\), offsets\.shape=\(2,\)\)\. Give offsets"):
        xs.spdiags(d, xp.asarray([0, 1]), (3, 3))
    with pytest.raises(TypeError, match=r"spdiags: offsets must be integers \(dtype=float(32|64)\)\. Pass an integer array"):
        xs.spdiags(d, xp.asarray([0.0, 1.0, 2.0]), (3, 3))
    with pytest.raises(ValueError, match=r"spdiags: shape must be two non-negative sizes \(shape=\(3,\)\)\. Pass \(rows, columns\)\."):
        xs.spdiags(d, xp.asarray([0, 1, 2]), (3,))
    with pytest.raises(xs.InvariantError, match=r"spdiags: diagonals must be a strided array of the backend, got COOArray"):
        xs.spdiags(xs.to_sparse(d), xp.asarray([0, 1, 2]), (3, 3))
    with pytest.raises(ValueError, match=r"to_sparse\(layout=sparse_bsr\): converting to sparse_bsr needs a block shape"):
        xs.spdiags(d, xp.asarray([0, 1, 2]), (3, 3), xs.sparse_bsr)


def test_creation_errors() -> None:
    with pytest.raises(TypeError, match=r"full: fill_value must be a Python bool, int, float or complex \(fill_value='a', type=str\)\. Pass a Python scalar\."):
        xs.full((2,), "a", layout=xs.sparse_coo)
    with pytest.raises(xs.LayoutError, match=r"eye: layout must be strided or one of sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc \(layout=xsparse\.sparse_semi_structured\)\. Pass one of them\."):
        xs.eye(2, layout=xs.sparse_semi_structured)
    with pytest.raises(ValueError, match=r"eye: the number of rows and columns must be non-negative \(n_rows=-1, n_cols=2\)\. Pass sizes >= 0\."):
        xs.eye(-1, 2, layout=xs.sparse_csr)
    with pytest.raises(TypeError, match=r"zeros_like: x must be an xsparse array or a backend array, got list\. Pass an array\."):
        xs.zeros_like([1, 2])
    with pytest.raises(xs.LayoutError, match=r"ones: layout must be strided or a sparse layout such as sparse_csr"):
        xs.ones((2, 2), layout="csr")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"full_like: an empty sparse_bsr array needs a blocksize \(blocksize=None\)\. Pass blocksize=\(rows, columns\)\."):
        xs.full_like(np.zeros((2, 2)), 1.0, layout=xs.sparse_bsr)


def test_bound_namespace_creates_sparse(xp: Any) -> None:
    """A namespace bound to a sparse layout makes full / ones / eye sparse, as Array API code expects."""
    ns = xs.bound_namespace(xs.get_backend("numpy"), layout=xs.sparse_csr)
    assert ns.ones((2, 3)).layout is xs.sparse_csr and ns.ones((2, 3)).fill_value == 1.0
    assert ns.eye(3).layout is xs.sparse_csr and ns.eye(3).nnz == 3
    assert ns.full((2, 2), 5).fill_value == 5


def test_default_dtype_follows_the_device() -> None:
    # array_api_strict's "no_float64" device has float32 as its default real floating dtype
    strict = pytest.importorskip("array_api_strict")
    device = strict.Device("no_float64")
    made = [
        *(make((2, 3), device=device, backend="array_api_strict", layout=layout) for make in (xs.empty, xs.zeros) for layout in (xs.sparse_coo, xs.sparse_csr)),
        xs.eye(3, device=device, backend="array_api_strict", layout=xs.sparse_bsr, blocksize=(1, 1)),
        xs.sparse_coo_array(shape=(2, 3), device=device, backend="array_api_strict"),
    ]
    for a in made:
        assert a.dtype == strict.float32 and a.device == device, (a.layout, a.dtype, a.device)
    assert xs.zeros((2,), layout=xs.sparse_coo).dtype == np.float64


def test_strided_full_keeps_a_negative_zero(backend: str, xp: Any) -> None:
    # -0.0 == 0, but it is not the zero that zeros() writes; the backend's own full keeps its sign
    made = [
        xs.full((3,), -0.0, backend=backend),
        xs.full_like(xp.ones((3,)), -0.0),
        xs.full((2,), complex(-0.0, 0.0), backend=backend),
        xs.bound_namespace(backend).full((2,), -0.0),
    ]
    for a in made:
        assert np.signbit(np.real(to_numpy(a))).all(), a
    assert not np.signbit(to_numpy(xs.full((3,), 0.0, backend=backend))).any()


def test_asarray_checks_what_it_is_asked(backend: str, xp: Any) -> None:
    a = xs.asarray(xp.asarray([[1.0, 0.0], [0.0, 2.0]]), layout=xs.sparse_csr)
    with pytest.raises(ValueError, match=r"a conversion keeps the fill value \(array fill_value=0(\.0)?, requested 2\.0\)"):
        xs.asarray(a, layout=xs.sparse_coo, fill_value=2.0)
    with pytest.raises(ValueError, match=r"a conversion keeps the fill value"):
        xs.bound_namespace(backend, layout=xs.sparse_coo).asarray(a, fill_value=2.0)
    assert xs.asarray(a, layout=xs.sparse_coo, fill_value=0.0).layout is xs.sparse_coo
    with pytest.raises(ValueError, match=r"blocksize applies to sparse_bsr and sparse_bsc only"):
        xs.asarray(a, blocksize=(2, 2))
    assert xs.asarray(a, layout=xs.sparse_bsr, blocksize=(2, 2)).blocksize == (2, 2)
    sparse_only = r"^asarray: blocksize, fill_value, sparse_dim and dense_dim describe a sparse result, and this one is strided"
    with pytest.raises(ValueError, match=sparse_only):
        xs.asarray(xp.ones((2,)), fill_value=1.0)
    with pytest.raises(ValueError, match=sparse_only):
        xs.asarray(a, layout=xs.strided, blocksize=(1, 1))
    with pytest.raises(ValueError, match=sparse_only + r" \(layout=None, blocksize=None, fill_value=None, dense_dim=0\)"):
        xs.asarray(xp.ones((2,)), dense_dim=0)
    # torch's to_sparse(dense_dim=...), and the error of an impossible split names asarray
    h = xs.asarray(xp.ones((2, 2, 3)), layout=xs.sparse_csr, dense_dim=1)
    assert (h.layout, h.dense_dim(), tuple(h.values().shape)) == (xs.sparse_csr, 1, (4, 3))
    c = xs.asarray(xp.asarray([[1.0, 0.0], [0.0, 0.0]]), layout=xs.sparse_coo, sparse_dim=1)
    assert (c.sparse_dim(), c.dense_dim(), c.nnz) == (1, 1, 1)
    with pytest.raises(ValueError, match=r"^asarray: the array cannot be given layout=sparse_csr: a sparse_csr array needs 2 sparse dimensions"):
        xs.asarray(xp.ones((2, 2)), layout=xs.sparse_csr, dense_dim=1)
    # the standard: copy=False raises where a copy is needed, and a change of layout is one
    for obj, layout, what in [
        (a, xs.strided, "a sparse_csr array converted to strided is a copy"),
        (a, xs.sparse_coo, "a sparse_csr array converted to sparse_coo is a copy"),
        (xp.ones((2, 2)), xs.sparse_csr, "a sparse_csr array made from strided data is a copy"),
    ]:
        with pytest.raises(ValueError, match=rf"^asarray: copy=False but {what} \(layout={layout}\)\. Pass copy=None"):
            xs.asarray(obj, layout=layout, copy=False)
    assert xs.asarray(a, copy=False) is a
