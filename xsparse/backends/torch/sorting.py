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

from ._register import register
from ...formats import COMPRESSED, COOArray, CompressedArray, SparseArray, sparse_coo, sparse_csc, sparse_csr
from ..array_api.set import Unique, _supports_unique, outputs_of, sorted_unique, unique_compressed, unique_coo
from ..array_api.sorting import ascending_order, lane_sort_reason, sort_by_lane, sorted_values

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
    order = None if outputs in ("counts", "values") else ascending_order(xp, v)
    s = sorted_values(xp, v) if order is None else v[order]
    new = torch.empty(n, dtype=torch.bool, device=v.device)
    new[0] = True
    torch.ne(s[1:], s[:-1], out=new[1:])
    if outputs == "values":
        return s[new], None, None, None
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


def _supports_sort_compressed(xp: Any, a: CompressedArray, axis: int, descending: bool, stable: bool) -> str | None:
    return lane_sort_reason(xp, a, axis, descending, stable, "torch") or _declines_dtype(a._vals)


@register("sort", (sparse_csr,), backend="torch", supports=_supports_sort_compressed)
@register("sort", (sparse_csc,), backend="torch", supports=_supports_sort_compressed)
def _sort_compressed_torch(xp: Any, a: CompressedArray, axis: int, descending: bool, stable: bool) -> SparseArray:
    """sort(CSR, CSC) -> same layout: one sort of the values, a radix regrouping by lane; O(nnz log nnz)."""
    return sort_by_lane(xp, a, axis, descending, _stable_order)