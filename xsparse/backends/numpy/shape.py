"""Native shape kernels of the NumPy backend: SciPy's compiled merge of compressed slices.

Joining compressed arrays along their plain dimension (CSR side by side, CSC one above the other)
merges every compressed slice of the operands; SciPy's ``hstack`` of CSR matrices does that in one
compiled pass, where the generic kernel sorts. The kernel hands SciPy only the structure, in compressed
/ plain terms and with the batches folded into the compressed dimension (batch ``b``, slice ``i`` ->
``b * n_major + i``); the data it stacks are the *positions* of the elements, which then gather the
values. So every value dtype, block shape and dense dimension goes through the same compiled merge.

COO arrays joined along a sparse dimension are copied once into the result, the index row of that
dimension offset on the way (the generic kernel offsets copies, then copies again).
A COO reshape computes its linear keys in place and their new digits with one ``divmod`` per
dimension written straight into the result (NumPy's ``//`` and ``%`` make two passes and new arrays).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, sparse_coo
from .. import _cpu
from ..array_api.shape import _common_index_dtype, reshape_coo, supports_concat_compressed
from .conversion import _split_batches, fold

__all__: list[str] = []


def _supports_concat_plain(xp: Any, arrays: list[CompressedArray], axis: int) -> str | None:
    first = arrays[0]
    b = first.batch_dim()
    if axis != b + 1 - first.layout.compressed_dim:
        return "it merges slices along the plain dimension only; the generic kernel concatenates whole slices as fast"
    return supports_concat_compressed(xp, arrays, axis)


@register("concat", (COMPRESSED,), backend="numpy", supports=_supports_concat_plain)
def _concat_compressed_numpy(xp: Any, arrays: list[CompressedArray], axis: int) -> CompressedArray:
    """concat(compressed, ...) along the plain dim: SciPy's compiled CSR hstack of the folded structure, then a gather; O(N)."""
    import scipy.sparse as sp

    first = arrays[0]
    b = first.batch_dim()
    batch = tuple(first.shape[:b])
    nb = math.prod(batch)
    n_major = int(first._compressed.shape[-1]) - 1
    tail = tuple(first._vals.shape[b + 1 :])
    mats, values, offset = [], [], 0
    for a in arrays:
        nse = a.nnz
        ci = np.reshape(a._compressed, (nb, n_major + 1)).astype(np.int64) + (np.arange(nb, dtype=np.int64) * nse)[:, None]
        indptr = np.concatenate([ci[:, :-1].reshape(-1), np.asarray([nb * nse], dtype=np.int64)])
        positions = np.arange(offset, offset + nb * nse, dtype=np.int64)
        n_plain = a.shape[axis] // a.blocksize[axis - b]
        mats.append(sp.csr_array((positions, np.reshape(a._plain, (-1,)), indptr), shape=(nb * n_major, n_plain)))
        values.append(np.reshape(a._vals, (nb * nse, *tail)))
        offset += nb * nse
    merged = sp.hstack(mats, format="csr")
    ci, pi, pos = _split_batches(merged.indptr, merged.indices, merged.data, batch, n_major, first.layout)
    total = sum(a.nnz for a in arrays)
    shape = list(first.shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    idt = _common_index_dtype(xp, arrays, total, tuple(shape))
    vals = np.take(np.concatenate(values, axis=0), np.reshape(pos, (-1,)), axis=0).reshape(*batch, total, *tail)
    return CompressedArray(
        np.ascontiguousarray(ci, dtype=idt), np.ascontiguousarray(pi, dtype=idt), vals, tuple(shape),
        layout=first.layout, backend=first._backend, xp=xp, fill_value=first.fill_value,
    )  # fmt: skip


def _supports_concat_coo(xp: Any, arrays: list[COOArray], axis: int) -> str | None:
    sd = arrays[0].sparse_dim()
    if any(a.sparse_dim() != sd for a in arrays):
        return "operands with different numbers of sparse dimensions are regrouped by the generic kernel"
    if axis >= sd:
        return "joining along a dense dimension aligns the entries, which the generic kernel does"
    return None


@register("concat", (sparse_coo,), backend="numpy", supports=_supports_concat_coo)
def _concat_coo_numpy(xp: Any, arrays: list[COOArray], axis: int) -> COOArray:
    """concat(COO, ...) along a sparse dim: one copy of indices and values, the offsets added on the way; O(N)."""
    first = arrays[0]
    shape = list(first.shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    total = sum(a.nnz for a in arrays)
    idt = _common_index_dtype(xp, arrays, total, tuple(shape))
    indices = _cpu.empty((first.sparse_dim(), total), idt)  # a large one reuses freed memory
    start, offset = 0, 0
    for a in arrays:
        part, idx = indices[:, start : start + a.nnz], np.asarray(a._idx)
        part[:axis], part[axis + 1 :] = idx[:axis], idx[axis + 1 :]
        np.add(idx[axis], offset, out=part[axis], dtype=idt)  # in the result's (widened) index dtype
        start += a.nnz
        offset += a.shape[axis]
    values = _cpu.empty((total, *first._vals.shape[1:]), np.result_type(*(a._vals.dtype for a in arrays)))
    np.concatenate([np.asarray(a._vals) for a in arrays], axis=0, out=values)
    # blocks of entries sorted along the first dimension follow each other in order
    coalesced = axis == 0 and all(a.is_coalesced() for a in arrays)
    return COOArray(indices, values, tuple(shape), backend=first._backend, xp=xp, coalesced=coalesced, fill_value=first.fill_value)


def _renumber(xp: Any, indices: Any, old: tuple[int, ...], new: tuple[int, ...], dtype: Any) -> np.ndarray:
    """:func:`..array_api.shape.reindex` in place: the linear keys, then one ``divmod`` per new dimension."""
    nnz = indices.shape[1]
    # large arrays from the pool of freed blocks: fresh pages would cost as much as the arithmetic
    out = _cpu.empty((len(new), nnz), dtype)
    if not new or not nnz:
        return out
    key = fold(indices, old, out=_cpu.empty((nnz,), np.int64)) if old else np.zeros(nnz, dtype=np.int64)
    if len(new) == 1:
        out[0] = key
        return out
    quotient = _cpu.empty((nnz,), np.int64)
    for d in range(len(new) - 1, 0, -1):
        if out.dtype == np.int64:
            np.divmod(key, new[d], out=(quotient, out[d]))
        else:
            np.divmod(key, new[d], out=(quotient, key))
            out[d] = key
        key, quotient = quotient, key
    out[0] = key
    return out


@register("reshape", (sparse_coo,), backend="numpy")
def _reshape_coo_numpy(xp: Any, a: COOArray, shape: tuple[int, ...], copy: bool | None) -> COOArray:
    """reshape(COO) -> COO: the generic plan, the new indices computed in place (one divmod per dimension); O(sparse_dim * nnz)."""
    return reshape_coo(xp, a, shape, copy, _renumber)
