"""Generic elementwise kernels (Array API only): unary functions on strided and sparse arrays.

A unary function ``f`` is registered twice: for ``strided`` (the backend's own function, or an Array
API expression for torch's extra names such as ``deg2rad``), and for the indexed sparse layouts, where
the kernel maps the stored values *through the strided kernel of the same operation* and maps the
fill value too. So ``cos`` of a sparse array stays sparse, with fill value ``cos(0) = 1``: nothing is
densified, and the unspecified elements still mean what they meant. Uncoalesced COO is coalesced first
unless ``f`` is linear (``sqrt(a + b) != sqrt(a) + sqrt(b)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

from ... import dispatch
from ...dispatch import register
from ...formats import INDEXED, COOArray, CompressedArray, SparseArray, strided
from .conversion import coalesce_coo

__all__ = ["UNARY", "LINEAR_UNARY", "python_scalar"]


def _angle(xp: Any, x: Any) -> Any:
    if xp.isdtype(x.dtype, "complex floating"):
        return xp.atan2(xp.imag(x), xp.real(x))
    x = _as_float(xp, x)
    return xp.where(xp.isnan(x), x, xp.where(x < 0, xp.asarray(math.pi, dtype=x.dtype), xp.zeros_like(x)))


def _as_float(xp: Any, x: Any) -> Any:
    if xp.isdtype(x.dtype, ("real floating", "complex floating")):
        return x
    return xp.astype(x, xp.__array_namespace_info__().default_dtypes()["real floating"])


def _isposinf(xp: Any, x: Any) -> Any:
    if not xp.isdtype(x.dtype, "real floating"):
        return xp.zeros(x.shape, dtype=xp.bool)
    return xp.isinf(x) & (x > 0)


def _isneginf(xp: Any, x: Any) -> Any:
    if not xp.isdtype(x.dtype, "real floating"):
        return xp.zeros(x.shape, dtype=xp.bool)
    return xp.isinf(x) & (x < 0)


def _deg2rad(xp: Any, x: Any) -> Any:
    return _as_float(xp, x) * (math.pi / 180.0)


def _rad2deg(xp: Any, x: Any) -> Any:
    return _as_float(xp, x) * (180.0 / math.pi)


def _sign(xp: Any, x: Any) -> Any:
    if not xp.isdtype(x.dtype, "complex floating"):
        return xp.sign(x)
    # x / |x|, and 0 at 0 (dividing there would warn and give NaN)
    magnitude = xp.abs(x)
    zero = magnitude == 0
    return xp.where(zero, xp.zeros_like(x), x / xp.astype(xp.where(zero, xp.ones_like(magnitude), magnitude), x.dtype))


def _standard(name: str) -> Callable[[Any, Any], Any]:
    def apply(xp: Any, x: Any) -> Any:
        return getattr(xp, name)(x)

    return apply


# name -> how the strided kernel computes it from ``xp``; the Array API standard's unary functions
# and torch's zero-preserving extras (erf and erfinv have no Array API expression: native kernels only).
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
# f(a + b) == f(a) + f(b): safe on uncoalesced data
LINEAR_UNARY = frozenset({"negative", "positive", "conj", "conj_physical", "real", "imag", "deg2rad", "rad2deg"})
NATIVE_ONLY_UNARY = ("erf", "erfinv")


def python_scalar(xp: Any, x: Any) -> Any:
    """The Python scalar of a 0-d array, of the kind its dtype mixes with."""
    if xp.isdtype(x.dtype, "bool"):
        return bool(x)
    if xp.isdtype(x.dtype, "integral"):
        return int(x)
    if xp.isdtype(x.dtype, "real floating"):
        return float(x)
    return complex(x)


def _strided_kernel(name: str, compute: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def kernel(xp: Any, x: Any) -> Any:
        return compute(xp, x)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_strided"
    kernel.__doc__ = f"{name}(strided) -> strided: the backend's elementwise function; O(numel)."
    return kernel


def _sparse_kernel(name: str) -> Callable[..., Any]:
    linear = name in LINEAR_UNARY

    def kernel(xp: Any, a: SparseArray) -> SparseArray:
        if not linear and isinstance(a, COOArray):
            a = coalesce_coo(xp, a)
        backend = a._backend.name
        values = dispatch.call(name, (strided,), backend, xp, a._vals)
        fill = dispatch.call(name, (strided,), backend, xp, xp.asarray(a.fill_value, dtype=a.dtype, device=a.device))
        return a._with_values(values, python_scalar(xp, fill))

    kernel.__name__ = kernel.__qualname__ = f"_{name}_indexed"
    kernel.__doc__ = f"{name}(sparse) -> sparse: maps the stored values and the fill value; O(nnz)."
    return kernel


for _name, _compute in UNARY.items():
    register(_name, (strided,))(_strided_kernel(_name, _compute))
for _name in (*UNARY, *NATIVE_ONLY_UNARY):
    register(_name, (INDEXED,))(_sparse_kernel(_name))


# -- binary functions ------------------------------------------------------------------------------

BINARY = (
    "add", "atan2", "bitwise_and", "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor",
    "copysign", "divide", "equal", "floor_divide", "greater", "greater_equal", "hypot", "less", "less_equal",
    "logaddexp", "logical_and", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "nextafter",
    "not_equal", "pow", "remainder", "subtract",
)  # fmt: skip
# f(x, 0) == 0 == f(0, y): where either operand is an unspecified 0 the result is 0 (as in torch and SciPy,
# 0 * inf and 0 * nan count as 0 there), so a product keeps the sparsity of either operand.
ANNIHILATING = frozenset({"multiply", "logical_and", "bitwise_and"})
# f(sum of duplicates, s) == sum of f(duplicate, s): safe on uncoalesced data with a scalar second operand
LINEAR_IN_FIRST = frozenset({"multiply", "divide"})


def broadcast_coo(xp: Any, a: COOArray, shape: tuple[int, ...]) -> COOArray:
    """``a`` broadcast to ``shape`` (Array API rules): new leading and size-1 sparse dimensions repeat the
    entries, size-1 dense dimensions broadcast the values. O(nnz * repetition)."""
    if tuple(a.shape) == tuple(shape):
        return a
    extra = len(shape) - a.ndim
    sd = a.sparse_dim()
    idx, vals = a._idx, a._vals
    dev = a.device
    # new leading dimensions are sparse, at index 0 for now
    if extra:
        idx = xp.concat([xp.zeros((extra, idx.shape[1]), dtype=idx.dtype, device=dev), idx], axis=0)
        sd += extra
    old = (1,) * extra + tuple(a.shape)
    coalesced = a.is_coalesced()
    for d in range(sd):
        if old[d] == shape[d]:
            continue
        n, nnz = shape[d], idx.shape[1]
        # every entry once per index along d: entry-major order keeps a coalesced array sorted only
        # when d is the last sparse dimension, so the result is marked uncoalesced otherwise
        rep = xp.reshape(xp.broadcast_to(idx[:, :, None], (sd, nnz, n)), (sd, nnz * n))
        along = xp.reshape(xp.broadcast_to(xp.arange(n, dtype=idx.dtype, device=dev)[None, :], (nnz, n)), (-1,))
        idx = xp.concat([rep[:d, :], along[None, :], rep[d + 1 :, :]], axis=0)
        vals = xp.reshape(xp.broadcast_to(vals[:, None, ...], (nnz, n, *vals.shape[1:])), (nnz * n, *vals.shape[1:]))
        coalesced = coalesced and all(old[k] == shape[k] for k in range(d + 1, sd))
    vals = xp.broadcast_to(vals, (vals.shape[0], *shape[sd:]))
    return COOArray(idx, vals, tuple(shape), backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


def _binary_func(name: str) -> Callable[[Any, Any, Any], Any]:
    def apply(xp: Any, x: Any, y: Any) -> Any:
        return getattr(xp, name)(x, y)

    return apply


def union_coo(xp: Any, name: str, a: COOArray, b: COOArray, *, intersect: bool = False) -> COOArray:
    """``name(a, b)`` for coalesced COO arrays of one shape and sparse_dim: the union of their entries,
    an absent side taking its fill value (with ``intersect``, only the entries both sides specify).
    O((nnz_a + nnz_b) log(nnz_a + nnz_b))."""
    dtype = xp.result_type(a.dtype, b.dtype)
    fa = xp.asarray(a.fill_value, dtype=dtype, device=a.device)
    fb = xp.asarray(b.fill_value, dtype=dtype, device=a.device)
    f = _binary_func(name)
    fill = python_scalar(xp, f(xp, fa, fb))
    na, nb = a.nnz, b.nnz
    idx = xp.concat([xp.astype(a._idx, xp.int64), xp.astype(b._idx, xp.int64)], axis=1)
    tag = xp.concat([xp.zeros((na,), dtype=xp.int64, device=a.device), xp.ones((nb,), dtype=xp.int64, device=a.device)])
    vals = xp.concat([xp.astype(a._vals, dtype), xp.astype(b._vals, dtype)], axis=0)
    n = na + nb
    index_dtype = a._idx.dtype
    if n == 0:
        values = f(xp, vals, vals)
        return COOArray(xp.astype(idx, index_dtype), values, a.shape, backend=a._backend, xp=xp, coalesced=True, fill_value=fill)
    from ...formats._ops import lexsort_indices

    perm = lexsort_indices(xp, xp.concat([idx, tag[None, :]], axis=0))
    idx, tag, vals = xp.take(idx, perm, axis=1), xp.take(tag, perm), xp.take(vals, perm, axis=0)
    first_flag = xp.ones((1,), dtype=xp.bool, device=a.device)
    differs = xp.any(idx[:, 1:] != idx[:, :-1], axis=0) if idx.shape[0] else xp.zeros((n - 1,), dtype=xp.bool, device=a.device)
    starts = xp.nonzero(xp.concat([first_flag, differs]))[0]
    nxt = xp.clip(starts + 1, 0, n - 1)
    pair = (nxt != starts) & ~xp.concat([differs, first_flag])[starts]
    # within a group a's entry (tag 0) sorts before b's (tag 1)
    has_a = xp.take(tag, starts) == 0
    has_b = (xp.take(tag, starts) == 1) | pair
    b_pos = xp.where(pair, nxt, starts)
    tail = (1,) * (vals.ndim - 1)
    va = xp.where(xp.reshape(has_a, (-1, *tail)), xp.take(vals, starts, axis=0), fa)
    vb = xp.where(xp.reshape(has_b, (-1, *tail)), xp.take(vals, b_pos, axis=0), fb)
    out_idx = xp.astype(xp.take(idx, starts, axis=1), index_dtype)
    values = f(xp, va, vb)
    if intersect:
        both = xp.nonzero(has_a & has_b)[0]
        out_idx, values = xp.take(out_idx, both, axis=1), xp.take(values, both, axis=0)
    return COOArray(out_idx, values, a.shape, backend=a._backend, xp=xp, coalesced=True, fill_value=fill)


def _as_coo(xp: Any, a: SparseArray) -> COOArray:
    from .conversion import compressed_to_coo

    return coalesce_coo(xp, a) if isinstance(a, COOArray) else compressed_to_coo(xp, cast(CompressedArray, a))


def _back_to(a: SparseArray, c: COOArray) -> SparseArray:
    """``c`` in the layout (and blocksize / dense_dim) of ``a``."""
    from ..._conversion import to_sparse

    if a.layout is c.layout:
        return c
    blocksize = getattr(a, "blocksize", None) if a.layout.is_blocked else None
    return to_sparse(c, layout=a.layout, blocksize=blocksize)


def _dense_result_shape(xp: Any, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(xp.broadcast_shapes(*shapes)) if hasattr(xp, "broadcast_shapes") else _broadcast_shapes(*shapes)


def _broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    ndim = max(len(s) for s in shapes)
    out = []
    for dims in zip(*((1,) * (ndim - len(s)) + tuple(s) for s in shapes)):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            raise ValueError(f"broadcast: shapes {shapes} are not broadcast-compatible (sizes {sorted(sizes)} in one dimension). Make the sizes equal or 1.")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _binary_strided_kernel(name: str, order: str = "strided_strided") -> Callable[..., Any]:
    f = _binary_func(name)

    def kernel(xp: Any, x: Any, y: Any) -> Any:
        return f(xp, x, y)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_{order}"
    kernel.__doc__ = f"{name}({order.replace('_', ', ')}) -> strided: the backend's function; O(numel)."
    return kernel


def _binary_scalar_kernel(name: str, sparse_first: bool) -> Callable[..., Any]:
    f = _binary_func(name)
    linear = sparse_first and name in LINEAR_IN_FIRST

    def kernel(xp: Any, x: Any, y: Any) -> Any:
        a, s = (x, y) if sparse_first else (y, x)
        if not linear and isinstance(a, COOArray):
            a = coalesce_coo(xp, a)
        fill = xp.asarray(a.fill_value, dtype=a.dtype, device=a.device)
        values = f(xp, a._vals, s) if sparse_first else f(xp, s, a._vals)
        new_fill = f(xp, fill, s) if sparse_first else f(xp, s, fill)
        return a._with_values(values, python_scalar(xp, new_fill))

    order = "indexed_scalar" if sparse_first else "scalar_indexed"
    kernel.__name__ = kernel.__qualname__ = f"_{name}_{order}"
    kernel.__doc__ = f"{name}({order.replace('_', ', ')}) -> sparse: maps the stored values and the fill value; O(nnz)."
    return kernel


def _gather_at(xp: Any, a: COOArray, y: Any) -> Any:
    """The elements of strided ``y`` (of ``a``'s shape) at ``a``'s specified positions: (nnz, *dense)."""
    sd = a.sparse_dim()
    flat = xp.reshape(y, (-1, *y.shape[sd:])) if sd else xp.reshape(y, (1, *y.shape))
    from .conversion import _linearize

    key = _linearize(xp, a._idx, tuple(a.shape[:sd])) if sd else xp.zeros((a.nnz,), dtype=xp.int64, device=a.device)
    return xp.take(flat, key, axis=0)


def _binary_mixed_kernel(name: str, sparse_first: bool) -> Callable[..., Any]:
    f = _binary_func(name)

    def kernel(xp: Any, x: Any, y: Any) -> Any:
        a, d = (x, y) if sparse_first else (y, x)
        shape = _dense_result_shape(xp, tuple(a.shape), tuple(d.shape))
        if name in ANNIHILATING and a.fill_value == 0:
            # the result is zero wherever a is: keep a's structure, broadcast to the result shape
            c = broadcast_coo(xp, _as_coo(xp, a), shape)
            dd = xp.broadcast_to(d, shape)
            dtype = xp.result_type(a.dtype, d.dtype)
            other = _gather_at(xp, c, dd)
            vals = xp.astype(c._vals, dtype)
            values = f(xp, vals, other) if sparse_first else f(xp, other, vals)
            out = COOArray(c._idx, values, shape, backend=a._backend, xp=xp, coalesced=c.is_coalesced(), fill_value=python_scalar(xp, f(xp, xp.asarray(0, dtype=dtype), xp.asarray(0, dtype=dtype))))
            return _back_to(a, out) if shape == tuple(a.shape) else out
        from .conversion import _convert_compressed_strided, coo_to_dense

        dense = coo_to_dense(xp, a) if isinstance(a, COOArray) else _convert_compressed_strided(xp, a, None)
        return f(xp, dense, d) if sparse_first else f(xp, d, dense)

    order = "indexed_strided" if sparse_first else "strided_indexed"
    kernel.__name__ = kernel.__qualname__ = f"_{name}_{order}"
    kernel.__doc__ = (
        f"{name}({order.replace('_', ', ')}): sparse where the product keeps the sparse operand's zeros, "
        "else strided (as torch); O(nnz) or O(numel)."
    )
    return kernel


def _binary_sparse_kernel(name: str) -> Callable[..., Any]:
    def kernel(xp: Any, x: SparseArray, y: SparseArray) -> SparseArray:
        shape = _dense_result_shape(xp, tuple(x.shape), tuple(y.shape))
        same_shape = tuple(x.shape) == tuple(y.shape) == shape
        if (
            name in ("add", "subtract") and same_shape and isinstance(x, COOArray) and isinstance(y, COOArray)
            and x.fill_value == 0 and y.fill_value == 0 and x.sparse_dim() == y.sparse_dim()
        ):  # fmt: skip
            # COO + COO concatenates the entries without coalescing (as torch does)
            dtype = xp.result_type(x.dtype, y.dtype)
            yv = xp.astype(y._vals, dtype)
            values = xp.concat([xp.astype(x._vals, dtype), yv if name == "add" else -yv], axis=0)
            idx_dtype = x._idx.dtype
            indices = xp.concat([x._idx, xp.astype(y._idx, idx_dtype)], axis=1)
            return COOArray(indices, values, shape, backend=x._backend, xp=xp, coalesced=False, fill_value=0)
        a = broadcast_coo(xp, _as_coo(xp, x), shape)
        b = broadcast_coo(xp, _as_coo(xp, y), shape)
        if a.sparse_dim() != b.sparse_dim():
            from ..._errors import LayoutError

            raise LayoutError(
                f"{name}: the operands have different numbers of sparse dimensions ({a.sparse_dim()} and {b.sparse_dim()}) "
                "after broadcasting. Convert one with to_sparse_coo(sparse_dim=...) from its dense form so that both match."
            )
        a, b = coalesce_coo(xp, a), coalesce_coo(xp, b)
        intersect = name in ANNIHILATING and x.fill_value == 0 and y.fill_value == 0
        out = union_coo(xp, name, a, b, intersect=intersect)
        return _back_to(x, out) if x.ndim == len(shape) else out

    kernel.__name__ = kernel.__qualname__ = f"_{name}_indexed_indexed"
    kernel.__doc__ = f"{name}(sparse, sparse) -> sparse: union (or, for products, intersection) of the entries; O(nnz log nnz)."
    return kernel


for _name in BINARY:
    register(_name, (strided, strided))(_binary_strided_kernel(_name))
    register(_name, (strided, "scalar"))(_binary_strided_kernel(_name, "strided_scalar"))
    register(_name, ("scalar", strided))(_binary_strided_kernel(_name, "scalar_strided"))
    register(_name, (INDEXED, "scalar"))(_binary_scalar_kernel(_name, True))
    register(_name, ("scalar", INDEXED))(_binary_scalar_kernel(_name, False))
    register(_name, (INDEXED, strided))(_binary_mixed_kernel(_name, True))
    register(_name, (strided, INDEXED))(_binary_mixed_kernel(_name, False))
    register(_name, (INDEXED, INDEXED))(_binary_sparse_kernel(_name))
