"""Indexing and selection (``x[key]``, take/index_select, select, narrow, sparse_mask, where), nonzero,
astype, clone and torch's predicates.

Every kernel registered for these operations is run from the registry (``xs.kernels(op)``) on Hypothesis
inputs in every layout, batched and hybrid, with fill values 0 and non-zero, int32 and int64 indices,
nnz = 0 and (for COO) duplicate entries, and compared with the dense computation of the same backend
through :func:`xsparse.testing.assert_sparse_equal`; native kernels are also compared with the generic
ones. Negative slice steps are the one exception: torch's dense tensors do not take them, so there the
reference is NumPy's indexing of the same data.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from conftest import load_native_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import strategies as S
import xsparse as xs
from xsparse import dispatch
from xsparse._index_key import Int, NewAxis, Slice, parse_key
from xsparse.backends import _cpu
from xsparse.testing import assert_sparse_equal, check_invariants, to_numpy

SPARSE_LAYOUTS = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]

FEW = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SOME = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


load_native_kernels()


# -- helpers --------------------------------------------------------------------------------------


def _same_fill(a: Any, b: Any) -> bool:
    return bool(a == b) or (a != a and b != b)


def run_kernels(op: str, layouts: tuple[Any, ...], backend: str, xp: Any, *args: Any) -> list[tuple[dispatch.Kernel, Any]]:
    """Every direct kernel of ``op`` for ``layouts`` that runs on ``backend`` and accepts the arguments, with its result."""
    out = []
    for k in xs.kernels(op):
        if k.rewrite or not k.matches(layouts) or k.backend not in (None, backend):
            continue
        if k.supports is not None:
            reason = k.supports(xp, *args)
            assert reason is None or (isinstance(reason, str) and reason), f"{k.describe()}: bad reason {reason!r}"
            if reason is not None:
                continue
        out.append((k, k.func(xp, *args)))
    assert any(k.backend is None for k, _ in out), f"no generic kernel of {op} ran for {layouts}"
    return out


def check_all(results: list[tuple[dispatch.Kernel, Any]], expected: Any, **kwargs: Any) -> None:
    """Each kernel's result against the dense reference; native results also against the generic one."""
    generic = next(r for k, r in results if k.backend is None)
    for k, r in results:
        assert_sparse_equal(r, expected, **kwargs)
        if k.backend is not None:
            assert_sparse_equal(r, generic, **kwargs)
            assert xs.layout_of(r) is xs.layout_of(generic), (k.describe(), xs.layout_of(r), xs.layout_of(generic))
            if isinstance(r, xs.SparseArray):
                assert _same_fill(r.fill_value, generic.fill_value)


def host_array(xp: Any, host: np.ndarray) -> Any:
    return xp.asarray(np.array(host, order="C"))


@st.composite
def sparse_inputs(draw: Any, xp: Any, layout: xs.Layout, *, dtype: str | None = None) -> tuple[Any, np.ndarray]:
    """A sparse array in ``layout`` (fill value 0 or not, batched and hybrid, nnz = 0 included; COO of any
    sparse_dim, or with duplicates) and its dense value as a NumPy array."""
    if layout is xs.sparse_coo:
        kind = draw(st.sampled_from(["hybrid", "any_rank", "duplicates"]))
        if kind == "duplicates" and dtype is None:
            coo, expected = draw(S.uncoalesced_coo(xp, fill=None, max_dense_dims=1))
            return coo, expected
        if kind == "any_rank" and dtype is None:
            case = draw(S.coo_dense_cases(xp, fill=None, max_ndim=3))
            kw: dict[str, Any] = {"sparse_dim": case.sparse_dim, "index_dtype": case.index_dtype}
            if case.fill_value != 0 or case.fill_value != case.fill_value:
                kw["fill_value"] = case.fill_value
            return xs.to_sparse_coo(case.array, **kw), case.host
    case = draw(S.dense_cases(xp, fill=None, dtype=dtype, max_batch_dims=1, max_dense_dims=1))
    return case.sparse(layout), case.host


@st.composite
def index_keys(draw: Any, shape: tuple[int, ...]) -> Any:
    """A key of integers (negative too), slices of any step, None and Ellipsis for an array of ``shape``."""
    parts: list[Any] = []
    steps = st.none() | st.sampled_from([1, 1, 2, 3, -1, -2, -3])
    for size in shape:
        kind = draw(st.sampled_from(["int", "slice", "slice", "full"]))
        if kind == "int" and size > 0:
            parts.append(draw(st.integers(-size, size - 1)))
        elif kind == "slice":
            bound = st.none() | st.integers(-size - 2, size + 2)
            parts.append(slice(draw(bound), draw(bound), draw(steps)))
        else:
            parts.append(slice(None))
        if draw(st.integers(0, 6)) == 0:
            parts.append(None)
    if draw(st.integers(0, 4)) == 0:
        parts.insert(0, None)
    if parts and draw(st.integers(0, 3)) == 0:
        # an Ellipsis in place of a run of the key (NumPy, the reference, reads the same key)
        i = draw(st.integers(0, len(parts) - 1))
        j = draw(st.integers(i, len(parts)))
        parts = parts[:i] + [Ellipsis] + parts[j:]
    elif draw(st.booleans()):
        # leave trailing full slices out
        while parts and parts[-1] == slice(None):
            parts.pop()
    if len(parts) == 1 and draw(st.booleans()):
        return parts[0]
    return tuple(parts)


def in_spec_key(shape: tuple[int, ...], key: Any) -> tuple[Any, ...]:
    """The key, resolved: one in-bounds item per dimension, as every Array API library must accept it
    (array-api-strict refuses out-of-bounds slice bounds and partial keys, which NumPy and xsparse clip
    and complete)."""
    out: list[Any] = []
    for it in parse_key("getitem", shape, key):
        if isinstance(it, Int):
            out.append(it.index)
        elif isinstance(it, NewAxis):
            out.append(None)
        elif it.length == 0:
            out.append(slice(None) if shape[it.dim] == 0 else slice(0, 0))
        else:
            last = it.start + it.step * (it.length - 1)
            stop = last + (1 if it.step > 0 else -1)
            out.append(slice(it.start, stop if stop >= 0 else None, it.step))
    return tuple(out)


def dense_getitem(xp: Any, dense: Any, host: np.ndarray, key: Any) -> Any:
    """The reference ``dense[key]``: the backend's indexing with the resolved key (NumPy's own with the
    raw key, which also checks the resolution); NumPy's for torch and a negative step."""
    if isinstance(dense, np.ndarray):
        # NumPy's full integer index gives a scalar; the reference is a 0-d array
        return np.asarray(dense[key])
    parts = key if isinstance(key, tuple) else (key,)
    negative = any(isinstance(p, slice) and p.step is not None and p.step < 0 for p in parts)
    if negative and "torch" in type(dense).__module__:
        return host_array(xp, np.asarray(host[key]))
    return xp.asarray(dense[in_spec_key(tuple(dense.shape), key)])


def expected_getitem_layout(x: xs.SparseArray, items: tuple[Any, ...]) -> tuple[xs.Layout, bool]:
    """The layout ``x[key]`` has, and whether it is refused (a blocked result that is not whole blocks)."""
    if x.layout is xs.sparse_coo:
        return xs.sparse_coo, False
    nb = x.batch_dim()  # type: ignore[attr-defined]
    pos = [k for k, it in enumerate(items) if not isinstance(it, NewAxis) and it.dim in (nb, nb + 1)]
    row, col = items[pos[0]], items[pos[1]]
    if not (isinstance(row, Slice) and isinstance(col, Slice) and pos[1] == pos[0] + 1):
        return xs.sparse_coo, False
    bm, bn = x.blocksize  # type: ignore[attr-defined]
    identity = row.is_identity(x.shape[nb]) and col.is_identity(x.shape[nb + 1])
    return x.layout, not identity and bool(row.length % bm or col.length % bn)


# -- getitem --------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc], ids=str)
@SOME
@given(data=st.data())
def test_getitem_one_element_every_kernel(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """x[i, j] of one CSR/CSC matrix (the NumPy backend's binary search of a slice among the kernels): specified
    and unspecified elements, empty slices, negative indices, int32 and int64 indices, any fill value."""
    case = data.draw(S.dense_cases(xp, fill=None, max_batch_dims=0, max_dense_dims=0), label="case")
    x = case.sparse(layout)
    m, n = x.shape
    if not m * n:
        return
    key = (data.draw(st.integers(-m, m - 1), label="i"), data.draw(st.integers(-n, n - 1), label="j"))
    expected = dense_getitem(xp, host_array(xp, case.host), case.host, key)
    results = run_kernels("getitem", (layout,), backend, xp, x, parse_key("getitem", (m, n), key))
    if backend == "numpy":
        assert any(k.name == "_getitem_element_numpy" for k, _ in results)
    check_all(results, expected)
    for _, k_r in results:  # the NumPy kernel builds its result without the checks: valid by construction
        check_invariants(k_r)
    r = x[key]
    assert_sparse_equal(r, expected, check_layout=xs.sparse_coo)
    # the element is specified in the result exactly where it is stored in x, in every kernel's result
    assert r.shape == () and {r.nnz} == {int(k_r.nnz) for _, k_r in results}


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_getitem_every_kernel(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """x[key] with integers, slices of any step, None and Ellipsis, against the backend's dense indexing."""
    x, host = data.draw(sparse_inputs(xp, layout), label="x")
    key = data.draw(index_keys(tuple(x.shape)), label="key")
    expected = dense_getitem(xp, host_array(xp, host), host, key)
    items = parse_key("getitem", tuple(x.shape), key)
    want_layout, refused = expected_getitem_layout(x, items)
    if refused:
        with pytest.raises(xs.LayoutError, match=r"getitem: the result's sparse dimensions .* are not a whole number of blocks"):
            x[key]
        return
    results = run_kernels("getitem", (layout,), backend, xp, x, items)
    check_all(results, expected)
    r = x[key]
    assert_sparse_equal(r, expected, check_layout=want_layout)
    assert _same_fill(r.fill_value, x.fill_value)
    if layout.is_compressed and want_layout is layout:
        assert r.blocksize == x.blocksize and r.index_dtype == x.index_dtype


@SOME
@given(data=st.data())
def test_getitem_strided_kernel(backend: str, xp: Any, data: st.DataObject) -> None:
    """The strided kernel (behind select/narrow of a strided array) takes every step on every backend."""
    case = data.draw(S.coo_dense_cases(xp, max_ndim=3), label="case")
    key = data.draw(index_keys(tuple(case.host.shape)), label="key")
    items = parse_key("getitem", tuple(case.host.shape), key)
    results = run_kernels("getitem", (xs.strided,), backend, xp, case.array, items)
    check_all(results, dense_getitem(xp, case.array, case.host, key))


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@FEW
@given(data=st.data())
def test_full_integer_index_is_a_0d_coo(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """A full integer index gives a 0-d COO array (sparse_dim 0, at most one entry), never a scalar."""
    x, host = data.draw(sparse_inputs(xp, layout), label="x")
    if 0 in x.shape:
        return
    key = tuple(data.draw(st.integers(-n, n - 1)) for n in x.shape)
    r = x[key]
    assert isinstance(r, xs.COOArray) and r.shape == () and r.sparse_dim() == 0 and r.nnz <= 1
    assert _same_fill(r.fill_value, x.fill_value)
    assert_sparse_equal(r, host_array(xp, np.asarray(host[key])))


def test_getitem_examples(xp: Any) -> None:
    d = xp.asarray([[0, 1, 0, 2], [3, 0, 0, 4], [0, 0, 5, 0], [6, 0, 0, 7]], dtype=xp.float64)
    csr = xs.to_sparse_csr(d)
    assert_sparse_equal(csr[1:3], d[1:3, :], check_layout=xs.sparse_csr)
    assert_sparse_equal(csr[:, 2], d[:, 2], check_layout=xs.sparse_coo)
    assert_sparse_equal(csr[None], d[None, ...], check_layout=xs.sparse_csr)
    assert_sparse_equal(csr[..., None], d[..., None], check_layout=xs.sparse_csr)
    assert csr[..., None].dense_dim() == 1
    assert_sparse_equal(csr[:, None, :], d[:, None, :], check_layout=xs.sparse_coo)
    bsr = xs.to_sparse_bsr(d, (2, 2))
    assert_sparse_equal(bsr[2:, :2], d[2:, :2], check_layout=xs.sparse_bsr)
    assert_sparse_equal(bsr[1:3, :], d[1:3, :], check_layout=xs.sparse_bsr)
    coo = xs.to_sparse_coo(d)
    assert_sparse_equal(coo[None, :, None, 1], d[None, :, None, 1], check_layout=xs.sparse_coo)
    assert coo[None, :, None, 1].sparse_dim() == 3
    # COO with a dense dimension: None between the parts is a sparse dimension (torch's unsqueeze)
    h = xs.to_sparse_coo(d, sparse_dim=1)
    assert h[:, None].sparse_dim() == 2 and h[:, :, None].sparse_dim() == 1
    assert_sparse_equal(h[:, None], d[:, None, :], check_layout=xs.sparse_coo)


def test_batched_getitem_pads_unequal_batches(xp: Any) -> None:
    """A slice that leaves batches with different counts is padded with explicit fill-valued elements."""
    d = xp.asarray([[[1, 0], [0, 0]], [[0, 0], [0, 2]]], dtype=xp.int64)
    csr = xs.to_sparse_csr(d, fill_value=0)
    r = csr[:, :1, :]
    assert r.layout is xs.sparse_csr and r.nnz == 1
    assert_sparse_equal(r, d[:, :1, :])
    bsc = xs.to_sparse_bsc(xp.asarray([[[1, 0, 0, 0]] * 2, [[0, 0, 0, 3]] * 2], dtype=xp.int64), (1, 2), fill_value=9)
    r = bsc[:, :, 2:]
    assert r.layout is xs.sparse_bsc and r.fill_value == 9
    assert_sparse_equal(r, xs.to_dense(bsc)[:, :, 2:])


def test_select_and_narrow(xp: Any) -> None:
    d = xp.reshape(xp.arange(24, dtype=xp.float64), (2, 3, 4)) % 5 + 1.0
    for layout in (xs.sparse_coo, xs.sparse_csr):
        s = xs.to_sparse(d, layout=layout)
        for dim in range(3):
            for index in (0, -1):
                key = (slice(None),) * dim + (index, ...)
                assert_sparse_equal(xs.select(s, dim, index), d[key])
            assert_sparse_equal(xs.narrow(s, dim, 1, 1), d[(slice(None),) * dim + (slice(1, 2), ...)])
            assert_sparse_equal(xs.narrow(s, dim, -2, 2), d[(slice(None),) * dim + (slice(d.shape[dim] - 2, None), ...)])
        assert_sparse_equal(xs.select(s, -1, 2, layout=xs.strided), d[:, :, 2], check_layout=xs.strided)
    assert_sparse_equal(xs.select(d, 0, 1), d[1, ...])
    assert_sparse_equal(xs.narrow(d, 2, 0, 3), d[:, :, :3])


def test_getitem_errors(xp: Any) -> None:
    s = xs.to_sparse_coo(xp.asarray([[0, 1.0], [2.0, 0]], dtype=xp.float64))
    with pytest.raises(IndexError, match=r"getitem: index 2 is out of bounds for dimension 0 of size 2 \(index=2, dim=0, size=2\)\. Use an index in \[-2, 2\)\."):
        s[2]
    with pytest.raises(IndexError, match=r"getitem: too many indices for an array of 2 dimensions \(indices=3, shape=\(2, 2\)\)\. Give at most one index"):
        s[0, 0, 0]
    with pytest.raises(IndexError, match=r"getitem: an index can hold at most one Ellipsis .*Remove the extra ones\."):
        s[..., ...]
    with pytest.raises(ValueError, match=r"getitem: a slice step cannot be zero \(index=slice\(None, None, 0\), dim=0\)\. Use a non-zero step"):
        s[::0]
    with pytest.raises(TypeError, match=r"getitem: slice bounds must be integers or None .*Pass integers"):
        s[0.5:]
    with pytest.raises(TypeError, match=r"getitem: a boolean index is not supported \(index=True\)\. Use an integer"):
        s[True]
    with pytest.raises(IndexError, match=r"^getitem: an integer array combines either with slices \(one array, and at most one Ellipsis\) or with integers and other arrays, not both \(key=None\)\. Index in two steps"):
        s[None, xp.asarray([0, 1])]
    with pytest.raises(IndexError, match=r"^getitem: an integer array combines either with slices .* not both \(key=\(slice\(None, None, None\), "):
        xs.expand_dims(s, axis=0)[:, xp.asarray([0]), xp.asarray([1])]
    with pytest.raises(IndexError, match=r"^getitem: too many indices for an array of 2 dimensions \(indices=3, shape=\(2, 2\)\)\."):
        s[:, ..., :, xp.asarray([0])]
    with pytest.raises(IndexError, match=r"^getitem: the index arrays do not broadcast together \(shapes=\[\(2,\), \(3,\)\]\)\. Pass arrays of broadcast-compatible shapes\.$"):
        s[xp.asarray([0, 1]), xp.asarray([0, 1, 0])]
    with pytest.raises(IndexError, match=r"^getitem: an index array must have an integer or boolean dtype \(dtype=float64, dim=0\)\. Cast it"):
        s[xp.asarray([0.0], dtype=xp.float64)]
    with pytest.raises(IndexError, match=r"^getitem: index 2 is out of bounds for axis 1 of size 2 \(index=2, axis=1, size=2\)\. Use indices in \[-2, 2\)\.$"):
        s[0, xp.asarray([2])]
    with pytest.raises(IndexError, match=r"^getitem: too many indices for an array of 2 dimensions \(indices=3, shape=\(2, 2\)\)\."):
        s[0, 0, xp.asarray([0])]
    with pytest.raises(IndexError, match=r"^getitem: a boolean array must be the sole index \(key has 2 parts, mask\.shape=\(2,\)\)\. Index the other"):
        s[xp.asarray([True, False]), 0]
    with pytest.raises(IndexError, match=r"^getitem: the boolean mask does not fit the leading dimensions of the array \(mask\.shape=\(3,\), shape=\(2, 2\)\)\. Pass a mask"):
        s[xp.asarray([True, False, True])]
    with pytest.raises(IndexError, match=r"^getitem: the boolean mask does not fit .*mask\.shape=\(2, 2, 1\)"):
        s[xp.zeros((2, 2, 1), dtype=xp.bool)]
    with pytest.raises(TypeError, match=r"^select: an array index is not supported here \(shape=\(1,\)\)\. Pass an integer"):
        xs.select(s, 0, xp.asarray([1]))
    with pytest.raises(TypeError, match=r"getitem: a list is not a valid index .*xsparse\.take"):
        s[[0, 1]]
    with pytest.raises(TypeError, match=r"getitem: only integers, slices, None and Ellipsis are valid indices \(index='a', type=str\)\. Gather"):
        s["a"]
    bsr = xs.to_sparse_bsr(xp.zeros((4, 4), dtype=xp.float64), (2, 2))
    with pytest.raises(xs.LayoutError, match=r"getitem: the result's sparse dimensions \(3, 4\) are not a whole number of blocks \(blocksize=\(2, 2\), shape=\(3, 4\)\)\. Index in whole blocks, or convert first"):
        bsr[1:]
    with pytest.raises(IndexError, match=r"select: index -3 is out of bounds for dimension 1 of size 2"):
        xs.select(s, 1, -3)
    with pytest.raises(IndexError, match=r"select: dim 2 is out of range for an array of 2 dimensions \(dim=2, ndim=2\)\. Pass an integer in \[-2, 2\)\."):
        xs.select(s, 2, 0)
    with pytest.raises(TypeError, match=r"narrow: dim must be an integer, got str \(dim='x'\)\. Pass an integer"):
        xs.narrow(s, "x", 0, 1)
    with pytest.raises(IndexError, match=r"narrow: the range \[start, start \+ length\) must lie within dimension 0 of size 2 \(start=1, length=2, size=2\)\. Pass 0 <= start and start \+ length <= 2\."):
        xs.narrow(s, 0, 1, 2)
    with pytest.raises(TypeError, match=r"select: x must be an xsparse array or a backend array, got list\. Create one first"):
        xs.select([1, 2], 0, 0)


# -- integer array indexing and boolean masks -------------------------------------------------------


def _index_array(xp: Any, values: list[int], shape: tuple[int, ...], dtype: str, sparse: bool) -> Any:
    arr = xp.reshape(xp.asarray(values, dtype=getattr(xp, dtype)), shape)
    return xs.to_sparse_coo(arr) if sparse else arr


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_getitem_integer_arrays(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """x[i, j, ...] with integers and integer arrays (int32/int64, negative, empty, strided or sparse, broadcast
    together) against the backend's dense indexing with the wrapped positions (NumPy's for a partial key on
    array-api-strict, which takes none)."""
    x, host = data.draw(sparse_inputs(xp, layout), label="x")
    if x.ndim == 0:
        return
    dense = host_array(xp, host)
    k = data.draw(st.integers(1, x.ndim), label="k")
    if any(x.shape[d] == 0 for d in range(k)):
        k = 1
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=k, max_dims=2, max_side=3), label="shapes").input_shapes
    is_array = [data.draw(st.booleans(), label=f"array{d}") for d in range(k)]
    if not any(is_array) or x.shape[0] == 0:
        is_array[0] = True
    if x.shape[0] == 0:
        shapes = ((0,),) + shapes[1:]
    dtype = data.draw(st.sampled_from(["int32", "int64"]), label="dtype")
    key: list[Any] = []
    ref: list[Any] = []
    for d in range(k):
        size = x.shape[d]
        if not is_array[d]:
            i = data.draw(st.integers(-size, size - 1), label=f"int{d}")
            key.append(i)
            ref.append(i % size)
            continue
        shape = shapes[d] if shapes[d] else (1,)
        n = math.prod(shape)
        picks = data.draw(st.lists(st.integers(-size, size - 1), min_size=n, max_size=n), label=f"picks{d}") if size else []
        key.append(_index_array(xp, picks, shape, dtype, data.draw(st.booleans(), label=f"sparse{d}")))
        ref.append(np.reshape(np.asarray([p % size for p in picks], dtype=np.int64), shape))
    if k < x.ndim and backend == "array_api_strict":
        # array-api-strict takes integer arrays only in a key of one index per dimension: NumPy's indexing
        expected = host_array(xp, np.asarray(host[tuple(ref)]))
    else:
        expected = xp.asarray(dense[tuple(r if isinstance(r, int) else host_array(xp, r) for r in ref)])
    r = x[tuple(key)]
    nb = x.batch_dim() if isinstance(x, xs.CompressedArray) else 0
    one_index = k == 1 and len(tuple(key[0].shape)) == 1
    keeps = layout is not xs.sparse_coo and (k <= nb or (one_index and not layout.is_blocked))
    assert_sparse_equal(r, expected, check_layout=layout if keeps else xs.sparse_coo)
    assert _same_fill(r.fill_value, x.fill_value)
    assert_sparse_equal(xs.getitem(dense, tuple(key)), expected, check_layout=xs.strided)


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_getitem_array_among_slices(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """x[:, index, 1::2, ...]: one integer array (1-D or 2-D, int32/int64, negative, strided or sparse) among slices
    of any step and an Ellipsis, against NumPy's indexing of the same elements."""
    x, host = data.draw(sparse_inputs(xp, layout), label="x")
    if x.ndim == 0:
        return
    d = data.draw(st.integers(0, x.ndim - 1), label="d")
    size = x.shape[d]
    shape = data.draw(st.sampled_from([(3,), (0,), (2, 2)] if size else [(0,)]), label="index shape")
    picks = data.draw(st.lists(st.integers(-size, size - 1), min_size=math.prod(shape), max_size=math.prod(shape)), label="picks") if size else []
    dtype = data.draw(st.sampled_from(["int32", "int64"]), label="dtype")
    index = _index_array(xp, picks, shape, dtype, data.draw(st.booleans(), label="sparse"))
    key: list[Any] = []
    for e in range(x.ndim):
        if e == d:
            key.append(index)
            continue
        n = x.shape[e]
        key.append(slice(data.draw(st.integers(-n - 1, n), label=f"start{e}"), data.draw(st.integers(-n - 1, n), label=f"stop{e}"),
                         data.draw(st.sampled_from([1, 2, -1, -3]), label=f"step{e}")))  # fmt: skip
    ref = [np.reshape(np.asarray(picks, dtype=np.int64), shape) if e == d else k for e, k in enumerate(key)]
    cut = data.draw(st.integers(0, x.ndim), label="ellipsis from")
    if cut > d:
        # the trailing full slices as an Ellipsis
        key, ref = [*key[:cut], Ellipsis], [*ref[:cut], Ellipsis]
    expected = host_array(xp, np.asarray(host[tuple(ref)]))
    # a compressed array gives COO where the index reaches a sparse dimension and is not 1-D or meets blocks
    sparse_d = isinstance(x, xs.CompressedArray) and x.batch_dim() <= d < x.batch_dim() + 2
    to_coo = sparse_d and (len(shape) != 1 or layout.is_blocked)
    slices = tuple(slice(None) if e == d else k for e, k in enumerate(key))
    if not to_coo and expected_getitem_layout(x, parse_key("getitem", tuple(x.shape), slices))[1]:
        # the slices split blocks, which a blocked layout refuses (test_getitem_every_kernel)
        with pytest.raises(xs.LayoutError, match=r"getitem: the result's sparse dimensions .* are not a whole number of blocks"):
            x[tuple(key)]
        return
    r = x[tuple(key)]
    assert_sparse_equal(r, expected, check_layout=xs.sparse_coo if to_coo else layout)
    assert _same_fill(r.fill_value, x.fill_value)


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_getitem_boolean_mask(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """x[mask] with a mask (strided or sparse, 0-d too) over the leading dimensions, sizes 0 included, against
    the backend's dense masking."""
    x, host = data.draw(sparse_inputs(xp, layout), label="x")
    dense = host_array(xp, host)
    m = data.draw(st.integers(0, x.ndim), label="m")
    mshape = tuple(0 if data.draw(st.integers(0, 5), label=f"zero{d}") == 0 else x.shape[d] for d in range(m))
    bits = data.draw(st.lists(st.booleans(), min_size=math.prod(mshape), max_size=math.prod(mshape)), label="bits")
    mask = xp.reshape(xp.asarray(bits, dtype=xp.bool), mshape)
    key = xs.to_sparse_coo(mask) if data.draw(st.booleans(), label="sparse") else mask
    if m == 0:
        expected = xp.expand_dims(dense, axis=0)[: 1 if bits[0] else 0, ...]
    elif math.prod(mshape) == 0:
        expected = xp.zeros((0, *x.shape[m:]), dtype=dense.dtype)
    else:
        expected = xp.asarray(dense[mask])
    r = x[key]
    assert_sparse_equal(r, expected)
    assert _same_fill(r.fill_value, x.fill_value)
    assert_sparse_equal(xs.getitem(dense, key), expected, check_layout=xs.strided)


def test_getitem_array_examples(xp: Any) -> None:
    """Edges: an empty index array, a 0-d integer array as an integer, a trailing Ellipsis, an nnz = 0 array."""
    d = xp.asarray([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]], dtype=xp.float64)
    s = xs.to_sparse_coo(d)
    empty = xp.asarray([], dtype=xp.int64)
    assert_sparse_equal(s[empty], xp.zeros((0, 3), dtype=xp.float64), check_layout=xs.sparse_coo)
    assert_sparse_equal(s[xp.asarray([1, -1]), ...], xp.stack([d[1, :], d[1, :]]))
    assert_sparse_equal(s[xs.to_sparse_coo(xp.asarray(1)), xp.asarray([2, 0])], xp.asarray([3.0, 2.0], dtype=xp.float64))
    zero = xs.sparse_coo_array(xp.zeros((2, 0), dtype=xp.int32), xp.zeros((0,), dtype=xp.float64), (2, 3), fill_value=-1.0)
    r = zero[xp.asarray([[1], [0]], dtype=xp.int32), xp.asarray([0, 2], dtype=xp.int32)]
    assert r.nnz == 0 and r.fill_value == -1.0
    assert_sparse_equal(r, xp.full((2, 2), -1.0, dtype=xp.float64))
    assert_sparse_equal(zero[xp.asarray([True, False])], xp.full((1, 3), -1.0, dtype=xp.float64))


@pytest.mark.parametrize("layout", [xs.strided, xs.sparse_coo, xs.sparse_csr], ids=str)
def test_getitem_arrays_broadcast_to_nothing(xp: Any, layout: xs.Layout) -> None:
    """Integer arrays whose broadcast is empty gather nothing and, as in NumPy, are not bounds-checked (a size-0
    dimension included); an integer, and arrays with a non-empty broadcast, still are."""
    d = xp.zeros((0, 3), dtype=xp.float64)
    x = d if layout is xs.strided else xs.to_sparse(d, layout=layout)
    empty, five = xp.asarray([], dtype=xp.int64), xp.asarray([5], dtype=xp.int64)
    assert_sparse_equal(xs.getitem(x, (five, empty)), xp.zeros((0,), dtype=xp.float64))
    assert_sparse_equal(xs.getitem(x, (empty, xp.asarray([7]))), xp.zeros((0,), dtype=xp.float64))
    assert_sparse_equal(xs.getitem(x, (xp.asarray([[0]]), xp.zeros((0, 1), dtype=xp.int64))), xp.zeros((0, 1), dtype=xp.float64))
    with pytest.raises(IndexError, match=r"getitem: index 0 is out of bounds for axis 0 of size 0"):
        xs.getitem(x, (xp.asarray([0]), xp.asarray([1])))
    with pytest.raises(IndexError, match=r"getitem: index 0 is out of bounds for dimension 0 of size 0"):
        xs.getitem(x, (0, empty))


# -- take / index_select ----------------------------------------------------------------------------


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_take_every_kernel(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """take along every axis (repeats, negative indices, none) against the backend's dense take."""
    x, host = data.draw(sparse_inputs(xp, layout), label="x")
    if x.ndim == 0:
        return
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    size = x.shape[axis]
    picks = data.draw(st.lists(st.integers(-size, size - 1), max_size=5) if size else st.just([]), label="indices")
    dense = host_array(xp, host)
    ind = xp.asarray(picks, dtype=xp.int64)
    wrapped = xp.asarray([p % size for p in picks] if size else [], dtype=xp.int64)
    expected = xp.take(dense, wrapped, axis=axis)
    ax = axis % x.ndim
    blocked_sparse = layout.is_blocked and x.batch_dim() <= ax < x.batch_dim() + 2  # type: ignore[attr-defined]
    if blocked_sparse and len(picks) % x.blocksize[ax - x.batch_dim()]:  # type: ignore[attr-defined]
        with pytest.raises(xs.LayoutError, match=r"take: the result's sparse dimensions .* are not a whole number of blocks"):
            xs.take(x, ind, axis=axis)
        return
    results = run_kernels("take", (layout,), backend, xp, x, wrapped, ax)
    check_all(results, expected)
    r = xs.take(x, ind, axis=axis)
    assert_sparse_equal(r, expected, check_layout=layout)
    assert _same_fill(r.fill_value, x.fill_value)
    assert_sparse_equal(xs.index_select(x, axis, picks), expected)


@settings(max_examples=150, deadline=None)
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), nse=st.integers(0, 40), coalesce=st.booleans(),
    seed=st.integers(0, 2**32 - 1), data=st.data(),
)  # fmt: skip
def test_numpy_take_coo_repeats_every_entry_per_pick(
    shape: list[int], nse: int, coalesce: bool, seed: int, data: st.DataObject
) -> None:
    """The NumPy COO take (counted repeats; runs along axis 0 of a coalesced array, else one sort) with
    picks that repeat, in any order, against the dense take and the generic kernel."""
    xp = xs.get_backend("numpy").load()
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.integers(0, s, nse) for s in shape]).astype(data.draw(st.sampled_from([np.int32, np.int64])))
    x = xs.sparse_coo_array(idx, rng.integers(1, 9, nse).astype(np.float64), tuple(shape))
    if coalesce:
        x = x.coalesce()
    axis = data.draw(st.integers(0, len(shape) - 1), label="axis")
    picks = np.asarray(data.draw(st.lists(st.integers(0, shape[axis] - 1), max_size=10), label="picks"), dtype=np.int64)
    native = next(k for k in dispatch.resolve("take", (xs.sparse_coo,), "numpy") if k.backend == "numpy")
    assert native.supports(xp, x, picks, axis) is None
    r = native.func(xp, x, picks, axis)
    assert_sparse_equal(r, np.take(xs.to_dense(x), picks, axis=axis))
    assert r.is_coalesced() or not x.is_coalesced()
    generic = next(k for k in dispatch.resolve("take", (xs.sparse_coo,), "numpy") if k.backend is None)
    assert_sparse_equal(r, generic.func(xp, x, picks, axis))


def test_take_strided_and_errors(xp: Any) -> None:
    d = xp.asarray([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]], dtype=xp.float64)
    assert_sparse_equal(xs.take(d, [2, -3], axis=1), xp.take(d, xp.asarray([2, 0]), axis=1))
    assert_sparse_equal(xs.take(xs.to_sparse(d)[0], [2, 2]), xp.asarray([2.0, 2.0], dtype=xp.float64))
    assert_sparse_equal(xs.take(xs.to_sparse_csr(d), [1], axis=0, layout=xs.sparse_coo), d[1:, :], check_layout=xs.sparse_coo)
    s = xs.to_sparse(d)
    with pytest.raises(ValueError, match=r"take: axis is required for an array of 2 dimensions \(axis=None, ndim=2\)\. Pass axis=\."):
        xs.take(s, [0])
    with pytest.raises(IndexError, match=r"take: index 3 is out of bounds for axis 1 of size 3 \(index=3, axis=1, size=3\)\. Use indices in \[-3, 3\)\."):
        xs.take(s, [0, 3], axis=1)
    with pytest.raises(IndexError, match=r"take: index -4 is out of bounds for axis 1"):
        xs.take(s, [-4], axis=1)
    # Python integers that no int64 holds (asarray raised its own overflow error, or made an object array)
    for bad in (2**63, -(2**63) - 1, 2**70):
        with pytest.raises(IndexError, match=rf"^take: index {bad} is out of bounds for axis 1 of size 3 \(index={bad}, axis=1"):
            xs.take(s, [0, bad], axis=1)
    with pytest.raises(TypeError, match=r"take: indices must be a 1-D integer array"):
        xs.take(s, [1.5, 2**70], axis=1)  # a float among them: not integers, whatever their size
    with pytest.raises(TypeError, match=r"take: indices must be a 1-D integer array \(shape=\(1, 1\), dtype=int64\)\. Pass a 1-D array"):
        xs.take(s, [[0]], axis=1)
    with pytest.raises(TypeError, match=r"take: indices must be a 1-D integer array \(shape=\(1,\), dtype=float(32|64)\)"):
        xs.take(s, [0.5], axis=1)
    # a sparse index array is read as the positions it holds (its unspecified elements are index 0)
    sparse_ind = xs.to_sparse(xp.asarray([2, 0, -1], dtype=xp.int32))
    assert_sparse_equal(xs.take(s, sparse_ind, axis=1), xp.take(d, xp.asarray([2, 0, 2]), axis=1))
    with pytest.raises(IndexError, match=r"take: axis 2 is out of range for an array of 2 dimensions"):
        xs.take(s, [0], axis=2)


def test_public_getitem_takes_layout(xp: Any, layout: xs.Layout) -> None:
    """``xs.getitem(x, key, layout=)`` is ``x[key]``, then ``layout=`` converts; strided arrays too."""
    d = xp.asarray([[0, 1, 0, 2], [3, 0, 0, 4], [0, 0, 5, 0], [6, 0, 0, 7]], dtype=xp.float64)
    x = xs.to_sparse(d, layout=layout, blocksize=(2, 2) if layout.is_blocked else None)
    for key in [(slice(0, 2), slice(None)), (1,), (slice(None, None, -1), 3), (None, Ellipsis)]:
        expected = host_array(xp, np.asarray(to_numpy(d)[key]))  # torch has no negative steps
        assert_sparse_equal(xs.getitem(x, key), x[key])
        assert_sparse_equal(xs.getitem(x, key), expected)
        r = xs.getitem(x, key, layout=xs.sparse_coo)
        assert r.layout is xs.sparse_coo
        assert_sparse_equal(r, expected)
        assert_sparse_equal(xs.getitem(x, key, layout=xs.strided), expected, check_layout=xs.strided)
    assert_sparse_equal(xs.getitem(d, (slice(1, 3), 0)), d[1:3, 0], check_layout=xs.strided)
    assert xs.getitem(d, (slice(1, 3),), layout=xs.sparse_csr).layout is xs.sparse_csr
    with pytest.raises(TypeError, match=r"^getitem: layout must be an xsparse layout or None \(layout='coo'\)"):
        xs.getitem(x, 0, layout="coo")


def test_take_along_axis_examples_and_errors(xp: Any) -> None:
    d = xp.asarray([[0.0, 1.0, 0.0, 2.0], [3.0, 0.0, 0.0, 4.0]], dtype=xp.float64)
    s = xs.to_sparse_coo(d, fill_value=0.0)
    ind = xp.asarray([[3, -1, 0], [1, 0, -4]])
    wrapped = xp.asarray([[3, 3, 0], [1, 0, 0]])
    r = xs.take_along_axis(s, ind, axis=1)
    assert r.layout is xs.sparse_coo and r.is_coalesced() and r.nnz == 4
    assert_sparse_equal(r, xp.take_along_axis(d, wrapped, axis=1))
    assert_sparse_equal(xs.take_along_axis(d, ind, axis=-1), xp.take_along_axis(d, wrapped, axis=1))
    col = xp.asarray([[1], [0]])
    assert_sparse_equal(xs.take_along_axis(xs.to_sparse_csr(d), col, axis=0), xp.take_along_axis(d, col, axis=0), check_layout=xs.sparse_csr)
    with pytest.raises(IndexError, match=r"^take_along_axis: index 4 is out of bounds for axis 1 of size 4 \(index=4, axis=1, size=4\)\. Use indices in \[-4, 4\)\.$"):
        xs.take_along_axis(s, xp.asarray([[4]]), axis=1)
    with pytest.raises(ValueError, match=r"^take_along_axis: indices must be an integer array with as many dimensions as x \(x\.ndim=2, indices\.ndim=1, dtype=int64\)"):
        xs.take_along_axis(s, xp.asarray([0]), axis=1)
    with pytest.raises(ValueError, match=r"^take_along_axis: the shapes of x and indices do not broadcast outside axis 1 \(shape=\(2, 4\), indices\.shape=\(3, 1\)\)\. Make"):
        xs.take_along_axis(s, xp.asarray([[0], [1], [2]]), axis=1)
    assert_sparse_equal(xs.take_along_axis(s, xs.to_sparse(ind), axis=1), xp.take_along_axis(d, wrapped, axis=1))
    with pytest.raises(TypeError, match=r"^take_along_axis: indices must be a backend integer array, got list\. Create it with the backend's asarray\.$"):
        xs.take_along_axis(s, [[0]], axis=1)
    with pytest.raises(IndexError, match=r"^take_along_axis: axis 2 is out of range for an array of 2 dimensions"):
        xs.take_along_axis(s, xp.asarray([[0]]), axis=2)


# -- sparse_mask ------------------------------------------------------------------------------------


def mask_pattern(xp: Any, mask: xs.SparseArray) -> Any:
    """Where ``mask`` specifies an element (every element of a stored block or dense sub-array)."""
    ones = xp.ones(mask._vals.shape, dtype=xp.bool)
    return xs.to_dense(mask._with_values(ones, False))


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_sparse_mask_every_kernel(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """sparse_mask of strided and sparse x (COO of any sparse_dim, or x's case in another layout) by a mask
    in every layout: x where the mask specifies, x's fill value elsewhere, in the mask's layout."""
    mask, _ = data.draw(sparse_inputs(xp, layout), label="mask")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    dtype = data.draw(st.sampled_from(["float64", "int32", "complex128", "bool"]), label="dtype")
    host = S.nonzero_values(rng, dtype, math.prod(mask.shape), 0).reshape(mask.shape)
    host[rng.random(mask.shape) < 0.5] = 0
    dense = host_array(xp, host)
    kind = data.draw(st.sampled_from(["strided", "coo", "same"]), label="x kind")
    if kind == "strided":
        x: Any = dense
        fill: Any = 0
    else:
        fill = data.draw(S.fill_values(dtype), label="fill") if data.draw(st.booleans()) else 0
        if fill != 0 or fill != fill:
            host = np.where(rng.random(mask.shape) < 0.3, np.asarray(fill, dtype=dtype), host)
            dense = host_array(xp, host)
        if kind == "coo" or layout is xs.sparse_coo or mask.batch_dim() and math.prod(mask.shape[: mask.batch_dim()]) > 1:  # type: ignore[attr-defined]
            x = xs.to_sparse_coo(dense, sparse_dim=data.draw(st.integers(0, mask.ndim)), fill_value=fill)
            if data.draw(st.booleans(), label="duplicates in x"):
                x = S.uncoalesced_like(xp, rng, x, "int64")
        else:
            x = xs.to_sparse(dense, layout=xs.sparse_csr, dense_dim=mask.dense_dim(), fill_value=fill)
    fill_arr = xp.asarray(np.asarray(fill, dtype=dtype))
    expected = xp.where(mask_pattern(xp, mask), dense, fill_arr)
    results = run_kernels("sparse_mask", (xs.layout_of(x), layout), backend, xp, x, mask)
    check_all(results, expected)
    r = xs.sparse_mask(x, mask)
    assert_sparse_equal(r, expected, check_layout=layout)
    assert _same_fill(r.fill_value, fill)
    assert r.nnz == xs.coalesce(mask).nnz


def test_sparse_mask_values_are_plain_arrays(xp: Any) -> None:
    """The values of a result can be viewed (real, imag), whichever kernel made them."""
    d = xp.asarray([[1 + 2j, 3j], [4.0, 5 - 1j]], dtype=xp.complex128)
    for mask in (xs.to_sparse_csr(xp.eye(2)), xs.to_sparse_bsc(xp.eye(2), (1, 2)), xs.to_sparse_coo(xp.eye(2))):
        r = xs.sparse_mask(d, mask)
        assert_sparse_equal(xs.imag(r), xp.imag(xp.where(mask_pattern(xp, mask), d, xp.zeros_like(d))))


def test_sparse_mask_example_and_errors(xp: Any) -> None:
    d = xp.asarray([[1.0, 2.0], [3.0, 4.0]], dtype=xp.float64)
    mask = xs.to_sparse_bsr(xp.asarray([[1, 0], [0, 0]], dtype=xp.int64), (1, 2))
    r = xs.sparse_mask(d, mask, layout=xs.sparse_coo)
    assert_sparse_equal(r, xp.asarray([[1.0, 2.0], [0.0, 0.0]], dtype=xp.float64), check_layout=xs.sparse_coo)
    with pytest.raises(xs.LayoutError, match=r"sparse_mask: mask must be a sparse array, got .*\. Convert it first, e\.g\. with xsparse\.to_sparse\(mask\)\."):
        xs.sparse_mask(d, d)
    with pytest.raises(ValueError, match=r"sparse_mask: x and mask must have the same shape \(x\.shape=\(2, 2\), mask\.shape=\(1, 2\)\)\. Pass arrays of one shape\."):
        xs.sparse_mask(d, xs.to_sparse(d[:1, :]))


# -- where ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_where_every_kernel(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """where(sparse condition, x1, x2) with scalar, sparse and strided operands; the condition's fill value
    picks the result's fill value."""
    cond, chost = data.draw(sparse_inputs(xp, layout, dtype="bool"), label="condition")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    if layout is xs.sparse_coo and data.draw(st.booleans(), label="duplicates in condition"):
        cond = S.uncoalesced_like(xp, rng, cond, "int64")
    dtype = data.draw(st.sampled_from(["float64", "int64", "float32"]), label="dtype")
    element_sd = cond.ndim - cond.dense_dim()

    def operand(label: str) -> tuple[Any, Any, Any]:
        kind = data.draw(st.sampled_from(["scalar", "sparse", "sparse", "strided"]), label=f"{label} kind")
        if kind == "scalar":
            v = data.draw(st.sampled_from([0, 2, -3]), label=label)
            v = float(v) if dtype.startswith("float") else v
            return v, xp.asarray(v, dtype=getattr(xp, dtype)), v
        host = S.nonzero_values(rng, dtype, math.prod(cond.shape), 0, specials=False).reshape(cond.shape)
        fill = data.draw(S.fill_values(dtype), label=f"{label} fill") if data.draw(st.booleans()) else 0
        host[rng.random(cond.shape) < 0.5] = fill
        dense = host_array(xp, host)
        if kind == "strided":
            return dense, dense, None
        coo = xs.to_sparse_coo(dense, sparse_dim=element_sd, fill_value=fill)
        if data.draw(st.booleans(), label=f"{label} duplicates"):
            coo = S.uncoalesced_like(xp, rng, coo, "int32")
        return coo, dense, fill

    x1, d1, f1 = operand("x1")
    x2, d2, f2 = operand("x2")
    cdense = host_array(xp, chost)
    expected = xp.where(cdense, d1, d2)
    if tuple(expected.shape) != tuple(cond.shape):  # two scalars and an empty condition
        expected = xp.broadcast_to(expected, tuple(cond.shape))
    kinds = tuple(xs.layout_of(v) if not isinstance(v, (int, float)) else "scalar" for v in (cond, x1, x2))
    results = run_kernels("where", kinds, backend, xp, cond, x1, x2)
    check_all(results, expected, check_dtype=False)
    r = xs.where(cond, x1, x2)
    any_strided = xs.strided in kinds
    assert_sparse_equal(r, expected, check_layout=xs.strided if any_strided else layout, check_dtype=False)
    if not any_strided:
        want = f1 if cond.fill_value else f2
        assert _same_fill(r.fill_value, want), (r.fill_value, want)


def test_where_examples_and_errors(xp: Any) -> None:
    c = xs.sparse_csr_array(xp.asarray([0, 1, 1]), xp.asarray([1]), xp.asarray([True]), (2, 2), fill_value=False)
    x = xs.sparse_csr_array(xp.asarray([0, 1, 2]), xp.asarray([0, 1]), xp.asarray([5.0, 6.0], dtype=xp.float64), (2, 2), fill_value=1.0)
    r = xs.where(c, 0.0, x)
    assert r.layout is xs.sparse_csr and r.fill_value == 1.0
    assert_sparse_equal(r, xp.asarray([[5.0, 0.0], [1.0, 6.0]], dtype=xp.float64))
    # broadcasting the condition against a larger operand gives COO
    row = xs.to_sparse_coo(xp.asarray([True, False]))
    big = xs.to_sparse_coo(xp.asarray([[1.0, 2.0], [3.0, 4.0]], dtype=xp.float64))
    assert_sparse_equal(xs.where(row, big, -1.0), xp.asarray([[1.0, -1.0], [3.0, -1.0]], dtype=xp.float64), check_layout=xs.sparse_coo)
    with pytest.raises(TypeError, match=r"where: condition must have dtype bool \(dtype=float64\)\. Compare first, e\.g\. xsparse\.where\(c != 0, x1, x2\)\."):
        xs.where(x, 1.0, 0.0)
    with pytest.raises(TypeError, match=r"where: condition must be an array, got bool\. Pass a boolean array\."):
        xs.where(True, x, 0.0)
    with pytest.raises(TypeError, match=r"where: expected an xsparse array, a backend array or a Python scalar, got list \(x1=\[1\.0\]\)\. Wrap lists"):
        xs.where(c, [1.0], 0.0)
    with pytest.raises(TypeError, match=r"where: the Python scalar x2=1\.5 does not mix with the dtype int64\. Pass a scalar of the array's kind"):
        xs.where(c, xs.astype(x, "int64"), 1.5)
    # operands split differently into sparse and dense dimensions take the condition's split, as in the
    # binary elementwise functions
    dense = np.asarray([[1.0, 0.0], [0.0, 3.0]])
    hybrid = xs.to_sparse_coo(xp.asarray(dense, dtype=xp.float64), sparse_dim=1)
    cd = to_numpy(xs.to_dense(c))
    r = xs.where(c, hybrid, 0.0)
    assert r.sparse_dim() == c.sparse_dim()
    assert_sparse_equal(r, xp.asarray(np.where(cd, dense, 0.0)))
    hybrid_c = xs.to_sparse_coo(xs.to_dense(c), sparse_dim=1)
    r = xs.where(hybrid_c, xs.to_sparse_coo(xp.asarray(dense, dtype=xp.float64)), -1.0)
    assert (r.sparse_dim(), r.dense_dim()) == (1, 1)
    assert_sparse_equal(r, xp.asarray(np.where(cd, dense, -1.0)))


# -- nonzero ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_nonzero_every_kernel(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """nonzero of a sparse array (fill value 0) equals the backend's nonzero of its dense form, in row-major order."""
    x, host = data.draw(sparse_inputs(xp, layout), label="x")
    if x.ndim == 0:
        return
    if x.fill_value != 0 or x.fill_value != x.fill_value:
        # the elements that differ from the fill value, on a fill value of 0
        differs = xs.logical_not(xs.isnan(x)) if x.fill_value != x.fill_value else x != x.fill_value
        x = xs.where(differs, x, type(x.fill_value)(0))
        host = to_numpy(xs.to_dense(x))
    expected = [to_numpy(i) for i in xp.nonzero(host_array(xp, host))]
    for k, result in run_kernels("nonzero", (layout,), backend, xp, x):
        assert len(result) == x.ndim, k.describe()
        for got, want in zip(result, expected):
            assert xs.layout_of(got) is xs.strided
            np.testing.assert_array_equal(to_numpy(got), want, err_msg=k.describe())
    assert [to_numpy(i).tolist() for i in xs.nonzero(x)] == [w.tolist() for w in expected]


def test_nonzero_strided_and_errors(xp: Any) -> None:
    d = xp.asarray([[0, 1], [2, 0]], dtype=xp.int64)
    assert [to_numpy(i).tolist() for i in xs.nonzero(d)] == [[0, 1], [1, 0]]
    s = xs.to_sparse(d, fill_value=1)
    with pytest.raises(xs.DensificationError, match=r"nonzero: every unspecified element equals the fill value, which is non-zero, so the result would list the whole array \(fill_value=1, shape=\(2, 2\)\)\. Use xsparse\.nonzero\(x != x\.fill_value\)"):
        xs.nonzero(s)
    assert [to_numpy(i).tolist() for i in xs.nonzero(s != s.fill_value)] == [[0, 1, 1], [0, 0, 1]]
    with pytest.raises(ValueError, match=r"nonzero: a 0-d array has no indices to return \(shape=\(\)\)\. Reshape it to 1-D first\."):
        xs.nonzero(xs.to_sparse(d)[0, 0])


# -- astype and clone -------------------------------------------------------------------------------


def _shares(a: Any, b: Any) -> bool:
    ha, hb = to_numpy(a), to_numpy(b)
    if hasattr(a, "untyped_storage"):
        return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()) and a.numel() > 0
    if isinstance(a, np.ndarray):
        return bool(np.shares_memory(a, b))
    if hasattr(a, "get"):  # CuPy: DLPack gives NumPy no view of device memory
        import cupy

        return bool(cupy.shares_memory(a, b)) if ha.size and hb.size else False
    return bool(np.shares_memory(np.from_dlpack(a), np.from_dlpack(b))) if ha.size and hb.size else False


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_astype_every_kernel(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """astype casts the values and the fill value, keeps the indices (and their dtype), and copies them with copy=True."""
    x, host = data.draw(sparse_inputs(xp, layout), label="x")
    src = np.dtype(str(to_numpy(x._vals).dtype))
    choices = [d for d in ("float64", "float32", "int64", "int16", "bool", "complex128") if hasattr(xp, d)]
    if src.kind == "c":
        choices = [d for d in choices if d.startswith("complex")]
    if src.kind in "fc" and not np.all(np.isfinite(host)):
        choices = [d for d in choices if not d.startswith("int")]
    target = data.draw(st.sampled_from(choices), label="dtype")
    if x.fill_value != x.fill_value and target.startswith("int"):
        return
    dt = getattr(xp, target)
    expected = xp.astype(host_array(xp, host), dt)
    for k, r in run_kernels("astype", (layout,), backend, xp, x, dt, True):
        assert_sparse_equal(r, expected)
    r = xs.astype(x, target)
    assert_sparse_equal(r, expected, check_layout=layout)
    assert r.index_dtype == x.index_dtype
    assert _same_fill(r.fill_value, np.asarray(x.fill_value).astype(target).item())
    for name, comp in r._components().items():
        assert not _shares(comp, x._components()[name]), name
    same = xs.astype(x, x.dtype, copy=False)
    assert same is x
    view = xs.astype(x, target, copy=False)
    if target != str(src) and x.is_coalesced():
        # copy=False shares the indices (an uncoalesced COO is coalesced first: a cast does not commute with sums)
        for name in list(x._components())[:-1]:
            assert view._components()[name] is x._components()[name]


def test_astype_strided_and_errors(xp: Any) -> None:
    d = xp.asarray([1.5, -2.5], dtype=xp.float64)
    assert_sparse_equal(xs.astype(d, "int64"), xp.astype(d, xp.int64))
    assert xs.astype(d, xp.float64, copy=False) is d
    c = xs.to_sparse(xp.asarray([1j, 0], dtype=xp.complex128))
    with pytest.raises(TypeError, match=r"astype: casting complex values to a real dtype drops their imaginary parts \(dtype=complex128, target=float64\)\. Cast xsparse\.real\(x\)"):
        xs.astype(c, "float64")
    n = xs.to_sparse(xp.asarray([1.0, 0.0], dtype=xp.float64), fill_value=math.nan)
    with pytest.raises(ValueError, match=r"astype: the fill value has no integer representation \(fill_value=nan, target=int32\)\. Convert with to_dense\(\)"):
        n.astype("int32")
    with pytest.raises(TypeError, match=r"^astype: 'float7' is not a dtype name of the Array API standard \(dtype='float7'\)"):
        xs.astype(d, "float7")
    moved = xs.astype(xs.to_sparse(d), "float32", device=xs.to_sparse(d).device)
    assert_sparse_equal(moved, xp.astype(d, xp.float32))
    # copy is a flag: "no" read as true for a sparse array and raised inside torch's .to for a strided one
    for x in (d, xs.to_sparse(d)):
        with pytest.raises(TypeError, match=r"^astype: copy must be True or False, got str \(copy='no'\)\. Pass a bool\.$"):
            xs.astype(x, "float32", copy="no")
    with pytest.raises(ValueError, match=r"^astype: device='nowhere' is not a device of backend '.*' \(devices=.*\)\. Pass one of"):
        xs.astype(xs.to_sparse(d), "float32", device="nowhere")


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@FEW
@given(data=st.data())
def test_clone_every_kernel(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """clone copies every component and keeps the metadata (layout, shape, fill, coalesced flag)."""
    x, host = data.draw(sparse_inputs(xp, layout), label="x")
    for k, r in run_kernels("clone", (layout,), backend, xp, x):
        assert_sparse_equal(r, host_array(xp, host), check_layout=layout)
        assert type(r) is type(x) and r.is_coalesced() == x.is_coalesced() and _same_fill(r.fill_value, x.fill_value)
        for name, comp in r._components().items():
            assert comp is not x._components()[name]
            assert not _shares(comp, x._components()[name]), name
    assert_sparse_equal(x.clone(), host_array(xp, host))
    d = host_array(xp, host)
    assert_sparse_equal(xs.clone(d), d)
    assert xs.clone(d) is not d
    assert_sparse_equal(xs.clone(x, layout=xs.strided), d, check_layout=xs.strided)


@SOME
@given(data=st.data())
def test_strided_kernels_from_registry(backend: str, xp: Any, data: st.DataObject) -> None:
    """The strided kernels of take, nonzero, astype and clone against the backend's own functions."""
    case = data.draw(S.coo_dense_cases(xp, max_ndim=3), label="case")
    d = case.array
    if d.ndim:
        axis = data.draw(st.integers(0, d.ndim - 1), label="axis")
        size = d.shape[axis]
        ind = xp.asarray(data.draw(st.lists(st.integers(0, size - 1), max_size=4)) if size else [], dtype=xp.int64)
        check_all(run_kernels("take", (xs.strided,), backend, xp, d, ind, axis), xp.take(d, ind, axis=axis))
        for k, r in run_kernels("nonzero", (xs.strided,), backend, xp, d):
            assert [to_numpy(i).tolist() for i in r] == [to_numpy(i).tolist() for i in xp.nonzero(d)], k.describe()
    target = xp.float64 if case.dtype.startswith(("int", "uint", "bool")) else d.dtype
    check_all(run_kernels("astype", (xs.strided,), backend, xp, d, target, True), xp.astype(d, target))
    for k, r in run_kernels("clone", (xs.strided,), backend, xp, d):
        assert_sparse_equal(r, d)
        assert not _shares(r, d) or math.prod(d.shape) == 0, k.describe()


# -- predicates -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, complex_, floating, signed",
    [
        ("bool", False, False, False),
        ("uint8", False, False, False),
        ("int8", False, False, True),
        ("int64", False, False, True),
        ("float32", False, True, True),
        ("complex128", True, False, True),
    ],
)
def test_dtype_predicates(xp: Any, dtype: str, complex_: bool, floating: bool, signed: bool) -> None:
    d = xp.zeros((2, 2), dtype=getattr(xp, dtype))
    for x in (d, xs.to_sparse_csr(d), xs.to_sparse_coo(d)):
        assert (xs.is_complex(x), xs.is_floating_point(x), xs.is_signed(x)) == (complex_, floating, signed)


def test_is_nonzero_and_is_same_size(xp: Any) -> None:
    one = xs.to_sparse(xp.asarray([[2.0]], dtype=xp.float64), fill_value=2.0)
    assert one.nnz == 0 and xs.is_nonzero(one)
    assert not xs.is_nonzero(xs.to_sparse(xp.asarray([[0.0]], dtype=xp.float64)))
    assert xs.is_nonzero(xs.to_sparse(xp.asarray([True])))
    assert xs.is_nonzero(xp.asarray([math.nan], dtype=xp.float64))
    assert xs.is_same_size(one, xp.zeros((1, 1))) and not xs.is_same_size(one, xp.zeros((1,)))
    with pytest.raises(ValueError, match=r"is_nonzero: the array must hold exactly one element \(size=2, shape=\(1, 2\)\)\. Index one element first"):
        xs.is_nonzero(xs.to_sparse(xp.zeros((1, 2))))
    with pytest.raises(TypeError, match=r"is_same_size: x2 must be an xsparse array or a backend array, got int\."):
        xs.is_same_size(one, 3)
    with pytest.raises(TypeError, match=r"is_complex: x must be an xsparse array or a backend array, got list\."):
        xs.is_complex([1j])


def test_methods_are_the_functions(xp: Any) -> None:
    s = xs.to_sparse_csr(xp.asarray([[0, 1.0], [2.0, 0]], dtype=xp.float64))
    assert_sparse_equal(s[1], xs.select(s, 0, 1))
    assert_sparse_equal(s.astype("float32"), xs.astype(s, "float32"))
    assert_sparse_equal(s.clone(), s)


def test_index_key_items() -> None:
    assert parse_key("getitem", (4, 5), (None, 1, ..., slice(None, None, -2))) == (
        NewAxis(), Int(0, 1), Slice(1, 4, -2, 3)
    )
    assert parse_key("getitem", (0,), slice(None, None, -1)) == (Slice(0, 0, -1, 0),)
    assert Slice(0, 4, -2, 3).stop == -2


# -- searches within compressed slices ------------------------------------------------------------------


def _random_matrix(data: st.DataObject, max_side: int = 7) -> np.ndarray:
    m, n = data.draw(st.integers(0, max_side), label="m"), data.draw(st.integers(0, max_side), label="n")
    density = data.draw(st.sampled_from([0.0, 0.2, 0.6, 1.0]), label="density")
    bits = data.draw(st.lists(st.floats(0, 1), min_size=m * n, max_size=m * n), label="bits")
    return np.reshape(np.asarray([b if b < density else 0.0 for b in bits] or [0.0] * (m * n)), (m, n))


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc], ids=str)
@SOME
@given(data=st.data())
def test_find_in_slices_against_a_scan(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """The bisection of every compressed slice finds a plain index exactly where a scan of the slice does (empty
    slices, nnz = 0, absent and repeated queries, int32 and int64 indices)."""
    from xsparse.backends.array_api.indexing import find_in_slices

    host = _random_matrix(data)
    idt = data.draw(st.sampled_from(["int32", "int64"]), label="index dtype")
    a = xs.to_sparse(xp.asarray(host), layout=layout, index_dtype=getattr(xp, idt))
    ptr, plain = to_numpy(a._compressed), to_numpy(a._plain)
    n_major, n_minor = ptr.shape[0] - 1, host.shape[1 - layout.compressed_dim]
    k = data.draw(st.integers(0, 12), label="queries") if n_major else 0
    major = data.draw(st.lists(st.integers(0, max(n_major - 1, 0)), min_size=k, max_size=k), label="major")
    minor = data.draw(st.lists(st.integers(-1, n_minor), min_size=k, max_size=k), label="minor")
    finds = [find_in_slices(xp, a._compressed, a._plain, xp.asarray(major, dtype=xp.int64), xp.asarray(minor, dtype=xp.int64))]
    if backend == "numpy" and _cpu.unavailable_reason() is None:
        compiled = _cpu.compressed_find(ptr, plain, np.asarray(major, dtype=np.int64), np.asarray(minor, dtype=np.int64))
        finds.append((compiled, compiled >= 0))
    for pos, found in finds:
        pos, found = to_numpy(pos), to_numpy(found)
        for q, (i, j) in enumerate(zip(major, minor)):
            hits = [e for e in range(ptr[i], ptr[i + 1]) if plain[e] == j]
            assert bool(found[q]) == bool(hits), (i, j)
            if hits:
                assert pos[q] == hits[0]


@pytest.mark.skipif(_cpu.unavailable_reason() is not None, reason=str(_cpu.unavailable_reason()))
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_compressed_find_in_long_slices(index_dtype: str) -> None:
    """The compiled search halves without branching: slices of every length from 0 to 300 (many halvings),
    every plain index from below the first to past the last queried, against NumPy's searchsorted."""
    rng = np.random.default_rng(11)
    lengths = np.arange(301)
    rows = [np.sort(rng.choice(1000, size=n, replace=False)) for n in lengths]
    ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(index_dtype)
    plain = np.concatenate(rows).astype(index_dtype)
    major = np.repeat(np.arange(301), 1002).astype(np.int64)
    minor = np.tile(np.arange(-1, 1001), 301).astype(np.int64)
    got = _cpu.compressed_find(ptr, plain, major, minor)
    expected = np.full(major.shape[0], -1, dtype=np.int64)
    for i, row in enumerate(rows):
        at = np.searchsorted(row, np.arange(-1, 1001))
        hit = (at < row.shape[0]) & (row[np.minimum(at, max(row.shape[0] - 1, 0))] == np.arange(-1, 1001)) if row.shape[0] else np.zeros(1002, bool)
        expected[i * 1002 : (i + 1) * 1002] = np.where(hit, ptr[i] + at, -1)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.skipif(_cpu.unavailable_reason() is not None, reason=str(_cpu.unavailable_reason()))
def test_compressed_find_reads_nothing_outside_the_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cpu, "available_threads", lambda: 2)  # the parallel form too
    ptr, plain = np.asarray([0, 2, 3], dtype=np.int32), np.asarray([1, 4, 0], dtype=np.int32)
    many = np.arange(10_000, dtype=np.int64) % 2
    got = _cpu.compressed_find(ptr, plain, many, np.full(10_000, 4, dtype=np.int64))
    np.testing.assert_array_equal(got, np.where(many == 0, 1, -1))
    message = r"^compressed_find: a query names no slice, or a slice's offsets are out of order or beyond the entries$"
    with pytest.raises(ValueError, match=message):
        _cpu.compressed_find(ptr, plain, np.asarray([2]), np.asarray([0]))
    with pytest.raises(ValueError, match=message):
        _cpu.compressed_find(ptr, plain, np.asarray([-1]), np.asarray([0]))
    with pytest.raises(ValueError, match=message):
        _cpu.compressed_find(np.asarray([0, 4, 3], dtype=np.int32), plain, np.asarray([0]), np.asarray([0]))
    with pytest.raises(ValueError, match=message):
        _cpu.compressed_find(np.asarray([0, 2, 1], dtype=np.int32), plain, np.asarray([1]), np.asarray([0]))


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc], ids=str)
@SOME
@given(data=st.data())
def test_diagonal_on_pointers_against_the_element_coo(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """The diagonal of one CSR/CSC matrix found by bisection equals the element COO's and the dense one, for
    every offset (beyond the matrix too)."""
    from xsparse.backends.array_api.conversion import compressed_to_coo
    from xsparse.backends.array_api.linalg_ext import diagonal_coo, diagonal_on_pointers

    host = _random_matrix(data)
    idt = data.draw(st.sampled_from(["int32", "int64"]), label="index dtype")
    a = xs.to_sparse(xp.asarray(host), layout=layout, index_dtype=getattr(xp, idt))
    offset = data.draw(st.integers(-9, 9), label="offset")
    got = diagonal_on_pointers(xp, a, offset)
    expected = xp.asarray(np.diagonal(host, offset=offset).copy())
    assert_sparse_equal(got, expected, check_layout=xs.sparse_coo)
    assert_sparse_equal(got, diagonal_coo(xp, compressed_to_coo(xp, a), offset))
    assert got.index_dtype == a.index_dtype and got.is_coalesced()
    check_all(run_kernels("diagonal", (layout,), backend, xp, a, offset), expected, check_layout=xs.sparse_coo)


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
def test_diagonal_far_beyond_the_matrix_is_empty(backend: str, xp: Any, layout: xs.Layout) -> None:
    """An offset past int64's range once added to a position: an empty diagonal on every layout."""
    a = xs.to_sparse(xp.asarray([[1.0, 2.0], [0.0, 3.0]]), layout=layout, blocksize=(1, 1) if layout.is_blocked else None)
    for offset in (-(2**63), 2**63 - 1, 2**63, -(2**70), 2**70, -3, 3):
        d = xs.linalg.diagonal(a, offset=offset)
        assert d.layout is xs.sparse_coo and d.shape == (0,) and d.nnz == 0


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@SOME
@given(data=st.data())
def test_gather_points_every_kernel(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """x[i, j, ...] at flat in-bounds positions of the leading dimensions, result dimensions ``shape``: every kernel
    (the bisection of one CSR/CSC matrix, the merged take) against NumPy's indexing of the same elements."""
    x, host = data.draw(sparse_inputs(xp, layout), label="x")
    k = data.draw(st.integers(1, max(1, x.ndim)), label="k")
    if x.ndim < k or any(x.shape[d] == 0 for d in range(k)):
        return
    shape = data.draw(st.sampled_from([(0,), (1,), (5,), (2, 3)]), label="shape")
    n = math.prod(shape)
    picks = [np.asarray(data.draw(st.lists(st.integers(0, x.shape[d] - 1), min_size=n, max_size=n), label=f"picks{d}"), dtype=np.int64)
             for d in range(k)]  # fmt: skip
    expected = host_array(xp, np.reshape(np.asarray(host[tuple(picks)]), (*shape, *x.shape[k:])))
    results = run_kernels("gather_points", (layout,), backend, xp, x, [xp.asarray(p) for p in picks], shape)
    check_all(results, expected)
    if layout.is_compressed and k == 2 and x.ndim == 2 and not layout.is_blocked:
        assert any(k.func.__name__ == "_gather_points_compressed" for k, _ in results), "the bisection did not run"


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc], ids=str)
@SOME
@given(data=st.data())
def test_triangles_on_pointers_against_the_element_coo(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """tril and triu of one CSR/CSC matrix filtered on its pointers equal the element COO's triangles and the dense
    ones, for every k (beyond the matrix too), and keep the layout, the index dtype and sorted slices; so does
    every kernel registered for the backend (the NumPy backend's compiled filter)."""
    from xsparse.backends.array_api.conversion import compressed_to_coo
    from xsparse.backends.array_api.creation import _triangle_compressed, triangle_coo

    host = _random_matrix(data)
    idt = data.draw(st.sampled_from(["int32", "int64"]), label="index dtype")
    a = xs.to_sparse(xp.asarray(host), layout=layout, index_dtype=getattr(xp, idt))
    k = data.draw(st.integers(-9, 9), label="k")
    for lower, dense in ((True, np.tril(host, k)), (False, np.triu(host, k))):
        got = _triangle_compressed(xp, a, k, lower)
        with xs.check_sparse_tensor_invariants():
            xs.sparse_compressed_array(got._compressed, got._plain, got._vals, got.shape, layout=layout)
        assert_sparse_equal(got, xp.asarray(dense), check_layout=layout)
        assert_sparse_equal(got, triangle_coo(xp, compressed_to_coo(xp, a), k, lower))
        assert got.index_dtype == a.index_dtype
        results = run_kernels("tril" if lower else "triu", (layout,), backend, xp, a, k)
        check_all(results, xp.asarray(dense), check_layout=layout)
        for kernel, r in results:
            with xs.check_sparse_tensor_invariants():
                xs.sparse_compressed_array(r._compressed, r._plain, r._vals, r.shape, layout=layout)
            assert r.index_dtype == a.index_dtype, kernel.describe()
        if backend == "numpy" and _cpu.unavailable_reason() is None:
            assert any(kernel.backend == "numpy" for kernel, _ in results), "the compiled filter did not run"


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc], ids=str)
@SOME
@given(data=st.data())
def test_take_along_one_matrix_every_kernel(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """take along either sparse dimension of one CSR/CSC matrix (A[rows], A[:, cols]): every kernel (pointers,
    counts, searches) against the dense take, with sorted, unsorted, repeated and no indices."""
    host = _random_matrix(data)
    idt = data.draw(st.sampled_from(["int32", "int64"]), label="index dtype")
    a = xs.to_sparse(xp.asarray(host), layout=layout, index_dtype=getattr(xp, idt))
    axis = data.draw(st.integers(0, 1), label="axis")
    size = host.shape[axis]
    picks = data.draw(st.lists(st.integers(0, size - 1), max_size=9), label="picks") if size else []
    if data.draw(st.booleans(), label="sorted"):
        picks.sort()
    ind = xp.asarray(np.asarray(picks, dtype=np.int64))
    results = run_kernels("take", (layout,), backend, xp, a, ind, axis)
    check_all(results, xp.asarray(np.take(host, np.asarray(picks, dtype=np.int64), axis=axis)), check_layout=layout)
    for _, r in results:
        with xs.check_sparse_tensor_invariants():
            xs.sparse_compressed_array(r._compressed, r._plain, r._vals, r.shape, layout=layout)


@pytest.mark.skipif(_cpu.unavailable_reason() is not None, reason=str(_cpu.unavailable_reason()))
@pytest.mark.parametrize("threads", [1, 2])
def test_compiled_take_plain_against_numpy(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled take along the plain dimension of a large matrix (both thread counts, sorted and unsorted
    picks) equals NumPy's, and reads nothing outside its buffers for a malformed structure."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: threads)
    rng = np.random.default_rng(3)
    dense = np.where(rng.random((400, 600)) < 0.3, rng.standard_normal((400, 600)), 0.0)
    a = xs.to_sparse_csr(dense, index_dtype="int32")
    assert a.nnz >= 1 << 16  # the parallel form
    for sel in (rng.integers(0, 600, 900), np.sort(rng.integers(0, 600, 50)), np.asarray([], dtype=np.int64)):
        assert_sparse_equal(xs.take(a, sel, axis=1), np.take(dense, sel, axis=1), check_layout=xs.sparse_csr)
    ptr, plain = np.asarray([0, 2, 3], dtype=np.int64), np.asarray([0, 1, 1], dtype=np.int64)
    new_ptr, entry, position = _cpu.take_plain(ptr, plain, np.asarray([1, 0, 1]), 2)
    np.testing.assert_array_equal(new_ptr, [0, 3, 5])
    # the picks are not ascending: each slice's copies come sorted by their new position
    np.testing.assert_array_equal(entry, [1, 0, 1, 2, 2])
    np.testing.assert_array_equal(position, [0, 1, 2, 0, 2])
    message = r"^take_plain: the compressed indices are not non-decreasing from 0 to nse"
    with pytest.raises(ValueError, match=message):
        _cpu.take_plain(np.asarray([0, 3, 2]), plain, np.asarray([0]), 2)
    with pytest.raises(ValueError, match=message):
        _cpu.take_plain(ptr, np.asarray([0, 5, 1]), np.asarray([0]), 2)
    with pytest.raises(ValueError, match=message):
        _cpu.take_plain(np.asarray([0, 2, 4]), plain, np.asarray([0]), 2)
    # the fill pass checks the pointers it is given too: a slice's copies must fill its range exactly
    native, count, first, order = _cpu._native_module(), np.asarray([1, 2]), np.asarray([0, 1]), np.asarray([1, 0, 2])
    for wrong in ([0, 1, 5], [0, 4, 5], [0, 3, 4]):
        out = np.empty(wrong[-1], dtype=np.int64), np.empty(wrong[-1], dtype=np.int64)
        with pytest.raises(ValueError, match=message):
            native.take_plain_fill(ptr, plain, count, first, order, np.asarray(wrong, dtype=np.int64), *out, True, 1)
    with pytest.raises(ValueError, match=r"^take_plain: inconsistent arrays or counts$"):
        native.take_plain_fill(ptr, plain, count, np.asarray([0, 2]), order, new_ptr, entry.copy(), position.copy(), True, 1)
    # counts whose running sum wraps around int64 (a review's reproducer: it read before `order`)
    huge, wrapped = np.asarray([2**63 - 1, 2**63 - 1, 2, 1]), np.asarray([0, 2**63 - 1, -2, 0])
    with pytest.raises(ValueError, match=r"^take_plain: inconsistent arrays or counts$"):
        native.take_plain_fill(np.asarray([0, 1]), np.asarray([2]), huge, wrapped, np.asarray([111]), np.asarray([0, 2]),
                               np.empty(2, dtype=np.int64), np.empty(2, dtype=np.int64), False, 1)  # fmt: skip
    with pytest.raises(ValueError, match=r"^take_plain: the picks must lie in \[0, 2\) \(min=0, max=5\)$"):
        _cpu.take_plain(ptr, plain, np.asarray([0, 5]), 2)


@pytest.mark.skipif(_cpu.unavailable_reason() is not None, reason=str(_cpu.unavailable_reason()))
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_compiled_gather_slices_against_numpy(threads: int, index_dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled gather of whole rows (A[rows]) of a large matrix, with a dense dimension (both thread counts,
    repeated, unsorted and no rows) equals NumPy's, and reads nothing outside its buffers for a malformed
    structure or a row out of range."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: threads)
    rng = np.random.default_rng(5)
    dense = np.where(rng.random((500, 400, 1)) < 0.4, rng.standard_normal((500, 400, 2)), 0.0)
    a = xs.to_sparse(dense, layout=xs.sparse_csr, dense_dim=1, index_dtype=index_dtype)
    assert a.nnz >= 1 << 16  # the parallel form
    for sel in (rng.integers(0, 500, 700), np.asarray([3, 3, 0, 499]), np.asarray([], dtype=np.int64)):
        got = xs.take(a, sel, axis=0)
        assert_sparse_equal(got, np.take(dense, sel, axis=0), check_layout=xs.sparse_csr)
        assert got.index_dtype == a.index_dtype
    ptr, plain, vals = np.asarray([0, 2, 3], dtype=index_dtype), np.asarray([0, 1, 1], dtype=index_dtype), np.arange(3.0)
    new_ptr, got_plain, got_vals = _cpu.gather_slices(ptr, plain, vals, np.asarray([1, 0, 1]))
    np.testing.assert_array_equal(new_ptr, [0, 1, 3, 4])
    np.testing.assert_array_equal(got_plain, [1, 0, 1, 1])
    np.testing.assert_array_equal(got_vals, [2.0, 0.0, 1.0, 2.0])
    assert got_plain.dtype == plain.dtype
    message = r"^gather_slices: a pick is out of range, or the compressed indices are not non-decreasing from 0 to nse"
    for bad_ptr, rows in (([0, 3, 2], [1]), ([0, 2, 4], [1]), ([-1, 2, 3], [0]), (ptr, [2]), (ptr, [-1])):
        with pytest.raises(ValueError, match=message):
            _cpu.gather_slices(np.asarray(bad_ptr, dtype=index_dtype), plain, vals, np.asarray(rows))
    # the fill pass checks the pointers it is given too: a pick's entries must fill its range exactly
    native = _cpu._native_module()
    for wrong in ([0, 2, 2], [0, 1, 3], [0, 0, 1]):
        out_plain, out_vals = np.empty(wrong[-1], dtype=plain.dtype), np.empty(wrong[-1])
        with pytest.raises(ValueError, match=message):
            native.gather_slices_fill(ptr, plain, vals.view(np.uint8), np.asarray([1, 1]), np.asarray(wrong, dtype=np.int64),
                                      out_plain, out_vals.view(np.uint8), 1)  # fmt: skip
    with pytest.raises(ValueError, match=r"^gather_slices: inconsistent arrays$"):
        native.gather_slices_fill(ptr, plain, vals.view(np.uint8), np.asarray([1]), np.asarray([0, 1], dtype=np.int64),
                                  np.empty(2, dtype=plain.dtype), np.empty(2).view(np.uint8), 1)  # fmt: skip


@pytest.mark.skipif(_cpu.unavailable_reason() is not None, reason=str(_cpu.unavailable_reason()))
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_compiled_band_against_numpy(threads: int, index_dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled filter of tril and triu on a large CSR and CSC matrix (both thread counts, complex values,
    every side of the diagonal and beyond the matrix) equals NumPy's triangles; an unsorted slice is still
    filtered entry by entry; nothing is read outside the buffers for a malformed structure."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: threads)
    rng = np.random.default_rng(7)
    dense = np.where(rng.random((300, 500)) < 0.5, rng.standard_normal((300, 500)) + 1j, 0)
    for layout in (xs.sparse_csr, xs.sparse_csc):
        a = xs.to_sparse(dense, layout=layout, index_dtype=index_dtype)
        assert a.nnz >= 1 << 16  # the parallel form
        for k in (0, 1, -2, 250, -299, 499, 500, -300, 2**70, -(2**70)):
            near = min(max(k, -600), 600)  # NumPy's tril overflows beyond int64; any k beyond the matrix is alike
            for fn, want in ((xs.tril, np.tril(dense, near)), (xs.triu, np.triu(dense, near))):
                got = fn(a, k=k)
                assert_sparse_equal(got, want, check_layout=layout)
                assert got.index_dtype == a.index_dtype
    # slice 0 unsorted ([2, 0, 1], as no valid array has it): the kept entries in their order, not one run
    ptr, plain, vals = np.asarray([0, 3, 4], dtype=index_dtype), np.asarray([2, 0, 1, 0], dtype=index_dtype), np.arange(4.0)
    new_ptr, got_plain, got_vals = _cpu.band(ptr, plain, vals, 0, True)
    np.testing.assert_array_equal(new_ptr, [0, 1, 2])
    np.testing.assert_array_equal(got_plain, [0, 0])
    np.testing.assert_array_equal(got_vals, [1.0, 3.0])
    new_ptr, got_plain, got_vals = _cpu.band(ptr, plain, vals, 1, False)
    np.testing.assert_array_equal(new_ptr, [0, 2, 2])
    np.testing.assert_array_equal(got_plain, [2, 1])
    np.testing.assert_array_equal(got_vals, [0.0, 2.0])
    assert got_plain.dtype == plain.dtype
    message = r"^band: the compressed indices are not non-decreasing from 0 to nse"
    for bad_ptr in ([0, 3, 2], [0, 2, 5], [-1, 2, 4]):
        with pytest.raises(ValueError, match=message):
            _cpu.band(np.asarray(bad_ptr, dtype=index_dtype), plain, vals, 0, True)
    # the fill pass checks the pointers it is given too: a slice's kept entries must fill its range exactly
    native = _cpu._native_module()
    for wrong in ([0, 2, 2], [0, 0, 2], [0, 1, 1]):
        out_plain, out_vals = np.empty(wrong[-1], dtype=plain.dtype), np.empty(wrong[-1])
        with pytest.raises(ValueError, match=message):
            native.band_fill(ptr, plain, vals.view(np.uint8), 0, True, np.asarray(wrong, dtype=np.int64),
                             out_plain, out_vals.view(np.uint8), 1)  # fmt: skip
    with pytest.raises(ValueError, match=r"^band: inconsistent arrays$"):
        native.band_fill(ptr, plain, vals.view(np.uint8), 0, True, np.asarray([0, 1, 2], dtype=np.int64),
                         np.empty(3, dtype=plain.dtype), np.empty(3).view(np.uint8), 1)  # fmt: skip
    with pytest.raises(ValueError, match=r"^band: inconsistent arrays$"):
        native.band_count(ptr, plain, 2**63 - 1, True, np.empty(3, dtype=np.int64), 1)


def test_take_along_a_very_wide_matrix(backend: str, xp: Any) -> None:
    """A[:, cols] and a stepped column slice of a matrix of 20M columns and 3 entries: the kernels that work per
    column (a count per column, SciPy's index per position) decline, and the result needs memory for the
    entries only."""
    n = 20_000_000
    a = xs.sparse_csr_array(xp.asarray([0, 2, 3]), xp.asarray([1, n - 2, 7]), xp.asarray([1.0, 2.0, 3.0]), (2, n))
    cols = xp.asarray([n - 2, 7, 1, 7])
    native = [k for k in xs.kernels("take") if k.backend == backend and k.matches((xs.sparse_csr,)) and k.supports is not None]
    assert len(native) == (backend in ("numpy", "torch"))  # the kernels that count per column
    for k in native:
        assert "outweigh the entries" in str(k.supports(xp, a, cols, 1))
    r = a[:, cols]
    assert r.layout is xs.sparse_csr and r.shape == (2, 4)
    assert_sparse_equal(r, xp.asarray([[2.0, 0.0, 1.0, 0.0], [0.0, 3.0, 0.0, 3.0]]))
    if backend == "numpy":
        scipy_slicing = next(k for k in xs.kernels("getitem") if k.backend == "numpy")
        assert "one offset per position" in str(scipy_slicing.supports(xp, a, parse_key("getitem", a.shape, (slice(None), slice(None, None, -3)))))
    s = a[:, ::-3]  # columns n-1, n-4, ..., 7, 4, 1: 1 and 7 among them, n - 2 not
    assert s.shape == (2, (n + 2) // 3) and s.nnz == 2
    last = (n + 2) // 3 - 1
    assert_sparse_equal(s[:, last - 2 :], xp.asarray([[0.0, 0.0, 1.0], [3.0, 0.0, 0.0]]))


def test_a_long_step_across_a_very_wide_matrix(backend: str, xp: Any) -> None:
    """A stepped column slice that picks 4 columns of 2**40: SciPy would index it through offsets for every
    column (8 TiB), so its kernel declines and the result costs the entries only."""
    n = 2**40
    a = xs.sparse_csr_array(xp.asarray([0, 2, 3]), xp.asarray([0, 2**20, n - 2**38]), xp.asarray([1.0, 2.0, 3.0]), (2, n))
    if backend == "numpy":
        scipy_slicing = next(k for k in xs.kernels("getitem") if k.backend == "numpy")
        key = parse_key("getitem", a.shape, (slice(None), slice(None, None, 2**38)))
        assert "one offset per position" in str(scipy_slicing.supports(xp, a, key))
    r = a[:, :: 2**38]  # columns 0, 2**38, 2**39, 3 * 2**38
    assert r.layout is xs.sparse_csr and r.shape == (2, 4)
    assert_sparse_equal(r, xp.asarray([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 3.0]]))
    t = a.mT[:: 2**38]  # the CSC view of the transpose, its rows (plain) stepped
    assert t.layout is xs.sparse_csc and t.shape == (4, 2)
    assert_sparse_equal(t, xp.asarray([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 3.0]]))



@pytest.mark.parametrize("coalesced", [True, False])
def test_take_from_a_coo_array_along_a_very_long_axis(backend: str, xp: Any, coalesced: bool) -> None:
    """A COO array of 2**40 columns and 2 entries: the NumPy kernel that counts the picks per index of the
    axis (an array as long as the axis: 8 TiB) declines, and the result needs memory for the entries only."""
    n = 2**40
    x = xs.sparse_coo_array(xp.asarray([[0, 2], [5, n - 1]]), xp.asarray([1.0, 2.0]), (3, n), is_coalesced=coalesced)
    picks = xp.asarray([n - 1, 5, 5])
    if backend == "numpy":
        native = next(k for k in dispatch.resolve("take", (xs.sparse_coo,), "numpy") if k.backend == "numpy")
        assert "outweigh the entries" in str(native.supports(xp, x, picks, 1))
    for r in (x[:, picks], xs.take(x, picks, axis=1)):
        assert r.shape == (3, 3)
        assert_sparse_equal(r, xp.asarray([[0.0, 1.0, 1.0], [0.0, 0.0, 0.0], [2.0, 0.0, 0.0]]))


def test_points_of_a_coo_array_whose_positions_pass_int64(backend: str, xp: Any) -> None:
    """x[rows, cols] of a 2**40 x 2**40 array: its positions pass int64, so each indexed dimension is first
    cut down to the distinct indices it is indexed at (a scalar x[1, 3] never merged the dimensions)."""
    n = 2**40
    x = xs.sparse_coo_array(xp.asarray([[1, 5, 1], [3, 2, n - 1]]), xp.asarray([7.0, 8.0, 9.0]), (n, n))
    assert_sparse_equal(x[xp.asarray([1, 5, 1, 0]), xp.asarray([3, 2, n - 1, 3])], xp.asarray([7.0, 8.0, 9.0, 0.0]))
    h = xs.sparse_coo_array(xp.asarray([[1, 5, 1], [3, 2, n - 1], [0, 1, 1]]), xp.asarray([7.0, 8.0, 9.0]), (n, n, 2))
    want = [[[7.0, 0.0], [0.0, 0.0], [0.0, 9.0]], [[0.0, 0.0], [0.0, 8.0], [0.0, 0.0]]]
    assert_sparse_equal(h[xp.asarray([[1], [5]]), xp.asarray([[3, 2, n - 1]])], xp.asarray(want))
    # distinct indices that still pass int64 together: (2**21)**3 = 2**63
    p = xp.arange(2**21)
    with pytest.raises(ValueError, match=r"^getitem: the points index more positions than int64 can number \(distinct indices per dimension: \(2097152, 2097152, 2097152\)\)\. Index with fewer points"):
        xs.sparse_coo_array(xp.asarray([[1], [3], [2]]), xp.asarray([7.0]), (n, n, n))[p, p, p]

def test_uint64_indices_int64_cannot_hold_are_out_of_bounds(backend: str, xp: Any) -> None:
    # the cast to int64 wraps 2**64 - 1 around to -1, which NumPy's own take reads as x[-1]
    if not hasattr(xp, "uint64"):
        pytest.skip("the backend has no uint64")
    x = xs.to_sparse(xp.asarray([1.0, 2.0, 3.0, 4.0]))
    huge = xp.asarray([2**64 - 1, 0], dtype=xp.uint64)
    calls = {
        "take": lambda: xs.take(x, huge),
        "index_select": lambda: xs.index_select(x, 0, huge),
        "getitem": lambda: x[huge],
        "take_along_axis": lambda: xs.take_along_axis(x, huge, axis=0),
    }
    for op, call in calls.items():
        with pytest.raises(IndexError, match=rf"^{op}: index 18446744073709551615 is out of bounds for axis 0 of size 4"):
            call()
    assert to_numpy(xs.to_dense(xs.take(x, xp.asarray([3, 0], dtype=xp.uint64)))).tolist() == [4.0, 1.0]


def test_integer_arguments_are_not_truncated() -> None:
    s = xs.to_sparse(np.eye(3))
    with pytest.raises(TypeError, match=r"^narrow: start must be an integer, got float \(start=0\.5\)\. Pass an integer"):
        xs.narrow(s, 1, 0.5, 1)
    with pytest.raises(TypeError, match=r"^narrow: length must be an integer, got float \(length=1\.9\)"):
        xs.narrow(s, 1, 1, 1.9)
    with pytest.raises(TypeError, match=r"^take: axis must be an integer, not a bool \(axis=True\)"):
        xs.take(s, [0], axis=True)
    assert xs.narrow(s, 1, np.int64(1), 1).shape == (3, 1)  # NumPy integers are integers


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS)
def test_slice_steps_past_int64(backend: str, xp: Any, layout: xs.Layout) -> None:
    # a step past int64 (NumPy takes one: the slice keeps its first element) overflowed the index arithmetic
    h = np.arange(20.0).reshape(4, 5)
    a = xs.to_sparse(xp.asarray(h), layout=layout, blocksize=(1, 1) if layout.is_blocked else None)
    for key in [(slice(0, 4, 2**70),), (slice(None, None, -(2**70)), slice(1, 5, 2**64)), (slice(3, None, -(2**70)), 2)]:
        assert_sparse_equal(a[key], xp.asarray(h[key].copy()))


def test_leading_integers_of_a_coalesced_coo_key_select_a_run(backend: str, xp: Any) -> None:
    # X[i], X[i, j], X[i, a:b] of a coalesced COO array read only the run of entries the key's leading
    # integers (and the slice after them) select, found by binary searches
    from xsparse.backends.array_api.indexing import _leading_range

    rng = np.random.default_rng(3)
    h = rng.integers(1, 5, size=(6, 5, 4)) * (rng.random((6, 5, 4)) < 0.4)
    x = xs.to_sparse_coo(xp.asarray(h))
    idx = to_numpy(x.indices())
    for key, expected in [((3,), idx[0] == 3), ((3, 2), (idx[0] == 3) & (idx[1] == 2)), ((3, slice(1, 4)), (idx[0] == 3) & (idx[1] >= 1) & (idx[1] <= 3)),
                          ((slice(2, 6, 2),), (idx[0] >= 2) & (idx[0] <= 4)), ((slice(None), 2), np.ones(idx.shape[1], dtype=bool))]:
        run, _ = _leading_range(xp, x, parse_key("getitem", tuple(x.shape), key))
        assert to_numpy(run).tolist() == idx[:, expected].tolist(), key
        assert_sparse_equal(x[key], xp.asarray(h[key]))
