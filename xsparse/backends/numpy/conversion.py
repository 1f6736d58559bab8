"""Native CPU kernels of the NumPy backend: the compiled kernels of ``_cpu`` and SciPy's.

Batched compressed arrays reach the 2-D kernels with their batch index folded into the major index
(batch ``b``, major ``i`` -> ``b * n_major + i``); the result is split back per batch, which needs every
batch to hold the same number of specified elements (invariant 3.9).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, sparse_coo, sparse_csc, sparse_csr, strided
from ...formats._invariants import check_coo_bounds, check_index_data, unequal_batches, verified
from ..._common import scalar_for
from ...formats._spec import Target
from .. import _cpu
from ..array_api.conversion import compressed_to_coo, coo_to_compressed, is_plus_zero

__all__: list[str] = []

_INT32_MAX = np.iinfo(np.int32).max
_UNBLOCKED = frozenset({sparse_csr, sparse_csc})


def _cpu_reason(dtype: Any, fill: Any = 0) -> str | None:
    reason = _cpu.unavailable_reason()
    if reason is not None:
        return reason
    if not _cpu.supports_dtype(np.dtype(dtype)):
        return f"the compiled kernels do not handle dtype {np.dtype(dtype)}"
    if not is_plus_zero(fill):
        return "the compiled kernels handle fill value 0 (+0.0) only"
    return None


def _split_batches(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, batch: tuple[int, ...], n_major: int, layout: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut a CSR of ``nb * n_major`` rows into ``nb`` batches of ``n_major`` rows each."""
    if not batch:
        return indptr, indices, data
    nb = math.prod(batch)
    if nb == 0:
        ci = np.zeros((*batch, n_major + 1), dtype=indptr.dtype)
        return ci, indices.reshape(*batch, 0), data.reshape(*batch, 0, *data.shape[1:])
    starts = indptr[: nb * n_major + 1 : n_major] if n_major else np.zeros(nb + 1, dtype=indptr.dtype)
    counts = np.diff(starts)
    nse = int(counts[0]) if nb else 0
    if np.any(counts != nse):
        raise unequal_batches(layout, batch, int(counts.min()), int(counts.max()))
    ci = np.empty((nb, n_major + 1), dtype=indptr.dtype)
    ci[:, :n_major] = indptr[: nb * n_major].reshape(nb, n_major) - (np.arange(nb, dtype=indptr.dtype) * nse)[:, None]
    ci[:, n_major] = nse
    return ci.reshape(*batch, n_major + 1), indices.reshape(*batch, nse), data.reshape(*batch, nse, *data.shape[1:])


def _grid(target_or_array: Any, shape: tuple[int, ...], nb_dims: int, blocksize: tuple[int, int]) -> tuple[int, int]:
    return shape[nb_dims] // blocksize[0], shape[nb_dims + 1] // blocksize[1]


def _supports_strided_compressed(xp: Any, x: Any, target: Target) -> str | None:
    return _cpu_reason(x.dtype, target.fill_value)


@register("convert", (strided, COMPRESSED), backend="numpy", supports=_supports_strided_compressed)
def _convert_strided_compressed_numpy(xp: Any, x: Any, target: Target) -> CompressedArray:
    """to_sparse_{csr,csc,bsr,bsc}(strided): two-pass parallel count-and-fill; O(numel), 2 threads."""
    x = np.asarray(x)
    nb_dims = target.batch_dim
    batch = x.shape[:nb_dims]
    bm, bn = target.blocksize
    grid = _grid(target, x.shape, nb_dims, (bm, bn))
    dense = x.shape[nb_dims + 2 :]
    # (*B, M, N, *D) -> (*B, Mb, Nb, bm, bn, *D) -> (*B, major, minor, ...): views, read in place by the kernel
    y = x.reshape(*batch, grid[0], bm, grid[1], bn, *dense)
    y = np.moveaxis(y, nb_dims + 2, nb_dims + 1)
    if not target.layout.is_blocked:
        y = y.reshape(*batch, grid[0], grid[1], *dense)
    if target.layout.compressed_dim == 1:
        y = np.swapaxes(y, nb_dims, nb_dims + 1)
    n_major, n_minor = y.shape[nb_dims], y.shape[nb_dims + 1]
    y2 = y.reshape(math.prod(batch) * n_major, n_minor, *y.shape[nb_dims + 2 :]) if nb_dims else y
    indptr, indices, data = _cpu.dense_to_compressed(y2, np.dtype(target.index_dtype))
    ci, pi, values = _split_batches(indptr, indices, data, batch, n_major, target.layout)
    fill = scalar_for(xp, values.dtype, target.fill_value)
    return CompressedArray(ci, pi, values, target.shape, layout=target.layout, backend=target.backend, xp=xp, fill_value=fill)


def fold(rows: Sequence[np.ndarray] | np.ndarray, sizes: Sequence[int], out: np.ndarray | None = None) -> np.ndarray:
    """The row-major int64 position of each entry among dimensions of ``sizes``, one index row per
    dimension (at least one): a multiply-add per row, in place (into ``out`` when given)."""
    key = np.empty(rows[0].shape, dtype=np.int64) if out is None else out
    key[...] = rows[0]
    for row, size in zip(rows[1:], sizes[1:]):
        key *= size
        key += row
    return key


def _supports_coo_compressed(xp: Any, a: COOArray, target: Target) -> str | None:
    if target.layout not in _UNBLOCKED:
        return "blocked targets are assembled by the generic kernel"
    return _cpu_reason(a.dtype)


@register("convert", (sparse_coo, COMPRESSED), backend="numpy", supports=_supports_coo_compressed)
def _convert_coo_compressed_numpy(xp: Any, a: COOArray, target: Target) -> CompressedArray:
    """to_sparse_{csr,csc}(COO): one pass over the rows of entries in row order, else a counting scatter, per-slice sort and duplicate sum; O(nnz), 2 threads."""
    nb_dims = a.sparse_dim() - 2
    batch = a.shape[:nb_dims]
    idx = np.asarray(a._idx)
    cd = target.layout.compressed_dim
    n_major, n_minor = a.shape[nb_dims + cd], a.shape[nb_dims + 1 - cd]
    major, minor = idx[nb_dims + cd], idx[nb_dims + 1 - cd]
    index_dtype = np.dtype(target.index_dtype)
    wide = math.prod(batch) * n_major > _INT32_MAX or max(n_minor, a.nnz) > _INT32_MAX
    # entries in row-major order already (a kron, a product, a coalesced array) need no sort
    in_order = a._coalesced and cd == 0 and not (wide and index_dtype == np.int32)
    unchecked = not a._bounds_checked and a.nnz > 0
    if unchecked and nb_dims:
        check_coo_bounds(a)  # folded keys of indices out of range would land in other rows or batches
        unchecked = False
    if nb_dims:
        major = fold([*idx[:nb_dims], major], (*batch, n_major))
    # the compiled passes below check the major indices' range on the way, the minor ones are checked here
    if unchecked and not (int(minor.min()) >= 0 and int(minor.max()) < n_minor):
        check_coo_bounds(a)  # its error names the index out of range
    coalesced = a._coalesced
    if in_order:
        # the offsets are one pass over the rows, which checks their order and range on the way (the flag
        # is the caller's word: entries out of order are sorted below, as any others are); the plain
        # indices a copy (not a view, which would keep the row indices alive), the values shared
        offsets = _cpu.sorted_offsets(major, minor.astype(major.dtype, copy=False), math.prod(batch) * n_major)
        if offsets is not None:
            indptr, indices = offsets.astype(index_dtype, copy=False), np.array(minor, dtype=index_dtype)
            ci, pi, values = _split_batches(indptr, indices, np.asarray(a._vals), batch, n_major, target.layout)
            return CompressedArray(ci, pi, values, target.shape, layout=target.layout, backend=target.backend, xp=xp, fill_value=a.fill_value)
        coalesced = False  # out of order or repeated after all: sorted and summed below
    work = np.dtype(np.int64 if wide or index_dtype == np.int64 else np.int32)
    if unchecked and work.itemsize < major.dtype.itemsize:
        check_coo_bounds(a)  # a major index out of range could wrap into range in the narrower dtype
        unchecked = False
    try:
        # a coalesced array's entries, scattered stably by column, reach each column in row order, unique
        indptr, indices, data = _cpu.coo_to_compressed(
            major.astype(work, copy=False), minor.astype(work, copy=False), np.asarray(a._vals),
            math.prod(batch) * n_major, n_minor, sum_duplicates=not coalesced,
        )  # fmt: skip
    except ValueError:
        if unchecked:
            check_coo_bounds(a)  # a major index out of range: the validator's error names it
        raise
    indptr, indices = indptr.astype(index_dtype, copy=False), indices.astype(index_dtype, copy=False)
    ci, pi, values = _split_batches(indptr, indices, data, batch, n_major, target.layout)
    return CompressedArray(ci, pi, values, target.shape, layout=target.layout, backend=target.backend, xp=xp, fill_value=a.fill_value)


def _supports_compressed_strided(xp: Any, a: CompressedArray, target: Target) -> str | None:
    return _cpu_reason(a.dtype, a.fill_value)


def check_offset_ends(a: CompressedArray) -> None:
    """Raise the validator's error where an unchecked array's offsets do not start at 0 or do not end at
    the number of entries (invariants 5.1 and 5.2): the kernels that read only the slices they select
    (to_dense, indexing's pointer searches) would leave an entry outside every slice out of the result
    without a word."""
    if a._bounds_checked:
        return
    ci, nse = np.asarray(a._compressed), int(a._plain.shape[-1])
    if ci.ndim == 1:
        bad = int(ci[0]) != 0 or int(ci[-1]) != nse
    else:
        bad = bool(np.any(ci[..., 0] != 0)) or bool(np.any(ci[..., -1] != nse))
    if bad:
        check_index_data(a)


@register("convert", (COMPRESSED, strided), backend="numpy", supports=_supports_compressed_strided)
def _convert_compressed_strided_numpy(xp: Any, a: CompressedArray, target: Target) -> Any:
    """to_dense(compressed): parallel scatter into zeros, then un-block; O(numel)."""
    nb_dims = a.batch_dim()
    batch = a.shape[:nb_dims]
    nb, nse = math.prod(batch), a.nnz
    check_offset_ends(a)  # nse is read below as the last offset
    ci = np.asarray(a._compressed).reshape(nb, a._compressed.shape[-1]).astype(np.int64)
    n_major = ci.shape[1] - 1
    indptr = np.empty(nb * n_major + 1, dtype=np.int64)
    indptr[: nb * n_major] = (ci[:, :-1] + (np.arange(nb) * nse)[:, None]).reshape(-1)
    indptr[nb * n_major] = nb * nse
    values = np.asarray(a._vals)
    trailing = values.shape[nb_dims + 1 :]
    bm, bn = a.blocksize
    grid = (a.shape[nb_dims] // bm, a.shape[nb_dims + 1] // bn)
    n_minor = grid[1 - a.layout.compressed_dim]
    out = _cpu.compressed_to_dense(
        indptr, np.asarray(a._plain).reshape(-1).astype(np.int64, copy=False),
        values.reshape(nb * nse, *trailing), nb * n_major, n_minor,
    )  # fmt: skip
    out = out.reshape(*batch, n_major, n_minor, *trailing)
    if a.layout.compressed_dim == 1:
        out = np.swapaxes(out, nb_dims, nb_dims + 1)
    if a.layout.is_blocked:
        out = np.moveaxis(out, nb_dims + 2, nb_dims + 1)
    return np.ascontiguousarray(out).reshape(a.shape)


def _supports_coalesce(xp: Any, a: COOArray) -> str | None:
    sd = a.sparse_dim()
    if sd == 0:
        return "a COO array without sparse dimensions has nothing to sort"
    if math.prod(a.shape[1:sd]) > np.iinfo(np.int64).max:
        return "the trailing sparse dimensions do not fit one int64 key"
    return _cpu_reason(a.dtype)


@register("coalesce", (sparse_coo,), backend="numpy", supports=_supports_coalesce)
def _coalesce_coo_numpy(xp: Any, a: COOArray) -> COOArray:
    """coalesce(COO): first sparse dimension (ranked if far longer than nnz) as major, the others as one key; O(nnz + shape[0]), 2 threads."""
    # a first dimension much longer than the number of entries (a long vector) has its indices ranked
    # first (a sort of the nnz row indices), so that nothing of the dimension's length is allocated
    idx = np.asarray(a._idx)
    if not a._bounds_checked and a.nnz:
        check_coo_bounds(a)  # a folded key of an index out of range would be another element's
    sd = a.sparse_dim()
    rest = a.shape[1:sd]
    key = fold(idx[1:sd], rest) if sd > 1 else np.zeros(a.nnz, dtype=np.int64)
    n_rest = math.prod(rest)
    major, n_major = idx[0], a.shape[0]
    long_rows = n_major > 2 * a.nnz + 4096
    if long_rows:
        row_of, major = np.unique(idx[0], return_inverse=True)
        n_major = row_of.shape[0]
    work = np.int32 if max(n_rest, n_major, a.nnz) <= _INT32_MAX else np.int64
    indptr, minor, values = _cpu.coo_to_compressed(major.astype(work), key.astype(work), np.asarray(a._vals), n_major, n_rest)
    rows = np.repeat(row_of if long_rows else np.arange(n_major, dtype=idx.dtype), np.diff(indptr))
    out = np.empty((sd, minor.shape[0]), dtype=idx.dtype)
    out[0] = rows
    if sd > 1:
        out[1:] = np.unravel_index(minor, rest)
    result = COOArray(out, values, a.shape, backend=a._backend, xp=xp, coalesced=True, fill_value=a.fill_value)
    result._bounds_checked = True  # the input's indices were in range, and these are some of them
    return result


@register("convert", (sparse_coo, strided), backend="numpy")
def _convert_coo_strided_numpy(xp: Any, a: COOArray, target: Target) -> Any:
    """to_dense(COO): fill, then assign the coalesced entries by linear index; O(numel + nnz)."""
    from ..._conversion import coalesce

    c = cast(COOArray, coalesce(a))
    sd = c.sparse_dim()
    out = np.full(c.shape, c.fill_value, dtype=c.dtype)
    if c.nnz:
        flat = out.reshape(math.prod(c.shape[:sd]), *c.shape[sd:])
        # without sparse dimensions the one entry sits at position 0 (an index array, so that the
        # (1, *dense) values keep their leading axis)
        where = np.ravel_multi_index(tuple(np.asarray(c._idx)), c.shape[:sd]) if sd else np.zeros(1, dtype=np.intp)
        flat[where] = np.asarray(c._vals)
    return out


def _components(a: CompressedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``a``'s compressed indices, plain indices and values with the batches folded into one leading axis."""
    b = a.batch_dim()
    nb = math.prod(a.shape[:b])
    ci = np.asarray(a._compressed).reshape(nb, a._compressed.shape[-1])
    return ci, np.asarray(a._plain).reshape(nb, a.nnz), np.asarray(a._vals).reshape(nb, a.nnz, *a._vals.shape[b + 1 :])


def _transposed(xp: Any, a: CompressedArray, index_dtype: Any) -> CompressedArray | None:
    """``a`` compressed along its other sparse dimension (CSR <-> CSC, BSR <-> BSC), by the compiled
    counting sort; None where a slice's plain indices do not increase strictly (not canonical)."""
    ci, pi, vals = _components(a)
    b, cd = a.batch_dim(), a.layout.compressed_dim
    n_plain = a.shape[b + 1 - cd] // a.blocksize[1 - cd]
    out = _cpu.transpose_compressed(ci, pi, vals, n_plain, index_dtype)
    if out is None:
        return None
    batch = a.shape[:b]
    return CompressedArray(
        out[0].reshape(*batch, n_plain + 1), out[1].reshape(*batch, a.nnz), out[2].reshape(a._vals.shape), a.shape,
        layout=a.layout.transposed, backend=a._backend, xp=xp, fill_value=a.fill_value,
    )  # fmt: skip


def _expand(ci: np.ndarray, pi: np.ndarray, out: np.ndarray, major_row: int, minor_row: int) -> bool:
    """Rows ``major_row`` and ``minor_row`` of ``out``: each entry's slice and plain index, in storage
    order; whether every slice's plain indices increase strictly."""
    if _cpu.unavailable_reason() is None:
        return _cpu.expand_compressed(ci, pi, out, major_row, minor_row)
    nb, n_major = ci.shape[0], ci.shape[1] - 1
    out[major_row] = np.repeat(np.tile(np.arange(n_major, dtype=out.dtype), nb), np.diff(ci, axis=1).reshape(-1))
    out[minor_row] = pi.reshape(-1)
    major, minor = out[major_row], out[minor_row]
    return bool(np.all((major[1:] != major[:-1]) | (minor[1:] > minor[:-1])))


def _element_coo(xp: Any, a: CompressedArray, index_dtype: Any) -> COOArray:
    """The COO of an unblocked compressed array, entries in storage order (coalesced for a canonical CSR)."""
    b = a.batch_dim()
    batch = a.shape[:b]
    ci, pi, vals = _components(a)
    nb, nse = pi.shape
    indices = _cpu.empty((b + 2, nb * nse), np.dtype(index_dtype))  # a large one reuses freed memory
    cd = a.layout.compressed_dim
    canonical = _expand(ci, pi, indices, b + cd, b + 1 - cd)
    if b and nb * nse:
        for d, coordinate in enumerate(np.unravel_index(np.arange(nb), batch)):
            indices[d].reshape(nb, nse)[...] = coordinate[:, None]
    values = vals.reshape(nb * nse, *vals.shape[2:])
    return COOArray(indices, values, a.shape, backend=a._backend, xp=xp, coalesced=cd == 0 and canonical, fill_value=a.fill_value)


def _foreign_byte_order(*dtypes: Any) -> str | None:
    if all(np.dtype(d).isnative for d in dtypes):
        return None
    return "the compiled kernels read and write indices in the machine's byte order"


def _supports_compressed_coo(xp: Any, a: CompressedArray, target: Target) -> str | None:
    if a.layout.is_blocked:
        return "blocks are expanded by the generic kernel"
    return _foreign_byte_order(a.index_dtype, target.index_dtype)


@register("convert", (COMPRESSED, sparse_coo), backend="numpy", supports=_supports_compressed_coo)
def _convert_compressed_coo_numpy(xp: Any, a: CompressedArray, target: Target) -> COOArray:
    """to_sparse_coo(CSR or CSC): compiled parallel expansion of the compressed indices (a CSC transposed to row order first); O(nnz + n)."""
    from ..._conversion import coalesce

    if a.layout.compressed_dim == 1 and _cpu.unavailable_reason() is None and not a._vals.dtype.hasobject:
        # the CSR of the same matrix holds the entries in the COO's (row-major) order: no sort
        rows = _transposed(xp, a, a._plain.dtype)
        if rows is not None:
            return _element_coo(xp, rows, target.index_dtype)
    return cast(COOArray, coalesce(_element_coo(xp, a, target.index_dtype)))


def _supports_compressed_compressed(xp: Any, a: CompressedArray, target: Target) -> str | None:
    if a.layout.is_blocked != target.layout.is_blocked or tuple(a.blocksize) != tuple(target.blocksize):
        return "a change of block shape is converted by the generic kernel"
    if a._vals.dtype.hasobject:
        return "the compiled kernels move values as bytes, which Python objects are not"
    return _foreign_byte_order(a.index_dtype, target.index_dtype) or _cpu.unavailable_reason()


@register("convert", (COMPRESSED, COMPRESSED), backend="numpy", supports=_supports_compressed_compressed)
def _convert_compressed_compressed_numpy(xp: Any, a: CompressedArray, target: Target) -> CompressedArray:
    """CSR <-> CSC, BSR <-> BSC (one block shape): compiled parallel counting sort by plain index; O(nnz + n)."""
    idt = np.dtype(target.index_dtype)
    if a.layout is target.layout:
        return CompressedArray(
            np.asarray(a._compressed).astype(idt), np.asarray(a._plain).astype(idt), a._vals, a.shape,
            layout=a.layout, backend=a._backend, xp=xp, fill_value=a.fill_value,
        )  # fmt: skip
    out = _transposed(xp, a, idt)
    if out is not None:
        return out
    # a slice repeats (or does not sort) its plain indices, against invariant 5.6: through COO, which
    # sorts and sums them
    if a.layout.is_blocked:
        return coo_to_compressed(xp, compressed_to_coo(xp, a), target)
    return cast(CompressedArray, _convert_coo_compressed_numpy(xp, _element_coo(xp, a, idt), target))


# -- SciPy's compiled kernels: 2-D CSR/CSC without batch or dense dimensions --------------------------------
# Registered below the compiled kernels above (priority -1): they run where those decline or are not built.

_SCIPY_DTYPES = frozenset(
    np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                          np.uint64, np.float32, np.float64, np.complex64, np.complex128)
)  # fmt: skip


def _scipy_reason(dtype: Any, fill: Any, plain_2d: bool, *layouts: Any) -> str | None:
    if not plain_2d:
        return "SciPy's kernels handle 2-D arrays without batch or dense dimensions"
    if any(layout not in _UNBLOCKED for layout in layouts):
        return "SciPy's kernels handle CSR and CSC only"
    if np.dtype(dtype) not in _SCIPY_DTYPES:
        return f"SciPy's sparse kernels do not handle dtype {np.dtype(dtype)}"
    if not is_plus_zero(fill):
        return "SciPy's sparse arrays have fill value 0 (+0.0)"
    return None


def _scipy_container(layout: Any) -> Any:
    from scipy import sparse

    return sparse.csr_array if layout is sparse_csr else sparse.csc_array


def _from_scipy(m: Any, target: Target) -> CompressedArray:
    m.sum_duplicates()  # canonical: sorted, unique (a no-op on arrays SciPy built canonical)
    idt = np.dtype(target.index_dtype)
    return CompressedArray(
        m.indptr.astype(idt, copy=False), m.indices.astype(idt, copy=False), m.data, target.shape,
        layout=target.layout, backend=target.backend, xp=target.xp, fill_value=scalar_for(target.xp, m.data.dtype, target.fill_value),
    )  # fmt: skip


def _to_scipy(a: CompressedArray) -> Any:
    verified(a)  # SciPy's compiled routines read the indices unchecked
    container = _scipy_container(a.layout)
    return container((np.asarray(a._vals), np.asarray(a._plain), np.asarray(a._compressed)), shape=a.shape)


def _holds_negative_zero(x: np.ndarray) -> bool:
    """Whether a floating or complex ``x`` holds a -0.0 (as either part of a complex value: SciPy's
    toarray adds into +0.0 and loses it there too, as in ``-0.0 - inf*j``)."""
    if x.dtype.kind not in "fc":
        return False
    parts = (x.real, x.imag) if x.dtype.kind == "c" else (x,)
    return any(bool(np.any(np.signbit(p) & (p == 0))) for p in parts)


def _supports_strided_compressed_scipy(xp: Any, x: Any, target: Target) -> str | None:
    plain = x.ndim == 2 and target.dense_dim == 0
    reason = _scipy_reason(x.dtype, target.fill_value, plain, target.layout)
    if reason is None and _holds_negative_zero(np.asarray(x)):
        # a -0.0 is specified with fill value +0.0 (docs/decisions.md, "Fill values"); SciPy drops it
        return "SciPy leaves out -0.0, which is a specified element"
    return reason


@register("convert", (strided, COMPRESSED), backend="numpy", supports=_supports_strided_compressed_scipy, priority=-1)
def _convert_strided_compressed_scipy_numpy(xp: Any, x: Any, target: Target) -> CompressedArray:
    """to_sparse_{csr,csc}(2-D strided) through SciPy's csr_array / csc_array; O(numel)."""
    return _from_scipy(_scipy_container(target.layout)(np.asarray(x)), target)


def _supports_coo_compressed_scipy(xp: Any, a: COOArray, target: Target) -> str | None:
    plain = a.sparse_dim() == 2 and a.dense_dim() == 0
    return _scipy_reason(a.dtype, a.fill_value, plain, target.layout)


@register("convert", (sparse_coo, COMPRESSED), backend="numpy", supports=_supports_coo_compressed_scipy, priority=-1)
def _convert_coo_compressed_scipy_numpy(xp: Any, a: COOArray, target: Target) -> CompressedArray:
    """to_sparse_{csr,csc}(2-D COO) through SciPy's coo_array.tocsr / tocsc (sums duplicates); O(nnz)."""
    from scipy import sparse

    idx = np.asarray(a._idx)
    coo = sparse.coo_array((np.asarray(a._vals), (idx[0], idx[1])), shape=a.shape)
    m = coo.tocsr() if target.layout is sparse_csr else coo.tocsc()
    return _from_scipy(m, target)


def _supports_compressed_strided_scipy(xp: Any, a: CompressedArray, target: Target) -> str | None:
    plain = a.batch_dim() == 0 and a.dense_dim() == 0
    reason = _scipy_reason(a.dtype, a.fill_value, plain, a.layout)
    if reason is None and _holds_negative_zero(np.asarray(a._vals)):
        # toarray adds the values into zeros, and +0.0 + -0.0 is +0.0
        return "SciPy's toarray turns a stored -0.0 into +0.0"
    return reason


@register("convert", (COMPRESSED, strided), backend="numpy", supports=_supports_compressed_strided_scipy, priority=-1)
def _convert_compressed_strided_scipy_numpy(xp: Any, a: CompressedArray, target: Target) -> Any:
    """to_dense(2-D CSR or CSC) through SciPy's toarray; O(numel)."""
    return _to_scipy(a).toarray()


def _supports_compressed_compressed_scipy(xp: Any, a: CompressedArray, target: Target) -> str | None:
    plain = a.batch_dim() == 0 and a.dense_dim() == 0
    return _scipy_reason(a.dtype, a.fill_value, plain, a.layout, target.layout)


@register("convert", (COMPRESSED, COMPRESSED), backend="numpy", supports=_supports_compressed_compressed_scipy, priority=-1)
def _convert_compressed_compressed_scipy_numpy(xp: Any, a: CompressedArray, target: Target) -> CompressedArray:
    """CSR <-> CSC (2-D) through SciPy's tocsr / tocsc; O(nnz)."""
    m = _to_scipy(a)
    return _from_scipy(m.tocsr() if target.layout is sparse_csr else m.tocsc(), target)

