"""Native elementwise kernels of the torch backend.

- ``erf`` and ``erfinv``, which the Array API lacks, from ``torch.special``.
- torch.sparse's own ``add`` and ``mul`` where torch computes the exact result: operands of one shape
  (torch drops data when it broadcasts a size-1 dimension of a sparse operand: pytorch/pytorch#188900,
  #158861, #116633), fill value 0, and for products only finite values (torch evaluates a product on
  the intersection of the entries, so that ``inf`` times an unspecified 0 gives 0 instead of NaN), and
  no uint16, uint32 or uint64 operand (torch's sparse kernels compute none of them, and torch promotes
  them with no other dtype), and no 0-d dense operand (which acts as a scalar: the result keeps the
  sparse layout, where torch's 0-d dense + 0-d sparse is dense). Each kernel declines anything else with
  its reason, and the generic kernels compute it.

- ``floor_divide`` and ``remainder`` of uint64 operands, which torch does not divide ("div_floor_cpu"
  not implemented for 'UInt64') and which have no wider signed twin: computed exactly on the int64
  reinterpretation of the bits (:func:`_uint64_division`). These kernels are the generic kernels again,
  for every layout signature, with that division in place of torch's; every other dtype goes to the
  generic kernel unchanged.

Unary functions mostly have no native kernel here: the generic kernel already calls torch on the
values, which is what torch's own sparse unary functions do. The exceptions fix complex values where
torch's kernels give another value than the Array API standard:

- ``negative`` of complex values is computed on the real view, as torch's vectorised complex negation
  leaves a +0.0 part +0.0;
- ``acos``, ``expm1``, ``log1p`` and ``tanh`` of complex values put the standard's special-case values
  (:data:`_COMPLEX_SPECIAL_CASES`) over torch's result with one ``torch.where``; real values take the
  generic kernel's path, the same call.

The generic sparse kernels map the stored values and the fill value through these strided kernels, so
a sparse array gets the same values, its fill value included (``acos`` of fill value ``0j`` is
``pi/2 - 0j``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, cast

import torch

from ... import dispatch
from ._register import register
from ...formats import COOArray, CompressedArray, SparseArray, sparse_coo, sparse_csr, strided
from ...formats._spec import Target
from ..array_api import elementwise as generic  # registers the generic kernels that the division kernels wrap
from ..array_api.conversion import coalesce_coo, is_plus_zero
from ..array_api.elementwise import past_floating_range, python_scalar
from .conversion import _holds_negative_zero, complex_grad_reason, cuda_coalesce_reason, from_torch, negative_zeros, to_torch, verified

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


def _supports_negative(xp: Any, x: torch.Tensor) -> str | None:
    if not x.is_complex():
        return "torch negates real values exactly"
    return None


@register("negative", (strided,), backend="torch", supports=_supports_negative)
def _negative_strided_torch(xp: Any, x: torch.Tensor) -> torch.Tensor:
    """negative(complex strided): both parts negated, signs of zeros included; O(numel)."""
    # torch's vectorised complex negation computes 0 - x, which leaves a +0.0 part +0.0 (from 8 elements
    # on; shorter tensors and 0-d ones give -0.0); negating the real view flips every sign bit
    parts = torch.view_as_real(x.resolve_conj().resolve_neg()).neg()
    return torch.view_as_complex(parts)


# -- complex special cases of the Array API standard -------------------------------------------------------
# The standard lists, for each elementwise function, the value at special complex inputs (signed zeros,
# infinities, NaN: "Special cases", "For complex floating-point operands"), and asks f(conj(x)) ==
# conj(f(x)). torch's complex kernels miss a few of them, and which ones depends on the code path (a
# vectorised loop from about 8 elements on, or not; the CPU's instruction set): complex128 acos gives an
# imaginary part +0.0 on the whole segment [-1, 1] of both edges of the real axis; expm1 gives -0 + 0j for
# -0 + 0j and NaN parts for a non-finite real part; log1p gives NaN + NaN j where one part is infinite and
# the other NaN, or the imaginary part infinite and the real part tiny; tanh gives 1 - 0j for some
# +infinity + yj, y > 0 (C99's 1 + 0*sin(2y) j). For each function, a mask of the inputs whose result is
# replaced (from the real and imaginary parts) and the replacement there. The replacement at an infinite
# or NaN input is computed on detached parts (the derivative there is 0 or undefined), at a finite input
# (the zeros) from the input itself, so that gradients flow as through torch's function.


def _acos_special(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (b == 0) & (a.abs() <= 1)


def _acos_value(z: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    # acos(±0 + 0j) is pi/2 - 0j, and by conjugate symmetry acos(x ± 0j) is acos(x) ∓ 0j on [-1, 1]: the
    # imaginary part -b there (a zero), with torch's derivative: imag.detach() - imag is +0, and ∓0 - (+0)
    # is ∓0
    imag = out.imag
    return torch.complex(out.real, -b.detach() - (imag.detach() - imag))


def _expm1_special(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return ~torch.isfinite(a) | ((a == 0) & (b == 0))


def _expm1_value(z: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    # the standard's table is exp(x) - 1 at a non-finite real part, with 1 subtracted from the real part
    # alone (torch's complex x - 1 adds -1 + 0j, making a -0.0 part +0.0); at ±0 ± 0j it is +0 ± 0j, and
    # expm1 is the identity to first order there: a + 0.0 turns -0.0 into +0.0 and keeps the gradient
    e = torch.exp(z.detach())
    return torch.where(torch.isfinite(a), torch.complex(a + 0.0, b), torch.complex(e.real - 1, e.imag))


def _log1p_special(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.isinf(a) | torch.isinf(b)


def _log1p_value(z: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    # 1 + x is x where a part is infinite, and the standard's table there is log's: +infinity + atan2(b, a) j
    ad, bd = a.detach(), b.detach()
    return torch.complex(torch.full_like(ad, math.inf), torch.atan2(bd, ad))


def _tanh_special(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.isinf(a) & torch.isfinite(b)


def _tanh_value(z: torch.Tensor, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    # tanh(+infinity + yj) is 1 + 0j for y > 0; tanh is odd and conjugate-symmetric: ±1 + 0j, the sign of y
    ad, bd = a.detach(), b.detach()
    return torch.complex(torch.sign(ad), torch.copysign(torch.zeros_like(bd), bd))


_COMPLEX_SPECIAL_CASES: dict[str, tuple[Callable[[torch.Tensor, torch.Tensor], torch.Tensor], Callable[..., torch.Tensor]]] = {
    "acos": (_acos_special, _acos_value),
    "expm1": (_expm1_special, _expm1_value),
    "log1p": (_log1p_special, _log1p_value),
    "tanh": (_tanh_special, _tanh_value),
}


def _complex_special_kernel(name: str) -> Callable[..., Any]:
    """The strided kernel of ``name``: the generic kernel's call, and for complex values the standard's
    special-case values put over it with one ``torch.where``."""
    compute = generic.UNARY[name]
    special, value = _COMPLEX_SPECIAL_CASES[name]

    def kernel(xp: Any, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = compute(xp, x)
        if not x.is_complex():
            return out
        z = x.resolve_conj().resolve_neg()
        a, b = z.real, z.imag
        where = special(a, b)
        if where.device.type == "cpu" and not bool(where.any()):
            # on the CPU the mask is read without a device synchronisation: nothing to replace is the
            # common case, and it skips the replacement's cost (a transcendental function for some)
            return out
        return torch.where(where, value(z, a, b, out), out)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_strided_torch"
    kernel.__doc__ = (
        f"{name}(strided) through torch; complex values get the Array API's special-case values (one "
        "torch.where), real values torch's result as it is; O(numel)."
    )
    return kernel


for _name in _COMPLEX_SPECIAL_CASES:
    register(_name, (strided,), backend="torch")(_complex_special_kernel(_name))


@register("erfinv", (strided,), backend="torch")
def _erfinv_strided_torch(xp: Any, x: torch.Tensor) -> torch.Tensor:
    """erfinv(strided) through torch.special.erfinv; O(numel)."""
    return cast(torch.Tensor, torch.special.erfinv(x))


def _finite(xp: Any, t: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether every element is finite once promoted to ``dtype``: their sum is (inf and NaN propagate; an
    overflowing sum only sends the call to the generic kernel). One read of ``t``, several times faster
    than isfinite().all(). An integer is finite unless ``dtype`` is floating and cannot hold it."""
    if t.is_floating_point() or t.is_complex():
        return bool(torch.isfinite(t.sum()))
    if not (dtype.is_floating_point or dtype.is_complex) or t.dtype == torch.bool:
        return True
    return not past_floating_range(xp, t, dtype)


def _same_structure_reason(a: SparseArray, other: Any) -> str | None:
    """Why torch's sparse add and mul cannot compute ``a`` with ``other``: shapes, fill values, dtypes."""
    for operand in (a, other):
        if operand.dtype in _STORED_ONLY:
            return f"torch's sparse add and mul have no kernel for {operand.dtype} and promote it with no other dtype"
    if tuple(a.shape) != tuple(other.shape):
        return "torch's sparse add and mul do not broadcast correctly (pytorch/pytorch#188900, #158861, #116633)"
    if not is_plus_zero(a.fill_value) or (isinstance(other, SparseArray) and not is_plus_zero(other.fill_value)):
        return "torch's sparse tensors have fill value +0"
    return complex_grad_reason("compressed sparse tensors", *(x for x in (a, other) if isinstance(x, CompressedArray)))


def _product_reason(a: SparseArray, other: Any) -> str | None:
    reason = _same_structure_reason(a, other)
    if reason is not None:
        return reason
    if a.dtype == torch.bool or other.dtype == torch.bool:
        return "torch has no sparse mul for bool"
    if (a.dtype.is_complex or other.dtype.is_complex) and a.dense_dim():
        # (-0+0j) * 1j is -0+0j, and torch's dense product says so, but its hybrid sparse mul gives +0+0j
        return "torch's sparse mul of complex values with dense dimensions gives zero parts other signs than its dense product"
    others = [a._vals] + ([other._vals] if isinstance(other, SparseArray) else [other])
    promoted = torch.promote_types(a.dtype, other.dtype)
    if not all(_finite(a._xp, t, promoted) for t in others):
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
    if x.dense_dim() and (x.dtype.is_floating_point or y.dtype.is_floating_point):
        # 0.0 * -2.0 is -0.0, and torch's dense product says so, but its hybrid COO mul gives +0.0
        return "torch's mul of COO tensors with dense dimensions gives +0.0 for the products that are -0.0"
    return _product_reason(x, y) or cuda_coalesce_reason(*(a for a in (x, y) if not a.is_coalesced()))


@register("multiply", (sparse_coo, sparse_coo), backend="torch", supports=_supports_coo_coo_mul)
def _multiply_coo_coo_torch(xp: Any, x: COOArray, y: COOArray) -> SparseArray:
    """multiply(COO, COO), one shape, fill 0, finite values: torch's intersection mul; O(nnz log nnz)."""
    # torch's mul coalesces an uncoalesced operand its own way, which makes a -0.0 product +0.0; torch's
    # coalesce keeps the sign of a lone -0.0 on the CPU (on CUDA it does not: declined where one is stored),
    # but adds complex duplicates with torch's complex + (-0 - 0j twice is 0 + 0j): xsparse's coalesce, which
    # keeps the signs of both parts
    tx, ty = (to_torch(a if a.is_coalesced() else a.coalesce()) for a in (x, y))
    return _result(tx * ty, x, xp)


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
    if reason is None and (_holds_negative_zero(x._vals) or _holds_negative_zero(y._vals)):
        # an entry of one side is copied as it is, where -0.0 + +0.0 is +0.0
        return _NEGATIVE_ZERO_REASON
    return reason


@register("add", (sparse_csr, sparse_csr), backend="torch", supports=_supports_csr_csr_add)
def _add_csr_csr_torch(xp: Any, x: CompressedArray, y: CompressedArray) -> SparseArray:
    """add(CSR, CSR), 2-D, one shape, fill 0, one floating dtype: torch's (MKL) CSR add; O(nnz)."""
    return _result(to_torch(x) + to_torch(y), x, xp)


def _zero_dim_reason(d: torch.Tensor) -> str | None:
    """Why torch's sparse-with-dense kernels do not take the strided ``d``: a 0-d one acts as a scalar."""
    if d.ndim == 0:
        # torch's 0-d dense + 0-d sparse is a dense tensor; a 0-d operand keeps the sparse layout, as on
        # every backend (docs/decisions.md, "Result layouts"): the generic scalar kernel computes it
        return "a 0-d strided operand acts as a scalar, and the result keeps the sparse layout (torch's is dense)"
    return None


def _supports_mul_dense(xp: Any, x: Any, y: Any) -> str | None:
    a, d = (x, y) if isinstance(x, SparseArray) else (y, x)
    if (reason := _zero_dim_reason(d)) is not None:
        return reason
    if a.layout is sparse_csr and a.dtype == torch.bool:
        return "torch has no CSR mul for bool"
    if torch.is_grad_enabled() and d.requires_grad:
        # torch's backward gives the strided operand a gradient in the sparse layout: a COO tensor
        # (which optimizers such as Adam refuse), or a CSR one that autograd itself rejects ("invalid
        # gradient ... expected layout Strided"); the generic kernel's gradient is strided
        return "torch's sparse * strided gives the strided operand a sparse gradient, and it requires grad"
    return _plain_csr_reason(a) or _product_reason(a, d)


@register("multiply", (sparse_coo, strided), backend="torch", supports=_supports_mul_dense)
@register("multiply", (strided, sparse_coo), backend="torch", supports=_supports_mul_dense)
@register("multiply", (sparse_csr, strided), backend="torch", supports=_supports_mul_dense)
@register("multiply", (strided, sparse_csr), backend="torch", supports=_supports_mul_dense)
def _multiply_sparse_strided_torch(xp: Any, x: Any, y: Any) -> SparseArray:
    """multiply(COO or CSR, strided) either way round, one shape, fill 0, finite: torch's sparse mul; O(nnz)."""
    # torch multiplies the duplicates of an uncoalesced COO array one by one, and v1*d + v2*d is not
    # (v1 + v2)*d when the sum is a zero (its sign): sum them first, as the generic kernel does
    x, y = (coalesce_coo(xp, v) if isinstance(v, COOArray) else v for v in (x, y))
    a = x if isinstance(x, SparseArray) else y
    t = to_torch(x) * y if isinstance(x, SparseArray) else x * to_torch(y)
    return _result(t, a, xp)


_NEGATIVE_ZERO_REASON = (
    "torch's sparse add skips the unspecified elements, and a stored -0.0 meets them as IEEE 754 says only "
    "in the generic kernel (-0.0 + +0.0 is +0.0)"
)


def _supports_add_dense(xp: Any, x: Any, y: Any) -> str | None:
    a, d = (x, y) if isinstance(x, SparseArray) else (y, x)
    if x.dtype.is_complex or y.dtype.is_complex:
        # torch's sparse + dense adds complex numbers as x + 1 * y, which mixes the parts at an infinity
        # (inf + nan j where the dense sum gives inf + 1j); the generic kernel adds as the dense operands do
        return "torch's sparse + dense complex add mixes the real and imaginary parts at an infinity"
    reason = _zero_dim_reason(d) or _plain_csr_reason(a) or _same_structure_reason(a, d)
    if reason is None and a._vals.is_complex() and _holds_negative_zero(a._vals):
        return _NEGATIVE_ZERO_REASON  # a real -0.0 is put right after torch's add (_put_negative_zeros)
    return reason


def _with_negative_zeros(xp: Any, a: SparseArray) -> tuple[SparseArray, torch.Tensor | None]:
    """``a``, coalesced if it is a COO array, and where its values are -0.0 (None where none is, and for
    integer and complex dtypes).

    torch adds the duplicates of an uncoalesced array into the dense operand one by one, and
    ``(d + v1) + v2`` is not ``d + (v1 + v2)``: rounded otherwise, and with another sign where it is a
    zero (``(-0.0 + 1.0) + -1.0`` is ``+0.0``, ``-0.0 + (1.0 + -1.0)`` is ``-0.0``).
    """
    if isinstance(a, COOArray):
        a = coalesce_coo(xp, a)
    if not a._vals.is_floating_point() or not _holds_negative_zero(a._vals):
        return a, None
    return a, negative_zeros(a._vals)


def _put_negative_zeros(out: torch.Tensor, a: SparseArray, stored: torch.Tensor, where: torch.Tensor) -> None:
    """Write -0.0 into ``out`` where ``a`` stores a -0.0 (``stored``, over its values) and ``where`` (bool,
    ``out``'s shape) holds."""
    if not bool(where.any()):
        return
    nz = torch.nonzero(stored)
    entry, within = nz[:, 0], nz[:, 1:].unbind(1)
    if isinstance(a, COOArray):
        lead = tuple(verified(a)._idx[:, entry].long())  # these indices address out
    else:  # a 2-D CSR array (_plain_csr_reason)
        c = verified(cast(CompressedArray, a))
        rows = torch.repeat_interleave(torch.arange(a.shape[0], device=out.device), c._compressed.diff())
        lead = (rows[entry], c._plain[entry].long())
    positions = (*lead, *within)
    keep = where[positions]
    out[tuple(p[keep] for p in positions)] = -0.0


def _signed_zeros_of(d: torch.Tensor, negative: bool) -> torch.Tensor:
    """Where ``d`` (its real part) holds -0.0 (``negative``) or a zero that converts to +0.0 (+0.0, the 0
    of an integer, False); one comparison of the bits."""
    if d.dtype == torch.bool:
        return torch.zeros_like(d) if negative else ~d
    if d.is_complex():
        d = d.real  # a real sparse operand meets the real part
    if not d.is_floating_point():
        return torch.zeros_like(d, dtype=torch.bool) if negative else d == 0
    return negative_zeros(d, negative)


def _plus_zero(d: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A new tensor of ``d`` in ``dtype``, plus ``+0.0`` if floating: ``-0.0 + +0.0`` is ``+0.0``, the
    element of ``d`` plus an unspecified one, which torch's sparse add leaves as it is. A clone costs
    the same pass."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return d.to(dtype, copy=True)
    if d.dtype == dtype:
        return torch.add(d, 0.0)
    return d.to(dtype).add_(0.0)


def _supports_subtract_dense(xp: Any, x: Any, y: Any) -> str | None:
    if x.dtype == torch.bool or y.dtype == torch.bool:
        return "torch has no subtraction of booleans (the generic kernel raises torch's own error)"
    if x.dtype.is_complex or y.dtype.is_complex:
        # torch's dense subtraction does the same, and the generic kernel gives its result
        return "torch subtracts complex values as x + (-1 + 0j) * y, whose zero parts the sparse kernels cannot match"
    return _supports_add_dense(xp, x, y)


@register("add", (strided, sparse_coo), backend="torch", supports=_supports_add_dense)
@register("add", (sparse_coo, strided), backend="torch", supports=_supports_add_dense)
@register("add", (strided, sparse_csr), backend="torch", supports=_supports_add_dense)
@register("add", (sparse_csr, strided), backend="torch", supports=_supports_add_dense)
def _add_sparse_strided_torch(xp: Any, x: Any, y: Any) -> torch.Tensor:
    """add(COO or CSR, strided) either way round, one shape, fill 0: torch's dense + sparse; O(numel + nnz)."""
    d, a = (x, y) if isinstance(y, SparseArray) else (y, x)
    a, stored = _with_negative_zeros(xp, a)
    t = to_torch(a)
    # (d + 0.0) + v is d + v, sign of a zero included, but where both are -0.0 (it gives +0.0); the
    # + 0.0 costs what torch's own copy of d does
    # contiguous for a CSR tensor, which torch adds into no other ("out argument must be contiguous"; a
    # strided operand such as x.mT keeps its strides through the + 0.0)
    out = _plus_zero(d, torch.result_type(d, t))
    out = (out if t.layout is torch.sparse_coo else out.contiguous()).add_(t)
    if stored is not None and _holds_negative_zero(d.real if d.is_complex() else d):
        _put_negative_zeros(out, a, stored, _signed_zeros_of(d, negative=True))
    return out


@register("subtract", (strided, sparse_coo), backend="torch", supports=_supports_subtract_dense)
@register("subtract", (sparse_coo, strided), backend="torch", supports=_supports_subtract_dense)
@register("subtract", (strided, sparse_csr), backend="torch", supports=_supports_subtract_dense)
@register("subtract", (sparse_csr, strided), backend="torch", supports=_supports_subtract_dense)
def _subtract_sparse_strided_torch(xp: Any, x: Any, y: Any) -> torch.Tensor:
    """subtract(COO or CSR, strided) either way round, one shape, fill 0: torch's dense + sparse; O(numel + nnz)."""
    if isinstance(y, SparseArray):
        # d + (-v) is d - v, and d - (+0.0) is d, so the unspecified elements may be skipped
        y, _ = _with_negative_zeros(xp, y)
        return torch.add(x, to_torch(y), alpha=-1)
    x, stored = _with_negative_zeros(xp, x)
    t = to_torch(x)
    dtype = torch.result_type(t, y)
    if dtype.is_floating_point or dtype.is_complex:
        # torch has no sparse - dense: (+0.0 - d) + v is v - d, sign of a zero included, but where v is
        # -0.0 and d is +0.0 (it gives +0.0)
        out = torch.rsub(y.to(dtype), 0.0)
        out = (out if t.layout is torch.sparse_coo else out.contiguous()).add_(t)
        if stored is not None:
            _put_negative_zeros(out, x, stored, _signed_zeros_of(y, negative=False))
        return out
    # integers: -(d - s) is the same number (negation comes after the type promotion, which negating d
    # first would not: -uint8 wraps around)
    return torch.add(y, t, alpha=-1).neg_()


# -- floor division and remainder of uint64 ---------------------------------------------------------------
# torch divides no uint64 (nor uint16/uint32, which the generic kernels divide exactly on int64), and a
# uint64 has no wider signed twin. The division runs on the int64 tensors with the same bits, in steps
# that torch computes for int64 and that never overflow it:
#
# - a divisor d with the top bit set (d >= 2**63, negative as int64) goes into n at most once: the
#   quotient is n >= d (unsigned, which is the signed comparison with both sign bits flipped), the
#   remainder n - d where it is 1 (both negative as int64, so the difference is in [0, 2**63));
# - a divisor 0 < d < 2**63 divides h = n >> 1 (a logical shift: non-negative) as int64: h = q*d + r;
#   then n = 2*q*d + (2*r + b) with b = n & 1 and 0 <= 2*r + b < 2*d, so one more d fits where
#   s = r + (r + b - d) >= 0 (each partial sum lies within [-d, d)): the quotient is 2*q + (s >= 0),
#   the remainder s there, else 2*r + b (whose bits are right even where it exceeds 2**63 - 1);
# - a divisor 0 gives 0 for both, NumPy's result and xsparse's rule for an integer division by zero.

_SIGN_BIT = -(2**63)
_LOW_BITS = 2**63 - 1
_UNSIGNED = frozenset({torch.uint8, torch.uint16, torch.uint32, torch.uint64})


def _as_int64_bits(v: Any, device: Any) -> torch.Tensor:
    """An unsigned tensor or Python int as the int64 tensor with the bits of its uint64 value."""
    if isinstance(v, int):
        return torch.tensor((v + 2**63) % 2**64 - 2**63, dtype=torch.int64, device=device)
    t = cast(torch.Tensor, v)
    return t.view(torch.int64) if t.dtype == torch.uint64 else t.to(torch.int64)


def _uint64_division(name: str, x: Any, y: Any, device: Any = None) -> torch.Tensor:
    """``floor_divide`` or ``remainder`` of ``x`` and ``y`` (unsigned tensors or Python ints, one uint64
    at least; two ints on ``device``) as uint64, exact for every value, 0 where ``y`` is 0. O(numel), a
    dozen int64 passes."""
    device = next((v.device for v in (x, y) if isinstance(v, torch.Tensor)), device)
    n, d = _as_int64_bits(x, device), _as_int64_bits(y, device)
    wide = d < 0
    small = torch.where(d > 0, d, 1)
    h = torch.bitwise_and(n >> 1, _LOW_BITS)
    b = torch.bitwise_and(n, 1)
    if name == "floor_divide":
        q = torch.div(h, small, rounding_mode="trunc")
        r = h - q * small
    else:
        r = torch.remainder(h, small)
    s = r + (r + b - small)
    fits = s >= 0
    once = torch.bitwise_xor(n, _SIGN_BIT) >= torch.bitwise_xor(d, _SIGN_BIT)
    if name == "floor_divide":
        out = torch.where(wide, once.to(torch.int64), torch.bitwise_or(q << 1, fits.to(torch.int64)))
    else:
        out = torch.where(wide, n - torch.where(once, d, 0), torch.where(fits, s, torch.bitwise_or(r << 1, b)))
    return torch.where(d == 0, 0, out).view(torch.uint64)


def _divides_uint64(x: Any, y: Any) -> bool:
    """Whether ``x`` and ``y`` are unsigned integers (arrays or Python ints) whose division is uint64's."""
    if any(isinstance(v, (float, complex)) for v in (x, y)):
        return False
    dtypes = [v.dtype for v in (x, y) if not isinstance(v, int)]  # a Python bool is an int here
    return torch.uint64 in dtypes and all(d in _UNSIGNED for d in dtypes)


def _zeros_of(v: Any) -> Any:
    """``v`` with every element 0 (a sparse array's structure and dtype kept, fill value 0)."""
    if isinstance(v, SparseArray):
        return v._with_values(torch.zeros_like(v._vals), 0)
    return 0 if isinstance(v, int) else torch.zeros_like(v)


def _division_kernel(name: str, kernel: dispatch.Kernel) -> Callable[..., Any]:
    """The generic ``kernel`` of ``name`` again, dividing uint64 operands with :func:`_uint64_division`.

    Where an operand is sparse, the generic kernel of ``bitwise_or`` (exact on uint64) aligns the
    operands: ``x | zeros(y)`` and ``zeros(x) | y`` have the structure that ``name(x, y)`` has (the
    union of the entries, in the result's layout, broadcast; a strided result where one operand is
    strided), holding the elements of ``x`` and of ``y`` there and their fill values.
    """

    @functools.wraps(kernel.func)
    def wrapper(xp: Any, x: Any, y: Any) -> Any:
        if not _divides_uint64(x, y):
            return kernel.func(xp, x, y)
        for i, v in enumerate((x, y), 1):
            if isinstance(v, int) and not 0 <= v < 2**64:
                # NumPy raises here too; wrapping modulo 2**64 would divide by another number
                raise OverflowError(f"{name}: a Python int outside uint64's range (x{i}={v}). Pass a value in [0, 2**64).")
        if not (isinstance(x, SparseArray) or isinstance(y, SparseArray)):
            return _uint64_division(name, x, y)
        layouts = tuple(v.layout if isinstance(v, SparseArray) else e for v, e in zip((x, y), kernel.signature))
        left = dispatch.call("bitwise_or", layouts, "torch", xp, x, _zeros_of(y))
        right = dispatch.call("bitwise_or", layouts, "torch", xp, _zeros_of(x), y)
        if not isinstance(left, SparseArray):
            return _uint64_division(name, left, right)
        fill = _uint64_division(name, left.fill_value, right.fill_value, left.device)
        return left._with_values(_uint64_division(name, left._vals, right._vals), python_scalar(xp, fill))

    wrapper.__name__ = wrapper.__qualname__ = f"{kernel.name}_torch"
    wrapper.__doc__ = f"{(kernel.func.__doc__ or '').rstrip('.')}; uint64 divided exactly on its int64 bits."
    return wrapper


for _name in ("floor_divide", "remainder"):
    for _kernel in [k for k in dispatch.kernels(_name) if k.backend is None]:
        register(_name, _kernel.signature, backend="torch", supports=_kernel.supports)(_division_kernel(_name, _kernel))
