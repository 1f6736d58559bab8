"""Native kernels of the torch backend for the semi-structured (2:4) layout: the CUDA path and ``detach``.

On CPU torch has no semi-structured kernels (its ``SparseSemiStructuredTensor`` needs CUDA), so the
generic kernels compute every product and conversion there; what torch adds is autograd, which
``detach`` cuts.

On CUDA, ``to_sparse_semi_structured`` builds the portable reference encoding with the generic kernel
(which checks the pattern, invariant ``ss.11``: torch's compression does not) and, once, the *packed*
encoding of the same stored matrix: a ``torch.sparse.SparseSemiStructuredTensor`` from
``SparseSemiStructuredTensorCUSPARSELT.from_dense`` (torch's default) or
``SparseSemiStructuredTensorCUTLASS.from_dense``, kept in the array's ``packed`` slot. The products
read it with ``torch.mm`` and ``torch.addmm``, in the two orientations torch's kernels compute, both
with the pattern along the contracted dimension: ``S @ B`` and ``A @ S.t()`` (the ``linear`` case).
Everything else declines with a reason and the generic gather kernel runs: the other two
orientations, an array without ``packed``, operands of two dtypes, autograd, and float32 while torch
keeps float32 products in full precision (the packed float32 kernels compute in TF32).

torch pads the dense operand to its kernels' minimum tile itself (``dense_min_rows``,
``dense_min_cols`` of its constraint table), so any number of activation rows works.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.sparse import (
    SparseSemiStructuredTensor,
    SparseSemiStructuredTensorCUSPARSELT,
    SparseSemiStructuredTensorCUTLASS,
)

from ..._scoped import ignoring_warnings
from ._register import register
from ...formats import COMPRESSED, CompressedArray, COOArray, sparse_coo, sparse_semi_structured, strided
from ...formats._semi_structured import SemiStructuredArray
from ...formats._spec import Target
from ..array_api import semi_structured as generic
from ..array_api.conversion import compressed_to_coo

__all__: list[str] = []

_HOW_TO_PACK = (
    "xs.to_sparse_semi_structured of a CUDA tensor (float16, bfloat16, int8, or float32 where torch has a kernel for it; "
    "fill value 0; not requiring grad) builds one"
)


# -- which of torch's two encodings packs a dtype on a device -------------------------------------------


def _constraints(cls: Any, dtype: torch.dtype) -> Any:
    """torch's shape constraints (``sparse_min_rows``, ``sparse_min_cols``, ...) of ``cls`` for ``dtype``, or None."""
    return getattr(cls, "_DTYPE_SHAPE_CONSTRAINTS", {}).get(dtype)


def _packer(dtype: torch.dtype, device: torch.device) -> tuple[Any, str | None]:
    """The ``SparseSemiStructuredTensor`` subclass that packs ``dtype`` on ``device``, or None and why not.

    cuSPARSELt first: it is torch's default, and the only one of the two whose products run on compute
    capability 9.0 and newer (torch's CUTLASS products check for 8.x). torch's own switch,
    ``SparseSemiStructuredTensor._FORCE_CUTLASS``, is honoured.
    """
    reasons = []
    if getattr(SparseSemiStructuredTensor, "_FORCE_CUTLASS", False):
        reasons.append("cuSPARSELt is off (torch.sparse.SparseSemiStructuredTensor._FORCE_CUTLASS is set)")
    elif not torch.backends.cusparselt.is_available():
        reasons.append("this torch build has no cuSPARSELt")
    elif _constraints(SparseSemiStructuredTensorCUSPARSELT, dtype) is None:
        reasons.append(f"torch's cuSPARSELt path has no {dtype} kernel")
    else:
        return SparseSemiStructuredTensorCUSPARSELT, None
    major, minor = torch.cuda.get_device_capability(device)
    if major != 8:
        reasons.append(f"torch's CUTLASS kernels run on compute capability 8.x only, and {device} is {major}.{minor}")
    elif _constraints(SparseSemiStructuredTensorCUTLASS, dtype) is None:
        reasons.append(f"torch's CUTLASS path has no {dtype} kernel")
    else:
        return SparseSemiStructuredTensorCUTLASS, None
    return None, "; ".join(reasons)


def _pack(dense: torch.Tensor) -> Any:
    """torch's packed encoding of a 2-D CUDA matrix whose pattern the reference encoding has checked."""
    cls, _ = _packer(dense.dtype, dense.device)
    # torch warns on the first SparseSemiStructuredTensor of a process that its API is a prototype:
    # here it is an implementation detail of xsparse's layout, whose own API is not (a filter of that
    # message alone, removed afterwards: catch_warnings() would drop other threads' filters)
    with ignoring_warnings(UserWarning, "The PyTorch API of SparseSemiStructuredTensor"):
        return cls.from_dense(dense.detach().contiguous())


# -- conversions ---------------------------------------------------------------------------------------


def _grad_needed(*tensors: Any) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _pack_reason(values: torch.Tensor, shape: tuple[int, ...], fill_value: Any) -> str | None:
    """Why the packed encoding of a ``shape`` matrix of these values' dtype and device cannot be built, or None."""
    if fill_value != 0:
        return f"torch's semi-structured encoding reads the unspecified elements as 0, and the fill value is {fill_value!r}"
    if _grad_needed(values):
        return (
            "the array requires grad, and torch's packed encoding records no autograd; the reference encoding (through "
            "whose values autograd flows) is built alone. Convert x.detach() to get the packed one"
        )
    if values.device.type != "cuda":
        return f"torch's semi-structured kernels (cuSPARSELt, CUTLASS) need CUDA tensors, and this one is on {values.device}"
    cls, why = _packer(values.dtype, values.device)
    if cls is None:
        return f"no torch semi-structured kernel packs {values.dtype} here: {why}"
    c = _constraints(cls, values.dtype)
    rows, cols = shape
    if rows % c.sparse_min_rows or cols % c.sparse_min_cols:
        return (
            f"{cls.__name__} needs rows and columns that are multiples of ({c.sparse_min_rows}, {c.sparse_min_cols}), "
            f"got shape={shape}"
        )
    return None


def _supports_pack_dense(xp: Any, x: Any, target: Target) -> str | None:
    return _pack_reason(x, tuple(target.shape), target.fill_value)


def _supports_pack_sparse(xp: Any, a: COOArray | CompressedArray, target: Target) -> str | None:
    return _pack_reason(a._vals, tuple(target.shape), a.fill_value)


def _with_packed(xp: Any, ref: SemiStructuredArray, packed: Any) -> SemiStructuredArray:
    return SemiStructuredArray(
        ref._vals, ref._meta, ref.shape, backend=ref._backend, xp=xp, fill_value=ref.fill_value, check=False, packed=packed
    )


@register("convert", (strided, sparse_semi_structured), backend="torch", supports=_supports_pack_dense)
def _convert_strided_semi_structured_torch(xp: Any, x: torch.Tensor, target: Target) -> SemiStructuredArray:
    """to_sparse_semi_structured(strided) on CUDA: the generic encoding, then torch's packed one of x; O(numel)."""
    ref = generic.dense_to_semi_structured(xp, x, target)  # raises ss.11 before anything is packed
    return _with_packed(xp, ref, _pack(x))


@register("convert", (sparse_coo, sparse_semi_structured), backend="torch", supports=_supports_pack_sparse)
def _convert_coo_semi_structured_torch(xp: Any, a: COOArray, target: Target) -> SemiStructuredArray:
    """to_sparse_semi_structured(COO) on CUDA: the generic encoding, then torch's packed one of its dense matrix; O(nnz log nnz + numel)."""
    ref = generic.coo_to_semi_structured(xp, a, target)
    return _with_packed(xp, ref, _pack(generic.semi_structured_to_dense(xp, ref)))


@register("convert", (COMPRESSED, sparse_semi_structured), backend="torch", supports=_supports_pack_sparse)
def _convert_compressed_semi_structured_torch(xp: Any, a: CompressedArray, target: Target) -> SemiStructuredArray:
    """to_sparse_semi_structured(CSR, CSC, BSR, BSC) on CUDA: through COO, then packed as from COO; O(nnz log nnz + numel)."""
    ref = generic.coo_to_semi_structured(xp, compressed_to_coo(xp, a), target)
    return _with_packed(xp, ref, _pack(generic.semi_structured_to_dense(xp, ref)))


# -- products ------------------------------------------------------------------------------------------


def _packed_reason(s: SemiStructuredArray, *, transposed: bool) -> str | None:
    """Why the packed product cannot take ``s`` in this position: no packed encoding, or the wrong orientation."""
    if s.packed is None:
        return f"the semi-structured operand carries no packed encoding (packed=None); {_HOW_TO_PACK}"
    if s.fill_value != 0:
        return f"the packed product reads the unspecified elements as 0, and the fill value is {s.fill_value!r}"
    if s.transposed != transposed:
        product = "S.t() @ B" if s.transposed else "A @ S"
        return (
            f"{product} contracts the dimension along which the 2:4 pattern does not run, which torch's semi-structured "
            "kernels do not compute (they compute S @ B and A @ S.t())"
        )
    return None


def _dense_reason(s: SemiStructuredArray, x: Any, name: str) -> str | None:
    """Why the packed product cannot take the dense operand ``x``: device, dtype, size, precision, autograd."""
    device = s.packed.device
    if not isinstance(x, torch.Tensor) or x.device != device:
        return f"{name} is on {getattr(x, 'device', type(x).__name__)}, and the packed encoding on {device}"
    if x.dtype != s.dtype:
        return f"torch's semi-structured kernels multiply operands of one dtype, got {s.dtype} and {name}.dtype={x.dtype}"
    if x.numel() == 0:
        return f"{name} is empty ({name}.shape={tuple(x.shape)})"
    if s.dtype == torch.int8:
        # until a GPU run shows what torch's int8 epilogue does with sums outside int8 (saturate or
        # wrap), the generic kernel, which wraps, computes them: never a different answer
        return "torch's packed int8 products may saturate where the generic kernel wraps (not yet checked on a GPU)"
    if s.dtype == torch.float32 and torch.get_float32_matmul_precision() == "highest":
        return (
            "torch's packed float32 kernels compute in TF32, and torch.get_float32_matmul_precision() is 'highest'; "
            "torch.set_float32_matmul_precision('high') allows TF32 products"
        )
    if _grad_needed(x, s._vals):
        return "an operand requires grad, and torch's semi-structured products have no backward for it"
    return None


def _supports_first(xp: Any, a: SemiStructuredArray, b: Any) -> str | None:
    return _packed_reason(a, transposed=False) or _dense_reason(a, b, "b")


def _supports_second(xp: Any, a: Any, b: SemiStructuredArray) -> str | None:
    return _packed_reason(b, transposed=True) or _dense_reason(b, a, "a")


def _input_reason(s: SemiStructuredArray, input: Any) -> str | None:
    if not isinstance(input, torch.Tensor) or input.device != s.packed.device:
        return f"input is on {getattr(input, 'device', type(input).__name__)}, and the packed encoding on {s.packed.device}"
    if torch.promote_types(input.dtype, s.dtype) != s.dtype:
        return f"input.dtype={input.dtype} promotes the result beyond the operands' {s.dtype}, which the packed product computes in"
    if _grad_needed(input):
        return "input requires grad, and torch's semi-structured products have no backward"
    return None


def _supports_addmm_first(xp: Any, input: Any, a: SemiStructuredArray, b: Any, beta: Any, alpha: Any) -> str | None:
    return _supports_first(xp, a, b) or _input_reason(a, input) or generic._supports_addmm(xp, input, a, b, beta, alpha)


def _supports_addmm_second(xp: Any, input: Any, a: Any, b: SemiStructuredArray, beta: Any, alpha: Any) -> str | None:
    return _supports_second(xp, a, b) or _input_reason(b, input) or generic._supports_addmm(xp, input, a, b, beta, alpha)


def _stored_times(s: SemiStructuredArray, b: torch.Tensor) -> torch.Tensor:
    """``W @ b`` for the stored matrix ``W`` of ``s`` and a 2-D ``b`` of its dtype, by the packed encoding."""
    packed = s.packed
    if s.dtype == torch.int8:
        # torch's int8 kernels (CUTLASS, and cuSPARSELt, which refuses opB = N for int8) take a
        # column-major dense operand only, which torch passes in the A @ W.t() orientation:
        # W @ b = (b.T @ W.T).T
        return torch.mm(b.t().contiguous(), packed.t()).t()
    # torch's kernels read a row-major or a column-major operand, not any other strides
    return torch.mm(packed, b.contiguous())


def _times_stored_t(a: torch.Tensor, s: SemiStructuredArray) -> torch.Tensor:
    """``a @ W.T`` for the stored matrix ``W`` of ``s`` and an ``a`` of its dtype, ``(..., k)``."""
    lead, k = tuple(a.shape[:-1]), a.shape[-1]
    out = torch.mm(a.reshape(-1, k).contiguous(), s.packed.t())
    return out.reshape(*lead, out.shape[-1])




@register("matmul", (sparse_semi_structured, strided), backend="torch", supports=_supports_first)
def _matmul_semi_structured_strided_torch(xp: Any, a: SemiStructuredArray, b: torch.Tensor) -> torch.Tensor:
    """semi-structured @ strided on CUDA: torch.mm of the packed encoding (cuSPARSELt or CUTLASS); O(nnz * n)."""
    if b.ndim == 1:
        return _stored_times(a, b[:, None])[:, 0]
    if b.ndim == 2:
        return _stored_times(a, b)
    # (*batch, k, n) -> (k, batch * n): one product for every batch
    batch, (k, n) = tuple(b.shape[:-2]), tuple(b.shape[-2:])
    nb = math.prod(batch)
    out = _stored_times(a, b.reshape(nb, k, n).permute(1, 0, 2).reshape(k, nb * n))
    return out.reshape(out.shape[0], nb, n).permute(1, 0, 2).reshape(*batch, out.shape[0], n)


@register("matmul", (strided, sparse_semi_structured), backend="torch", supports=_supports_second)
def _matmul_strided_semi_structured_torch(xp: Any, a: torch.Tensor, b: SemiStructuredArray) -> torch.Tensor:
    """strided @ semi-structured.t() on CUDA (the linear case): torch.mm(a, packed.t()); O(nnz * rows of a)."""
    return _times_stored_t(a, b)


@register("addmm", (strided, sparse_semi_structured, strided), backend="torch", supports=_supports_addmm_first)
def _addmm_strided_semi_structured_strided_torch(xp: Any, input: Any, a: SemiStructuredArray, b: Any, beta: Any, alpha: Any) -> Any:
    """addmm(strided, semi-structured, strided) on CUDA: the packed product, then beta * input + alpha * it; O(nnz * n)."""
    return generic.combine(xp, input, _matmul_semi_structured_strided_torch(xp, a, b), beta, alpha)


@register("addmm", (strided, strided, sparse_semi_structured), backend="torch", supports=_supports_addmm_second)
def _addmm_strided_strided_semi_structured_torch(xp: Any, input: Any, a: Any, b: SemiStructuredArray, beta: Any, alpha: Any) -> Any:
    """addmm(bias, strided, semi-structured.t()) on CUDA, what xs.linear runs: torch.addmm with the packed encoding; O(nnz * m)."""
    out_features = b.shape[1]
    if (
        beta == 1 and alpha == 1 and a.ndim == 2 and b.dtype.is_floating_point
        and input.ndim == 1 and input.shape[0] == out_features and input.dtype == b.dtype
    ):  # fmt: skip
        # torch's semi-structured addmm adds a bias of one element per output feature in the kernel's
        # epilogue, and ignores beta and alpha, hence only for beta == alpha == 1. int8 takes the general
        # path: the epilogue's bias type for int8 differs between cuSPARSELt versions.
        return torch.addmm(input.contiguous(), a.contiguous(), b.packed.t())
    return generic.combine(xp, input, _times_stored_t(a, b), beta, alpha)


# -- detach --------------------------------------------------------------------------------------------


@register("detach", (sparse_semi_structured,), backend="torch")
def _detach_semi_structured_torch(xp: Any, a: SemiStructuredArray) -> SemiStructuredArray:
    """detach(semi-structured) on torch: the values (and the packed encoding) detached from autograd, the metadata shared; O(1)."""
    packed = a.packed
    if isinstance(packed, torch.Tensor):
        packed = packed.detach()
    return SemiStructuredArray(
        a._vals.detach(), a._meta, a.shape, backend=a._backend, xp=xp, transposed=a.transposed,
        fill_value=a.fill_value, check=False, packed=packed,
    )  # fmt: skip
