"""Test helpers: the one oracle, :func:`assert_sparse_equal`, for xsparse's tests and the conformance suite."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._common import dtype_name, is_strided
from .backends.array_api import conversion as generic
from .formats import COOArray, CompressedArray, SparseArray
from .formats._invariants import check_compressed, check_coo
from .formats._semi_structured import SemiStructuredArray, check_semi_structured

__all__ = ["assert_sparse_equal", "to_numpy", "generic_to_dense", "check_invariants", "apply_products_rule", "apply_zero_ties_rule", "maps_duplicates"]


def to_numpy(x: Any) -> np.ndarray:
    """A NumPy copy of a strided array of any backend (for comparison only)."""
    return np.array(generic.to_host(x))


def check_invariants(a: SparseArray) -> None:
    """Run every invariant check of ``a``'s format, the index-reading ones included."""
    if isinstance(a, COOArray):
        check_coo(a, True)
    elif isinstance(a, CompressedArray):
        check_compressed(a, True)
    elif isinstance(a, SemiStructuredArray):
        check_semi_structured(a, True)
    else:
        raise TypeError(f"check_invariants: no validator for {type(a).__name__}.")
    # docs/decisions.md, "The fill value takes the array's kind"
    xp, fill = a._xp, a.fill_value
    kind = next(t for k, t in (("bool", bool), ("integral", int), ("real floating", float), ("complex floating", complex)) if xp.isdtype(a.dtype, k))
    if type(fill) is not kind:
        raise AssertionError(f"fill value {fill!r} is a {type(fill).__name__}, where a {dtype_name(a.dtype)} array's is a {kind.__name__}")


def generic_to_dense(a: Any) -> Any:
    """The dense array of ``a`` computed by the generic Array API kernels alone (no native kernel).

    Nothing on the way goes through the dispatcher, which would pick the backend's native kernels: an
    uncoalesced COO array (and the block COO of a compressed one) is coalesced by the generic kernel
    itself, so that the oracle never shares a native kernel's mistake with the result it checks.
    """
    if not isinstance(a, SparseArray):
        return a
    xp = a._xp
    if isinstance(a, COOArray):
        return generic.coo_to_dense(xp, generic._coalesce_coo(xp, a))
    if isinstance(a, SemiStructuredArray):
        from .backends.array_api.semi_structured import semi_structured_to_dense

        return semi_structured_to_dense(xp, a)
    assert isinstance(a, CompressedArray)
    return generic.block_coo_to_strided(xp, a, generic._coalesce_coo(xp, generic.compressed_to_block_coo(xp, a)))


def assert_sparse_equal(
    actual: Any,
    expected: Any,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    check_layout: Any = None,
    check_dtype: bool = True,
    check_signed_zeros: bool = True,
) -> None:
    """Assert that ``actual`` holds the same elements as ``expected``, and that it is a valid array.

    ``actual`` (sparse or strided) has every invariant of its format checked, including those that read
    index data; both sides are densified with the generic kernels and compared elementwise (NaNs equal),
    exactly unless ``rtol``/``atol`` are given. ``check_layout`` may name the layout ``actual`` must have.
    The zeros of floating and complex results must also have the same sign bits (per component), unless
    ``check_signed_zeros=False``: for the results whose signs of zeros docs/decisions.md leaves untracked
    ("Signs of zeros that xsparse does not track": reductions, sums of products, and the rest listed there).
    """
    if isinstance(actual, SparseArray):
        check_invariants(actual)
    elif not is_strided(actual):
        raise AssertionError(f"actual is neither an xsparse array nor a backend array: {type(actual).__name__}")
    if check_layout is not None:
        got = actual.layout if isinstance(actual, SparseArray) else "strided"
        if str(got) != str(check_layout):
            raise AssertionError(f"layout: expected {check_layout}, got {got}")
    if tuple(actual.shape) != tuple(expected.shape):
        raise AssertionError(f"shape: expected {tuple(expected.shape)}, got {tuple(actual.shape)}")
    if check_dtype and dtype_name(actual.dtype) != dtype_name(expected.dtype):
        raise AssertionError(f"dtype: expected {dtype_name(expected.dtype)}, got {dtype_name(actual.dtype)}")
    a = to_numpy(generic_to_dense(actual))
    e = to_numpy(generic_to_dense(expected))
    if rtol == 0 and atol == 0:
        np.testing.assert_array_equal(a, e)
    else:
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if check_signed_zeros and np.issubdtype(a.dtype, np.inexact) and np.issubdtype(e.dtype, np.inexact):
        for pa, pe in ((a.real, e.real), (a.imag, e.imag)) if np.iscomplexobj(a) or np.iscomplexobj(e) else ((a, e),):
            both_zero = (pa == 0) & (pe == 0)
            differ = both_zero & (np.signbit(pa) != np.signbit(pe))
            if differ.any():
                where = [tuple(int(i) for i in w) for w in np.argwhere(differ)[:5]]
                raise AssertionError(f"signs of zeros differ at {where} (actual {pa[differ][:5]}, expected {pe[differ][:5]})")


def _specified_elements(a: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Where ``a`` (broadcast to ``shape``) specifies an element: everywhere for a strided array."""
    if not isinstance(a, SparseArray):
        return np.ones(shape, dtype=bool)
    xp = a._xp
    ones = a._with_values(xp.ones(a._vals.shape, dtype=xp.int64, device=a.device), 0)
    return np.broadcast_to(to_numpy(generic_to_dense(ones)) != 0, shape)


def apply_products_rule(op: str, x: Any, y: Any, result: Any, expected: Any) -> Any:
    """``expected``, the dense result of ``op(x, y)`` as IEEE 754 gives it, with the documented rule for
    the signs of zeros of sparse products applied (docs/decisions.md, "Signs of zeros that xsparse does
    not track"): an entry of a sparse product (``multiply``, ``logical_and``, ``bitwise_and``) that not
    both operands specify, and whose elements all equal the result's fill value by value, reads the fill
    value, ``op`` of the two fill values (a strided operand's being +0). Anything else is returned as it is.
    """
    from .backends.array_api.elementwise import ANNIHILATING

    if op not in ANNIHILATING or not isinstance(result, SparseArray) or isinstance(expected, SparseArray):
        return expected
    if any(not isinstance(v, SparseArray) and getattr(v, "ndim", 0) == 0 for v in (x, y)):
        return expected  # with a scalar both sides are specified everywhere
    e = to_numpy(expected)
    if e.dtype.kind not in "fc":
        return expected
    fills = [np.asarray(v.fill_value if isinstance(v, SparseArray) else 0, dtype=e.dtype) for v in (x, y)]
    fill = getattr(np, op)(*fills)
    both = _specified_elements(x, e.shape) & _specified_elements(y, e.shape)
    dense_axes = tuple(range(e.ndim - result.dense_dim(), e.ndim))
    equal = _equal_by_value(e, fill)
    drop = ~np.any(both, axis=dense_axes, keepdims=True) & np.all(equal, axis=dense_axes, keepdims=True)
    return generic.from_host(result._xp, np.where(drop, fill, e), expected.dtype, result.device)


def _equal_by_value(e: np.ndarray, fill: np.ndarray) -> np.ndarray:
    """Where ``e`` equals ``fill`` by value, NaN equal to NaN; complex values part by part (``inf + nanj`` is
    not ``nan + nanj``)."""
    if e.dtype.kind == "c":
        return np.asarray(_equal_by_value(e.real, fill.real) & _equal_by_value(e.imag, fill.imag))
    return np.asarray((e == fill) | (np.isnan(e) & np.isnan(fill)))


def apply_zero_ties_rule(op: str, x: Any, y: Any, result: Any, expected: Any) -> Any:
    """``expected``, the dense result of ``maximum(x, y)`` or ``minimum(x, y)``, with the sign of each
    zero whose operands are both zeros taken from ``result``: the standard leaves the order of ``+0.0``
    and ``-0.0`` unspecified, and NumPy and torch return either one (docs/decisions.md, "Signs of zeros
    that xsparse does not track"). Every other element, and anything else, is returned as it is.
    """
    if op not in ("maximum", "minimum"):
        return expected
    if isinstance(expected, SparseArray):  # another kernel's result
        expected = generic_to_dense(expected)
    e = to_numpy(expected)
    if e.dtype.kind != "f":
        return expected
    dx, dy = (to_numpy(generic_to_dense(v)) if hasattr(v, "shape") else np.asarray(v) for v in (x, y))
    r = to_numpy(generic_to_dense(result)) if isinstance(result, SparseArray) else to_numpy(result)
    ties = (dx == 0) & (dy == 0) & (r == 0)
    if not ties.any():
        return expected
    import array_api_compat

    xp = array_api_compat.array_namespace(expected)
    return generic.from_host(xp, np.where(ties, r, e), expected.dtype, array_api_compat.device(expected))


def _has_duplicates(a: Any) -> bool:
    if not isinstance(a, COOArray) or a.is_coalesced():
        return False
    return bool(a.nnz != generic._coalesce_coo(a._xp, a).nnz)


def maps_duplicates(op: str, x: Any, y: Any = None) -> bool:
    """Whether ``op`` may map the duplicates of an uncoalesced COO operand as they are (a linear
    function, or a product or quotient with a scalar, as torch does), so that the signs of the result's
    zeros need not be IEEE 754's of the summed duplicates (docs/decisions.md, "Signs of zeros that
    xsparse does not track")."""
    from .backends.array_api.elementwise import LINEAR_UNARY

    scalar = [v is not None and (not hasattr(v, "ndim") or v.ndim == 0) for v in (x, y)]
    linear = op in LINEAR_UNARY or (op in ("multiply", "divide") and any(scalar))
    return linear and (_has_duplicates(x) or _has_duplicates(y))
