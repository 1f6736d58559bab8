"""Set functions of the Array API (``unique_all``, ``unique_counts``, ``unique_inverse``,
``unique_values``, ``isin``) for strided and sparse arrays.

A sparse array's unspecified elements are values too: with at least one of them, the fill value is
one of the unique values and is counted once per unspecified element. The unique values, counts and
first indices are strided (distinct values, none repeated, leave nothing unspecified); the inverse
indices keep the operand's layout and structure, the fill value's index being their fill value.
Values come in ascending order with every NaN distinct. A NaN fill value of an array with unspecified
elements would make each of them a distinct value: that raises :class:`~xsparse.NoKernelError`, which
names the function and says to compute it on the dense array or with another fill value.

Strided arrays go to the backend's ``unique_*`` functions, except ``unique_all``, which torch lacks,
and complex arrays, which torch cannot sort on the CPU: their results come from xsparse's generic kernel
(one stable sort; complex values in lexicographic (real, imag) order, NumPy's) on every backend.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from . import dispatch
from ._common import backend_of, flag_argument
from ._conversion import layout_of
from ._elementwise import check_dtypes, convert_result
from ._errors import NoKernelError
from ._sorting import array_operand
from .backends.array_api import set as _generic_set  # noqa: F401  (registers the generic kernels)
from .backends.array_api.set import Unique, isin_values, unspecified_nans
from .formats import Layout, SparseArray, strided

__all__ = ["unique_all", "unique_counts", "unique_inverse", "unique_values", "isin"]


class UniqueAllResult(NamedTuple):
    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    values: Any
    inverse_indices: Any


def _complex(op: str, x: Any) -> bool:
    """Whether ``x`` is complex: its unique values come from xsparse's generic kernel (torch's ``unique``
    takes no complex values on the CPU; the generic kernel orders them by (real, imag) everywhere)."""
    _, xp = array_operand(op, x)
    return bool(xp.isdtype(x.dtype, "complex floating"))


def _unique(op: str, x: Any, positions: bool | str) -> Unique:
    """The ``unique`` kernel's result; ``positions`` is True for ``unique_all`` (first positions too), or
    the name of the outputs needed (``"counts"``, ``"inverse"``, ``"values"``), which spares the others."""
    backend, xp = array_operand(op, x)
    if isinstance(x, SparseArray) and unspecified_nans(xp, x):
        # every layout's kernel declines this array: the dispatcher's advice (another layout) cannot help
        raise NoKernelError(
            f"{op}: the fill value is NaN and x has unspecified elements, each of which would be a distinct unique "
            f"value as every NaN is (fill_value={x.fill_value}). Compute it on the dense array, xsparse.{op}(xsparse.to_dense(x)), "
            "or rebuild x with a fill value that is not NaN: xsparse.to_sparse(xsparse.to_dense(x), fill_value=0.0)."
        )
    if isinstance(x, SparseArray) and positions in (True, "counts") and math.prod(x.shape) > 2**63 - 1:
        # the counts, and unique_all's first positions, are int64
        raise ValueError(
            f"{op}: x has more elements than an int64 counts (shape={tuple(x.shape)}, elements={math.prod(x.shape)}). "
            "Take the unique values of slices of x, or its unique_values or unique_inverse, which count nothing."
        )
    return dispatch.call("unique", (layout_of(x),), backend.name, xp, x, positions)  # type: ignore[no-any-return]


def unique_all(x: Any, /) -> UniqueAllResult:
    """The unique elements of ``x``, the flat index of each one's first occurrence, the inverse indices and
    the counts.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 2]], [4, 0], (4,))
    >>> u = xs.unique_all(a)
    >>> u.values.tolist(), u.indices.tolist(), u.counts.tolist()
    ([0, 4], [1, 0], [3, 1])
    >>> u.inverse_indices.layout, u.inverse_indices.to_dense().tolist()
    (xsparse.sparse_coo, [1, 0, 0, 0])
    """
    u = _unique("unique_all", x, True)
    return UniqueAllResult(u.values, u.indices, u.inverse_indices, u.counts)


def unique_counts(x: Any, /) -> UniqueCountsResult:
    """The unique elements of ``x`` and how often each occurs (unspecified elements count as the fill value).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [3.0, 3.0], (2, 3), fill_value=1.0)
    >>> v, c = xs.unique_counts(a)
    >>> v.tolist(), c.tolist()
    ([1.0, 3.0], [4, 2])
    """
    op = "unique_counts"
    if not isinstance(x, SparseArray) and not _complex(op, x):
        _, xp = array_operand(op, x)
        r = xp.unique_counts(x)
        return UniqueCountsResult(r.values, r.counts)
    u = _unique(op, x, "counts")
    return UniqueCountsResult(u.values, u.counts)


def unique_inverse(x: Any, /) -> UniqueInverseResult:
    """The unique elements of ``x`` and, for every element, the index of its value among them.

    A sparse ``x`` gives inverse indices of its layout and structure.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [3.0, -3.0], (2, 3))
    >>> v, inv = xs.unique_inverse(a)
    >>> v.tolist(), inv.layout, inv.to_dense().tolist()
    ([-3.0, 0.0, 3.0], xsparse.sparse_csr, [[1, 2, 1], [0, 1, 1]])
    """
    op = "unique_inverse"
    if not isinstance(x, SparseArray) and not _complex(op, x):
        _, xp = array_operand(op, x)
        r = xp.unique_inverse(x)
        return UniqueInverseResult(r.values, r.inverse_indices)
    u = _unique(op, x, False)
    return UniqueInverseResult(u.values, u.inverse_indices)


def unique_values(x: Any, /) -> Any:
    """The unique elements of ``x`` as a strided 1-D array (the fill value among them when ``x`` has an
    unspecified element).

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.unique_values(xs.sparse_coo_array([[0, 2]], [4, 4], (3,))).tolist()
    [0, 4]
    """
    op = "unique_values"
    if not isinstance(x, SparseArray) and not _complex(op, x):
        _, xp = array_operand(op, x)
        return xp.unique_values(x)
    return _unique(op, x, "values").values


def isin(x1: Any, x2: Any, /, *, invert: bool = False, layout: Layout | None = None) -> Any:
    """Whether each element of ``x1`` is one of the elements of ``x2`` (the negation with ``invert=True``).

    A sparse ``x1`` gives a boolean array of its layout and structure (its fill value answers for the
    unspecified elements); a sparse ``x2`` stands for its stored values and, when it has unspecified
    elements, its fill value.

    Elements are compared by value equality (NaN is in nothing; ``-0.0`` is ``0.0``). The standard asks
    for integer operands; xsparse takes bool, integer and real floating ones on every backend with
    NumPy's answer (where the backend's ``isin`` refuses them, as array-api-strict's and torch's do for
    some, through a sort and a search of ``x2``), and refuses complex ones with a TypeError, as torch
    and array-api-strict do. ``invert`` must be a bool.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 2]], [4, 5], (4,))
    >>> r = xs.isin(a, np.asarray([0, 5]))
    >>> r.fill_value, r.to_dense().tolist()
    (True, [False, True, True, True])
    >>> xs.isin(np.asarray([0, 1, 4]), a).tolist()
    [True, False, True]
    """
    op = "isin"
    array_operand(op, x1)
    array_operand(op, x2)
    check_dtypes(op, x1, x2)
    invert = flag_argument(op, "invert", invert)
    backend = backend_of(x1, x2, op=op)
    xp = backend.load()
    if not isinstance(x1, SparseArray) and not isinstance(x2, SparseArray):
        return convert_result(isin_values(xp, x1, x2, invert), layout, op)
    result = dispatch.call(op, (layout_of(x1), layout_of(x2)), backend.name, xp, x1, x2, invert)
    return convert_result(result, layout, op)
