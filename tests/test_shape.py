"""Shape manipulation and joining: every registered kernel against the dense computation of the same
backend, the public functions in every layout (rewrites through COO warn and return COO), the native
kernels against the generic ones, views, coalescedness, fill values, joins of mixed layouts, and every
error message.

The oracle is :func:`xsparse.testing.assert_sparse_equal` (every invariant of the result, then the
elements against the dense result of the backend's own function). Inputs come from
``tests/strategies.py``: batch and dense dimensions, fill values 0 and not, int32 and int64 indices,
nnz = 0, and uncoalesced COO with duplicates.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from conftest import backend_skip_reason, load_native_kernels
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from test_conversions import assert_same_components

import strategies as S
import xsparse as xs
from xsparse import dispatch
from xsparse._common import dtype_name
from xsparse.testing import assert_sparse_equal, check_invariants, to_numpy

SPARSE_LAYOUTS = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
COMPRESSED_LAYOUTS = SPARSE_LAYOUTS[1:]
TESTED_BACKENDS = ["numpy", "torch", "array_api_strict"]
OPS = ["permute_dims", "reshape", "expand_dims", "squeeze", "broadcast_to", "flip", "concat", "roll", "repeat", "tile", "take_along_axis"]

FEW = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SOME = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

load_native_kernels()


# -- inputs ----------------------------------------------------------------------------------------


def _fill_kw(fill: Any) -> dict[str, Any]:
    return {} if fill == 0 and fill == fill else {"fill_value": fill}


def draw_array(data: st.DataObject, xp: Any, layout: xs.Layout) -> tuple[Any, Any]:
    """``(x, dense)``: an array in ``layout`` (COO of any rank and split, sometimes uncoalesced) and the
    backend's dense array with the same elements."""
    if layout is xs.strided or (layout is xs.sparse_coo and data.draw(st.booleans(), label="any_rank")):
        coo_case = data.draw(S.coo_dense_cases(xp, fill=None), label="coo_case")
        if layout is xs.strided:
            return coo_case.array, coo_case.array
        x = xs.to_sparse_coo(coo_case.array, coo_case.sparse_dim, index_dtype=coo_case.index_dtype, **_fill_kw(coo_case.fill_value))
        dense = coo_case.array
    else:
        case = data.draw(S.dense_cases(xp, fill=None), label="case")
        x, dense = case.sparse(layout), case.array
    if layout is xs.sparse_coo and data.draw(st.booleans(), label="uncoalesced"):
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
        x = S.uncoalesced_like(xp, rng, x, dtype_name(x.index_dtype))
    return x, dense


def _groups(x: Any) -> tuple[int, int]:
    """(number of leading dimensions a compressed layout treats as batch, index after its sparse ones)."""
    if isinstance(x, xs.CompressedArray):
        return x.batch_dim(), x.batch_dim() + 2
    return 0, 0


def _regroup(data: st.DataObject, dims: list[int], label: str) -> list[int]:
    """A shape of the same size as ``dims``: adjacent sizes merged, sizes split into factors, 1s added or dropped."""
    dims = list(dims)
    for _ in range(data.draw(st.integers(0, 3), label=f"{label}_steps")):
        kind = data.draw(st.sampled_from(["merge", "split", "one", "drop"]), label=f"{label}_kind")
        if kind == "merge" and len(dims) >= 2:
            i = data.draw(st.integers(0, len(dims) - 2), label=f"{label}_at")
            dims[i : i + 2] = [dims[i] * dims[i + 1]]
        elif kind == "split" and dims:
            i = data.draw(st.integers(0, len(dims) - 1), label=f"{label}_at")
            factors = [f for f in range(2, dims[i]) if dims[i] % f == 0]
            if factors:
                f = data.draw(st.sampled_from(factors), label=f"{label}_factor")
                dims[i : i + 1] = [f, dims[i] // f]
        elif kind == "one":
            dims.insert(data.draw(st.integers(0, len(dims)), label=f"{label}_at"), 1)
        elif kind == "drop" and 1 in dims:
            dims.remove(1)
    return dims


def _axes_subset(data: st.DataObject, candidates: list[int], label: str) -> tuple[int, ...]:
    return tuple(sorted(data.draw(st.sets(st.sampled_from(candidates)) if candidates else st.just(set()), label=label)))


@dataclass(frozen=True)
class Op:
    """How to draw one operation's arguments for an input, and its dense reference."""

    args: Callable[[st.DataObject, Any, Any], tuple[Any, ...]]
    dense: Callable[..., Any]


def _permute_args(data: st.DataObject, xp: Any, x: Any) -> tuple[Any, ...]:
    b, s = _groups(x)
    if s and data.draw(st.booleans(), label="keep_groups"):
        # a permutation a compressed layout holds: within batch, the sparse pair, within dense
        batch = data.draw(st.permutations(range(b)), label="batch")
        sparse = data.draw(st.permutations(range(b, s)), label="sparse")
        dense = data.draw(st.permutations(range(s, x.ndim)), label="dense")
        return ((*batch, *sparse, *dense),)
    return (tuple(data.draw(st.permutations(range(x.ndim)), label="axes")),)


def _reshape_args(data: st.DataObject, xp: Any, x: Any) -> tuple[Any, ...]:
    b, s = _groups(x)
    shape = list(x.shape)
    if s and data.draw(st.booleans(), label="in_place"):
        new = [*_regroup(data, shape[:b], "batch"), *shape[b:s], *_regroup(data, shape[s:], "dense")]
    else:
        new = _regroup(data, shape, "all")
    return (tuple(new), None)


def _expand_args(data: st.DataObject, xp: Any, x: Any) -> tuple[Any, ...]:
    return (data.draw(st.integers(0, x.ndim), label="axis"),)


def _squeeze_args(data: st.DataObject, xp: Any, x: Any) -> tuple[Any, ...]:
    b, s = _groups(x)
    ones = [d for d, n in enumerate(x.shape) if n == 1]
    if s and data.draw(st.booleans(), label="keep_sparse"):
        ones = [d for d in ones if not b <= d < s]
    return (_axes_subset(data, ones, "axes"),)


def _broadcast_args(data: st.DataObject, xp: Any, x: Any) -> tuple[Any, ...]:
    lead = data.draw(st.lists(st.integers(0, 3), max_size=2), label="lead")
    grown = [data.draw(st.integers(0, 3), label="size") if n == 1 else n for n in x.shape]
    return (tuple(lead + grown),)


def _flip_args(data: st.DataObject, xp: Any, x: Any) -> tuple[Any, ...]:
    return (_axes_subset(data, list(range(x.ndim)), "axes"),)


def _roll_args(data: st.DataObject, xp: Any, x: Any) -> tuple[Any, ...]:
    """``(shifts, axes)`` as the public layer hands them over: shifts in [1, size), sorted axes; or one
    shift of the flattened array (``axes=None``)."""
    if data.draw(st.booleans(), label="flat"):
        size = math.prod(x.shape)
        return ((data.draw(st.integers(0, max(size - 1, 0)), label="shift"),), None)
    axes = [d for d in _axes_subset(data, list(range(x.ndim)), "axes") if x.shape[d] > 1]
    return (tuple(data.draw(st.integers(1, x.shape[d] - 1), label=f"shift{d}") for d in axes), tuple(axes))


def _roll_dense(xp: Any, d: Any, shift: tuple[int, ...], axes: tuple[int, ...] | None) -> Any:
    if axes is None:
        return xp.roll(d, shift=shift[0])
    return xp.roll(d, shift=shift, axis=axes) if axes else d


def _repeat_args(data: st.DataObject, xp: Any, x: Any) -> tuple[Any, ...]:
    axis = data.draw(st.none() | st.integers(0, x.ndim - 1), label="axis") if x.ndim else None
    n = math.prod(x.shape) if axis is None else x.shape[axis]
    if data.draw(st.booleans(), label="int"):
        return (data.draw(st.integers(0, 3), label="repeats"), axis)
    counts = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n), label="counts")
    return (xp.asarray(counts, dtype=xp.int64), axis)


def _tile_args(data: st.DataObject, xp: Any, x: Any) -> tuple[Any, ...]:
    return (tuple(data.draw(st.lists(st.sampled_from([1, 1, 2, 3, 0]), min_size=x.ndim, max_size=x.ndim), label="reps")),)


def _take_along_args(data: st.DataObject, xp: Any, x: Any) -> tuple[Any, ...]:
    assume(x.ndim > 0)
    axis = data.draw(st.integers(0, x.ndim - 1), label="axis")
    n = x.shape[axis]
    shape = [
        (data.draw(st.integers(0, 3), label="k") if n else 0) if d == axis else data.draw(st.sampled_from([s, 1]), label=f"size{d}")
        for d, s in enumerate(x.shape)
    ]  # fmt: skip
    size = math.prod(shape)
    values = data.draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=size, max_size=size), label="indices")
    return (xp.reshape(xp.asarray(values, dtype=xp.int64), tuple(shape)), axis)


OP_SPECS = {
    "roll": Op(_roll_args, _roll_dense),
    "repeat": Op(_repeat_args, lambda xp, d, repeats, axis: xp.repeat(d, repeats, axis=axis)),
    "tile": Op(_tile_args, lambda xp, d, reps: xp.tile(d, reps)),
    "take_along_axis": Op(_take_along_args, lambda xp, d, indices, axis: xp.take_along_axis(d, indices, axis=axis)),
    "permute_dims": Op(_permute_args, lambda xp, d, axes: xp.permute_dims(d, axes)),
    "reshape": Op(_reshape_args, lambda xp, d, shape, copy: xp.reshape(d, shape)),
    "expand_dims": Op(_expand_args, lambda xp, d, axis: xp.expand_dims(d, axis=axis)),
    "squeeze": Op(_squeeze_args, lambda xp, d, axes: xp.squeeze(d, axis=axes) if axes else d),
    "broadcast_to": Op(_broadcast_args, lambda xp, d, shape: xp.broadcast_to(d, shape)),
    "flip": Op(_flip_args, lambda xp, d, axes: xp.flip(d, axis=axes) if axes else d),
}


def draw_join(data: st.DataObject, xp: Any, layout: xs.Layout, *, plain_axis: bool = False) -> tuple[list[Any], list[Any], int]:
    """``(operands, dense operands, axis)`` for concat, all in ``layout``, one dtype and fill value.

    Unbatched operands are slices of one array (at block boundaries along the sparse dimensions);
    batched compressed ones are the array and flips of it, which hold as many elements in every batch.
    """
    if layout is xs.sparse_coo and data.draw(st.booleans(), label="any_rank"):
        coo_case = data.draw(S.coo_dense_cases(xp, fill=None), label="coo_case")
        assume(coo_case.host.ndim >= 1)
        dense, blocks, batched = coo_case.array, (1,) * coo_case.host.ndim, False

        def convert(d: Any) -> Any:
            kw = _fill_kw(coo_case.fill_value)
            return xs.to_sparse_coo(d, coo_case.sparse_dim, index_dtype=coo_case.index_dtype, **kw)
    else:
        case = data.draw(S.dense_cases(xp, fill=None), label="case")
        dense, batched = case.array, case.batch_dim > 0 and layout is not xs.sparse_coo
        blocks = (1,) * case.batch_dim + (case.blocksize if layout.is_blocked else (1, 1)) + (1,) * case.dense_dim

        def convert(d: Any) -> Any:
            return d if layout is xs.strided else xs.to_sparse(d, **case.kwargs(layout))
    ndim = dense.ndim
    if plain_axis:
        axis = ndim - case.dense_dim - 1 - layout.compressed_dim
    else:
        axis = data.draw(st.integers(0, ndim - 1), label="axis")
    if batched or data.draw(st.booleans(), label="flips"):
        # joined along a dense dimension, batched operands need one sparsity structure: flip dense axes only
        dense_join = batched and axis >= ndim - case.dense_dim
        flippable = list(range(ndim - case.dense_dim, ndim)) if dense_join else list(range(ndim))
        flips = [_axes_subset(data, flippable, f"flip{i}") for i in range(data.draw(st.integers(0, 2), label="n"))]
        parts = [dense, *(xp.flip(dense, axis=f) if f else dense for f in flips)]
    else:
        step = blocks[axis]
        n = dense.shape[axis] // step
        cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3), label="cuts"))
        edges = [0, *(c * step for c in cuts), dense.shape[axis]]
        index = [slice(None)] * ndim
        parts = []
        for lo, hi in zip(edges[:-1], edges[1:]):
            index[axis] = slice(lo, hi)
            parts.append(dense[tuple(index)])
    return [convert(p) for p in parts], parts, axis


def draw_call(data: st.DataObject, xp: Any, op: str, layout: xs.Layout) -> tuple[tuple[Any, ...], Any, Any]:
    """``(kernel arguments, dense expected result, the sparse input or first operand)``."""
    if op == "concat":
        operands, parts, axis = draw_join(data, xp, layout)
        return (operands, axis), xp.concat(parts, axis=axis), operands[0]
    x, dense = draw_array(data, xp, layout)
    spec = OP_SPECS[op]
    args = spec.args(data, xp, x)
    return (x, *args), spec.dense(xp, dense, *args), x


def _same_fill(a: Any, b: Any) -> bool:
    return bool(a == b) or (a != a and b != b)


# -- 1. every registered kernel against the dense computation --------------------------------------


def _kernel_params() -> list[Any]:
    params = []
    for op in OPS:
        for kernel in xs.kernels(op):
            backends = [kernel.backend] if kernel.backend is not None else TESTED_BACKENDS
            for name in backends:
                reason = backend_skip_reason(name)
                marks = [pytest.mark.skip(reason=reason)] if reason else []
                params.append(pytest.param(kernel, name, id=f"{kernel.name}-{name}", marks=marks))
    return params


def _members(element: Any) -> list[xs.Layout]:
    members = element if isinstance(element, frozenset) else frozenset((element,))
    return sorted(members, key=str)


def _generic_twin(kernel: dispatch.Kernel) -> dispatch.Kernel:
    return next(k for k in xs.kernels(kernel.op) if k.backend is None and not k.rewrite and k.signature == kernel.signature)


def test_every_operation_has_kernels() -> None:
    for op in OPS:
        kinds = {(k.kind, str(k.signature[0])) for k in xs.kernels(op)}
        assert {("generic", "strided"), ("generic", "sparse_coo"), ("generic", "COMPRESSED")} <= kinds, op
    assert not [pair for pair in dispatch.ambiguities() if pair[0].op in OPS]


@pytest.mark.parametrize(("kernel", "backend_name"), _kernel_params())
@FEW
@given(data=st.data())
def test_kernel_against_dense(kernel: dispatch.Kernel, backend_name: str, data: st.DataObject) -> None:
    """Each kernel, called directly, equals the backend's dense function, with every invariant; a native
    kernel also equals the generic one component for component."""
    xp = xs.get_backend(backend_name).namespace()
    layout = data.draw(st.sampled_from(_members(kernel.signature[0])), label="layout")
    args, expected, x = draw_call(data, xp, kernel.op, layout)
    if kernel.supports is not None:
        reason = kernel.supports(xp, *args)
        if reason is not None:
            assert isinstance(reason, str) and reason
            return
    result = kernel.func(xp, *args)
    assert_sparse_equal(result, expected)
    if isinstance(x, xs.SparseArray):
        assert isinstance(result, xs.SparseArray) and _same_fill(result.fill_value, x.fill_value)
        assert result.layout in (layout, layout.transposed, xs.sparse_coo)
    if kernel.kind == "native":
        twin = _generic_twin(kernel).func(xp, *args)
        assert result.layout is twin.layout and dtype_name(result.index_dtype) == dtype_name(twin.index_dtype)
        for name, component in twin._components().items():
            np.testing.assert_array_equal(to_numpy(result._components()[name]), to_numpy(component), err_msg=name)


@pytest.mark.parametrize("kernel", [k for k in xs.kernels("concat") if k.kind == "native" and k.signature == (xs.sparse_coo,)], ids=lambda k: k.name)
@SOME
@given(data=st.data())
def test_native_concat_coo_along_a_sparse_dimension(kernel: dispatch.Kernel, data: st.DataObject) -> None:
    """The native join of COO arrays (indices offset in place) equals the generic kernel, component for
    component, and the dense concatenation; along a dense dimension it declines."""
    if backend_skip_reason(str(kernel.backend)):
        pytest.skip(str(backend_skip_reason(str(kernel.backend))))
    xp = xs.get_backend(str(kernel.backend)).namespace()
    operands, parts, axis = draw_join(data, xp, xs.sparse_coo)
    reason = kernel.supports(xp, operands, axis) if kernel.supports is not None else None
    if axis >= operands[0].sparse_dim():
        assert reason is not None and "dense dimension" in reason
        return
    assert reason is None, reason
    result = kernel.func(xp, operands, axis)
    assert_sparse_equal(result, xp.concat(parts, axis=axis))
    twin = _generic_twin(kernel).func(xp, operands, axis)
    assert result.is_coalesced() is twin.is_coalesced() and dtype_name(result.index_dtype) == dtype_name(twin.index_dtype)
    for name, component in twin._components().items():
        np.testing.assert_array_equal(to_numpy(result._components()[name]), to_numpy(component), err_msg=name)


@pytest.mark.parametrize("kernel", [k for k in xs.kernels("concat") if k.kind == "native" and k.signature != (xs.sparse_coo,)], ids=lambda k: k.name)
@SOME
@given(data=st.data())
def test_native_concat_along_the_plain_dimension(kernel: dispatch.Kernel, data: st.DataObject) -> None:
    """The native merge of compressed slices equals the generic kernel, component for component."""
    if backend_skip_reason(str(kernel.backend)):
        pytest.skip(str(backend_skip_reason(str(kernel.backend))))
    xp = xs.get_backend(str(kernel.backend)).namespace()
    layout = data.draw(st.sampled_from(COMPRESSED_LAYOUTS), label="layout")
    operands, parts, axis = draw_join(data, xp, layout, plain_axis=True)
    assert kernel.supports is None or kernel.supports(xp, operands, axis) is None
    result = kernel.func(xp, operands, axis)
    assert_sparse_equal(result, xp.concat(parts, axis=axis))
    twin = _generic_twin(kernel).func(xp, operands, axis)
    assert result.layout is twin.layout and dtype_name(result.index_dtype) == dtype_name(twin.index_dtype)
    for name, component in twin._components().items():
        np.testing.assert_array_equal(to_numpy(result._components()[name]), to_numpy(component), err_msg=name)


# -- 2. the public functions in every layout --------------------------------------------------------


PUBLIC: dict[str, Callable[..., Any]] = {
    "permute_dims": lambda x, axes, layout: xs.permute_dims(x, axes, layout=layout),
    "reshape": lambda x, shape, copy, layout: xs.reshape(x, shape, layout=layout),
    "expand_dims": lambda x, axis, layout: xs.expand_dims(x, axis=axis, layout=layout),
    "squeeze": lambda x, axes, layout: xs.squeeze(x, axis=axes, layout=layout),
    "broadcast_to": lambda x, shape, layout: xs.broadcast_to(x, shape, layout=layout),
    "flip": lambda x, axes, layout: xs.flip(x, axis=axes, layout=layout),
    "concat": lambda arrays, axis, layout: xs.concat(arrays, axis=axis, layout=layout),
    "roll": lambda x, shift, axes, layout: xs.roll(x, shift[0] if axes is None else shift, axis=axes, layout=layout),
    "repeat": lambda x, repeats, axis, layout: xs.repeat(x, repeats, axis=axis, layout=layout),
    "tile": lambda x, reps, layout: xs.tile(x, reps, layout=layout),
    "take_along_axis": lambda x, indices, axis, layout: xs.take_along_axis(x, indices, axis=axis, layout=layout),
}


def _call_public(op: str, args: tuple[Any, ...], layout: xs.Layout | None) -> Any:
    return PUBLIC[op](*args, layout=layout)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("layout", [xs.strided, *SPARSE_LAYOUTS], ids=str)
@FEW
@given(data=st.data())
def test_public_function(backend: str, xp: Any, op: str, layout: xs.Layout, data: st.DataObject) -> None:
    """The dispatched result equals the dense one; it keeps the input's layout (CSR <-> CSC for a swap
    of the sparse dimensions) unless a declared rewrite warned and returned COO; ``layout=`` converts."""
    args, expected, x = draw_call(data, xp, op, layout)
    result_layout = data.draw(st.sampled_from([None, None, xs.strided, xs.sparse_coo]), label="result_layout")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _call_public(op, args, result_layout)
    rewrites = [w for w in caught if issubclass(w.category, xs.SparseEfficiencyWarning)]
    assert len(rewrites) == len(caught), [str(w.message) for w in caught]
    assert_sparse_equal(result, expected)
    got = xs.layout_of(result)
    if result_layout is not None:
        assert got is result_layout
    elif rewrites:
        assert got is xs.sparse_coo and layout.is_compressed
        assert f"{op}: no direct kernel for layouts ({layout})" in str(rewrites[0].message)
    elif op == "repeat" and args[2] is None and layout is not xs.strided:
        assert got is xs.sparse_coo  # a 1-D result: no compressed layout holds it
    else:
        assert got in (layout, layout.transposed)
    if isinstance(result, xs.SparseArray) and isinstance(x, xs.SparseArray):
        assert _same_fill(result.fill_value, x.fill_value)


# -- 3. views, coalescedness, index dtypes ------------------------------------------------------------


def shares_buffer(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return bool(np.shares_memory(a, b))
    return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_views(backend: str) -> None:
    """Swapping the sparse dimensions, and reshaping, expanding or squeezing batch and dense dimensions
    of a compressed array share its components; so do the value-only COO operations."""
    if backend_skip_reason(backend):
        pytest.skip(str(backend_skip_reason(backend)))
    xp = xs.get_backend(backend).namespace()
    d = np.zeros((2, 3, 4, 2))
    d[:, 0, 1] = 1.0
    d[:, 2, 3, 1] = 2.0
    a = xs.to_sparse_csr(xp.asarray(d), dense_dim=1)
    t = xs.permute_dims(a, (0, 2, 1, 3))
    assert t.layout is xs.sparse_csc and t.ccol_indices() is a.crow_indices() and t.values() is a.values()
    for r in (xs.reshape(a, (1, 2, 3, 4, 2, 1)), xs.expand_dims(a, axis=0), xs.squeeze(xs.expand_dims(a, axis=4), axis=4)):
        assert r.layout is xs.sparse_csr
        assert shares_buffer(r.values(), a.values()) and shares_buffer(r.crow_indices(), a.crow_indices())
    b = xs.to_sparse_bsr(xp.asarray(d[0, :, :, 0].repeat(2, 0).repeat(2, 1)), blocksize=(2, 2))
    bt = xs.permute_dims(b, (1, 0))
    assert bt.layout is xs.sparse_bsc and bt.row_indices() is b.col_indices()
    c = xs.to_sparse_coo(xp.asarray(d), sparse_dim=3)
    assert shares_buffer(xs.permute_dims(c, (1, 0, 2, 3))._values(), c._values())
    assert xs.reshape(c, (2, 3, 4, 2), copy=False)._indices() is c._indices()
    assert not shares_buffer(xs.reshape(c, (2, 3, 4, 2), copy=True)._indices(), c._indices())


def test_coalescedness(backend: str, xp: Any) -> None:
    d = np.zeros((3, 4, 2), dtype=np.int64)
    d[0, 1] = 1
    d[2, 0] = 2
    d[2, 3] = 3
    c = xs.to_sparse_coo(xp.asarray(d), sparse_dim=2)
    assert c.is_coalesced()
    assert not xs.permute_dims(c, (1, 0, 2)).is_coalesced()  # index rows moved, as in torch
    assert xs.permute_dims(c, (0, 1, 2)) is c
    for kept in (
        xs.reshape(c, (12, 2)), xs.reshape(c, (3, 2, 2, 2)), xs.expand_dims(c, axis=1), xs.expand_dims(c, axis=3),
        xs.flip(c, axis=2), xs.flip(c, axis=(0, 1)), xs.concat([c, c], axis=0), xs.concat([c, c], axis=2),
        xs.squeeze(xs.expand_dims(c, axis=0), axis=0),
    ):  # fmt: skip
        assert kept.is_coalesced()
        assert_sparse_equal(kept, xs.to_dense(kept))
    assert not xs.flip(c, axis=0).is_coalesced()
    assert not xs.concat([c, c], axis=1).is_coalesced()
    assert_sparse_equal(xs.flip(c, axis=(0, 1)), xp.flip(xp.asarray(d), axis=(0, 1)))


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
def test_index_dtype_kept(backend: str, xp: Any, layout: xs.Layout) -> None:
    d = xp.asarray(np.kron(np.eye(3), np.ones((2, 2))))
    a = xs.to_sparse(d, layout=layout, index_dtype="int32", blocksize=(2, 2) if layout.is_blocked else None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xs.SparseEfficiencyWarning)
        results = [
            xs.permute_dims(a, (1, 0)), xs.reshape(a, (1, 6, 6)), xs.expand_dims(a, axis=0), xs.flip(a),
            xs.concat([a, a], axis=0), xs.concat([a, a], axis=1), xs.broadcast_to(a, (2, 6, 6)), xs.reshape(a, (36,)),
        ]  # fmt: skip
    for r in results:
        assert dtype_name(r.index_dtype) == "int32", r
    mixed = xs.concat([a, xs.to_sparse(d, layout=layout, blocksize=(2, 2) if layout.is_blocked else None)], axis=0)
    assert dtype_name(mixed.index_dtype) == "int64"


def test_index_dtype_widens_when_int32_cannot_address(backend: str, xp: Any) -> None:
    a = xs.sparse_coo_array(xp.asarray(np.asarray([[0], [1]], dtype=np.int32)), xp.asarray([1.0]), (2**16, 2**16))
    r = xs.reshape(a, (2**32,))
    assert dtype_name(r.index_dtype) == "int64" and int(r._indices()[0, 0]) == 1


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc], ids=str)
def test_compressed_tile_and_repeat_widen_int32_indices(backend: str, xp: Any, layout: xs.Layout) -> None:
    """tile and repeat along a sparse dimension recompress a larger array: int32 indices widen to int64 where
    they cannot address it, as for every shape function (they raised invariant 1.3, naming no operation)."""
    n = 2**30
    coo = xs.sparse_coo_array(xp.asarray(np.asarray([[0, 1], [5, n - 1]], dtype=np.int32)), xp.asarray([1.0, 2.0]), (2, n))
    axis = 1 if layout is xs.sparse_csr else 0
    if axis == 0:
        coo = xs.permute_dims(coo, (1, 0))
    a = xs.to_sparse(coo, layout=layout, index_dtype="int32")
    big = 4 * n
    for r in (xs.tile(a, (1, 4) if axis else (4, 1)), xs.repeat(a, 4, axis=axis)):
        assert r.layout is layout and r.shape[axis] == big and r.nnz == 8
        assert dtype_name(r.index_dtype) == "int64"
        check_invariants(r)
    rows, cols = (r.crow_indices(), r.col_indices()) if axis else (r.ccol_indices(), r.row_indices())
    assert to_numpy(rows).tolist() == [0, 4, 8] and to_numpy(cols).tolist() == [20, 21, 22, 23, big - 4, big - 3, big - 2, big - 1]


# -- 4. rewrites through COO --------------------------------------------------------------------------


@pytest.mark.parametrize("layout", COMPRESSED_LAYOUTS, ids=str)
def test_rewrites_warn_and_return_coo(backend: str, xp: Any, layout: xs.Layout) -> None:
    d = np.zeros((2, 4, 6, 3))
    d[:, 1, 2] = [1.0, 0.0, 2.0]
    d[:, 2, 5, 1] = 3.0
    dense = xp.asarray(d)
    a = xs.to_sparse(dense, layout=layout, dense_dim=1, blocksize=(2, 3) if layout.is_blocked else None)
    cases = [
        (lambda: xs.permute_dims(a, (0, 1, 3, 2)), xp.permute_dims(dense, (0, 1, 3, 2)), "permute_dims"),
        (lambda: xs.permute_dims(a, (1, 0, 2, 3)), xp.permute_dims(dense, (1, 0, 2, 3)), "permute_dims"),
        (lambda: xs.reshape(a, (2, 24, 3)), xp.reshape(dense, (2, 24, 3)), "reshape"),
        (lambda: xs.reshape(a, (8, 6, 3)), xp.reshape(dense, (8, 6, 3)), "reshape"),
        (lambda: xs.expand_dims(a, axis=2), xp.expand_dims(dense, axis=2), "expand_dims"),
    ]
    for call, expected, op in cases:
        with pytest.warns(xs.SparseEfficiencyWarning, match=rf"^{op}: no direct kernel for layouts \({layout}\) on backend '{backend}'"):
            r = call()
        assert r.layout is xs.sparse_coo
        assert_sparse_equal(r, expected)
    row = xs.to_sparse(xp.asarray(d[0, :1, :, 0]), layout=layout, blocksize=(1, 3) if layout.is_blocked else None)
    with pytest.warns(xs.SparseEfficiencyWarning, match=r"^squeeze: no direct kernel"):
        s = xs.squeeze(row, axis=0)
    assert s.layout is xs.sparse_coo and s.shape == (6,)
    assert_sparse_equal(s, xp.asarray(d[0, 0, :, 0]))
    # with layout= the COO result is converted back
    with pytest.warns(xs.SparseEfficiencyWarning):
        back = xs.reshape(a, (8, 6, 3), layout=xs.sparse_coo)
    assert back.layout is xs.sparse_coo


def test_mixing_sparse_and_dense_dimensions_regroups(backend: str, xp: Any) -> None:
    """A dense dimension moved before a sparse one becomes sparse: each stored sub-array is split into
    one entry per element (its fill values stay specified), never a dense copy."""
    d = np.zeros((3, 4, 2))
    d[0, 1] = [1.0, 0.0]
    d[2, 3] = [2.0, 5.0]
    c = xs.to_sparse_coo(xp.asarray(d), sparse_dim=2)
    p = xs.permute_dims(c, (2, 0, 1))
    assert p.sparse_dim() == 3 and p.nnz == 4
    assert_sparse_equal(p, xp.permute_dims(xp.asarray(d), (2, 0, 1)))
    r = xs.reshape(c, (6, 4))
    assert r.sparse_dim() == 2 and r.nnz == 4
    assert_sparse_equal(r, xp.reshape(xp.asarray(d), (6, 4)))
    kept = xs.reshape(c, (12, 2))
    assert kept.sparse_dim() == 1 and kept.nnz == 2
    inner = xs.reshape(c, (3, 4, 2, 1))  # the dense dimensions reshape among themselves
    assert inner.sparse_dim() == 2 and inner.nnz == 2 and inner._indices() is c._indices()
    ones = xs.reshape(c, (3, 4, 1, 2))  # the dense shape is kept; the new 1 is sparse
    assert ones.sparse_dim() == 3 and ones.dense_dim() == 1 and ones.nnz == 2


# -- 5. broadcast, flip and concat of compressed structure ------------------------------------------


@pytest.mark.parametrize("layout", COMPRESSED_LAYOUTS, ids=str)
def test_broadcast_a_sparse_dimension(backend: str, xp: Any, layout: xs.Layout) -> None:
    row = np.asarray([[0.0, 1.0, 0.0, 2.0]])
    a = xs.to_sparse(xp.asarray(row), layout=layout, blocksize=(1, 2) if layout.is_blocked else None, fill_value=0.0)
    b = xs.broadcast_to(a, (2, 3, 4))
    assert b.layout is layout and b.shape == (2, 3, 4)
    assert_sparse_equal(b, xp.broadcast_to(xp.asarray(row), (2, 3, 4)))


@pytest.mark.parametrize("layout", [xs.sparse_coo, *COMPRESSED_LAYOUTS], ids=str)
def test_broadcast_of_one_entry_gives_contiguous_values(backend: str, xp: Any, layout: xs.Layout) -> None:
    """Regression (found by Hypothesis): one stored entry repeated along a size-1 sparse dimension; a
    reshape of the broadcast values stayed a zero-stride view, which a compressed array must not hold."""
    d = np.asarray([[True], [False]])
    a = xs.to_sparse(xp.asarray(d), layout=layout, blocksize=(1, 1) if layout.is_blocked else None)
    b = xs.broadcast_to(a, (2, 2))
    assert b.layout is layout
    assert_sparse_equal(b, xp.broadcast_to(xp.asarray(d), (2, 2)))


@pytest.mark.parametrize("layout", [xs.sparse_csc, xs.sparse_bsc], ids=str)
def test_column_major_result_with_empty_dense_dimension_to_coo(backend: str, xp: Any, layout: xs.Layout) -> None:
    """Regression (found by Hypothesis): a CSC/BSC result whose dense dimension has size 0 (its values
    hold no element) converted to COO in row-major order, marked coalesced only when sorted."""
    d = np.zeros((4, 4, 1), dtype=bool)
    d[2:, :2] = True
    a = xs.to_sparse(xp.asarray(d), layout=layout, dense_dim=1, blocksize=(1, 1) if layout.is_blocked else None)
    cases = [(xs.broadcast_to, (4, 4, 0), xp.broadcast_to(xp.asarray(d), (4, 4, 0))), (xs.tile, (1, 1, 0), xp.tile(xp.asarray(d), (1, 1, 0)))]
    for func, arg, expected in cases:
        kept = func(a, arg)
        assert kept.layout is layout and kept.nnz == 4
        c = func(a, arg, layout=xs.sparse_coo)
        assert c.layout is xs.sparse_coo and c.is_coalesced()
        assert to_numpy(c._indices()).tolist() == [[2, 2, 3, 3], [0, 1, 0, 1]]
        assert_sparse_equal(c, expected)


@pytest.mark.parametrize("layout", COMPRESSED_LAYOUTS, ids=str)
def test_flip_keeps_slices_sorted(backend: str, xp: Any, layout: xs.Layout) -> None:
    rng = np.random.default_rng(1)
    d = np.where(rng.random((2, 6, 4, 2)) < 0.4, rng.integers(1, 9, (2, 6, 4, 2)), 7).astype(np.int32)
    d[1] = d[0][::-1]  # every batch holds as many blocks
    a = xs.to_sparse(xp.asarray(d), layout=layout, dense_dim=1, blocksize=(2, 2) if layout.is_blocked else None, fill_value=7)
    for axis in [None, 0, 1, 2, 3, (1, 2), (0, 2, 3)]:
        f = xs.flip(a, axis=axis)
        assert f.layout is layout and f.fill_value == 7
        assert_sparse_equal(f, xp.flip(xp.asarray(d), axis=axis))


@pytest.mark.parametrize("layout", COMPRESSED_LAYOUTS, ids=str)
def test_concat_compressed_every_axis(backend: str, xp: Any, layout: xs.Layout) -> None:
    """torch refuses cat of CSR; xsparse joins along rows (slices), columns (merged slices), batches and
    dense dimensions, keeping the layout."""
    rng = np.random.default_rng(2)
    d = np.where(rng.random((2, 4, 6, 2)) < 0.3, rng.standard_normal((2, 4, 6, 2)), 0.0)
    d[1] = d[0]
    e = np.flip(d, axis=(1, 2)).copy()
    kw = {"dense_dim": 1, "blocksize": (2, 3) if layout.is_blocked else None}
    a, b = xs.to_sparse(xp.asarray(d), layout=layout, **kw), xs.to_sparse(xp.asarray(e), layout=layout, **kw)
    for axis in range(4):
        r = xs.concat([a, b, a], axis=axis)
        assert r.layout is layout
        assert_sparse_equal(r, xp.concat([xp.asarray(d), xp.asarray(e), xp.asarray(d)], axis=axis))


# -- 6. joins: mixed layouts, fill values, dtypes, stacking ---------------------------------------


def test_concat_mixed_layouts(backend: str, xp: Any) -> None:
    d = np.asarray([[0.0, 1.0, 0.0, 4.0], [2.0, 0.0, 3.0, 0.0]])
    dense = xp.asarray(d)
    csr, coo, bsc = xs.to_sparse_csr(dense), xs.to_sparse_coo(dense), xs.to_sparse_bsc(dense, (1, 2))
    expected = xp.concat([dense, dense, dense], axis=0)
    r = xs.concat([csr, coo, dense], axis=0)
    assert r.layout is xs.sparse_csr
    assert_sparse_equal(r, expected)
    r = xs.concat([coo, csr, dense], axis=1)
    assert r.layout is xs.sparse_coo
    assert_sparse_equal(r, xp.concat([dense, dense, dense], axis=1))
    r = xs.concat([dense, csr], axis=0, layout=xs.sparse_csc)
    assert r.layout is xs.sparse_csc
    assert_sparse_equal(r, xp.concat([dense, dense], axis=0))
    r = xs.concat([bsc, csr], axis=1)
    assert r.layout is xs.sparse_bsc and r.blocksize == (1, 2) and r.shape == (2, 8)
    assert_sparse_equal(r, xp.concat([dense, dense], axis=1))
    r = xs.concat([csr, coo, bsc], axis=0, layout=xs.sparse_bsr)
    assert r.layout is xs.sparse_bsr and r.blocksize == (1, 2)
    assert_sparse_equal(r, xp.concat([dense, dense, dense], axis=0))
    r = xs.concat([dense, dense], axis=0, layout=xs.sparse_coo)
    assert r.layout is xs.sparse_coo
    d2 = xs.concat([dense, csr], axis=0, layout=xs.strided)
    assert xs.layout_of(d2) is xs.strided
    assert_sparse_equal(d2, xp.concat([dense, dense], axis=0))


def test_concat_checks_its_result_when_the_full_checks_are_on(backend: str, xp: Any) -> None:
    """An operand made without the index checks (a column out of range) joined inside
    check_sparse_tensor_invariants: the result's check names the invariant, along either sparse dimension,
    whichever kernel joins (the NumPy one builds its result unchecked only when the full checks are off)."""
    bad = xs.sparse_csr_array(xp.asarray([0, 2, 3]), xp.asarray([2, 0, 7]), xp.asarray([1.0, 2.0, 3.0]), shape=(2, 3))
    for axis, bound in ((0, 3), (1, 6)):
        with xs.check_sparse_tensor_invariants(), pytest.raises(xs.InvariantError, match=rf"^invariant 5\.5 violated: concat: col_indices must be < {bound}"):
            xs.concat([bad, bad], axis=axis)


def test_new_dimensions_of_a_reduction_result(backend: str, xp: Any) -> None:
    """A reduction's COO vector (on NumPy its index row is a stride-0 view) given new dimensions: the indices
    stay row-major, as the invariants need (matrix_norm with keepdims of a hybrid CSR array raised
    "indices must be contiguous" on NumPy, whose concatenation of such pieces came out column-major)."""
    d = xp.asarray(np.asarray([[[-4.0], [0.0]], [[1.5], [0.0]]], dtype=np.float32))
    a = xs.to_sparse(d, layout=xs.sparse_csr, dense_dim=1, index_dtype=xp.int32)
    for order in ("fro", 1, -1, math.inf, -math.inf):
        assert_sparse_equal(xs.linalg.matrix_norm(a, ord=order, keepdims=True), xp.linalg.matrix_norm(d, ord=order, keepdims=True))
    v = xs.max(xs.sum(xs.abs(a), axis=-2), axis=-1)
    for axis in (0, 1):
        assert_sparse_equal(xs.expand_dims(v, axis=axis), xp.expand_dims(xs.to_dense(v), axis=axis))


def test_concat_fill_values(backend: str, xp: Any) -> None:
    d = np.asarray([[1.5, 2.0], [1.5, 1.5]])
    a = xs.to_sparse_csr(xp.asarray(d), fill_value=1.5)
    r = xs.concat([a, xp.asarray(d)], axis=1)
    assert r.fill_value == 1.5 and r.nnz == 2
    assert_sparse_equal(r, xp.asarray(np.concatenate([d, d], axis=1)))
    zero = xs.to_sparse_csr(xp.asarray(d))
    with pytest.raises(
        xs.DensificationError,
        match=r"^concat: the sparse operands have different fill values \(fill_values=\[1\.5, 0(\.0)?\]\), .* pass layout=xsparse\.strided",
    ):
        xs.concat([a, zero])
    mixed = xs.concat([a, zero], axis=0, layout=xs.strided)
    assert_sparse_equal(mixed, xp.asarray(np.concatenate([d, d], axis=0)))
    nan = xs.to_sparse_coo(xp.asarray(np.asarray([math.nan, 1.0])), fill_value=math.nan)
    joined = xs.concat([nan, nan])
    assert joined.fill_value != joined.fill_value and joined.nnz == 2


def test_concat_of_the_two_signed_zero_fill_values(backend: str, xp: Any) -> None:
    """+0.0 and -0.0 are two fill values: joining them was taken as one fill value, and the unspecified
    -0.0 elements of the second operand came back as +0.0."""
    plus = xs.to_sparse_coo(xp.asarray([1.0, 0.0], dtype=xp.float64))
    minus = xs.to_sparse_coo(xp.asarray([2.0, -0.0], dtype=xp.float64), fill_value=-0.0)
    with pytest.raises(xs.DensificationError, match=r"^concat: the sparse operands have different fill values \(fill_values=\[0\.0, -0\.0\]\)"):
        xs.concat([plus, minus])
    row = xs.to_sparse_csr(xp.asarray([[2.0, -0.0]], dtype=xp.float64), fill_value=-0.0)
    with pytest.raises(xs.DensificationError, match=r"^concat: the sparse operands have different fill values \(fill_values=\[-0\.0, 0\.0\]\)"):
        xs.stack([row, xs.to_sparse_csr(xp.asarray([[1.0, 0.0]], dtype=xp.float64))])
    dense = xs.concat([plus, minus], layout=xs.strided)
    assert_sparse_equal(dense, xp.asarray([1.0, 0.0, 2.0, -0.0], dtype=xp.float64))
    both = xs.concat([row, row], axis=1)
    assert math.copysign(1.0, both.fill_value) < 0
    assert_sparse_equal(both, xp.asarray([[2.0, -0.0, 2.0, -0.0]], dtype=xp.float64))


def test_concat_promotes_dtypes(backend: str, xp: Any) -> None:
    a = xs.to_sparse_coo(xp.asarray(np.asarray([0, 3], dtype=np.int32)), fill_value=0)
    b = xs.to_sparse_coo(xp.asarray(np.asarray([5, 0], dtype=np.int64)))
    r = xs.concat([a, b])
    assert dtype_name(r.dtype) == "int64" and type(r.fill_value) is int
    assert to_numpy(xs.to_dense(r)).tolist() == [0, 3, 5, 0]


def test_concat_of_kinds_the_standard_does_not_promote(backend: str, xp: Any) -> None:
    """A float and an integer operand: NumPy and torch promote them, as their dense concat does; on
    array-api-strict the error is xsparse's (it was array-api-strict's own message)."""
    a = xs.to_sparse_coo(xp.asarray([0.0, 1.0], dtype=xp.float32))
    b = xp.asarray([2, 0], dtype=xp.int64)
    if backend == "array_api_strict":
        with pytest.raises(TypeError, match=r"^result_type: the Array API defines no promotion of float32 with int64 \(dtypes=\(float32, int64\)\)\. Cast one"):
            xs.concat([a, b])
        return
    assert_sparse_equal(xs.concat([a, b]), xp.concat([xs.to_dense(a), b]))


def test_concat_batches_must_match(backend: str, xp: Any) -> None:
    a = xs.to_sparse_csr(xp.asarray(np.asarray([[[1.0, 0.0], [0.0, 0.0]]])))
    b = xs.to_sparse_csr(xp.asarray(np.asarray([[[1.0, 1.0], [0.0, 0.0]]])))
    with pytest.raises(
        xs.InvariantError,
        match=r"^invariant 3\.9 violated: concat: every batch of a sparse_csr array must hold the same number of specified "
        r"elements, and the result would hold between 1 and 2 \(nnz=\[1, 2\]\)\. Concatenate COO arrays instead",
    ):
        xs.concat([a, b], axis=0)
    r = xs.concat([a, b], axis=0, layout=xs.sparse_coo)
    assert r.layout is xs.sparse_coo and r.nnz == 3
    c = xs.to_sparse_csr(xp.asarray(np.asarray([[[[1.0], [0.0]]], [[[1.0], [0.0]]]])), dense_dim=1)
    e = xs.to_sparse_csr(xp.asarray(np.asarray([[[[1.0], [0.0]]], [[[0.0], [1.0]]]])), dense_dim=1)
    with pytest.raises(xs.InvariantError, match=r"^invariant 3\.9 violated: concat: .* give the operands one sparsity structure"):
        xs.concat([c, e], axis=3)


def test_layout_conversion_errors_name_the_operation(backend: str, xp: Any) -> None:
    # a COO operand whose batches differ in size cannot be a batched CSR array: the error names the call
    d = np.zeros((2, 3, 4))
    d[0, 0, 0], d[1] = 1.0, 2.0
    a = xs.to_sparse(xp.asarray(d), layout=xs.sparse_coo)
    for join in (lambda: xs.concat([a, a], axis=1, layout=xs.sparse_csr), lambda: xs.stack([a, a], layout=xs.sparse_csr)):
        with pytest.raises(
            xs.InvariantError,
            match=r"^invariant 3\.9 violated: concat: an operand cannot be given layout=sparse_csr: every batch of a "
            r"sparse_csr array must hold the same number of specified elements, got between 1 and 12 .*Convert to sparse_coo",
        ):
            join()
    with pytest.raises(xs.InvariantError, match=r"^invariant 3\.9 violated: add: its result cannot be given layout=sparse_csr: every batch"):
        xs.add(a, a, layout=xs.sparse_csr)
    with pytest.raises(xs.InvariantError, match=r"^invariant 3\.9 violated: to_sparse: every batch"):
        xs.to_sparse(a, layout=xs.sparse_csr)
    # a layout that cannot hold the result's number of dimensions
    v = xs.to_sparse(xp.asarray(np.arange(3.0)))
    for op, call in [("sin", lambda: xs.sin(v, layout=xs.sparse_csr)), ("fftfreq", lambda: xs.fft.fftfreq(4, layout=xs.sparse_csr, backend=backend))]:
        with pytest.raises(ValueError, match=rf"^{op}: its result cannot be given layout=sparse_csr: a sparse_csr array has 2 sparse dimensions, so it cannot hold a 1-d array"):
            call()


def test_concat_of_compressed_with_different_splits_rewrites(backend: str, xp: Any) -> None:
    d = np.zeros((2, 3, 2))
    d[0, 1] = [1.0, 2.0]
    d[1, 2] = [3.0, 4.0]
    batched = xs.to_sparse_csr(xp.asarray(d))
    hybrid = xs.to_sparse_csr(xp.asarray(d), dense_dim=1)
    with pytest.warns(xs.SparseEfficiencyWarning, match=r"^concat: no direct kernel"):
        r = xs.concat([batched, hybrid], axis=0)
    assert r.layout is xs.sparse_coo
    assert_sparse_equal(r, xp.concat([xp.asarray(d), xp.asarray(d)], axis=0))


def test_joins_of_a_hybrid_compressed_array_and_a_coo_one(backend: str, xp: Any) -> None:
    """A COO operand of a hybrid CSR one's shape is split otherwise (all its dimensions sparse): the join goes
    through COO with the warning, whatever its entries. Converted with its own split it was a batched CSR
    array, which raised invariant 3.9 where its batches held different numbers of entries."""
    for host in (np.array([[1.0, 0, 2], [0, 3, 0]]), np.array([[1.0, 0, 2], [0, 3, 4]])):
        a, b = xs.to_sparse(xp.asarray(host), layout=xs.sparse_csr), xs.to_sparse(xp.asarray(host))
        for call, expected in (
            (lambda: xs.dstack([a, b]), np.dstack([host, host])),
            (lambda: xs.stack([a, b], axis=-1), np.stack([host, host], axis=-1)),
        ):
            with pytest.warns(xs.SparseEfficiencyWarning, match=r"cannot hold every operand .*the splits differ; dense_dims=\[1, 0\]"):
                r = call()
            assert_sparse_equal(r, xp.asarray(expected), check_layout=xs.sparse_coo)
        assert xs.dstack([a, xp.asarray(host)]).layout is xs.sparse_csr  # a strided operand takes the first's split
    d = np.zeros((2, 2, 2))
    d[0, 0] = [1.0, 2.0]
    d[1] = [[3.0, 0.0], [4.0, 5.0]]
    hybrid, coo = xs.to_sparse_csr(xp.asarray(d), dense_dim=1), xs.to_sparse(xp.asarray(d))
    with pytest.warns(xs.SparseEfficiencyWarning, match=r"the splits differ"):
        r = xs.concat([hybrid, coo], axis=0)
    assert_sparse_equal(r, xp.asarray(np.concatenate([d, d], axis=0)), check_layout=xs.sparse_coo)


def _recorded(call: Callable[[], Any]) -> tuple[Any, list[warnings.WarningMessage]]:
    """``call()``'s result and every warning it emitted (stack's expand_dims may warn too)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    return result, caught


def test_concat_operands_the_first_layout_cannot_hold(backend: str, xp: Any) -> None:
    """An operand whose split into sparse and dense dimensions the first operand's layout cannot hold (too
    many dense dimensions, or sparse dimensions its block shape does not divide) sends the join through
    COO with the warning, on every axis, for concat and stack, as operands split differently do."""
    small = np.arange(1.0, 9.0).reshape(1, 2, 4)
    big = np.arange(1.0, 25.0).reshape(2, 3, 4)
    wide = np.where(np.arange(48).reshape(2, 4, 6) % 3 == 0, 0.0, np.arange(48.0).reshape(2, 4, 6))
    cases = [
        (small, xs.to_sparse(xp.asarray(small), layout=xs.sparse_csr), xs.to_sparse(xp.asarray(small), sparse_dim=1)),
        (
            big, xs.to_sparse(xp.asarray(big), layout=xs.sparse_bsc, dense_dim=1, blocksize=(2, 1)),
            xs.to_sparse(xp.asarray(big), layout=xs.sparse_csc),
        ),
        (wide, xs.to_sparse(xp.asarray(wide), layout=xs.sparse_bsr, blocksize=(2, 3)), xs.to_sparse(xp.asarray(wide), sparse_dim=2)),
    ]  # fmt: skip
    for host, first, other in cases:
        target = first.layout
        for axis in range(host.ndim):
            with pytest.warns(xs.SparseEfficiencyWarning, match=rf"^concat: a {target} array cannot hold every operand .* joining them as sparse_coo arrays instead"):
                r = xs.concat([first, other], axis=axis)
            assert r.layout is xs.sparse_coo
            assert_sparse_equal(r, xp.asarray(np.concatenate([host, host], axis=axis)))
            r = xs.concat([first, other], axis=axis, layout=xs.sparse_coo)
            assert_sparse_equal(r, xp.asarray(np.concatenate([host, host], axis=axis)), check_layout=xs.sparse_coo)
        for axis in range(-host.ndim - 1, host.ndim + 1):
            r, caught = _recorded(lambda: xs.stack([first, other], axis=axis))
            assert any(issubclass(w.category, xs.SparseEfficiencyWarning) for w in caught)
            assert_sparse_equal(r, xp.asarray(np.stack([host, host], axis=axis)))


def test_concat_in_a_given_layout_of_operands_it_cannot_hold(backend: str, xp: Any) -> None:
    """layout= names a layout that cannot hold an operand: the join goes through COO (with the warning)
    and the result is converted, a blocked one with the block shape of the first blocked operand."""
    small = np.arange(1.0, 9.0).reshape(1, 2, 4)
    batched, split = xs.to_sparse(xp.asarray(small), layout=xs.sparse_csr), xs.to_sparse(xp.asarray(small), sparse_dim=1)
    for axis in range(3):
        with pytest.warns(xs.SparseEfficiencyWarning, match=r"^concat: a sparse_csr array cannot hold every operand"):
            r = xs.concat([split, batched], axis=axis, layout=xs.sparse_csr)
        assert r.layout is xs.sparse_csr and r.batch_dim() == 1
        assert_sparse_equal(r, xp.asarray(np.concatenate([small, small], axis=axis)))
    big = np.arange(1.0, 25.0).reshape(2, 3, 4)
    bsc = xs.to_sparse(xp.asarray(big), layout=xs.sparse_bsc, dense_dim=1, blocksize=(2, 1))
    csc = xs.to_sparse(xp.asarray(big), layout=xs.sparse_csc)
    with pytest.warns(xs.SparseEfficiencyWarning, match=r"^concat: a sparse_bsc array cannot hold every operand"):
        r = xs.concat([csc, bsc], axis=1, layout=xs.sparse_bsc)
    assert r.layout is xs.sparse_bsc and r.blocksize == (2, 1) and r.dense_dim() == 0
    assert_sparse_equal(r, xp.asarray(np.concatenate([big, big], axis=1)))
    # the rewrite of compressed operands split differently gives COO, converted with the block shape too
    hybrid = xs.to_sparse(xp.asarray(big[:, :2]), layout=xs.sparse_bsr, dense_dim=1, blocksize=(2, 1))
    plain = xs.to_sparse(xp.asarray(big[:, :2]), layout=xs.sparse_bsr, blocksize=(2, 1))
    with pytest.warns(xs.SparseEfficiencyWarning, match=r"^concat: no direct kernel"):
        r = xs.concat([hybrid, plain], axis=1, layout=xs.sparse_bsr)
    assert r.layout is xs.sparse_bsr and r.blocksize == (2, 1)
    assert_sparse_equal(r, xp.asarray(np.concatenate([big[:, :2], big[:, :2]], axis=1)))


def _split_operand(data: st.DataObject, xp: Any, host: np.ndarray, fill: float, label: str) -> Any:
    """``host`` in a drawn layout and split: COO with any sparse_dim, compressed with any dense_dim (COO of
    that split where its batches differ in size), BSR/BSC with a block shape dividing its own sparse
    dimensions, or strided."""
    layout = data.draw(st.sampled_from([xs.strided, *SPARSE_LAYOUTS]), label=f"{label}_layout")
    x = xp.asarray(host)
    if layout is xs.strided:
        return x
    kw: dict[str, Any] = {"fill_value": fill, "index_dtype": data.draw(st.sampled_from(["int32", "int64"]), label=f"{label}_index")}
    if layout is xs.sparse_coo:
        return xs.to_sparse(x, sparse_dim=data.draw(st.integers(0, host.ndim), label=f"{label}_sparse_dim"), **kw)
    dense_dim = data.draw(st.integers(0, host.ndim - 2), label=f"{label}_dense_dim")
    if layout.is_blocked:
        rows = host.ndim - dense_dim - 2
        kw["blocksize"] = tuple(
            data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0] or [1]), label=f"{label}_block{i}")
            for i, n in enumerate(host.shape[rows : rows + 2])
        )  # fmt: skip
    try:
        return xs.to_sparse(x, layout=layout, dense_dim=dense_dim, **kw)
    except xs.InvariantError:
        # batches that hold different numbers of elements (invariant 3.9): the COO array of that split
        kw.pop("blocksize", None)
        return xs.to_sparse(x, sparse_dim=host.ndim - dense_dim, **kw)


@SOME
@given(data=st.data())
def test_joins_of_operands_split_differently(backend: str, xp: Any, data: st.DataObject) -> None:
    """concat and stack of operands in any layouts and splits, on any axis, in the first operand's layout
    or a given one: NumPy's result, or one of the documented errors (a strided first operand with sparse
    others, a blocked layout= with no block shape, a result the given layout cannot hold, unequal batches)."""
    shape = tuple(data.draw(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=3, max_size=3), label="shape"))
    fill = data.draw(st.sampled_from([0.0, 1.5]), label="fill")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    count = data.draw(st.integers(2, 3), label="count")
    hosts = [np.where(rng.random(shape) < 0.5, rng.integers(-3, 4, shape).astype(np.float64), fill) for _ in range(count)]
    arrays = [_split_operand(data, xp, h, fill, f"operand{i}") for i, h in enumerate(hosts)]
    layout = data.draw(st.sampled_from([None, *SPARSE_LAYOUTS]), label="layout")
    stacking = data.draw(st.booleans(), label="stack")
    if stacking:
        axis = data.draw(st.integers(-len(shape) - 1, len(shape)), label="axis")
        expected, call = np.stack(hosts, axis=axis), (lambda: xs.stack(arrays, axis=axis, layout=layout))
    else:
        axis = data.draw(st.integers(-len(shape), len(shape) - 1), label="axis")
        expected, call = np.concatenate(hosts, axis=axis), (lambda: xs.concat(arrays, axis=axis, layout=layout))
    try:
        result, _ = _recorded(call)
    except xs.DensificationError as e:
        assert layout is None and xs.layout_of(arrays[0]) is xs.strided, e
        return
    except xs.InvariantError as e:
        assert "invariant 3.9 violated" in str(e) and "sparse_coo" in str(e), e
        return
    except ValueError as e:
        assert re.match(r"^concat: (layout=\S+ needs a block shape|a \S+ result needs a block shape|a \S+ result cannot hold the joined array)", str(e)), e
        return
    assert_sparse_equal(result, xp.asarray(expected), check_layout=layout)


def test_concat_axis_none_and_one_array(backend: str, xp: Any) -> None:
    a = xs.to_sparse_coo(xp.asarray(np.asarray([[0, 1], [2, 0]])))
    r = xs.concat([a, a], axis=None)
    assert r.shape == (8,) and to_numpy(xs.to_dense(r)).tolist() == [0, 1, 2, 0, 0, 1, 2, 0]
    assert_sparse_equal(xs.concat((a,), axis=1), xs.to_dense(a))
    assert_sparse_equal(xs.concat([xs.to_dense(a), xs.to_dense(a)], axis=-1), xp.concat([xs.to_dense(a)] * 2, axis=1))


NUMPY_JOINS = {"hstack": np.hstack, "vstack": np.vstack, "dstack": np.dstack}


@pytest.mark.parametrize("name", ["stack", "hstack", "vstack", "dstack"])
@pytest.mark.parametrize("layout", [xs.strided, *SPARSE_LAYOUTS], ids=str)
@FEW
@given(data=st.data())
def test_stacking(backend: str, xp: Any, name: str, layout: xs.Layout, data: st.DataObject) -> None:
    """stack, hstack, vstack and dstack equal NumPy's on the dense arrays (2-D compressed, COO of rank 0..3)."""
    if layout.is_compressed:
        case = data.draw(S.dense_cases(xp, fill=None, max_batch_dims=0, max_dense_dims=0), label="case")
        dense, convert = case.array, (lambda d: xs.to_sparse(d, **case.kwargs(layout)))
    else:
        coo_case = data.draw(S.coo_dense_cases(xp, fill=None, max_ndim=3), label="coo_case")
        dense = coo_case.array

        def convert(d: Any) -> Any:
            if layout is xs.strided:
                return d
            return xs.to_sparse_coo(d, coo_case.sparse_dim, index_dtype=coo_case.index_dtype, **_fill_kw(coo_case.fill_value))
    flipped = xp.flip(dense) if dense.ndim else dense
    arrays = [convert(dense), convert(flipped)]
    hosts = [to_numpy(dense), to_numpy(flipped)]
    if name == "stack":
        axis = data.draw(st.integers(-dense.ndim - 1, dense.ndim), label="axis")
        expected = np.stack(hosts, axis=axis)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", xs.SparseEfficiencyWarning)
            result = xs.stack(arrays, axis=axis)
    else:
        expected = NUMPY_JOINS[name](hosts)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", xs.SparseEfficiencyWarning)
            result = getattr(xs, name)(arrays)
    assert_sparse_equal(result, xp.asarray(expected))


def test_stack_csr_matrices_gives_a_batched_csr(backend: str, xp: Any) -> None:
    a = xs.to_sparse_csr(xp.asarray(np.asarray([[0.0, 1.0], [2.0, 0.0]])))
    s = xs.stack([a, xs.flip(a, axis=1)])
    assert s.layout is xs.sparse_csr and s.batch_dim() == 1 and s.shape == (2, 2, 2)
    d = xs.dstack([a, a])
    assert d.layout is xs.sparse_csr and d.dense_dim() == 1


# -- 7. permutations, methods -------------------------------------------------------------------------


@pytest.mark.parametrize("layout", SPARSE_LAYOUTS, ids=str)
@FEW
@given(data=st.data())
def test_moveaxis_and_methods(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """moveaxis equals the backend's; the torch methods permute, transpose and unsqueeze equal the functions."""
    x, dense = draw_array(data, xp, layout)
    assume(x.ndim >= 1)
    src = data.draw(st.integers(-x.ndim, x.ndim - 1), label="source")
    dst = data.draw(st.integers(-x.ndim, x.ndim - 1), label="destination")
    dim0 = data.draw(st.integers(-x.ndim, x.ndim - 1), label="dim0")
    dim1 = data.draw(st.integers(-x.ndim, x.ndim - 1), label="dim1")
    perm = tuple(data.draw(st.permutations(range(x.ndim)), label="perm"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xs.SparseEfficiencyWarning)
        assert_sparse_equal(xs.moveaxis(x, src, dst), xp.moveaxis(dense, src, dst))
        assert_sparse_equal(x.permute(*perm), xp.permute_dims(dense, perm))
        assert_sparse_equal(x.permute(perm), xp.permute_dims(dense, perm))
        swapped = list(range(x.ndim))
        swapped[dim0], swapped[dim1] = swapped[dim1], swapped[dim0]
        assert_sparse_equal(x.transpose(dim0, dim1), xp.permute_dims(dense, tuple(swapped)))
        assert_sparse_equal(x.unsqueeze(-1), xp.expand_dims(dense, axis=-1))
        assert_sparse_equal(xs.unsqueeze(x, 0), xp.expand_dims(dense, axis=0))


def test_moveaxis_several(backend: str, xp: Any) -> None:
    d = xp.asarray(np.arange(24.0).reshape(2, 3, 4))
    c = xs.to_sparse_coo(d)
    assert_sparse_equal(xs.moveaxis(c, (0, 1), (2, 0)), xp.moveaxis(d, (0, 1), (2, 0)))
    assert_sparse_equal(xs.moveaxis(d, -1, 0), xp.moveaxis(d, -1, 0))


def test_strided_inputs_stay_strided(backend: str, xp: Any) -> None:
    d = xp.asarray(np.arange(6.0).reshape(1, 2, 3))
    for r, e in [
        (xs.permute_dims(d, (2, 1, 0)), xp.permute_dims(d, (2, 1, 0))), (xs.reshape(d, (3, -1)), xp.reshape(d, (3, 2))),
        (xs.squeeze(d), xp.squeeze(d, axis=0)), (xs.flip(d), xp.flip(d)), (xs.broadcast_to(d, (2, 2, 3)), xp.broadcast_to(d, (2, 2, 3))),
        (xs.stack([d, d], axis=-1), xp.stack([d, d], axis=-1)),
    ]:  # fmt: skip
        assert xs.layout_of(r) is xs.strided
        assert_sparse_equal(r, e)
    assert xs.permute_dims(d, (0, 1, 2), layout=xs.sparse_coo).layout is xs.sparse_coo


@pytest.mark.parametrize("layout", [xs.strided, *SPARSE_LAYOUTS], ids=str)
@FEW
@given(data=st.data())
def test_unstack_diff_broadcast_arrays(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """The compositions equal the backend's functions: ``unstack`` (getitem), ``diff`` (concat, getitem
    and subtract; fill value ``fill - fill``) and ``broadcast_arrays`` (broadcast_to), layouts kept."""
    x, dense = draw_array(data, xp, layout)
    assume(x.ndim > 0)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    parts = xs.unstack(x, axis=axis)
    expected = xp.unstack(dense, axis=axis)
    assert len(parts) == len(expected)
    for part, e in zip(parts, expected):
        # array_api_compat's NumPy unstack gives NumPy scalars for a 1-D array, xsparse 0-d arrays
        assert_sparse_equal(part, xp.asarray(e))
        if isinstance(x, xs.SparseArray):
            assert _same_fill(part.fill_value, x.fill_value)
    if xp.isdtype(dense.dtype, "numeric"):
        n = data.draw(st.integers(0, 2), label="n")
        k = x.shape[axis]
        pre = dense if data.draw(st.booleans(), label="prepend") else None
        app = xp.flip(dense, axis=axis) if data.draw(st.booleans(), label="append") and k else None
        with warnings.catch_warnings():
            # an inf fill gives inf - inf = nan, as the dense difference does
            warnings.simplefilter("ignore", RuntimeWarning)
            r = xs.diff(x, axis=axis, n=n, prepend=pre, append=app)
            # NumPy reads prepend=None as a value: pass only the arrays given
            joined = {k: v for k, v in (("prepend", pre), ("append", app)) if v is not None}
            e = xp.diff(dense, axis=axis, n=n, **joined)
        assert_sparse_equal(r, e)
        if isinstance(x, xs.SparseArray) and n:
            assert xs.layout_of(r) in (layout, xs.sparse_coo)
    shape = tuple(data.draw(st.sampled_from([s, 1]), label=f"size{d}") for d, s in enumerate(x.shape))
    other = xp.zeros((2, *shape), dtype=dense.dtype)
    a, b = xs.broadcast_arrays(x, other)
    assert xs.layout_of(a) is layout and a.shape == (2, *x.shape) and b.shape == a.shape
    assert_sparse_equal(a, xp.broadcast_to(dense, (2, *x.shape)))


def test_new_shape_functions_keep_fill_values_and_index_dtypes(backend: str, xp: Any, layout: xs.Layout) -> None:
    d = np.full((2, 4, 4), 5.0)
    d[0, 1, 2], d[1, 3, 0] = 1.0, 2.0
    kw = {"blocksize": (2, 2)} if layout.is_blocked else {}
    a = xs.to_sparse(xp.asarray(d), layout=layout, index_dtype="int32", fill_value=5.0, **kw)
    for r, e in [
        (xs.roll(a, 2, axis=2), np.roll(d, 2, axis=2)), (xs.roll(a, (1, 2), axis=(0, 1)), np.roll(d, (1, 2), axis=(0, 1))),
        (xs.roll(a, 3, axis=(1, 1)), np.roll(d, 6, axis=1)), (xs.tile(a, (1, 2, 1)), np.tile(d, (1, 2, 1))),
        (xs.repeat(a, 2, axis=1), np.repeat(d, 2, axis=1)), (xs.repeat(a, 2, axis=0), np.repeat(d, 2, axis=0)),
    ]:  # fmt: skip
        assert r.layout is layout and r.fill_value == 5.0 and dtype_name(r.index_dtype) == "int32"
        assert_sparse_equal(r, xp.asarray(e))
    t = xs.tile(a, (2, 1, 1, 1))
    assert t.layout is layout and t.shape == (2, 2, 4, 4)
    assert_sparse_equal(t, xp.asarray(np.tile(d, (2, 1, 1, 1))))
    assert_sparse_equal(xs.tile(a, (0, 1)), xp.asarray(np.tile(d, (0, 1))))
    assert xs.diff(a, axis=0).fill_value == 0.0
    assert xs.roll(a, 1, axis=0, layout=xs.sparse_coo).layout is xs.sparse_coo


def test_rewrites_of_the_new_functions(backend: str, xp: Any) -> None:
    """A BSR result that would split blocks, and the flattened roll of a hybrid compressed array, go
    through COO with the warning; layout= still converts."""
    d = np.zeros((4, 4, 2))
    d[0, 1], d[3, 2] = [1.0, 2.0], [3.0, 0.0]
    h = xs.to_sparse_csr(xp.asarray(d), dense_dim=1)
    with pytest.warns(xs.SparseEfficiencyWarning, match=rf"^roll: no direct kernel for layouts \(sparse_csr\) on backend '{backend}'"):
        r = xs.roll(h, 3)
    assert r.layout is xs.sparse_coo and r.dense_dim() == 0
    assert_sparse_equal(r, xp.roll(xp.asarray(d), 3))
    b = xs.to_sparse_bsr(xp.asarray(d[:, :, 0]), blocksize=(2, 2))
    with pytest.warns(xs.SparseEfficiencyWarning, match=r"^repeat: no direct kernel"):
        r = xs.repeat(b, xp.asarray([1, 0, 2, 0]), axis=1)
    assert r.layout is xs.sparse_coo
    assert_sparse_equal(r, xp.repeat(xp.asarray(d[:, :, 0]), xp.asarray([1, 0, 2, 0]), axis=1))
    with pytest.warns(xs.SparseEfficiencyWarning, match=r"^take_along_axis: no direct kernel"):
        r = xs.take_along_axis(h, xp.asarray([[[0]], [[1]], [[2]], [[3]]]), axis=1, layout=xs.sparse_csr)
    assert r.layout is xs.sparse_csr


def test_broadcast_shapes() -> None:
    assert xs.broadcast_shapes() == ()
    assert xs.broadcast_shapes((3,), (2, 1), [1, 1, 1]) == (1, 2, 3)
    assert xs.broadcast_shapes((0, 1), (1, 4)) == (0, 4)
    assert xs.broadcast_arrays() == []


# -- 8. errors -----------------------------------------------------------------------------------------


def _coo() -> Any:
    return xs.sparse_coo_array([[0, 1], [1, 0]], [1.0, 2.0], (2, 3), dtype="float64")


def _csr() -> Any:
    return xs.sparse_csr_array([0, 1, 2], [1, 0], [1.0, 2.0], shape=(2, 2), dtype="float64")


ERRORS: list[tuple[str, Callable[[], Any], type[BaseException], str]] = [
    ("operand", lambda: xs.flip([[1.0]]), TypeError, r"^flip: expected an xsparse array or a backend array, got list \(x=\[\[1\.0\]\]\)\. Wrap Python scalars and lists"),
    ("axis-type", lambda: xs.flip(_coo(), axis=1.0), TypeError, r"^flip: axis must be an integer, got float \(axis=1\.0\)\. Pass an integer\.$"),
    ("axis-range", lambda: xs.expand_dims(_coo(), axis=3), IndexError,
     r"^expand_dims: axis is out of range for an array of 2 dimensions \(axis=3, ndim=2\)\. Pass an axis in \[-3, 2\]\.$"),
    ("stack-axis", lambda: xs.stack([_coo()], axis=-4), IndexError, r"^stack: axis is out of range .*\(axis=-4, ndim=2\)\. Pass an axis in \[-3, 2\]\.$"),
    ("axis-0d", lambda: xs.flip(xs.sparse_coo_array(shape=()), axis=0), IndexError, r"^flip: a 0-d array has no axis \(axis=0, ndim=0\)\. Add a dimension first\.$"),
    ("axis-twice", lambda: xs.flip(_coo(), axis=(0, -2)), ValueError, r"^flip: axis names a dimension twice \(axis=\(0, -2\), ndim=2\)\. Name each dimension once\.$"),
    ("permute-short", lambda: xs.permute_dims(_coo(), (0,)), ValueError,
     r"^permute_dims: axes must name each of the 2 dimensions once \(axes=\(0,\), ndim=2\)\. Pass a permutation of range\(ndim\)\.$"),
    # an int for a 2-D array: the message read tuple(axes), a raw TypeError
    ("permute-int", lambda: xs.permute_dims(_coo(), 0), ValueError,
     r"^permute_dims: axes must name each of the 2 dimensions once \(axes=0, ndim=2\)\. Pass a permutation of range\(ndim\)\.$"),
    ("moveaxis-lengths", lambda: xs.moveaxis(_coo(), (0, 1), 0), ValueError,
     r"^moveaxis: source and destination must name as many dimensions \(source=\(0, 1\), destination=0\)\. Pass one destination per source\.$"),
    # a strided array had array-api-compat's message, without the operation's name
    ("matrix-transpose-strided-1d", lambda: xs.matrix_transpose(np.ones(3)), ValueError,
     r"^matrix_transpose: the array must have at least 2 dimensions, got shape \(3,\)\. Add a dimension first"),
    ("transpose-range", lambda: _coo().transpose(0, 2), IndexError, r"^transpose: dim1 is out of range .*\(dim1=2, ndim=2\)"),
    ("reshape-two-unknown", lambda: xs.reshape(_coo(), (-1, -1)), ValueError,
     r"^reshape: shape may hold one -1 and otherwise non-negative sizes \(shape=\(-1, -1\)\)\. Fix the sizes\.$"),
    ("reshape-negative", lambda: xs.reshape(_coo(), (-2, 3)), ValueError, r"^reshape: shape may hold one -1"),
    ("reshape-ambiguous", lambda: xs.reshape(xs.sparse_coo_array(shape=(0, 2)), (0, -1)), ValueError,
     r"^reshape: -1 is ambiguous in a shape with a zero size \(shape=\(0, -1\), size=0\)\. Give every size\.$"),
    ("reshape-size-unknown", lambda: xs.reshape(_coo(), (4, -1)), ValueError,
     r"^reshape: cannot reshape an array of shape \(2, 3\) into shape \(4, -1\) \(size=6\)\. Keep the number of elements\.$"),
    ("reshape-size", lambda: xs.reshape(_coo(), (4, 2)), ValueError, r"^reshape: cannot reshape an array of shape \(2, 3\) into shape \(4, 2\)"),
    ("reshape-shape-type", lambda: xs.reshape(_coo(), (2.0, 3)), TypeError, r"^reshape: shape must be a tuple of integers \(shape=\(2\.0, 3\)\)\. Pass sizes as ints\.$"),
    # a 1-D array has __index__, which raised NumPy's own TypeError
    ("reshape-shape-array", lambda: xs.reshape(_coo(), np.asarray([6])), TypeError,
     r"^reshape: shape must be a tuple of integers \(shape=array\(\[6\]\)\)\. Pass sizes as ints\.$"),
    ("broadcast-shape-array", lambda: xs.broadcast_to(_csr(), np.asarray([2, 2])), TypeError,
     r"^broadcast_to: shape must be a tuple of integers \(shape=array\(\[2, 2\]\)\)\. Pass sizes as ints\.$"),
    ("reshape-copy-type", lambda: xs.reshape(_coo(), (3, 2), copy="no"), TypeError, r"^reshape: copy must be True, False or None \(copy='no'\)\. Pass a bool or None\.$"),
    ("reshape-coo-no-view", lambda: xs.reshape(_coo(), (3, 2), copy=False), ValueError,
     r"^reshape: a reshape of the sparse dimensions of a sparse_coo array builds new indices, so it cannot return a view "
     r"\(shape=\(2, 3\), new shape=\(3, 2\), copy=False\)\. Pass copy=None or copy=True\.$"),
    ("reshape-csr-no-view", lambda: xs.reshape(_csr(), (4,), copy=False), ValueError,
     r"^reshape: the new shape changes the sparse dimensions of a sparse_csr array, which needs new indices, so it cannot "
     r"return a view \(shape=\(2, 2\), new shape=\(4,\), sparse dimensions=\(2, 2\), copy=False\)\. Pass copy=None to reshape through COO\.$"),
    ("reshape-overflow", lambda: xs.reshape(xs.sparse_coo_array([[0], [0]], [1.0], (2**40, 2**40)), (2**41, 2**39)), ValueError,
     r"^reshape: the sparse dimensions \(1099511627776, 1099511627776\) have more positions than int64 can number\. Reshape fewer"),
    ("squeeze-size", lambda: xs.squeeze(_coo(), axis=1), ValueError,
     r"^squeeze: dimension 1 has size 3, not 1 \(axis=1, shape=\(2, 3\)\)\. Squeeze only dimensions of size 1\.$"),
    ("broadcast", lambda: xs.broadcast_to(_coo(), (2, 4)), ValueError,
     r"^broadcast_to: an array of shape \(2, 3\) does not broadcast to shape \(2, 4\) \(shape=\(2, 4\)\)\. Every dimension must equal"),
    ("broadcast-fewer", lambda: xs.broadcast_to(_coo(), (3,)), ValueError, r"^broadcast_to: an array of shape \(2, 3\) does not broadcast"),
    ("concat-not-list", lambda: xs.concat(_coo()), TypeError, r"^concat: expected a list or tuple of arrays, got COOArray\. Pass \[a, b, \.\.\.\]\.$"),
    ("concat-empty", lambda: xs.concat([]), ValueError, r"^concat: needs at least one array \(arrays=\[\]\)\. Pass a non-empty list of arrays\.$"),
    ("concat-item", lambda: xs.concat([_coo(), 1.0]), TypeError, r"^concat: expected an xsparse array or a backend array, got float"),
    ("concat-ndim", lambda: xs.concat([_coo(), xs.expand_dims(_coo(), axis=0)]), ValueError,
     r"^concat: the arrays must have one number of dimensions \(ndims=\[2, 3\]\)\. Add dimensions with expand_dims first"),
    ("concat-shapes", lambda: xs.concat([_coo(), _csr()], axis=0), ValueError,
     r"^concat: the shapes must agree except along axis 0 \(shapes=\[\(2, 3\), \(2, 2\)\], axis=0\)\. Make the other sizes equal\.$"),
    ("concat-strided-first", lambda: xs.concat([xs.to_dense(_csr()), _csr()]), xs.DensificationError,
     r"^concat: the first operand is strided and another is sparse_csr, so a result in the first's layout would densify it "
     r"\(layouts=\['strided', 'sparse_csr'\]\)\. Pass layout=xsparse\.strided to densify explicitly, or a sparse layout"),
    ("concat-no-blocksize", lambda: xs.concat([_csr(), _csr()], layout=xs.sparse_bsr), ValueError,
     r"^concat: layout=sparse_bsr needs a block shape, and no operand has one \(layouts=\['sparse_csr', 'sparse_csr'\]\)\. "
     r"Convert an operand with xsparse\.to_sparse_bsr\(a, blocksize=\(rows, columns\)\) first\.$"),
    ("concat-layout-cannot-hold", lambda: xs.concat([xs.to_sparse(np.ones((1, 2, 4)), sparse_dim=1)] * 2, layout=xs.sparse_csr), ValueError,
     r"^concat: a sparse_csr result cannot hold the joined array, a sparse_csr array needs 2 sparse dimensions before its dense "
     r"ones \(shape=\(2, 2, 4\), dense_dim=2\)\. Pass layout=xsparse\.sparse_coo, or give the operands a split that a "
     r"sparse_csr array holds first\.$"),
    ("concat-layout-blocks", lambda: xs.concat(
        [xs.to_sparse(np.ones((2, 3, 4)), layout=xs.sparse_bsc, dense_dim=1, blocksize=(2, 1)), xs.to_sparse_csc(np.ones((2, 3, 4)))],
        layout=xs.sparse_bsc), ValueError,
     r"^concat: a sparse_bsc result cannot hold the joined array, the blocksize \(2, 1\) does not divide the sparse dimensions "
     r"\(3, 4\) \(shape=\(4, 3, 4\), dense_dim=0, blocksize=\(2, 1\)\)\. Pass layout=xsparse\.sparse_coo"),
    ("concat-align-overflow", lambda: xs.concat([xs.sparse_coo_array([[0], [0]], [[1.0]], (2**40, 2**40, 1))] * 2, axis=2), ValueError,
     r"^concat: the sparse dimensions \(1099511627776, 1099511627776\) have more positions than int64 can number"),
    # the layout was read (layout.is_blocked) before convert_result checked it: a raw AttributeError
    ("concat-layout-type", lambda: xs.concat([_csr(), _csr()], layout="csr"), TypeError,
     r"^concat: layout must be an xsparse layout or None \(layout='csr'\)\. Pass e\.g\. xsparse\.sparse_csr"),
    ("vstack-layout-type", lambda: xs.vstack([_coo(), _coo()], layout=1), TypeError, r"^concat: layout must be an xsparse layout or None \(layout=1\)"),
    ("stack-layout-type", lambda: xs.stack([_coo(), _coo()], layout="coo"), TypeError, r"^stack: layout must be an xsparse layout or None \(layout='coo'\)"),
    ("unstack-layout-type", lambda: xs.unstack(_coo(), layout="coo"), TypeError, r"^unstack: layout must be an xsparse layout or None \(layout='coo'\)"),
    ("broadcast-arrays-layout-type", lambda: xs.broadcast_arrays(_coo(), layout="coo"), TypeError,
     r"^broadcast_arrays: layout must be an xsparse layout or None \(layout='coo'\)"),
    ("stack-shapes", lambda: xs.stack([_coo(), _csr()]), ValueError,
     r"^stack: the arrays must have one shape \(shapes=\[\(2, 3\), \(2, 2\)\]\)\. Make the shapes equal\.$"),
    ("hstack-not-list", lambda: xs.hstack(_coo()), TypeError, r"^hstack: expected a list or tuple of arrays"),
    ("broadcast-shapes", lambda: xs.broadcast_shapes((2, 3), (4, 3)), ValueError,
     r"^broadcast_shapes: the shapes \(2, 3\) and \(4, 3\) do not broadcast \(axis=-2, sizes=\[2, 4\]\)\. Make the sizes"),
    ("broadcast-shapes-type", lambda: xs.broadcast_shapes((2.0,)), TypeError, r"^broadcast_shapes: shape must be a tuple of integers"),
    ("broadcast-shapes-negative", lambda: xs.broadcast_shapes((-1,)), ValueError,
     r"^broadcast_shapes: a shape has a negative size \(shape=\(-1,\)\)\. Pass non-negative sizes\.$"),
    ("broadcast-arrays", lambda: xs.broadcast_arrays(_coo(), _csr()), ValueError, r"^broadcast_shapes: the shapes \(2, 3\) and \(2, 2\) do not broadcast"),
    ("broadcast-arrays-item", lambda: xs.broadcast_arrays(_coo(), [1]), TypeError, r"^broadcast_arrays: expected an xsparse array or a backend array, got list"),
    ("roll-shift-type", lambda: xs.roll(_coo(), 1.5, axis=0), TypeError, r"^roll: shift must be an integer, got float \(shift=1\.5\)\. Pass an integer\.$"),
    ("roll-flat-tuple", lambda: xs.roll(_coo(), (1, 2)), TypeError,
     r"^roll: shift must be one int when axis is None \(shift=\(1, 2\)\)\. Pass an int, or name the axes\.$"),
    ("roll-lengths", lambda: xs.roll(_coo(), (1, 2), axis=0), ValueError,
     r"^roll: shift and axis must have one entry per axis \(shift=\(1, 2\), axis=\(0,\)\)\. Pass as many shifts as axes"),
    ("roll-axis", lambda: xs.roll(_coo(), 1, axis=2), IndexError, r"^roll: axis is out of range for an array of 2 dimensions"),
    ("tile-type", lambda: xs.tile(_coo(), 2), TypeError, r"^tile: repetitions must be a tuple of integers \(repetitions=2\)\. Pass e\.g\. \(2, 1\)\.$"),
    ("tile-negative", lambda: xs.tile(_coo(), (1, -1)), ValueError, r"^tile: repetitions must be non-negative \(repetitions=\(1, -1\)\)\. Pass counts >= 0\.$"),
    ("repeat-negative", lambda: xs.repeat(_coo(), -1, axis=0), ValueError, r"^repeat: repeats must be non-negative \(repeats=-1\)\. Pass a count >= 0\.$"),
    ("repeat-type", lambda: xs.repeat(_coo(), 1.0, axis=0), TypeError, r"^repeat: repeats must be an integer, got float \(repeats=1\.0\)\. Pass an integer\.$"),
    ("repeat-0d-float", lambda: xs.repeat(_coo(), np.asarray(2.0), axis=0), TypeError,
     r"^repeat: repeats must be an integer, got ndarray \(repeats=array\(2\.\)\)\. Pass an integer\.$"),
    ("repeat-0d-negative", lambda: xs.repeat(_coo(), np.asarray(-1), axis=0), ValueError,
     r"^repeat: repeats must be non-negative \(repeats=-1\)\. Pass a count >= 0\.$"),
    ("repeat-array-shape", lambda: xs.repeat(_coo(), np.ones((2, 2), dtype=np.int64), axis=0), TypeError,
     r"^repeat: repeats must be an int or a 1-D integer array \(shape=\(2, 2\), dtype=int64\)\. Pass one count"),
    ("repeat-array-length", lambda: xs.repeat(_coo(), np.ones(3, dtype=np.int64), axis=0), ValueError,
     r"^repeat: repeats must hold one count or one per element along the axis \(len\(repeats\)=3, size=2\)\. Pass 2 counts\.$"),
    ("repeat-array-negative", lambda: xs.repeat(_coo(), np.asarray([1, -2]), axis=0), ValueError,
     r"^repeat: repeats must be non-negative \(min=-2\)\. Pass counts >= 0\.$"),
    ("repeat-sparse-shape", lambda: xs.repeat(_coo(), _csr(), axis=0), TypeError,
     r"^repeat: repeats must be an int or a 1-D integer array \(shape=\(2, 2\), dtype=float64\)\. Pass one count"),
    ("axis-array", lambda: xs.expand_dims(_coo(), axis=np.asarray([0])), TypeError,
     r"^expand_dims: axis must be an integer, got ndarray \(axis=array\(\[0\]\)\)\. Pass an integer\.$"),
    ("repeat-one-element-array", lambda: xs.tile(_coo(), (np.asarray([2]), 1)), TypeError,
     r"^tile: repetitions must be an integer"),
    ("unstack-axis", lambda: xs.unstack(_coo(), axis=2), IndexError, r"^unstack: axis is out of range for an array of 2 dimensions"),
    ("diff-0d", lambda: xs.diff(xs.sparse_coo_array(shape=())), ValueError,
     r"^diff: a 0-d array has no axis to take differences along \(shape=\(\)\)\. Reshape it to one dimension first\.$"),
    ("diff-bool", lambda: xs.diff(xs.sparse_coo_array([[0]], [True], (2,))), TypeError,
     r"^diff: the array must have a numeric dtype \(dtype=bool\)\. Compare neighbours with xsparse\.not_equal"),
    ("diff-n", lambda: xs.diff(_coo(), n=-1), ValueError, r"^diff: n must be non-negative \(n=-1\)\. Pass the number of differences"),
    ("diff-n-type", lambda: xs.diff(_coo(), n=1.0), TypeError, r"^diff: n must be an integer, got float \(n=1\.0\)\. Pass an integer\.$"),
    ("diff-prepend", lambda: xs.diff(_coo(), axis=0, prepend=np.zeros((1, 2))), ValueError, r"^concat: the shapes must agree except along axis 0"),
    ("layout-type", lambda: xs.roll(_coo(), 1, axis=0, layout="csr"), TypeError,
     r"^roll: layout must be an xsparse layout or None \(layout='csr'\)\. Pass e\.g\. xsparse\.sparse_csr"),
]


@pytest.mark.parametrize(("call", "error", "match"), [pytest.param(c, e, m, id=i) for i, c, e, m in ERRORS])
def test_errors(call: Callable[[], Any], error: type[BaseException], match: str) -> None:
    with pytest.raises(error, match=match):
        call()


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_repeat_reads_sparse_counts_as_counts(xp: Any, layout: xs.Layout, index_dtype: str) -> None:
    """A sparse ``repeats`` is read as the counts it holds (zeros unspecified), as a strided one would be."""
    dense = xp.asarray([[1.0, 0.0, 2.0, 0.0], [0.0, 3.0, 0.0, 0.0], [4.0, 0.0, 0.0, 5.0], [0.0, 0.0, 6.0, 0.0]], dtype=xp.float64)
    x = xs.to_sparse(dense, layout=layout, blocksize=(2, 2) if layout.is_blocked else None)
    counts = xp.asarray([2, 0, 1, 1], dtype=getattr(xp, index_dtype))
    for sparse_counts in (xs.to_sparse_coo(counts), xs.sparse_coo_array(xp.zeros((1, 0), dtype=xp.int64), xp.zeros((0,), dtype=counts.dtype), (4,))):
        expected = xp.repeat(dense, xs.to_dense(sparse_counts), axis=1)
        assert_sparse_equal(xs.repeat(x, sparse_counts, axis=1, layout=xs.sparse_coo), expected)
    # a 0-d sparse count is an integer
    assert_sparse_equal(xs.repeat(x, xs.to_sparse_coo(xp.asarray(2)), axis=0, layout=xs.sparse_coo), xp.repeat(dense, 2, axis=0))


def test_repeat_reads_a_0d_count_as_an_int(backend: str, xp: Any, layout: xs.Layout) -> None:
    """A 0-d integer array (a NumPy integer among them) is one count, as for NumPy and torch and as a 0-d
    sparse count is; it was refused as not 1-D."""
    dense = xp.asarray([[1.0, 0.0, 2.0, 0.0], [0.0, 3.0, 0.0, 0.0]], dtype=xp.float64)
    x = xs.to_sparse(dense, layout=layout, blocksize=(2, 2) if layout.is_blocked else None)
    counts = [xp.asarray(2)] + ([np.int64(2)] if backend == "numpy" else [])
    for count in counts:
        assert_sparse_equal(xs.repeat(x, count, axis=1), xp.repeat(dense, 2, axis=1))
        assert_sparse_equal(xs.repeat(x, count), xp.repeat(dense, 2))


def test_concat_in_a_layout_without_a_join_kernel() -> None:
    """A semi-structured first operand (or layout=) has no join kernel: the error names concat and says which
    layout to pass, where the conversion of the operands to it failed with to_sparse's message."""
    d = np.tile(np.asarray([0, 3, 0, 1], dtype=np.float16), (64, 16))
    w, c = xs.to_sparse_semi_structured(d), xs.to_sparse_csr(d)
    for call, layouts, layout in (
        (lambda: xs.concat([w, c]), r"\['sparse_semi_structured', 'sparse_csr'\]", "None"),
        (lambda: xs.concat([c, c], axis=1, layout=xs.sparse_semi_structured), r"\['sparse_csr', 'sparse_csr'\]", "sparse_semi_structured"),
    ):
        with pytest.raises(
            xs.NoKernelError,
            match=rf"^concat: no kernel joins sparse_semi_structured arrays on backend 'numpy' \(layouts={layouts}, layout={layout}\)\. "
            r"Pass a layout to join in, e\.g\. layout=xsparse\.sparse_csr, or convert the operands first\.$",
        ):
            call()
    r = xs.concat([w, c], layout=xs.sparse_csr)
    assert r.layout is xs.sparse_csr
    assert_sparse_equal(r, np.concatenate([d, d]))


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_bsr])
def test_tile_of_one_entry_gives_contiguous_values(layout: xs.Layout) -> None:
    # torch keeps the reshape of a broadcast single entry as a zero-stride view
    import torch

    d = torch.tensor([[True, True], [False, True]])
    kwargs: dict[str, Any] = {"blocksize": (1, 1)} if layout is xs.sparse_bsr else {}
    a = xs.to_sparse(d, layout=layout, fill_value=True, **kwargs)
    assert_sparse_equal(xs.tile(a, (2, 1)), torch.tile(d, (2, 1)))


def test_torch_bsr_with_empty_values_converts_to_sorted_coo() -> None:
    # A dense dimension of size 0 leaves the values empty; torch then marks its block-ordered COO
    # indices coalesced. Found by test_public_function (tile by 0 along a dense dimension).
    torch = pytest.importorskip("torch")
    a = np.zeros((4, 2, 2, 2), bool)
    a[3, 0, 0, 0] = True
    s = xs.to_sparse(torch.from_numpy(a), layout=xs.sparse_bsr, blocksize=(2, 1), dense_dim=2)
    tiled = xs.tile(s, (1, 2, 0, 1))
    coo = xs.to_sparse_coo(tiled)
    check_invariants(coo)
    expected = xs.to_sparse_coo(xs.tile(xs.to_sparse(a, layout=xs.sparse_bsr, blocksize=(2, 1), dense_dim=2), (1, 2, 0, 1)))
    np.testing.assert_array_equal(np.asarray(coo.indices()), np.asarray(expected.indices()))


@SOME
@given(data=st.data())
def test_numpy_coo_renumbering_matches_the_generic_one(data: st.DataObject) -> None:
    """The NumPy reshape's in-place renumbering gives the generic kernel's indices, for any two shapes of
    one size, int32 and int64 results, and no entries."""
    from xsparse.backends.array_api.shape import reindex
    from xsparse.backends.numpy.shape import _renumber

    xp = xs.get_backend("numpy").namespace()
    old = tuple(data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=4), label="old"))
    size = math.prod(old)
    new: list[int] = []
    rest = size
    while rest > 1 and len(new) < 4:
        d = data.draw(st.sampled_from([f for f in range(1, rest + 1) if rest % f == 0]), label="factor")
        new.append(d)
        rest //= d
    new.append(rest)
    new += [1] * data.draw(st.integers(0, 1), label="ones")
    dtype = data.draw(st.sampled_from([np.int32, np.int64]), label="dtype")
    nse = data.draw(st.integers(0, 20), label="nse")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    indices = np.stack([rng.integers(0, s, nse) for s in old]).astype(data.draw(st.sampled_from([np.int32, np.int64])))
    ours = _renumber(xp, indices, old, tuple(new), dtype)
    expected = reindex(xp, xp.asarray(indices), old, tuple(new), dtype)
    assert ours.dtype == expected.dtype and ours.shape == expected.shape
    np.testing.assert_array_equal(ours, expected)


def test_numpy_coo_concat_offsets_past_int32() -> None:
    """Joined along rows, int32 operands whose offset rows pass int32: the result's int64 indices hold
    them (the offset is added in the widened dtype, not wrapped in the operands' own)."""
    big = 2**31 - 10
    a = xs.sparse_coo_array(np.array([[big - 1], [0]], np.int32), np.array([1.0]), (big, 3))
    b = xs.sparse_coo_array(np.array([[100], [1]], np.int32), np.array([2.0]), (50_000, 3))
    kernel = next(k for k in dispatch.resolve("concat", (xs.sparse_coo,), "numpy") if k.backend == "numpy")
    xp = xs.get_backend("numpy").namespace()
    for r in (kernel.func(xp, [a, b], 0), xs.concat([a, b])):
        assert dtype_name(r.index_dtype) == "int64"
        np.testing.assert_array_equal(to_numpy(r.indices()), [[big - 1, big + 100], [0, 1]])


def test_repeat_of_coo_costs_its_entries_not_its_length(backend: str, xp: Any) -> None:
    # O(result nnz): an array the length of the dimension (2**40 here) was allocated for one repeat count
    a = xs.sparse_coo_array(xp.asarray([[5, 2**39]]), xp.asarray([1.0, 2.0]), (2**40,))
    r = xs.repeat(a, 3)
    assert r.shape == (3 * 2**40,) and r.nnz == 6
    assert to_numpy(r._indices()).tolist() == [[15, 16, 17, 3 * 2**39, 3 * 2**39 + 1, 3 * 2**39 + 2]]
    assert to_numpy(r._values()).tolist() == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]


def test_stack_of_semi_structured_arrays_converts_to_the_layout_asked() -> None:
    # a semi-structured array is one 2-D matrix: stack converts it to the layout asked for, and without
    # one says so itself (the error named expand_dims)
    w = np.tile(np.asarray([0, 0, 1, 1], dtype=np.float16), (64, 16)) * np.arange(1, 65, dtype=np.float16)[:, None]
    s, c = xs.to_sparse_semi_structured(w), xs.to_sparse_csr(w)
    with pytest.raises(xs.NoKernelError, match=r"^stack: sparse_semi_structured arrays take no new dimension \(layouts=\['sparse_csr', 'sparse_semi_structured'\]\)\. Pass a layout"):
        xs.stack([c, s])
    co = xs.to_sparse_coo(w)
    for other, layout, axis in ((c, xs.sparse_csr, 0), (co, xs.sparse_coo, 1), (co, xs.strided, 2)):
        r = xs.stack([other, s], axis=axis, layout=layout)
        assert (r.layout if isinstance(r, xs.SparseArray) else xs.strided) is layout
        np.testing.assert_array_equal(to_numpy(xs.to_dense(r) if isinstance(r, xs.SparseArray) else r), np.stack([w, w], axis=axis))


@pytest.mark.parametrize("backend", TESTED_BACKENDS)
def test_an_uncoalesced_operand_is_summed_before_its_values_are_cast(backend: str) -> None:
    # a cast does not commute with the sum of duplicates, which the values mean: float32's 1e8 + 1 is 1e8
    # and uint8's 200 + 100 is 44. The joins, add/subtract (which concatenate COO entries) and the products
    # cast an operand's values to the promoted dtype: they cast its duplicates one by one, and gave
    # 100000001 and 300 where the dense arrays give 1e8 and 44.
    if backend_skip_reason(backend):
        pytest.skip(backend_skip_reason(backend))

    def on(x: Any) -> Any:
        return xs.to_backend(x, backend)

    for values, other_dtype in ((np.array([1e8, 1.0], np.float32), np.float64), (np.array([200, 100], np.uint8), np.int16)):
        u = on(xs.sparse_coo_array(np.array([[0, 0], [1, 1]]), values, (2, 2)))
        v = on(xs.sparse_coo_array(np.array([[0], [1]]), np.array([1], other_dtype), (2, 2)))
        du = to_numpy(xs.to_dense(u)).astype(other_dtype)  # the dense array, then the cast
        dv = to_numpy(xs.to_dense(v))
        w = on(xs.asarray(np.array([[1, 2], [3, 4]], other_dtype)))
        cases = {
            "concat": (lambda: xs.concat([u, v]), np.concatenate([du, dv])),
            "stack": (lambda: xs.stack([v, u], axis=1), np.stack([dv, du], axis=1)),
            "add": (lambda: xs.add(u, v), du + dv),
            "subtract": (lambda: xs.subtract(v, u), dv - du),
            "matmul": (lambda: xs.matmul(u, w), du @ to_numpy(w)),
            "rmatmul": (lambda: xs.matmul(w, u), to_numpy(w) @ du),
            "vecdot": (lambda: xs.vecdot(u, w), np.sum(du * to_numpy(w), axis=-1)),
        }
        for name, (compute, expected) in cases.items():
            actual = compute()
            dense = to_numpy(xs.to_dense(actual) if isinstance(actual, xs.SparseArray) else actual)
            np.testing.assert_array_equal(dense, expected.astype(dense.dtype), err_msg=f"{name} of {values.dtype}")


def test_torch_hybrid_diagonal_of_one_element_is_densified_right() -> None:
    # the diagonal of a COO array's two dense dimensions is a view of its values; with one element of shape
    # (1, 1) torch calls it contiguous whatever its strides (3, 4), and its sparse kernels misread it: the
    # unspecified row came out as 3.0 (or the process aborted with a heap error)
    if backend_skip_reason("torch"):
        pytest.skip(backend_skip_reason("torch"))
    for shape, offset in (((2, 1, 3), 1), ((1, 4, 3), 2), ((1, 3, 3), 2)):
        d = np.zeros(shape)
        d[0] = np.arange(1.0, shape[1] * shape[2] + 1).reshape(shape[1:])
        for layout in (xs.sparse_coo, xs.sparse_csr):
            if layout is xs.sparse_csr:
                a = xs.to_sparse(xs.to_backend(np.stack([d, d]), "torch"), layout=layout, dense_dim=2)
                expected = np.diagonal(np.stack([d, d]), offset, -2, -1)
            else:
                a = xs.to_sparse(xs.to_backend(d, "torch"), sparse_dim=1)
                expected = np.diagonal(d, offset, -2, -1)
            r = xs.linalg.diagonal(a, offset=offset)
            np.testing.assert_array_equal(to_numpy(xs.to_dense(r)), expected)


# -- block_diag ----------------------------------------------------------------------------------------


def _host_block_diag(hosts: list[np.ndarray]) -> np.ndarray:
    """SciPy's ``block_diag`` rule by hand: a 0-d array is 1 x 1, a 1-D one a row."""
    mats = [h.reshape(1, -1) if h.ndim < 2 else h for h in hosts]
    dtype = np.result_type(*mats) if mats else np.float64
    out = np.zeros((sum(m.shape[0] for m in mats), sum(m.shape[1] for m in mats)), dtype=dtype)
    r = c = 0
    for m in mats:
        out[r : r + m.shape[0], c : c + m.shape[1]] = m
        r, c = r + m.shape[0], c + m.shape[1]
    return out


@st.composite
def block_diag_operand(draw: Any, xp: Any, layout: xs.Layout, dtype: str, blocksize: tuple[int, int]) -> Any:
    """A matrix of ``layout`` and fill value 0 (COO and strided also 0-d, 1-D, and hybrid COO matrices)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if layout in (xs.strided, xs.sparse_coo):
        shape = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
        host = (rng.integers(-4, 5, size=shape) * (rng.random(shape) < draw(st.sampled_from([0.0, 0.5, 1.0])))).astype(dtype)
        if layout is xs.strided:
            return xp.asarray(host)
        a = xs.to_sparse_coo(xp.asarray(host), draw(st.integers(0, len(shape))), index_dtype=draw(S.index_dtypes()))
        return S.uncoalesced_like(xp, rng, a, dtype_name(a.index_dtype)) if a.nnz and draw(st.booleans()) else a
    m, n = blocksize[0] * draw(st.integers(0, 3)), blocksize[1] * draw(st.integers(0, 3))
    blocks = rng.random((m // blocksize[0], n // blocksize[1])) < draw(st.sampled_from([0.0, 0.5, 1.0]))
    host = np.kron(blocks, np.ones(blocksize)) * rng.integers(1, 5, size=(m, n)) if blocks.size else np.zeros((m, n))
    kw = {"blocksize": blocksize} if layout.is_blocked else {}
    return xs.to_sparse(xp.asarray(host.astype(dtype)), layout=layout, index_dtype=draw(S.index_dtypes()), **kw)


@pytest.mark.parametrize("layout", [xs.strided, *SPARSE_LAYOUTS], ids=str)
@SOME
@given(data=st.data())
def test_block_diag(backend: str, xp: Any, layout: xs.Layout, data: st.DataObject) -> None:
    """block_diag of operands of ``layout`` and others equals SciPy's rule on the dense arrays, in the first
    operand's layout (or ``layout=``); the compressed kernel's components are those of the COO route."""
    dtype = data.draw(st.sampled_from(["float64", "int64"]), label="dtype")
    bs = (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))) if layout.is_blocked else (1, 1)
    layouts = [layout, *data.draw(st.lists(st.sampled_from([layout, xs.strided, xs.sparse_coo, xs.sparse_csr]), max_size=3))]
    if layout.is_blocked:
        layouts = [layout] * len(layouts)  # whole blocks
    arrays = [data.draw(block_diag_operand(xp, lay, dtype, bs), label=f"operand {i}") for i, lay in enumerate(layouts)]
    expected = _host_block_diag([to_numpy(xs.to_dense(a)) if isinstance(a, xs.SparseArray) else to_numpy(a) for a in arrays])
    target = data.draw(st.sampled_from([None, None, xs.sparse_coo, xs.sparse_csr, xs.strided]), label="target")
    if target is None and layout is xs.strided and any(isinstance(a, xs.SparseArray) for a in arrays):
        with pytest.raises(xs.DensificationError, match=r"^block_diag: the first operand is strided"):
            xs.block_diag(*arrays)
        return
    result = xs.block_diag(*arrays, layout=target)
    assert xs.layout_of(result) is (target or layout)
    assert_sparse_equal(result, xp.asarray(expected))
    sparse = [a for a in arrays if isinstance(a, xs.SparseArray)]
    if isinstance(result, (xs.COOArray, xs.CompressedArray)) and sparse:
        wide = any(dtype_name(a.index_dtype) == "int64" for a in sparse)
        assert dtype_name(result.index_dtype) == ("int64" if wide else "int32")
        if result.layout.is_blocked:
            assert result.blocksize == bs
        if isinstance(result, xs.CompressedArray):
            via_coo = xs.to_sparse(xs.block_diag(*arrays, layout=xs.sparse_coo), layout=result.layout, blocksize=result.blocksize if result.layout.is_blocked else None)
            assert_same_components(result, via_coo)


def test_block_diag_shapes_dtypes_and_errors(backend: str, xp: Any) -> None:
    a = xs.to_sparse_csr(xp.asarray(np.asarray([[1.0, 0.0], [0.0, 2.0]])))
    # torch's rule for fewer dimensions: 0-d is 1 x 1, 1-D a row; an empty row or column takes its place
    r = xs.block_diag(a, xs.to_sparse_coo(xp.asarray(np.asarray(3.0))), xp.asarray(np.zeros((0,))), xp.asarray(np.zeros((2, 0))))
    assert r.shape == (6, 3) and r.layout is xs.sparse_csr and r.nnz == 3
    assert_sparse_equal(r, xp.asarray(_host_block_diag([np.diag([1.0, 2.0]), np.asarray(3.0), np.zeros(0), np.zeros((2, 0))])))
    mixed = xs.block_diag(xs.to_sparse_coo(xp.asarray(np.asarray([[1, 2]], dtype=np.float32))), a)
    assert mixed.dtype == xp.float64 and mixed.layout is xs.sparse_coo and mixed.is_coalesced()
    assert xs.layout_of(xs.block_diag(xp.asarray(np.eye(2)), xp.asarray(np.eye(1)))) is xs.strided
    with pytest.raises(ValueError, match=r"^block_diag: needs at least one array \(arrays=\(\)\)\. Pass"):
        xs.block_diag()
    with pytest.raises(ValueError, match=r"^block_diag: every array must have 2 dimensions or fewer \(shapes=\[\(2, 2\), \(1, 1, 1\)\]\)\. Pass"):
        xs.block_diag(a, xp.asarray(np.ones((1, 1, 1))))
    one = xs.to_sparse_coo(xp.asarray(np.eye(2)), fill_value=1.0)
    with pytest.raises(xs.DensificationError, match=r"^block_diag: the blocks off the diagonal are zeros, and array 1 has fill value 1\.0"):
        xs.block_diag(a, one)
    assert_sparse_equal(xs.block_diag(a, one, layout=xs.strided), xp.asarray(_host_block_diag([np.diag([1.0, 2.0]), np.eye(2)])))
    b = xs.to_sparse_bsr(xp.asarray(np.ones((2, 2))), blocksize=(2, 2))
    with pytest.raises(ValueError, match=r"^block_diag: the block shape \(2, 2\) of a sparse_bsr result must divide every array \(shapes=\[\(2, 2\), \(1, 1\)\]\)\. Pass"):
        xs.block_diag(b, xp.asarray(np.ones((1, 1))))
    with pytest.raises(ValueError, match=r"^block_diag: layout=sparse_bsr needs a block shape, and no array has one"):
        xs.block_diag(a, layout=xs.sparse_bsr)
    with pytest.raises(xs.BackendMismatchError, match=r"^block_diag: "):
        xs.block_diag(a, xs.to_sparse_csr(np.eye(2)) if backend != "numpy" else xs.to_backend(xs.to_sparse_csr(np.eye(2)), "array_api_strict"))


def test_block_diag_widens_indices_that_int32_cannot_hold() -> None:
    big = xs.sparse_coo_array(np.asarray([[0], [0]], dtype=np.int32), [1.0], (2**30, 1))
    r = xs.block_diag(big, big, big)
    assert r.shape == (3 * 2**30, 3) and r.indices().dtype == np.int64
    assert r.indices().tolist() == [[0, 2**30, 2**31], [0, 1, 2]]


def test_diff_of_batches_with_prepend_and_append(backend: str, xp: Any) -> None:
    # the values joined to each batch may differ in number, which a batched compressed array cannot hold
    # (invariant 3.9): the join raised an error naming to_sparse; the differences are padded as without them
    d = np.array([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 2.0], [0.0, 0.0]]])
    x = xs.to_sparse(xp.asarray(d), layout=xs.sparse_csr)
    for axis, kw in ((2, {"prepend": np.array([[[5.0], [0.0]], [[0.0], [0.0]]])}), (1, {"append": np.ones((2, 1, 2)), "n": 2}), (0, {"prepend": np.ones((1, 2, 2))})):
        r = xs.diff(x, axis=axis, **{k: xp.asarray(v) if k != "n" else v for k, v in kw.items()})
        assert_sparse_equal(r, xp.asarray(np.diff(d, axis=axis, **kw)), check_layout=xs.sparse_csr)


def test_diff_with_a_sparse_prepend_split_otherwise(backend: str, xp: Any) -> None:
    """A sparse prepend or append whose split into sparse and dense dimensions differs from x's (all-sparse
    COO beside a hybrid CSR or BSR array): the differences are computed and returned in COO, with the
    warning, as joins of such operands are. x's layout could hold them with one of the splits only: the
    join raised LayoutError, or returned another batch and dense split silently."""
    h0 = np.where(np.arange(24).reshape(1, 3, 4, 2) % 3 == 0, 1.0, 0.0)
    h = np.concatenate([h0, 2 * h0])  # one number of entries per batch
    p = np.ones((1, 3, 4, 2))
    cases = [
        (xs.to_sparse(xp.asarray(h), layout=xs.sparse_csr, dense_dim=1), h, {"prepend": p}),
        (xs.to_sparse(xp.asarray(h[0]), layout=xs.sparse_csr, dense_dim=1), h[0], {"append": p[0, :1]}),
        (xs.to_sparse(xp.asarray(np.ones((3, 4, 1, 1))), layout=xs.sparse_bsr, blocksize=(2, 1), dense_dim=1), np.ones((3, 4, 1, 1)), {"prepend": np.ones((1, 4, 1, 1))}),
    ]
    for x, host, kw in cases:
        sparse_kw = {k: xs.to_sparse(xp.asarray(v)) for k, v in kw.items()}
        with pytest.warns(xs.SparseEfficiencyWarning, match=r"^diff: prepend or append is split into sparse and dense dimensions otherwise than x"):
            r = xs.diff(x, axis=0, **sparse_kw)
        assert_sparse_equal(r, xp.asarray(np.diff(host, axis=0, **kw)), check_layout=xs.sparse_coo)
        # with x's split, x's layout and split are kept
        kept = xs.diff(x, axis=0, **{k: xp.asarray(v) for k, v in kw.items()})
        assert kept.layout is x.layout and kept.dense_dim() == x.dense_dim()
        assert_sparse_equal(kept, xp.asarray(np.diff(host, axis=0, **kw)))
