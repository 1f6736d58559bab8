"""Constructors of sparse arrays from components, and creation functions with ``layout=``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import array_api_compat

from . import dispatch
from ._common import backend_of, dtype_name, is_strided, resolve_dtype, scalar_for
from ._errors import InvariantError, LayoutError
from .backends import Backend
from .formats._ops import contiguous
from .formats import (
    COOArray,
    CompressedArray,
    Layout,
    SparseArray,
    sparse_bsc,
    sparse_bsr,
    sparse_coo,
    sparse_csc,
    sparse_csr,
    strided,
)

__all__ = [
    "sparse_coo_array",
    "sparse_compressed_array",
    "sparse_csr_array",
    "sparse_csc_array",
    "sparse_bsr_array",
    "sparse_bsc_array",
    "zeros",
    "empty",
    "ones",
    "full",
    "eye",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "spdiags",
]


def _not_sparse(op: str, invariant: str, name: str, obj: Any) -> None:
    # A sparse component would otherwise reach xp.asarray, which densifies it or fails deep inside.
    if isinstance(obj, SparseArray):
        raise InvariantError(
            invariant,
            f"{op}: {name} must be a strided array of the backend, got {type(obj).__name__} ({obj.layout}). "
            f"Pass its components, or xsparse.to_dense({name}) if a dense array is meant.",
        )


def _index_array(op: str, name: str, xp: Any, obj: Any, device: Any, invariant: str) -> Any:
    """An index component on the backend: arrays keep their dtype (int32 or int64), lists become int64."""
    _not_sparse(op, invariant, name, obj)
    if is_strided(obj):
        arr = xp.asarray(obj, device=device) if device is not None else obj
    else:
        try:
            # Without dtype=, so that a list of floats is refused below instead of truncated to integers.
            arr = xp.asarray(obj, device=device)
            if not xp.isdtype(arr.dtype, ("bool", "numeric")):  # NumPy's object or str arrays
                raise TypeError(f"the list holds {dtype_name(arr.dtype)} elements")
        except (TypeError, ValueError, OverflowError) as exc:
            raise TypeError(
                f"{op}: {name} must be an integer array or a nested list of integers ({exc}). Pass a rectangular "
                "nested list of Python ints, or an int32 or int64 array."
            ) from None
        if 0 in tuple(arr.shape) or xp.isdtype(arr.dtype, "integral"):
            arr = xp.astype(arr, xp.int64)
    if dtype_name(arr.dtype) not in ("int32", "int64"):
        raise InvariantError(
            "1.3",
            f"{op}: {name} must have dtype int32 or int64, got {dtype_name(arr.dtype)}. Cast it, e.g. with "
            f"xp.astype({name}, xp.int64).",
        )
    return arr


def _value_array(op: str, xp: Any, obj: Any, dtype: Any, device: Any) -> Any:
    _not_sparse(op, "2.3", "values", obj)
    if is_strided(obj):
        arr = obj
        if dtype is not None and dtype_name(arr.dtype) != dtype_name(dtype):
            arr = xp.astype(arr, dtype)
        if device is not None:
            arr = xp.asarray(arr, device=device)
        return arr
    return xp.asarray(obj, dtype=dtype, device=device)


def _contiguous(backend: Backend, xp: Any, x: Any) -> Any:
    return contiguous(backend, xp, x)


def _default_float(xp: Any) -> Any:
    """The backend's default real floating dtype (float64 for NumPy, torch's default dtype for torch)."""
    return xp.__array_namespace_info__().default_dtypes()["real floating"]


def _fill(xp: Any, dtype: Any, fill_value: Any) -> Any:
    return scalar_for(xp, dtype, fill_value)


def _shape_arg(op: str, shape: Any) -> tuple[int, ...] | None:
    if shape is None:
        return None
    try:
        return tuple(int(s) for s in shape)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: shape must be a sequence of integers, got {shape!r}. Pass a tuple such as (2, 3).") from None


def sparse_coo_array(
    indices: Any = None,
    values: Any = None,
    shape: Sequence[int] | None = None,
    *,
    dtype: Any = None,
    device: Any = None,
    backend: str | Backend | None = None,
    check_invariants: bool | None = None,
    is_coalesced: bool | None = None,
    fill_value: Any = 0,
) -> COOArray:
    """A sparse COO array from its indices ``(sparse_dim, nse)`` and values ``(nse, *dense_shape)``.

    Parameters
    ----------
    indices
        Integer array (int32 or int64) or nested list, one row per sparse dimension. Lists become int64.
    values
        Array or nested list of ``nse`` values (or dense sub-arrays); a scalar gives every entry that value.
    shape
        The array's shape; inferred when omitted (sparse sizes ``indices.max(axis=1) + 1``, dense sizes
        from ``values``). With ``indices`` and ``values`` omitted, an empty array of this shape.
    dtype, device
        Of the values (cast / moved when given).
    backend
        The backend for list and scalar inputs (default: the inputs' backend, else the default backend).
    check_invariants
        Run the checks that read index data (default: as the :class:`check_sparse_tensor_invariants`
        context says).
    is_coalesced
        Declare the indices sorted and unique (checked with ``check_invariants=True``).
    fill_value
        The value of unspecified elements.

    Examples
    --------
    >>> import xsparse as xs
    >>> s = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3, 4, 5], (2, 3))
    >>> s
    sparse_array(indices=[[0, 1, 1],
                          [2, 0, 2]],
                 values=[3, 4, 5],
                 shape=(2, 3), nnz=3, dtype=int64, layout=sparse_coo, backend=numpy)
    >>> xs.sparse_coo_array(shape=(2, 3))
    sparse_array(indices=[], shape=(2, 0),
                 values=[], shape=(0,),
                 shape=(2, 3), nnz=0, dtype=float64, layout=sparse_coo, backend=numpy)
    """
    op = "sparse_coo_array"
    b = backend_of(indices, values, op=op, backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype)
    shp = _shape_arg(op, shape)
    if indices is None and values is None:
        if shp is None:
            raise ValueError(f"{op}: no indices, values or shape were given. Give indices and values, or a shape for an empty array.")
        vdt = dt if dt is not None else _default_float(xp)
        idx = xp.zeros((len(shp), 0), dtype=xp.int64, device=device)
        vals = xp.zeros((0,), dtype=vdt, device=device)
        return COOArray(idx, vals, shp, backend=b, xp=xp, coalesced=True, fill_value=_fill(xp, vdt, fill_value), check=check_invariants)
    if indices is None or values is None:
        raise ValueError(
            f"{op}: only one of indices and values was given (indices={'None' if indices is None else '...'}, "
            f"values={'None' if values is None else '...'}). Give both, or neither with a shape for an empty array."
        )
    idx = _contiguous(b, xp, _index_array(op, "indices", xp, indices, device, "2.1"))
    vals = _value_array(op, xp, values, dt, device)
    if idx.ndim != 2:
        raise InvariantError("coo.1", f"{op}: indices must be 2-D (sparse_dim, nse), got shape {tuple(idx.shape)}. A list of index tuples must be transposed first.")
    if vals.ndim == 0:
        vals = xp.broadcast_to(vals, (idx.shape[1],))
    vals = _contiguous(b, xp, vals)
    if shp is None:
        sparse_dim = idx.shape[0]
        if idx.shape[1]:
            sizes = [int(m) + 1 for m in xp.max(idx, axis=1)]
        else:
            sizes = [0] * sparse_dim
        shp = tuple(sizes) + tuple(vals.shape[1:])
    return COOArray(
        idx, vals, shp, backend=b, xp=xp, coalesced=bool(is_coalesced),
        fill_value=_fill(xp, vals.dtype, fill_value), check=check_invariants,
    )  # fmt: skip


def sparse_compressed_array(
    compressed_indices: Any = None,
    plain_indices: Any = None,
    values: Any = None,
    shape: Sequence[int] | None = None,
    *,
    layout: Layout,
    dtype: Any = None,
    device: Any = None,
    backend: str | Backend | None = None,
    check_invariants: bool | None = None,
    fill_value: Any = 0,
    blocksize: tuple[int, int] | None = None,
    dense_dim: int = 0,
) -> CompressedArray:
    """A CSR, CSC, BSR or BSC array from its compressed indices, plain indices and values.

    Parameters
    ----------
    compressed_indices
        ``(*batch, n_compressed + 1)`` integers in CSR encoding (rows for CSR/BSR, columns for CSC/BSC).
    plain_indices
        ``(*batch, nse)``: the column (CSR/BSR) or row (CSC/BSC) index of each element or block.
    values
        ``(*batch, nse, *dense)``, or ``(*batch, nse, bm, bn, *dense)`` for BSR/BSC.
    shape
        Inferred when omitted, with the formulas of the BSR invariants: the number of plain blocks is
        ``max(plain_indices.max() + 1, diff(compressed_indices).max())``. With no components, an empty
        array of this shape (``blocksize`` and ``dense_dim`` then say how to read it).
    layout
        ``sparse_csr``, ``sparse_csc``, ``sparse_bsr`` or ``sparse_bsc``.
    dtype, device, backend, check_invariants, fill_value
        As for :func:`sparse_coo_array`.

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.sparse_compressed_array([0, 2, 4], [0, 1, 0, 1], [1, 2, 3, 4], layout=xs.sparse_csc)
    sparse_array(ccol_indices=[0, 2, 4],
                 row_indices=[0, 1, 0, 1],
                 values=[1, 2, 3, 4],
                 shape=(2, 2), nnz=4, dtype=int64, layout=sparse_csc, backend=numpy)
    """
    op = f"sparse_compressed_array(layout={layout})"
    if not isinstance(layout, Layout) or not layout.is_compressed:
        raise LayoutError(
            f"{op}: layout must be sparse_csr, sparse_csc, sparse_bsr or sparse_bsc, got {layout!r}. Pass one of them, "
            "or use sparse_coo_array for COO."
        )
    b = backend_of(compressed_indices, plain_indices, values, op=op, backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype)
    shp = _shape_arg(op, shape)
    if compressed_indices is None and plain_indices is None and values is None:
        if shp is None:
            raise ValueError(f"{op}: no components or shape were given. Give the components, or a shape for an empty array.")
        return _empty_compressed(op, b, xp, shp, layout, dt, device, blocksize, dense_dim, fill_value, check_invariants)
    if compressed_indices is None or plain_indices is None or values is None:
        given = sum(c is not None for c in (compressed_indices, plain_indices, values))
        raise ValueError(
            f"{op}: only {given} of the three components were given. Give all three (or none, with a shape, for an empty array)."
        )
    cname, pname = layout.index_names
    ci = _contiguous(b, xp, _index_array(op, cname, xp, compressed_indices, device, "2.1"))
    pi = _contiguous(b, xp, _index_array(op, pname, xp, plain_indices, device, "2.2"))
    vals = _value_array(op, xp, values, dt, device)
    if vals.ndim == 0:
        vals = xp.broadcast_to(vals, tuple(pi.shape))
    vals = _contiguous(b, xp, vals)
    if blocksize is not None:
        _check_blocksize_of_components(op, layout, blocksize, ci, vals)
    if shp is None:
        shp = _infer_compressed_shape(op, xp, ci, pi, vals, layout)
    return CompressedArray(
        ci, pi, vals, shp, layout=layout, backend=b, xp=xp,
        fill_value=_fill(xp, vals.dtype, fill_value), check=check_invariants,
    )  # fmt: skip


def _check_blocksize_of_components(op: str, layout: Layout, blocksize: Any, ci: Any, vals: Any) -> None:
    """A ``blocksize`` given with the components must be the block shape of the values."""
    n_batch = ci.ndim - 1
    if not layout.is_blocked:
        found: tuple[int, ...] = (1, 1)
    elif ci.ndim >= 1 and vals.ndim >= n_batch + 3:
        found = tuple(int(s) for s in vals.shape[n_batch + 1 : n_batch + 3])
    else:
        return  # the validator reports the values' dimensions (3.4)
    if tuple(int(s) for s in blocksize) != found:
        raise ValueError(
            f"{op}: blocksize={tuple(blocksize)} differs from the block shape of the values ({found}). Leave blocksize "
            "out (the values give it), or reshape the values."
            if layout.is_blocked
            else f"{op}: blocksize applies to sparse_bsr and sparse_bsc only, not to {layout} (blocksize={tuple(blocksize)}). "
            "Leave it out, or use a blocked layout."
        )


def _infer_compressed_shape(op: str, xp: Any, ci: Any, pi: Any, vals: Any, layout: Layout) -> tuple[int, ...]:
    """The blog's shape estimate, in compressed/plain terms."""
    cname, pname = layout.index_names
    if ci.ndim < 1:
        raise InvariantError("3.2", f"{op}: {cname} must have at least one dimension, got a 0-d array. Give it the shape (*batch, n_compressed + 1).")
    if pi.ndim != ci.ndim:
        raise InvariantError(
            "3.3",
            f"{op}: {cname} and {pname} must have the same number of dimensions, got {ci.ndim} and {pi.ndim}. Give both "
            "index arrays the same batch dimensions.",
        )
    n_batch = ci.ndim - 1
    n_block = 2 if layout.is_blocked else 0
    if vals.ndim < n_batch + 1 + n_block:
        raise InvariantError(
            "3.4",
            f"{op}: values.ndim must be at least {n_batch + 1 + n_block}, got {vals.ndim}. Give values the shape "
            f"(*batch, nse{', *block' if n_block else ''}, *dense).",
        )
    blocksize = tuple(vals.shape[n_batch + 1 : n_batch + 1 + n_block]) if n_block else (1, 1)
    n_compressed = ci.shape[-1] - 1
    n_plain = 0
    if pi.shape[-1] and xp.reshape(pi, (-1,)).shape[0]:
        n_plain = int(xp.max(pi)) + 1
    if n_compressed > 0 and xp.reshape(ci, (-1,)).shape[0]:
        n_plain = max(n_plain, int(xp.max(ci[..., 1:] - ci[..., :-1])))
    nblocks = [0, 0]
    nblocks[layout.compressed_dim] = n_compressed
    nblocks[1 - layout.compressed_dim] = n_plain
    return (
        tuple(ci.shape[:-1])
        + (nblocks[0] * blocksize[0], nblocks[1] * blocksize[1])
        + tuple(vals.shape[n_batch + 1 + n_block :])
    )


def _empty_compressed(
    op: str, b: Backend, xp: Any, shape: tuple[int, ...], layout: Layout, dtype: Any, device: Any,
    blocksize: tuple[int, int] | None, dense_dim: int, fill_value: Any, check: bool | None, index_dtype: Any = None,
) -> CompressedArray:  # fmt: skip
    n_batch = len(shape) - 2 - dense_dim
    if n_batch < 0 or dense_dim < 0:
        raise ValueError(
            f"{op}: a {layout} array of shape {shape} has 2 sparse dimensions after its batch dimensions, so dense_dim "
            f"must lie in [0, {max(len(shape) - 2, 0)}], got dense_dim={dense_dim}. Give a shape (*batch, rows, columns, *dense) "
            "with that many dense dimensions, or a smaller dense_dim."
        )
    if layout.is_blocked and blocksize is None:
        raise ValueError(f"{op}: an empty {layout} array needs a blocksize (blocksize=None). Pass blocksize=(rows, columns).")
    if not layout.is_blocked and blocksize is not None and tuple(blocksize) != (1, 1):
        raise ValueError(
            f"{op}: blocksize applies to sparse_bsr and sparse_bsc only, not to {layout} (blocksize={tuple(blocksize)}). "
            "Leave it out, or use a blocked layout."
        )
    bs = tuple(blocksize) if layout.is_blocked and blocksize is not None else (1, 1)
    batch = shape[:n_batch]
    grid = (shape[n_batch] // bs[0], shape[n_batch + 1] // bs[1])
    vdt = dtype if dtype is not None else _default_float(xp)
    idt = xp.int64 if index_dtype is None else index_dtype
    ci = xp.zeros(batch + (grid[layout.compressed_dim] + 1,), dtype=idt, device=device)
    pi = xp.zeros(batch + (0,), dtype=idt, device=device)
    vals = xp.zeros(batch + (0,) + (bs if layout.is_blocked else ()) + shape[n_batch + 2 :], dtype=vdt, device=device)
    return CompressedArray(ci, pi, vals, shape, layout=layout, backend=b, xp=xp, fill_value=_fill(xp, vdt, fill_value), check=check)


def sparse_csr_array(crow_indices: Any = None, col_indices: Any = None, values: Any = None, shape: Sequence[int] | None = None, **kwargs: Any) -> CompressedArray:
    """A CSR array; see :func:`sparse_compressed_array` (``layout=sparse_csr``).

    Examples
    --------
    >>> import xsparse as xs
    >>> csr = xs.sparse_csr_array([0, 2, 4], [0, 1, 0, 1], [1, 2, 3, 4], dtype="float64")
    >>> xs.to_dense(csr)
    array([[1., 2.],
           [3., 4.]])
    """
    return sparse_compressed_array(crow_indices, col_indices, values, shape, layout=sparse_csr, **kwargs)


def sparse_csc_array(ccol_indices: Any = None, row_indices: Any = None, values: Any = None, shape: Sequence[int] | None = None, **kwargs: Any) -> CompressedArray:
    """A CSC array; see :func:`sparse_compressed_array` (``layout=sparse_csc``)."""
    return sparse_compressed_array(ccol_indices, row_indices, values, shape, layout=sparse_csc, **kwargs)


def sparse_bsr_array(crow_indices: Any = None, col_indices: Any = None, values: Any = None, shape: Sequence[int] | None = None, **kwargs: Any) -> CompressedArray:
    """A BSR array; see :func:`sparse_compressed_array` (``layout=sparse_bsr``)."""
    return sparse_compressed_array(crow_indices, col_indices, values, shape, layout=sparse_bsr, **kwargs)


def sparse_bsc_array(ccol_indices: Any = None, row_indices: Any = None, values: Any = None, shape: Sequence[int] | None = None, **kwargs: Any) -> CompressedArray:
    """A BSC array; see :func:`sparse_compressed_array` (``layout=sparse_bsc``)."""
    return sparse_compressed_array(ccol_indices, row_indices, values, shape, layout=sparse_bsc, **kwargs)


def _creation(
    op: str, shape: Any, dtype: Any, layout: Layout, device: Any, backend: Any, blocksize: Any, dense_dim: Any,
    sparse_dim: Any, fill_value: Any, empty: bool, index_dtype: Any = None,
) -> Any:  # fmt: skip
    b = backend_of(op=op, backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype)
    shp = (int(shape),) if isinstance(shape, int) else _shape_arg(op, shape)
    if shp is None:
        raise TypeError(f"{op}: shape is required (shape=None). Pass a shape such as (2, 3).")
    if layout is strided:
        if fill_value != 0 or fill_value != fill_value:
            return xp.full(shp, fill_value, dtype=dt if dt is not None else _default_float(xp), device=device)
        make = xp.empty if empty else xp.zeros
        return make(shp, dtype=dt, device=device)
    if layout is sparse_coo:
        sd = len(shp) - (dense_dim or 0) if sparse_dim is None else sparse_dim
        if not 0 <= sd <= len(shp):
            raise ValueError(
                f"{op}: a sparse_coo array of shape {shp} has between 0 and {len(shp)} sparse dimensions, got "
                f"sparse_dim={sd} (sparse_dim={sparse_dim}, dense_dim={dense_dim}). Give sparse_dim or dense_dim in [0, {len(shp)}]."
            )
        vdt = dt if dt is not None else _default_float(xp)
        idx = xp.zeros((sd, 0), dtype=xp.int64 if index_dtype is None else index_dtype, device=device)
        vals = xp.zeros((0, *shp[sd:]), dtype=vdt, device=device)
        return COOArray(idx, vals, shp, backend=b, xp=xp, coalesced=True, fill_value=_fill(xp, vdt, fill_value))
    if isinstance(layout, Layout) and layout.is_compressed:
        return _empty_compressed(op, b, xp, shp, layout, dt, device, blocksize, dense_dim or 0, fill_value, None, index_dtype)
    raise LayoutError(
        f"{op}: layout must be strided or a sparse layout such as sparse_csr, got {layout!r}. Pass one of xsparse.strided, "
        "sparse_coo, sparse_csr, sparse_csc, sparse_bsr or sparse_bsc."
    )


def zeros(
    shape: int | Sequence[int],
    *,
    dtype: Any = None,
    device: Any = None,
    layout: Layout = strided,
    backend: str | Backend | None = None,
    blocksize: tuple[int, int] | None = None,
    dense_dim: int | None = None,
    sparse_dim: int | None = None,
) -> Any:
    """An array of zeros; with a sparse ``layout``, a sparse array with no specified element.

    Examples
    --------
    >>> import xsparse as xs
    >>> z = xs.zeros((2, 4, 6), layout=xs.sparse_bsr, blocksize=(2, 3))
    >>> z.shape, z.nnz, z.crow_indices().shape
    ((2, 4, 6), 0, (2, 3))
    """
    return _creation("zeros", shape, dtype, layout, device, backend, blocksize, dense_dim, sparse_dim, 0, False)


def empty(
    shape: int | Sequence[int],
    *,
    dtype: Any = None,
    device: Any = None,
    layout: Layout = strided,
    backend: str | Backend | None = None,
    blocksize: tuple[int, int] | None = None,
    dense_dim: int | None = None,
    sparse_dim: int | None = None,
) -> Any:
    """An uninitialised strided array; with a sparse ``layout``, the same as :func:`zeros`."""
    return _creation("empty", shape, dtype, layout, device, backend, blocksize, dense_dim, sparse_dim, 0, True)



def _default_dtype_for(xp: Any, value: Any, device: Any) -> Any:
    """The Array API's dtype for a ``full`` of a Python scalar: bool, or the default of its kind."""
    if isinstance(value, bool):
        return xp.bool
    defaults = xp.__array_namespace_info__().default_dtypes(device=device)
    if isinstance(value, int):
        return defaults["integral"]
    if isinstance(value, float):
        return defaults["real floating"]
    if isinstance(value, complex):
        return defaults["complex floating"]
    raise TypeError(
        f"full: fill_value must be a Python bool, int, float or complex (fill_value={value!r}, type={type(value).__name__}). "
        "Pass a Python scalar."
    )


def full(
    shape: int | Sequence[int],
    fill_value: bool | int | float | complex,
    *,
    dtype: Any = None,
    device: Any = None,
    layout: Layout = strided,
    backend: str | Backend | None = None,
    blocksize: tuple[int, int] | None = None,
    dense_dim: int | None = None,
    sparse_dim: int | None = None,
) -> Any:
    """An array whose every element is ``fill_value``; with a sparse ``layout``, a sparse array whose fill
    value is ``fill_value`` and which specifies no element.

    Parameters
    ----------
    shape
        The shape.
    fill_value
        The value of every element. Without ``dtype`` it chooses the dtype as in the Array API: bool, or
        the backend's default integer, real or complex floating dtype.
    dtype, device, backend
        Of the result.
    layout
        ``strided`` (default) or a sparse layout; ``blocksize``, ``dense_dim`` and ``sparse_dim`` shape a
        sparse result as for :func:`zeros`.

    Examples
    --------
    >>> import xsparse as xs
    >>> f = xs.full((2, 3), 1.5, layout=xs.sparse_csr)
    >>> f.nnz, f.fill_value, f.to_dense().tolist()
    (0, 1.5, [[1.5, 1.5, 1.5], [1.5, 1.5, 1.5]])
    """
    b = backend_of(op="full", backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype) if dtype is not None else _default_dtype_for(xp, fill_value, device)
    return _creation("full", shape, dt, layout, device, b, blocksize, dense_dim, sparse_dim, fill_value, False)


def ones(
    shape: int | Sequence[int],
    *,
    dtype: Any = None,
    device: Any = None,
    layout: Layout = strided,
    backend: str | Backend | None = None,
    blocksize: tuple[int, int] | None = None,
    dense_dim: int | None = None,
    sparse_dim: int | None = None,
) -> Any:
    """An array of ones; with a sparse ``layout``, a sparse array of fill value 1 that specifies no element.

    Examples
    --------
    >>> import xsparse as xs
    >>> o = xs.ones((2, 2), layout=xs.sparse_coo, dtype="int64")
    >>> o.nnz, o.fill_value, o.to_dense().tolist()
    (0, 1, [[1, 1], [1, 1]])
    """
    return _creation("ones", shape, dtype, layout, device, backend, blocksize, dense_dim, sparse_dim, 1, False)


def eye(
    n_rows: int,
    n_cols: int | None = None,
    /,
    *,
    k: int = 0,
    dtype: Any = None,
    device: Any = None,
    layout: Layout = strided,
    backend: str | Backend | None = None,
    blocksize: tuple[int, int] | None = None,
) -> Any:
    """A 2-D array with ones on the ``k``-th diagonal; with a sparse ``layout``, a sparse one that specifies
    exactly that diagonal (whole blocks of it for BSR and BSC, which need ``blocksize``).

    Examples
    --------
    >>> import xsparse as xs
    >>> e = xs.eye(3, 4, k=1, layout=xs.sparse_csr, dtype="float64")
    >>> e.crow_indices().tolist(), e.col_indices().tolist()
    ([0, 1, 2, 3], [1, 2, 3])
    """
    op = "eye"
    b = backend_of(op=op, backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype)
    rows = int(n_rows)
    cols = rows if n_cols is None else int(n_cols)
    if rows < 0 or cols < 0:
        raise ValueError(f"{op}: the number of rows and columns must be non-negative (n_rows={rows}, n_cols={cols}). Pass sizes >= 0.")
    if layout is strided:
        return xp.eye(rows, cols, k=int(k), dtype=dt, device=device)
    if not isinstance(layout, Layout) or not (layout is sparse_coo or layout.is_compressed):
        raise LayoutError(
            f"{op}: layout must be strided or one of sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc "
            f"(layout={layout!r}). Pass one of them."
        )
    vdt = dt if dt is not None else _default_float(xp)
    diagonal = xp.ones((1, cols), dtype=vdt, device=device)
    return spdiags(diagonal, xp.asarray([int(k)], dtype=xp.int64, device=device), (rows, cols), layout, blocksize=blocksize)


def spdiags(
    diagonals: Any,
    offsets: Any,
    shape: Sequence[int],
    layout: Layout | None = None,
    *,
    backend: str | Backend | None = None,
    blocksize: tuple[int, int] | None = None,
) -> Any:
    """A sparse 2-D array with the rows of ``diagonals`` on the diagonals ``offsets`` (torch.sparse.spdiags).

    ``diagonals[k, j]`` goes to position ``(j - offsets[k], j)`` when that lies inside ``shape``, as in torch
    and SciPy: every row of ``diagonals`` is indexed by column, so the part of it that would fall outside
    the array is ignored.

    Parameters
    ----------
    diagonals
        ``(n_diagonals, length)`` values (a 1-D array is one diagonal).
    offsets
        ``(n_diagonals,)`` distinct integers (a 0-d offset goes with a 1-D ``diagonals``): 0 is the main
        diagonal, positive offsets lie above it, negative ones below.
    shape
        ``(rows, columns)`` of the result.
    layout
        The result layout (default ``sparse_coo``, as torch); BSR and BSC need ``blocksize``.
    backend
        The backend for list inputs.

    Examples
    --------
    >>> import xsparse as xs
    >>> d = xs.spdiags([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [0, -1], (3, 3), layout=xs.sparse_csr)
    >>> xs.to_dense(d).tolist()
    [[1.0, 0.0, 0.0], [4.0, 2.0, 0.0], [0.0, 5.0, 3.0]]
    """
    op = "spdiags"
    _not_sparse(op, "2.3", "diagonals", diagonals)
    _not_sparse(op, "2.1", "offsets", offsets)
    b = backend_of(diagonals, offsets, op=op, backend=backend)
    xp = b.load()
    diag = diagonals if is_strided(diagonals) else xp.asarray(diagonals)
    off = offsets if is_strided(offsets) else xp.asarray(offsets, device=array_api_compat.device(diag))
    if diag.ndim == 1 and off.ndim == 0:
        diag, off = diag[None, :], xp.reshape(off, (1,))
    shp = _shape_arg(op, shape)
    if shp is None or len(shp) != 2 or min(shp) < 0:
        raise ValueError(f"{op}: shape must be two non-negative sizes (shape={shape!r}). Pass (rows, columns).")
    if diag.ndim != 2 or off.ndim != 1 or diag.shape[0] != off.shape[0]:
        raise ValueError(
            f"{op}: diagonals must be 2-D and offsets 1-D with one offset per row of diagonals "
            f"(diagonals.shape={tuple(diag.shape)}, offsets.shape={tuple(off.shape)}). Give offsets (n,) for diagonals (n, length)."
        )
    if not xp.isdtype(off.dtype, "integral"):
        raise TypeError(f"{op}: offsets must be integers (dtype={dtype_name(off.dtype)}). Pass an integer array or a list of ints.")
    if off.shape[0] > 1 and int(xp.max(xp.unique_counts(off).counts)) > 1:
        raise ValueError(
            f"{op}: offsets must be distinct (offsets={[int(o) for o in off]}). Sum the diagonals of equal offset first."
        )
    result = dispatch.call(op, (strided, strided), b.name, xp, diag, off, shp, b)
    if layout is None or layout is sparse_coo:
        return result
    from ._conversion import to_dense, to_sparse

    if layout is strided:
        return to_dense(result)
    return to_sparse(result, layout=layout, blocksize=blocksize)


def _like(op: str, x: Any, fill_value: Any, dtype: Any, device: Any, layout: Layout | None, blocksize: Any, empty: bool) -> Any:
    if not isinstance(x, SparseArray) and not is_strided(x):
        raise TypeError(f"{op}: x must be an xsparse array or a backend array, got {type(x).__name__}. Pass an array.")
    b = backend_of(x, op=op)
    xp = b.load()
    dt = resolve_dtype(xp, dtype) if dtype is not None else x.dtype
    dev = device if device is not None else array_api_compat.device(x._vals if isinstance(x, SparseArray) else x)
    target = layout if layout is not None else (x.layout if isinstance(x, SparseArray) else strided)
    sparse_dim = dense_dim = index_dtype = None
    if isinstance(x, SparseArray):
        index_dtype = getattr(x, "index_dtype", None)
        dense_dim = x.dense_dim()
        sparse_dim = x.ndim - dense_dim
        if blocksize is None and x.layout.is_blocked:
            blocksize = cast(CompressedArray, x).blocksize
    return _creation(op, x.shape, dt, target, dev, b, blocksize, dense_dim, sparse_dim, fill_value, empty, index_dtype)


def zeros_like(x: Any, /, *, dtype: Any = None, device: Any = None, layout: Layout | None = None, blocksize: tuple[int, int] | None = None) -> Any:
    """An array of zeros like ``x``: a sparse ``x`` gives a sparse array of its layout and structure (batch,
    sparse and dense dimensions, blocksize, index dtype) that specifies no element.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 1, 2], [1, 0], [5.0, 6.0], fill_value=2.0)
    >>> z = xs.zeros_like(a)
    >>> z.layout, z.nnz, z.fill_value
    (xsparse.sparse_csr, 0, 0.0)
    """
    return _like("zeros_like", x, 0, dtype, device, layout, blocksize, False)


def ones_like(x: Any, /, *, dtype: Any = None, device: Any = None, layout: Layout | None = None, blocksize: tuple[int, int] | None = None) -> Any:
    """An array of ones like ``x``; see :func:`zeros_like` (the sparse result has fill value 1).

    Examples
    --------
    >>> import xsparse as xs
    >>> o = xs.ones_like(xs.sparse_coo_array([[0]], [5], (3,)))
    >>> o.nnz, o.fill_value, o.to_dense().tolist()
    (0, 1, [1, 1, 1])
    """
    return _like("ones_like", x, 1, dtype, device, layout, blocksize, False)


def full_like(
    x: Any, /, fill_value: bool | int | float | complex, *, dtype: Any = None, device: Any = None,
    layout: Layout | None = None, blocksize: tuple[int, int] | None = None,
) -> Any:  # fmt: skip
    """An array of ``fill_value`` like ``x``; see :func:`zeros_like` (the sparse result has that fill value).

    Examples
    --------
    >>> import xsparse as xs
    >>> f = xs.full_like(xs.sparse_coo_array([[0]], [5.0], (3,)), -1.0, layout=xs.strided)
    >>> f.tolist()
    [-1.0, -1.0, -1.0]
    """
    return _like("full_like", x, fill_value, dtype, device, layout, blocksize, False)


def empty_like(x: Any, /, *, dtype: Any = None, device: Any = None, layout: Layout | None = None, blocksize: tuple[int, int] | None = None) -> Any:
    """An uninitialised array like ``x``; for a sparse layout the same as :func:`zeros_like`.

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.empty_like(xs.sparse_coo_array([[0]], [5.0], (3,))).nnz
    0
    """
    return _like("empty_like", x, 0, dtype, device, layout, blocksize, True)
