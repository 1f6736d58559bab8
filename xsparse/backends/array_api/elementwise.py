"""Generic elementwise kernels (Array API only): unary and binary functions on strided and sparse arrays.

**Unary.** A function ``f`` is registered for ``strided`` (the backend's own function, or an Array API
expression for torch's extra names such as ``deg2rad``) and for the indexed sparse layouts, where the
kernel maps the stored values *through the strided kernel of the same operation* and maps the fill
value too. So ``cos`` of a sparse array stays sparse, with fill value ``cos(0) = 1``: nothing is
densified, and the unspecified elements still mean what they meant. Uncoalesced COO is coalesced first
unless ``f`` is linear (``sqrt(a + b) != sqrt(a) + sqrt(b)``).

**Binary.** ``f(x1, x2)`` follows the Array API's broadcasting and the backend's type promotion:

- with a Python scalar (or a 0-d strided array), the stored values and the fill value are mapped;
- sparse with strided gives strided (as in torch), except for the *annihilating* functions (``multiply``,
  ``logical_and``, ``bitwise_and``) of a sparse operand whose fill value is 0, whose result is 0 wherever
  that operand is: they keep the sparse operand's layout and structure (broadcast to the result shape);
- sparse with sparse, of any two layouts: both are broadcast as COO, the second is brought to the first
  one's split into sparse and dense dimensions, and the entries are merged; where one side has no entry
  it takes its fill value, and the result's fill value is ``f`` of the two fill values. The result has
  the first operand's layout. For the annihilating functions, an entry that only one side specifies and
  whose result equals the result's fill value is dropped, so a product stays as sparse as the sparser
  operand (an entry ``inf * 0 = nan`` is kept: fill values are honoured exactly, as IEEE 754 has it).
  Where no such entry exists, a product broadcast along a dimension pairs the entries that share the
  indices the sides do not broadcast, rather than repeating either side (:func:`_join_broadcast`);
- COO + COO and COO - COO of one shape and fill value 0 concatenate the entries without coalescing, as
  torch does.

A compressed result with batch dimensions must hold equally many specified elements in every batch
(invariant 3.9); where the merged entries do not, the shorter batches are padded with explicit entries
holding the fill value (the first unspecified positions of the batch), which changes no element.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import array_api_compat
import numpy as np

from ... import dispatch
from ...dispatch import register
from ...formats import INDEXED, COOArray, SparseArray, sparse_coo, strided
from ...formats._ops import contiguous, lexsort_indices, prod
from .conversion import (
    _linearize,
    coalesce_coo,
    fill_array,
    summed_before_cast,
    from_ordered,
    gather_or_fill,
    is_plus_zero,
    result_dtype,
    scalar_array,
    signed_twin,
    specified_mask,
    take_values,
    to_ordered,
)
from .shape import as_layout_of, broadcast_coo, regroup_coo, wide_enough

__all__ = [
    "UNARY",
    "LINEAR_UNARY",
    "NATIVE_ONLY_UNARY",
    "BINARY",
    "ANNIHILATING",
    "python_scalar",
    "past_floating_range",
    "broadcast_shapes",
    "merge_coo",
    "broadcast_coo",  # re-exported for the linear-algebra kernels; it lives in .shape
]


# -- unary functions -------------------------------------------------------------------------------


def _as_float(xp: Any, x: Any) -> Any:
    if xp.isdtype(x.dtype, ("real floating", "complex floating")):
        return x
    return xp.astype(x, xp.__array_namespace_info__().default_dtypes(device=x.device)["real floating"])


def _angle(xp: Any, x: Any) -> Any:
    if xp.isdtype(x.dtype, "complex floating"):
        return xp.atan2(xp.imag(x), xp.real(x))
    x = _as_float(xp, x)
    # torch's angle of a real number: pi below 0, else 0, and NaN stays NaN
    return xp.where(xp.isnan(x), x, xp.where(x < 0, xp.asarray(math.pi, dtype=x.dtype, device=x.device), xp.zeros_like(x)))


def _isposinf(xp: Any, x: Any) -> Any:
    if not xp.isdtype(x.dtype, "real floating"):
        return xp.zeros(x.shape, dtype=xp.bool, device=x.device)
    return xp.isinf(x) & (x > 0)


def _isneginf(xp: Any, x: Any) -> Any:
    if not xp.isdtype(x.dtype, "real floating"):
        return xp.zeros(x.shape, dtype=xp.bool, device=x.device)
    return xp.isinf(x) & (x < 0)


def _deg2rad(xp: Any, x: Any) -> Any:
    return _as_float(xp, x) * (math.pi / 180.0)


def _rad2deg(xp: Any, x: Any) -> Any:
    return _as_float(xp, x) * (180.0 / math.pi)


def _sign(xp: Any, x: Any) -> Any:
    if not xp.isdtype(x.dtype, "complex floating"):
        return _standard("sign")(xp, x)
    # x / |x|, and 0 at 0: the divisor is 1 there, so that no 0 / 0 is ever computed
    magnitude = xp.abs(x)
    zero = magnitude == 0
    return xp.where(zero, xp.zeros_like(x), x / xp.astype(xp.where(zero, xp.ones_like(magnitude), magnitude), x.dtype))


# -- unsigned integers that the backend only stores ----------------------------------------------------
# torch stores uint16, uint32 and uint64 but computes few functions of them ("add_stub", "lt_cpu",
# "abs_cpu" ... not implemented for 'UInt32'), and promotes them with no other dtype. Where the plain
# call fails for such a dtype, the operands are promoted by the standard's table and the function is
# computed on the same-width signed twin: modular functions (sums, products, bitwise ones) give the same
# bits there; comparisons and extrema run on the order-preserving map (conversion.to_ordered); a right
# shift is made logical (a count of the width or more gives 0); floor division, remainder and powers of
# uint16/uint32 run exactly on int64, powers of uint64 on int64 with the exponent reduced (_reduced_exponent).
# Logical functions compare with zero first. Floor division and remainder of uint64 have no such twin and keep the backend's error here; the torch
# backend registers an exact emulation of them (backends/torch/elementwise.py).

_IDENTITY_ON_UNSIGNED = frozenset({"abs", "positive", "floor", "ceil", "trunc", "round", "real", "conj"})
_MODULAR_UNARY = frozenset({"negative", "square", "bitwise_invert"})
_ORDERED_BINARY = frozenset({"less", "less_equal", "greater", "greater_equal", "maximum", "minimum"})
_MODULAR_BINARY = frozenset({
    "add", "subtract", "multiply", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "equal", "not_equal",
})  # fmt: skip
_WIDENED_BINARY = frozenset({"floor_divide", "remainder", "pow"})
_LOGICAL_BINARY = frozenset({"logical_and", "logical_or", "logical_xor"})


def _unsigned_unary(xp: Any, name: str, x: Any) -> Any:
    """``name(x)`` for an unsigned ``x`` the backend does not compute (see above); None where no twin serves."""
    if name == "logical_not":
        return xp.logical_not(x != 0)
    twin = signed_twin(xp, x.dtype)
    if twin is None:
        return None
    if name in _IDENTITY_ON_UNSIGNED:
        return xp.asarray(x, copy=True)
    if name == "sign":
        return xp.astype(x != 0, x.dtype)
    if name in _MODULAR_UNARY:
        return xp.astype(getattr(xp, name)(xp.astype(x, twin)), x.dtype)
    return None


def _twin_scalar(value: int, bits: int) -> int:
    """The Python int ``value`` as the signed ``bits``-bit integer with the same low bits."""
    half = 1 << (bits - 1)
    return (value + half) % (2 * half) - half


def _logical_right_shift(xp: Any, t: Any, count: Any, bits: int) -> Any:
    """``t >> count`` on the signed twin ``t`` of unsigned ``bits``-bit values, shifting zeros in: one shift
    with the sign bit cleared, then arithmetic shifts of a non-negative value. ``count`` is a Python int
    (unsigned) or the twin of the unsigned counts; a count of ``bits`` or more gives 0, as NumPy's."""
    top_clear = xp.asarray(xp.iinfo(t.dtype).max, dtype=t.dtype, device=array_api_compat.device(t))
    once = xp.bitwise_and(xp.bitwise_right_shift(t, 1), top_clear)
    if isinstance(count, int):
        if count >= bits:
            return xp.zeros_like(t)
        return t if count == 0 else xp.bitwise_right_shift(once, count - 1)
    # a count with its top bit set is negative on the twin: as large as the ones of bits or more
    beyond = (count < 0) | (count >= bits)
    safe = xp.where(beyond, xp.zeros_like(count), count)
    rest = xp.bitwise_right_shift(once, xp.clip(safe - 1, min=0))
    return xp.where(beyond, xp.zeros_like(rest), xp.where(safe == 0, t, rest))


# Modulo 2**64 the odd numbers form a group of exponent 2**62, so x**e of an odd x depends only on
# e mod 2**62, and x**e of an even x is 0 for every e >= 64: an exponent e >= 2**62 may be replaced by
# (e mod 2**62) + 2**62, which gives the same power of every x and fits the int64 twin as a non-negative
# exponent (a uint64 exponent >= 2**63 would read as a negative one there).
_POW_CYCLE = 2**62


def _reduced_exponent(xp: Any, e: Any) -> Any:
    """The uint64 exponent ``e`` (a Python int, or its int64 twin) as an exponent below 2**63 that gives the
    same power of every uint64 base (see above)."""
    if isinstance(e, int):
        return e if e < _POW_CYCLE else e % _POW_CYCLE + _POW_CYCLE
    dev = array_api_compat.device(e)
    low = xp.asarray(_POW_CYCLE - 1, dtype=e.dtype, device=dev)
    top = xp.asarray(_POW_CYCLE, dtype=e.dtype, device=dev)
    return xp.where((e < 0) | (e >= top), xp.bitwise_or(xp.bitwise_and(e, low), top), e)


def _unsigned_binary(xp: Any, name: str, x: Any, y: Any, f: Callable[[Any, Any], Any]) -> Any:
    """``name(x, y)``, computed by ``f``, where the backend refused it for an unsigned dtype (see above);
    None where no twin serves."""
    if name in _LOGICAL_BINARY:
        return f(*(bool(v) if isinstance(v, (bool, int, float, complex)) else v != 0 for v in (x, y)))
    if any(isinstance(v, (float, complex)) for v in (x, y)):
        return None
    arrays = [v for v in (x, y) if not isinstance(v, int)]
    dtype = result_dtype(xp, *(v.dtype for v in arrays))
    x, y = (v if isinstance(v, int) else xp.astype(v, dtype, copy=False) for v in (x, y))
    if len({v.dtype for v in arrays}) > 1:
        # the backend refused the promotion only: retry on the promoted operands
        try:
            return f(x, y)
        except (NotImplementedError, RuntimeError):
            pass
    twin = signed_twin(xp, dtype)
    if twin is None:
        return None
    bits = xp.iinfo(dtype).bits
    if name in _ORDERED_BINARY:
        half = 2 ** (bits - 1)
        out = f(*(v - half if isinstance(v, int) else to_ordered(xp, v) for v in (x, y)))
        return out if out.dtype == xp.bool else from_ordered(xp, out, dtype)
    if name in ("pow", "bitwise_right_shift"):
        # y is read as an unsigned value below: one out of the dtype's range is NumPy's OverflowError
        for v in (x, y):
            if isinstance(v, int) and not 0 <= v < 2**bits:
                raise OverflowError(
                    f"{name}: a Python int operand is out of the range of the array's dtype (value={v}, "
                    f"dtype=uint{bits}). Pass an int in [0, 2**{bits}), or cast the array to a wider dtype."
                )
    tx, ty = (_twin_scalar(v, bits) if isinstance(v, int) else xp.astype(v, twin) for v in (x, y))
    if name in _MODULAR_BINARY:
        out = f(tx, ty)
    elif name == "pow" and bits == 64:
        out = f(tx, _reduced_exponent(xp, y if isinstance(y, int) else ty))
    elif name == "bitwise_right_shift":
        if isinstance(tx, int):
            # a Python int shifted by an array: the int as an array of the twin dtype
            tx = xp.asarray(tx, dtype=twin, device=array_api_compat.device(ty))
        out = _logical_right_shift(xp, tx, y if isinstance(y, int) else ty, bits)
    elif name in _WIDENED_BINARY and bits < 64:
        out = f(*(v if isinstance(v, int) else xp.astype(v, xp.int64) for v in (x, y)))
    else:
        return None
    return out if out.dtype == xp.bool else xp.astype(out, dtype)


def _standard(name: str) -> Callable[[Any, Any], Any]:
    def apply(xp: Any, x: Any) -> Any:
        try:
            return getattr(xp, name)(x)
        except (NotImplementedError, RuntimeError):
            out = _unsigned_unary(xp, name, x)
            if out is None:
                raise
            return out

    return apply


# name -> how the strided kernel computes it from ``xp``: the Array API standard's unary functions and
# torch's zero-preserving extras that have an Array API expression.
UNARY: dict[str, Callable[[Any, Any], Any]] = {
    name: _standard(name)
    for name in (
        "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "bitwise_invert", "ceil", "conj", "cos",
        "cosh", "exp", "expm1", "floor", "imag", "isfinite", "isinf", "isnan", "log", "log1p", "log2", "log10",
        "logical_not", "negative", "positive", "real", "reciprocal", "round", "signbit", "sin", "sinh",
        "square", "sqrt", "tan", "tanh", "trunc",
    )
}  # fmt: skip
UNARY.update(
    sign=_sign,
    angle=_angle,
    sgn=_sign,
    isposinf=_isposinf,
    isneginf=_isneginf,
    deg2rad=_deg2rad,
    rad2deg=_rad2deg,
    conj_physical=_standard("conj"),
)
# f(a + b) == f(a) + f(b): safe on uncoalesced data (up to rounding for deg2rad and rad2deg)
LINEAR_UNARY = frozenset({"negative", "positive", "conj", "conj_physical", "real", "imag", "deg2rad", "rad2deg"})
# no Array API expression: only backends with a native strided kernel compute these
NATIVE_ONLY_UNARY = ("erf", "erfinv")


def python_scalar(xp: Any, x: Any) -> Any:
    """The Python scalar of a 0-d array, of the kind its dtype mixes with."""
    if xp.isdtype(x.dtype, "bool"):
        return bool(x)
    if xp.isdtype(x.dtype, "integral"):
        try:
            return int(x)
        except RuntimeError:
            # torch reads no uint64 above the int64 range as a Python int: read the twin's bits
            twin = signed_twin(xp, x.dtype)
            if twin is None:
                raise
            bits: int = xp.iinfo(x.dtype).bits
            return int(xp.astype(x, twin)) % 2**bits
    if xp.isdtype(x.dtype, "real floating"):
        return float(x)
    return complex(x)


# -- computing as the dense array does -----------------------------------------------------------------
# An unspecified element must read what the same function of the dense array gives there, and a library
# may compute a function of 0-d arrays by another path than of arrays with a dimension: NumPy's
# pow(-inf, 0.5) of 0-d arrays goes through sqrt and gives NaN, of 1-D ones +inf (the standard's value).
# So a fill value is computed on a one-element array with its operand's number of dimensions
# (:func:`_fill_element`), 0-d only for a 0-d operand, whose dense array is 0-d too; and the one stored
# value of a 0-d array is computed 0-d (:func:`_values_like_dense`). Python scalars and 0-d strided
# operands are passed as they are, as they meet the dense array.

# What a function may raise for particular values (NumPy's and torch's integer pow to a negative power,
# NumPy's errors under numpy.errstate(all="raise")): for the fill values alone it is no error where the
# result has no unspecified element (:func:`_result_fill`).
_VALUE_ERRORS = (ValueError, RuntimeError, ArithmeticError)


def _fill_element(xp: Any, a: SparseArray) -> Any:
    """The fill value of ``a`` as a one-element array with ``a``'s number of dimensions (see above)."""
    return xp.reshape(fill_array(xp, a), (1,) * a.ndim)


def _fill_beside_scalar(xp: Any, a: SparseArray) -> Any:
    """The fill value of ``a`` as it meets a scalar operand: a one-element 1-D array, as the stored values are
    (0-d for a 0-d ``a``). Of more dimensions, array-api-strict would broadcast the scalar (which it makes a
    one-element 1-D array) against it, and NumPy's one-element broadcasting loop gives pow(-inf, 0.5) as NaN,
    where its loop over more elements, and the standard, give +inf."""
    return fill_array(xp, a) if a.ndim == 0 else xp.reshape(fill_array(xp, a), (1,))


def _values_like_dense(xp: Any, compute: Callable[..., Any], ndim: int, *values: Any) -> Any:
    """``compute(*values)`` of the stored values of arrays with ``ndim`` dimensions; where they are 0-d,
    their one value is computed 0-d, as the dense array is (see above)."""
    if ndim or any(tuple(v.shape) != (1,) for v in values):
        return compute(*values)
    out = compute(*(xp.reshape(v, ()) for v in values))
    # NumPy's functions give NumPy scalars for 0-d arrays
    return xp.reshape(xp.asarray(out), (1,))


def _attempt(compute: Callable[[], Any]) -> tuple[Any, Exception | None]:
    """``(compute(), None)``, or ``(None, error)`` where it raised one of :data:`_VALUE_ERRORS`."""
    try:
        return compute(), None
    except _VALUE_ERRORS as error:
        return None, error


def _result_fill(xp: Any, fill: Any, error: Exception | None, values: Any, shape: tuple[int, ...]) -> Any:
    """The fill value of a result with ``values`` (every specified element once) and ``shape``: the
    computed ``fill`` (an array of one element) as a Python scalar; where computing it raised ``error``,
    0 of the values' dtype if the result has no unspecified element (the fill value is never read, and
    the dense computation does not meet it), else the error."""
    if error is None:
        if _tracks_gradient(fill):
            # only a 0-d operand whose fill value does not depend on it gets here (_fill_stays_zero): a
            # constant, whose gradient is 0; torch warns when a tensor that requires grad is read
            fill = fill.detach()
        return python_scalar(xp, xp.reshape(fill, ()))
    if prod(tuple(values.shape)) != prod(shape):
        raise error
    return python_scalar(xp, xp.zeros((), dtype=values.dtype, device=array_api_compat.device(values)))


def _strided_kernel(name: str, compute: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def kernel(xp: Any, x: Any) -> Any:
        return compute(xp, x)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_strided"
    kernel.__doc__ = f"{name}(strided) -> strided: the backend's elementwise function; O(numel)."
    return kernel


def _sparse_kernel(name: str) -> Callable[..., Any]:
    linear = name in LINEAR_UNARY

    def kernel(xp: Any, a: SparseArray) -> SparseArray:
        backend = a._backend.name

        def f(x: Any) -> Any:
            return dispatch.call(name, (strided,), backend, xp, x)

        fill, error = _attempt(lambda: f(_fill_element(xp, a)))
        # f(p + q) == f(p) + f(q) only where the dtype stays: duplicates of bool add as "or", NumPy's int8
        # conj of a bool as numbers
        if (error is not None or not linear or fill.dtype != a.dtype) and isinstance(a, COOArray):
            a = coalesce_coo(xp, a)
        # real and imag return strided views of the complex values, which the formats store contiguous
        values = contiguous(a._backend, xp, _values_like_dense(xp, f, a.ndim, a._vals))
        return a._with_values(values, _result_fill(xp, fill, error, values, tuple(a.shape)))

    kernel.__name__ = kernel.__qualname__ = f"_{name}_indexed"
    kernel.__doc__ = f"{name}(sparse) -> sparse: maps the stored values and the fill value; O(nnz)."
    return kernel


def _native_only_message(name: str) -> str:
    return (
        f"the Array API standard has no {name}, so only backends with a native kernel compute it (numpy through "
        f"scipy.special.{name}, torch through torch.special.{name}); move the array with "
        "xsparse.to_backend(x, 'numpy') or xsparse.to_backend(x, 'torch')"
    )


def _native_only_strided(name: str) -> Callable[..., Any]:
    def supports(xp: Any, x: Any) -> str | None:
        # reached only where no native kernel of the backend took the call
        return _native_only_message(name)

    def kernel(xp: Any, x: Any) -> Any:
        raise AssertionError("unreachable: this kernel always declines")  # pragma: no cover

    kernel.__name__ = kernel.__qualname__ = f"_{name}_strided"
    kernel.__doc__ = f"{name}(strided): declines; the Array API has no {name} (native kernels compute it)."
    return register(name, (strided,), supports=supports)(kernel)


def _native_only_sparse(name: str) -> Callable[..., Any]:
    def supports(xp: Any, a: SparseArray) -> str | None:
        backend = a._backend.name
        native = any(k.backend == backend for k in dispatch.resolve(name, (strided,), backend))
        return None if native else _native_only_message(name)

    return register(name, (INDEXED,), supports=supports)(_sparse_kernel(name))


for _name, _compute in UNARY.items():
    register(_name, (strided,))(_strided_kernel(_name, _compute))
    register(_name, (INDEXED,))(_sparse_kernel(_name))
for _name in NATIVE_ONLY_UNARY:
    _native_only_strided(_name)
    _native_only_sparse(_name)


def _clip(xp: Any, x: Any, min: Any, max: Any) -> Any:
    try:
        return xp.clip(x, min=min, max=max)
    except (NotImplementedError, RuntimeError):
        if signed_twin(xp, x.dtype) is None:
            raise
    # an unsigned dtype the backend compares not: clip on the order-preserving map (see _unsigned_binary)
    half = 2 ** (xp.iinfo(x.dtype).bits - 1)

    def ordered(bound: Any) -> Any:
        if bound is None or isinstance(bound, int):
            return bound if bound is None else bound - half
        return to_ordered(xp, xp.astype(bound, x.dtype))

    return from_ordered(xp, xp.clip(to_ordered(xp, x), min=ordered(min), max=ordered(max)), x.dtype)


@register("clip", (strided,))
def _clip_strided(xp: Any, x: Any, min: Any = None, max: Any = None) -> Any:
    """clip(strided, min, max) -> strided: the backend's clip with scalar bounds; O(numel)."""
    return _clip(xp, x, min, max)


@register("clip", (INDEXED,))
def _clip_indexed(xp: Any, a: SparseArray, min: Any = None, max: Any = None) -> SparseArray:
    """clip(sparse, min, max) -> sparse: clips the stored values and the fill value; O(nnz)."""
    if isinstance(a, COOArray):
        a = coalesce_coo(xp, a)
    values = _values_like_dense(xp, lambda v: _clip(xp, v, min, max), a.ndim, a._vals)
    return a._with_values(values, python_scalar(xp, xp.reshape(_clip(xp, _fill_element(xp, a), min, max), ())))


# -- binary functions ------------------------------------------------------------------------------

BINARY = (
    "add", "atan2", "bitwise_and", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "copysign", "divide", "equal", "floor_divide", "greater", "greater_equal", "hypot", "less", "less_equal",
    "logaddexp", "logical_and", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "nextafter",
    "not_equal", "pow", "remainder", "subtract",
)  # fmt: skip
# f(0, y) == 0 for every y but, for multiply, the non-finite ones (0 * inf is NaN): where a sparse operand
# with fill value 0 leaves an element out, the result is 0, so a product keeps that operand's sparsity.
ANNIHILATING = frozenset({"multiply", "logical_and", "bitwise_and"})


# The standard leaves an integer division by zero (x // 0, x % 0) unspecified, but the call must not fail,
# and a program moved between backends or devices should not change its answer. xsparse gives NumPy's 0
# for both on every backend. Backends differ: NumPy and CuPy give 0; torch raises on the CPU
# ("RuntimeError: ZeroDivisionError", which the fill values alone provoke: 0 // 0 of two sparse operands)
# and gives -1 on CUDA (every bit set); jax.numpy gives -2 for 7 // 0. A tiny division by zero on the
# operands' namespace, device and dtype, once, says which: where the backend gives 0, its own division
# runs at no cost; where it raises, the division is redone with 1 in place of each zero divisor and 0 put
# there (only when it raised); where it gives something else, every division is done that way.
_INTEGER_DIVISION = frozenset({"floor_divide", "remainder"})
_GIVES_ZERO, _RAISES, _GIVES_OTHER = "gives 0", "raises", "gives another value"
_ZERO_DIVISOR: dict[tuple[str, ...], str] = {}


def _is_integer(xp: Any, v: Any) -> bool:
    """Whether ``v`` divides as an integer: an integer or boolean array or Python scalar."""
    if isinstance(v, (float, complex)):
        return False
    return isinstance(v, int) or bool(xp.isdtype(v.dtype, ("integral", "bool")))


def _zero_divisor_behaviour(xp: Any, name: str, f: Callable[[Any, Any], Any], x: Any, y: Any) -> str:
    """What the backend's integer ``name`` does where the array ``y`` holds a 0: _GIVES_ZERO, _RAISES or
    _GIVES_OTHER. Found once per namespace, operation, device and operand kinds, by dividing a few
    dividends of ``x``'s dtype (or the Python int 7) by zeros of ``y``'s dtype, so that the promotion is the
    call's own (a bool dividend by an int64 divisor divides as int64)."""
    dev = array_api_compat.device(y)
    dividend = str(x.dtype) if hasattr(x, "dtype") else "int"
    key = (getattr(xp, "__name__", type(xp).__name__), name, str(dev), dividend, str(y.dtype))
    found = _ZERO_DIVISOR.get(key)
    if found is not None:
        return found
    if not hasattr(x, "dtype"):
        n: Any = 7
    elif xp.isdtype(x.dtype, "signed integer"):
        n = xp.asarray([7, -7, 0], dtype=x.dtype, device=dev)
    else:
        n = xp.asarray([1, 0], dtype=x.dtype, device=dev)
    try:
        with np.errstate(divide="ignore", invalid="ignore"):  # NumPy's (and array_api_strict's) warning
            r = f(n, xp.zeros(tuple(n.shape) if hasattr(n, "shape") else (1,), dtype=y.dtype, device=dev))
    except (NotImplementedError, RuntimeError, TypeError, ZeroDivisionError):
        found = _RAISES  # (a dtype it does not divide raises again in the call itself)
    else:
        try:
            found = _GIVES_ZERO if not bool(xp.any(r != 0)) else _GIVES_OTHER
        except Exception:  # a traced value (inside jax.jit) cannot be read: mask, whatever the backend gives
            return _GIVES_OTHER
    if dev is not None:  # (a tracer has no device: nothing learnt for later calls)
        _ZERO_DIVISOR[key] = found
    return found


def _masked_division(xp: Any, f: Callable[[Any, Any], Any], x: Any, y: Any, when_zero_only: bool = True) -> Any:
    """``f(x, y)`` for an array ``y``, with 1 in place of each integer divisor ``y == 0`` and 0 there; with
    ``when_zero_only``, None where no divisor is 0 (a look at the divisor, which waits for a GPU: without
    it, no wait)."""
    zero = y == 0
    if when_zero_only and not bool(xp.any(zero)):
        return None
    out = f(x, xp.where(zero, xp.ones_like(y), y))
    return xp.where(zero, xp.zeros_like(out), out)


def _zero_safe_division(xp: Any, name: str, f: Callable[[Any, Any], Any], x: Any, y: Any) -> Any:
    """``f(x, y)`` for ``floor_divide`` or ``remainder``, 0 where an integer ``y`` is 0, on every backend."""
    integers = _is_integer(xp, x) and _is_integer(xp, y)
    if integers and isinstance(y, int) and hasattr(x, "dtype"):
        # a Python int divisor: 0 gives zeros (in the dtype of a division by 1), any other a plain division
        return xp.zeros_like(f(x, 1)) if y == 0 else f(x, y)
    if integers and hasattr(y, "dtype"):
        if _zero_divisor_behaviour(xp, name, f, x, y) == _GIVES_OTHER:
            return _masked_division(xp, f, x, y, when_zero_only=False)
    try:
        return f(x, y)
    except (NotImplementedError, RuntimeError):
        if not (integers and hasattr(y, "dtype")):
            raise
        try:
            out = _masked_division(xp, f, x, y)
        except (NotImplementedError, RuntimeError):
            out = None  # the masked division fails too (a dtype the backend does not divide): the first error
        if out is None:
            raise
        return out


def _binary_func(name: str) -> Callable[[Any, Any, Any], Any]:
    def apply(xp: Any, x: Any, y: Any) -> Any:
        f = getattr(xp, name)
        if name in _INTEGER_DIVISION:
            plain = f

            def f(x: Any, y: Any) -> Any:
                return _zero_safe_division(xp, name, plain, x, y)

        try:
            out = f(x, y)
        except (NotImplementedError, RuntimeError):
            out = _unsigned_binary(xp, name, x, y, f)
            if out is None:
                raise
        return _sign_of_divisor(xp, out, y) if name == "remainder" else out

    return apply


def _sign_of_divisor(xp: Any, r: Any, y: Any) -> Any:
    """A zero remainder takes the sign of the divisor, as the Array API says (torch's takes the dividend's)."""
    if not hasattr(r, "dtype") or not xp.isdtype(r.dtype, "real floating"):
        return r
    divisor = y if hasattr(y, "dtype") else scalar_array(xp, y, r.dtype, array_api_compat.device(r))
    return xp.where(r == 0, xp.copysign(r, xp.astype(divisor, r.dtype)), r)


def broadcast_shapes(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The Array API broadcast of ``shapes``; a ValueError in xsparse's message shape when they do not broadcast."""
    ndim = max(len(s) for s in shapes)
    out = []
    for axis, dims in enumerate(zip(*((1,) * (ndim - len(s)) + tuple(s) for s in shapes))):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            listed = " and ".join(str(tuple(s)) for s in shapes)
            raise ValueError(
                f"{op}: the shapes {listed} do not broadcast (axis={axis - ndim}, sizes={sorted(sizes)}). Make the "
                "sizes of every axis equal, or 1 where an operand should be repeated."
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _group_sparse(xp: Any, c: COOArray, k: int) -> COOArray:
    """``c`` with its last ``k`` sparse dimensions made dense: the entries that share the leading indices
    become one entry, whose positions no entry gave hold the fill value. O(groups * their size)."""
    c = coalesce_coo(xp, c)
    sd, n = c.sparse_dim(), c.nnz
    head = sd - k
    grouped = tuple(c.shape[head:sd])
    p = prod(grouped)
    dense = tuple(c.shape[sd:])
    dev = c.device
    if n == 0:
        values = xp.zeros((0, *grouped, *dense), dtype=c.dtype, device=dev)
        return COOArray(c._idx[:head, :], values, c.shape, backend=c._backend, xp=xp, coalesced=True, fill_value=c.fill_value)
    idx = c._idx
    first = xp.ones((1,), dtype=xp.bool, device=dev)
    if head:
        is_start = xp.concat([first, xp.any(idx[:head, 1:] != idx[:head, :-1], axis=0)])
    else:
        is_start = xp.concat([first, xp.zeros((n - 1,), dtype=xp.bool, device=dev)])
    ordinal = xp.cumulative_sum(xp.astype(is_start, xp.int64)) - 1
    starts = xp.nonzero(is_start)[0]
    groups = starts.shape[0]
    keys = ordinal * p + _linearize(xp, idx[head:, :], grouped)
    wanted = xp.arange(groups * p, dtype=xp.int64, device=dev)
    pos = xp.clip(xp.searchsorted(keys, wanted), 0, n - 1)
    found = xp.reshape(xp.take(keys, pos) == wanted, (-1, *((1,) * len(dense))))
    values = gather_or_fill(xp, c, pos, found)
    return COOArray(
        xp.take(idx[:head, :], starts, axis=1), xp.reshape(values, (groups, *grouped, *dense)), c.shape,
        backend=c._backend, xp=xp, coalesced=True, fill_value=c.fill_value,
    )  # fmt: skip


def _as_coo(xp: Any, a: SparseArray) -> COOArray:
    """``a`` as a COO array (batch and sparse dimensions sparse), by the backend's fastest conversion."""
    if isinstance(a, COOArray):
        return a
    from ..._conversion import to_sparse

    return cast(COOArray, to_sparse(a, layout=sparse_coo))


def _lexsort(xp: Any, idx: Any, shape: tuple[int, ...]) -> Any:
    """The stable permutation that sorts the int64 index columns ``idx`` lexicographically."""
    if idx.shape[0] and prod(shape) < 2**62:
        return xp.argsort(_linearize(xp, idx, shape), stable=True)
    return lexsort_indices(xp, idx)


def merge_coo(xp: Any, a: COOArray, b: COOArray) -> tuple[Any, Any, Any, Any, Any]:
    """Align two coalesced COO arrays of one shape and sparse_dim on the union of their entries.

    Returns ``(indices, va, vb, has_a, has_b)``: the sorted union's indices (in ``a``'s index dtype), each
    side's values there (its fill value where it has no entry; each in its own dtype), and where each
    side has an entry. O((nnz_a + nnz_b) log(nnz_a + nnz_b)).
    """
    na, nb = a.nnz, b.nnz
    dev = a.device
    sd = a.sparse_dim()
    idx = xp.concat([xp.astype(a._idx, xp.int64), xp.astype(b._idx, xp.int64)], axis=1)
    n = na + nb
    tail = (1,) * a.dense_dim()
    if n == 0:
        none = xp.zeros((0,), dtype=xp.bool, device=dev)
        return xp.astype(idx, a._idx.dtype), a._vals, b._vals, none, none
    # a's entries precede b's in the concatenation, and a stable sort keeps them first within a group
    perm = _lexsort(xp, idx, tuple(a.shape[:sd]))
    sidx = xp.take(idx, perm, axis=1)
    from_b = perm >= na
    first = xp.ones((1,), dtype=xp.bool, device=dev)
    if sd:
        differs = xp.any(sidx[:, 1:] != sidx[:, :-1], axis=0)
    else:
        differs = xp.zeros((n - 1,), dtype=xp.bool, device=dev)
    starts = xp.nonzero(xp.concat([first, differs]))[0]
    # a group holds one entry of a, one of b, or one of each (a's first): the pair is (start, start + 1)
    nxt = xp.clip(starts + 1, 0, n - 1)
    pair = (nxt != starts) & ~xp.take(xp.concat([differs, first]), starts)
    start_from_b = xp.take(from_b, starts)
    has_a = ~start_from_b
    has_b = start_from_b | pair
    pos_a = xp.where(has_a, xp.take(perm, starts), 0)
    pos_b = xp.where(has_b, xp.take(perm, xp.where(pair, nxt, starts)) - na, 0)
    va = _take_or_fill(xp, a, pos_a, has_a, tail)
    vb = _take_or_fill(xp, b, pos_b, has_b, tail)
    out_idx = xp.astype(xp.take(sidx, starts, axis=1), wide_enough(xp, a._idx.dtype, starts.shape[0], *a.shape[:sd]))
    return out_idx, va, vb, has_a, has_b


def _take_or_fill(xp: Any, a: COOArray, pos: Any, has: Any, tail: tuple[int, ...]) -> Any:
    if a.nnz == 0:
        # a full array, as the dense operand is: NumPy's pow by a broadcast (stride-0) 0.5 goes through
        # sqrt, which gives NaN for -inf and -0.0 for -0.0, where the dense pow gives +inf and +0.0
        return xp.full((pos.shape[0], *a.shape[a.sparse_dim() :]), a.fill_value, dtype=a.dtype, device=a.device)
    present = xp.reshape(has, (-1, *tail))
    return gather_or_fill(xp, a, pos, present)


def _equals_fill(xp: Any, values: Any, fill: Any) -> Any:
    """Per entry, whether every element of ``values`` (nnz, *dense) equals ``fill`` (NaN equals NaN).

    A product of an unspecified element and a negative one is ``-0.0``; it is compared by value, so it
    stays unspecified under fill value ``+0.0``, as in a product with a strided operand (the sign of such
    a zero is the one not tracked: docs/decisions.md). Products of two specified elements are all kept.
    """
    same = values == fill
    if xp.isdtype(values.dtype, "complex floating") and fill != fill:
        # part by part, NaN matching NaN: with fill value nan + nanj, inf + nanj is another value
        c = complex(fill)
        same = _part_equals(xp, xp.real(values), c.real) & _part_equals(xp, xp.imag(values), c.imag)
    elif xp.isdtype(values.dtype, "real floating") and fill != fill:
        same = xp.isnan(values)
    if values.ndim > 1:
        same = xp.all(same, axis=tuple(range(1, values.ndim)))
    return same


def _part_equals(xp: Any, part: Any, fill: float) -> Any:
    """Where a real ``part`` of complex values equals that part of the fill value (NaN equals NaN)."""
    return xp.isnan(part) if fill != fill else part == fill


def _operand_cast(xp: Any, name: str, a: Any, b: Any) -> Callable[[Any], Any]:
    """How both operands' values (dtypes ``a`` and ``b``) are cast before ``name`` combines them: to the dtype
    promoted by the standard's table (torch mixes uint16/uint32/uint64 with no other dtype). A logical
    function reads truth values only, and takes them where the backend promotes the two dtypes with each other
    nowhere (torch's uint16 and bool), as its dense path does (:func:`_unsigned_binary`)."""
    if name in _LOGICAL_BINARY:
        try:
            xp.result_type(a, b)
        except RuntimeError:
            return lambda v: v if xp.isdtype(v.dtype, "bool") else v != 0
    dtype = result_dtype(xp, a, b)
    return lambda v: xp.astype(v, dtype, copy=False)


def _combine(xp: Any, name: str, a: COOArray, b: COOArray, joined: tuple[Any, ...] | None = None) -> COOArray:
    """``name(a, b)`` of two coalesced COO arrays of one shape and sparse_dim, on the union of their entries;
    or, given ``joined`` (:func:`_join_broadcast`: every entry specified on both sides), on those entries."""
    f = _binary_func(name)
    cast = _operand_cast(xp, name, a.dtype, b.dtype)
    fill_a, fill_b = (cast(_fill_element(xp, c)) for c in (a, b))
    computed, error = _attempt(lambda: f(xp, fill_a, fill_b))
    idx, va, vb, has_a, has_b = merge_coo(xp, a, b) if joined is None else joined
    shape = tuple(a.shape) if joined is None else broadcast_shapes(name, tuple(a.shape), tuple(b.shape))
    va, vb = (cast(v) for v in (va, vb))
    values = _values_like_dense(xp, lambda p, q: f(xp, p, q), len(shape), va, vb)
    if a.dtype != b.dtype:
        # the dense function of operands of two dtypes may choose a result dtype of its own, not that of the
        # promoted operands: NumPy's atan2 and copysign of int8 and uint8 are float16, of int16 float32. The
        # fill values in their own dtypes find it out (a backend that refuses the mix is left as it is)
        own, own_error = _attempt(lambda: f(xp, *(_fill_element(xp, c) for c in (a, b))))
        if own_error is None and own.dtype != values.dtype:
            values, computed, error = xp.astype(values, own.dtype), own, None
    fill = _result_fill(xp, computed, error, values, shape)
    if name in ANNIHILATING and idx.shape[1]:
        keep = xp.nonzero((has_a & has_b) | ~_equals_fill(xp, values, fill))[0]
        if keep.shape[0] != idx.shape[1]:
            idx, values = xp.take(idx, keep, axis=1), take_values(xp, values, keep, axis=0)
    if tuple(values.shape[1:]) != shape[idx.shape[0] :]:
        values = contiguous(a._backend, xp, xp.broadcast_to(values, (values.shape[0], *shape[idx.shape[0] :])))
    return COOArray(idx, values, shape, backend=a._backend, xp=xp, coalesced=True, fill_value=fill)


def _fills_annihilate(xp: Any, name: str, a: COOArray, b: COOArray) -> bool:
    """Whether ``name`` of each side's stored values with the other side's fill value gives the result's
    fill value, so that only the entries both sides specify can differ from it."""
    f = _binary_func(name)
    cast = _operand_cast(xp, name, a.dtype, b.dtype)
    fill_a, fill_b = (cast(fill_array(xp, c)) for c in (a, b))
    computed, error = _attempt(lambda: f(xp, fill_a, fill_b))
    if error is not None:
        return False
    for v, first in ((a._vals, True), (b._vals, False)):
        v = cast(v)
        out = f(xp, v, fill_b) if first else f(xp, fill_a, v)
        if v.shape[0] and not bool(xp.all(_equals_fill(xp, out, computed))):
            return False
    return True


def _join_broadcast(xp: Any, a: COOArray, b: COOArray, shape: tuple[int, ...]) -> tuple[Any, ...] | None:
    """The entries of the broadcasts of the coalesced ``a`` and ``b`` to ``shape`` that both specify, as
    :func:`merge_coo` gives them, without broadcasting either side: an entry of ``a`` meets the entries of
    ``b`` that share its indices along the dimensions neither side broadcasts. O((nnz_a + nnz_b) log nnz_b +
    out log out). None where the splits into sparse and dense dimensions differ, or the shared dimensions
    number more positions than int64 holds."""
    sd = a.sparse_dim() + len(shape) - a.ndim
    if b.sparse_dim() + len(shape) - b.ndim != sd:
        return None
    dev = a.device
    sides = []
    for c in (a, b):
        extra = len(shape) - c.ndim
        old = (1,) * extra + tuple(c.shape[: c.sparse_dim()])
        idx = xp.astype(c._idx, xp.int64)
        if extra:
            idx = xp.concat([xp.zeros((extra, c.nnz), dtype=xp.int64, device=dev), idx], axis=0)
        sides.append((old, idx))
    (old_a, idx_a), (old_b, idx_b) = sides
    shared = [d for d in range(sd) if old_a[d] == old_b[d] > 1]
    sizes = tuple(shape[d] for d in shared)
    if prod(sizes) >= 2**62:
        return None
    rows = xp.asarray(shared, dtype=xp.int64, device=dev)
    key_a, key_b = (_linearize(xp, xp.take(idx, rows, axis=0), sizes) for idx in (idx_a, idx_b))
    order_b = xp.argsort(key_b, stable=True)
    sorted_b = xp.take(key_b, order_b)
    lo = xp.searchsorted(sorted_b, key_a, side="left")
    counts = xp.searchsorted(sorted_b, key_a, side="right") - lo
    first = xp.cumulative_sum(counts, include_initial=True)
    n = int(first[-1])
    if n == 0:
        entry_a = entry_b = xp.zeros((0,), dtype=xp.int64, device=dev)
    else:
        entry_a = xp.repeat(xp.arange(a.nnz, dtype=xp.int64, device=dev), counts)
        within = xp.arange(n, dtype=xp.int64, device=dev) - xp.take(first, entry_a)
        entry_b = xp.take(order_b, xp.take(lo, entry_a) + within)
    # each dimension's index from the side that does not broadcast along it (either, where neither does)
    picked = [
        xp.take(idx_b[d, :], entry_b) if old_a[d] < shape[d] == old_b[d] else xp.take(idx_a[d, :], entry_a)
        for d in range(sd)
    ]
    idx = xp.stack(picked) if picked else xp.zeros((0, n), dtype=xp.int64, device=dev)
    perm = _lexsort(xp, idx, tuple(shape[:sd]))
    entry_a, entry_b = xp.take(entry_a, perm), xp.take(entry_b, perm)
    idx = xp.astype(xp.take(idx, perm, axis=1), wide_enough(xp, a._idx.dtype, n, *shape[:sd]))
    va, vb = take_values(xp, a._vals, entry_a, axis=0), take_values(xp, b._vals, entry_b, axis=0)
    both = xp.ones((n,), dtype=xp.bool, device=dev)
    return idx, va, vb, both, both


def _binary_strided_kernel(name: str, order: str) -> Callable[..., Any]:
    f = _binary_func(name)

    def kernel(xp: Any, x: Any, y: Any) -> Any:
        return f(xp, x, y)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_{order}"
    kernel.__doc__ = f"{name}({order.replace('_', ', ')}) -> strided: the backend's function; O(numel)."
    return kernel


def _linear_with(xp: Any, name: str, sparse_first: bool, a: SparseArray, s: Any, fill: Any) -> bool:
    """Whether ``name`` with the scalar ``s`` may map uncoalesced values: ``f(p + q) == f(p) + f(q)``.

    True for products with a finite scalar and for division of floating values by a finite non-zero
    one, when the result keeps ``a``'s dtype (integer sums wrap around, so a cast would not commute).
    """
    if name not in ("multiply", "divide") or (name == "divide" and not sparse_first):
        return False
    if getattr(s, "ndim", 0) or fill.dtype != a.dtype:
        return False
    if _tracks_gradient(s):
        s = s.detach()  # its value only (torch warns when a tensor that requires grad is read)
    value = complex(s) if not isinstance(s, bool) else complex(int(s))
    if xp.isdtype(a.dtype, ("real floating", "complex floating")):
        from ..._common import scalar_for

        # the scalar as the values meet it, rounded on the host: 1e5 is inf as float16, 1e-8 is 0
        value = complex(scalar_for(xp, a.dtype, value if xp.isdtype(a.dtype, "complex floating") else value.real))
    finite = math.isfinite(value.real) and math.isfinite(value.imag)
    if name == "divide":
        return finite and value != 0 and xp.isdtype(a.dtype, ("real floating", "complex floating"))
    return finite


def _binary_scalar_kernel(name: str, sparse_first: bool) -> Callable[..., Any]:
    f = _binary_func(name)

    def kernel(xp: Any, x: Any, y: Any) -> Any:
        a, s = (x, y) if sparse_first else (y, x)

        def with_s(v: Any) -> Any:
            return f(xp, v, s) if sparse_first else f(xp, s, v)

        fill, error = _attempt(lambda: with_s(_fill_beside_scalar(xp, a)))
        if isinstance(a, COOArray) and (error is not None or not _linear_with(xp, name, sparse_first, a, s, fill)):
            a = coalesce_coo(xp, a)
        values = _values_like_dense(xp, with_s, a.ndim, a._vals)
        return a._with_values(values, _result_fill(xp, fill, error, values, tuple(a.shape)))

    order = "indexed_scalar" if sparse_first else "scalar_indexed"
    kernel.__name__ = kernel.__qualname__ = f"_{name}_{order}"
    kernel.__doc__ = f"{name}({order.replace('_', ', ')}) -> sparse: maps the stored values and the fill value; O(nnz)."
    return kernel


def _gather(xp: Any, d: Any, idx: Any, shape: tuple[int, ...], sd: int) -> Any:
    """The elements (or dense sub-arrays) of ``d``, broadcast to ``shape``, at the sparse positions ``idx``
    (``(sd, n)``): shape ``(n, *shape[sd:])``. Reads ``d`` without materialising its broadcast."""
    d = xp.reshape(d, (1,) * (len(shape) - d.ndim) + tuple(d.shape))
    n = idx.shape[1]
    own = tuple(d.shape[:sd])
    key = xp.zeros((n,), dtype=xp.int64, device=array_api_compat.device(idx))
    for k, size in enumerate(own):
        if size > 1:
            key = key * size + xp.astype(idx[k, :], xp.int64)
    flat = xp.reshape(d, (prod(own), *d.shape[sd:]))
    return xp.broadcast_to(take_values(xp, flat, key, axis=0), (n, *shape[sd:]))


def past_floating_range(xp: Any, d: Any, dtype: Any) -> bool:
    """Whether an element of the integer array ``d`` is past the range of the floating ``dtype`` it is
    promoted to, where it becomes inf (100000 as float16): a reduction over ``d`` only where its dtype
    can exceed ``dtype``'s range (float16's), none otherwise (no pass, no device sync)."""
    big = xp.finfo(dtype).max
    if xp.iinfo(d.dtype).max <= big or not prod(tuple(d.shape)):
        return False
    try:
        lo, hi = int(xp.min(d)), int(xp.max(d))
    except (NotImplementedError, RuntimeError):
        # torch reduces no uint64: on the order-preserving map
        if signed_twin(xp, d.dtype) is None:
            raise
        shift = 2 ** (xp.iinfo(d.dtype).bits - 1)
        o = to_ordered(xp, d)
        lo, hi = int(xp.min(o)) + shift, int(xp.max(o)) + shift
    return not (-big <= lo and hi <= big)


def _nonfinite_entries(xp: Any, d: Any, shape: tuple[int, ...], sd: int, like: COOArray, dtype: Any) -> COOArray | None:
    """The positions (over the first ``sd`` dimensions of ``shape``) where the broadcast of ``d``, promoted
    to the product's ``dtype``, holds a non-finite element, as a COO array of zeros in ``like``'s dtype;
    None when there is none."""
    floating = ("real floating", "complex floating")
    if xp.isdtype(d.dtype, "integral") and xp.isdtype(dtype, floating):
        if not past_floating_range(xp, d, dtype):
            return None
        d = xp.astype(d, dtype)
    if not xp.isdtype(d.dtype, floating):
        return None
    # a finite sum means finite elements (inf and NaN propagate): one read of d in the common case
    if bool(xp.isfinite(xp.sum(d))):
        return None
    bad = ~xp.isfinite(d)
    if not bool(xp.any(bad)):
        return None
    full = xp.broadcast_to(xp.reshape(bad, (1,) * (len(shape) - d.ndim) + tuple(d.shape)), shape)
    if len(shape) > sd:
        full = xp.any(full, axis=tuple(range(sd, len(shape))))
    idt = like._idx.dtype
    if sd:
        indices = xp.stack([xp.astype(w, idt) for w in xp.nonzero(full)])
    else:
        indices = xp.zeros((0, 1), dtype=idt, device=like.device)
    values = xp.zeros((indices.shape[1], *shape[sd:]), dtype=like.dtype, device=like.device)
    return COOArray(indices, values, shape, backend=like._backend, xp=xp, coalesced=True, fill_value=like.fill_value)


def _annihilated(xp: Any, name: str, a: SparseArray, d: Any, sparse_first: bool) -> SparseArray:
    """``name(a, d)`` for an annihilating ``name`` and ``a`` with fill value 0: ``a``'s structure broadcast."""
    f = _binary_func(name)
    shape = broadcast_shapes(name, tuple(a.shape), tuple(d.shape))
    c = broadcast_coo(xp, coalesce_coo(xp, _as_coo(xp, a)), shape)
    sd = c.sparse_dim()
    zero, own = xp.zeros((1,) * d.ndim, dtype=d.dtype, device=a.device), _fill_element(xp, a)
    fill = python_scalar(xp, xp.reshape(f(xp, own, zero) if sparse_first else f(xp, zero, own), ()))
    idx, vals = c._idx, c._vals
    # 0 * inf and 0 * nan are NaN: where d holds them, an element a leaves out is not the fill value
    extra = _nonfinite_entries(xp, d, shape, sd, c, result_dtype(xp, a.dtype, d.dtype)) if name == "multiply" else None
    if extra is not None:
        idx, vals, _, _, _ = merge_coo(xp, coalesce_coo(xp, c), extra)
    other = _gather(xp, d, idx, shape, sd)
    values = f(xp, vals, other) if sparse_first else f(xp, other, vals)
    coalesced = c.is_coalesced() or extra is not None
    out = COOArray(idx, values, shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=fill)
    return as_layout_of(xp, out, a, name)


def _tracks_gradient(d: Any) -> bool:
    """Whether autograd records operations on the strided ``d`` (a torch tensor that requires grad)."""
    return bool(getattr(d, "requires_grad", False))


def _fill_stays_zero(name: str, sparse_first: bool, a: SparseArray) -> bool:
    """Whether the fill value of ``name(a, s)`` carries no gradient of the scalar ``s``: a bool result
    (comparisons and logical functions have no gradient), or the fill value 0 whatever ``s`` (``0 * s``,
    ``0 / s``), whose derivative in ``s`` is 0, so that a fill value, a constant, loses none of it.

    A 0-d operand that requires grad otherwise acts as an array, not as a scalar: the fill value it would
    give (``f + s``) is a Python number, and the gradient of the unspecified elements would be lost; as
    an array it broadcasts, and a sum with it is strided, as with an array of shape ``(1,)``."""
    if name in _BOOL_RESULTS:
        return True
    return is_plus_zero(a.fill_value) and (name == "multiply" or (name == "divide" and sparse_first))


# The binary functions whose result is bool whatever the operands: no gradient flows through them.
_BOOL_RESULTS = frozenset(
    {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor"}
)


def _binary_mixed_kernel(name: str, sparse_first: bool) -> Callable[..., Any]:
    f = _binary_func(name)
    scalar_kernel = _binary_scalar_kernel(name, sparse_first)

    def kernel(xp: Any, x: Any, y: Any) -> Any:
        a, d = (x, y) if sparse_first else (y, x)
        if d.ndim == 0 and (not _tracks_gradient(d) or _fill_stays_zero(name, sparse_first, a)):
            # a 0-d array acts as a scalar (with an array's dtype in the type promotion)
            return scalar_kernel(xp, x, y)
        if name in ANNIHILATING and is_plus_zero(a.fill_value):
            return _annihilated(xp, name, a, d, sparse_first)
        from ..._conversion import to_dense

        broadcast_shapes(name, tuple(a.shape), tuple(d.shape))
        dense = to_dense(a)
        return f(xp, dense, d) if sparse_first else f(xp, d, dense)

    order = "indexed_strided" if sparse_first else "strided_indexed"
    kernel.__name__ = kernel.__qualname__ = f"_{name}_{order}"
    kernel.__doc__ = (
        f"{name}({order.replace('_', ', ')}): sparse where the product keeps the sparse operand's zeros "
        "(O(nnz * broadcast)), else strided as in torch (O(numel))."
    )
    return kernel


def _binary_sparse_kernel(name: str) -> Callable[..., Any]:
    def kernel(xp: Any, x: SparseArray, y: SparseArray) -> SparseArray:
        shape = broadcast_shapes(name, tuple(x.shape), tuple(y.shape))
        a, b = _as_coo(xp, x), _as_coo(xp, y)
        if name in ANNIHILATING and (tuple(a.shape), tuple(b.shape)) != (shape, shape):
            # a product broadcast over a dimension that one side lacks meets only the other side's entries:
            # join them rather than repeat each entry along it (a (n, 1) by (1, m) product of k and l entries
            # stores k * l, where the broadcasts hold k * m + n * l)
            a, b = coalesce_coo(xp, a), coalesce_coo(xp, b)
            joined = _join_broadcast(xp, a, b, shape) if _fills_annihilate(xp, name, a, b) else None
            if joined is not None:
                return as_layout_of(xp, _combine(xp, name, a, b, joined), x, name)
        a = broadcast_coo(xp, a, shape)
        b = broadcast_coo(xp, b, shape)
        # bring b to a's split into sparse and dense dimensions: the result has a's (and x's) structure
        if b.sparse_dim() > a.sparse_dim():
            b = _group_sparse(xp, b, b.sparse_dim() - a.sparse_dim())
        elif b.sparse_dim() < a.sparse_dim():
            b = regroup_coo(xp, b, a.sparse_dim() - b.sparse_dim())
        out = _combine(xp, name, coalesce_coo(xp, a), coalesce_coo(xp, b))
        return as_layout_of(xp, out, x, name)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_indexed_indexed"
    kernel.__doc__ = (
        f"{name}(sparse, sparse) -> the first one's layout: merge of the broadcast entries (products drop those "
        "equal to the fill value that one side lacks); O(nnz log nnz)."
    )
    return kernel


def _has_zero(xp: Any, values: Any, dtype: Any, negative: bool) -> bool:
    """Whether ``values``, cast to the floating ``dtype``, hold a zero component with the sign bit set
    (``negative``) or clear."""
    v = xp.astype(values, dtype, copy=False)
    parts = (xp.real(v), xp.imag(v)) if xp.isdtype(dtype, "complex floating") else (v,)
    for part in parts:
        sign = xp.signbit(part)
        if bool(xp.any((part == 0) & (sign if negative else ~sign))):
            return True
    return False


def _concat_declines(xp: Any, name: str, x: COOArray, y: COOArray) -> str | None:
    if tuple(x.shape) != tuple(y.shape):
        return "concatenation needs operands of one shape (broadcasting merges the entries instead)"
    if x.sparse_dim() != y.sparse_dim():
        return "concatenation needs operands with the same sparse_dim"
    if not (is_plus_zero(x.fill_value) and is_plus_zero(y.fill_value)):
        return "concatenation needs fill value +0 on both sides (duplicates add up, fill values do not)"
    dtype = result_dtype(xp, x.dtype, y.dtype)
    if not xp.isdtype(dtype, ("real floating", "complex floating")):
        return None
    # an entry one side lacks meets that side's +0.0, and -0.0 + +0.0 and +0.0 - +0.0 are +0.0:
    # concatenation would keep a lone -0.0 of add, and turn a lone +0.0 of y into -0.0 in subtract
    if name == "add" and (_has_zero(xp, x._vals, dtype, True) or _has_zero(xp, y._vals, dtype, True)):
        return "concatenation keeps a stored -0.0, where -0.0 + +0.0 is +0.0 (the merge applies it)"
    if name == "subtract" and _has_zero(xp, y._vals, dtype, False):
        return "concatenation negates a stored +0.0 of y to -0.0, where +0.0 - +0.0 is +0.0 (the merge applies it)"
    if name == "subtract" and bool(xp.any(xp.isnan(y._vals))):
        # x - NaN keeps the NaN's sign bit (NumPy's and torch's subtraction), negative(NaN) flips it
        return "concatenation negates a stored NaN of y, flipping its sign bit, where x - NaN keeps it (the merge applies it)"
    return None


def _supports_concat(name: str) -> Callable[[Any, COOArray, COOArray], str | None]:
    """Whether ``name(x, y)`` may concatenate the entries: a reason when not, None when it may."""

    def supports(xp: Any, x: COOArray, y: COOArray) -> str | None:
        return _concat_declines(xp, name, x, y)

    supports.__name__ = supports.__qualname__ = f"_supports_{name}_concat"
    return supports


def _concat_kernel(name: str) -> Callable[..., Any]:
    def kernel(xp: Any, x: COOArray, y: COOArray) -> COOArray:
        dtype = result_dtype(xp, x.dtype, y.dtype)
        x, y = summed_before_cast(xp, x, dtype), summed_before_cast(xp, y, dtype)
        yv = xp.astype(y._vals, dtype)
        values = xp.concat([xp.astype(x._vals, dtype), yv if name == "add" else UNARY["negative"](xp, yv)], axis=0)
        nse = x.nnz + y.nnz
        idt = wide_enough(xp, x._idx.dtype, nse, *x.shape[: x.sparse_dim()])
        indices = xp.concat([xp.astype(x._idx, idt), xp.astype(y._idx, idt)], axis=1)
        fill = python_scalar(xp, xp.zeros((), dtype=dtype, device=x.device))
        return COOArray(indices, values, x.shape, backend=x._backend, xp=xp, coalesced=False, fill_value=fill)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_coo_coo"
    kernel.__doc__ = f"{name}(COO, COO) -> COO (uncoalesced): concatenates the entries, as torch does; O(nnz)."
    return kernel


for _name in BINARY:
    register(_name, (strided, strided))(_binary_strided_kernel(_name, "strided_strided"))
    register(_name, (strided, "scalar"))(_binary_strided_kernel(_name, "strided_scalar"))
    register(_name, ("scalar", strided))(_binary_strided_kernel(_name, "scalar_strided"))
    register(_name, (INDEXED, "scalar"))(_binary_scalar_kernel(_name, True))
    register(_name, ("scalar", INDEXED))(_binary_scalar_kernel(_name, False))
    register(_name, (INDEXED, strided))(_binary_mixed_kernel(_name, True))
    register(_name, (strided, INDEXED))(_binary_mixed_kernel(_name, False))
    register(_name, (INDEXED, INDEXED))(_binary_sparse_kernel(_name))
for _name in ("add", "subtract"):
    register(_name, (sparse_coo, sparse_coo), supports=_supports_concat(_name))(_concat_kernel(_name))
