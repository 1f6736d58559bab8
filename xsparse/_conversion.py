"""Conversions between layouts and backends: to_sparse, to_dense, coalesce, transposes, to_backend."""

from __future__ import annotations

import sys
from typing import Any, cast

import array_api_compat

from . import dispatch
from ._common import backend_of, blocksize_argument, device_argument, dtype_name, fill_argument, integer_argument, is_strided, resolve_dtype
from ._errors import InvariantError, LayoutError
from .backends import Backend, backend_of_array, get_backend
from .backends.array_api.conversion import coalesce_coo, from_host, same_fill
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
from .formats._ops import contiguous
from .formats._semi_structured import SemiStructuredArray
from .formats._spec import Target

__all__ = [
    "to_sparse",
    "to_sparse_coo",
    "to_sparse_csr",
    "to_sparse_csc",
    "to_sparse_bsr",
    "to_sparse_bsc",
    "to_dense",
    "coalesce",
    "is_coalesced",
    "matrix_transpose",
    "to_backend",
    "layout_of",
]


def layout_of(x: Any) -> Layout:
    """The layout of an xsparse array, or ``strided`` for a backend array."""
    if isinstance(x, SparseArray):
        return x.layout
    if is_strided(x):
        return strided
    raise TypeError(f"layout_of: expected an array, got {type(x).__name__}. Pass an xsparse array or a backend array.")


def _check_array(op: str, x: Any) -> None:
    if not isinstance(x, SparseArray) and not is_strided(x, op):
        raise TypeError(
            f"{op}: expected an xsparse array or a backend array, got {type(x).__name__}. Create one first, e.g. "
            "with xsparse.sparse_coo_array(...) or the backend's asarray."
        )


def _target(
    op: str,
    x: Any,
    layout: Layout,
    backend: Backend,
    xp: Any,
    sparse_dim: int | None,
    dense_dim: int | None,
    blocksize: tuple[int, int] | None,
    index_dtype: Any,
    fill_value: Any,
) -> Target:
    """Resolve and check the result format of a conversion of ``x`` to ``layout``."""
    shape = tuple(x.shape)
    ndim = len(shape)
    source = layout_of(x)
    if not isinstance(layout, Layout):
        raise TypeError(f"{op}: layout must be an xsparse layout, got {layout!r}. Pass one of xsparse.sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc.")
    if layout is Layout.sparse_semi_structured:
        raise LayoutError(f"{op}: the sparse_semi_structured layout has its own conversion (layout={layout}). Call xsparse.to_sparse_semi_structured instead.")
    # fill value: a strided source picks it (default 0); a sparse source keeps its own
    if isinstance(x, SparseArray):
        # NaN != NaN, yet a NaN fill value is kept by a NaN request; -0.0 == 0.0, yet they are two fill values
        if fill_value is not None and not same_fill(fill_value, x.fill_value):
            raise ValueError(
                f"{op}: a conversion keeps the fill value (array fill_value={x.fill_value!r}, requested {fill_value!r}). "
                "Convert to dense with to_dense() and back with the new fill_value to change it."
            )
        fill = x.fill_value
    else:
        fill = fill_argument(xp, x.dtype, 0 if fill_value is None else fill_value)
    # index dtype: requested, else the source's, else int64
    if index_dtype is not None:
        idt = resolve_dtype(xp, index_dtype, op)
        if dtype_name(idt) not in ("int32", "int64"):
            raise TypeError(f"{op}: index_dtype must be int32 or int64, got {dtype_name(idt)}. Pass index_dtype='int32' or 'int64'.")
    elif isinstance(x, (COOArray, CompressedArray)):
        idt = x.index_dtype
    else:
        idt = xp.int64
    if blocksize is not None:
        blocksize = blocksize_argument(op, blocksize)
    if sparse_dim is not None:
        sparse_dim = integer_argument(op, "sparse_dim", sparse_dim, "Pass the number of sparse dimensions as an integer.")
    if dense_dim is not None:
        dense_dim = integer_argument(op, "dense_dim", dense_dim, "Pass the number of dense dimensions as an integer.")
    if layout is strided:
        return Target(layout, backend, xp, shape, ndim, 0, (1, 1), idt, fill)
    if layout is sparse_coo:
        if blocksize is not None:
            raise ValueError(f"{op}: blocksize applies to sparse_bsr and sparse_bsc only, not to {layout} (blocksize={blocksize}). Drop the blocksize argument.")
        # a sparse source's own split: a compressed array's batch and sparse dimensions, a semi-structured one's 2
        natural = x.ndim - x.dense_dim() if isinstance(x, SparseArray) else None
        if dense_dim is not None and not 0 <= dense_dim <= ndim:
            raise ValueError(f"{op}: dense_dim must lie in [0, {ndim}] for shape {shape}, got {dense_dim}. Pick a number of trailing dimensions the array has.")
        if sparse_dim is None:
            sparse_dim = (ndim - dense_dim) if dense_dim is not None else (natural if natural is not None else ndim)
        elif dense_dim is not None and sparse_dim + dense_dim != ndim:
            raise ValueError(f"{op}: sparse_dim ({sparse_dim}) + dense_dim ({dense_dim}) must equal ndim ({ndim}). Give only one of the two.")
        if not 0 <= sparse_dim <= ndim:
            raise ValueError(f"{op}: sparse_dim must lie in [0, {ndim}] for shape {shape}, got {sparse_dim}. Pick a number of leading dimensions the array has.")
        if natural is not None and sparse_dim != natural:
            raise ValueError(
                f"{op}: a {source} array converts to a COO array with sparse_dim={natural} (its own sparse dimensions, "
                f"batch dimensions included), not sparse_dim={sparse_dim}. Convert through to_dense() to regroup the dimensions."
            )
        return Target(layout, backend, xp, shape, sparse_dim, ndim - sparse_dim, (1, 1), idt, fill)
    # the compressed family
    if sparse_dim is not None and sparse_dim != 2:
        raise ValueError(f"{op}: a {layout} array has exactly 2 sparse dimensions, got sparse_dim={sparse_dim}. Leave sparse_dim out; the dimensions before the last two sparse ones are batch dimensions.")
    natural_dense = x.dense_dim() if isinstance(x, SparseArray) else None
    if dense_dim is None:
        dense_dim = natural_dense if natural_dense is not None else 0
        if ndim >= 2 and dense_dim > ndim - 2:
            # the source's own dense dimensions leave fewer than 2 sparse ones: a COO array with sparse_dim < 2
            raise ValueError(
                f"{op}: a {source} array with dense_dim={dense_dim} converts to a {layout} array with the same dense_dim, "
                f"which leaves fewer than 2 sparse dimensions of shape {shape}. Convert through to_dense() to regroup the "
                "dimensions, or convert to sparse_coo."
            )
    elif natural_dense is not None and dense_dim != natural_dense:
        raise ValueError(
            f"{op}: a {source} array with dense_dim={natural_dense} converts to a {layout} array with the same dense_dim, "
            f"not dense_dim={dense_dim}. Convert through to_dense() to regroup the dimensions."
        )
    if ndim < 2:
        raise ValueError(
            f"{op}: a {layout} array has 2 sparse dimensions, so it cannot hold a {ndim}-d array (shape {shape}). "
            "Use layout=sparse_coo or to_sparse_coo (COO holds every number of dimensions), or reshape to 2 or more dimensions."
        )
    if not 0 <= dense_dim <= ndim - 2:
        raise ValueError(
            f"{op}: a {layout} array needs 2 sparse dimensions after its batch dimensions, so dense_dim must lie in "
            f"[0, {max(ndim - 2, 0)}] for shape {shape}, got dense_dim={dense_dim}. Pass a dense_dim in that range."
        )
    if layout.is_blocked:
        if blocksize is None:
            if isinstance(x, CompressedArray) and x.layout.is_blocked:
                blocksize = x.blocksize
            else:
                raise ValueError(f"{op}: converting to {layout} needs a block shape (blocksize=None). Pass blocksize=(rows, columns).")
        b = ndim - 2 - dense_dim
        if blocksize[0] <= 0 or blocksize[1] <= 0 or shape[b] % blocksize[0] or shape[b + 1] % blocksize[1]:
            raise ValueError(
                f"{op}: blocksize {blocksize} must divide the sparse dimensions {shape[b : b + 2]} of shape {shape}. "
                "Pick a blocksize whose entries divide the number of rows and of columns."
            )
    else:
        if blocksize is not None and tuple(blocksize) != (1, 1):
            raise ValueError(f"{op}: blocksize applies to sparse_bsr and sparse_bsc only, not to {layout} (blocksize={blocksize}). Drop blocksize, or convert with to_sparse_bsr.")
        blocksize = (1, 1)
    return Target(layout, backend, xp, shape, 2, dense_dim, blocksize, idt, fill)


def check_namespace_dtype(op: str, backend: Backend, xp: Any, x: Any) -> None:
    """TypeError where ``x``'s dtype is none of the namespace's Array API dtypes (ml_dtypes' bfloat16 in a NumPy
    or CuPy array), which its functions would refuse somewhere inside with a message about NumPy dtypes."""
    try:
        supported = xp.isdtype(x.dtype, ("bool", "numeric"))
    except TypeError:
        raise TypeError(
            f"{op}: backend {backend.name!r} has no such dtype among its Array API dtypes (x.dtype={x.dtype}). Cast "
            "the array to one of them first (numpy: x.astype(numpy.float32)), or hold bfloat16 in torch or jax.numpy."
        ) from None
    if not supported:
        # NumPy's object and string arrays (xs.asarray(None, layout=...)): no number to compare with the fill value
        raise TypeError(
            f"{op}: a sparse array holds numbers or booleans, and x has dtype {x.dtype} (shape={tuple(x.shape)}). Pass a "
            "numeric or boolean array."
        )


def to_sparse(
    x: Any,
    /,
    *,
    layout: Layout = sparse_coo,
    sparse_dim: int | None = None,
    dense_dim: int | None = None,
    blocksize: tuple[int, int] | None = None,
    index_dtype: Any = None,
    fill_value: Any = None,
) -> SparseArray:
    """Convert a strided or sparse array to a sparse layout.

    Parameters
    ----------
    x
        A backend (strided) array or an xsparse array.
    layout
        The result layout (default ``sparse_coo``).
    sparse_dim
        For COO: the number of leading sparse dimensions (default: all of a strided array's dimensions;
        the batch and sparse dimensions of a compressed array).
    dense_dim
        The number of trailing dense dimensions (default 0 from a strided array; a sparse array's own).
    blocksize
        ``(rows, columns)`` of one block, required for BSR and BSC (a BSR/BSC source's by default).
    index_dtype
        ``int32`` or ``int64`` (default: the source's, or int64).
    fill_value
        For a strided ``x``, the value of the elements left out (default 0). A sparse ``x`` keeps its own.

    Returns
    -------
    SparseArray
        On ``x``'s backend. Converting to the layout ``x`` already has, with the same parameters,
        returns ``x`` itself.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = np.asarray([[0, 2.0], [3, 0]])
    >>> xs.to_sparse(a)
    sparse_array(indices=[[0, 1],
                          [1, 0]],
                 values=[2., 3.],
                 shape=(2, 2), nnz=2, dtype=float64, layout=sparse_coo, backend=numpy)
    """
    if (
        isinstance(x, (COOArray, CompressedArray)) and layout is x.layout
        and sparse_dim is None and dense_dim is None and blocksize is None and index_dtype is None and fill_value is None
    ):  # fmt: skip
        return x  # already in that layout, nothing asked of it: the checks below would only confirm it
    op = f"to_sparse(layout={layout})"
    _check_array(op, x)
    backend = backend_of(x, op=op)
    xp = backend.load()
    check_namespace_dtype(op, backend, xp, x)
    target = _target(op, x, layout, backend, xp, sparse_dim, dense_dim, blocksize, index_dtype, fill_value)
    if layout is strided:
        raise ValueError(f"{op}: to_sparse makes sparse arrays, not strided ones (layout={layout}). Call xsparse.to_dense instead.")
    if isinstance(x, SparseArray) and _is_already(x, target):
        return x
    if not isinstance(x, SparseArray) and not getattr(x.dtype, "isnative", True):
        # a NumPy array of the other byte order ('>f8' on a little-endian machine): its values would keep
        # that order in the sparse array, which the compiled kernels and NumPy's reductions do not read
        # (the constructors convert their components the same way)
        x = x.astype(x.dtype.newbyteorder("="))
    return cast(SparseArray, _convert(op, x, target))


def _convert(op: str, x: Any, target: Target) -> Any:
    """The dispatched conversion of ``x`` to ``target``'s layout, for ``op`` (the function the user called,
    which an invariant error names, also where a kernel trips over invalid indices: see xsparse.dispatch)."""
    with InvariantError.naming(op):
        return dispatch.call("convert", (layout_of(x), target.layout), target.backend.name, target.xp, x, target)


def _is_already(x: Any, target: Target) -> bool:
    if not isinstance(x, SparseArray) or x.layout is not target.layout:
        return False
    if dtype_name(getattr(x, "index_dtype", target.index_dtype)) != dtype_name(target.index_dtype):
        return False
    return not (isinstance(x, CompressedArray) and x.blocksize != target.blocksize)


def to_sparse_coo(x: Any, /, sparse_dim: int | None = None, **kwargs: Any) -> SparseArray:
    """Convert to ``sparse_coo``; see :func:`to_sparse`.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> t = np.asarray([[[0.0, 0], [1.0, 2.0]], [[0.0, 0], [3.0, 4.0]]])
    >>> xs.to_sparse_coo(t, sparse_dim=2)
    sparse_array(indices=[[0, 1],
                          [1, 1]],
                 values=[[1., 2.],
                         [3., 4.]],
                 shape=(2, 2, 2), nnz=2, dtype=float64, layout=sparse_coo, backend=numpy)
    """
    return to_sparse(x, layout=sparse_coo, sparse_dim=sparse_dim, **kwargs)


def to_sparse_csr(x: Any, /, dense_dim: int | None = None, **kwargs: Any) -> SparseArray:
    """Convert to ``sparse_csr``; see :func:`to_sparse`.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = np.asarray([[0, 0, 1, 0], [1, 2, 0, 0], [0, 0, 0, 0]], dtype=np.float64)
    >>> xs.to_sparse_csr(a)
    sparse_array(crow_indices=[0, 1, 3, 3],
                 col_indices=[2, 0, 1],
                 values=[1., 1., 2.],
                 shape=(3, 4), nnz=3, dtype=float64, layout=sparse_csr, backend=numpy)
    """
    return to_sparse(x, layout=sparse_csr, dense_dim=dense_dim, **kwargs)


def to_sparse_csc(x: Any, /, dense_dim: int | None = None, **kwargs: Any) -> SparseArray:
    """Convert to ``sparse_csc``; see :func:`to_sparse`."""
    return to_sparse(x, layout=sparse_csc, dense_dim=dense_dim, **kwargs)


def to_sparse_bsr(x: Any, /, blocksize: tuple[int, int] | None = None, dense_dim: int | None = None, **kwargs: Any) -> SparseArray:
    """Convert to ``sparse_bsr`` with blocks of ``blocksize``; see :func:`to_sparse`."""
    return to_sparse(x, layout=sparse_bsr, blocksize=blocksize, dense_dim=dense_dim, **kwargs)


def to_sparse_bsc(x: Any, /, blocksize: tuple[int, int] | None = None, dense_dim: int | None = None, **kwargs: Any) -> SparseArray:
    """Convert to ``sparse_bsc`` with blocks of ``blocksize``; see :func:`to_sparse`."""
    return to_sparse(x, layout=sparse_bsc, blocksize=blocksize, dense_dim=dense_dim, **kwargs)


def to_dense(x: Any, /) -> Any:
    """The strided backend array with the same elements; unspecified elements take the fill value.

    A strided ``x`` is returned as is. This is the explicit way to densify.

    Examples
    --------
    >>> import xsparse as xs
    >>> s = xs.sparse_coo_array([[0, 1, 1], [2, 0, 2]], [3, 4, 5], (2, 3))
    >>> xs.to_dense(s)
    array([[0, 0, 3],
           [4, 0, 5]])
    """
    _check_array("to_dense", x)
    if not isinstance(x, SparseArray):
        return x
    backend = x._backend
    xp = backend.load()
    target = Target(strided, backend, xp, x.shape, x.ndim, 0, (1, 1), xp.int64, x.fill_value)
    return _convert("to_dense", x, target)


def coalesce(x: SparseArray, /) -> SparseArray:
    """Sort a COO array's indices lexicographically and sum duplicates; other layouts are returned as is.

    Examples
    --------
    >>> import xsparse as xs
    >>> s = xs.sparse_coo_array([[1, 1]], [3, 4], (3,))
    >>> xs.coalesce(s)
    sparse_array(indices=[[1]],
                 values=[7],
                 shape=(3,), nnz=1, dtype=int64, layout=sparse_coo, backend=numpy)
    """
    if not isinstance(x, SparseArray):
        raise TypeError(f"coalesce: expected an xsparse array, got {type(x).__name__}. A strided array has no duplicates to sum; convert it with to_sparse_coo first.")
    if x.is_coalesced():
        return x
    xp = x._backend.load()
    with InvariantError.naming("coalesce"):
        if isinstance(x, COOArray):
            return coalesce_coo(xp, x)
        return cast(SparseArray, dispatch.call("coalesce", (x.layout,), x._backend.name, xp, x))


def is_coalesced(x: SparseArray, /) -> bool:
    """Whether the array's indices are sorted and unique."""
    return x.is_coalesced()


def matrix_transpose(x: Any, /) -> Any:
    """Transpose the last two dimensions.

    For a compressed array whose last two dimensions are its sparse ones this is a view (CSR <-> CSC,
    BSR <-> BSC); for COO it swaps two index rows (or two value axes). Swapping a sparse with a dense
    dimension raises :class:`~xsparse.LayoutError`.
    """
    if not isinstance(x, SparseArray):
        _check_array("matrix_transpose", x)
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: the array must have at least 2 dimensions, got shape {tuple(x.shape)}. Add a dimension first, or use the array as it is.")
    if not isinstance(x, SparseArray):
        return backend_of_array(x).namespace().matrix_transpose(x)
    xp = x._xp
    if isinstance(x, SemiStructuredArray):
        # a flag, as torch keeps it: the transpose of a row pattern is not a row pattern
        return x.t()
    if isinstance(x, CompressedArray) and x.dense_dim() == 0:
        return x.transpose_sparse()
    if x.dense_dim() >= 2:
        # both dimensions are dense: transpose every stored element's trailing axes
        return x._with_values(contiguous(x._backend, xp, xp.matrix_transpose(x._vals)), x.fill_value)
    if isinstance(x, COOArray):
        sd = x.sparse_dim()
        shape = list(x.shape)
        shape[-2], shape[-1] = shape[-1], shape[-2]
        if sd >= x.ndim:
            order = list(range(sd))
            order[-2], order[-1] = order[-1], order[-2]
            indices = xp.take(x._idx, xp.asarray(order, device=x.device), axis=0)
            return COOArray(indices, x._vals, tuple(shape), backend=x._backend, xp=xp, coalesced=False, fill_value=x.fill_value)
    raise LayoutError(
        f"matrix_transpose: the last two dimensions of this {x.layout} array mix sparse and dense dimensions "
        f"(shape={x.shape}, dense_dim={x.dense_dim()}). Convert with to_dense() first, or build the array without "
        "dense dimensions."
    )


_DLPACK_ERRORS = (TypeError, ValueError, RuntimeError, BufferError, AttributeError)


def _exportable(source: Backend, a: Any) -> Any:
    """``a`` in a form DLPack can export and every importer can take, copied only where it is not.

    DLPack carries neither a byte order nor torch's autograd history and lazy conjugation / negation bits,
    and a negative stride (a NumPy flip) makes torch's importer abort the interpreter rather than raise.
    """
    if array_api_compat.is_torch_array(a):
        if a.device.type == "meta":
            raise ValueError(
                f"to_backend: a tensor on the meta device has no data to move (device={a.device}). Materialize it "
                "first, e.g. with torch.empty_like(x, device='cpu')."
            )
        return a.detach().resolve_conj().resolve_neg()
    host = getattr(a, "_array", a)  # array-api-strict wraps a NumPy array
    dtype = getattr(host, "dtype", None)
    if dtype is not None and getattr(dtype, "isnative", True) is False:
        import numpy as np

        native = np.asarray(host).astype(dtype.newbyteorder("="))
        return native if host is a else source.load().asarray(native)
    strides = getattr(host, "strides", None)
    if isinstance(strides, tuple) and any(st < 0 for st in strides):
        import numpy as np

        if isinstance(a, np.ndarray):
            return np.ascontiguousarray(a)
        # a copying astype lays the copy out with positive strides
        return source.load().astype(a, a.dtype, copy=True)
    return a


def _on_host(a: Any) -> Any:
    """``a`` copied to the host where it lives on an accelerator (NumPy's DLPack import takes host memory only)."""
    if array_api_compat.is_torch_array(a) and a.device.type != "cpu":
        return a.cpu()
    if array_api_compat.is_cupy_array(a):
        return a.get()
    return a


def _read_only(a: Any) -> bool:
    """Whether ``a`` may not be written to: a read-only NumPy (or array-api-strict) array, any JAX array."""
    if array_api_compat.is_jax_array(a):
        return True
    flags = getattr(getattr(a, "_array", a), "flags", None)
    return getattr(flags, "writeable", True) is False


def _writable(a: Any) -> bool:
    """Whether ``a`` can be written to in place (torch and CuPy arrays always can; JAX arrays never)."""
    if array_api_compat.is_torch_array(a) or array_api_compat.is_cupy_array(a):
        return True
    flags = getattr(getattr(a, "_array", a), "flags", None)
    return getattr(flags, "writeable", False) is True


def to_backend(x: Any, backend: str | Backend, /, *, device: Any = None) -> Any:
    """Move an array (strided or sparse) to another backend, zero-copy through DLPack where possible.

    Examples
    --------
    >>> import xsparse as xs
    >>> s = xs.sparse_csr_array([0, 1, 2], [1, 0], [5.0, 6.0])
    >>> t = xs.to_backend(s, "array_api_strict")
    >>> t.backend, t.layout
    ('array_api_strict', xsparse.sparse_csr)
    """
    target = get_backend(backend)
    xp = target.load()
    device = device_argument("to_backend", target, device)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(x, numpy.generic):
        # a NumPy scalar (what indexing a NumPy array gives) has no __dlpack__: it moves as the 0-d array it stands for
        x = numpy.asarray(x)
    if isinstance(x, SparseArray) or is_strided(x, "to_backend"):
        name = dtype_name(x.dtype)
        if not hasattr(xp, name):
            cast_first = "xsparse.astype(x, 'float32')"
            if isinstance(x, SparseArray) and not dispatch.resolve("astype", (x.layout,), x._backend.name):
                # a layout whose values keep a pattern per dtype (2:4) has no cast: its COO form has
                cast_first = "xsparse.astype(xsparse.to_sparse_coo(x), 'float32')"
            raise TypeError(
                f"to_backend: backend '{target.name}' has no dtype {name} (dtype={name}). Cast the array first, e.g. "
                f"with {cast_first}."
            )

    def move(a: Any) -> Any:
        source = backend_of_array(a)
        if source.name == target.name:
            moved = a
        else:
            a = _exportable(source, a)
            try:
                moved = xp.from_dlpack(a)
            except _DLPACK_ERRORS:
                # some importers refuse strides they could not have made (JAX): a row-major copy made on the
                # source's own backend first, as the host round trip below cannot hold every dtype (bfloat16)
                a = contiguous(source, source.load(), a)
                try:
                    moved = xp.from_dlpack(a)
                except _DLPACK_ERRORS:
                    import numpy as np

                    # (a 0-d array through one element: CuPy's asarray of a 0-d -0.0 gives +0.0)
                    moved = from_host(xp, np.from_dlpack(_on_host(a)))
            if _read_only(a) and _writable(moved):
                # torch's DLPack import drops the read-only flag: writing into the result would change a
                # read-only NumPy array or an immutable JAX array behind its owner's back
                moved = xp.astype(moved, moved.dtype, copy=True)
        if device is not None:
            moved = array_api_compat.to_device(moved, device)  # a torch tensor keeps its autograd history, unwarned
        return moved

    if isinstance(x, SparseArray):
        # DLPack keeps the strides of a view (a broadcast, a flip), which components must not have
        # (invariants 3.5-3.7) where the source backend has no such notion and never copied
        return x._map_components(lambda a: contiguous(target, xp, move(a)), target, xp)
    _check_array("to_backend", x)
    return move(x)
