"""``searchsorted`` for strided and sparse arrays (the Array API's other searching functions, ``argmax``,
``argmin``, ``count_nonzero``, ``nonzero`` and ``where``, live with the reductions and indexing).

A sparse ``x2`` keeps its structure; a sparse ``x1`` (1-D) is searched without densifying it. Bool
operands are searched as their int8 twin (False before True), as xsparse sorts them: the standard's
``searchsorted`` asks for real-valued operands ("should"), array-api-strict and torch refuse bool, NumPy
takes it, and the same call now gives NumPy's result on every backend.
"""

from __future__ import annotations

from typing import Any

from . import dispatch
from ._common import backend_of, is_strided
from ._conversion import layout_of
from ._elementwise import check_dtypes, convert_result
from ._indexing import astype
from ._sorting import array_operand
from .backends.array_api import searching as _generic_searching  # noqa: F401  (registers the generic kernels)
from .backends.array_api.searching import search_values
from .formats import Layout, SparseArray

__all__ = ["searchsorted"]


def searchsorted(x1: Any, x2: Any, /, *, side: str = "left", sorter: Any = None, layout: Layout | None = None) -> Any:
    """The indices at which inserting the elements of ``x2`` keeps the sorted 1-D ``x1`` sorted.

    Parameters
    ----------
    x1
        A 1-D strided array, or a sparse COO vector, in ascending order (or put in order by ``sorter``), of
        a real or bool dtype (False sorts before True; NaN last, as :func:`xsparse.sort` puts it). Complex
        values, which have no order, raise TypeError on every backend.
    x2
        The values to place: a strided or sparse array, of a real or bool dtype.
    side
        ``"left"``: the first suitable index; ``"right"``: the last.
    sorter
        A strided integer array of indices that sort a strided ``x1`` (a list raises TypeError, as ``x1``
        and ``x2`` do). A sparse ``x1`` needs none: its result counts elements and so does not depend on
        their order.
    layout
        The result layout; by default ``x2``'s.

    Returns
    -------
    array
        Indices of ``x2``'s shape, of the default index dtype (int64). A sparse ``x2`` gives an array of its
        layout and structure whose fill value is the index of ``x2``'s fill value. Where ``x1`` or ``x2``
        is sparse the result is NumPy's on every backend, NaN included: a NaN query comes after every
        element but the NaNs (``"left"``) or after all of them (``"right"``). Two strided operands go to
        the backend's own ``searchsorted``.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> edges = np.asarray([0.0, 1.0, 2.0, 3.0])
    >>> v = xs.sparse_coo_array([[1, 3]], [2.5, -1.0], (5,), fill_value=1.5)
    >>> r = xs.searchsorted(edges, v)
    >>> r.fill_value, r.to_dense().tolist()
    (2, [2, 3, 2, 0, 2])
    >>> s = xs.sparse_coo_array([[3]], [2.0], (4,))
    >>> xs.searchsorted(s, np.asarray([-1.0, 0.0, 1.0]), side="right").tolist()
    [0, 3, 3]
    """
    op = "searchsorted"
    array_operand(op, x1)
    array_operand(op, x2)
    check_dtypes(op, x1, x2)
    if sorter is not None and not isinstance(sorter, SparseArray) and not is_strided(sorter, op):
        # as for x1 and x2 (and getitem's keys): a list is no array; the standard's sorter is an array
        raise TypeError(
            f"{op}: sorter must be a strided integer array, got {type(sorter).__name__} (sorter={sorter!r}). Pass "
            "xsparse.argsort(x1), or wrap the indices with the backend's asarray."
        )
    backend = backend_of(x1, x2, *(() if sorter is None else (sorter,)), op=op)
    xp = backend.load()
    if side not in ("left", "right"):
        raise ValueError(f"{op}: side must be 'left' or 'right' (side={side!r}). Pass one of them.")
    if x1.ndim != 1:
        raise ValueError(f"{op}: x1 must be 1-D (x1.shape={tuple(x1.shape)}). Search each row separately, or flatten x1.")
    if sorter is not None:
        if isinstance(sorter, SparseArray) or tuple(sorter.shape) != tuple(x1.shape) or not xp.isdtype(sorter.dtype, "integral"):
            raise ValueError(
                f"{op}: sorter must be a strided integer array of x1's shape (x1.shape={tuple(x1.shape)}, "
                f"sorter={type(sorter).__name__}). Pass xsparse.argsort(x1), or leave sorter out."
            )
        if isinstance(x1, SparseArray):
            sorter = None
        elif sorter.dtype != xp.int64:
            # torch takes no other sorter dtype ("sorter must be a tensor of long dtype")
            sorter = xp.astype(sorter, xp.int64)
    x1, x2 = (astype(v, xp.int8) if xp.isdtype(v.dtype, "bool") else v for v in (x1, x2))
    if not isinstance(x1, SparseArray) and not isinstance(x2, SparseArray):
        return convert_result(search_values(xp, x1, x2, side, sorter), layout, op)
    result = dispatch.call(op, (layout_of(x1), layout_of(x2)), backend.name, xp, x1, x2, side, sorter)
    return convert_result(result, layout, op)
