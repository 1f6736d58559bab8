"""Indexing and selection (``x[key]``, ``take``, ``select``, ``narrow``, ``sparse_mask``, ``where``), ``nonzero``,
``astype``, ``clone``, and torch's predicates.

Every operation dispatches on its operands' layouts. Indexing a sparse array returns a sparse array whose
fill value is the source's: COO is indexed on every dimension (torch slices only its dense dimensions), a
compressed array keeps its layout while both sparse dimensions are kept (sliced or not) and becomes COO
when one of them is selected away, and a full integer index gives a 0-d COO array (``sparse_dim`` 0), never
a backend scalar. ``layout=`` converts a result to another layout.
"""

from __future__ import annotations

import math
import operator
from typing import Any, NoReturn, cast

import array_api_compat

from . import dispatch
from ._common import backend_of, device_argument, dtype_name, flag_argument, integer_argument, is_strided, known_backend, resolve_dtype
from ._conversion import layout_of, to_dense, to_sparse
from ._elementwise import convert_result, operand_kind
from ._errors import DensificationError, LayoutError
from ._index_key import Slice, is_array_index, is_bool_dtype, is_integer_dtype, normalize_index, parse_key
from .backends import Backend
from .backends.array_api import indexing as _generic_indexing  # noqa: F401  (registers the kernels)
from .backends.array_api.elementwise import broadcast_shapes
from .formats import CompressedArray, Layout, SparseArray, sparse_coo, strided

__all__ = [
    "getitem",
    "take",
    "take_along_axis",
    "index_select",
    "select",
    "narrow",
    "sparse_mask",
    "where",
    "nonzero",
    "astype",
    "clone",
    "is_complex",
    "is_floating_point",
    "is_nonzero",
    "is_same_size",
    "is_signed",
]

_INT64_MAX = 2**63 - 1

_SCALARS = (bool, int, float, complex)


def _array(op: str, x: Any, name: str = "x") -> Any:
    """The backend and namespace of an array argument; a TypeError naming the fix for anything else."""
    if not isinstance(x, SparseArray) and not is_strided(x, op):
        raise TypeError(
            f"{op}: {name} must be an xsparse array or a backend array, got {type(x).__name__}. Create one first, e.g. "
            "with the backend's asarray or xsparse.sparse_coo_array(...)."
        )
    backend = backend_of(x, op=op)
    return backend, backend.load()


def _axis(op: str, axis: Any, ndim: int, name: str = "axis") -> int:
    a = integer_argument(op, name, axis, f"Pass an integer in [{-ndim}, {ndim}).")
    if not -ndim <= a < ndim:
        raise IndexError(
            f"{op}: {name} {a} is out of range for an array of {ndim} dimensions ({name}={a}, ndim={ndim}). "
            f"Pass an integer in [{-ndim}, {ndim})."
        )
    return a + ndim if a < 0 else a


# -- indexing ------------------------------------------------------------------------------------------


def getitem(x: Any, key: Any, /, *, layout: Layout | None = None) -> Any:
    """``x[key]``: integers, slices of any step (negative too), ``None`` and ``Ellipsis`` on every dimension;
    integer arrays; a boolean mask.

    Parameters
    ----------
    x
        An xsparse array or a backend array.
    key
        An integer, a slice, ``None``, ``Ellipsis``, or a tuple of them (multi-axis indexing). Or a tuple of
        integers and integer arrays, one per leading dimension (the standard's integer array indexing:
        they broadcast together, and ``x[i, j]`` gathers ``x[i[k], j[k]]`` for every position ``k`` of the
        broadcast shape; the dimensions after them are kept). Or a boolean array as the sole index (a
        mask over the leading dimensions, each of the mask's sizes equal to ``x``'s or 0; the selected
        elements in row-major order replace those dimensions). Index arrays may be strided or sparse: a
        sparse one is read as the positions it holds (densified, as an index operand is consumed whole).
        Lists are not valid indices (use :func:`take`).
    layout
        The layout of the result (default: see below).

    Returns
    -------
    array
        A sparse ``x`` gives a sparse array with ``x``'s fill value. COO stays COO, whatever is indexed. A
        compressed array keeps its layout when both sparse dimensions are kept (sliced or not; for BSR and
        BSC the sliced sizes must be whole blocks), and becomes COO when one of them is selected by an
        integer or split by ``None``. A full integer index gives a 0-d COO array with ``sparse_dim`` 0.
        Integer arrays and masks gather with :func:`take` along the leading dimensions merged into one
        (O(nnz log n + size of the result) for ``n`` positions): a compressed array keeps its layout
        when they index only batch dimensions, or when one 1-D index gathers the rows of an unbatched CSR
        or CSC array (``A[rows]``, as SciPy; O(rows + their entries) for CSR), and gives COO when they
        reach a sparse dimension otherwise.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> s = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3, 4, 5], (2, 3))
    >>> s[1].to_dense().tolist()
    [4, 0, 5]
    >>> s[:, ::-1].to_dense().tolist()
    [[3, 0, 0], [5, 0, 4]]
    >>> s[1, 2]
    sparse_array(indices=[], shape=(0, 1),
                 values=[5],
                 shape=(), nnz=1, dtype=int64, layout=sparse_coo, backend=numpy)
    >>> csr = s.to_sparse_csr()
    >>> csr[::-1, 1:].layout, csr[0].layout
    (xsparse.sparse_csr, xsparse.sparse_coo)
    >>> s[np.asarray([1, 0, 1]), np.asarray([2])].to_dense().tolist()
    [5, 3, 5]
    >>> s[np.asarray([[True, False, True], [False, False, True]])].to_dense().tolist()
    [0, 3, 5]
    """
    op = "getitem"
    backend, xp = _array(op, x)
    parts = key if isinstance(key, tuple) else (key,)
    if any(is_array_index(p) for p in parts):
        return convert_result(_getitem_arrays(op, backend, xp, x, parts), layout, op)
    items = parse_key(op, tuple(x.shape), key)
    if isinstance(x, SparseArray) and all(isinstance(it, Slice) and it.is_identity(x.shape[it.dim]) for it in items):
        return convert_result(x, layout, op)  # a sparse array is immutable: x[:, :] is x
    return convert_result(dispatch.call(op, (layout_of(x),), backend.name, xp, x, items), layout, op)


def _positions(op: str, x: Any, index: Any) -> Any:
    """An index array (strided or sparse) of ``x``'s backend as a strided array; sparse ones are densified,
    since an index array is consumed as the positions it holds, not as a sparse operand."""
    known = known_backend(x)
    if known is None or known_backend(index) is not known:
        backend_of(x, index, op=op)  # the full check, and its error for arrays of two backends
    return to_dense(index) if isinstance(index, SparseArray) else index


def _getitem_arrays(op: str, backend: Backend, xp: Any, x: Any, parts: tuple[Any, ...]) -> Any:
    """``x[parts]`` where a part is an array: a boolean mask (the sole index) or integers and integer arrays."""
    masks = [p for p in parts if is_array_index(p) and is_bool_dtype(p.dtype)]
    if masks:
        if len(parts) != 1:
            raise IndexError(
                f"{op}: a boolean array must be the sole index (key has {len(parts)} parts, mask.shape={tuple(masks[0].shape)}). "
                "Index the other dimensions in a second step, or expand dimensions with xsparse.expand_dims."
            )
        return _getitem_mask(op, xp, x, parts[0])
    if parts[-1] is Ellipsis:
        parts = parts[:-1]  # the kept trailing dimensions, which they are anyway
    n_indices = len(parts) - sum(p is Ellipsis for p in parts)
    if n_indices > x.ndim:
        raise IndexError(
            f"{op}: too many indices for an array of {x.ndim} dimensions (indices={n_indices}, shape={tuple(x.shape)}). "
            "Give at most one index per dimension."
        )
    if any(isinstance(p, slice) or p is None or p is Ellipsis for p in parts):
        return _getitem_array_among_slices(op, backend, xp, x, parts)
    columns: list[Any] = []
    is_array = [is_array_index(p) for p in parts]
    for d, p in enumerate(parts):
        size = x.shape[d]
        if not is_array[d]:
            columns.append(xp.asarray(normalize_index(op, p, size, d), dtype=xp.int64, device=_device_of(x)))
            continue
        ind = _positions(op, x, p)
        if not is_integer_dtype(ind.dtype):
            raise IndexError(
                f"{op}: an index array must have an integer or boolean dtype (dtype={dtype_name(ind.dtype)}, dim={d}). "
                "Cast it with xsparse.astype(index, 'int64')."
            )
        columns.append(_int64_indices(op, xp, ind, x.shape[d], d))
    shapes = {tuple(c.shape) for c in columns}
    try:
        shape = shapes.pop() if len(shapes) == 1 else broadcast_shapes(op, *(tuple(c.shape) for c in columns))
    except ValueError:
        raise IndexError(
            f"{op}: the index arrays do not broadcast together (shapes={[tuple(c.shape) for c in columns]}). Pass arrays "
            "of broadcast-compatible shapes."
        ) from None
    if math.prod(shape):
        # as NumPy, arrays whose broadcast is empty gather nothing and are not bounds-checked
        columns = [_in_bounds(op, backend, xp, c, x.shape[d], d) if is_array[d] else c for d, c in enumerate(columns)]
    flat = [c if tuple(c.shape) == shape and len(shape) == 1 else xp.reshape(xp.broadcast_to(c, shape), (-1,)) for c in columns]
    return _gather_points(x, flat, shape)


def _getitem_array_among_slices(op: str, backend: Backend, xp: Any, x: Any, parts: tuple[Any, ...]) -> Any:
    """``x[..., :, index, :, ...]``: one integer array among slices (and an Ellipsis); its dimensions replace
    the one it indexes, as in NumPy (SciPy's ``A[:, cols]``). The slices apply first, then :func:`take`:
    a compressed array keeps its layout, except where the index reaches a sparse dimension and is not 1-D
    or the array is blocked (COO then, as for integer arrays alone)."""
    from ._shape import reshape

    if sum(p is Ellipsis for p in parts) == 1:
        at = next(d for d, p in enumerate(parts) if p is Ellipsis)
        parts = (*parts[:at], *(slice(None),) * (x.ndim - len(parts) + 1), *parts[at + 1 :])
    arrays = [d for d, p in enumerate(parts) if is_array_index(p)]
    if len(arrays) != 1 or not all(isinstance(p, slice) or is_array_index(p) for p in parts):
        bad = next(p for p in parts if not (isinstance(p, slice) or is_array_index(p))) if len(arrays) == 1 else parts
        raise IndexError(
            f"{op}: an integer array combines either with slices (one array, and at most one Ellipsis) or with "
            f"integers and other arrays, not both (key={bad!r}). Index in two steps: the arrays first, then apply "
            "slices, None or Ellipsis to the result."
        )
    d = arrays[0]
    ind = _positions(op, x, parts[d])
    if not is_integer_dtype(ind.dtype):
        raise IndexError(
            f"{op}: an index array must have an integer or boolean dtype (dtype={dtype_name(ind.dtype)}, dim={d}). "
            "Cast it with xsparse.astype(index, 'int64')."
        )
    ishape = tuple(ind.shape)
    flat = _in_bounds(op, backend, xp, xp.reshape(_int64_indices(op, xp, ind, x.shape[d], d), (-1,)), x.shape[d], d)
    if isinstance(x, CompressedArray) and x.batch_dim() <= d < x.batch_dim() + 2 and (len(ishape) != 1 or x.layout.is_blocked):
        x = to_sparse(x, layout=sparse_coo)
    sliced = getitem(x, tuple(slice(None) if e == d else p for e, p in enumerate(parts)))
    out = take(sliced, flat, axis=d)
    if len(ishape) == 1:
        return out
    shape = tuple(out.shape)
    return reshape(out, (*shape[:d], *ishape, *shape[d + 1 :]))


def _getitem_mask(op: str, xp: Any, x: Any, mask: Any) -> Any:
    """``x[mask]``: the mask's true positions (in row-major order) gathered from the leading dimensions."""
    from ._shape import expand_dims

    mshape, shape = tuple(mask.shape), tuple(x.shape)
    if len(mshape) > len(shape) or any(m not in (s, 0) for m, s in zip(mshape, shape)):
        raise IndexError(
            f"{op}: the boolean mask does not fit the leading dimensions of the array (mask.shape={mshape}, shape={shape}). "
            "Pass a mask whose sizes equal the array's first ones (or are 0)."
        )
    backend_of(x, mask, op=op)
    if not mshape:
        # a 0-d mask adds a leading dimension of size 1 (true) or 0 (false)
        keep = 1 if bool(mask) else 0
        return getitem(expand_dims(x, axis=0), slice(0, keep))
    if math.prod(mshape) == 0:
        empty = xp.zeros((0,), dtype=xp.int64, device=_device_of(x))
        return _gather_points(x, [empty] * len(mshape), (0,))
    if isinstance(mask, SparseArray) and not mask.fill_value:
        coords = nonzero(mask)  # only the specified elements can be true
    else:
        coords = tuple(xp.nonzero(_positions(op, x, mask)))
    return _gather_points(x, [xp.astype(c, xp.int64) for c in coords], (int(coords[0].shape[0]),))


def _device_of(x: Any) -> Any:
    return x.device if isinstance(x, SparseArray) else array_api_compat.device(x)


def _gather_points(x: Any, positions: list[Any], shape: tuple[int, ...]) -> Any:
    """The sub-arrays of ``x`` at ``positions`` (k 1-D int64 arrays, in bounds, over its first k dimensions),
    with the leading result dimensions ``shape``: the ``gather_points`` kernels of a sparse ``x``."""
    if isinstance(x, SparseArray):
        backend = backend_of(x, op="getitem")
        return dispatch.call("gather_points", (layout_of(x),), backend.name, backend.load(), x, positions, shape)
    return gather_by_take(x, positions, shape)


def gather_by_take(x: Any, positions: list[Any], shape: tuple[int, ...]) -> Any:
    """:func:`_gather_points` by :func:`take` along the first k dimensions merged into one.

    A compressed array whose batch dimensions hold the positions keeps its layout, and so does an unblocked
    one gathered along its first sparse dimension by one 1-D index (SciPy's ``A[rows]``, :func:`take`); one
    indexed on a sparse dimension otherwise is converted to COO first (as an integer index makes it).
    """
    k = len(positions)
    lead, rest = tuple(x.shape[:k]), tuple(x.shape[k:])
    along_first = k == 1 and len(shape) == 1 and isinstance(x, CompressedArray) and not x.layout.is_blocked
    if isinstance(x, CompressedArray) and k > x.batch_dim() and not along_first:
        x = to_sparse(x, layout=sparse_coo)
    if k > 1 and math.prod(lead) > _INT64_MAX:
        # positions past int64 (a 2**40 x 2**40 array): each indexed dimension is first cut down to the
        # distinct positions it is indexed at, which the points then index
        backend = backend_of(x, op="take")
        xp = backend.load()
        positions = list(positions)
        for d in range(k):
            distinct, positions[d] = xp.unique_inverse(positions[d])
            x = dispatch.call("take", (layout_of(x),), backend.name, xp, x, distinct, d)
        lead = tuple(x.shape[:k])
        if math.prod(lead) > _INT64_MAX:
            raise ValueError(
                f"getitem: the points index more positions than int64 can number (distinct indices per dimension: "
                f"{lead}). Index with fewer points at a time, and concatenate the results."
            )
    if k > 1:
        from ._shape import reshape

        stride, lin = 1, None
        for d in range(k - 1, -1, -1):
            term = positions[d] * stride
            lin = term if lin is None else lin + term
            stride *= lead[d]
        x = reshape(x, (math.prod(lead), *rest))
        index = lin
    else:
        index = positions[0]
    backend = backend_of(x, op="take")
    # the positions are in bounds already: take's kernels, without its checks
    out = dispatch.call("take", (layout_of(x),), backend.name, backend.load(), x, index, 0)
    if shape == tuple(out.shape[:1]):
        return out
    from ._shape import reshape

    return reshape(out, (*shape, *rest))


def select(x: Any, dim: int, index: int, /, *, layout: Layout | None = None) -> Any:
    """torch's ``select``: ``x`` at ``index`` of dimension ``dim``, which disappears (``x[..., index, ...]``).

    Examples
    --------
    >>> import xsparse as xs
    >>> s = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3, 4, 5], (2, 3))
    >>> xs.select(s, 1, -1).to_dense().tolist()
    [3, 5]
    """
    op = "select"
    _array(op, x)
    d = _axis(op, dim, x.ndim, "dim")
    normalize_index(op, index, x.shape[d], d)
    return getitem(x, (slice(None),) * d + (index,), layout=layout)


def narrow(x: Any, dim: int, start: int, length: int, /, *, layout: Layout | None = None) -> Any:
    """torch's ``narrow``: ``length`` consecutive indices of dimension ``dim`` from ``start`` (negative counts
    from the end).

    Examples
    --------
    >>> import xsparse as xs
    >>> s = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3, 4, 5], (2, 3))
    >>> xs.narrow(s, 1, 1, 2).to_dense().tolist()
    [[0, 3], [0, 5]]
    """
    op = "narrow"
    _array(op, x)
    d = _axis(op, dim, x.ndim, "dim")
    size = x.shape[d]
    start, length = (integer_argument(op, name, v, "Pass an integer, as torch does.") for name, v in (("start", start), ("length", length)))
    s = start + size if start < 0 else start
    if not 0 <= s <= size or length < 0 or s + length > size:
        raise IndexError(
            f"{op}: the range [start, start + length) must lie within dimension {d} of size {size} (start={start}, "
            f"length={length}, size={size}). Pass 0 <= start and start + length <= {size}."
        )
    return getitem(x, (slice(None),) * d + (slice(s, s + length),), layout=layout)


def take(x: Any, indices: Any, /, *, axis: int | None = None, layout: Layout | None = None) -> Any:
    """The elements of ``x`` at ``indices`` along ``axis`` (the Array API's ``take``; torch's ``index_select``).

    Parameters
    ----------
    x
        An xsparse array or a backend array.
    indices
        A 1-D integer array (or list) of indices into dimension ``axis``; negative ones count from the end;
        repeats are allowed. A sparse array is read as the positions it holds (densified: an index
        array is consumed whole, it is not a sparse operand).
    axis
        The dimension; required unless ``x`` is 1-D.
    layout
        The layout of the result (default: ``x``'s; a blocked result needs whole blocks along a sparse
        dimension).

    Examples
    --------
    >>> import xsparse as xs
    >>> s = xs.sparse_csr_array([0, 2, 3], [0, 2, 1], [1, 2, 3], (2, 3))
    >>> r = xs.take(s, [2, 2, 0], axis=1)
    >>> r.layout, r.to_dense().tolist()
    (xsparse.sparse_csr, [[2, 2, 1], [0, 0, 0]])
    """
    return _take("take", x, indices, axis, layout)


def _take(op: str, x: Any, indices: Any, axis: int | None, layout: Layout | None) -> Any:
    """:func:`take`, with ``op`` (``take`` or ``index_select``) naming the function in errors."""
    backend, xp = _array(op, x)
    backend = backend_of(x, indices, op=op)
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"{op}: axis is required for an array of {x.ndim} dimensions (axis=None, ndim={x.ndim}). Pass axis=.")
        axis = 0
    ax = _axis(op, axis, x.ndim)
    ind = _index_array(op, backend, xp, indices, x.shape[ax], ax, x)
    return convert_result(dispatch.call("take", (layout_of(x),), backend.name, xp, x, ind, ax), layout, op)


def take_along_axis(x: Any, indices: Any, /, *, axis: int = -1, layout: Layout | None = None) -> Any:
    """The elements of ``x`` at ``indices`` along ``axis``, position by position (the Array API's ``take_along_axis``).

    Parameters
    ----------
    x
        An xsparse array or a backend array, with at least one dimension.
    indices
        An integer array of ``x``'s number of dimensions, broadcasting with ``x`` along every other
        axis; negative indices count from the end. A sparse array is read as the positions it holds
        (densified: an index array is consumed whole, it is not a sparse operand).
    axis
        The dimension the indices index.
    layout
        The layout of the result (default: ``x``'s where it can hold the result, see below).

    Returns
    -------
    array
        The result has the broadcast shape with ``indices``' size along ``axis``. A sparse ``x`` gives a
        sparse result with ``x``'s fill value whose specified elements are those read from specified ones
        (each result position is looked up: O(size of ``indices`` broadcast * log nnz), never the size of
        ``x``). A COO result has no dense dimensions (``x``'s are regrouped); a compressed array keeps its
        layout unless it has dense dimensions or a BSR/BSC result would split blocks, where the result
        goes through COO and warns.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> s = xs.sparse_csr_array([0, 2, 3], [0, 2, 1], [1, 2, 3], (2, 3))
    >>> r = xs.take_along_axis(s, np.asarray([[2, 2], [0, 1]]), axis=1)
    >>> r.layout, r.to_dense().tolist()
    (xsparse.sparse_csr, [[2, 2], [0, 3]])
    """
    op = "take_along_axis"
    backend, xp = _array(op, x)
    if isinstance(indices, SparseArray):
        indices = _positions(op, x, indices)
    if not is_strided(indices, op):
        raise TypeError(f"{op}: indices must be a backend integer array, got {type(indices).__name__}. Create it with the backend's asarray.")
    backend = backend_of(x, indices, op=op)
    if x.ndim == 0 or indices.ndim != x.ndim or not xp.isdtype(indices.dtype, "integral"):
        raise ValueError(
            f"{op}: indices must be an integer array with as many dimensions as x (x.ndim={x.ndim}, indices.ndim={indices.ndim}, "
            f"dtype={dtype_name(indices.dtype)}), and x at least one. Add axes of size 1 to indices with expand_dims."
        )
    ax = _axis(op, axis, x.ndim)
    shape, ishape = tuple(x.shape), tuple(indices.shape)
    if any(d != ax and 1 not in (s, k) and s != k for d, (s, k) in enumerate(zip(shape, ishape))):
        raise ValueError(
            f"{op}: the shapes of x and indices do not broadcast outside axis {ax} (shape={shape}, indices.shape={ishape}). "
            "Make every other size equal, or 1."
        )
    ind = _in_bounds(op, backend, xp, _int64_indices(op, xp, indices, shape[ax], ax), shape[ax], ax)
    return convert_result(dispatch.call(op, (layout_of(x),), backend.name, xp, x, ind, ax), layout, op)


_NOT_INTEGERS = "{op}: indices must be a 1-D integer array (shape={shape}, dtype={dtype}). Pass a 1-D array or list of integers."


def _index_array(op: str, backend: Backend, xp: Any, indices: Any, size: int, axis: int, x: Any) -> Any:
    """``indices`` as a 1-D int64 array of the backend, negative ones wrapped; IndexError when out of bounds."""
    if isinstance(indices, SparseArray):
        indices = _positions(op, x, indices)
    if isinstance(indices, (list, tuple)):
        # a Python integer that no int64 holds is out of bounds of every axis: said here, where the backends'
        # asarray would raise an overflow error of its own or make an array of objects
        huge = [i for i in indices if type(i) is int and not -(2**63) <= i < 2**63]
        if huge and all(type(i) is int for i in indices):
            _out_of_bounds(op, huge[0], size, axis)
        if huge:
            raise TypeError(_NOT_INTEGERS.format(op=op, shape=(len(indices),), dtype="object"))
    ind = indices if is_strided(indices) else xp.asarray(indices, device=_device_of(x))
    if ind.ndim != 1 or not (is_integer_dtype(ind.dtype) or ind.shape[0] == 0):
        raise TypeError(_NOT_INTEGERS.format(op=op, shape=tuple(ind.shape), dtype=dtype_name(ind.dtype)))
    return _in_bounds(op, backend, xp, _int64_indices(op, xp, ind, size, axis), size, axis)


def _int64_indices(op: str, xp: Any, ind: Any, size: int, axis: int) -> Any:
    """The integer indices ``ind`` as int64; IndexError for a uint64 one that int64 cannot hold, which the
    cast would wrap around to a negative index, in bounds (NumPy's own ``take`` reads ``x[-1]`` for 2**64 - 1)."""
    if dtype_name(ind.dtype) == "int64":
        return ind
    out = xp.astype(ind, xp.int64, copy=False)
    # the cast wraps 2**63 and above around to negatives (torch has no uint64 max to look first)
    if dtype_name(ind.dtype) == "uint64" and math.prod(tuple(ind.shape)) and int(xp.min(out)) < 0:
        _out_of_bounds(op, int(xp.min(out)) + 2**64, size, axis)
    return out


def _out_of_bounds(op: str, bad: int, size: int, axis: int) -> NoReturn:
    raise IndexError(
        f"{op}: index {bad} is out of bounds for axis {axis} of size {size} (index={bad}, axis={axis}, size={size}). "
        f"Use indices in [{-size}, {size})."
    )


def _in_bounds(op: str, backend: Backend, xp: Any, ind: Any, size: int, axis: int) -> Any:
    """The int64 indices ``ind`` into an axis of ``size``, negative ones wrapped; IndexError when out of bounds."""
    if not math.prod(tuple(ind.shape)):
        return ind
    lo, hi = backend.extrema(xp, ind)
    if lo < -size or hi >= size:
        _out_of_bounds(op, lo if lo < -size else hi, size, axis)
    return xp.where(ind < 0, ind + size, ind) if lo < 0 else ind


def index_select(x: Any, dim: int, index: Any, /, *, layout: Layout | None = None) -> Any:
    """torch's ``index_select``: :func:`take` along ``dim``.

    Examples
    --------
    >>> import xsparse as xs
    >>> s = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3, 4, 5], (2, 3))
    >>> xs.index_select(s, 0, [1, 1]).to_dense().tolist()
    [[4, 0, 5], [4, 0, 5]]
    """
    return _take("index_select", x, index, dim, layout)


def sparse_mask(x: Any, mask: SparseArray, /, *, layout: Layout | None = None) -> Any:
    """The elements of ``x`` at the specified positions of ``mask``, in ``mask``'s layout and structure.

    ``mask``'s values (and fill value) are ignored, as in torch; an uncoalesced COO mask is coalesced first.

    Parameters
    ----------
    x
        A strided or sparse array of ``mask``'s shape.
    mask
        A sparse array (COO, CSR, CSC, BSR or BSC) whose pattern selects the elements.
    layout
        The layout of the result (default: ``mask``'s).

    Returns
    -------
    SparseArray
        ``x``'s element at every position ``mask`` specifies (for BSR/BSC every element of its blocks), and
        ``x``'s fill value elsewhere: 0 for a strided ``x``, as in torch.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> mask = xs.sparse_csr_array([0, 1, 2], [1, 0], [True, True], (2, 2))
    >>> r = xs.sparse_mask(np.asarray([[1.0, 2.0], [3.0, 4.0]]), mask)
    >>> r.layout, r.values().tolist()
    (xsparse.sparse_csr, [2.0, 3.0])
    """
    op = "sparse_mask"
    _array(op, x)
    if not isinstance(mask, SparseArray):
        raise LayoutError(
            f"{op}: mask must be a sparse array, got {type(mask).__name__}. Convert it first, e.g. with xsparse.to_sparse(mask)."
        )
    if tuple(x.shape) != tuple(mask.shape):
        raise ValueError(f"{op}: x and mask must have the same shape (x.shape={tuple(x.shape)}, mask.shape={mask.shape}). Pass arrays of one shape.")
    backend = backend_of(x, mask, op=op)
    xp = backend.load()
    return convert_result(dispatch.call(op, (layout_of(x), mask.layout), backend.name, xp, x, mask), layout, op)


# -- where --------------------------------------------------------------------------------------


def _scalar_fits(xp: Any, value: Any, dtype: Any) -> bool:
    """Whether a Python scalar mixes with arrays of ``dtype`` under the Array API's rules."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return not xp.isdtype(dtype, "bool")
    if isinstance(value, float):
        return bool(xp.isdtype(dtype, ("real floating", "complex floating")))
    return bool(xp.isdtype(dtype, "complex floating"))


def _check_scalar(op: str, xp: Any, value: Any, other: Any, name: str) -> None:
    if isinstance(value, _SCALARS) and not isinstance(other, _SCALARS) and other is not None and not _scalar_fits(xp, value, other.dtype):
        raise TypeError(
            f"{op}: the Python scalar {name}={value!r} does not mix with the dtype {dtype_name(other.dtype)}. Pass a scalar "
            "of the array's kind, or an array of the dtype you want."
        )


def where(condition: Any, x1: Any, x2: Any, /, *, layout: Layout | None = None) -> Any:
    """Elements of ``x1`` where ``condition`` is true, of ``x2`` elsewhere.

    Parameters
    ----------
    condition
        A boolean array, strided or sparse.
    x1, x2
        Arrays (strided or sparse) or Python scalars, broadcast with ``condition``.
    layout
        The layout of the result (default: see below).

    Returns
    -------
    array
        Strided when any operand is strided (as sparse with strided is in torch). Otherwise (a sparse
        condition with sparse or scalar operands) sparse, in the condition's layout (COO when broadcasting
        changes the shape): the condition's fill value chooses the result's, ``x1``'s fill value when it is
        true and ``x2``'s when false, and the result specifies the union of the condition's pattern and that
        operand's. Sparse operands split otherwise into sparse and dense dimensions take the condition's
        split, as in the binary elementwise functions.

    Examples
    --------
    >>> import xsparse as xs
    >>> c = xs.sparse_coo_array([[0, 2]], [True, False], (4,))
    >>> x = xs.sparse_coo_array([[1, 2]], [5.0, 6.0], (4,), fill_value=-1.0)
    >>> r = xs.where(c, 9.0, x)
    >>> r.layout, r.fill_value, r.to_dense().tolist()
    (xsparse.sparse_coo, -1.0, [9.0, 5.0, 6.0, -1.0])
    """
    op = "where"
    kinds = (operand_kind(op, condition, "condition"), operand_kind(op, x1, "x1"), operand_kind(op, x2, "x2"))
    if kinds[0] == "scalar":
        raise TypeError(f"{op}: condition must be an array, got {type(condition).__name__}. Pass a boolean array.")
    backend = backend_of(condition, x1, x2, op=op)
    xp = backend.load()
    if not xp.isdtype(condition.dtype, "bool"):
        raise TypeError(
            f"{op}: condition must have dtype bool (dtype={dtype_name(condition.dtype)}). Compare first, e.g. "
            "xsparse.where(c != 0, x1, x2)."
        )
    _check_scalar(op, xp, x1, x2, "x1")
    _check_scalar(op, xp, x2, x1, "x2")
    broadcast_shapes(op, *(tuple(v.shape) for v in (condition, x1, x2) if not isinstance(v, _SCALARS)))
    return convert_result(dispatch.call(op, kinds, backend.name, xp, condition, x1, x2), layout, op)


# -- nonzero -------------------------------------------------------------------------------------------


def nonzero(x: Any, /) -> tuple[Any, ...]:
    """The indices of the non-zero elements, one backend array (int64) per dimension, in row-major order.

    The result is strided by definition (the Array API's), so there is no ``layout=``. For a sparse ``x``
    only the specified elements are read, which needs a fill value of 0: with any other fill value every
    unspecified element is non-zero, and the result would list the whole array.

    Examples
    --------
    >>> import xsparse as xs
    >>> s = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3, 0, 5], (2, 3))
    >>> [i.tolist() for i in xs.nonzero(s)]
    [[0, 1], [2, 2]]
    """
    op = "nonzero"
    backend, xp = _array(op, x)
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d array has no indices to return (shape={tuple(x.shape)}). Reshape it to 1-D first.")
    if isinstance(x, SparseArray) and (x.fill_value != 0 or x.fill_value != x.fill_value):
        raise DensificationError(
            f"{op}: every unspecified element equals the fill value, which is non-zero, so the result would list the "
            f"whole array (fill_value={x.fill_value!r}, shape={x.shape}). Use xsparse.nonzero(x != x.fill_value) for the "
            "elements that differ from it, or xsparse.nonzero(x.to_dense()) to list them all."
        )
    return cast("tuple[Any, ...]", dispatch.call(op, (layout_of(x),), backend.name, xp, x))


# -- astype and clone ------------------------------------------------------------------------------------


def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None, layout: Layout | None = None) -> Any:
    """``x`` with values (and fill value) cast to ``dtype``; a sparse array's indices are kept as they are.

    Parameters
    ----------
    x
        A strided or sparse array.
    dtype
        The target dtype (a backend dtype or its name).
    copy
        True (default): the result shares no buffer with ``x``. False: ``x`` itself when it already has
        ``dtype`` (and needs no move), else a sparse result shares ``x``'s index arrays.
    device
        Move the result to this device.
    layout
        The layout of the result (default: ``x``'s).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 2]], [1.5, -2.5], (4,), fill_value=3.0)
    >>> b = xs.astype(a, "int64")
    >>> b.fill_value, b.to_dense().tolist()
    (3, [1, 3, -2, 3])
    """
    op = "astype"
    backend, xp = _array(op, x)
    if dtype is None:
        raise TypeError(f"{op}: dtype is required (dtype=None). Pass the dtype to cast to, e.g. 'float32'.")
    dt = resolve_dtype(xp, dtype, op)
    copy = flag_argument(op, "copy", copy)
    device = device_argument(op, backend, device)
    src = x.dtype
    if xp.isdtype(src, "complex floating") and not xp.isdtype(dt, "complex floating"):
        # the Array API forbids it (complex to bool included), and NumPy warns
        raise TypeError(
            f"{op}: casting complex values to a real dtype drops their imaginary parts (dtype={dtype_name(src)}, "
            f"target={dtype_name(dt)}). Cast xsparse.real(x) or xsparse.abs(x) instead, or compare with x != 0 for booleans."
        )
    if isinstance(x, SparseArray) and xp.isdtype(dt, "integral"):
        fill = complex(x.fill_value)
        if not (math.isfinite(fill.real) and math.isfinite(fill.imag)):
            raise ValueError(
                f"{op}: the fill value has no integer representation (fill_value={x.fill_value!r}, target={dtype_name(dt)}). "
                "Convert with to_dense() and back with a finite fill value first."
            )
    if not copy and dtype_name(dt) == dtype_name(src) and device is None:
        return convert_result(x, layout, op)
    out = dispatch.call(op, (layout_of(x),), backend.name, xp, x, dt, copy)
    if device is not None:
        from ._conversion import to_backend

        out = to_backend(out, backend, device=device)
    return convert_result(out, layout, op)


def clone(x: Any, /, *, layout: Layout | None = None) -> Any:
    """A copy of ``x``: every component of a sparse array is copied, its metadata kept.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [5.0, 6.0])
    >>> b = xs.clone(a)
    >>> b.values() is a.values(), b.to_dense().tolist() == a.to_dense().tolist()
    (False, True)
    """
    op = "clone"
    backend, xp = _array(op, x)
    return convert_result(dispatch.call(op, (layout_of(x),), backend.name, xp, x), layout, op)


# -- predicates ------------------------------------------------------------------------------------------


def _dtype_is(op: str, x: Any, kinds: str | tuple[str, ...]) -> bool:
    _, xp = _array(op, x)
    return bool(xp.isdtype(x.dtype, kinds))


def is_complex(x: Any, /) -> bool:
    """Whether ``x``'s dtype is complex floating (torch's ``is_complex``).

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.is_complex(xs.sparse_coo_array([[0]], [1j], (2,)))
    True
    """
    return _dtype_is("is_complex", x, "complex floating")


def is_floating_point(x: Any, /) -> bool:
    """Whether ``x``'s dtype is real floating (torch's ``is_floating_point``).

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.is_floating_point(xs.sparse_coo_array([[0]], [1.0], (2,)))
    True
    """
    return _dtype_is("is_floating_point", x, "real floating")


def is_signed(x: Any, /) -> bool:
    """Whether ``x``'s dtype holds negative values: signed integers, real and complex floating (torch's ``is_signed``).

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.is_signed(xs.sparse_coo_array([[0]], [True], (2,)))
    False
    """
    return _dtype_is("is_signed", x, ("signed integer", "real floating", "complex floating"))


def is_same_size(x1: Any, x2: Any, /) -> bool:
    """Whether two arrays have the same shape (torch's ``is_same_size``).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> xs.is_same_size(xs.zeros((2, 3), layout=xs.sparse_csr), np.zeros((2, 3)))
    True
    """
    _array("is_same_size", x1, "x1")
    _array("is_same_size", x2, "x2")
    return tuple(x1.shape) == tuple(x2.shape)


def is_nonzero(x: Any, /) -> bool:
    """Whether the single element of ``x`` is non-zero (torch's ``is_nonzero``); ``x`` must hold one element.

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.is_nonzero(xs.sparse_coo_array([[0]], [0.0], (1,), fill_value=2.0))
    False
    >>> xs.is_nonzero(xs.zeros((1, 1), layout=xs.sparse_csr) + 1.0)
    True
    """
    op = "is_nonzero"
    _, xp = _array(op, x)
    if math.prod(tuple(x.shape)) != 1:
        raise ValueError(
            f"{op}: the array must hold exactly one element (size={math.prod(tuple(x.shape))}, shape={tuple(x.shape)}). "
            "Index one element first, e.g. xsparse.is_nonzero(x[0, 0])."
        )
    # one element: reading it densely copies nothing worth avoiding
    value = xp.reshape(to_dense(x), ())
    return bool(value) if xp.isdtype(value.dtype, "bool") else bool(value != 0)
