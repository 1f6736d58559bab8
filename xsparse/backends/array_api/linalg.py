"""Generic linear-algebra kernels (Array API only): products of sparse and strided arrays, and solvers.

Shapes follow the Array API's ``matmul``: ``(..., M, K) @ (..., K, N)``, a 1-D operand being a vector,
batch dimensions broadcast. Every sparse operand is read as its *element COO*: one entry per specified
element, every dimension before the dense ones sparse (the batch dimensions of a compressed array
included, the elements of a BSR/BSC block each an entry). The kernels then only gather, multiply,
sort and add:

* sparse @ strided gathers the rows of ``b`` at the entries' plain indices, multiplies them by the
  values and adds up each output row's products with a segmented scan (``_segment_scan``), exact and
  backend-neutral (no scatter, which the standard lacks), then gathers the rows into the result;
* strided @ sparse is ``(b.mT @ a.mT).mT``, the transposed sparse operand being an index swap;
* sparse @ sparse (SpGEMM) expands, for each entry ``(i, k)`` of ``a``, the entries of row ``k`` of
  ``b`` (located with ``searchsorted``), and coalesces the products;
* SDDMM (``sampled_addmm``) gathers rows of ``a`` and columns of ``b`` at the mask's elements.

A non-zero fill value ``f`` of a sparse factor is handled exactly where the product stays what it
should be: ``A = S + f * (J - P)`` (``P`` the pattern), so ``A @ B = S @ B + f * (colsum(B) - P @ B)``,
the values entering the products as they are. Where the result would not be sparse (sparse @ sparse) the kernel
declines. On torch every kernel is built from differentiable operations, so gradients reach the
values and the strided operands.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import array_api_compat

from ... import dispatch
from ...dispatch import register
from ...formats import ANY, INDEXED, COOArray, CompressedArray, Layout, SparseArray, sparse_coo, strided
from ...formats._invariants import dtype_name, is_half_precision
from ...formats._ops import contiguous, lexsort_indices, prod
from ...formats._spec import Target
from .conversion import (
    _linearize,
    _unravel,
    block_coo_to_compressed,
    coalesce_coo,
    compressed_to_block_coo,
    compressed_to_coo,
    coo_to_block_coo,
    fill_like,
    result_dtype,
    take_values,
    through_signed,
)
from . import iterative
from .elementwise import _tracks_gradient, broadcast_coo
from .shape import regroup_coo, wide_enough
from .reduction import quietly

__all__ = [
    "LobpcgOptions",
    "LobpcgState",
    "element_coo",
    "sample_product",
    "spmm",
    "sparse_times_strided",
    "strided_times_sparse",
    "spgemm",
    "transpose_coo",
]

REDUCTIONS = ("sum", "mean", "amax", "amin")


# -- helpers ---------------------------------------------------------------------------------------


def _dev(x: Any) -> Any:
    return array_api_compat.device(x)


def zeros_of_product(xp: Any, shape: tuple[int, ...], dtype: Any, device: Any, *operands: Any) -> Any:
    """Zeros of ``shape``: a product whose sparse operand stores nothing. An operand that autograd records
    (a torch tensor that requires grad) is linked in by adding its sum over an empty slice, exactly 0, so
    its gradient is 0, as through the dense product; bare zeros would leave it out of the graph, and
    ``backward`` would raise (or an optimizer skip the parameter)."""
    out = xp.zeros(shape, dtype=dtype, device=device)
    for x in operands:
        if _tracks_gradient(x) and x.ndim:
            empty = x[(slice(0, 0),) + (slice(None),) * (x.ndim - 1)]
            out = out + xp.astype(xp.sum(empty), dtype, copy=False)
    return out


def _backend_name(x: Any) -> str:
    from .. import backend_of_array

    return x._backend.name if isinstance(x, SparseArray) else backend_of_array(x).name


def _layout(x: Any) -> Layout:
    return x.layout if isinstance(x, SparseArray) else strided


def _is_zero(fill: Any) -> bool:
    return bool(fill == 0)


def _is_finite(fill: Any) -> bool:
    value = complex(fill)
    return math.isfinite(value.real) and math.isfinite(value.imag)


def _broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast of shapes the public layer has checked to be compatible."""
    ndim = max((len(s) for s in shapes), default=0)
    padded = [(1,) * (ndim - len(s)) + tuple(s) for s in shapes]
    return tuple(max(dims) if 0 not in dims else 0 for dims in zip(*padded))


def element_coo(xp: Any, a: SparseArray) -> COOArray:
    """``a`` as a COO array with one entry per specified element (batch dimensions become sparse ones)."""
    if isinstance(a, COOArray):
        return a
    return compressed_to_coo(xp, cast(CompressedArray, a))


def _insert_unit(xp: Any, c: COOArray, position: int) -> COOArray:
    """A new size-1 sparse dimension at ``position`` (an index row of zeros)."""
    zeros = xp.zeros((1, c.nnz), dtype=c._idx.dtype, device=c.device)
    # row-major whatever the pieces' strides (see expand_dims of COO)
    idx = contiguous(c._backend, xp, xp.concat([c._idx[:position, :], zeros, c._idx[position:, :]], axis=0))
    shape = c.shape[:position] + (1,) + c.shape[position:]
    return COOArray(idx, c._vals, shape, backend=c._backend, xp=xp, coalesced=c.is_coalesced(), fill_value=c.fill_value)


def _drop_units(xp: Any, c: COOArray, positions: tuple[int, ...]) -> COOArray:
    """Remove size-1 sparse dimensions (their index rows are all zero)."""
    keep = [d for d in range(c.sparse_dim()) if d not in positions]
    idx = xp.take(c._idx, xp.asarray(keep, dtype=xp.int64, device=c.device), axis=0) if keep else c._idx[:0, :]
    shape = tuple(s for d, s in enumerate(c.shape) if d not in positions)
    return COOArray(idx, c._vals, shape, backend=c._backend, xp=xp, coalesced=c.is_coalesced(), fill_value=c.fill_value)


def permute_coo(xp: Any, c: COOArray, order: tuple[int, ...]) -> COOArray:
    """The sparse dimensions of ``c`` (no dense dimensions) in the order ``order``; an index-row permutation."""
    idx = xp.take(c._idx, xp.asarray(order, dtype=xp.int64, device=c.device), axis=0) if order else c._idx
    shape = tuple(c.shape[d] for d in order)
    sorted_ = c.is_coalesced() and tuple(order) == tuple(range(len(order)))
    return COOArray(idx, c._vals, shape, backend=c._backend, xp=xp, coalesced=sorted_, fill_value=c.fill_value)


def transpose_coo(xp: Any, c: COOArray) -> COOArray:
    """The transpose of the last two (sparse) dimensions of an element COO; O(nnz), no sort."""
    n = c.sparse_dim()
    return permute_coo(xp, c, tuple(range(n - 2)) + (n - 1, n - 2))


def reshape_coo(xp: Any, c: COOArray, groups: tuple[tuple[int, ...], ...]) -> COOArray:
    """Merge each group of consecutive sparse dimensions into one (row-major), e.g. for tensordot."""
    rows, shape, start = [], [], 0
    dev = c.device
    for size in groups:
        dims = tuple(size)
        n = len(dims)
        key = _linearize(xp, c._idx[start : start + n, :], dims) if n else xp.zeros((c.nnz,), dtype=xp.int64, device=dev)
        rows.append(key)
        shape.append(prod(dims))
        start += n
    idx = xp.stack(rows) if rows else xp.zeros((0, c.nnz), dtype=xp.int64, device=dev)
    return COOArray(idx, c._vals, tuple(shape), backend=c._backend, xp=xp, coalesced=c.is_coalesced(), fill_value=c.fill_value)


def unreshape_coo(xp: Any, c: COOArray, shapes: tuple[tuple[int, ...], ...], index_dtype: Any) -> COOArray:
    """Split each sparse dimension of ``c`` into the dimensions of ``shapes`` (row-major): undoes reshape_coo."""
    rows: list[Any] = []
    for d, dims in enumerate(shapes):
        rows.extend(_unravel(xp, xp.astype(c._idx[d, :], xp.int64), tuple(dims), index_dtype) if dims else [])
    shape = tuple(s for dims in shapes for s in dims)
    idx = xp.stack(rows) if rows else xp.zeros((0, c.nnz), dtype=index_dtype, device=c.device)
    return COOArray(idx, c._vals, shape, backend=c._backend, xp=xp, coalesced=c.is_coalesced(), fill_value=c.fill_value)


# -- segmented reductions --------------------------------------------------------------------------


def _segment_scan(xp: Any, is_start: Any, values: Any, combine: Callable[[Any, Any], Any]) -> Any:
    """Reduce runs of equal keys (``values`` sorted by key, ``is_start`` marking each run's first element).

    A segmented inclusive scan by doubling (Hillis-Steele): ceil(log2(longest run)) data-parallel
    passes, after which each run's last element holds its reduction.
    """
    n = values.shape[0]
    starts = xp.nonzero(is_start)[0]
    seg = xp.cumulative_sum(xp.astype(is_start, xp.int64)) - 1
    bounds = xp.concat([starts, xp.asarray([n], dtype=starts.dtype, device=_dev(starts))])
    longest = int(xp.max(bounds[1:] - bounds[:-1]))
    tail = (1,) * (values.ndim - 1)
    v, step = values, 1
    while step < longest:
        same = xp.reshape(seg[step:] == seg[:-step], (n - step, *tail))
        v = xp.concat([v[:step, ...], xp.where(same, combine(v[step:, ...], v[:-step, ...]), v[step:, ...])], axis=0)
        step *= 2
    return xp.take(v, bounds[1:] - 1, axis=0)


def reduce_segments(xp: Any, key: Any, values: Any, reduce: str = "sum") -> tuple[Any, Any]:
    """``(unique keys, reductions)`` of ``values`` grouped by the sorted, non-empty ``key``."""
    first = xp.ones((1,), dtype=xp.bool, device=_dev(key))
    is_start = xp.concat([first, key[1:] != key[:-1]])
    starts = xp.nonzero(is_start)[0]
    combine = {"sum": xp.add, "mean": xp.add, "amax": xp.maximum, "amin": xp.minimum}[reduce]
    # sums of unsigned values that the backend only stores wrap on the signed twin as they would
    out = through_signed(xp, values, lambda v: _segment_scan(xp, is_start, v, combine)) if reduce == "sum" else _segment_scan(xp, is_start, values, combine)
    if reduce == "mean":
        bounds = xp.concat([starts, xp.asarray([key.shape[0]], dtype=starts.dtype, device=_dev(key))])
        counts = xp.astype(bounds[1:] - bounds[:-1], out.dtype)
        out = out / xp.reshape(counts, (-1, *((1,) * (out.ndim - 1))))
    return xp.take(key, starts), out


def rows_to_dense(xp: Any, ukeys: Any, rows: Any, nrows: int) -> Any:
    """The ``(nrows, *row_shape)`` array whose row ``ukeys[i]`` is ``rows[i]`` and every other row 0."""
    positions = xp.arange(nrows, dtype=xp.int64, device=_dev(ukeys))
    pos = xp.clip(xp.searchsorted(ukeys, positions), 0, ukeys.shape[0] - 1)
    found = xp.take(ukeys, pos) == positions
    tail = (1,) * (rows.ndim - 1)
    present = xp.reshape(found, (-1, *tail))
    return through_signed(xp, rows, lambda r: xp.where(present, xp.take(r, pos, axis=0), xp.zeros((), dtype=r.dtype, device=_dev(r))))


# -- sparse @ strided ------------------------------------------------------------------------------


def accumulation_dtype(xp: Any, dtype: Any) -> Any:
    """The dtype a product of ``dtype`` adds in: float32 for float16 and bfloat16, whose running sums
    stagnate (a float16 sum of ones stops at 2048) and overflow past 65504 on the way, where the dense
    product adds in float32 and rounds once ("Half precision" in docs/decisions.md); ``dtype`` otherwise."""
    return xp.float32 if is_half_precision(dtype) else dtype


def row_products(xp: Any, c: COOArray, b: Any) -> tuple[Any, Any]:
    """``(key, products)`` sorted by key: for every entry (batch ``l``, row ``m``, column ``k``) of ``c``
    ``(*B, M, K)``, the output row ``l * M + m`` and ``value * b[l, k, :]``; ``b`` is ``(*B, K, N)``.
    Half-precision products are float32 (:func:`accumulation_dtype`)."""
    nbd = c.ndim - 2
    batch = tuple(c.shape[:nbd])
    m, k = c.shape[nbd], c.shape[nbd + 1]
    n = b.shape[-1]
    nnz = c.nnz
    dtype = accumulation_dtype(xp, result_dtype(xp, c.dtype, b.dtype))
    idx = c._idx
    bl = _linearize(xp, idx[:nbd, :], batch) if nbd else xp.zeros((nnz,), dtype=xp.int64, device=c.device)
    rows, cols = xp.astype(idx[nbd, :], xp.int64), xp.astype(idx[nbd + 1, :], xp.int64)
    bflat = xp.reshape(xp.astype(b, dtype, copy=False), (prod(batch) * k, n))
    products = xp.reshape(xp.astype(c._vals, dtype, copy=False), (nnz, 1)) * take_values(xp, bflat, bl * k + cols, axis=0)
    key = bl * m + rows
    if not c.is_coalesced():
        perm = xp.argsort(key, stable=True)
        key, products = xp.take(key, perm), take_values(xp, products, perm, axis=0)
    return key, products


def spmm(xp: Any, c: COOArray, b: Any, reduce: str = "sum") -> Any:
    """``c @ b`` for an element COO ``c`` ``(*B, M, K)`` (fill value 0) and a strided ``b`` ``(*B, K, N)``;
    ``reduce`` combines each output element's products (torch.sparse.mm's ``reduce=``; empty rows are 0)."""
    nbd = c.ndim - 2
    batch = tuple(c.shape[:nbd])
    m, n = c.shape[nbd], b.shape[-1]
    dtype = result_dtype(xp, c.dtype, b.dtype)
    if c.nnz == 0 or prod(batch) * m * n == 0:
        return zeros_of_product(xp, batch + (m, n), dtype, _dev(b), b, c._vals)
    key, products = row_products(xp, c, b)
    ukeys, sums = reduce_segments(xp, key, products, reduce)
    return xp.reshape(xp.astype(rows_to_dense(xp, ukeys, sums, prod(batch) * m), dtype, copy=False), batch + (m, n))


def _vector_as_row(xp: Any, c: COOArray) -> COOArray:
    return _insert_unit(xp, c, 0)


def _plus_unspecified(xp: Any, out: Any, fill: Any, bb: Any, covered: Any, dtype: Any) -> Any:
    """``out + fill * (colsum(bb) - covered)``, the unspecified elements' share of a product (``covered``: the
    sums of ``bb``'s rows at the specified positions); the arrays of ``dtype`` or, with ``out``, of its
    signed twin (:func:`through_signed`)."""
    bb, covered = (xp.astype(x, out.dtype, copy=False) for x in (bb, covered))
    return out + fill_like(xp, out, fill, dtype) * (xp.sum(bb, axis=-2, keepdims=True, dtype=out.dtype) - covered)


def sparse_times_strided(xp: Any, c: COOArray, b: Any, *, row_vector: bool = False, reduce: str = "sum") -> Any:
    """``c @ b`` with Array API matmul shapes: ``c`` an element COO ``(..., M, K)`` (``row_vector``: a
    1-D operand already lifted to ``(1, K)``), ``b`` strided ``(K,)`` or ``(..., K, N)``."""
    fill = c.fill_value
    bb = b[:, None] if b.ndim == 1 else b
    batch = _broadcast_shapes(tuple(c.shape[:-2]), tuple(bb.shape[:-2]))
    c = broadcast_coo(xp, c, batch + tuple(c.shape[-2:]))
    dtype = result_dtype(xp, c.dtype, bb.dtype)
    if _is_zero(fill):
        bb = xp.broadcast_to(xp.astype(bb, dtype, copy=False), batch + tuple(bb.shape[-2:]))
        out = spmm(xp, c, bb, reduce)
    else:
        # A = S + f * (J - P), P the pattern: A @ B = S @ B + f * (colsum(B) - P @ B), the values as they are
        # (S' = S - f * P, computed first, rounded or wrapped in the values' dtype: 1 - 1e16 is -1e16, and
        # int8's 127 - (-100) is -29). Half precision adds in float32 and rounds once, as the dense product.
        work = accumulation_dtype(xp, dtype)
        bb = xp.broadcast_to(xp.astype(bb, work, copy=False), batch + tuple(bb.shape[-2:]))
        c = coalesce_coo(xp, c)
        out = spmm(xp, c, bb)
        ones = xp.ones((c.nnz,), dtype=work, device=c.device)
        pattern = COOArray(c._idx, ones, c.shape, backend=c._backend, xp=xp, coalesced=True, fill_value=0)
        covered = spmm(xp, pattern, bb)
        out = through_signed(xp, out, lambda o: _plus_unspecified(xp, o, fill, bb, covered, work))
        out = xp.astype(out, dtype, copy=False)
    shape = batch + (() if row_vector else (c.shape[-2],)) + (() if b.ndim == 1 else (b.shape[-1],))
    return xp.reshape(out, shape)


def strided_times_sparse(xp: Any, a: Any, c: COOArray) -> Any:
    """``a @ c`` for a strided ``a`` and an element COO ``c`` (no dense dimensions): ``(c.mT @ a.mT).mT``."""
    if c.ndim == 1:
        # a @ v == (v as a row) @ a.mT, a vector result
        a_t = a if a.ndim == 1 else xp.matrix_transpose(a)
        return sparse_times_strided(xp, _vector_as_row(xp, c), a_t, row_vector=True)
    c_t = transpose_coo(xp, c)
    if a.ndim == 1:
        return sparse_times_strided(xp, c_t, a)
    return xp.matrix_transpose(sparse_times_strided(xp, c_t, xp.matrix_transpose(a)))


def _fill_against_non_finite(xp: Any, fill: Any, x: Any, axis: int, dtype: Any) -> str | None:
    """Why ``S @ B + f * (colsum(B) - P @ B)`` (see the module docstring) is not exact: a non-zero fill value
    ``f`` against a strided operand with an infinite or NaN element, where ``colsum(B) - P @ B`` is
    ``inf - inf`` and the dense product may be infinite, or whose sums along the contracted ``axis``
    overflow in the product's working ``dtype`` (the dense product, which adds only the unspecified
    elements' rows, may not). One pass over the operand, only for a non-zero fill value."""
    if _is_zero(fill) or not xp.isdtype(x.dtype, ("real floating", "complex floating")):
        return None
    # inf and NaN propagate into the sums: one reduction checks both
    sums = quietly(xp, lambda: xp.sum(xp.astype(x, accumulation_dtype(xp, dtype), copy=False), axis=axis))
    if bool(xp.all(xp.isfinite(sums))):
        return None
    return (
        f"a non-zero fill value ({fill!r}) against a strided operand with an infinite or NaN element, or whose sums over "
        "the contracted dimension overflow: the unspecified products are summed apart from the specified ones (as the "
        "sums minus the specified rows), which is inexact there; multiply xsparse.to_dense of the sparse operand, or give "
        "it fill value 0"
    )


def _supports_matmul_sparse_strided(xp: Any, a: SparseArray, b: Any) -> str | None:
    if a.dense_dim():
        if not _is_zero(a.fill_value):
            return f"a product over a dense dimension needs fill value 0, got {a.fill_value!r}"
        if b.ndim > 2:
            return "a batched strided operand against a sparse array contracted over a dense dimension is not supported"
        return None
    if not _is_finite(a.fill_value):
        return f"a non-finite fill value ({a.fill_value!r}) makes the unspecified products undefined"
    return _fill_against_non_finite(xp, a.fill_value, b, 0 if b.ndim == 1 else -2, result_dtype(xp, a.dtype, b.dtype))


def promoted_product(xp: Any, product: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """``product(a, b)`` of strided arrays promoted first by the standard's table (torch refuses to mix
    uint16/uint32/uint64 with other dtypes), on the signed twin where the backend multiplies no such
    unsigned values (sums and products wrap alike there)."""
    dtype = result_dtype(xp, a.dtype, b.dtype)
    a, b = xp.astype(a, dtype, copy=False), xp.astype(b, dtype, copy=False)
    return through_signed(xp, a, lambda v: product(v, xp.astype(b, v.dtype, copy=False)))


def _without_integer_matmul(xp: Any, a: Any, b: Any) -> bool:
    """Whether the strided ``a @ b`` is of integers on a device where the backend's matmul has none (torch on CUDA)."""
    from .. import backend_of_array

    return bool(xp.isdtype(result_dtype(xp, a.dtype, b.dtype), "integral")) and not backend_of_array(a).integer_matmul(a)


def promoted_matmul(xp: Any, a: Any, b: Any) -> Any:
    """``a @ b`` of strided arrays as :func:`promoted_product` makes it; integers as sums of products where
    the backend's matmul has no integer kernel on their device."""
    if _without_integer_matmul(xp, a, b):
        return promoted_product(xp, lambda u, v: _summed_products(xp, u, v), a, b)
    return promoted_product(xp, xp.matmul, a, b)


_PRODUCTS_BUDGET = 2**22  # elements of the broadcast products summed at once


def _summed_products(xp: Any, u: Any, v: Any) -> Any:
    """``u @ v`` (matmul's shapes and broadcasting) as sums of elementwise products, a chunk of the contracted
    dimension at a time; a sum modulo 2**bits does not depend on its order, so integers wrap as a matmul's."""
    vector_u, vector_v = u.ndim == 1, v.ndim == 1
    u = u[None, :] if vector_u else u
    v = v[:, None] if vector_v else v
    (m, k), n = u.shape[-2:], v.shape[-1]
    batch = _broadcast_shapes(tuple(u.shape[:-2]), tuple(v.shape[:-2]))
    step = max(1, _PRODUCTS_BUDGET // max(1, prod(batch) * m * n))
    out = xp.zeros(batch + (m, n), dtype=u.dtype, device=array_api_compat.device(u))
    for k0 in range(0, k, step):
        k1 = min(k, k0 + step)
        out = out + xp.sum(u[..., :, k0:k1, None] * v[..., None, k0:k1, :], axis=-2, dtype=u.dtype)
    if vector_u:
        out = out[..., 0, :]
    return out[..., 0] if vector_v else out


@register("matmul", (INDEXED, strided), supports=_supports_matmul_sparse_strided)
def _matmul_indexed_strided(xp: Any, a: SparseArray, b: Any) -> Any:
    """matmul(sparse, strided) -> strided: gather rows of b, segmented sum per output row; O(nnz * N log nnz)."""
    if a.dense_dim():
        # the contracted dimension is dense: every stored element is multiplied, the structure stays
        return a._with_values(promoted_matmul(xp, a._vals, b), 0)
    c = element_coo(xp, a)
    if a.ndim == 1:
        return sparse_times_strided(xp, _vector_as_row(xp, c), b, row_vector=True)
    return sparse_times_strided(xp, c, b)


def _supports_matmul_strided_sparse(xp: Any, a: Any, b: SparseArray) -> str | None:
    dense_dim = b.dense_dim()
    if dense_dim and not _is_zero(b.fill_value):
        return f"a product with a hybrid operand needs fill value 0, got {b.fill_value!r}"
    if dense_dim >= 2 and a.ndim > 2:
        return "a batched strided operand against a sparse array contracted over a dense dimension is not supported"
    if dense_dim == 1 and not (isinstance(b, COOArray) and b.ndim == 2):
        return "of the hybrid operands contracted over a sparse dimension, only a 2-D COO array with one sparse dimension is supported"
    if not dense_dim and not _is_finite(b.fill_value):
        return f"a non-finite fill value ({b.fill_value!r}) makes the unspecified products undefined"
    return None if dense_dim else _fill_against_non_finite(xp, b.fill_value, a, -1, result_dtype(xp, a.dtype, b.dtype))


@register("matmul", (strided, INDEXED), supports=_supports_matmul_strided_sparse)
def _matmul_strided_indexed(xp: Any, a: Any, b: SparseArray) -> Any:
    """matmul(strided, sparse) -> strided: (b.mT @ a.mT).mT with the index rows swapped; O(nnz * M log nnz)."""
    if b.dense_dim() >= 2:
        return b._with_values(promoted_matmul(xp, a, b._vals), 0)
    if b.dense_dim() == 1:
        # rows of b are sparse, its columns dense: gather a's columns at the stored rows
        c = cast(COOArray, b)
        rows = xp.astype(c._idx[0, :], xp.int64)
        return promoted_matmul(xp, take_values(xp, a, rows, axis=-1), c._vals)
    return strided_times_sparse(xp, a, element_coo(xp, b))


@register("matmul", (strided, strided))
def _matmul_strided_strided(xp: Any, a: Any, b: Any) -> Any:
    """matmul(strided, strided) -> strided: the backend's matmul; O(M * K * N)."""
    return promoted_matmul(xp, a, b)


# -- sparse @ sparse -------------------------------------------------------------------------------


def spgemm(xp: Any, ca: COOArray, cb: COOArray, index_dtype: Any) -> COOArray:
    """``ca @ cb`` for element COO arrays ``(*B, M, K)`` and ``(*B, K, N)`` (fill value 0, one batch shape):
    each entry of ``ca`` meets the entries of its column's row in ``cb``; the products are coalesced."""
    nbd = ca.ndim - 2
    batch = tuple(ca.shape[:nbd])
    m, k, n = ca.shape[nbd], ca.shape[nbd + 1], cb.shape[nbd + 1]
    dtype = result_dtype(xp, ca.dtype, cb.dtype)
    dev = ca.device
    shape = batch + (m, n)

    def empty() -> COOArray:
        return COOArray(
            xp.zeros((nbd + 2, 0), dtype=index_dtype, device=dev), xp.zeros((0,), dtype=dtype, device=dev), shape,
            backend=ca._backend, xp=xp, coalesced=True, fill_value=0,
        )  # fmt: skip

    if ca.nnz == 0 or cb.nnz == 0:
        return empty()
    ai, bi = ca._idx, cb._idx
    zeros_a = xp.zeros((ca.nnz,), dtype=xp.int64, device=dev)
    zeros_b = xp.zeros((cb.nnz,), dtype=xp.int64, device=dev)
    a_bl = _linearize(xp, ai[:nbd, :], batch) if nbd else zeros_a
    b_bl = _linearize(xp, bi[:nbd, :], batch) if nbd else zeros_b
    a_m, a_k = xp.astype(ai[nbd, :], xp.int64), xp.astype(ai[nbd + 1, :], xp.int64)
    b_k, b_n = xp.astype(bi[nbd, :], xp.int64), xp.astype(bi[nbd + 1, :], xp.int64)
    va, vb = xp.astype(ca._vals, dtype, copy=False), xp.astype(cb._vals, dtype, copy=False)
    bkey = b_bl * k + b_k
    if not cb.is_coalesced():
        perm = xp.argsort(bkey, stable=True)
        bkey, b_n, vb = xp.take(bkey, perm), xp.take(b_n, perm), take_values(xp, vb, perm, axis=0)
    akey = a_bl * k + a_k
    start = xp.searchsorted(bkey, akey, side="left")
    counts = xp.searchsorted(bkey, akey, side="right") - start
    offsets = xp.cumulative_sum(counts)
    total = int(offsets[-1])
    if total == 0:
        return empty()
    t = xp.arange(total, dtype=xp.int64, device=dev)
    owner = xp.searchsorted(offsets, t, side="right")
    bpos = xp.take(start, owner) + (t - (xp.take(offsets, owner) - xp.take(counts, owner)))
    half = accumulation_dtype(xp, dtype) != dtype
    if half:
        # the products' sums (the coalescing) in float32, rounded once
        va, vb = xp.astype(va, xp.float32), xp.astype(vb, xp.float32)
    values = take_values(xp, va, owner, axis=0) * take_values(xp, vb, bpos, axis=0)
    out_bl = xp.take(a_bl, owner)
    indices = xp.stack([
        *_unravel(xp, out_bl, batch, index_dtype),
        xp.astype(xp.take(a_m, owner), index_dtype),
        xp.astype(xp.take(b_n, bpos), index_dtype),
    ])  # fmt: skip
    c = coalesce_coo(xp, COOArray(indices, values, shape, backend=ca._backend, xp=xp, coalesced=False, fill_value=0))
    if half:
        c = COOArray(c._idx, xp.astype(c._vals, dtype), shape, backend=ca._backend, xp=xp, coalesced=True, fill_value=0)
    return c


def compress_union(xp: Any, c: COOArray, layout: Layout, blocksize: tuple[int, int], index_dtype: Any) -> CompressedArray:
    """A coalesced element COO ``(*B, M, N)`` as a compressed array; batches share the union of their
    patterns (explicit zeros where a batch lacks an element), so that every batch holds as many."""
    nbd = c.ndim - 2
    batch = tuple(c.shape[:nbd])
    bc = coo_to_block_coo(xp, c, nbd, blocksize) if layout.is_blocked else c
    nb = prod(batch)
    if nbd and nb > 1 and bc.nnz:
        g0, g1 = bc.shape[nbd], bc.shape[nbd + 1]
        idx = bc._idx
        cell = xp.astype(idx[nbd, :], xp.int64) * g1 + xp.astype(idx[nbd + 1, :], xp.int64)
        s = xp.sort(cell)
        first = xp.ones((1,), dtype=xp.bool, device=c.device)
        ucell = xp.take(s, xp.nonzero(xp.concat([first, s[1:] != s[:-1]]))[0])
        nu = ucell.shape[0]
        key = _linearize(xp, idx[:nbd, :], batch) * (g0 * g1) + cell
        lin = xp.arange(nb, dtype=xp.int64, device=c.device)[:, None]
        wanted = xp.reshape(lin * (g0 * g1) + ucell[None, :], (-1,))
        pos = xp.clip(xp.searchsorted(key, wanted), 0, bc.nnz - 1)
        found = xp.take(key, pos) == wanted
        tail = (1,) * (bc._vals.ndim - 1)
        present = xp.reshape(found, (-1, *tail))
        values = through_signed(xp, bc._vals, lambda v: xp.where(present, xp.take(v, pos, axis=0), fill_like(xp, v, 0, bc.dtype)))
        b_lin = xp.reshape(xp.broadcast_to(lin, (nb, nu)), (-1,))
        cells = xp.reshape(xp.broadcast_to(ucell[None, :], (nb, nu)), (-1,))
        indices = xp.stack([*_unravel(xp, b_lin, batch, idx.dtype), xp.astype(cells // g1, idx.dtype), xp.astype(cells % g1, idx.dtype)])
        bc = COOArray(indices, values, bc.shape, backend=c._backend, xp=xp, coalesced=True, fill_value=0)
    target = Target(layout, c._backend, xp, tuple(c.shape), 2, 0, blocksize, index_dtype, 0)
    return block_coo_to_compressed(xp, bc, target)


def _index_dtype(xp: Any, a: SparseArray) -> Any:
    return getattr(a, "index_dtype", xp.int64)


def sparse_result(xp: Any, c: COOArray, like: SparseArray, other: SparseArray | None = None) -> SparseArray:
    """The coalesced COO ``c`` in ``like``'s layout: blocks of ``like``'s block rows and ``other``'s block
    columns (1 where ``other`` is not blocked); a 1-D result stays COO."""
    if like.layout is sparse_coo or c.ndim < 2:
        return c
    blocksize = (1, 1)
    if like.layout.is_blocked:
        bn = cast(CompressedArray, other).blocksize[1] if other is not None and other.layout.is_blocked else 1
        blocksize = (cast(CompressedArray, like).blocksize[0], bn)
    return compress_union(xp, c, like.layout, blocksize, _index_dtype(xp, like))


def _supports_matmul_sparse_sparse(xp: Any, a: SparseArray, b: SparseArray) -> str | None:
    if not (_is_zero(a.fill_value) and _is_zero(b.fill_value)):
        return f"a product of two sparse arrays is sparse only with fill values 0, got {a.fill_value!r} and {b.fill_value!r}"
    if a.dense_dim() or b.dense_dim():
        return "sparse @ sparse is supported without dense dimensions only"
    return None


@register("matmul", (INDEXED, INDEXED), supports=_supports_matmul_sparse_sparse)
def _matmul_indexed_indexed(xp: Any, a: SparseArray, b: SparseArray) -> SparseArray:
    """matmul(sparse, sparse) -> sparse in a's layout: row expansion and coalescing; O(flops log flops)."""
    ca, cb = element_coo(xp, a), element_coo(xp, b)
    squeeze: list[int] = []
    if a.ndim == 1:
        ca = _vector_as_row(xp, ca)
    if b.ndim == 1:
        cb = _insert_unit(xp, cb, 1)
    batch = _broadcast_shapes(tuple(ca.shape[:-2]), tuple(cb.shape[:-2]))
    ca = broadcast_coo(xp, ca, batch + tuple(ca.shape[-2:]))
    cb = broadcast_coo(xp, cb, batch + tuple(cb.shape[-2:]))
    c = spgemm(xp, ca, cb, _index_dtype(xp, a))
    nbd = len(batch)
    if a.ndim == 1:
        squeeze.append(nbd)
    if b.ndim == 1:
        squeeze.append(nbd + 1)
    if squeeze:
        return _drop_units(xp, c, tuple(squeeze))
    return sparse_result(xp, c, a, b)


# -- addmm -----------------------------------------------------------------------------------------


def _scaled(x: Any, factor: Any) -> Any:
    from ..._elementwise import multiply

    return x if factor == 1 else multiply(x, factor)


def addmm_combine(xp: Any, input: Any, product: Any, beta: Any, alpha: Any) -> Any:
    """``beta * input + alpha * product``; ``beta == 0`` ignores ``input`` (NaN included), as torch does."""
    from ..._elementwise import add

    scaled = _scaled(product, alpha)
    if beta == 0:
        # input's dtype still takes part in the result's, as it does for any other beta
        dtype = result_dtype(xp, input.dtype, scaled.dtype)
        if scaled.dtype == dtype:
            return scaled
        from ..._indexing import astype

        return astype(scaled, dtype)
    return add(_scaled(input, beta), scaled)


@register("addmm", (strided, strided, strided))
@register("addmm", (strided, INDEXED, strided))
@register("addmm", (strided, strided, INDEXED))
@register("addmm", (strided, INDEXED, INDEXED))
def _addmm_strided_any_any(xp: Any, input: Any, a: Any, b: Any, beta: Any, alpha: Any) -> Any:
    """addmm(strided, ., .) -> strided: the product through dispatch, then beta * input + alpha * product."""
    product = dispatch.call("matmul", (_layout(a), _layout(b)), _backend_name(input), xp, a, b)
    result = addmm_combine(xp, input, product, beta, alpha)
    from ..._conversion import to_dense

    return to_dense(result)


# -- sampled products (SDDMM) ----------------------------------------------------------------------


def element_positions(xp: Any, s: SparseArray) -> tuple[Any, Any, Any, tuple[int, ...]]:
    """``(batch, row, col, values_shape)`` of every stored element of ``s`` (no dense dimensions), in the
    order and shape of its values (a block's elements in the block's row-major order)."""
    if isinstance(s, COOArray):
        nbd = s.sparse_dim() - 2
        idx = s._idx
        bl = _linearize(xp, idx[:nbd, :], tuple(s.shape[:nbd])) if nbd else xp.zeros((s.nnz,), dtype=xp.int64, device=s.device)
        return bl, xp.astype(idx[nbd, :], xp.int64), xp.astype(idx[nbd + 1, :], xp.int64), tuple(s._vals.shape)
    a = cast(CompressedArray, s)
    nbd = a.batch_dim()
    block = compressed_to_block_coo(xp, a)
    idx = block._idx
    bl = _linearize(xp, idx[:nbd, :], tuple(a.shape[:nbd])) if nbd else xp.zeros((idx.shape[1],), dtype=xp.int64, device=a.device)
    bm, bn = a.blocksize
    dev = a.device
    r = xp.arange(bm, dtype=xp.int64, device=dev)[None, :, None]
    q = xp.arange(bn, dtype=xp.int64, device=dev)[None, None, :]
    full = (idx.shape[1], bm, bn)
    rows = xp.reshape(xp.broadcast_to(xp.astype(idx[nbd, :], xp.int64)[:, None, None] * bm + r, full), (-1,))
    cols = xp.reshape(xp.broadcast_to(xp.astype(idx[nbd + 1, :], xp.int64)[:, None, None] * bn + q, full), (-1,))
    bl = xp.reshape(xp.broadcast_to(bl[:, None, None], full), (-1,))
    return bl, rows, cols, tuple(a._vals.shape)


def sample_product(xp: Any, s: SparseArray, x: Any, y: Any) -> Any:
    """``(x @ y)`` at the stored elements of ``s`` ``(*B, M, N)``, shaped like ``s``'s values; ``x``
    ``(*B, M, P)`` and ``y`` ``(*B, P, N)`` broadcast to ``s``'s batch. O(elements * P)."""
    batch = tuple(s.shape[:-2])
    m, n = s.shape[-2], s.shape[-1]
    p = x.shape[-1]
    dtype = result_dtype(xp, x.dtype, y.dtype)
    bl, rows, cols, values_shape = element_positions(xp, s)
    nb = prod(batch)
    xf = xp.reshape(xp.broadcast_to(xp.astype(x, dtype, copy=False), batch + (m, p)), (nb * m, p))
    yt = xp.reshape(xp.broadcast_to(xp.matrix_transpose(xp.astype(y, dtype, copy=False)), batch + (n, p)), (nb * n, p))
    if rows.shape[0] == 0:
        return zeros_of_product(xp, values_shape, dtype, _dev(x), x, y)
    pairs = take_values(xp, xf, bl * m + rows, axis=0) * take_values(xp, yt, bl * n + cols, axis=0)
    products = through_signed(xp, pairs, lambda v: xp.sum(v, axis=-1, dtype=v.dtype))
    return xp.reshape(products, values_shape)


def _supports_sampled(xp: Any, input: SparseArray, a: Any, b: Any, beta: Any, alpha: Any) -> str | None:
    if input.dense_dim():
        return "the mask of a sampled product has no dense dimensions"
    return None


@register("sampled_addmm", (INDEXED, strided, strided), supports=_supports_sampled)
def _sampled_addmm_indexed_strided_strided(xp: Any, input: SparseArray, a: Any, b: Any, beta: Any, alpha: Any) -> SparseArray:
    """sampled_addmm(sparse, strided, strided) -> sparse: gather rows of a and columns of b at the mask; O(nnz * K)."""
    if isinstance(input, COOArray):
        input = coalesce_coo(xp, input)
    sampled = sample_product(xp, input, a, b)
    dtype = result_dtype(xp, input.dtype, sampled.dtype)
    from ..._common import scalar_for

    fill = scalar_for(xp, dtype, 0 if beta == 0 else beta * input.fill_value)

    def combine(v: Any) -> Any:
        # on the signed twin where the backend adds and multiplies no such unsigned values (torch's
        # uint16/32/64), whose sums and products modulo 2**bits have the same bits
        if alpha != 1:
            v = alpha * v
        if beta != 0:
            own = xp.astype(input._vals, v.dtype, copy=False)
            v = (own if beta == 1 else beta * own) + v
        return v

    values = through_signed(xp, xp.astype(sampled, dtype, copy=False), combine)
    return input._with_values(values, fill)


# -- torch.sparse.mm(reduce=), smm, hspmm, sspaddmm --------------------------------------------------


def _supports_fill0_plain(op: str) -> Callable[..., str | None]:
    def supports(xp: Any, a: SparseArray, *args: Any) -> str | None:
        if not _is_zero(a.fill_value):
            return f"{op} reads the unspecified elements as 0, and the fill value is {a.fill_value!r}"
        if a.dense_dim():
            return f"{op} is supported without dense dimensions only"
        return None

    return supports


def _supports_reduce(xp: Any, a: SparseArray, b: Any, reduce: str) -> str | None:
    reason = _supports_fill0_plain("reduce=")(xp, a)
    if reason is None and reduce == "mean" and not xp.isdtype(result_dtype(xp, a.dtype, b.dtype), ("real floating", "complex floating")):
        return "reduce='mean' needs a floating dtype"
    if reason is None and reduce in ("amax", "amin") and xp.isdtype(result_dtype(xp, a.dtype, b.dtype), "complex floating"):
        return f"reduce={reduce!r} needs a real dtype"
    return reason


@register("matmul_reduce", (INDEXED, strided), supports=_supports_reduce)
def _matmul_reduce_indexed_strided(xp: Any, a: SparseArray, b: Any, reduce: str) -> Any:
    """matmul_reduce(sparse, strided) -> strided: products of each row reduced by sum/mean/amax/amin; O(nnz * N log nnz)."""
    c = element_coo(xp, a)
    if reduce != "sum":
        c = coalesce_coo(xp, c)
    return sparse_times_strided(xp, c, b, reduce=reduce)


def _hspmm(xp: Any, a: SparseArray, b: Any) -> COOArray:
    c = element_coo(xp, a)
    nbd = c.ndim - 2
    batch = tuple(c.shape[:nbd])
    m, n = c.shape[nbd], b.shape[-1]
    dtype = result_dtype(xp, c.dtype, b.dtype)
    bb = xp.broadcast_to(b, batch + tuple(b.shape[-2:]))
    idt = _index_dtype(xp, a)
    if c.nnz == 0:
        rows = xp.zeros((0, n), dtype=dtype, device=c.device)
        ukeys = xp.zeros((0,), dtype=xp.int64, device=c.device)
    else:
        key, products = row_products(xp, c, bb)
        ukeys, rows = reduce_segments(xp, key, products)
        rows = xp.astype(rows, dtype, copy=False)
    indices = xp.stack(_unravel(xp, ukeys, batch + (m,), idt))
    return COOArray(indices, rows, batch + (m, n), backend=c._backend, xp=xp, coalesced=True, fill_value=0)


@register("hspmm", (INDEXED, strided), supports=_supports_fill0_plain("hspmm"))
def _hspmm_indexed_strided(xp: Any, a: SparseArray, b: Any) -> COOArray:
    """hspmm(sparse, strided) -> hybrid COO: the rows of a @ b where a has entries, dense along N; O(nnz * N log nnz)."""
    return _hspmm(xp, a, b)


def hybrid_rows_to_coo(xp: Any, h: COOArray) -> COOArray:
    """A hybrid COO with one dense (last) dimension as a COO with every element of each stored row."""
    nnz, n = h._vals.shape
    idx = h._idx
    dev = h.device
    rep = xp.reshape(xp.broadcast_to(idx[:, :, None], (idx.shape[0], nnz, n)), (idx.shape[0], nnz * n))
    cols = xp.reshape(xp.broadcast_to(xp.arange(n, dtype=idx.dtype, device=dev)[None, :], (nnz, n)), (1, nnz * n))
    return COOArray(
        xp.concat([rep, cols], axis=0), xp.reshape(h._vals, (nnz * n,)), h.shape, backend=h._backend, xp=xp,
        coalesced=h.is_coalesced(), fill_value=0,
    )  # fmt: skip


@register("smm", (INDEXED, strided), supports=_supports_fill0_plain("smm"))
def _smm_indexed_strided(xp: Any, a: SparseArray, b: Any) -> COOArray:
    """smm(sparse, strided) -> COO: every element of each row of a @ b where a has entries; O(nnz * N log nnz)."""
    return hybrid_rows_to_coo(xp, _hspmm(xp, a, b))


def _supports_sspaddmm(xp: Any, input: SparseArray, a: SparseArray, b: Any, beta: Any, alpha: Any) -> str | None:
    reason = _supports_fill0_plain("sspaddmm")(xp, a)
    if reason is None:
        reason = _supports_fill0_plain("sspaddmm")(xp, input)
    return reason


@register("sspaddmm", (INDEXED, INDEXED, strided), supports=_supports_sspaddmm)
def _sspaddmm_indexed_indexed_strided(xp: Any, input: SparseArray, a: SparseArray, b: Any, beta: Any, alpha: Any) -> COOArray:
    """sspaddmm(sparse, sparse, strided) -> uncoalesced COO: beta * input's entries, then alpha * smm(a, b)'s."""
    product = hybrid_rows_to_coo(xp, _hspmm(xp, a, b))
    own = element_coo(xp, input)
    dtype = result_dtype(xp, own.dtype, product.dtype)
    left = xp.astype(own._vals, dtype, copy=False)
    right = xp.astype(product._vals, dtype, copy=False)
    values = xp.concat([left if beta == 1 else beta * left, right if alpha == 1 else alpha * right])
    indices = xp.concat([own._idx, xp.astype(product._idx, own._idx.dtype)], axis=1)
    return COOArray(indices, values, product.shape, backend=own._backend, xp=xp, coalesced=False, fill_value=0)


# -- tensordot and vecdot --------------------------------------------------------------------------


def _supports_no_dense(op: str) -> Callable[..., str | None]:
    def supports(xp: Any, x1: Any, x2: Any, *args: Any) -> str | None:
        for x in (x1, x2):
            if isinstance(x, SparseArray) and x.dense_dim():
                return f"{op} is supported for sparse arrays without dense dimensions only"
        if isinstance(x1, SparseArray) and isinstance(x2, SparseArray) and not (_is_zero(x1.fill_value) and _is_zero(x2.fill_value)):
            # the product of the two would refuse them, in an error that names matmul
            return f"{op} of two sparse arrays is sparse only with fill values 0, got {x1.fill_value!r} and {x2.fill_value!r}"
        return None

    return supports


def _as_matrix(xp: Any, x: Any, rows: tuple[int, ...], cols: tuple[int, ...]) -> Any:
    """``x`` with the dimensions ``rows`` merged into one and ``cols`` into another (strided or COO)."""
    shape = tuple(x.shape)
    r, c = prod([shape[d] for d in rows]), prod([shape[d] for d in cols])
    if not isinstance(x, SparseArray):
        return xp.reshape(xp.permute_dims(x, rows + cols), (r, c))
    coo = permute_coo(xp, element_coo(xp, x), rows + cols)
    return reshape_coo(xp, coo, (tuple(shape[d] for d in rows), tuple(shape[d] for d in cols)))


@register("tensordot", (INDEXED, strided), supports=_supports_no_dense("tensordot"))
@register("tensordot", (strided, INDEXED), supports=_supports_no_dense("tensordot"))
@register("tensordot", (INDEXED, INDEXED), supports=_supports_no_dense("tensordot"))
def _tensordot_indexed(xp: Any, x1: Any, x2: Any, axes1: tuple[int, ...], axes2: tuple[int, ...]) -> Any:
    """tensordot with a sparse operand: both as matrices (free x contracted), one matmul through dispatch; O(matmul)."""
    free1 = tuple(d for d in range(x1.ndim) if d not in axes1)
    free2 = tuple(d for d in range(x2.ndim) if d not in axes2)
    m1, m2 = _as_matrix(xp, x1, free1, axes1), _as_matrix(xp, x2, axes2, free2)
    product = dispatch.call("matmul", (_layout(m1), _layout(m2)), _backend_name(x1), xp, m1, m2)
    shape1, shape2 = tuple(x1.shape[d] for d in free1), tuple(x2.shape[d] for d in free2)
    if isinstance(product, SparseArray):
        idt = _index_dtype(xp, x1 if isinstance(x1, SparseArray) else x2)
        return unreshape_coo(xp, cast(COOArray, product), (shape1, shape2), idt)
    return xp.reshape(product, shape1 + shape2)


@register("tensordot", (strided, strided))
def _tensordot_strided_strided(xp: Any, x1: Any, x2: Any, axes1: tuple[int, ...], axes2: tuple[int, ...]) -> Any:
    """tensordot(strided, strided) -> strided: the backend's tensordot; O(product of the shapes)."""
    if _without_integer_matmul(xp, x1, x2):
        # both as matrices (free x contracted), multiplied as promoted_matmul does there
        free1 = tuple(d for d in range(x1.ndim) if d not in axes1)
        free2 = tuple(d for d in range(x2.ndim) if d not in axes2)
        m1, m2 = _as_matrix(xp, x1, free1, tuple(axes1)), _as_matrix(xp, x2, tuple(axes2), free2)
        return xp.reshape(promoted_matmul(xp, m1, m2), tuple(x1.shape[d] for d in free1) + tuple(x2.shape[d] for d in free2))
    return promoted_product(xp, lambda u, v: xp.tensordot(u, v, axes=(list(axes1), list(axes2))), x1, x2)


# -- kron ------------------------------------------------------------------------------------------


def _supports_kron(xp: Any, x1: Any, x2: Any, shape: tuple[int, ...]) -> str | None:
    for x in (x1, x2):
        if isinstance(x, SparseArray) and not _is_zero(x.fill_value):
            return f"a Kronecker product with a sparse operand is sparse only with fill value 0, got {x.fill_value!r}"
    return None


def _kron_entries(xp: Any, x: Any, ndim: int) -> tuple[Any, Any]:
    """The int64 indices ``(ndim, n)`` (leading unit dimensions added) and the values ``(n,)`` of ``x``'s
    entries in lexicographic order, each position once: a sparse ``x``'s specified elements (coalesced,
    its dense dimensions regrouped as sparse ones), every element of a strided ``x``."""
    if isinstance(x, SparseArray):
        c = coalesce_coo(xp, element_coo(xp, x))
        c = regroup_coo(xp, c, c.dense_dim())
        idx, vals, dev = xp.astype(c._idx, xp.int64), c._vals, c.device
    else:
        dev = array_api_compat.device(x)
        n = prod(tuple(x.shape))
        flat = xp.arange(n, dtype=xp.int64, device=dev)
        idx = xp.stack(_unravel(xp, flat, tuple(x.shape), xp.int64)) if x.ndim else xp.zeros((0, n), dtype=xp.int64, device=dev)
        vals = xp.reshape(x, (n,))
    if idx.shape[0] < ndim:
        idx = xp.concat([xp.zeros((ndim - idx.shape[0], idx.shape[1]), dtype=xp.int64, device=dev), idx], axis=0)
    return idx, vals


def _runs(xp: Any, idx: Any) -> tuple[Any, Any]:
    """Where each run of equal prefixes (every index row but the last) starts among the sorted columns of
    ``idx``, and its length."""
    n = idx.shape[1]
    dev = array_api_compat.device(idx)
    if idx.shape[0] <= 1 or n == 0:
        # one run (no prefix), or none
        starts = xp.zeros((1 if n else 0,), dtype=xp.int64, device=dev)
    else:
        prefix = idx[:-1, :]
        differs = xp.any(prefix[:, 1:] != prefix[:, :-1], axis=0)
        starts = xp.nonzero(xp.concat([xp.ones((1,), dtype=xp.bool, device=dev), differs]))[0]
        starts = xp.astype(starts, xp.int64)
    ends = xp.concat([starts[1:], xp.full((1,), n, dtype=xp.int64, device=dev)]) if n else starts
    return starts, ends - starts


@register("kron", (INDEXED, INDEXED), supports=_supports_kron)
@register("kron", (INDEXED, strided), supports=_supports_kron)
@register("kron", (strided, INDEXED), supports=_supports_kron)
def _kron_indexed(xp: Any, x1: Any, x2: Any, shape: tuple[int, ...]) -> COOArray:
    """kron with a sparse operand -> coalesced COO: every pair of entries, written in the result's order; O(nnz1 * nnz2)."""
    # The result's index along dimension d is i[d] * x2.shape[d] + j[d], so its lexicographic order is that
    # of (i[0], j[0], i[1], j[1], ...). The entries of both operands are grouped into runs of one prefix
    # (every index but the last); a pair of runs gives the consecutive result entries of one result
    # prefix, in the order of the pairs of their entries (x1's major). Pairs of runs are in the result's
    # order as they come for two dimensions or fewer (the prefixes are then one index); for more they are
    # sorted, which costs the number of pairs of runs, not of entries.
    ndim = len(shape)
    (ia, va), (ib, vb) = _kron_entries(xp, x1, ndim), _kron_entries(xp, x2, ndim)
    dev = array_api_compat.device(va)
    s2 = (1,) * (ndim - x2.ndim) + tuple(x2.shape)
    start_a, count_a = _runs(xp, ia)
    start_b, count_b = _runs(xp, ib)
    ra, rb = int(start_a.shape[0]), int(start_b.shape[0])
    pair = xp.arange(ra * rb, dtype=xp.int64, device=dev)
    run_a, run_b = pair // max(rb, 1), pair % max(rb, 1)
    if ndim > 2 and ra * rb > 1:
        prefix = [
            xp.take(xp.take(ia[d, :], start_a), run_a) * s2[d] + xp.take(xp.take(ib[d, :], start_b), run_b)
            for d in range(ndim - 1)
        ]
        order = lexsort_indices(xp, xp.stack(prefix))
        run_a, run_b = xp.take(run_a, order), xp.take(run_b, order)
    per_b = xp.take(count_b, run_b)
    first = xp.cumulative_sum(xp.take(count_a, run_a) * per_b, include_initial=True)
    total = int(first[-1])
    owner = xp.repeat(xp.arange(ra * rb, dtype=xp.int64, device=dev), first[1:] - first[:-1])
    local = xp.arange(total, dtype=xp.int64, device=dev) - xp.take(first, owner)
    width = xp.take(per_b, owner)
    ea = xp.take(xp.take(start_a, run_a), owner) + local // width
    eb = xp.take(xp.take(start_b, run_b), owner) + local % width
    sparse = [x for x in (x1, x2) if isinstance(x, SparseArray)]
    idt = xp.int64 if any(dtype_name(_index_dtype(xp, x)) == "int64" for x in sparse) else xp.int32
    idt = wide_enough(xp, idt, total, *shape)
    rows = [xp.take(ia[d, :], ea) * s2[d] + xp.take(ib[d, :], eb) for d in range(ndim)]
    idx = xp.astype(xp.stack(rows), idt) if ndim else xp.zeros((0, total), dtype=idt, device=dev)
    vals = promoted_product(xp, lambda u, v: u * v, take_values(xp, va, ea, axis=0), take_values(xp, vb, eb, axis=0))
    backend = sparse[0]._backend
    return COOArray(idx, vals, shape, backend=backend, xp=xp, coalesced=True, fill_value=0)


@register("kron", (strided, strided))
def _kron_strided_strided(xp: Any, x1: Any, x2: Any, shape: tuple[int, ...]) -> Any:
    """kron(strided, strided) -> strided: the broadcast product of the interleaved dimensions; O(size of the result)."""
    ndim = len(shape)
    a = xp.reshape(x1, (1,) * (ndim - x1.ndim) + tuple(x1.shape))
    b = xp.reshape(x2, (1,) * (ndim - x2.ndim) + tuple(x2.shape))
    # a[i0, None, i1, None, ...] * b[None, j0, None, j1, ...], then (i0, j0) merged, (i1, j1) merged, ...
    wide_a = xp.reshape(a, tuple(v for s in a.shape for v in (s, 1)))
    wide_b = xp.reshape(b, tuple(v for s in b.shape for v in (1, s)))
    return xp.reshape(promoted_product(xp, lambda u, v: u * v, wide_a, wide_b), shape)


def _conj_sparse(xp: Any, c: COOArray) -> COOArray:
    if not xp.isdtype(c.dtype, "complex floating"):
        return c
    fill = complex(c.fill_value).conjugate()
    return COOArray(c._idx, xp.conj(c._vals), c.shape, backend=c._backend, xp=xp, coalesced=c.is_coalesced(), fill_value=fill)


def _vector_operand(xp: Any, x: Any, axis: int, first: bool) -> Any:
    """``x`` with ``axis`` moved last, then as ``(..., 1, K)`` (first operand, conjugated) or ``(..., K, 1)``."""
    ndim = x.ndim
    axis = axis % ndim
    order = tuple(d for d in range(ndim) if d != axis) + (axis,)
    if isinstance(x, SparseArray):
        c = permute_coo(xp, element_coo(xp, x), order)
        if first:
            return _insert_unit(xp, _conj_sparse(xp, c), ndim - 1)
        return _insert_unit(xp, c, ndim)
    y = xp.permute_dims(x, order)
    if first:
        y = xp.conj(y) if xp.isdtype(y.dtype, "complex floating") else y
        return y[..., None, :]
    return y[..., None]


@register("vecdot", (INDEXED, strided), supports=_supports_no_dense("vecdot"))
@register("vecdot", (strided, INDEXED), supports=_supports_no_dense("vecdot"))
@register("vecdot", (INDEXED, INDEXED), supports=_supports_no_dense("vecdot"))
def _vecdot_indexed(xp: Any, x1: Any, x2: Any, axis: int) -> Any:
    """vecdot with a sparse operand: (..., 1, K) @ (..., K, 1) through dispatch; O(nnz log nnz)."""
    v1, v2 = _vector_operand(xp, x1, axis, True), _vector_operand(xp, x2, axis, False)
    product = dispatch.call("matmul", (_layout(v1), _layout(v2)), _backend_name(x1), xp, v1, v2)
    if isinstance(product, SparseArray):
        c = cast(COOArray, product)
        return _drop_units(xp, c, (c.ndim - 2, c.ndim - 1))
    return xp.reshape(product, tuple(product.shape[:-2]))


@register("vecdot", (strided, strided))
def _vecdot_strided_strided(xp: Any, x1: Any, x2: Any, axis: int) -> Any:
    """vecdot(strided, strided) -> strided: the backend's vecdot; O(numel)."""
    return promoted_product(xp, lambda u, v: xp.vecdot(u, v, axis=axis), x1, x2)


# -- spsolve: restarted GMRES ------------------------------------------------------------------------


def solver_tolerance(xp: Any, dtype: Any) -> float:
    """The relative residual the iterative solver reaches: 100 machine epsilons of the dtype."""
    return 100.0 * float(xp.finfo(dtype).eps)


def _supports_spsolve(xp: Any, a: SparseArray, b: Any) -> str | None:
    if not _is_zero(a.fill_value):
        return f"the solvers read the unspecified elements as 0, and the fill value is {a.fill_value!r}"
    if a.dense_dim():
        return "a system matrix has no dense dimensions"
    return None


@register("spsolve", (INDEXED, strided), supports=_supports_spsolve)
def _spsolve_indexed_strided(xp: Any, a: SparseArray, b: Any) -> Any:
    """spsolve(sparse, strided) -> strided: restarted GMRES through matmul, to 100 eps; O(iterations * nnz)."""
    n = a.shape[0]
    backend = a._backend.name
    dtype = result_dtype(xp, a.dtype, b.dtype)
    rhs = xp.astype(b, dtype, copy=False)

    def matvec(v: Any) -> Any:
        return dispatch.call("matmul", (a.layout, strided), backend, xp, a, v)

    rtol = solver_tolerance(xp, dtype)
    columns = [rhs] if rhs.ndim == 1 else [rhs[:, j] for j in range(rhs.shape[1])]
    solutions = []
    for j, column in enumerate(columns):
        column_norm = iterative.norm(xp, column)
        if not math.isfinite(column_norm):
            raise ValueError(
                f"spsolve: the right-hand side holds a NaN or an infinity (column {j}, shape={tuple(rhs.shape)}), which the "
                "iterative solver cannot take. Pass finite values, or solve on the NumPy backend (xsparse.to_backend(A, "
                "'numpy')), whose direct solver propagates them."
            )
        restart = min(max(n, 1), 50)
        x, _, residual, iterations = iterative.gmres(
            xp, matvec, column, xp.zeros_like(column), tol=rtol * column_norm, restart=restart, maxiter=-(-max(20 * n, 100) // restart)
        )
        residual = residual / column_norm if column_norm else 0.0
        if not residual <= rtol:
            raise ValueError(
                f"spsolve: the iterative solver did not converge (relative residual={residual:.3g}, rtol={rtol:.3g}, "
                f"iterations={iterations}, shape={tuple(a.shape)}). The matrix is singular or ill-conditioned for GMRES; "
                "solve it on the NumPy backend (xsparse.to_backend(A, 'numpy')), whose kernel is SciPy's direct solver."
            )
        solutions.append(x)
    if rhs.ndim == 2 and not solutions:
        return xp.zeros((n, 0), dtype=dtype, device=_dev(rhs))  # no right-hand side: nothing to solve
    return solutions[0] if rhs.ndim == 1 else xp.stack(solutions, axis=1)


@register("spsolve", (strided, strided))
def _spsolve_strided_strided(xp: Any, a: Any, b: Any) -> Any:
    """spsolve(strided, strided) -> strided: the backend's dense solve; O(N^3)."""
    if b.ndim == 1:
        return xp.linalg.solve(a, b[:, None])[:, 0]
    return xp.linalg.solve(a, b)


# -- low-rank decompositions and LOBPCG (products with the operand only) ---------------------------


def _random_normal(xp: Any, shape: tuple[int, ...], dtype: Any, device: Any, seed: Any) -> Any:
    import numpy as np

    rng = np.random.default_rng(seed)
    host = rng.standard_normal(shape)
    if xp.isdtype(dtype, "complex floating"):
        host = host + 1j * rng.standard_normal(shape)
    return xp.asarray(host, dtype=dtype, device=device)


class _Operator:
    """Products with ``A - M`` and its conjugate transpose, ``A`` of any layout (through dispatch); ``M``
    broadcasts to ``A``'s shape and stays as small as given (a row of column means, say)."""

    def __init__(self, xp: Any, a: Any, m: Any) -> None:
        from ..._conversion import matrix_transpose
        from ..._elementwise import conj

        self.xp, self.a = xp, a
        self.backend = _backend_name(a)
        complex_ = xp.isdtype(a.dtype, "complex floating")
        self.a_h = matrix_transpose(conj(a) if complex_ else a)
        if m is not None and m.ndim < 2:
            m = xp.reshape(m, (1,) * (2 - m.ndim) + tuple(m.shape))
        self.m = m
        self.m_h = None if m is None else xp.matrix_transpose(xp.conj(m) if complex_ else m)

    def _mul(self, op: Any, op_m: Any, x: Any) -> Any:
        out = dispatch.call("matmul", (_layout(op), strided), self.backend, self.xp, op, x)
        if op_m is None:
            return out
        if op_m.shape[-1] != x.shape[-2]:
            # op_m's columns broadcast: op_m @ (ones @ x) == op_m @ (column sums of x)
            x = self.xp.sum(x, axis=-2, keepdims=True)
        return out - self.xp.matmul(op_m, x)

    def matmul(self, x: Any) -> Any:
        return self._mul(self.a, self.m, x)

    def rmatmul(self, x: Any) -> Any:
        return self._mul(self.a_h, self.m_h, x)


def _qr_q(xp: Any, y: Any) -> Any:
    return xp.linalg.qr(y).Q


def _mh(xp: Any, x: Any) -> Any:
    t = xp.matrix_transpose(x)
    return xp.conj(t) if xp.isdtype(x.dtype, "complex floating") else t


def svd_lowrank_generic(xp: Any, a: Any, q: int, niter: int, m: Any, seed: Any) -> tuple[Any, Any, Any]:
    """Halko-Martinsson-Tropp randomized SVD of ``a - m``: ``(U, S, V)`` with ``a - m ~ U diag(S) V^H``."""
    cols = a.shape[-1]
    op = _Operator(xp, a, m)
    dtype = a.dtype
    device = array_api_compat.device(a._vals if isinstance(a, SparseArray) else a)
    g = _random_normal(xp, (cols, q), dtype, device, seed)
    basis = _qr_q(xp, op.matmul(g))
    for _ in range(niter):
        basis = _qr_q(xp, op.matmul(_qr_q(xp, op.rmatmul(basis))))
    b_h = op.rmatmul(basis)  # (cols, q) == (Q^H (A - M))^H
    u_b, s, vh_b = xp.linalg.svd(b_h, full_matrices=False)
    return xp.matmul(basis, _mh(xp, vh_b)), s, u_b


def _supports_lowrank(xp: Any, a: Any, *args: Any) -> str | None:
    if isinstance(a, SparseArray) and a.dense_dim():
        return "a matrix operand has no dense dimensions"
    return None


@register("svd_lowrank", (ANY,), supports=_supports_lowrank)
def _svd_lowrank_any(xp: Any, a: Any, q: int, niter: int, m: Any, seed: Any) -> tuple[Any, Any, Any]:
    """svd_lowrank(any) -> (U, S, V): randomized range finder with matmul only; O((niter + 1) * q * nnz)."""
    return svd_lowrank_generic(xp, a, q, niter, m, seed)


def column_means(xp: Any, a: Any) -> Any:
    """The ``(1, N)`` means of the columns of a ``(M, N)`` array of any layout (ones @ a, through dispatch)."""
    rows = a.shape[-2]
    device = array_api_compat.device(a._vals if isinstance(a, SparseArray) else a)
    ones = xp.ones((1, rows), dtype=a.dtype, device=device)
    total = dispatch.call("matmul", (strided, _layout(a)), _backend_name(a), xp, ones, a)
    return total / rows


@register("pca_lowrank", (ANY,), supports=_supports_lowrank)
def _pca_lowrank_any(xp: Any, a: Any, q: int, center: bool, niter: int, seed: Any) -> tuple[Any, Any, Any]:
    """pca_lowrank(any) -> (U, S, V): svd_lowrank of a minus its column means, kept implicit; O(svd_lowrank)."""
    m = column_means(xp, a) if center else None
    return svd_lowrank_generic(xp, a, q, niter, m, seed)


# -- LOBPCG ------------------------------------------------------------------------------------------
#
# Two variants, as torch.lobpcg names them. Both start with a Rayleigh-Ritz step on the initial block X
# and then iterate on the search basis S = [X, P, W] (P: the previous update direction, W: the
# preconditioned residuals of the pairs not yet converged), counting a pair as converged when its
# backward error |r| / (|x| (|A| + |e| |B|)) is below tol (Duersch et al. 2018, section 4.3; |A| and |B|
# estimated once from A X and B X).
#
# * "basic" is Knyazev's LOBPCG (2001): the Rayleigh-Ritz step solves the generalized problem on S as
#   it is, through a Cholesky factor of its (diagonally scaled) Gram matrix S^H B S. Converged pairs
#   stay in the basis ("soft locking"). Cheapest per iteration; the Gram matrix becomes singular when
#   the basis loses independence, and then the method stops with an error.
# * "ortho" keeps S B-orthonormal, so that the Rayleigh-Ritz step is a standard eigenproblem: W is
#   made B-orthogonal to [X, P] and B-orthonormal by repeated projection and SVQB (Stathopoulos & Wu
#   2002; Duersch et al. 2018), and P is chosen inside the span of the basis and B-orthogonal to the
#   new X. Converged pairs are locked: they leave the basis and no longer change.


ORTHO_IPARAMS = {"ortho_i_max": 3, "ortho_j_max": 3}
ORTHO_FPARAMS = ("ortho_tol", "ortho_tol_drop", "ortho_tol_replace")
ORTHO_BPARAMS = {"ortho_use_drop": False}


@dataclass(frozen=True)
class LobpcgOptions:
    """The choices of :func:`xsparse.lobpcg` beyond the problem: the variant, the tracker, the ortho parameters.

    ``iparams``, ``fparams`` and ``bparams`` hold the ``ortho_*`` parameters (complete, defaults filled
    in) for ``method="ortho"``, and are empty for ``method="basic"``.
    """

    method: str = "ortho"
    tracker: Callable[[LobpcgState], Any] | None = None
    iparams: Mapping[str, int] = field(default_factory=dict)
    fparams: Mapping[str, float] = field(default_factory=dict)
    bparams: Mapping[str, bool] = field(default_factory=dict)


class LobpcgState:
    """The state of a LOBPCG iteration, which :func:`xsparse.lobpcg` hands its ``tracker`` after every step.

    The attribute names are torch.lobpcg's, so a tracker written for torch reads the same fields.

    Attributes
    ----------
    A, B, iK
        The operator, the mass matrix and the preconditioner as passed (``None`` for identity).
    method
        ``"basic"`` or ``"ortho"``.
    iparams, fparams, bparams
        The integer, float and boolean parameters: ``m``, ``n``, ``k``, ``niter``; ``tol``; ``largest``;
        and the ``ortho_*`` parameters of ``method="ortho"``.
    ivars
        ``istep`` (the number of steps done), ``converged_count`` (the leading pairs converged),
        ``iterations_left``, and for ``"ortho"`` ``ortho_i``, ``ortho_j`` (the passes of the last
        orthogonalization).
    fvars
        ``X_norm``, ``A_norm``, ``B_norm`` (the estimates the convergence test uses), and for
        ``"ortho"`` the relative errors of the last orthogonalization's passes.
    bvars
        Set ``bvars["force_stop"] = True`` (or call :meth:`stop`) to end the iteration after this step.
    tvars
        ``rerr``: each pair's backward error.
    E, X, R, S
        The eigenvalue estimates ``(n,)``, the eigenvector estimates ``(m, n)``, their residuals, and the
        search basis of the next step. The arrays are replaced, never modified in place, from one step
        to the next, so a tracker may keep them.
    """

    def __init__(self, A: Any, B: Any, iK: Any, method: str, iparams: dict[str, int], fparams: dict[str, float], bparams: dict[str, bool]) -> None:
        self.A, self.B, self.iK, self.method = A, B, iK, method
        self.iparams, self.fparams, self.bparams = iparams, fparams, bparams
        self.ivars: dict[str, int] = {"istep": 0, "converged_count": 0, "iterations_left": iparams["niter"]}
        self.fvars: dict[str, float] = {}
        self.bvars: dict[str, bool] = {"force_stop": False}
        self.tvars: dict[str, Any] = {}
        self.E: Any = None
        self.X: Any = None
        self.R: Any = None
        self.S: Any = None

    @property
    def istep(self) -> int:
        """The number of steps done (the Rayleigh-Ritz step on the initial block is step 1)."""
        return self.ivars["istep"]

    @property
    def converged_count(self) -> int:
        """The number of leading eigenpairs that have converged."""
        return self.ivars["converged_count"]

    def stop(self) -> None:
        """End the iteration after the current step."""
        self.bvars["force_stop"] = True

    def __repr__(self) -> str:
        return f"LobpcgState(method={self.method!r}, istep={self.istep}, converged_count={self.converged_count}, n={self.iparams['n']})"


def _not_positive_definite(value: float) -> ValueError:
    return ValueError(
        f"lobpcg: B is not positive definite (x^H B x = {value:.3g} for a vector x of the search basis). Pass a "
        "symmetric positive definite B."
    )


def _breakdown(step: int, why: str) -> ValueError:
    return ValueError(
        f"lobpcg: method='basic' broke down at step {step}: the Gram matrix of the search basis is not positive "
        f"definite ({why}). Use method='ortho', which keeps the basis B-orthonormal, or another initial X."
    )


class _Lobpcg:
    """One LOBPCG run: the operators, the state, and the steps of both variants."""

    def __init__(self, xp: Any, a: Any, b: Any, ik: Any, state: LobpcgState) -> None:
        self.xp, self.a, self.b, self.ik, self.state = xp, a, b, ik, state
        self.backend = _backend_name(a)
        self.dtype = a.dtype
        self.complex = bool(xp.isdtype(a.dtype, "complex floating"))
        self.largest = state.bparams["largest"]
        self.rounding = float(xp.finfo(a.dtype).eps) ** 0.5

    # products and small dense helpers
    def times(self, op: Any, v: Any) -> Any:
        if op is None:
            return v
        return dispatch.call("matmul", (_layout(op), strided), self.backend, self.xp, op, v)

    def gram(self, u: Any, v: Any) -> Any:
        """``u^H v``, made exactly Hermitian when it is square by construction (``u^H B u``)."""
        g = self.xp.matmul(_mh(self.xp, u), v)
        return (g + _mh(self.xp, g)) / 2

    def norm(self, v: Any) -> float:
        return float(self.xp.linalg.vector_norm(v))

    def real_diagonal(self, g: Any) -> Any:
        d = self.xp.linalg.diagonal(g)
        return self.xp.real(d) if self.complex else d

    def eigh(self, h: Any) -> tuple[Any, Any]:
        """Eigenpairs of the Hermitian ``h``, the wanted end of the spectrum first."""
        xp = self.xp
        w, z = xp.linalg.eigh(h)
        if self.largest:
            w, z = xp.flip(w), xp.flip(z, axis=1)
        return w, z

    def columns(self, v: Any, index: Any) -> Any:
        return self.xp.take(v, index, axis=1)

    def scale_columns(self, v: Any, factors: Any) -> Any:
        return v * self.xp.astype(factors, v.dtype)[None, :]

    # convergence
    def residual(self, x: Any, e: Any) -> Any:
        return self.times(self.a, x) - self.times(self.b, x) * self.xp.astype(e, self.dtype)[None, :]

    def count_converged(self, x: Any, e: Any, r: Any, locked: int) -> int:
        xp, st = self.xp, self.state
        rerr = xp.linalg.vector_norm(r, axis=0) / (
            xp.linalg.vector_norm(x, axis=0) * (st.fvars["A_norm"] + xp.abs(e) * st.fvars["B_norm"])
        )
        st.tvars["rerr"] = rerr
        converged = rerr < st.fparams["tol"]
        count = 0
        while count < converged.shape[0] and bool(converged[count]):
            count += 1
        return max(count, locked)

    # the basic variant's Rayleigh-Ritz transform
    def rr_transform(self, s: Any, bs: Any) -> Any:
        """``T`` with ``T^H (s^H B s) T = I``, from a Cholesky factor of the diagonally scaled Gram matrix."""
        xp = self.xp
        g = self.gram(s, bs)
        d = self.real_diagonal(g)
        if bool(xp.any(d < 0)):
            raise _not_positive_definite(float(xp.min(d)))
        if not bool(xp.all(d > 0)):
            raise _breakdown(self.state.istep + 1, "a basis vector has B-norm 0")
        dinv = xp.astype(1 / xp.sqrt(d), g.dtype)
        try:
            lower = xp.linalg.cholesky(g * dinv[:, None] * dinv[None, :])
            t = xp.linalg.inv(_mh(xp, lower))
        except Exception as exc:  # each library raises its own LinAlgError
            why = f"{type(exc).__name__}: {str(exc).rstrip('.')}"
            # a Gram matrix with a positive diagonal can still be indefinite because B is
            raise _breakdown(self.state.istep + 1, why + ("; or B is not positive definite" if self.b is not None else "")) from exc
        if not bool(xp.all(xp.isfinite(t))):
            raise _breakdown(self.state.istep + 1, "the Cholesky factor is not finite")
        return t * dinv[:, None]

    # the ortho variant's orthonormalization
    def svqb(self, u: Any, drop: bool, tau: float) -> Any:
        """B-orthonormal columns spanning ``u``: an eigendecomposition of the scaled Gram matrix, whose small
        eigenvalues are raised to ``tau`` times the largest (or, with ``drop``, whose directions are dropped)."""
        xp = self.xp
        if u.shape[1] == 0:
            return u
        d = self.real_diagonal(self.gram(u, self.times(self.b, u)))
        if bool(xp.any(d < 0)):
            raise _not_positive_definite(float(xp.min(d)))
        nonzero = xp.nonzero(d != 0)[0]
        if nonzero.shape[0] < u.shape[1]:  # an exactly zero column has no direction to keep
            u, d = self.columns(u, nonzero), xp.take(d, nonzero)
            if u.shape[1] == 0:
                return u
        dinv = 1 / xp.sqrt(d)
        u = self.scale_columns(u, dinv)
        w, z = xp.linalg.eigh(self.gram(u, self.times(self.b, u)))
        top = float(xp.max(xp.abs(w)))
        # the Gram matrix of unit-B-norm vectors has eigenvalues >= 0 up to rounding (~ n eps): one far
        # below 0 is a direction of negative B-norm, which raising it to the floor below would hide
        if float(xp.min(w)) < -self.rounding * top:
            raise _not_positive_definite(float(xp.min(w)))
        floor = tau * top
        if drop:
            keep = xp.nonzero(w > floor)[0]
            w, z = xp.take(w, keep), self.columns(z, keep)
        else:
            w = xp.where(w < floor, xp.asarray(floor, dtype=w.dtype, device=_dev(w)), w)
        return xp.matmul(u, self.scale_columns(z, 1 / xp.sqrt(w)))

    def ortho(self, u: Any, v: Any) -> Any:
        """``u`` made B-orthonormal and B-orthogonal to the B-orthonormal ``v``: projections alternating with
        SVQB passes, each repeated until the relative error of the property it establishes is below
        ``ortho_tol`` (at most ``ortho_i_max`` outer and ``ortho_j_max`` inner passes)."""
        xp, st = self.xp, self.state
        ip, fp, bp = st.iparams, st.fparams, st.bparams
        for key in [key for key in st.fvars if key.startswith("ortho_")]:
            del st.fvars[key]
        bv = self.times(self.b, v)
        bv_norm = self.norm(bv)
        i = j = 0
        for i in range(ip["ortho_i_max"]):
            u = u - xp.matmul(v, xp.matmul(_mh(xp, bv), u))
            for j in range(ip["ortho_j_max"]):
                dropping = bp["ortho_use_drop"] and j > 0
                u = self.svqb(u, dropping, fp["ortho_tol_drop"] if dropping else fp["ortho_tol_replace"])
                if u.shape[1] == 0:  # every column lay in span(v)
                    st.ivars["ortho_i"], st.ivars["ortho_j"] = i, j
                    return u
                bu = self.times(self.b, u)
                eye = xp.eye(u.shape[1], dtype=u.dtype, device=_dev(u))
                rerr = self.norm(xp.matmul(_mh(xp, u), bu) - eye) / (self.norm(bu) * self.norm(u))
                st.fvars[f"ortho_UBUmI_rerr[{i}, {j}]"] = rerr
                if rerr < fp["ortho_tol"]:
                    break
            rerr = self.norm(xp.matmul(_mh(xp, bv), u)) / (bv_norm * self.norm(u))
            st.fvars[f"ortho_VBU_rerr[{i}]"] = rerr
            if rerr < fp["ortho_tol"]:
                break
        st.ivars["ortho_i"], st.ivars["ortho_j"] = i, j
        return u

    # the steps
    def first_step(self, x: Any) -> None:
        """Rayleigh-Ritz on the initial block, then the first basis ``[X, W]``."""
        xp, st = self.xp, self.state
        if not bool(xp.all(xp.linalg.vector_norm(x, axis=0) > 0)):
            raise ValueError(
                f"lobpcg: the initial X has a zero column (X.shape=({st.iparams['m']}, {st.iparams['n']})). Pass "
                "linearly independent columns, or leave X out for a random start."
            )
        x_norm = self.norm(x)
        st.fvars["X_norm"] = x_norm
        st.fvars["A_norm"] = self.norm(self.times(self.a, x)) / x_norm
        st.fvars["B_norm"] = self.norm(self.times(self.b, x)) / x_norm
        if st.method == "ortho":
            x = self.svqb(x, False, st.fparams["ortho_tol_replace"])
            e, z = self.eigh(self.gram(x, self.times(self.a, x)))
            x = xp.matmul(x, z)
        else:
            t = self.rr_transform(x, self.times(self.b, x))
            e, z = self.eigh(self.gram(t, xp.matmul(self.gram(x, self.times(self.a, x)), t)))
            x = xp.matmul(x, xp.matmul(t, z))
        self.finish(x, e, None, 0)

    def step(self) -> None:
        xp, st = self.xp, self.state
        n, nc = st.iparams["n"], st.ivars["converged_count"]
        s = st.S
        if st.method == "ortho":
            # S is B-orthonormal and its columns from nc on are B-orthogonal to the locked X[:, :nc]
            active = s[:, nc:]
            e, z = self.eigh(self.gram(active, self.times(self.a, active)))
            nx = n - nc
            x = xp.concat([st.X[:, :nc], xp.matmul(active, z[:, :nx])], axis=1)
            e = xp.concat([st.E[:nc], e[:nx]])
            # P: inside span(S) and B-orthogonal to the new X, in the direction of the change of X. In
            # the Ritz coordinates Z = [Z1 Z2], the change's component outside X's old span, projected
            # off Z1, is Z2 Z2^H [0; Z1 below the old X], and (Z unitary) Z2^H [0; Z1 lower] = -Z2 upper^H Z1 upper:
            # so P = S Z2 Q with Q an orthonormal basis of range(Z2 upper^H).
            z2 = z[:, nx:]
            if z2.shape[1]:
                q = xp.linalg.qr(_mh(xp, z2[:nx, :])).Q
                p = xp.matmul(active, xp.matmul(z2, q))
            else:
                p = s[:, :0]
            self.finish(x, e, p, nc)
        else:
            t = self.rr_transform(s, self.times(self.b, s))
            e, z = self.eigh(self.gram(t, xp.matmul(self.gram(s, self.times(self.a, s)), t)))
            c = xp.matmul(t, z[:, :n])
            x = xp.matmul(s, c)
            # P: the part of the update that came from [P, W], for the pairs not yet converged
            p = xp.matmul(s[:, n:], c[n:, nc:])
            self.finish(x, e[:n], p, 0)  # soft locking: a converged pair may move, and is counted afresh

    def finish(self, x: Any, e: Any, p: Any, locked: int) -> None:
        """Residuals, convergence, and the next basis ``[X, P, W]``."""
        xp, st = self.xp, self.state
        r = self.residual(x, e)
        nc = self.count_converged(x, e, r, locked)
        w = self.times(self.ik, r[:, nc:])
        parts = [x] if p is None else [x, p]
        if st.method == "ortho":
            w = self.ortho(w, xp.concat(parts, axis=1))
        st.E, st.X, st.R, st.S = e, x, r, xp.concat([*parts, w], axis=1)
        st.ivars["converged_count"] = nc
        st.ivars["iterations_left"] -= 1
        st.ivars["istep"] += 1

    def done(self) -> bool:
        st = self.state
        # niter <= 0 iterates until convergence, as torch.lobpcg (whose countdown stops at exactly 0)
        out_of_steps = st.iparams["niter"] > 0 and st.ivars["iterations_left"] <= 0
        return bool(st.bvars.get("force_stop")) or out_of_steps or st.converged_count >= st.iparams["k"]


def lobpcg_generic(
    xp: Any, a: Any, k: int, b: Any, x: Any, n: int, ik: Any, niter: int, tol: float, largest: bool,
    options: LobpcgOptions, seed: Any,
) -> tuple[Any, Any]:
    """LOBPCG, ``options.method`` "basic" or "ortho" (see the comment above); ``A``, ``B`` and ``iK`` enter
    through products only. Calls ``options.tracker`` with the :class:`LobpcgState` after every step."""
    size = a.shape[-1]
    if x is None:
        device = _dev(a._vals if isinstance(a, SparseArray) else a)
        x = _random_normal(xp, (size, n), a.dtype, device, seed)
    elif x.dtype != a.dtype:
        x = xp.astype(x, a.dtype)
    state = LobpcgState(
        a, b, ik, options.method,
        {"m": size, "n": n, "k": k, "niter": niter, **options.iparams},
        {"tol": tol, **options.fparams},
        {"largest": largest, **options.bparams},
    )  # fmt: skip
    run = _Lobpcg(xp, a, b, ik, state)
    run.first_step(x)
    if options.tracker is not None:
        options.tracker(state)
    while not run.done():
        run.step()
        if options.tracker is not None:
            options.tracker(state)
    return state.E[:k], state.X[:, :k]


@register("lobpcg", (ANY,), supports=_supports_lowrank)
def _lobpcg_any(
    xp: Any, a: Any, k: int, b: Any, x: Any, n: int, ik: Any, niter: int, tol: float, largest: bool, options: LobpcgOptions, seed: Any
) -> tuple[Any, Any]:
    """lobpcg(any) -> (E, X): LOBPCG with products of A, B and iK only; O(niter * (nnz * n + size * n^2))."""
    return lobpcg_generic(xp, a, k, b, x, n, ik, niter, tol, largest, options, seed)

