"""Native linear-algebra kernels of the torch backend: torch.sparse's products, zero-copy.

Each kernel wraps the operands' components in a torch sparse tensor (:func:`to_torch`, no copy), calls
torch's kernel (MKL on CPU, cuSPARSE on CUDA) and unwraps the result; torch's gaps are declined with a
reason and the generic kernels take over. Autograd flows through the values: torch differentiates its
COO, CSR and CSC products itself; where it has no backward (BSR and BSC products) the kernel runs
through :class:`_SparseProduct`, an ``autograd.Function`` whose backward computes the strided
operand's gradient with another product (through dispatch) and the values' gradient by sampling the
dense gradient at the sparse operand's elements (SDDMM), shaped like the values.

torch has no batched compressed product: a batch of compressed matrices is folded into one
block-diagonal matrix (each batch's indices offset), multiplied once, and unfolded.

On CUDA tensors torch's coverage is narrower than on the CPU, and a missing CUDA kernel raises inside
torch; so each gap is declined before torch is called (reading the device, never the data), and the
generic kernel runs on the device: integer operands (cuSPARSE computes floating and complex values
only), complex COO bmm, blocks that are not square or are 1 x 1 (cuSPARSE bsrmm/bsrmv), BSC @ strided
and strided @ BSR, ``sparse.mm(reduce=)`` (a CPU kernel only), ``smm`` and ``sspaddmm`` (not
implemented on CUDA), and SciPy's solver and the compiled SpGEMM and SpMM (host memory).
"""

from __future__ import annotations

import cmath
import contextlib
import math
from collections.abc import Iterator
from typing import Any, cast

import torch

from ... import dispatch
from ._register import register
from ...formats import (
    COMPRESSED,
    INDEXED,
    COOArray,
    CompressedArray,
    Layout,
    SparseArray,
    sparse_bsc,
    sparse_bsr,
    sparse_coo,
    sparse_csc,
    sparse_csr,
    strided,
)
from ...formats._spec import Target
from ..array_api import linalg as generic
from .conversion import _TORCH_LAYOUT, _plain_values, fold, from_torch, kept_tensor, on_cuda, packed, to_torch, verified

__all__: list[str] = []

_FLOATING = (torch.float32, torch.float64, torch.complex64, torch.complex128)
_REAL_FLOATING = (torch.float32, torch.float64)
_HALF = (torch.float16, torch.bfloat16)
_NO_KERNELS = (torch.bool, torch.uint16, torch.uint32, torch.uint64)
_INT32_MAX = 2**31 - 1


# -- reasons to decline -----------------------------------------------------------------------------


def _sparse_reason(a: SparseArray) -> str | None:
    if a.fill_value != 0:
        return f"torch's products read the unspecified elements as 0, and the fill value is {a.fill_value!r}"
    if a.dense_dim():
        return "torch multiplies sparse matrices without dense dimensions only"
    if a.dtype in _NO_KERNELS:
        return f"torch.sparse has no product kernels for {a.dtype}"
    if a.layout.is_compressed and a.dtype not in _FLOATING:
        return f"torch's compressed products (MKL on CPU, cuSPARSE on CUDA) have no {a.dtype} kernel"
    if on_cuda(a):
        return _cuda_reason(a)
    if a.layout.is_blocked and len(set(cast(CompressedArray, a).blocksize)) > 1:
        return f"torch's CPU (MKL) block products need square blocks, got blocksize={cast(CompressedArray, a).blocksize}"
    return None


def _cuda_reason(a: SparseArray) -> str | None:
    """Why torch's CUDA products cannot multiply the CUDA operand ``a`` (PyTorch's sources named)."""
    if a.dtype not in _FLOATING:
        # SparseCUDATensorMath.cu: the COO SpMM (addmm_sparse_cuda, which mv, hspmm and addmm run)
        # dispatches on float32, float64, complex64 and complex128 only
        return f"torch's CUDA sparse products (cuSPARSE) have no {a.dtype} kernel"
    if a.layout.is_blocked:
        # SparseBlasImpl.cpp: block_sparse_mm and block_sparse_mv (cuSPARSE bsrmm, bsrmv) assert
        # square blocks larger than 1 x 1
        bm, bn = cast(CompressedArray, a).blocksize
        if bm != bn or bm == 1:
            return f"torch's CUDA block products (cuSPARSE bsrmm) need square blocks larger than 1 x 1, got blocksize={(bm, bn)}"
    return None


def _dtype_reason(*arrays: Any) -> str | None:
    dtypes = {x.dtype for x in arrays}
    if len(dtypes) > 1:
        return f"torch multiplies operands of one dtype, got {', '.join(sorted(str(d) for d in dtypes))}"
    return None


def _cpu(a: SparseArray) -> bool:
    return bool(a._vals.device.type == "cpu")


def _grad_needed(*tensors: Any) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)


def _scalar_reason(dtype: Any, **scalars: Any) -> str | None:
    if dtype.is_floating_point or dtype.is_complex:
        return None
    for name, value in scalars.items():
        if not isinstance(value, int):
            return f"torch needs an integer {name} for integer operands, got {value!r}"
    return None


# -- helpers -----------------------------------------------------------------------------------------


def _widened(t: torch.Tensor) -> torch.Tensor:
    """A half-precision tensor (sparse or strided) as float32, others as they are. torch's COO products
    add in the values' dtype, one element after another: a float16 running sum of ones stops at 2048
    (bfloat16's at 256), where its dense and CSR products add in float32. The COO kernels multiply
    half-precision operands in float32 and round the result once, as those do."""
    return t.to(torch.float32) if t.dtype in _HALF else t


def _widened_kept(a: SparseArray) -> torch.Tensor:
    """``_widened(kept_tensor(a))``. Half-precision values that carry autograd history are widened before the
    sparse tensor is built: torch has no backward for the cast of a COO tensor (it ends in "to(options)
    doesn't support converting to a different layout")."""
    if a.dtype in _HALF and a._vals.requires_grad:
        return to_torch(a, packed(a._vals).to(torch.float32))
    return _widened(kept_tensor(a))


def _narrowed(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A product computed by :func:`_widened` operands, in the operands' ``dtype`` again."""
    return t if t.dtype == dtype else t.to(dtype)


def _tensor(compressed: torch.Tensor, plain: torch.Tensor, values: torch.Tensor, shape: tuple[int, ...], layout: Layout) -> torch.Tensor:
    return torch.sparse_compressed_tensor(
        compressed, plain, packed(values), shape, layout=_TORCH_LAYOUT[layout], check_invariants=False
    )


def _fold(a: CompressedArray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[int, int]]:
    """The components of the block-diagonal 2-D matrix of a batched compressed array, and its shape."""
    nbd = a.batch_dim()
    batch = tuple(a.shape[:nbd])
    nb, nse = math.prod(batch), a.nnz
    m, k = a.shape[nbd], a.shape[nbd + 1]
    bm, bn = a.blocksize
    n_plain = (k // bn) if a.layout.compressed_dim == 0 else (m // bm)
    idt = a._compressed.dtype
    if nb * max(nse, m, k) > _INT32_MAX:
        idt = torch.int64
    comp = a._compressed.reshape(nb, a._compressed.shape[-1]).to(idt)
    lin = torch.arange(nb, dtype=idt, device=comp.device)[:, None]
    compressed = torch.cat([(comp[:, :-1] + lin * nse).reshape(-1), torch.tensor([nb * nse], dtype=idt, device=comp.device)])
    plain = (a._plain.reshape(nb, nse).to(idt) + lin * n_plain).reshape(-1)
    values = a._vals.reshape(nb * nse, *a._vals.shape[nbd + 1 :])
    return compressed, plain, values, (nb * m, nb * k)


def _conj(x: torch.Tensor) -> torch.Tensor:
    return x.conj() if x.is_complex() else x


class _SparseProduct(torch.autograd.Function):
    """``sparse @ dense`` (``sparse_left``) or ``dense @ sparse`` for a 2-D compressed sparse operand given
    by its components, with the backward torch lacks for BSR and BSC:

    * the dense operand's gradient is another product with the sparse operand's conjugate transpose,
      computed through dispatch (so by whichever kernel handles that layout);
    * the values' gradient is the dense gradient product sampled at the sparse elements (SDDMM),
      ``G @ D^H`` for ``S @ D`` and ``D^H @ G`` for ``D @ S``.
    """

    @staticmethod
    def forward(
        ctx: Any,
        values: torch.Tensor,
        dense: torch.Tensor,
        compressed: torch.Tensor,
        plain: torch.Tensor,
        shape: tuple[int, int],
        layout: Layout,
        sparse_left: bool,
    ) -> torch.Tensor:
        t = _tensor(compressed, plain, values, shape, layout)
        out = torch.mm(t, dense) if sparse_left else torch.mm(dense, t)
        ctx.save_for_backward(values, dense, compressed, plain)
        ctx.shape, ctx.layout, ctx.sparse_left = shape, layout, sparse_left
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        from ... import backends

        values, dense, compressed, plain = ctx.saved_tensors
        backend = backends.get_backend("torch")
        xp = backend.namespace()
        a = CompressedArray(compressed, plain, values, ctx.shape, layout=ctx.layout, backend=backend, xp=xp, check=False)
        grad_values = grad_dense = None
        if ctx.needs_input_grad[0]:
            if ctx.sparse_left:
                grad_values = generic.sample_product(xp, a, grad, _conj(dense.mT))
            else:
                grad_values = generic.sample_product(xp, a, _conj(dense.mT), grad)
        if ctx.needs_input_grad[1]:
            a_h = a.transpose_sparse()
            a_h = a_h._with_values(_conj(a_h._vals), 0)
            if ctx.sparse_left:
                grad_dense = dispatch.call("matmul", (a_h.layout, strided), "torch", xp, a_h, grad)
            else:
                grad_dense = dispatch.call("matmul", (strided, a_h.layout), "torch", xp, grad, a_h)
        return grad_values, grad_dense, None, None, None, None, None


def _keeps_tensor(a: CompressedArray, dense: torch.Tensor) -> bool:
    """Whether ``a`` times ``dense`` runs torch's own product of ``a``'s kept tensor (``kept_tensor``): values
    without autograd history, and no gradient that torch's product lacks (blocks, complex values)."""
    return not a._vals.requires_grad and not (dense.requires_grad and (a.layout.is_blocked or a._vals.is_complex()))


def _product_2d(
    layout: Layout, compressed: torch.Tensor, plain: torch.Tensor, values: torch.Tensor, shape: tuple[int, int],
    dense: torch.Tensor, sparse_left: bool,
) -> torch.Tensor:  # fmt: skip
    """A 2-D compressed operand times a 2-D dense one (or, on the left, a vector), through torch.mm or
    torch.mv, or _SparseProduct where torch lacks a backward."""
    if (layout.is_blocked or values.is_complex()) and _grad_needed(values, dense):
        if dense.ndim == 1:
            product = _product_2d(layout, compressed, plain, values, shape, dense[:, None], sparse_left)
            return product[:, 0]
        return cast(torch.Tensor, _SparseProduct.apply(values, dense, compressed, plain, shape, layout, sparse_left))  # type: ignore[no-untyped-call]
    t = _tensor(compressed, plain, values, shape, layout)
    if dense.ndim == 1:
        # torch's SpMV (what `t @ x` runs): a matrix of one column would take its SpMM, at 2-3x the time
        return torch.mv(t, dense)
    return torch.mm(t, dense) if sparse_left else torch.mm(dense, t)


# -- sparse @ strided ---------------------------------------------------------------------------------


def _supports_coo_strided(xp: Any, a: COOArray, b: torch.Tensor) -> str | None:
    reason = _sparse_reason(a) or _dtype_reason(a, b)
    if reason is not None:
        return reason
    if a.ndim == 3 and on_cuda(a) and a.dtype not in _REAL_FLOATING:
        # SparseCUDATensorMath.cu: bmm_out_sparse_cuda's getTensorCudaDataType takes float32 and float64 only
        return f"torch's CUDA COO bmm has no {a.dtype} kernel"
    if a.ndim == 3 and a.dtype in (torch.float16, torch.bfloat16):
        # "bmm_sparse_dense" is not implemented for Half or BFloat16 (torch 2.13, CPU)
        return f"torch's COO bmm has no {a.dtype} kernel"
    if (a.ndim >= 2 and b.ndim in (1, 2)) or (a.ndim == 3 and b.ndim == 3 and a.shape[0] == b.shape[0]):
        return None
    return (
        "torch multiplies COO arrays by vectors and matrices, and 3-D ones by batches of one size (bmm), only"
    )


def _folded_coo(a: COOArray) -> torch.Tensor:
    """A batch of COO matrices ``(*batch, M, K)`` as the 2-D torch COO tensor ``(prod(batch) * M, K)``: the
    batch indices folded into the row index, which keeps the entries' order (and so their coalescing);
    half-precision values widened (:func:`_widened_kept`)."""
    idx = verified(a)._idx
    folded = torch.empty((2, idx.shape[1]), dtype=torch.int64, device=idx.device)
    fold(idx[:-1], a.shape[:-1], out=folded[0])  # in place: a fold of a million entries costs a twentieth of the product
    folded[1].copy_(idx[-1])
    shape = (math.prod(a.shape[:-1]), a.shape[-1])
    return torch.sparse_coo_tensor(folded, _widened(packed(a._vals)), shape, is_coalesced=a.is_coalesced(), check_invariants=False)


@register("matmul", (sparse_coo, strided), backend="torch", supports=_supports_coo_strided)
def _matmul_coo_strided_torch(xp: Any, a: COOArray, b: torch.Tensor) -> torch.Tensor:
    """matmul(COO, strided) -> strided: torch.mv, torch.mm or torch.bmm (torch.sparse's SpMM), batches times one matrix folded or broadcast."""
    # torch's sparse bmm reads a conjugate (or negative) view's memory without its lazy bit
    b = _widened(b.resolve_conj().resolve_neg())
    if a.ndim == 3 and b.ndim == 2:
        # bmm reads b broadcast over the batch (a view of stride 0) as fast as one mm, with no fold to copy
        # (3-D half-precision operands were declined: torch has no such bmm)
        return torch.bmm(kept_tensor(a), b.expand(a.shape[0], *b.shape))
    if a.ndim > 2 and b.ndim <= 2:
        t = _folded_coo(a)
        out = torch.mv(t, b) if b.ndim == 1 else torch.mm(t, b)
        return _narrowed(out.reshape(*a.shape[:-1], *b.shape[1:]), a.dtype)
    t = _widened_kept(a)
    if b.ndim == 1:
        return _narrowed(torch.mv(t, b), a.dtype)
    return _narrowed(torch.mm(t, b) if a.ndim == 2 else torch.bmm(t, b), a.dtype)


def _supports_compressed_strided(xp: Any, a: CompressedArray, b: torch.Tensor) -> str | None:
    reason = _sparse_reason(a) or _dtype_reason(a, b)
    if reason is not None:
        return reason
    if a.layout is sparse_bsc:
        # SparseBlasImpl.cpp (CUDA): addmm_out_sparse_csr has no BSC @ strided case and addmv refuses BSC
        return "torch has no CPU kernel for BSC @ strided" if _cpu(a) else "torch's CUDA addmm and addmv have no kernel for BSC @ strided"
    batch = tuple(a.shape[: a.batch_dim()])
    if b.ndim > 2 and (b.ndim - 2 > len(batch) or generic._broadcast_shapes(batch, tuple(b.shape[:-2])) != batch):
        return "the strided operand's batch dimensions must broadcast to the sparse array's"
    return None


@register("matmul", (COMPRESSED, strided), backend="torch", supports=_supports_compressed_strided)
def _matmul_compressed_strided_torch(xp: Any, a: CompressedArray, b: torch.Tensor) -> torch.Tensor:
    """matmul(CSR/CSC/BSR, strided) -> strided: torch.mv or torch.mm (MKL), batches folded block-diagonally."""
    nbd = a.batch_dim()
    vector = b.ndim == 1
    if nbd == 0:
        if _keeps_tensor(a, b):
            # the path of every small product: torch's SpMV or SpMM of the array's kept tensor
            t = kept_tensor(a)
            return torch.mv(t, b) if vector else torch.mm(t, b)
        return _product_2d(a.layout, a._compressed, a._plain, a._vals, cast(tuple[int, int], tuple(a.shape)), b, True)
    b2 = b[:, None] if vector else b
    batch = tuple(a.shape[:nbd])
    k, n = b2.shape[-2], b2.shape[-1]
    compressed, plain, values, shape = _fold(a)
    dense = b2.broadcast_to(*batch, k, n).reshape(math.prod(batch) * k, n)
    out = _product_2d(a.layout, compressed, plain, values, shape, dense, True).reshape(*batch, a.shape[nbd], n)
    return out[..., 0] if vector else out


# torch's CPU SpMM (MKL) changes its method at 8 columns: with fewer, and for a vector, it takes less time
# than the compiled product, which also competes with the threads torch's last parallel region leaves
# spinning; with 8 or more it takes 2 to 10 times as long (the Laplacian of a 1000 x 1000 grid, 2 CPUs,
# products alternating with torch's)
_COMPILED_SPMM_MIN_COLUMNS = 8


def _supports_compiled_spmm(xp: Any, a: CompressedArray, b: torch.Tensor) -> str | None:
    # the shape first: every SpMV of the torch backend asks here before it runs torch's own product, and
    # the shared checks below cost more than a small SpMV's dispatch
    if b.ndim != 2 or a._compressed.ndim != 1:
        return "the compiled SpMM of the torch backend takes a matrix times a matrix"
    if b.shape[1] < _COMPILED_SPMM_MIN_COLUMNS:
        return f"torch's own product takes less time with fewer than {_COMPILED_SPMM_MIN_COLUMNS} columns"
    if not (_cpu(a) and b.device.type == "cpu"):
        return "the compiled SpMM runs on CPU tensors only"
    reason = _supports_compressed_strided(xp, a, b)
    if reason is not None:
        return reason
    if _grad_needed(a._vals, b):
        return "autograd flows through torch's own product"
    from .. import _cpu as compiled

    # the dtypes are the compiled kernels' own: _sparse_reason declines any other compressed dtype
    return compiled.unavailable_reason()


@register("matmul", (sparse_csr, strided), backend="torch", supports=_supports_compiled_spmm, priority=1)
@register("matmul", (sparse_csc, strided), backend="torch", supports=_supports_compiled_spmm, priority=1)
def _matmul_compressed_strided_compiled_torch(xp: Any, a: CompressedArray, b: torch.Tensor) -> torch.Tensor:
    """matmul(CSR/CSC, strided matrix of 8 or more columns) of CPU tensors: the compiled SpMM on their memory; O(nnz * K)."""
    # The NumPy backend's compiled product on the tensors' memory, without a copy (docs/decisions.md).
    from .. import _cpu as compiled

    csc = a.layout is sparse_csc
    m, n = a.shape
    values = a._vals.detach().resolve_conj().resolve_neg().numpy()
    dense = b.detach().resolve_conj().resolve_neg().numpy()
    out = compiled.csr_matmul(a._compressed.numpy(), a._plain.numpy(), values, m if csc else n, dense,
                              transpose=csc, checked=a._bounds_checked)  # fmt: skip
    a._bounds_checked = True
    return torch.from_numpy(out)


# -- strided @ sparse ---------------------------------------------------------------------------------


def _supports_strided_coo(xp: Any, a: torch.Tensor, b: COOArray) -> str | None:
    reason = _sparse_reason(b) or _dtype_reason(a, b)
    if reason is None and not (b.ndim == 2 and a.ndim in (1, 2)):
        return "torch multiplies by 2-D COO arrays only, from a vector or a matrix"
    return reason


@register("matmul", (strided, sparse_coo), backend="torch", supports=_supports_strided_coo)
def _matmul_strided_coo_torch(xp: Any, a: torch.Tensor, b: COOArray) -> torch.Tensor:
    """matmul(strided, COO) -> strided: (b.T @ a.T).T through torch.mm, which lacks strided @ COO."""
    t, w = _widened_kept(b).t(), _widened(a)
    if a.ndim == 1:
        return _narrowed(torch.mv(t, w), b.dtype)
    return _narrowed(torch.mm(t, w.mT).mT, b.dtype)


def _supports_strided_compressed(xp: Any, a: torch.Tensor, b: CompressedArray) -> str | None:
    reason = _sparse_reason(b) or _dtype_reason(a, b)
    if reason is not None:
        return reason
    if b.layout is sparse_bsr:
        # SparseBlasImpl.cpp (CUDA): addmm_out_sparse_csr has no strided @ BSR case either
        return "torch has no CPU kernel for strided @ BSR" if _cpu(b) else "torch's CUDA addmm has no kernel for strided @ BSR"
    if b.ndim != 2 or a.ndim > 2:
        return "torch multiplies by 2-D compressed arrays only, from a vector or a matrix"
    return None


@register("matmul", (strided, COMPRESSED), backend="torch", supports=_supports_strided_compressed)
def _matmul_strided_compressed_torch(xp: Any, a: torch.Tensor, b: CompressedArray) -> torch.Tensor:
    """matmul(strided, CSR/CSC/BSC) -> strided: torch.mm (MKL)."""
    a2 = a[None, :] if a.ndim == 1 else a
    if _keeps_tensor(b, a):
        out = torch.mm(a2, kept_tensor(b))
    else:
        out = _product_2d(b.layout, b._compressed, b._plain, b._vals, cast(tuple[int, int], tuple(b.shape)), a2, False)
    return out[0] if a.ndim == 1 else out


# -- sparse @ sparse ----------------------------------------------------------------------------------


# torch's sparse @ sparse, sspaddmm and smm compress their operands' rows and keep work arrays per row
# and column: operands with far more positions than entries (two entries in 2**40 columns) go to the
# generic kernel, whose memory follows the entries. torch aborts the process where such an allocation
# fails. An index array per position costs about a nanosecond per position, the generic kernel's sort
# some hundred per entry: tens of positions per entry are still cheaper in torch. (The compiled SpGEMM,
# which keeps a dense row of the result per thread, declines wide results as the NumPy backend's does.)
_POSITIONS_PER_ENTRY = 64
_POSITIONS_MIN = 1 << 22
_COMPILED_COLUMNS_PER_ENTRY = 8


def _hypersparse_reason(nnz: int, *sizes: int, per_entry: int = _POSITIONS_PER_ENTRY, what: str = "torch's sparse products") -> str | None:
    size = max(sizes)
    if size > max(_POSITIONS_MIN, per_entry * nnz):
        return (
            f"{what} keep work arrays per row and column ({size}), far more than the operands' {nnz} entries; the "
            "generic kernel's memory follows the entries"
        )
    return None


def _supports_sparse_sparse(xp: Any, a: SparseArray, b: SparseArray) -> str | None:
    reason = _sparse_reason(a) or _sparse_reason(b) or _dtype_reason(a, b)
    if reason is None and not (a.ndim == 2 and b.ndim == 2):
        return "torch multiplies 2-D sparse arrays only"
    if reason is None:
        reason = _hypersparse_reason(a.nnz + b.nnz, a.shape[0], a.shape[1], b.shape[1])
    if reason is None and a.dtype not in _FLOATING:
        return f"torch's sparse @ sparse has no {a.dtype} kernel"
    if reason is None and _grad_needed(a._vals, b._vals):
        return "torch's sparse @ sparse result does not carry gradients to the values (the generic kernel does)"
    return reason


@register("matmul", (sparse_coo, sparse_coo), backend="torch", supports=_supports_sparse_sparse)
def _matmul_coo_coo_torch(xp: Any, a: COOArray, b: COOArray) -> COOArray:
    """matmul(COO, COO) -> COO: torch.sparse.mm (SpGEMM)."""
    r = _narrowed(torch.sparse.mm(_widened_kept(a), _widened_kept(b)), a.dtype)
    shape = (a.shape[0], b.shape[1])
    return cast(COOArray, from_torch(r, Target(sparse_coo, a._backend, xp, shape, 2, 0, (1, 1), a.index_dtype, 0)))


def _sorted_csr(r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The components of a torch CSR tensor with the column indices of each row sorted (torch's SpGEMM
    leaves them in any order; invariant 5.6 wants them increasing)."""
    crow, col, values = r.crow_indices(), r.col_indices(), r.values()
    nnz = col.numel()
    if nnz < 2:
        return crow, col, _plain_values(r)
    # Sorting costs about twice the product on a GPU (the H200 run: 3 times torch's SpGEMM in all), and
    # a product whose rows come out sorted needs none: a check first, two passes over nnz (a comparison
    # and its reduction) and one synchronisation. ok[p] says whether position p is in order: col[p] >
    # col[p - 1], or p starts a row (which excuses it); ok[0] and ok[nnz], which a row may start at too,
    # are never read.
    ok = torch.empty(nnz + 1, dtype=torch.bool, device=col.device)
    torch.gt(col[1:], col[:-1], out=ok[1:nnz])
    ok[crow[1:-1]] = True
    if bool(ok[1:nnz].all()):
        return crow, col, _plain_values(r)
    rows = torch.repeat_interleave(torch.arange(r.shape[0], device=crow.device), (crow[1:] - crow[:-1]).to(torch.int64), output_size=nnz)
    perm = torch.argsort(rows * r.shape[1] + col, stable=True)
    return crow, col[perm], values[perm]


@register("matmul", (sparse_csr, sparse_csr), backend="torch", supports=_supports_sparse_sparse)
@register("matmul", (sparse_csr, sparse_csc), backend="torch", supports=_supports_sparse_sparse)
@register("matmul", (sparse_csc, sparse_csr), backend="torch", supports=_supports_sparse_sparse)
@register("matmul", (sparse_csc, sparse_csc), backend="torch", supports=_supports_sparse_sparse)
def _matmul_compressed_compressed_torch(xp: Any, a: CompressedArray, b: CompressedArray) -> CompressedArray:
    """matmul(CSR/CSC, CSR/CSC) -> a's layout: torch.mm (SpGEMM), CSC as the transpose of a CSR product."""
    m, n = a.shape[0], b.shape[1]
    if a.layout is sparse_csr:
        crow, col, values = _sorted_csr(torch.mm(kept_tensor(a), kept_tensor(b)))
        shape = (m, n)
    else:
        # a CSC, so a.T is CSR: (a @ b).T == b.T @ a.T, whose CSR components are a @ b's CSC ones
        crow, col, values = _sorted_csr(torch.mm(to_torch(b.transpose_sparse()), to_torch(a.transpose_sparse())))
        shape = (m, n)
    idt = a.index_dtype
    return CompressedArray(
        crow.to(idt).contiguous(), col.to(idt).contiguous(), values.contiguous(), shape, layout=a.layout,
        backend=a._backend, xp=xp,
    )  # fmt: skip


def _supports_compiled_spgemm(xp: Any, a: CompressedArray, b: CompressedArray) -> str | None:
    reason = _supports_sparse_sparse(xp, a, b)
    if reason is not None:
        return reason
    if not (_cpu(a) and _cpu(b)):
        return "the compiled SpGEMM runs on CPU tensors only"
    from .. import _cpu as compiled

    columns = b.shape[1] if a.layout is sparse_csr else a.shape[0]  # CSC: the product of the transposes
    wide = _hypersparse_reason(a.nnz + b.nnz, columns, per_entry=_COMPILED_COLUMNS_PER_ENTRY, what="the compiled SpGEMM's rows")
    return wide or compiled.unavailable_reason()


@register("matmul", (sparse_csr, sparse_csr), backend="torch", supports=_supports_compiled_spgemm, priority=1)
@register("matmul", (sparse_csc, sparse_csc), backend="torch", supports=_supports_compiled_spgemm, priority=1)
def _matmul_compressed_compressed_compiled_torch(xp: Any, a: CompressedArray, b: CompressedArray) -> CompressedArray:
    """matmul(CSR, CSR) or (CSC, CSC) on CPU tensors: the compiled two-pass SpGEMM on their memory; O(flops)."""
    # torch's CPU SpGEMM (MKL) leaves each row's columns unsorted, against invariant 5.6, and sorting
    # them afterwards costs three times its product; the NumPy backend's compiled SpGEMM writes them
    # sorted, reading and returning the tensors' memory without a copy (see docs/decisions.md).
    from .. import _cpu as compiled

    m, n = a.shape[0], b.shape[1]
    left, right, n_cols = (a, b, n) if a.layout is sparse_csr else (b, a, m)
    parts = [(s._compressed.numpy(), s._plain.numpy(), s._vals.resolve_conj().numpy()) for s in (left, right)]
    indptr, indices, data = compiled.csr_spgemm(parts[0], parts[1], n_cols)
    return CompressedArray(
        torch.from_numpy(indptr), torch.from_numpy(indices), torch.from_numpy(data), (m, n), layout=a.layout,
        backend=a._backend, xp=xp,
    )  # fmt: skip


# -- addmm, sampled_addmm, reduce, smm, hspmm, sspaddmm -------------------------------------------


def _supports_addmm(xp: Any, input: torch.Tensor, a: SparseArray, b: torch.Tensor, beta: Any, alpha: Any) -> str | None:
    reason = _sparse_reason(a) or _dtype_reason(input, a, b) or _scalar_reason(a.dtype, beta=beta, alpha=alpha)
    if reason is not None:
        return reason
    if a.ndim != 2:
        return "torch's addmm takes 2-D arrays only"
    if not cmath.isfinite(alpha):
        # torch's sparse kernels scale each product by alpha before adding it: inf * 2 + inf * -1 is NaN,
        # where alpha * (a @ b) is inf * 1
        return "torch's addmm scales each product by alpha; the generic kernel scales their sum by a non-finite alpha"
    if a.layout is sparse_bsc:
        return "torch has no CPU kernel for BSC @ strided" if _cpu(a) else "torch's CUDA addmm has no kernel for BSC @ strided"
    if (a.layout.is_blocked or (a.layout.is_compressed and a.dtype.is_complex)) and _grad_needed(a._vals, b, input):
        return "torch's addmm has no backward for blocked or complex compressed operands (the generic addmm's product has one)"
    return None


@register("addmm", (strided, sparse_coo, strided), backend="torch", supports=_supports_addmm)
@register("addmm", (strided, COMPRESSED, strided), backend="torch", supports=_supports_addmm)
def _addmm_strided_indexed_strided_torch(xp: Any, input: torch.Tensor, a: SparseArray, b: torch.Tensor, beta: Any, alpha: Any) -> torch.Tensor:
    """addmm(strided, COO/CSR/CSC/BSR, strided) -> strided: torch.addmm."""
    if beta == 0 and (input.is_floating_point() or input.is_complex()):
        # beta = 0 ignores the input, NaN and infinities too (BLAS's rule, the generic kernel's); torch's
        # addmm with an empty COO operand adds it
        input = torch.nan_to_num(input, nan=0.0, posinf=0.0, neginf=0.0)
    # torch.addmm of a COO operand reads a strided operand's conjugate bit as unset
    # the kept tensor: a tensor made per call cost torch's addmm 10 us more than one it had seen (2,000 rows)
    r = torch.addmm(_widened(input), _widened_kept(a), _widened(b.resolve_conj()), beta=beta, alpha=alpha)
    return _narrowed(r, a.dtype)


def _supports_sampled(xp: Any, input: CompressedArray, a: torch.Tensor, b: torch.Tensor, beta: Any, alpha: Any) -> str | None:
    # a non-zero fill value is no obstacle: the result's is beta * fill, exactly
    if input.dense_dim():
        return "torch's sampled_addmm takes a mask without dense dimensions"
    if input.dtype not in _FLOATING:
        return f"torch's sampled_addmm has no {input.dtype} kernel"
    if input.dtype.is_complex and _grad_needed(input._vals, a, b):
        return "torch has no backward for complex compressed arrays"
    if input.batch_dim() and _grad_needed(input._vals, a, b):
        # its backward converts a COO gradient with more than two sparse dimensions to CSR, which torch
        # refuses ("coo_to_sparse_csr: ... sparse_dim()!=2 is not supported", torch 2.13)
        return "torch's sampled_addmm has no backward for batched CSR arrays"
    reason = _dtype_reason(input, a, b)
    if reason is None:
        batch = tuple(input.shape[:-2])
        if tuple(a.shape[:-2]) != batch or tuple(b.shape[:-2]) != batch:
            return "torch's sampled_addmm needs mat1 and mat2 with the mask's batch dimensions"
    return reason


@register("sampled_addmm", (sparse_csr, strided, strided), backend="torch", supports=_supports_sampled)
def _sampled_addmm_csr_strided_strided_torch(
    xp: Any, input: CompressedArray, a: torch.Tensor, b: torch.Tensor, beta: Any, alpha: Any
) -> CompressedArray:
    """sampled_addmm(CSR, strided, strided) -> CSR: torch.sparse.sampled_addmm (SDDMM), batched."""
    vals = input._vals
    if beta == 0 and (vals.is_floating_point() or vals.is_complex()):
        # beta = 0 ignores the input's values, NaN and infinities too (BLAS's rule, the generic kernel's);
        # torch multiplies them by 0
        vals = torch.nan_to_num(vals, nan=0.0, posinf=0.0, neginf=0.0)
    t = kept_tensor(input) if vals is input._vals else _tensor(input._compressed, input._plain, vals, tuple(input.shape), sparse_csr)
    r = torch.sparse.sampled_addmm(t, a, b, beta=beta, alpha=alpha)
    from ..._common import scalar_for

    # beta = 1 keeps the fill value as it is (its kind and sign bit)
    fill = input.fill_value if beta == 1 else scalar_for(xp, input.dtype, 0 if beta == 0 else beta * input.fill_value)
    # torch's values() of a CSR result is an alias of the sparse tensor on which view operations fail;
    # detached (or, to keep autograd's history, copied) it is a plain tensor. The pattern is the mask's:
    # its indices are reused, and torch's values have the mask's shape and dtype, so the result is built
    # without the constructor's checks (a quarter of a small call)
    values = r.values()
    out = CompressedArray._trusted(
        input._compressed, input._plain, values.clone() if values.requires_grad else values.detach(), input._shape,
        layout=input.layout, backend=input._backend, xp=xp, fill_value=fill,
    )  # fmt: skip
    out._bounds_checked = input._bounds_checked
    return out


def _supports_reduce(xp: Any, a: CompressedArray, b: torch.Tensor, reduce: str) -> str | None:
    reason = _sparse_reason(a) or _dtype_reason(a, b)
    if reason is None and a.dtype not in _REAL_FLOATING:
        return f"torch's reduction kernel has no {a.dtype} kernel"
    if reason is None and not (a.ndim == 2 and b.ndim == 2):
        return "torch.sparse.mm(reduce=) takes 2-D arrays only"
    if reason is None and (on_cuda(a) or on_cuda(b)):
        # native_functions.yaml: _sparse_mm_reduce_impl is dispatched for SparseCsrCPU only
        return "torch.sparse.mm(reduce=) has no CUDA kernel"
    return reason


@register("matmul_reduce", (sparse_csr, strided), backend="torch", supports=_supports_reduce)
def _matmul_reduce_csr_strided_torch(xp: Any, a: CompressedArray, b: torch.Tensor, reduce: str) -> torch.Tensor:
    """matmul_reduce(CSR, strided) -> strided: torch.sparse.mm(reduce=)."""
    return cast(torch.Tensor, torch.sparse.mm(kept_tensor(a), b, reduce))


def _supports_coo_product(xp: Any, a: COOArray, b: torch.Tensor, *rest: Any) -> str | None:
    reason = _sparse_reason(a) or _dtype_reason(a, b)
    if reason is None and not (a.ndim == 2 and b.ndim == 2):
        return "torch's smm, hspmm and sspaddmm take 2-D arrays only"
    if reason is None and _grad_needed(a._vals, b, *(x._vals for x in rest if isinstance(x, SparseArray))):
        return "torch's COO results do not carry gradients to the values (the generic kernel does)"
    return reason


def _supports_smm(xp: Any, a: COOArray, b: torch.Tensor) -> str | None:
    reason = _supports_coo_product(xp, a, b) or _sspaddmm_cuda_reason(a, b) or _sspmm_half_reason(a)
    return reason or _hypersparse_reason(a.nnz, *a.shape)


def _sspmm_half_reason(a: SparseArray) -> str | None:
    # "sspmm" is not implemented for 'Half' or 'BFloat16' (torch 2.13, CPU); the generic kernel adds in float32
    if a.dtype in _HALF:
        return f"torch's sspaddmm (and smm, which runs it) has no {a.dtype} kernel"
    return None


def _sspaddmm_cuda_reason(*operands: Any) -> str | None:
    # SparseCUDATensorMath.cu: _sspaddmm_out_cuda raises "NYI: CUDA sspaddmm is not implemented", and
    # torch.smm is sspaddmm with a zero input
    if any(on_cuda(x) for x in operands):
        return "torch's sspaddmm (and smm, which runs it) has no CUDA kernel"
    return None


def _coo_result(r: torch.Tensor, like: COOArray, xp: Any) -> COOArray:
    target = Target(sparse_coo, like._backend, xp, tuple(r.shape), r.sparse_dim(), r.dense_dim(), (1, 1), like.index_dtype, 0)
    return cast(COOArray, from_torch(r, target))


@register("smm", (sparse_coo, strided), backend="torch", supports=_supports_smm)
def _smm_coo_strided_torch(xp: Any, a: COOArray, b: torch.Tensor) -> COOArray:
    """smm(COO, strided) -> COO: torch.smm."""
    return _coo_result(torch.smm(kept_tensor(a), b), a, xp)


@register("hspmm", (sparse_coo, strided), backend="torch", supports=_supports_coo_product)
def _hspmm_coo_strided_torch(xp: Any, a: COOArray, b: torch.Tensor) -> COOArray:
    """hspmm(COO, strided) -> hybrid COO: torch.hspmm."""
    r = _narrowed(torch.hspmm(_widened_kept(a), _widened(b)), a.dtype)
    # torch flags the result uncoalesced, though its rows are those of the coalesced operand, sorted and
    # distinct; flagged coalesced, as the generic kernel's, its indices() read as on every backend
    return _coo_result(r._coalesced_(True), a, xp)


def _supports_sspaddmm(xp: Any, input: COOArray, a: COOArray, b: torch.Tensor, beta: Any, alpha: Any) -> str | None:
    reason = _supports_coo_product(xp, a, b, input) or _sparse_reason(input) or _dtype_reason(input, a)
    return (
        reason or _sspaddmm_cuda_reason(input, a, b) or _sspmm_half_reason(a) or _scalar_reason(a.dtype, beta=beta, alpha=alpha)
        or _hypersparse_reason(a.nnz + input.nnz, *a.shape)
    )  # fmt: skip


@register("sspaddmm", (sparse_coo, sparse_coo, strided), backend="torch", supports=_supports_sspaddmm)
def _sspaddmm_coo_coo_strided_torch(xp: Any, input: COOArray, a: COOArray, b: torch.Tensor, beta: Any, alpha: Any) -> COOArray:
    """sspaddmm(COO, COO, strided) -> uncoalesced COO: torch.sspaddmm."""
    return _coo_result(torch.sspaddmm(kept_tensor(input), kept_tensor(a), b, beta=beta, alpha=alpha), input, xp)


# -- spsolve ------------------------------------------------------------------------------------------


class _SuperLUSolve(torch.autograd.Function):
    """``A^-1 b`` by SciPy's SuperLU on the CPU components (shared with NumPy, not copied), with the
    adjoint solve for ``b``'s gradient and ``-(A^-H g) x^H`` sampled at ``A``'s elements for the values'."""

    @staticmethod
    def forward(ctx: Any, values: torch.Tensor, b: torch.Tensor, a: SparseArray, dtype: torch.dtype) -> torch.Tensor:
        from ..._conversion import to_backend
        from .._superlu import factorize

        numpy_dtype = torch.empty((), dtype=dtype).numpy().dtype
        lu = factorize("spsolve", to_backend(a, "numpy"), numpy_dtype)
        x = torch.from_numpy(lu.solve(b.detach().resolve_conj().resolve_neg().to(dtype).numpy()))
        ctx.lu, ctx.a, ctx.dtype, ctx.b_dtype = lu, a, dtype, b.dtype
        ctx.save_for_backward(x)
        return x

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        (x,) = ctx.saved_tensors
        g = torch.from_numpy(ctx.lu.solve_adjoint(grad.resolve_conj().resolve_neg().to(ctx.dtype).numpy()))
        grad_values = None
        if ctx.needs_input_grad[0]:
            a = ctx.a
            g2, x2 = (g[:, None], x[:, None]) if x.ndim == 1 else (g, x)
            grad_values = (-generic.sample_product(a._xp, a, g2, _conj(x2.mT))).to(a._vals.dtype)
        return grad_values, g.to(ctx.b_dtype) if ctx.needs_input_grad[1] else None, None, None


def _supports_spsolve(xp: Any, a: SparseArray, b: torch.Tensor) -> str | None:
    if a.fill_value != 0:
        return f"SuperLU reads the unspecified elements as 0, and the fill value is {a.fill_value!r}"
    if a.dense_dim():
        return "a system matrix has no dense dimensions"
    if not _cpu(a) or b.device.type != "cpu":
        return "torch has no sparse solver on this device, and SciPy's reads CPU memory only"
    return None


@register("spsolve", (INDEXED, strided), backend="torch", supports=_supports_spsolve)
def _spsolve_indexed_strided_torch(xp: Any, a: SparseArray, b: torch.Tensor) -> torch.Tensor:
    """spsolve(sparse, strided) -> strided: SciPy's SuperLU on the shared CPU components (torch has no CPU solver)."""
    dtype = torch.promote_types(a.dtype, b.dtype)
    if a.shape[0] == 0:
        return torch.zeros(b.shape, dtype=dtype, device=b.device)
    return cast(torch.Tensor, _SuperLUSolve.apply(a._vals, b, a, dtype))  # type: ignore[no-untyped-call]


# -- torch's own decompositions of COO matrices ------------------------------------------------------


@contextlib.contextmanager
def _seeded(seed: Any, device: torch.device) -> Iterator[None]:
    # torch's algorithms draw from the global generator of the matrix's device: seed a forked copy so the
    # caller's stays untouched. Only that generator (and the CPU one) is forked and seeded: torch.manual_seed
    # would also reseed every CUDA device's generator, which fork_rng(devices=[]) does not restore.
    # torch's pca_lowrank builds a COO tensor with the invariant checks left implicit, which warns; its
    # inputs are valid by construction, so the checks are switched off explicitly
    cuda = device.type == "cuda"
    index = (device.index if device.index is not None else torch.cuda.current_device()) if cuda else None
    forked = [index] if index is not None else []
    with torch.random.fork_rng(devices=forked), torch.sparse.check_sparse_tensor_invariants(enable=False):  # type: ignore[no-untyped-call]
        if seed is not None:
            torch.default_generator.manual_seed(int(seed))
            if index is not None:
                torch.cuda.default_generators[index].manual_seed(int(seed))
        yield


def _supports_decomposition(xp: Any, a: COOArray, *args: Any) -> str | None:
    reason = _sparse_reason(a)
    if reason is None and a.dtype not in _REAL_FLOATING:
        return f"torch's low-rank decompositions of sparse matrices are real-valued, got {a.dtype}"
    seed = args[-1]
    if reason is None and seed is not None and not isinstance(seed, int):
        return "the torch kernel takes an integer seed (for torch.manual_seed)"
    # the other operands (M; B, X, iK) reach torch as they are: to_torch drops a fill value, and torch
    # multiplies operands of one dtype only
    for operand in args[:-1]:
        if isinstance(operand, SparseArray):
            if operand.layout is not sparse_coo:
                return "torch's lobpcg multiplies by COO or strided matrices only"
            reason = reason or _sparse_reason(operand)
        if isinstance(operand, (SparseArray, torch.Tensor)):
            reason = reason or _dtype_reason(a, operand)
    return reason


@register("svd_lowrank", (sparse_coo,), backend="torch", supports=_supports_decomposition)
def _svd_lowrank_coo_torch(xp: Any, a: COOArray, q: int, niter: int, m: Any, seed: Any) -> tuple[Any, Any, Any]:
    """svd_lowrank(COO) -> (U, S, V): torch.svd_lowrank."""
    with _seeded(seed, a._vals.device):
        return cast(tuple[Any, Any, Any], torch.svd_lowrank(to_torch(a), q=q, niter=niter, M=m))


@register("pca_lowrank", (sparse_coo,), backend="torch", supports=_supports_decomposition)
def _pca_lowrank_coo_torch(xp: Any, a: COOArray, q: int, center: bool, niter: int, seed: Any) -> tuple[Any, Any, Any]:
    """pca_lowrank(COO) -> (U, S, V): torch.pca_lowrank."""
    with _seeded(seed, a._vals.device):
        return cast(tuple[Any, Any, Any], torch.pca_lowrank(to_torch(a), q=q, center=center, niter=niter))


def _supports_lobpcg(xp: Any, a: COOArray, *args: Any) -> str | None:
    options: generic.LobpcgOptions = args[-2]
    ik = args[4]
    # torch.lobpcg's iteration differs from the generic kernel's in what these options mean
    if options.tracker is not None:
        return "the tracker is given xsparse's iteration state, which the generic kernel keeps"
    if options.method == "ortho" and ik is not None:
        return "torch's method='ortho' does not apply the preconditioner iK"
    if options.bparams.get("ortho_use_drop"):
        return "torch's ortho_use_drop uses the drop and replace tolerances the other way round"
    if options.method == "ortho" and args[5] == 1:
        # _lobpcg.py, LOBPCG._update_ortho: the first step computes its Ritz values and keeps none, so after
        # one iteration torch returns the zeros it started E with
        return "torch's method='ortho' returns zeros for the eigenvalues after one iteration"
    return _supports_decomposition(xp, a, *args[:-2], args[-1])


@register("lobpcg", (sparse_coo,), backend="torch", supports=_supports_lobpcg)
def _lobpcg_coo_torch(
    xp: Any, a: COOArray, k: int, b: Any, x: Any, n: int, ik: Any, niter: int, tol: float, largest: bool,
    options: generic.LobpcgOptions, seed: Any,
) -> tuple[Any, Any]:
    """lobpcg(COO) -> (E, X): torch.lobpcg, method and ortho parameters passed on."""

    def as_torch(m: Any) -> Any:
        return to_torch(m) if isinstance(m, SparseArray) else m

    ortho = options.method == "ortho"
    try:
        with _seeded(seed, a._vals.device):
            e, v = cast(
                tuple[Any, Any],
                torch.lobpcg(
                    # method="basic" writes its iterates into X: the caller's array must stay as it was
                    to_torch(a), k=k, B=as_torch(b), X=None if x is None else x.clone(), n=n, iK=as_torch(ik), niter=niter,
                    tol=tol, largest=largest, method=options.method,
                    ortho_iparams=dict(options.iparams) if ortho else None,
                    ortho_fparams=dict(options.fparams) if ortho else None,
                    ortho_bparams=dict(options.bparams) if ortho else None,
                ),
            )  # fmt: skip
    except torch.linalg.LinAlgError:  # type: ignore[attr-defined]
        # torch's first Rayleigh-Ritz step takes a Cholesky factor of X^H B X, which fails for a rank-deficient
        # X (that the generic kernel's ortho variant completes) and for a B that is not positive definite
        # (which the generic kernel reports as such); which one it was is only known once torch has failed
        return generic.lobpcg_generic(xp, a, k, b, x, n, ik, niter, tol, largest, options, seed)
    if not ortho:
        # torch's basic variant does not notice when its basis loses independence, and then returns
        # dependent vectors (a repeated eigenpair, say); the generic kernel stops with an error that says so
        gram = v.mH @ (v if b is None else as_torch(b) @ v)
        eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
        if float((gram - eye).abs().max()) > float(torch.finfo(v.dtype).eps) ** 0.25:
            return generic.lobpcg_generic(xp, a, k, b, x, n, ik, niter, tol, largest, options, seed)
    return e, v
