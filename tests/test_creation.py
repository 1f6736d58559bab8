"""Creation functions with ``layout=``: full, ones, eye, zeros_like / ones_like / full_like / empty_like,
and spdiags (every registered kernel, against the dense construction of the same backend).

A sparse ``full`` is the natural one: no specified element, and the fill value is the given value.
"""

from __future__ import annotations

import math
import re
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
            # torch's spdiags has no CUDA kernel: its answer from the CPU
            t = torch.sparse.spdiags(diagonals.cpu(), off.cpu().to(torch.int64), (m, n), layout=None if layout is None else getattr(torch, str(layout)))
            np.testing.assert_array_equal(to_numpy(t.to_dense()), to_numpy(xs.to_dense(r)))


def test_spdiags_examples_and_errors(xp: Any) -> None:
    d = xp.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], dtype=xp.float64)
    r = xs.spdiags(d, xp.asarray([0, -1, 2]), (3, 3))
    assert_sparse_equal(r, xp.asarray([[1.0, 0.0, 9.0], [4.0, 2.0, 0.0], [0.0, 5.0, 3.0]], dtype=xp.float64), check_layout=xs.sparse_coo)
    one = xs.spdiags(xp.asarray([1.0, 2.0, 3.0], dtype=xp.float64), xp.asarray(1), (3, 3), layout=xs.sparse_csr)
    assert_sparse_equal(one, xp.asarray([[0.0, 2.0, 0.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0]], dtype=xp.float64), check_layout=xs.sparse_csr)
    # the offset of one diagonal may also be a one-element 1-D array, as torch takes it
    one = xs.spdiags(xp.asarray([1.0, 2.0, 3.0], dtype=xp.float64), xp.asarray([-1]), (3, 3))
    assert_sparse_equal(one, xp.asarray([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 2.0, 0.0]], dtype=xp.float64), check_layout=xs.sparse_coo)
    assert_sparse_equal(xs.spdiags([[1, 2]], [0], (2, 2), xs.strided, backend="numpy"), np.asarray([[1, 0], [0, 2]]))
    with pytest.raises(ValueError, match=r"spdiags: offsets must be distinct \(offsets=\[0, 0, 2\]\)\. Sum the diagonals of equal offset first\."):
        xs.spdiags(d, xp.asarray([0, 0, 2]), (3, 3))
    with pytest.raises(ValueError, match=r"spdiags: diagonals must be 2-D and offsets 1-D with one offset per row of diagonals, or diagonals 1-D with one offset \(diagonals\.shape=\(3, 3\), offsets\.shape=\(2,\)\)\. Give offsets"):
        xs.spdiags(d, xp.asarray([0, 1]), (3, 3))
    with pytest.raises(TypeError, match=r"spdiags: offsets must be integers \(dtype=float(32|64)\)\. Pass an integer array"):
        xs.spdiags(d, xp.asarray([0.0, 1.0, 2.0]), (3, 3))
    with pytest.raises(ValueError, match=r"spdiags: shape must be two non-negative sizes \(shape=\(3,\)\)\. Pass \(rows, columns\)\."):
        xs.spdiags(d, xp.asarray([0, 1, 2]), (3,))
    with pytest.raises(xs.InvariantError, match=r"spdiags: diagonals must be a strided array of the backend, got COOArray"):
        xs.spdiags(xs.to_sparse(d), xp.asarray([0, 1, 2]), (3, 3))
    with pytest.raises(ValueError, match=r"^spdiags: the result cannot be given layout=sparse_bsr: converting to sparse_bsr needs a block shape"):
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


# -- review A: creation functions (each test failed before its fix) -------------------------------------


@pytest.mark.parametrize("make", [xs.zeros_like, xs.ones_like, xs.empty_like, lambda x, **kw: xs.full_like(x, 2.5, **kw)], ids=["zeros", "ones", "empty", "full"])
@pytest.mark.parametrize("target", [xs.sparse_csr, xs.sparse_csc, xs.sparse_coo, xs.sparse_bsc, xs.strided], ids=str)
def test_like_of_a_blocked_array_in_another_layout(xp: Any, make: Any, target: xs.Layout) -> None:
    """F1: x's blocksize is inherited only by a blocked result; a CSR/CSC one of a BSR x needs none."""
    d = xp.reshape(xp.arange(16.0), (4, 4))
    for x in (xs.to_sparse_bsr(d, blocksize=(2, 2)), xs.to_sparse_bsc(d, blocksize=(2, 2))):
        r = make(x, layout=target)
        assert xs.layout_of(r) is target and tuple(r.shape) == (4, 4)
        fill = {xs.zeros_like: 0.0, xs.ones_like: 1.0, xs.empty_like: 0.0}.get(make, 2.5)
        if make is not xs.empty_like or target is not xs.strided:  # a strided empty_like holds anything
            assert_sparse_equal(r, xp.full((4, 4), fill, dtype=x.dtype), check_layout=target)
        if target.is_blocked:
            assert r.blocksize == (2, 2)
        elif target.is_compressed:
            # the oracle: the same empty array made by zeros, which needs no blocksize either
            oracle = xs.zeros((4, 4), layout=target, dtype=x.dtype, backend=x._backend)
            assert r.blocksize == oracle.blocksize == (1, 1) and r.nnz == oracle.nnz == 0


@pytest.mark.parametrize("fn", ["tril", "triu"])
def test_triangle_takes_any_integer_k_and_clamps_it(backend: str, xp: Any, fn: str) -> None:
    """F2, F3: k is read by operator.index (NumPy and 0-d integers, as eye and np.tril take it), and clamped
    into [-rows, cols] before the backend sees it: a k at the int64 edge gives the dense oracle's answer."""
    d = xp.reshape(xp.arange(1.0, 7.0), (2, 3))
    ours = getattr(xs, fn)
    i, j = np.indices((2, 3))
    for k in (np.int64(1), np.asarray(-1), 2**63 - 1, -(2**63), 2**62, -(2**70), 3, -2):
        # the oracle: NumPy's definition (tril keeps j - i <= k), as a comparison, which takes any Python int
        # (np.tril itself overflows below -2**63 + 3)
        expected = np.where((j - i <= int(k)) if fn == "tril" else (j - i >= int(k)), to_numpy(d), 0.0)
        if abs(int(k)) < 2**62:
            np.testing.assert_array_equal(expected, getattr(np, fn)(to_numpy(d), k=int(k)))
        for operand in (d, xs.to_sparse_csr(d), xs.to_sparse_coo(d)):
            np.testing.assert_array_equal(to_numpy(xs.to_dense(ours(operand, k=k))), expected)
    with pytest.raises(TypeError, match=rf"^{fn}: k must be an integer, not a bool \(k=True\)\. Pass the diagonal's offset as an integer\.$"):
        ours(d, k=True)
    with pytest.raises(TypeError, match=rf"^{fn}: k must be an integer, got str \(k='1'\)\. Pass the diagonal's offset"):
        ours(xs.to_sparse_csr(d), k="1")


def test_dtype_names_are_the_standards(backend: str, xp: Any) -> None:
    """F4: a string dtype is one of the standard's names (float16/bfloat16 where the backend has them), the
    same dtype on every backend; a backend's aliases and other attributes are refused, naming the function."""
    for name in ("bool", "int8", "uint16", "int64", "float32", "float64", "complex64"):
        assert xs.zeros((2,), dtype=name, backend=backend).dtype == getattr(xp, name)
        assert xs.zeros((2, 2), dtype=name, backend=backend, layout=xs.sparse_csr).dtype == getattr(xp, name)
    # the oracle for the Python type float: float64, on every backend
    assert xs.zeros((2,), dtype=float, backend=backend).dtype == xp.float64
    for alias in ("float", "int", "double", "half", "long", "cfloat", "short", "e", "pi", "sin", "asarray"):
        with pytest.raises(TypeError, match=rf"^zeros: '{alias}' is not a dtype name of the Array API standard \(dtype='{alias}'\)\. Pass one of 'bool', 'int8'"):
            xs.zeros((2,), dtype=alias, backend=backend)
        with pytest.raises(TypeError, match=rf"^zeros: '{alias}' is not a dtype name"):
            xs.zeros((2, 2), dtype=alias, backend=backend, layout=xs.sparse_csr)
    with pytest.raises(TypeError, match=r"^asarray: 'float' is not a dtype name"):
        xs.asarray([1.0], dtype="float", backend=backend)
    with pytest.raises(TypeError, match=r"^sparse_compressed_array\(layout=sparse_csr\): 'long' is not a dtype name"):
        xs.sparse_csr_array([0, 1], [0], [1.0], dtype="long", backend=backend)
    if hasattr(xp, "float16"):
        assert xs.zeros((2,), dtype="float16", backend=backend).dtype == xp.float16
    else:
        with pytest.raises(TypeError, match=rf"^eye: the backend \S+ has no dtype 'float16' \(dtype='float16'\)\. Pass one of the backend's dtypes\.$"):
            xs.eye(2, dtype="float16", backend=backend)
    # a dtype object of another library is translated by its name, as before
    assert xs.zeros((2,), dtype=np.dtype("int32"), backend=backend).dtype == xp.int32


def test_structure_arguments_that_do_not_apply_are_refused(xp: Any, backend: str) -> None:
    """F5, F6: blocksize, sparse_dim and dense_dim are checked as to_sparse checks them, never ignored."""
    strided_only = r"blocksize, sparse_dim and dense_dim describe a sparse result, and this one is strided"
    for make in (xs.zeros, xs.ones, xs.empty, lambda s, **kw: xs.full(s, 1.0, **kw)):
        for kw in ({"blocksize": (2, 2)}, {"dense_dim": 0}, {"sparse_dim": 2}, {"blocksize": (0, 2), "dense_dim": -1}):
            with pytest.raises(ValueError, match=rf"^(zeros|ones|empty|full): {strided_only} \(layout=strided"):
                make((4, 4), backend=backend, **kw)
        with pytest.raises(ValueError, match=r"^(zeros|ones|empty|full): a sparse_csr array has exactly 2 sparse dimensions \(sparse_dim=1\)\. Leave sparse_dim out"):
            make((2, 3, 4), layout=xs.sparse_csr, sparse_dim=1, backend=backend)
        with pytest.raises(ValueError, match=r"^(zeros|ones|empty|full): blocksize applies to sparse_bsr and sparse_bsc only, not to sparse_coo \(blocksize=\(2, 2, 2\)\)\. Leave it out"):
            make((4, 4), layout=xs.sparse_coo, blocksize=(2, 2, 2), backend=backend)
        with pytest.raises(ValueError, match=r"^(zeros|ones|empty|full): sparse_dim \+ dense_dim must equal the number of dimensions of shape \(2, 3, 4\) \(sparse_dim=1, dense_dim=1\)\. Give only one"):
            make((2, 3, 4), layout=xs.sparse_coo, sparse_dim=1, dense_dim=1, backend=backend)
        for name in ("dense_dim", "sparse_dim"):
            with pytest.raises(TypeError, match=rf"^(zeros|ones|empty|full): {name} must be an integer, got float \({name}=1\.0\)\. Pass an integer\.$"):
                make((2, 3, 4), layout=xs.sparse_coo, backend=backend, **{name: 1.0})
        with pytest.raises(TypeError, match=r"^(zeros|ones|empty|full): dense_dim must be an integer, got float"):
            make((2, 3, 4), layout=xs.sparse_csr, dense_dim=1.0, backend=backend)
    # what does apply still works, against to_sparse of the dense array (the oracle)
    z = xs.zeros((2, 3, 4), layout=xs.sparse_csr, sparse_dim=2, dense_dim=1, backend=backend)
    oracle = xs.to_sparse_csr(xp.zeros((2, 3, 4)), dense_dim=1)
    assert (z.sparse_dim(), z.dense_dim(), z.batch_dim()) == (oracle.sparse_dim(), oracle.dense_dim(), oracle.batch_dim())
    c = xs.zeros((2, 3, 4), layout=xs.sparse_coo, sparse_dim=1, dense_dim=2, backend=backend)
    assert (c.sparse_dim(), c.dense_dim()) == (1, 2)
    assert xs.zeros((2, 2), layout=xs.sparse_csr, blocksize=(1, 1), backend=backend).blocksize == (1, 1)
    # eye and spdiags: a blocksize that a non-blocked result would ignore
    for layout in (None, xs.strided, xs.sparse_coo):
        with pytest.raises(ValueError, match=rf"^eye: blocksize applies to sparse_bsr and sparse_bsc only, not to {layout or xs.strided} \(blocksize=\(2, 2\)\)\. Leave it out"):
            xs.eye(3, layout=layout, blocksize=(2, 2), backend=backend)
    with pytest.raises(ValueError, match=r"^spdiags: blocksize applies to sparse_bsr and sparse_bsc only, not to sparse_coo \(blocksize=\(2, 2\)\)\. Leave it out"):
        xs.spdiags([[1.0]], [0], (1, 1), xs.sparse_coo, blocksize=(2, 2), backend=backend)
    with pytest.raises(ValueError, match=r"^spdiags: blocksize applies to sparse_bsr and sparse_bsc only, not to sparse_coo"):
        xs.spdiags([[1.0]], [0], (1, 1), blocksize=(2, 2), backend=backend)
    with pytest.raises(ValueError, match=r"^eye: the result cannot be given layout=sparse_csr: blocksize applies to sparse_bsr and sparse_bsc only"):
        xs.eye(4, layout=xs.sparse_csr, blocksize=(2, 2), backend=backend)
    assert_sparse_equal(xs.eye(2, layout=xs.sparse_csr, blocksize=(1, 1), dtype="float64", backend=backend), xp.eye(2, dtype=xp.float64))


def test_sparse_compressed_array_checks_dense_dim_against_the_values(xp: Any, backend: str) -> None:
    """F5: a dense_dim given with the components must be the values' number of dense dimensions."""
    values = xp.asarray([[1.0, 2.0], [3.0, 4.0]], dtype=xp.float64)
    h = xs.sparse_csr_array([0, 1, 2], [0, 1], values, (2, 3, 2), dense_dim=1, backend=backend)
    assert h.dense_dim() == 1
    assert_sparse_equal(h, xp.asarray([[[1.0, 2.0], [0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [3.0, 4.0], [0.0, 0.0]]], dtype=xp.float64))
    with pytest.raises(ValueError, match=r"^sparse_compressed_array\(layout=sparse_csr\): dense_dim=0 differs from the number of dense dimensions of the values \(1, values\.shape=\(2, 2\)\)\. Leave dense_dim out"):
        xs.sparse_csr_array([0, 1, 2], [0, 1], values, (2, 3, 2), dense_dim=0, backend=backend)
    with pytest.raises(ValueError, match=r"^sparse_compressed_array\(layout=sparse_csr\): dense_dim=1 differs from the number of dense dimensions of the values \(0, values\.shape=\(2,\)\)"):
        xs.sparse_csr_array([0, 1, 2], [0, 1], [1.0, 2.0], (2, 3), dense_dim=1, backend=backend)
    blocks = xp.ones((1, 2, 2, 3), dtype=xp.float64)
    assert xs.sparse_bsr_array([0, 1], [0], blocks, (2, 2, 3), dense_dim=1, backend=backend).dense_dim() == 1
    with pytest.raises(ValueError, match=r"^sparse_compressed_array\(layout=sparse_bsr\): dense_dim=0 differs"):
        xs.sparse_bsr_array([0, 1], [0], blocks, (2, 2, 3), dense_dim=0, backend=backend)
    with pytest.raises(TypeError, match=r"^sparse_compressed_array\(layout=sparse_csr\): dense_dim must be an integer, got float \(dense_dim=1\.0\)"):
        xs.sparse_csr_array([0, 1, 2], [0, 1], values, dense_dim=1.0, backend=backend)


def test_negative_sizes_give_one_message(backend: str) -> None:
    """F7: zeros & co. refuse a negative size with one message, whatever the layout (the backends' differ)."""
    for layout in (xs.strided, xs.sparse_coo, xs.sparse_csr):
        for make in (xs.zeros, xs.ones, xs.empty):
            with pytest.raises(ValueError, match=r"^(zeros|ones|empty): the sizes of shape must be non-negative \(shape=\(-1, 3\)\)\. Pass sizes >= 0\.$"):
                make((-1, 3), layout=layout, backend=backend)
        with pytest.raises(ValueError, match=r"^full: the sizes of shape must be non-negative \(shape=\(-2,\)\)"):
            xs.full(-2, 1.0, layout=layout if layout is not xs.sparse_csr else xs.sparse_coo, backend=backend)


def test_eye_and_spdiags_name_themselves_in_conversion_errors(xp: Any, backend: str) -> None:
    """F8: eye and spdiags convert their result to the layout asked; the errors name them, not to_sparse."""
    with pytest.raises(ValueError, match=r"^eye: the result cannot be given layout=sparse_bsr: blocksize \(2, 2\) must divide the sparse dimensions \(3, 3\)"):
        xs.eye(3, layout=xs.sparse_bsr, blocksize=(2, 2), backend=backend)
    with pytest.raises(ValueError, match=r"^eye: the result cannot be given layout=sparse_bsr: converting to sparse_bsr needs a block shape \(blocksize=None\)\. Pass blocksize"):
        xs.eye(4, layout=xs.sparse_bsr, backend=backend)
    with pytest.raises(xs.LayoutError, match=r"^spdiags: layout must be strided or one of sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc \(layout='csr'\)\. Pass one of them\.$"):
        xs.spdiags([[1.0, 2.0]], [0], (2, 2), "csr", backend=backend)  # type: ignore[arg-type]
    e = xs.eye(4, layout=xs.sparse_bsr, blocksize=(2, 2), dtype="float64", backend=backend)
    assert e.blocksize == (2, 2)
    assert_sparse_equal(e, xp.eye(4, dtype=xp.float64))


def test_device_of_another_backend_is_refused_by_name(backend: str, xp: Any) -> None:
    """F9: a device the backend does not have gives one named error on the strided and the sparse path."""
    devices = xs.__array_namespace_info__(backend=backend).devices()
    foreign = "gpu" if backend != "numpy" else xs.__array_namespace_info__(backend="array_api_strict").devices()[0]
    coo = xs.asarray(xp.asarray([[1.0, 0.0]]), layout=xs.sparse_coo)
    calls = {
        "zeros": lambda: xs.zeros((2, 2), device=foreign, backend=backend),
        "ones": lambda: xs.ones((2, 2), device=foreign, layout=xs.sparse_csr, backend=backend),
        "full": lambda: xs.full((2, 2), 1.0, device=foreign, layout=xs.sparse_coo, backend=backend),
        "eye": lambda: xs.eye(2, device=foreign, layout=xs.sparse_csr, backend=backend),
        "arange": lambda: xs.arange(3, device=foreign, backend=backend),
        "linspace": lambda: xs.linspace(0.0, 1.0, 3, device=foreign, backend=backend),
        "asarray": lambda: xs.asarray(coo, device=foreign),
        "from_dlpack": lambda: xs.from_dlpack(coo, device=foreign),
        "sparse_coo_array": lambda: xs.sparse_coo_array([[0]], [1.0], device=foreign, backend=backend),
    }
    for op, call in calls.items():
        with pytest.raises(ValueError, match=rf"^{op}: device={re.escape(repr(foreign))} is not a device of backend '{backend}' \(devices=.*\)\. Pass one of xsparse\.__array_namespace_info__\(backend='{backend}'\)\.devices\(\)\.$"):
            call()
    # the backend's own devices still work, and so does what it accepts besides (torch's "cpu")
    for d in devices[:2]:  # array_api_strict's later ones hold no int64 indices
        assert xs.zeros((2, 2), device=d, layout=xs.sparse_csr, backend=backend).device == d
        assert xs.eye(2, device=d, backend=backend).device == d
    if backend == "torch":
        assert xs.zeros((2,), device="cpu", backend=backend).device == devices[0]


def test_layout_none_is_strided_everywhere(backend: str, xp: Any) -> None:
    """F11: layout=None (bound_namespace's spelling of strided) is taken by every creation function."""
    assert_sparse_equal(xs.zeros((2, 2), layout=None, backend=backend), xp.zeros((2, 2)), check_layout=xs.strided)
    assert_sparse_equal(xs.ones((2,), layout=None, backend=backend), xp.ones((2,)), check_layout=xs.strided)
    assert_sparse_equal(xs.full((2,), 3, layout=None, backend=backend), xp.full((2,), 3), check_layout=xs.strided)
    assert tuple(xs.empty((2, 3), layout=None, backend=backend).shape) == (2, 3)
    assert_sparse_equal(xs.eye(2, 3, k=1, layout=None, backend=backend), xp.eye(2, 3, k=1), check_layout=xs.strided)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
def test_unsigned_arange_out_of_range_raises_everywhere(backend: str, xp: Any, dtype: str) -> None:
    """F12: one answer on every backend. In range: the NumPy oracle's values; a value the dtype cannot hold:
    an OverflowError that says which (NumPy itself raises for a start below 0, wraps past a stop below 0)."""
    for args in [(0, 5), (5, 0, -1), (2, 9, 3), (3,), (0, 0)]:
        r = xs.arange(*args, dtype=dtype, backend=backend)
        np.testing.assert_array_equal(to_numpy(r), np.arange(*args, dtype=dtype))
        assert r.dtype == getattr(xp, dtype)
    for args, value in [((-3, 5), -3), ((5, -3, -1), -2), ((2**64, 2**64 + 2), 2**64)]:
        with pytest.raises(OverflowError, match=rf"^arange: the values from -?\d+ to -?\d+ do not fit in {dtype} \(value={value}, dtype={dtype}\)\. Pass bounds whose values lie in \[0, 2\*\*\d+\)"):
            xs.arange(*args, dtype=dtype, backend=backend)
    with pytest.raises(ValueError, match=r"^arange: step must not be zero \(step=0\)\. Pass a positive or negative step\.$"):
        xs.arange(0, 5, 0, dtype=dtype, backend=backend)
    with pytest.raises(ValueError, match=r"^arange: step must not be zero \(step=0\.0\)"):
        xs.arange(0.0, 5.0, 0.0, backend=backend)


def test_nested_sequences_of_arrays_give_named_errors(backend: str, xp: Any) -> None:
    """F13: ragged nesting, a None leaf and a promotion the backend refuses name asarray."""
    v = xs.asarray(xp.asarray([1.0, 0.0]), layout=xs.sparse_coo)
    with pytest.raises(ValueError, match=r"^asarray: the nested sequence is ragged: obj\[0\] has shape \(2,\) and obj\[1\] has shape \(1,\) \(len\(obj\)=2\)\. Give the elements"):
        xs.asarray([v, [2.5]])
    with pytest.raises(ValueError, match=r"^asarray: the nested sequence is ragged: obj\[1\]\[0\] has shape \(\) and obj\[1\]\[1\] has shape \(2,\)"):
        xs.asarray([[v, v], [1.0, v]])
    with pytest.raises(TypeError, match=r"^asarray: a nested sequence that holds arrays may hold only arrays and Python numbers besides, got NoneType \(element=None\)\. Replace it"):
        xs.asarray([v, None])
    # the oracle: the dense nesting of the same elements
    np.testing.assert_array_equal(to_numpy(xs.asarray([v, [2.5, 0.0]])), np.asarray([[1.0, 0.0], [2.5, 0.0]]))
    i = xs.asarray(xp.asarray([1, 0], dtype=xp.int32), layout=xs.sparse_coo)
    if backend == "array_api_strict":
        with pytest.raises(TypeError, match=r"^asarray: the arrays and the Python numbers of the nested sequence have no common dtype \(dtypes=\['int32'\], numbers=\['float'\]\)\. Pass dtype="):
            xs.asarray([i, [2.5, 0.5]])
    assert xs.asarray([i, [2.5, 0.5]], dtype="float64").dtype == xp.float64


def test_from_dlpack_takes_the_namespace_layout_as_asarray_does(backend: str, xp: Any) -> None:
    """F14: in a namespace with a default layout, from_dlpack of a sparse array gives asarray's layout."""
    d = xp.asarray([[1.0, 0.0], [0.0, 2.0]])
    x = xs.to_sparse_csr(d)
    for layout, blocks in ((xs.sparse_coo, None), (xs.sparse_csc, None), (xs.sparse_bsr, (1, 1)), (xs.sparse_csr, None)):
        ns = xs.bound_namespace(backend, layout=layout, blocksize=blocks)
        a, f = ns.asarray(x), ns.from_dlpack(x)
        assert a.layout is f.layout is layout
        assert_sparse_equal(f, d, check_layout=layout)
        assert ns.from_dlpack(d).layout is layout
    ns = xs.bound_namespace(backend, layout=xs.sparse_coo)
    assert ns.from_dlpack(xs.to_sparse_coo(d), copy=False).layout is xs.sparse_coo
    # copy=False: no conversion (it would copy), the array as it is, its buffers shared (the Array API
    # suite's test_from_dlpack takes back an array of another layout that an operation gave)
    kept = ns.from_dlpack(x, copy=False)
    assert kept.layout is xs.sparse_csr and kept.values() is x.values()
    assert ns.from_dlpack(x, copy=True).layout is xs.sparse_coo
    # asarray alike, unless the layout is named (then the conversion would copy, and copy=False refuses it)
    for space in (ns, xs.bound_namespace(backend, layout=xs.sparse_bsr, blocksize=(1, 1))):
        assert space.asarray(x, copy=False) is x or space.asarray(x, copy=False).values() is x.values()
        assert space.asarray(x, copy=False).layout is xs.sparse_csr
    with pytest.raises(ValueError, match=r"^asarray: copy=False but a sparse_csr array converted to sparse_coo is a copy"):
        ns.asarray(x, layout=xs.sparse_coo, copy=False)
    # 1-d in a compressed namespace: COO, as asarray gives it
    v = xs.to_sparse_coo(xp.asarray([1.0, 0.0]))
    assert xs.bound_namespace(backend, layout=xs.sparse_csr).from_dlpack(v).layout is xs.bound_namespace(backend, layout=xs.sparse_csr).asarray(v).layout


def test_index_lists_with_integers_past_int64_are_refused(backend: str) -> None:
    """F15: a Python int that int64 cannot hold is named, not wrapped to a negative index (or read as float)."""
    for bad in ([[2**63]], [[0, 2**63]], [[2**64 - 1]], [[-(2**63) - 1]]):
        value = [v for v in bad[0] if not -(2**63) <= v < 2**63][0]
        with pytest.raises(ValueError, match=rf"^sparse_coo_array: indices hold an integer that int64 cannot represent \(index={value}\)\. Pass indices in \[0, 2\*\*63\)"):
            xs.sparse_coo_array(bad, [1.0] * len(bad[0]), (4,), backend=backend)
    with pytest.raises(ValueError, match=r"^sparse_compressed_array\(layout=sparse_csr\): col_indices hold an integer that int64 cannot represent \(index=18446744073709551615\)"):
        xs.sparse_csr_array([0, 1], [2**64 - 1], [1.0], (1, 4), backend=backend)
    # an index int64 holds is read exactly (the oracle: NumPy's int64 of the same Python int)
    a = xs.sparse_coo_array([[2**62 + 1]], [1.0], (2**62 + 2,), backend=backend)
    assert int(a.indices()[0, 0]) == int(np.int64(2**62 + 1))


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_bsr], ids=str)
def test_empty_arrays_on_a_device_without_int64_take_int32_indices(layout: xs.Layout) -> None:
    # array_api_strict's no_x64 device holds no int64: zeros/empty in a sparse layout raised its
    # "Device ... does not support dtype=int64" (the Array API suite's test_from_dlpack drew that device);
    # the kernels that compute with int64 positions (to_dense of a compressed array) still do not run there
    st = pytest.importorskip("array_api_strict")
    dev = st.Device("no_x64")
    blocks = {"blocksize": (1, 2)} if layout.is_blocked else {}
    for make in (xs.zeros, xs.empty):
        z = make((2, 4), dtype=st.float32, device=dev, layout=layout, backend="array_api_strict", **blocks)
        assert z.index_dtype == st.int32 and z.device == dev and z.nnz == 0 and z.shape == (2, 4) and z.dtype == st.float32
    assert xs.zeros((2, 4), layout=layout, backend="array_api_strict", **blocks).index_dtype == st.int64


def test_components_given_as_lists_go_to_the_device_of_the_array_components() -> None:
    # a list of indices beside values on a CUDA device was made on the CPU, and the device check refused the
    # pair (the H200 run); array_api_strict's second device stands in for it. Arrays are never moved:
    # indices on another device than the values are still refused, and device= still moves everything.
    st = pytest.importorskip("array_api_strict")
    dev = st.Device("device1")
    v = st.asarray([1.0, 2.0], device=dev)
    for a in (
        xs.sparse_csr_array([0, 1, 2], [0, 1], v, (2, 2)),
        xs.sparse_csr_array(st.asarray([0, 1, 2], device=dev), [0, 1], [1.0, 2.0], (2, 2)),
        xs.sparse_coo_array([[0, 1], [1, 0]], v, (2, 2)),
        xs.sparse_coo_array(st.asarray([[0, 1], [1, 0]], device=dev), [1.0, 2.0], (2, 2)),
    ):
        parts = (a._values(), a._indices()) if a.layout is xs.sparse_coo else (a.values(), a.crow_indices(), a.col_indices())
        assert a.device == dev and {c.device for c in parts} == {dev}
        np.testing.assert_array_equal(to_numpy(xs.to_dense(a)), np.asarray([[1.0, 0.0], [0.0, 2.0]] if a.layout is xs.sparse_csr else [[0.0, 1.0], [2.0, 0.0]]))
    with pytest.raises(xs.InvariantError, match=r"^invariant 4\.2 violated: sparse_coo_array: indices is on device .*CPU_DEVICE.* but values are on device .*device1"):
        xs.sparse_coo_array(st.asarray([[0, 1], [1, 0]]), v, (2, 2))
    moved = xs.sparse_coo_array(st.asarray([[0, 1], [1, 0]]), v, (2, 2), device=st.Device("device2"))
    assert moved.device == st.Device("device2") and moved._indices().device == st.Device("device2")


def test_spdiags_makes_listed_diagonals_on_the_device_of_the_offsets() -> None:
    # the converse (diagonals on a device, offsets a list) already followed the diagonals; array_api_strict's
    # second device stands in for CUDA
    st = pytest.importorskip("array_api_strict")
    dev = st.Device("device1")
    expected = np.asarray([[1.0, 0.0, 0.0], [4.0, 2.0, 0.0], [0.0, 5.0, 3.0]])
    for diagonals, offsets in (([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], st.asarray([0, -1], device=dev)),
                               (st.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=dev), [0, -1])):  # fmt: skip
        for layout in (xs.sparse_coo, xs.sparse_csr, xs.sparse_csc):
            a = xs.spdiags(diagonals, offsets, (3, 3), layout=layout)
            assert a.device == dev
            np.testing.assert_array_equal(to_numpy(xs.to_dense(a)), expected)


@pytest.mark.parametrize(
    "fill, dtype, expected",
    [(np.float32(1.5), "float64", 1.5), (np.int8(3), "int64", 3), (np.bool_(True), "bool", True), (np.complex64(1j), "complex128", 1j)],
)
def test_numpy_scalars_are_fill_values(fill: Any, dtype: str, expected: Any) -> None:
    # np.float32 is no Python float and has no __complex__: it was refused as "not a number"
    a = xs.sparse_coo_array([[0, 1]], np.ones(2, dtype=dtype), (3,), fill_value=fill)
    assert a.fill_value == expected and type(a.fill_value) is type(expected)
    assert to_numpy(xs.to_dense(a)).tolist()[2] == expected
    with pytest.raises(ValueError, match=r"fill_value: 0\.5 is not representable in the integer dtype int64"):
        xs.sparse_coo_array([[0]], np.ones(1, dtype=np.int64), (2,), fill_value=np.float32(0.5))


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "complex64"])
def test_fill_values_are_rounded_to_the_dtype(backend: str, dtype: str) -> None:
    # fill_value=0.1 of a float32 array was kept as float64's 0.1, which to_dense writes as float32's: the
    # fill value then differed from the elements it stands for (fill_value == to_dense(a)[i] was False)
    fill = 0.1 + 0.3j if dtype.startswith("complex") else 0.1
    if backend == "torch":
        torch = pytest.importorskip("torch")
        xp_dtype: Any = getattr(torch, dtype)
        d = torch.tensor([fill, 2.0, fill], dtype=xp_dtype)
    else:
        if dtype == "bfloat16":
            pytest.skip("NumPy has no bfloat16 among its Array API dtypes")
        xp_dtype = np.dtype(dtype)
        d = np.asarray([fill, 2.0, fill], dtype=xp_dtype)
    a = xs.asarray(d, layout=xs.sparse_coo, fill_value=fill)
    assert a.nnz == 1
    dense = to_numpy(xs.to_dense(a))
    assert a.fill_value == dense[0].item() == dense[2].item() and type(a.fill_value) is type(fill)
    if dtype != "float64":
        assert a.fill_value != fill
    # past the dtype's range it is an infinity, as a cast makes it
    if not dtype.startswith("complex"):
        big = xs.sparse_coo_array([[0]], d[:1], (2,), fill_value=1e300)
        assert big.fill_value == (1e300 if dtype == "float64" else math.inf)


# -- random ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.strided], ids=str)
@SOME
@given(data=st.data())
def test_random(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """random draws round(density * size) (or nnz) distinct positions and values of the dtype's kind; one
    seed and dtype give one array on every backend."""
    ndim = 2 if layout in (xs.sparse_csr, xs.sparse_csc) else data.draw(st.integers(0, 3), label="ndim")
    shape = tuple(data.draw(st.lists(st.integers(0, 6), min_size=ndim, max_size=ndim), label="shape"))
    size = math.prod(shape)
    dtype = data.draw(st.sampled_from(["float64", "float32", "int32", "complex128", "bool"]), label="dtype")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    if data.draw(st.booleans(), label="by nnz"):
        count = data.draw(st.integers(0, size), label="nnz")
        kwargs: dict[str, Any] = {"nnz": count}
    else:
        density = data.draw(st.floats(0, 1), label="density")
        count, kwargs = int(round(density * size)), {"density": density}
    idt = data.draw(st.sampled_from(["int32", "int64"]), label="index_dtype")
    r = xs.random(shape, **kwargs, layout=layout, dtype=dtype, seed=seed, backend=backend, index_dtype=idt)
    assert xs.layout_of(r) is layout and tuple(r.shape) == shape
    host = to_numpy(xs.to_dense(r) if isinstance(r, xs.SparseArray) else r)
    assert host.dtype == np.dtype(dtype)
    coo = xs.random(shape, **kwargs, dtype=dtype, seed=seed, backend=backend, index_dtype=idt)
    assert coo.nnz == count and coo.is_coalesced() and str(coo.index_dtype).endswith(idt)
    assert_sparse_equal(coo, xp.asarray(host))  # the invariants, and the same array in every layout
    values = to_numpy(coo.values())
    if dtype.startswith("float"):
        assert np.all((values >= 0) & (values < 1))
    elif dtype == "complex128":
        assert np.all((values.real >= 0) & (values.real < 1) & (values.imag >= 0) & (values.imag < 1))
    elif dtype == "bool":
        assert values.all()
    reference = xs.random(shape, **kwargs, dtype=dtype, seed=seed, index_dtype=idt)  # on NumPy
    np.testing.assert_array_equal(to_numpy(xs.to_dense(coo)), to_numpy(xs.to_dense(reference)))


def test_random_positions_are_uniform() -> None:
    """Every row and column of a large draw holds about its share of the positions (within 5 sigma)."""
    r = xs.random((200, 300), density=0.3, seed=7)
    rows, cols = (np.bincount(np.asarray(r.indices()[d]), minlength=n) for d, n in ((0, 200), (1, 300)))
    for counts, n, per in ((rows, 200, 300), (cols, 300, 200)):
        expected, sigma = 0.3 * per, math.sqrt(per * 0.3 * 0.7)
        assert np.all(np.abs(counts - expected) < 5 * sigma), (counts.min(), counts.max())
    assert xs.random((5, 5), nnz=25, seed=1).nnz == 25
    g = np.random.default_rng(3)
    a, b = xs.random((9, 9), 0.5, seed=g), xs.random((9, 9), 0.5, seed=g)  # a Generator advances
    assert a.indices().tolist() != b.indices().tolist()
    bsr = xs.random((4, 6), nnz=3, layout=xs.sparse_bsr, blocksize=(2, 3), seed=0)
    assert bsr.layout is xs.sparse_bsr and int(np.count_nonzero(np.asarray(xs.to_dense(bsr)))) == 3


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: xs.random((3, 3), 1.5), ValueError, r"^random: density must be a number in \[0, 1\] \(density=1\.5\)\. Pass"),
        (lambda: xs.random((3, 3), nnz=10), ValueError, r"^random: nnz must lie in \[0, 9\] for shape \(3, 3\) \(nnz=10\)\. Ask"),
        (lambda: xs.random((2**40, 2**40)), ValueError, r"^random: the array would have 1208925819614629174706176 elements, more than int64"),
        (lambda: xs.random((3,), seed="x"), TypeError, r"^random: seed must be None, a non-negative int"),
        (lambda: xs.random((3, -1)), ValueError, r"^random: shape must be non-negative sizes \(shape=\(3, -1\)\)\. Pass"),
        (lambda: xs.random((3,), index_dtype="float32"), TypeError, r"^random: index_dtype must be int32 or int64 \(index_dtype='float32'\)\. Pass"),
        (lambda: xs.random((2**31, 2), nnz=1, index_dtype="int32"), ValueError, r"^random: int32 indices cannot address shape \(2147483648, 2\)"),
        (lambda: xs.random((4, 4), layout=xs.sparse_bsr), ValueError, r"^random: the result cannot be given layout=sparse_bsr: .*Pass blocksize="),
        (lambda: xs.random((3, 3), 0.5, nnz=2), ValueError, r"^random: give density or nnz, not both \(density=0\.5, nnz=2\)\. Leave one out\."),
        (lambda: xs.random((3, 3), layout="csr"), TypeError, r"^random: layout must be an xsparse layout or None \(layout='csr'\)\. Pass"),
    ],
)
def test_random_errors(call: Any, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize(("backend_name", "dtype"), [("numpy", "float16"), ("numpy", "float32"), ("numpy", "complex64"), ("torch", "bfloat16"), ("torch", "float16")])
def test_random_values_of_narrow_dtypes_stay_below_one(backend_name: str, dtype: str) -> None:
    """A draw below 1 that rounds to 1 in a narrower dtype (1 in 4096 for float16, 1 in 500 for bfloat16)
    becomes the largest value below 1: the values lie in [0, 1) whatever the dtype."""
    if backend_name == "torch":
        pytest.importorskip("torch")
    r = xs.random((200_000,), nnz=200_000, seed=0, dtype=dtype, backend=backend_name)
    v = to_numpy(r.values().float() if dtype == "bfloat16" else r.values())
    parts = (v.real, v.imag) if np.iscomplexobj(v) else (v,)
    for p in parts:
        assert p.min() >= 0 and p.max() < 1
    assert xs.random((3, 3), layout=None, seed=0).layout is xs.sparse_coo
