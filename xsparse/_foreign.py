"""The sparse arrays of other libraries: recognised, refused as operands, and converted by ``asarray``.

torch's sparse tensors and pydata/sparse's arrays pass the Array API's array test (``is_array_api_obj``),
so that without a check they would be taken for strided arrays of their backend: a torch sparse tensor
returned unchanged by ``to_dense``, a pydata/sparse array as the components of an xsparse array. SciPy's
sparse matrices and JAX's ``BCOO`` and ``BCSR`` are no Array API arrays, so that a backend's ``asarray`` made a 0-d or
object array of them. Each is converted from its components here, without densifying.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._errors import InvariantError

__all__ = ["foreign_sparse_kind", "refuse_foreign_sparse", "from_foreign_sparse"]


def _is_scipy_sparse(x: Any) -> bool:
    # SciPy is never imported here: an object of it exists only once the program has imported it
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and bool(sparse.issparse(x))


def _is_jax(x: Any, name: str) -> bool:
    module = sys.modules.get("jax.experimental.sparse")
    cls = getattr(module, name, None)
    return isinstance(cls, type) and isinstance(x, cls)


def _is_pydata_sparse(x: Any) -> bool:
    module = sys.modules.get("sparse")
    array_type = getattr(module, "SparseArray", None)
    return isinstance(array_type, type) and isinstance(x, array_type)


def _is_torch_sparse(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor) and x.layout is not torch.strided


def foreign_sparse_kind(x: Any) -> str | None:
    """What kind of other library's sparse array ``x`` is (``"a torch sparse tensor"``), or None."""
    found = _library_of(x)
    return None if found is None else found.kind(x)


def refuse_foreign_sparse(x: Any, kind: str, op: str | None = None) -> TypeError:
    """The error for another library's sparse array ``x`` given where an xsparse or strided array is expected."""
    prefix = f"{op}: " if op else "xsparse: "
    return TypeError(
        f"{prefix}the operand is {kind}, a sparse array of another library, not a strided array (type={type(x).__module__}."
        f"{type(x).__name__}). Convert it with xsparse.asarray(x) first, which keeps it sparse."
    )


def from_foreign_sparse(op: str, x: Any, backend: Any) -> tuple[Any, bool] | None:
    """``x`` as an xsparse array where it is another library's sparse array, else None.

    Returns the array and whether making it copied data (sorted indices, a format conversion), which
    ``copy=False`` refuses. ``backend`` moves the result with :func:`xsparse.to_backend`; without it, the
    result is on the backend of the components (NumPy for SciPy and pydata/sparse, jax.numpy for JAX).
    """
    found = _library_of(x)
    if found is None:
        return None
    result, copied = found.convert(op, x)
    if backend is not None:
        from ._conversion import to_backend
        from .backends import get_backend

        if get_backend(backend) is not result._backend:
            result, copied = to_backend(result, backend), True
    return result, copied


def _from_torch(op: str, t: Any) -> tuple[Any, bool]:
    import torch

    from ._creation import sparse_compressed_array, sparse_coo_array

    shape = tuple(t.shape)
    if t.layout is torch.sparse_coo:
        if t.requires_grad and not t.is_coalesced():
            # torch gives the values with their autograd history only for a coalesced tensor (``values()``;
            # ``_values()`` is detached): the history wins over keeping the duplicates
            t = t.coalesce()
        coalesced = bool(t.is_coalesced())
        values = t.values() if coalesced else t._values()
        return sparse_coo_array(t._indices(), values, shape, is_coalesced=coalesced), False
    from .formats import sparse_bsc, sparse_bsr, sparse_csc, sparse_csr

    layout = {torch.sparse_csr: sparse_csr, torch.sparse_csc: sparse_csc, torch.sparse_bsr: sparse_bsr, torch.sparse_bsc: sparse_bsc}[t.layout]
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        compressed, plain = t.crow_indices(), t.col_indices()
    else:
        compressed, plain = t.ccol_indices(), t.row_indices()
    values = t.values()
    # values() of a compressed tensor is an alias that refuses views (torch.real of it raises "Sparse CSR
    # tensors do not have strides"); detach() gives an ordinary tensor on the same storage. Values with
    # autograd history are kept as they are, so that gradients flow.
    values = values if values.requires_grad else values.detach()
    blocksize = None
    if t.layout in (torch.sparse_bsr, torch.sparse_bsc):
        n_batch = compressed.ndim - 1
        # values are (*batch, nnz, rows, columns, *dense): the block shape follows the nnz dimension
        blocksize = (int(values.shape[n_batch + 1]), int(values.shape[n_batch + 2]))
    converted = sparse_compressed_array(compressed, plain, values, shape, layout=layout, blocksize=blocksize, dense_dim=int(t.dense_dim()))
    return converted, False


def _from_scipy(op: str, m: Any) -> tuple[Any, bool]:
    from ._creation import sparse_compressed_array, sparse_coo_array
    from .backends.array_api.conversion import strictly_increasing
    from .formats import sparse_bsr, sparse_csc, sparse_csr

    import numpy as np

    fmt = m.format
    copied = False
    if fmt != "coo" and len(m.shape) != 2:
        # SciPy's 1-D CSR and DOK arrays: a compressed layout has two sparse dimensions, COO any number
        m, fmt, copied = m.tocoo(), "coo", True
    elif fmt not in ("csr", "csc", "coo", "bsr"):
        m, fmt, copied = m.tocsr(), "csr", True  # dia, lil, dok: SciPy's own conversion
    shape = tuple(int(s) for s in m.shape)
    if fmt == "coo":
        coords = getattr(m, "coords", None)
        if coords is None:  # SciPy before 1.13 names them row and col
            coords = (m.row, m.col)
        # int32 or int64 coordinates are kept, as the compressed formats' indices are below; another integer
        # dtype is widened
        index_dtype = np.result_type(*coords) if len(coords) else np.dtype(np.int64)
        index_dtype = index_dtype if index_dtype in (np.int32, np.int64) else np.dtype(np.int64)
        indices = np.stack([np.asarray(c, dtype=index_dtype) for c in coords]) if len(coords) else np.zeros((0, m.nnz), np.int64)
        copied = True  # the coordinate rows are stacked into one array
        # SciPy's canonical flag is a cache that an in-place edit of the coordinates leaves stale: the flag
        # is believed only where the stacked copy is in strictly increasing order (a pass over it)
        return sparse_coo_array(indices, m.data, shape, is_coalesced=bool(m.has_canonical_format) and strictly_increasing(np, indices)), copied
    layout = {"csr": sparse_csr, "csc": sparse_csc, "bsr": sparse_bsr}[fmt]
    blocksize = (int(m.blocksize[0]), int(m.blocksize[1])) if fmt == "bsr" else None
    try:
        if not m.has_canonical_format:
            # SciPy lets a compressed matrix hold duplicates, which mean their sum, and unsorted indices:
            # summed and sorted on a copy (SciPy's sum_duplicates works in place, on the user's matrix; it
            # keeps sums that are 0), as invariant 5.6 asks
            m, copied = m.copy(), True
            m.sum_duplicates()
    except (ValueError, TypeError, IndexError) as e:
        # SciPy accepts a malformed matrix at construction and trips over it here: the validator says
        # which invariant its components break (SciPy's message only where the validator finds none)
        indptr, indices, _ = _compressed_indices(m.indptr, m.indices)
        try:
            sparse_compressed_array(indptr, indices, m.data, shape, layout=layout, blocksize=blocksize, backend="numpy", check_invariants=True)
        except InvariantError as bad:
            raise InvariantError(bad.invariant, bad.detail, op) from None
        raise ValueError(
            f"{op}: SciPy cannot read this {fmt} matrix ({e}). Check it with m.check_format(full_check=True), which says what is wrong."
        ) from None
    # SciPy may hold int32 or int64 indices (both are valid components); an index of another integer dtype
    # (SciPy picks the smallest that fits only on request) is widened
    indptr, indices, widened = _compressed_indices(m.indptr, m.indices)
    copied = copied or widened
    return sparse_compressed_array(indptr, indices, m.data, shape, layout=layout, blocksize=blocksize, backend="numpy"), copied


def _from_pydata(op: str, s: Any) -> tuple[Any, bool]:
    from ._creation import sparse_coo_array

    copied = False
    if type(s).__name__ == "GCXS" and s.ndim == 2 and tuple(s.compressed_axes) in ((0,), (1,)):
        return _from_gcxs(s)
    if type(s).__name__ != "COO":
        s, copied = s.asformat("coo"), True  # GCXS, DOK: pydata/sparse's own conversion (DOK has no tocoo)
    fill = s.fill_value.item() if hasattr(s.fill_value, "item") else s.fill_value
    coalesced = bool(getattr(s, "sorted", False)) and not bool(getattr(s, "has_duplicates", True))
    return sparse_coo_array(s.coords, s.data, tuple(int(d) for d in s.shape), is_coalesced=coalesced, fill_value=fill, backend="numpy"), copied


def _compressed_indices(indptr: Any, indices: Any) -> tuple[Any, Any, bool]:
    """The compressed and plain index arrays of another library as xsparse's components, and whether that
    copied (which copy=False refuses): int32 and int64 kept, a narrower integer dtype widened to int64
    (SciPy picks the smallest that fits on request), both int64 where their dtypes differ."""
    import numpy as np

    kept = (np.dtype(np.int32), np.dtype(np.int64))

    def widened(a: Any) -> Any:
        # a float or a uint64 index would not convert exactly: passed on, for the constructor to refuse
        return a.astype(np.int64) if a.dtype not in kept and a.dtype.kind in "iu" and a.dtype != np.uint64 else a

    ptr, idx = widened(indptr), widened(indices)
    if ptr.dtype != idx.dtype and ptr.dtype in kept and idx.dtype in kept:
        ptr, idx = ptr.astype(np.int64), idx.astype(np.int64)
    return ptr, idx, ptr is not indptr or idx is not indices


def _from_gcxs(s: Any) -> tuple[Any, bool]:
    """A 2-D pydata/sparse GCXS array as CSR (compressed rows) or CSC (columns), and whether that copied:
    over its own buffers, or, where a slice's indices are out of order or repeated (which GCXS allows and
    invariant 5.6 does not), converted from pydata/sparse's COO, which sorts and sums them on a copy. Its
    indices are checked in full, once: GCXS does not record whether they are sorted, and any other
    violation is an InvariantError naming it."""
    from ._conversion import to_sparse
    from ._creation import sparse_compressed_array
    from ._errors import InvariantError
    from .formats import sparse_csc, sparse_csr

    layout = sparse_csr if tuple(s.compressed_axes) == (0,) else sparse_csc
    indptr, indices, cast_indices = _compressed_indices(s.indptr, s.indices)
    fill = s.fill_value.item() if hasattr(s.fill_value, "item") else s.fill_value
    try:
        shape = tuple(int(d) for d in s.shape)
        a = sparse_compressed_array(indptr, indices, s.data, shape, layout=layout, fill_value=fill, backend="numpy", check_invariants=True)
        return a, cast_indices
    except InvariantError as exc:
        if exc.invariant != "5.6":
            raise
    coo, _ = _from_pydata("asarray", s.tocoo())
    return to_sparse(coo, layout=layout, index_dtype=indices.dtype), True


def _from_bcoo(op: str, b: Any) -> tuple[Any, bool]:
    from ._creation import sparse_coo_array

    copied = False
    if b.n_batch != 0:
        # a batched BCOO holds indices per batch element; JAX's own conversion makes the batch dimensions
        # sparse ones (a copy)
        from jax.experimental.sparse import bcoo_update_layout

        b, copied = bcoo_update_layout(b, n_batch=0), True
    # BCOO's indices are (nnz, sparse_dim); xsparse's, as torch's, (sparse_dim, nnz); data is (nnz, *dense)
    # as xsparse's hybrid values. BCOO marks coalesced arrays with unique_indices and sorted ones with
    # indices_sorted: both together are xsparse's coalesced
    coalesced = bool(b.unique_indices) and bool(b.indices_sorted)
    shape = tuple(int(d) for d in b.shape)
    indices, data = b.indices, b.data
    # BCOO pads its entries with indices out of bounds (fromdense with a larger nse, sum_duplicates), which
    # JAX ignores: they are left out here (the entries before them keep their order and flags)
    import jax.numpy as jnp

    sparse_shape = jnp.asarray(shape[: indices.shape[-1]], dtype=indices.dtype)
    inside = jnp.all((indices >= 0) & (indices < sparse_shape), axis=1)
    if not bool(jnp.all(inside)):
        indices, data = indices[inside], data[inside]
    return sparse_coo_array(indices.T, data, shape, is_coalesced=coalesced), copied


def _from_bcsr(op: str, b: Any) -> tuple[Any, bool]:
    from ._errors import InvariantError

    try:
        # JAX lets a BCSR row hold unsorted or repeated columns (its flags say so only when it knows): the
        # indices are checked, as for any unchecked input that a kernel will read
        return _bcsr_components(op, b), False
    except InvariantError:
        if bool(b.indices_sorted) and bool(b.unique_indices):
            raise
    # sorted and summed by JAX's own sum_duplicates, on a copy (which may pad again)
    return _bcsr_components(op, b.sum_duplicates(nse=b.nse)), True


def _bcsr_components(op: str, b: Any) -> Any:
    from ._creation import sparse_compressed_array
    from .formats import sparse_csr

    import jax.numpy as jnp

    shape = tuple(int(d) for d in b.shape)
    n_batch = int(b.n_batch)
    indptr, indices, data = b.indptr, b.indices, b.data
    counts = indptr[..., -1]
    nnz = int(counts.reshape(-1)[0]) if counts.size else 0
    if n_batch and counts.size and not bool(jnp.all(counts == nnz)):
        raise ValueError(
            f"{op}: a JAX BCSR array whose batch elements hold different numbers of entries cannot be converted "
            f"(entries per batch element from {int(counts.min())} to {int(counts.max())}): a batched compressed "
            "array holds as many in each. Convert it with x.to_bcoo() first, which gives a COO array."
        )
    # BCSR pads its entries after the last row's (fromdense with a larger nse), with column indices out of
    # bounds, which JAX ignores: they are left out
    if indices.shape[-1] != nnz:
        indices = indices[..., :nnz]
        data = data[(slice(None),) * n_batch + (slice(0, nnz),)]
    return sparse_compressed_array(indptr, indices, data, shape, layout=sparse_csr, dense_dim=int(b.n_dense), check_invariants=True)


@dataclass(frozen=True)
class _Library:
    """Another library's sparse arrays: how to recognise one, name its kind, and convert it (the array and
    whether converting copied data)."""

    recognises: Callable[[Any], bool]
    kind: Callable[[Any], str]
    convert: Callable[[str, Any], tuple[Any, bool]]


_LIBRARIES = (
    _Library(_is_torch_sparse, lambda x: f"a torch sparse tensor (layout={x.layout})", _from_torch),
    _Library(_is_pydata_sparse, lambda x: f"a pydata/sparse array ({type(x).__name__})", _from_pydata),
    _Library(
        _is_scipy_sparse,
        lambda x: f"a SciPy sparse {'array' if type(x).__name__.endswith('_array') else 'matrix'} ({type(x).__name__})",
        _from_scipy,
    ),
    _Library(lambda x: _is_jax(x, "BCOO"), lambda x: "a JAX BCOO array", _from_bcoo),
    _Library(lambda x: _is_jax(x, "BCSR"), lambda x: "a JAX BCSR array", _from_bcsr),
)


def _library_of(x: Any) -> _Library | None:
    return next((library for library in _LIBRARIES if library.recognises(x)), None)
