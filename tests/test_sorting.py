"""Sorting, set and searching kernels: every registered kernel of ``sort``, ``argsort``, ``unique`` and
``searchsorted``, taken from the registry, on Hypothesis inputs (nnz = 0, empty rows, duplicates in
uncoalesced COO, batch and dense dimensions, int32 and int64 indices, fill values 0, -0.0 and others,
NaN with several signs and payloads, -0.0), against the dense computation of the same backend, against
a NumPy reference of the documented rule that tells the two zeros and the NaNs apart bit for bit, and,
for a native kernel, against the generic kernel, component by component, bit for bit.

The kernels sort without stability wherever it cannot show (docs/decisions.md, "Sorting without
stability"): these tests are what says that it does not.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from conftest import BACKENDS, backend_params, backend_skip_reason, load_native_kernels
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import strategies as S
import xsparse as xs
from xsparse import dispatch
from xsparse._common import dtype_name
from xsparse.testing import assert_sparse_equal, to_numpy

load_native_kernels()

SOME = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SORTABLE = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
# NaNs that differ in their bits: the default quiet NaN, its negative, and one with a payload
NANS = np.array([0x7FF8000000000000, 0xFFF8000000000000, 0x7FF8000000000123], dtype=np.uint64).view(np.float64)


def _layouts_of(element: Any) -> list[xs.Layout]:
    members = element if isinstance(element, frozenset) else frozenset((element,))
    return [layout for layout in [xs.strided, *SORTABLE] if layout in members]


def _cases(ops: tuple[str, ...]) -> list[Any]:
    """Every kernel of ``ops``: a generic one on every backend, a native one on its own."""
    cases = []
    for op in ops:
        for k in xs.kernels(op):
            for backend in [k.backend] if k.backend is not None else BACKENDS:
                reason = backend_skip_reason(backend)
                marks = [pytest.mark.skip(reason=reason)] if reason else []
                cases.append(pytest.param(k, backend, id=f"{k.name}-{backend}", marks=marks))
    return cases


def _generic(kernel: dispatch.Kernel, layouts: tuple[xs.Layout, ...], backend: str) -> dispatch.Kernel:
    return next(k for k in dispatch.resolve(kernel.op, layouts, backend) if k.backend is None and not k.rewrite)


def _bits(x: Any) -> bytes:
    h = np.ascontiguousarray(to_numpy(x))
    return h.view(np.uint8).tobytes() if h.dtype.kind in "fc" else h.tobytes()


def _same_bits(actual: Any, expected: Any) -> None:
    """Equal arrays, sparse (every component and the fill value) or strided, bit for bit."""
    assert type(actual) is type(expected), (type(actual), type(expected))
    if isinstance(expected, xs.SparseArray):
        assert actual.layout is expected.layout and tuple(actual.shape) == tuple(expected.shape)
        assert _bits(xs.asarray(actual.fill_value)) == _bits(xs.asarray(expected.fill_value))
        for name, component in expected._components().items():
            got = actual._components()[name]
            assert to_numpy(got).dtype == to_numpy(component).dtype, name
            assert _bits(got) == _bits(component), (name, to_numpy(got), to_numpy(component))
        return
    assert to_numpy(actual).dtype == to_numpy(expected).dtype
    assert _bits(actual) == _bits(expected), (to_numpy(actual), to_numpy(expected))


@st.composite
def tie_cases(draw: Any, xp: Any, *, dtype: str, max_ndim: int = 3) -> tuple[Any, Any]:
    """``(host, fill)``: a small dense array drawn from a pool heavy in ties that differ in bits (both
    zeros, NaNs of several signs and payloads), and a fill value among them (never NaN)."""
    shape = tuple(draw(st.lists(S.sizes(5), min_size=2, max_size=max_ndim)))
    if dtype.startswith("float"):
        pool = np.concatenate([np.array([-0.0, 0.0, 1.0, -1.0, 2.5]), NANS]).astype(dtype)
        fill = draw(st.sampled_from([0.0, -0.0, 1.0, -1.0]))
    else:
        pool = np.array([0, 1, -1, 3], dtype=dtype)
        fill = draw(st.sampled_from([0, 1, -1]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    host = pool[rng.integers(0, pool.shape[0], math.prod(shape))].reshape(shape)
    # some elements the fill value itself (unspecified), so that lanes have gaps
    host[rng.random(shape) < draw(st.sampled_from([0.0, 0.5, 0.9]))] = fill
    return host, fill


def _sparse(xp: Any, host: np.ndarray, fill: Any, layout: xs.Layout, index_dtype: str) -> Any:
    kw: dict[str, Any] = {"layout": layout, "index_dtype": index_dtype, "fill_value": fill}
    if layout.is_blocked:
        kw["blocksize"] = (1, 1)
    return xs.to_sparse(xp.asarray(host), **kw)


def _specified(x: Any) -> np.ndarray:
    """Which elements of the sparse ``x`` are specified (a stored block's elements equal to the fill
    value too)."""
    if x.layout is xs.sparse_coo:
        x = x.coalesce()
    ones = x._vals == x._vals
    return to_numpy(xs.to_dense(x._with_values(ones | ~ones, False)))


def _reference_sort(
    xp: Any, host: np.ndarray, fill: Any, axis: int, descending: bool, dense_axis: bool, specified: np.ndarray
) -> np.ndarray:
    """The documented rule on NumPy: each lane's specified values in a stable sort, those below the fill
    value first, then the lane's unspecified elements, then the others (NaN last); reversed when
    descending. Along a dense dimension every lane is a stored sub-array (or all fill value), which the
    backend's own stable sort sorts (descending: NumPy reverses the ascending order, torch keeps equal
    elements in index order)."""
    if dense_axis:
        return to_numpy(xp.sort(xp.asarray(host), axis=axis, descending=descending, stable=True))
    moved = np.moveaxis(host, axis, -1)
    out = np.empty_like(moved)
    specified = np.moveaxis(specified, axis, -1)
    n = moved.shape[-1]
    for lane in np.ndindex(moved.shape[:-1]):
        values = np.sort(moved[lane][specified[lane]], kind="stable")
        below = values < fill
        row = np.concatenate([values[below], np.full(n - values.shape[0], fill, dtype=moved.dtype), values[~below]])
        out[lane] = row[::-1] if descending else row
    return np.moveaxis(out, -1, axis)


# -- sort --------------------------------------------------------------------------------------------


@st.composite
def sort_inputs(draw: Any, kernel: dispatch.Kernel, xp: Any) -> tuple[Any, np.ndarray, Any]:
    """``(x, host, fill)`` of the kind the kernel is meant for: a native kernel's own (CSR and
    CSC without dense dimensions), any sortable array for a generic one."""
    layouts = _layouts_of(kernel.signature[0])
    native = kernel.backend is not None
    if native:
        layouts = [layout for layout in layouts if not layout.is_blocked]
    layout = draw(st.sampled_from(layouts))
    dtype = draw(st.sampled_from(["float64", "int32", "float32"]))
    index_dtype = draw(S.index_dtypes())
    if draw(st.booleans()):
        host, fill = draw(tie_cases(xp, dtype=dtype, max_ndim=3 if layout is xs.sparse_coo else 2))
        x = _sparse(xp, host, fill, layout, index_dtype)
    else:
        dense_dims = 0 if native and layout is not xs.sparse_coo else 1
        case = draw(S.dense_cases(xp, dtype=dtype, fill=None, max_dense_dims=dense_dims, index_dtype=index_dtype))
        assume(not (isinstance(case.fill_value, float) and math.isnan(case.fill_value)))
        host, fill, x = case.host, case.fill_value, case.sparse(layout)
    if layout is xs.sparse_coo and x.nnz and draw(st.booleans()):
        x = S.uncoalesced_like(xp, np.random.default_rng(draw(st.integers(0, 2**32 - 1))), x, index_dtype)
    assume(x.ndim > 0)
    return x, host, fill


def _sort_axis(draw: Any, kernel: dispatch.Kernel, x: Any) -> int:
    """An axis the kernel sorts along: a dense one of a hybrid array (along a sparse one sort declines,
    test_sort_declines); for the native kernels a sparse one, not a batch dimension."""
    if x.dense_dim():
        return int(draw(st.integers(x.ndim - x.dense_dim(), x.ndim - 1)))
    first = x.batch_dim() if kernel.backend is not None and isinstance(x, xs.CompressedArray) else 0
    return int(draw(st.integers(first, x.ndim - 1)))


@pytest.mark.parametrize("kernel,backend", _cases(("sort",)))
@SOME
@given(data=st.data())
def test_sort_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    """Equal to the dense sort, to the documented rule bit for bit, and (native) to the generic kernel."""
    xp = xs.get_backend(backend).load()
    x, host, fill = data.draw(sort_inputs(kernel, xp), label="x")
    axis = _sort_axis(data.draw, kernel, x)
    descending, stable = data.draw(st.booleans(), label="descending"), data.draw(st.booleans(), label="stable")
    assert kernel.supports is None or kernel.supports(xp, x, axis, descending, stable) is None
    got = kernel.func(xp, x, axis, descending, stable)
    # a specified -0.0 follows the lane's unspecified zeros (the documented rule), where the stable dense
    # sort keeps index order: the bits, signs of zeros included, are checked against _reference_sort below
    assert_sparse_equal(got, xp.sort(xp.asarray(host), axis=axis, descending=descending), check_layout=x.layout, check_signed_zeros=False)
    assert got.fill_value == fill or (got.fill_value != got.fill_value and fill != fill)
    reference = _reference_sort(xp, host, fill, axis, descending, axis >= x.ndim - x.dense_dim(), _specified(x))
    assert _bits(xs.to_dense(got)) == _bits(reference)
    if kernel.backend is not None:
        _same_bits(got, _generic(kernel, (x.layout,), backend).func(xp, x, axis, descending, stable))


def test_sort_signed_zeros_and_nans_in_place() -> None:
    """The two zeros and the NaNs keep their index order within a lane (a stable sort's), however the
    default sort left them; a specified zero equal to the fill value follows the lane's unspecified ones."""
    xp = xs.get_backend("numpy").load()
    nan, neg_nan, payload = NANS
    host = np.array([[-0.0, 0.0, payload, 0.0, -0.0, neg_nan, -1.0, nan, 0.0, -0.0]])
    x = xs.to_sparse_csr(xp.asarray(host), fill_value=1.0)
    for layout in (xs.sparse_csr, xs.sparse_coo):
        s = xs.to_dense(xs.sort(xs.to_sparse(x, layout=layout), axis=1))
        assert _bits(s) == _bits(np.sort(host, axis=1, kind="stable"))
        s = xs.to_dense(xs.sort(xs.to_sparse(x, layout=layout), axis=1, descending=True))
        assert _bits(s) == _bits(np.sort(host, axis=1, kind="stable")[:, ::-1])
    z = xs.to_sparse_coo(xp.asarray(np.array([[-0.0, 0.0, 1.0, -0.0]])))
    assert _bits(xs.to_dense(xs.sort(z, axis=1))) == _bits(np.array([[0.0, -0.0, -0.0, 1.0]]))


def test_sort_declines() -> None:
    xp = xs.get_backend("numpy").load()
    d = xp.asarray([[3.0, 1.0], [0.0, -1.0]])
    kernels = {k.name: k for k in xs.kernels("sort")}
    native = kernels["_sort_compressed_numpy"]
    assert native.supports is not None
    assert native.supports(xp, xs.to_sparse_csr(d), 1, False, True) is None
    assert native.signature in {(xs.sparse_csr,), (xs.sparse_csc,)}
    assert "dense dimensions" in str(native.supports(xp, xs.to_sparse_csr(xp.reshape(d, (2, 1, 2)), dense_dim=1), 2, False, True))
    batched = xs.to_sparse_csr(xp.reshape(xp.asarray([1.0, 0.0, 0.0, 2.0]), (2, 1, 2)))
    assert "batch dimension 0" in str(native.supports(xp, batched, 0, False, True))
    assert "the fill value is NaN" in str(kernels["_sort_compressed"].supports(xp, xs.to_sparse_csr(d, fill_value=math.nan), 1, False, True))
    with pytest.raises(xs.NoKernelError, match=r"^sort: the fill value is NaN, which compares with nothing"):
        xs.sort(xs.to_sparse_csr(d, fill_value=math.nan))


def test_native_sort_kernels_are_picked() -> None:
    for layout in (xs.sparse_csr, xs.sparse_csc):
        assert [k.name for k in dispatch.resolve("sort", (layout,), "numpy")][:2] == ["_sort_compressed_numpy", "_sort_compressed"]
    assert [k.name for k in dispatch.resolve("sort", (xs.sparse_bsr,), "numpy")] == ["_sort_compressed"]
    assert dispatch.ambiguities() == []


# -- argsort -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel,backend", _cases(("argsort",)))
@SOME
@given(data=st.data())
def test_argsort_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    """The dense argsort, ties in index order (stable=True) -- descending too."""
    xp = xs.get_backend(backend).load()
    layout = data.draw(st.sampled_from(_layouts_of(kernel.signature[0])), label="layout")
    host, fill = data.draw(tie_cases(xp, dtype="float64", max_ndim=3 if layout is xs.sparse_coo else 2), label="x")
    x = _sparse(xp, host, fill, layout, data.draw(S.index_dtypes()))
    axis = data.draw(st.integers(0, x.ndim - 1))
    descending = data.draw(st.booleans())
    got = kernel.func(xp, x, axis, descending, True)
    assert_sparse_equal(got, xp.argsort(xp.asarray(host), axis=axis, descending=descending, stable=True), check_dtype=False)


# -- unique ------------------------------------------------------------------------------------------

OUTPUTS = [True, False, "all", "inverse", "counts", "values"]


def _storage_values(x: Any) -> np.ndarray:
    """The stored values of ``x`` in storage order, duplicates summed (what the kernels sort)."""
    if not isinstance(x, xs.SparseArray):
        return to_numpy(x).reshape(-1)
    if x.layout is xs.sparse_coo:
        x = x.coalesce()
    return to_numpy(x._vals).reshape(-1)


@st.composite
def unique_inputs(draw: Any, kernel: dispatch.Kernel, xp: Any) -> tuple[Any, np.ndarray, Any]:
    layout = draw(st.sampled_from(_layouts_of(kernel.signature[0])))
    dtype = draw(st.sampled_from(["float64", "int64", "float32"]))
    index_dtype = draw(S.index_dtypes())
    if draw(st.booleans()):
        host, fill = draw(tie_cases(xp, dtype=dtype, max_ndim=3 if layout in (xs.sparse_coo, xs.strided) else 2))
        x = xp.asarray(host) if layout is xs.strided else _sparse(xp, host, fill, layout, index_dtype)
    else:
        case = draw(S.dense_cases(xp, dtype=dtype, fill=None, index_dtype=index_dtype))
        host, fill, x = case.host, case.fill_value, case.sparse(layout)
    if layout is xs.sparse_coo and x.nnz and draw(st.booleans()):
        x = S.uncoalesced_like(xp, np.random.default_rng(draw(st.integers(0, 2**32 - 1))), x, index_dtype)
    if isinstance(x, xs.SparseArray):
        # a NaN fill value with unspecified elements is refused (test_unique_nan_fill_of_uncoalesced_coo)
        assume(not (isinstance(fill, float) and math.isnan(fill) and x.size > _storage_values(x).shape[0]))
    return x, host, fill


@pytest.mark.parametrize("kernel,backend", _cases(("unique",)))
@SOME
@given(data=st.data())
def test_unique_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    """Values (bit for bit those of a stable sort of the stored values, then the fill value), counts,
    inverse and first indices, for every kind of outputs; a native kernel bit for bit the generic one's."""
    xp = xs.get_backend(backend).load()
    x, host, fill = data.draw(unique_inputs(kernel, xp), label="x")
    outputs = data.draw(st.sampled_from(OUTPUTS), label="outputs")
    assert kernel.supports is None or kernel.supports(xp, x, outputs) is None
    got = kernel.func(xp, x, outputs)
    # the documented rule on NumPy: a stable sort of the stored values in storage order, then the fill value
    stored = _storage_values(x)
    unspecified = int(host.size) - stored.shape[0]
    ref = np.sort(np.concatenate([stored, np.asarray([fill] if unspecified else [], dtype=stored.dtype)]), kind="stable")
    starts = np.flatnonzero(np.concatenate([[True], ref[1:] != ref[:-1]])) if ref.size else np.zeros(0, dtype=np.int64)
    values = ref[starts]
    assert _bits(got.values) == _bits(values)
    counts = np.diff(starts, append=ref.size)
    if unspecified:
        counts[np.flatnonzero(values == fill)[0]] += unspecified - 1
    if outputs == "values":
        assert got.counts is None
    else:
        np.testing.assert_array_equal(to_numpy(got.counts), counts)
    flat = host.reshape(-1)
    if outputs in ("counts", "values"):
        assert got.inverse_indices is None
    else:
        inverse = to_numpy(xs.to_dense(got.inverse_indices)).reshape(-1)
        np.testing.assert_array_equal(values[inverse], flat)  # NaNs equal
        nan_groups = inverse[np.isnan(flat)] if flat.dtype.kind == "f" else inverse[:0]
        assert len(set(nan_groups.tolist())) == nan_groups.shape[0]  # every NaN its own value
    if outputs in (True, "all"):
        first = to_numpy(got.indices)
        np.testing.assert_array_equal(flat[first], values)
        for value, i in zip(values, first):
            if value == value:
                assert i == np.flatnonzero(flat == value)[0]
    if kernel.backend is not None:
        layouts = (xs.layout_of(x),)
        want = _generic(kernel, layouts, backend).func(xp, x, outputs)
        for name in ("values", "indices", "counts", "inverse_indices"):
            a, b = getattr(got, name), getattr(want, name)
            assert (a is None) == (b is None), name
            if a is not None:
                _same_bits(a, b)


def test_unique_nan_fill_of_uncoalesced_coo() -> None:
    """Duplicates are one element: an uncoalesced COO array with as many entries as elements, some of
    them duplicates, has unspecified elements, which a NaN fill value would make distinct values."""
    xp = xs.get_backend("numpy").load()
    x = xs.sparse_coo_array(xp.asarray([[0, 0, 1]]), xp.asarray([1.0, 2.0, 3.0]), (3,), fill_value=math.nan)
    with pytest.raises(xs.NoKernelError, match=r"^unique_values: the fill value is NaN and x has unspecified elements"):
        xs.unique_values(x)
    kernel = next(k for k in dispatch.resolve("unique", (xs.sparse_coo,), "numpy") if k.backend is None)
    assert kernel.supports is not None
    assert "the fill value is NaN and every NaN is a distinct value" in str(kernel.supports(xp, x, "values"))
    full = xs.sparse_coo_array(xp.asarray([[0, 2, 1, 0]]), xp.asarray([1.0, 2.0, 3.0, 1.0]), (3,), fill_value=math.nan)
    v, c = xs.unique_counts(full)  # position 0 holds 1.0 + 1.0
    assert v.tolist() == [2.0, 3.0] and c.tolist() == [2, 1]


def test_unique_public_functions_signed_zero() -> None:
    """The zero found first in storage order stands for the zeros (the fill value where none is stored)."""
    xp = xs.get_backend("numpy").load()
    x = xs.to_sparse_coo(xp.asarray(np.array([0.0, -0.0, 1.0, -0.0, 0.0])))
    for f in (xs.unique_values, lambda a: xs.unique_counts(a).values, lambda a: xs.unique_all(a).values):
        assert _bits(f(x)) == _bits(np.array([-0.0, 1.0]))
    y = xs.to_sparse_coo(xp.asarray(np.array([1.0, 0.0, 1.0])))
    assert _bits(xs.unique_values(y)) == _bits(np.array([0.0, 1.0]))



@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_native_unique_kernels_are_picked(backend: str) -> None:
    for layout in SORTABLE:
        family = "coo" if layout is xs.sparse_coo else "compressed"
        picked = [k.name for k in dispatch.resolve("unique", (layout,), backend)]
        assert picked[:2] == [f"_unique_{family}_{backend}", f"_unique_{family}"], picked
    assert dispatch.ambiguities() == []


def test_native_torch_sort_kernels_are_picked() -> None:
    for layout in (xs.sparse_csr, xs.sparse_csc):
        assert [k.name for k in dispatch.resolve("sort", (layout,), "torch")][:2] == ["_sort_compressed_torch", "_sort_compressed"]
    assert [k.name for k in dispatch.resolve("sort", (xs.sparse_coo,), "torch")] == ["_sort_coo"]


def test_torch_kernels_decline() -> None:
    """The torch kernels leave to the generic ones what they do not sort: dense dimensions, batch
    dimensions, unsigned dtypes beyond uint8 and complex values."""
    if backend_skip_reason("torch"):
        pytest.skip(str(backend_skip_reason("torch")))
    import torch

    xp = xs.get_backend("torch").load()
    kernels = {(k.name, k.backend): k for k in [*xs.kernels("sort"), *xs.kernels("unique")]}
    sort, unique = kernels["_sort_compressed_torch", "torch"], kernels["_unique_compressed_torch", "torch"]
    assert sort.supports is not None and unique.supports is not None
    d = torch.tensor([[3.0, 1.0], [0.0, -1.0]])
    assert sort.supports(xp, xs.to_sparse_csr(d), 1, False, True) is None
    assert "dense dimensions" in str(sort.supports(xp, xs.to_sparse_csr(d.reshape(2, 1, 2), dense_dim=1), 2, False, True))
    batched = xs.to_sparse_csr(torch.tensor([1.0, 0.0, 0.0, 2.0]).reshape(2, 1, 2))
    assert "batch dimension 0" in str(sort.supports(xp, batched, 0, False, True))
    wide = xs.to_sparse_csr(torch.tensor([[3, 0, 1]], dtype=torch.uint16))
    assert "dtype torch.uint16" in str(sort.supports(xp, wide, 1, False, True))
    assert "dtype torch.uint16" in str(unique.supports(xp, wide, "all"))
    assert xs.sort(wide, axis=1).to_dense().tolist() == [[0, 1, 3]]
    cplx = xs.to_sparse_csr(torch.tensor([[1 + 2j, 0, 1 - 1j]]))
    assert "complex" in str(unique.supports(xp, cplx, "all"))

def test_native_unique_declines_complex_values() -> None:
    """Complex values keep the generic kernel's two stable sorts (the dispatcher moves on to it)."""
    xp = xs.get_backend("numpy").load()
    x = xs.to_sparse_csr(xp.asarray(np.array([[1 + 2j, 0, 1 - 1j]])))
    native = {k.name: k for k in xs.kernels("unique")}["_unique_compressed_numpy"]
    assert native.supports is not None and "complex values" in str(native.supports(xp, x, "all"))
    assert xs.unique_values(x).tolist() == [0j, 1 - 1j, 1 + 2j]


@pytest.mark.parametrize("layout", SORTABLE)
def test_unique_all_nan_first_indices_in_row_major_order(layout: xs.Layout) -> None:
    """NaNs whose storage order (CSC: column-major; BSR: block by block) is not their row-major order:
    the values keep the storage order's NaNs, each NaN's first index is its own row-major position (so
    the NaNs' first indices are their row-major positions in storage order), and the zeros'
    representative is the first zero in storage order; every kernel of the layout, native or generic,
    gives the same bits."""
    xp = xs.get_backend("numpy").load()
    nan, neg_nan, payload = NANS
    host = np.array([[0.0, payload, 3.0, -0.0], [neg_nan, -0.0, nan, 1.0], [2.0, 0.0, 0.0, neg_nan]])
    kw: dict[str, Any] = {"blocksize": (1, 2)} if layout.is_blocked else {}
    x = xs.to_sparse(xp.asarray(host), layout=layout, fill_value=1.0, **kw)
    results = [k.func(xp, x, "all") for k in dispatch.resolve("unique", (layout,), "numpy") if not k.rewrite]
    assert len(results) == 2  # the NumPy kernel and the generic one
    for r in results[1:]:
        for name in r._fields:
            _same_bits(getattr(r, name), getattr(results[0], name))
    u = results[0]
    stored = _storage_values(x)
    assert _bits(u.values[-4:]) == _bits(stored[np.isnan(stored)])
    positions = np.flatnonzero(np.isnan(host.reshape(-1)))
    assert sorted(to_numpy(u.indices)[-4:].tolist()) == positions.tolist()
    assert _bits(host.reshape(-1)[to_numpy(u.indices)[-4:]]) == _bits(stored[np.isnan(stored)])
    zero = stored[stored == 0][0]
    assert _bits(u.values[:1]) == _bits(np.array([zero])) and int(u.indices[0]) == 0


def test_conformance_compares_a_native_unique_kernel_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The conformance runner compares a native ``unique`` kernel with the generic kernel output by
    output, bit for bit: one that is right but for the sign of a zero (invisible to the dense
    comparison) fails there, and the generic kernel registered as a native one passes."""
    from xsparse.conformance import runner

    registry = {op: [k for k in ks if k.backend != "numpy" or op != "unique"] for op, ks in dispatch._REGISTRY.items()}
    monkeypatch.setattr(dispatch, "_REGISTRY", registry)
    generic = next(k for k in dispatch.resolve("unique", (xs.sparse_csr,), "numpy") if k.backend is None)

    def negative_zeros(xp: Any, a: Any, ravel_positions: Any) -> Any:
        u = generic.func(xp, a, ravel_positions)
        return u._replace(values=xp.where(u.values == 0, -xp.abs(u.values), u.values))

    dispatch.register("unique", (xs.sparse_csr,), backend="numpy", priority=10, supports=generic.supports)(generic.func)
    good = runner.run("numpy", max_examples=10, ops=["unique"])
    assert {o.name: o.status for o in good}["unique(sparse_csr)"] == "pass"
    assert {o.name: o.native for o in good}["unique(sparse_csr)"]
    dispatch.register("unique", (xs.sparse_csr,), backend="numpy", priority=20, supports=generic.supports)(negative_zeros)
    bad = {o.name: o for o in runner.run("numpy", max_examples=40, ops=["unique"])}["unique(sparse_csr)"]
    assert bad.status == "FAIL" and "differs from the generic kernel's" in bad.detail and "values differs bit for bit" in bad.detail

# -- searchsorted ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel,backend", _cases(("searchsorted",)))
@SOME
@given(data=st.data())
def test_searchsorted_kernel(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    """The dense searchsorted of the same backend (NaN-free operands: the standard leaves NaN's place open)."""
    xp = xs.get_backend(backend).load()
    side = data.draw(st.sampled_from(["left", "right"]), label="side")
    pool = [-2.0, -1.0, -0.0, 0.0, 1.5, 2.0]
    n = data.draw(st.integers(0, 12))
    x1_host = np.sort(np.asarray(data.draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)), dtype=np.float64))
    fill1 = data.draw(st.sampled_from([0.0, 1.5, -1.0]))
    queries = np.asarray(data.draw(st.lists(st.sampled_from([*pool, -3.0, 5.0]), min_size=1, max_size=8)), dtype=np.float64)
    fill2 = data.draw(st.sampled_from([0.0, 2.0]))
    x1 = xs.to_sparse_coo(xp.asarray(x1_host), fill_value=fill1) if kernel.signature[0] is xs.sparse_coo else xp.asarray(x1_host)
    x2_layouts = [layout for layout in _layouts_of(kernel.signature[1]) if not layout.is_blocked]
    x2_layout = data.draw(st.sampled_from(x2_layouts))
    q2 = queries.reshape(1, -1)
    x2 = xp.asarray(q2) if x2_layout is xs.strided else xs.to_sparse(xp.asarray(q2), layout=x2_layout, fill_value=fill2)
    if isinstance(x1, xs.SparseArray) and x1.nnz and data.draw(st.booleans()):
        x1 = S.uncoalesced_like(xp, np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), x1, "int64")
    got = kernel.func(xp, x1, x2, side, None)
    dense_x1 = x1_host if isinstance(x1, xs.SparseArray) is False else to_numpy(xs.to_dense(x1))
    assert_sparse_equal(got, xp.searchsorted(xp.asarray(dense_x1), xp.asarray(q2), side=side), check_dtype=False)


@SOME
@given(data=st.data())
def test_numpy_searchsorted_in_a_coo_vector_against_the_generic_kernel(data: st.DataObject) -> None:
    """The NumPy kernel (NumPy's own NaN-last order) against the generic kernel (NaN counted and placed by
    rule): NaN among the stored values, as the fill value and among the queries, both sides, duplicates,
    integer and float dtypes, nnz = 0, 0-d and 2-D queries."""
    from xsparse.backends.array_api.searching import _searchsorted_coo_any
    from xsparse.backends.numpy.sorting import _searchsorted_coo_strided_numpy, _supports_searchsorted_coo

    dtype = data.draw(st.sampled_from(["float64", "float32", "int64", "int16", "uint8"]), label="dtype")
    floating = dtype.startswith("float")
    pool = [0, 1, 2, 3, 7] + ([-0.0, -1.5, math.inf, -math.inf, math.nan] if floating else [])
    n = data.draw(st.integers(0, 10), label="n")
    values = np.asarray(data.draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n), label="values"), dtype=dtype)
    size = n + data.draw(st.integers(0, 5), label="unspecified")
    where = np.asarray(data.draw(st.permutations(range(size)), label="positions")[:n], dtype=np.int64)
    fill = data.draw(st.sampled_from(pool), label="fill")
    x1 = xs.sparse_coo_array(where[None, :], values, (size,), fill_value=fill)
    if x1.nnz and data.draw(st.booleans(), label="uncoalesced"):
        x1 = S.uncoalesced_like(np, np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), x1, "int64")
    shape = data.draw(st.sampled_from([(), (4,), (2, 3)]), label="query shape")
    queries = np.asarray(data.draw(st.lists(st.sampled_from(pool), min_size=math.prod(shape), max_size=math.prod(shape))), dtype=dtype).reshape(shape)
    side = data.draw(st.sampled_from(["left", "right"]), label="side")
    assert _supports_searchsorted_coo(np, x1, queries, side, None) is None
    got = _searchsorted_coo_strided_numpy(np, x1, queries, side, None)
    want = _searchsorted_coo_any(np, x1, queries, side, None)
    assert got.dtype == np.int64 and got.shape == queries.shape
    np.testing.assert_array_equal(got, want)


@SOME
@given(data=st.data())
def test_sorted_values_is_a_stable_sort_bit_for_bit(backend: str, xp: Any, data: st.DataObject) -> None:
    """The helper that sorts without stability puts back the runs of zeros (in index order) and the NaNs
    (their signs and payloads): the result is a stable sort's, bit for bit, on every backend."""
    from xsparse.backends.array_api.sorting import sorted_values

    pool = [-0.0, 0.0, 1.0, -1.5, math.inf, -math.inf, *NANS]
    n = data.draw(st.integers(0, 40), label="n")
    host = np.asarray(data.draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n), label="values"), dtype=np.float64)
    for dtype in ("float64", "float32"):
        h = host.astype(dtype)
        got = to_numpy(sorted_values(xp, xp.asarray(h)))
        want = h[np.argsort(h, kind="stable")]
        assert _bits(got) == _bits(want), (h, got, want)


# -- bool values -------------------------------------------------------------------------------------


@st.composite
def bool_inputs(draw: Any, xp: Any) -> tuple[Any, np.ndarray]:
    """``(x, host)``: a bool array, strided or in any sortable layout (batch and dense dimensions, fill
    value False or True, nnz = 0 and full)."""
    layout = draw(st.sampled_from([xs.strided, *SORTABLE]))
    case = draw(S.dense_cases(xp, dtype="bool", fill=None))
    x = case.array if layout is xs.strided else case.sparse(layout)
    if layout is xs.sparse_coo and x.nnz and draw(st.booleans()):
        x = S.uncoalesced_like(xp, np.random.default_rng(draw(st.integers(0, 2**32 - 1))), x, dtype_name(x.index_dtype))
    return x, case.host


@SOME
@given(data=st.data())
def test_unique_of_bool_arrays(backend: str, xp: Any, data: st.DataObject) -> None:
    """The standard's unique_* take every dtype: bool arrays, strided and sparse, give NumPy's unique on
    every backend (array-api-strict sorts no bool; xsparse sorts their int8 twin)."""
    x, host = data.draw(bool_inputs(xp), label="x")
    flat = host.reshape(-1)
    values, first, inverse, counts = np.unique(flat, return_index=True, return_inverse=True, return_counts=True)

    def same(got: Any, want: np.ndarray) -> None:
        h = to_numpy(got)
        assert h.dtype == want.dtype and h.tolist() == want.tolist(), (h, want)

    same(xs.unique_values(x), values)
    v, c = xs.unique_counts(x)
    same(v, values)
    assert to_numpy(c).tolist() == counts.tolist()
    v, inv = xs.unique_inverse(x)
    same(v, values)
    assert to_numpy(xs.to_dense(inv)).reshape(-1).tolist() == inverse.reshape(-1).tolist()
    u = xs.unique_all(x)
    same(u.values, values)
    assert to_numpy(u.indices).tolist() == first.tolist() and to_numpy(u.counts).tolist() == counts.tolist()
    assert to_numpy(xs.to_dense(u.inverse_indices)).reshape(-1).tolist() == inverse.reshape(-1).tolist()


@SOME
@given(data=st.data())
def test_sort_and_argsort_of_bool_arrays(backend: str, xp: Any, data: st.DataObject) -> None:
    """sort and argsort order bool arrays False before True, as NumPy and torch do, on every backend
    (array-api-strict sorts no bool; xsparse sorts their int8 twin): a sparse sort keeps the layout."""
    x, host = data.draw(bool_inputs(xp), label="x")
    hybrid = isinstance(x, xs.SparseArray) and x.dense_dim()
    # along a sparse dimension of a hybrid array sort declines (test_sort_declines)
    axis = data.draw(st.integers(x.ndim - x.dense_dim() if hybrid else 0, x.ndim - 1), label="axis")
    descending = data.draw(st.booleans(), label="descending")
    expected = np.sort(host, axis=axis)
    s = xs.sort(x, axis=axis, descending=descending)
    assert_sparse_equal(s, xp.asarray(np.flip(expected, axis=axis).copy() if descending else expected), check_layout=xs.layout_of(x))
    order = xs.argsort(x, axis=axis, descending=descending, stable=True)
    # a stable descending order keeps equal elements in index order: the stable ascending order of the negation
    assert to_numpy(order).tolist() == np.argsort(~host if descending else host, axis=axis, kind="stable").tolist()


@SOME
@given(data=st.data())
def test_searchsorted_of_bool_arrays(backend: str, xp: Any, data: st.DataObject) -> None:
    """searchsorted of bool arrays, strided and sparse, gives NumPy's bool search (False before True) on
    every backend, the dense search of their int8 twin on the same backend (array-api-strict and torch
    search no bool; the standard asks for real-valued operands)."""
    side = data.draw(st.sampled_from(["left", "right"]), label="side")
    n = data.draw(st.integers(0, 8), label="n")
    host1 = np.sort(np.asarray(data.draw(st.lists(st.booleans(), min_size=n, max_size=n), label="x1"), dtype=bool))
    x1 = xp.asarray(host1)
    if data.draw(st.booleans(), label="sparse x1"):
        x1 = xs.to_sparse_coo(x1, fill_value=data.draw(st.booleans(), label="fill"))
        if x1.nnz and data.draw(st.booleans(), label="uncoalesced"):
            x1 = S.uncoalesced_like(xp, np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), x1, "int64")
    x2, host2 = data.draw(bool_inputs(xp), label="x2")
    got = xs.searchsorted(x1, x2, side=side)
    assert xs.layout_of(got) is xs.layout_of(x2)
    assert to_numpy(xs.to_dense(got)).tolist() == np.searchsorted(host1, host2, side=side).tolist()
    twin = xp.searchsorted(xp.astype(xp.asarray(host1), xp.int8), xp.astype(xp.asarray(host2), xp.int8), side=side)
    assert_sparse_equal(got, twin, check_dtype=False)


@pytest.mark.parametrize("sorter_dtype", ["int8", "int32", "uint8", "uint16", "int64"])
def test_searchsorted_takes_a_sorter_of_any_integer_dtype(backend: str, xp: Any, sorter_dtype: str) -> None:
    """torch takes only an int64 sorter ("sorter must be a tensor of long dtype"); NumPy any integer one."""
    x1, x2 = np.asarray([5, 1, 3]), np.asarray([2, 4, 6])
    sorter = np.asarray([1, 2, 0], dtype=sorter_dtype)
    for side in ("left", "right"):
        got = xs.searchsorted(xp.asarray(x1), xp.asarray(x2), side=side, sorter=xp.asarray(sorter, dtype=getattr(xp, sorter_dtype)))
        assert to_numpy(got).tolist() == np.searchsorted(x1, x2, side=side, sorter=sorter).tolist()
        got = xs.searchsorted(xp.asarray(x1), xs.to_sparse_coo(xp.asarray(x2)), side=side, sorter=xp.asarray(sorter, dtype=getattr(xp, sorter_dtype)))
        assert to_numpy(xs.to_dense(got)).tolist() == np.searchsorted(x1, x2, side=side, sorter=sorter).tolist()


# -- review fixes: searchsorted, isin, sort and unique edge cases --------------------------------------


@SOME
@given(data=st.data())
def test_searchsorted_strided_x1_with_nan_and_a_sparse_x2(backend: str, xp: Any, data: st.DataObject) -> None:
    """A strided x1 sorted NaN-last (as xsparse.sort sorts it) with a sparse x2: NumPy's answer on every
    backend, with and without a sorter (torch's own search is undefined with NaN among the sorted values)."""
    side = data.draw(st.sampled_from(["left", "right"]), label="side")
    n = data.draw(st.integers(0, 8), label="n")
    pool = [-1.0, 0.0, 1.5, 2.0, math.nan]
    host1 = np.sort(np.asarray(data.draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n), label="x1"), dtype=np.float64))
    queries = np.asarray(data.draw(st.lists(st.sampled_from([*pool, -3.0, 5.0]), min_size=1, max_size=8), label="x2"))
    fill = data.draw(st.sampled_from([0.0, 2.0, 5.0, math.nan]), label="fill")
    layout = data.draw(st.sampled_from(SORTABLE), label="layout")
    q = queries.reshape(1, -1)
    kw: dict[str, Any] = {"blocksize": (1, 1)} if layout.is_blocked else {}
    x2 = xs.to_sparse(xp.asarray(q), layout=layout, fill_value=fill, **kw)
    want = np.searchsorted(host1, q, side=side)
    got = xs.searchsorted(xp.asarray(host1), x2, side=side)
    assert xs.layout_of(got) is layout
    assert to_numpy(xs.to_dense(got)).tolist() == want.tolist()
    assert to_numpy(xs.to_dense(xs.searchsorted(xs.sort(xp.asarray(host1)), x2, side=side))).tolist() == want.tolist()
    # the same values shuffled, with the sorter that puts them in order (NaN last)
    perm = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed")).permutation(n)
    shuffled = host1[perm]
    sorter = np.argsort(shuffled, kind="stable")
    got = xs.searchsorted(xp.asarray(shuffled), x2, side=side, sorter=xp.asarray(sorter))
    assert to_numpy(xs.to_dense(got)).tolist() == want.tolist()


def test_searchsorted_in_a_coo_vector_without_sparse_dimensions(backend: str, xp: Any) -> None:
    """A 1-D COO array with dense_dim=1 (sparse_dim 0) stores its elements as one row of values: every
    element is specified, or none is, and duplicates add up."""
    queries = np.asarray([-1.0, 1.0, 1.5, 2.5, 3.0, 9.0])
    host = np.asarray([1.0, 2.0, 3.0])
    hybrid = xs.to_sparse(xp.asarray(host), dense_dim=1)
    assert hybrid.sparse_dim() == 0
    empty = xs.sparse_coo_array(xp.zeros((0, 0), dtype=xp.int64), xp.zeros((0, 3), dtype=xp.float64), (3,), fill_value=2.0)
    twice = xs.sparse_coo_array(xp.zeros((0, 2), dtype=xp.int64), xp.asarray([[0.5, 1.0, 1.5], [0.5, 1.0, 1.5]]), (3,))
    for x1, dense in ((hybrid, host), (empty, np.full(3, 2.0)), (twice, host)):
        for side in ("left", "right"):
            got = xs.searchsorted(x1, xp.asarray(queries), side=side)
            assert to_numpy(got).tolist() == np.searchsorted(dense, queries, side=side).tolist()
            got = xs.searchsorted(x1, xs.to_sparse_coo(xp.asarray(queries)), side=side)
            assert to_numpy(xs.to_dense(got)).tolist() == np.searchsorted(dense, queries, side=side).tolist()


def test_searchsorted_of_a_0d_query_in_a_sparse_vector_is_0d(backend: str, xp: Any) -> None:
    # the one-element fill value broadcast a 0-d strided query to (1,)
    x1 = xs.to_sparse(xp.asarray([0.0, 0.0, 2.0]))
    for side, want in (("left", 2), ("right", 2)):
        got = xs.searchsorted(x1, xp.asarray(1.0), side=side)
        assert tuple(got.shape) == () and int(got) == want
    assert tuple(xs.searchsorted(x1, xs.to_sparse(xp.asarray(1.0))).shape) == ()
    assert tuple(xs.searchsorted(x1, xp.asarray([[1.0], [3.0]])).shape) == (2, 1)


def test_searchsorted_and_isin_refuse_complex_operands(backend: str, xp: Any) -> None:
    """One TypeError on every backend (NumPy and JAX would order complex values; torch and array-api-strict
    raise their own errors)."""
    c = xp.asarray([0j, 1j], dtype=xp.complex128)
    sparse = xs.to_sparse_coo(xp.asarray([[1 + 1j, 0j], [0j, 2j]], dtype=xp.complex128))
    real = xp.asarray([0.0, 1.0], dtype=xp.float64)
    search = r"^searchsorted: takes bool, integer or real floating operands, not complex floating ones \(x1\.dtype=complex128, x2\.dtype=complex128\)\. Complex numbers have no order: search xsparse\.real\(x\)"
    for x1, x2 in ((c, c), (c, sparse), (xs.to_sparse_coo(c), c)):
        with pytest.raises(TypeError, match=search):
            xs.searchsorted(x1, x2)
    with pytest.raises(TypeError, match=r"^searchsorted: takes .* not complex floating ones \(x1\.dtype=float64, x2\.dtype=complex128\)"):
        xs.searchsorted(real, c)
    member = r"^isin: takes bool, integer or real floating operands, not complex floating ones \(x1\.dtype=complex128, x2\.dtype=complex128\)\. Compare with xsparse\.equal instead"
    for x1, x2 in ((c, c), (sparse, c), (c, sparse), (sparse, sparse)):
        with pytest.raises(TypeError, match=member):
            xs.isin(x1, x2)
    with pytest.raises(TypeError, match=r"^isin: takes .* not complex floating ones \(x1\.dtype=float64, x2\.dtype=complex128\)"):
        xs.isin(real, c)


@SOME
@given(data=st.data())
def test_isin_of_floating_and_bool_operands(backend: str, xp: Any, data: st.DataObject) -> None:
    """NumPy's isin on every backend, floating (NaN in nothing, -0.0 equal to 0.0) and bool operands
    included, which array-api-strict's isin refuses (and torch's for bool), and invert applied
    (array-api-strict's isin ignores it)."""
    dtype = data.draw(st.sampled_from(["float64", "float32", "bool"]), label="dtype")
    pool = [False, True] if dtype == "bool" else [-0.0, 0.0, 1.5, -2.0, math.nan, math.inf]
    n = data.draw(st.integers(1, 8), label="n")
    host1 = np.asarray(data.draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n), label="x1"), dtype=dtype).reshape(1, n)
    m = data.draw(st.integers(0, 5), label="m")
    host2 = np.asarray(data.draw(st.lists(st.sampled_from(pool), min_size=m, max_size=m), label="x2"), dtype=dtype)
    invert = data.draw(st.booleans(), label="invert")
    want = np.isin(host1, host2, invert=invert)
    x1, x2 = xp.asarray(host1), xp.asarray(host2)
    layout = data.draw(st.sampled_from(SORTABLE), label="layout")
    kw: dict[str, Any] = {"blocksize": (1, 1)} if layout.is_blocked else {}
    s1 = xs.to_sparse(x1, layout=layout, **kw)
    assert to_numpy(xs.isin(x1, x2, invert=invert)).tolist() == want.tolist()
    got = xs.isin(s1, x2, invert=invert)
    assert xs.layout_of(got) is layout and to_numpy(xs.to_dense(got)).tolist() == want.tolist()
    if m:
        s2 = xs.to_sparse_coo(x2)  # its stored values and fill value are the elements of x2
        assert to_numpy(xs.isin(x1, s2, invert=invert)).tolist() == want.tolist()
        assert to_numpy(xs.to_dense(xs.isin(s1, s2, invert=invert))).tolist() == want.tolist()


def test_isin_of_integers_beside_floating_values_compares_as_numpy(backend: str, xp: Any) -> None:
    # NumPy compares them in float64: torch compared int32 with float16 in float16 (2**31 - 1 was inf there),
    # array-api-strict promotes no integer with a floating dtype and refused
    ints = np.asarray([0, 3, 2**31 - 1], dtype=np.int32)
    for floats in (np.asarray([np.inf, 3.0], dtype=np.float16), np.asarray([3.0, 2.0**31 - 1], dtype=np.float64)):
        if not hasattr(xp, dtype_name(floats.dtype)):
            continue
        x1, x2 = xp.asarray(ints), xp.asarray(floats)
        want = np.isin(ints, floats)
        assert to_numpy(xs.isin(x1, x2)).tolist() == want.tolist()
        assert to_numpy(xs.to_dense(xs.isin(xs.to_sparse_coo(x1), x2))).tolist() == want.tolist()
        assert to_numpy(xs.isin(x2, x1)).tolist() == np.isin(floats, ints).tolist()


@pytest.mark.parametrize("backend", backend_params(["torch"]))
def test_isin_on_torch_of_unsigned_beside_signed_and_non_contiguous_operands(backend: str, xp: Any) -> None:
    # torch promotes no uint16 with int8 ("Promotion for uint16, uint32, uint64 types is not supported"),
    # and its isin views operands flat, which fails for a non-contiguous tensor
    a = xp.asarray([0, 3, 7], dtype=xp.uint16)
    for b, want in ((xp.asarray([3, 5], dtype=xp.int8), [False, True, False]), (xp.asarray([7], dtype=xp.int32), [False, False, True])):
        assert to_numpy(xs.isin(a, b)).tolist() == want
        assert to_numpy(xs.to_dense(xs.isin(xs.to_sparse_coo(a), b))).tolist() == want
    t = xp.reshape(xp.arange(9, dtype=xp.float64), (3, 3)).mT
    v = xp.asarray([0.0, 1.0, 5.0, 9.0])
    assert to_numpy(xs.isin(v, t)).tolist() == [True, True, True, False]
    assert to_numpy(xs.isin(t, v)).tolist() == np.isin(np.arange(9.0).reshape(3, 3).T, [0.0, 1.0, 5.0, 9.0]).tolist()
    assert to_numpy(xs.to_dense(xs.isin(xs.to_sparse_coo(v), t))).tolist() == [True, True, True, False]


@pytest.mark.parametrize("invert", ["False", None, 1, "no"])
def test_isin_invert_must_be_a_bool(invert: Any) -> None:
    x = np.asarray([0, 1, 2])
    match = rf"^isin: invert must be True or False, got {type(invert).__name__} \(invert={invert!r}\)\. Pass a bool\.$"
    with pytest.raises(TypeError, match=match):
        xs.isin(xs.to_sparse_coo(x), np.asarray([1]), invert=invert)
    with pytest.raises(TypeError, match=match):
        xs.isin(x, np.asarray([1]), invert=invert)
    assert xs.isin(x, np.asarray([1]), invert=np.bool_(True)).tolist() == [True, False, True]


@pytest.mark.parametrize("sorter", [[0, 1, 2], (0, 1, 2), "012", 3])
def test_searchsorted_sorter_must_be_an_array(sorter: Any) -> None:
    """As x1 and x2 (and getitem's keys): a list is no array."""
    match = rf"^searchsorted: sorter must be a strided integer array, got {type(sorter).__name__} \(sorter={re.escape(repr(sorter))}\)\. Pass xsparse\.argsort\(x1\), or wrap"
    for x2 in (np.asarray([1]), xs.to_sparse_coo(np.asarray([1]))):
        with pytest.raises(TypeError, match=match):
            xs.searchsorted(np.asarray([0, 1, 2]), x2, sorter=sorter)


def test_searchsorted_sorter_of_another_backend() -> None:
    if backend_skip_reason("torch"):
        pytest.skip(str(backend_skip_reason("torch")))
    import torch

    with pytest.raises(xs.BackendMismatchError, match=r"^searchsorted: the operands live on different backends \('numpy', 'torch'\)"):
        xs.searchsorted(np.asarray([0, 1, 2]), np.asarray([1]), sorter=torch.tensor([0, 1, 2]))


@pytest.mark.parametrize("blocksize", [(1, 2), (2, 1), (2, 2)])
@pytest.mark.parametrize("layout", [xs.sparse_bsr, xs.sparse_bsc])
def test_sort_of_blocks_may_store_more_blocks(layout: xs.Layout, blocksize: tuple[int, int]) -> None:
    """The documented rule (docs/namespace.md): a block's elements can sort to different blocks, so a BSR or
    BSC sort along a sparse dimension stores every block that a sorted element lands in; nnz never shrinks,
    and every lane keeps its number of specified elements."""
    rng = np.random.default_rng(7)
    grew = False
    for _ in range(20):
        host = rng.integers(-2, 3, size=(4, 4)).astype(np.float64) * (rng.random((4, 4)) < 0.4)
        x = xs.to_sparse(host, layout=layout, blocksize=blocksize)
        for axis in (0, 1):
            s = xs.sort(x, axis=axis)
            assert s.layout is layout and s.blocksize == x.blocksize
            assert to_numpy(xs.to_dense(s)).tolist() == np.sort(host, axis=axis).tolist()
            assert s.nnz >= x.nnz
            grew = grew or s.nnz > x.nnz
            assert (_specified(s).sum(axis=axis) >= _specified(x).sum(axis=axis)).all()
    assert grew
    for layout2 in (xs.sparse_coo, xs.sparse_csr, xs.sparse_csc):
        y = xs.to_sparse(host, layout=layout2)
        assert xs.sort(y, axis=0).nnz == xs.sort(y, axis=1).nnz == y.nnz


@SOME
@given(data=st.data())
def test_unique_all_indices_agree_with_the_inverse_for_nans(backend: str, xp: Any, data: st.DataObject) -> None:
    """``x.flat[indices[inverse[i]]]`` is element ``i`` itself, NaNs included (each NaN is its own value,
    told apart here by sign and payload), in every layout whatever its storage order (CSC: column-major),
    for every kernel, as in NumPy."""
    layout = data.draw(st.sampled_from(SORTABLE), label="layout")
    shape = (data.draw(st.integers(1, 4), label="rows"), data.draw(st.integers(1, 4), label="cols"))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    pool = np.concatenate([np.array([0.0, 1.0, 2.0]), NANS])
    host = pool[rng.integers(0, pool.shape[0], shape[0] * shape[1])].reshape(shape)
    x = _sparse(xp, host, 0.0, layout, "int64")
    flat = host.reshape(-1)
    for kernel in dispatch.resolve("unique", (layout,), backend):
        if kernel.rewrite or (kernel.supports is not None and kernel.supports(xp, x, "all") is not None):
            continue
        u = kernel.func(xp, x, "all")
        inverse = to_numpy(xs.to_dense(u.inverse_indices)).reshape(-1)
        first = to_numpy(u.indices)
        assert _bits(flat[first[inverse]]) == _bits(flat), (kernel.name, first, inverse)
        assert _bits(to_numpy(u.values)[inverse]) == _bits(flat), kernel.name
    u = xs.unique_all(x)
    assert _bits(flat[to_numpy(u.indices)[to_numpy(xs.to_dense(u.inverse_indices)).reshape(-1)]]) == _bits(flat)


@pytest.mark.parametrize("name", ["unique_values", "unique_counts", "unique_inverse", "unique_all"])
def test_unique_of_a_nan_fill_value_names_the_function(name: str) -> None:
    x = xs.sparse_coo_array([[0, 0], [0, 1]], [1.0, 2.0], (2, 2), fill_value=math.nan)
    match = (
        rf"^{name}: the fill value is NaN and x has unspecified elements, each of which would be a distinct unique value "
        rf"as every NaN is \(fill_value=nan\)\. Compute it on the dense array, xsparse\.{name}\(xsparse\.to_dense\(x\)\), "
        r"or rebuild x with a fill value that is not NaN: xsparse\.to_sparse\(xsparse\.to_dense\(x\), fill_value=0\.0\)\.$"
    )
    for layout in SORTABLE:
        kw: dict[str, Any] = {"blocksize": (1, 1)} if layout.is_blocked else {}
        with pytest.raises(xs.NoKernelError, match=match):
            getattr(xs, name)(xs.to_sparse(x, layout=layout, **kw) if layout is not xs.sparse_coo else x)
    # what the message says helps
    assert int(np.isnan(to_numpy(xs.unique_values(xs.to_dense(x)))).sum()) == 2


def test_sort_of_a_nan_fill_value_names_the_function() -> None:
    x = xs.sparse_coo_array([[0, 0], [0, 1]], [2.0, 1.0], (2, 2), fill_value=math.nan)
    match = (
        r"^sort: the fill value is NaN, which compares with nothing, so the unspecified elements have no place among the "
        r"sorted values \(fill_value=nan\)\. Sort the dense array, xsparse\.sort\(xsparse\.to_dense\(x\)\), or rebuild x "
        r"with a fill value that is not NaN: xsparse\.to_sparse\(xsparse\.to_dense\(x\), fill_value=0\.0\)\.$"
    )
    for layout in SORTABLE:
        kw: dict[str, Any] = {"blocksize": (1, 1)} if layout.is_blocked else {}
        with pytest.raises(xs.NoKernelError, match=match):
            xs.sort(xs.to_sparse(x, layout=layout, **kw) if layout is not xs.sparse_coo else x)
    assert to_numpy(xs.sort(xs.to_dense(x)))[0].tolist() == [1.0, 2.0]


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_sort_along_the_compressed_dimension_costs_the_entries_not_the_lanes(backend: str, xp: Any) -> None:
    # the lane sort computed offsets for every plain index: a CSR array of 2 entries and 2**40 columns,
    # sorted along axis 0, asked for 8 TiB; the native kernels decline it for the generic one
    coo = xs.sparse_coo_array(xp.asarray([[0, 1], [5, 7]]), xp.asarray([3.0, -1.0], dtype=xp.float64), (2, 2**40))
    a, c = xs.to_sparse_csr(coo), xs.to_sparse_csc(xs.matrix_transpose(coo))
    (native,) = [k for k in dispatch.resolve("sort", (xs.sparse_csr,), backend) if k.backend == backend]
    assert native.supports is not None
    assert "one lane per plain index" in str(native.supports(xp, a, 0, False, False))
    for array, axis in ((a, 0), (c, 1)):
        r = xs.sort(array, axis=axis)
        assert r.layout is array.layout
        # column 5 holds (3, 0), sorted (0, 3); column 7 holds (0, -1), sorted (-1, 0): compared by components,
        # the dense arrays having 2**41 elements
        s = xs.to_sparse_coo(r if axis == 0 else xs.matrix_transpose(r)).coalesce()
        assert to_numpy(s.indices()).tolist() == [[0, 1], [7, 5]]
        assert to_numpy(s.values()).tolist() == [-1.0, 3.0]


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch", "array_api_strict"]))
def test_isin_of_uint64_beside_signed_and_bool_operands(backend: str, xp: Any) -> None:
    # the standard promotes no uint64 with a signed dtype: compared exactly, as NumPy compares them (in
    # float64, 2**63 equalled 2**63 - 1)
    host = np.asarray([0, 1, 2**63 + 5, 2**63, 2**63 + 1024, 7], dtype=np.uint64)
    a = xp.asarray(host)
    others = [np.asarray([1, 0], dtype=np.int8), np.asarray([1, -1, 2**63 - 1, 7], dtype=np.int64), np.asarray([True])]
    for b_host in others:
        b = xp.asarray(b_host)
        for x, y, hx, hy in ((a, b, host, b_host), (b, a, b_host, host)):
            want = np.isin(hx, hy).tolist()
            assert to_numpy(xs.isin(x, y)).tolist() == want
            assert to_numpy(xs.isin(x, y, invert=True)).tolist() == [not w for w in want]
            assert to_numpy(xs.to_dense(xs.isin(xs.to_sparse_coo(x), y))).tolist() == want
            assert to_numpy(xs.isin(x, xs.to_sparse_coo(y))).tolist() == want


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_unique_of_more_elements_than_int64_counts(backend: str, xp: Any) -> None:
    # the counts overflowed inside the kernel (Python's OverflowError); unique_inverse counts nothing
    s = xs.sparse_coo_array(xp.asarray([[0], [1]]), xp.asarray([1.0], dtype=xp.float64), (2**40, 2**40))
    for f in (xs.unique_counts, xs.unique_all):
        with pytest.raises(ValueError, match=rf"^{f.__name__}: x has more elements than an int64 counts \(shape=\(1099511627776, 1099511627776\)"):
            f(s)
    values, inverse = xs.unique_inverse(s)
    assert to_numpy(values).tolist() == [0.0, 1.0]
    assert to_numpy(inverse.indices()).tolist() == [[0], [1]] and to_numpy(inverse.values()).tolist() == [1]
    assert inverse.fill_value == 0
