"""Native kernels of the torch backend: torch.sparse's own conversions, zero-copy.

xsparse keeps torch components as plain strided tensors; a kernel wraps them in a torch sparse tensor
without checks (the components are valid by construction), runs torch's kernel, and unwraps the
result's components. torch's gaps are declined with a reason, and the generic kernels take over.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, cast

import torch

from ..._scoped import ignoring_warnings
from ._register import register
from ...formats import INDEXED, COOArray, CompressedArray, Layout, SparseArray, sparse_coo, strided
# torch's kernels trust the indices they are given (the tensors are built with check_invariants=False, as
# torch's constructors do by default) and read out of bounds on an array built without the checks
from ...formats._invariants import verified
from ...formats._spec import Target
from ..array_api.conversion import is_plus_zero

__all__ = ["to_torch", "from_torch", "on_cuda", "fold", "complex_grad_reason", "verified"]

_TORCH_LAYOUT = {
    Layout.sparse_coo: torch.sparse_coo,
    Layout.sparse_csr: torch.sparse_csr,
    Layout.sparse_csc: torch.sparse_csc,
    Layout.sparse_bsr: torch.sparse_bsr,
    Layout.sparse_bsc: torch.sparse_bsc,
}
_XS_LAYOUT = {v: k for k, v in _TORCH_LAYOUT.items()}
_UNSUPPORTED_DTYPES = (torch.uint16, torch.uint32, torch.uint64)


def on_cuda(x: Any) -> bool:
    """Whether ``x`` (a torch tensor, or an xsparse array of torch components) lives on a CUDA device.

    Reads the device only, never the data: the kernels' reasons to decline a CUDA input are checked
    before anything that would copy to the host or wait for the device.
    """
    t = x._vals if isinstance(x, SparseArray) else x
    # is_cuda, a flag, where the tensor has it: .device makes a torch.device object on every read
    is_cuda = getattr(t, "is_cuda", None)
    if is_cuda is not None:
        return bool(is_cuda)
    device = getattr(t, "device", None)
    return bool(device is not None and getattr(device, "type", None) == "cuda")


# The once-per-process warnings that xsparse's own first compressed tensor spends (see below): torch's beta
# notice, and, on torch releases that issue it although the constructor is told check_invariants (2.11),
# the notice that invariant checks are "implicitly disabled". Releases that honour the explicit flag
# (2.13) do not warn at that construction, and keep the second warning for their users' own tensors.
SPENT_WARNINGS = "Sparse (CSR|CSC|BSR|BSC) tensor support is in beta|Sparse invariant checks are implicitly disabled"


def _spend_beta_warning() -> None:
    # torch warns, once per process, that its compressed layouts are in beta: the first compressed
    # tensor built anywhere triggers it, and no later one does. xsparse builds them on purpose, and the
    # warning would otherwise surface in users' code at an unrelated call. Spending it here, under a
    # filter, spares every kernel a warnings filter of its own (10 us, a third of a small product). A
    # filter of that message alone, removed afterwards: catch_warnings() would put back a copy of the
    # process's filter list, dropping those another thread added meanwhile.
    with ignoring_warnings(Warning, SPENT_WARNINGS):
        empty = torch.zeros(0, dtype=torch.int64)
        torch.sparse_compressed_tensor(torch.zeros(2, dtype=torch.int64), empty, empty, (1, 1), layout=torch.sparse_csr, check_invariants=False)


_spend_beta_warning()


def fold(rows: Any, sizes: Any, out: torch.Tensor | None = None) -> torch.Tensor:
    """The row-major int64 position of each entry among dimensions of ``sizes``, one index row per
    dimension (at least one): a multiply-add per row, in place (into ``out`` when given)."""
    key = torch.empty(rows[0].shape, dtype=torch.int64, device=rows[0].device) if out is None else out
    key.copy_(rows[0])
    for row, size in zip(rows[1:], sizes[1:]):
        key.mul_(size).add_(row)
    return key


def packed(values: torch.Tensor) -> torch.Tensor:
    """``values`` with the strides of a new contiguous tensor. torch calls a tensor contiguous whatever the
    strides of its size-1 dimensions, and its sparse kernels then misread it (a diagonal view of shape
    (1, 1) and strides (3, 4) densified from the wrong element, or wrote outside the result's buffer)."""
    if values.dim() == 1 and values.stride(0) == 1 or values.numel() == 0:
        return values  # the common case, at once
    expected = 1
    for size, step in zip(reversed(values.shape), reversed(values.stride())):
        if step != expected:
            return values.clone(memory_format=torch.contiguous_format)
        expected *= size
    return values


# The torch tensor over a COO or compressed array's components (``to_torch``), per array (by id), made once
# for its products: building it costs about 2 us of the 13 us of a small SpMV on a CPU, and for int32 COO
# indices a widening copy of them (torch's COO indices are int64), which the kept tensor holds for the
# array's lifetime instead. Values that carry autograd history are never kept (each product records its own
# use of them), nor a tensor made in inference mode (which could not be saved for a later backward). The
# tensor shares the array's buffers otherwise and holds no reference to the array; the entry goes with the
# array. Like the CuPy backend's wrapped matrices, a memo of a derived object.
_KEPT: dict[int, torch.Tensor] = {}


def kept_tensor(a: SparseArray) -> torch.Tensor:
    """``to_torch(a)`` (a COO or compressed array), kept with ``a`` where its values carry no autograd
    history."""
    t = _KEPT.get(id(a))
    if t is None or a._vals.requires_grad:
        t = to_torch(a)
        if not (a._vals.requires_grad or torch.is_inference_mode_enabled()):
            weakref.finalize(a, _KEPT.pop, id(a), None)
            _KEPT[id(a)] = t
    return t


def to_torch(a: SparseArray, values: torch.Tensor | None = None) -> torch.Tensor:
    """The torch sparse tensor sharing ``a``'s components (int32 COO indices are widened: torch needs int64),
    whose indices are checked once (:func:`verified`); ``values`` (of the shape of ``a``'s) replace its values."""
    if values is None:
        values = packed(a._vals)
    if isinstance(a, COOArray):
        verified(a)
        return torch.sparse_coo_tensor(
            a._idx.to(torch.int64), values, a.shape, is_coalesced=a.is_coalesced(), check_invariants=False
        )
    assert isinstance(a, CompressedArray)
    verified(a)
    return torch.sparse_compressed_tensor(
        a._compressed, a._plain, values, a.shape, layout=_TORCH_LAYOUT[a.layout], check_invariants=False
    )


def _plain_values(t: torch.Tensor) -> torch.Tensor:
    """The values of a compressed torch tensor as an ordinary strided tensor.

    ``values()`` of a compressed tensor is an alias that refuses views (``torch.real`` of it raises
    "Sparse CSR tensors do not have strides"); ``detach()`` gives a plain tensor on the same storage.
    Values that carry autograd history are kept as they are, so gradients still flow through them.
    """
    values = t.values()
    return (values if values.requires_grad else values.detach()).contiguous()


def _coo_values(t: torch.Tensor) -> torch.Tensor:
    """The values of the torch COO tensor ``t``, with their autograd history where ``t`` requires grad
    (then ``t`` must be coalesced)."""
    # _values() is detached (the seed says so), and values() refuses an uncoalesced tensor; a check of
    # requires_grad keeps the call that needs neither on the path without grad
    return t.values() if t.requires_grad else t._values()


def from_torch(t: torch.Tensor, target: Target, fill_value: Any = 0) -> SparseArray:
    """The xsparse array with the components of the torch sparse tensor ``t``, indices in ``target.index_dtype``."""
    idt = target.index_dtype
    layout = _XS_LAYOUT[t.layout]
    if layout is Layout.sparse_coo:
        if t.requires_grad and not t.is_coalesced():
            # values() exists on a coalesced tensor only, and coalesce() is differentiable; without
            # grad the entries stay as torch left them
            t = t.coalesce()
        result: COOArray | CompressedArray = COOArray(
            t._indices().to(idt).contiguous(), _coo_values(t).contiguous(), tuple(t.shape),
            backend=target.backend, xp=target.xp, coalesced=t.is_coalesced(), fill_value=fill_value,
        )  # fmt: skip
    else:
        if layout.compressed_dim == 0:
            ci, pi = t.crow_indices(), t.col_indices()
        else:
            ci, pi = t.ccol_indices(), t.row_indices()
        result = CompressedArray(
            ci.to(idt).contiguous(), pi.to(idt).contiguous(), _plain_values(t), tuple(t.shape),
            layout=layout, backend=target.backend, xp=target.xp, fill_value=fill_value,
        )  # fmt: skip
    result._bounds_checked = True  # torch's kernels made these indices, from checked ones
    return result


def complex_grad_reason(what: str, *operands: Any) -> str | None:
    """Why a torch kernel that runs ``what`` declines ``operands`` (tensors or xsparse arrays): one holds
    complex values that require grad, and torch's autograd refuses ``what`` for complex outputs.

    torch raises "does not support automatic differentiation for outputs with complex dtype" for
    sparse_compressed_tensor (so for every kernel that wraps a CSR, CSC, BSR or BSC array in a torch
    tensor, or converts to one) and for scatter_reduce (torch 2.13); the generic kernels are built
    from operations that differentiate complex values. Reads flags only, never the data.
    """
    if not torch.is_grad_enabled():
        return None
    for x in operands:
        t = x._vals if isinstance(x, SparseArray) else x
        if isinstance(t, torch.Tensor) and t.requires_grad and t.is_complex():
            return f"torch has no autograd for {what} of complex values, and the values require grad"
    return None


def _common_reason(x: Any, fill: Any, refused: str | None) -> str | None:
    """Why torch's conversions decline ``x``; ``refused``: what the kernel runs on ``x``'s values that
    torch does not differentiate for complex values (None: nothing)."""
    if not is_plus_zero(fill):
        return "torch's conversions assume fill value 0 (+0.0)"
    if x.dtype in _UNSUPPORTED_DTYPES:
        return f"torch.sparse has no kernels for {x.dtype}"
    return complex_grad_reason(refused, x) if refused is not None else None


# The integer dtype of each floating dtype's width and the bits of its -0.0 (the sign bit alone).
_NEGATIVE_ZERO_BITS = {
    torch.float64: (torch.int64, -(2**63)),
    torch.float32: (torch.int32, -(2**31)),
    torch.float16: (torch.int16, -(2**15)),
    torch.bfloat16: (torch.int16, -(2**15)),
}


def _holds_negative_zero(x: torch.Tensor) -> bool:
    """Whether a strided ``x`` holds a -0.0 (as either part of a complex value: to_dense adds into +0.0,
    which loses it there too, as in ``-0.0 - inf*j``).

    For the real floating dtypes one integer comparison of the bits, a pass over ``x``.
    """
    if not (x.is_floating_point() or x.is_complex()):
        return False
    if x.is_complex():
        return _holds_negative_zero(x.real) or _holds_negative_zero(x.imag)
    if x.numel() == 0:
        return False
    x = x.detach().resolve_neg().reshape(-1) if x.ndim == 0 else x.detach().resolve_neg()
    twin = _NEGATIVE_ZERO_BITS.get(x.dtype)
    if twin is not None and twin[0] != torch.int64:
        # -0.0 has the least bits of all, as a signed integer; torch's min of int32 and int16 is vectorised
        return int(torch.amin(x.view(twin[0]))) == twin[1]
    if x.dtype == torch.float64 and x.stride(-1) == 1 and int(torch.amin(x.view(torch.int32))) != -(2**31):
        # its min of int64 is not: the int32 halves first, where -0.0's high half is the least of all
        return False
    return bool(torch.any(negative_zeros(x)))


def negative_zeros(x: torch.Tensor, negative: bool = True) -> torch.Tensor:
    """Where the real floating ``x`` holds -0.0 (or +0.0, with ``negative=False``; bool, ``x``'s shape):
    one integer comparison of the bits."""
    # the bits of a lazily negated view (the imaginary part of a conjugate) are not its values' bits
    x = x.detach().resolve_neg()
    twin = _NEGATIVE_ZERO_BITS.get(x.dtype)
    if twin is None:
        return (x == 0) & (torch.signbit(x) if negative else ~torch.signbit(x))
    return x.view(twin[0]) == (twin[1] if negative else 0)


def _supports_to_sparse(xp: Any, x: Any, target: Target) -> str | None:
    source = x.layout if isinstance(x, SparseArray) else strided
    # torch's to_sparse refuses complex outputs that require grad, from any source but COO (which it
    # returns as it is), and so does the constructor of every compressed tensor
    coo_to_coo = isinstance(x, COOArray) and target.layout is sparse_coo
    reason = _common_reason(x, target.fill_value, None if coo_to_coo else "to_sparse and compressed sparse tensors")
    if reason is not None:
        return reason
    if on_cuda(x) and source is not strided and not source.is_blocked and target.layout.is_blocked:
        # TensorConversions.cpp: CSR -> BSR/BSC runs _compressed_to_block_compressed_cpu on a host copy
        # (with a warning), and COO and CSC go through CSR; the generic kernel stays on the device
        return "torch converts CUDA COO, CSR and CSC arrays to BSR or BSC through a copy on the host"
    if (
        isinstance(x, CompressedArray) and not source.is_blocked and target.layout.is_blocked
        and torch.is_grad_enabled() and x._vals.requires_grad
    ):  # fmt: skip
        # the backward of torch's CSR/CSC -> BSR/BSC conversion calls a CSR-only kernel on the blocked
        # gradient and raises (torch 2.13); the generic kernel is built from differentiable operations
        return "torch's CSR/CSC -> BSR/BSC conversion has no working backward, and the values require grad"
    if isinstance(x, COOArray) and not x.is_coalesced() and x._vals.is_complex() and target.layout is not sparse_coo:
        # torch's to_sparse coalesces the duplicates with its complex add, which mixes the parts at an
        # infinity and loses the sign of a zero part; the generic kernel coalesces as xsparse does
        return "torch's to_sparse adds complex duplicates with its complex add (inf + nan j where a part is infinite)"
    if source is strided and _holds_negative_zero(x):
        # with fill value +0.0 a -0.0 is specified (docs/decisions.md, "Fill values"); torch leaves it out
        return "torch's to_sparse leaves out -0.0, which is a specified element"
    sorts = isinstance(x, CompressedArray) and target.layout is sparse_coo and (x.layout.compressed_dim == 1 or x.layout.is_blocked)
    # torch's COO -> CSC coalesces the transpose (TensorConversions.cpp), a coalesced COO's too: on CUDA that
    # lost a -0.0 (the H200 run of tests/test_conversions.py)
    coalesces = isinstance(x, COOArray) and (target.layout is Layout.sparse_csc or (not x.is_coalesced() and target.layout is not sparse_coo))
    if sorts or coalesces:
        # the kernel sorts CSC/BSR/BSC entries with coalesce, and torch's to_sparse coalesces a COO on its way
        # to CSC, and an uncoalesced one on its way to any other layout
        reason = cuda_coalesce_reason(x)
        if reason is not None:
            return reason
    if source.is_blocked and target.layout in (Layout.sparse_csr, Layout.sparse_csc):
        return "torch converts BSR/BSC only to strided, COO, BSR and BSC"
    if source.is_blocked and target.layout is sparse_coo and x.nnz == 0 and math.prod(x.blocksize) > 2**20:
        # it builds the index grid of a block whether or not there is one: 34 GB for a blocksize of (1, 2**31)
        return "torch's BSR/BSC -> COO allocates a large block's index grid even where there is no block"
    if source.is_blocked and target.layout.is_blocked and x.blocksize != target.blocksize:
        return "torch does not change the blocksize of a BSR/BSC array"
    if isinstance(x, COOArray) and target.layout.is_compressed and x.sparse_dim() > 2:
        return "torch converts only 2-D COO arrays to compressed layouts"
    if isinstance(x, CompressedArray) and x.batch_dim() and target.layout is not x.layout:
        return "torch converts batched compressed arrays only to strided"
    if source is strided and target.layout is sparse_coo and target.dense_dim and x.ndim == target.dense_dim:
        return "torch needs at least one sparse dimension"
    if target.layout.is_compressed and 0 in tuple(x.shape[: target.batch_dim]):
        return "torch cannot compress an array whose batch dimensions hold no element"
    if source is not strided and not source.is_blocked and target.layout.is_blocked:
        # TensorConversions.cpp's CSR -> BSR/BSC keeps a workspace of one entry per block of a compressed
        # slice: a matrix of 2 x 2**32 raised std::bad_alloc; the generic kernel's work follows nnz
        nbd = x.batch_dim() if isinstance(x, CompressedArray) else 0
        rows, cols = x.shape[nbd], x.shape[nbd + 1]
        bm, bn = target.blocksize
        across = cols // bn if target.layout is Layout.sparse_bsr else rows // bm
        if across > max(_WORKSPACE_MIN, 8 * x.nnz):
            return (
                f"torch's conversion to {target.layout} allocates one entry per block {'column' if target.layout is Layout.sparse_bsr else 'row'} "
                f"({across} of them for nnz={x.nnz}); the generic kernel's work follows nnz"
            )
    return None


# Below this many blocks across, torch's workspace for the conversion to BSR/BSC is small whatever nnz is.
_WORKSPACE_MIN = 1 << 22


@register("convert", (strided, INDEXED), backend="torch", supports=_supports_to_sparse)
@register("convert", (INDEXED, INDEXED), backend="torch", supports=_supports_to_sparse)
def _convert_to_sparse_torch(xp: Any, x: Any, target: Target) -> SparseArray:
    """to_sparse(...) through torch's Tensor.to_sparse (MKL/cuSPARSE where torch uses them)."""
    src = to_torch(x) if isinstance(x, SparseArray) else x
    layout = target.layout
    try:
        if layout is sparse_coo:
            result = src.to_sparse(target.sparse_dim) if not isinstance(x, SparseArray) else src.to_sparse()
            if isinstance(x, CompressedArray) and (x.layout.compressed_dim == 1 or x.layout.is_blocked):
                # torch leaves CSC/BSC entries in column-major order and BSR entries block by block,
                # and even marks them coalesced when the values hold no element (a dense dimension
                # of size 0); every other backend returns the COO array coalesced (it holds no
                # duplicates, so this only sorts)
                if result.is_coalesced():
                    result = torch.sparse_coo_tensor(
                        result._indices(), _coo_values(result), result.shape, is_coalesced=False, check_invariants=False
                    )
                result = result.coalesce()
        else:
            blocksize = target.blocksize if layout.is_blocked else None
            dense_dim = target.dense_dim if not isinstance(x, SparseArray) else None
            result = src.to_sparse(layout=_TORCH_LAYOUT[layout], blocksize=blocksize, dense_dim=dense_dim)
    except RuntimeError as exc:
        if "same number of specified elements per batch" in str(exc) and not isinstance(x, SparseArray):
            # the generic kernel finds the same violation and reports the counts
            from ..array_api.conversion import _convert_strided_compressed

            _convert_strided_compressed(xp, x, target)
        raise
    fill = x.fill_value if isinstance(x, SparseArray) else target.fill_value
    return from_torch(result, target, fill)


def _supports_to_dense(xp: Any, a: SparseArray, target: Target) -> str | None:
    reason = _common_reason(a, a.fill_value, "compressed sparse tensors" if isinstance(a, CompressedArray) else None)
    if reason is None and isinstance(a, CompressedArray) and a.batch_dim() and torch.is_grad_enabled() and a._vals.requires_grad:
        # its backward converts the gradient to the input's layout through a 2-D COO tensor, which torch
        # refuses for a batched one ("sparse_dim()!=2 is not supported", torch 2.13); assigning into
        # zeros is differentiable
        return "torch's to_dense of a batched compressed array has no working backward, and the values require grad"
    if reason is None and _holds_negative_zero(a._vals):
        # torch adds the values into zeros, and +0.0 + -0.0 is +0.0
        return "torch's to_dense turns a stored -0.0 into +0.0"
    if reason is None and a._vals.is_complex() and not bool(torch.all(torch.isfinite(a._vals.detach()))):
        # it also multiplies complex values by 1 + 0j: (1.5 - inf*j) * (1 + 0j) has a NaN real part
        return "torch's to_dense turns a complex value with an infinite part into NaN"
    return reason


@register("convert", (INDEXED, strided), backend="torch", supports=_supports_to_dense)
def _convert_to_dense_torch(xp: Any, a: SparseArray, target: Target) -> torch.Tensor:
    """to_dense(...) through torch's Tensor.to_dense."""
    return to_torch(a).to_dense()


def _supports_to_dense_by_assignment(xp: Any, a: SparseArray, target: Target) -> str | None:
    # assignment into zeros builds no torch sparse tensor
    return _common_reason(a, a.fill_value, None)


@register("convert", (INDEXED, strided), backend="torch", supports=_supports_to_dense_by_assignment, priority=-1)
def _convert_to_dense_by_assignment_torch(xp: Any, a: SparseArray, target: Target) -> torch.Tensor:
    """to_dense(...) by assigning the entries into zeros: every value's bits kept (-0.0, complex infinities); O(numel + nnz)."""
    from ..array_api.conversion import coalesce_coo, compressed_to_coo

    # a compressed array holds no duplicates: its entries need no sorting
    c = coalesce_coo(xp, a) if isinstance(a, COOArray) else compressed_to_coo(xp, cast(CompressedArray, a), sort=False)
    out = torch.zeros(tuple(a.shape), dtype=a.dtype, device=a._vals.device)
    if c.nnz and c.sparse_dim():
        out[tuple(c._idx)] = c._vals
    elif c.nnz:
        out.copy_(c._vals[0])
    return out


def cuda_coalesce_reason(*arrays: Any) -> str | None:
    """Why torch's CUDA coalesce would change one of the COO ``arrays`` it runs on: it sums every entry,
    duplicated or not, into a +0.0 (``coalesceValuesKernel``), so a stored -0.0 comes out +0.0, where the
    CPU kernel copies a lone entry. Reads the values (a pass and a wait for the device) of CUDA arrays of
    floating values only."""
    for a in arrays:
        if on_cuda(a) and _holds_negative_zero(a._vals):
            return "torch's CUDA coalesce sums each entry into +0.0, which turns a stored -0.0 into +0.0"
    return None


def _supports_coalesce(xp: Any, a: COOArray) -> str | None:
    return _common_reason(a, 0, None) or cuda_coalesce_reason(a)


@register("coalesce", (sparse_coo,), backend="torch", supports=_supports_coalesce)
def _coalesce_torch(xp: Any, a: COOArray) -> COOArray:
    """coalesce(COO) through torch's Tensor.coalesce; complex values as their real and imaginary parts."""
    if a._vals.is_complex():
        # torch adds complex numbers into a +0.0 part where both are -0.0 ((-0 - 1.5j) + (-0 - 0j) is
        # +0 - 1.5j, against IEEE 754 and the dense sum): the parts are summed as reals, a dense dimension
        parts = torch.view_as_real(a._vals.resolve_conj().resolve_neg())
        r = _coalesce_torch(xp, COOArray(a._idx, parts, (*a.shape, 2), backend=a._backend, xp=xp, fill_value=0))
        return COOArray(
            r._idx, torch.view_as_complex(r._vals.contiguous()), a.shape, backend=a._backend, xp=xp, coalesced=True,
            fill_value=a.fill_value,
        )  # fmt: skip
    t = to_torch(a).coalesce()
    # values(), not _values(): gradients flow through the former only
    return COOArray(
        t.indices().to(a._idx.dtype).contiguous(), t.values().contiguous(), a.shape, backend=a._backend, xp=xp,
        coalesced=True, fill_value=a.fill_value,
    )  # fmt: skip



