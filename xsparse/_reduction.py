"""Reductions over any axes of strided and sparse arrays (the Array API's statistical and searching
functions, ``count_nonzero``, ``cumulative_sum`` and ``cumulative_prod``), and torch's ``softmax`` and ``log_softmax``.

Every unspecified element of a sparse array counts as its fill value: a sum adds ``fill`` once per
unspecified element of each reduced group, a mean divides by the full count, ``max``, ``argmax`` and
the like consider the fill value wherever a group has unspecified elements.

The layout of the result follows from the reduced axes (``layout=`` converts it):

- reducing **dense dimensions only** keeps the sparse structure (the indices are shared) and reduces
  each specified element's dense sub-array, and the fill value with it;
- reducing **every sparse dimension** (for a compressed array: its batch and both sparse dimensions),
  or every dimension, gives the backend's strided array; a full reduction gives a 0-d array;
- reducing **some sparse dimensions** gives a COO array over the sparse dimensions that remain, as
  ``torch.sparse.sum`` does; a compressed array whose batch dimensions are all reduced while both
  sparse dimensions remain keeps its layout (the batches add up to one matrix).

``softmax`` and ``log_softmax`` follow ``torch.sparse.softmax``: unspecified elements are read as
``-inf``, so they stay unspecified, with fill value 0 (``softmax``) or ``-inf`` (``log_softmax``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import array_api_compat

from . import dispatch
from ._common import dtype_name, flag_argument, integer_argument, resolve_dtype
from ._elementwise import convert_result, isnan, logical_and, logical_not, operand
from ._errors import NoKernelError
from ._indexing import astype, where
from .backends import Backend
from .backends.array_api.conversion import float64_on, signed_twin
from .backends.array_api.reduction import ReduceSpec, quietly
from .formats import Layout, SparseArray, sparse_coo, strided
from .formats._invariants import is_half_precision

__all__ = [
    "sum",
    "prod",
    "mean",
    "max",
    "min",
    "argmax",
    "argmin",
    "any",
    "all",
    "std",
    "var",
    "count_nonzero",
    "cumulative_sum",
    "cumulative_prod",
    "softmax",
    "log_softmax",
]

_NUMERIC = "numeric"
_CAST_FLOAT = "Build the array with a floating-point dtype (e.g. dtype='float64'), or cast its values first"
_REAL = ("integral", "real floating")
_FLOATING = ("real floating", "complex floating")


# -- argument handling ---------------------------------------------------------------------------------


def _operand(op: str, x: Any) -> tuple[Backend, Any, Layout]:
    """The backend, namespace and layout of ``x``."""
    backend, layout = operand(op, x)
    return backend, backend.load(), layout


def _normalise(op: str, axis: Any, item: Any, ndim: int) -> int:
    try:
        # a NumPy or torch integer is an axis, as in the shape functions (and in NumPy's own sum)
        a = integer_argument(op, "axis", item)
    except TypeError:
        raise TypeError(f"{op}: axis must be an int or a tuple of ints (axis={axis!r}). Pass integer axes.") from None
    if not -ndim <= a < ndim:
        raise ValueError(
            f"{op}: axis {a} is out of range for an array of {ndim} dimensions (axis={axis!r}). Pass axes in "
            f"[{-ndim}, {ndim - 1}]."
        )
    return a % ndim


def _axes(op: str, axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` (None, an int or a tuple of ints) as sorted non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    items = tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    axes = [_normalise(op, axis, a, ndim) for a in items]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: an axis is repeated (axis={axis!r}). Name each axis once.")
    return tuple(sorted(axes))


def _one_axis(op: str, axis: Any, ndim: int) -> int:
    try:
        a = integer_argument(op, "axis", axis)
    except TypeError:
        raise TypeError(f"{op}: axis must be one int (axis={axis!r}). Pass a single axis.") from None
    return _normalise(op, axis, a, ndim)


def _device(x: Any) -> Any:
    return x.device if isinstance(x, SparseArray) else array_api_compat.device(x)


def _require(op: str, xp: Any, dtype: Any, kinds: Any, what: str, fix: str) -> None:
    if not xp.isdtype(dtype, kinds):
        raise TypeError(f"{op}: the array must have {what} dtype (dtype={dtype_name(dtype)}). {fix}.")


def _half(op: str, x: Any) -> bool:
    """Whether ``x`` is a sparse half-precision array, whose sums NumPy and torch accumulate in float32 (a
    float16 sum of two 60000s is inf; theirs, cast back at the end, is not). The sparse kernels add in
    the values' dtype, so these reductions widen the values first (after any duplicates are added in
    the array's own dtype, as ``to_dense`` adds them) and cast the result back."""
    return isinstance(x, SparseArray) and is_half_precision(x.dtype) and _has_kernels(op, x)


def _has_kernels(op: str, x: SparseArray) -> bool:
    """Whether ``op`` has kernels for ``x``'s layout on its backend: a reduction that would first cast ``x``
    to a wider dtype does not, where it has none, so that its error names ``op`` and not the cast."""
    return bool(dispatch.resolve(op, (x.layout,), x._backend.name))


def _accumulation_dtype(op: str, xp: Any, x: Any, dtype: Any) -> Any:
    """The result dtype of a sum, product or running sum: ``dtype``, else the backend's own rule."""
    if dtype is not None:
        dt = resolve_dtype(xp, dtype, op)
        _require(op, xp, dt, _NUMERIC, "a numeric result", "Pass an integer, floating-point or complex dtype=")
        if xp.isdtype(x.dtype, "complex floating") and not xp.isdtype(dt, "complex floating"):
            # NumPy and torch keep the real part; array_api_strict refuses the cast (the standard leaves it
            # unspecified), in a message that would name neither this function nor the fix
            try:
                xp.astype(xp.zeros((), dtype=x.dtype, device=_device(x)), dt)
            except TypeError:
                raise TypeError(
                    f"{op}: this backend casts no complex values to a real dtype (x.dtype={dtype_name(x.dtype)}, "
                    f"dtype={dtype_name(dt)}). Take xsparse.real(x) first, or pass a complex dtype=."
                ) from None
        return dt
    if xp.isdtype(x.dtype, "real floating"):
        # the common case first, with the cheapest test (see "Reductions over every axis on the torch
        # backend" in docs/decisions.md)
        return x.dtype
    _require(
        op, xp, x.dtype, _NUMERIC, "a numeric",
        "Count the true elements with xsparse.count_nonzero, or pass dtype='int64' to add them up as integers",
    )  # fmt: skip
    if not xp.isdtype(x.dtype, "integral"):
        return x.dtype
    # the standard's rule, not the backend's own (torch widens uint8 to int64): signed integers give the
    # default integer dtype, unsigned ones the unsigned dtype of its width
    default = xp.__array_namespace_info__().default_dtypes(device=_device(x))["integral"]
    if xp.isdtype(x.dtype, "signed integer"):
        return default
    return resolve_dtype(xp, "u" + dtype_name(default))


def _nonempty(op: str, x: Any, axes: tuple[int, ...], axis: Any) -> None:
    if math.prod(x.shape[d] for d in axes) == 0:
        raise ValueError(
            f"{op}: the reduction is over zero elements (shape={tuple(x.shape)}, axis={axis!r}), and the {op} of nothing "
            "is undefined. Reduce along axes of non-zero size, or check the array's size first."
        )


_INT64_MAX = 2**63 - 1


def _run(op: str, x: Any, spec: ReduceSpec, layout: Layout | None, backend: Backend, xp: Any, source: Layout) -> Any:
    if isinstance(x, SparseArray) and math.prod(x.shape[d] for d in spec.axes) > _INT64_MAX:
        # the kernels count the unspecified elements of each group in int64
        raise ValueError(
            f"{op}: the reduction covers more elements than an int64 counts (shape={tuple(x.shape)}, axes={spec.axes}, "
            f"elements={math.prod(x.shape[d] for d in spec.axes)}). Reduce along fewer axes at a time."
        )
    if layout is not spec.layout:
        spec = dataclasses.replace(spec, layout=layout)
    return convert_result(dispatch.call(op, (source,), backend.name, xp, x, spec), layout, op)


def _run_modular(op: str, x: Any, spec: ReduceSpec, layout: Layout | None, backend: Backend, xp: Any, source: Layout) -> Any:
    """A sum or product (running or not): where the backend computes none in an unsigned result dtype
    (torch's uint16/32/64), in the same-width signed dtype, whose sums and products modulo 2**bits have
    the same bits, cast back."""
    try:
        return _run(op, x, spec, layout, backend, xp, source)
    except NoKernelError:
        raise
    except (NotImplementedError, RuntimeError):
        twin = signed_twin(xp, spec.dtype)
        if twin is None:
            raise
    out = _run(op, x, dataclasses.replace(spec, dtype=twin), layout, backend, xp, source)
    return astype(out, spec.dtype)


def _plain(op: str, x: Any, axis: Any, keepdims: bool, layout: Layout | None, result_dtype: Any = None) -> Any:
    """A reduction whose result dtype is ``result_dtype(xp, x)`` (``x``'s own by default)."""
    backend, xp, source = _operand(op, x)
    dtype = x.dtype if result_dtype is None else result_dtype(xp, x)
    spec = ReduceSpec(_axes(op, axis, x.ndim), flag_argument(op, "keepdims", keepdims), dtype)
    return _run(op, x, spec, layout, backend, xp, source)


def _bool(xp: Any, x: Any) -> Any:
    return xp.bool


def _default_integral(xp: Any, x: Any) -> Any:
    return xp.__array_namespace_info__().default_dtypes(device=_device(x))["integral"]


# -- sums and products ---------------------------------------------------------------------------------


def sum(x: Any, /, *, axis: int | tuple[int, ...] | None = None, dtype: Any = None, keepdims: bool = False, layout: Layout | None = None) -> Any:  # noqa: A001
    """The sum of the elements along ``axis``, unspecified elements counting as the fill value.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a numeric dtype.
    axis
        The axis or axes to reduce; None (default) reduces every axis.
    dtype
        The dtype of the result; by default the standard's rule: signed integers widen to the default
        integer dtype, unsigned ones to the unsigned dtype of its width, floating dtypes are kept. A
        boolean array needs one.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: see below).

    Returns
    -------
    array
        Reducing dense dimensions only keeps ``x``'s layout and structure; reducing some sparse
        dimensions gives a COO array (``torch.sparse.sum``), whose fill value is the sum of a group
        without specified elements; reducing every sparse dimension gives a strided array, 0-d for a
        full reduction.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3), dtype="float64")
    >>> xs.sum(a)
    array(12.)
    >>> xs.sum(a, axis=1)
    sparse_array(indices=[[0, 1]],
                 values=[3., 9.],
                 shape=(2,), nnz=2, dtype=float64, layout=sparse_coo, backend=numpy)

    With fill value 1, every unspecified element adds 1:

    >>> b = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3), dtype="float64", fill_value=1.0)
    >>> xs.sum(b, axis=0).to_dense().tolist()
    [5.0, 2.0, 8.0]
    """
    backend, xp, source = _operand("sum", x)
    if dtype is None and _half("sum", x):
        return astype(sum(astype(x, xp.float32), axis=axis, keepdims=keepdims, layout=layout), x.dtype)
    spec = ReduceSpec(_axes("sum", axis, x.ndim), flag_argument("sum", "keepdims", keepdims), _accumulation_dtype("sum", xp, x, dtype))
    return _run_modular("sum", x, spec, layout, backend, xp, source)


def prod(x: Any, /, *, axis: int | tuple[int, ...] | None = None, dtype: Any = None, keepdims: bool = False, layout: Layout | None = None) -> Any:
    """The product of the elements along ``axis``, unspecified elements counting as the fill value.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a numeric dtype.
    axis
        The axis or axes to reduce; None (default) reduces every axis.
    dtype
        The dtype of the result; by default the standard's rule, as for :func:`sum`.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: as for :func:`sum`).

    Returns
    -------
    array
        As for :func:`sum`; a group with ``k`` unspecified elements is multiplied by ``fill ** k``. With
        fill value 0 the product is exactly ±0 even where the stored values' product overflows, and NaN
        where a stored value is NaN or infinite.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3), dtype="float64", fill_value=2.0)
    >>> xs.prod(a, axis=1)
    sparse_array(indices=[[0, 1]],
                 values=[12., 40.],
                 shape=(2,), nnz=2, dtype=float64, layout=sparse_coo, fill_value=8.0, backend=numpy)
    >>> xs.prod(a).tolist()
    480.0
    """
    backend, xp, source = _operand("prod", x)
    if dtype is None and _half("prod", x):
        return astype(prod(astype(x, xp.float32), axis=axis, keepdims=keepdims, layout=layout), x.dtype)
    spec = ReduceSpec(_axes("prod", axis, x.ndim), flag_argument("prod", "keepdims", keepdims), _accumulation_dtype("prod", xp, x, dtype))
    out = _run_modular("prod", x, spec, layout, backend, xp, source)
    if isinstance(x, SparseArray) and xp.isdtype(spec.dtype, ("real floating", "complex floating")) and _holds_nan(xp, out):
        out = _exact_zero_products(x, spec, layout, backend, xp, source, out)
    return out


def _holds_nan(xp: Any, r: Any) -> bool:
    return bool(xp.any(xp.isnan(r._vals if isinstance(r, SparseArray) else r)))


def _exact_zero_products(x: SparseArray, spec: ReduceSpec, layout: Layout | None, backend: Backend, xp: Any, source: Layout, out: Any) -> Any:
    """``out`` where its NaNs are products of finite values and a zero: exactly 0 (its sign the product of
    the signs), where the kernels' stored values (or the fill value's power ``f ** k``) overflowed to inf
    before a zero met them.

    A group's exact product with a zero in it is ``±0``, or NaN where an element is NaN or infinite:
    what the product of each element times 0 gives (the stored values' and the fill value's), which
    cannot overflow. A group without a zero keeps its NaN: an overflow to ``inf * 0j`` there is what the
    dense product gives too."""
    c = x.coalesce() if x.layout is sparse_coo else x  # duplicates add up first, as to_dense adds them
    zeroed = c._with_values(c._vals * 0, x.fill_value * 0)
    exact = _run_modular("prod", zeroed, spec, layout, backend, xp, source)
    # in the result's layout: a sparse result stays sparse (a strided mask would be the size of the dense result)
    has_zero = logical_not(all(c, axis=spec.axes, keepdims=spec.keepdims, layout=out.layout if isinstance(out, SparseArray) else strided))
    if isinstance(out, SparseArray):
        return where(logical_and(isnan(out), has_zero), exact, out)
    return xp.where(xp.isnan(out) & has_zero, exact, out)


def _cumulative(op: str, x: Any, axis: Any, dtype: Any, include_initial: bool, layout: Layout | None) -> Any:
    backend, xp, source = _operand(op, x)
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d array has no axis to accumulate along (shape=()). Reshape it to one dimension first.")
    if axis is None and x.ndim > 1:
        raise ValueError(
            f"{op}: axis is required for an array of more than one dimension (shape={tuple(x.shape)}, axis=None). Pass axis=."
        )
    d = 0 if axis is None else _one_axis(op, axis, x.ndim)
    rdt = _accumulation_dtype(op, xp, x, dtype)
    spec = ReduceSpec((d,), False, rdt, include_initial=bool(include_initial))
    return _run_modular(op, x, spec, layout, backend, xp, source)


def cumulative_sum(x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False, layout: Layout | None = None) -> Any:
    """The running sums of the elements along ``axis``.

    Running sums fill in: every element after the first non-zero one along the axis is generally
    non-zero. So the result is a **strided array** by definition, with one exception that keeps the
    structure: a sparse array with fill value 0 summed along one of its dense dimensions (the running
    sums of an unspecified element's zeros stay zero).

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a numeric dtype, with at least one dimension.
    axis
        The axis to sum along; optional for a 1-D array only.
    dtype
        The dtype of the result; by default the standard's rule, as for :func:`sum`.
    include_initial
        Start every running sum with a zero, making the axis one longer.
    layout
        The layout of the result (default: strided, or ``x``'s layout in the exception above).

    Returns
    -------
    array

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 2]], [1, 2], (4,), dtype="int64")
    >>> xs.cumulative_sum(a)
    array([1, 1, 3, 3])
    >>> h = xs.sparse_coo_array([[0, 2]], [[1, 2], [3, 4]], (3, 2), dtype="int64")
    >>> r = xs.cumulative_sum(h, axis=1)
    >>> r.layout, r.to_dense().tolist()
    (xsparse.sparse_coo, [[1, 3], [0, 0], [3, 7]])
    """
    return _cumulative("cumulative_sum", x, axis, dtype, include_initial, layout)


def cumulative_prod(x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False, layout: Layout | None = None) -> Any:
    """The running products of the elements along ``axis``.

    As for :func:`cumulative_sum`, the result is a **strided array** by definition (the running
    products of the fill value change along the axis), except where an unspecified element's running
    products are all one value: along a dense dimension of a sparse array with fill value 1, or fill
    value 0 without ``include_initial`` (whose leading 1 would differ from the zeros after it). There
    the structure is kept, with that fill value.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a numeric dtype, with at least one dimension.
    axis
        The axis to multiply along; optional for a 1-D array only.
    dtype
        The dtype of the result; by default the standard's rule, as for :func:`sum`.
    include_initial
        Start every running product with a one, making the axis one longer.
    layout
        The layout of the result (default: strided, or ``x``'s layout in the exception above).

    Returns
    -------
    array

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 2]], [2, 3], (4,), dtype="int64", fill_value=1)
    >>> xs.cumulative_prod(a)
    array([2, 2, 6, 6])
    >>> h = xs.sparse_coo_array([[0, 2]], [[1, 2], [3, 4]], (3, 2), dtype="int64")
    >>> r = xs.cumulative_prod(h, axis=1)
    >>> r.layout, r.to_dense().tolist()
    (xsparse.sparse_coo, [[1, 2], [0, 0], [3, 12]])
    """
    return _cumulative("cumulative_prod", x, axis, dtype, include_initial, layout)


# -- extrema ---------------------------------------------------------------------------------------------


def _extremum(op: str, x: Any, axis: Any, keepdims: bool, layout: Layout | None) -> Any:
    backend, xp, source = _operand(op, x)
    if not xp.isdtype(x.dtype, "real floating"):
        _require(op, xp, x.dtype, _REAL, "a real-valued numeric", "Compare the real parts or the absolute values instead")
    axes = _axes(op, axis, x.ndim)
    _nonempty(op, x, axes, axis)
    return _run(op, x, ReduceSpec(axes, flag_argument(op, "keepdims", keepdims), x.dtype), layout, backend, xp, source)


def max(x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, layout: Layout | None = None) -> Any:  # noqa: A001
    """The largest element along ``axis``, the fill value counting wherever an element is unspecified.

    NaN propagates, as in NumPy and torch.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a real-valued numeric dtype.
    axis
        The axis or axes to reduce; None (default) reduces every axis. They must not be empty.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: as for :func:`sum`).

    Returns
    -------
    array

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 3], [1, 0, 2], [-3.0, -4.0, 5.0], (2, 3), dtype="float64")
    >>> xs.max(a, axis=1, layout=xs.strided).tolist()  # row 0: max(0, -3, 0)
    [0.0, 5.0]
    >>> xs.max(a).tolist()
    5.0
    """
    return _extremum("max", x, axis, keepdims, layout)


def min(x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, layout: Layout | None = None) -> Any:  # noqa: A001
    """The smallest element along ``axis``, the fill value counting wherever an element is unspecified.

    NaN propagates, as in NumPy and torch.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a real-valued numeric dtype.
    axis
        The axis or axes to reduce; None (default) reduces every axis. They must not be empty.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: as for :func:`sum`).

    Returns
    -------
    array

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 3], [1, 0, 2], [3.0, 4.0, 5.0], (2, 3), dtype="float64", fill_value=9.0)
    >>> xs.min(a, axis=0, layout=xs.strided).tolist()
    [4.0, 3.0, 5.0]
    """
    return _extremum("min", x, axis, keepdims, layout)


def _arg(op: str, x: Any, axis: Any, keepdims: bool, layout: Layout | None) -> Any:
    backend, xp, source = _operand(op, x)
    _require(op, xp, x.dtype, _REAL, "a real-valued numeric", "Compare the real parts or the absolute values instead")
    axes = _axes(op, axis, x.ndim) if axis is None else (_one_axis(op, axis, x.ndim),)
    _nonempty(op, x, axes, axis)
    index_dtype = xp.__array_namespace_info__().default_dtypes(device=_device(x))["indexing"]
    positions = math.prod(x.shape[d] for d in axes)
    if positions - 1 > xp.iinfo(index_dtype).max:
        # the index into the flattened dimensions would wrap around
        raise ValueError(
            f"{op}: the positions along the reduced axes do not fit the index dtype {dtype_name(index_dtype)} "
            f"(shape={tuple(x.shape)}, axis={axis}, positions={positions}). Reduce along one axis at a time."
        )
    return _run(op, x, ReduceSpec(axes, flag_argument(op, "keepdims", keepdims), index_dtype), layout, backend, xp, source)


def argmax(x: Any, /, *, axis: int | None = None, keepdims: bool = False, layout: Layout | None = None) -> Any:
    """The index of the first largest element along ``axis`` (of the flattened array for None).

    Indices refer to positions in the full (dense) array, unspecified ones included, in C order; where
    several elements share the largest value the first one wins, and a NaN beats every number (NumPy's
    and torch's rule).

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a real-valued numeric dtype.
    axis
        One axis; None (default) gives the index into the flattened array.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: see below).

    Returns
    -------
    array
        Of the backend's default index dtype. Along a dense dimension the result keeps ``x``'s
        structure with fill value 0 (the first element of a constant sub-array); along a sparse
        dimension it is a COO array over the other sparse dimensions, with fill value 0, or strided.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [-3.0, 4.0, 5.0], (2, 3), dtype="float64")
    >>> xs.argmax(a).tolist()
    5
    >>> xs.argmax(a, axis=1).to_dense().tolist()  # row 0: the unspecified 0 at column 0 beats -3
    [0, 2]
    """
    return _arg("argmax", x, axis, keepdims, layout)


def argmin(x: Any, /, *, axis: int | None = None, keepdims: bool = False, layout: Layout | None = None) -> Any:
    """The index of the first smallest element along ``axis`` (of the flattened array for None).

    See :func:`argmax` for the rules.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a real-valued numeric dtype.
    axis
        One axis; None (default) gives the index into the flattened array.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: as for :func:`argmax`).

    Returns
    -------
    array
        Of the backend's default index dtype.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3), dtype="float64")
    >>> xs.argmin(a).tolist()
    0
    >>> xs.argmin(a, axis=1).to_dense().tolist()  # row 1: the unspecified 0 at column 1
    [0, 1]
    """
    return _arg("argmin", x, axis, keepdims, layout)


# -- truth and counts -----------------------------------------------------------------------------------


def any(x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, layout: Layout | None = None) -> Any:  # noqa: A001
    """Whether any element along ``axis`` is true (non-zero), the fill value counting where unspecified.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of any dtype.
    axis
        The axis or axes to reduce; None (default) reduces every axis.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: as for :func:`sum`).

    Returns
    -------
    array
        Of dtype bool.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1], [2, 0]], [3, 0], (2, 3), dtype="int64")
    >>> xs.any(a, axis=1, layout=xs.strided).tolist()
    [True, False]
    """
    return _plain("any", x, axis, keepdims, layout, _bool)


def all(x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, layout: Layout | None = None) -> Any:  # noqa: A001
    """Whether every element along ``axis`` is true (non-zero), the fill value counting where unspecified.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of any dtype.
    axis
        The axis or axes to reduce; None (default) reduces every axis.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: as for :func:`sum`).

    Returns
    -------
    array
        Of dtype bool.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1], [2, 0]], [3, 0], (2, 3), dtype="int64", fill_value=1)
    >>> xs.all(a, axis=1, layout=xs.strided).tolist()
    [True, False]
    """
    return _plain("all", x, axis, keepdims, layout, _bool)


def count_nonzero(x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, layout: Layout | None = None) -> Any:
    """The number of non-zero elements along ``axis``; each unspecified one counts if the fill value does.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of any dtype.
    axis
        The axis or axes to reduce; None (default) reduces every axis.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: as for :func:`sum`).

    Returns
    -------
    array
        Of the backend's default integer dtype. Explicitly stored zeros are not counted: this is not
        ``nnz``.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3, 0, 5], (2, 3), dtype="int64")
    >>> a.nnz, xs.count_nonzero(a).tolist()
    (3, 2)
    """
    return _plain("count_nonzero", x, axis, keepdims, layout, _default_integral)


# -- statistics ---------------------------------------------------------------------------------------------


def mean(x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False, layout: Layout | None = None) -> Any:
    """The arithmetic mean along ``axis`` over the full count of elements, unspecified ones included.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a floating-point dtype.
    axis
        The axis or axes to reduce; None (default) reduces every axis.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: as for :func:`sum`).

    Returns
    -------
    array
        NaN where the reduction is over zero elements.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3), dtype="float64")
    >>> xs.mean(a).tolist()
    2.0
    >>> xs.mean(a, axis=1).to_dense().tolist()
    [1.0, 3.0]
    """
    backend, xp, source = _operand("mean", x)
    _require("mean", xp, x.dtype, _FLOATING, "a floating-point", _CAST_FLOAT)
    if _half("mean", x):
        return astype(mean(astype(x, xp.float32), axis=axis, keepdims=keepdims, layout=layout), x.dtype)
    spec = ReduceSpec(_axes("mean", axis, x.ndim), flag_argument("mean", "keepdims", keepdims), x.dtype)
    return _run("mean", x, spec, layout, backend, xp, source)


def _statistic(op: str, x: Any, axis: Any, correction: float, keepdims: bool, layout: Layout | None) -> Any:
    backend, xp, source = _operand(op, x)
    _require(op, xp, x.dtype, "real floating", "a real floating-point", _CAST_FLOAT)
    if isinstance(correction, bool) or not isinstance(correction, (int, float)) or correction < 0:
        raise ValueError(f"{op}: correction must be a non-negative number (correction={correction!r}). Pass 0 for the population, 1 for the sample {op}.")
    wide = _statistic_dtype(xp, x)
    if wide is not None and _has_kernels(op, x):
        r = _statistic(op, astype(x, wide), axis, correction, keepdims, layout)
        # a variance past the dtype's range is inf there, silently ("No floating-point warnings on NumPy")
        return quietly(xp, lambda: astype(r, x.dtype))
    spec = ReduceSpec(_axes(op, axis, x.ndim), flag_argument(op, "keepdims", keepdims), x.dtype, correction=float(correction))
    if isinstance(x, SparseArray):
        return quietly(xp, lambda: _run(op, x, spec, layout, backend, xp, source))
    return _run(op, x, spec, layout, backend, xp, source)


def _statistic_dtype(xp: Any, x: Any) -> Any:
    """The dtype that ``var`` and ``std`` of ``x`` compute in, where it is not ``x``'s own (None): a sparse
    array of a floating dtype narrower than float64 is widened to float64, where the backend has it, as
    torch's own ``var`` accumulates on the CPU (the squares of float32's large values overflow in float32,
    its tiny ones' underflow; a column of copies of 2.5e38 has the mean inf in float32); half precision
    otherwise in float32 (as for sums). Strided arrays keep their backend's rules."""
    if not isinstance(x, SparseArray) or not xp.isdtype(x.dtype, "real floating") or x.dtype == xp.float64:
        return None
    wide = float64_on(xp, x.device)
    if wide is not None:
        return wide
    return xp.float32 if is_half_precision(x.dtype) else None


def var(x: Any, /, *, axis: int | tuple[int, ...] | None = None, correction: float = 0.0, keepdims: bool = False, layout: Layout | None = None) -> Any:
    """The variance along ``axis``, over the full count of elements, unspecified ones included.

    Computed in two fill-aware passes: the mean, then the squared deviations (each unspecified element
    adds ``(fill - mean) ** 2``), divided by ``N - correction``.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a real floating-point dtype.
    axis
        The axis or axes to reduce; None (default) reduces every axis.
    correction
        Subtracted from the number of elements ``N``: 0 for the population variance, 1 for the sample
        variance (Bessel's correction). Where ``N - correction <= 0`` the result is NaN.
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: as for :func:`sum`).

    Returns
    -------
    array

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 3]], [2.0, 2.0], (4,), dtype="float64")
    >>> xs.var(a).tolist()
    1.0
    >>> xs.var(a, correction=1).tolist()
    1.3333333333333333
    """
    return _statistic("var", x, axis, correction, keepdims, layout)


def std(x: Any, /, *, axis: int | tuple[int, ...] | None = None, correction: float = 0.0, keepdims: bool = False, layout: Layout | None = None) -> Any:
    """The standard deviation along ``axis``: the square root of :func:`var`.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a real floating-point dtype.
    axis
        The axis or axes to reduce; None (default) reduces every axis.
    correction
        Subtracted from the number of elements (see :func:`var`).
    keepdims
        Keep the reduced axes as dimensions of size 1.
    layout
        The layout of the result (default: as for :func:`sum`).

    Returns
    -------
    array

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 3]], [2.0, 2.0], (4,), dtype="float64")
    >>> xs.std(a).tolist()
    1.0
    """
    return _statistic("std", x, axis, correction, keepdims, layout)


# -- softmax ------------------------------------------------------------------------------------------------


def _softmax(op: str, x: Any, axis: int, dtype: Any, layout: Layout | None) -> Any:
    backend, xp, source = _operand(op, x)
    if dtype is not None:
        rdt = resolve_dtype(xp, dtype, op)
        _require(op, xp, rdt, "real floating", "a real floating-point result", "Pass dtype='float32' or 'float64'")
        _require(op, xp, x.dtype, _REAL, "a real-valued numeric", "Take the softmax of the real parts")
    else:
        _require(op, xp, x.dtype, "real floating", "a real floating-point", "Pass dtype='float64' to compute in floating point")
        rdt = x.dtype
    d = _one_axis(op, axis, x.ndim)
    if isinstance(x, SparseArray) and not (x.fill_value == 0 or x.fill_value == -math.inf):
        raise ValueError(
            f"{op}: the unspecified elements are read as -inf (torch.sparse.softmax's rule), which would ignore this "
            f"array's fill value (fill_value={x.fill_value!r}). Densify it with xsparse.to_dense(x) to count the "
            "unspecified elements, or build it with fill_value=0 or -inf."
        )
    if isinstance(x, SparseArray) and is_half_precision(rdt):
        # the exponentials' sum in float32, rounded once, as NumPy's float16 arithmetic and torch's own
        # half-precision softmax give it (in float16 a log_softmax was 7 units in the last place off)
        return astype(_softmax(op, astype(x, xp.float32), axis, None, layout), rdt)
    return _run(op, x, ReduceSpec((d,), False, rdt), layout, backend, xp, source)


def softmax(x: Any, /, axis: int, *, dtype: Any = None, layout: Layout | None = None) -> Any:
    """The softmax along ``axis``, torch.sparse.softmax's way for a sparse array.

    On a sparse array the unspecified elements are read as ``-inf``: they get probability 0 and stay
    unspecified, and the softmax of each slice along ``axis`` is taken over its specified elements.
    The result keeps ``x``'s layout and structure, with fill value 0. The array's fill value must be 0
    (torch's implicit zeros, read as ``-inf`` as torch does) or ``-inf``.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a real floating-point dtype.
    axis
        The axis along which the probabilities sum to 1.
    dtype
        Cast the values to this real floating-point dtype first (needed for an integer ``x``).
    layout
        The layout of the result (default: ``x``'s).

    Returns
    -------
    array

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3.0, 1.0, 1.0], (2, 3), dtype="float64")
    >>> s = xs.softmax(a, axis=1)
    >>> s.values().tolist(), s.fill_value
    ([1.0, 0.5, 0.5], 0.0)
    """
    return _softmax("softmax", x, axis, dtype, layout)


def log_softmax(x: Any, /, axis: int, *, dtype: Any = None, layout: Layout | None = None) -> Any:
    """The logarithm of :func:`softmax`, computed stably.

    On a sparse array the unspecified elements (read as ``-inf``) stay unspecified; the result's fill
    value is ``-inf``, their true log-probability (torch leaves them as implicit zeros).

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a real floating-point dtype.
    axis
        The axis along which the probabilities sum to 1.
    dtype
        Cast the values to this real floating-point dtype first (needed for an integer ``x``).
    layout
        The layout of the result (default: ``x``'s).

    Returns
    -------
    array

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3.0, 1.0, 1.0], (2, 3), dtype="float64")
    >>> s = xs.log_softmax(a, axis=1)
    >>> [round(v, 4) for v in s.values().tolist()], s.fill_value
    ([0.0, -0.6931, -0.6931], -inf)
    """
    return _softmax("log_softmax", x, axis, dtype, layout)

