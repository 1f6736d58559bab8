"""Elementwise functions on strided and sparse arrays (the Array API's, plus torch's extra names).

Every function dispatches on the operands' layouts (``"scalar"`` standing for a Python scalar). On a
sparse array a unary function keeps the layout and the sparsity structure; the fill value is mapped too,
so ``cos(A)`` is a sparse array whose unspecified elements are ``cos(0) = 1``. A binary function
broadcasts as the Array API says and gives: with a scalar, the sparse operand's layout; with another
sparse array, the first one's layout; with a strided array, a strided result as in torch, except for
the products of a sparse operand with fill value 0, which stay sparse. ``layout=`` converts the result
to another layout. The kernels are in ``xsparse/backends/*/elementwise.py``; ``docs/decisions.md``
says where the results differ from torch's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as _np

from . import dispatch
from ._common import backend_of, dtype_name, is_strided
from ._conversion import layout_of, to_dense, to_sparse
from ._errors import InvariantError
from .backends import backend_of_array
from .backends.array_api import elementwise as _generic_elementwise  # noqa: F401  (registers the kernels)
from .backends.array_api.elementwise import broadcast_shapes
from .formats import Layout, SparseArray, strided

__all__ = [
    "abs",
    "acos",
    "acosh",
    "add",
    "angle",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "ceil",
    "clip",
    "conj",
    "conj_physical",
    "copysign",
    "cos",
    "cosh",
    "deg2rad",
    "divide",
    "equal",
    "erf",
    "erfinv",
    "exp",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "hypot",
    "imag",
    "isfinite",
    "isinf",
    "isnan",
    "isneginf",
    "isposinf",
    "less",
    "less_equal",
    "log",
    "log10",
    "log1p",
    "log2",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "nextafter",
    "not_equal",
    "positive",
    "pow",
    "rad2deg",
    "real",
    "reciprocal",
    "remainder",
    "round",
    "sgn",
    "sign",
    "signbit",
    "sin",
    "sinh",
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "trunc",
]


def layout_argument(op: str, layout: Any) -> Layout | None:
    """An operation's ``layout=`` argument, checked: an xsparse layout or None."""
    if layout is not None and not isinstance(layout, Layout):
        raise TypeError(
            f"{op}: layout must be an xsparse layout or None (layout={layout!r}). Pass e.g. xsparse.sparse_csr or "
            "xsparse.strided."
        )
    return layout


def convert_result(result: Any, layout: Layout | None, op: str = "convert_result") -> Any:
    """Apply an operation's ``layout=`` argument to its result (and make a NumPy scalar a 0-d array)."""
    if isinstance(result, _np.generic):
        # NumPy's functions give scalars for 0-d inputs; the Array API (and xsparse) give 0-d arrays
        result = _np.asarray(result)
    if layout is None:
        return result
    layout_argument(op, layout)
    if layout is strided:
        return to_dense(result)
    if isinstance(result, SparseArray) and result.layout is layout:
        return result
    if layout.is_blocked and not (isinstance(result, SparseArray) and result.layout.is_blocked):
        raise ValueError(
            f"{op}: a {layout} result needs a block shape, which a {layout_of(result)} result does not have "
            f"(layout={layout}). Convert the result with xsparse.to_sparse(r, layout=xsparse.{layout}, blocksize=(rows, columns))."
        )
    with converting_for(op, layout, "its result"):
        return to_sparse(result, layout=layout)


@contextlib.contextmanager
def converting_for(op: str, layout: Layout, what: str) -> Iterator[None]:
    """Name ``op`` (the operation the user called) in an invariant error of a conversion to ``layout`` made for
    it, where the conversion's message names ``to_sparse``."""
    try:
        yield
    except InvariantError as e:
        if op == "to_sparse" or e.operation != "to_sparse":
            raise
        raise InvariantError(e.invariant, f"{what} cannot be given layout={layout}: {e.detail}", op) from None
    except ValueError as e:
        prefix = f"to_sparse(layout={layout}): "
        if op == "to_sparse" or type(e) is not ValueError or not str(e).startswith(prefix):
            raise
        raise ValueError(f"{op}: {what} cannot be given layout={layout}: {str(e)[len(prefix):]}") from None


def operand(op: str, x: Any) -> tuple[Any, Layout]:
    """The backend and layout of an array operand of ``op``; a TypeError naming the fix for anything else."""
    if isinstance(x, SparseArray):
        return x._backend, x.layout
    if is_strided(x, op):
        return backend_of_array(x), strided
    raise TypeError(
        f"{op}: expected an xsparse array or a backend array, got {type(x).__name__} (x={x!r}). Wrap Python "
        "scalars and lists with the backend's asarray first."
    )


# -- the dtypes each function takes ---------------------------------------------------------------------
# The Array API standard gives every elementwise function the dtype categories it takes. Where NumPy or
# torch refuses a dtype outside them (torch has no abs, floor or shift of bool, no ordering of complex
# numbers, no hypot of integers; NumPy no sign of bool), the two would answer one program differently, one
# of them with a raw library error: every backend refuses that dtype here, before a kernel runs. Where
# both compute a function outside the standard's categories (sin of integers, logical_and of numbers,
# the sum of booleans), the backend's result stands. docs/decisions.md has the table.

_KIND_ORDER = ("bool", "integer", "real floating", "complex floating")
_NUMERIC = frozenset({"integer", "real floating", "complex floating"})
_REAL_NUMERIC = frozenset({"integer", "real floating"})
_CAST_BOOL = "cast a boolean array with xsparse.astype(x, 'int8') first"
_DTYPE_RULES: dict[str, tuple[frozenset[str], str, bool]] = {}


def _takes(names: str, kinds: frozenset[str], fix: str, *, each: bool = False) -> None:
    """``names`` take operands whose promoted kind is in ``kinds`` (with ``each``, every operand's kind)."""
    for name in names.split():
        _DTYPE_RULES[name] = (kinds, fix, each)


_takes("abs sign sgn round pow positive", _NUMERIC, _CAST_BOOL.capitalize())
_takes("negative", _NUMERIC, f"Use xsparse.logical_not for booleans, or {_CAST_BOOL}")
# torch subtracts no boolean operand, a Python bool included (x - True for an integer x)
_takes("subtract", _NUMERIC, f"Use xsparse.logical_xor for booleans, or {_CAST_BOOL}", each=True)
_takes(
    "ceil floor trunc floor_divide remainder clip",
    _REAL_NUMERIC,
    f"Apply it to xsparse.real(x) and xsparse.imag(x) of a complex array; {_CAST_BOOL}",
)
_takes(
    "less less_equal greater greater_equal maximum minimum",
    frozenset({"bool", "integer", "real floating"}),
    "Complex numbers have no order: compare xsparse.real(x) or xsparse.abs(x) instead",
)
_takes(
    "bitwise_and bitwise_or bitwise_xor bitwise_invert",
    frozenset({"bool", "integer"}),
    "Bitwise operations take integer or boolean arrays",
)
_takes("bitwise_left_shift bitwise_right_shift", frozenset({"integer"}), f"Shifts take integer arrays: {_CAST_BOOL}")
_takes(
    "atan2 copysign signbit erf erfinv",
    frozenset({"bool", "integer", "real floating"}),
    "Apply it to xsparse.real(x) and xsparse.imag(x) of a complex array",
)
_takes(
    "hypot logaddexp nextafter",
    frozenset({"real floating"}),
    "Cast the operands with xsparse.astype(x, 'float64') first (of a complex array, take xsparse.real(x) or xsparse.abs(x))",
)
_takes("imag", frozenset({"complex floating"}), "The imaginary part of a real array is 0: use xsparse.zeros_like(x)")
# Not elementwise, but the same split: NumPy and JAX search and test complex values (in lexicographic
# order), torch and array-api-strict raise their own errors, and the standard asks for real (searchsorted)
# or integer (isin) operands.
_takes(
    "searchsorted",
    frozenset({"bool", "integer", "real floating"}),
    "Complex numbers have no order: search xsparse.real(x) or xsparse.abs(x) instead",
)
_takes(
    "isin",
    frozenset({"bool", "integer", "real floating"}),
    "Compare with xsparse.equal instead: for a strided x1 and a 1-D x2, "
    "xsparse.any(xsparse.expand_dims(x1, axis=-1) == x2, axis=-1)",
)


def _kind(x: Any) -> str:
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "integer"
    if isinstance(x, float):
        return "real floating"
    if isinstance(x, complex):
        return "complex floating"
    name = dtype_name(x.dtype)
    if name == "bool":
        return "bool"
    if name.startswith(("int", "uint")):
        return "integer"
    return "complex floating" if name.startswith("complex") else "real floating"


def check_dtypes(name: str, *operands: Any) -> None:
    """Refuse, with a TypeError that says what to do, operands whose promoted kind of dtype ``name`` does
    not take (see the comment above)."""
    rule = _DTYPE_RULES.get(name)
    if rule is None:
        return
    kinds, fix, each = rule
    found = [_kind(v) for v in operands]
    refused = [k for k in found if k not in kinds] if each else [max(found, key=_KIND_ORDER.index)]
    if not refused or refused[0] in kinds:
        return
    kind = refused[0]
    args = ", ".join(
        f"{label}.dtype={dtype_name(v.dtype)}" if hasattr(v, "dtype") else f"{label}={v!r}"
        for label, v in zip(("x",) if len(operands) == 1 else ("x1", "x2"), operands)
    )
    names = [k for k in _KIND_ORDER if k in kinds]
    allowed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    raise TypeError(f"{name}: takes {allowed} operands, not {kind} ones ({args}). {fix}.")


def apply_unary(name: str, x: Any, layout: Layout | None, **kwargs: Any) -> Any:
    """Dispatch the unary function ``name`` on ``x``'s layout and apply ``layout=``."""
    backend, source = operand(name, x)
    check_dtypes(name, x)
    xp = backend.load()
    return convert_result(dispatch.call(name, (source,), backend.name, xp, x, **kwargs), layout, name)


def _doc(name: str, summary: str, example: str) -> str:
    return f"""{summary}

Parameters
----------
x
    A strided (backend) array or an xsparse array.
layout
    The layout of the result (default: the layout of ``x``).

Returns
-------
array
    ``{name}`` of every element. A sparse ``x`` gives a sparse array of the same structure whose
    fill value is ``{name}(x.fill_value)`` (an uncoalesced COO ``x`` is coalesced first unless
    ``{name}`` is linear).

Examples
--------
>>> import xsparse as xs
{example}
"""


def _unary(name: str, summary: str, example: str) -> Callable[..., Any]:
    def func(x: Any, /, *, layout: Layout | None = None) -> Any:
        return apply_unary(name, x, layout)

    func.__name__ = func.__qualname__ = name
    func.__module__ = "xsparse"
    func.__doc__ = _doc(name, summary, example)
    return func


_SCALARS = (bool, int, float, complex)


def operand_kind(op: str, x: Any, name: str = "operand") -> Any:
    """The layout of an operand of ``op`` that may also be a Python scalar (the kind ``"scalar"``)."""
    if isinstance(x, SparseArray):
        return x.layout
    if is_strided(x, op):
        return strided
    if isinstance(x, _SCALARS):
        return "scalar"
    raise TypeError(
        f"{op}: expected an xsparse array, a backend array or a Python scalar, got {type(x).__name__} ({name}={x!r}). "
        "Wrap lists with the backend's asarray first."
    )


def apply_binary(name: str, x1: Any, x2: Any, layout: Layout | None) -> Any:
    """Dispatch the binary function ``name`` on the operands' layouts and apply ``layout=``."""
    kinds = (operand_kind(name, x1), operand_kind(name, x2))
    if kinds == ("scalar", "scalar"):
        raise TypeError(
            f"{name}: at least one operand must be an array, got two Python scalars (x1={x1!r}, x2={x2!r}). Wrap one "
            "with the backend's asarray."
        )
    backend = backend_of(x1, x2, op=name)
    check_dtypes(name, x1, x2)
    x1, x2 = _zero_d_sparse_as_strided(x1, x2)
    kinds = (operand_kind(name, x1), operand_kind(name, x2))
    if backend.name == "torch":
        if type(x1) is not type(x2):
            x1, x2 = _torch_half_complex(name, x1, x2)
        if "scalar" not in kinds:
            x1, x2 = _torch_zero_dim_promotion(x1, x2)
    xp = backend.load()
    return convert_result(dispatch.call(name, kinds, backend.name, xp, x1, x2), layout, name)


def _zero_d_sparse_as_strided(x1: Any, x2: Any) -> tuple[Any, Any]:
    """A 0-d sparse operand (``A[i, j]``) beside an array of more dimensions, as the 0-d strided array of its
    one element: it then acts as a scalar does, mapping the other's fill value, where broadcasting it as a
    sparse array would store every element of the result."""
    pair = [x1, x2]
    for i, (v, other) in enumerate(((x1, x2), (x2, x1))):
        if isinstance(v, SparseArray) and v.ndim == 0 and getattr(other, "ndim", 0) > 0:
            pair[i] = to_dense(v)
    return pair[0], pair[1]


def _torch_zero_dim_promotion(x1: Any, x2: Any) -> tuple[Any, Any]:
    """torch lets a 0-d tensor decide the result's dtype only across dtype categories (uint8 with a 0-d uint16
    is uint8, wrapping 300 to 44), where the standard promotes a 0-d array as any other. array-api-compat fixes
    this for the dtypes of its table, not for uint16, uint32 and uint64: where a 0-d strided operand would
    change the standard's result dtype, the operand that differs from it is cast first (the 0-d one, or the
    other, which torch would otherwise keep)."""
    if not any(is_strided(v) and v.ndim == 0 for v in (x1, x2)):
        return x1, x2
    from ._dtypes import result_type
    from ._indexing import astype

    try:
        rt = result_type(x1, x2)
    except TypeError:
        return x1, x2  # kinds the standard does not promote together (complex with uint64): torch's own rule
    cast = [v if v.dtype == rt else astype(v, rt) for v in (x1, x2)]
    return cast[0], cast[1]


def _torch_half_complex(name: str, x1: Any, x2: Any) -> tuple[Any, Any]:
    """torch promotes float16 with a complex Python scalar to complex32, a dtype that sparse arrays do not
    hold (nor most of torch's functions take): a sparse float16 operand is taken as complex64 there, NumPy's
    promotion and torch's own for bfloat16, so both backends give one answer. A complex32 tensor beside a
    sparse operand is refused."""
    pair = (x1, x2)
    if not any(isinstance(v, SparseArray) for v in pair):
        return pair  # strided operands only: torch's own result stands
    out = []
    for v, other in (pair, pair[::-1]):
        if isinstance(v, SparseArray) and isinstance(other, complex) and dtype_name(v.dtype) == "float16":
            from ._indexing import astype

            v = astype(v, v._xp.complex64)
        elif not isinstance(v, SparseArray) and dtype_name(getattr(v, "dtype", None)) == "complex32":
            raise TypeError(
                f"{name}: sparse arrays do not hold torch's complex32, the dtype of an operand (dtype=complex32). Cast "
                "it to complex64 first, e.g. with xsparse.astype(x, 'complex64')."
            )
        out.append(v)
    return out[0], out[1]


def in_place(name: str, target: Any, other: SparseArray) -> Any:
    """``target op= other`` for a torch tensor ``target`` and a sparse ``other`` (the sparse arrays'
    ``__torch_function__``): ``op(target, other)`` written into ``target``, which keeps its shape and dtype.

    The result is strided by definition or the size of ``target``, so writing it is not densification.
    As torch does for its own in-place operators, a result dtype that ``target``'s cannot hold (a float
    result into an integer tensor) is an error (a ``ValueError``) rather than a silent truncation.
    """
    import torch

    result = apply_binary(name, target, other, None)
    if tuple(result.shape) != tuple(target.shape):
        raise ValueError(
            f"{name}: an in-place operator writes into its left operand, and the result's shape differs from it "
            f"(x1.shape={tuple(target.shape)}, result shape={tuple(result.shape)}). Use the operator that makes a new "
            "array (x = x + a), which broadcasts."
        )
    if not torch.can_cast(result.dtype, target.dtype):
        # not a TypeError: torch turns one raised here into NotImplemented, and Python would then rebind
        # ``target`` to the result of the reflected operator, silently changing its dtype
        raise ValueError(
            f"{name}: an in-place operator keeps its left operand's dtype, which cannot hold the result's "
            f"(x1.dtype={dtype_name(target.dtype)}, result dtype={dtype_name(result.dtype)}). Use the operator that "
            "makes a new array (x = x + a), or cast x1 first."
        )
    target.copy_(to_dense(result) if isinstance(result, SparseArray) else result)
    return target


def _binary(name: str, summary: str, example: str) -> Callable[..., Any]:
    def func(x1: Any, x2: Any, /, *, layout: Layout | None = None) -> Any:
        return apply_binary(name, x1, x2, layout)

    func.__name__ = func.__qualname__ = name
    func.__module__ = "xsparse"
    func.__doc__ = f"""{summary}

Parameters
----------
x1, x2
    Strided (backend) arrays, xsparse arrays or Python scalars (not both scalars), broadcast together
    (Array API rules, size-1 dimensions of sparse operands included); the dtype follows the backend's
    type promotion.
layout
    The layout of the result. By default: a sparse operand with a scalar (or a 0-d array) keeps its
    layout; two sparse operands give the first one's layout; sparse with strided gives strided, as in
    torch, except for products (``multiply``, ``logical_and``, ``bitwise_and``) of a sparse operand
    with fill value 0, which keep that operand's layout and structure.

Returns
-------
array
    A sparse result's fill value is ``{name}`` of the operands' fill values, computed as the dense
    array's element is; where that raises and the result has no unspecified element, 0.

Examples
--------
>>> import xsparse as xs
{example}
"""
    return func


def clip(x: Any, /, min: Any = None, max: Any = None, *, layout: Layout | None = None) -> Any:  # noqa: A002
    """Clamp every element to ``[min, max]``.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array.
    min, max
        The bounds: Python scalars (or None for no bound), or arrays broadcast against ``x``, in which
        case ``clip`` is ``minimum(maximum(x, min), max)`` cast to ``x``'s dtype (the standard's rule; NumPy
        and torch promote).
    layout
        The layout of the result (default: the layout of ``x`` for scalar bounds).

    Returns
    -------
    array
        A sparse ``x`` with scalar bounds gives a sparse array of the same structure whose fill value
        is clipped too.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 2]], [-3.0, 5.0], (4,), dtype="float64", fill_value=1.0)
    >>> r = xs.clip(a, 0.0, 2.0)
    >>> r.layout, r.fill_value
    (xsparse.sparse_coo, 1.0)
    >>> xs.to_dense(r).tolist()
    [0.0, 1.0, 2.0, 1.0]
    """
    if (min is None or isinstance(min, _SCALARS)) and (max is None or isinstance(max, _SCALARS)):
        return apply_unary("clip", x, layout, min=min, max=max)
    operand("clip", x)
    check_dtypes("clip", x)
    # checked here, so that an error names this function, not the maximum or minimum it runs
    broadcast_shapes("clip", *(tuple(v.shape) for v in (x, min, max) if v is not None and not isinstance(v, _SCALARS)))
    backend_of(x, min, max, op="clip")
    out = x if min is None else maximum(x, min)
    out = out if max is None else minimum(out, max)
    if out.dtype != x.dtype:
        # the standard: the result has x's dtype, whatever the bounds' (NumPy and torch promote)
        from ._indexing import astype

        out = astype(out, x.dtype)
    return convert_result(out, layout, "clip")


abs = _unary(
    "abs",
    "Absolute value.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.abs(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.25, 0.0, 2.5, 0.0]""",
)
acos = _unary(
    "acos",
    "Inverse cosine.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 0.5], (4,), dtype="float64")
>>> r = xs.acos(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 1.5707963267948966)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[1.31811607165, 1.57079632679, 1.0471975512, 1.57079632679]""",
)
acosh = _unary(
    "acosh",
    "Inverse hyperbolic cosine.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.5, 2.0], (4,), dtype="float64", fill_value=1.0)
>>> r = xs.acosh(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.962423650119, 0.0, 1.31695789692, 0.0]""",
)
asin = _unary(
    "asin",
    "Inverse sine.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 0.5], (4,), dtype="float64")
>>> r = xs.asin(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.252680255142, 0.0, 0.523598775598, 0.0]""",
)
asinh = _unary(
    "asinh",
    "Inverse hyperbolic sine.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.asinh(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.247466461547, 0.0, 1.64723114637, 0.0]""",
)
atan = _unary(
    "atan",
    "Inverse tangent.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.atan(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.244978663127, 0.0, 1.19028994968, 0.0]""",
)
atanh = _unary(
    "atanh",
    "Inverse hyperbolic tangent.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 0.5], (4,), dtype="float64")
>>> r = xs.atanh(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.255412811883, 0.0, 0.549306144334, 0.0]""",
)
bitwise_invert = _unary(
    "bitwise_invert",
    "Bitwise NOT of integers and booleans.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1, 6], (4,), dtype="int64")
>>> r = xs.bitwise_invert(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, -1)
>>> xs.to_dense(r).tolist()
[-2, -1, -7, -1]""",
)
ceil = _unary(
    "ceil",
    "Smallest integer not below each element.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.ceil(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.0, 0.0, 3.0, 0.0]""",
)
conj = _unary(
    "conj",
    "Complex conjugate.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1 + 2j, -3j], (4,), dtype="complex128")
>>> r = xs.conj(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, -0j)
>>> xs.to_dense(r).tolist()
[(1-2j), -0j, (-0+3j), -0j]""",
)
cos = _unary(
    "cos",
    "Cosine.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.cos(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 1.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.968912421711, 1.0, -0.801143615547, 1.0]""",
)
cosh = _unary(
    "cosh",
    "Hyperbolic cosine.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.cosh(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 1.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[1.03141309988, 1.0, 6.13228947966, 1.0]""",
)
exp = _unary(
    "exp",
    "Exponential.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.exp(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 1.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[1.28402541669, 1.0, 12.1824939607, 1.0]""",
)
expm1 = _unary(
    "expm1",
    "``exp(x) - 1``, accurate near 0.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.expm1(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.284025416688, 0.0, 11.1824939607, 0.0]""",
)
floor = _unary(
    "floor",
    "Largest integer not above each element.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.floor(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.0, 0.0, 2.0, 0.0]""",
)
imag = _unary(
    "imag",
    "Imaginary part.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1 + 2j, -3j], (4,), dtype="complex128")
>>> r = xs.imag(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[2.0, 0.0, -3.0, 0.0]""",
)
isfinite = _unary(
    "isfinite",
    "Whether each element is finite.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [float("inf"), -2.0], (4,), dtype="float64")
>>> r = xs.isfinite(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, True)
>>> xs.to_dense(r).tolist()
[False, True, True, True]""",
)
isinf = _unary(
    "isinf",
    "Whether each element is infinite.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [float("inf"), -2.0], (4,), dtype="float64")
>>> r = xs.isinf(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[True, False, False, False]""",
)
isnan = _unary(
    "isnan",
    "Whether each element is NaN.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [float("inf"), -2.0], (4,), dtype="float64")
>>> r = xs.isnan(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[False, False, False, False]""",
)
log = _unary(
    "log",
    "Natural logarithm.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.5, 4.0], (4,), dtype="float64", fill_value=1.0)
>>> r = xs.log(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[-0.69314718056, 0.0, 1.38629436112, 0.0]""",
)
log1p = _unary(
    "log1p",
    "``log(1 + x)``, accurate near 0.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.log1p(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.223143551314, 0.0, 1.2527629685, 0.0]""",
)
log2 = _unary(
    "log2",
    "Base-2 logarithm.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.5, 4.0], (4,), dtype="float64", fill_value=1.0)
>>> r = xs.log2(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[-1.0, 0.0, 2.0, 0.0]""",
)
log10 = _unary(
    "log10",
    "Base-10 logarithm.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.5, 4.0], (4,), dtype="float64", fill_value=1.0)
>>> r = xs.log10(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[-0.301029995664, 0.0, 0.602059991328, 0.0]""",
)
logical_not = _unary(
    "logical_not",
    "Logical NOT.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [True, True], (4,), dtype="bool")
>>> r = xs.logical_not(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, True)
>>> xs.to_dense(r).tolist()
[False, True, False, True]""",
)
negative = _unary(
    "negative",
    "Numerical negative.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.negative(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, -0.0)
>>> xs.to_dense(r).tolist()
[-0.25, -0.0, -2.5, -0.0]""",
)
positive = _unary(
    "positive",
    "Numerical positive.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.positive(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.25, 0.0, 2.5, 0.0]""",
)
real = _unary(
    "real",
    "Real part.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1 + 2j, -3j], (4,), dtype="complex128")
>>> r = xs.real(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.0, 0.0, -0.0, 0.0]""",
)
reciprocal = _unary(
    "reciprocal",
    "``1 / x``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.5, 4.0], (4,), dtype="float64", fill_value=1.0)
>>> r = xs.reciprocal(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 1.0)
>>> xs.to_dense(r).tolist()
[2.0, 1.0, 0.25, 1.0]""",
)
round = _unary(
    "round",
    "Round to the nearest integer, halves to even.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.round(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.0, 0.0, 2.0, 0.0]""",
)
sign = _unary(
    "sign",
    "Sign; ``x / |x|`` for complex elements.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.sign(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.0, 0.0, 1.0, 0.0]""",
)
signbit = _unary(
    "signbit",
    "Whether the sign bit is set.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [float("inf"), -2.0], (4,), dtype="float64")
>>> r = xs.signbit(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[False, False, True, False]""",
)
sin = _unary(
    "sin",
    "Sine.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.sin(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.247403959255, 0.0, 0.598472144104, 0.0]""",
)
sinh = _unary(
    "sinh",
    "Hyperbolic sine.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.sinh(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.252612316808, 0.0, 6.05020448104, 0.0]""",
)
square = _unary(
    "square",
    "``x * x``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.square(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.0625, 0.0, 6.25, 0.0]""",
)
sqrt = _unary(
    "sqrt",
    "Square root.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.sqrt(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.5, 0.0, 1.5811388300841898, 0.0]""",
)
tan = _unary(
    "tan",
    "Tangent.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.tan(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.255341921221, 0.0, -0.747022297239, 0.0]""",
)
tanh = _unary(
    "tanh",
    "Hyperbolic tangent.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.tanh(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.244918662404, 0.0, 0.986614298151, 0.0]""",
)
trunc = _unary(
    "trunc",
    "Round towards zero.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.trunc(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.0, 0.0, 2.0, 0.0]""",
)
angle = _unary(
    "angle",
    "Argument of complex elements; 0 or pi for real ones (torch's ``angle``).",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1 + 2j, -3j], (4,), dtype="complex128")
>>> r = xs.angle(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[1.10714871779, 0.0, -1.57079632679, 0.0]""",
)
sgn = _unary(
    "sgn",
    "torch's ``sgn``: the sign, ``x / |x|`` for complex elements.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1 + 2j, -3j], (4,), dtype="complex128")
>>> r = xs.sgn(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0j)
>>> xs.to_dense(r).tolist()
[(0.4472135954999579+0.8944271909999159j), 0j, (-0-1j), 0j]""",
)
isposinf = _unary(
    "isposinf",
    "Whether each element is +inf.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [float("inf"), -2.0], (4,), dtype="float64")
>>> r = xs.isposinf(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[True, False, False, False]""",
)
isneginf = _unary(
    "isneginf",
    "Whether each element is -inf.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [float("inf"), -2.0], (4,), dtype="float64")
>>> r = xs.isneginf(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[False, False, False, False]""",
)
deg2rad = _unary(
    "deg2rad",
    "Degrees to radians.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.deg2rad(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.004363323129985824, 0.0, 0.04363323129985824, 0.0]""",
)
rad2deg = _unary(
    "rad2deg",
    "Radians to degrees.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.rad2deg(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[14.32394487827058, 0.0, 143.2394487827058, 0.0]""",
)
conj_physical = _unary(
    "conj_physical",
    "torch's ``conj_physical``: the complex conjugate.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1 + 2j, -3j], (4,), dtype="complex128")
>>> r = xs.conj_physical(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, -0j)
>>> xs.to_dense(r).tolist()
[(1-2j), -0j, (-0+3j), -0j]""",
)
erf = _unary(
    "erf",
    "The error function (native kernels: SciPy on NumPy, torch.special on torch, cupyx.scipy.special on CuPy).",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 2.5], (4,), dtype="float64")
>>> r = xs.erf(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.276326390168, 0.0, 0.999593047983, 0.0]""",
)
erfinv = _unary(
    "erfinv",
    "The inverse error function (native kernels: SciPy on NumPy, torch.special on torch, cupyx.scipy.special on CuPy).",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [0.25, 0.5], (4,), dtype="float64")
>>> r = xs.erfinv(a)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> [float(f"{v:.12g}") for v in xs.to_dense(r).tolist()]
[0.225312055012, 0.0, 0.476936276204, 0.0]""",
)
add = _binary(
    "add",
    "Sum.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.add(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.0, 2.0, 7.0, 0.0]
>>> xs.to_dense(xs.add(a, 2.0)).tolist()
[3.0, 2.0, 6.0, 2.0]""",
)
atan2 = _binary(
    "atan2",
    "Inverse tangent of ``x1 / x2``, in the right quadrant.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.atan2(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.5707963267948966, 0.0, 0.9272952180016122, 0.0]
>>> xs.to_dense(xs.atan2(a, 2.0)).tolist()
[0.4636476090008061, 0.0, 1.1071487177940904, 0.0]""",
)
bitwise_and = _binary(
    "bitwise_and",
    "Bitwise AND.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1, 4], (4,), dtype="int64")
>>> b = xs.sparse_coo_array([[1, 2]], [2, 3], (4,), dtype="int64")
>>> r = xs.bitwise_and(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0)
>>> xs.to_dense(r).tolist()
[0, 0, 0, 0]
>>> xs.to_dense(xs.bitwise_and(a, 1)).tolist()
[1, 0, 0, 0]""",
)
bitwise_left_shift = _binary(
    "bitwise_left_shift",
    "Shift the bits of ``x1`` left by ``x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1, 4], (4,), dtype="int64")
>>> b = xs.sparse_coo_array([[1, 2]], [2, 3], (4,), dtype="int64")
>>> r = xs.bitwise_left_shift(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0)
>>> xs.to_dense(r).tolist()
[1, 0, 32, 0]
>>> xs.to_dense(xs.bitwise_left_shift(a, 1)).tolist()
[2, 0, 8, 0]""",
)
bitwise_or = _binary(
    "bitwise_or",
    "Bitwise OR.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1, 4], (4,), dtype="int64")
>>> b = xs.sparse_coo_array([[1, 2]], [2, 3], (4,), dtype="int64")
>>> r = xs.bitwise_or(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0)
>>> xs.to_dense(r).tolist()
[1, 2, 7, 0]
>>> xs.to_dense(xs.bitwise_or(a, 1)).tolist()
[1, 1, 5, 1]""",
)
bitwise_right_shift = _binary(
    "bitwise_right_shift",
    "Shift the bits of ``x1`` right by ``x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1, 4], (4,), dtype="int64")
>>> b = xs.sparse_coo_array([[1, 2]], [2, 3], (4,), dtype="int64")
>>> r = xs.bitwise_right_shift(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0)
>>> xs.to_dense(r).tolist()
[1, 0, 0, 0]
>>> xs.to_dense(xs.bitwise_right_shift(a, 1)).tolist()
[0, 0, 2, 0]""",
)
bitwise_xor = _binary(
    "bitwise_xor",
    "Bitwise XOR.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1, 4], (4,), dtype="int64")
>>> b = xs.sparse_coo_array([[1, 2]], [2, 3], (4,), dtype="int64")
>>> r = xs.bitwise_xor(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0)
>>> xs.to_dense(r).tolist()
[1, 2, 7, 0]
>>> xs.to_dense(xs.bitwise_xor(a, 1)).tolist()
[0, 1, 5, 1]""",
)
copysign = _binary(
    "copysign",
    "``x1`` with the sign of ``x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.copysign(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.0, 0.0, 4.0, 0.0]
>>> xs.to_dense(xs.copysign(a, 2.0)).tolist()
[1.0, 0.0, 4.0, 0.0]""",
)
divide = _binary(
    "divide",
    "True division.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64", fill_value=1.0)
>>> r = xs.divide(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.0, 0.0, 1.3333333333333333, 0.0]
>>> xs.to_dense(xs.divide(a, 2.0)).tolist()
[0.5, 0.0, 2.0, 0.0]""",
)
equal = _binary(
    "equal",
    "``x1 == x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.equal(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, True)
>>> xs.to_dense(r).tolist()
[False, False, False, True]
>>> xs.to_dense(xs.equal(a, 2.0)).tolist()
[False, False, False, False]""",
)
floor_divide = _binary(
    "floor_divide",
    "Division rounded down.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64", fill_value=1.0)
>>> r = xs.floor_divide(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.0, 0.0, 1.0, 0.0]
>>> xs.to_dense(xs.floor_divide(a, 2.0)).tolist()
[0.0, 0.0, 2.0, 0.0]""",
)
greater = _binary(
    "greater",
    "``x1 > x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.greater(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[True, False, True, False]
>>> xs.to_dense(xs.greater(a, 2.0)).tolist()
[False, False, True, False]""",
)
greater_equal = _binary(
    "greater_equal",
    "``x1 >= x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.greater_equal(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, True)
>>> xs.to_dense(r).tolist()
[True, False, True, True]
>>> xs.to_dense(xs.greater_equal(a, 2.0)).tolist()
[False, False, True, False]""",
)
hypot = _binary(
    "hypot",
    "``sqrt(x1**2 + x2**2)`` without overflow.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.hypot(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.0, 2.0, 5.0, 0.0]
>>> xs.to_dense(xs.hypot(a, 2.0)).tolist()
[2.23606797749979, 2.0, 4.47213595499958, 2.0]""",
)
less = _binary(
    "less",
    "``x1 < x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.less(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[False, True, False, False]
>>> xs.to_dense(xs.less(a, 2.0)).tolist()
[True, True, False, True]""",
)
less_equal = _binary(
    "less_equal",
    "``x1 <= x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.less_equal(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, True)
>>> xs.to_dense(r).tolist()
[False, True, False, True]
>>> xs.to_dense(xs.less_equal(a, 2.0)).tolist()
[True, True, False, True]""",
)
logaddexp = _binary(
    "logaddexp",
    "``log(exp(x1) + exp(x2))``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.logaddexp(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.6931471805599453)
>>> xs.to_dense(r).tolist()
[1.3132616875182228, 2.1269280110429727, 4.313261687518223, 0.6931471805599453]
>>> xs.to_dense(xs.logaddexp(a, 2.0)).tolist()
[2.313261687518223, 2.1269280110429727, 4.126928011042972, 2.1269280110429727]""",
)
logical_and = _binary(
    "logical_and",
    "Logical AND.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [True, True], (4,), dtype="bool")
>>> b = xs.sparse_coo_array([[1, 2]], [True, False], (4,), dtype="bool")
>>> r = xs.logical_and(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[False, False, False, False]
>>> xs.to_dense(xs.logical_and(a, True)).tolist()
[True, False, True, False]""",
)
logical_or = _binary(
    "logical_or",
    "Logical OR.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [True, True], (4,), dtype="bool")
>>> b = xs.sparse_coo_array([[1, 2]], [True, False], (4,), dtype="bool")
>>> r = xs.logical_or(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[True, True, True, False]
>>> xs.to_dense(xs.logical_or(a, True)).tolist()
[True, True, True, True]""",
)
logical_xor = _binary(
    "logical_xor",
    "Logical XOR.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [True, True], (4,), dtype="bool")
>>> b = xs.sparse_coo_array([[1, 2]], [True, False], (4,), dtype="bool")
>>> r = xs.logical_xor(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[True, True, True, False]
>>> xs.to_dense(xs.logical_xor(a, True)).tolist()
[False, True, False, True]""",
)
maximum = _binary(
    "maximum",
    "Elementwise maximum (NaN propagates).",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.maximum(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.0, 2.0, 4.0, 0.0]
>>> xs.to_dense(xs.maximum(a, 2.0)).tolist()
[2.0, 2.0, 4.0, 2.0]""",
)
minimum = _binary(
    "minimum",
    "Elementwise minimum (NaN propagates).",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.minimum(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.0, 0.0, 3.0, 0.0]
>>> xs.to_dense(xs.minimum(a, 2.0)).tolist()
[1.0, 0.0, 2.0, 0.0]""",
)
multiply = _binary(
    "multiply",
    "Product.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.multiply(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.0, 0.0, 12.0, 0.0]
>>> xs.to_dense(xs.multiply(a, 2.0)).tolist()
[2.0, 0.0, 8.0, 0.0]""",
)
nextafter = _binary(
    "nextafter",
    "The next float after ``x1`` towards ``x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.nextafter(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.9999999999999999, 5e-324, 3.9999999999999996, 0.0]
>>> xs.to_dense(xs.nextafter(a, 2.0)).tolist()
[1.0000000000000002, 5e-324, 3.9999999999999996, 5e-324]""",
)
not_equal = _binary(
    "not_equal",
    "``x1 != x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.not_equal(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, False)
>>> xs.to_dense(r).tolist()
[True, True, True, False]
>>> xs.to_dense(xs.not_equal(a, 2.0)).tolist()
[True, True, True, True]""",
)
pow = _binary(
    "pow",
    "``x1 ** x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.pow(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 1.0)
>>> xs.to_dense(r).tolist()
[1.0, 0.0, 64.0, 1.0]
>>> xs.to_dense(xs.pow(a, 2.0)).tolist()
[1.0, 0.0, 16.0, 0.0]""",
)
remainder = _binary(
    "remainder",
    "Remainder of floor division, with the sign of ``x2``.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64", fill_value=1.0)
>>> r = xs.remainder(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[0.0, 0.0, 1.0, 0.0]
>>> xs.to_dense(xs.remainder(a, 2.0)).tolist()
[1.0, 0.0, 0.0, 0.0]""",
)
subtract = _binary(
    "subtract",
    "Difference.",
    """\
>>> a = xs.sparse_coo_array([[0, 2]], [1.0, 4.0], (4,), dtype="float64")
>>> b = xs.sparse_coo_array([[1, 2]], [2.0, 3.0], (4,), dtype="float64")
>>> r = xs.subtract(a, b)
>>> r.layout, r.fill_value
(xsparse.sparse_coo, 0.0)
>>> xs.to_dense(r).tolist()
[1.0, -2.0, 1.0, 0.0]
>>> xs.to_dense(xs.subtract(a, 2.0)).tolist()
[-1.0, -2.0, 2.0, -2.0]""",
)
