"""The cases of the conformance suite: for each operation, how to call it through the public API on
Hypothesis inputs of a given layout signature, and its dense oracle on the same backend.

A :class:`Case` builds a :class:`Trial` from a Hypothesis ``draw`` function, the backend under test
(:class:`Context`) and a concrete layout signature (one layout, or ``"scalar"``, per operand, as the
dispatcher sees them). The trial holds the public call, which the runner makes once with every kernel
and once with the generic kernels alone, and the dense reference, computed by the same backend's own
functions on the dense operands. Inputs come from :mod:`.strategies`: batch and dense dimensions,
non-zero fill values, uncoalesced COO with duplicates, nnz = 0, int32 and int64 indices.

A new operation gets a case with :func:`case`; the runner reports an operation without one as
``no case``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import array_api_compat
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import xsparse as xs
from xsparse._common import dtype_name
from xsparse.backends.array_api import elementwise as _elementwise
from xsparse.backends.array_api.conversion import from_host
from xsparse.testing import apply_products_rule, apply_zero_ties_rule, generic_to_dense, maps_duplicates, to_numpy

from . import strategies as S

__all__ = ["Context", "Trial", "Case", "CASES", "case", "Draw", "Signature"]

Draw = Callable[[st.SearchStrategy[Any]], Any]
Signature = tuple[Hashable, ...]

FLOATS = ("float32", "float64")
COMPLEX = ("complex64", "complex128")
INTS = ("int8", "int16", "int32", "int64", "uint8")
SIGNED = ("int8", "int16", "int32", "int64")
BOOL = ("bool",)
SPARSE_LAYOUTS = (xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc)


@dataclass(frozen=True)
class Context:
    """The backend under test: its registry name and its Array API namespace.

    The cases choose their dtypes by what the namespace accepts (:meth:`accepts`), never by the backend's
    name, so that a third-party backend that follows the standard strictly gets the inputs that
    array-api-strict gets.
    """

    backend: str
    xp: Any
    # (function, dtypes, values) -> whether the namespace computed it; each probe runs once per run
    probes: dict[tuple[str, tuple[str, ...], tuple[int, ...]], bool] = field(default_factory=dict, compare=False, repr=False)

    def has(self, *dtypes: str) -> list[str]:
        """The names among ``dtypes`` that the namespace has."""
        return [d for d in dtypes if hasattr(self.xp, d)]

    def accepts(self, function: str, dtypes: tuple[str, ...], values: tuple[int, ...] | None = None) -> bool:
        """Whether the namespace's ``function`` computes on one-element arrays of ``dtypes`` holding
        ``values`` (1 each by default) instead of raising.

        >>> import array_api_strict
        >>> ctx = Context("array_api_strict", array_api_strict)
        >>> ctx.accepts("multiply", ("float64", "float64")), ctx.accepts("multiply", ("bool", "bool"))
        (True, False)
        """
        values = (1,) * len(dtypes) if values is None else values
        key = (function, dtypes, values)
        if key not in self.probes:
            try:
                # a probe's warnings (NumPy's integer division by zero) are no refusal
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    args = [self.xp.asarray([bool(v) if d == "bool" else v], dtype=getattr(self.xp, d)) for d, v in zip(dtypes, values)]
                    getattr(self.xp, function)(*args)
                self.probes[key] = True
            except Exception:  # whatever the namespace raises is its refusal
                self.probes[key] = False
        return self.probes[key]


@dataclass
class Trial:
    """One drawn example: the public call, its dense reference, and how to compare them.

    ``expected`` is computed by the backend on dense operands. ``compare`` replaces the default
    comparison (:func:`xsparse.testing.assert_sparse_equal` with ``rtol``/``atol``, and ``layout`` when
    given); ``check`` runs extra assertions on the result. ``raises`` is the documented error of an
    example that the operation refuses by rule (``(exception type, regular expression of its
    message)``, e.g. ``tril`` of an array whose fill value is not 0): the call must raise it, and
    ``expected`` is not computed. The default comparison checks the signs of zeros too, unless
    ``signed_zeros`` is False (the results docs/decisions.md leaves untracked, "Signs of zeros that
    xsparse does not track"); ``zeros``, given the result, applies a documented rule for them to the
    dense reference (the rule of sparse products, the divisor's sign of a zero remainder) and to the
    generic kernel's result (the order of ``+0.0`` and ``-0.0`` in ``maximum`` and ``minimum``).
    """

    call: Callable[[], Any]
    expected: Callable[[], Any]
    rtol: float | None = None
    atol: float | None = None
    layout: Any = None
    compare: Callable[[Any, Any], None] | None = None
    check: Callable[[Any], None] | None = None
    raises: tuple[type[Exception], str] | None = None
    signed_zeros: bool = True
    zeros: Callable[[Any, Any], Any] | None = None


@dataclass(frozen=True)
class Case:
    """How to test one operation: ``build`` draws a :class:`Trial` for a concrete signature; ``skip``
    names a reason to leave a signature out (or returns None)."""

    op: str
    build: Callable[[Draw, Context, Signature], Trial]
    skip: Callable[[Context, Signature], str | None] = field(default=lambda ctx, sig: None)


CASES: dict[str, Case] = {}


def case(
    *ops: str, skip: Callable[[Context, Signature], str | None] | None = None
) -> Callable[[Callable[[str, Draw, Context, Signature], Trial]], Callable[[str, Draw, Context, Signature], Trial]]:
    """Register the decorated ``build(op, draw, ctx, signature)`` as the case of each of ``ops``."""

    def decorate(
        build: Callable[[str, Draw, Context, Signature], Trial],
    ) -> Callable[[str, Draw, Context, Signature], Trial]:
        for op in ops:
            CASES[op] = Case(
                op,
                (lambda o: lambda draw, ctx, sig: build(o, draw, ctx, sig))(op),
                skip if skip is not None else (lambda ctx, sig: None),
            )
        return build

    return decorate


# -- shared helpers ----------------------------------------------------------------------------------


def dense(x: Any) -> Any:
    """The dense value of an operand (sparse arrays through the generic kernels; others unchanged)."""
    return generic_to_dense(x) if isinstance(x, xs.SparseArray) else x


def _seed(draw: Draw) -> np.random.Generator:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _is_nan(v: Any) -> bool:
    return bool(v != v)


def specified_mask(h: np.ndarray, fill: Any, dense_dim: int) -> np.ndarray:
    """Where the host array ``h`` differs from ``fill``, per sparse position (dense dims folded)."""
    mask: np.ndarray = np.asarray(~S.is_fill(h, fill))
    if dense_dim:
        lead = mask.shape[: mask.ndim - dense_dim]
        mask = np.asarray(mask.reshape(*lead, math.prod(mask.shape[mask.ndim - dense_dim :])).any(axis=-1))
    return np.asarray(mask)


def pattern(xp: Any, x: Any) -> Any:
    """Where the sparse ``x`` specifies an element (every element of a stored block or sub-array)."""
    ones = xp.ones(tuple(x._vals.shape), dtype=xp.bool)
    return xs.to_dense(x._with_values(ones, False))


def to_layout(
    draw: Draw,
    xp: Any,
    host: np.ndarray,
    layout: Hashable,
    *,
    fill: Any = 0,
    dense_dim: int = 0,
    blocksize: tuple[int, int] = (1, 1),
    index_dtype: str = "int64",
    duplicates: bool = True,
) -> Any:
    """The host array on the backend in ``layout``; a COO array that holds an element is uncoalesced (with
    duplicates) half the time."""
    x = from_host(xp, host)
    if layout is xs.strided:
        return x
    assert isinstance(layout, xs.Layout)
    kw: dict[str, Any] = {"layout": layout, "index_dtype": index_dtype}
    if not (fill == 0 and not _is_nan(fill)):
        kw["fill_value"] = fill
    if layout is xs.sparse_coo:
        kw["sparse_dim"] = host.ndim - dense_dim
    else:
        kw["dense_dim"] = dense_dim
    if layout.is_blocked:
        kw["blocksize"] = blocksize
    out = xs.to_sparse(x, **kw)
    if layout is xs.sparse_coo and duplicates and out.nnz and draw(st.booleans()):
        out = S.uncoalesced_like(xp, _seed(draw), out, index_dtype)
    return out


def from_case(draw: Draw, xp: Any, c: S.DenseCase, layout: Hashable, *, duplicates: bool = True) -> Any:
    """The example ``c`` in ``layout``."""
    return to_layout(
        draw, xp, c.host, layout, fill=c.fill_value, dense_dim=c.dense_dim, blocksize=c.blocksize,
        index_dtype=c.index_dtype, duplicates=duplicates,
    )  # fmt: skip


def companion(
    rng: np.random.Generator, c: S.DenseCase, dtype: str, fill: Any, *, specials: bool = True, non_negative: bool = False
) -> np.ndarray:
    """A host array of ``c``'s shape whose specified positions are ``c``'s flipped along both sparse
    dimensions (which keeps every batch's element and block counts), with new values and fill value
    (the odd NaN among floating values unless ``specials`` is False; no negative values, and a
    non-negative fill value, with ``non_negative``)."""
    nb = c.batch_dim
    if non_negative:
        fill = abs(fill)
    mask = np.flip(specified_mask(c.host, c.fill_value, c.dense_dim), axis=(nb, nb + 1))
    out = np.full(c.shape, fill, dtype=np.dtype(dtype))
    count = int(mask.sum())
    values = S.nonzero_values(rng, dtype, count * math.prod(c.dense_shape), fill, specials=specials)
    if non_negative:
        # |v| may equal the fill value (|-0.0| is +0.0): such an element would no longer be specified
        values = np.abs(values)
        values[S.is_fill(values, fill)] = np.asarray(fill, dtype=values.dtype) + 1
    out[mask] = values.reshape(count, *c.dense_shape)
    return out


def float_tolerance(dtype: Any, loose: bool = False) -> dict[str, Any]:
    """A comparison tolerance for results of ``dtype`` (exact for integers and bool)."""
    name = dtype_name(dtype)
    if name in ("float32", "complex64"):
        return {"rtol": 1e-4, "atol": 1e-5} if loose else {"rtol": 2e-6, "atol": 1e-6}
    if name in ("float64", "complex128"):
        return {"rtol": 1e-9, "atol": 1e-11} if loose else {"rtol": 1e-12, "atol": 1e-12}
    return {}


def _sparse_positions(sig: Signature) -> list[int]:
    return [i for i, s in enumerate(sig) if isinstance(s, xs.Layout) and s.is_sparse]


def _no_semi(ctx: Context, sig: Signature) -> str | None:
    if xs.sparse_semi_structured in sig:
        return "semi-structured operands are drawn only by the convert, matmul, addmm, detach and clone cases"
    return None


# -- elementwise -------------------------------------------------------------------------------------

# The dtypes each function is drawn with: those for which the Array API (and NumPy and torch) define it.
UNARY_DTYPES: dict[str, tuple[str, ...]] = {
    **{name: FLOATS + COMPLEX for name in (
        "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp", "log", "log2", "log10", "sin",
        "sinh", "sqrt", "tan", "tanh", "reciprocal", "sgn", "angle",
    )},
    **{name: FLOATS for name in (
        "ceil", "floor", "trunc", "round", "signbit", "isposinf", "isneginf", "deg2rad", "rad2deg", "erf",
        "erfinv", "expm1", "log1p",
    )},
    **{name: SIGNED + FLOATS + COMPLEX for name in ("abs", "negative", "positive", "sign", "square")},
    **{name: COMPLEX for name in ("conj", "conj_physical", "real", "imag")},
    **{name: INTS + FLOATS + COMPLEX for name in ("isfinite", "isinf", "isnan")},
    "bitwise_invert": BOOL + INTS,
    "logical_not": BOOL,
    "clip": SIGNED + FLOATS,
}  # fmt: skip
BINARY_DTYPES: dict[str, tuple[str, ...]] = {
    "add": BOOL + INTS + FLOATS + COMPLEX,
    "multiply": BOOL + INTS + FLOATS + COMPLEX,
    "subtract": INTS + FLOATS + COMPLEX,
    "divide": FLOATS + COMPLEX,
    "floor_divide": INTS + FLOATS,
    "remainder": INTS + FLOATS,
    "pow": SIGNED + FLOATS,
    "equal": BOOL + INTS + FLOATS + COMPLEX,
    "not_equal": BOOL + INTS + FLOATS + COMPLEX,
    **{name: INTS + FLOATS for name in ("less", "less_equal", "greater", "greater_equal", "maximum", "minimum")},
    **{name: FLOATS for name in ("atan2", "copysign", "hypot", "logaddexp", "nextafter")},
    **{name: BOOL + INTS for name in ("bitwise_and", "bitwise_or", "bitwise_xor")},
    **{name: SIGNED for name in ("bitwise_left_shift", "bitwise_right_shift")},
    **{name: BOOL for name in ("logical_and", "logical_or", "logical_xor")},
}  # fmt: skip
# an integer divided by 0 raises in some namespaces (torch: ZeroDivisionError), and the fill value 0 provokes it
_DIVISIONS = frozenset({"floor_divide", "remainder"})
# the second operand must not be negative (shift amounts, integer exponents)
_NON_NEGATIVE_SECOND = frozenset({"bitwise_left_shift", "bitwise_right_shift", "pow"})


def _dtypes_for(table: dict[str, tuple[str, ...]], op: str, ctx: Context) -> list[str]:
    names = ctx.has(*table[op])
    if not hasattr(ctx.xp, op):
        return names  # no dense reference: the case checks that the sparse call says so (unsupported)
    # The standard leaves some dtypes out (its arithmetic is numeric only: array-api-strict refuses bool
    # add and multiply, which NumPy and torch take), so the namespace decides, not the backend's name.
    arity = 2 if table is BINARY_DTYPES else 1
    names = [d for d in names if ctx.accepts(op, (d,) * arity)]
    if op in _DIVISIONS:
        names = [d for d in names if d not in INTS or ctx.accepts(op, (d, d), (1, 0))]
    return names


def _elementwise_case(draw: Draw, ctx: Context, dtype: str, fill: bool | None = None) -> S.DenseCase:
    return draw(S.dense_cases(ctx.xp, dtype=dtype, fill=fill, max_batch_dims=1, max_dense_dims=1))  # type: ignore[no-any-return]


# torch's extra unary functions by NumPy's names: the reference, computed on the host, where neither the
# namespace nor the backend's library has the function (NumPy's sign of a complex number is torch's sgn)
_HOST_UNARY: dict[str, Callable[..., Any]] = {
    "sgn": np.sign, "conj_physical": np.conj, "deg2rad": np.deg2rad, "rad2deg": np.rad2deg, "angle": np.angle,
    "isposinf": np.isposinf, "isneginf": np.isneginf, "signbit": np.signbit,
}  # fmt: skip


def _library(ctx: Context) -> Any:
    """The top-level module of the backend's library (``torch`` for torch), if it is imported."""
    import sys

    try:
        return sys.modules.get(xs.get_backend(ctx.backend).library)
    except (ValueError, LookupError):
        return None


def _unary_reference(op: str, ctx: Context) -> Callable[..., Any]:
    """The backend's own function ``op`` of a dense array: the namespace's, else that of the backend's
    library (torch's ``deg2rad``), else NumPy's on the host. Never xsparse's strided kernel, which the
    sparse kernels map their values through: a wrong one would agree with itself. A function that only
    native kernels compute (``erf``) and that the backend lacks keeps xsparse's, whose NoKernelError the
    runner reads as unsupported."""
    if (ctx.backend, op) in GENERIC_SIGNS_WRONG:
        # the backend's own function gets the sign of a zero wrong (torch's complex negative): NumPy's
        # on the host, which follows IEEE 754 as the standard asks
        host = getattr(np, op)
        return lambda d, **kw: from_host(ctx.xp, host(to_numpy(d), **kw))
    for source in (ctx.xp, _library(ctx)):
        fn = getattr(source, op, None) if source is not None else None
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    if op in _HOST_UNARY:
        host = _HOST_UNARY[op]
        if op == "sgn":
            # sgn of a real number is its sign, the namespace's own (whose sign of -0.0 is the backend's: JAX's
            # is -0.0, as xsparse's sign and sgn give it there); NumPy's on the host for complex numbers
            xp = ctx.xp
            return lambda d: xp.sign(d) if xp.isdtype(d.dtype, "real floating") else from_host(xp, host(to_numpy(d)))
        return lambda d, **kw: from_host(ctx.xp, host(to_numpy(d), **kw))
    return getattr(xs, op)  # type: ignore[no-any-return]


def _documented_rule(op: str, xp: Any, d: Any, result: Any) -> Any:
    """``result``, the backend's ``op`` of ``d``, with xsparse's documented rule for single
    elements where a backend differs (docs/decisions.md, "Where xsparse and torch differ on single
    elements"): the angle of a real zero is 0, -0.0 included, as in torch (NumPy gives pi), and the angle
    of a real NaN is NaN, as in torch and NumPy (CuPy's angle gives pi: its loop reads ``x >= 0 ? 0 : pi``);
    the sign of NaN is NaN, as the Array API says (torch's sgn gives 0); the sign of a complex zero is
    0 + 0j, as the Array API says (jax.numpy keeps the signs of its parts: sign(-0 + 0j) is -0 + 0j there)."""
    if op in ("sign", "sgn") and xp.isdtype(d.dtype, "complex floating"):
        return xp.where(d == 0, xp.zeros_like(result), result)
    if not xp.isdtype(d.dtype, "real floating"):
        return result
    if op == "angle":
        return xp.where(xp.isnan(d), d, xp.where(d == 0, xp.zeros_like(result), result))
    if op in ("sign", "sgn"):
        return xp.where(xp.isnan(d), d, result)
    return result


@case(*sorted({*_elementwise.UNARY, *_elementwise.NATIVE_ONLY_UNARY, "clip"}), skip=_no_semi)
def _unary(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    c = _elementwise_case(draw, ctx, draw(st.sampled_from(_dtypes_for(UNARY_DTYPES, op, ctx))))
    x = from_case(draw, xp, c, sig[0])
    kw = {"min": -1, "max": 2} if op == "clip" else {}
    fn, ref = getattr(xs, op), _unary_reference(op, ctx)

    def expected() -> Any:
        d = dense(x)
        return _documented_rule(op, xp, d, ref(d, **kw))

    return Trial(lambda: fn(x, **kw), expected, layout=sig[0], signed_zeros=not maps_duplicates(op, x))


def _scalar_of(rng: np.random.Generator, dtype: str, non_negative: bool) -> Any:
    if dtype == "bool":
        return bool(rng.integers(0, 2))
    if dtype.startswith(("int", "uint")):
        return int(rng.integers(0 if non_negative or dtype == "uint8" else -3, 4))
    if dtype.startswith("float"):
        return float(rng.choice([0.0, 1.5, -2.0, 0.5, math.inf]))
    return complex(rng.choice([1 + 1j, -2.0 + 0j, 0j]))


@case(*_elementwise.BINARY, skip=_no_semi)
def _binary(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    allowed = _dtypes_for(BINARY_DTYPES, op, ctx)
    dt1 = draw(st.sampled_from(allowed))
    kind = next(k for k in (BOOL, INTS, FLOATS, COMPLEX) if dt1 in k)
    # half the examples are two plain matrices of one dtype and fill value 0, the commonest operands
    # (and the only ones some native kernels take, torch's CSR add and multiply)
    plain = draw(st.booleans())
    dt2 = dt1 if plain else draw(st.sampled_from([d for d in allowed if d in kind]))
    c = draw(S.dense_cases(ctx.xp, dtype=dt1, fill=False, max_batch_dims=0, max_dense_dims=0)) if plain else _elementwise_case(draw, ctx, dt1)
    rng = _seed(draw)
    zero2 = np.zeros((), dtype=np.dtype(dt2)).item()
    fill2 = zero2 if plain else draw(st.sampled_from([zero2, draw(S.fill_values(dt2))]))
    non_negative = op in _NON_NEGATIVE_SECOND
    fill2 = abs(fill2) if non_negative else fill2
    hosts, fills = [c.host, companion(rng, c, dt2, fill2, non_negative=non_negative)], [c.fill_value, fill2]
    if "scalar" not in sig and c.batch_dim and c.batch_shape[0] and draw(st.integers(0, 2)) == 0:
        # broadcasting: one operand's batch dimension of size one, or none at all
        i = draw(st.integers(0, 1))
        hosts[i] = hosts[i][:1] if draw(st.booleans()) else hosts[i][0]
    operands: list[Any] = []
    for i, layout in enumerate(sig):
        if layout == "scalar":
            operands.append(_scalar_of(rng, dt1 if i else dt2, op in _NON_NEGATIVE_SECOND and i == 1))
        else:
            operands.append(
                to_layout(draw, ctx.xp, hosts[i], layout, fill=fills[i], dense_dim=c.dense_dim, blocksize=c.blocksize, index_dtype=c.index_dtype)
            )
    fn, ref = getattr(xs, op), getattr(ctx.xp, op)
    x, y = operands
    def zeros(result: Any, expected: Any) -> Any:
        if op == "remainder" and not isinstance(expected, xs.SparseArray):
            # a zero remainder takes the divisor's sign, as the standard says (torch's takes the dividend's)
            return _elementwise._sign_of_divisor(ctx.xp, expected, dense(y))
        return apply_zero_ties_rule(op, x, y, result, apply_products_rule(op, x, y, result, expected))

    return Trial(lambda: fn(x, y), lambda: ref(dense(x), dense(y)), signed_zeros=not maps_duplicates(op, x, y), zeros=zeros)


# -- reductions --------------------------------------------------------------------------------------

_SINGLE_AXIS = frozenset({"argmax", "argmin", "cumulative_sum", "cumulative_prod", "softmax", "log_softmax"})
_ALONG_AXIS = frozenset({"cumulative_sum", "cumulative_prod", "softmax", "log_softmax"})


def _reduction_dtypes(op: str, ctx: Context) -> list[str]:
    names = S.dtype_names(ctx.xp)
    if op in ("any", "all", "count_nonzero"):
        return names
    if op in ("sum", "prod", "cumulative_sum", "cumulative_prod"):
        return [n for n in names if n != "bool"]
    if op == "mean":
        return [n for n in names if n.startswith(("float", "complex"))]
    if op in ("var", "std", "softmax", "log_softmax"):
        return [n for n in names if n.startswith("float")]
    return [n for n in names if n != "bool" and not n.startswith("complex")]


def _accumulation_dtype(xp: Any, dtype: str) -> Any:
    """The Array API's default result dtype of ``sum``, ``prod`` and ``cumulative_*`` of ``dtype``: the
    default integer dtype for signed integers, uint64 for unsigned ones (torch's own rule gives int64 and
    has no uint64 sums, so its dense result is cast: sums and products agree modulo 2**64), the dtype
    itself otherwise (docs/decisions.md, "dtypes follow the Array API's categories")."""
    if dtype.startswith("uint"):
        return xp.uint64
    if dtype.startswith("int"):
        return xp.int64
    return getattr(xp, dtype)


def _softmax_host(host: np.ndarray, axis: int, log: bool) -> np.ndarray:
    with np.errstate(all="ignore"):
        m = np.max(host, axis=axis, keepdims=True) if host.size else host
        z = host - np.where(np.isinf(m), 0, m) if host.size else host
        s = np.sum(np.exp(z), axis=axis, keepdims=True)
        ok = (s > 0) & np.isfinite(s)
        out = z - np.log(np.where(ok, s, 1)) if log else np.exp(z) / np.where(ok, s, 1)
        return np.asarray(np.where(ok, out, np.nan))


@case("sum", "prod", "max", "min", "any", "all", "count_nonzero", "mean", "var", "std", "argmax", "argmin",
      "cumulative_sum", "cumulative_prod", "softmax", "log_softmax", skip=_no_semi)  # fmt: skip
def _reduction(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    dtype = draw(st.sampled_from(_reduction_dtypes(op, ctx)))
    # softmax reads unspecified elements as -inf, which a non-zero fill value contradicts (an error)
    fill = False if op in ("softmax", "log_softmax") else None
    c = draw(S.dense_cases(xp, dtype=dtype, fill=fill, max_batch_dims=1, max_dense_dims=1))
    layout = sig[0]
    x = from_case(draw, xp, c, layout)
    ndim = len(c.shape)
    axis: Any = None
    if ndim and (op in _ALONG_AXIS or draw(st.booleans())):
        axis = draw(st.integers(0, ndim - 1))
        if op not in _SINGLE_AXIS and draw(st.booleans()):
            axis = tuple(draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True)))
    if op in _ALONG_AXIS and ndim == 0:
        assume(False)
    axes = tuple(range(ndim)) if axis is None else (axis,) if isinstance(axis, int) else axis
    n = math.prod(c.shape[a] for a in axes)
    if op in ("max", "min", "argmax", "argmin", "mean"):
        assume(n > 0)
    if op in ("var", "std"):
        assume(n > 0 and math.prod(c.shape) > 0)
    if op in ("prod", "cumulative_prod") and dtype.startswith(("float", "complex")):
        # a product that may overflow on the way has no one right answer: keep clear of the range
        bound = np.nansum(np.log2(np.maximum(np.abs(c.host.astype(np.complex128)), 1.0)))
        assume(bound < np.log2(np.finfo(c.host.dtype).max) - 2)
    keepdims = op not in _ALONG_AXIS and draw(st.booleans())
    fn = getattr(xs, op)
    d = dense(x)

    def call() -> Any:
        if op in ("softmax", "log_softmax"):
            return fn(x, axis)
        if op in ("cumulative_sum", "cumulative_prod"):
            return fn(x, axis=axis)
        return fn(x, axis=axis, keepdims=keepdims)

    def expected() -> Any:
        if op in ("softmax", "log_softmax"):
            host = to_numpy(d).astype(np.float64)
            mask = to_numpy(pattern(xp, x)) if isinstance(x, xs.SparseArray) else np.ones(host.shape, dtype=bool)
            out = _softmax_host(np.where(mask, host, -np.inf), axis, op == "log_softmax")
            if isinstance(x, xs.SparseArray):
                out = np.where(mask, out, -np.inf if op == "log_softmax" else 0.0)
            return from_host(xp, out.astype(dtype))
        if op in ("cumulative_sum", "cumulative_prod"):
            acc = _accumulation_dtype(xp, dtype)
            return xp.astype(getattr(xp, op)(xp.astype(d, acc), axis=axis), acc)
        if op in ("argmax", "argmin") and axis is None:
            r = getattr(xp, op)(xp.reshape(d, (-1,)))
            return xp.reshape(xp.asarray(r), (1,) * ndim if keepdims else ())
        if op in ("sum", "prod"):
            return xp.astype(getattr(xp, op)(d, axis=axis, keepdims=keepdims), _accumulation_dtype(xp, dtype))
        if op in ("any", "all") and dtype.startswith("complex"):
            # a complex element is true where it is not 0 (the standard); jax.numpy's any and all (0.10) read
            # the real part only, all(-2j) is False there
            return getattr(xp, op)(d != 0, axis=axis, keepdims=keepdims)
        return getattr(xp, op)(d, axis=axis, keepdims=keepdims)

    loose = op not in ("max", "min", "any", "all", "count_nonzero", "argmax", "argmin")
    return Trial(call, expected, **float_tolerance(dtype, loose) if loose else {})


# -- conversions -------------------------------------------------------------------------------------


def _semi_host(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    """A float32 host array whose every pair of a row keeps at most one element (the 1:2 pattern)."""
    keep = rng.integers(0, 3, size=(rows, cols // 2))  # 0: none kept, 1: the first, 2: the second
    out = np.zeros((rows, cols // 2, 2), dtype=np.float32)
    values = rng.integers(-4, 5, size=(rows, cols // 2)).astype(np.float32)
    out[..., 0] = np.where(keep == 1, values, 0)
    out[..., 1] = np.where(keep == 2, values, 0)
    return out.reshape(rows, cols)


def _semi_operand(draw: Draw, xp: Any, host: np.ndarray, layout: Hashable) -> Any:
    if layout is xs.sparse_semi_structured:
        return xs.to_sparse_semi_structured(xp.asarray(host))
    return to_layout(draw, xp, host, layout, blocksize=(2, 2))


def _convert_call(x: Any, layout: Hashable, c: S.DenseCase | None) -> Callable[[], Any]:
    if layout is xs.strided:
        return lambda: xs.to_dense(x)
    if layout is xs.sparse_semi_structured:
        return lambda: xs.to_sparse_semi_structured(x)
    assert isinstance(layout, xs.Layout)
    kw: dict[str, Any] = {"layout": layout}
    if c is not None:
        # a sparse source carries its fill value; a strided one is told it, so each batch holds the
        # case's number of specified elements
        kw = {k: v for k, v in c.kwargs(layout).items() if k != "fill_value" or not isinstance(x, xs.SparseArray)}
    elif layout.is_blocked:
        kw["blocksize"] = (2, 2)
    return lambda: xs.to_sparse(x, **kw)


@case("convert")
def _convert(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    src, dst = sig
    if xs.sparse_semi_structured in sig:
        host = _semi_host(_seed(draw), 32, 32)
        x = _semi_operand(draw, ctx.xp, host, src)
        return Trial(_convert_call(x, dst, None), lambda: ctx.xp.asarray(host), layout=dst)
    c = draw(S.dense_cases(ctx.xp, fill=None))
    x = from_case(draw, ctx.xp, c, src)
    if src is dst and draw(st.sampled_from([True, False, True])):
        # to its own layout with the same parameters, x itself comes back and no kernel runs: the
        # other index dtype makes the kernel convert
        c = S.DenseCase(**{**c.__dict__, "index_dtype": "int64" if c.index_dtype == "int32" else "int32"})
    return Trial(_convert_call(x, dst, c), lambda: c.array, layout=dst)


def _coalesced(r: Any) -> None:
    if not r.is_coalesced():
        raise AssertionError("coalesce returned an array that is not coalesced")


@case("coalesce", skip=_no_semi)
def _coalesce(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    if sig[0] is xs.sparse_coo:
        x, host = draw(S.uncoalesced_coo(ctx.xp, fill=None))
        return Trial(lambda: xs.coalesce(x), lambda: ctx.xp.asarray(host), layout=sig[0], check=_coalesced)
    c = draw(S.dense_cases(ctx.xp, fill=None))
    x = from_case(draw, ctx.xp, c, sig[0])
    return Trial(lambda: xs.coalesce(x), lambda: c.array, layout=sig[0])


# -- shape, copies and indexing ----------------------------------------------------------------------


def _shape_case(draw: Draw, ctx: Context, sig: Signature, fill: bool | None = None) -> tuple[S.DenseCase, Any]:
    c = draw(S.dense_cases(ctx.xp, fill=fill, max_batch_dims=1, max_dense_dims=1))
    return c, from_case(draw, ctx.xp, c, sig[0])


@case("reshape", "permute_dims", "expand_dims", "squeeze", "flip", "broadcast_to", "astype", skip=_no_semi)
def _shape(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    c, x = _shape_case(draw, ctx, sig)
    if op == "squeeze":
        # a size-1 dimension to remove: a leading batch dimension of one
        c = S.DenseCase(**{**c.__dict__, "array": xp.asarray(c.host[None]), "host": c.host[None], "batch_shape": (1, *c.batch_shape)})
        x = from_case(draw, xp, c, sig[0])
    ndim = len(c.shape)
    args: tuple[Any, ...]
    ref: Callable[[Any], Any]
    if op == "reshape":
        size = math.prod(c.shape)
        shape = draw(st.sampled_from([(size,), (1, size), c.shape[::-1] if size else (0,)]))
        assume(math.prod(shape) == size)
        args, ref = (shape,), lambda d: xp.reshape(d, shape)
    elif op == "permute_dims":
        axes = tuple(draw(st.permutations(range(ndim))))
        args, ref = (axes,), lambda d: xp.permute_dims(d, axes)
    elif op == "expand_dims":
        axis = draw(st.integers(0, ndim))
        args, ref = (axis,), lambda d: xp.expand_dims(d, axis=axis)
    elif op == "squeeze":
        args, ref = (0,), lambda d: xp.squeeze(d, axis=0)
    elif op == "flip":
        axis = draw(st.sampled_from([None, *range(ndim)]))
        return Trial(lambda: xs.flip(x, axis=axis), lambda: xp.flip(dense(x), axis=axis))
    elif op == "broadcast_to":
        shape = (2, *c.shape)
        args, ref = (shape,), lambda d: xp.broadcast_to(d, shape)
    else:
        target = draw(st.sampled_from(ctx.has("float64", "int32", "complex128")))
        if c.dtype.startswith("complex") and not target.startswith("complex"):
            target = "complex128"
        dt = getattr(xp, target)
        fill = complex(c.fill_value) if c.dtype.startswith(("float", "complex")) else 0j
        finite = math.isfinite(fill.real) and math.isfinite(fill.imag)
        if isinstance(x, xs.SparseArray) and target.startswith("int") and not finite:
            # documented: the unspecified elements would have no value of the integer dtype (a strided
            # array has none: its cast is the backend's)
            message = r"^astype: the fill value has no integer representation"
            return Trial(lambda: xs.astype(x, dt), lambda: None, raises=(ValueError, message))
        args, ref = (dt,), lambda d: xp.astype(d, dt)
    fn = getattr(xs, op)
    return Trial(lambda: fn(x, *args), lambda: ref(dense(x)))


@case("concat", skip=_no_semi)
def _concat(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    c = draw(S.dense_cases(xp, fill=False, max_batch_dims=1, max_dense_dims=1))
    rng = _seed(draw)
    other = companion(rng, c, c.dtype, c.fill_value)
    x = from_case(draw, xp, c, sig[0])
    y = to_layout(draw, xp, other, sig[0], dense_dim=c.dense_dim, blocksize=c.blocksize, index_dtype=c.index_dtype)
    axis = draw(st.integers(0, len(c.shape) - 1)) if sig[0] is not xs.strided else 0
    if isinstance(x, xs.CompressedArray):
        axis = draw(st.sampled_from(range(c.batch_dim + 2)))  # the sparse and batch dimensions
    return Trial(lambda: xs.concat([x, y], axis=axis), lambda: xp.concat([dense(x), dense(y)], axis=axis))


def _dense_block_diag(xp: Any, mats: list[Any]) -> Any:
    """The block-diagonal matrix of strided matrices: each between zeros, the rows joined."""
    dtype = xp.result_type(*(m.dtype for m in mats))
    width = sum(int(m.shape[1]) for m in mats)
    rows, before = [], 0
    for m in mats:
        r, c = int(m.shape[0]), int(m.shape[1])
        dev = array_api_compat.device(m)
        pad = [xp.zeros((r, before), dtype=dtype, device=dev), xp.astype(m, dtype), xp.zeros((r, width - before - c), dtype=dtype, device=dev)]
        rows.append(xp.concat(pad, axis=1))
        before += c
    return xp.concat(rows, axis=0)


@case("block_diag", skip=_no_semi)
def _block_diag(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    rng = _seed(draw)
    dtype = draw(st.sampled_from(ctx.has("float64", "int64", "complex128")))
    blocked = isinstance(sig[0], xs.Layout) and sig[0].is_blocked
    b = draw(st.integers(1, 2)) if blocked else 1
    index_dtype = draw(S.index_dtypes())
    mats = []
    for _ in range(draw(st.integers(1, 3))):
        shape = (b * draw(st.integers(0, 3)), b * draw(st.integers(0, 3)))
        host = _batched_host(rng, shape, draw(st.sampled_from([0.0, 0.3, 1.0])), dtype)
        mats.append(to_layout(draw, xp, host, sig[0], blocksize=(b, b), index_dtype=index_dtype))
    return Trial(lambda: xs.block_diag(*mats), lambda: _dense_block_diag(xp, [dense(m) for m in mats]))


def _slice(draw: Draw, size: int) -> slice:
    start = draw(st.integers(0, size))
    return slice(start, draw(st.integers(start, size)))


def _key(draw: Draw, shape: tuple[int, ...]) -> tuple[Any, ...]:
    key: list[Any] = []
    for size in shape[: draw(st.integers(0, len(shape)))]:
        choice = draw(st.sampled_from(["int", "slice", "all"] if size else ["slice", "all"]))
        if choice == "int":
            key.append(draw(st.integers(-size, size - 1)))
        elif choice == "slice":
            key.append(_slice(draw, size))
        else:
            key.append(slice(None))
    return tuple(key)


@case("getitem", skip=_no_semi)
def _getitem(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    if draw(st.sampled_from([False, True, False])):
        # a matrix sliced along both dimensions, the commonest use (and SciPy's kernel's one)
        c = draw(S.dense_cases(ctx.xp, max_batch_dims=0, max_dense_dims=0))
        x = from_case(draw, ctx.xp, c, sig[0])
        key: tuple[Any, ...] = tuple(_slice(draw, size) for size in c.shape)
        return Trial(lambda: x[key], lambda: dense(x)[key], raises=_partial_blocks(c, sig[0], key))
    c, x = _shape_case(draw, ctx, sig)
    key = (*_key(draw, c.shape), ...)  # the Array API asks for the trailing ellipsis of a partial key
    return Trial(lambda: x[key], lambda: dense(x)[key], raises=_partial_blocks(c, sig[0], key))


def _partial_blocks(c: S.DenseCase, layout: Hashable, key: tuple[Any, ...]) -> tuple[type, str] | None:
    """The documented refusal of a key whose BSR/BSC result keeps both sparse dimensions with a size
    that is not a whole number of blocks (docs/decisions.md), else None."""
    if layout not in (xs.sparse_bsr, xs.sparse_bsc):
        return None
    nb = c.batch_dim
    lead = [k for k in key[:nb] if k is not Ellipsis]
    sparse_keys = [k for k in key[nb : nb + 2] if k is not Ellipsis]
    if any(isinstance(k, int) for k in sparse_keys):
        return None
    out = c.host[key].shape
    at = nb - sum(isinstance(k, int) for k in lead)
    if out[at] % c.blocksize[0] or out[at + 1] % c.blocksize[1]:
        return (xs.LayoutError, r"not a whole number of blocks")
    return None


@case("gather_points", skip=_no_semi)
def _gather_points(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    c, x = _shape_case(draw, ctx, sig)
    k = draw(st.integers(1, max(1, len(c.shape))))
    assume(len(c.shape) >= k and all(c.shape[d] for d in range(k)))
    n = draw(st.integers(0, 4))
    picks = [np.asarray(draw(st.lists(st.integers(0, c.shape[d] - 1), min_size=n, max_size=n)), dtype=np.int64) for d in range(k)]
    key = tuple(xp.asarray(p) for p in picks)
    # NumPy's indexing of the host copy: array-api-strict takes integer arrays only in a full key
    return Trial(lambda: x[key], lambda: from_host(xp, c.host[tuple(picks)]))


@case("take", skip=_no_semi)
def _take(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    c, x = _shape_case(draw, ctx, sig)
    assume(len(c.shape) > 0)
    axis = draw(st.integers(0, len(c.shape) - 1))
    size = c.shape[axis]
    # a blocked array keeps its blocks whole: pick whole blocks along a sparse dimension
    step = c.blocksize[axis - c.batch_dim] if sig[0] in (xs.sparse_bsr, xs.sparse_bsc) and 0 <= axis - c.batch_dim < 2 else 1
    blocks = draw(st.lists(st.integers(0, size // step - 1), max_size=3)) if size else []
    picks = [step * blk + i for blk in blocks for i in range(step)]
    idx = xp.asarray(np.asarray(picks, dtype=np.int64))
    return Trial(lambda: xs.take(x, idx, axis=axis), lambda: xp.take(dense(x), idx, axis=axis))


def _compare_tuples(actual: Any, expected: Any) -> None:
    from xsparse.testing import assert_sparse_equal

    if len(actual) != len(expected):
        raise AssertionError(f"expected {len(expected)} arrays, got {len(actual)}")
    for a, e in zip(actual, expected):
        assert_sparse_equal(a, e)


@case("nonzero", skip=_no_semi)
def _nonzero(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    c, x = _shape_case(draw, ctx, sig, fill=False)
    assume(len(c.shape) > 0)
    return Trial(lambda: xs.nonzero(x), lambda: ctx.xp.nonzero(dense(x)), compare=_compare_tuples)


def _where_skip(ctx: Context, sig: Signature) -> str | None:
    if xs.sparse_semi_structured in sig:
        return "semi-structured operands are not drawn by the where case"
    layouts = {s for s in sig[1:] if s not in ("scalar", xs.strided)}
    if len(layouts - {sig[0]}) > (0 if sig[0] is not xs.strided else 1):
        return "mixed sparse layouts of x1 and x2 are covered through those of the condition"
    return None


@case("where", skip=_where_skip)
def _where(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    dtype = draw(st.sampled_from(ctx.has("float64", "int32")))
    c = draw(S.dense_cases(xp, dtype=dtype, fill=False, max_batch_dims=1, max_dense_dims=1))
    rng = _seed(draw)
    # -0.0 is a specified element of c (it is not the fill value +0.0): True, so every batch of the
    # condition holds as many specified elements as c's
    cond_host = specified_mask(c.host, 0, 0) if c.dense_dim == 0 else ~S.is_fill(c.host, 0)
    hosts = [cond_host, c.host, companion(rng, c, dtype, 0)]
    operands: list[Any] = []
    for i, layout in enumerate(sig):
        if layout == "scalar":
            operands.append(_scalar_of(rng, dtype, False))
        else:
            operands.append(
                to_layout(draw, xp, np.asarray(hosts[i]), layout, fill=False if i == 0 else 0, dense_dim=c.dense_dim,
                          blocksize=c.blocksize, index_dtype=c.index_dtype)
            )  # fmt: skip
    cond, a, b = operands
    # the Array API's where takes at most one scalar: the reference makes the first one an array
    ref_a = xp.asarray(a) if sig[1] == sig[2] == "scalar" else dense(a)
    return Trial(lambda: xs.where(cond, a, b), lambda: xp.where(dense(cond), ref_a, dense(b)))


@case("sparse_mask", skip=_no_semi)
def _sparse_mask(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    c = draw(S.dense_cases(xp, fill=False, max_batch_dims=1, max_dense_dims=1))
    mask = from_case(draw, xp, c, sig[1])
    rng = _seed(draw)
    other = companion(rng, c, c.dtype, 0)
    if sig[0] in (xs.strided, xs.sparse_coo):  # elements outside the mask (a compressed x keeps c's counts)
        other[rng.random(other.shape) < 0.5] = 1 if c.dtype != "bool" else True
    x = to_layout(draw, xp, other, sig[0], dense_dim=c.dense_dim, blocksize=c.blocksize, index_dtype=c.index_dtype)
    zero = xp.asarray(np.zeros((), dtype=c.dtype))
    return Trial(lambda: xs.sparse_mask(x, mask), lambda: xp.where(pattern(xp, mask), dense(x), zero), layout=sig[1])


@case("spdiags")
def _spdiags(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    m, n = draw(st.integers(0, 5)), draw(st.integers(0, 5))
    offsets = sorted(draw(st.lists(st.integers(-4, 4), min_size=1, max_size=3, unique=True)))
    rng = _seed(draw)
    data = rng.integers(-3, 4, size=(len(offsets), n)).astype(np.float64)
    layout = draw(st.sampled_from([None, xs.sparse_coo, xs.sparse_csr, xs.sparse_csc]))
    expected = np.zeros((m, n))
    for k, off in enumerate(offsets):
        for j in range(n):
            if 0 <= j - off < m:
                expected[j - off, j] = data[k, j]
    return Trial(
        lambda: xs.spdiags(xp.asarray(data), xp.asarray(np.asarray(offsets)), (m, n), layout),
        lambda: xp.asarray(expected),
    )


@case("clone")
def _clone(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    if sig[0] is xs.sparse_semi_structured:
        host = _semi_host(_seed(draw), 32, 32)
        s = xs.to_sparse_semi_structured(ctx.xp.asarray(host))
        return Trial(lambda: xs.clone(s), lambda: ctx.xp.asarray(host), layout=sig[0])
    _, x = _shape_case(draw, ctx, sig)
    return Trial(lambda: xs.clone(x), lambda: dense(x))


@case("detach")
def _detach(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    host = _semi_host(_seed(draw), 32, 32)
    x = xs.to_sparse_semi_structured(ctx.xp.asarray(host))
    from xsparse._semi_structured import detach

    return Trial(lambda: detach(x), lambda: ctx.xp.asarray(host), layout=sig[0])


# -- linear algebra ----------------------------------------------------------------------------------


def _matrix(rng: np.random.Generator, rows: int, cols: int, dtype: str, density: float) -> np.ndarray:
    out = rng.integers(-4, 5, size=(rows, cols)).astype(dtype)
    out[rng.random((rows, cols)) >= density] = 0
    return out


def _product_skip(ctx: Context, sig: Signature) -> str | None:
    if xs.sparse_semi_structured in sig and not ctx.has("float32"):
        return "the backend has no float32, the dtype semi-structured operands are drawn with"
    return None


_REDUCE: dict[str, Callable[..., Any]] = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min}
_PRODUCT_OPS = ("matmul", "addmm", "smm", "hspmm", "sspaddmm", "sampled_addmm", "tensordot", "matmul_reduce")

# The operations whose signs of zeros are not compared (docs/decisions.md, "Signs of zeros that xsparse
# does not track"): reductions and sums of products follow their summation order (NumPy's sums start
# from the first element, torch's from +0), and a sparse sort puts a stored -0.0 after the unspecified
# +0.0 of its lane, where the dense sort keeps the zeros in index order (tests/test_sorting.py checks
# that order bit for bit).
SIGNS_NOT_TRACKED = frozenset({
    "sum", "prod", "max", "min", "mean", "var", "std", "cumulative_sum", "cumulative_prod", "softmax",
    "log_softmax", *_PRODUCT_OPS, "kron", "vecdot", "spsolve", "lobpcg", "svd_lowrank", "pca_lowrank", "vector_norm",
    "matrix_norm", "diagonal", "sort",
})  # fmt: skip
# (backend, operation) whose generic kernel calls a backend function that gets the sign of a zero wrong,
# and whose native kernel exists to get it right: there the signs are compared with the dense result
# only, which the native kernel computes
GENERIC_SIGNS_WRONG = {
    ("torch", "negative"): "torch's vectorised complex negation gives +0.0 for -(+0.0)",
    ("torch", "acos"): "torch's complex128 acos gives an imaginary part +0.0 on [-1, 1] of the real axis, where the standard's is -0.0 (acos(0j) is pi/2 - 0j)",
}


def _matmul_shapes(draw: Draw, sig: Signature, m: int, k: int, n: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The operand shapes of a matmul beyond two matrices (None: two matrices): batches of one size, a
    batch broadcast against a matrix or a batch of one, or a vector (a 1-D operand, strided or COO).

    The simplest example, which Hypothesis draws first, is a batch of none (of empty matrices)."""
    mode = draw(st.sampled_from(["batched", "matrix", "broadcast", "vector"]))
    nb = draw(st.integers(0, 3))
    if mode == "batched":
        return (nb, m, k), (nb, k, n)
    if mode == "broadcast":
        other = draw(st.sampled_from([(), (1,)]))
        return ((nb, m, k), (*other, k, n)) if draw(st.booleans()) else ((*other, m, k), (nb, k, n))
    if mode == "vector":
        vector_ok = [i for i, layout in enumerate(sig) if layout in (xs.strided, xs.sparse_coo)]
        if vector_ok:
            i = draw(st.sampled_from(vector_ok))
            return ((k,), (k, n)) if i == 0 else ((m, k), (k,))
    return None


def _batched_host(rng: np.random.Generator, shape: tuple[int, ...], density: float, dtype: str) -> np.ndarray:
    """A host array of ``shape`` whose every matrix has one pattern (so that every batch holds as many
    elements and blocks, as compressed batches must) and values of its own."""
    mask = rng.random(shape[-2:]) < density
    values = rng.integers(1, 5, size=shape) * rng.choice(np.asarray([-1, 1]), size=shape)
    return np.asarray(np.where(np.broadcast_to(mask, shape), values, 0)).astype(dtype)


@case(*_PRODUCT_OPS, skip=_product_skip)
def _product(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    rng = _seed(draw)
    semi = xs.sparse_semi_structured in sig
    dtype = "float32" if semi else draw(st.sampled_from(ctx.has(*FLOATS)))
    b = 2 if semi else draw(st.integers(1, 2))
    index_dtype = draw(S.index_dtypes())
    if semi:
        m = k = n = 32
    else:
        m, k, n = (b * draw(st.integers(0, 3)) for _ in range(3))
    density = draw(st.sampled_from([0.0, 0.3, 1.0]))
    if op == "matmul" and not semi:
        shapes = _matmul_shapes(draw, sig, m, k, n)
        if shapes is not None:
            ops = [
                to_layout(draw, xp, _batched_host(rng, shape, density, dtype), layout, blocksize=(b, b), index_dtype=index_dtype)
                for shape, layout in zip(shapes, sig)
            ]
            return Trial(lambda: xs.matmul(*ops), lambda: xp.matmul(*(dense(o) for o in ops)), **float_tolerance(dtype, loose=True))
    hosts = {"input": _matrix(rng, m, n, dtype, density), "a": _matrix(rng, m, k, dtype, density), "b": _matrix(rng, k, n, dtype, density)}
    roles = {"matmul": ("a", "b"), "smm": ("a", "b"), "hspmm": ("a", "b"), "tensordot": ("a", "b"), "matmul_reduce": ("a", "b"),
             "addmm": ("input", "a", "b"), "sspaddmm": ("input", "a", "b"), "sampled_addmm": ("input", "a", "b")}[op]  # fmt: skip
    operands: list[Any] = []
    for role, layout in zip(roles, sig):
        if layout is xs.sparse_semi_structured:
            hosts[role] = _semi_host(rng, *hosts[role].shape)
            operands.append(xs.to_sparse_semi_structured(xp.asarray(hosts[role])))
        else:
            operands.append(to_layout(draw, xp, hosts[role], layout, blocksize=(b, b), index_dtype=index_dtype))
    beta, alpha = draw(st.sampled_from([1, 0.5, 2])), draw(st.sampled_from([1, -1, 0.5]))
    tol = float_tolerance(dtype, loose=True)

    def ds() -> list[Any]:
        return [dense(o) for o in operands]

    if op == "matmul":
        return Trial(lambda: xs.matmul(*operands), lambda: xp.matmul(*ds()), **tol)
    if op == "smm":
        return Trial(lambda: xs.smm(*operands), lambda: xp.matmul(*ds()), **tol)
    if op == "hspmm":
        return Trial(lambda: xs.hspmm(*operands), lambda: xp.matmul(*ds()), **tol)
    if op == "tensordot":
        return Trial(lambda: xs.tensordot(*operands, axes=1), lambda: xp.tensordot(*ds(), axes=1), **tol)
    if op in ("addmm", "sspaddmm"):
        fn = getattr(xs, op)

        def affine() -> Any:
            i, a, bb = ds()
            return beta * i + alpha * xp.matmul(a, bb)

        return Trial(lambda: fn(*operands, beta=beta, alpha=alpha), affine, **tol)
    if op == "sampled_addmm":

        def sampled() -> Any:
            i, a, bb = ds()
            return xp.where(pattern(xp, operands[0]), beta * i + alpha * xp.matmul(a, bb), xp.zeros_like(i))

        return Trial(lambda: xs.sampled_addmm(*operands, beta=beta, alpha=alpha), sampled, layout=sig[0], **tol)
    reduce = draw(st.sampled_from(["sum", "mean", "amax", "amin"]))

    def reduced() -> Any:
        a = operands[0]
        host_a, mask, host_b = to_numpy(dense(a)), to_numpy(pattern(xp, a)), to_numpy(dense(operands[1]))
        out = np.zeros((host_a.shape[0], host_b.shape[1]), dtype=np.result_type(host_a, host_b))
        for i in range(host_a.shape[0]):
            cols = np.nonzero(mask[i])[0]
            if cols.size:
                products = host_a[i, cols][:, None] * host_b[cols, :]
                out[i] = _REDUCE[reduce](products, axis=0)
        return xp.asarray(out)

    return Trial(lambda: xs.mm(*operands, reduce=reduce), reduced, **tol)


def _dense_kron(xp: Any, x1: Any, x2: Any) -> Any:
    """NumPy's ``kron`` of two strided arrays with the namespace's functions (the standard has no kron): the
    broadcast product of the interleaved dimensions."""
    ndim = max(x1.ndim, x2.ndim)
    s1, s2 = (1,) * (ndim - x1.ndim) + tuple(x1.shape), (1,) * (ndim - x2.ndim) + tuple(x2.shape)
    wide1 = xp.reshape(x1, tuple(v for s in s1 for v in (s, 1)))
    wide2 = xp.reshape(x2, tuple(v for s in s2 for v in (1, s)))
    return xp.reshape(wide1 * wide2, tuple(a * b for a, b in zip(s1, s2)))


@case("kron", skip=_no_semi)
def _kron(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    rng = _seed(draw)
    dtype = draw(st.sampled_from(ctx.has("float64", "float32", "int64", "complex128")))
    index_dtype = draw(S.index_dtypes())
    b = draw(st.integers(1, 2))
    operands = []
    for layout in sig:
        if layout in (xs.strided, xs.sparse_coo) and draw(st.sampled_from(["matrix", "any"])) == "any":
            shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
        else:
            # a matrix, or a batch of them (one pattern: compressed batches hold one count); the compiled
            # kernels multiply matrices
            batch = draw(st.sampled_from([(), (2,)])) if layout is not xs.strided and layout is not xs.sparse_coo else ()
            shape = (*batch, b * draw(st.integers(0, 3)), b * draw(st.integers(0, 3)))
        host = _batched_host(rng, shape, draw(st.sampled_from([0.0, 0.3, 1.0])), dtype)
        operands.append(to_layout(draw, xp, host, layout, blocksize=(b, b), index_dtype=index_dtype))
    x1, x2 = operands
    return Trial(lambda: xs.kron(x1, x2), lambda: _dense_kron(xp, dense(x1), dense(x2)), **float_tolerance(dtype))


@case("vecdot", skip=_no_semi)
def _vecdot(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    dtype = draw(st.sampled_from(ctx.has(*FLOATS)))
    # vecdot is defined for sparse arrays without dense dimensions (a clear error otherwise)
    c = draw(S.dense_cases(xp, dtype=dtype, fill=False, max_batch_dims=1, max_dense_dims=0))
    # finite values: a contraction skips the unspecified elements of a sparse operand, so a NaN meeting
    # one is not propagated as the dense vecdot propagates it (docs/conformance.md, "What is not drawn")
    hosts = [np.where(np.isnan(c.host), 2.5, c.host), companion(_seed(draw), c, dtype, 0, specials=False)]
    x, y = (
        to_layout(draw, xp, h, layout, dense_dim=c.dense_dim, blocksize=c.blocksize, index_dtype=c.index_dtype)
        for h, layout in zip(hosts, sig)
    )
    return Trial(lambda: xs.vecdot(x, y), lambda: xp.vecdot(dense(x), dense(y)), **float_tolerance(dtype, loose=True))


@case("spsolve", skip=_no_semi)
def _spsolve(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    rng = _seed(draw)
    b = draw(st.integers(1, 2))
    n = b * draw(st.integers(1, 3))
    # strictly diagonally dominant (entries lie in [-4, 4]), so never singular
    host = _matrix(rng, n, n, "float64", draw(st.sampled_from([0.0, 0.3, 1.0]))) + np.diag(np.full(n, 4.0 * n + 1.0))
    a = to_layout(draw, xp, host, sig[0], blocksize=(b, b), index_dtype=draw(S.index_dtypes()))
    rhs = xp.asarray(rng.integers(-3, 4, size=(n, draw(st.integers(1, 2)))).astype(np.float64))
    return Trial(lambda: xs.spsolve(a, rhs), lambda: xp.asarray(np.linalg.solve(host, to_numpy(rhs))), rtol=1e-9, atol=1e-10)


def _first(x: Any) -> Any:
    return x[0] if isinstance(x, tuple) else x


def _compare_eigenvalues(actual: Any, expected: Any) -> None:
    np.testing.assert_allclose(to_numpy(_first(actual)), to_numpy(_first(expected)), rtol=1e-6, atol=1e-8)


@case("lobpcg", skip=_no_semi)
def _lobpcg(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    rng = _seed(draw)
    n = 12
    off = rng.integers(-2, 3, size=n - 1).astype(np.float64)
    host = np.diag(rng.integers(4, 12, size=n).astype(np.float64)) + np.diag(off, 1) + np.diag(off, -1)
    a = to_layout(draw, xp, host, sig[0], blocksize=(2, 2), duplicates=False)
    expected = np.linalg.eigvalsh(host)[::-1][:1].copy()
    return Trial(
        lambda: xs.lobpcg(a, k=1, niter=1000, tol=1e-12, seed=0),
        lambda: xp.asarray(expected),
        compare=_compare_eigenvalues,
    )


def _compare_low_rank(center: bool) -> Callable[[Any, Any], None]:
    def compare(actual: Any, expected: Any) -> None:
        u, s, v = (to_numpy(r) for r in actual)
        if isinstance(expected, tuple):  # the generic kernels' factors: the same singular values
            np.testing.assert_allclose(s, to_numpy(expected[1]), rtol=1e-8, atol=1e-10)
            return
        host = to_numpy(expected)
        if center:
            host = host - host.mean(axis=0, keepdims=True)
        np.testing.assert_allclose(s, np.linalg.svd(host, compute_uv=False)[: s.shape[0]], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(u @ np.diag(s) @ v.T, host, atol=1e-8)

    return compare


@case("svd_lowrank", "pca_lowrank", skip=_no_semi)
def _low_rank(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    rng = _seed(draw)
    q = 3
    left, _ = np.linalg.qr(rng.standard_normal((8, q)))
    right, _ = np.linalg.qr(rng.standard_normal((6, q)))
    host = left @ np.diag([6.0, 3.0, 1.0]) @ right.T
    a = to_layout(draw, xp, host, sig[0], blocksize=(2, 2), duplicates=False)
    fn = getattr(xs, op)
    return Trial(lambda: fn(a, q=q, seed=0), lambda: xp.asarray(host), compare=_compare_low_rank(op == "pca_lowrank"))


@case("repeat", "roll", "take_along_axis", skip=_no_semi)
def _along_axis(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    c, x = _shape_case(draw, ctx, sig)
    ndim = len(c.shape)
    assume(ndim > 0)
    axis = draw(st.integers(0, ndim - 1))
    if op == "repeat":
        # a blocked array repeats whole blocks only when the repeat count keeps them whole: repeat 1
        # along a sparse dimension of a blocked array, any count elsewhere
        blocked_sparse = sig[0] in (xs.sparse_bsr, xs.sparse_bsc) and 0 <= axis - c.batch_dim < 2
        repeats = 1 if blocked_sparse else draw(st.integers(0, 2))
        return Trial(lambda: xs.repeat(x, repeats, axis=axis), lambda: xp.repeat(dense(x), repeats, axis=axis))
    if op == "roll":
        shift = draw(st.integers(-3, 3))
        if sig[0] in (xs.sparse_bsr, xs.sparse_bsc) and 0 <= axis - c.batch_dim < 2:
            shift *= c.blocksize[axis - c.batch_dim]  # whole blocks
        return Trial(lambda: xs.roll(x, shift, axis=axis), lambda: xp.roll(dense(x), shift, axis=axis))
    size = c.shape[axis]
    rng = _seed(draw)
    shape = list(c.shape)
    shape[axis] = draw(st.integers(0, 3)) if size else 0
    idx = xp.asarray(rng.integers(0, max(size, 1), size=tuple(shape)).astype(np.int64))
    return Trial(lambda: xs.take_along_axis(x, idx, axis=axis), lambda: xp.take_along_axis(dense(x), idx, axis=axis))


# -- sorting, searching and set functions ------------------------------------------------------------

ORDERED = INTS + FLOATS  # the Array API sorts and searches real-valued arrays


def _semi(draw: Draw, xp: Any) -> tuple[np.ndarray, Any]:
    """A 32 x 32 float32 semi-structured operand and its host array."""
    host = _semi_host(_seed(draw), 32, 32)
    return host, xs.to_sparse_semi_structured(xp.asarray(host))


def _stored_size(x: Any) -> int:
    """The number of stored scalars of a sparse ``x`` once duplicates are summed."""
    vals = (xs.coalesce(x) if x.layout is xs.sparse_coo else x)._vals
    return math.prod(tuple(vals.shape))


def _fill_is_nan(x: Any) -> bool:
    return isinstance(x, xs.SparseArray) and _is_nan(x.fill_value)


@case("sort", "argsort")
def _sort(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    if sig[0] is xs.sparse_semi_structured:
        x = _semi(draw, xp)[1]
        ndim = 2
        hybrid_sparse_dims = 0
    else:
        c = draw(S.dense_cases(xp, dtype=draw(st.sampled_from(ctx.has(*ORDERED))), fill=None, max_batch_dims=1, max_dense_dims=1))
        x = from_case(draw, xp, c, sig[0])
        ndim = len(c.shape)
        hybrid_sparse_dims = c.batch_dim + 2 if c.dense_dim else 0
    axis = draw(st.integers(-ndim, ndim - 1))
    descending = draw(st.booleans())
    fn, ref = getattr(xs, op), getattr(xp, op)

    def call() -> Any:
        return fn(x, axis=axis, descending=descending)

    if op == "sort":
        # documented refusals: a NaN fill value has no agreed place in an order, and sorting along a
        # sparse dimension of a hybrid array would give every dense position its own pattern
        if _fill_is_nan(x):
            return Trial(call, lambda: None, raises=(xs.NoKernelError, r"^sort: the fill value is NaN"))
        if axis % ndim < hybrid_sparse_dims:
            return Trial(call, lambda: None, raises=(xs.NoKernelError, r"^sort: .*declined: sorting along sparse dimension"))

    def check(r: Any) -> None:
        if x.layout is xs.sparse_coo and r.nnz != xs.coalesce(x).nnz:
            raise AssertionError(f"sort changed the number of specified elements: {r.nnz} (x has {xs.coalesce(x).nnz})")

    return Trial(
        call, lambda: ref(dense(x), axis=axis, descending=descending),
        layout=sig[0] if op == "sort" else xs.strided, check=check if op == "sort" else None,
    )  # fmt: skip


def _sorted_vector(draw: Draw, xp: Any, dtype: str, layout: Hashable) -> Any:
    """A 1-D array in ascending order (ties included, no NaN) in ``layout``, whose fill value (0 or not)
    sits in its place in the order."""
    rng = _seed(draw)
    host = np.sort(rng.integers(-4, 5, size=draw(S.sizes(8))).astype(np.dtype(dtype)))
    fill = draw(st.sampled_from([0, 1, -2]))
    return to_layout(draw, xp, host, layout, fill=np.asarray(fill, dtype=np.dtype(dtype)).item(), index_dtype=draw(S.index_dtypes()))


def _without_nan(draw: Draw, ctx: Context, c: S.DenseCase, layout: Hashable) -> Any:
    """The example ``c`` in ``layout``, its NaNs (specified) replaced by 2.5 and its fill value no NaN."""
    assume(not _is_nan(c.fill_value))
    host = np.where(np.isnan(c.host), 2.5, c.host) if c.host.dtype.kind in "fc" else c.host
    return to_layout(draw, ctx.xp, host, layout, fill=c.fill_value, dense_dim=c.dense_dim, blocksize=c.blocksize, index_dtype=c.index_dtype)


@case("searchsorted")
def _searchsorted(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    semi = sig[1] is xs.sparse_semi_structured
    dtype = "float32" if semi else draw(st.sampled_from(ctx.has("int32", "int64", "float32", "float64")))
    x1 = _sorted_vector(draw, xp, dtype, sig[0])
    if semi:
        x2 = _semi(draw, xp)[1]
    else:
        # no NaN: the standard leaves where a NaN sorts to the implementation
        c = draw(S.dense_cases(xp, dtype=dtype, fill=None, max_batch_dims=1, max_dense_dims=1))
        x2 = _without_nan(draw, ctx, c, sig[1])
    side = draw(st.sampled_from(["left", "right"]))
    sorter: Any = None
    if sig[0] is xs.strided and draw(st.booleans()):
        # an unordered x1 put in order by sorter
        x1 = xp.asarray(to_numpy(x1)[::-1].copy())
        sorter = xp.argsort(x1, stable=True)
    # the standard's result dtype is the default index dtype (jax.numpy's searchsorted gives int32 even
    # where its default index dtype is int64; xsparse casts)
    index = xp.__array_namespace_info__().default_dtypes()["indexing"]
    return Trial(
        lambda: xs.searchsorted(x1, x2, side=side, sorter=sorter),
        lambda: xp.astype(xp.searchsorted(dense(x1), dense(x2), side=side, sorter=sorter), index),
        layout=sig[1],
    )


def _set_operand(draw: Draw, ctx: Context, dtype: str, layout: Hashable) -> Any:
    if layout is xs.sparse_semi_structured:
        return _semi(draw, ctx.xp)[1]
    c = draw(S.dense_cases(ctx.xp, dtype=dtype, fill=None, max_batch_dims=1, max_dense_dims=1))
    return from_case(draw, ctx.xp, c, layout)


def _isin_floats(ctx: Context) -> tuple[str, ...]:
    # the standard's isin takes integers (array-api-strict holds to it); NumPy and torch take floats too
    if not hasattr(ctx.xp, "isin"):
        return FLOATS
    return tuple(d for d in FLOATS if ctx.accepts("isin", (d, d)))


def _isin_skip(ctx: Context, sig: Signature) -> str | None:
    if xs.sparse_semi_structured in sig and "float32" not in _isin_floats(ctx):
        return "the namespace's isin takes integers (as the standard's does), and semi-structured operands are floating"
    return None


@case("isin", skip=_isin_skip)
def _isin(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    numeric = ("int8", "int32", "int64") + _isin_floats(ctx)
    dtype = "float32" if xs.sparse_semi_structured in sig else draw(st.sampled_from(ctx.has(*numeric)))
    x1, x2 = (_set_operand(draw, ctx, dtype, layout) for layout in sig)
    invert = draw(st.booleans())
    # x2 flattened for the reference: torch.isin cannot read a non-contiguous x2 (a BSR array's dense copy);
    # the negation taken here: array-api-strict's isin takes invert and ignores it
    def expected() -> Any:
        found = xp.isin(dense(x1), xp.reshape(dense(x2), (-1,)))
        return xp.logical_not(found) if invert else found

    return Trial(lambda: xs.isin(x1, x2, invert=invert), expected, layout=sig[0])


_UNIQUE = ("unique_all", "unique_counts", "unique_inverse", "unique_values")


def _nan_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a == b) | (np.isnan(a) & np.isnan(b)) if a.dtype.kind in "fc" else a == b)


@dataclass(frozen=True)
class _DenseUnique:
    """The dense reference of a ``unique_*`` trial, on the host: the dense operand and the backend's
    ``unique_counts`` of it (a type of its own, so that the comparison tells it from a result of
    xsparse's generic kernels, which the runner compares a native kernel's result with)."""

    host: np.ndarray
    values: np.ndarray
    counts: np.ndarray


def _bits(x: Any) -> tuple[str, tuple[int, ...], bytes]:
    h = np.ascontiguousarray(to_numpy(x))
    return str(h.dtype), h.shape, h.tobytes()


def _same_unique_field(name: str, actual: Any, expected: Any) -> None:
    """One output of two ``unique_*`` results, equal bit for bit: a strided array's dtype, shape and
    bytes (so a ``-0.0`` and each NaN's sign and payload), a sparse one's layout, shape, fill value and
    every component."""
    if isinstance(expected, xs.SparseArray):
        if not isinstance(actual, xs.SparseArray) or actual.layout is not expected.layout or actual.shape != expected.shape:
            raise AssertionError(f"{name}: {actual!r} is not of the layout and shape of {expected!r}")
        if _bits(np.asarray(actual.fill_value)) != _bits(np.asarray(expected.fill_value)):
            raise AssertionError(f"{name}: fill value {actual.fill_value!r} differs from {expected.fill_value!r}")
        pairs = [(f"{name}.{k}", actual._components()[k], v) for k, v in expected._components().items()]
    else:
        pairs = [(name, actual, expected)]
    for label, a, b in pairs:
        if _bits(a) != _bits(b):
            raise AssertionError(f"{label} differs bit for bit: {to_numpy(a)!r} against {to_numpy(b)!r}")


def _compare_unique(fn: str, xp: Any, layout: Hashable) -> Callable[[Any, Any], None]:
    """The comparison of a ``unique_*`` result with the backend's ``unique_counts`` of the dense operand,
    or, for a native kernel's result, with the generic kernels' result.

    The standard leaves the order of the unique values to the implementation; xsparse gives them in
    ascending order (NaNs last, each distinct), which the reference's values are sorted into. The
    inverse indices must rebuild ``x`` (and keep its layout); the first indices must point at the first
    occurrence of each value in row-major order (at one NaN each, for the NaNs). A native kernel's
    result must be the generic kernels' output by output, bit for bit: the zero that stands for the
    zeros and the NaNs in their order (docs/decisions.md, "Sorting without stability").
    """
    from xsparse.testing import assert_sparse_equal

    def compare(actual: Any, expected: Any) -> None:
        if not isinstance(expected, _DenseUnique):  # the generic kernels' result
            if fn == "unique_values":
                _same_unique_field("values", actual, expected)
                return
            if type(actual) is not type(expected):
                raise AssertionError(f"{fn}: a {type(actual).__name__} against a {type(expected).__name__}")
            for name in expected._fields:
                _same_unique_field(name, getattr(actual, name), getattr(expected, name))
            return
        host, ref_values, ref_counts = expected.host, expected.values, expected.counts
        flat = host.reshape(-1)
        order = np.argsort(ref_values, kind="stable")
        ref_values, ref_counts = ref_values[order], ref_counts[order]
        values = to_numpy(actual if fn == "unique_values" else actual.values)
        np.testing.assert_array_equal(values, ref_values)
        if fn in ("unique_all", "unique_counts"):
            np.testing.assert_array_equal(to_numpy(actual.counts), ref_counts)
        if fn in ("unique_all", "unique_inverse"):
            inv = actual.inverse_indices
            got = to_numpy(xs.to_dense(inv)) if isinstance(inv, xs.SparseArray) else to_numpy(inv)
            if got.shape != host.shape or (got.size and not _nan_equal(values[got.reshape(-1)], flat).all()):
                raise AssertionError(f"the inverse indices do not rebuild x: {got.tolist()} with values {values.tolist()}")
            nan = np.isnan(flat) if flat.dtype.kind in "fc" else np.zeros(flat.shape, dtype=bool)
            want = np.where(nan, got.reshape(-1), np.searchsorted(values, flat)).reshape(host.shape)
            assert_sparse_equal(inv, xp.asarray(want), check_layout=layout, check_dtype=False)
        if fn == "unique_all":
            idx = to_numpy(actual.indices)
            nan = np.isnan(values) if values.dtype.kind in "fc" else np.zeros(values.shape, dtype=bool)
            first = np.asarray([int(np.argmax(flat == v)) for v in values[~nan]], dtype=np.int64)
            np.testing.assert_array_equal(idx[~nan], first)
            if nan.any() and sorted(idx[nan].tolist()) != np.nonzero(np.isnan(flat))[0].tolist():
                raise AssertionError(f"the first indices of the NaNs are not the NaNs' positions: {idx[nan].tolist()}")

    return compare


@case("unique")
def _unique(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    dtype = draw(st.sampled_from(ctx.has(*ORDERED)))
    c = draw(S.dense_cases(xp, dtype=dtype, fill=None, max_batch_dims=1, max_dense_dims=1))
    x = from_case(draw, xp, c, sig[0])
    # a strided operand reaches the dispatcher through unique_all only (the others are the backend's)
    fn = draw(st.sampled_from(_UNIQUE)) if sig[0] is not xs.strided else "unique_all"
    call = (lambda: getattr(xs, fn)(x))
    if _fill_is_nan(x) and _stored_size(x) < math.prod(c.shape):
        # documented refusal: each unspecified element would be a distinct NaN
        return Trial(call, lambda: None, raises=(xs.NoKernelError, rf"^{fn}: the fill value is NaN"))

    def expected() -> _DenseUnique:
        d = dense(x)
        r = xp.unique_counts(d)
        return _DenseUnique(to_numpy(d), to_numpy(r.values), to_numpy(r.counts))

    return Trial(call, expected, compare=_compare_unique(fn, xp, sig[0]))


# -- creation functions that take an array, tile -------------------------------------------------------


@case("tril", "triu")
def _triangle(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    # a non-zero fill value is refused: draw it once in three examples
    c, x = _shape_case(draw, ctx, sig, fill=draw(st.sampled_from([False, False, True])))
    k = draw(st.integers(-3, 3))
    fn, ref = getattr(xs, op), getattr(xp, op)
    if c.has_fill:
        # documented refusal: the zeros written and the unspecified elements left would differ
        return Trial(lambda: fn(x, k=k), lambda: None, raises=(xs.NoKernelError, rf"^{op}: .*declined: fill value .* is not 0"))
    return Trial(lambda: fn(x, k=k), lambda: ref(dense(x), k=k), layout=sig[0])


@case("tile")
def _tile(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    c, x = _shape_case(draw, ctx, sig)
    ndim = len(c.shape)
    reps = tuple(draw(st.lists(st.sampled_from([1, 1, 2, 0]), min_size=1, max_size=ndim + 1)))
    full = (1,) * (len(reps) - ndim) + tuple(c.shape)
    assume(math.prod(s * r for s, r in zip(full, (1,) * (ndim - len(reps)) + reps)) <= 2400)
    return Trial(lambda: xs.tile(x, reps), lambda: xp.tile(dense(x), reps), layout=sig[0])


# -- linear-algebra extension ------------------------------------------------------------------------


@case("diagonal", skip=_no_semi)
def _diagonal(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    c, x = _shape_case(draw, ctx, sig)
    offset = draw(st.integers(-3, 3))
    return Trial(
        lambda: xs.linalg.diagonal(x, offset=offset),
        lambda: xp.linalg.diagonal(dense(x), offset=offset),
        layout=xs.sparse_coo,
    )


_INF = math.inf


def _norm_operand(
    draw: Draw, ctx: Context, sig: Signature, finite: bool = False, dtypes: Sequence[str] = FLOATS + COMPLEX
) -> tuple[tuple[int, ...], str, Any]:
    """``(shape, dtype, x)``; ``finite``: no NaN (a singular value decomposition of NaN fails)."""
    if sig[0] is xs.sparse_semi_structured:
        return (32, 32), "float32", _semi(draw, ctx.xp)[1]
    dtype = draw(st.sampled_from(ctx.has(*dtypes) or ctx.has(*FLOATS, *COMPLEX)))
    c = draw(S.dense_cases(ctx.xp, dtype=dtype, fill=None, max_batch_dims=1, max_dense_dims=1))
    if not finite:
        return c.shape, dtype, from_case(draw, ctx.xp, c, sig[0])
    return c.shape, dtype, _without_nan(draw, ctx, c, sig[0])


@case("vector_norm")
def _vector_norm(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    # half the examples are the commonest norm, the double-precision 2-norm of the whole array (the
    # native kernels' one)
    whole = draw(st.booleans())
    shape, dtype, x = _norm_operand(draw, ctx, sig, dtypes=("float64", "complex128") if whole else FLOATS + COMPLEX)
    ndim = len(shape)
    axis: Any = None if whole else draw(st.sampled_from([None, "int", "tuple"]))
    if axis == "int":
        axis = draw(st.integers(-ndim, ndim - 1))
    elif axis == "tuple":
        axis = tuple(draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True)))
    axes = range(ndim) if axis is None else (axis,) if isinstance(axis, int) else axis
    keepdims = draw(st.booleans())
    order = 2 if whole else draw(st.sampled_from([2, 1, _INF, -_INF, 0, 3, -1, 0.5]))
    if order in (_INF, -_INF) or order < 0:
        # the largest or smallest of no element, and a negative power sum of none, are undefined
        assume(all(shape[a] for a in axes))
    return Trial(
        lambda: xs.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=order),
        lambda: xp.linalg.vector_norm(dense(x), axis=axis, keepdims=keepdims, ord=order),
        **float_tolerance(dtype, loose=True),
    )  # fmt: skip


@case("matrix_norm")
def _matrix_norm(op: str, draw: Draw, ctx: Context, sig: Signature) -> Trial:
    xp = ctx.xp
    order = draw(st.sampled_from(["fro", 1, -1, _INF, -_INF, "nuc", 2, -2]))
    shape, dtype, x = _norm_operand(draw, ctx, sig, finite=order in ("nuc", 2, -2))
    keepdims = draw(st.booleans())

    if order not in ("fro", "nuc"):
        # the largest or smallest sum (or singular value) of no row or column is undefined
        assume(shape[-2] and shape[-1])
    # 'nuc', 2 and -2 need singular values: xsparse computes them on the dense matrices (a strided
    # result by definition, xsparse/linalg.py)
    return Trial(
        lambda: xs.linalg.matrix_norm(x, keepdims=keepdims, ord=order),
        lambda: xp.linalg.matrix_norm(dense(x), keepdims=keepdims, ord=order),
        **float_tolerance(dtype, loose=True),
    )  # fmt: skip
