"""Elementwise functions: every unary and binary function on every layout, against the same backend's
dense computation.

Inputs come from ``tests/strategies.py``: arrays of every layout with batch and dense dimensions, fill
values 0 and non-zero, int32 and int64 indices, uncoalesced COO with duplicates, and for binary
functions a second operand of a compatible structure that may be broadcast (size-1 and missing leading
dimensions, on either side), a Python scalar, or a 0-d array. The oracle is
:func:`xsparse.testing.assert_sparse_equal` (every invariant of the result, then its elements against
the dense computation, NaNs equal). The operations and their signatures come from the registry, so a
new elementwise kernel is tested the day it is registered.

Every computation runs under ``numpy.errstate(all="ignore")``: array_api_strict computes with NumPy,
and warns where NumPy does (the NumPy backend's own kernels never warn, which a test below checks).
"""

from __future__ import annotations

import doctest
import importlib.util
import math
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from conftest import backend_params, backend_skip_reason, load_native_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import special

import strategies as S
import xsparse as xs
from xsparse import dispatch
from xsparse._common import dtype_name
from xsparse.backends.array_api import elementwise as generic
from xsparse.testing import apply_products_rule, apply_zero_ties_rule, assert_sparse_equal, generic_to_dense, maps_duplicates, to_numpy
# The dtypes each function is tested with are the conformance suite's: those for which NumPy, torch
# and array_api_strict all define it (the Array API's, where a library is stricter than the standard).
from xsparse.conformance.strategies import is_fill
from xsparse.conformance.cases import GENERIC_SIGNS_WRONG, BINARY_DTYPES, BOOL, COMPLEX, FLOATS, INTS, SIGNED, UNARY_DTYPES

load_native_kernels()

HAS_TORCH = importlib.util.find_spec("torch") is not None
BACKENDS = ["numpy", "torch", "array_api_strict"]
SPARSE_LAYOUTS = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
LAYOUTS = [xs.strided, *SPARSE_LAYOUTS]
FEW = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SOME = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
MESSAGE_SHAPE = re.compile(r"[^\s:][^:\n]*: \S.*?[^.\s]\. [A-Z].*\.", re.S)

# torch raises ZeroDivisionError for an integer divided by 0; xsparse gives NumPy's 0 there, so NumPy
# computes the dense reference of these on torch (see _reference)
INTEGER_DIVISION = frozenset({"floor_divide", "remainder"})
# the second operand must not be negative (shift amounts, integer exponents)
NON_NEGATIVE_SECOND = frozenset({"bitwise_left_shift", "bitwise_right_shift", "pow"})

UNARY_OPS = sorted({*generic.UNARY, *generic.NATIVE_ONLY_UNARY, "clip"})
# The values of a compressed array that torch's conversion made are torch's ``values()`` alias of the
# sparse tensor, on which a view (``real``, ``imag``, ...) raises; see test_torch_values_alias below.
TORCH_VALUES_ALIAS_OPS = frozenset({"angle", "imag", "isfinite", "real", "round"})
BINARY_OPS = sorted(generic.BINARY)


@contextmanager
def quiet() -> Iterator[None]:
    with np.errstate(all="ignore"):
        yield


def _dtypes_for(table: dict[str, tuple[str, ...]], op: str, backend: str, xp: Any) -> list[str]:
    names = [d for d in table[op] if hasattr(xp, d)]
    if backend == "array_api_strict" and op in ("add", "multiply"):
        names = [d for d in names if d != "bool"]  # the standard's arithmetic is numeric only
    return names


def _tolerance(result: Any) -> dict[str, float]:
    name = dtype_name(result.dtype)
    if name in ("float32", "complex64"):
        return {"rtol": 2e-6, "atol": 1e-6}
    if name in ("float64", "complex128"):
        return {"rtol": 1e-12, "atol": 1e-12}
    return {}


def _is_nan(v: Any) -> bool:
    return bool(v != v)


# -- operands ----------------------------------------------------------------------------------------


def _specified(h: np.ndarray, fill: Any, dense_dim: int) -> np.ndarray:
    # a zero of the other sign than the fill value is specified, as in the conversions
    mask = ~is_fill(h, fill)
    if dense_dim:
        lead = mask.shape[: mask.ndim - dense_dim]
        mask = mask.reshape(*lead, math.prod(mask.shape[mask.ndim - dense_dim :])).any(axis=-1)
    return mask


def _valid_layouts(h: np.ndarray, fill: Any, dense_dim: int, blocksize: tuple[int, int]) -> list[xs.Layout]:
    """The layouts the host array ``h`` converts to with this split (invariant 3.9 for batches)."""
    out = [xs.strided, xs.sparse_coo]
    nb = h.ndim - 2 - dense_dim
    if nb < 0:
        return out
    m, n = h.shape[nb], h.shape[nb + 1]
    mask = _specified(h, fill, dense_dim).reshape(math.prod(h.shape[:nb]), m, n)
    per_batch = mask.reshape(mask.shape[0], m * n).sum(axis=1)
    if len(set(per_batch.tolist())) <= 1:
        out += [xs.sparse_csr, xs.sparse_csc]
    bm, bn = blocksize
    if m % bm == 0 and n % bn == 0:
        blocks = mask.reshape(mask.shape[0], m // bm, bm, n // bn, bn).any(axis=(2, 4))
        if len(set(blocks.reshape(blocks.shape[0], (m // bm) * (n // bn)).sum(axis=1).tolist())) <= 1:
            out += [xs.sparse_bsr, xs.sparse_bsc]
    return out


def _convert(xp: Any, h: np.ndarray, layout: xs.Layout, fill: Any, dense_dim: int, blocksize: tuple[int, int], index_dtype: str) -> Any:
    x = xp.asarray(h)
    if layout is xs.strided:
        return x
    kw: dict[str, Any] = {"layout": layout, "index_dtype": index_dtype, "fill_value": fill}
    if layout is xs.sparse_coo:
        kw["sparse_dim"] = h.ndim - dense_dim
    else:
        kw["dense_dim"] = dense_dim
    if layout.is_blocked:
        kw["blocksize"] = blocksize
    return xs.to_sparse(x, **kw)


def _companion(rng: np.random.Generator, case: S.DenseCase, dtype: str, fill: Any) -> np.ndarray:
    """An array of the case's shape whose specified positions are the case's, flipped along both sparse
    dimensions (which keeps every batch's element and block counts), with new values and fill value."""
    nb = case.batch_dim
    mask = _specified(case.host, case.fill_value, case.dense_dim)
    mask = np.flip(mask, axis=(nb, nb + 1))
    out = np.full(case.shape, fill, dtype=np.dtype(dtype))
    count = int(mask.sum())
    out[mask] = S.nonzero_values(rng, dtype, count * math.prod(case.dense_shape), fill).reshape(count, *case.dense_shape)
    return out


def _scalar_of(rng: np.random.Generator, dtype: str, non_negative: bool) -> Any:
    if dtype == "bool":
        return bool(rng.integers(0, 2))
    if dtype.startswith(("int", "uint")):
        return int(rng.integers(0 if non_negative or dtype == "uint8" else -3, 4))
    if dtype.startswith("float"):
        return float(rng.choice([0.0, 1.5, -2.0, 0.5, math.inf]))
    return complex(rng.choice([1 + 1j, -2.0 + 0j, 0j]))


def _same_kind(dtype: str, allowed: tuple[str, ...]) -> list[str]:
    kind = next(k for k in (BOOL, INTS, FLOATS, COMPLEX) if dtype in k)
    return [d for d in allowed if d in kind]


@st.composite
def unary_operands(draw: Any, xp: Any, op: str, backend: str) -> Any:
    """A strided or sparse array (uncoalesced COO included) of a dtype ``op`` accepts."""
    dtype = draw(st.sampled_from(_dtypes_for(UNARY_DTYPES, op, backend, xp)))
    case = draw(S.dense_cases(xp, dtype=dtype, fill=None, max_batch_dims=1, max_dense_dims=1))
    layouts = LAYOUTS
    if backend == "torch" and op in TORCH_VALUES_ALIAS_OPS and dtype in COMPLEX:
        layouts = [xs.strided, xs.sparse_coo]  # the compressed ones: test_torch_values_alias
    layout = draw(st.sampled_from(layouts))
    x = case.sparse(layout)
    if layout is xs.sparse_coo and draw(st.booleans()):
        x = S.uncoalesced_like(xp, np.random.default_rng(draw(st.integers(0, 2**32 - 1))), x, case.index_dtype)
    return x


@st.composite
def binary_operands(draw: Any, xp: Any, op: str, backend: str) -> tuple[Any, Any]:
    """Two operands for ``op``: arrays of any two layouts whose shapes broadcast, or an array and a scalar."""
    allowed = tuple(_dtypes_for(BINARY_DTYPES, op, backend, xp))
    dt1 = draw(st.sampled_from(allowed))
    dt2 = draw(st.sampled_from(_same_kind(dt1, allowed)))
    case = draw(S.dense_cases(xp, dtype=dt1, fill=None, max_batch_dims=1, max_dense_dims=1))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    fill2 = draw(st.sampled_from([np.zeros((), dtype=np.dtype(dt2)).item(), draw(S.fill_values(dt2))]))
    h1, h2 = case.host, _companion(rng, case, dt2, fill2)
    fills = [case.fill_value, fill2]
    dense_dims = [case.dense_dim, case.dense_dim]
    hosts = [h1, h2]
    # broadcasting: one operand gets size-1 dimensions and may lose leading ones
    small = draw(st.integers(0, 1))
    h = hosts[small]
    for axis in range(h.ndim):
        if h.shape[axis] > 1 and draw(st.integers(0, 3)) == 0:
            h = h[(slice(None),) * axis + (slice(0, 1),)]
    droppable = 0
    while droppable < h.ndim - dense_dims[small] and h.shape[droppable] > 0:
        droppable += 1
    drop = draw(st.integers(0, droppable)) if draw(st.booleans()) else 0
    h = h[(0,) * drop]
    hosts[small] = h
    kinds = draw(st.sampled_from(["arrays", "arrays", "arrays", "scalar first", "scalar second"]))
    operands = []
    for i in range(2):
        h = hosts[i]
        if (kinds == "scalar first" and i == 0) or (kinds == "scalar second" and i == 1):
            # the scalar takes the kind (and range) of the other operand's dtype
            operands.append(_scalar_of(rng, dt1 if i else dt2, op in NON_NEGATIVE_SECOND and i == 1))
            continue
        if op in NON_NEGATIVE_SECOND and i == 1:
            h = np.abs(h)
            fills[1] = abs(fills[1])
        layout = draw(st.sampled_from(_valid_layouts(h, fills[i], dense_dims[i], case.blocksize)))
        if layout is xs.strided and h.ndim == 0 and draw(st.booleans()):
            operands.append(xp.asarray(h))
            continue
        x = _convert(xp, h, layout, fills[i], dense_dims[i], case.blocksize, case.index_dtype)
        if layout is xs.sparse_coo and draw(st.integers(0, 2)) == 0:
            x = S.uncoalesced_like(xp, rng, x, case.index_dtype)
        operands.append(x)
    return operands[0], operands[1]


def _dense(x: Any) -> Any:
    return generic_to_dense(x) if isinstance(x, xs.SparseArray) else x


def _expected_layout(op: str, x: Any, y: Any) -> xs.Layout:
    # a 0-d sparse operand beside an array of more dimensions acts as the 0-d strided array of its element
    x, y = (xs.to_dense(a) if isinstance(a, xs.SparseArray) and a.ndim == 0 and getattr(b, "ndim", 0) > 0 else a for a, b in ((x, y), (y, x)))
    sparse = [a for a in (x, y) if isinstance(a, xs.SparseArray)]
    if not sparse:
        return xs.strided
    if isinstance(x, xs.SparseArray) and isinstance(y, xs.SparseArray):
        return x.layout
    other = y if sparse[0] is x else x
    if not hasattr(other, "shape") or other.ndim == 0:
        return sparse[0].layout
    if op in generic.ANNIHILATING and sparse[0].fill_value == 0:
        return sparse[0].layout
    return xs.strided


def _reference(xp: Any, op: str, x: Any, y: Any) -> Any:
    """``xp.<op>`` of the dense operands; for torch's integer division (which raises for a 0 divisor) and
    remainder, NumPy's."""
    dx, dy = _dense(x), _dense(y)
    integer = all(isinstance(v, int) or not isinstance(v, (float, complex)) and xp.isdtype(v.dtype, "integral") for v in (dx, dy))
    # torch's zero remainder takes the dividend's sign; the standard's (and NumPy's, and xsparse's) the divisor's
    numpy_reference = op in INTEGER_DIVISION and integer or op == "remainder"
    if "torch" not in xp.__name__ or not numpy_reference:
        return getattr(xp, op)(dx, dy)
    import torch

    out = getattr(np, op)(*(v if isinstance(v, (int, float, complex)) else to_numpy(v) for v in (dx, dy)))
    return torch.from_numpy(np.asarray(out))


def check_binary(xp: Any, op: str, x: Any, y: Any) -> Any:
    """``xs.<op>(x, y)`` against ``xp.<op>`` of the dense operands, with the expected result layout and
    the documented signs of zeros of products (:func:`xsparse.testing.apply_products_rule`) and of
    ``maximum`` and ``minimum`` of two zeros (:func:`xsparse.testing.apply_zero_ties_rule`)."""
    with quiet():
        result = getattr(xs, op)(x, y)
        expected = _reference(xp, op, x, y)
    # NumPy's functions give NumPy scalars for 0-d operands
    result, expected = (np.asarray(r) if isinstance(r, np.generic) else r for r in (result, expected))
    expected = apply_zero_ties_rule(op, x, y, result, apply_products_rule(op, x, y, result, expected))
    assert_sparse_equal(
        result, expected, check_layout=_expected_layout(op, x, y), check_signed_zeros=not maps_duplicates(op, x, y),
        **_tolerance(expected),
    )  # fmt: skip
    if isinstance(result, xs.SparseArray):
        assert type(result.fill_value) is type(generic.python_scalar(xp, xp.zeros((), dtype=result.dtype)))
    return result


# -- unary ---------------------------------------------------------------------------------------------


def _numpy_sgn(a: np.ndarray) -> np.ndarray:
    magnitude = np.abs(a)
    return np.where(magnitude == 0, np.zeros_like(a), a / np.where(magnitude == 0, 1, magnitude))


# NumPy's (or SciPy's) function for a name the backend's namespace lacks (array_api_strict has none of
# torch's extras, NumPy no conj_physical, sgn, erf or erfinv)
NUMPY_UNARY: dict[str, Any] = {
    "conj_physical": np.conj,
    "sgn": _numpy_sgn,
    "erf": special.erf,
    # erfinv is odd: SciPy's erfinv(-0.0) is +0.0, torch's (and xsparse's) -0.0
    "erfinv": lambda a: np.copysign(special.erfinv(a), a),
}


def unary_reference(xp: Any, op: str, x: Any, dtype: Any, **kwargs: Any) -> Any:
    """``op`` of the strided ``x`` computed by the backend's own function (``xp.<op>``; NumPy's or SciPy's
    where the namespace has no such function, or where NumPy's is the documented value), never by the
    strided kernel that xsparse maps a sparse array's values through. An integer or boolean ``x`` of a
    floating result (``dtype``) is cast to it first, as xsparse does (torch's rule)."""
    floating = ("real floating", "complex floating")
    if xp.isdtype(dtype, floating) and not xp.isdtype(x.dtype, floating):
        x = xp.astype(x, dtype)
    complex_x = xp.isdtype(x.dtype, "complex floating")
    on_torch = "torch" in xp.__name__
    torch_sign = on_torch and op in ("sign", "sgn")
    if on_torch and complex_x and ("torch", op) in GENERIC_SIGNS_WRONG:
        # torch's function gives another sign of a zero part than the standard's: NumPy's is the standard's
        return xp.asarray(getattr(np, op)(to_numpy(x)), dtype=dtype)
    if op == "angle" and not complex_x:
        # torch's angle of a real number (which xsparse follows): 0 at -0.0, where NumPy's is pi
        return xp.asarray(np.angle(to_numpy(x) + 0.0), dtype=dtype)
    if torch_sign and complex_x:
        return xp.sgn(x)  # the standard's sign of a complex number; torch's sign refuses one
    if torch_sign:
        # torch's sign of NaN is 0; the standard's (and xsparse's) is NaN
        return xp.where(xp.isnan(x), x, xp.sign(x)) if xp.isdtype(x.dtype, "real floating") else xp.sign(x)
    if hasattr(xp, op):
        return getattr(xp, op)(x, **kwargs)
    func = NUMPY_UNARY[op] if op in NUMPY_UNARY else getattr(np, op)
    return xp.asarray(np.asarray(func(to_numpy(x))), dtype=dtype)


@pytest.mark.parametrize("op", UNARY_OPS)
@pytest.mark.parametrize("backend", backend_params(BACKENDS))
@FEW
@given(data=st.data())
def test_unary(backend: str, xp: Any, op: str, data: st.DataObject) -> None:
    if op in generic.NATIVE_ONLY_UNARY and backend == "array_api_strict":
        x = data.draw(unary_operands(xp, op, backend))
        with pytest.raises(xs.NoKernelError, match=f"the Array API standard has no {op}, so only backends"):
            getattr(xs, op)(x)
        return
    x = data.draw(unary_operands(xp, op, backend))
    kwargs = {"min": -1, "max": 2} if op == "clip" else {}
    with quiet():
        result = getattr(xs, op)(x, **kwargs)
        expected = unary_reference(xp, op, _dense(x), result.dtype, **kwargs)
    assert_sparse_equal(
        result, expected, check_layout=xs.layout_of(x), check_signed_zeros=not maps_duplicates(op, x), **_tolerance(expected)
    )
    if isinstance(x, xs.SparseArray):
        with quiet():
            fill = getattr(xs, op)(xp.asarray(x.fill_value, dtype=x.dtype), **kwargs)
        assert _is_nan(result.fill_value) and _is_nan(generic.python_scalar(xp, fill)) or result.fill_value == fill


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
@SOME
@given(data=st.data())
def test_unary_of_uncoalesced_coo_coalesces_first(backend: str, xp: Any, data: st.DataObject) -> None:
    coo, expected = data.draw(S.uncoalesced_coo(xp, fill=None).filter(lambda c: c[0].dtype in (xp.float32, xp.float64)))
    with quiet():
        result = xs.sqrt(xs.abs(coo))
        want = np.sqrt(np.abs(expected))
    assert_sparse_equal(result, xp.asarray(want), **_tolerance(result))


def test_sqrt_of_duplicates_is_sqrt_of_their_sum(backend: str, xp: Any) -> None:
    # sqrt(2 + 2) = 2, not sqrt(2) + sqrt(2)
    a = xs.sparse_coo_array(xp.asarray([[0, 0]]), xp.asarray([2.0, 2.0], dtype=xp.float64), (2,))
    assert not a.is_coalesced()
    assert to_numpy(xs.to_dense(xs.sqrt(a))).tolist() == [2.0, 0.0]
    # a linear function maps the duplicates as they are
    n = xs.negative(a)
    assert not n.is_coalesced() and to_numpy(xs.to_dense(n)).tolist() == [-4.0, -0.0]


def test_non_zero_preserving_function_keeps_the_layout(backend: str, xp: Any, layout: xs.Layout) -> None:
    d = xp.asarray([[0.0, 1.0, 0.0, 0.0], [2.0, 0.0, 0.0, 3.0]], dtype=xp.float64)
    a = xs.to_sparse(d, layout=layout, blocksize=(1, 2) if layout.is_blocked else None)
    r = xs.cos(a)
    assert r.layout is layout and r.fill_value == 1.0 and r.nnz == a.nnz
    assert_sparse_equal(r, xp.cos(d), rtol=1e-12)
    assert xs.to_dense(xs.cos(a, layout=xs.strided)).shape == (2, 4)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("op", ["angle", "sgn", "sign", "deg2rad", "rad2deg", "isposinf", "isneginf", "conj_physical", "erf", "erfinv"])
def test_torch_names_match_torch(op: str) -> None:
    import torch

    values = [0.0, -0.0, 1.5, -2.0, 0.25, -0.5, math.inf, -math.inf, math.nan]
    for dtype in (torch.float64, torch.complex128):
        if dtype == torch.complex128 and op in ("deg2rad", "rad2deg", "isposinf", "isneginf", "erf", "erfinv"):
            continue
        x = torch.tensor(values, dtype=dtype)
        if dtype == torch.complex128:
            x = x + 1j * torch.tensor(values[::-1], dtype=torch.float64)
        want = torch.sgn(x) if op == "sign" and dtype.is_complex else getattr(torch, op)(x)
        if op in ("sign", "sgn") and not dtype.is_complex:
            # torch's sign of NaN is 0; the Array API's (and xsparse's, on every backend) is NaN
            want = torch.where(torch.isnan(x), x, want)
        assert_sparse_equal(getattr(xs, op)(x), want, rtol=1e-15)
        s = xs.to_sparse_coo(x)
        assert_sparse_equal(getattr(xs, op)(s), want, rtol=1e-15)


@pytest.mark.parametrize("op", ["angle", "sign", "deg2rad", "rad2deg", "isposinf", "isneginf", "conj_physical", "signbit"])
def test_torch_names_match_numpy(op: str) -> None:
    # -0.0 is not among the values: torch's angle (which xsparse follows) is 0 there where NumPy's is pi
    values = np.asarray([0.0, 1.5, -2.0, 0.25, math.inf, -math.inf, math.nan])
    reference = {"conj_physical": np.conj}.get(op, getattr(np, op, None))
    assert reference is not None
    with quiet():
        assert_sparse_equal(getattr(xs, op)(values), reference(values), rtol=1e-15)
        assert_sparse_equal(getattr(xs, op)(xs.to_sparse_coo(values)), reference(values), rtol=1e-15)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("op", sorted(TORCH_VALUES_ALIAS_OPS))
@pytest.mark.parametrize("layout", SPARSE_LAYOUTS[1:], ids=str)
def test_torch_values_alias(op: str, layout: xs.Layout) -> None:
    """Values that torch's conversions produce are ordinary tensors: views of them (torch.real, ...) work."""
    import torch

    x = torch.tensor([[1 + 2j, 0], [0, 3 - 1j]], dtype=torch.complex64)
    a = xs.to_sparse(x, layout=layout, blocksize=(1, 1) if layout.is_blocked else None)
    assert_sparse_equal(getattr(xs, op)(a), getattr(xs, op)(x))


def test_erf_needs_a_native_kernel() -> None:
    import array_api_strict as xp

    a = xs.to_backend(xs.sparse_coo_array([[0]], [0.5], (2,), dtype="float64"), "array_api_strict")
    with pytest.raises(xs.NoKernelError, match=r"^erf: no kernel for layouts \(sparse_coo\) on backend 'array_api_strict'\. .*move the array with xsparse\.to_backend\(x, 'numpy'\)"):
        xs.erf(a)
    with pytest.raises(xs.NoKernelError, match=r"^erfinv: no kernel for layouts \(strided\) on backend 'array_api_strict'\. erfinv\(strided\) \[generic, any backend\] declined: the Array API standard has no erfinv"):
        xs.erfinv(xp.asarray([0.5]))


def test_clip(backend: str, xp: Any) -> None:
    a = xs.sparse_csr_array(xp.asarray([0, 1, 2]), xp.asarray([0, 1]), xp.asarray([-3.0, 5.0], dtype=xp.float64), (2, 2), fill_value=1.0)
    r = xs.clip(a, 0.0, 2.0)
    assert r.layout is xs.sparse_csr and r.fill_value == 1.0
    assert to_numpy(xs.to_dense(r)).tolist() == [[0.0, 1.0], [1.0, 2.0]]
    assert to_numpy(xs.to_dense(xs.clip(a, max=0.0))).tolist() == [[-3.0, 0.0], [0.0, 0.0]]
    assert to_numpy(xs.to_dense(xs.clip(a))).tolist() == [[-3.0, 1.0], [1.0, 5.0]]
    # array bounds go through maximum and minimum, with their layout rules
    lo = xp.asarray([0.0, 4.0], dtype=xp.float64)
    r = xs.clip(a, lo, 4.5)
    assert xs.layout_of(r) is xs.strided
    assert to_numpy(r).tolist() == [[0.0, 4.0], [1.0, 4.5]]
    assert xs.clip(a, lo, layout=xs.sparse_coo).layout is xs.sparse_coo
    assert to_numpy(xs.clip(xp.asarray([-2, 5]), -1, 1)).tolist() == [-1, 1]


# -- binary --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", BINARY_OPS)
@pytest.mark.parametrize("backend", backend_params(BACKENDS))
@FEW
@given(data=st.data())
def test_binary(backend: str, xp: Any, op: str, data: st.DataObject) -> None:
    x, y = data.draw(binary_operands(xp, op, backend))
    check_binary(xp, op, x, y)


@pytest.mark.parametrize("op", ["add", "multiply", "subtract", "maximum", "equal"])
@pytest.mark.parametrize("backend", backend_params(BACKENDS))
@SOME
@given(data=st.data())
def test_binary_more_examples(backend: str, xp: Any, op: str, data: st.DataObject) -> None:
    x, y = data.draw(binary_operands(xp, op, backend))
    check_binary(xp, op, x, y)


@pytest.mark.parametrize("left", LAYOUTS, ids=str)
@pytest.mark.parametrize("right", LAYOUTS, ids=str)
@pytest.mark.parametrize("op", ["add", "multiply", "less"])
def test_every_layout_pair(backend: str, xp: Any, left: xs.Layout, right: xs.Layout, op: str) -> None:
    h1 = np.asarray([[[1.0, 0.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0]], [[0.0, 3.0, 0.0, 0.0], [0.0, 0.0, 4.0, 0.0]]])
    h2 = np.asarray([[[0.0, 0.0, 5.0, 6.0], [0.0, 7.0, 0.0, 0.0]]])  # broadcast along the batch dimension
    x = _convert(xp, h1, left, 0.0, 0, (1, 2), "int64")
    y = _convert(xp, h2, right, -1.0 if right is xs.sparse_csc else 0.0, 0, (1, 2), "int32")
    r = check_binary(xp, op, x, y)
    if isinstance(x, xs.SparseArray) and isinstance(r, xs.SparseArray) and r.layout is not xs.sparse_coo:
        assert r.batch_dim() == 1 and r.blocksize == (x.blocksize if x.layout.is_blocked else (1, 1))


def test_layout_argument(backend: str, xp: Any) -> None:
    a = xs.to_sparse_csr(xp.asarray([[1.0, 0.0], [0.0, 2.0]], dtype=xp.float64))
    b = xs.to_sparse_coo(xp.asarray([[0.0, 3.0], [0.0, 4.0]], dtype=xp.float64))
    assert xs.add(a, b).layout is xs.sparse_csr
    assert xs.add(b, a).layout is xs.sparse_coo
    assert xs.add(a, b, layout=xs.sparse_csc).layout is xs.sparse_csc
    assert xs.layout_of(xs.add(a, b, layout=xs.strided)) is xs.strided
    assert xs.multiply(a, xp.ones((2, 2), dtype=xp.float64), layout=xs.strided).shape == (2, 2)
    assert xs.add(a, xp.ones((2, 2), dtype=xp.float64), layout=xs.sparse_coo).layout is xs.sparse_coo
    bsr = xs.to_sparse_bsr(xp.asarray([[1.0, 0.0], [0.0, 2.0]], dtype=xp.float64), (1, 1))
    assert xs.add(bsr, a, layout=xs.sparse_bsc).layout is xs.sparse_bsc


def test_coo_plus_coo_concatenates(backend: str, xp: Any) -> None:
    # the seed's example: addition of COO arrays concatenates the indices and values
    a = xs.sparse_coo_array(xp.asarray([[1, 1]]), xp.asarray([5, 6]), (2,))
    b = xs.sparse_coo_array(xp.asarray([[0, 0]]), xp.asarray([7, 8]), (2,))
    r = a + b
    assert not r.is_coalesced() and r.nnz == 4 and r.fill_value == 0
    assert to_numpy(r._indices()).tolist() == [[1, 1, 0, 0]]
    assert to_numpy(r._values()).tolist() == [5, 6, 7, 8]
    assert to_numpy(xs.to_dense(r)).tolist() == [15, 11]
    assert to_numpy(xs.to_dense(a - b)).tolist() == [-15, 11]
    # with a non-zero fill value, or broadcasting, the entries are merged instead
    c = xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([1]), (2,), fill_value=1)
    assert (a + c).is_coalesced() and to_numpy(xs.to_dense(a + c)).tolist() == [1, 12]


def test_product_keeps_the_sparsity(backend: str, xp: Any, layout: xs.Layout) -> None:
    d = xp.asarray([[1.0, 0.0, 0.0, 2.0], [0.0, 0.0, 3.0, 0.0]], dtype=xp.float64)
    a = xs.to_sparse(d, layout=layout, blocksize=(1, 2) if layout.is_blocked else None)
    dense = xp.asarray([[5.0, 6.0, 7.0, 8.0], [1.0, 2.0, 3.0, 4.0]], dtype=xp.float64)
    r = check_binary(xp, "multiply", a, dense)
    assert r.layout is layout and r.nnz == a.nnz
    s = check_binary(xp, "multiply", a, xs.to_sparse(dense, layout=xs.sparse_coo))
    assert s.nnz == a.nnz
    assert xs.layout_of(check_binary(xp, "add", a, dense)) is xs.strided


def test_product_with_non_finite_values_is_exact(backend: str, xp: Any) -> None:
    # inf * 0 is NaN (IEEE 754): an unspecified 0 meeting inf or NaN gives a specified NaN, where torch
    # gives 0; the product stays sparse
    a = xs.to_sparse_coo(xp.asarray([[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]], dtype=xp.float64))
    d = xp.asarray([[1.0, math.inf, 2.0], [math.nan, 1.0, 1.0]], dtype=xp.float64)
    r = check_binary(xp, "multiply", a, d)
    assert r.layout is xs.sparse_coo and r.nnz == 4
    assert r.layout is xs.sparse_coo
    r = check_binary(xp, "multiply", d, xs.to_sparse_csr(a))
    assert r.layout is xs.sparse_csr
    b = xs.to_sparse_coo(xp.asarray([[0.0, math.inf, 0.0], [0.0, 0.0, 3.0]], dtype=xp.float64))
    r = check_binary(xp, "multiply", a, b)
    assert r.nnz == 2  # (0, 1): inf * 0 = nan, (1, 2): 2 * 3
    check_binary(xp, "multiply", xs.to_sparse_csr(a), xs.to_sparse_csr(b))
    check_binary(xp, "multiply", a, xp.asarray([[1.0, 2.0, math.inf]], dtype=xp.float64))  # broadcast


@pytest.mark.parametrize("backend", ["numpy", "torch", "array_api_strict"])
def test_product_with_integers_that_are_infinite_in_the_result_dtype(backend: str, xp: Any) -> None:
    # 100000 is inf as float16: meeting an unspecified 0 it gives NaN, as the dense product does; torch's
    # sparse mul (and the generic kernel) checked the integer operand before the promotion and gave 0
    half = getattr(xp, "float16", None)
    if half is None:
        pytest.skip(f"{backend} has no float16")
    dense_a = xp.asarray([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]], dtype=half)
    for int_dtype, big in (("int32", 100000), ("int64", 65520), ("int64", -70000), ("uint64", 2**63), ("int64", 65519)):
        if not hasattr(xp, int_dtype):
            continue
        b = xp.asarray([[big, 1, 3], [1, 2, 0]], dtype=getattr(xp, int_dtype))
        want = to_numpy(xp.multiply(dense_a, b))
        for layout in (xs.sparse_coo, xs.sparse_csr, xs.sparse_bsr):
            a = xs.to_sparse(dense_a, layout=layout, blocksize=(1, 1) if layout.is_blocked else None)
            for got in (xs.multiply(a, b), xs.multiply(b, a), xs.multiply(a, xs.to_sparse_coo(b))):
                np.testing.assert_array_equal(to_numpy(xs.to_dense(got)), want)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_scalar_product_of_uncoalesced_coo_with_a_scalar_infinite_in_its_dtype(backend: str, xp: Any) -> None:
    # 1e5 is finite in Python but inf as float16: 2 * inf + -1 * inf is NaN, (2 - 1) * inf is inf
    u = xs.sparse_coo_array(xp.asarray([[0, 0]]), xp.asarray([2.0, -1.0], dtype=xp.float16), (1,))
    for got, want in ((u * 1e5, math.inf), (u / 1e-8, math.inf), (1e5 * u, math.inf)):
        assert to_numpy(xs.to_dense(got)).tolist() == [want]
    assert not (u * 2.0).is_coalesced()  # a scalar finite in float16 maps the duplicates as they are


def test_scalar_product_of_uncoalesced_coo(backend: str, xp: Any) -> None:
    a = xs.sparse_coo_array(xp.asarray([[0, 0, 1]]), xp.asarray([1.0, 0.0, 2.0], dtype=xp.float64), (3,))
    with quiet():
        r = a * 2.0
    assert not r.is_coalesced()  # linear: the duplicates are scaled as they are
    assert to_numpy(xs.to_dense(r)).tolist() == [2.0, 4.0, 0.0]
    # (1 + 0) * inf is inf, but 1 * inf + 0 * inf would be NaN: not linear there, so coalesced first
    with quiet():
        r = a * math.inf
    assert r.is_coalesced()
    assert to_numpy(xs.to_dense(r)).tolist()[:2] == [math.inf, math.inf]
    assert math.isnan(r.fill_value)


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
def test_a_scalar_base_meets_the_fill_value_as_the_stored_values(backend: str, xp: Any) -> None:
    # array-api-strict broadcast the scalar (made a one-element 1-D array) against a (1, 1) fill element, and
    # NumPy's one-element broadcasting loop gives pow(-inf, 0.5) as NaN; the standard (and every other
    # backend, and the dense arrays of more than one element) give +inf
    s = xs.to_sparse(xp.asarray([[2.0], [0.5], [0.5]], dtype=xp.float64), fill_value=0.5)
    for base, fill in ((-math.inf, math.inf), (-0.0, 0.0)):
        r = xs.pow(base, s)
        assert r.fill_value == fill and math.copysign(1.0, r.fill_value) == 1.0
        assert to_numpy(xs.to_dense(r)).tolist() == [[base**2.0], [fill], [fill]]


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
def test_torch_data_dropping_broadcasts(backend: str, xp: Any) -> None:
    # pytorch/pytorch#188900: a (2, 2, 1) sparse operand broadcast against (1, 1, 3)
    s = xs.to_sparse_coo(xp.asarray([[[1.0], [2.0]], [[3.0], [4.0]]], dtype=xp.float64))
    d = xp.ones((1, 1, 3), dtype=xp.float64)
    r = check_binary(xp, "multiply", s, d)
    assert to_numpy(xs.to_dense(r))[..., 1].tolist() == [[1.0, 2.0], [3.0, 4.0]]
    check_binary(xp, "multiply", d, s)
    # pytorch/pytorch#158861: unsqueezed operands, A[..., None] * B[..., None, :, :]
    rng = np.random.default_rng(0)
    t1 = rng.integers(-2, 3, (3, 2, 4)).astype(np.float64)
    t2 = rng.integers(-2, 3, (3, 4, 5)).astype(np.float64)
    a, b = t1[..., None], t2[:, None, :, :]
    expected = xp.asarray(a * b)
    for left, right in ((xs.to_sparse_coo(xp.asarray(a)), xp.asarray(b)), (xp.asarray(a), xs.to_sparse_coo(xp.asarray(b)))):
        r = check_binary(xp, "multiply", left, right)
        # the signs of the zeros are compared by check_binary, under the documented rule for products
        assert_sparse_equal(r, expected, check_signed_zeros=False)
    # pytorch/pytorch#116633: b[:, None] * a_sparse[None]
    ah = (rng.random((4, 5, 5)) < 0.5).astype(np.float64)
    bh = rng.random((2, 5, 5))
    r = check_binary(xp, "multiply", xp.asarray(bh[:, None]), xs.to_sparse_coo(xp.asarray(ah[None])))
    assert r.shape == (2, 4, 5, 5) and r.nnz == 2 * int(ah.sum())
    # the same with compressed operands, and with sums
    c = xs.to_sparse_csr(xp.asarray([[1.0, 0.0, 2.0]], dtype=xp.float64))
    big = xp.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=xp.float64)
    assert check_binary(xp, "multiply", c, big).layout is xs.sparse_csr
    check_binary(xp, "add", c, big)
    check_binary(xp, "add", c, xs.to_sparse_csr(big))
    check_binary(xp, "add", xs.to_sparse_coo(big), xs.to_sparse_coo(xp.asarray([1.0, 0.0, 2.0], dtype=xp.float64)))


def test_broadcast_coo_marks_order(backend: str, xp: Any) -> None:
    from xsparse.testing import check_invariants

    a = xs.sparse_coo_array(xp.asarray([[0, 0], [0, 2]]), xp.asarray([1.0, 2.0], dtype=xp.float64), (1, 3), is_coalesced=True)
    rows = generic.broadcast_coo(xp, a, (2, 3))  # entries (0,0) (1,0) (0,2) (1,2): not sorted
    assert not rows.is_coalesced()
    b = xs.sparse_coo_array(xp.asarray([[0, 2], [0, 0]]), xp.asarray([1.0, 2.0], dtype=xp.float64), (3, 1), is_coalesced=True)
    cols = generic.broadcast_coo(xp, b, (3, 2))  # only the last sparse dimension repeats: sorted
    assert cols.is_coalesced() and cols.nnz == 4
    both = generic.broadcast_coo(xp, b, (2, 3, 2))
    assert not both.is_coalesced() and both.nnz == 8
    for c, dense in ((rows, [[1.0, 0.0, 2.0]] * 2), (cols, [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]), (both, [[[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]] * 2)):
        check_invariants(c)
        assert to_numpy(xs.to_dense(c)).tolist() == dense


@st.composite
def _broadcast_pair(draw: Any) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Two host arrays whose shapes broadcast (size 1 or missing dimensions on either side), each with
    random zeros, and how many trailing dimensions of each are dense."""
    ndim = draw(st.integers(1, 3))
    full = [draw(st.integers(0, 4)) for _ in range(ndim)]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    hosts, dense = [], []
    for _ in range(2):
        lead = draw(st.integers(0, ndim - 1))
        shape = [1 if draw(st.integers(0, 2)) == 0 else n for n in full[lead:]]
        h = rng.integers(-3, 4, size=shape) * (rng.random(shape) < draw(st.sampled_from([0.0, 0.3, 0.8])))
        hosts.append(h)
        dense.append(draw(st.integers(0, min(1, h.ndim - 1))))
    return hosts[0], hosts[1], dense[0], dense[1]


@pytest.mark.parametrize("op", sorted(generic.ANNIHILATING))
@SOME
@given(data=st.data())
def test_broadcast_product_joins_entries(backend: str, xp: Any, op: str, data: st.DataObject) -> None:
    """A product of sparse operands broadcast against each other stores the positions that both specify,
    and equals the merge of the two broadcast operands (what the kernel computes where the join does not
    apply) and the dense product."""
    h1, h2, d1, d2 = data.draw(_broadcast_pair(), label="operands")
    index_dtype = data.draw(st.sampled_from(["int32", "int64"]), label="index_dtype")
    dtype = {"multiply": "float64", "logical_and": "bool", "bitwise_and": "int64"}[op]
    h1, h2 = h1.astype(dtype), h2.astype(dtype)
    layouts = [data.draw(st.sampled_from(_valid_layouts(h, 0, d, (1, 1))[1:]), label="layout") for h, d in ((h1, d1), (h2, d2))]
    x, y = (_convert(xp, h, lay, 0, d, (1, 1), index_dtype) for h, d, lay in ((h1, d1, layouts[0]), (h2, d2, layouts[1])))
    result = check_binary(xp, op, x, y)
    shape = tuple(result.shape)
    a, b = (generic.coalesce_coo(xp, generic.broadcast_coo(xp, generic._as_coo(xp, v), shape)) for v in (x, y))
    if a.sparse_dim() == b.sparse_dim():
        merged = generic._combine(xp, op, a, b)
        stored = [np.zeros(shape[: a.sparse_dim()], dtype=bool) for _ in range(2)]
        for mask, c in zip(stored, (a, b)):
            mask[tuple(to_numpy(c.indices()))] = True
        assert merged.nnz == int(np.sum(stored[0] & stored[1]))
        # in x's layout, with the same padding of batches
        got, want = (xs.to_sparse_coo(r) for r in (result, generic.as_layout_of(xp, merged, x, op)))
        assert to_numpy(got.indices()).tolist() == to_numpy(want.indices()).tolist()
        assert np.array_equal(to_numpy(got.values()), to_numpy(want.values()))


def test_broadcast_product_of_long_vectors(backend: str, xp: Any) -> None:
    # (n, 1) times (1, n) sparse vectors of k entries each: the k * k products, where repeating each
    # vector along the other's axis would hold 2 * k * n entries (here 2**43, which no machine holds)
    n, k = 2**40, 4
    at = xp.asarray([[3, 10, 999, 5000], [0, 0, 0, 0]])
    col = xs.sparse_coo_array(at, xp.asarray([1.0, 2.0, 3.0, 4.0], dtype=xp.float64), (n, 1))
    row = xs.sparse_coo_array(xp.flip(at, axis=0), xp.asarray([5.0, 6.0, 7.0, 8.0], dtype=xp.float64), (1, n))
    out = col * row
    assert out.shape == (n, n) and out.nnz == k * k and out.is_coalesced()
    got = {tuple(p): v for p, v in zip(to_numpy(out.indices()).T.tolist(), to_numpy(out.values()).tolist())}
    assert got == {(i, j): u * v for i, u in zip([3, 10, 999, 5000], [1, 2, 3, 4]) for j, v in zip([3, 10, 999, 5000], [5, 6, 7, 8])}
    # an infinite entry times the unspecified 0 of the other side is NaN: those entries stay, as before
    inf = xs.sparse_coo_array(xp.asarray([[2], [0]]), xp.asarray([math.inf], dtype=xp.float64), (5, 1))
    r = check_binary(xp, "multiply", inf, xs.sparse_coo_array(xp.asarray([[0], [1]]), xp.asarray([2.0], dtype=xp.float64), (1, 3)))
    assert r.nnz == 3


def test_batched_union_pads_batches(backend: str, xp: Any) -> None:
    # batch 0 gets 3 entries from the union, batch 1 gets 1: the shorter batch is padded with explicit
    # fill values so that every batch holds the same number (invariant 3.9)
    h1 = np.asarray([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 2.0]]])
    h2 = np.asarray([[[0.0, 3.0], [4.0, 0.0]], [[0.0, 0.0], [0.0, 5.0]]])
    for layout in (xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr):
        x = xs.to_sparse(xp.asarray(h1), layout=layout, blocksize=(1, 1) if layout.is_blocked else None)
        y = xs.to_sparse_coo(xp.asarray(h2))
        r = check_binary(xp, "add", x, y)
        assert r.layout is layout and r.nnz == 3
        check_binary(xp, "maximum", y, x)
    with_fill = xs.to_sparse_coo(xp.asarray(h2) + 1, fill_value=1.0)
    r = check_binary(xp, "subtract", xs.to_sparse_csr(xp.asarray(h1)), with_fill)
    assert r.fill_value == -1.0 and r.nnz == 3


def test_operands_with_different_sparse_dims(backend: str, xp: Any) -> None:
    h = xp.asarray([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0], [3.0, 4.0, 0.0]], dtype=xp.float64)
    hybrid = xs.to_sparse_coo(h, sparse_dim=1)
    full = xs.to_sparse_coo(xp.asarray([[0.0, 5.0, 0.0], [0.0, 6.0, 0.0], [0.0, 0.0, 0.0]], dtype=xp.float64))
    r = check_binary(xp, "add", hybrid, full)
    assert r.sparse_dim() == 1 and r.dense_dim() == 1
    r = check_binary(xp, "add", full, hybrid)
    assert r.sparse_dim() == 2
    check_binary(xp, "multiply", hybrid, full)
    csr_hybrid = xs.to_sparse_csr(xp.ones((2, 2, 2), dtype=xp.float64), dense_dim=1)
    csr_batched = xs.to_sparse_csr(xp.asarray([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 2.0], [0.0, 0.0]]], dtype=xp.float64))
    assert check_binary(xp, "add", csr_hybrid, csr_batched).dense_dim() == 1
    assert check_binary(xp, "add", csr_batched, csr_hybrid).batch_dim() == 1


def test_zero_dim_array_acts_as_a_scalar(backend: str, xp: Any) -> None:
    a = xs.to_sparse_csr(xp.asarray([[1, 0], [0, 2]], dtype=xp.int32))
    r = check_binary(xp, "add", a, xp.asarray(3, dtype=xp.int64))
    assert r.layout is xs.sparse_csr and r.fill_value == 3 and dtype_name(r.dtype) == "int64"
    assert check_binary(xp, "add", a, 3).dtype == xp.int32  # a Python scalar takes the array's dtype


def test_scalar_promotion(backend: str, xp: Any) -> None:
    a = xs.to_sparse_coo(xp.asarray([1.0, 0.0], dtype=xp.float32))
    assert (a * 2).dtype == xp.float32 and (a + 2.5).dtype == xp.float32
    assert (a * 1j).dtype == xp.complex64
    assert type((a * 1j).fill_value) is complex
    b = xs.to_sparse_coo(xp.asarray([True, False]))
    assert (b & True).dtype == xp.bool and type((b | True).fill_value) is bool


@pytest.mark.parametrize("op", sorted(INTEGER_DIVISION))
def test_integer_division_by_zero_gives_zero(backend: str, xp: Any, layout: xs.Layout, op: str) -> None:
    """The standard leaves x // 0 and x % 0 unspecified for integers; xsparse gives NumPy's 0 on every
    backend (torch raises for them): on the values, on the fill values 0 // 0, with a scalar 0."""
    h1 = np.asarray([[7, 0, -7, 0], [0, 5, 0, -3]], dtype=np.int32)
    h2 = np.asarray([[0, 0, 2, 0], [3, 0, 0, 2]], dtype=np.int32)
    blocksize = (1, 2) if layout.is_blocked else None
    x = xs.to_sparse(xp.asarray(h1), layout=layout, blocksize=blocksize)
    y = xs.to_sparse(xp.asarray(h2), layout=layout, blocksize=blocksize)
    want = {"floor_divide": [[0, 0, -4, 0], [0, 0, 0, -2]], "remainder": [[0, 0, 1, 0], [0, 0, 0, 1]]}[op]
    f = getattr(xs, op)
    with quiet():  # array_api_strict computes with NumPy, which warns
        assert to_numpy(xs.to_dense(f(x, y))).tolist() == want
        assert f(x, y).fill_value == 0 and type(f(x, y).fill_value) is int
        assert to_numpy(f(xs.to_dense(x), y)).tolist() == want
        assert to_numpy(f(xs.to_dense(x), xs.to_dense(y))).tolist() == want
        assert to_numpy(xs.to_dense(f(x, 0))).tolist() == [[0] * 4] * 2
        assert to_numpy(xs.to_dense(f(7, y))).tolist() == np.where(h2 == 0, 0, getattr(np, op)(7, np.where(h2 == 0, 1, h2))).tolist()
    # a floating division by zero is IEEE 754's, untouched
    with quiet():
        r = to_numpy(xs.floor_divide(xp.asarray([1.0, -1.0]), 0.0)).tolist()
    assert r == [math.inf, -math.inf]


def test_result_fill_values(backend: str, xp: Any) -> None:
    a = xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([1.0], dtype=xp.float64), (3,), fill_value=2.0)
    b = xs.sparse_coo_array(xp.asarray([[2]]), xp.asarray([4.0], dtype=xp.float64), (3,), fill_value=-1.0)
    cases = {"add": 1.0, "multiply": -2.0, "maximum": 2.0, "pow": 0.5, "less": False, "not_equal": True}
    for op, fill in cases.items():
        r = check_binary(xp, op, a, b)
        assert r.fill_value == fill and r.nnz == 2


def test_operators(backend: str, xp: Any) -> None:
    d1 = xp.asarray([[1, 0, 2], [0, 3, 0]], dtype=xp.int64)
    d2 = xp.asarray([[0, 4, 2], [0, 1, 0]], dtype=xp.int64)
    a, b = xs.to_sparse_csr(d1), xs.to_sparse_coo(d2)
    pairs = {
        "add": (a + b, d1 + d2), "subtract": (a - b, d1 - d2), "multiply": (a * b, d1 * d2),
        "floor_divide": (a // 2, d1 // 2), "remainder": (a % 2, d1 % 2), "pow": (a**2, d1**2),
        "and": (a & b, d1 & d2), "or": (a | b, d1 | d2), "xor": (a ^ b, d1 ^ d2),
        "lshift": (a << 1, d1 << 1), "rshift": (a >> 1, d1 >> 1), "eq": (a == b, d1 == d2), "ne": (a != b, d1 != d2),
        "lt": (a < b, d1 < d2), "le": (a <= b, d1 <= d2), "gt": (a > b, d1 > d2), "ge": (a >= b, d1 >= d2),
        "neg": (-a, -d1), "pos": (+a, +d1), "abs": (abs(a), xp.abs(d1)), "invert": (~a, ~d1),
        "radd": (1 + a, 1 + d1), "rsub": (1 - a, 1 - d1), "rmul": (2 * a, 2 * d1), "rpow": (2**a, 2**d1),
        "rfloordiv": (7 // (b + 1), 7 // (d2 + 1)), "rmod": (7 % (b + 1), 7 % (d2 + 1)),
        "rand": (1 & a, 1 & d1), "ror": (1 | a, 1 | d1), "rxor": (1 ^ a, 1 ^ d1), "rlshift": (1 << a, 1 << d1),
        "rrshift": (8 >> a, 8 >> d1),
    }  # fmt: skip
    if backend != "array_api_strict":
        # NumPy and torch arrays hand an unknown right operand to its reflected operator; an
        # array_api_strict Array raises TypeError instead, so there the xsparse array goes first
        pairs["dense_left"] = (d2 + a, d2 + d1)
    for name, (got, want) in pairs.items():
        assert isinstance(got, xs.SparseArray) or name == "dense_left", name
        assert_sparse_equal(got, want)
    f1, f2 = xp.astype(d1, xp.float64), xp.astype(d2, xp.float64)
    fa, fb = xs.to_sparse_csr(f1), xs.to_sparse_coo(f2)
    assert_sparse_equal(fa / 2, f1 / 2)
    assert_sparse_equal(1.0 / (fb + 1), 1.0 / (f2 + 1))
    assert_sparse_equal(fa / (fb + 1), f1 / (f2 + 1))
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)


def test_numpy_backend_never_warns() -> None:
    # filterwarnings = error: a RuntimeWarning would fail the test
    a = xs.to_sparse_csr(np.asarray([[1.0, 0.0], [0.0, -2.0]]))
    i = xs.to_sparse_csr(np.asarray([[1, 0], [0, 2]]))
    assert xs.log(a).fill_value == -math.inf
    assert math.isnan(xs.divide(a, a).fill_value)
    assert xs.floor_divide(i, i).fill_value == 0
    assert xs.remainder(i, 0).fill_value == 0
    assert math.isnan(xs.sqrt(a).to_dense()[1, 1])
    xs.multiply(a, np.asarray([[math.inf, math.nan], [1.0, 1.0]]))
    xs.divide(np.asarray([[1.0, 0.0], [0.0, 1.0]]), a)


# -- computed as the dense array is -----------------------------------------------------------------------
# A fill value is computed on a one-element array with its operand's number of dimensions, and the one
# element of a 0-d sparse array 0-d: NumPy computes pow(-inf, 0.5) of 0-d arrays through sqrt (NaN) and of
# arrays with a dimension as the standard says (+inf), and an unspecified element reads what the dense
# array's element is.

SPECIAL = {
    "float64": (0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -3.0, 1e300, math.inf, -math.inf, math.nan),
    "complex128": (0j, complex(-0.0, 0.0), 1 + 1j, complex(math.inf, 0.0), complex(0.0, math.inf), complex(math.nan, 0.0)),
    "int64": (0, 1, -1, 2, -3),
    "bool": (False, True),
}  # fmt: skip


def _special_dtype(table: dict[str, tuple[str, ...]], op: str) -> str:
    return next(d for d in SPECIAL if d in table[op])


def _every_element(xp: Any, value: Any, dtype: str, shape: tuple[int, ...], layout: xs.Layout, stored: bool) -> Any:
    """A sparse array of ``shape`` whose every element is ``value``: every one specified (``stored``,
    under another fill value) or none."""
    first, second = SPECIAL[dtype][:2]
    other = second if repr(value) == repr(first) else first
    dense = xp.full(shape, value, dtype=getattr(xp, dtype))
    return xs.to_sparse(dense, layout=layout, fill_value=other if stored else value)


def check_binary_or_raises(xp: Any, op: str, x: Any, y: Any) -> Any:
    """:func:`check_binary`, or, where the dense computation raises, the same exception type from xsparse."""
    try:
        with quiet():
            _reference(xp, op, x, y)
    except (ValueError, RuntimeError) as error:
        with quiet(), pytest.raises(type(error)):
            getattr(xs, op)(x, y)
        return None
    with quiet():  # the products rule computes with NumPy (0 * inf)
        return check_binary(xp, op, x, y)


@st.composite
def special_sparse(draw: Any, xp: Any, dtype: str, value: Any, shape: tuple[int, ...]) -> Any:
    layouts = [xs.sparse_coo] + ([xs.sparse_csr] if len(shape) == 2 and dtype != "complex128" else [])
    return _every_element(xp, value, dtype, shape, draw(st.sampled_from(layouts)), draw(st.booleans()))


@pytest.mark.parametrize("op", UNARY_OPS)
@pytest.mark.parametrize("backend", backend_params(BACKENDS))
@FEW
@given(data=st.data())
def test_unary_special_values_as_dense(backend: str, xp: Any, op: str, data: st.DataObject) -> None:
    """Fill values and the elements of 0-d arrays at special values, against the dense array's."""
    if op in generic.NATIVE_ONLY_UNARY and backend == "array_api_strict":
        return  # test_unary: no kernel
    dtype = _special_dtype(UNARY_DTYPES, op)
    value = data.draw(st.sampled_from(SPECIAL[dtype]), label="value")
    shape = data.draw(st.sampled_from([(), (3,), (2, 2)]), label="shape")
    x = data.draw(special_sparse(xp, dtype, value, shape), label="x")
    kwargs = {"min": -1, "max": 2} if op == "clip" else {}
    with quiet():
        result = getattr(xs, op)(x, **kwargs)
        expected = getattr(xs, op)(xs.to_dense(x), **kwargs)
    assert_sparse_equal(result, expected, check_layout=x.layout)


@pytest.mark.parametrize("op", BINARY_OPS)
@pytest.mark.parametrize("backend", backend_params(BACKENDS))
@SOME
@given(data=st.data())
def test_binary_special_values_as_dense(backend: str, xp: Any, op: str, data: st.DataObject) -> None:
    """Fill values and the elements of 0-d arrays at special values, against the dense arrays': two sparse
    arrays of one shape, or one with a Python scalar or a 0-d strided array, either way round."""
    dtype = _special_dtype(BINARY_DTYPES, op)
    u, v = (data.draw(st.sampled_from(SPECIAL[dtype]), label=f"x{i}") for i in (1, 2))
    shape = data.draw(st.sampled_from([(), (3,), (2, 2)]), label="shape")
    kind = data.draw(st.sampled_from(["sparse", "scalar", "0-d"]), label="other")
    x = data.draw(special_sparse(xp, dtype, u, shape), label="sparse")
    if kind == "sparse":
        y = data.draw(special_sparse(xp, dtype, v, shape), label="sparse")
    else:
        y = v if kind == "scalar" else xp.asarray(v, dtype=getattr(xp, dtype))
    if data.draw(st.booleans(), label="swap"):
        x, y = y, x
    check_binary_or_raises(xp, op, x, y)


def test_pow_fill_value_is_the_dense_element(backend: str, xp: Any) -> None:
    """pow(-inf, 0.5) is +inf, the standard's value and the dense array's, in a fill value too (NumPy's
    pow of 0-d arrays gives NaN there)."""
    a = xs.to_sparse(xp.asarray([0.5, 2.0], dtype=xp.float64), fill_value=0.5)
    r = check_binary(xp, "pow", -math.inf, a)
    assert r.fill_value == math.inf and to_numpy(xs.to_dense(r)).tolist() == [math.inf, math.inf]
    b = xs.to_sparse(xp.asarray([-math.inf, 2.0], dtype=xp.float64), fill_value=-math.inf)
    r = check_binary(xp, "pow", b, a)
    assert r.fill_value == math.inf and to_numpy(xs.to_dense(r)).tolist() == [math.inf, 4.0]
    # a 0-d sparse array is computed 0-d, as its dense array is
    check_binary(xp, "pow", -math.inf, xs.to_sparse(xp.asarray(0.5, dtype=xp.float64)))
    check_binary(xp, "pow", b, xp.asarray(0.5, dtype=xp.float64))


def test_pow_of_stored_values_and_a_fill_value_without_entries(backend: str, xp: Any) -> None:
    """The fill value of an operand without entries meets the other's stored values as the dense
    array's elements do: NumPy's pow by a broadcast 0.5 goes through sqrt (NaN for -inf, -0.0 for -0.0),
    the dense pow gives +inf and +0.0 (a flaky Hypothesis failure on array_api_strict)."""
    b = xs.to_sparse(xp.asarray([-math.inf, -0.0, 4.0], dtype=xp.float64))
    a = xs.to_sparse(xp.asarray([0.5, 0.5, 0.5], dtype=xp.float64), fill_value=0.5)
    assert a.nnz == 0 and b.nnz == 3
    r = check_binary(xp, "pow", b, a)
    got = to_numpy(xs.to_dense(r))
    assert got.tolist() == [math.inf, 0.0, 2.0] and not np.signbit(got[1])
    check_binary(xp, "pow", a, b)


def test_pow_fill_value_that_no_element_reads(backend: str, xp: Any) -> None:
    """An integer pow whose fill values raise (0 ** -1 on NumPy) gives the dense result where the result
    has no unspecified element, with fill value 0, and raises as the dense computation where it has one."""
    empty = xs.to_sparse(xp.zeros((0, 3), dtype=xp.int64))
    r = check_binary_or_raises(xp, "pow", empty, -1)  # torch's dense pow raises for any negative int
    assert r is None if backend == "torch" else r.fill_value == 0 and r.shape == (0, 3)
    a = xs.to_sparse_csr(xp.asarray([[2, 0], [0, 3]], dtype=xp.int64))
    for layout in (xs.sparse_coo, xs.sparse_csr):
        full = xs.to_sparse(xp.asarray([[1, 2], [0, 3]], dtype=xp.int64), layout=layout, fill_value=-1)
        assert full.nnz == 4
        r = check_binary(xp, "pow", a, full)
        assert type(r.fill_value) is int and (backend == "torch" or r.fill_value == 0)
        assert to_numpy(xs.to_dense(r)).tolist() == [[2, 0], [1, 27]]
        r = check_binary(xp, "pow", empty, xs.to_sparse(xp.zeros((0, 3), dtype=xp.int64), fill_value=-1))
    partial = xs.to_sparse(xp.asarray([[1, -1], [0, 3]], dtype=xp.int64), fill_value=-1)
    # NumPy raises for the dense arrays (0 ** -1); torch computes 0 there
    check_binary_or_raises(xp, "pow", a, partial)


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
def test_zero_dim_strided_operand_keeps_the_sparse_layout(backend: str, xp: Any, op: str) -> None:
    """A 0-d strided operand acts as a scalar on every backend: the result keeps the sparse layout (torch's
    own 0-d dense + 0-d sparse is dense)."""
    d = xp.asarray(-1.0, dtype=xp.float64)
    sparse = [
        xs.to_sparse(xp.asarray(2.0, dtype=xp.float64)),
        xs.to_sparse(xp.asarray(0.0, dtype=xp.float64)),
        xs.to_sparse_csr(xp.asarray([[1.0, 0.0], [0.0, 2.0]], dtype=xp.float64)),
    ]
    for a in sparse:
        for x, y in ((a, d), (d, a)):
            r = check_binary(xp, op, x, y)
            assert isinstance(r, xs.SparseArray) and r.layout is a.layout


# -- native kernels against the generic ones -------------------------------------------------------------

ELEMENTWISE_OPS = frozenset((*UNARY_OPS, *BINARY_OPS))
# the native kernels but the NumPy backend's errstate wrappers of the generic ones (``__wrapped__``)
NATIVE = [
    k for op in sorted(ELEMENTWISE_OPS) for k in dispatch.kernels(op) if k.kind == "native" and not hasattr(k.func, "__wrapped__")
]  # fmt: skip


def _kernel_params(kernels: list[dispatch.Kernel]) -> list[Any]:
    """The kernels as test parameters, those of a backend that cannot run here (CuPy without a GPU) skipped
    with the reason."""
    params: list[Any] = []
    for k in kernels:
        reason = backend_skip_reason(k.backend) if k.backend else None
        params.append(pytest.param(k, marks=pytest.mark.skip(reason=reason)) if reason else k)
    return params


def _in_layouts(xp: Any, kernel: dispatch.Kernel, hosts: tuple[np.ndarray, ...], blocksize: tuple[int, int]) -> list[Any]:
    """The host arrays in the layouts of the kernel's signature (CSR for the compressed family)."""
    out = []
    for layout, h in zip(kernel.signature, hosts):
        members = layout if isinstance(layout, frozenset) else frozenset((layout,))
        chosen = sorted(members, key=str)[0] if members != frozenset(xs.formats.COMPRESSED) else xs.sparse_csr
        out.append(_convert(xp, h, chosen, 0.0, 0, blocksize, "int64"))
    return out


def _native_inputs(xp: Any, kernel: dispatch.Kernel) -> tuple[Any, ...]:
    """Inputs in the kernel's layouts that it accepts: 2-D, one shape, fill 0, finite float64 values
    (int64 or complex128 for a kernel that takes no float64 values)."""
    rng = np.random.default_rng(len(kernel.name))
    # + 0.0 turns the -0.0 of a negative value times 0 into +0.0: some kernels decline a stored -0.0
    # (test_native_kernel_keeps_signed_zeros below gives them one)
    h1 = rng.integers(-3, 4, (6, 8)).astype(np.float64) * (rng.random((6, 8)) < 0.4) + 0.0
    h2 = rng.integers(-3, 4, (6, 8)).astype(np.float64) * (rng.random((6, 8)) < 0.4) + 0.0
    if kernel.op in generic.NATIVE_ONLY_UNARY:
        h1 = h1 / 4
    out = _in_layouts(xp, kernel, (h1, h2), (2, 2))
    for dtype in (xp.int64, xp.complex128):
        if kernel.supports is not None and kernel.supports(xp, *out) is not None:
            out = [xs.astype(a, dtype) for a in out]
    return tuple(out)


@pytest.mark.parametrize("kernel", _kernel_params(NATIVE), ids=lambda k: f"{k.name}{tuple(str(s) for s in k.signature)}")
def test_native_kernel_agrees_with_generic(kernel: dispatch.Kernel) -> None:
    backend = xs.get_backend(kernel.backend or "numpy")
    xp = backend.load()
    args = _native_inputs(xp, kernel)
    layouts = tuple(xs.layout_of(a) for a in args)
    assert kernel.supports is None or kernel.supports(xp, *args) is None
    generic_kernel = next(k for k in dispatch.resolve(kernel.op, layouts, backend.name) if k.kind == "generic")
    with quiet():
        got = kernel.func(xp, *args)
        # a native kernel that replaces a backend function the generic kernel calls, because that
        # function is wrong, is compared with the other backend's result
        if kernel.op in generic.NATIVE_ONLY_UNARY or (kernel.backend, kernel.op) in GENERIC_SIGNS_WRONG:
            want = getattr(xs, kernel.op)(xs.to_backend(args[0], "torch" if backend.name == "numpy" else "numpy"))
            want = xs.to_backend(want, backend.name)
        else:
            want = generic_kernel.func(xp, *args)
        assert_sparse_equal(got, _dense(want), check_layout=xs.layout_of(want), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "kernel", _kernel_params([k for k in NATIVE if k.op not in generic.NATIVE_ONLY_UNARY]), ids=lambda k: f"{k.name}{tuple(str(s) for s in k.signature)}"
)
def test_native_kernel_keeps_signed_zeros(kernel: dispatch.Kernel) -> None:
    """Stored -0.0 and +0.0 on both sides, against negative values and each other: a native kernel that
    takes them gives the generic kernel's signs of zeros, and the public call gives them in every case."""
    backend = xs.get_backend(kernel.backend or "numpy")
    xp = backend.load()
    h1 = np.array([[-0.0, 0.0, -0.0, -2.0, 0.0, 1.0], [0.0, -0.0, 3.0, 0.0, 0.0, -0.0]])
    h2 = np.array([[-0.0, -0.0, 0.0, 0.0, -1.0, 0.0], [2.0, -0.0, -3.0, 0.0, 0.0, -0.0]])
    args = _in_layouts(xp, kernel, (h1, h2), (1, 2))
    layouts = tuple(xs.layout_of(a) for a in args)
    generic_kernel = next(k for k in dispatch.resolve(kernel.op, layouts, backend.name) if k.kind == "generic")
    with quiet():
        want = generic_kernel.func(xp, *args)
        if kernel.supports is None or kernel.supports(xp, *args) is None:
            assert_sparse_equal(kernel.func(xp, *args), _dense(want), check_layout=xs.layout_of(want))
        assert_sparse_equal(getattr(xs, kernel.op)(*args), _dense(want), check_layout=xs.layout_of(want))


def test_every_numpy_kernel_wraps_a_generic_one() -> None:
    xs.get_backend("numpy").load()
    for op in ELEMENTWISE_OPS:
        generic_sigs = {k.signature for k in dispatch.kernels(op) if k.kind == "generic"}
        wrapped = {k.signature for k in dispatch.kernels(op) if k.backend == "numpy" and hasattr(k.func, "__wrapped__")}
        assert wrapped <= generic_sigs | {(xs.strided,)}
        assert generic_sigs - wrapped <= ({(xs.strided,)} if op in generic.NATIVE_ONLY_UNARY else set())


def test_registry_covers_every_layout_signature() -> None:
    for op in BINARY_OPS:
        for left in [*LAYOUTS, "scalar"]:
            for right in [*LAYOUTS, "scalar"]:
                if left == right == "scalar":
                    continue
                assert any(k.kind == "generic" for k in dispatch.resolve(op, (left, right), "array_api_strict")), (op, left, right)
    for op in UNARY_OPS:
        for layout in LAYOUTS:
            assert dispatch.resolve(op, (layout,), "array_api_strict"), (op, layout)
        assert callable(getattr(xs, op)) and op in xs.__all__
    assert not [pair for pair in dispatch.ambiguities() if pair[0].op in ELEMENTWISE_OPS]


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_kernels_decline_where_torch_is_wrong() -> None:
    import torch

    def reason(op: str, *args: Any) -> list[str]:
        layouts = tuple(xs.layout_of(a) for a in args)
        return [k.supports(xs.get_backend("torch").load(), *args) for k in dispatch.resolve(op, layouts, "torch") if k.backend == "torch" and k.supports is not None]

    row = xs.to_sparse_coo(torch.tensor([[1.0, 0.0, 2.0]]))
    assert "pytorch/pytorch#188900" in reason("multiply", row, torch.ones(2, 3))[0]
    inf = xs.to_sparse_coo(torch.tensor([[math.inf, 0.0, 2.0]]))
    assert "IEEE 754 gives NaN" in reason("multiply", inf, row)[0]
    assert "fill value +0" in reason("add", xs.to_sparse_csr(torch.eye(2), fill_value=1.0), xs.to_sparse_csr(torch.eye(2)))[0]
    assert "one floating or complex dtype" in reason("add", xs.to_sparse_csr(torch.eye(2, dtype=torch.int32)), xs.to_sparse_csr(torch.eye(2, dtype=torch.int32)))[0]
    assert "2-D arrays without dense dimensions" in reason("multiply", xs.to_sparse_csr(torch.ones(2, 2, 2)), xs.to_sparse_csr(torch.ones(2, 2, 2)))[0]
    assert "bool" in reason("multiply", xs.to_sparse_coo(torch.eye(2, dtype=torch.bool)), xs.to_sparse_coo(torch.eye(2, dtype=torch.bool)))[0]
    assert "subtraction of booleans" in reason("subtract", torch.eye(2, dtype=torch.bool), xs.to_sparse_coo(torch.eye(2, dtype=torch.bool)))[0]
    assert "same sparse_dim" in reason("multiply", xs.to_sparse_coo(torch.ones(2, 2), sparse_dim=1), xs.to_sparse_coo(torch.ones(2, 2)))[0]
    assert "bool" in reason("multiply", xs.to_sparse_csr(torch.eye(2, dtype=torch.bool)), torch.eye(2, dtype=torch.bool))[0]
    # torch's 0-d dense + 0-d sparse is dense: a 0-d operand keeps the sparse layout on every backend
    point = xs.to_sparse_coo(torch.tensor(2.0))
    for op in ("add", "subtract", "multiply"):
        assert all("0-d strided operand acts as a scalar" in reason(op, *args)[0] for args in ((point, torch.tensor(1.0)), (torch.tensor(1.0), point)))
    # torch multiplies 0-d COO tensors wrongly where one has no entry (it reads uninitialised memory)
    full, empty = xs.to_sparse_coo(torch.tensor([127], dtype=torch.int32))[0], xs.to_sparse_coo(torch.tensor([0, 3]))[0]
    assert "without sparse dimensions" in reason("multiply", full, empty)[0]
    assert [int(xs.to_dense(full * empty)) for _ in range(3)] == [0, 0, 0]
    # and the result is still right
    check_binary(xs.get_backend("torch").load(), "multiply", inf, row)


def test_scipy_kernels_decline_with_reasons() -> None:
    def reason(op: str, *args: Any) -> list[str]:
        layouts = tuple(xs.layout_of(a) for a in args)
        return [k.supports(np, *args) for k in dispatch.resolve(op, layouts, "numpy") if k.name.startswith(f"_{op}_compressed")]

    csr = xs.to_sparse_csr(np.eye(3))
    assert "two CSR or two CSC" in reason("add", csr, xs.to_sparse_csc(np.eye(3)))[0]
    assert "2-D arrays of one shape" in reason("add", csr, xs.to_sparse_csr(np.eye(3)[:1]))[0]
    assert "fill value +0" in reason("multiply", csr, xs.to_sparse_csr(np.eye(3), fill_value=2.0))[0]
    assert "2-D arrays of one shape" in reason("add", xs.to_sparse_csr(np.ones((2, 2, 2)), dense_dim=1), xs.to_sparse_csr(np.ones((2, 2, 2)), dense_dim=1))[0]
    assert "subtraction of booleans" in reason("subtract", xs.to_sparse_csr(np.eye(2, dtype=bool)), xs.to_sparse_csr(np.eye(2, dtype=bool)))[0]
    assert "do not handle the dtypes float16" in reason("add", xs.to_sparse_csr(np.eye(2, dtype=np.float16)), xs.to_sparse_csr(np.eye(2, dtype=np.float16)))[0]
    assert "compressed arrays only" in xs.backends.numpy.elementwise._supports_scipy(np, csr, np.eye(3))


# -- documentation -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in xs._elementwise.__all__ if n != "clip"])
def test_docstring_examples(name: str) -> None:
    # the functions are made by a factory, so pytest's doctest collection (which keeps to objects
    # defined in the module it reads) does not see their examples: run them here, on NumPy
    func = getattr(xs, name)
    assert func.__doc__ and func.__name__ == name
    test = doctest.DocTestParser().get_doctest(func.__doc__, {}, name, "xsparse._elementwise", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    with xs.default_backend("numpy"):
        runner.run(test, out=report.append)
    results = runner.summarize(verbose=False)
    assert results.attempted >= 5 and not results.failed, "".join(report)


# -- errors ----------------------------------------------------------------------------------------------

ERRORS: list[Any] = [
    ("unary-not-an-array", lambda: xs.sin([1.0]), TypeError, r"^sin: expected an xsparse array or a backend array, got list \(x=\[1\.0\]\)\. Wrap"),
    ("clip-not-an-array", lambda: xs.clip([1.0], np.zeros(1)), TypeError, r"^clip: expected an xsparse array or a backend array, got list"),
    ("binary-list", lambda: xs.add(xs.sparse_coo_array([[0]], [1.0]), [1.0]), TypeError, r"^add: expected an xsparse array, a backend array or a Python scalar, got list \(operand=\[1\.0\]\)\. Wrap lists"),
    ("binary-two-scalars", lambda: xs.multiply(1, 2.0), TypeError, r"^multiply: at least one operand must be an array, got two Python scalars \(x1=1, x2=2\.0\)\. Wrap one"),
    ("binary-shapes", lambda: xs.add(xs.sparse_coo_array([[0]], [1.0], (2,)), np.ones(3)), ValueError, r"^add: the shapes \(2,\) and \(3,\) do not broadcast \(axis=-1, sizes=\[2, 3\]\)\. Make the sizes"),
    ("binary-shapes-sparse", lambda: xs.less(xs.to_sparse_coo(np.ones((2, 3))), xs.to_sparse_csr(np.ones((3, 2)))), ValueError, r"^less: the shapes \(2, 3\) and \(3, 2\) do not broadcast"),
    ("layout-not-a-layout", lambda: xs.sin(np.ones(2), layout="csr"), TypeError, r"^sin: layout must be an xsparse layout or None \(layout='csr'\)\. Pass"),
    ("layout-blocked", lambda: xs.add(xs.to_sparse_csr(np.eye(2)), 1.0, layout=xs.sparse_bsr), ValueError, r"^add: a sparse_bsr result needs a block shape, which a sparse_csr result does not have \(layout=sparse_bsr\)\. Convert the result with xsparse\.to_sparse"),
    ("erf-strict", lambda: xs.erf(xs.to_backend(np.ones(2), "array_api_strict")), xs.NoKernelError, r"^erf: no kernel for layouts \(strided\) on backend 'array_api_strict'\."),
    ("backends", lambda: xs.add(xs.to_sparse_coo(np.ones(2)), xs.to_backend(np.ones(2), "array_api_strict")), xs.BackendMismatchError, r"^add: the operands live on different backends"),
]


@pytest.mark.parametrize(("call", "exc", "match"), [pytest.param(c, e, m, id=i) for i, c, e, m in ERRORS])
def test_errors(call: Any, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match) as info:
        call()
    assert MESSAGE_SHAPE.fullmatch(str(info.value)), str(info.value)


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_product_of_uncoalesced_operands_keeps_signs_of_zeros(xp: Any, dtype: str) -> None:
    """A -0.0 product of uncoalesced COO operands stays -0.0 on every backend (torch's mul coalesces such
    operands its own way, which made it +0.0; found by the CI's draws)."""
    d = getattr(xp, dtype)
    x = xs.sparse_coo_array(xp.asarray([[0, 1]]), xp.asarray([-4.0, -0.0], dtype=d), (2,))
    y = xs.sparse_coo_array(xp.asarray([[0, 1]]), xp.asarray([-0.0, 2.0], dtype=d), (2,))
    assert not x.is_coalesced() and not y.is_coalesced()
    check_binary(xp, "multiply", x, y)



def test_product_of_complex_negative_zero_duplicates(xp: Any) -> None:
    # duplicates -0 - 0j and -0 - 0j sum to -0 - 0j (as to_dense sums them), times 1 + 0j is 0 - 0j;
    # torch's coalesce added them with torch's complex +, which gave 0 - 0j, and the product 0 + 0j
    d = xp.complex128
    u = xs.sparse_coo_array(xp.asarray([[1, 1]]), xp.asarray([complex(-0.0, -0.0)] * 2, dtype=d), (3,), is_coalesced=False)
    o = xs.to_sparse(xp.ones((3,), dtype=d))
    assert math.copysign(1, complex(to_numpy(xs.to_dense(u))[1]).real) == -1
    got, want = (complex(to_numpy(r)[1]) for r in (xs.to_dense(u * o), xs.to_dense(u) * xs.to_dense(o)))
    signs = [math.copysign(1, z) for z in (got.real, got.imag, want.real, want.imag)]
    assert signs[:2] == signs[2:] == [1, -1]

@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr], ids=str)
def test_complex_products_with_one_nan_part_stay_specified(xp: Any, layout: xs.Layout) -> None:
    # the product of two fills is nan + nanj; an entry with one NaN part (inf + nanj, nan - infj) is
    # another value, which an entry compared as "NaN" whole was dropped for
    d = xp.complex128
    pairs = [
        (xs.sparse_coo_array(xp.asarray([[1]]), xp.asarray([1 + 3j], dtype=d), (2,), fill_value=complex(math.inf, 0)),
         xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([2 + 0j], dtype=d), (2,))),
        (xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([-3 + 0j], dtype=d), (2,)),
         xs.sparse_coo_array(xp.zeros((1, 0), dtype=xp.int64), xp.zeros((0,), dtype=d), (2,), fill_value=complex(1, math.inf))),
    ]  # fmt: skip
    for x, y in pairs:
        x, y = (xs.to_sparse(xs.unsqueeze(v, 0), layout=layout) if layout is xs.sparse_csr else v for v in (x, y))
        with quiet():  # inf * 0 is NaN, as intended
            check_binary(xp, "multiply", x, y)
            got, want = (to_numpy(xs.to_dense(r)) for r in (x * y, xs.to_dense(x) * xs.to_dense(y)))
        # part by part: the oracle's comparison takes a complex value with a NaN part as NaN whole
        for part in (np.real, np.imag):
            np.testing.assert_array_equal(part(got), part(want))


def test_clip_keeps_the_dtype_of_x(backend: str, xp: Any) -> None:
    # the standard: the result has x's dtype, with array bounds of another dtype too
    x = xp.asarray([0.5, 3.0, -2.0], dtype=xp.float32)
    low = xp.zeros((3,), dtype=xp.float64)
    for operand in (x, xs.to_sparse(x)):
        r = xs.clip(operand, low, 2.0)
        assert r.dtype == xp.float32
        np.testing.assert_array_equal(to_numpy(xs.to_dense(r) if isinstance(r, xs.SparseArray) else r), [0.5, 2.0, 0.0])


def test_torch_complex_sparse_plus_dense_at_an_infinity() -> None:
    # torch's sparse + dense complex add gave inf + nan j where torch's dense add gives inf + 1j; each
    # order now gives what torch's dense add gives in that order
    torch = pytest.importorskip("torch")
    e = torch.tensor([complex(math.inf, 0.0), 0j])
    d = torch.tensor([1 + 1j, 2 + 0j])
    for layout in (xs.sparse_coo, xs.sparse_csr):
        s = xs.to_sparse(e[None, :], layout=layout)
        for got, want in ((s + d[None, :], e[None, :] + d[None, :]), (d[None, :] + s, d[None, :] + e[None, :])):
            assert torch.equal(torch.view_as_real(got).isnan(), torch.view_as_real(want).isnan())
            torch.testing.assert_close(got, want, equal_nan=True)


def test_conj_of_uncoalesced_bool_duplicates() -> None:
    # NumPy's conj of a bool is an int8 number: duplicates are added as bools ("or") first, as to_dense does
    a = xs.sparse_coo_array(np.array([[0, 0]]), np.array([True, True]), (2,))
    r = xs.conj(a)
    np.testing.assert_array_equal(to_numpy(xs.to_dense(r)), np.conj(to_numpy(xs.to_dense(a))))


# A dtype each function refuses on every backend (the standard excludes it, and NumPy or torch refused it
# with a raw library error): (function, operand dtypes, the refused kind in the message).
REFUSED_DTYPES = [
    *[(n, ("bool",), "bool") for n in ("abs", "negative", "positive", "sign", "sgn", "round", "ceil", "floor", "trunc")],
    *[(n, ("bool", "bool"), "bool") for n in ("subtract", "pow", "floor_divide", "remainder", "bitwise_left_shift")],
    ("subtract", ("int8", True), "bool"),
    ("subtract", (True, "float32"), "bool"),
    *[(n, ("complex64",), "complex floating") for n in ("ceil", "floor", "trunc", "signbit", "erf", "erfinv")],
    *[
        (n, ("complex64", "complex64"), "complex floating")
        for n in ("less", "less_equal", "greater", "greater_equal", "maximum", "minimum", "atan2", "copysign", "remainder")
    ],
    ("maximum", ("float32", 1j), "complex floating"),
    *[(n, ("float32", "float32"), "real floating") for n in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_right_shift")],
    ("bitwise_and", ("int8", 1.5), "real floating"),
    ("bitwise_invert", ("float64",), "real floating"),
    *[(n, ("int64", "int64"), "integer") for n in ("hypot", "logaddexp", "nextafter")],
    ("imag", ("float64",), "real floating"),
]


def _operand(xp: Any, spec: Any, sparse: bool) -> Any:
    if not isinstance(spec, str):
        return spec
    x = xp.asarray([1, 0, 2, 0], dtype=getattr(xp, spec)) if spec != "bool" else xp.asarray([True, False, True, False])
    return xs.to_sparse_coo(x) if sparse else x


@pytest.mark.parametrize(("name", "dtypes", "kind"), REFUSED_DTYPES, ids=lambda v: str(v))
@pytest.mark.parametrize("sparse", [False, True], ids=["strided", "coo"])
def test_refused_dtypes_raise_a_clear_type_error(backend: str, xp: Any, name: str, dtypes: tuple[Any, ...], kind: str, sparse: bool) -> None:
    # torch raised e.g. '"abs_cpu" not implemented for 'Bool'', NumPy "ufunc 'sign' did not contain a loop",
    # and where one backend computed the function the other refused, one program gave two answers
    if name in ("erf", "erfinv", "sgn") and backend == "array_api_strict":
        pytest.skip("array_api_strict has no erf, erfinv or sgn of its own: xsparse refuses the dtype before that matters")
    if any(d in ("complex64",) for d in dtypes if isinstance(d, str)) and not hasattr(xp, "complex64"):
        pytest.skip("no complex dtype")
    operands = [_operand(xp, d, sparse) for d in dtypes]
    with pytest.raises(TypeError, match=rf"^{name}: takes .* operands, not {kind} ones \(.*\)\. [A-Z].*\.$"):
        getattr(xs, name)(*operands)


def test_refused_dtype_message_names_the_operands() -> None:
    with pytest.raises(TypeError, match=r"subtract: .* not bool ones \(x1\.dtype=int8, x2=True\)\. Use xsparse\.logical_xor"):
        xs.subtract(np.asarray([1, 2], dtype=np.int8), True)
    with pytest.raises(TypeError, match=r"clip: takes integer or real floating operands, not complex floating ones \(x\.dtype=complex128\)"):
        xs.clip(np.asarray([1j]), 0.0, 1.0)
    with pytest.raises(TypeError, match=r"clip: .* not bool ones \(x\.dtype=bool\)"):
        xs.clip(np.asarray([True]), np.asarray([False]), None)


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_functions_both_libraries_compute_outside_the_standard_still_run(backend: str, xp: Any) -> None:
    # the check refuses only what NumPy or torch refuses: these stay the backend's results (array_api_strict
    # refuses them itself, as the standard allows)
    i = xp.asarray([1, 0, 2], dtype=xp.int64)
    b = xp.asarray([True, False, True])
    for r, want in (
        (xs.sin(i), [math.sin(1), 0.0, math.sin(2)]),
        (xs.add(b, 1), [2, 1, 2]),
        (xs.logical_and(i, i), [True, False, True]),
        (xs.less(b, b), [False, False, False]),
        (xs.hypot(xp.asarray([3.0]), 4.0), [5.0]),
    ):
        np.testing.assert_allclose(to_numpy(r).astype(float), np.asarray(want, dtype=float), rtol=1e-6)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor", "logical_not"])
@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
@pytest.mark.parametrize("sparse", [False, True], ids=["strided", "coo"])
def test_torch_logical_functions_of_wide_unsigned_integers(name: str, dtype: str, sparse: bool) -> None:
    # torch has no logical function of uint16/32/64 ("logical_and_cpu" not implemented for 'UInt16'); they
    # compare with zero first, and give NumPy's result
    import torch

    a = np.asarray([0, 1, 2**15, 0, 7], dtype=dtype)
    b = np.asarray([3, 0, 2**15 + 1, 0, 1], dtype=dtype)
    f = getattr(xs, name)

    def wrap(v: Any) -> Any:
        t = torch.from_numpy(v)
        return xs.to_sparse_coo(t) if sparse else t

    pairs = [((a,), (wrap(a),))] if name == "logical_not" else [((a, b), (wrap(a), wrap(b))), ((a, 2), (wrap(a), 2)), ((0, b), (0, wrap(b)))]
    for np_args, torch_args in pairs:
        got = f(*torch_args)
        got = to_numpy(xs.to_dense(got) if isinstance(got, xs.SparseArray) else got)
        np.testing.assert_array_equal(got, getattr(np, name)(*np_args))
        assert got.dtype == np.bool_


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("name", ["floor_divide", "remainder"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "uint16", "uint64", "int64"])
def test_torch_python_bool_divided_by_integers_with_zeros(name: str, dtype: str) -> None:
    # torch raised ZeroDivisionError for True // x with a 0 in x (a Python bool was not taken for an
    # integer), and "div_floor_cpu" not implemented for 'UInt64' for x // True; both give NumPy's result
    import torch

    x = np.asarray([1, 0, 2, 3], dtype=dtype)
    f = getattr(xs, name)
    with np.errstate(all="ignore"):
        for np_args, torch_args in (((True, x), (True, torch.from_numpy(x))), ((x, True), (torch.from_numpy(x), True))):
            got = f(*torch_args)
            want = getattr(np, name)(*np_args)
            np.testing.assert_array_equal(to_numpy(got), want)
            got = f(*(xs.to_sparse_coo(v) if isinstance(v, torch.Tensor) else v for v in torch_args))
            np.testing.assert_array_equal(to_numpy(xs.to_dense(got)), want)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "pow"])
@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr], ids=str)
def test_torch_sparse_float16_with_a_complex_scalar_is_complex64(name: str, layout: xs.Layout) -> None:
    # torch promotes float16 with a complex Python scalar to complex32, which sparse arrays do not hold
    # (invariant 1.5 named no function); both backends now give NumPy's complex64
    import torch

    host = np.asarray([[0, 1.5, 0], [-2, 0, 0.25]], dtype=np.float16)
    f = getattr(xs, name)
    with np.errstate(all="ignore"):
        for order in (1, -1):
            want = f(*(xs.to_sparse(host, layout=layout), 0.5 + 1j)[::order])
            got = f(*(xs.to_sparse(torch.from_numpy(host), layout=layout), 0.5 + 1j)[::order])
            assert got.dtype == torch.complex64 and want.dtype == np.complex64
            np.testing.assert_allclose(to_numpy(xs.to_dense(got)), to_numpy(xs.to_dense(want)), rtol=1e-6, equal_nan=True)
            reference = getattr(np, "power" if name == "pow" else name)(*(host, 0.5 + 1j)[::order])
            np.testing.assert_allclose(to_numpy(xs.to_dense(want)), reference, rtol=1e-3, equal_nan=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch: "ComplexHalf support is experimental"
        c32 = torch.zeros(2, 3, dtype=torch.complex32)
    with pytest.raises(TypeError, match=r"^add: sparse arrays do not hold torch's complex32, the dtype of an operand \(dtype=complex32\)\. Cast it to complex64"):
        xs.add(xs.to_sparse_coo(torch.from_numpy(host)), c32)


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))  # array_api_strict refuses such mixes
@pytest.mark.parametrize("name", ["atan2", "copysign", "add", "divide", "maximum"])
@pytest.mark.parametrize(("da", "db"), [("int8", "uint8"), ("int16", "int8"), ("uint8", "int32"), ("float32", "int8")])
def test_two_sparse_operands_of_two_dtypes_get_the_dense_result_dtype(backend: str, name: str, da: str, db: str) -> None:
    # the merge computed in the promoted dtype: NumPy's atan2 and copysign of int8 and uint8 are float16,
    # of the promoted int16 float32
    xp = xs.get_backend(backend).load()
    a = xp.asarray([[0, 1, -2, 0], [3, 0, 0, 5]] if not da.startswith("uint") else [[0, 1, 2, 0], [3, 0, 0, 5]], dtype=getattr(xp, da))
    b = xp.asarray([[3, 0, 1, 0], [0, 0, 2, 7]], dtype=getattr(xp, db))
    f = getattr(xs, name)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        dense = f(a, b)
        for layout in (xs.sparse_coo, xs.sparse_csr):
            got = f(xs.to_sparse(a, layout=layout), xs.to_sparse(b, layout=layout))
            assert got.dtype == dense.dtype, (layout, got.dtype, dense.dtype)
            np.testing.assert_array_equal(xs.testing.to_numpy(xs.to_dense(got)), xs.testing.to_numpy(dense))


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch", "array_api_strict"]))
def test_subtracting_a_stored_nan_keeps_its_sign_bit(backend: str) -> None:
    # COO - COO concatenated x with negative(y), and negative flips a NaN's sign bit, where the dense
    # subtraction (NumPy's, torch's) keeps it; diff subtracts the same way
    xp = xs.get_backend(backend).load()
    x, y = xp.asarray([0.0, 0.0, 5.0]), xp.asarray([math.nan, 0.0, 0.0])
    got = xs.to_dense(xs.subtract(xs.to_sparse(x), xs.to_sparse(y)))
    np.testing.assert_array_equal(np.signbit(to_numpy(got)), np.signbit(to_numpy(xp.subtract(x, y))))
    row = xp.asarray([[math.nan, 0.0, 1.0]])
    dense_diff = xp.subtract(row[:, 1:], row[:, :-1])
    np.testing.assert_array_equal(np.signbit(to_numpy(xs.to_dense(xs.diff(xs.to_sparse(row), axis=1)))), np.signbit(to_numpy(dense_diff)))


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr], ids=str)
def test_a_zero_d_sparse_operand_acts_as_its_element(backend: str, xp: Any, layout: xs.Layout) -> None:
    # A[0, 0] is a 0-d sparse array; broadcast as a sparse array it stored every element of A + A[0, 0]
    a = xs.to_sparse(xp.asarray([[2.0, 0.0, 0.0], [0.0, 0.0, 3.0]], dtype=xp.float64), layout=layout)
    s = a[0, 0]
    assert isinstance(s, xs.SparseArray) and s.ndim == 0
    d = xs.to_dense(a)
    for got, want in ((a + s, d + 2.0), (s * a, 2.0 * d), (a / s, d / 2.0), (s - a, 2.0 - d)):
        assert isinstance(got, xs.SparseArray) and got.layout is layout and got.nnz == 2
        assert_sparse_equal(got, want)
    # a 0-d sparse array beside another keeps its layout
    assert isinstance(s + s, xs.SparseArray) and float(xs.to_dense(s + s)) == 4.0
