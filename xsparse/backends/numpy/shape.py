"""Native shape kernels of the NumPy backend: joins of compressed and COO arrays, COO reshapes.

Compressed arrays joined along a sparse dimension never sort. Along the compressed one (CSR one above
the other) each batch's slices follow one another: the plain indices and values are concatenated into
the result. Along the plain one (CSR side by side) every slice holds the operands' runs of that slice
one after the other; the compiled ``_cpu.join_plain`` copies them in parallel over ranges of slices,
the indices offset on the way, the values as opaque bytes (so every dtype, block shape and dense
dimension takes the same path). Batches are folded into the compressed dimension (batch ``b``, slice
``i`` -> ``b * n_major + i``).

COO arrays joined along a sparse dimension are copied once into the result, the index row of that
dimension offset on the way (the generic kernel offsets copies, then copies again).
A COO reshape computes its linear keys in place and their new digits with one ``divmod`` per
dimension written straight into the result (NumPy's ``//`` and ``%`` make two passes and new arrays).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, sparse_coo
from .. import _cpu
from ..array_api.shape import _common_index_dtype, reshape_coo, supports_concat_compressed
from .conversion import _components, fold

__all__: list[str] = []


def _supports_concat_sparse(xp: Any, arrays: list[CompressedArray], axis: int) -> str | None:
    first = arrays[0]
    b = first.batch_dim()
    if not b <= axis < b + 2:
        return "it joins along a sparse dimension; the generic kernel joins batches and dense dimensions"
    if any(a._vals.dtype.hasobject for a in arrays):
        return "the compiled kernels move values as bytes, which Python objects are not"
    if axis == b + 1 - first.layout.compressed_dim and _cpu.unavailable_reason() is not None:
        return str(_cpu.unavailable_reason())
    return supports_concat_compressed(xp, arrays, axis)


Parts = list[tuple[np.ndarray, np.ndarray, np.ndarray]]


def _append_slices(parts: Parts, offsets: list[int], idt: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Join along the compressed dimension: each batch's slices one operand after the other."""
    nb, tail = parts[0][1].shape[0], parts[0][2].shape[2:]
    total = sum(pi.shape[1] for _, pi, _ in parts)
    ci = np.empty((nb, sum(c.shape[1] - 1 for c, _, _ in parts) + 1), dtype=idt)
    start, offset = 0, 0
    for c, pi, _ in parts:
        m = c.shape[1] - 1
        np.add(c[:, :m], offset, out=ci[:, start : start + m], dtype=idt)
        start, offset = start + m, offset + pi.shape[1]
    ci[:, start] = offset
    # large outputs from the pool of freed blocks: fresh pages would cost as much as the copy
    pi = _cpu.empty((nb, total), idt)
    np.concatenate([p for _, p, _ in parts], axis=1, out=pi)
    vals = _cpu.empty((nb, total, *tail), parts[0][2].dtype)
    np.concatenate([v for _, _, v in parts], axis=1, out=vals)
    return ci, pi, vals


def _merge_slices(parts: Parts, offsets: list[int], idt: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Join along the plain dimension: each slice the operands' slices one after the other, indices offset."""
    return _cpu.join_plain(parts, offsets, idt)


@register("concat", (COMPRESSED,), backend="numpy", supports=_supports_concat_sparse)
def _concat_compressed_numpy(xp: Any, arrays: list[CompressedArray], axis: int) -> CompressedArray:
    """concat(compressed, ...) along a sparse dim: slices appended (compressed dim) or merged by a compiled parallel join (plain dim); O(N)."""
    first = arrays[0]
    b = first.batch_dim()
    batch = tuple(first.shape[:b])
    shape = list(first.shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    total = sum(a.nnz for a in arrays)
    idt = np.dtype(_common_index_dtype(xp, arrays, total, tuple(shape)))
    # the plain indices of each operand are offset by the blocks of the operands before it
    sizes = [a.shape[axis] // a.blocksize[axis - b] for a in arrays]
    offsets = [sum(sizes[:k]) for k in range(len(arrays))]
    join = _append_slices if axis - b == first.layout.compressed_dim else _merge_slices
    ci, pi, vals = join([_components(a) for a in arrays], offsets, idt)
    # valid by construction where the operands are (their slices copied whole, the offsets and indices shifted)
    return CompressedArray._trusted(
        ci.reshape(*batch, ci.shape[1]), pi.reshape(*batch, total), vals.reshape(*batch, total, *vals.shape[2:]),
        tuple(shape), layout=first.layout, backend=first._backend, xp=xp, fill_value=first.fill_value,
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
