"""Native elementwise kernels of the torch backend.

- ``erf`` and ``erfinv``, which the Array API lacks, from ``torch.special``.
- torch.sparse's own ``add`` and ``mul`` where torch computes the exact result: operands of one shape
  (torch drops data when it broadcasts a size-1 dimension of a sparse operand: pytorch/pytorch#188900,
  #158861, #116633), fill value 0, and for products only finite values (torch evaluates a product on
  the intersection of the entries, so that ``inf`` times an unspecified 0 gives 0 instead of NaN), and
  no uint16, uint32 or uint64 operand (torch's sparse kernels compute none of them, and torch promotes
  them with no other dtype). Each kernel declines anything else with its reason, and the generic kernels
  compute it.

Unary functions have no native kernel here: the generic kernel already calls torch on the values, which
is what torch's own sparse unary functions do.
"""

from __future__ import annotations

from typing import Any, cast

import torch

from ...dispatch import register
from ...formats import COOArray, CompressedArray, SparseArray, sparse_coo, sparse_csr, strided
from ...formats._spec import Target
from ..array_api.conversion import is_plus_zero
from ..array_api.elementwise import python_scalar
from .conversion import from_torch, to_torch

__all__: list[str] = []

_FLOATING = frozenset({torch.float32, torch.float64, torch.complex64, torch.complex128})
# torch stores these but its sparse kernels (mul_out_sparse, add_dense_sparse_non_hybrid,
# add_out_op2_sparse_csr, index_select under CSR * dense) have none, and it promotes them with no other
# dtype ("Promotion for uint16, uint32, uint64 types is not supported"); every other pair of dtypes
# torch promotes as the standard does where the standard says. The generic kernels compute these.
_STORED_ONLY = frozenset({torch.uint16, torch.uint32, torch.uint64})


@register("erf", (strided,), backend="torch")
def _erf_strided_torch(xp: Any, x: torch.Tensor) -> torch.Tensor:
    """erf(strided) through torch.special.erf; O(numel)."""
    return cast(torch.Tensor, torch.special.erf(x))


@register("erfinv", (strided,), backend="torch")
def _erfinv_strided_torch(xp: Any, x: torch.Tensor) -> torch.Tensor:
    """erfinv(strided) through torch.special.erfinv; O(numel)."""
    return cast(torch.Tensor, torch.special.erfinv(x))


def _finite(t: torch.Tensor) -> bool:
    """Whether every element is finite: their sum is (inf and NaN propagate; an overflowing sum only
    sends the call to the generic kernel). One read of ``t``, several times faster than isfinite().all()."""
    if not (t.is_floating_point() or t.is_complex()):
        return True
    return bool(torch.isfinite(t.sum()))


def _same_structure_reason(a: SparseArray, other: Any) -> str | None:
    """Why torch's sparse add and mul cannot compute ``a`` with ``other``: shapes, fill values, dtypes."""
    for operand in (a, other):
        if operand.dtype in _STORED_ONLY:
            return f"torch's sparse add and mul have no kernel for {operand.dtype} and promote it with no other dtype"
    if tuple(a.shape) != tuple(other.shape):
        return "torch's sparse add and mul do not broadcast correctly (pytorch/pytorch#188900, #158861, #116633)"
    if not is_plus_zero(a.fill_value) or (isinstance(other, SparseArray) and not is_plus_zero(other.fill_value)):
        return "torch's sparse tensors have fill value +0"
    return None


def _product_reason(a: SparseArray, other: Any) -> str | None:
    reason = _same_structure_reason(a, other)
    if reason is not None:
        return reason
    if a.dtype == torch.bool or other.dtype == torch.bool:
        return "torch has no sparse mul for bool"
    others = [a._vals] + ([other._vals] if isinstance(other, SparseArray) else [other])
    if not all(_finite(t) for t in others):
        return "torch's sparse mul gives 0 where a non-finite value meets an unspecified element (IEEE 754 gives NaN)"
    return None


def _result(t: torch.Tensor, like: SparseArray, xp: Any) -> SparseArray:
    """The xsparse array of torch's sparse result ``t``, in ``like``'s index dtype, fill value 0."""
    index_dtype = cast("COOArray | CompressedArray", like).index_dtype
    target = Target(
        like.layout, like._backend, xp, tuple(t.shape), like.sparse_dim(), like.dense_dim(), (1, 1), index_dtype, 0
    )
    return from_torch(t, target, python_scalar(xp, xp.zeros((), dtype=t.dtype)))


def _supports_coo_coo_mul(xp: Any, x: COOArray, y: COOArray) -> str | None:
    if x.sparse_dim() != y.sparse_dim():
        return "torch multiplies COO tensors with the same sparse_dim only"
    if x.sparse_dim() == 0:
        # a 0-d product with an operand without entries reads uninitialised memory (torch 2.13)
        return "torch's mul of COO tensors without sparse dimensions can give garbage where one has no entry"
    return _product_reason(x, y)


@register("multiply", (sparse_coo, sparse_coo), backend="torch", supports=_supports_coo_coo_mul)
def _multiply_coo_coo_torch(xp: Any, x: COOArray, y: COOArray) -> SparseArray:
    """multiply(COO, COO), one shape, fill 0, finite values: torch's intersection mul; O(nnz log nnz)."""
    return _result(to_torch(x) * to_torch(y), x, xp)


def _plain_csr_reason(*arrays: Any) -> str | None:
    for a in arrays:
        if isinstance(a, CompressedArray) and (a.ndim != 2 or a.dense_dim()):
            return "torch's CSR add and mul handle 2-D arrays without dense dimensions only"
    return None


def _supports_csr_csr_mul(xp: Any, x: CompressedArray, y: CompressedArray) -> str | None:
    return _plain_csr_reason(x, y) or _product_reason(x, y)


@register("multiply", (sparse_csr, sparse_csr), backend="torch", supports=_supports_csr_csr_mul)
def _multiply_csr_csr_torch(xp: Any, x: CompressedArray, y: CompressedArray) -> SparseArray:
    """multiply(CSR, CSR), 2-D, one shape, fill 0, finite values: torch's intersection mul; O(nnz)."""
    return _result(to_torch(x) * to_torch(y), x, xp)


def _supports_csr_csr_add(xp: Any, x: CompressedArray, y: CompressedArray) -> str | None:
    reason = _plain_csr_reason(x, y) or _same_structure_reason(x, y)
    if reason is None and (x.dtype != y.dtype or x.dtype not in _FLOATING):
        return "torch adds CSR tensors of one floating or complex dtype only (MKL)"
    return reason


@register("add", (sparse_csr, sparse_csr), backend="torch", supports=_supports_csr_csr_add)
def _add_csr_csr_torch(xp: Any, x: CompressedArray, y: CompressedArray) -> SparseArray:
    """add(CSR, CSR), 2-D, one shape, fill 0, one floating dtype: torch's (MKL) CSR add; O(nnz)."""
    return _result(to_torch(x) + to_torch(y), x, xp)


def _supports_mul_dense(xp: Any, x: Any, y: Any) -> str | None:
    a, d = (x, y) if isinstance(x, SparseArray) else (y, x)
    if a.layout is sparse_csr and a.dtype == torch.bool:
        return "torch has no CSR mul for bool"
    return _plain_csr_reason(a) or _product_reason(a, d)


@register("multiply", (sparse_coo, strided), backend="torch", supports=_supports_mul_dense)
@register("multiply", (strided, sparse_coo), backend="torch", supports=_supports_mul_dense)
@register("multiply", (sparse_csr, strided), backend="torch", supports=_supports_mul_dense)
@register("multiply", (strided, sparse_csr), backend="torch", supports=_supports_mul_dense)
def _multiply_sparse_strided_torch(xp: Any, x: Any, y: Any) -> SparseArray:
    """multiply(COO or CSR, strided) either way round, one shape, fill 0, finite: torch's sparse mul; O(nnz)."""
    a = x if isinstance(x, SparseArray) else y
    t = to_torch(x) * y if isinstance(x, SparseArray) else x * to_torch(y)
    return _result(t, a, xp)


def _supports_add_dense(xp: Any, x: Any, y: Any) -> str | None:
    a, d = (x, y) if isinstance(x, SparseArray) else (y, x)
    return _plain_csr_reason(a) or _same_structure_reason(a, d)


def _supports_subtract_dense(xp: Any, x: Any, y: Any) -> str | None:
    if x.dtype == torch.bool or y.dtype == torch.bool:
        return "torch has no subtraction of booleans (the generic kernel raises torch's own error)"
    return _supports_add_dense(xp, x, y)


@register("add", (strided, sparse_coo), backend="torch", supports=_supports_add_dense)
@register("add", (sparse_coo, strided), backend="torch", supports=_supports_add_dense)
@register("add", (strided, sparse_csr), backend="torch", supports=_supports_add_dense)
@register("add", (sparse_csr, strided), backend="torch", supports=_supports_add_dense)
def _add_sparse_strided_torch(xp: Any, x: Any, y: Any) -> torch.Tensor:
    """add(COO or CSR, strided) either way round, one shape, fill 0: torch's dense + sparse; O(numel + nnz)."""
    d, a = (x, y) if isinstance(y, SparseArray) else (y, x)
    return torch.add(d, to_torch(a))


@register("subtract", (strided, sparse_coo), backend="torch", supports=_supports_subtract_dense)
@register("subtract", (sparse_coo, strided), backend="torch", supports=_supports_subtract_dense)
@register("subtract", (strided, sparse_csr), backend="torch", supports=_supports_subtract_dense)
@register("subtract", (sparse_csr, strided), backend="torch", supports=_supports_subtract_dense)
def _subtract_sparse_strided_torch(xp: Any, x: Any, y: Any) -> torch.Tensor:
    """subtract(COO or CSR, strided) either way round, one shape, fill 0: torch's dense + sparse; O(numel + nnz)."""
    if isinstance(y, SparseArray):
        return torch.add(x, to_torch(y), alpha=-1)
    # torch has no sparse - dense: -(d - s) is the same number (negation is exact, and comes after the
    # type promotion, which negating d first would not: -uint8 wraps around)
    return torch.add(y, to_torch(x), alpha=-1).neg_()
