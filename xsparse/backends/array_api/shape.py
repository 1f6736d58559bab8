"""Generic shape kernels (Array API only): permute, reshape, expand and squeeze, broadcast, flip, concat.

A COO array changes shape by moving its index rows and value axes. Where an operation would put a dense
dimension before a sparse one, the dense dimensions concerned are *regrouped*: every stored dense
sub-array is split into one entry per element (its fill values stay specified), which multiplies
``nnz`` but never materialises an unspecified element.

A compressed array (CSR, CSC, BSR, BSC) changes shape on its components wherever the result keeps the
compressed structure: its batch dimensions (all three components), its dense dimensions (the values),
and its two sparse dimensions as a whole (the CSR <-> CSC view, or a reordering of the specified
elements for ``flip`` and ``concat``). Elsewhere its kernel declines with a reason, and the declared
rewrite through COO computes a COO result (the dispatcher warns).

The public functions (``xsparse._shape``) have checked and normalised every argument: kernels get
axes in ``[0, ndim)``, resolved shapes, and, for ``concat``, operands of one layout, dtype and fill value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import array_api_compat

from ..._common import dtype_name
from ..._errors import InvariantError
from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, sparse_coo, strided
from ...formats._invariants import index_overflows
from ...formats._ops import contiguous, expand_compressed, prod
from ...formats._spec import Target
from .conversion import (
    _linearize,
    _unravel,
    block_coo_to_compressed,
    coalesce_coo,
    compressed_to_block_coo,
    compressed_to_coo,
)
from .elementwise import broadcast_coo

__all__ = ["regroup_coo", "permute_coo", "reshape_coo", "align_coo", "supports_concat_compressed"]


def _device(x: Any) -> Any:
    return array_api_compat.device(x)


def _arange(xp: Any, n: int, like: Any) -> Any:
    return xp.arange(n, dtype=xp.int64, device=_device(like))


def _positions(xp: Any, order: Sequence[int], like: Any) -> Any:
    return xp.asarray(list(order), dtype=xp.int64, device=_device(like))


def _wide_enough(xp: Any, index_dtype: Any, *sizes: int) -> Any:
    """``index_dtype``, or int64 where int32 cannot address the largest of ``sizes``."""
    if dtype_name(index_dtype) == "int32" and index_overflows("int32", max((*sizes, 0))):
        return xp.int64
    return index_dtype


def _is_identity(order: Sequence[int], start: int = 0) -> bool:
    return tuple(order) == tuple(range(start, start + len(order)))


def _n_block(a: CompressedArray) -> int:
    return 2 if a.layout.is_blocked else 0


def _compressed(a: CompressedArray, compressed: Any, plain: Any, values: Any, shape: tuple[int, ...], **kw: Any) -> CompressedArray:
    fill = kw.get("fill_value", a.fill_value)
    layout = kw.get("layout", a.layout)
    return CompressedArray(compressed, plain, values, shape, layout=layout, backend=a._backend, xp=a._xp, fill_value=fill)


# -- COO helpers ---------------------------------------------------------------------------------


def regroup_coo(xp: Any, a: COOArray, k: int) -> COOArray:
    """``a`` with its first ``k`` dense dimensions made sparse: every stored dense sub-array becomes one
    entry per element of those dimensions (its fill values stay specified). The entries keep their order,
    so a coalesced array stays coalesced. O(nnz * prod(sizes of the k dimensions))."""
    if k == 0:
        return a
    sd, nnz = a.sparse_dim(), a.nnz
    lead = tuple(a.shape[sd : sd + k])
    n = prod(lead)
    idt = _wide_enough(xp, a._idx.dtype, nnz * n, *lead)
    idx = xp.astype(a._idx, idt)
    repeated = xp.reshape(xp.broadcast_to(idx[:, :, None], (sd, nnz, n)), (sd, nnz * n))
    inner = xp.reshape(xp.broadcast_to(_arange(xp, n, idx)[None, :], (nnz, n)), (-1,))
    indices = xp.concat([repeated, xp.stack(_unravel(xp, inner, lead, idt))], axis=0)
    values = xp.reshape(a._vals, (nnz * n, *a.shape[sd + k :]))
    return COOArray(indices, values, a.shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)


def _permute_within(xp: Any, a: COOArray, axes: Sequence[int]) -> COOArray:
    """Permute a COO array whose permutation keeps its sparse dimensions first (index rows and value axes)."""
    sd = a.sparse_dim()
    sparse_order, dense_order = axes[:sd], [ax - sd + 1 for ax in axes[sd:]]
    idx = a._idx if _is_identity(sparse_order) else xp.take(a._idx, _positions(xp, sparse_order, a._idx), axis=0)
    vals = a._vals if _is_identity(dense_order, 1) else xp.permute_dims(a._vals, (0, *dense_order))
    shape = tuple(a.shape[ax] for ax in axes)
    # entries sorted by the old index order are no longer sorted once the index rows move
    coalesced = a.is_coalesced() and _is_identity(sparse_order)
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


def permute_coo(xp: Any, a: COOArray, axes: Sequence[int]) -> COOArray:
    """``permute_dims`` of a COO array; dense dimensions moved before a sparse one are regrouped as sparse."""
    sd = a.sparse_dim()
    sparse_at = [p for p, ax in enumerate(axes) if ax < sd]
    k = sparse_at[-1] + 1 if sparse_at else 0
    moved = sorted(ax for ax in axes[:k] if ax >= sd)
    if moved:
        order = [*range(sd), *moved, *(d for d in range(sd, a.ndim) if d not in moved)]
        a = regroup_coo(xp, _permute_within(xp, a, order), len(moved))
        axes = [order.index(ax) for ax in axes]
    if _is_identity(axes):
        return a
    return _permute_within(xp, a, axes)


def _reshape_plan(a: COOArray, shape: tuple[int, ...]) -> tuple[int, int]:
    """``(r, p)``: regroup the first ``r`` dense dimensions of ``a`` (as few as possible), then its leading
    dimensions become the first ``p`` of ``shape`` and its remaining dense ones the rest. Among the ``p``
    that fit, one leaving the dense dimensions as they are comes first, then the smallest."""
    sd = a.sparse_dim()
    for r in range(a.dense_dim() + 1):
        lead = prod(a.shape[: sd + r])
        fits = [p for p in range(len(shape) + 1) if prod(shape[:p]) == lead]
        exact = [p for p in fits if tuple(shape[p:]) == tuple(a.shape[sd + r :])]
        if fits:
            return r, (exact or fits)[0]
    return a.dense_dim(), len(shape)


def reshape_coo(xp: Any, a: COOArray, shape: tuple[int, ...], copy: bool | None) -> COOArray:
    """Reshape a COO array: its sparse dimensions by linearising the indices, its dense dimensions among
    themselves (the values); dense dimensions the new shape merges with sparse ones are regrouped as
    sparse first. The row-major order, hence coalescedness, is kept. O(sparse_dim * nnz)."""
    regroup, p = _reshape_plan(a, shape)
    old_lead, new_lead = tuple(a.shape[: a.sparse_dim() + regroup]), tuple(shape[:p])
    if regroup or old_lead != new_lead:
        if copy is False:
            raise ValueError(
                f"reshape: a reshape of the sparse dimensions of a sparse_coo array builds new indices, so it cannot "
                f"return a view (shape={a.shape}, new shape={shape}, copy=False). Pass copy=None or copy=True."
            )
        a = regroup_coo(xp, a, regroup)
        if prod(old_lead) > 2**63 - 1:
            raise ValueError(
                f"reshape: the sparse dimensions {old_lead} have more positions than int64 can number. Reshape "
                "fewer dimensions at once."
            )
        idt = _wide_enough(xp, a._idx.dtype, a.nnz, *new_lead)
        key = _linearize(xp, a._idx, old_lead)
        rows = _unravel(xp, key, new_lead, idt)
        idx = xp.stack(rows) if rows else xp.zeros((0, a.nnz), dtype=idt, device=a.device)
    else:
        idx = xp.asarray(a._idx, copy=True) if copy else a._idx
    vals = xp.reshape(a._vals, (a.nnz, *shape[p:]), copy=copy)
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)


def align_coo(xp: Any, arrays: Sequence[COOArray]) -> tuple[Any, list[Any]]:
    """The union of the specified positions of COO arrays of one sparse shape, and each array's values
    there (its fill value where it specifies none): ``(indices, [values, ...])``, sorted and unique.
    O(N log N) for N the total number of entries."""
    arrays = [coalesce_coo(xp, a) for a in arrays]
    first = arrays[0]
    sd = first.sparse_dim()
    sparse_shape = tuple(first.shape[:sd])
    if prod(sparse_shape) > 2**63 - 1:
        raise ValueError(
            f"concat: the sparse dimensions {sparse_shape} have more positions than int64 can number. Concatenate "
            "along a sparse dimension, or convert with to_dense() first."
        )
    keys = [_linearize(xp, a._idx, sparse_shape) for a in arrays]
    union = xp.sort(xp.unique_values(xp.concat(keys)))
    n = union.shape[0]
    out = []
    for a, key in zip(arrays, keys):
        tail = (1,) * (a._vals.ndim - 1)
        fill = xp.asarray(a.fill_value, dtype=a.dtype, device=a.device)
        if a.nnz == 0:
            out.append(xp.broadcast_to(xp.reshape(fill, (1, *tail)), (n, *a._vals.shape[1:])))
            continue
        pos = xp.clip(xp.searchsorted(key, union), 0, a.nnz - 1)
        found = xp.reshape(xp.take(key, pos) == union, (n, *tail))
        out.append(xp.where(found, xp.take(a._vals, pos, axis=0), fill))
    idt = first._idx.dtype
    rows = _unravel(xp, union, sparse_shape, idt)
    indices = xp.stack(rows) if rows else xp.zeros((0, n), dtype=idt, device=first.device)
    return indices, out


# -- strided -------------------------------------------------------------------------------------


@register("permute_dims", (strided,))
def _permute_dims_strided(xp: Any, x: Any, axes: tuple[int, ...]) -> Any:
    """permute_dims(strided) -> strided: the backend's function; a view where the backend makes one."""
    return xp.permute_dims(x, axes)


@register("reshape", (strided,))
def _reshape_strided(xp: Any, x: Any, shape: tuple[int, ...], copy: bool | None) -> Any:
    """reshape(strided) -> strided: the backend's function; a view or O(numel)."""
    return xp.reshape(x, shape, copy=copy)


@register("expand_dims", (strided,))
def _expand_dims_strided(xp: Any, x: Any, axis: int) -> Any:
    """expand_dims(strided) -> strided: the backend's function; a view."""
    return xp.expand_dims(x, axis=axis)


@register("squeeze", (strided,))
def _squeeze_strided(xp: Any, x: Any, axes: tuple[int, ...]) -> Any:
    """squeeze(strided) -> strided: the backend's function (a reshape when no axis goes); a view."""
    return xp.squeeze(x, axis=axes) if axes else x


@register("broadcast_to", (strided,))
def _broadcast_to_strided(xp: Any, x: Any, shape: tuple[int, ...]) -> Any:
    """broadcast_to(strided) -> strided: the backend's function; a view."""
    return xp.broadcast_to(x, shape)


@register("flip", (strided,))
def _flip_strided(xp: Any, x: Any, axes: tuple[int, ...]) -> Any:
    """flip(strided) -> strided: the backend's function; a view or O(numel)."""
    return xp.flip(x, axis=axes) if axes else x


@register("concat", (strided,))
def _concat_strided(xp: Any, arrays: list[Any], axis: int) -> Any:
    """concat(strided, ...) -> strided: the backend's function; O(total numel)."""
    return xp.concat(arrays, axis=axis)


# -- COO -----------------------------------------------------------------------------------------


@register("permute_dims", (sparse_coo,))
def _permute_dims_coo(xp: Any, a: COOArray, axes: tuple[int, ...]) -> COOArray:
    """permute_dims(COO) -> COO: moves index rows and value axes, regrouping dense dims put before sparse ones; O(sparse_dim * nnz)."""
    return permute_coo(xp, a, axes)


@register("reshape", (sparse_coo,))
def _reshape_coo(xp: Any, a: COOArray, shape: tuple[int, ...], copy: bool | None) -> COOArray:
    """reshape(COO) -> COO: linearised indices, values reshaped, regrouping only what the shape needs; O(sparse_dim * nnz)."""
    return reshape_coo(xp, a, shape, copy)


@register("expand_dims", (sparse_coo,))
def _expand_dims_coo(xp: Any, a: COOArray, axis: int) -> COOArray:
    """expand_dims(COO) -> COO: a zero index row (up to sparse_dim, as torch's unsqueeze) or a value axis; O(nnz)."""
    sd = a.sparse_dim()
    shape = (*a.shape[:axis], 1, *a.shape[axis:])
    if axis <= sd:
        zero = xp.zeros((1, a.nnz), dtype=a._idx.dtype, device=a.device)
        idx = xp.concat([a._idx[:axis, :], zero, a._idx[axis:, :]], axis=0)
        return COOArray(idx, a._vals, shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)
    vals = xp.expand_dims(a._vals, axis=axis - sd + 1)
    return COOArray(a._idx, vals, shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)


@register("squeeze", (sparse_coo,))
def _squeeze_coo(xp: Any, a: COOArray, axes: tuple[int, ...]) -> COOArray:
    """squeeze(COO) -> COO: drops index rows (all zero) and value axes of size 1; O(sparse_dim * nnz)."""
    sd = a.sparse_dim()
    keep_rows = [d for d in range(sd) if d not in axes]
    idx = a._idx if len(keep_rows) == sd else xp.take(a._idx, _positions(xp, keep_rows, a._idx), axis=0)
    dense_axes = tuple(d - sd + 1 for d in axes if d >= sd)
    vals = xp.squeeze(a._vals, axis=dense_axes) if dense_axes else a._vals
    shape = tuple(s for d, s in enumerate(a.shape) if d not in axes)
    return COOArray(idx, vals, shape, backend=a._backend, xp=xp, coalesced=a.is_coalesced(), fill_value=a.fill_value)


@register("broadcast_to", (sparse_coo,))
def _broadcast_to_coo(xp: Any, a: COOArray, shape: tuple[int, ...]) -> COOArray:
    """broadcast_to(COO) -> COO: repeats entries along new and size-1 sparse dims, broadcasts the values; O(nnz * repetition)."""
    return broadcast_coo(xp, a, shape)


@register("flip", (sparse_coo,))
def _flip_coo(xp: Any, a: COOArray, axes: tuple[int, ...]) -> COOArray:
    """flip(COO) -> COO: mirrors index rows (reversing the entries when all flip) and flips value axes; O(sparse_dim * nnz)."""
    sd = a.sparse_dim()
    sparse_axes = [d for d in axes if d < sd]
    idx, vals = a._idx, a._vals
    if sparse_axes:
        rows = [a.shape[d] - 1 - idx[d, :] if d in sparse_axes else idx[d, :] for d in range(sd)]
        idx = xp.stack(rows)
    dense_axes = tuple(d - sd + 1 for d in axes if d >= sd)
    if dense_axes:
        vals = xp.flip(vals, axis=dense_axes)
    coalesced = a.is_coalesced()
    if sparse_axes and len(sparse_axes) == sd and coalesced:
        reverse = xp.flip(_arange(xp, a.nnz, idx))
        idx, vals = xp.take(idx, reverse, axis=1), xp.take(vals, reverse, axis=0)
    elif sparse_axes:
        coalesced = False
    return COOArray(idx, vals, a.shape, backend=a._backend, xp=xp, coalesced=coalesced, fill_value=a.fill_value)


def _common_index_dtype(xp: Any, arrays: Sequence[Any], nse: int, shape: tuple[int, ...]) -> Any:
    wide = any(dtype_name(a.index_dtype) == "int64" for a in arrays)
    return _wide_enough(xp, xp.int64 if wide else xp.int32, nse, *shape)


@register("concat", (sparse_coo,))
def _concat_coo(xp: Any, arrays: list[COOArray], axis: int) -> COOArray:
    """concat(COO, ...) -> COO: offsets indices along a sparse dim, O(N); aligns entries on their union along a dense dim, O(N log N)."""
    # operands with fewer sparse dimensions regroup their leading dense ones
    sd = max(a.sparse_dim() for a in arrays)
    arrays = [regroup_coo(xp, a, sd - a.sparse_dim()) for a in arrays]
    first = arrays[0]
    shape = list(first.shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    total = sum(a.nnz for a in arrays)
    idt = _common_index_dtype(xp, arrays, total, tuple(shape))
    if axis < sd:
        parts, offset = [], 0
        for a in arrays:
            idx = xp.astype(a._idx, idt)
            if offset:
                shift = xp.reshape(_positions(xp, [offset if d == axis else 0 for d in range(sd)], idx), (sd, 1))
                idx = idx + xp.astype(shift, idt)
            parts.append(idx)
            offset += a.shape[axis]
        indices = xp.concat(parts, axis=1)
        values = xp.concat([a._vals for a in arrays], axis=0)
        # blocks of entries sorted along the first dimension follow each other in order
        coalesced = axis == 0 and all(a.is_coalesced() for a in arrays)
        return COOArray(indices, values, tuple(shape), backend=first._backend, xp=xp, coalesced=coalesced, fill_value=first.fill_value)
    indices, values = align_coo(xp, arrays)
    out = xp.concat(values, axis=axis - sd + 1)
    return COOArray(xp.astype(indices, idt), out, tuple(shape), backend=first._backend, xp=xp, coalesced=True, fill_value=first.fill_value)


# -- compressed ----------------------------------------------------------------------------------


def _groups_kept(a: CompressedArray, axes: Sequence[int]) -> bool:
    b = a.batch_dim()
    return sorted(axes[:b]) == list(range(b)) and sorted(axes[b : b + 2]) == [b, b + 1]


def _supports_permute_compressed(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> str | None:
    if _groups_kept(a, axes):
        return None
    return (
        f"the permutation {axes} moves a dimension between the batch ({a.batch_dim()}), sparse (2) and dense "
        f"({a.dense_dim()}) dimensions of a {a.layout} array, which the layout cannot hold"
    )


@register("permute_dims", (COMPRESSED,), supports=_supports_permute_compressed)
def _permute_dims_compressed(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> CompressedArray:
    """permute_dims(compressed) -> compressed: batch/dense axes of the components (a copy), the sparse swap as a view; O(batch * nse)."""
    b, nblk = a.batch_dim(), _n_block(a)
    batch_order = list(axes[:b])
    dense_order = [ax - b - 2 for ax in axes[b + 2 :]]
    ci, pi, vals = a._compressed, a._plain, a._vals
    if not _is_identity(batch_order):
        ci = contiguous(a._backend, xp, xp.permute_dims(ci, (*batch_order, b)))
        pi = contiguous(a._backend, xp, xp.permute_dims(pi, (*batch_order, b)))
        vals = xp.permute_dims(vals, (*batch_order, *range(b, vals.ndim)))
    if not _is_identity(dense_order):
        lead = b + 1 + nblk
        vals = xp.permute_dims(vals, (*range(lead), *(lead + j for j in dense_order)))
    if vals is not a._vals:
        vals = contiguous(a._backend, xp, vals)
    shape = (*(a.shape[d] for d in batch_order), *a.shape[b : b + 2], *(a.shape[b + 2 + j] for j in dense_order))
    out = _compressed(a, ci, pi, vals, shape)
    return out.transpose_sparse() if axes[b] == b + 1 else out


@register("permute_dims", (COMPRESSED,), rewrite=True)
def _permute_dims_compressed_through_coo(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> COOArray:
    """permute_dims(compressed) -> COO: the element COO, permuted (and regrouped); O(nnz log nnz)."""
    return permute_coo(xp, compressed_to_coo(xp, a), axes)


def _compressed_split(a: CompressedArray, shape: tuple[int, ...]) -> int | None:
    """Where the two sparse dimensions sit in ``shape`` if a reshape only regroups batch and dense ones."""
    b = a.batch_dim()
    sparse = tuple(a.shape[b : b + 2])
    nbatch, ndense = prod(a.shape[:b]), prod(a.shape[b + 2 :])
    found = [
        p for p in range(len(shape) - 1)
        if tuple(shape[p : p + 2]) == sparse and prod(shape[:p]) == nbatch and prod(shape[p + 2 :]) == ndense
    ]  # fmt: skip
    if not found:
        return None
    # with zero sizes several splits fit; prefer the one keeping the batch rank, then the first
    return b if b in found else found[0]


def _supports_reshape_compressed(xp: Any, a: CompressedArray, shape: tuple[int, ...], copy: bool | None) -> str | None:
    if _compressed_split(a, shape) is not None or copy is False:
        return None
    b = a.batch_dim()
    return (
        f"the new shape {shape} changes the sparse dimensions {tuple(a.shape[b : b + 2])} of a {a.layout} array "
        "(only its batch and dense dimensions reshape in place)"
    )


@register("reshape", (COMPRESSED,), supports=_supports_reshape_compressed)
def _reshape_compressed(xp: Any, a: CompressedArray, shape: tuple[int, ...], copy: bool | None) -> CompressedArray:
    """reshape(compressed) -> compressed within the batch and dense dimensions: reshaped components; a view."""
    p = _compressed_split(a, shape)
    if p is None:
        b = a.batch_dim()
        raise ValueError(
            f"reshape: the new shape changes the sparse dimensions of a {a.layout} array, which needs new indices, so "
            f"it cannot return a view (shape={a.shape}, new shape={shape}, sparse dimensions={tuple(a.shape[b : b + 2])}, "
            "copy=False). Pass copy=None to reshape through COO."
        )
    batch, dense = tuple(shape[:p]), tuple(shape[p + 2 :])
    block = tuple(a._vals.shape[a.batch_dim() + 1 : a.batch_dim() + 1 + _n_block(a)])
    ci = xp.reshape(a._compressed, (*batch, a._compressed.shape[-1]), copy=copy)
    pi = xp.reshape(a._plain, (*batch, a.nnz), copy=copy)
    vals = xp.reshape(a._vals, (*batch, a.nnz, *block, *dense), copy=copy)
    return _compressed(a, ci, pi, vals, shape)


@register("reshape", (COMPRESSED,), rewrite=True)
def _reshape_compressed_through_coo(xp: Any, a: CompressedArray, shape: tuple[int, ...], copy: bool | None) -> COOArray:
    """reshape(compressed) -> COO: the element COO, reshaped; O(nnz log nnz)."""
    return reshape_coo(xp, compressed_to_coo(xp, a), shape, copy)


def _supports_expand_compressed(xp: Any, a: CompressedArray, axis: int) -> str | None:
    if axis != a.batch_dim() + 1:
        return None
    return f"a new dimension at axis={axis} falls between the two sparse dimensions of a {a.layout} array"


@register("expand_dims", (COMPRESSED,), supports=_supports_expand_compressed)
def _expand_dims_compressed(xp: Any, a: CompressedArray, axis: int) -> CompressedArray:
    """expand_dims(compressed) -> compressed: a batch axis of every component or a dense axis of the values; a view."""
    b = a.batch_dim()
    shape = (*a.shape[:axis], 1, *a.shape[axis:])
    if axis <= b:
        ci, pi = xp.expand_dims(a._compressed, axis=axis), xp.expand_dims(a._plain, axis=axis)
        return _compressed(a, ci, pi, xp.expand_dims(a._vals, axis=axis), shape)
    vals = xp.expand_dims(a._vals, axis=axis - 1 + _n_block(a))
    return _compressed(a, a._compressed, a._plain, vals, shape)


@register("expand_dims", (COMPRESSED,), rewrite=True)
def _expand_dims_compressed_through_coo(xp: Any, a: CompressedArray, axis: int) -> COOArray:
    """expand_dims(compressed) -> COO: a zero index row in the element COO; O(nnz log nnz)."""
    return _expand_dims_coo(xp, compressed_to_coo(xp, a), axis)  # type: ignore[no-any-return]


def _supports_squeeze_compressed(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> str | None:
    b = a.batch_dim()
    if b in axes or b + 1 in axes:
        return f"squeezing axes {axes} removes a sparse dimension of a {a.layout} array, which has exactly two"
    return None


@register("squeeze", (COMPRESSED,), supports=_supports_squeeze_compressed)
def _squeeze_compressed(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> CompressedArray:
    """squeeze(compressed) -> compressed: batch axes of every component, dense axes of the values; a view."""
    b = a.batch_dim()
    batch_axes = tuple(d for d in axes if d < b)
    value_axes = (*batch_axes, *(d - 1 + _n_block(a) for d in axes if d >= b + 2))
    ci = xp.squeeze(a._compressed, axis=batch_axes) if batch_axes else a._compressed
    pi = xp.squeeze(a._plain, axis=batch_axes) if batch_axes else a._plain
    vals = xp.squeeze(a._vals, axis=value_axes) if value_axes else a._vals
    shape = tuple(s for d, s in enumerate(a.shape) if d not in axes)
    return _compressed(a, ci, pi, vals, shape)


@register("squeeze", (COMPRESSED,), rewrite=True)
def _squeeze_compressed_through_coo(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> COOArray:
    """squeeze(compressed) -> COO: drops index rows of the element COO; O(nnz log nnz)."""
    return _squeeze_coo(xp, compressed_to_coo(xp, a), axes)  # type: ignore[no-any-return]


def _target_like(a: CompressedArray, shape: tuple[int, ...], index_dtype: Any) -> Target:
    return Target(a.layout, a._backend, a._xp, shape, 2, a.dense_dim(), a.blocksize, index_dtype, a.fill_value)


@register("broadcast_to", (COMPRESSED,))
def _broadcast_to_compressed(xp: Any, a: CompressedArray, shape: tuple[int, ...]) -> CompressedArray:
    """broadcast_to(compressed) -> compressed: copies components along batch/dense dims, O(batch * nse); size-1 sparse dims via block COO."""
    if tuple(shape) == tuple(a.shape):
        return a
    b, nblk = a.batch_dim(), _n_block(a)
    extra = len(shape) - a.ndim
    batch, sparse, dense = shape[: extra + b], tuple(shape[extra + b : extra + b + 2]), shape[extra + b + 2 :]
    if sparse != tuple(a.shape[b : b + 2]):
        c = coalesce_coo(xp, compressed_to_block_coo(xp, a))
        bm, bn = a.blocksize
        grid = (*batch, sparse[0] // bm, sparse[1] // bn, *c.shape[b + 2 : b + 2 + nblk], *dense)
        c = _broadcast_to_coo(xp, c, grid)
        idt = _wide_enough(xp, a.index_dtype, *sparse, c.nnz // max(prod(batch), 1))
        return block_coo_to_compressed(xp, coalesce_coo(xp, c), _target_like(a, shape, idt))
    lead = (1,) * extra
    block = tuple(a._vals.shape[b + 1 : b + 1 + nblk])

    def grow(x: Any, tail: tuple[int, ...]) -> Any:
        x = xp.reshape(x, (*lead, *x.shape))
        return contiguous(a._backend, xp, xp.asarray(xp.broadcast_to(x, (*batch, *tail)), copy=True))

    # the extra dimensions are leading ones, so the dense dimensions keep their number
    vals = grow(a._vals, (a.nnz, *block, *dense))
    ci = grow(a._compressed, (a._compressed.shape[-1],))
    pi = grow(a._plain, (a.nnz,))
    return _compressed(a, ci, pi, vals, tuple(shape))


@register("flip", (COMPRESSED,))
def _flip_compressed(xp: Any, a: CompressedArray, axes: tuple[int, ...]) -> CompressedArray:
    """flip(compressed) -> compressed: flips batch/dense axes, reverses the slices and reorders elements for sparse axes; O(batch * nse)."""
    b, nblk = a.batch_dim(), _n_block(a)
    cd = a.layout.compressed_dim
    batch_axes = tuple(d for d in axes if d < b)
    ci, pi, vals = a._compressed, a._plain, a._vals
    if batch_axes:
        ci, pi, vals = xp.flip(ci, axis=batch_axes), xp.flip(pi, axis=batch_axes), xp.flip(vals, axis=batch_axes)
    flip_major, flip_minor = b + cd in axes, b + 1 - cd in axes
    if flip_major or flip_minor:
        ci, pi, vals = _flip_sparse(xp, a, ci, pi, vals, flip_major, flip_minor)
    value_axes = tuple(d - 1 + nblk for d in axes if d >= b + 2)
    if nblk:
        # a flipped row (column) of the array flips the rows (columns) of every block
        value_axes = (*(d + 1 for d in axes if b <= d < b + 2), *value_axes)
    if value_axes:
        vals = xp.flip(vals, axis=value_axes)
    fix = [contiguous(a._backend, xp, x) for x in (ci, pi, vals)]
    return _compressed(a, fix[0], fix[1], fix[2], a.shape)


def _flip_sparse(
    xp: Any, a: CompressedArray, ci: Any, pi: Any, vals: Any, flip_major: bool, flip_minor: bool
) -> tuple[Any, Any, Any]:
    """Mirror the compressed (major) and/or plain (minor) block index, keeping every slice sorted."""
    b = a.batch_dim()
    batch = tuple(a.shape[:b])
    nb, nse = prod(batch), a.nnz
    n_major = ci.shape[-1] - 1
    n_minor = (a.shape[b + 1 - a.layout.compressed_dim]) // a.blocksize[1 - a.layout.compressed_dim]
    c = xp.astype(xp.reshape(ci, (nb, n_major + 1)), xp.int64)
    counts = c[:, 1:] - c[:, :-1]
    new_counts = xp.flip(counts, axis=1) if flip_major else counts
    zero = xp.zeros((nb, 1), dtype=xp.int64, device=a.device)
    new_c = xp.concat([zero, xp.cumulative_sum(new_counts, axis=1)], axis=1)
    # for every new position: its new slice, the old slice it comes from, its offset there
    q = xp.broadcast_to(_arange(xp, nse, c)[None, :], (nb, nse))
    new_major = expand_compressed(xp, new_c, nse)
    old_major = (n_major - 1 - new_major) if flip_major else new_major
    offset = q - xp.take_along_axis(new_c, new_major, axis=1)
    start = xp.take_along_axis(c, old_major, axis=1)
    if flip_minor:
        offset = xp.take_along_axis(counts, old_major, axis=1) - 1 - offset
    source = xp.reshape(start + offset + _arange(xp, nb, c)[:, None] * nse, (-1,))
    flat_pi = xp.take(xp.reshape(pi, (-1,)), source)
    if flip_minor:
        flat_pi = (n_minor - 1) - flat_pi
    flat_vals = xp.take(xp.reshape(vals, (nb * nse, *vals.shape[b + 1 :])), source, axis=0)
    return (
        xp.reshape(xp.astype(new_c, ci.dtype), ci.shape),
        xp.reshape(xp.astype(flat_pi, pi.dtype), pi.shape),
        xp.reshape(flat_vals, vals.shape),
    )


def _unequal(op: str, layout: Any, counts: Sequence[int], fix: str) -> InvariantError:
    return InvariantError(
        "3.9",
        f"{op}: every batch of a {layout} array must hold the same number of specified elements, and the result would "
        f"hold between {min(counts)} and {max(counts)} (nnz={list(counts)}). {fix}",
    )


def supports_concat_compressed(xp: Any, arrays: list[CompressedArray], axis: int) -> str | None:
    """Why compressed operands cannot be joined as they are: their batch / dense splits differ."""
    splits = sorted({(a.batch_dim(), a.dense_dim()) for a in arrays})
    if len(splits) > 1:
        return (
            f"the operands split their dimensions differently into batch, sparse and dense ones ((batch_dim, dense_dim) in "
            f"{splits}), which one {arrays[0].layout} array cannot hold"
        )
    return None


@register("concat", (COMPRESSED,), supports=supports_concat_compressed)
def _concat_compressed(xp: Any, arrays: list[CompressedArray], axis: int) -> CompressedArray:
    """concat(compressed, ...) -> compressed: components (batch), slices (compressed), merged slices or union (plain, dense); O(N log N)."""
    first = arrays[0]
    b = first.batch_dim()
    shape = list(first.shape)
    shape[axis] = sum(a.shape[axis] for a in arrays)
    result_shape = tuple(shape)
    total = sum(a.nnz for a in arrays)
    idt = _common_index_dtype(xp, arrays, total, result_shape)
    if axis < b:
        counts = [a.nnz for a in arrays]
        if len(set(counts)) > 1:
            raise _unequal("concat", first.layout, counts, "Concatenate COO arrays instead (pass layout=xsparse.sparse_coo).")
        ci = xp.concat([xp.astype(a._compressed, idt) for a in arrays], axis=axis)
        pi = xp.concat([xp.astype(a._plain, idt) for a in arrays], axis=axis)
        vals = xp.concat([a._vals for a in arrays], axis=axis)
        return _compressed(first, ci, pi, contiguous(first._backend, xp, vals), result_shape)
    if axis < b + 2:
        merge = _concat_major if axis - b == first.layout.compressed_dim else _concat_minor
        ci, pi, vals = merge(xp, arrays, axis - b, idt)
        return _compressed(first, ci, pi, contiguous(first._backend, xp, vals), result_shape)
    return _concat_dense(xp, arrays, axis, result_shape, idt)


@register("concat", (COMPRESSED,), rewrite=True)
def _concat_compressed_through_coo(xp: Any, arrays: list[CompressedArray], axis: int) -> COOArray:
    """concat(compressed, ...) -> COO: the element COO of every operand, joined (and regrouped); O(N log N)."""
    return _concat_coo(xp, [compressed_to_coo(xp, a) for a in arrays], axis)  # type: ignore[no-any-return]


def _concat_major(xp: Any, arrays: list[CompressedArray], sparse_axis: int, idt: Any) -> tuple[Any, Any, Any]:
    b = arrays[0].batch_dim()
    parts, offset = [], 0
    for i, a in enumerate(arrays):
        c = xp.astype(a._compressed, idt)
        parts.append((c if i == len(arrays) - 1 else c[..., :-1]) + offset)
        offset += a.nnz
    ci = xp.concat(parts, axis=-1)
    pi = xp.concat([xp.astype(a._plain, idt) for a in arrays], axis=-1)
    return ci, pi, xp.concat([a._vals for a in arrays], axis=b)


def _concat_minor(xp: Any, arrays: list[CompressedArray], sparse_axis: int, idt: Any) -> tuple[Any, Any, Any]:
    """Merge the slices: every slice holds the first operand's elements, then the second's (shifted), ..."""
    first = arrays[0]
    b = first.batch_dim()
    nb = prod(first.shape[:b])
    block = first.blocksize[sparse_axis]
    majors, minors, values, offset = [], [], [], 0
    for a in arrays:
        majors.append(xp.reshape(xp.astype(expand_compressed(xp, a._compressed, a.nnz), xp.int64), (nb, a.nnz)))
        minors.append(xp.reshape(xp.astype(a._plain, idt), (nb, a.nnz)) + offset)
        values.append(xp.reshape(a._vals, (nb, a.nnz, *a._vals.shape[b + 1 :])))
        offset += a.shape[b + sparse_axis] // block
    total = sum(a.nnz for a in arrays)
    order = xp.argsort(xp.concat(majors, axis=1), axis=1, stable=True)
    flat = xp.reshape(order + _arange(xp, nb, order)[:, None] * total, (-1,))
    pi = xp.take(xp.reshape(xp.concat(minors, axis=1), (-1,)), flat)
    vals = xp.take(xp.reshape(xp.concat(values, axis=1), (nb * total, *first._vals.shape[b + 1 :])), flat, axis=0)
    ci = xp.astype(arrays[0]._compressed, idt)
    for a in arrays[1:]:
        ci = ci + xp.astype(a._compressed, idt)
    batch = tuple(first.shape[:b])
    return ci, xp.reshape(pi, (*batch, total)), xp.reshape(vals, (*batch, total, *first._vals.shape[b + 1 :]))


def _concat_dense(xp: Any, arrays: list[CompressedArray], axis: int, shape: tuple[int, ...], idt: Any) -> CompressedArray:
    first = arrays[0]
    b, nblk = first.batch_dim(), _n_block(first)
    blocks = [coalesce_coo(xp, compressed_to_block_coo(xp, a)) for a in arrays]
    indices, values = align_coo(xp, blocks)
    vals = xp.concat(values, axis=axis - b - 1 + nblk)
    n = indices.shape[1]
    batch = tuple(first.shape[:b])
    nb = prod(batch)
    if b and nb and n:
        per = xp.searchsorted(_linearize(xp, indices[:b, :], batch), _arange(xp, nb + 1, indices))
        counts = per[1:] - per[:-1]
        if bool(xp.any(counts != counts[0])):
            raise _unequal(
                "concat", first.layout, [int(c) for c in counts],
                "Concatenate COO arrays instead (pass layout=xsparse.sparse_coo), or give the operands one sparsity structure.",
            )  # fmt: skip
    grid = blocks[0].shape[: b + 2]
    c = COOArray(xp.astype(indices, idt), vals, (*grid, *vals.shape[1:]), backend=first._backend, xp=xp, coalesced=True, fill_value=first.fill_value)
    return block_coo_to_compressed(xp, c, _target_like(first, shape, idt))
