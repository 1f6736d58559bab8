"""Native indexing kernels of the torch backend: torch.sparse's ``index_select`` and ``sparse_mask``, zero-copy."""

from __future__ import annotations

from typing import Any

import torch

from ..._common import scalar_for
from ._register import register
from ...formats import ANY_SPARSE, INDEXED, COOArray, CompressedArray, SparseArray, sparse_coo, sparse_csc, sparse_csr, strided
from ..array_api.indexing import take_plain
from ...formats._spec import Target
from .conversion import _UNSUPPORTED_DTYPES, from_torch, to_torch

__all__: list[str] = []


def _target(a: SparseArray, xp: Any) -> Target:
    return Target(a.layout, a._backend, xp, a.shape, 0, 0, (1, 1), getattr(a, "index_dtype"), a.fill_value)


def _supports_take(xp: Any, a: COOArray, indices: Any, axis: int) -> str | None:
    if a.dtype in _UNSUPPORTED_DTYPES:
        return f"torch.sparse has no kernels for {a.dtype}"
    if a.sparse_dim() == 0:
        return "torch's COO tensors need at least one sparse dimension"
    if torch.is_grad_enabled() and a._vals.requires_grad:
        # its backward runs index_add_, which torch has no sparse kernel for (torch 2.13)
        return "torch's index_select of a sparse tensor has no working backward, and the values require grad"
    return None


@register("take", (sparse_coo,), backend="torch", supports=_supports_take)
def _take_coo_torch(xp: Any, a: COOArray, indices: torch.Tensor, axis: int) -> COOArray:
    """take(COO) through torch.index_select on the sparse tensor; O(nnz + len(indices)) in C++."""
    t = torch.index_select(to_torch(a), axis, indices)
    # _values() is detached, which loses nothing here: values that require grad are declined
    return COOArray(
        t._indices().to(a.index_dtype).contiguous(), t._values().contiguous(), tuple(t.shape), backend=a._backend,
        xp=xp, coalesced=t.is_coalesced(), fill_value=a.fill_value,
    )  # fmt: skip


def _supports_take_plain(xp: Any, a: CompressedArray, indices: Any, axis: int) -> str | None:
    if a.layout.is_blocked or a.batch_dim():
        return "it takes along the plain dimension of one CSR or CSC matrix; the generic kernel takes the rest"
    if axis != 1 - a.layout.compressed_dim:
        return "along the compressed (or a dense) dimension the generic kernel gathers whole slices or values"
    if a.shape[axis] > max(8 * (a.nnz + int(indices.shape[0])), 1 << 22):
        return "a count per plain index would outweigh the entries; the generic kernel searches the picks instead"
    return None


@register("take", (frozenset({sparse_csr, sparse_csc}),), backend="torch", supports=_supports_take_plain)
def _take_unblocked_torch(xp: Any, a: CompressedArray, indices: torch.Tensor, axis: int) -> CompressedArray:
    """take(CSR/CSC) along the plain dim (A[:, cols]): picks counted by bincount, copies built on the pointers; O(nnz + result)."""
    plain = a._plain

    def counted(order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        count = torch.bincount(indices, minlength=a.shape[axis])
        copies = count[plain]
        kept = torch.nonzero(copies).flatten()
        first = torch.cumsum(count, 0) - count
        return kept, first[plain[kept]], copies[kept]

    return take_plain(xp, a, indices, counted)


def _supports_sparse_mask(xp: Any, x: torch.Tensor, mask: SparseArray) -> str | None:
    if x.dtype in _UNSUPPORTED_DTYPES:
        return f"torch.sparse has no kernels for {x.dtype}"
    if not mask.is_coalesced():
        return "torch's sparse_mask repeats x's value for every duplicate of an uncoalesced mask"
    if isinstance(mask, COOArray) and mask.sparse_dim() == 0:
        return "torch's COO tensors need at least one sparse dimension"
    if isinstance(mask, CompressedArray) and torch.is_grad_enabled() and x.requires_grad:
        # its backward asks a compressed tensor is_coalesced(), a COO-only query, and raises (torch 2.13)
        return "torch's sparse_mask with a compressed mask has no working backward, and x requires grad"
    return None


@register("sparse_mask", (strided, INDEXED), backend="torch", supports=_supports_sparse_mask)
def _sparse_mask_strided_indexed_torch(xp: Any, x: torch.Tensor, mask: SparseArray) -> SparseArray:
    """sparse_mask(strided, sparse) through torch's Tensor.sparse_mask; O(nnz * block * dense size) in C++."""
    if mask.dtype != x.dtype:
        # torch casts the mask's (ignored) values to x's dtype, and warns when that drops an imaginary part
        mask = mask._with_values(torch.zeros_like(mask._vals, dtype=x.dtype), scalar_for(xp, x.dtype, 0))
    t = x.sparse_mask(to_torch(mask))
    out = from_torch(t, _target(mask, xp), scalar_for(xp, x.dtype, 0))
    if isinstance(out, CompressedArray):
        # a compressed tensor's values() aliases the tensor, and views of it (torch.real, ...) then fail
        # ("Sparse CSR tensors do not have strides"); a copy is a plain tensor, and keeps autograd
        out = out._with_values(out._vals.clone(), out.fill_value)
    return out


# -- clone ---------------------------------------------------------------------------------------------
# The generic clone copies with xp.asarray(x, copy=True), which torch 2.13 warns about for a tensor that
# requires grad ("unspecified requires_grad now defaults to obj.requires_grad"); Tensor.clone copies
# with the autograd history torch's own clone keeps.


@register("clone", (strided,), backend="torch")
def _clone_strided_torch(xp: Any, x: torch.Tensor) -> torch.Tensor:
    """clone(strided) on torch: Tensor.clone (autograd kept); O(numel)."""
    return x.clone()


@register("clone", (ANY_SPARSE,), backend="torch")
def _clone_sparse_torch(xp: Any, a: SparseArray) -> SparseArray:
    """clone(sparse) on torch: Tensor.clone of every component, metadata kept (the values' autograd kept); O(nnz)."""
    return a._map_components(lambda comp: comp.clone(), a._backend, xp)
