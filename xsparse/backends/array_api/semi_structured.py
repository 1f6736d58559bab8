"""Generic kernels of the semi-structured (2:4) layout, written against the Array API namespace ``xp`` alone.

They run on every backend (array-api-strict included) on the portable encoding of
``xsparse/formats/_semi_structured.py``, and are the oracle a native (cuSPARSELt, CUTLASS) kernel will be
tested against.

**Conversions.** From a dense array: each row is cut into groups, the positions to keep are chosen by
sorting a per-position key (the specified positions first, then torch's padding order), and the kept
values are gathered; a group with too many specified elements raises invariant ``ss.11``. From COO (and
so from the compressed layouts): the same, with each group's specified positions found by ``searchsorted``
on the sorted entries. To dense: every position gathers its value from the slot that keeps it. To COO:
one entry per kept value (padding included: it is specified).

**Products.** A product contracts one dimension of the semi-structured operand. When the pattern runs
along that dimension (``S @ B`` for a stored ``S``; ``A @ S.t()``, the ``linear`` case), each row of the
stored matrix lists its kept columns, and the product *gathers* the rows of the dense operand that those
columns select and multiplies them by the kept values, a few slots at a time: ``O(rows * cols/2 * n)``,
never a dense copy of ``S``. When the pattern runs along the other dimension (``S.t() @ B``,
``A @ S``), the stored matrix's columns are listed instead, padded to the longest column (at most twice
the kept values, since a column has at most ``rows`` entries), and the same gather runs on that list.
Neither needs a scatter, which the Array API does not have.
"""

from __future__ import annotations

import math
from typing import Any

import array_api_compat

from ...dispatch import register
from ...formats import COMPRESSED, COOArray, CompressedArray, sparse_coo, sparse_semi_structured, strided
from ...formats._invariants import is_half_precision
from ...formats._ops import lexsort_indices
from ...formats._semi_structured import (
    Pattern,
    SemiStructuredArray,
    kept_columns,
    kept_positions,
    nibbles_from_positions,
    pack_nibbles,
    pattern_for,
    pattern_violation,
)
from ...formats._spec import Target
from .conversion import _fill_scalar, _specified_mask, coalesce_coo, compressed_to_coo, coo_to_compressed

__all__ = [
    "dense_to_semi_structured",
    "coo_to_semi_structured",
    "semi_structured_to_dense",
    "semi_structured_to_coo",
    "row_lists",
    "gather_matmul",
    "matmul",
]

_OP = "to_sparse_semi_structured"

# The most elements a product's gathered intermediate holds at once (the result itself aside).
_GATHER_BUDGET = 2**22


def _device(x: Any) -> Any:
    return array_api_compat.device(x)


# -- conversions ----------------------------------------------------------------------------------------


def _check_counts(xp: Any, counts: Any, pattern: Pattern) -> None:
    """Raise ``ss.11`` for the first group of ``counts`` ``(rows, groups)`` above the pattern's ``kept``."""
    bad = counts > pattern.kept
    if bool(xp.any(bad)):
        at = int(xp.argmax(xp.astype(xp.reshape(bad, (-1,)), xp.int8)))
        row, group = divmod(at, counts.shape[1])
        raise pattern_violation(_OP, pattern, row, group, int(xp.reshape(counts, (-1,))[at]))


def _choose_positions(xp: Any, specified: Any, pattern: Pattern) -> Any:
    """The sorted in-group positions ``(rows, groups, kept)`` to keep: the specified ones, then padding.

    Every position gets a key: its own index when specified, else ``group + its rank`` in the padding order
    2, 3, 0, 1 (1, 0 for 1:2), which is ``(p + kept) % group``. The ``kept`` smallest keys win.
    """
    g = pattern.group
    p = xp.arange(g, dtype=xp.int64, device=_device(specified))
    key = xp.where(specified, p, g + (p + pattern.kept) % g)
    chosen = xp.argsort(key, axis=-1, stable=True)[..., : pattern.kept]
    return xp.sort(xp.astype(chosen, xp.int64), axis=-1)


def _semi_structured(xp: Any, values: Any, positions: Any, pattern: Pattern, target: Target, fill: Any) -> SemiStructuredArray:
    rows, groups, kept = positions.shape
    metadata = pack_nibbles(xp, nibbles_from_positions(xp, positions, pattern), pattern)
    return SemiStructuredArray(
        xp.reshape(values, (rows, groups * kept)), metadata, (rows, groups * pattern.group),
        backend=target.backend, xp=xp, fill_value=fill,
    )  # fmt: skip


def dense_to_semi_structured(xp: Any, x: Any, target: Target) -> SemiStructuredArray:
    """Encode a 2-D dense array whose every group keeps the pattern; elements equal to the fill value are unspecified."""
    pattern = pattern_for(_OP, x.dtype)
    rows, cols = x.shape
    grouped = xp.reshape(x, (rows, cols // pattern.group, pattern.group))
    specified = _specified_mask(xp, grouped, target.fill_value)
    _check_counts(xp, xp.sum(xp.astype(specified, xp.int32), axis=-1), pattern)
    positions = _choose_positions(xp, specified, pattern)
    # a padding position holds the fill value in x already
    values = xp.take_along_axis(grouped, positions, axis=-1)
    return _semi_structured(xp, values, positions, pattern, target, target.fill_value)


def coo_to_semi_structured(xp: Any, a: COOArray, target: Target) -> SemiStructuredArray:
    """Encode a 2-D COO array (coalesced first); unspecified elements, padding included, keep its fill value.

    Entries that hold the fill value count as unspecified: they are dropped, and re-padded where the
    pattern needs them (in-block zeros of a BSR array, or the padding of a semi-structured one).
    """
    pattern = pattern_for(_OP, a.dtype)
    a = coalesce_coo(xp, a)
    rows, cols = a.shape
    g = pattern.group
    groups = cols // g
    dev = a.device
    keep = xp.nonzero(_specified_mask(xp, a._vals, a.fill_value))[0]
    idx = xp.take(xp.astype(a._idx, xp.int64), keep, axis=1)
    entry_values = xp.take(a._vals, keep)
    nnz = int(entry_values.shape[0])
    # entries are sorted by (row, column), so their group keys are sorted too
    keys = idx[0, :] * groups + idx[1, :] // g
    wanted = xp.arange(rows * groups, dtype=xp.int64, device=dev)
    start = xp.searchsorted(keys, wanted, side="left")
    counts = xp.searchsorted(keys, wanted, side="right") - start
    _check_counts(xp, xp.reshape(counts, (rows, groups)), pattern)
    fill = _fill_scalar(xp, a.dtype, a.fill_value)
    last = max(nnz - 1, 0)
    p = xp.arange(g, dtype=xp.int64, device=dev)
    specified = xp.zeros((rows * groups, g), dtype=xp.bool, device=dev)
    slot_pos, slot_val, slot_ok = [], [], []
    for t in range(pattern.kept):
        ok = counts > t
        entry = xp.clip(start + t, 0, last)
        pos = xp.where(ok, xp.take(idx[1, :], entry) % g, -1) if nnz else xp.full((rows * groups,), -1, dtype=xp.int64, device=dev)
        val = xp.take(entry_values, entry) if nnz else xp.full((rows * groups,), fill, dtype=a.dtype, device=dev)
        specified = specified | (pos[:, None] == p[None, :])
        slot_pos.append(pos)
        slot_val.append(val)
        slot_ok.append(ok)
    positions = _choose_positions(xp, specified, pattern)
    chosen = xp.reshape(positions, (rows * groups, pattern.kept))
    values = xp.full(chosen.shape, fill, dtype=a.dtype, device=dev)
    for pos, val in zip(slot_pos, slot_val):
        values = xp.where(chosen == pos[:, None], val[:, None], values)
    values = xp.reshape(values, (rows, groups, pattern.kept))
    return _semi_structured(xp, values, xp.reshape(chosen, (rows, groups, pattern.kept)), pattern, target, a.fill_value)


def semi_structured_to_dense(xp: Any, a: SemiStructuredArray) -> Any:
    """The dense array: every position gathers its value from the slot that keeps it, else the fill value."""
    pattern = a.pattern
    rows, cols = a.stored_shape
    groups = cols // pattern.group
    positions = kept_positions(xp, a._meta, pattern)
    values = xp.reshape(a._vals, (rows, groups, pattern.kept))
    p = xp.arange(pattern.group, dtype=xp.int64, device=a.device)[None, None, :]
    fill = _fill_scalar(xp, a.dtype, a.fill_value)
    dense = xp.full((rows, groups, pattern.group), fill, dtype=a.dtype, device=a.device)
    for t in range(pattern.kept):
        dense = xp.where(positions[:, :, t : t + 1] == p, values[:, :, t : t + 1], dense)
    dense = xp.reshape(dense, (rows, cols))
    if not a.transposed:
        return dense
    # a row-major copy of the transpose, as every other conversion returns
    return xp.reshape(xp.reshape(xp.matrix_transpose(dense), (-1,)), (cols, rows))


def semi_structured_to_coo(xp: Any, a: SemiStructuredArray, index_dtype: Any) -> COOArray:
    """One COO entry per kept value (padding included), sorted; the fill value is kept."""
    rows, cols = a.stored_shape
    columns = kept_columns(xp, a._meta, a.pattern)
    per_row = columns.shape[1]
    row = xp.reshape(xp.broadcast_to(xp.arange(rows, dtype=xp.int64, device=a.device)[:, None], (rows, per_row)), (-1,))
    col = xp.reshape(columns, (-1,))
    values = xp.reshape(a._vals, (-1,))
    indices = xp.stack([row, col])
    if a.transposed:
        indices = xp.stack([col, row])
        order = lexsort_indices(xp, indices)
        indices = xp.take(indices, order, axis=1)
        values = xp.take(values, order)
    return COOArray(
        xp.astype(indices, index_dtype), values, a.shape, backend=a._backend, xp=xp, coalesced=True,
        fill_value=a.fill_value,
    )  # fmt: skip


@register("convert", (strided, sparse_semi_structured))
def _convert_strided_semi_structured(xp: Any, x: Any, target: Target) -> SemiStructuredArray:
    """to_sparse_semi_structured(strided): choose the kept positions per group by a sort of 4 keys, gather; O(numel)."""
    return dense_to_semi_structured(xp, x, target)


@register("convert", (sparse_coo, sparse_semi_structured))
def _convert_coo_semi_structured(xp: Any, a: COOArray, target: Target) -> SemiStructuredArray:
    """to_sparse_semi_structured(COO): coalesce, find each group's entries by searchsorted; O(nnz log nnz + numel)."""
    return coo_to_semi_structured(xp, a, target)


@register("convert", (COMPRESSED, sparse_semi_structured))
def _convert_compressed_semi_structured(xp: Any, a: CompressedArray, target: Target) -> SemiStructuredArray:
    """to_sparse_semi_structured(CSR, CSC, BSR, BSC): through the element COO; O(nnz log nnz + numel)."""
    return coo_to_semi_structured(xp, compressed_to_coo(xp, a), target)


@register("convert", (sparse_semi_structured, strided))
def _convert_semi_structured_strided(xp: Any, a: SemiStructuredArray, target: Target) -> Any:
    """to_dense(semi-structured): each position gathers from the slot that keeps it; O(numel)."""
    return semi_structured_to_dense(xp, a)


@register("convert", (sparse_semi_structured, sparse_coo))
def _convert_semi_structured_coo(xp: Any, a: SemiStructuredArray, target: Target) -> COOArray:
    """to_sparse_coo(semi-structured): decode the metadata, one entry per kept value; O(nnz), O(nnz log nnz) transposed."""
    return semi_structured_to_coo(xp, a, target.index_dtype)


@register("convert", (sparse_semi_structured, COMPRESSED))
def _convert_semi_structured_compressed(xp: Any, a: SemiStructuredArray, target: Target) -> CompressedArray:
    """to_sparse_{csr,csc,bsr,bsc}(semi-structured): through COO; O(nnz log nnz)."""
    return coo_to_compressed(xp, semi_structured_to_coo(xp, a, target.index_dtype), target)


# -- products -------------------------------------------------------------------------------------------


def row_lists(xp: Any, a: SemiStructuredArray) -> tuple[Any, Any, Any]:
    """The rows of ``a`` as lists ``(values, columns, valid)``, the first two ``(a.shape[0], width)``.

    Untransposed, these are the kept values and their decoded columns, and ``valid`` is None: every slot
    holds a kept (specified) element. Transposed, the rows of ``a`` are the columns of the stored matrix:
    its entries are sorted by column (stably, so rows stay in order within a column) and each column's run
    is cut out, padded to the longest run; ``valid`` marks the slots that are not padding.
    """
    columns = kept_columns(xp, a._meta, a.pattern)
    if not a.transposed:
        return a._vals, columns, None
    rows, per_row = columns.shape
    n_lists = a.shape[0]
    flat = xp.reshape(columns, (-1,))
    order = xp.argsort(flat, stable=True)
    sorted_cols = xp.take(flat, order)
    source_rows = order // per_row
    sorted_vals = xp.take(xp.reshape(a._vals, (-1,)), order)
    wanted = xp.arange(n_lists, dtype=xp.int64, device=a.device)
    start = xp.searchsorted(sorted_cols, wanted, side="left")
    counts = xp.searchsorted(sorted_cols, wanted, side="right") - start
    width = int(xp.max(counts))
    q = xp.arange(width, dtype=xp.int64, device=a.device)[None, :]
    valid = q < counts[:, None]
    entry = xp.reshape(xp.where(valid, start[:, None] + q, 0), (-1,))
    zero = xp.zeros((), dtype=a.dtype, device=a.device)
    values = xp.where(valid, xp.reshape(xp.take(sorted_vals, entry), (n_lists, width)), zero)
    lists = xp.reshape(xp.take(source_rows, entry), (n_lists, width))
    return values, lists, None if bool(xp.all(valid)) else valid


def gather_matmul(xp: Any, values: Any, columns: Any, b: Any, valid: Any = None) -> Any:
    """``out[i, :] = sum_s values[i, s] * b[columns[i, s], :]`` over the slots ``s`` that ``valid`` marks (all
    when None): the product of row lists with a 2-D ``b``.

    The slots are taken a chunk at a time so that the gathered rows of ``b`` stay within a fixed budget.
    """
    rows, width = values.shape
    n = b.shape[1]
    # half precision adds in float32 and rounds once, as the dense product does ("Half precision" in
    # docs/decisions.md): a half-precision running sum, rounded per chunk of slots, drifts and overflows
    acc = xp.float32 if is_half_precision(b.dtype) else b.dtype
    out = xp.zeros((rows, n), dtype=acc, device=_device(b))
    step = max(1, _GATHER_BUDGET // max(1, rows * n))
    integral = xp.isdtype(b.dtype, "integral")
    for s0 in range(0, width, step):
        s1 = min(width, s0 + step)
        gathered = xp.reshape(xp.take(b, xp.reshape(columns[:, s0:s1], (-1,)), axis=0), (rows, s1 - s0, n))
        if valid is not None:
            # a padding slot points at some row of b: its zero value times an inf or NaN there would be NaN
            gathered = xp.where(valid[:, s0:s1, None], gathered, xp.zeros((), dtype=gathered.dtype, device=_device(b)))
        if integral:
            # torch's CUDA matmul has no integer kernels (cuBLAS has no integer GEMM): the products and their sum,
            # which wrap as the matmul would (a sum modulo 2**bits does not depend on how it is accumulated)
            out = out + xp.sum(values[:, s0:s1, None] * gathered, axis=1, dtype=b.dtype)
        else:
            chunk = xp.astype(values[:, None, s0:s1], acc, copy=False)
            out = out + xp.matmul(chunk, xp.astype(gathered, acc, copy=False))[:, 0, :]
    return xp.astype(out, b.dtype, copy=False)


def matmul(xp: Any, a: Any, b: Any) -> Any:
    """``a @ b`` where exactly one operand is semi-structured and the other strided (1-D, 2-D or batched)."""
    if isinstance(a, SemiStructuredArray):
        dtype = xp.result_type(a.dtype, b.dtype)
        values, columns, valid = row_lists(xp, a)
        values = xp.astype(values, dtype)
        b = xp.astype(b, dtype)
        if b.ndim == 1:
            return gather_matmul(xp, values, columns, b[:, None], valid)[:, 0]
        # (*batch, k, n) -> (k, batch * n): one product for every batch
        batch, (k, n) = tuple(b.shape[:-2]), tuple(b.shape[-2:])
        nb = math.prod(batch)
        b2 = xp.reshape(xp.permute_dims(xp.reshape(b, (nb, k, n)), (1, 0, 2)), (k, nb * n))
        out = gather_matmul(xp, values, columns, b2, valid)
        m = out.shape[0]
        return xp.reshape(xp.permute_dims(xp.reshape(out, (m, nb, n)), (1, 0, 2)), (*batch, m, n))
    # a @ S == (S.T @ a.T).T, and the rows of S.T are the lists of S.t()
    dtype = xp.result_type(a.dtype, b.dtype)
    values, columns, valid = row_lists(xp, b.t())
    values = xp.astype(values, dtype)
    a = xp.astype(a, dtype)
    if a.ndim == 1:
        return gather_matmul(xp, values, columns, a[:, None], valid)[:, 0]
    lead, k = tuple(a.shape[:-1]), a.shape[-1]
    a2 = xp.reshape(a, (math.prod(lead), k))
    out = gather_matmul(xp, values, columns, xp.matrix_transpose(a2), valid)
    return xp.reshape(xp.matrix_transpose(out), (*lead, out.shape[0]))


def _fill_reason(a: Any) -> str | None:
    if isinstance(a, SemiStructuredArray) and a.fill_value != 0:
        return f"the product is computed with fill value 0, and this operand has fill_value={a.fill_value!r}"
    return None


def _supports_matmul(xp: Any, a: Any, b: Any) -> str | None:
    return _fill_reason(a) or _fill_reason(b)


def _scalar_reason(xp: Any, dtype: Any, name: str, s: Any) -> str | None:
    if xp.isdtype(dtype, "integral") and not float(s.real if isinstance(s, complex) else s).is_integer():
        return f"{name}={s!r} is not an integer, and the result dtype is an integer dtype"
    if isinstance(s, complex) and not xp.isdtype(dtype, "complex floating"):
        return f"{name}={s!r} is complex, and the result dtype is real"
    return None


def _supports_addmm(xp: Any, input: Any, a: Any, b: Any, beta: Any, alpha: Any) -> str | None:
    reason = _supports_matmul(xp, a, b)
    if reason:
        return reason
    dtype = xp.result_type(input.dtype, a.dtype, b.dtype)
    return _scalar_reason(xp, dtype, "beta", beta) or _scalar_reason(xp, dtype, "alpha", alpha)


@register("matmul", (sparse_semi_structured, strided), supports=_supports_matmul)
def _matmul_semi_structured_strided(xp: Any, a: SemiStructuredArray, b: Any) -> Any:
    """semi-structured @ strided -> strided: gather the rows of b selected by each row's kept columns; O(nnz * n)."""
    return matmul(xp, a, b)


@register("matmul", (strided, sparse_semi_structured), supports=_supports_matmul)
def _matmul_strided_semi_structured(xp: Any, a: Any, b: SemiStructuredArray) -> Any:
    """strided @ semi-structured -> strided: (b.T @ a.T).T by the same gather; O(nnz * m)."""
    return matmul(xp, a, b)


def addmm(xp: Any, input: Any, a: Any, b: Any, beta: Any, alpha: Any) -> Any:
    """``beta * input + alpha * (a @ b)``; with ``beta == 0`` the input is ignored (its NaNs too), as in torch."""
    return combine(xp, input, matmul(xp, a, b), beta, alpha)


def combine(xp: Any, input: Any, product: Any, beta: Any, alpha: Any) -> Any:
    """``beta * input + alpha * product`` in this order of operations, which every backend's addmm follows
    so that their results agree bit for bit (except torch's fused-bias ``linear``, whose epilogue adds the
    bias before rounding the product). Both are cast to the result's dtype first, in which the scalars were
    checked (``_supports_addmm``): 0.5 times an int8 input, added to a float32 product, is a float32 0.5."""
    dtype = xp.result_type(input.dtype, product.dtype)
    input, product = xp.astype(input, dtype, copy=False), xp.astype(product, dtype, copy=False)
    if alpha != 1:
        product = product * _fill_scalar(xp, product.dtype, alpha)
    if beta == 0:
        # the input's shape and dtype still take part in broadcasting and promotion, its values do not
        return product + xp.zeros_like(input)
    return (input if beta == 1 else input * _fill_scalar(xp, input.dtype, beta)) + product


@register("addmm", (strided, sparse_semi_structured, strided), supports=_supports_addmm)
def _addmm_strided_semi_structured_strided(xp: Any, input: Any, a: SemiStructuredArray, b: Any, beta: Any, alpha: Any) -> Any:
    """addmm(strided, semi-structured, strided) -> strided: beta * input + alpha * (a @ b) by the gather product; O(nnz * n)."""
    return addmm(xp, input, a, b, beta, alpha)


@register("addmm", (strided, strided, sparse_semi_structured), supports=_supports_addmm)
def _addmm_strided_strided_semi_structured(xp: Any, input: Any, a: Any, b: SemiStructuredArray, beta: Any, alpha: Any) -> Any:
    """addmm(strided, strided, semi-structured) -> strided, torch's addmm(bias, dense, sparse.t()); O(nnz * m)."""
    return addmm(xp, input, a, b, beta, alpha)


@register("detach", (sparse_semi_structured,))
def _detach_semi_structured(xp: Any, a: SemiStructuredArray) -> SemiStructuredArray:
    """detach(semi-structured): the Array API has no autograd, so the array itself; O(1)."""
    return a
