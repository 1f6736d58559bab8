"""Native reduction kernels of the torch backend: torch.sparse.softmax on COO arrays, ``scatter_reduce``
for COO arrays reduced over some sparse dimensions and for CSR and CSC arrays reduced along one, and
reductions over every axis (``sum``, ``max`` ... and ``mean``, ``var``, ``std``), which reduce the
stored values in one call and the fill value once.

The COO kernels group the entries by one int64 key of the kept sparse dimensions (runs of a coalesced
array's sorted keys, else ``torch.unique``), reduce each group with ``scatter_reduce`` and combine it
with the fill value, as the compressed kernels combine each slice, through the generic kernels'
helpers. They replace ``torch.sparse.sum``, which they outrun two to eight times on a million entries
and which has neither ``keepdim`` nor a fill value. ``softmax`` reads the unspecified elements as -inf
whatever they hold, which the public function has checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ... import dispatch
from ._register import register
from ...formats import COMPRESSED, COOArray, CompressedArray, SparseArray, sparse_coo
from ...formats._spec import Target
from ..array_api.conversion import is_plus_zero
from ..array_api.elementwise import python_scalar
from ..array_api.reduction import (
    MONOIDS,
    ReduceSpec,
    assemble,
    fill_array,
    fill_of,
    mean_of_sum,
    monoid_coo,
    result_kind,
    wide_groups_reason,
    with_fill,
)
from .conversion import complex_grad_reason, fold, from_torch, on_cuda, to_torch

__all__: list[str] = []

_UNSUPPORTED = (torch.uint16, torch.uint32, torch.uint64)


def _zero(xp: Any, dtype: Any) -> Any:
    return python_scalar(xp, xp.zeros((), dtype=dtype))


def _supports_softmax_coo(xp: Any, a: COOArray, spec: ReduceSpec) -> str | None:
    if spec.dtype not in (torch.float32, torch.float64):
        return f"torch.sparse.softmax is used for float32 and float64 only, not {spec.dtype}"
    if a.sparse_dim() == 0:
        return "torch.sparse.softmax needs a sparse dimension"
    return None


def _softmax_kernel(name: str, log: bool) -> Any:
    torch_fn = torch.sparse.log_softmax if log else torch.sparse.softmax

    def kernel(xp: Any, a: COOArray, spec: ReduceSpec) -> COOArray:
        values = a._vals.to(spec.dtype)
        t = to_torch(a._with_values(values, a.fill_value) if values is not a._vals else a)
        r = torch_fn(t, spec.axes[0])
        target = Target(sparse_coo, a._backend, xp, a.shape, a.sparse_dim(), a.dense_dim(), (1, 1), a.index_dtype, 0)
        return from_torch(r, target, float("-inf") if log else 0.0)  # type: ignore[return-value]

    kernel.__name__ = kernel.__qualname__ = f"_{name}_coo_torch"
    kernel.__doc__ = f"{name}(COO) -> COO through torch.sparse.{name} (unspecified = -inf); O(nnz log nnz)."
    return kernel


register("softmax", (sparse_coo,), backend="torch", supports=_supports_softmax_coo)(_softmax_kernel("softmax", False))
register("log_softmax", (sparse_coo,), backend="torch", supports=_supports_softmax_coo)(_softmax_kernel("log_softmax", True))


_SCATTER = {"sum": "sum", "prod": "prod", "max": "amax", "min": "amin"}


def _supports_axis(xp: Any, a: CompressedArray, spec: ReduceSpec) -> str | None:
    if a.layout.is_blocked:
        return "the torch kernels reduce CSR and CSC arrays, not blocks"
    if a.batch_dim():
        return f"the torch kernels reduce unbatched arrays, this one has batch_dim={a.batch_dim()}"
    if len(spec.axes) != 1 or spec.axes[0] > 1:
        return f"the torch kernels reduce one of the two sparse dimensions, not axes={spec.axes}"
    if spec.dtype in _UNSUPPORTED or spec.dtype is torch.bool:
        return f"torch's scatter_reduce does not handle dtype {spec.dtype}"
    return wide_groups_reason(a, spec.axes[0]) or complex_grad_reason("scatter_reduce", a)


def _axis_kernel(name: str) -> Any:
    monoid = MONOIDS[name]

    def kernel(xp: Any, a: CompressedArray, spec: ReduceSpec) -> Any:
        (d,) = spec.axes
        data = monoid.premap(xp, a._vals, spec.dtype)
        compressed, plain = a._compressed.to(torch.int64), a._plain.to(torch.int64)
        if d != a.layout.compressed_dim:
            # reduce within each compressed slice
            n_groups = compressed.shape[0] - 1
            counts = compressed[1:] - compressed[:-1]
            group = torch.repeat_interleave(torch.arange(n_groups, device=data.device), counts)
        else:
            # reduce each plain index across the slices
            n_groups = a.shape[1 - a.layout.compressed_dim]
            counts = torch.bincount(plain, minlength=n_groups)
            group = plain
        index = group.reshape(-1, *(1,) * (data.ndim - 1)).expand_as(data)
        out = torch.zeros((n_groups, *data.shape[1:]), dtype=data.dtype, device=data.device)
        out = out.scatter_reduce(0, index, data, _SCATTER[name], include_self=False)
        present = torch.nonzero(counts).reshape(-1)
        f = monoid.premap(xp, fill_array(xp, a), spec.dtype)
        n = a.shape[d]
        g = with_fill(xp, monoid, out[present], f, n - counts[present])
        keys = present.to(a.index_dtype).reshape(1, -1)
        return assemble(xp, a._backend, a.shape, 2, spec, keys, g, fill_of(xp, monoid, f, n))

    kernel.__name__ = kernel.__qualname__ = f"_{name}_compressed_torch"
    kernel.__doc__ = f"{name}(CSR/CSC) along one sparse dimension -> COO: scatter_reduce per slice; O(nnz + n)."
    return kernel


def _scatter_supports(name: str, supports: Callable[[Any, Any, ReduceSpec], str | None]) -> Callable[[Any, Any, ReduceSpec], str | None]:
    """``supports``, declining too what torch's CUDA ``scatter_reduce`` lacks for the reduction ``name``."""
    # ScatterGatherKernel.cu: on CUDA, scatter_reduce takes complex values for "sum" only; its prod, amax
    # and amin dispatch on the real types ("cuda_scatter_gather_base_kernel_func" not implemented for
    # 'ComplexFloat'), where the CPU kernel multiplies complex values too
    def supports_on_device(xp: Any, a: Any, spec: ReduceSpec) -> str | None:
        reason = supports(xp, a, spec)
        if reason is None and name != "sum" and spec.dtype.is_complex and on_cuda(a):
            return f"torch's CUDA scatter_reduce has no complex {_SCATTER[name]} kernel"
        return reason

    return supports_on_device


for _name in _SCATTER:
    register(_name, (COMPRESSED,), backend="torch", supports=_scatter_supports(_name, _supports_axis))(_axis_kernel(_name))


# -- COO over some sparse dimensions: scatter_reduce by one int64 key of the kept ones ----------------------


def _supports_coo(xp: Any, a: COOArray, spec: ReduceSpec) -> str | None:
    sd = a.sparse_dim()
    if len(spec.axes) == a.ndim:
        return "the _full_torch kernels reduce every axis (the values, then the fill value once)"
    if sd == 0 or result_kind(a.ndim, sd, spec.axes) == "structure":
        return "no sparse dimension is reduced (the generic kernel keeps the structure in O(nnz))"
    if a.dtype in _UNSUPPORTED or spec.dtype in _UNSUPPORTED or spec.dtype is torch.bool:
        return f"torch's scatter_reduce does not handle dtype {spec.dtype}"
    if math.prod(a.shape[d] for d in range(sd) if d not in spec.axes) > 2**63 - 1:
        return "the kept sparse dimensions do not fit one int64 key"
    return complex_grad_reason("scatter_reduce", a)


def _groups_by_key(xp: Any, monoid: Any, c: COOArray, kept: list[int], v: torch.Tensor) -> tuple[Any, Any, Any]:
    """The array_api ``sorted_groups`` by one int64 key of the kept sparse indices and ``scatter_reduce``:
    runs of a coalesced array's sorted keys, else ``torch.unique``'s; every sparse index reduced, one group."""
    idx = c._idx
    kept_shape = [c.shape[d] for d in kept]
    key = fold([idx[d] for d in kept], kept_shape) if kept else torch.zeros(c.nnz, dtype=torch.int64, device=idx.device)
    if c.is_coalesced() and kept == list(range(len(kept))):
        # the keys are sorted already: runs, without torch.unique's sort
        present, counts = torch.unique_consecutive(key, return_counts=True)
        group = torch.repeat_interleave(torch.arange(present.shape[0], device=key.device), counts)
    else:
        present, group, counts = torch.unique(key, sorted=True, return_inverse=True, return_counts=True)
    index = group.reshape(-1, *(1,) * (v.ndim - 1)).expand_as(v)
    out = torch.zeros((present.shape[0], *v.shape[1:]), dtype=v.dtype, device=v.device)
    g = out.scatter_reduce(0, index, v, _SCATTER[monoid.name], include_self=False)
    rows = []
    for size in reversed(kept_shape):
        rows.append(present % size)
        present = present // size
    keys = torch.stack(rows[::-1]) if rows else torch.zeros((0, g.shape[0]), dtype=torch.int64, device=g.device)
    return keys.to(c.index_dtype), g, counts


def _coo_kernel(name: str) -> Any:
    monoid = MONOIDS[name]

    def kernel(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
        return monoid_coo(xp, monoid, a, spec, _groups_by_key)

    kernel.__name__ = kernel.__qualname__ = f"_{name}_coo_torch"
    kernel.__doc__ = f"{name}(COO) over some sparse dimensions -> COO: scatter_reduce by one int64 key of the kept ones; O(nnz log nnz) in torch."
    return kernel


for _name in _SCATTER:
    register(_name, (sparse_coo,), backend="torch", supports=_scatter_supports(_name, _supports_coo))(_coo_kernel(_name))

_sum_coo = _coo_kernel("sum")


@register("mean", (sparse_coo,), backend="torch", supports=_supports_coo)
def _mean_coo_torch(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
    """mean(COO) over some sparse dimensions -> COO: the grouped, fill-aware sum over the full count; O(nnz log nnz) in torch."""
    return mean_of_sum(xp, _sum_coo(xp, a, spec), a, spec)


def _supports_full(xp: Any, a: SparseArray, spec: ReduceSpec) -> str | None:
    if len(spec.axes) != a.ndim:
        return f"this kernel reduces every axis, not axes={spec.axes} of {a.ndim}"
    if a.dtype in _UNSUPPORTED or spec.dtype in _UNSUPPORTED:
        return f"torch does not reduce dtype {a.dtype} (the generic kernels work on its signed twin)"
    return None


# The extrema reduce the values along their one axis (on one thread torch.amax(v, 0) takes about three
# quarters of the time of v.max()), then clamp the result at the fill value: one torch call instead of
# building the fill as a tensor for torch.maximum. Both propagate NaN, from the values or the fill.
_EXTREMA: dict[str, tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]] = {
    "max": (torch.amax, torch.clamp_min),
    "min": (torch.amin, torch.clamp_max),
}


def _full_kernel(name: str) -> Any:
    monoid = MONOIDS[name]
    extremum = _EXTREMA.get(name)

    def kernel(xp: Any, a: SparseArray, spec: ReduceSpec) -> Any:
        # These calls take a few milliseconds over millions of values and are timed against torch's own
        # one-call reductions. The Python and the small torch calls around the reduction run with the
        # caches that it flushes, at ten times their cost in a tight loop, so the common cases below
        # make as few calls as they can (docs/decisions.md, "Reductions over every axis on the torch
        # backend").
        fill, values = a.fill_value, a._vals
        duplicates = isinstance(a, COOArray) and not a.is_coalesced()
        # duplicates add up in the array's dtype (wrapping, rounding) before a cast to another result dtype
        if monoid.linear and is_plus_zero(fill) and (values.dtype == spec.dtype or not duplicates):
            # fill +0 adds nothing, and a torch sum starts from +0 (all -0.0 sum to +0.0, as in the dense
            # sum): the sum of the stored values, an uncoalesced COO array's duplicates as they are
            r = torch.sum(values if values.dtype == spec.dtype else monoid.premap(xp, values, spec.dtype), dtype=spec.dtype)
            return r.reshape((1,) * a.ndim) if spec.keepdims else r
        if duplicates:
            # duplicates sum first, and the unspecified elements are those of no distinct position
            a = dispatch.call("coalesce", (sparse_coo,), a._backend.name, xp, a)
            values = a._vals
        # every stored element is specified (a compressed array's blocks and batch padding included)
        values = monoid.premap(xp, values, spec.dtype)
        values = values if values.ndim == 1 else values.reshape(-1)
        n = values.shape[0]
        unspecified = max(math.prod(a.shape) - n, 0)
        if extremum is not None:
            reduce, clamp = extremum
            if n == 0:
                r = torch.full((), fill, dtype=values.dtype, device=values.device)
            else:
                r = reduce(values, 0)
                r = clamp(r, fill) if unspecified else r
        else:
            f = monoid.premap(xp, fill_array(xp, a), spec.dtype)
            if n == 0:
                r = fill_of(xp, monoid, f, unspecified)
            else:
                r = monoid.reduce(xp, values, (0,)).reshape(())
                if unspecified:
                    r = monoid.combine(xp, r, fill_of(xp, monoid, f, unspecified))
        r = r.to(spec.dtype) if r.dtype != spec.dtype else r
        return r.reshape((1,) * a.ndim) if spec.keepdims else r

    kernel.__name__ = kernel.__qualname__ = f"_{name}_full_torch"
    kernel.__doc__ = f"{name}(COO or compressed) over every axis -> 0-d strided: the stored values, then the fill value; O(nnz)."
    return kernel


for _name in MONOIDS:
    _kernel = _full_kernel(_name)
    register(_name, (COMPRESSED,), backend="torch", supports=_supports_full, priority=1)(_kernel)
    register(_name, (sparse_coo,), backend="torch", supports=_supports_full, priority=1)(_kernel)


# mean, var and std over every axis: the stored values in one torch call, the fill value in closed form.
# Every stored element is specified (a compressed array's blocks and batch padding included, a COO
# array's once coalesced), so the N - n others hold the fill value f. The variance combines the values'
# own (population) variance and mean with the f's by the parallel formula (Chan, Golub and LeVeque):
#   M2 = n * var_v + (mean_v - f)**2 * n * (N - n) / N,   var = M2 / (N - correction),
# a sum of two non-negative terms (no cancellation), from torch.var and torch.sum of the values.

_REAL_FLOATING = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})
_FLOATING = _REAL_FLOATING | {torch.complex64, torch.complex128}


def _supports_statistic(kinds: frozenset[torch.dtype], what: str) -> Callable[..., str | None]:
    def supports(xp: Any, a: SparseArray, spec: ReduceSpec) -> str | None:
        if len(spec.axes) != a.ndim:
            return f"this kernel reduces every axis, not axes={spec.axes} of {a.ndim}"
        if a.dtype not in kinds or spec.dtype != a.dtype:
            return f"this kernel computes {what} dtypes in their own dtype, not {a.dtype} as {spec.dtype}"
        return None

    supports.__name__ = supports.__qualname__ = f"_supports_{what.replace(' ', '_')}_statistic"
    return supports


def _nan(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # nan + nanj for complex dtypes, as 0j / 0 and torch's mean of nothing give
    nan = complex(math.nan, math.nan) if dtype.is_complex else math.nan
    return torch.full((), nan, dtype=dtype, device=values.device)


def _specified(xp: Any, a: SparseArray) -> SparseArray:
    """``a`` with every stored element a distinct specified one: an uncoalesced COO array coalesced."""
    if isinstance(a, COOArray) and not a.is_coalesced():
        return dispatch.call("coalesce", (sparse_coo,), a._backend.name, xp, a)  # type: ignore[no-any-return]
    return a


def _full_mean(xp: Any, a: SparseArray, spec: ReduceSpec) -> torch.Tensor:
    """The mean of every element of ``a`` (0-d): the values' sum plus the fill value's, over the count."""
    total = math.prod(a.shape)
    if total == 0:
        return _nan(a._vals, spec.dtype)
    fill = a.fill_value
    # 16-bit floats are summed in float32, as torch's own mean does: their sum overflows long before
    # their mean (1000 values of 100 sum to inf in float16)
    acc = torch.float32 if spec.dtype in (torch.float16, torch.bfloat16) else None
    if is_plus_zero(fill):
        # the unspecified +0 add nothing, and duplicates add up: the values as they are
        return (torch.sum(a._vals, dtype=acc) / total).to(spec.dtype)
    values = _specified(xp, a)._vals
    unspecified = total - values.numel()
    s = torch.sum(values, dtype=acc)
    if unspecified and s.is_complex():
        # copies of a complex fill added up as the dense sum adds them, and added to the values' sum as a
        # sum of two: a complex product by their number, and torch's complex +, mix the parts at an
        # infinity ((inf + 1j) * 2 is inf + nanj, the sum inf + 2j)
        sum_ = MONOIDS["sum"]
        s = sum_.combine(xp, s, fill_of(xp, sum_, sum_.premap(xp, fill_array(xp, a), s.dtype), unspecified))
    elif unspecified:
        s = s + fill * unspecified
    return (s / total).to(spec.dtype)


def _full_var(xp: Any, a: SparseArray, spec: ReduceSpec) -> torch.Tensor:
    """The variance of every element of ``a`` (0-d), by the parallel formula above."""
    total, correction = math.prod(a.shape), spec.correction
    if total - correction <= 0:
        return _nan(a._vals, spec.dtype)
    values = _specified(xp, a)._vals.reshape(-1)
    n, fill = values.shape[0], a.fill_value
    unspecified = total - n
    if unspecified == 0:
        return torch.var(values, correction=correction)
    if not math.isfinite(fill):
        # (f - mean) is inf - inf or NaN: so is the variance, as in the dense computation
        return _nan(values, spec.dtype)
    if n == 0:
        return torch.zeros((), dtype=spec.dtype, device=values.device)
    # torch.var and a sum, not torch.var_mean, whose fused pass took 8 times as long as both (torch 2.13,
    # CPU). The sum accumulates in float64 (without a copy): mean - f, the difference of two numbers that
    # may be close, is where a float32 mean would lose most (2e-3 of the variance of 1e4 + U(0, 1) with f = 1e4)
    var = torch.var(values, correction=0)
    delta = torch.sum(values, dtype=torch.float64) / n
    delta = delta if fill == 0 else delta - fill
    denominator = total - correction
    r = torch.addcmul(var * (n / denominator), delta, delta, value=n * unspecified / (total * denominator))
    return r if r.dtype == spec.dtype else r.to(spec.dtype)


def _statistic_kernel(name: str, compute: Callable[[Any, SparseArray, ReduceSpec], torch.Tensor], root: bool = False) -> Any:
    def kernel(xp: Any, a: SparseArray, spec: ReduceSpec) -> torch.Tensor:
        r = compute(xp, a, spec)
        r = torch.sqrt(r) if root else r
        return r.reshape((1,) * a.ndim) if spec.keepdims else r

    kernel.__name__ = kernel.__qualname__ = f"_{name}_full_torch"
    kernel.__doc__ = f"{name}(COO or compressed) over every axis -> 0-d strided: torch reductions of the values, the fill value in closed form; O(nnz)."
    return kernel


_SUPPORTS_REAL = _supports_statistic(_REAL_FLOATING, "real floating")
for _name, _kernel, _supports in (
    ("mean", _statistic_kernel("mean", _full_mean), _supports_statistic(_FLOATING, "floating")),
    ("var", _statistic_kernel("var", _full_var), _SUPPORTS_REAL),
    ("std", _statistic_kernel("std", _full_var, root=True), _SUPPORTS_REAL),
):
    register(_name, (COMPRESSED,), backend="torch", supports=_supports, priority=1)(_kernel)
    register(_name, (sparse_coo,), backend="torch", supports=_supports, priority=1)(_kernel)
