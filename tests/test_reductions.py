"""Reductions: every registered kernel of every reduction, taken from the registry, against the dense
computation of the same backend on Hypothesis inputs in every layout (batch and dense dimensions, fill
values 0 and non-zero, int32 and int64 indices, nnz = 0, duplicates in COO); the native kernels
against the generic ones; the layout of each result; the public functions' arguments and errors.

The oracle is :func:`xsparse.testing.assert_sparse_equal` (every invariant of the result, then its
elements against the dense reference). Inputs come from ``tests/strategies.py``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from conftest import BACKENDS, backend_skip_reason, load_native_kernels
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import strategies as S
import xsparse as xs
from xsparse import dispatch
from xsparse._common import dtype_name
from xsparse._elementwise import convert_result
from xsparse._reduction import _accumulation_dtype, _axes
from xsparse.backends.array_api.conversion import signed_twin
from xsparse.backends.array_api.reduction import ReduceSpec, result_kind
from xsparse.testing import assert_sparse_equal, to_numpy

SPARSE_LAYOUTS = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
MONOIDS = ["sum", "prod", "max", "min", "any", "all", "count_nonzero"]
CUMULATIVE = ("cumulative_sum", "cumulative_prod")
OPS = [*MONOIDS, "mean", "var", "std", "argmax", "argmin", *CUMULATIVE, "softmax", "log_softmax"]
SINGLE_AXIS = {"argmax", "argmin", *CUMULATIVE, "softmax", "log_softmax"}

# The fixtures and namespaces are immutable, so sharing them across examples is safe.
FEW = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SOME = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


load_native_kernels()


# -- inputs ------------------------------------------------------------------------------------------


def op_dtypes(op: str, xp: Any) -> list[str]:
    """The value dtypes an operation accepts (the Array API's categories)."""
    names = S.dtype_names(xp)
    if op in ("any", "all", "count_nonzero"):
        return names
    if op in ("sum", "prod", *CUMULATIVE):
        return [n for n in names if n != "bool"]
    if op == "mean":
        return [n for n in names if n.startswith(("float", "complex"))]
    if op in ("var", "std", "softmax", "log_softmax"):
        return [n for n in names if n.startswith("float")]
    return [n for n in names if n != "bool" and not n.startswith("complex")]


@st.composite
def inputs(draw: Any, xp: Any, layout: xs.Layout, dtypes: list[str], fill: bool | None = None) -> tuple[Any, Any]:
    """``(x, dense)``: an array in ``layout`` and its dense value on the same backend.

    COO arrays take any number of sparse dimensions (0 included) and are uncoalesced half the time.
    """
    dtype = draw(st.sampled_from(dtypes))
    case = draw(S.dense_cases(xp, dtype=dtype, fill=fill))
    if layout is xs.strided:
        return case.array, case.array
    if layout is not xs.sparse_coo:
        return case.sparse(layout), case.array
    ndim = case.array.ndim
    kw = case.kwargs(xs.sparse_coo)
    kw["sparse_dim"] = draw(st.integers(0, ndim))
    x = xs.to_sparse(case.array, **kw)
    if draw(st.booleans()) and x.nnz:
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        x = S.uncoalesced_like(xp, rng, x, case.index_dtype)
    return x, case.array


@st.composite
def axis_args(draw: Any, ndim: int, single: bool) -> Any:
    """None, an int (maybe negative), or a non-empty tuple of distinct axes."""
    if ndim == 0:
        return None
    choice = draw(st.sampled_from(["none", "int", "tuple"] if not single else ["none", "int"]))
    if choice == "none":
        return None
    if choice == "int":
        a = draw(st.integers(0, ndim - 1))
        return a - ndim if draw(st.booleans()) else a
    return tuple(draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True)))


def _indexed_dim(x: Any) -> int:
    return x.sparse_dim() if isinstance(x, xs.COOArray) else x.batch_dim() + 2


def make_spec(op: str, xp: Any, x: Any, axis: Any, keepdims: bool, correction: float = 0.0, include_initial: bool = False) -> ReduceSpec:
    """The spec the public function hands its kernels (built with the public layer's own helpers)."""
    if op in SINGLE_AXIS and axis is not None:
        axes: tuple[int, ...] = (axis % x.ndim,)
    elif op in (*CUMULATIVE, "softmax", "log_softmax"):
        axes = (0,)
    else:
        axes = _axes(op, axis, x.ndim)
    info = xp.__array_namespace_info__().default_dtypes()
    if op in ("sum", "prod", *CUMULATIVE):
        dtype = _accumulation_dtype(op, xp, x, None)
        if "torch" in xp.__name__ and signed_twin(xp, dtype) is not None:
            # torch sums no uint16/32/64: the public layer hands its kernels the signed twin (and casts back)
            dtype = signed_twin(xp, dtype)
    elif op in ("any", "all"):
        dtype = xp.bool
    elif op == "count_nonzero":
        dtype = info["integral"]
    elif op in ("argmax", "argmin"):
        dtype = info["indexing"]
    else:
        dtype = x.dtype
    keep = keepdims and op not in (*CUMULATIVE, "softmax", "log_softmax")
    return ReduceSpec(axes, keep, dtype, correction=correction, include_initial=include_initial)


# -- the dense references --------------------------------------------------------------------------------


def _specified_mask(xp: Any, x: Any) -> np.ndarray:
    """Where ``x`` specifies an element (its structure, whatever the stored values)."""
    ones = xp.ones(tuple(x._vals.shape), dtype=xp.int8, device=x.device)
    return to_numpy(xs.to_dense(x._with_values(ones, 0))) != 0


def _softmax_reference(dense: np.ndarray, axis: int, log: bool) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = np.max(dense, axis=axis, keepdims=True) if dense.size else dense
        z = dense - np.where(np.isinf(m), 0, m) if dense.size else dense
        s = np.sum(np.exp(z), axis=axis, keepdims=True)
        ok = (s > 0) & np.isfinite(s)
        out = z - np.log(np.where(ok, s, 1)) if log else np.exp(z) / np.where(ok, s, 1)
        return np.where(ok, out, np.nan)


def reference(op: str, xp: Any, x: Any, dense: Any, axis: Any, spec: ReduceSpec) -> Any:
    """The operation computed by the backend on the dense array (host NumPy for softmax)."""
    axes, kd = spec.axes, spec.keepdims
    if op in ("sum", "prod"):
        return getattr(xp, op)(dense, axis=axes, keepdims=kd, dtype=spec.dtype)
    if op in ("max", "min", "any", "all", "count_nonzero", "mean"):
        return getattr(xp, op)(dense, axis=axes, keepdims=kd)
    if op in ("var", "std"):
        return getattr(xp, op)(dense, axis=axes, correction=spec.correction, keepdims=kd)
    if op in ("argmax", "argmin"):
        fn = getattr(xp, op)
        if axis is None:
            r = fn(xp.reshape(dense, (-1,)))
            return xp.reshape(xp.asarray(r), (1,) * dense.ndim if kd else ())
        return fn(dense, axis=axes[0], keepdims=kd)
    if op in CUMULATIVE:
        return getattr(xp, op)(xp.astype(dense, spec.dtype), axis=axes[0], include_initial=spec.include_initial)
    log = op == "log_softmax"
    host = to_numpy(dense).astype(np.float64)
    if isinstance(x, xs.SparseArray):
        mask = _specified_mask(xp, x)
        host = np.where(mask, host, -np.inf)
    out = _softmax_reference(host, axes[0], log)
    if isinstance(x, xs.SparseArray):
        out = np.where(mask, out, -np.inf if log else 0.0)
    return xp.asarray(out.astype(dtype_name(spec.dtype)))


def tolerance(op: str, dtype: Any) -> dict[str, Any]:
    """The comparison of a reduction: exact or within a tolerance, and never the signs of zeros, which
    follow the summation and comparison order (docs/decisions.md, "Signs of zeros that xsparse does not
    track"): NumPy's sums start from the first element and torch's from +0, complex products associate
    differently, and both libraries' max of -0.0 and +0.0 may give either."""
    name = dtype_name(dtype)
    if op in ("sum", "max", "min", "any", "all", "count_nonzero", "argmax", "argmin", "cumulative_sum"):
        return {"check_signed_zeros": False}
    if name in ("float32", "complex64"):
        return {"rtol": 1e-4, "atol": 1e-5, "check_signed_zeros": False}
    if name in ("float64", "complex128"):
        return {"rtol": 1e-9, "atol": 1e-12, "check_signed_zeros": False}
    return {"check_signed_zeros": False}


def expected_layout(op: str, x: Any, spec: ReduceSpec) -> xs.Layout:
    """The layout the public rules give the result."""
    if not isinstance(x, xs.SparseArray) or spec.layout is xs.strided:
        return xs.strided
    if op in ("softmax", "log_softmax"):
        return x.layout
    if op in CUMULATIVE:
        fill = x.fill_value
        kept = fill == 0 if op == "cumulative_sum" else fill == 1 or (fill == 0 and not spec.include_initial)
        return x.layout if spec.axes[0] >= x.ndim - x.dense_dim() and kept else xs.strided
    if op in ("argmax", "argmin") and len(spec.axes) != 1:
        return xs.strided
    kind = result_kind(x.ndim, _indexed_dim(x), spec.axes)
    if kind == "structure":
        return x.layout
    if kind == "strided":
        return xs.strided
    if isinstance(x, xs.CompressedArray):
        b = x.batch_dim()
        if b and all(d in spec.axes for d in range(b)) and b not in spec.axes and b + 1 not in spec.axes:
            return x.layout
    return xs.sparse_coo


def admissible(op: str, x: Any, spec: ReduceSpec) -> bool:
    """Whether the dense reference is defined without warnings (the edge cases have their own tests)."""
    n = math.prod(x.shape[d] for d in spec.axes)
    if op in ("max", "min", "argmax", "argmin"):
        return n > 0
    if op == "mean":
        return n > 0
    if op in ("var", "std"):
        # torch warns about the degrees of freedom of an empty result too
        return n - spec.correction > 0 and math.prod(x.shape) > 0
    return True


def check(op: str, xp: Any, actual: Any, x: Any, dense: Any, axis: Any, spec: ReduceSpec) -> None:
    expected = xp.asarray(reference(op, xp, x, dense, axis, spec))
    host = to_numpy(dense)
    if op == "prod" and host.dtype.kind in "fc":
        # a product that may overflow on the way (the fill value's power, or a partial product) has no
        # one right answer (inf, nan, or 0 where a zero came first): keep clear of the dtype's range
        bound = np.nansum(np.log2(np.maximum(np.abs(host.astype(np.complex128)), 1.0)))
        assume(bound < np.log2(np.finfo(host.dtype).max) - 2)
    assert xs.layout_of(actual) is expected_layout(op, x, spec), (xs.layout_of(actual), expected_layout(op, x, spec))
    if not isinstance(actual, xs.SparseArray):
        # the backend's own array type, 0-d arrays included (never a Python or NumPy scalar)
        assert type(actual) is type(dense), (type(actual), type(dense))
    assert_sparse_equal(actual, expected, **tolerance(op, spec.dtype))


# -- every registered kernel against the dense computation ---------------------------------------------


def _layouts_of(element: Any) -> list[xs.Layout]:
    members = element if isinstance(element, frozenset) else frozenset((element,))
    return [layout for layout in [xs.strided, *SPARSE_LAYOUTS] if layout in members]


def _generic_cases() -> list[Any]:
    cases = []
    for op in OPS:
        for k in dispatch.kernels(op):
            if k.backend is not None:
                continue
            for backend in BACKENDS:
                reason = backend_skip_reason(backend)
                marks = [pytest.mark.skip(reason=reason)] if reason else []
                cases.append(pytest.param(k, backend, id=f"{k.name}-{backend}", marks=marks))
    return cases


def _native_cases() -> list[Any]:
    return [pytest.param(k, id=k.name) for op in OPS for k in xs.kernels(op) if k.backend is not None]


def test_every_operation_has_generic_kernels_for_every_layout() -> None:
    for op in OPS:
        generic = [k for k in xs.kernels(op) if k.backend is None]
        covered = {layout for k in generic for layout in _layouts_of(k.signature[0])}
        assert covered == {xs.strided, *SPARSE_LAYOUTS}, (op, covered)


def _run_kernel(kernel: dispatch.Kernel, xp: Any, x: Any, spec: ReduceSpec) -> Any:
    assert kernel.supports is None or kernel.supports(xp, x, spec) is None
    if kernel.op == "prod":
        # long products overflow like the dense ones; NumPy's warning is no error here
        with np.errstate(over="ignore", invalid="ignore"):
            return kernel.func(xp, x, spec)
    return kernel.func(xp, x, spec)


@pytest.mark.parametrize("kernel,backend", _generic_cases())
@SOME
@given(data=st.data())
def test_generic_kernel_against_dense(kernel: dispatch.Kernel, backend: str, data: st.DataObject) -> None:
    xp = xs.get_backend(backend).load()
    op = kernel.op
    layout = data.draw(st.sampled_from(_layouts_of(kernel.signature[0])), label="layout")
    fill = False if op in ("softmax", "log_softmax") else None
    x, dense = data.draw(inputs(xp, layout, op_dtypes(op, xp), fill=fill), label="x")
    axis = data.draw(axis_args(x.ndim, op in SINGLE_AXIS), label="axis")
    if op in CUMULATIVE and axis is None and x.ndim != 1:
        assume(x.ndim == 1)
    keepdims = data.draw(st.booleans(), label="keepdims")
    correction = data.draw(st.sampled_from([0.0, 1.0])) if op in ("var", "std") else 0.0
    include_initial = data.draw(st.booleans()) if op in CUMULATIVE else False
    assume(x.ndim > 0 or op not in SINGLE_AXIS - {"argmax", "argmin"})
    spec = make_spec(op, xp, x, axis, keepdims, correction, include_initial)
    assume(admissible(op, x, spec))
    with np.errstate(over="ignore", invalid="ignore"):
        actual = _run_kernel(kernel, xp, x, spec)
        check(op, xp, actual, x, dense, axis, spec)


# -- native kernels against the generic ones -------------------------------------------------------------


@st.composite
def native_inputs(draw: Any, kernel: dispatch.Kernel, xp: Any) -> tuple[Any, Any, Any, ReduceSpec]:
    """``(x, dense, axis, spec)`` of the kind the native kernel is meant for (it may still decline)."""
    op = kernel.op
    dtypes = op_dtypes(op, xp)
    layouts = [layout for layout in _layouts_of(kernel.signature[0]) if not layout.is_blocked] or _layouts_of(kernel.signature[0])
    layout = draw(st.sampled_from(layouts))
    dtype = draw(st.sampled_from(dtypes))
    fill = False if op in ("softmax", "log_softmax") else None
    case = draw(S.dense_cases(xp, dtype=dtype, fill=fill, max_batch_dims=0 if layout is not xs.sparse_coo else 1, max_dense_dims=1))
    if layout is xs.sparse_coo:
        x = case.sparse(layout)
        if draw(st.booleans()) and x.nnz:
            x = S.uncoalesced_like(xp, np.random.default_rng(draw(st.integers(0, 2**32 - 1))), x, case.index_dtype)
        sd = x.sparse_dim()
        keepdims = False
        if kernel.backend == "numpy" or kernel.name in {f"_{o}_coo_torch" for o in ("sum", "prod", "max", "min", "mean")}:
            # kernels that group by the kept sparse dimensions: at least one sparse axis, up to all axes
            # (not all for torch: its _full_torch kernels reduce those)
            assume(sd > 0 and (kernel.backend == "numpy" or x.ndim > 1))
            most = x.ndim if kernel.backend == "numpy" else x.ndim - 1
            axis = tuple(draw(st.lists(st.integers(0, x.ndim - 1), min_size=1, max_size=most, unique=True)))
            axis = axis if any(a < sd for a in axis) else (0,)
            keepdims = draw(st.booleans())
        else:
            axis = draw(st.integers(0, x.ndim - 1))
    else:
        x = case.sparse(layout)
        axis = draw(st.sampled_from([0, 1, -x.ndim, 1 - x.ndim]))
        keepdims = draw(st.booleans())
    if kernel.name.endswith("_full_torch"):
        # the reductions over every axis
        axis, keepdims = None, draw(st.booleans())
    spec = make_spec(op, xp, x, axis, keepdims)
    # the layout the caller asks for, which a native kernel may produce directly
    return x, case.array, axis, dataclasses.replace(spec, layout=draw(st.sampled_from([None, xs.strided])))


@pytest.mark.parametrize("kernel", _native_cases())
@SOME
@given(data=st.data())
def test_native_kernel_against_generic(kernel: dispatch.Kernel, data: st.DataObject) -> None:
    xp = xs.get_backend(kernel.backend).load()
    x, dense, axis, spec = data.draw(native_inputs(kernel, xp), label="input")
    assume(admissible(kernel.op, x, spec))
    reason = kernel.supports(xp, x, spec) if kernel.supports is not None else None
    assert reason is None, reason
    generic = next(k for k in dispatch.resolve(kernel.op, (x.layout,), kernel.backend) if k.backend is None)
    with np.errstate(over="ignore", invalid="ignore"):
        actual = convert_result(kernel.func(xp, x, spec), spec.layout)
        expected = convert_result(generic.func(xp, x, spec), spec.layout)
        check(kernel.op, xp, actual, x, dense, axis, spec)
    assert xs.layout_of(actual) is xs.layout_of(expected)
    if isinstance(expected, xs.SparseArray):
        assert _same_fill(actual.fill_value, expected.fill_value), (actual.fill_value, expected.fill_value)
        assert_sparse_equal(actual, expected, **tolerance(kernel.op, spec.dtype))
    else:
        assert_sparse_equal(actual, expected, **tolerance(kernel.op, spec.dtype))


def _same_fill(a: Any, b: Any) -> bool:
    return bool(a == b) or (a != a and b != b)


def test_native_kernels_are_registered() -> None:
    names = {k.name for k in xs.kernels() if k.backend is not None}
    assert {"_sum_compressed_numpy", "_max_compressed_numpy", "_count_nonzero_compressed_numpy"} <= names
    assert {f"_{op}_coo_numpy" for op in (*MONOIDS, "mean")} <= names
    if backend_skip_reason("torch") is None:
        assert {"_sum_coo_torch", "_softmax_coo_torch", "_log_softmax_coo_torch", "_sum_compressed_torch"} <= names
        assert {f"_{op}_coo_torch" for op in ("prod", "max", "min", "mean")} <= names
        assert {f"_{op}_full_torch" for op in (*MONOIDS, "mean", "var", "std")} <= names


# The NumPy COO kernels' three ways of grouping: runs of sorted keys (coalesced, the kept dimensions
# leading), a slot per position of the kept dimensions, and a slot per distinct key where the kept
# dimensions hold far more positions than there are entries.
COO_GROUPINGS = {
    "runs": ((40, 50, 3), (2,), True),
    "slots": ((4, 5, 6), (0,), False),
    "distinct keys": ((3, 700, 700), (0,), True),
}


GROUPING_KERNELS = [("numpy", op, f"_{op}_coo_numpy") for op in (*MONOIDS, "mean")] + [
    ("torch", op, f"_{op}_coo_torch") for op in ("sum", "prod", "max", "min", "mean")
]


@pytest.mark.parametrize(("backend", "op", "name"), GROUPING_KERNELS, ids=[k[2] for k in GROUPING_KERNELS])
@pytest.mark.parametrize("grouping", list(COO_GROUPINGS))
@SOME
@given(data=st.data())
def test_coo_groupings(backend: str, op: str, name: str, grouping: str, data: st.DataObject) -> None:
    if backend_skip_reason(backend):
        pytest.skip(str(backend_skip_reason(backend)))
    xp = xs.get_backend(backend).load()
    shape, axes, coalesce = COO_GROUPINGS[grouping]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    nse = data.draw(st.sampled_from([0, 1, 7, 60]), label="nse")
    dtype = data.draw(st.sampled_from(op_dtypes(op, xp)), label="dtype")
    index_dtype = data.draw(st.sampled_from([np.int32, np.int64]), label="index_dtype")
    fill = data.draw(st.sampled_from([0, 1]), label="fill")
    idx = np.stack([rng.integers(0, n, nse) for n in shape]).astype(index_dtype)
    vals = S.nonzero_values(rng, dtype, nse, 0, specials=False) if nse else np.zeros(0, dtype=dtype)
    x = xs.sparse_coo_array(xp.asarray(idx), xp.asarray(vals), shape, fill_value=np.asarray(fill).astype(dtype).item())
    if coalesce:
        x = x.coalesce()
    kernel = next(k for k in dispatch.resolve(op, (xs.sparse_coo,), backend) if k.name == name)
    keepdims = data.draw(st.booleans(), label="keepdims")
    spec = make_spec(op, xp, x, axes, keepdims)
    assume(admissible(op, x, spec))
    generic = next(k for k in dispatch.resolve(op, (xs.sparse_coo,), backend) if k.backend is None)
    with np.errstate(over="ignore", invalid="ignore"):
        actual = _run_kernel(kernel, xp, x, spec)
        check(op, xp, actual, x, xs.to_dense(x), axes, spec)
        assert_sparse_equal(actual, generic.func(xp, x, spec), **tolerance(op, spec.dtype))


@pytest.mark.skipif(backend_skip_reason("torch") is not None, reason="torch is not installed")
@pytest.mark.parametrize("op", ["sum", "max", "min", "mean", "var", "std"])
@SOME
@given(data=st.data())
def test_torch_full_reduction_fast_paths(op: str, data: st.DataObject) -> None:
    """The torch kernels over every axis (one torch reduction of the values, then the fill value): a 0-d
    torch tensor of the spec's dtype, equal to the dense torch reduction and to the generic kernel, on
    every layout (uncoalesced COO with dense dimensions, batched and blocked compressed arrays), fill
    values 0 and non-zero (NaN included), NaN and -0.0 values, nnz = 0, int32 and int64 indices; for
    sums in the accumulation dtype and in the input's own (integers wrap the same way), for var and std
    with several corrections; through the public function too."""
    import torch

    xp = xs.get_backend("torch").load()
    layout = data.draw(st.sampled_from(SPARSE_LAYOUTS), label="layout")
    native = next(k for k in dispatch.resolve(op, (layout,), "torch") if k.name == f"_{op}_full_torch")
    generic = next(k for k in dispatch.resolve(op, (layout,), "torch") if k.backend is None)
    dtype = data.draw(st.sampled_from([d for d in op_dtypes(op, xp) if signed_twin(xp, getattr(xp, d)) is None]), label="dtype")
    x, dense = data.draw(inputs(xp, layout, [dtype]), label="x")
    keepdims = data.draw(st.booleans(), label="keepdims")
    # torch's dense std takes no fractional correction: test_torch_full_statistics_edges has one
    correction = data.draw(st.sampled_from([0.0, 1.0, 2.0]), label="correction") if op in ("var", "std") else 0.0
    spec = make_spec(op, xp, x, None, keepdims, correction)
    assume(admissible(op, x, spec))
    public = getattr(xs, op)
    options = {"correction": correction} if op in ("var", "std") else {}
    for spec in (spec, dataclasses.replace(spec, dtype=x.dtype)) if op == "sum" else (spec,):
        assert native.supports is not None and native.supports(xp, x, spec) is None
        with np.errstate(over="ignore"):
            got, want = native.func(xp, x, spec), generic.func(xp, x, spec)
        assert type(got) is torch.Tensor and got.layout is torch.strided and got.dtype == spec.dtype
        assert tuple(got.shape) == ((1,) * x.ndim if keepdims else ())
        check(op, xp, got, x, dense, None, spec)
        assert_sparse_equal(got, want, **tolerance(op, spec.dtype))
        r = public(x, keepdims=keepdims, **options, **({"dtype": spec.dtype} if op == "sum" else {}))
        assert type(r) is torch.Tensor and r.dtype == spec.dtype
        # the public var and std of float32 and half precision compute in float64 (a rounding apart)
        assert_sparse_equal(r, got, **(tolerance(op, spec.dtype) if op in ("var", "std") else {}))


@pytest.mark.skipif(backend_skip_reason("torch") is not None, reason="torch is not installed")
@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_bsc])
def test_torch_full_statistics_edges(layout: xs.Layout) -> None:
    """mean, var and std over every axis on torch, where the Hypothesis test's dense reference warns or
    is not defined: no elements (NaN), ``N - correction <= 0`` (NaN), non-finite fill values (the mean
    inf or NaN, the variance NaN), no stored element (the fill value's mean, variance 0), duplicates
    summed before the variance; no warning in any of them (pytest turns warnings into errors)."""
    import torch

    def sparse(d: Any, fill: float = 0.0) -> Any:
        kw: dict[str, Any] = {"layout": layout, "fill_value": fill}
        if layout.is_blocked:
            kw["blocksize"] = (1, 1)
        return xs.to_sparse(torch.as_tensor(d, dtype=torch.float64), **kw)

    def statistics(x: Any, correction: float = 0.0) -> list[float]:
        rs = [xs.mean(x), xs.var(x, correction=correction), xs.std(x, correction=correction)]
        assert all(type(r) is torch.Tensor and r.shape == () and r.dtype == torch.float64 for r in rs)
        return [r.item() for r in rs]

    empty = sparse(torch.zeros((0, 3)))
    assert all(math.isnan(v) for v in statistics(empty))
    one = sparse([[0.0, 2.0]])
    assert statistics(one, correction=1.0)[1:] == [2.0, math.sqrt(2.0)]
    assert all(math.isnan(v) for v in statistics(one, correction=2.0)[1:])
    assert statistics(one, correction=0.5)[1:] == pytest.approx([2.0 / 1.5, math.sqrt(2.0 / 1.5)], rel=1e-15)
    # every element stored: the values' own variance, the fractional correction included
    full = sparse([[1.0, 2.0], [3.0, 6.0]])
    assert full.nnz == 4 and statistics(full, correction=1.5) == [3.0, 14.0 / 2.5, math.sqrt(14.0 / 2.5)]
    assert statistics(sparse([[0.25, 0.25], [0.25, 0.25]], fill=0.25)) == [0.25, 0.0, 0.0]
    inf = statistics(sparse([[1.0, math.inf], [math.inf, math.inf]], fill=math.inf))
    assert inf[0] == math.inf and math.isnan(inf[1]) and math.isnan(inf[2])
    # a NaN fill value counts where an element is unspecified, and only there
    assert [math.isnan(v) for v in statistics(sparse([[1.0, 3.0], [2.0, math.nan]], fill=math.nan))] == [True, True, True]
    assert statistics(sparse([[1.0, 3.0], [2.0, 2.0]], fill=math.nan)) == [2.0, 0.5, math.sqrt(0.5)]
    nan = statistics(sparse([[1.0, 3.0], [math.nan, 2.0]], fill=2.0))
    assert all(math.isnan(v) for v in nan)
    # duplicates add up before the variance: the elements are 4, 0, 0 and 2 (mean 1.5, variance 2.75)
    dup = xs.sparse_coo_array(torch.tensor([[0, 0, 1], [0, 0, 1]]), torch.tensor([1.0, 3.0, 2.0], dtype=torch.float64), (2, 2))
    assert statistics(dup) == [1.5, 2.75, math.sqrt(2.75)]
    shifted = xs.sparse_coo_array(torch.tensor([[0, 0, 1], [0, 0, 1]]), torch.tensor([1.0, 3.0, 2.0], dtype=torch.float64), (2, 2), fill_value=1.0)
    assert statistics(shifted) == [2.0, 1.5, math.sqrt(1.5)]
    # a complex mean; var and std take real dtypes only, and the public layer says so
    c = xs.to_sparse(torch.tensor([[1 + 2j, 0j], [0j, 3 - 1j]], dtype=torch.complex128), layout=layout, **({"blocksize": (1, 1)} if layout.is_blocked else {}))
    assert xs.mean(c).item() == 1 + 0.25j
    with pytest.raises(TypeError, match="real floating-point"):
        xs.var(c)
    # the kernels decline what they do not compute: some axes only, or a dtype other than the input's
    xp = xs.get_backend("torch").load()
    for op in ("mean", "var", "std"):
        kernel = next(k for k in dispatch.resolve(op, (layout,), "torch") if k.name == f"_{op}_full_torch")
        assert kernel.supports is not None
        assert "every axis" in str(kernel.supports(xp, one, ReduceSpec((0,), False, torch.float64)))
        assert "dtype" in str(kernel.supports(xp, one, ReduceSpec((0, 1), False, torch.float32)))
    assert "real floating" in str(kernel.supports(xp, c, ReduceSpec((0, 1), False, torch.complex128)))


def test_torch_sum_over_every_axis_takes_the_full_kernel() -> None:
    """A COO sum over every axis goes to _sum_full_torch, whatever the fill value; the grouping kernel
    (_sum_coo_torch) declines it."""
    pytest.importorskip("torch")
    import torch

    xp = xs.get_backend("torch").load()
    a = xs.to_backend(xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3), dtype="float64"), "torch")
    spec = ReduceSpec((0, 1), False, torch.float64)
    coo = next(k for k in dispatch.resolve("sum", (xs.sparse_coo,), "torch") if k.name == "_sum_coo_torch")
    assert coo.supports is not None and "reduce every axis" in str(coo.supports(xp, a, spec))
    first = dispatch.resolve("sum", (xs.sparse_coo,), "torch")[0]
    assert first.name == "_sum_full_torch" and first.supports is not None and first.supports(xp, a, spec) is None
    assert float(xs.sum(a)) == 12.0


def test_dispatch_picks_the_native_kernel() -> None:
    a = xs.to_sparse_csr(np.asarray([[0, 1.0, 2.0], [0, 0, 3.0]]))
    kernels = dispatch.resolve("sum", (xs.sparse_csr,), "numpy")
    assert kernels[0].name == "_sum_compressed_numpy"
    assert kernels[0].supports is not None and kernels[0].supports(a._xp, a, ReduceSpec((1,), False, a.dtype)) is None
    assert kernels[0].supports(a._xp, a, ReduceSpec((0, 1), False, a.dtype)) is None
    h = xs.to_sparse_csr(np.ones((2, 3, 2)), dense_dim=1)
    reason = kernels[0].supports(h._xp, h, ReduceSpec((2,), False, h.dtype))
    assert reason is not None and "the two sparse dimensions" in reason


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_reductions_across_very_many_plain_indices_decline_to_the_generic_kernel(backend: str) -> None:
    # one accumulator per column of a (3, 2**31 - 5) CSR matrix of 3 entries asked for 17 GB (NumPy's
    # MemoryError, torch's allocator): the native kernels decline, the generic one groups the 3 entries
    if backend_skip_reason(backend) is not None:
        pytest.skip(str(backend_skip_reason(backend)))
    n = 2**31 - 5
    host = xs.sparse_csr_array(np.asarray([0, 1, 2, 3]), np.asarray([5, n - 5, 7]), np.asarray([1.0, 2.0, 3.0]), shape=(3, n))
    a = xs.to_backend(host, backend)
    kernel = next(k for k in dispatch.resolve("sum", (xs.sparse_csr,), backend) if k.name == f"_sum_compressed_{backend}")
    assert kernel.supports is not None
    reason = kernel.supports(a._xp, a, ReduceSpec((0,), False, a.dtype))
    assert reason is not None and "an accumulator per plain index (2147483643) would outweigh the entries (3)" in reason
    assert kernel.supports(a._xp, a, ReduceSpec((1,), False, a.dtype)) is None  # within the rows: 3 accumulators
    for name in ("sum", "max"):
        r = getattr(xs, name)(a, axis=0)
        assert r.layout is xs.sparse_coo and tuple(r.shape) == (n,)
        assert to_numpy(r.indices()).tolist() == [[5, 7, n - 5]] and to_numpy(r.values()).tolist() == [1.0, 3.0, 2.0]


# -- the public functions: semantics ---------------------------------------------------------------------


def _np(x: Any) -> np.ndarray:
    return to_numpy(xs.to_dense(x))


def test_sum_follows_torch_sparse_sum(xp: Any) -> None:
    """The example of torch.sparse.sum's documentation: some sparse dimensions give COO, all give strided."""
    values = xp.asarray(np.arange(18.0).reshape(3, 2, 3))
    s = xs.sparse_coo_array(xp.asarray([[2, 0, 3], [2, 4, 1]]), values, (5, 5, 2, 3))
    r = xs.sum(s, axis=(1, 3))
    assert r.layout is xs.sparse_coo and r.shape == (5, 2) and r.sparse_dim() == 1 and r.is_coalesced()
    assert to_numpy(r.indices()).tolist() == [[0, 2, 3]]
    np.testing.assert_array_equal(_np(r), _np(s).sum(axis=(1, 3)))
    d = xs.sum(s, axis=(0, 1, 3))
    assert xs.layout_of(d) is xs.strided and tuple(d.shape) == (2,)
    np.testing.assert_array_equal(to_numpy(d), _np(s).sum(axis=(0, 1, 3)))


FULL = ["sum", "prod", "mean", "max", "min", "argmax", "argmin", "any", "all", "std", "var", "count_nonzero"]


@pytest.mark.parametrize("op", FULL)
def test_full_reductions_are_0d_backend_arrays(xp: Any, layout: xs.Layout, op: str) -> None:
    dense = xp.asarray([[0.0, 1.5, 0.0, 2.0], [0.0, 0.0, -3.0, 0.0]])
    kw = {"blocksize": (1, 2)} if layout.is_blocked else {}
    a = xs.to_sparse(dense, layout=layout, **kw)
    r = getattr(xs, op)(a)
    assert type(r) is type(dense) and r.ndim == 0
    expected = getattr(xp, op)(xp.reshape(dense, (-1,))) if op in ("argmax", "argmin") else getattr(xp, op)(dense)
    np.testing.assert_allclose(to_numpy(r), to_numpy(xp.asarray(expected)))
    assert getattr(xs, op)(a, keepdims=True).shape == (1, 1)


@pytest.mark.parametrize("op", FULL)
def test_full_reductions_of_a_dense_dimension_are_0d_backend_arrays(xp: Any, op: str) -> None:
    """A 1-D COO array whose one dimension is dense (sparse_dim 0) reduces to a 0-d backend array too, for
    axis=None and axis=0 (argmax and argmin gave a 0-d COO array)."""
    dense = xp.asarray([1.0, 3.0, -2.0])
    a = xs.to_sparse(dense, sparse_dim=0)
    for axis in (None, 0):
        r = getattr(xs, op)(a, axis=axis)
        assert type(r) is type(dense) and r.ndim == 0, (op, axis, type(r))
        np.testing.assert_allclose(to_numpy(r), to_numpy(xp.asarray(getattr(xp, op)(dense))))


def test_result_layouts_of_a_batched_compressed_array() -> None:
    rng = np.random.default_rng(0)
    dense = np.where(rng.random((2, 4, 6, 3)) < 0.4, rng.integers(1, 5, (2, 4, 6, 3)), 0).astype(np.float64)
    # the same number of specified elements in both batches (invariant 3.9), at other positions
    dense[1] = 2 * dense[0, ::-1, ::-1]
    a = xs.to_sparse_csr(dense, dense_dim=1)
    # dense dimensions only: the structure is kept, indices shared
    r = xs.sum(a, axis=3)
    assert r.layout is xs.sparse_csr and r.crow_indices() is a.crow_indices() and r.shape == (2, 4, 6)
    np.testing.assert_array_equal(_np(r), dense.sum(axis=3))
    # every batch dimension, both sparse ones kept: one matrix of the same layout
    for keepdims, shape in ((False, (4, 6, 3)), (True, (1, 4, 6, 3))):
        r = xs.max(a, axis=0, keepdims=keepdims)
        assert r.layout is xs.sparse_csr and r.shape == shape
        np.testing.assert_array_equal(_np(r), dense.max(axis=0, keepdims=keepdims))
    # a sparse dimension: COO over the batch and the other sparse dimension
    r = xs.sum(a, axis=1)
    assert r.layout is xs.sparse_coo and r.sparse_dim() == 2 and r.shape == (2, 6, 3)
    np.testing.assert_array_equal(_np(r), dense.sum(axis=1))
    # every batch and sparse dimension: strided
    r = xs.mean(a, axis=(0, 1, 2))
    assert xs.layout_of(r) is xs.strided
    np.testing.assert_allclose(to_numpy(r), dense.mean(axis=(0, 1, 2)))


def test_batch_reduction_of_bsr_keeps_the_blocks() -> None:
    dense = np.zeros((2, 4, 4))
    dense[0, :2, :2] = [[1, 2], [3, 4]]
    dense[1, 2:, :2] = [[5, 6], [7, 8]]
    a = xs.to_sparse_bsr(dense, blocksize=(2, 2))
    r = xs.sum(a, axis=0)
    assert r.layout is xs.sparse_bsr and r.blocksize == (2, 2) and r.nnz == 2
    np.testing.assert_array_equal(_np(r), dense.sum(axis=0))


def test_keepdims_keeps_a_reduced_sparse_dimension_at_index_0() -> None:
    dense = np.zeros((3, 4, 2))
    dense[0, 1], dense[2, 3], dense[2, 0] = 1.0, 2.0, 3.0
    a = xs.to_sparse_coo(dense, sparse_dim=2)
    r = xs.sum(a, axis=1, keepdims=True)
    assert r.layout is xs.sparse_coo and r.shape == (3, 1, 2)
    assert to_numpy(r.indices())[1].tolist() == [0, 0]
    np.testing.assert_array_equal(_np(r), dense.sum(axis=1, keepdims=True))


def test_layout_argument_converts_the_result() -> None:
    a = xs.to_sparse_csr(np.asarray([[0, 1.0, 2.0], [0, 0, 3.0]]))
    r = xs.sum(a, axis=1, layout=xs.strided)
    assert isinstance(r, np.ndarray) and r.tolist() == [3.0, 3.0]
    c = xs.sum(xs.to_sparse_coo(np.ones((2, 3, 4))), axis=2, layout=xs.sparse_csr)
    assert c.layout is xs.sparse_csr and _np(c).tolist() == [[4.0] * 3] * 2


def test_every_reduction_counts_the_fill_value(xp: Any) -> None:
    # [[2, 5], [2, 2]]: one specified element, fill value 2
    a = xs.sparse_coo_array(xp.asarray([[0], [1]]), xp.asarray([5.0]), (2, 2), fill_value=2.0)
    dense = xs.to_dense(a)
    for op in ("sum", "prod", "mean", "max", "min", "count_nonzero", "any", "all"):
        for axis in (None, 0, 1):
            np.testing.assert_allclose(_np(getattr(xs, op)(a, axis=axis)), to_numpy(xp.asarray(getattr(xp, op)(dense, axis=axis))), err_msg=op)
    np.testing.assert_allclose(to_numpy(xs.var(a)), 2.25 * 3 / 4)
    assert int(xs.argmax(a)) == 1 and int(xs.argmin(a)) == 0
    r = xs.sum(a, axis=1)
    assert r.fill_value == 4.0 and to_numpy(r.indices()).tolist() == [[0]] and to_numpy(r.values()).tolist() == [7.0]


@pytest.mark.parametrize(
    "positions,values,fill",
    [
        ([2, 4], [3.0, 3.0], 3.0),  # a tie with the fill value: the first unspecified element wins
        ([0, 4], [3.0, 3.0], 3.0),  # a tie: the first specified element comes first
        ([0, 1], [3.0, 3.0], 3.0),  # the first unspecified element comes after two specified ones
        ([3], [math.nan], 0.0),  # a NaN beats every number
        ([0, 1, 2, 3, 4], [1.0, 5.0, 5.0, 0.0, -1.0], 9.0),  # no unspecified element
        ([1], [-1.0], math.nan),  # the fill value is NaN
    ],
)
def test_argmax_and_argmin_take_the_first_occurrence(xp: Any, positions: list[int], values: list[float], fill: float) -> None:
    a = xs.sparse_coo_array(xp.asarray([positions]), xp.asarray(values), (5,), fill_value=fill)
    dense = to_numpy(xs.to_dense(a))
    assert int(xs.argmax(a)) == int(np.argmax(dense)) and int(xs.argmin(a)) == int(np.argmin(dense))
    b = xs.sparse_coo_array(xp.asarray([[0] * len(positions), positions]), xp.asarray(values), (2, 5), fill_value=fill)
    np.testing.assert_array_equal(_np(xs.argmax(b, axis=1)), np.argmax(_np(b), axis=1))
    np.testing.assert_array_equal(_np(xs.argmin(b, axis=1)), np.argmin(_np(b), axis=1))


def test_duplicates_of_an_uncoalesced_array_add_up_first(xp: Any) -> None:
    a = xs.sparse_coo_array(xp.asarray([[0, 0, 1, 3, 3]]), xp.asarray([2, 3, 1, 4, -4]), (4,))
    assert not a.is_coalesced()
    assert int(xs.max(a)) == 5 and int(xs.count_nonzero(a)) == 2 and int(xs.prod(a)) == 0 and int(xs.sum(a)) == 6
    assert int(xs.argmax(a)) == 0 and int(xs.argmin(a)) == 2
    assert bool(xs.all(xs.sparse_coo_array(xp.asarray([[0, 0]]), xp.asarray([2, -2]), (1,)))) is False
    # in the array's dtype, before a cast to the result's: rounded (0.5 + 0.75 -> int64 1, not 0 + 0)
    b = xs.sparse_coo_array(xp.asarray([[0, 0]]), xp.asarray([0.5, 0.75], dtype=xp.float64), (2,))
    assert int(xs.sum(b, dtype=xp.int64)) == 1 and int(xs.sum(b, axis=0, dtype=xp.int64)) == 1
    assert int(xs.to_dense(xs.cumulative_sum(b, dtype=xp.int64))[1]) == 1
    # wrapping in uint8 before the standard's uint64 sum (200 + 100 -> 44, as to_dense gives)
    u = xs.sparse_coo_array(xp.asarray([[0, 0]]), xp.asarray([200, 100], dtype=xp.uint8), (2,))
    assert int(xs.sum(u)) == 44 and int(xs.sum(u, axis=0)) == 44 and int(xs.to_dense(u)[0]) == 44
    hybrid = xs.sparse_coo_array(xp.asarray([[0, 0]]), xp.asarray([[200, 1], [100, 1]], dtype=xp.uint8), (2, 2))
    assert to_numpy(xs.to_dense(xs.sum(hybrid, axis=1))).tolist() == [46, 0]


def test_statistics_of_nothing_are_nan() -> None:
    a = xs.to_sparse_coo(np.ones((3, 0)))
    assert np.isnan(_np(xs.mean(a, axis=1))).all() and _np(xs.mean(a, axis=1)).shape == (3,)
    b = xs.to_sparse_coo(np.asarray([[1.0, 0.0], [0.0, 0.0]]))
    assert np.isnan(to_numpy(xs.var(b, correction=4)))
    assert np.isnan(_np(xs.std(b, axis=0, correction=2))).all()
    np.testing.assert_allclose(_np(xs.var(b, axis=1, correction=1)), [0.5, 0.0])


def test_cumulative_sum_keeps_the_structure_only_along_a_dense_dimension_with_fill_0() -> None:
    dense = np.zeros((3, 4, 2), dtype=np.int64)
    dense[0, 1] = [1, 2]
    dense[2, 3] = [3, 4]
    a = xs.to_sparse_coo(dense, sparse_dim=2)
    r = xs.cumulative_sum(a, axis=2)
    assert r.layout is xs.sparse_coo and r.indices() is a.indices()
    np.testing.assert_array_equal(_np(r), np.cumsum(dense, axis=2))
    r = xs.cumulative_sum(a, axis=2, include_initial=True)
    assert r.layout is xs.sparse_coo and r.shape == (3, 4, 3)
    r = xs.cumulative_sum(a, axis=1)
    assert isinstance(r, np.ndarray)
    np.testing.assert_array_equal(r, np.cumsum(dense, axis=1))
    filled = xs.to_sparse_coo(dense, sparse_dim=2, fill_value=1)
    assert isinstance(xs.cumulative_sum(filled, axis=2), np.ndarray)
    assert xs.cumulative_sum(xs.to_sparse_csr(np.eye(3)), axis=1).tolist() == [[1, 1, 1], [0, 1, 1], [0, 0, 1]]


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
def test_cumulative_prod_keeps_the_structure_where_the_fill_stays_constant(backend: str, xp: Any, layout: xs.Layout) -> None:
    """Along a dense dimension: fill 1 (with or without the leading 1) and fill 0 without it keep the
    structure and the fill value; fill 0 with include_initial, another fill or a sparse axis give strided."""
    host = np.zeros((2, 4, 2), dtype=np.float64)
    host[0, 1] = [2.0, 3.0]
    host[1, 2] = [4.0, 5.0]
    blocks = {"blocksize": (1, 2)} if layout.is_blocked else {}
    for fill, initial, kept in [(0.0, False, True), (0.0, True, False), (1.0, False, True), (1.0, True, True), (2.0, False, False)]:
        d = np.where(host == 0, fill, host)
        a = xs.to_sparse(xp.asarray(d), layout=layout, dense_dim=1, fill_value=fill, **blocks)
        r = xs.cumulative_prod(a, axis=2, include_initial=initial)
        assert xs.layout_of(r) is (layout if kept else xs.strided), (fill, initial)
        if kept:
            assert r.fill_value == fill and r.shape == (2, 4, 3 if initial else 2)
        expected = xp.cumulative_prod(xp.asarray(d), axis=2, include_initial=initial)
        assert_sparse_equal(r, expected)
        assert_sparse_equal(xs.cumulative_prod(a, axis=1), xp.cumulative_prod(xp.asarray(d), axis=1))


def test_softmax_reads_unspecified_elements_as_minus_infinity(xp: Any) -> None:
    idx, vals = xp.asarray([[0, 0, 1], [0, 2, 1]]), xp.asarray([1.0, 3.0, 2.0])
    zero = xs.sparse_coo_array(idx, vals, (2, 3))
    neg = xs.sparse_coo_array(idx, vals, (2, 3), fill_value=-math.inf)
    for fn, fill in ((xs.softmax, 0.0), (xs.log_softmax, -math.inf)):
        r0, r1 = fn(zero, axis=1), fn(neg, axis=1)
        assert r0.fill_value == fill == r1.fill_value and r0.layout is xs.sparse_coo
        np.testing.assert_allclose(_np(r0), _np(r1))
    s = _np(xs.softmax(zero, axis=1))
    np.testing.assert_allclose(s[0], [1 / (1 + math.e**2), 0, math.e**2 / (1 + math.e**2)])
    np.testing.assert_allclose(s[1], [0, 1, 0])


def test_softmax_keeps_the_compressed_structure(layout: xs.Layout) -> None:
    dense = np.asarray([[1.0, 2.0, 0.0, 0.0], [0.0, 0.0, 3.0, 4.0]])
    kw = {"blocksize": (1, 2)} if layout.is_blocked else {}
    a = xs.to_sparse(dense, layout=layout, **kw)
    for axis in (0, 1):
        r = xs.softmax(a, axis=axis)
        assert r.layout is layout and r.nnz == a.nnz
        expected = np.exp(np.where(dense != 0, dense, -np.inf))
        expected = expected / expected.sum(axis=axis, keepdims=True)
        np.testing.assert_allclose(_np(r), np.where(dense != 0, expected, 0.0))


def test_softmax_dtype_argument() -> None:
    a = xs.sparse_coo_array([[0, 1]], [1, 2], (3,), dtype="int64")
    r = xs.softmax(a, 0, dtype="float32")
    assert r.dtype == np.float32
    np.testing.assert_allclose(_np(r), [1 / (1 + math.e), math.e / (1 + math.e), 0.0], rtol=1e-6)


def test_an_empty_tuple_of_axes_reduces_nothing() -> None:
    a = xs.sparse_coo_array([[0, 2]], [3, 0], (4,), dtype="int64", fill_value=1)
    r = xs.sum(a, axis=())
    assert r.layout is xs.sparse_coo and _np(r).tolist() == [3, 1, 0, 1]
    assert _np(xs.count_nonzero(a, axis=())).tolist() == [1, 1, 0, 1]
    assert xs.count_nonzero(np.asarray([2, 0]), axis=()).tolist() == [1, 0]
    assert xs.mean(np.asarray([2.0, 0.0]), axis=()).tolist() == [2.0, 0.0]


def test_dtype_argument_of_sums() -> None:
    b = xs.sparse_coo_array([[0, 2]], [True, True], (4,), dtype="bool")
    assert int(xs.sum(b, dtype="int64")) == 2
    i = xs.sparse_coo_array([[0, 2]], [100, 100], (4,), dtype="int8")
    assert xs.sum(i).dtype == np.int64 and int(xs.sum(i)) == 200
    assert xs.prod(i, dtype="float32").dtype == np.float32
    assert xs.cumulative_sum(i, dtype="float64").dtype == np.float64


_INT_DTYPES = ["int8", "int16", "int32", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("op", ["sum", "prod", "cumulative_sum", "cumulative_prod"])
@FEW
@given(data=st.data())
def test_accumulations_honour_dtype_and_the_standard_default(backend: str, xp: Any, op: str, data: st.DataObject) -> None:
    """sum, prod and the running ones give dtype= when passed, else the standard's default (signed -> the
    default integer, unsigned -> the unsigned dtype of its width), with the values NumPy computes in that
    dtype (wrapping modulo 2**bits). NumPy is the reference on every backend: torch has no sums of its
    uint16/32/64 dtypes, which xsparse computes on the same-width signed ones."""
    src = data.draw(st.sampled_from(_INT_DTYPES), label="src")
    dst = data.draw(st.none() | st.sampled_from(_INT_DTYPES), label="dtype")
    lo, hi = (-100, 100) if src.startswith("int") else (0, 200)
    rows = data.draw(st.integers(0, 3), label="rows")
    host = np.asarray(data.draw(st.lists(st.integers(lo, hi) | st.just(0), min_size=rows * 3, max_size=rows * 3), label="v"), dtype=src).reshape(rows, 3)
    fill = data.draw(st.sampled_from([0, 1]), label="fill")
    x = xs.to_sparse_coo(xp.asarray(host, dtype=getattr(xp, src)), fill_value=fill)
    if x.nnz and data.draw(st.booleans(), label="duplicates"):
        # every entry split in two that add up to it in its own dtype (wrapping): a cast to a wider result
        # dtype must come after the duplicates are added
        v = to_numpy(x.values())
        w = np.asarray(data.draw(st.lists(st.integers(lo, hi), min_size=v.shape[0], max_size=v.shape[0]), label="w"), dtype=src)
        with np.errstate(over="ignore"):
            rest = np.subtract(v, w, dtype=src)
        idx = xp.concat([x.indices(), x.indices()], axis=1)
        x = xs.sparse_coo_array(idx, xp.asarray(np.concatenate([rest, w]), dtype=getattr(xp, src)), x.shape, fill_value=fill)
        assert not x.is_coalesced()
    expected_dtype = dst or ("int64" if src.startswith("int") else "uint64")
    kw: dict[str, Any] = {} if dst is None else {"dtype": getattr(xp, dst)}
    if op.startswith("cumulative"):
        include = data.draw(st.booleans(), label="include_initial")
        r = getattr(xs, op)(x, axis=1, include_initial=include, **kw)
        ref = (np.cumsum if op == "cumulative_sum" else np.cumprod)(host, axis=1, dtype=expected_dtype)
        if include:
            ref = np.concatenate([np.full((rows, 1), 0 if op == "cumulative_sum" else 1, dtype=expected_dtype), ref], axis=1)
    else:
        axis = data.draw(st.sampled_from([None, 0, 1]), label="axis")
        r = getattr(xs, op)(x, axis=axis, **kw)
        with np.errstate(over="ignore"):
            ref = np.asarray((np.sum if op == "sum" else np.prod)(host, axis=axis, dtype=expected_dtype))
    assert dtype_name(r.dtype) == expected_dtype, (op, src, dst, r.dtype)
    assert np.array_equal(to_numpy(xs.to_dense(r) if isinstance(r, xs.SparseArray) else r), ref), (op, src, dst)


def test_signed_twin_moves_unsigned_values_bit_for_bit() -> None:
    """The value-moving kernels on torch's uint16/32/64 (which torch gathers, selects and adds for no such
    dtype) go through the same-width signed dtype: to_sparse, to_dense, coalesce, getitem and take keep
    every bit, the largest values included."""
    pytest.importorskip("torch")
    import torch

    from xsparse.backends.array_api.conversion import take_values

    xp = xs.get_backend("torch").namespace()
    assert signed_twin(xp, torch.uint32) is torch.int32 and signed_twin(xp, torch.uint8) is None
    assert signed_twin(xp, torch.float32) is None
    for name, top in (("uint16", 2**16 - 1), ("uint32", 2**32 - 1), ("uint64", 2**64 - 1)):
        dt = getattr(torch, name)
        host = np.asarray([[0, top, 0], [7, 0, top - 5]], dtype=name)
        d = torch.tensor(host.tolist(), dtype=dt)
        s = xs.to_sparse_coo(d)
        assert to_numpy(xs.to_dense(s)).tolist() == host.tolist()
        assert to_numpy(xs.to_dense(s[1, ::-1])).tolist() == host[1, ::-1].tolist()
        assert to_numpy(xs.to_dense(s[torch.tensor([1, 0]), torch.tensor([2, 1])])).tolist() == [top - 5, top]
        assert to_numpy(xs.to_dense(xs.take(s, [2, 2], axis=1))).tolist() == host[:, [2, 2]].tolist()
        assert to_numpy(take_values(xp, d, torch.tensor([1]), axis=0)).tolist() == [host[1].tolist()]
        dup = xs.sparse_coo_array(torch.tensor([[0, 0, 1]]), torch.tensor([top, 2, 3], dtype=dt), (2,))
        assert to_numpy(xs.to_dense(dup.coalesce())).tolist() == [1, 3]  # top + 2 wraps modulo 2**bits
        # the duplicates add up in their own dtype first, as to_dense's: 1 + 3
        assert xs.sum(dup).dtype == torch.uint64 and int(xs.sum(dup)) == 4
    with pytest.raises(NotImplementedError, match="UInt"):
        torch.index_select(torch.zeros(2, dtype=torch.uint32), 0, torch.tensor([0]))  # what the twin works around


# -- errors ------------------------------------------------------------------------------------------------


def test_errors() -> None:
    a = xs.sparse_coo_array([[0, 1], [1, 0]], [1.0, 2.0], (2, 2), dtype="float64")
    i = xs.sparse_coo_array([[0, 1]], [1, 2], (2,), dtype="int64")
    c = xs.sparse_coo_array([[0, 1]], [1j, 2], (2,), dtype="complex128")
    b = xs.sparse_coo_array([[0, 1]], [True, False], (2,), dtype="bool")
    with pytest.raises(TypeError, match=r"sum: expected an xsparse array or a backend array, got list .*asarray first"):
        xs.sum([1, 2])
    with pytest.raises(TypeError, match=r"sum: axis must be an int or a tuple of ints \(axis='0'\)\. Pass integer axes"):
        xs.sum(a, axis="0")
    with pytest.raises(ValueError, match=r"max: axis 2 is out of range for an array of 2 dimensions \(axis=\(0, 2\)\)\. Pass axes in \[-2, 1\]"):
        xs.max(a, axis=(0, 2))
    with pytest.raises(ValueError, match=r"mean: an axis is repeated \(axis=\(1, -1\)\)\. Name each axis once"):
        xs.mean(a, axis=(1, -1))
    with pytest.raises(TypeError, match=r"argmax: axis must be one int \(axis=\(0, 1\)\)\. Pass a single axis"):
        xs.argmax(a, axis=(0, 1))
    with pytest.raises(TypeError, match=r"argmax: axis must be one int \(axis=0\.5\)\. Pass a single axis"):
        xs.argmax(a, axis=0.5)
    with pytest.raises(TypeError, match=r"sum: axis must be an int or a tuple of ints \(axis=True\)\. Pass integer axes"):
        xs.sum(a, axis=True)
    with pytest.raises(TypeError, match=r"sum: the array must have a numeric dtype \(dtype=bool\)\. Count the true elements"):
        xs.sum(b)
    with pytest.raises(TypeError, match=r"prod: the array must have a numeric result dtype \(dtype=bool\)\. Pass an integer"):
        xs.prod(i, dtype="bool")
    with pytest.raises(TypeError, match=r"max: the array must have a real-valued numeric dtype \(dtype=complex128\)\. Compare"):
        xs.max(c)
    with pytest.raises(TypeError, match=r"argmin: the array must have a real-valued numeric dtype \(dtype=bool\)"):
        xs.argmin(b)
    with pytest.raises(TypeError, match=r"mean: the array must have a floating-point dtype \(dtype=int64\)\. Build the array"):
        xs.mean(i)
    with pytest.raises(TypeError, match=r"var: the array must have a real floating-point dtype \(dtype=complex128\)"):
        xs.var(c)
    with pytest.raises(ValueError, match=r"std: correction must be a non-negative number \(correction=-1\)\. Pass 0"):
        xs.std(a, correction=-1)
    with pytest.raises(ValueError, match=r"max: the reduction is over zero elements \(shape=\(2, 0\), axis=1\).*non-zero size"):
        xs.max(xs.to_sparse_coo(np.ones((2, 0))), axis=1)
    with pytest.raises(ValueError, match=r"argmax: the reduction is over zero elements \(shape=\(0,\), axis=None\)"):
        xs.argmax(np.ones((0,)))
    with pytest.raises(ValueError, match=r"cumulative_sum: a 0-d array has no axis to accumulate along \(shape=\(\)\)\. Reshape"):
        xs.cumulative_sum(np.asarray(1))
    with pytest.raises(ValueError, match=r"cumulative_sum: axis is required for an array of more than one dimension \(shape=\(2, 2\), axis=None\)\. Pass axis="):
        xs.cumulative_sum(a)
    with pytest.raises(ValueError, match=r"cumulative_prod: a 0-d array has no axis to accumulate along \(shape=\(\)\)\. Reshape"):
        xs.cumulative_prod(np.asarray(1))
    with pytest.raises(ValueError, match=r"cumulative_prod: axis is required for an array of more than one dimension \(shape=\(2, 2\), axis=None\)\. Pass axis="):
        xs.cumulative_prod(a)
    with pytest.raises(TypeError, match=r"cumulative_prod: the array must have a numeric dtype \(dtype=bool\)"):
        xs.cumulative_prod(np.asarray([True, False]))
    with pytest.raises(TypeError, match=r"softmax: the array must have a real floating-point dtype \(dtype=int64\)\. Pass dtype='float64'"):
        xs.softmax(i, axis=0)
    with pytest.raises(TypeError, match=r"log_softmax: the array must have a real floating-point result dtype \(dtype=int64\)\. Pass dtype="):
        xs.log_softmax(a, axis=0, dtype="int64")
    with pytest.raises(TypeError, match=r"softmax: the array must have a real-valued numeric dtype \(dtype=complex128\)\. Take the softmax"):
        xs.softmax(c, axis=0, dtype="float64")
    filled = xs.sparse_coo_array([[0]], [1.0], (2,), dtype="float64", fill_value=1.5)
    with pytest.raises(ValueError, match=r"softmax: the unspecified elements are read as -inf .* \(fill_value=1\.5\)\. Densify it with xsparse\.to_dense"):
        xs.softmax(filled, axis=0)


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr])
def test_torch_full_mean_of_16_bit_floats_does_not_overflow(layout: xs.Layout) -> None:
    torch = pytest.importorskip("torch")
    for dtype in (torch.float16, torch.bfloat16):
        # 2000 values of 100 sum past float16's largest (65504); their mean is 100, as dense torch says
        dense = torch.full((40, 50), 100.0, dtype=dtype)
        for fill in (0.0, 1.0):
            a = xs.to_sparse(dense, layout=layout, fill_value=fill) if fill else xs.to_sparse(dense, layout=layout)
            r = xs.mean(a)
            assert r.dtype == dtype and float(r) == float(torch.mean(dense)) == 100.0
        # the fill value's share overflows a 16-bit sum too: 1 of 200000 elements stored
        c = xs.sparse_coo_array(torch.tensor([[0], [0]]), torch.tensor([2.0], dtype=dtype), (400, 500), fill_value=1.0)
        assert float(xs.mean(to_layout_torch(c, layout))) == float(torch.mean(c.to_dense()))


def to_layout_torch(a: Any, layout: xs.Layout) -> Any:
    return a if layout is xs.sparse_coo else xs.to_sparse(a, layout=layout)


@pytest.mark.parametrize("dtype", ["int8", "int16", "float32"])
def test_numpy_parallel_sum_stays_in_its_dtype(dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sum large enough to be split between CPUs adds its pieces in the values' own dtype (wrapping as
    NumPy does for integers), whatever the machine's load at the time."""
    from xsparse.backends.numpy import reduction

    monkeypatch.setattr(reduction, "_cpus", lambda: 2)
    rng = np.random.default_rng(0)
    data = rng.integers(0, 100, reduction._PARALLEL_SUM_MIN + 5).astype(dtype)
    total = reduction._reduce_all(np.add, data)
    assert total.dtype == np.dtype(dtype) and total.shape == (1,)
    np.testing.assert_allclose(total[0], np.add.reduce(data, dtype=dtype), rtol=1e-5 if dtype == "float32" else 0)


def test_complex_sums_with_a_non_finite_fill_value(xp: Any) -> None:
    """n copies of a complex fill value add up part by part, as the dense sum adds them: a complex product by
    the count would make (inf - 1.5j) * 4 into inf + nanj. torch's complex + does the same, its sum does not.
    The mean too (torch's kernel over every axis added the fill values' share with complex +)."""
    inf = complex(math.inf, -1.5)
    host = np.asarray([[1 + 1j, inf], [inf, inf], [inf, inf]])
    for layout in (xs.sparse_coo, xs.sparse_csr):
        a = xs.to_sparse(xp.asarray(host), layout=layout, fill_value=inf)
        assert a.nnz == 1
        for op, dense_op in ((xs.sum, np.sum), (xs.mean, np.mean)):
            for axis in (None, 0, 1):
                # inf / 3 has a NaN part, which array_api_strict warns about as NumPy does
                with np.errstate(invalid="ignore"):
                    got, want = op(a, axis=axis), dense_op(host, axis=axis)
                got = to_numpy(xs.to_dense(got) if isinstance(got, xs.SparseArray) else got)
                # part by part: assert_array_equal takes a complex number with a NaN part for any other
                np.testing.assert_array_equal(got.real, want.real)
                np.testing.assert_array_equal(got.imag, want.imag)


def test_half_precision_reductions_accumulate_in_float32() -> None:
    # NumPy and torch add half precision in float32: two 60000s make 120000 before the mean halves them,
    # where a float16 sum is inf; and a float16 product of 300s and a zero is 0, not inf * 0
    torch = pytest.importorskip("torch")
    for dtype in (torch.float16, torch.bfloat16):
        d = torch.tensor([[60000.0, 60000.0, 0.0, 0.0]], dtype=dtype)
        for layout in (xs.sparse_coo, xs.sparse_csr):
            s = xs.to_sparse(d, layout=layout)
            for got, want in [
                (xs.mean(s, axis=1), torch.mean(d, dim=1)),
                (xs.mean(s), torch.mean(d)),
                (xs.var(s, axis=1), torch.var(d, dim=1, correction=0)),
                (xs.sum(s, axis=1), torch.sum(d, dim=1)),
            ]:
                got = xs.to_dense(got) if isinstance(got, xs.SparseArray) else got
                assert got.dtype == dtype
                torch.testing.assert_close(got, want)
    x = np.zeros(8, np.float16)
    x[:3] = 300
    assert float(xs.prod(xs.to_sparse_coo(x))) == float(np.prod(x)) == 0.0
    # duplicates still add in the array's own dtype first, as to_dense adds them
    u = xs.sparse_coo_array(torch.tensor([[0, 0], [0, 0]]), torch.tensor([6e4, 6e4], dtype=torch.float16), (1, 2))
    assert math.isinf(float(xs.mean(u))) and math.isinf(float(xs.to_dense(u)[0, 0]))


@pytest.fixture
def any_namespace(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The namespace of the backend named by the test's ``backend`` parameter, jax.numpy included (in its
    64-bit mode); the generic backend JAX makes leaves the registry with the test (as in test_jax_backend)."""
    import xsparse.backends

    backend = request.node.callspec.params["backend"]
    if importlib.util.find_spec(backend.split(".")[0]) is None:
        pytest.skip(f"{backend} is not installed")
    if backend == "jax.numpy":
        import jax

        jax.config.update("jax_enable_x64", True)
    saved = dict(xsparse.backends._EXTRA)
    yield xs.get_backend(backend).namespace()
    xsparse.backends._EXTRA.clear()
    xsparse.backends._EXTRA.update(saved)


PROD_LAYOUTS = {
    "coo": xs.to_sparse_coo,
    "uncoalesced coo": lambda x: xs.sparse_coo_array(
        xs.concat([xs.to_sparse_coo(x).indices()] * 2, axis=1), xs.concat([xs.to_sparse_coo(x).values() * 0.5] * 2), tuple(x.shape)
    ),
    "hybrid coo": lambda x: xs.to_sparse_coo(x, sparse_dim=1),
    "csr": xs.to_sparse_csr,
    "csc": xs.to_sparse_csc,
    "bsr": lambda x: xs.to_sparse_bsr(x, blocksize=(1, 2)),
    "bsc": lambda x: xs.to_sparse_bsc(x, blocksize=(1, 2)),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # array_api_strict warns where NumPy does (docs/decisions.md)
@pytest.mark.parametrize("layout", PROD_LAYOUTS)
@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict", "jax.numpy"])
def test_prod_of_overflowing_values_and_an_unspecified_zero_is_exact(backend: str, layout: str, any_namespace: Any) -> None:
    # the stored values' product overflowed to inf, and inf * 0 ** k was NaN; the exact product is ±0, and
    # NaN only where a stored value is NaN or infinite (0 * inf)
    host = np.array(
        [[0.0] + [100.0] * 19, [-100.0] * 20, [-1e20] * 5 + [0.0] * 15, [1.0] * 20, [0.0, np.inf] + [1e30] * 18, [np.nan, 0.0] + [2.0] * 18],
        dtype=np.float32,
    )
    exact = np.array([0.0, np.inf, -0.0, 1.0, np.nan, np.nan], dtype=np.float32)
    xp = any_namespace
    a = PROD_LAYOUTS[layout](xp.asarray(host))
    row = xs.prod(a, axis=1)
    got = to_numpy(xs.to_dense(row) if isinstance(row, xs.SparseArray) else row)
    np.testing.assert_array_equal(got, exact)
    zero = exact == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(exact[zero]))
    assert math.isnan(float(to_numpy(xs.prod(a))))
    finite = PROD_LAYOUTS[layout](xp.asarray(host[:4]))
    total = to_numpy(xs.prod(finite))
    assert total == 0.0 and np.signbit(total)  # the signs: 20 of -100 and 5 of -1e20, so -0.0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # array_api_strict warns where NumPy does (docs/decisions.md)
@pytest.mark.parametrize("layout", PROD_LAYOUTS)
@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_prod_overflowing_to_nan_without_a_zero_stays_nan(backend: str, layout: str, any_namespace: Any) -> None:
    # a complex product of stored non-zero values that overflows gives NaN parts, as the dense product
    # does; the exact-zero repair is for groups holding a zero only (it gave 0j for the first row)
    row = [1.3294e4j, 1.3298e4j, 8.7757971e18j, 2.1933646e11j, 8.776e3j, 2.0, -1j, 3j]
    host = np.array([row, [*row[:4], 0.0, *row[5:]]], dtype=np.complex64)
    xp = any_namespace
    a = PROD_LAYOUTS[layout](xp.asarray(host))
    got = xs.prod(a, axis=1)
    got = to_numpy(xs.to_dense(got) if isinstance(got, xs.SparseArray) else got)
    want = to_numpy(xp.prod(xp.asarray(host), axis=1))
    # which part is NaN and which infinite depends on the order of the products (blocks reorder them)
    assert np.isnan(want[0].real) or np.isnan(want[0].imag)
    assert not np.isfinite(got[0])
    assert got[1] == 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # array_api_strict warns where NumPy does (docs/decisions.md)
@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_prod_with_a_zero_and_an_overflowing_fill_power_is_exact(backend: str, layout: str, any_namespace: Any) -> None:
    # the fill value's power f ** k overflowed to inf and met a stored zero: NaN, where the dense product is ±0
    m = float(np.finfo(np.float32).max)
    host = np.array([[m, 0.0, m, m], [m, -0.0, -m, m], [m, np.inf, 0.0, m], [m, 2.0, 2.0, m]], dtype=np.float32)
    xp = any_namespace
    f = {"coo": xs.to_sparse_coo, "csr": xs.to_sparse_csr, "csc": xs.to_sparse_csc}[layout](xp.asarray(host), fill_value=m)
    assert f.fill_value == m and f.nnz < host.size
    got = to_numpy(xs.prod(f, axis=1, layout=xs.strided))
    want = np.prod(host, axis=1)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[:2]), np.signbit(want[:2]))


def test_prod_overflow_on_numpy_warns_nothing() -> None:
    host = np.array([[0.0] + [100.0] * 19, [-1e20] * 5 + [0.0] * 15], dtype=np.float32)
    for layout in PROD_LAYOUTS.values():
        a = layout(host)
        np.testing.assert_array_equal(to_numpy(xs.to_dense(xs.prod(a, axis=1))), [0.0, -0.0])  # filterwarnings = error


# each library's cast warns that it drops the imaginary part, as it does for its dense arrays
@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning", "ignore:Casting complex values:UserWarning")
@pytest.mark.filterwarnings("ignore:Casting from complex to real:DeprecationWarning")
@pytest.mark.parametrize("backend", ["numpy", "torch", "jax.numpy"])
def test_cumulative_prod_of_complex_hybrid_coo_to_a_real_dtype_casts(backend: str, any_namespace: Any) -> None:
    # the fill value (complex 0) was cast with asarray(..., dtype=float64), which Python refuses
    xp = any_namespace
    host = np.array([[1 + 1j, 0], [2, 3j]], dtype=np.complex64)
    x = xp.asarray(host)
    for dtype in ("float64", "int16"):
        want = np.cumulative_prod(host, axis=1, dtype=dtype)  # NumPy's cast: the real part
        for a in (xs.to_sparse_coo(x, sparse_dim=1), xs.to_sparse_coo(x)):
            got = xs.cumulative_prod(a, axis=1, dtype=dtype)
            np.testing.assert_array_equal(to_numpy(xs.to_dense(got) if isinstance(got, xs.SparseArray) else got), want)


def test_complex_reduction_to_a_real_dtype_on_array_api_strict_names_the_function() -> None:
    xp = pytest.importorskip("array_api_strict")
    a = xs.to_sparse_coo(xp.asarray([[1 + 1j, 0], [2, 3j]], dtype=xp.complex64), sparse_dim=1)
    for name, f in [("sum", lambda: xs.sum(a, dtype=xp.float64)), ("cumulative_prod", lambda: xs.cumulative_prod(a, axis=1, dtype=xp.float64))]:
        with pytest.raises(TypeError, match=rf"^{name}: this backend casts no complex values to a real dtype \(x.dtype=complex64, dtype=float64\)\. Take xsparse.real"):
            f()


def test_std_of_a_torch_tensor_with_a_fractional_correction() -> None:
    # array-api-compat's torch std refuses a correction that is not whole (its var takes one)
    torch = pytest.importorskip("torch")
    x = torch.tensor([[1.0, 2.0, 4.0], [0.5, 0.5, 3.0]], dtype=torch.float64)
    for axis in (None, 1):
        got = xs.std(x, axis=axis, correction=0.5)
        np.testing.assert_allclose(got.numpy(), np.std(x.numpy(), axis=axis, ddof=0.5), rtol=1e-15)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's mean of nothing warns
@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_mean_of_no_complex_elements_is_nan_in_both_parts(backend: str, layout: str, any_namespace: Any) -> None:
    # the dense mean of nothing is 0j / 0, nan + nanj; the sparse one was nan + 0j
    xp = any_namespace
    host = np.zeros((0, 3), dtype=np.complex128)
    a = PROD_LAYOUTS[layout](xp.asarray(host))
    for axis, out_layout in [(None, None), (0, None), (0, xs.strided), ((0, 1), None)]:
        got = xs.mean(a, axis=axis, layout=out_layout)
        got = to_numpy(xs.to_dense(got) if isinstance(got, xs.SparseArray) else got)
        want = np.asarray(np.mean(host, axis=axis))
        assert got.shape == want.shape
        assert np.isnan(got.real).all() and np.isnan(got.imag).all() and np.isnan(want.imag).all()


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's var of too few elements warns
@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_var_of_strided_arrays_with_too_few_elements_is_nan_as_for_sparse_ones(backend: str, any_namespace: Any) -> None:
    # the standard: NaN where N - correction <= 0; NumPy and torch divided by 0 (inf), the sparse path gave NaN
    xp = any_namespace
    host = np.array([[1.0, 2.0], [3.0, 5.0]])
    x = xp.asarray(host)
    for op in (xs.var, xs.std):
        for axis, correction, keepdims in [(0, 2, False), (0, 3.5, True), ((0, 1), 4, False), (1, 2.0, False)]:
            got = to_numpy(op(x, axis=axis, correction=correction, keepdims=keepdims))
            sparse = op(xs.to_sparse_coo(x), axis=axis, correction=correction, keepdims=keepdims, layout=xs.strided)
            want = np.full(np.var(host, axis=axis, keepdims=keepdims).shape, np.nan)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(to_numpy(sparse), want)
        # one element fewer than the correction asks is still a number
        np.testing.assert_allclose(to_numpy(op(x, axis=0, correction=1)), np.asarray(getattr(np, op.__name__)(host, axis=0, ddof=1)))


@pytest.mark.parametrize("layout", ["coo", "csr", "csc"])
@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_var_and_std_of_sparse_float32_compute_in_float64(backend: str, layout: str, any_namespace: Any) -> None:
    # float32 sums and squares overflowed (a column of copies of 2.5e38 had the mean inf, hence the
    # variance inf) and underflowed (the std of 1e-30 was 0), where torch's own var accumulates in float64
    big = float(np.finfo(np.float32).max) * 0.75
    host = np.array([[big, 0.0, 1e-30], [big, 4.8, 0.0], [big, -3.4e38, 0.0]], dtype=np.float32)
    xp = any_namespace
    a = PROD_LAYOUTS[layout](xp.asarray(host))
    exact = host.astype(np.float64)
    for op, ref in ((xs.var, np.var), (xs.std, np.std)):
        for axis in (0, 1, None):
            with warnings.catch_warnings():
                if backend == "array_api_strict":  # its NumPy warns of the cast to inf (docs/decisions.md)
                    warnings.simplefilter("ignore", RuntimeWarning)
                got = op(a, axis=axis, layout=xs.strided)  # on NumPy silently (filterwarnings = error)
            with np.errstate(over="ignore"):
                want = ref(exact, axis=axis).astype(np.float32)
            assert got.dtype == xp.float32
            np.testing.assert_allclose(to_numpy(got), want, rtol=1e-6)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_prod_with_a_nan_keeps_a_sparse_result_sparse() -> None:
    # the exact-zero repair built its mask strided, the size of the dense result (800 MB here)
    idx = np.array([[0, 5], [0, 7], [0, 1]])
    a = xs.sparse_coo_array(idx, np.array([np.nan, 2.0]), (20000, 20000, 2))
    r = xs.prod(a, axis=2)
    assert isinstance(r, xs.SparseArray) and r.nnz == 2
    got = {tuple(i): v for i, v in zip(np.asarray(r.indices()).T.tolist(), np.asarray(r.values()).tolist())}
    assert math.isnan(got[(0, 0)]) and got[(5, 7)] == 0.0  # the fill value's 0 times 2, and NaN times 0
    b = xs.sparse_coo_array(np.array([[0], [0], [0]]), np.array([np.nan]), (3, 2, 2))
    np.testing.assert_array_equal(to_numpy(xs.to_dense(xs.prod(b, axis=2))), np.prod(to_numpy(xs.to_dense(b)), axis=2))


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "var", "std"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_a_layout_without_reduction_kernels_is_named_by_the_reduction(name: str, dtype: str) -> None:
    # a half-precision (or, for var and std, float32) array is widened before it is reduced; on the 2:4
    # layout, which has no reduction kernel, the error named the cast ("astype: no kernel ...")
    a = xs.to_sparse_semi_structured(np.zeros((64, 64), dtype=dtype))
    with pytest.raises(xs.NoKernelError, match=rf"^{name}: no kernel for layouts \(sparse_semi_structured\) on backend 'numpy'\. Registered: "):
        getattr(xs, name)(a)


def test_numpy_integer_axes() -> None:
    # a NumPy integer (an index taken from a shape or an argmax) is an axis, as in NumPy's own reductions
    # and in the shape functions
    a = xs.sparse_coo_array([[0, 1, 1], [1, 0, 2]], [1.0, 2.0, 3.0], (2, 3), dtype="float64")
    dense = np.asarray(xs.to_dense(a))
    assert np.asarray(xs.to_dense(xs.sum(a, axis=np.int64(1)))).tolist() == dense.sum(axis=1).tolist()
    assert np.asarray(xs.to_dense(xs.max(a, axis=(np.int32(0), np.int64(-1))))).tolist() == dense.max()
    assert int(xs.argmax(a, axis=np.int64(0))[2]) == int(np.argmax(dense, axis=0)[2])

