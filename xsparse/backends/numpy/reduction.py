"""Native reduction kernels of the NumPy backend: CSR and CSC reduced along one sparse dimension.

Along the plain dimension (a CSR array's rows summed over their columns) every compressed slice is one
contiguous run of values, which ``ufunc.reduceat`` reduces in one pass; along the compressed
dimension the values scatter into their plain index with ``ufunc.at`` (SciPy's compiled product with
a vector of ones for sums). Both are O(nnz + n), as SciPy's ``sum(axis=...)``, and handle every fill
value: each slice is combined with ``fill`` once per unspecified element, by the generic kernels'
helpers. With ``layout=xs.strided`` (SciPy's form of the result) the kernels write every slice's result
at once; the default COO result also finds the slices that hold values.

Sums (and ``count_nonzero``, a sum of truth values) of values without dense dimensions run the compiled
parallel kernels of ``_cpu.csr_sums`` instead (row sums in parallel over rows; column sums scattered
by each thread into its own copy, then added up, with the columns that hold an entry), where the
extension is built and the dtype is one it handles.

Reducing both sparse dimensions of an unbatched array (``axis=None`` for a matrix) reduces the values
with one ufunc call -- large sums in pieces on the CPUs that no other task is running on; counts of
nonzero values by the compiled parallel ``_cpu.count_nonzero``, without the truth values and their
cast -- and combines the result with the unspecified elements' fill values.

The 2-norm over every element of a COO (coalesced) or compressed array is ``sqrt(dot(v, v))`` of the
values (a complex array's real view: ``|z|**2 = re**2 + im**2``), one BLAS pass as in SciPy's
``norm``, plus the fill value's square once per unspecified element; overflow gives inf and NaN
propagates, as in the generic kernel's ``abs``, ``square`` and ``sum``.

COO arrays reduced over some of their sparse dimensions group their entries by the kept ones, folded
into one int64 key: entries already in key order (coalesced, the kept dimensions leading) reduce as
runs with ``ufunc.reduceat``; others reduce into an array of every key with ``ufunc.at``, or, where the
kept dimensions hold far more positions than there are entries, into one slot per distinct key (a
sort of the keys). O(nnz + kept positions), against the generic kernels' sort and log-depth scan.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...dispatch import register
from ...formats import COMPRESSED, INDEXED, COOArray, CompressedArray, SparseArray, sparse_coo, strided
from ...formats._invariants import check_coo_bounds, verified
from .. import _cpu
from ..array_api.reduction import (
    MONOIDS,
    ReduceSpec,
    assemble,
    fill_array,
    fill_of,
    is_neutral,
    mean_of_sum,
    monoid_coo,
    reduced_shape,
    result_kind,
    wide_groups_reason,
    with_fill,
)
from .conversion import fold
from .elementwise import _cpus, _in_pieces

__all__: list[str] = []

_UFUNCS = {
    "sum": np.add,
    "prod": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "any": np.logical_or,
    "all": np.logical_and,
    "count_nonzero": np.add,
}


def _supports_axis(xp: Any, a: CompressedArray, spec: ReduceSpec) -> str | None:
    if a.layout.is_blocked:
        return "the NumPy kernels reduce CSR and CSC arrays, not blocks"
    if a.batch_dim():
        return f"the NumPy kernels reduce unbatched arrays, this one has batch_dim={a.batch_dim()}"
    if spec.axes == (0, 1) and a.ndim == 2:
        return None
    if len(spec.axes) != 1 or spec.axes[0] > 1:
        return f"the NumPy kernels reduce one or both of the two sparse dimensions, not axes={spec.axes}"
    return wide_groups_reason(a, spec.axes[0])


# Sums of at least this many values are split between the CPUs.
_PARALLEL_SUM_MIN = 1 << 21


def _compiled_sum(name: str, data: np.ndarray) -> bool:
    """Whether ``_cpu.csr_sums`` computes this reduction of these (premapped) values."""
    return (
        name in ("sum", "count_nonzero") and data.ndim == 1 and _cpu.unavailable_reason() is None
        and _cpu.supports_arith_dtype(data.dtype)
    )  # fmt: skip


def _reduce_all(ufunc: Any, data: np.ndarray) -> np.ndarray:
    """``ufunc.reduce(data, axis=0, keepdims=True)``; a large 1-D sum in pieces on the idle CPUs."""
    n = data.shape[0]
    if ufunc is not np.add or data.ndim != 1 or n < _PARALLEL_SUM_MIN or _cpus() < 2:
        # in the values' own dtype: NumPy would sum small integers in its default integer. Overflow gives
        # inf and NaN propagates silently, as torch has it ("No floating-point warnings on NumPy" in
        # docs/decisions.md)
        with np.errstate(all="ignore"):
            return np.asarray(ufunc.reduce(data, axis=0, keepdims=True, dtype=data.dtype))

    def run(lo: int, hi: int) -> Any:
        with np.errstate(all="ignore"):
            return np.add.reduce(data[lo:hi], dtype=data.dtype)

    total = np.add.reduce(np.asarray(_in_pieces(n, _PARALLEL_SUM_MIN // 4, run), dtype=data.dtype))
    return np.reshape(np.asarray(total, dtype=data.dtype), (1,))


def _full_kernel(monoid: Any, ufunc: Any, xp: Any, a: CompressedArray | COOArray, spec: ReduceSpec) -> Any:
    """Reduce every dimension of an array without dense dimensions or blocks whose entries lie at distinct
    positions (an unbatched CSR or CSC array, a coalesced COO array): the values, then the fill.

    Everything is NumPy's own (no namespace wrappers, the fill value made and compared with the ufunc's
    identity directly): on a small array the reduction itself is a few microseconds, and the generic
    machinery around it was ten times that."""
    vals = np.asarray(a._vals)
    nse = vals.shape[0]
    unspecified = math.prod(a.shape) - nse
    out_shape = (1,) * a.ndim if spec.keepdims else ()  # every axis is reduced
    # the fill value as a 0-d array of the values' dtype (NumPy keeps the sign of a -0.0), premapped
    f = np.asarray(monoid.premap(xp, np.asarray(a.fill_value, dtype=vals.dtype), spec.dtype))
    if nse == 0:
        return np.reshape(np.asarray(fill_of(xp, monoid, f, unspecified), dtype=f.dtype), out_shape)
    if monoid.name == "count_nonzero":
        # counted where they lie, without the truth values and their cast (the count wraps to the dtype as a sum would)
        g = np.asarray([_cpu.count_nonzero(vals)], dtype=np.int64).astype(spec.dtype)
    else:
        g = _reduce_all(ufunc, np.asarray(monoid.premap(xp, vals, spec.dtype)))
    # the fill changes nothing where it is the ufunc's identity (the monoid's: 0 for sums, 1 for products,
    # False for any, True for all; max and min have none)
    if unspecified and not (ufunc.identity is not None and f == ufunc.identity):
        if monoid.idempotent:
            # max, min, any, all: any number of fill values is one (the monoid's combine is this ufunc)
            with np.errstate(all="ignore"):
                g = ufunc(g, f)
        else:
            g = np.asarray(with_fill(xp, monoid, g, f, np.asarray([unspecified], dtype=np.int64)))
    return np.reshape(g, out_shape)


def _start(ufunc: Any, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An array that ``ufunc.at`` can reduce into: the ufunc's identity, or the dtype's extreme value."""
    if ufunc.identity is not None:
        return np.full(shape, ufunc.identity, dtype=dtype)
    extreme: Any
    if np.issubdtype(dtype, np.floating):
        extreme = -np.inf if ufunc is np.maximum else np.inf
    else:
        info = np.iinfo(dtype)
        extreme = info.min if ufunc is np.maximum else info.max
    return np.full(shape, extreme, dtype=dtype)


def _plain_groups(ufunc: Any, a: CompressedArray, data: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reduce within each compressed slice (a contiguous run of values): every slice's result (the
    ``start`` value where it is empty) and its number of values."""
    indptr = np.asarray(a._compressed)
    counts = np.diff(indptr)
    present = np.flatnonzero(counts)
    if present.size:
        # reduceat reads an empty run as the value at its start, hence the empty slices are left out
        with np.errstate(all="ignore"):  # overflow gives inf, silently (see _reduce_all)
            start[present] = ufunc.reduceat(data, indptr[:-1][present], axis=0)
    return start, counts


def _compressed_groups(ufunc: Any, a: CompressedArray, data: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Reduce each plain index across the slices: every index's result (``start`` where it has none)."""
    indices = np.asarray(a._plain)
    n = start.shape[0]
    if ufunc is np.add and data.ndim == 1 and data.dtype.kind != "c":
        # SciPy's compiled product of a row of ones with the matrix: the sums of every plain index (not of
        # complex values: (1 + 0j) * (inf + 0j) is inf + nanj, where the sum is inf + 0j)
        from scipy import sparse

        major = np.asarray(a._compressed)
        m = sparse.csr_array((data, indices, major), shape=(major.shape[0] - 1, n), copy=False)
        return np.reshape(np.ones((1, major.shape[0] - 1), dtype=data.dtype) @ m, (n,))
    with np.errstate(all="ignore"):  # overflow gives inf, silently (see _reduce_all)
        ufunc.at(start, indices, data)
    return start


def _seen(indices: np.ndarray, n: int) -> np.ndarray:
    """The sorted distinct values of ``indices`` (in ``0..n-1``), without counting them."""
    mask = np.zeros(n, dtype=bool)
    mask[indices] = True
    return np.flatnonzero(mask)


def _named(kernel: Any, name: str, doc: str) -> Any:
    """``kernel`` named and documented as a kernel of its own (what the registry lists)."""
    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = doc
    return kernel


def _axis_kernel(name: str) -> Any:
    monoid = MONOIDS[name]
    ufunc = _UFUNCS[name]

    def kernel(xp: Any, a: CompressedArray, spec: ReduceSpec) -> Any:
        # NumPy's bincount and ufunc.at read the plain indices: one of 2**63 - 1 overflows bincount's length
        # into a write before its buffer, so an array built without the index checks is checked first (once)
        verified(a)
        if len(spec.axes) == 2:
            return _full_kernel(monoid, ufunc, xp, a, spec)
        (d,) = spec.axes
        cd = a.layout.compressed_dim
        data = np.asarray(monoid.premap(xp, a._vals, spec.dtype))
        f = monoid.premap(xp, fill_array(xp, a), spec.dtype)
        neutral = is_neutral(xp, monoid, f)
        dense_result = spec.layout is strided
        n_groups = a.shape[cd] if d != cd else a.shape[1 - cd]
        compiled = _compiled_sum(name, data)
        counts: np.ndarray | None
        seen: np.ndarray | None = None
        if d != cd:
            if compiled:
                g, _ = _cpu.csr_sums(np.asarray(a._compressed), np.asarray(a._plain), data, a.shape[1 - cd], 1)
                counts = np.diff(np.asarray(a._compressed))
            else:
                g, counts = _plain_groups(ufunc, a, data, _start(ufunc, (n_groups, *data.shape[1:]), data.dtype))
        else:
            # a neutral fill value (0 for a sum) needs no count of the unspecified elements
            counts = None if neutral else np.bincount(np.asarray(a._plain), minlength=n_groups)
            if compiled:
                want_seen = counts is None and not dense_result
                g, seen = _cpu.csr_sums(np.asarray(a._compressed), np.asarray(a._plain), data, n_groups, 0, seen=want_seen)
            else:
                g = _compressed_groups(ufunc, a, data, _start(ufunc, (n_groups, *data.shape[1:]), data.dtype))
        n = a.shape[d]
        if n == 0:
            # every group is empty: the reduction of nothing (max and min have no identity; the fill
            # value stands in, as in the generic kernel), not the extreme value the ufuncs started from
            g = np.full_like(g, np.asarray(fill_of(xp, monoid, f, 0)))
        if dense_result:
            # every group at once, as the strided result the caller asked for (SciPy's form)
            if counts is not None and not neutral:
                g = with_fill(xp, monoid, xp.asarray(g), f, xp.asarray(n - counts))
            return xp.asarray(np.reshape(g, reduced_shape(a.shape, spec.axes, spec.keepdims)))
        if counts is not None:
            present = np.flatnonzero(counts)
        else:
            present = np.flatnonzero(seen) if seen is not None else _seen(np.asarray(a._plain), n_groups)
        g = g[present]
        if counts is not None and not neutral:
            g = with_fill(xp, monoid, xp.asarray(g), f, xp.asarray(n - counts[present]))
        keys = xp.asarray(present.astype(np.asarray(a._plain).dtype)[None, :])
        return assemble(xp, a._backend, a.shape, 2, spec, keys, xp.asarray(g), fill_of(xp, monoid, f, n))

    return _named(
        kernel, f"_{name}_compressed_numpy",
        f"{name}(CSR/CSC) along one sparse dimension -> COO (or strided if asked), or both -> 0-d: compiled sums, "
        "ufunc.reduceat or ufunc.at; O(nnz + n).",
    )  # fmt: skip


for _name in _UFUNCS:
    register(_name, (COMPRESSED,), backend="numpy", supports=_supports_axis)(_axis_kernel(_name))


# -- COO over sparse dimensions ----------------------------------------------------------------------------

# Kept dimensions with more positions than this many per entry (plus a floor) are reduced into one slot
# per distinct key instead of one per position.
_DENSE_KEYS_PER_ENTRY = 4
_DENSE_KEYS_MIN = 1 << 16
_INT64_MAX = np.iinfo(np.int64).max


def _supports_coo(xp: Any, a: COOArray, spec: ReduceSpec) -> str | None:
    sd = a.sparse_dim()
    if result_kind(a.ndim, sd, spec.axes) == "structure":
        return "reducing dense dimensions only keeps the structure, which the generic kernel does in one pass"
    if math.prod(a.shape[d] for d in range(sd) if d not in spec.axes) > _INT64_MAX:
        return "the kept sparse dimensions do not fit one int64 key"
    return None


def _runs(ufunc: Any, keys: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reduce runs of equal ``keys`` (sorted): the distinct keys, their results and entry counts."""
    n = keys.shape[0]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if n else np.zeros(0, dtype=np.intp)
    with np.errstate(all="ignore"):  # a NaN compared by maximum, or an overflow: NaN or inf is the answer, not a fault
        g = ufunc.reduceat(v, starts, axis=0, dtype=v.dtype) if n else v[:0]
    return keys[starts], g, np.diff(np.r_[starts, n])


def _slots(ufunc: Any, keys: np.ndarray, n_slots: int, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reduce ``v`` into ``n_slots`` slots by ``keys`` (in input order, with ``ufunc.at``): the slots that
    received entries, their results and entry counts."""
    counts = np.bincount(keys, minlength=n_slots)
    acc = _start(ufunc, (n_slots, *v.shape[1:]), v.dtype)
    with np.errstate(all="ignore"):  # a NaN compared by maximum, or an overflow: NaN or inf is the answer, not a fault
        ufunc.at(acc, keys, v)
    present = np.flatnonzero(counts)
    return present, acc[present], counts[present]


def _groups_by_key(xp: Any, monoid: Any, c: COOArray, kept: list[int], v: Any) -> tuple[Any, Any, Any]:
    """:func:`..array_api.reduction.sorted_groups` by one int64 key of the kept sparse indices: runs of
    sorted keys, a slot per position, or a slot per distinct key; every sparse index reduced, one group."""
    ufunc = _UFUNCS[monoid.name]
    v = np.asarray(v)
    idx = np.asarray(c._idx)
    nnz = idx.shape[1]
    if not kept:
        counts = np.full(1 if nnz else 0, nnz, dtype=np.int64)
        g = _reduce_all(ufunc, v) if nnz else v[:0]
        return np.zeros((0, counts.shape[0]), dtype=idx.dtype), g, counts
    kept_shape = tuple(c.shape[d] for d in kept)
    if not c._bounds_checked and nnz:
        # keys of indices out of range would be slots out of range (bincount writes before its buffer where
        # one of them is 2**63 - 1): the bounds of an array built without the index checks, one pass
        check_coo_bounds(c)
    keys = fold([idx[d] for d in kept], kept_shape)
    n_keys = math.prod(kept_shape)
    if c.is_coalesced() and kept == list(range(len(kept))):
        present, g, counts = _runs(ufunc, keys, v)
    elif n_keys <= _DENSE_KEYS_PER_ENTRY * nnz + _DENSE_KEYS_MIN:
        present, g, counts = _slots(ufunc, keys, n_keys, v)
    else:
        distinct, rank = np.unique(keys, return_inverse=True)
        slot, g, counts = _slots(ufunc, rank, distinct.shape[0], v)
        present = distinct[slot]
    rows = np.unravel_index(present, kept_shape) if present.size else [present] * len(kept)
    return np.stack(rows).astype(idx.dtype, copy=False), g, counts


def _coo_kernel(name: str) -> Any:
    monoid = MONOIDS[name]
    ufunc = _UFUNCS[name]

    def kernel(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
        if len(spec.axes) == a.ndim and a.dense_dim() == 0 and a._coalesced:
            return _full_kernel(monoid, ufunc, xp, a, spec)
        return monoid_coo(xp, monoid, a, spec, _groups_by_key)

    return _named(
        kernel, f"_{name}_coo_numpy",
        f"{name}(COO) over sparse dimensions -> COO or strided: entries grouped by one int64 key of the kept "
        "dimensions (runs, ufunc.at or distinct keys); O(nnz + kept positions).",
    )  # fmt: skip


for _name in _UFUNCS:
    register(_name, (sparse_coo,), backend="numpy", supports=_supports_coo)(_coo_kernel(_name))


@register("mean", (sparse_coo,), backend="numpy", supports=_supports_coo)
def _mean_coo_numpy(xp: Any, a: COOArray, spec: ReduceSpec) -> Any:
    """mean(COO) over sparse dimensions -> COO or strided: the grouped, fill-aware sum over the full count; O(nnz + kept positions)."""
    return mean_of_sum(xp, monoid_coo(xp, MONOIDS["sum"], a, spec, _groups_by_key), a, spec)


# -- the 2-norm over every element ----------------------------------------------------------------------

# The dtypes of BLAS dot products, and the real dtype of each (what the norm has).
# Double precision only: a single-precision BLAS dot sums in single precision, one running sum per
# lane, which loses digits the generic kernel's pairwise sum keeps (1e-4 relative for 1e8 float32 values).
_REAL = {np.dtype(np.float64): np.dtype(np.float64), np.dtype(np.complex128): np.dtype(np.float64)}


def _every_axis(axis: Any, ndim: int) -> bool:
    """Whether ``axis`` (None, an int or a tuple of them) names every dimension of an ``ndim``-D array."""
    if axis is None:
        return True
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if not all(isinstance(d, int) and -ndim <= d < ndim for d in axes):
        return False
    return sorted(d % ndim for d in axes) == list(range(ndim))


def _supports_vector_norm(xp: Any, a: SparseArray, axis: Any, keepdims: bool, ord: Any) -> str | None:  # noqa: A002
    if isinstance(ord, bool) or ord != 2:
        return f"it computes the 2-norm, not ord={ord!r}"
    if not _every_axis(axis, a.ndim):
        return f"it reduces every dimension, not axis={axis!r}"
    if np.dtype(a.dtype) not in _REAL:
        return f"it takes float64 and complex128, not {np.dtype(a.dtype)}"
    if isinstance(a, COOArray) and not a.is_coalesced():
        return "the duplicates of an uncoalesced COO array add up before their magnitudes do; the generic kernel sums them first"
    return None


@register("vector_norm", (INDEXED,), backend="numpy", supports=_supports_vector_norm)
def _vector_norm_indexed_numpy(xp: Any, a: SparseArray, axis: Any, keepdims: bool, ord: Any) -> Any:  # noqa: A002
    """vector_norm(COO or compressed, ord=2) over every dimension: sqrt of a BLAS dot of the values with themselves, plus the fill's share; O(nnz)."""
    values = np.asarray(a._vals)
    real = _REAL[values.dtype]
    # |z|**2 is re**2 + im**2: a complex array's real view holds both parts
    flat = np.ascontiguousarray(values).reshape(-1).view(real) if real != values.dtype else values.reshape(-1)
    unspecified = math.prod(a.shape) - values.size
    # NumPy's BLAS (SciPy's own would start a second pool of threads, which then contend with NumPy's);
    # overflow gives inf and NaN propagates, silently, as in the generic kernel's squares and sums
    with np.errstate(all="ignore"):
        squares = np.dot(flat, flat)  # a scalar of the real dtype
        if squares != squares and real != values.dtype:
            # a NaN from inf**2 + nan**2: |inf + nanj| is inf (the standard's abs), and |z|**2 the square of it
            m = np.abs(values).reshape(-1)
            squares = np.dot(m, m)
        if unspecified and a.fill_value != 0:
            # as the generic kernel adds them: the fill's square times the count, in the values' precision
            f = np.abs(np.asarray(a.fill_value, dtype=values.dtype))
            squares = squares + (f * f) * np.asarray(unspecified, dtype=real)
    # a NumPy array is the backend's array
    return np.asarray(np.sqrt(squares)).reshape((1,) * a.ndim if keepdims else ())
