"""Sorting functions of the Array API (``sort``, ``argsort``) for strided and sparse arrays.

``sort`` of a sparse array stays sparse, in the operand's layout: each lane along ``axis`` is sorted
with its unspecified elements counted as the fill value, which lands where it belongs in the order.
``argsort`` of a sparse array is strided by definition (a permutation repeats no value, so no element
can be left unspecified). Strided arrays go to the backend's own functions, bool ones as their int8
twin: the standard sorts real numbers only (array-api-strict refuses bool), and NumPy and torch order
False before True, which every backend then does.
"""

from __future__ import annotations

from typing import Any

from . import dispatch
from ._common import flag_argument, is_strided
from ._elementwise import convert_result
from ._errors import NoKernelError
from .backends import Backend, backend_of_array
from .backends.array_api import sorting as _generic_sorting  # noqa: F401  (registers the generic kernels)
from .backends.array_api.sorting import orderable
from .formats import Layout, SparseArray

__all__ = ["sort", "argsort"]


def array_operand(op: str, x: Any) -> tuple[Backend, Any]:
    """The backend of an xsparse or backend array ``x`` and its (loaded) namespace; TypeError otherwise."""
    if isinstance(x, SparseArray):
        return x._backend, x._backend.load()
    if is_strided(x, op):
        backend = backend_of_array(x)
        return backend, backend.load()
    raise TypeError(
        f"{op}: expected an xsparse array or a backend array, got {type(x).__name__} (x={x!r}). Wrap Python scalars "
        "and lists with xsparse.asarray first."
    )


def _one_axis(op: str, axis: Any, ndim: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"{op}: axis must be an int (axis={axis!r}). Pass a single integer axis.")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for an array of {ndim} dimensions (axis={axis}). Pass an axis in [{-ndim}, {ndim - 1}].")
    return axis % ndim


def _check(op: str, x: Any, axis: int) -> tuple[Backend, Any, int]:
    backend, xp = array_operand(op, x)
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d array has no axis to sort along (shape={tuple(x.shape)}). Reshape it to 1-D first.")
    if xp.isdtype(x.dtype, "complex floating"):
        raise TypeError(f"{op}: complex values have no order (dtype={x.dtype}). Sort xsparse.real(x) or xsparse.abs(x) instead.")
    return backend, xp, _one_axis(op, axis, x.ndim)


def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True, layout: Layout | None = None) -> Any:
    """The elements of ``x`` sorted along ``axis``.

    Parameters
    ----------
    x
        A strided (backend) or xsparse array of a real or bool dtype (False sorts before True).
    axis
        The axis to sort along.
    descending
        Sort in descending order (NaN first, as the ascending order reversed).
    stable
        Accepted for the standard's signature: a sparse sort has one result (docs/decisions.md,
        "Sorting without stability").
    layout
        The result layout; by default ``x``'s (strided for a strided ``x``).

    Returns
    -------
    array
        A sparse ``x`` gives a sparse array of its layout whose every lane has as many specified elements:
        along a sparse dimension each lane's unspecified elements (the fill value) take their place in the
        order, between the specified values that sort before the fill value and the others. The nnz is
        kept, except that a BSR or BSC array sorted along a sparse dimension stores every block that a
        sorted element lands in, and a batched compressed array sorted along a batch dimension stores as
        many elements in every batch as the fullest one needs: their nnz may grow. Sorting
        along a sparse dimension of a hybrid array, or with a NaN fill value, raises
        :class:`~xsparse.NoKernelError` with the reason.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 0, 1], [0, 3, 1]], [5.0, -2.0, 7.0], (2, 4))
    >>> s = xs.sort(a, axis=1)
    >>> s.layout, s.nnz, s.to_dense().tolist()
    (xsparse.sparse_coo, 3, [[-2.0, 0.0, 0.0, 5.0], [0.0, 0.0, 0.0, 7.0]])
    >>> xs.sort(a, axis=1, descending=True).to_dense().tolist()
    [[5.0, 0.0, 0.0, -2.0], [7.0, 0.0, 0.0, 0.0]]
    >>> import numpy as np
    >>> xs.sort(np.asarray([3, 1, 2]))
    array([1, 2, 3])
    """
    op = "sort"
    backend, xp, ax = _check(op, x, axis)
    if isinstance(x, SparseArray) and isinstance(x.fill_value, float) and x.fill_value != x.fill_value:
        # every layout's kernel declines this array: the dispatcher's advice (another layout) cannot help
        raise NoKernelError(
            f"{op}: the fill value is NaN, which compares with nothing, so the unspecified elements have no place "
            f"among the sorted values (fill_value={x.fill_value}). Sort the dense array, xsparse.sort(xsparse.to_dense(x)), "
            "or rebuild x with a fill value that is not NaN: xsparse.to_sparse(xsparse.to_dense(x), fill_value=0.0)."
        )
    if not isinstance(x, SparseArray):
        s = xp.sort(orderable(xp, x), axis=ax, descending=flag_argument(op, "descending", descending), stable=flag_argument(op, "stable", stable))
        return convert_result(xp.astype(s, x.dtype) if xp.isdtype(x.dtype, "bool") else s, layout, op)
    result = dispatch.call(op, (x.layout,), backend.name, xp, x, ax, flag_argument(op, "descending", descending), flag_argument(op, "stable", stable))
    return convert_result(result, layout, op)


def argsort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    """The indices that sort ``x`` along ``axis`` (the backend's integer dtype).

    The result of a sparse ``x`` is strided by definition: it is a permutation of each lane, which
    repeats no value, so no element of it can be left unspecified. It is the backend's ``argsort`` of
    ``x``'s dense copy (ties in index order with ``stable=True``), whose size is the result's.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 3]], [5.0, -2.0], (4,))
    >>> xs.argsort(a).tolist()
    [3, 1, 2, 0]
    """
    op = "argsort"
    backend, xp, ax = _check(op, x, axis)
    if not isinstance(x, SparseArray):
        return xp.argsort(orderable(xp, x), axis=ax, descending=flag_argument(op, "descending", descending), stable=flag_argument(op, "stable", stable))
    return dispatch.call(op, (x.layout,), backend.name, xp, x, ax, flag_argument(op, "descending", descending), flag_argument(op, "stable", stable))
