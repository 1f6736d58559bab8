"""Native sorting kernels of the torch backend: ``sort`` of CSR and CSC arrays, ``unique`` of COO and
compressed arrays.

Every result is the generic kernel's, bit for bit; the values are sorted as the generic kernels sort
them (``ascending_order``, ``sorted_values``: a default sort, the runs of zeros and NaNs put back in
index order), and what the generic kernels compute with further sorts comes from torch's O(n) tools:

- ``unique``: the inverse indices are scattered through the permutation (the generic kernel argsorts
  it) and each group's first index is the least index among its members (``scatter_reduce``; the
  generic kernel sorts once more for a stable order).
- ``sort`` of CSR and CSC arrays along a sparse dimension: the lanes are regrouped by a stable sort of
  their 16-bit ids (torch's radix sort, several times faster than the generic kernel's sort of 64-bit
  keys) and the result is built in the compressed layout directly, where the generic kernel goes
  through the element COO; along the plain dimension the compressed indices stay as they are.

Unsigned dtypes other than uint8 (which torch sorts on few devices) and complex values keep the generic
kernels.
"""

from __future__ import annotations

from typing import Any

import torch

from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, SparseArray, sparse_coo, sparse_csc, sparse_csr
from ...formats._ops import prod
from ..array_api.set import Unique, _supports_unique, outputs_of, sorted_unique, unique_compressed, unique_coo
from ..array_api.sorting import ascending_order, lane_sort_reason, sorted_values

__all__: list[str] = []

_INT64_MAX = 2**63 - 1
_INT16_KEYS = 1 << 15
_GENERIC_DTYPES = (torch.uint16, torch.uint32, torch.uint64, torch.complex64, torch.complex128)


def _declines_dtype(values: torch.Tensor) -> str | None:
    if values.dtype in _GENERIC_DTYPES:
        return f"values of dtype {values.dtype} are ordered through the generic kernel's conversions"
    return None


# -- unique ------------------------------------------------------------------------------------------


def _sorted_unique(xp: Any, v: torch.Tensor, outputs: str) -> tuple[Any, Any, Any, Any]:
    """``set.sorted_unique`` of the 1-D real ``v``, bit for bit, from one sort; O(n log n)."""
    n = int(v.shape[0])
    if n == 0:
        return sorted_unique(xp, v, outputs)
    order = None if outputs == "counts" else ascending_order(xp, v)
    s = sorted_values(xp, v) if order is None else v[order]
    new = torch.empty(n, dtype=torch.bool, device=v.device)
    new[0] = True
    torch.ne(s[1:], s[:-1], out=new[1:])
    starts = torch.nonzero(new).reshape(-1)
    counts = torch.diff(starts, append=torch.tensor([n], dtype=starts.dtype, device=v.device))
    first = inverse = None
    if order is not None:
        group = torch.cumsum(new, 0, dtype=torch.int64) - 1
        if outputs == "all":
            # each group's members are together in order: the least index is its first occurrence
            first = torch.full_like(starts, n).scatter_reduce_(0, group, order, "amin")
        # the inverse of a permutation is a scatter, not a sort
        inverse = torch.empty_like(group).scatter_(0, order, group)
    return s[starts], first, inverse, counts


def _supports_unique_torch(xp: Any, a: SparseArray, ravel_positions: bool | str) -> str | None:
    return _declines_dtype(a._vals) or _supports_unique(xp, a, ravel_positions)


@register("unique", (sparse_coo,), backend="torch", supports=_supports_unique_torch)
def _unique_coo_torch(xp: Any, a: COOArray, ravel_positions: bool | str) -> Unique:
    """unique_all(COO) -> strided values/indices/counts, COO inverse: one sort, O(n) outputs; O(nnz log nnz)."""
    return unique_coo(xp, a, outputs_of(ravel_positions), _sorted_unique)


@register("unique", (COMPRESSED,), backend="torch", supports=_supports_unique_torch)
def _unique_compressed_torch(xp: Any, a: CompressedArray, ravel_positions: bool | str) -> Unique:
    """unique_all(compressed) -> strided values/indices/counts, inverse in a's layout; O(nnz log nnz)."""
    return unique_compressed(xp, a, outputs_of(ravel_positions), _sorted_unique)


# -- sort --------------------------------------------------------------------------------------------


def _stable_order(key: torch.Tensor, nkeys: int) -> torch.Tensor:
    """The stable argsort of the int64 ``key`` (values in ``[0, nkeys)``); a radix sort for 16-bit keys."""
    n = int(key.shape[0])
    if nkeys <= _INT16_KEYS:
        return torch.sort(key.to(torch.int16), stable=True).indices
    if nkeys * max(n, 1) <= _INT64_MAX:
        return torch.sort(key * n + torch.arange(n, dtype=torch.int64, device=key.device)).values % n
    return torch.sort(key, stable=True).indices


def _by_lane(xp: Any, vals: torch.Tensor, lane: torch.Tensor, nlanes: int) -> torch.Tensor:
    """The permutation that sorts ``vals`` within each lane, lanes in ascending order: the generic
    kernels' order wherever bits can tell (``ascending_order``), regrouped stably by lane."""
    order: torch.Tensor = ascending_order(xp, vals)
    return order[_stable_order(lane[order], nlanes)]


def _supports_sort_compressed(xp: Any, a: CompressedArray, axis: int, descending: bool, stable: bool) -> str | None:
    return lane_sort_reason(xp, a, axis, descending, stable, "torch") or _declines_dtype(a._vals)


@register("sort", (sparse_csr,), backend="torch", supports=_supports_sort_compressed)
@register("sort", (sparse_csc,), backend="torch", supports=_supports_sort_compressed)
def _sort_compressed_torch(xp: Any, a: CompressedArray, axis: int, descending: bool, stable: bool) -> SparseArray:
    """sort(CSR, CSC) -> same layout: one sort of the values, a radix regrouping by lane; O(nnz log nnz)."""
    nb = a.batch_dim()
    batches = prod(tuple(a.shape[:nb]))
    nse = a.nnz
    total = batches * nse
    if total == 0:
        return a
    dev = a._vals.device
    comp = a._compressed.reshape(batches, -1).to(torch.int64)
    plain = a._plain
    vals = a._vals.reshape(total)
    ncomp = int(comp.shape[1]) - 1
    compressed_axis = nb + a.layout.compressed_dim
    nplain = a.shape[nb + 1 - a.layout.compressed_dim]
    n = a.shape[axis]
    slots = torch.arange(total, dtype=torch.int64, device=dev)
    fill = a.fill_value
    if axis != compressed_axis:
        # each compressed slice is a lane, stored contiguously: the structure stays
        counts = torch.diff(comp, dim=1).reshape(-1)
        lane = torch.repeat_interleave(torch.arange(batches * ncomp, dtype=torch.int64, device=dev), counts, output_size=total)
        order = _by_lane(xp, vals, lane, batches * ncomp)
        svals = vals[order]
        start = (comp[:, :-1] + (torch.arange(batches, dtype=torch.int64, device=dev) * nse)[:, None]).reshape(-1)[lane]
        count = counts[lane]
        rank = slots - start
        position = torch.where(svals < fill, rank, n - count + rank)
        if descending:
            reverse = start + count - 1 - rank
            svals, position = svals[reverse], (n - 1) - position[reverse]
        new_plain = position.to(plain.dtype).reshape(plain.shape)
        return CompressedArray(
            a._compressed, new_plain, svals.reshape(a._vals.shape), a.shape, layout=a.layout,
            backend=a._backend, xp=xp, fill_value=fill,
        )  # fmt: skip
    # along the compressed dimension a lane is one plain index of one batch
    batch_of = torch.arange(batches, dtype=torch.int64, device=dev).repeat_interleave(nse)
    lane = batch_of * nplain + plain.reshape(total).to(torch.int64)
    order = _by_lane(xp, vals, lane, batches * nplain)
    svals = vals[order]
    lane_sorted = lane[order]
    lane_counts = torch.bincount(lane, minlength=batches * nplain)
    lane_starts = torch.cumsum(lane_counts, 0) - lane_counts
    start, count = lane_starts[lane_sorted], lane_counts[lane_sorted]
    rank = slots - start
    position = torch.where(svals < fill, rank, n - count + rank)
    if descending:
        position = (n - 1) - position
    # compress again: a stable sort by (batch, new compressed index) keeps each one's plain indices ascending
    key = torch.div(lane_sorted, nplain, rounding_mode="floor") * ncomp + position
    perm = _stable_order(key, batches * ncomp)
    new_plain = (lane_sorted[perm] % nplain).to(plain.dtype).reshape(plain.shape)
    per_slice = torch.bincount(key, minlength=batches * ncomp).reshape(batches, ncomp)
    new_comp = torch.cat([torch.zeros((batches, 1), dtype=torch.int64, device=dev), torch.cumsum(per_slice, 1)], 1)
    return CompressedArray(
        new_comp.to(a._compressed.dtype).reshape(a._compressed.shape), new_plain,
        svals[perm].reshape(a._vals.shape), a.shape, layout=a.layout, backend=a._backend, xp=xp, fill_value=fill,
    )  # fmt: skip
