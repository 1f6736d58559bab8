"""Shape manipulation and joining: the Array API's functions, plus torch's and NumPy's extra names.

Every function takes strided and sparse arrays and dispatches on the operand's layout. A sparse
operand keeps its layout where the layout can hold the result (a compressed array's batch and dense
dimensions move on its components, its two sparse dimensions as a whole); elsewhere the declared
rewrite through COO computes a COO result and warns (:class:`~xsparse.SparseEfficiencyWarning`).
Nothing is densified: a dense dimension that has to move before a sparse one is *regrouped*, its
stored sub-arrays split into one entry per element. ``layout=`` converts the result to another layout.

``moveaxis`` is ``permute_dims``, ``unsqueeze`` is ``expand_dims``, and ``stack``, ``hstack``,
``vstack`` and ``dstack`` are ``expand_dims`` and ``concat``, so they use those operations' kernels;
``broadcast_arrays`` is ``broadcast_to``, ``unstack`` is ``getitem`` and ``diff`` is ``concat``,
``getitem`` and ``subtract``.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Sequence
from typing import Any

from . import dispatch
from ._common import backend_of, dtype_name, integer_argument, is_strided, scalar_for
from ._conversion import layout_of, to_dense, to_sparse
from ._dtypes import result_type
from ._elementwise import convert_result, converting_for, layout_argument, operand, subtract
from ._errors import DensificationError, LayoutError, NoKernelError, SparseEfficiencyWarning
from ._indexing import getitem
from .backends import Backend
from .backends.array_api import shape as _generic_shape  # noqa: F401  (registers the kernels)
from .backends.array_api.conversion import same_fill, summed_before_cast
from .backends.array_api.elementwise import broadcast_shapes as _broadcast_shapes
from .formats import COOArray, CompressedArray, Layout, SparseArray, sparse_coo, strided

__all__ = [
    "permute_dims",
    "moveaxis",
    "reshape",
    "expand_dims",
    "unsqueeze",
    "squeeze",
    "broadcast_to",
    "broadcast_arrays",
    "broadcast_shapes",
    "flip",
    "roll",
    "tile",
    "repeat",
    "unstack",
    "diff",
    "concat",
    "block_diag",
    "stack",
    "hstack",
    "vstack",
    "dstack",
]


# -- argument checks -------------------------------------------------------------------------------


def _operand(op: str, x: Any) -> tuple[Backend, Layout, Any]:
    """The backend, layout and namespace of one array operand."""
    backend, layout = operand(op, x)
    return backend, layout, backend.load()


def _axis(op: str, axis: Any, ndim: int, *, name: str = "axis", new: bool = False) -> int:
    """``axis`` as an index in ``[0, ndim)``, or in ``[0, ndim]`` for the position of a ``new`` dimension."""
    i = integer_argument(op, name, axis)
    n = ndim + 1 if new else ndim
    if not -n <= i < n:
        raise IndexError(
            f"{op}: {name} is out of range for an array of {ndim} dimensions ({name}={i}, ndim={ndim}). Pass an axis "
            f"in [{-n}, {n - 1}]." if n else f"{op}: a 0-d array has no axis ({name}={i}, ndim=0). Add a dimension first."
        )
    return i % n


def _axes(op: str, axes: Any, ndim: int, *, name: str = "axis") -> tuple[int, ...]:
    """``axes`` (an int or a sequence of ints) as distinct indices in ``[0, ndim)``."""
    items = (axes,) if not isinstance(axes, (tuple, list)) else tuple(axes)
    found = tuple(_axis(op, a, ndim, name=name) for a in items)
    if len(set(found)) != len(found):
        raise ValueError(f"{op}: {name} names a dimension twice ({name}={tuple(items)}, ndim={ndim}). Name each dimension once.")
    return found


def _shape_arg(op: str, shape: Any, *, name: str = "shape") -> tuple[int, ...]:
    items = (shape,) if not isinstance(shape, (tuple, list)) else tuple(shape)
    try:
        if any(isinstance(s, bool) for s in items):
            raise TypeError
        # a 1-D array has __index__ too, and NumPy's raises from it: only a 0-d one is a size
        return tuple(operator.index(s) for s in items)
    except TypeError:
        raise TypeError(f"{op}: {name} must be a tuple of integers ({name}={shape!r}). Pass sizes as ints.") from None


def _dispatch(op: str, x: Any, *args: Any, layout: Layout | None) -> Any:
    backend, source, xp = _operand(op, x)
    return convert_result(dispatch.call(op, (source,), backend.name, xp, x, *args), layout, op)


# -- permutations ----------------------------------------------------------------------------------


def permute_dims(x: Any, /, axes: Sequence[int], *, layout: Layout | None = None) -> Any:
    """Permute the dimensions of an array.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array.
    axes
        A permutation of ``range(x.ndim)`` (negative entries count from the end): dimension ``i`` of the
        result is dimension ``axes[i]`` of ``x``.
    layout
        The layout of the result (default: ``x``'s where it can hold the result, else ``sparse_coo``).

    Returns
    -------
    array
        A COO array permutes its index rows and value axes; the result is marked uncoalesced when the index
        rows move (as torch does). Dense dimensions moved before a sparse one become sparse: each stored
        sub-array is split into one entry per element. A compressed array permutes its batch dimensions
        (every component) and dense dimensions (the values), and swapping its two sparse dimensions is the
        CSR <-> CSC (BSR <-> BSC) view; a permutation that moves a dimension between these groups goes
        through COO, returns a COO array and warns with :class:`~xsparse.SparseEfficiencyWarning`.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1], [2, 0]], [1.0, 2.0], (2, 3), dtype="float64")
    >>> t = xs.permute_dims(a, (1, 0))
    >>> t.shape, t.layout
    ((3, 2), xsparse.sparse_coo)
    >>> xs.to_dense(t).tolist()
    [[0.0, 2.0], [0.0, 0.0], [1.0, 0.0]]
    >>> c = xs.to_sparse_csr(xs.to_dense(xs.stack([a, a])))
    >>> xs.permute_dims(c, (0, 2, 1)).layout
    xsparse.sparse_csc
    """
    op = "permute_dims"
    _operand(op, x)
    norm = _axes(op, axes, x.ndim, name="axes")
    if len(norm) != x.ndim:
        raise ValueError(
            f"{op}: axes must name each of the {x.ndim} dimensions once (axes={tuple(axes) if isinstance(axes, list) else axes!r}, "
            f"ndim={x.ndim}). Pass a permutation of range(ndim)."
        )
    return _dispatch(op, x, norm, layout=layout)


def moveaxis(
    x: Any, source: int | Sequence[int], destination: int | Sequence[int], /, *, layout: Layout | None = None
) -> Any:
    """Move dimensions of an array to new positions, keeping the order of the others.

    ``moveaxis`` is :func:`permute_dims` with the permutation that moves ``source`` to ``destination``;
    see there for how each layout permutes.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1], [2, 0], [1, 1]], [1, 2], (2, 3, 2))
    >>> xs.moveaxis(a, 0, -1).shape
    (3, 2, 2)
    >>> xs.to_dense(xs.moveaxis(a, 0, -1))[2, 1].tolist()
    [1, 0]
    """
    op = "moveaxis"
    _operand(op, x)
    src = _axes(op, source, x.ndim, name="source")
    dst = _axes(op, destination, x.ndim, name="destination")
    if len(src) != len(dst):
        raise ValueError(
            f"{op}: source and destination must name as many dimensions (source={source!r}, destination={destination!r}). "
            "Pass one destination per source."
        )
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute_dims(x, tuple(order), layout=layout)


def swap_dims(x: Any, dim0: int, dim1: int, /, *, layout: Layout | None = None) -> Any:
    """Swap two dimensions (torch's ``transpose(dim0, dim1)``, the method ``SparseArray.transpose``).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1], [2, 0], [1, 1]], [1, 2], (2, 3, 2))
    >>> a.transpose(0, 2).shape
    (2, 3, 2)
    >>> xs.to_dense(a.transpose(-1, 1)).shape
    (2, 2, 3)
    """
    op = "transpose"
    _operand(op, x)
    order = list(range(x.ndim))
    i, j = _axis(op, dim0, x.ndim, name="dim0"), _axis(op, dim1, x.ndim, name="dim1")
    order[i], order[j] = order[j], order[i]
    return permute_dims(x, tuple(order), layout=layout)


# -- reshaping -------------------------------------------------------------------------------------


def _resolve_shape(op: str, shape: tuple[int, ...], old: tuple[int, ...]) -> tuple[int, ...]:
    size = math.prod(old)
    unknown = [i for i, s in enumerate(shape) if s == -1]
    if len(unknown) > 1 or any(s < -1 for s in shape):
        raise ValueError(f"{op}: shape may hold one -1 and otherwise non-negative sizes (shape={shape}). Fix the sizes.")
    known = math.prod(s for s in shape if s != -1)
    if unknown:
        if known == 0:
            raise ValueError(f"{op}: -1 is ambiguous in a shape with a zero size (shape={shape}, size={size}). Give every size.")
        if size % known:
            raise ValueError(f"{op}: cannot reshape an array of shape {old} into shape {shape} (size={size}). Keep the number of elements.")
        return tuple(size // known if s == -1 else s for s in shape)
    if known != size:
        raise ValueError(f"{op}: cannot reshape an array of shape {old} into shape {shape} (size={size}). Keep the number of elements.")
    return shape


def reshape(x: Any, /, shape: Sequence[int], *, copy: bool | None = None, layout: Layout | None = None) -> Any:
    """Give an array a new shape with the same elements in row-major order.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array.
    shape
        The new shape; one entry may be -1.
    copy
        ``True`` never shares components with ``x``; ``False`` shares them or raises ``ValueError``;
        ``None`` (default) shares them where it can.
    layout
        The layout of the result (default: ``x``'s where it can hold the result, else ``sparse_coo``).

    Returns
    -------
    array
        A COO array reshapes its sparse dimensions by linearising the indices and its dense dimensions
        among themselves (dense dimensions the reshape merges with sparse ones become sparse; the dense
        shape is kept where the new shape ends with it). A compressed array reshapes its batch and dense dimensions in place (a view); a new
        shape that changes its two sparse dimensions goes through COO, returns a COO array and warns with
        :class:`~xsparse.SparseEfficiencyWarning`.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1], [2, 0]], [1, 2], (2, 3), is_coalesced=True)
    >>> r = xs.reshape(a, (3, 2))
    >>> r.indices().tolist()
    [[1, 1], [0, 1]]
    >>> xs.to_dense(r).tolist()
    [[0, 0], [1, 2], [0, 0]]
    """
    op = "reshape"
    _operand(op, x)
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"{op}: copy must be True, False or None (copy={copy!r}). Pass a bool or None.")
    new = _resolve_shape(op, _shape_arg(op, shape), tuple(x.shape))
    return _dispatch(op, x, new, copy, layout=layout)


def expand_dims(x: Any, /, axis: int = 0, *, layout: Layout | None = None) -> Any:
    """Insert a dimension of size 1 at ``axis`` (in ``[-x.ndim - 1, x.ndim]``).

    A COO array gets a new sparse dimension when ``axis <= sparse_dim()`` (an index row of zeros, as
    torch's ``unsqueeze``) and a new dense dimension otherwise. A compressed array gets a new batch
    dimension up to its sparse dimensions and a new dense dimension after them; a new dimension between
    its two sparse dimensions goes through COO, returns a COO array and warns.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [1.0, 2.0], dtype="float64")
    >>> e = xs.expand_dims(a, axis=0)
    >>> e.shape, e.layout, e.crow_indices().tolist()
    ((1, 2, 2), xsparse.sparse_csr, [[0, 1, 2]])
    """
    op = "expand_dims"
    _operand(op, x)
    norm = _axis(op, axis, x.ndim, new=True)
    return _dispatch(op, x, norm, layout=layout)


def unsqueeze(x: Any, /, dim: int, *, layout: Layout | None = None) -> Any:
    """torch's name for :func:`expand_dims`: insert a dimension of size 1 at ``dim``.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 2]], [1, 2], (3,))
    >>> xs.unsqueeze(a, 1).shape, xs.unsqueeze(a, 1).sparse_dim()
    ((3, 1), 2)
    """
    return expand_dims(x, axis=dim, layout=layout)


def squeeze(x: Any, /, axis: int | Sequence[int] | None = None, *, layout: Layout | None = None) -> Any:
    """Remove dimensions of size 1 (``axis``; all of them when ``axis`` is None, as in torch).

    A COO array drops index rows (all zero) and value axes. A compressed array drops batch dimensions
    and dense dimensions; removing one of its two sparse dimensions goes through COO, returns a COO array
    and warns.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 0], [0, 2]], [1, 2], (1, 3))
    >>> s = xs.squeeze(a, axis=0)
    >>> s.shape, xs.to_dense(s).tolist()
    ((3,), [1, 0, 2])
    """
    op = "squeeze"
    _operand(op, x)
    shape = tuple(x.shape)
    axes = tuple(d for d, s in enumerate(shape) if s == 1) if axis is None else _axes(op, axis, x.ndim)
    for d in axes:
        if shape[d] != 1:
            raise ValueError(f"{op}: dimension {d} has size {shape[d]}, not 1 (axis={axis!r}, shape={shape}). Squeeze only dimensions of size 1.")
    return _dispatch(op, x, tuple(sorted(axes)), layout=layout)


def broadcast_to(x: Any, /, shape: Sequence[int], *, layout: Layout | None = None) -> Any:
    """Broadcast an array to ``shape`` (the Array API's rules).

    A COO array repeats its entries along new leading and size-1 sparse dimensions and broadcasts its
    values along size-1 dense dimensions; a compressed array copies its components along new and size-1
    batch dimensions, broadcasts its values along size-1 dense dimensions, and repeats its elements along
    a size-1 sparse dimension. The result holds every repeated element: it is as large as the broadcast
    array's specified part, with the layout (and fill value) of ``x``.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[1]], [5], (3,))
    >>> b = xs.broadcast_to(a, (2, 3))
    >>> b.nnz, xs.to_dense(b).tolist()
    (2, [[0, 5, 0], [0, 5, 0]])
    """
    op = "broadcast_to"
    _operand(op, x)
    new = _shape_arg(op, shape)
    old = tuple(x.shape)
    lead = len(new) - len(old)
    if lead < 0 or any(s < 0 for s in new) or any(o not in (1, n) for o, n in zip(old, new[lead:])):
        raise ValueError(
            f"{op}: an array of shape {old} does not broadcast to shape {new} (shape={new}). Every dimension must equal "
            "the new one or be 1, and the new shape may only add leading dimensions."
        )
    return _dispatch(op, x, new, layout=layout)


def flip(x: Any, /, *, axis: int | Sequence[int] | None = None, layout: Layout | None = None) -> Any:
    """Reverse the order of the elements along ``axis`` (every axis when None).

    A COO array mirrors its index rows and flips its value axes (the result is marked uncoalesced unless
    no sparse dimension or every sparse dimension is flipped). A compressed array flips its batch and
    dense axes and, along a sparse dimension, reverses its compressed counts and reorders its elements
    so that every slice stays sorted; blocks are flipped inside too. The layout is kept.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 3], [2, 0, 1], [1, 2, 3], shape=(2, 3))
    >>> f = xs.flip(a, axis=1)
    >>> f.col_indices().tolist(), f.values().tolist()
    ([0, 1, 2], [1, 3, 2])
    """
    op = "flip"
    _operand(op, x)
    axes = tuple(range(x.ndim)) if axis is None else _axes(op, axis, x.ndim)
    return _dispatch(op, x, tuple(sorted(axes)), layout=layout)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The shape that arrays of ``shapes`` broadcast to (the Array API's rules).

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.broadcast_shapes((2, 1, 3), (4, 1), ())
    (2, 4, 3)
    """
    op = "broadcast_shapes"
    resolved = [_shape_arg(op, s) for s in shapes]
    for s in resolved:
        if any(n < 0 for n in s):
            raise ValueError(f"{op}: a shape has a negative size (shape={s}). Pass non-negative sizes.")
    return _broadcast_shapes(op, *resolved) if resolved else ()


def broadcast_arrays(*arrays: Any, layout: Layout | None = None) -> list[Any]:
    """Broadcast arrays against each other: :func:`broadcast_to` of each to their common shape.

    Each result keeps its array's layout and fill value (``layout=`` converts every one of them).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[1]], [5], (3,))
    >>> s, d = xs.broadcast_arrays(a, np.zeros((2, 1)))
    >>> s.layout, s.shape, d.shape
    (xsparse.sparse_coo, (2, 3), (2, 3))
    """
    op = "broadcast_arrays"
    layout = layout_argument(op, layout)
    for a in arrays:
        _operand(op, a)
    if arrays:
        backend_of(*arrays, op=op)
    shape = broadcast_shapes(*(tuple(a.shape) for a in arrays))
    return [broadcast_to(a, shape, layout=layout) for a in arrays]


def roll(
    x: Any, /, shift: int | Sequence[int], *, axis: int | Sequence[int] | None = None, layout: Layout | None = None
) -> Any:
    """Shift the elements of an array along ``axis`` cyclically (of the flattened array for None).

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array.
    shift
        The number of places to shift by: an int, or one per axis of a tuple ``axis`` (an int shifts
        every axis by as much; an axis named twice shifts by the sum).
    axis
        The axis or axes; None rolls the flattened array and restores the shape.
    layout
        The layout of the result (default: ``x``'s).

    Returns
    -------
    array
        ``x``'s layout and fill value. COO moves the index rows of the rolled sparse dimensions (the
        entries stay unique, and are marked uncoalesced) and rolls its values along dense ones; with
        ``axis=None`` its dense dimensions become sparse (regrouped). A compressed array rolls its
        components along batch and dense dimensions and recompresses its elements along the sparse
        ones (a BSR/BSC array rolled by a part of a block stores the blocks it then touches); rolling
        the flattened hybrid compressed array goes through COO and warns.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [0, 2], [1, 2], shape=(2, 3))
    >>> r = xs.roll(a, 1, axis=1)
    >>> r.layout, r.to_dense().tolist()
    (xsparse.sparse_csr, [[0, 1, 0], [2, 0, 0]])
    >>> xs.roll(a, -1).to_dense().tolist()
    [[0, 0, 0], [0, 2, 1]]
    """
    op = "roll"
    _operand(op, x)
    shape = tuple(x.shape)
    if axis is None:
        if isinstance(shift, (tuple, list)):
            raise TypeError(f"{op}: shift must be one int when axis is None (shift={shift!r}). Pass an int, or name the axes.")
        size = math.prod(shape)
        if size > 2**63 - 1 and isinstance(x, SparseArray):
            # the flattened positions are int64 keys
            raise ValueError(
                f"{op}: the flattened array has more positions than an int64 holds (shape={shape}, size={size}). Roll "
                "along named axes instead (axis=...)."
            )
        return _dispatch(op, x, (integer_argument(op, "shift", shift) % size if size else 0,), None, layout=layout)
    axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    norm = [_axis(op, a, x.ndim) for a in axes]
    if isinstance(shift, (tuple, list)):
        if len(shift) != len(norm):
            raise ValueError(
                f"{op}: shift and axis must have one entry per axis (shift={tuple(shift)}, axis={tuple(axes)}). Pass as many "
                "shifts as axes, or one int."
            )
        shifts = [integer_argument(op, "shift", s) for s in shift]
    else:
        shifts = [integer_argument(op, "shift", shift)] * len(norm)
    total: dict[int, int] = {}
    for d, s in zip(norm, shifts):
        total[d] = total.get(d, 0) + s
    moved = sorted((d, s % shape[d]) for d, s in total.items() if shape[d] and s % shape[d])
    return _dispatch(op, x, tuple(s for _, s in moved), tuple(d for d, _ in moved), layout=layout)


def tile(x: Any, repetitions: Sequence[int], /, *, layout: Layout | None = None) -> Any:
    """Repeat a whole array ``repetitions[i]`` times along each dimension ``i``.

    With fewer repetitions than dimensions the leading ones repeat once; with more, ``x`` gets leading
    dimensions of size 1 first (:func:`expand_dims`: new sparse dimensions of a COO array, new batch
    dimensions of a compressed one).

    Returns
    -------
    array
        ``x``'s layout and fill value, holding every copy's elements: COO copies its entries (shifted)
        and tiles its values along dense dimensions; a compressed array tiles its components along
        batch and dense dimensions and recompresses its elements along the sparse ones.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 1], [1], [7], shape=(2, 2))
    >>> t = xs.tile(a, (1, 2))
    >>> t.layout, t.to_dense().tolist()
    (xsparse.sparse_csr, [[0, 7, 0, 7], [0, 0, 0, 0]])
    >>> xs.tile(a, (2, 1, 1)).shape
    (2, 2, 2)
    """
    op = "tile"
    _operand(op, x)
    if not isinstance(repetitions, (tuple, list)):
        raise TypeError(f"{op}: repetitions must be a tuple of integers (repetitions={repetitions!r}). Pass e.g. (2, 1).")
    reps = tuple(integer_argument(op, "repetitions", r) for r in repetitions)
    if any(r < 0 for r in reps):
        raise ValueError(f"{op}: repetitions must be non-negative (repetitions={reps}). Pass counts >= 0.")
    for _ in range(len(reps) - x.ndim):
        x = expand_dims(x, axis=0)
    return _dispatch(op, x, (1,) * (x.ndim - len(reps)) + reps, layout=layout)


def _repeats(op: str, xp: Any, x: Any, repeats: Any, size: int) -> Any:
    """``repeats`` as a non-negative int, or a 1-D int64 array of ``size`` entries of the backend."""
    if isinstance(repeats, SparseArray) and repeats.ndim:
        # counts are consumed whole, as index arrays are: reading them densely is not densifying an operand
        repeats = to_dense(repeats)
    # a 0-d array (a NumPy integer among them) is one count, as a 0-d sparse one is
    if is_strided(repeats, op) and repeats.ndim:
        if repeats.ndim != 1 or not xp.isdtype(repeats.dtype, "integral"):
            raise TypeError(
                f"{op}: repeats must be an int or a 1-D integer array (shape={tuple(repeats.shape)}, "
                f"dtype={dtype_name(repeats.dtype)}). Pass one count, or one per element along the axis."
            )
        if repeats.shape[0] not in (1, size):
            raise ValueError(
                f"{op}: repeats must hold one count or one per element along the axis (len(repeats)={repeats.shape[0]}, "
                f"size={size}). Pass {size} counts."
            )
        if repeats.shape[0] and int(xp.min(repeats)) < 0:
            raise ValueError(f"{op}: repeats must be non-negative (min={int(xp.min(repeats))}). Pass counts >= 0.")
        return int(repeats[0]) if repeats.shape[0] == 1 else xp.astype(repeats, xp.int64)
    count = integer_argument(op, "repeats", repeats)
    if count < 0:
        raise ValueError(f"{op}: repeats must be non-negative (repeats={count}). Pass a count >= 0.")
    return count


def repeat(x: Any, repeats: Any, /, *, axis: int | None = None, layout: Layout | None = None) -> Any:
    """Repeat each element of an array along ``axis`` (of the flattened array for None).

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array.
    repeats
        The number of repetitions of every element (an int or a 0-d integer array), or of each element
        along ``axis`` (a 1-D integer array of that length, or of length 1). A sparse array is read as
        the counts it holds (densified: a count array is consumed whole, it is not a sparse operand).
    axis
        The axis; None flattens ``x`` first and gives a 1-D result.
    layout
        The layout of the result (default: ``x``'s where it can hold the result; COO for ``axis=None``).

    Returns
    -------
    array
        With ``x``'s fill value. COO repeats its entries along a sparse dimension and its values along a
        dense one; a compressed array repeats its components along batch and dense dimensions and
        recompresses its elements along the sparse ones (a BSR/BSC result whose repeated size is not a
        whole number of blocks goes through COO and warns).

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [5, 6], shape=(2, 2))
    >>> r = xs.repeat(a, 2, axis=1)
    >>> r.layout, r.to_dense().tolist()
    (xsparse.sparse_csr, [[0, 0, 5, 5], [6, 6, 0, 0]])
    >>> xs.repeat(a, np.asarray([0, 3]), axis=0).to_dense().tolist()
    [[6, 0], [6, 0], [6, 0]]
    >>> xs.repeat(a, 2).layout
    xsparse.sparse_coo
    """
    op = "repeat"
    backend, _, xp = _operand(op, x)
    if is_strided(repeats, "repeat") or isinstance(repeats, SparseArray):
        backend_of(x, repeats, op=op)
    ax = None if axis is None else _axis(op, axis, x.ndim)
    size = math.prod(tuple(x.shape)) if ax is None else x.shape[ax]
    return _dispatch(op, x, _repeats(op, xp, x, repeats, size), ax, layout=layout)


def unstack(x: Any, /, *, axis: int = 0, layout: Layout | None = None) -> tuple[Any, ...]:
    """Split an array into the tuple of its slices along ``axis``, which they lose.

    Each slice is ``x[..., i, ...]`` (:func:`~xsparse.getitem`): a sparse slice keeps ``x``'s fill value,
    and its layout where it can (a compressed array unstacked along a batch or dense dimension); a
    compressed array unstacked along a sparse dimension gives COO slices. O(size along axis * nnz).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 1], [2, 0]], [1, 2], (2, 3))
    >>> [r.to_dense().tolist() for r in xs.unstack(a)]
    [[0, 0, 1], [2, 0, 0]]
    >>> c = xs.stack([a.to_sparse_csr(), a.to_sparse_csr()])
    >>> [r.layout for r in xs.unstack(c)]
    [xsparse.sparse_csr, xsparse.sparse_csr]
    """
    op = "unstack"
    _operand(op, x)
    layout = layout_argument(op, layout)
    ax = _axis(op, axis, x.ndim)
    lead = (slice(None),) * ax
    return tuple(getitem(x, (*lead, i), layout=layout) for i in range(x.shape[ax]))


def diff(
    x: Any, /, *, axis: int = -1, n: int = 1, prepend: Any = None, append: Any = None, layout: Layout | None = None
) -> Any:
    """The ``n``-th forward difference along ``axis``: ``x[..., 1:] - x[..., :-1]``, ``n`` times.

    Parameters
    ----------
    x
        A strided (backend) array or an xsparse array of a numeric dtype, with at least one dimension.
    axis
        The axis of the differences.
    n
        How many times to take them; 0 returns ``x`` itself, ``prepend`` and ``append`` ignored (as NumPy,
        torch and array-api-strict do).
    prepend, append
        Arrays joined to ``x`` along ``axis`` first (:func:`concat` in ``x``'s layout); their shapes must
        agree with ``x``'s except along ``axis``.
    layout
        The layout of the result (default: ``x``'s; see below).

    Returns
    -------
    array
        The differences of two slices are :func:`~xsparse.subtract` of sparse arrays: the result holds
        the union of their specified elements, and its fill value is ``fill - fill`` (0 for a finite
        fill value, NaN for an infinite one). A BSR/BSC array differenced along a sparse dimension is
        computed (and returned) as COO, since a shift by one element splits its blocks; so is one with a
        sparse ``prepend`` or ``append`` split into sparse and dense dimensions otherwise than ``x``
        (with a :class:`~xsparse.SparseEfficiencyWarning`, as :func:`concat` joins such operands).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[0, 2]], [1, 4], (4,), fill_value=1)
    >>> d = xs.diff(a)
    >>> d.fill_value, d.to_dense().tolist()
    (0, [0, 3, -3])
    >>> xs.diff(a, n=2).to_dense().tolist()
    [3, -6]
    """
    op = "diff"
    backend, source, xp = _operand(op, x)
    if x.ndim == 0:
        raise ValueError(f"{op}: a 0-d array has no axis to take differences along (shape=()). Reshape it to one dimension first.")
    if not xp.isdtype(x.dtype, "numeric"):
        raise TypeError(
            f"{op}: the array must have a numeric dtype (dtype={dtype_name(x.dtype)}). Compare neighbours with "
            "xsparse.not_equal on slices, or cast with xsparse.astype first."
        )
    times = integer_argument(op, "n", n)
    if times < 0:
        raise ValueError(f"{op}: n must be non-negative (n={times}). Pass the number of differences, 0 or more.")
    ax = _axis(op, axis, x.ndim)
    if times == 0:
        return convert_result(x, layout, op)
    if isinstance(x, CompressedArray) and x.layout.is_blocked and x.batch_dim() <= ax < x.batch_dim() + 2:
        # a shift by one element splits the blocks: difference the elements
        x, source = to_sparse(x, layout=sparse_coo), sparse_coo
    like = x if isinstance(x, CompressedArray) and x.batch_dim() else None
    if prepend is not None or append is not None:
        splits = [a.dense_dim() for a in (prepend, append) if isinstance(a, SparseArray)]
        if isinstance(x, SparseArray) and any(d != x.dense_dim() for d in splits):
            # x's layout could hold the joined array only with one of the splits: the elements are joined and
            # differenced in COO, which holds both (as concat joins operands split differently)
            warnings.warn(
                f"{op}: prepend or append is split into sparse and dense dimensions otherwise than x (dense_dims="
                f"{splits}, x.dense_dim()={x.dense_dim()}); computing the differences as sparse_coo arrays instead. Give "
                f"them x's split (xsparse.to_sparse(a, layout=x.layout, dense_dim={x.dense_dim()})) to keep x's layout.",
                SparseEfficiencyWarning,
                stacklevel=2,
            )
            x, source, like = to_sparse(x, layout=sparse_coo), sparse_coo, None
        elif like is not None:
            # the joined batches may hold unequal numbers of elements, which a compressed array cannot
            # (invariant 3.9): join and difference the elements, then pad the batches, as the differences
            # of x alone are padded
            x, source = to_sparse(x, layout=sparse_coo), sparse_coo
        x = concat([a for a in (prepend, x, append) if a is not None], axis=ax, layout=source)
    lead = (slice(None),) * ax
    for _ in range(times):
        x = subtract(getitem(x, (*lead, slice(1, None))), getitem(x, (*lead, slice(None, -1))))
    if like is not None and isinstance(x, COOArray):
        x = _generic_shape.as_layout_of(backend.load(), x, like, op)
    return convert_result(x, layout, op)


# -- joining ---------------------------------------------------------------------------------------


def _arrays(op: str, arrays: Any) -> list[Any]:
    if isinstance(arrays, SparseArray) or is_strided(arrays, op) or not isinstance(arrays, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of arrays, got {type(arrays).__name__}. Pass [a, b, ...].")
    if not arrays:
        raise ValueError(f"{op}: needs at least one array (arrays=[]). Pass a non-empty list of arrays.")
    for a in arrays:
        _operand(op, a)
    return list(arrays)


def _holds(layout: Layout, blocksize: tuple[int, int] | None, shape: tuple[int, ...], dense_dim: int) -> str | None:
    """Why a ``layout`` array (of ``blocksize``) cannot hold an array of ``shape`` whose last ``dense_dim``
    dimensions are dense, or None: a compressed one needs two sparse dimensions before the dense ones,
    each a whole number of blocks."""
    if not layout.is_compressed:
        return None
    rows = len(shape) - dense_dim - 2
    if rows < 0:
        return f"a {layout} array needs 2 sparse dimensions before its dense ones"
    bm, bn = blocksize if blocksize is not None else (1, 1)
    if shape[rows] % bm or shape[rows + 1] % bn:
        return f"the blocksize {blocksize} does not divide the sparse dimensions {tuple(shape[rows : rows + 2])}"
    return None


def _join_operands(
    op: str, xp: Any, arrays: list[Any], target: Layout, shape: tuple[int, ...], explicit: bool
) -> tuple[Layout, list[Any]]:
    """The layout to join in and the operands in it, with one dtype and one fill value (or an error saying
    why not): ``target``, or COO (with a warning) where a ``target`` array cannot hold an operand with its
    split into sparse and dense dimensions. ``shape`` is the result's; ``explicit``: ``target`` was asked for."""
    first = arrays[0]
    if isinstance(first, SparseArray) and all(
        isinstance(a, SparseArray) and a.layout is target and a.dtype == first.dtype and a.dense_dim() == first.dense_dim()
        and type(a.fill_value) is type(first.fill_value) and same_fill(a.fill_value, first.fill_value)
        and (not target.is_blocked or getattr(a, "blocksize", None) == getattr(first, "blocksize", None))
        for a in arrays
    ):  # fmt: skip
        # operands alike already (layout, dtype, split, fill value, block shape): nothing to convert or check
        return target, list(arrays)
    sparse = [a for a in arrays if isinstance(a, SparseArray)]
    fills = [a.fill_value for a in sparse]
    # +0.0 and -0.0 are two fill values (docs/decisions.md, "Signed zeros")
    if not all(same_fill(f, fills[0]) for f in fills):
        raise DensificationError(
            f"{op}: the sparse operands have different fill values (fill_values={fills}), which one sparse result cannot "
            "hold without storing every unspecified element of all but one. Give them one fill value (to_dense() and "
            "to_sparse(..., fill_value=...)), or pass layout=xsparse.strided for a dense result."
        )
    # the standard's promotion table, which torch's promote_types lacks for its uint16/32/64
    dtype = result_type(*arrays)
    fill = scalar_for(xp, dtype, fills[0])
    blocked = [a for a in sparse if isinstance(a, CompressedArray) and a.layout.is_blocked]
    if target.is_blocked and not blocked:
        layouts = [str(layout_of(a)) for a in arrays]
        raise ValueError(
            f"{op}: layout={target} needs a block shape, and no operand has one (layouts={layouts}). Convert an operand "
            f"with xsparse.to_{target}(a, blocksize=(rows, columns)) first."
        )
    blocksize = blocked[0].blocksize if target.is_blocked else None
    # conversions keep a sparse operand's dense dimensions, and the result has the fewest of them
    dense_dim = min(a.dense_dim() for a in sparse)
    if explicit and (why := _holds(target, blocksize, shape, dense_dim)) is not None:
        raise ValueError(
            f"{op}: a {target} result cannot hold the joined array, {why} (shape={shape}, dense_dim={dense_dim}"
            f"{'' if blocksize is None else f', blocksize={blocksize}'}). Pass layout=xsparse.sparse_coo, or give the "
            f"operands a split that a {target} array holds first."
        )
    dense_dims = [a.dense_dim() if isinstance(a, SparseArray) else dense_dim for a in arrays]
    # sparse operands split differently, one of them in another layout (a hybrid CSR array and a COO one of its
    # shape): converted with its own split, it would be a batched array, whose batches may not hold one nnz.
    # (Operands all in the layout go to its join kernel, which declines a mix of splits: the declared rewrite.)
    splits_differ = (
        target is not sparse_coo and len({a.dense_dim() for a in sparse}) > 1 and any(a.layout is not target for a in sparse)
    )
    if splits_differ or any(_holds(target, blocksize, tuple(a.shape), d) is not None for a, d in zip(arrays, dense_dims)):
        # the declared rewrite (docs/decisions.md, "Compressed joins keep the layout on every axis")
        warnings.warn(
            f"{op}: a {target} array cannot hold every operand with its own split into sparse and dense dimensions "
            f"({'the splits differ; ' if splits_differ else ''}dense_dims={dense_dims}, shapes={[tuple(a.shape) for a in arrays]}"
            f"{'' if blocksize is None else f', blocksize={blocksize}'}); joining them as sparse_coo arrays instead. Pass "
            f"layout=xsparse.sparse_coo to join in COO without this warning, or give the operands splits that a {target} "
            "array holds.",
            SparseEfficiencyWarning,
            stacklevel=3,
        )
        target, blocksize = sparse_coo, None
    with converting_for(op, target, "an operand"):
        converted = {id(a): to_sparse(a, layout=target, blocksize=blocksize) for a in sparse}
    index_dtype = next(c.index_dtype for c in converted.values() if isinstance(c, (COOArray, CompressedArray)))
    out = []
    for a in arrays:
        if isinstance(a, SparseArray):
            c = summed_before_cast(xp, converted[id(a)], dtype)
            if c.dtype != dtype or type(c.fill_value) is not type(fill):
                c = c._with_values(xp.astype(c._vals, dtype), fill)
        else:
            c = to_sparse(
                a if a.dtype == dtype else xp.astype(a, dtype), layout=target, dense_dim=min(dense_dim, a.ndim), blocksize=blocksize,
                index_dtype=index_dtype, fill_value=fill,
            )  # fmt: skip
        out.append(c)
    return target, out


def _strided_first(op: str, items: list[Any], first_sparse: SparseArray) -> DensificationError:
    """The error of a join whose result would take a strided first operand's layout and densify the others."""
    return DensificationError(
        f"{op}: the first operand is strided and another is {first_sparse.layout}, so a result in the first's layout "
        f"would densify it (layouts={[str(layout_of(a)) for a in items]}). Pass layout=xsparse.strided to densify "
        f"explicitly, or a sparse layout such as layout=xsparse.{first_sparse.layout}."
    )


def concat(arrays: Sequence[Any], /, *, axis: int | None = 0, layout: Layout | None = None) -> Any:
    """Join arrays along an existing dimension (every layout, batched and hybrid included).

    Parameters
    ----------
    arrays
        Arrays of one number of dimensions whose shapes agree except along ``axis``; strided and sparse
        arrays of any layouts may be mixed.
    axis
        The dimension to join along; ``None`` flattens every array first (as ``reshape(a, (-1,))``).
    layout
        The layout of the result, in which the operands are joined. By default the first operand's: the
        other operands are converted to it (a strided one keeps the elements that differ from the fill
        value). A strided first operand with sparse others is an error unless ``layout`` says which.
        Operands that the layout cannot hold with their own split into sparse and dense dimensions are
        joined as COO arrays, with :class:`~xsparse.SparseEfficiencyWarning`.

    Returns
    -------
    array
        The dtype is the operands' promoted one; the sparse operands must share their fill value, which
        the result keeps (different fill values would densify: an error says what to do). COO joins
        along a sparse dimension by offsetting the indices and along a dense one by aligning the entries.
        CSR/BSR join along rows (CSC/BSC along columns) by concatenating the compressed slices, along the
        other sparse dimension by merging every slice, along a batch dimension by concatenating the
        components (every batch must then hold one number of elements, as for every batched compressed
        array: join COO arrays otherwise), along a dense dimension on the union of the specified blocks.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [1, 2])
    >>> b = xs.sparse_csr_array([0, 1, 1], [0], [3], shape=(2, 2))
    >>> xs.to_dense(xs.concat([a, b], axis=1)).tolist()
    [[0, 1, 3, 0], [2, 0, 0, 0]]
    >>> r = xs.concat([a, b], axis=0)
    >>> r.layout, r.crow_indices().tolist()
    (xsparse.sparse_csr, [0, 1, 2, 3, 3])
    """
    op = "concat"
    items = _arrays(op, arrays)
    layout = layout_argument(op, layout)
    backend = backend_of(*items, op=op)
    xp = backend.load()
    if axis is None:
        items = [reshape(a, (-1,)) for a in items]
        axis = 0
    ndim = items[0].ndim
    if any(a.ndim != ndim for a in items):
        raise ValueError(
            f"{op}: the arrays must have one number of dimensions (ndims={[a.ndim for a in items]}). Add dimensions with "
            "expand_dims first, or use stack to join along a new one."
        )
    ax = _axis(op, axis, ndim)
    rest = {tuple(s for d, s in enumerate(a.shape) if d != ax) for a in items}
    if len(rest) > 1:
        raise ValueError(
            f"{op}: the shapes must agree except along axis {ax} (shapes={[tuple(a.shape) for a in items]}, axis={axis}). "
            "Make the other sizes equal."
        )
    sparse = [a for a in items if isinstance(a, SparseArray)]
    if layout is strided:
        # asked for: densify every operand explicitly
        items, sparse = [to_dense(a) for a in items], []
    if not sparse:
        return convert_result(dispatch.call(op, (strided,), backend.name, xp, items, ax), layout, op)
    if layout is None and not isinstance(items[0], SparseArray):
        raise _strided_first(op, items, sparse[0])
    target = layout if layout is not None else items[0].layout
    if not dispatch.resolve(op, (target,), backend.name):
        # the semi-structured layout: converting the operands to it first would fail with that conversion's error
        raise NoKernelError(
            f"{op}: no kernel joins {target} arrays on backend '{backend.name}' (layouts={[str(layout_of(a)) for a in items]}, "
            f"layout={layout}). Pass a layout to join in, e.g. layout=xsparse.sparse_csr, or convert the operands first."
        )
    shape = tuple(sum(a.shape[ax] for a in items) if d == ax else size for d, size in enumerate(items[0].shape))
    joined, operands = _join_operands(op, xp, items, target, shape, layout is not None)
    result = dispatch.call(op, (joined,), backend.name, xp, operands, ax)
    if layout is not None and layout.is_blocked and isinstance(result, COOArray):
        # joined through COO: the result takes the block shape of the first blocked operand, as the operands do
        blocksize = next(a.blocksize for a in items if isinstance(a, CompressedArray) and a.layout.is_blocked)
        return to_sparse(result, layout=layout, blocksize=blocksize)
    return convert_result(result, layout, op)


def block_diag(*arrays: Any, layout: Layout | None = None) -> Any:
    """A block-diagonal matrix of the arrays (torch's ``block_diag``, SciPy's ``scipy.sparse.block_diag``).

    Parameters
    ----------
    *arrays
        Matrices, strided or sparse of any layouts but semi-structured, of one backend; a 0-d array
        counts as a 1 x 1 matrix and a 1-D array of ``n`` elements as a 1 x n one, as in torch.
    layout
        The layout of the result. By default the first array's, as for :func:`concat`: a strided first
        array with sparse others is an error unless ``layout`` says which (``layout=xsparse.strided``
        densifies explicitly).

    Returns
    -------
    array
        ``(sum of rows, sum of columns)``, the arrays along the diagonal in order and zeros elsewhere, in
        the operands' promoted dtype. The blocks off the diagonal are unspecified, so every sparse array
        must have fill value 0 (another would densify: an error says what to do); a strided array keeps its
        elements that are not 0, as in :func:`concat`. A hybrid COO matrix's dense dimension is regrouped.
        The indices are int64 where an array's are, otherwise int32 where that addresses the result. A
        blocked result takes the block shape of the first blocked array, which must divide every array.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [1.0, 2.0], (2, 2))
    >>> d = xs.block_diag(a, np.asarray([[3.0, 0.0, 4.0]]))
    >>> d.layout, d.crow_indices().tolist(), xs.to_dense(d).tolist()
    (xsparse.sparse_csr, [0, 1, 2, 4], [[0.0, 1.0, 0.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 3.0, 0.0, 4.0]])
    """
    op = "block_diag"
    if not arrays:
        raise ValueError(f"{op}: needs at least one array (arrays=()). Pass the matrices as arguments, block_diag(a, b, ...).")
    for a in arrays:
        _operand(op, a)
    layout = layout_argument(op, layout)
    backend = backend_of(*arrays, op=op)
    xp = backend.load()
    items = []
    for a in arrays:
        if a.ndim > 2:
            raise ValueError(
                f"{op}: every array must have 2 dimensions or fewer (shapes={[tuple(x.shape) for x in arrays]}). Pass "
                "matrices, or join batches with concat."
            )
        items.append(a if a.ndim == 2 else reshape(a, (1, int(a.shape[0]) if a.ndim == 1 else 1)))
    shape = (sum(int(a.shape[0]) for a in items), sum(int(a.shape[1]) for a in items))
    dtype = result_type(*items)
    if layout is strided:
        items = [to_dense(a) for a in items]  # asked for: densify every operand explicitly
    sparse = [a for a in items if isinstance(a, SparseArray)]
    if (not sparse and layout is None) or layout is strided:
        strided_items = [xp.astype(a, dtype, copy=False) for a in items]
        return dispatch.call(op, (strided,), backend.name, xp, strided_items, shape)
    if layout is None and not isinstance(items[0], SparseArray):
        raise _strided_first(op, items, sparse[0])
    target = layout if layout is not None else items[0].layout
    if not dispatch.resolve("convert", (sparse_coo, target), backend.name):
        raise NoKernelError(
            f"{op}: no kernel builds a {target} result on backend '{backend.name}' (layouts={[str(layout_of(a)) for a in items]}, "
            f"layout={layout}). Pass another layout, e.g. layout=xsparse.sparse_csr."
        )
    for i, a in enumerate(items):
        if isinstance(a, SparseArray) and not same_fill(a.fill_value, scalar_for(xp, a.dtype, 0)):
            raise DensificationError(
                f"{op}: the blocks off the diagonal are zeros, and array {i} has fill value {a.fill_value!r}, which one "
                "sparse result cannot hold as well without storing every unspecified element. Give it fill value 0 "
                "(to_dense() and to_sparse(...)), or pass layout=xsparse.strided for a dense result."
            )
    blocksize = None
    if target.is_blocked:
        blocked = [a for a in sparse if isinstance(a, CompressedArray) and a.layout.is_blocked]
        if not blocked:
            raise ValueError(
                f"{op}: layout={target} needs a block shape, and no array has one (layouts={[str(layout_of(a)) for a in items]}). "
                f"Convert an array with xsparse.to_{target}(a, blocksize=(rows, columns)) first."
            )
        blocksize = blocked[0].blocksize
        if any(a.shape[0] % blocksize[0] or a.shape[1] % blocksize[1] for a in items):
            raise ValueError(
                f"{op}: the block shape {blocksize} of a {target} result must divide every array (shapes="
                f"{[tuple(a.shape) for a in items]}). Pass layout=xsparse.sparse_csr, or arrays of whole blocks."
            )
    # int32 only where every sparse array has it (strided arrays alone take to_sparse's int64)
    index_dtype = "int64" if not sparse or any(dtype_name(getattr(a, "index_dtype", "int32")) == "int64" for a in sparse) else "int32"
    alike = target.is_compressed and all(
        isinstance(a, CompressedArray) and a.layout is target and a.blocksize == (blocksize or (1, 1)) for a in items
    )
    join = target if alike else sparse_coo
    operands = []
    for a in items:
        if isinstance(a, SparseArray):
            # a compressed matrix has no dense dimension; a hybrid COO one is regrouped by the kernel
            c = a if a.layout is join else to_sparse(a, layout=join)
            c = summed_before_cast(xp, c, dtype)
            if c.dtype != dtype:
                c = c._with_values(xp.astype(c._vals, dtype), scalar_for(xp, dtype, 0))
        else:
            c = to_sparse(xp.astype(a, dtype, copy=False), layout=join, index_dtype=index_dtype)
        operands.append(c)
    result = dispatch.call(op, (join,), backend.name, xp, operands, shape)
    if result.layout is not target:
        with converting_for(op, target, "the result"):
            result = to_sparse(result, layout=target, blocksize=blocksize)
    return result


def stack(arrays: Sequence[Any], /, *, axis: int = 0, layout: Layout | None = None) -> Any:
    """Join arrays of one shape along a new dimension ``axis`` (in ``[-ndim - 1, ndim]``).

    ``stack`` is :func:`expand_dims` of every array followed by :func:`concat`: 2-D CSR arrays stacked
    along axis 0 give a batched CSR array (whose batches must hold one number of elements), along the
    last axis a hybrid one with a dense dimension.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [1, 2])
    >>> b = xs.sparse_csr_array([0, 1, 2], [0, 0], [3, 4], shape=(2, 2))
    >>> s = xs.stack([a, b])
    >>> s.shape, s.layout, s.crow_indices().tolist()
    ((2, 2, 2), xsparse.sparse_csr, [[0, 1, 2], [0, 1, 2]])
    """
    op = "stack"
    items = _arrays(op, arrays)
    layout = layout_argument(op, layout)
    # checked here, so that a mismatch names this function, not the concat it runs
    backend_of(*items, op=op)
    shapes = {tuple(a.shape) for a in items}
    if len(shapes) > 1:
        raise ValueError(f"{op}: the arrays must have one shape (shapes={[tuple(a.shape) for a in items]}). Make the shapes equal.")
    ax = _axis(op, axis, items[0].ndim, new=True)
    # a layout whose arrays take no new dimension (semi-structured: one 2-D matrix) is converted first,
    # to the layout asked for (through COO, which takes one), or named here rather than in expand_dims
    flat = [isinstance(a, SparseArray) and not dispatch.resolve("expand_dims", (a.layout,), a._backend.name) for a in items]
    if any(flat):
        fixed = next(a for a, f in zip(items, flat) if f)
        if layout is None:
            raise NoKernelError(
                f"{op}: {fixed.layout} arrays take no new dimension (layouts={[str(layout_of(a)) for a in items]}). Pass a "
                "layout to stack in, e.g. layout=xsparse.sparse_csr, or convert the operands first."
            )
        items = [(to_dense(a) if layout is strided else to_sparse(a, layout=sparse_coo)) if f else a for a, f in zip(items, flat)]
    return concat([expand_dims(a, axis=ax) for a in items], axis=ax, layout=layout)


def _at_least(op: str, arrays: Any, ndim: int, where: tuple[int, ...]) -> list[Any]:
    """Every array with size-1 dimensions added at ``where`` until it has ``ndim`` dimensions (NumPy's atleast_nd)."""
    out = []
    for a in _arrays(op, arrays):
        for axis in where[a.ndim :][: max(ndim - a.ndim, 0)]:
            a = expand_dims(a, axis=axis)
        out.append(a)
    return out


def hstack(arrays: Sequence[Any], /, *, layout: Layout | None = None) -> Any:
    """Join arrays column-wise: along axis 1, or axis 0 for 1-D arrays (NumPy's and torch's ``hstack``).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [1, 2])
    >>> xs.to_dense(xs.hstack([a, a])).tolist()
    [[0, 1, 0, 1], [2, 0, 2, 0]]
    """
    items = _at_least("hstack", arrays, 1, (0,))
    return concat(items, axis=0 if items[0].ndim == 1 else 1, layout=layout)


def vstack(arrays: Sequence[Any], /, *, layout: Layout | None = None) -> Any:
    """Join arrays row-wise, along axis 0, 1-D arrays as rows (NumPy's and torch's ``vstack``).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_coo_array([[1]], [7], (3,))
    >>> xs.to_dense(xs.vstack([a, a])).tolist()
    [[0, 7, 0], [0, 7, 0]]
    """
    # (3,) -> (1, 3); a 0-d array -> (1,) -> (1, 1)
    return concat(_at_least("vstack", arrays, 2, (0, 0)), axis=0, layout=layout)


def dstack(arrays: Sequence[Any], /, *, layout: Layout | None = None) -> Any:
    """Join arrays depth-wise, along axis 2 (NumPy's and torch's ``dstack``): ``(N,)`` counts as
    ``(1, N, 1)`` and ``(M, N)`` as ``(M, N, 1)``. 2-D CSR arrays give a hybrid CSR array.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [1, 2])
    >>> d = xs.dstack([a, a])
    >>> d.shape, d.layout, d.dense_dim()
    ((2, 2, 2), xsparse.sparse_csr, 1)
    """
    # () -> (1,) -> (1, 1) -> (1, 1, 1); (N,) -> (1, N) -> (1, N, 1); (M, N) -> (M, N, 1)
    return concat(_at_least("dstack", arrays, 3, (0, 0, 2)), axis=2, layout=layout)
