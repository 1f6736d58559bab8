"""Constructors of sparse arrays from components, and creation functions with ``layout=``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import array_api_compat
import numpy as np

from . import dispatch
from .backends.array_api import creation as _generic_creation  # noqa: F401  (registers the generic kernels)
from .backends.array_api.conversion import is_plus_zero, scalar_array, signed_twin, through_signed
from ._common import (
    backend_of, blocksize_argument, device_argument, dtype_name, fill_argument, flag_argument, integer_argument, is_strided,
    refuse_foreign, resolve_dtype, scalar_for, seed_argument, shape_argument,
)  # fmt: skip
from ._errors import InvariantError, LayoutError
from .backends import Backend
from .formats._base import array_device
from .formats._invariants import index_overflows
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

_INT64_MAX = 2**63 - 1

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
    "random",
    "asarray",
    "arange",
    "linspace",
    "meshgrid",
    "tril",
    "triu",
    "from_dlpack",
]


def _not_sparse(op: str, invariant: str, name: str, obj: Any) -> None:
    # A sparse component would otherwise reach xp.asarray, which densifies it or fails deep inside.
    if isinstance(obj, SparseArray):
        raise InvariantError(
            invariant,
            f"{name} must be a strided array of the backend, got {type(obj).__name__} ({obj.layout}). "
            f"Pass its components, or xsparse.to_dense({name}) if a dense array is meant.",
            op,
        )


def _refuse_meta(op: str, name: str, arr: Any) -> Any:
    """``arr``, unless it is a torch tensor on the ``meta`` device, which holds shapes and no values: every
    operation on such a sparse array failed later inside torch (``Tensor.item() cannot be called on meta
    tensors``)."""
    if getattr(arr, "is_meta", False):
        raise ValueError(
            f"{op}: {name} is a torch tensor on the 'meta' device, which holds no values (shape={tuple(arr.shape)}). "
            "Create it on a device that holds data ('cpu', 'cuda'), e.g. with torch.empty_like(t, device='cpu')."
        )
    return arr


def _lists_device(op: str, device: Any, *components: Any) -> Any:
    """Where the components given as Python lists go: ``device``, or where it is None the device of the
    first component that is an array (a list of indices beside CUDA values is made on CUDA, not on the
    backend's default device); arrays stay where they are, and one on another device is refused later."""
    if device is not None:
        return device
    for c in components:
        if c is not None and not isinstance(c, SparseArray) and is_strided(c, op) and not getattr(c, "is_meta", False):
            return array_device(c)
    return None


def _index_array(op: str, name: str, xp: Any, obj: Any, device: Any, invariant: str, lists_on: Any = None) -> Any:
    """An index component on the backend: arrays keep their dtype (int32 or int64), lists become int64
    (on ``device``, else on ``lists_on``)."""
    _not_sparse(op, invariant, name, obj)
    if is_strided(obj, op):
        arr = xp.asarray(_refuse_meta(op, name, obj), device=device) if device is not None else obj
    else:
        try:
            # Without dtype=, so that a list of floats is refused below instead of truncated to integers.
            arr = xp.asarray(obj, device=device if device is not None else lists_on)
            if not xp.isdtype(arr.dtype, ("bool", "numeric")):  # NumPy's object or str arrays
                raise TypeError(f"the list holds {dtype_name(arr.dtype)} elements")
        except (TypeError, ValueError, OverflowError, RuntimeError) as exc:
            if type(exc) is not RuntimeError and isinstance(exc, RuntimeError):
                raise  # torch's OutOfMemoryError, say; its plain RuntimeError is "Could not infer dtype of NoneType"
            _refuse_wide_integers(op, name, obj)
            raise TypeError(
                f"{op}: {name} must be an integer array or a nested list of integers ({exc}). Pass a rectangular "
                "nested list of Python ints, or an int32 or int64 array."
            ) from None
        if not xp.isdtype(arr.dtype, "signed integer"):
            _refuse_wide_integers(op, name, obj)  # only such a list makes uint64 or float64 of Python ints
        if 0 in tuple(arr.shape) or xp.isdtype(arr.dtype, "integral"):
            arr = xp.astype(arr, xp.int64)
    arr = _refuse_meta(op, name, _native_order(arr))
    if dtype_name(arr.dtype) not in ("int32", "int64"):
        raise InvariantError(
            "1.3",
            f"{name} must have dtype int32 or int64, got {dtype_name(arr.dtype)}. Cast it, e.g. with "
            f"xp.astype({name}, xp.int64).",
            op,
        )
    return arr


def _refuse_wide_integers(op: str, name: str, obj: Any) -> None:
    """Refuse a Python int of a nested list of indices that int64 cannot hold (O(n) in Python: run only on a
    list that the backend did not read as signed integers).

    NumPy reads such a list as uint64 (or float64, beside negative ints), which the cast to int64 wraps:
    2**64 - 1 became the index -1, which a check then reports as a negative size or as a float dtype,
    and which array_api_strict dropped without a word.
    """
    if not isinstance(obj, (list, tuple)):
        return
    for leaf in _leaves(obj):
        if isinstance(leaf, int) and not isinstance(leaf, bool) and not -(2**63) <= leaf < 2**63:
            raise ValueError(
                f"{op}: {name} hold an integer that int64 cannot represent (index={leaf}). Pass indices in "
                "[0, 2**63), the range of an int64 index."
            )


def _native_order(arr: Any) -> Any:
    """A NumPy array of the other byte order (``'>i8'`` on a little-endian machine) as a copy in the native
    one, which the compiled kernels read; any other array as it is."""
    if isinstance(arr, np.ndarray) and not arr.dtype.isnative:
        return arr.astype(arr.dtype.newbyteorder("="))
    return arr


def _value_array(op: str, xp: Any, obj: Any, dtype: Any, device: Any, lists_on: Any = None) -> Any:
    _not_sparse(op, "2.3", "values", obj)
    if is_strided(obj, op):
        arr = _refuse_meta(op, "values", _native_order(obj))
        if dtype is not None and dtype_name(arr.dtype) != dtype_name(dtype):
            if xp.isdtype(arr.dtype, "complex floating") and not xp.isdtype(dtype, "complex floating"):
                # xsparse.astype's rule (the Array API forbids the cast)
                raise TypeError(
                    f"{op}: casting complex values to a real dtype drops their imaginary parts (values dtype="
                    f"{dtype_name(arr.dtype)}, dtype={dtype_name(dtype)}). Pass xsparse.real(values) or xsparse.abs(values), "
                    "or a complex dtype."
                )
            arr = xp.astype(arr, dtype)
        if device is not None:
            arr = xp.asarray(arr, device=device)
        return _refuse_meta(op, "values", arr)
    if dtype is not None:
        obj = _representable(op, obj, dtype)
    on = device if device is not None else lists_on
    try:
        made = scalar_array(xp, obj, dtype, on) if isinstance(obj, (float, complex)) else xp.asarray(obj, dtype=dtype, device=on)
    except (TypeError, ValueError, OverflowError, RuntimeError) as exc:
        if type(exc) not in (TypeError, ValueError, OverflowError, RuntimeError):
            raise  # not a value the list holds (torch's OutOfMemoryError is a RuntimeError, say)
        if dtype is None:
            # a ragged list, or one holding None or a string: the backend's message names no function
            raise (TypeError if isinstance(exc, TypeError) else ValueError)(
                f"{op}: values must be an array or a rectangular nested list of numbers ({exc}). Pass one value (or "
                "one dense sub-array) per specified element, all of one shape."
            ) from exc
        # a NaN, an infinity or a float past the range of an integer dtype (NumPy's ValueError or
        # OverflowError, torch's RuntimeError), or a complex number for a real one (a TypeError): the
        # backend's own message names neither the function nor the dtype
        raise (TypeError if isinstance(exc, TypeError) else ValueError)(
            f"{op}: the values cannot be made {dtype_name(dtype)} ({exc}). Pass values that {dtype_name(dtype)} holds, or "
            "another dtype."
        ) from exc
    return _refuse_meta(op, "values", made)


def _representable(op: str, obj: Any, dtype: Any) -> Any:
    """``obj`` (Python integers, or a nest of them) for the backend's ``asarray`` with an integer ``dtype``,
    refusing an integer the dtype cannot hold (NumPy raises its own OverflowError, torch wraps: -1 as uint8
    is 255). Unsigned 64-bit integers past int64's range go through NumPy, which reads them (torch's
    ``asarray`` reads Python integers as int64 first)."""
    name = dtype_name(dtype)
    if name == "bool" or not name.startswith(("int", "uint")):
        return obj
    info = np.iinfo(name)
    leaves = list(_leaves(obj)) if isinstance(obj, (list, tuple)) else [obj]
    # a float with a fraction would be truncated by the backends' asarray (1.7 to 1), as an int out of range
    # would wrap; a NaN or an infinity the backends refuse themselves
    cut = next((v for v in leaves if isinstance(v, float) and math.isfinite(v) and not v.is_integer()), None)
    if cut is not None:
        raise ValueError(
            f"{op}: the values hold {cut!r}, which the integer dtype {name} cannot represent (it would be truncated). "
            "Round the values first, or pass a floating dtype."
        )
    bad = next((v for v in leaves if isinstance(v, int) and not isinstance(v, bool) and not info.min <= v <= info.max), None)
    if bad is not None:
        raise ValueError(
            f"{op}: the values hold {bad}, which {name} cannot represent (range [{info.min}, {info.max}]). Pass values "
            f"in that range, or a wider dtype."
        )
    if name == "uint64" and any(isinstance(v, int) and v > 2**63 - 1 for v in leaves):
        return np.asarray(obj, dtype=np.uint64)
    return obj


def _contiguous(backend: Backend, xp: Any, x: Any) -> Any:
    return contiguous(backend, xp, x)


def _default_float(xp: Any, device: Any) -> Any:
    """The backend's default real floating dtype on ``device`` (float64 for NumPy, torch's default dtype for
    torch; a device without float64 has another, as the standard's ``default_dtypes(device=...)`` says)."""
    return xp.__array_namespace_info__().default_dtypes(device=device)["real floating"]


def _plus_zero(fill_value: Any) -> bool:
    """Whether zeros (``xp.zeros``) are the elements of fill value ``fill_value``: not for ``-0.0``."""
    try:
        return is_plus_zero(fill_value)
    except (TypeError, ValueError):
        return False  # not a number: ``full`` says what is wrong with it


def _fill(xp: Any, dtype: Any, fill_value: Any) -> Any:
    return fill_argument(xp, dtype, fill_value)


def _shape_arg(op: str, shape: Any) -> tuple[int, ...] | None:
    return None if shape is None else shape_argument(op, shape)


def _optional_flag(op: str, name: str, value: Any) -> bool | None:
    """A flag that may be left to its default (``None``): ``check_invariants="no"`` would otherwise read as true."""
    return None if value is None else flag_argument(op, name, value)


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
    check_invariants = _optional_flag(op, "check_invariants", check_invariants)
    is_coalesced = _optional_flag(op, "is_coalesced", is_coalesced)
    b = backend_of(indices, values, op=op, backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype, op)
    device = device_argument(op, b, device)
    shp = _shape_arg(op, shape)
    if indices is None and values is None:
        if shp is None:
            raise ValueError(f"{op}: no indices, values or shape were given. Give indices and values, or a shape for an empty array.")
        vdt = dt if dt is not None else _default_float(xp, device)
        idx = xp.zeros((len(shp), 0), dtype=xp.int64, device=device)
        vals = xp.zeros((0,), dtype=vdt, device=device)
        return COOArray(idx, vals, shp, backend=b, xp=xp, coalesced=True, fill_value=_fill(xp, vdt, fill_value), check=check_invariants, op=op)
    if indices is None or values is None:
        raise ValueError(
            f"{op}: only one of indices and values was given (indices={'None' if indices is None else '...'}, "
            f"values={'None' if values is None else '...'}). Give both, or neither with a shape for an empty array."
        )
    on = _lists_device(op, device, values, indices)
    idx = _contiguous(b, xp, _index_array(op, "indices", xp, indices, device, "2.1", on))
    vals = _value_array(op, xp, values, dt, device, on)
    if idx.ndim != 2:
        raise InvariantError("coo.1", f"indices must be 2-D (sparse_dim, nse), got shape {tuple(idx.shape)}. A list of index tuples must be transposed first.", op)
    if vals.ndim == 0:
        vals = xp.broadcast_to(vals, (idx.shape[1],))
    vals = _contiguous(b, xp, vals)
    if shp is None:
        sparse_dim = idx.shape[0]
        if idx.shape[1]:
            sizes = [int(m) + 1 for m in xp.max(idx, axis=1)]
            lowest = [int(m) for m in xp.min(idx, axis=1)]
            if any(m < 0 for m in lowest):
                # the shape inferred from such indices holds none of them (torch refuses them here too)
                d = next(d for d, m in enumerate(lowest) if m < 0)
                raise InvariantError(
                    "coo.5",
                    f"{op}: indices[{d}] must be non-negative to infer the shape, got {lowest[d]}. Fix the indices, or "
                    "give the shape.",
                )
        else:
            sizes = [0] * sparse_dim
        shp = tuple(sizes) + tuple(vals.shape[1:])
    return COOArray(
        idx, vals, shp, backend=b, xp=xp, coalesced=bool(is_coalesced),
        fill_value=_fill(xp, vals.dtype, fill_value), check=check_invariants, op=op,
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
    dense_dim: int | None = None,
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
    blocksize, dense_dim
        The block shape and the number of trailing dense dimensions. With the components, they are
        checked against the values (which give both), and a contradiction raises ``ValueError``.
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
    check_invariants = _optional_flag(op, "check_invariants", check_invariants)
    b = backend_of(compressed_indices, plain_indices, values, op=op, backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype, op)
    device = device_argument(op, b, device)
    shp = _shape_arg(op, shape)
    dd = None if dense_dim is None else integer_argument(op, "dense_dim", dense_dim)
    if compressed_indices is None and plain_indices is None and values is None:
        if shp is None:
            raise ValueError(f"{op}: no components or shape were given. Give the components, or a shape for an empty array.")
        return _empty_compressed(op, b, xp, shp, layout, dt, device, blocksize, dd or 0, fill_value, check_invariants)
    if compressed_indices is None or plain_indices is None or values is None:
        given = sum(c is not None for c in (compressed_indices, plain_indices, values))
        raise ValueError(
            f"{op}: only {given} of the three components were given. Give all three (or none, with a shape, for an empty array)."
        )
    cname, pname = layout.index_names
    on = _lists_device(op, device, values, compressed_indices, plain_indices)
    ci = _contiguous(b, xp, _index_array(op, cname, xp, compressed_indices, device, "2.1", on))
    pi = _contiguous(b, xp, _index_array(op, pname, xp, plain_indices, device, "2.2", on))
    vals = _value_array(op, xp, values, dt, device, on)
    if vals.ndim == 0:
        vals = xp.broadcast_to(vals, tuple(pi.shape))
    vals = _contiguous(b, xp, vals)
    if blocksize is not None:
        _check_blocksize_of_components(op, layout, blocksize, ci, vals)
    if dd is not None:
        _check_dense_dim_of_components(op, layout, dd, ci, vals)
    if shp is None:
        shp = _infer_compressed_shape(op, xp, ci, pi, vals, layout)
    return CompressedArray(
        ci, pi, vals, shp, layout=layout, backend=b, xp=xp,
        fill_value=_fill(xp, vals.dtype, fill_value), check=check_invariants, op=op,
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
    if blocksize_argument(op, blocksize) != found:
        raise ValueError(
            f"{op}: blocksize={tuple(blocksize)} differs from the block shape of the values ({found}). Leave blocksize "
            "out (the values give it), or reshape the values."
            if layout.is_blocked
            else f"{op}: blocksize applies to sparse_bsr and sparse_bsc only, not to {layout} (blocksize={tuple(blocksize)}). "
            "Leave it out, or use a blocked layout."
        )


def _check_dense_dim_of_components(op: str, layout: Layout, dense_dim: int, ci: Any, vals: Any) -> None:
    """A ``dense_dim`` given with the components must be the number of dense dimensions of the values."""
    if ci.ndim < 1:
        return  # the validator reports the compressed indices' dimensions (3.2)
    found = vals.ndim - ci.ndim - (2 if layout.is_blocked else 0)  # after (*batch, nse[, *block])
    if found >= 0 and found != dense_dim:
        raise ValueError(
            f"{op}: dense_dim={dense_dim} differs from the number of dense dimensions of the values ({found}, values.shape="
            f"{tuple(vals.shape)}). Leave dense_dim out (the values give it), or reshape the values."
        )


def _infer_compressed_shape(op: str, xp: Any, ci: Any, pi: Any, vals: Any, layout: Layout) -> tuple[int, ...]:
    """The blog's shape estimate, in compressed/plain terms."""
    cname, pname = layout.index_names
    if ci.ndim < 1:
        raise InvariantError("3.2", f"{cname} must have at least one dimension, got a 0-d array. Give it the shape (*batch, n_compressed + 1).", op)
    if pi.ndim != ci.ndim:
        raise InvariantError(
            "3.3",
            f"{cname} and {pname} must have the same number of dimensions, got {ci.ndim} and {pi.ndim}. Give both "
            "index arrays the same batch dimensions.",
            op,
        )
    n_batch = ci.ndim - 1
    n_block = 2 if layout.is_blocked else 0
    if vals.ndim < n_batch + 1 + n_block:
        raise InvariantError(
            "3.4",
            f"values.ndim must be at least {n_batch + 1 + n_block}, got {vals.ndim}. Give values the shape "
            f"(*batch, nse{', *block' if n_block else ''}, *dense).",
            op,
        )
    blocksize = tuple(vals.shape[n_batch + 1 : n_batch + 1 + n_block]) if n_block else (1, 1)
    if ci.shape[-1] == 0:
        raise InvariantError(
            "5.1",
            f"{cname} must hold n_compressed + 1 offsets, starting with 0, got none (shape of {cname}: {tuple(ci.shape)}). "
            f"Give [0] for an array with no {'rows' if layout.compressed_dim == 0 else 'columns'}, or give the shape.",
            op,
        )
    n_compressed = ci.shape[-1] - 1
    n_plain = 0
    if pi.shape[-1] and xp.reshape(pi, (-1,)).shape[0]:
        n_plain = int(xp.max(pi)) + 1
        lowest = int(xp.min(pi))
        if lowest < 0:
            # the shape inferred from such indices holds none of them (the COO constructor refuses them too)
            raise InvariantError(
                "5.4", f"{pname} must be non-negative to infer the shape, got {lowest}. Fix the indices, or give the shape.", op
            )
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
    if any(s < 0 for s in shape):
        # the validator's message, before zeros() of a negative size raises the backend's own
        raise InvariantError("3.1", f"{op}: shape {shape} has a negative size. Give non-negative sizes.")
    if len(shape) < 2:
        raise ValueError(
            f"{op}: a {layout} array has 2 sparse dimensions, so it cannot hold a {len(shape)}-d array (shape {shape}). "
            "Use layout=sparse_coo (COO holds every number of dimensions), or give 2 or more dimensions."
        )
    if n_batch < 0 or dense_dim < 0:
        raise ValueError(
            f"{op}: a {layout} array of shape {shape} has 2 sparse dimensions after its batch dimensions, so dense_dim "
            f"must lie in [0, {max(len(shape) - 2, 0)}], got dense_dim={dense_dim}. Give a shape (*batch, rows, columns, *dense) "
            "with that many dense dimensions, or a smaller dense_dim."
        )
    if layout.is_blocked and blocksize is None:
        raise ValueError(f"{op}: an empty {layout} array needs a blocksize (blocksize=None). Pass blocksize=(rows, columns).")
    bs = (1, 1) if blocksize is None else blocksize_argument(op, blocksize)
    if not layout.is_blocked and bs != (1, 1):
        raise ValueError(
            f"{op}: blocksize applies to sparse_bsr and sparse_bsc only, not to {layout} (blocksize={bs}). "
            "Leave it out, or use a blocked layout."
        )
    batch = shape[:n_batch]
    grid = (shape[n_batch] // bs[0], shape[n_batch + 1] // bs[1])
    vdt = dtype if dtype is not None else _default_float(xp, device)
    idt = _default_index_dtype(xp, device) if index_dtype is None else index_dtype
    ci = xp.zeros(batch + (grid[layout.compressed_dim] + 1,), dtype=idt, device=device)
    pi = xp.zeros(batch + (0,), dtype=idt, device=device)
    vals = xp.zeros(batch + (0,) + (bs if layout.is_blocked else ()) + shape[n_batch + 2 :], dtype=vdt, device=device)
    return CompressedArray(ci, pi, vals, shape, layout=layout, backend=b, xp=xp, fill_value=_fill(xp, vdt, fill_value), check=check, op=op)


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


def _default_index_dtype(xp: Any, device: Any) -> Any:
    """The index dtype of an empty array created on ``device``: int64, or int32 on a device without int64
    (array-api-strict's ``Device('no_x64')``, a 32-bit JAX), which could not hold the array at all."""
    if device is None:
        return xp.int64
    try:
        held = xp.__array_namespace_info__().dtypes(device=device, kind="signed integer")
    except Exception:  # a namespace without the inspection API, or one that does not know this device
        return xp.int64
    return xp.int64 if "int64" in held else xp.int32


def _creation(
    op: str, shape: Any, dtype: Any, layout: Layout | None, device: Any, backend: Any, blocksize: Any, dense_dim: Any,
    sparse_dim: Any, fill_value: Any, empty: bool, index_dtype: Any = None,
) -> Any:  # fmt: skip
    b = backend_of(op=op, backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype, op)
    shp = _shape_arg(op, (shape,) if hasattr(shape, "__index__") else shape)
    if shp is None:
        raise TypeError(f"{op}: shape is required (shape=None). Pass a shape such as (2, 3).")
    if any(s < 0 for s in shp):
        # one message for the strided and the sparse result (the backends' own differ, and the sparse
        # validator's names no function)
        raise ValueError(f"{op}: the sizes of shape must be non-negative (shape={shp}). Pass sizes >= 0.")
    device = device_argument(op, b, device)
    dense_dim = None if dense_dim is None else integer_argument(op, "dense_dim", dense_dim)
    sparse_dim = None if sparse_dim is None else integer_argument(op, "sparse_dim", sparse_dim)
    if layout is None or layout is strided:
        # as in asarray: the arguments that shape a sparse result contradict a strided one
        if blocksize is not None or dense_dim is not None or sparse_dim is not None:
            raise ValueError(
                f"{op}: blocksize, sparse_dim and dense_dim describe a sparse result, and this one is strided (layout={layout}, "
                f"blocksize={blocksize}, sparse_dim={sparse_dim}, dense_dim={dense_dim}). Leave them out, or pass a sparse layout."
            )
        if not _plus_zero(fill_value):
            dt = dt if dt is not None else _default_float(xp, device)
            # checked as a sparse array's fill value is: the backends' full wraps 300 in int8, truncates 1.5
            # to 1 and drops an imaginary part, where xsparse refuses what it would change
            return xp.full(shp, _fill(xp, dt, fill_value), dtype=dt, device=device)
        make = xp.empty if empty else xp.zeros
        return make(shp, dtype=dt, device=device)
    if layout is sparse_coo:
        if blocksize is not None:
            raise ValueError(
                f"{op}: blocksize applies to sparse_bsr and sparse_bsc only, not to {layout} (blocksize={blocksize}). Leave it "
                "out, or use a blocked layout."
            )
        if sparse_dim is not None and dense_dim is not None and sparse_dim + dense_dim != len(shp):
            raise ValueError(
                f"{op}: sparse_dim + dense_dim must equal the number of dimensions of shape {shp} (sparse_dim={sparse_dim}, "
                f"dense_dim={dense_dim}). Give only one of the two."
            )
        sd = len(shp) - (dense_dim or 0) if sparse_dim is None else sparse_dim
        if not 0 <= sd <= len(shp):
            raise ValueError(
                f"{op}: a sparse_coo array of shape {shp} has between 0 and {len(shp)} sparse dimensions, got "
                f"sparse_dim={sd} (sparse_dim={sparse_dim}, dense_dim={dense_dim}). Give sparse_dim or dense_dim in [0, {len(shp)}]."
            )
        vdt = dt if dt is not None else _default_float(xp, device)
        idx = xp.zeros((sd, 0), dtype=_default_index_dtype(xp, device) if index_dtype is None else index_dtype, device=device)
        vals = xp.zeros((0, *shp[sd:]), dtype=vdt, device=device)
        return COOArray(idx, vals, shp, backend=b, xp=xp, coalesced=True, fill_value=_fill(xp, vdt, fill_value), op=op)
    if isinstance(layout, Layout) and layout.is_compressed:
        if sparse_dim is not None and sparse_dim != 2:
            raise ValueError(
                f"{op}: a {layout} array has exactly 2 sparse dimensions (sparse_dim={sparse_dim}). Leave sparse_dim out (the "
                "dimensions before the last two sparse ones are batch dimensions), or use layout=sparse_coo."
            )
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
    layout: Layout | None = strided,
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
    layout: Layout | None = strided,
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
    layout: Layout | None = strided,
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
    device = device_argument("full", b, device)
    dt = resolve_dtype(xp, dtype, "full") if dtype is not None else _default_dtype_for(xp, fill_value, device)
    return _creation("full", shape, dt, layout, device, b, blocksize, dense_dim, sparse_dim, fill_value, False)


def ones(
    shape: int | Sequence[int],
    *,
    dtype: Any = None,
    device: Any = None,
    layout: Layout | None = strided,
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
    layout: Layout | None = strided,
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
    dt = resolve_dtype(xp, dtype, op)
    device = device_argument(op, b, device)
    rows = integer_argument(op, "n_rows", n_rows)
    cols = rows if n_cols is None else integer_argument(op, "n_cols", n_cols)
    if rows < 0 or cols < 0:
        raise ValueError(f"{op}: the number of rows and columns must be non-negative (n_rows={rows}, n_cols={cols}). Pass sizes >= 0.")
    # A diagonal past the last column or row is empty; clamping it keeps the offset inside int64.
    k = max(-rows, min(integer_argument(op, "k", k), cols))
    layout = _diagonal_layout(op, layout, blocksize)
    if layout is strided:
        return xp.eye(rows, cols, k=k, dtype=dt, device=device)
    vdt = dt if dt is not None else _default_float(xp, device)
    # the elements (i, i + k) inside the matrix, built directly: O(their number), however wide the matrix
    first, stop = max(0, -k), max(0, min(rows, cols - k))
    count = max(0, stop - first)
    i = xp.arange(first, first + count, dtype=xp.int64, device=device)
    coo = COOArray(
        xp.stack([i, i + k]), xp.ones((count,), dtype=vdt, device=device), (rows, cols), backend=b, xp=xp, coalesced=True,
        fill_value=_fill(xp, vdt, 0), op=op,
    )
    return _coo_in_layout(op, coo, layout, blocksize)


def _diagonal_layout(op: str, layout: Any, blocksize: Any) -> Layout:
    """The result layout of ``eye`` or ``spdiags`` (``None`` is strided for ``eye``, COO for ``spdiags``, passed
    resolved), refusing anything else and a ``blocksize`` that a non-blocked layout would ignore."""
    if layout is None:
        layout = strided
    if not isinstance(layout, Layout) or not (layout is strided or layout is sparse_coo or layout.is_compressed):
        raise LayoutError(
            f"{op}: layout must be strided or one of sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc "
            f"(layout={layout!r}). Pass one of them."
        )
    if blocksize is not None and (layout is strided or layout is sparse_coo):
        # CSR and CSC take blocksize=(1, 1), as to_sparse does; to_sparse refuses any other
        raise ValueError(
            f"{op}: blocksize applies to sparse_bsr and sparse_bsc only, not to {layout} (blocksize={blocksize}). Leave it "
            "out, or use a blocked layout."
        )
    return layout


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
        ``(n_diagonals,)`` distinct integers (a 0-d offset, or one of shape ``(1,)``, goes with a 1-D
        ``diagonals``): 0 is the main diagonal, positive offsets lie above it, negative ones below.
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
    # torch's default: COO
    target = _diagonal_layout(op, sparse_coo if layout is None else layout, blocksize)
    return _spdiags(op, b, xp, diagonals, offsets, shape, target, blocksize)


def _spdiags(op: str, b: Backend, xp: Any, diagonals: Any, offsets: Any, shape: Any, layout: Layout, blocksize: Any) -> Any:
    """:func:`spdiags` into ``layout`` (checked), with the errors of the conversion naming ``op``."""
    shp = _shape_arg(op, shape)
    if shp is None or len(shp) != 2 or min(shp) < 0:
        raise ValueError(f"{op}: shape must be two non-negative sizes (shape={shape!r}). Pass (rows, columns).")
    rows, cols = shp
    distinct_checked = False
    if isinstance(offsets, (list, tuple)) and all(isinstance(o, int) and not isinstance(o, bool) for o in offsets):
        # Python integers of any size: a diagonal past the last column or row is empty, and clamped to the
        # matrix's edge its offset fits int64 (2**63 would otherwise make NumPy read the list as floats)
        _distinct_offsets(op, list(offsets))
        offsets, distinct_checked = [max(-rows, min(o, cols)) for o in offsets], True
    diag = diagonals if is_strided(diagonals) else xp.asarray(diagonals, device=_lists_device(op, None, offsets))
    off = offsets if is_strided(offsets) else xp.asarray(offsets, dtype=xp.int64 if distinct_checked else None, device=array_api_compat.device(diag))
    if diag.ndim == 1 and off.ndim <= 1 and math.prod(off.shape) == 1:
        # one diagonal, with its offset 0-d or of one element (as torch takes it)
        diag, off = diag[None, :], xp.reshape(off, (1,))
    if diag.ndim != 2 or off.ndim != 1 or diag.shape[0] != off.shape[0]:
        raise ValueError(
            f"{op}: diagonals must be 2-D and offsets 1-D with one offset per row of diagonals, or diagonals 1-D with one "
            f"offset (diagonals.shape={tuple(diag.shape)}, offsets.shape={tuple(off.shape)}). Give offsets (n,) for diagonals (n, length)."
        )
    if not xp.isdtype(off.dtype, "integral"):
        raise TypeError(f"{op}: offsets must be integers (dtype={dtype_name(off.dtype)}). Pass an integer array or a list of ints.")
    if not distinct_checked and off.shape[0] > 1 and int(xp.max(xp.unique_counts(off).counts)) > 1:
        _distinct_offsets(op, [int(o) for o in off])
    # clamped to the matrix's edges as above: an unsigned offset past int64 would wrap to a negative one,
    # and a signed one near int64's ends would overflow the kernel's row arithmetic
    if xp.isdtype(off.dtype, "unsigned integer"):
        if int(xp.iinfo(off.dtype).max) > cols:
            off = xp.minimum(off, xp.asarray(cols, dtype=off.dtype, device=array_api_compat.device(off)))
        off = xp.astype(off, xp.int64)
    else:
        off = xp.clip(xp.astype(off, xp.int64), -rows, cols)
    result = dispatch.call("spdiags", (strided, strided), b.name, xp, diag, off, shp, b)
    return _coo_in_layout(op, result, layout, blocksize)


def _distinct_offsets(op: str, offsets: list[int]) -> None:
    if len(set(offsets)) != len(offsets):
        raise ValueError(f"{op}: offsets must be distinct (offsets={offsets}). Sum the diagonals of equal offset first.")


def random(
    shape: int | Sequence[int],
    /,
    density: float | None = None,
    *,
    nnz: int | None = None,
    layout: Layout | None = sparse_coo,
    dtype: Any = None,
    seed: Any = None,
    device: Any = None,
    backend: str | Backend | None = None,
    blocksize: tuple[int, int] | None = None,
    index_dtype: Any = None,
) -> Any:
    """A sparse array with elements at random positions (SciPy's ``random_array``, pydata/sparse's ``random``).

    Parameters
    ----------
    shape
        The array's shape.
    density
        The share of the elements that are specified, in ``[0, 1]``: ``round(density * size)`` of them
        (0.01 unless ``nnz`` is given).
    nnz
        The number of specified elements, instead of ``density``.
    layout
        The result's layout (COO, the default, for None too); BSR and BSC need ``blocksize`` and store the
        whole blocks that hold a drawn element; ``strided`` gives the dense array.
    dtype
        The values' dtype (default: the backend's default floating dtype). Floating values are uniform in
        ``[0, 1)``, complex ones in that square, integers uniform over the dtype's range, booleans True.
    seed
        None, an int, a sequence of ints or a NumPy ``Generator``: the positions and values are drawn with
        NumPy's generator on the host, so one seed and dtype give one array on every backend and device.
    device, backend
        Where the array is created.
    blocksize
        The block shape of a BSR or BSC result.
    index_dtype
        ``"int32"`` or ``"int64"`` (the default) for the indices.

    Returns
    -------
    SparseArray
        A coalesced COO array (or the ``layout`` asked for) whose positions are distinct and uniformly
        distributed among all, with fill value 0.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.random((4, 5), density=0.25, seed=0)
    >>> a.layout, a.nnz, a.is_coalesced()
    (xsparse.sparse_coo, 5, True)
    >>> b = xs.random((4, 5), nnz=5, seed=0, layout=xs.sparse_csr)
    >>> bool((xs.to_dense(b) == xs.to_dense(a)).all())
    True
    """
    op = "random"
    b = backend_of(op=op, backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype, op)
    device = device_argument(op, b, device)
    shp = _shape_arg(op, (shape,) if hasattr(shape, "__index__") else shape)
    if shp is None or any(s < 0 for s in shp):
        raise ValueError(f"{op}: shape must be non-negative sizes (shape={shape!r}). Pass a shape such as (2, 3).")
    size = math.prod(shp)
    if size > _INT64_MAX:
        raise ValueError(
            f"{op}: the array would have {size} elements, more than int64 positions address (shape={shp}). Ask for a smaller shape."
        )
    from ._elementwise import layout_argument

    layout = layout_argument(op, layout) or sparse_coo
    if blocksize is not None and (layout is strided or layout is sparse_coo):
        _diagonal_layout(op, layout, blocksize)  # its error: blocksize would be ignored
    if nnz is not None and density is not None:
        raise ValueError(f"{op}: give density or nnz, not both (density={density!r}, nnz={nnz!r}). Leave one out.")
    if nnz is not None:
        count = integer_argument(op, "nnz", nnz)
        if not 0 <= count <= size:
            raise ValueError(f"{op}: nnz must lie in [0, {size}] for shape {shp} (nnz={count}). Ask for at most every element.")
    else:
        density = 0.01 if density is None else density
        if isinstance(density, bool) or not isinstance(density, (int, float, np.integer, np.floating)) or not 0 <= density <= 1:
            raise ValueError(f"{op}: density must be a number in [0, 1] (density={density!r}). Pass the share of specified elements.")
        count = int(round(float(density) * size))
    idt = xp.int64 if index_dtype is None else resolve_dtype(xp, index_dtype, op)
    if dtype_name(idt) not in ("int32", "int64"):
        raise TypeError(f"{op}: index_dtype must be int32 or int64 (index_dtype={index_dtype!r}). Pass 'int32' or 'int64'.")
    if dtype_name(idt) == "int32" and index_overflows("int32", max((*shp, count, 0))):
        raise ValueError(
            f"{op}: int32 indices cannot address shape {shp} with {count} elements (index_dtype=int32). Pass index_dtype='int64'."
        )
    rng = np.random.default_rng(seed_argument(op, seed))
    flat = np.sort(rng.choice(size, size=count, replace=False, shuffle=False)) if count else np.zeros(0, dtype=np.int64)
    host_idx = np.stack(np.unravel_index(flat, shp)) if shp else np.zeros((0, count), dtype=np.int64)
    vdt = dt if dt is not None else _default_float(xp, device)
    values = xp.asarray(_random_values(rng, dtype_name(vdt), count), device=device)
    indices = xp.asarray(host_idx.astype(np.int64), device=device)
    values = xp.astype(values, vdt)
    if xp.isdtype(vdt, "real floating"):
        # a draw below 1 may round to 1 in a narrower dtype (float16, bfloat16): the largest value below 1
        # takes its place
        below_one = xp.asarray(1 - xp.finfo(vdt).eps / 2, dtype=vdt, device=device)
        values = xp.where(values < 1, values, below_one)
    coo = COOArray(xp.astype(indices, idt), values, shp, backend=b, xp=xp, coalesced=True, fill_value=_fill(xp, vdt, 0), op=op)
    return _coo_in_layout(op, coo, layout, blocksize)


def _coo_in_layout(op: str, coo: COOArray, layout: Layout, blocksize: Any) -> Any:
    """A created COO array in the ``layout`` asked for (the conversion's errors naming ``op``)."""
    if layout is sparse_coo:
        return coo
    from ._conversion import to_dense, to_sparse
    from ._elementwise import converting_for

    if layout is strided:
        return to_dense(coo)
    with converting_for(op, layout, "the result"):
        return to_sparse(coo, layout=layout, blocksize=blocksize)


def _random_values(rng: np.random.Generator, dtype: str, count: int) -> np.ndarray:
    """``count`` random values of ``dtype`` on the host: uniform in [0, 1) (both parts of a complex value,
    float32 for the dtypes narrower than float64), uniform over an integer dtype's range, True for bool."""
    if dtype == "bool":
        return np.ones(count, dtype=bool)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(np.dtype(dtype))
        return rng.integers(info.min, info.max, size=count, dtype=np.dtype(dtype), endpoint=True)
    # drawn in the dtype's own precision where NumPy has one (a float64 draw below 1 may round to 1 in float32)
    if dtype == "complex64":
        return rng.random(count, dtype=np.float32) + 1j * rng.random(count, dtype=np.float32)
    if dtype.startswith("complex"):
        return rng.random(count) + 1j * rng.random(count)
    if dtype == "float64":
        return rng.random(count)
    return rng.random(count, dtype=np.float32)  # float32, and float16 or bfloat16 after a cast


def _like(op: str, x: Any, fill_value: Any, dtype: Any, device: Any, layout: Layout | None, blocksize: Any, empty: bool) -> Any:
    if not isinstance(x, SparseArray) and not is_strided(x, op):
        raise TypeError(f"{op}: x must be an xsparse array or a backend array, got {type(x).__name__}. Pass an array.")
    b = backend_of(x, op=op)
    xp = b.load()
    dt = resolve_dtype(xp, dtype, op) if dtype is not None else x.dtype
    dev = device if device is not None else array_api_compat.device(x._vals if isinstance(x, SparseArray) else x)
    target = layout if layout is not None else (x.layout if isinstance(x, SparseArray) else strided)
    sparse_dim = dense_dim = index_dtype = None
    if isinstance(x, SparseArray) and isinstance(target, Layout):
        # x's structure, where the target layout has it: the sparse dimensions of a COO result, the dense
        # ones of a compressed result, the block shape of a blocked one (a CSR result of a BSR x has none)
        index_dtype = getattr(x, "index_dtype", None)
        if target is sparse_coo:
            sparse_dim = x.ndim - x.dense_dim()
        elif target.is_compressed:
            dense_dim = x.dense_dim()
            if blocksize is None and target.is_blocked and x.layout.is_blocked:
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


# -- the Array API's other creation functions ----------------------------------------------------------


def _to_layout(op: str, x: Any, layout: Layout | None, blocksize: Any, fill_value: Any = None, **dims: int | None) -> Any:
    """``x`` (strided or sparse) in ``layout`` (None: as it is), with ``blocksize``, ``fill_value`` and the
    ``sparse_dim``/``dense_dim`` split in ``dims`` checked or applied by :func:`xsparse.to_sparse`."""
    dims = {k: v for k, v in dims.items() if v is not None}
    if layout is None or layout is strided:
        if blocksize is not None or fill_value is not None or dims:
            given = "".join(f", {k}={v}" for k, v in dims.items())
            raise ValueError(
                f"{op}: blocksize, fill_value, sparse_dim and dense_dim describe a sparse result, and this one is strided "
                f"(layout={layout}, blocksize={blocksize}, fill_value={fill_value}{given}). Leave them out, or pass a sparse layout."
            )
        return x if layout is None or not isinstance(x, SparseArray) else _dense(x)
    if not isinstance(layout, Layout):
        raise LayoutError(f"{op}: layout must be an xsparse layout (layout={layout!r}). Pass e.g. xsparse.sparse_coo or xsparse.strided.")
    from ._conversion import to_sparse

    from ._elementwise import converting_for

    kwargs: dict[str, Any] = {"layout": layout, **dims}
    if blocksize is not None:
        kwargs["blocksize"] = blocksize
    if fill_value is not None:
        kwargs["fill_value"] = fill_value
    with converting_for(op, layout, "the array"):
        return to_sparse(x, **kwargs)


def _dense(x: SparseArray) -> Any:
    from ._conversion import to_dense

    return to_dense(x)


def asarray(
    obj: Any,
    /,
    *,
    dtype: Any = None,
    device: Any = None,
    copy: bool | None = None,
    layout: Layout | None = None,
    backend: str | Backend | None = None,
    blocksize: tuple[int, int] | None = None,
    fill_value: Any = None,
    sparse_dim: int | None = None,
    dense_dim: int | None = None,
) -> Any:
    """An array from ``obj``: an array (strided or sparse), a Python scalar, a nested sequence, or an
    object with the buffer or DLPack protocol.

    Parameters
    ----------
    obj
        What to convert. A sparse array stays sparse (cast or moved as asked); so does a sparse array of
        another library (a torch sparse tensor, a SciPy sparse matrix or array, a pydata/sparse ``COO`` or
        ``GCXS``, a JAX ``BCOO`` or ``BCSR``), made from its components without densifying, on the backend of its
        components (torch, NumPy, jax.numpy) or ``backend``. Anything else becomes a strided array of the
        backend (the one of ``obj``, else ``backend``, else the default backend); a buffer object
        (``array.array``) is read with its own format, as NumPy reads it, on every backend.
    dtype, device, copy
        As in the Array API. ``copy=False`` with a sparse ``obj`` that needs a cast raises (as it does
        for strided arrays in the standard).
    layout
        The result layout; by default ``obj``'s (strided for anything that is not a sparse array).
        ``xs.strided`` densifies a sparse ``obj`` explicitly.
    backend
        The backend for Python scalars and sequences.
    blocksize, fill_value
        Passed to :func:`xsparse.to_sparse`, which makes a strided ``obj`` sparse with them and checks them
        against a sparse one (a conversion keeps the fill value; a blocked layout takes this block shape).
        They describe a sparse result: a strided one raises ``ValueError``. ``copy=False`` raises when
        the layout changes, since a conversion between layouts copies.
    sparse_dim, dense_dim
        How the dimensions of a sparse result split into sparse and dense ones, as in
        :func:`xsparse.to_sparse` (``dense_dim=1`` keeps the last dimension dense); they too describe a
        sparse result.

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.asarray([[1.0, 0.0], [0.0, 2.0]], layout=xs.sparse_csr).col_indices().tolist()
    [0, 1]
    >>> a = xs.sparse_coo_array([[0]], [3], (2,))
    >>> xs.asarray(a) is a, xs.asarray(a, dtype=xs.float32).dtype
    (True, dtype('float32'))
    >>> xs.asarray(a, layout=xs.strided).tolist()
    [3, 0]
    """
    op = "asarray"
    if not isinstance(obj, (SparseArray, list, tuple, bool, int, float, complex, str)):
        from ._foreign import from_foreign_sparse

        converted = from_foreign_sparse(op, obj, backend)
        if converted is not None:
            # another library's sparse array, made an xsparse array from its components (on ``backend``
            # already); dtype=, layout= and copy= apply to it below as to any sparse array
            obj, copied = converted
            if copy is False and copied:
                raise ValueError(
                    f"{op}: copy=False but the sparse array cannot be converted without a copy (copy={copy!r}): its indices "
                    "are sorted, converted or moved to another backend. Pass copy=None to allow a copy."
                )
            backend = None
    if isinstance(obj, SparseArray):
        b = backend_of(obj, op=op, backend=backend)
        xp = b.load()
        device = device_argument(op, b, device)
        result: Any = obj
        needs_cast = dtype is not None and dtype_name(resolve_dtype(xp, dtype, op)) != dtype_name(obj.dtype)
        needs_move = device is not None and device != obj.device
        if copy is False and (needs_cast or needs_move):
            raise ValueError(
                f"{op}: copy=False but the array must be {'cast' if needs_cast else 'moved'} (dtype={dtype!r}, device={device!r}). "
                "Pass copy=None to allow a copy."
            )
        if copy is False and layout is not None and layout is not obj.layout:
            raise ValueError(
                f"{op}: copy=False but a {obj.layout} array converted to {layout} is a copy (layout={layout}). Pass copy=None "
                "to allow a copy."
            )
        if needs_cast or needs_move:
            from ._indexing import astype

            result = astype(obj, resolve_dtype(xp, dtype, op) if dtype is not None else obj.dtype, copy=bool(copy) or needs_cast, device=device)
        elif copy:
            from ._indexing import clone

            result = clone(obj)  # every layout has one (a 2:4 array has no astype)
        target = obj.layout if layout is None else layout
        if blocksize is None and fill_value is None and sparse_dim is None and dense_dim is None:
            if target is obj.layout:
                return result
            from ._elementwise import convert_result

            return convert_result(result, layout, op)
        return _to_layout(op, result, target, blocksize, fill_value, sparse_dim=sparse_dim, dense_dim=dense_dim)
    if isinstance(obj, (list, tuple)) and any(isinstance(leaf, SparseArray) for leaf in _leaves(obj)):
        nested = _nested_with_arrays(op, obj, dtype, device, copy, backend)
        return _to_layout(op, nested, layout, blocksize, fill_value, sparse_dim=sparse_dim, dense_dim=dense_dim)
    b = backend_of(obj, op=op, backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype, op)
    device = device_argument(op, b, device)
    kwargs: dict[str, Any] = {}
    if dt is not None:
        kwargs["dtype"] = dt
    if device is not None:
        kwargs["device"] = device
    if copy is not None:
        kwargs["copy"] = copy
    if copy is False and layout is not None and layout is not strided:
        raise ValueError(f"{op}: copy=False but a {layout} array made from strided data is a copy (layout={layout}). Pass copy=None to allow a copy.")
    if dt is not None and isinstance(obj, (list, tuple, int)):
        obj = _representable(op, obj, dt)
    obj = _read_buffer(obj)
    # a Python number (NumPy's float64 and complex128 are Python ones) through scalar_array: CuPy's asarray
    # of a 0-d -0.0 gives +0.0
    number = isinstance(obj, (float, complex)) and copy is not False
    made = scalar_array(xp, obj, dt, device) if number else xp.asarray(obj, **kwargs)
    return _to_layout(op, made, layout, blocksize, fill_value, sparse_dim=sparse_dim, dense_dim=dense_dim)


def _read_buffer(obj: Any) -> Any:
    """An object with the buffer protocol (``array.array``, ``bytearray``, a ``memoryview``) as a NumPy array
    of the buffer's own format; anything else unchanged.

    The backends read a buffer differently: NumPy by its format, torch as raw bytes of its default dtype
    (``array.array("d", [1, 2, 3])`` became six float32 numbers). Read by NumPy first, every backend gets
    the same elements. Arrays of a backend (``is_strided``), DLPack objects, scalars, sequences, ``str``
    and ``bytes`` (a scalar to NumPy) are left to the backend's ``asarray``.
    """
    if isinstance(obj, (bool, int, float, complex, str, bytes, list, tuple)) or obj is None or hasattr(obj, "__dlpack__") or is_strided(obj):
        return obj
    try:
        view = memoryview(obj)
    except TypeError:
        return obj  # no buffer protocol
    import numpy as np

    return np.asarray(view)


def _leaves(obj: Any) -> Any:
    """The elements of a nested list or tuple that are not lists or tuples themselves."""
    for item in obj:
        if isinstance(item, (list, tuple)):
            yield from _leaves(item)
        else:
            yield item


def _nested_with_arrays(op: str, obj: list[Any] | tuple[Any, ...], dtype: Any, device: Any, copy: bool | None, backend: str | Backend | None) -> Any:
    """A nested sequence that holds xsparse arrays (``[[x[0, 0], x[0, 1]], ...]`` of 0-d arrays), as one
    strided array: each array is read as its dense elements and the levels are stacked.

    The backends' own ``asarray`` would ask each sparse element for ``__array__``, which xsparse refuses
    (no implicit densification); here the elements are read explicitly, since the sequence asks for
    every one of them. Without ``dtype``, the result's is the promotion of the arrays' dtypes and the
    Python scalars' kinds (:func:`xsparse.result_type`).
    """
    from ._conversion import to_dense
    from ._dtypes import result_type

    leaves = list(_leaves(obj))
    arrays = [leaf for leaf in leaves if isinstance(leaf, SparseArray) or is_strided(leaf, op)]
    for leaf in leaves:
        if not isinstance(leaf, (SparseArray, bool, int, float, complex)) and not is_strided(leaf):
            raise TypeError(
                f"{op}: a nested sequence that holds arrays may hold only arrays and Python numbers besides, got "
                f"{type(leaf).__name__} (element={leaf!r}). Replace it with a number or an array."
            )
    b = backend_of(*arrays, op=op, backend=backend)
    xp = b.load()
    device = device_argument(op, b, device)
    if copy is False:
        raise ValueError(
            f"{op}: copy=False but a sequence of arrays is always copied into a new array (len(obj)={len(obj)}). "
            "Pass copy=None or copy=True."
        )
    if dtype is not None:
        dt = resolve_dtype(xp, dtype, op)
    else:
        scalars = [leaf for leaf in leaves if isinstance(leaf, (bool, int, float, complex))]
        try:
            dt = result_type(*(a.dtype for a in arrays), *scalars)
        except (TypeError, ValueError) as exc:  # array_api_strict promotes no int32 array with a float
            raise TypeError(
                f"{op}: the arrays and the Python numbers of the nested sequence have no common dtype (dtypes="
                f"{sorted({dtype_name(a.dtype) for a in arrays})}, numbers={sorted({type(v).__name__ for v in scalars})}). "
                "Pass dtype=, or numbers of the arrays' kind."
            ) from exc
    if device is None:
        device = arrays[0].device

    def build(item: Any, where: str) -> Any:
        if isinstance(item, (list, tuple)):
            if not item:
                return xp.asarray([], dtype=dt, device=device)
            parts = [build(i, f"{where}[{n}]") for n, i in enumerate(item)]
            shapes = [tuple(p.shape) for p in parts]
            if len(set(shapes)) > 1:
                # the backends' stack raises its own error (NumPy's, torch's), naming no element
                n = next(i for i, shp in enumerate(shapes) if shp != shapes[0])
                raise ValueError(
                    f"{op}: the nested sequence is ragged: obj{where}[0] has shape {shapes[0]} and obj{where}[{n}] has "
                    f"shape {shapes[n]} (len(obj{where})={len(item)}). Give the elements of every level one shape."
                )
            return xp.stack(parts)
        if isinstance(item, SparseArray) or is_strided(item):
            dense = to_dense(item)
            if dense.dtype != dt:
                dense = xp.astype(dense, dt)
            return dense if dense.device == device else array_api_compat.to_device(dense, device)
        return scalar_array(xp, item, dt, device)

    return build(obj, "")


def arange(
    start: int | float,
    /,
    stop: int | float | None = None,
    step: int | float = 1,
    *,
    dtype: Any = None,
    device: Any = None,
    layout: Layout = strided,
    backend: str | Backend | None = None,
) -> Any:
    """Evenly spaced values in ``[start, stop)`` (``[0, start)`` without ``stop``), as the Array API's
    ``arange``; a sparse ``layout`` converts the result (``sparse_coo``: a 1-D array has no compressed layout).

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.arange(4).tolist()
    [0, 1, 2, 3]
    >>> r = xs.arange(0, 4, layout=xs.sparse_coo)
    >>> r.nnz, r.indices().tolist()
    (3, [[1, 2, 3]])
    """
    op = "arange"
    b = backend_of(op=op, backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype, op)
    device = device_argument(op, b, device)
    if not isinstance(step, bool) and isinstance(step, (int, float)) and step == 0:
        # NumPy raises ZeroDivisionError, torch a RuntimeError, and xsparse's own unsigned arange range()'s ValueError
        raise ValueError(f"{op}: step must not be zero (step={step!r}). Pass a positive or negative step.")
    if dt is not None and xp.isdtype(dt, "unsigned integer"):
        _unsigned_values(op, xp, dt, (0, start) if stop is None else (start, stop), step)
    kwargs: dict[str, Any] = {"step": step, "dtype": dt, "device": device}
    if stop is not None:
        kwargs["stop"] = stop
    try:
        result = xp.arange(start, **kwargs)
    except (NotImplementedError, RuntimeError, OverflowError):
        if dt is None or signed_twin(xp, dt) is None:
            raise
        result = _unsigned_arange(xp, (0, start) if stop is None else (start, stop), step, dt, device)
    return _to_layout("arange", result, layout, None)


def _unsigned_values(op: str, xp: Any, dtype: Any, bounds: tuple[Any, Any], step: Any) -> None:
    """Refuse an integer ``arange`` of the unsigned ``dtype`` whose values are not all in the dtype's range.

    The backends disagree there: torch and JAX wrap the values (-3 became 65533 in uint16), NumPy raises
    for a start outside the range yet wraps the values past a stop below 0. Every backend raises NumPy's
    OverflowError instead, for every value the dtype cannot hold. Bounds that are not integers go to the
    backend as they are (NumPy floors them).
    """
    values = (*bounds, step)
    if any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        return
    made = range(*values)
    if not made:
        return
    bits: int = xp.iinfo(dtype).bits
    for v in (made[0], made[-1]):
        if not 0 <= v < 2**bits:
            raise OverflowError(
                f"{op}: the values from {made[0]} to {made[-1]} do not fit in {dtype_name(dtype)} (value={v}, "
                f"dtype={dtype_name(dtype)}). Pass bounds whose values lie in [0, 2**{bits}), or make the values in a "
                "signed dtype and cast them with xsparse.astype."
            )


def _unsigned_bits(op: str, xp: Any, dtype: Any, *bounds: Any) -> int:
    """The width of the unsigned ``dtype``; OverflowError (NumPy's) where a bound is no integer of its range."""
    bits: int = xp.iinfo(dtype).bits
    for v in bounds:
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2**bits:
            raise OverflowError(
                f"{op}: the backend makes no {dtype_name(dtype)} values but from integers in its range, and a "
                f"bound is not one (value={v!r}, dtype={dtype_name(dtype)}). Pass integers in [0, 2**{bits}), or "
                "make the values in a signed or floating dtype and cast them with xsparse.astype."
            )
    return bits


def _unsigned_arange(xp: Any, bounds: tuple[Any, Any], step: Any, dtype: Any, device: Any) -> Any:
    """``arange`` of an unsigned ``dtype`` the backend makes none of (torch's uint16/32/64): ``first + i * step``
    in int64, whose sums and products modulo 2**64 have the bits of the unsigned ones; O(n)."""
    if not all(isinstance(v, int) for v in (*bounds, step)):
        _unsigned_bits("arange", xp, dtype, *bounds, step)  # raises: a bound or the step is no int
    values = range(bounds[0], bounds[1], step)
    if not values:
        _unsigned_bits("arange", xp, dtype, *bounds)
        return xp.zeros((0,), dtype=dtype, device=device)
    _unsigned_bits("arange", xp, dtype, values[0], values[-1])
    twin = [(v + 2**63) % 2**64 - 2**63 for v in (values[0], step)]
    i = xp.arange(len(values), dtype=xp.int64, device=device)
    return xp.astype(i * twin[1] + twin[0], dtype)


def linspace(
    start: int | float | complex,
    stop: int | float | complex,
    /,
    num: int,
    *,
    dtype: Any = None,
    device: Any = None,
    endpoint: bool = True,
    layout: Layout = strided,
    backend: str | Backend | None = None,
) -> Any:
    """``num`` evenly spaced values from ``start`` to ``stop`` (the Array API's ``linspace``); a sparse
    ``layout`` converts the result.

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.linspace(0.0, 1.0, 5).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    b = backend_of(op="linspace", backend=backend)
    xp = b.load()
    dt = resolve_dtype(xp, dtype, "linspace")
    device = device_argument("linspace", b, device)
    try:
        result = xp.linspace(start, stop, num, dtype=dt, device=device, endpoint=bool(endpoint))
    except (NotImplementedError, RuntimeError):
        if dt is None or signed_twin(xp, dt) is None:
            raise
        # NumPy's integer linspace: the float64 one, floored and cast; the cast goes through int64
        # (the upper half of uint64 as its twin), which the backend converts from float64
        bits = _unsigned_bits("linspace", xp, dt, start, stop)
        y = xp.floor(xp.linspace(start, stop, num, dtype=xp.float64, device=device, endpoint=bool(endpoint)))
        if bits == 64:
            y = xp.where(y >= 2.0**63, y - 2.0**64, y)
        result = xp.astype(xp.astype(y, xp.int64), dt)
    return _to_layout("linspace", result, layout, None)


def meshgrid(*arrays: Any, indexing: str = "xy") -> list[Any]:
    """Coordinate matrices from 1-D arrays (the Array API's ``meshgrid``).

    Each output has the layout of its input: a sparse (COO) vector gives a sparse COO grid whose
    specified elements are the vector's, repeated along the other dimensions.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> x = xs.sparse_coo_array([[1]], [5.0], (3,))
    >>> gx, gy = xs.meshgrid(x, np.asarray([1.0, 2.0]))
    >>> gx.layout, gx.to_dense().tolist(), gy.tolist()
    (xsparse.sparse_coo, [[0.0, 5.0, 0.0], [0.0, 5.0, 0.0]], [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    """
    op = "meshgrid"
    if indexing not in ("xy", "ij"):
        raise ValueError(f"{op}: indexing must be 'xy' or 'ij' (indexing={indexing!r}). Pass one of them.")
    for i, a in enumerate(arrays):
        if not isinstance(a, SparseArray) and not is_strided(a, "meshgrid"):
            raise TypeError(f"{op}: arrays[{i}] is not an array ({type(a).__name__}). Pass 1-D arrays.")
        if a.ndim != 1:
            raise ValueError(f"{op}: every array must be 1-D (arrays[{i}].shape={tuple(a.shape)}). Flatten it first.")
    b = backend_of(*arrays, op=op)
    xp = b.load()
    if not any(isinstance(a, SparseArray) for a in arrays):
        return list(xp.meshgrid(*arrays, indexing=indexing))
    from ._shape import broadcast_to, reshape

    n = len(arrays)
    where = list(range(n))
    if indexing == "xy" and n >= 2:
        where[0], where[1] = 1, 0
    shape = [0] * n
    for a, w in zip(arrays, where):
        shape[w] = int(a.shape[0])
    out = []
    for a, w in zip(arrays, where):
        one = [1] * n
        one[w] = shape[w]
        out.append(broadcast_to(reshape(a, tuple(one)), tuple(shape)))
    return out


def _triangle(op: str, x: Any, k: int, layout: Layout | None) -> Any:
    if not isinstance(x, SparseArray) and not is_strided(x, op):
        raise TypeError(f"{op}: x must be an xsparse array or a backend array, got {type(x).__name__}. Pass an array.")
    if x.ndim < 2:
        raise ValueError(f"{op}: x must have at least 2 dimensions (x.shape={tuple(x.shape)}). Pass a matrix or a stack of them.")
    # a diagonal past the last column or row is empty, as in eye: clamped, k stays inside int64 for the
    # backend (JAX overflowed on 2**63 - 1, NumPy raised on -2**63) and the sparse kernels alike
    rows, cols = int(x.shape[-2]), int(x.shape[-1])
    k = max(-rows, min(integer_argument(op, "k", k, "Pass the diagonal's offset as an integer."), cols))
    b = backend_of(x, op=op)
    xp = b.load()
    from ._elementwise import convert_result

    if not isinstance(x, SparseArray):
        triangle = xp.tril if op == "tril" else xp.triu
        # on the signed twin of an unsigned dtype the backend only stores (torch's uint16/32/64)
        return convert_result(through_signed(xp, x, lambda v: triangle(v, k=k)), layout, op)
    return convert_result(dispatch.call(op, (x.layout,), b.name, xp, x, k), layout, op)


def tril(x: Any, /, *, k: int = 0, layout: Layout | None = None) -> Any:
    """The lower triangle of the last two dimensions of ``x``: elements above the ``k``-th diagonal are 0.

    A sparse ``x`` keeps its layout (blocksize and index dtype), dropping the elements above the
    diagonal; it needs fill value 0 (otherwise the zeros and the unspecified elements below the
    diagonal would differ, and :class:`~xsparse.NoKernelError` says so).

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.asarray([[1.0, 2.0], [3.0, 4.0]], layout=xs.sparse_csr)
    >>> t = xs.tril(a)
    >>> t.layout, t.nnz, t.to_dense().tolist()
    (xsparse.sparse_csr, 3, [[1.0, 0.0], [3.0, 4.0]])
    """
    return _triangle("tril", x, k, layout)


def triu(x: Any, /, *, k: int = 0, layout: Layout | None = None) -> Any:
    """The upper triangle of the last two dimensions of ``x``: elements below the ``k``-th diagonal are 0.

    See :func:`tril` for sparse arrays.

    Examples
    --------
    >>> import xsparse as xs
    >>> a = xs.asarray([[1.0, 2.0], [3.0, 4.0]], layout=xs.sparse_coo)
    >>> xs.triu(a, k=1).to_dense().tolist()
    [[0.0, 2.0], [0.0, 0.0]]
    """
    return _triangle("triu", x, k, layout)


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None, backend: str | Backend | None = None) -> Any:
    """An array from an object with ``__dlpack__``: a strided array of the backend (default: the default
    backend); an xsparse array is returned as it is.

    A sparse array has no DLPack representation of its own (its components have one each), so
    ``from_dlpack`` of an xsparse array does not go through DLPack: it returns the array, a copy with
    ``copy=True`` (:func:`xsparse.clone`), the array on ``device`` with ``device=`` (its components moved),
    or the array on ``backend`` when that names another backend (:func:`xsparse.to_backend`, zero-copy
    through the components' DLPack where the libraries allow). ``copy=False`` with a move raises.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> xs.from_dlpack(np.asarray([1.0, 2.0])).tolist()
    [1.0, 2.0]
    >>> a = xs.sparse_coo_array([[0]], [3.0], (2,))
    >>> xs.from_dlpack(a) is a, xs.from_dlpack(a, copy=True) is a
    (True, False)
    """
    op = "from_dlpack"
    if isinstance(x, SparseArray):
        return _sparse_from_dlpack(op, x, device, copy, backend)
    refuse_foreign(x, op)  # another library's sparse array: DLPack carries strided arrays only
    if not hasattr(x, "__dlpack__") and type(x).__name__ != "PyCapsule":  # torch still reads a bare capsule
        raise TypeError(
            f"{op}: x must implement the DLPack protocol (__dlpack__), got {type(x).__name__}. Pass an array of a "
            "library that exports DLPack, or convert other objects with xsparse.asarray."
        )
    b = backend_of(op=op, backend=backend)
    xp = b.load()
    device = device_argument(op, b, device)
    kwargs: dict[str, Any] = {}
    if device is not None:
        kwargs["device"] = device
    if copy is not None:
        kwargs["copy"] = copy
    return xp.from_dlpack(x, **kwargs)


def _sparse_from_dlpack(op: str, x: SparseArray, device: Any, copy: bool | None, backend: str | Backend | None) -> Any:
    from ._conversion import to_backend
    from ._indexing import clone
    from .backends import get_backend

    target = x._backend if backend is None else get_backend(backend)
    device = device_argument(op, target, device)
    moves = target.name != x._backend.name or (device is not None and device != x.device)
    if copy is False and moves:
        raise ValueError(
            f"{op}: copy=False but the array must be moved (device={device!r}, backend={target.name!r}). "
            "Pass copy=None to allow a copy."
        )
    result: Any = x
    if target.name != x._backend.name:
        result = to_backend(x, target, device=device)
    elif device is not None and device != x.device:
        result = x.to_device(device)
    if copy:
        # a move shares memory where DLPack allows (numpy <-> torch on the CPU): only a clone is sure to copy
        result = clone(result)
    return result
