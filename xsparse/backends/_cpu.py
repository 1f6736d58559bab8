"""Compiled CPU conversion kernels of the NumPy backend.

Thin wrappers around :mod:`xsparse.backends._native` (built from ``_native.cpp``). The wrappers
validate and normalise their inputs, allocate every output with NumPy -- so the memory is counted by
NumPy and :mod:`tracemalloc`, and nothing is copied out of the extension -- and lend the arrays to
the kernels as buffers. The kernels are 2-D plus trailing dense dimensions; batch dimensions are
linearised into the major index by the caller.

The extension is optional: :func:`unavailable_reason` says why it could not be imported, and the
caller then falls back to other kernels.
"""

from __future__ import annotations

import importlib
import math
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np

__all__ = [
    "coo_matmul",
    "coo_to_compressed",
    "compressed_canonical",
    "compressed_find",
    "gather_slices",
    "count_nonzero",
    "take_plain",
    "compressed_to_dense",
    "dense_to_compressed",
    "csr_matmul",
    "csr_spgemm",
    "csr_sddmm",
    "csr_merge",
    "csr_sums",
    "empty",
    "expand_compressed",
    "join_plain",
    "release_cached_memory",
    "supports_arith_dtype",
    "available_threads",
    "supports_dtype",
    "supports_linalg_dtype",
    "transpose_compressed",
    "unavailable_reason",
]

_VALUE_DTYPES = frozenset(
    np.dtype(t)
    for t in (
        np.bool_,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float32,
        np.float64,
        np.complex64,
        np.complex128,
    )
)
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
_LINALG_DTYPES = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))
_ARITH_DTYPES = frozenset(
    np.dtype(t) for t in (np.int32, np.int64, np.float32, np.float64, np.complex64, np.complex128)
)
_INT32_MAX = int(np.iinfo(np.int32).max)
_MERGE_OPS = {"add": 0, "subtract": 1, "multiply": 2}

# Below this many entries one thread scatters: starting threads and clearing per-thread counters
# would cost more than they save.
_PARALLEL_SCATTER_MIN_NNZ = 1 << 16


_IMPORT_LOCK = threading.Lock()
_IMPORTED: list[tuple[ModuleType | None, str | None]] = []


def _import_native() -> tuple[ModuleType | None, str | None]:
    """The extension module and ``None``, or ``None`` and why it could not be imported; imported once, under a
    lock (the environment change below is the process's, and two imports at once would undo each other's)."""
    if not _IMPORTED:
        with _IMPORT_LOCK:
            if not _IMPORTED:
                _IMPORTED.append(_import_native_once())
    return _IMPORTED[0]


def _import_native_once() -> tuple[ModuleType | None, str | None]:
    # OpenMP runtimes read OMP_WAIT_POLICY once, when they load, which for the one the extension
    # links is normally while it is imported here. By default idle threads spin for a few
    # milliseconds; when another process keeps a CPU busy, that made the two-thread conversions
    # about 3 times slower than one thread (measured on 2 CPUs), while passive waiting cost at most
    # a few percent on an idle machine. So unless the user chose a policy, ask for a passive one, for
    # the import only. The environment is the process's: while the import runs (a few milliseconds,
    # once), other threads can read OMP_WAIT_POLICY=PASSIVE, and a subprocess or library they start
    # then inherits it; after it, the variable is gone again. (Passive waiting costs each parallel
    # region a wake-up of its threads, about 20 us: see product_threads for the products it shapes.)
    chosen = "OMP_WAIT_POLICY" in os.environ
    if not chosen:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        native = importlib.import_module(f"{__package__}._native")
    except ImportError as exc:
        return None, (
            f"the compiled kernels (xsparse.backends._native) could not be imported ({exc}); "
            "reinstall xsparse where a C++17 compiler is available, e.g. `pip install -e .`"
        )
    finally:
        if not chosen:
            # pop: a thread of the user's may have removed it meanwhile
            os.environ.pop("OMP_WAIT_POLICY", None)
    return native, None


# The imported extension, once it has been (the linear-algebra wrappers read it from here: a cached
# function call would be a tenth of the time of a small SpMV).
_NATIVE: list[Any] = []


def _native_module() -> Any:
    module, reason = _import_native()
    if module is None:
        raise RuntimeError(reason)
    if not _NATIVE:
        _NATIVE.append(module)
    return module


# Outputs at least this large come from the extension's pool of freed blocks (see `empty`). Below
# it the C allocator keeps freed memory; above it, it may give the memory back to the system, and the
# next output faults every page in again (for the 8 MB of a million column sums, done by two threads
# at once, that took twice as long as the sums).
_POOLED_MIN_BYTES = 4 << 20


def empty(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """An uninitialised C-contiguous array, as ``numpy.empty``; large ones reuse freed memory.

    Parameters
    ----------
    shape : tuple of int
        The array's shape.
    dtype : numpy dtype
        Its dtype.

    Returns
    -------
    numpy.ndarray
        A writable array. From 4 MiB up, its memory comes from a pool of the blocks that earlier large
        results released (a block returns to it when the last array viewing it is freed), so that a
        product called in a loop does not take a fresh mapping from the system, and a page fault per
        page of it, on every call. The pool keeps at most four blocks and an eighth of the machine's
        memory (2 GiB at most); :func:`release_cached_memory` empties it.

    Examples
    --------
    >>> from xsparse.backends import _cpu
    >>> out = _cpu.empty((3, 2), "float64")
    >>> out.shape, out.dtype.name, out.flags.c_contiguous
    ((3, 2), 'float64', True)
    """
    dtype = np.dtype(dtype)
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes < _POOLED_MIN_BYTES or not _NATIVE:
        return np.empty(shape, dtype=dtype)
    return np.frombuffer(_NATIVE[0].pool_block(nbytes), dtype=dtype, count=count).reshape(shape)


def release_cached_memory() -> int:
    """Free the large output blocks kept for reuse (see :func:`empty`); returns the bytes freed.

    Returns
    -------
    int
        The number of bytes given back to the system (0 when nothing was pooled, or without the
        compiled kernels).

    Examples
    --------
    >>> from xsparse.backends import _cpu
    >>> _cpu.release_cached_memory() >= 0
    True
    """
    return int(_NATIVE[0].pool_release()) if _NATIVE else 0


@contextmanager
def scatter_copy_limit(nbytes: float) -> Iterator[None]:
    """Within the block, a parallel scatter product (``csr_matmul(..., transpose=True)``) uses at most
    ``nbytes`` of private copies of its output, and shares a larger output between its threads by
    columns. A tuning hook for tests, process-wide: not for concurrent use."""
    native = _native_module()
    previous = native.scatter_copy_limit(float(nbytes))
    try:
        yield
    finally:
        native.scatter_copy_limit(previous)


def unavailable_reason() -> str | None:
    """Say why the compiled kernels cannot be used, if they cannot.

    Returns
    -------
    str or None
        ``None`` when :mod:`xsparse.backends._native` imported, otherwise a sentence saying why it
        did not.
    """
    return _import_native()[1]


def _dtype_in(dtype: Any, allowed: frozenset[np.dtype]) -> bool:
    try:
        return np.dtype(dtype) in allowed
    except TypeError:
        return False


def supports_dtype(dtype: Any) -> bool:
    """Whether the kernels handle values of this dtype.

    Parameters
    ----------
    dtype : dtype-like
        The value dtype.

    Returns
    -------
    bool
        True for bool, the signed and unsigned integers of 8 to 64 bits, float32, float64,
        complex64 and complex128 in native byte order.
    """
    return _dtype_in(dtype, _VALUE_DTYPES)


def _check_value_dtype(dtype: np.dtype) -> None:
    if dtype not in _VALUE_DTYPES:
        raise TypeError(f"the compiled kernels do not support values of dtype {dtype}")


def _check_index_capacity(count: int, index_dtype: np.dtype, what: str) -> None:
    """Raise OverflowError if ``count`` exceeds the largest value of ``index_dtype``."""
    if count > np.iinfo(index_dtype).max:
        raise OverflowError(
            f"{what} ({count}) does not fit in {index_dtype} indices; use int64 indices"
        )


def _scatter_threads(native: Any, nnz: int, n_major: int, ptr_itemsize: int, out_bytes: int) -> int:
    """Threads for the COO scatter; each needs a counter per major slice (``ptr_itemsize`` bytes).

    The counters are capped at a quarter of the output's size, so that the conversion's peak stays
    well under 1.5 times its result even when slices are much sparser than one entry each.
    """
    if nnz < _PARALLEL_SCATTER_MIN_NNZ or n_major == 0:
        return 1
    affordable = (out_bytes // 4) // (n_major * ptr_itemsize)
    threads = min(native.max_threads(), affordable)
    return threads if threads >= 2 else 1


def coo_to_compressed(
    major: np.ndarray,
    minor: np.ndarray,
    values: np.ndarray,
    n_major: int,
    n_minor: int,
    *,
    sum_duplicates: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Convert coordinates to a compressed (CSR-like) layout.

    Parameters
    ----------
    major, minor : numpy.ndarray
        1-D index arrays of one dtype, int32 or int64, with ``0 <= major < n_major`` and
        ``0 <= minor < n_minor`` (the caller checks; an out-of-range major index raises ValueError,
        an out-of-range minor index gives an unspecified result). They may be strided.
    values : numpy.ndarray
        Values of shape ``(nnz, *dense_shape)`` and a supported dtype (see :func:`supports_dtype`).
        Strided values are read in place when the trailing dimensions merge into one axis,
        otherwise copied once.
    n_major, n_minor : int
        The sizes of the major and minor dimensions.
    sum_duplicates : bool, optional
        Whether to merge entries with equal coordinates, summing their values (logical or for bool;
        integers wrap around as in NumPy). Without it duplicates keep their input order.

    Returns
    -------
    indptr : numpy.ndarray
        Shape ``(n_major + 1,)``, the dtype of ``major``.
    indices : numpy.ndarray
        Shape ``(nnz_out,)``, the dtype of ``major``; ascending within each major slice (and
        unique there when ``sum_duplicates``).
    data : numpy.ndarray
        Shape ``(nnz_out, *dense_shape)``, the dtype of ``values``.

    Raises
    ------
    OverflowError
        If the result's number of entries does not fit the index dtype.

    Notes
    -----
    The outputs are allocated at the input's size, filled by a stable counting scatter, sorted
    and merged slice by slice in place, then shrunk in place to the merged size: the peak memory
    above the inputs is about ``nnz / nnz_out`` times the result, plus per-thread counters of at
    most a quarter of it.
    """
    native = _native_module()
    major = np.asarray(major)
    minor = np.asarray(minor)
    values = np.asarray(values)
    if major.ndim != 1 or minor.shape != major.shape:
        raise ValueError("major and minor must be 1-D arrays of the same length")
    if major.dtype != minor.dtype or major.dtype not in _INDEX_DTYPES:
        raise TypeError(f"major and minor must both be int32 or int64, got {major.dtype} and {minor.dtype}")
    if values.ndim < 1 or values.shape[0] != major.shape[0]:
        raise ValueError(f"values must have shape (nnz, ...) with nnz = {major.shape[0]}, got {values.shape}")
    _check_value_dtype(values.dtype)
    n_major, n_minor = int(n_major), int(n_minor)
    if n_major < 0 or n_minor < 0:
        raise ValueError("n_major and n_minor must be non-negative")

    index_dtype = major.dtype
    nnz = major.shape[0]
    dense_shape = values.shape[1:]
    block = math.prod(dense_shape)
    # indptr holds offsets up to nnz; only when the input alone exceeds int32 is it widened, and
    # narrowed back (or OverflowError) once duplicates are merged.
    wide = nnz > np.iinfo(index_dtype).max
    ptr_dtype = np.dtype(np.int64) if wide else index_dtype
    # A view when the trailing dimensions merge (always for 1-D values), otherwise a copy.
    values2 = values.reshape(nnz, block)

    indptr = np.empty(n_major + 1, dtype=ptr_dtype)
    indices = np.empty(nnz, dtype=index_dtype)
    data = np.empty((nnz, *dense_shape), dtype=values.dtype)
    out_bytes = indptr.nbytes + indices.nbytes + data.nbytes
    threads = _scatter_threads(native, nnz, n_major, ptr_dtype.itemsize, out_bytes)
    workspace = np.empty((threads, n_major), dtype=ptr_dtype) if threads > 1 else None
    nnz_out = native.coo_to_compressed(
        major,
        minor,
        values2,
        indptr,
        indices,
        data.reshape(nnz, block),
        workspace,
        bool(sum_duplicates),
        values.dtype.kind,
    )
    del workspace, values2
    if nnz_out < nnz:
        # Shrink in place (realloc) rather than slicing, so the merged-away tail is returned to the
        # allocator. The arrays were created above and only lent to the kernel, so no other
        # reference or view exists and skipping the reference check is safe.
        indices.resize(nnz_out, refcheck=False)
        data.resize((nnz_out, *dense_shape), refcheck=False)
    if wide:
        _check_index_capacity(nnz_out, index_dtype, "the number of specified entries")
        indptr = indptr.astype(index_dtype)
    return indptr, indices, data


def dense_to_compressed(dense: np.ndarray, index_dtype: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Convert a dense array to a compressed (CSR-like) layout.

    Parameters
    ----------
    dense : numpy.ndarray
        Shape ``(n_major, n_minor, *dense_shape)``, a supported dtype. Entry ``(i, j)`` is
        specified iff some element of ``dense[i, j, ...]`` is not +0 (NaN and -0.0 are specified:
        the fill value is +0.0, docs/decisions.md "Fill values"). Any strides are read in place (e.g. a transpose is not copied); only when
        the trailing dimensions cannot be merged into one strided axis is the array copied once.
    index_dtype : dtype-like
        int32 or int64, the dtype of the returned ``indptr`` and ``indices``.

    Returns
    -------
    indptr : numpy.ndarray
        Shape ``(n_major + 1,)``.
    indices : numpy.ndarray
        Shape ``(nnz,)``, ascending within each major slice.
    data : numpy.ndarray
        Shape ``(nnz, *dense_shape)``, the dtype of ``dense``, in row-major order.

    Raises
    ------
    OverflowError
        If ``n_minor`` or the number of specified entries does not fit ``index_dtype``.

    Notes
    -----
    Two passes: the first counts each slice's entries, then the outputs are allocated at their
    exact sizes and the second pass fills them, so the peak memory above the input is the result.
    """
    native = _native_module()
    dense = np.asarray(dense)
    index_dtype = np.dtype(index_dtype)
    if index_dtype not in _INDEX_DTYPES:
        raise TypeError(f"index_dtype must be int32 or int64, got {index_dtype}")
    if dense.ndim < 2:
        raise ValueError(f"dense must have at least 2 dimensions, got shape {dense.shape}")
    _check_value_dtype(dense.dtype)
    n_major, n_minor = dense.shape[:2]
    dense_shape = dense.shape[2:]
    block = math.prod(dense_shape)
    _check_index_capacity(n_minor, index_dtype, "the minor dimension's size")
    # A view whenever the trailing dimensions merge into one strided axis (always for 2-D input,
    # whatever its strides); a copy only otherwise.
    dense3 = dense.reshape(n_major, n_minor, block)

    indptr = np.empty(n_major + 1, dtype=index_dtype)
    nnz = native.dense_count(dense3, indptr, dense.dtype.kind)
    _check_index_capacity(nnz, index_dtype, "the number of specified entries")
    indices = np.empty(nnz, dtype=index_dtype)
    data = np.empty((nnz, *dense_shape), dtype=dense.dtype)
    native.dense_fill(dense3, indptr, indices, data.reshape(nnz, block), dense.dtype.kind)
    return indptr, indices, data


def compressed_to_dense(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    n_major: int,
    n_minor: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Convert a compressed (CSR-like) layout to a dense array.

    Parameters
    ----------
    indptr : numpy.ndarray
        Shape ``(n_major + 1,)``, int32 or int64, non-decreasing, ``indptr[-1] <= len(indices)``.
    indices : numpy.ndarray
        1-D, int32 or int64, ``0 <= indices < n_minor`` (ValueError otherwise).
    data : numpy.ndarray
        Shape ``(len(indices), *dense_shape)``, a supported dtype.
    n_major, n_minor : int
        The sizes of the major and minor dimensions.
    out : numpy.ndarray, optional
        A zeroed array of shape ``(n_major, n_minor, *dense_shape)`` and ``data``'s dtype to
        scatter into (any strides; the entries are added to what it holds).

    Returns
    -------
    numpy.ndarray
        ``out``, or a new array, with the entries of each slice scattered into place; duplicates
        are summed (logical or for bool).
    """
    native = _native_module()
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    data = np.asarray(data)
    n_major, n_minor = int(n_major), int(n_minor)
    if indptr.dtype not in _INDEX_DTYPES or indices.dtype not in _INDEX_DTYPES:
        raise TypeError(f"indptr and indices must be int32 or int64, got {indptr.dtype} and {indices.dtype}")
    if indptr.shape != (n_major + 1,) or indices.ndim != 1:
        raise ValueError("indptr must have shape (n_major + 1,) and indices must be 1-D")
    if data.ndim < 1 or data.shape[0] != indices.shape[0]:
        raise ValueError(f"data must have shape ({indices.shape[0]}, ...), got {data.shape}")
    _check_value_dtype(data.dtype)
    dense_shape = data.shape[1:]
    shape = (n_major, n_minor, *dense_shape)
    if out is None:
        # np.zeros gets already-zeroed pages from the OS, so untouched parts cost nothing.
        out = np.zeros(shape, dtype=data.dtype)
    elif not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != data.dtype:
        raise ValueError(f"out must be a {data.dtype} array of shape {shape}")
    block = math.prod(dense_shape)
    data2 = data.reshape(data.shape[0], block)
    target = out.reshape(n_major, n_minor, block)
    # reshape copies when out's trailing dimensions cannot merge into one strided axis; the kernel
    # then adds into that copy, which is written back.
    copied = out.size > 0 and not np.may_share_memory(target, out)
    native.compressed_to_dense(indptr, indices, data2, target, data.dtype.kind)
    if copied:
        out[...] = target.reshape(shape)
    return out


# --- linear algebra -------------------------------------------------------------------------------
#
# The sparse operand is a batch of CSR matrices given by its components as (batch, n) arrays: indptr
# (nb, n_major + 1), indices and data (nb, nse), with nb = 1 for one matrix shared by every batch. A
# CSC matrix is passed as the CSR matrix of its transpose and the product's form chosen accordingly
# (``transpose``). Strided operands are (batch, rows, columns) arrays of any strides (transposed and
# broadcast views are read in place). Index arrays of either dtype are read as they are.


def supports_linalg_dtype(dtype: Any) -> bool:
    """Whether the linear-algebra kernels handle values of this dtype.

    Parameters
    ----------
    dtype : dtype-like
        The value dtype.

    Returns
    -------
    bool
        True for float32, float64, complex64 and complex128 in native byte order.
    """
    return _dtype_in(dtype, _LINALG_DTYPES)


def _rows_contiguous(a: np.ndarray) -> np.ndarray:
    """``a`` itself when its last axis has unit stride, else a C-contiguous copy."""
    if a.ndim and a.shape[-1] > 1 and a.strides[-1] != a.itemsize:
        return np.ascontiguousarray(a)
    return a


def _same_index_dtype(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if indptr.dtype == indices.dtype:
        return indptr, indices
    return indptr.astype(np.int64), indices.astype(np.int64)


def csr_matmul(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    n_minor: int,
    d: np.ndarray,
    *,
    transpose: bool = False,
    c: np.ndarray | None = None,
    alpha: complex = 1.0,
    beta: complex = 0.0,
    out: np.ndarray | None = None,
    checked: bool = False,
) -> np.ndarray:
    """``out[b] = alpha * op(A[b]) @ d[b] + beta * c[b]``, ``op(A)`` being ``A`` or ``A.T``.

    Parameters
    ----------
    indptr, indices, data : numpy.ndarray
        The CSR components of ``A``: ``indptr`` ``(nb, n_major + 1)``, ``indices`` and ``data``
        ``(nb, nse)``, or 1-D for one matrix (also ``nb = 1``: one matrix for every batch). The indices
        are int32 or int64 (of one dtype, else both are widened to int64), the values float32,
        float64, complex64 or complex128. Checked as they are read: offsets out of order, not starting
        at 0 or not ending at nse, or an index out of range, raise ValueError.
    n_minor : int
        The number of columns of ``A``.
    d : numpy.ndarray
        ``(nb, n_minor, K)`` (``(nb, n_major, K)`` with ``transpose``), ``(n_minor, K)`` or a vector
        ``(n_minor,)``; ``data``'s dtype, any strides (transposed and broadcast views are read in place).
    transpose : bool, optional
        Multiply by ``A.T`` (a scatter over ``A``'s rows) instead of ``A`` (a gather).
    c : numpy.ndarray, optional
        Shaped like the result, any strides (broadcast views too); not read when ``beta`` is 0.
    alpha, beta : complex, optional
        The scalars (the real part only, for real values).
    out : numpy.ndarray, optional
        Where to write the result (any strides); a new C-contiguous array otherwise.
    checked : bool, optional
        The offsets and indices are known to be valid (an earlier call or the validator checked them):
        the kernel skips its checks, which are a third of a SpMV's time on short rows.

    Returns
    -------
    numpy.ndarray
        ``out``: ``(nb, rows, K)``, ``(rows, K)`` or ``(rows,)`` as ``d``, with
        ``rows = n_minor if transpose else n_major``.

    Notes
    -----
    The gather form is parallel over ``A``'s rows (chunks of equal entries), accumulating tiles of
    each output row in registers; the scatter form is parallel over the output's columns, or over
    batches, or (one column: a CSC SpMV) over ``A``'s rows into per-thread copies of the output.
    """
    native = _NATIVE[0] if _NATIVE else _native_module()
    if out is None:
        rows = n_minor if transpose else indptr.shape[-1] - 1
        out = empty((*d.shape[:-2], rows, d.shape[-1]) if d.ndim > 1 else (rows,), dtype=data.dtype)
    threads = product_threads(indices.size * (d.shape[-1] if d.ndim > 1 else 1))
    if native.csr_mm(indptr, indices, data, n_minor, d, out, c, alpha, beta, transpose, checked, threads) is NotImplemented:
        # index arrays of two dtypes, or rows that are not contiguous: normalised, once
        if indptr.dtype != indices.dtype:
            indptr, indices = _same_index_dtype(indptr, indices)
        native.csr_mm(np.ascontiguousarray(indptr), _rows_contiguous(indices), _rows_contiguous(data), n_minor, d, out,
                      c, alpha, beta, transpose, checked, threads)  # fmt: skip
    return out


def coo_matmul(rows: np.ndarray, cols: np.ndarray, values: np.ndarray, d: np.ndarray, n_rows: int) -> np.ndarray | None:
    """``A @ d`` for the COO matrix ``A`` of entries ``(rows, cols, values)`` and ``n_rows`` rows, on one thread.

    Parameters
    ----------
    rows, cols : numpy.ndarray
        1-D int32 or int64 indices (of one dtype, else both are widened to int64), in any order, duplicates
        included (they add up).
    values : numpy.ndarray
        ``(nse,)``, float32, float64, complex64 or complex128.
    d : numpy.ndarray
        ``(n_cols,)`` or ``(n_cols, K)`` of ``values``' dtype, any strides.
    n_rows : int
        The number of rows of ``A``.

    Returns
    -------
    numpy.ndarray or None
        ``(n_rows,)`` or ``(n_rows, K)``; None where an index lies outside ``[0, n_rows)`` or ``[0, n_cols)``.

    Notes
    -----
    One pass over the entries, each added to its output row (SciPy's ``coo_matvec``): O(nse * K + n_rows * K).
    Pass the indices swapped for ``A.T @ d``.
    """
    native = _NATIVE[0] if _NATIVE else _native_module()
    if rows.dtype != cols.dtype:
        rows, cols = rows.astype(np.int64), cols.astype(np.int64)
    out = empty((n_rows, *d.shape[1:]), dtype=values.dtype)
    ok = native.coo_mm(np.ascontiguousarray(rows), np.ascontiguousarray(cols), np.ascontiguousarray(values), d, out)
    return out if ok else None


# Products of fewer entries times columns run on one thread: with passive waiting (see
# _import_native_once) a parallel region first wakes its threads, about 20 us, which outweighs halving a
# product this small (a SpMV of 50,000 entries: 37 us on two threads, 20 on one, SciPy's 22; measured on
# 2 CPUs). Larger ones read the machine's load first (1 us, :func:`available_threads`).
_PRODUCT_PARALLEL_MIN = 1 << 18


def product_threads(work: int) -> int:
    """The ``threads`` argument of a compiled product of ``work`` entries times columns: 1 below
    ``_PRODUCT_PARALLEL_MIN``, else :func:`available_threads`. Threads that another library leaves
    spinning count as busy there: OpenBLAS's, after NumPy's dot in every step of an iterative solver,
    made a two-thread SpMV of 800,000 entries wait for its second thread, at 1.5 times the time of one
    (measured on 2 CPUs)."""
    return available_threads() if work >= _PRODUCT_PARALLEL_MIN else 1


def csr_spgemm(
    a: tuple[np.ndarray, np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray, np.ndarray],
    n_cols: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR product ``A @ B`` of two CSR matrices, canonical (sorted, no duplicates).

    Parameters
    ----------
    a, b : tuple of numpy.ndarray
        ``(indptr, indices, data)`` of ``A`` (m x n) and ``B`` (n x n_cols), 1-D, one value dtype
        (float32, float64, complex64 or complex128). Indices of different dtypes are widened to int64.
    n_cols : int
        The number of columns of ``B``.

    Returns
    -------
    indptr, indices, data : numpy.ndarray
        The product; int32 indices when both operands have int32 indices and its entries fit, int64
        otherwise.

    Notes
    -----
    Two parallel passes over the rows of ``A`` (Gustavson's algorithm): one counts each row's entries,
    so that the outputs are allocated at their exact sizes, the other accumulates each row in a
    per-thread dense accumulator and sorts its column indices.
    """
    native = _native_module()
    (aip, aix, adv), (bip, bix, bdv) = a, b
    wide = {aip.dtype, aix.dtype, bip.dtype, bix.dtype}
    if len(wide) > 1:
        aip, aix, bip, bix = (x.astype(np.int64) for x in (aip, aix, bip, bix))
    aip, aix, adv, bip, bix, bdv = (np.ascontiguousarray(x) for x in (aip, aix, adv, bip, bix, bdv))
    counts = np.empty(aip.shape[0], dtype=np.int64)
    nnz = native.spgemm_count(aip, aix, bip, bix, n_cols, counts)
    index_dtype = aip.dtype if max(nnz, n_cols) <= _INT32_MAX else np.dtype(np.int64)
    indptr = counts.astype(index_dtype, copy=False)
    indices = np.empty(nnz, dtype=index_dtype)
    data = np.empty(nnz, dtype=adv.dtype)
    native.spgemm_fill(aip, aix, adv, bip, bix, bdv, n_cols, indptr, indices, data)
    return indptr, indices, data


def csr_sddmm(
    indptr: np.ndarray,
    indices: np.ndarray,
    values: np.ndarray | None,
    a: np.ndarray,
    bt: np.ndarray,
    *,
    alpha: complex = 1.0,
    beta: complex = 0.0,
) -> np.ndarray:
    """``alpha * (a @ bt.mT)`` sampled at a CSR pattern, plus ``beta * values``.

    Parameters
    ----------
    indptr, indices : numpy.ndarray
        The pattern, ``(nb, m + 1)`` and ``(nb, nse)`` (or ``(1, .)``: one pattern for every batch).
    values : numpy.ndarray or None
        ``(nb, nse)`` values added with weight ``beta`` (not read when ``beta`` is 0 or it is None).
    a : numpy.ndarray
        ``(nb, m, K)``, any strides.
    bt : numpy.ndarray
        ``(nb, n, K)``, the transpose of the right factor, any strides (fastest with unit stride
        along K, e.g. ``b.mT`` of a Fortran-ordered or transposed ``b``).
    alpha, beta : complex, optional
        The scalars.

    Returns
    -------
    numpy.ndarray
        The sampled values, ``(nb, nse)``, ``a``'s dtype.
    """
    native = _native_module()
    if indptr.dtype != indices.dtype:
        indptr, indices = _same_index_dtype(indptr, indices)
    out = np.empty((a.shape[0], indices.shape[1]), dtype=a.dtype)
    native.sddmm(_rows_contiguous(indptr), _rows_contiguous(indices), None if values is None else _rows_contiguous(values), a, bt, out,
                 alpha, beta)  # fmt: skip
    return out


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def available_threads() -> int:
    """Threads worth starting now: the CPUs this process may use, less those other tasks keep busy.

    Returns
    -------
    int
        At least 1. The busy CPUs are the tasks that the kernel counts as running at this instant
        (``/proc/loadavg``), less the calling thread; where that count cannot be read, every CPU.

    Notes
    -----
    On a machine whose CPUs other processes keep busy, a parallel kernel's threads wait for one
    another at every join: one that is descheduled holds up the rest for a scheduler round, and
    passive waiting puts the waiters at the back of the queue. Measured on 2 CPUs with 5 busy
    processes, the two-thread column sums took 5 times as long as one thread. The instantaneous
    count, unlike the load averages, does not remember this process's own threads from earlier calls.
    """
    cpus = _cpu_count()
    if cpus < 2:
        return 1
    running = _running_tasks()
    if running is None:
        return cpus
    return max(1, min(cpus, cpus - (running - 1)))


# The descriptor of /proc/loadavg, opened once (-1 where it cannot be): re-reading an open file with
# pread costs 1 us, where opening it each time cost 8, which a product of 262,144 entries pays.
_LOADAVG: list[int] = []


def _running_tasks() -> int | None:
    """The number of tasks running at this instant, by ``/proc/loadavg``; None where it cannot be read."""
    if not _LOADAVG:
        try:
            fd = os.open("/proc/loadavg", os.O_RDONLY)
        except OSError:
            fd = -1
        _LOADAVG.append(fd)  # two threads at once may each open one: the first is kept
    fd = _LOADAVG[0]
    if fd < 0:
        return None
    try:
        return int(os.pread(fd, 128, 0).split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return None


def supports_arith_dtype(dtype: Any) -> bool:
    """Whether :func:`csr_merge` and :func:`csr_sums` handle values of this dtype.

    Parameters
    ----------
    dtype : dtype-like
        The value dtype.

    Returns
    -------
    bool
        True for int32, int64, float32, float64, complex64 and complex128 in native byte order.
    """
    return _dtype_in(dtype, _ARITH_DTYPES)


def csr_merge(
    op: str,
    a: tuple[np.ndarray, np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray, np.ndarray],
    n_minor: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``op(A, B)`` of two CSR matrices of one shape with canonical rows (sorted, distinct indices).

    Parameters
    ----------
    op : {"add", "subtract", "multiply"}
        The operation. ``add`` and ``subtract`` give the union of the two operands' entries (a side
        without an entry counts as 0; entries that come out as 0 are kept); ``multiply`` keeps the
        entries both sides hold and those whose product is not 0 (``inf * 0`` is NaN).
    a, b : tuple of numpy.ndarray
        ``(indptr, indices, data)`` of ``A`` and ``B``, 1-D, one index dtype (int32 or int64) and one
        value dtype (see :func:`supports_arith_dtype`). A row that is not strictly increasing within
        ``[0, n_minor)``, or offsets out of order or range, raise ValueError.
    n_minor : int
        The number of columns.

    Returns
    -------
    indptr, indices, data : numpy.ndarray
        The canonical result, in the operands' index and value dtypes.

    Raises
    ------
    OverflowError
        If ``nnz(A) + nnz(B)`` does not fit the index dtype.

    Notes
    -----
    Two parallel passes over chunks of rows (on :func:`available_threads` threads): the first counts
    each row's entries, so that the
    outputs are allocated at their exact sizes, the second merges the rows into them. Short rows are
    merged by comparing every pair of indices (independent, vectorised comparisons instead of a
    chain of mispredicted branches), long ones entry by entry. Integer results wrap around, as in
    NumPy.
    """
    native = _native_module()
    (aip, aix, adv), (bip, bix, bdv) = a, b
    index_dtype = aip.dtype
    if {aix.dtype, bip.dtype, bix.dtype} != {index_dtype} or index_dtype not in _INDEX_DTYPES:
        raise TypeError("the index arrays must all be int32 or all int64")
    if adv.dtype != bdv.dtype or adv.dtype not in _ARITH_DTYPES:
        raise TypeError(f"the values must have one dtype of {sorted(map(str, _ARITH_DTYPES))}")
    _check_index_capacity(aix.shape[0] + bix.shape[0], index_dtype, "the number of entries of both operands")
    code = _MERGE_OPS[op]
    kind = adv.dtype.kind
    operands = [np.ascontiguousarray(x) for x in (aip, aix, adv, bip, bix, bdv)]
    indptr = np.empty(aip.shape[0], dtype=index_dtype)
    threads = available_threads() if aix.shape[0] + bix.shape[0] >= _PARALLEL_SCATTER_MIN_NNZ else 1
    nnz = native.merge_count(code, kind, *operands, int(n_minor), indptr, threads)
    indices = np.empty(nnz, dtype=index_dtype)
    data = np.empty(nnz, dtype=adv.dtype)
    native.merge_fill(code, kind, *operands, int(n_minor), indptr, indices, data, threads)
    return indptr, indices, data


def csr_sums(
    indptr: np.ndarray,
    indices: np.ndarray,
    data: np.ndarray,
    n_minor: int,
    axis: int,
    *,
    seen: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The row sums (``axis=1``) or column sums (``axis=0``) of a CSR matrix.

    Parameters
    ----------
    indptr, indices, data : numpy.ndarray
        The CSR components, 1-D; int32 or int64 indices of one dtype, values of a dtype that
        :func:`supports_arith_dtype` accepts. Offsets out of order or range, or (for column sums)
        indices out of range, raise ValueError.
    n_minor : int
        The number of columns.
    axis : {0, 1}
        The dimension summed over: 1 gives one sum per row, 0 one per column.
    seen : bool, optional
        With ``axis=0``, also say which columns hold at least one entry.

    Returns
    -------
    sums : numpy.ndarray
        ``(n_major,)`` or ``(n_minor,)``, ``data``'s dtype (integers wrap around).
    present : numpy.ndarray or None
        With ``seen``, a boolean array of the columns that hold an entry; else None.

    Notes
    -----
    Row sums add each row's values in storage order, in parallel over rows. Column sums let each
    thread add a range of rows into its own copy of the sums (and marks), then add the copies up in
    parallel over columns: no atomic updates; the extra memory is one copy per extra thread. For real
    floating values the columns that hold an entry are read off the sums, which start from -0.0
    (see the kernel), unless a stored value is -0.0.
    """
    native = _native_module()
    if indptr.dtype != indices.dtype:
        indptr, indices = _same_index_dtype(indptr, indices)
    if data.dtype not in _ARITH_DTYPES:
        raise TypeError(f"csr_sums does not support values of dtype {data.dtype}")
    n_major = indptr.shape[0] - 1
    out = empty((n_minor if axis == 0 else n_major,), dtype=data.dtype)
    mask = empty((n_minor,), dtype=np.uint8) if (seen and axis == 0) else None
    indices = np.ascontiguousarray(indices)
    threads = available_threads() if indices.shape[0] >= _PARALLEL_SCATTER_MIN_NNZ else 1
    known = native.csr_sums(int(axis), data.dtype.kind, np.ascontiguousarray(indptr), indices,
                            np.ascontiguousarray(data), int(n_minor), out, mask, threads)  # fmt: skip
    if mask is None:
        return out, None
    present = mask.view(np.bool_)
    if not known:
        # a stored -0.0 hid which columns are empty (see the kernel): find them, and give them +0.0
        present[:] = False
        present[indices] = True
        out[~present] = 0
    return out, present


# -- structure of compressed arrays --------------------------------------------------------------------
# Components are handed over as (nb, ...) batches laid end to end (see the kernels in _native.cpp);
# values travel as opaque bytes, so these kernels take every dtype that has no Python objects.


# Above this many result slices, and 8 per entry, the transpose leaves the work to the COO scatter.
_HYPERSPARSE_SLICES = 1 << 22


def _flat(x: np.ndarray, dtype: Any = None) -> np.ndarray:
    """``x`` as a C-contiguous 1-D array (a view where it already is one), optionally cast."""
    return np.ascontiguousarray(x if dtype is None else x.astype(dtype, copy=False)).reshape(-1)


def _value_bytes(values: np.ndarray) -> np.ndarray:
    """The values' bytes as a flat uint8 array (a view of contiguous values, else one copy)."""
    if values.dtype.hasobject:
        raise TypeError("the structure kernels move values as bytes, which values holding Python objects are not")
    return np.ascontiguousarray(values).reshape(-1).view(np.uint8)


def expand_compressed(indptr: np.ndarray, plain: np.ndarray, out: np.ndarray, major_row: int, minor_row: int) -> bool:
    """Write the expanded compressed indices and the plain indices of a batch of compressed arrays into two rows of ``out``.

    Parameters
    ----------
    indptr : numpy.ndarray
        ``(nb, n_major + 1)`` compressed indices, int32 or int64; each batch's run from 0 to ``nse``,
        non-decreasing (else ValueError).
    plain : numpy.ndarray
        ``(nb, nse)`` plain indices.
    out : numpy.ndarray
        A C-contiguous ``(rows, nb * nse)`` int32 or int64 array, written in place.
    major_row, minor_row : int
        The rows of ``out`` that get each entry's compressed index (its slice) and its plain index.

    Returns
    -------
    bool
        Whether every slice's plain indices increase strictly (the rows are then sorted and distinct).

    Notes
    -----
    In parallel over ranges of slices of about equal work, on :func:`available_threads` threads: each
    slice's index is written over its run of entries, and the plain indices of the range checked and
    copied (converted to ``out``'s dtype) on the same pass. O(nnz + nb * n_major).
    """
    native = _native_module()
    nb = indptr.shape[0]
    if plain.dtype != indptr.dtype:
        indptr, plain = _same_index_dtype(indptr, plain)
    if not out.flags.c_contiguous or out.dtype not in _INDEX_DTYPES:
        raise TypeError("out must be a C-contiguous int32 or int64 array")
    threads = available_threads() if plain.size >= _PARALLEL_SCATTER_MIN_NNZ else 1
    return bool(native.expand_compressed(_flat(indptr), _flat(plain), int(nb), int(indptr.shape[1] - 1), out[major_row], out[minor_row], threads))


def transpose_compressed(
    indptr: np.ndarray, plain: np.ndarray, values: np.ndarray, n_minor: int, index_dtype: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The same batch of matrices compressed along its other sparse dimension (CSR -> CSC, BSR -> BSC).

    Parameters
    ----------
    indptr : numpy.ndarray
        ``(nb, n_major + 1)`` compressed indices, int32 or int64, each batch's running from 0 to
        ``nse`` (else ValueError).
    plain : numpy.ndarray
        ``(nb, nse)`` plain indices in ``[0, n_minor)`` (else ValueError).
    values : numpy.ndarray
        ``(nb, nse, ...)``: one entry (an element or a block, dense dimensions included) per index.
    n_minor : int
        The size of the plain dimension (the result's number of slices).
    index_dtype : dtype-like
        The result's index dtype, int32 or int64.

    Returns
    -------
    tuple of numpy.ndarray or None
        ``(indptr (nb, n_minor + 1), plain (nb, nse), values (nb, nse, ...))``, canonical; None (nothing
        computed) when a slice's plain indices are not strictly increasing, which a duplicate makes, or
        when the result is hypersparse (more than 8 slices per entry, and more than 4M): its counters,
        one set per thread, would then take several times the memory of the result itself.

    Notes
    -----
    A counting sort by plain index (SciPy's ``csr_tocsc``), in parallel: each of
    :func:`available_threads` threads counts a range of slices into its own counters, then scatters
    that range to its own positions, so no atomics are needed and the result is the serial one. The
    values are moved as opaque entries of their bytes. O(nnz + nb * (n_major + threads * n_minor)).
    """
    native = _native_module()
    if plain.dtype != indptr.dtype:
        indptr, plain = _same_index_dtype(indptr, plain)
    nb, nse = plain.shape
    if nb * n_minor > max(8 * nb * nse, _HYPERSPARSE_SLICES):
        return None
    index_dtype = np.dtype(index_dtype)
    out_indptr = np.empty((nb, n_minor + 1), dtype=index_dtype)
    out_plain = empty((nb, nse), index_dtype)
    out_values = empty(values.shape, values.dtype)
    threads = available_threads() if plain.size >= _PARALLEL_SCATTER_MIN_NNZ else 1
    done = native.transpose_compressed(
        _flat(indptr), _flat(plain), _value_bytes(values), int(nb), int(indptr.shape[1] - 1), int(n_minor),
        out_indptr.reshape(-1), out_plain.reshape(-1), out_values.reshape(-1).view(np.uint8), threads,
    )  # fmt: skip
    return (out_indptr, out_plain, out_values) if done else None


def join_plain(
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], offsets: list[int], index_dtype: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batches of compressed arrays with one number of slices joined along their plain dimension (CSR side by side).

    Parameters
    ----------
    parts : list of tuple of numpy.ndarray
        ``(indptr (nb, n_major + 1), plain (nb, nse_k), values (nb, nse_k, ...))`` per operand: one
        ``nb`` and ``n_major``, one value dtype and entry shape; each batch's offsets run from 0 to
        ``nse_k`` (else ValueError).
    offsets : list of int
        The number added to each operand's plain indices (the plain sizes of the operands before it).
    index_dtype : dtype-like
        The result's index dtype, int32 or int64, wide enough for the offset indices.

    Returns
    -------
    indptr, plain, values : numpy.ndarray
        ``(nb, n_major + 1)``, ``(nb, sum nse_k)`` and ``(nb, sum nse_k, ...)``: every slice holds the
        first operand's entries of that slice, then the second's, ...

    Notes
    -----
    In parallel over ranges of slices on :func:`available_threads` threads; each slice's index runs
    are copied with their offset added and its value runs with one ``memcpy`` per operand.
    O(nnz + nb * n_major * len(parts)).
    """
    native = _native_module()
    # the operands' indices in one dtype: int64 if any has int64 ones
    wide = any(x.dtype.itemsize == 8 for p in parts for x in p[:2])
    in_dtype = np.dtype(np.int64 if wide else np.int32)
    index_dtype = np.dtype(index_dtype)
    nb, m = parts[0][0].shape[0], parts[0][0].shape[1] - 1
    total = sum(p[1].shape[1] for p in parts)
    tail = parts[0][2].shape[2:]
    out_indptr = np.empty((nb, m + 1), dtype=index_dtype)
    out_plain = empty((nb, total), index_dtype)
    out_values = empty((nb, total, *tail), parts[0][2].dtype)
    threads = available_threads() if nb * total >= _PARALLEL_SCATTER_MIN_NNZ else 1
    native.join_plain(
        tuple(_flat(p[0], in_dtype) for p in parts), tuple(_flat(p[1], in_dtype) for p in parts),
        tuple(_value_bytes(p[2]) for p in parts), tuple(int(o) for o in offsets), int(nb), int(m),
        out_indptr.reshape(-1), out_plain.reshape(-1), out_values.reshape(-1).view(np.uint8), threads,
    )  # fmt: skip
    return out_indptr, out_plain, out_values


# Below this many values one thread counts them.
_PARALLEL_COUNT_MIN = 1 << 18


def _native_indices(indptr: np.ndarray, plain: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``indptr`` and ``plain`` contiguous in the machine's byte order, which the kernels read (views where
    they already are)."""
    native = indptr.dtype.newbyteorder("=")
    return np.ascontiguousarray(indptr, dtype=native), np.ascontiguousarray(plain, dtype=native)


def compressed_find(indptr: np.ndarray, plain: np.ndarray, major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """Where plain index ``minor[q]`` lies in compressed slice ``major[q]`` of one CSR-like matrix.

    Parameters
    ----------
    indptr, plain : numpy.ndarray
        The compressed and plain indices of one matrix, of one dtype (int32 or int64); each slice's plain
        indices sorted.
    major, minor : numpy.ndarray
        1-D integer arrays of one length: the queries.

    Returns
    -------
    numpy.ndarray
        int64 positions into ``plain``, -1 where the slice does not hold the index.

    Raises
    ------
    ValueError
        For a query outside the slices, or offsets out of order or beyond the entries (nothing is read
        outside the buffers).

    Notes
    -----
    One binary search per query, on :func:`available_threads` threads from 4096 queries.
    """
    major = np.ascontiguousarray(major, dtype=np.int64)
    minor = np.ascontiguousarray(minor, dtype=np.int64)
    out = np.empty(major.shape[0], dtype=np.int64)
    threads = available_threads() if major.shape[0] >= 4096 else 1
    _native_module().compressed_find(*_native_indices(indptr, plain), major, minor, out, threads)
    return out


def gather_slices(indptr: np.ndarray, plain: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The compressed slices at ``rows`` of one CSR-like matrix, in that order (``A[rows]`` of a CSR matrix).

    Parameters
    ----------
    indptr, plain : numpy.ndarray
        The compressed and plain indices of one matrix, of one dtype (int32 or int64).
    values : numpy.ndarray
        ``(nse, ...)``: one entry (dense dimensions included) per plain index.
    rows : numpy.ndarray
        1-D integer positions of slices, in ``[0, len(indptr) - 1)``, repeats allowed.

    Returns
    -------
    tuple of numpy.ndarray
        ``(new_ptr (len(rows) + 1,) int64, plain (total,) of plain's dtype, values (total, ...))``.

    Raises
    ------
    ValueError
        For a pick out of range or offsets out of order (nothing is read outside the buffers).

    Notes
    -----
    One serial pass over the picks counts their entries; one pass copies each picked slice's indices
    and value bytes (``memcpy``), on :func:`available_threads` threads from 2**16 entries.
    O(len(rows) + entries copied).
    """
    indptr, plain = _native_indices(indptr, plain)
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    native = _native_module()
    new_ptr = np.empty(rows.shape[0] + 1, dtype=np.int64)
    native.gather_slices_count(indptr, int(plain.shape[0]), rows, new_ptr)
    total = int(new_ptr[-1])
    out_plain = np.empty(total, dtype=plain.dtype)
    out_values = empty((total, *values.shape[1:]), values.dtype)
    threads = available_threads() if total >= _PARALLEL_SCATTER_MIN_NNZ else 1
    native.gather_slices_fill(indptr, plain, _value_bytes(values), rows, new_ptr, out_plain, out_values.reshape(-1).view(np.uint8), threads)
    return new_ptr, out_plain, out_values


def band(
    indptr: np.ndarray, plain: np.ndarray, values: np.ndarray, d: int, below: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries of one CSR-like matrix on one side of a diagonal: slice ``i`` keeps its entries whose plain
    index ``j`` has ``j <= i + d`` (``below``) or ``j >= i + d`` (``tril`` and ``triu`` in compressed terms).

    Parameters
    ----------
    indptr, plain : numpy.ndarray
        The compressed and plain indices of one matrix, of one dtype (int32 or int64).
    values : numpy.ndarray
        ``(nse, ...)``: one entry (dense dimensions included) per plain index.
    d : int
        The diagonal, as an offset of the plain index from the slice's.
    below : bool
        Keep the entries on or below it (``j <= i + d``), else those on or above it.

    Returns
    -------
    tuple of numpy.ndarray
        ``(new_ptr (len(indptr),) int64, plain (total,) of plain's dtype, values (total, ...))``, each slice's
        kept entries in their order.

    Raises
    ------
    ValueError
        For offsets out of order (nothing is read outside the buffers).

    Notes
    -----
    One pass counts each slice's kept entries, one copies their runs (``memcpy``; a sorted slice keeps one
    run), both on :func:`available_threads` threads from 2**16 entries. O(nnz).
    """
    indptr, plain = _native_indices(indptr, plain)
    # the kernel's i + d must not overflow: callers clamp d to the matrix (beyond it all or nothing is kept)
    d = min(max(int(d), -(1 << 62)), 1 << 62)
    threads = available_threads() if plain.shape[0] >= _PARALLEL_SCATTER_MIN_NNZ else 1
    native = _native_module()
    new_ptr = np.empty(indptr.shape[0], dtype=np.int64)
    native.band_count(indptr, plain, d, below, new_ptr, threads)
    total = int(new_ptr[-1])
    out_plain = empty((total,), plain.dtype)
    out_values = empty((total, *values.shape[1:]), values.dtype)
    native.band_fill(indptr, plain, _value_bytes(values), d, below, new_ptr, out_plain, out_values.reshape(-1).view(np.uint8), threads)
    return new_ptr, out_plain, out_values


def compressed_canonical(indptr: np.ndarray, indices: np.ndarray, n_minor: int) -> bool:
    """Whether compressed indices hold invariants 5.1-5.6 (see :mod:`xsparse.formats._invariants`).

    Parameters
    ----------
    indptr, indices : numpy.ndarray
        ``(*batch, n_major + 1)`` offsets and ``(*batch, nse)`` plain indices, int32 or int64.
    n_minor : int
        The number of plain slices (indices lie in ``[0, n_minor)``).

    Returns
    -------
    bool
        True where every batch's offsets run from 0 to ``nse`` in steps of 0 to ``n_minor`` and its indices
        lie in range, strictly increasing within each slice; False otherwise, or for index arrays of two
        dtypes (the caller's own checks then decide, and name what fails).

    Notes
    -----
    Branch-free passes on one thread: O(batch * (n_major + nse)).
    """
    if indptr.dtype != indices.dtype or indptr.ndim != indices.ndim or indptr.ndim < 1:
        return False
    nb = math.prod(indptr.shape[:-1])
    ptr = np.ascontiguousarray(indptr.reshape(nb, indptr.shape[-1]))
    idx = np.ascontiguousarray(indices.reshape(nb, indices.shape[-1]))
    return bool(_native_module().compressed_canonical(ptr, idx, int(n_minor)))


def sorted_offsets(major: np.ndarray, minor: np.ndarray, n_major: int) -> np.ndarray | None:
    """The compressed offsets of the entries of a coalesced COO matrix, or None where they are not coalesced.

    Parameters
    ----------
    major, minor : numpy.ndarray
        1-D int32 or int64 slice and plain indices of the entries.
    n_major : int
        The number of slices.

    Returns
    -------
    numpy.ndarray or None
        ``(n_major + 1,)`` int64: offset ``s`` is the number of entries before slice ``s``. None where
        the entries are not in row-major order with distinct positions, or a slice index lies outside
        ``[0, n_major)``: the caller sorts them instead.

    Notes
    -----
    Two passes over the entries, in parallel on :func:`available_threads` threads from 2**16 entries:
    one checks the order, one writes at each boundary between slices the offsets of the slices it opens;
    O(nnz + n_major). A count per entry (``bincount``) or a search per slice (``searchsorted``) costs
    several times as much.
    """
    major, minor = _native_indices(major, minor)
    out = np.empty(int(n_major) + 1, dtype=np.int64)
    threads = available_threads() if major.shape[0] >= _PARALLEL_SCATTER_MIN_NNZ else 1
    return out if _native_module().sorted_offsets(major, minor, int(n_major), out, threads) else None


def kron(
    a: tuple[np.ndarray, np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray, np.ndarray], q: int
) -> tuple[np.ndarray, np.ndarray]:
    """The Kronecker product of two CSR matrices, as sorted COO.

    Parameters
    ----------
    a, b : tuple of numpy.ndarray
        ``(indptr, indices, data)`` of ``A`` (m x n) and ``B`` (p x q), 1-D, one index dtype (int32 or
        int64, wide enough for the result's indices and entries) and one value dtype (see
        :func:`supports_arith_dtype`).
    q : int
        The number of columns of ``B``.

    Returns
    -------
    indices, data : numpy.ndarray
        ``(2, nnz(A) * nnz(B))`` rows and columns, and the values: the product of entry ``x`` of ``A``'s row ``i`` and entry ``y`` of
        ``B``'s row ``k`` at ``(i * p + k, col(x) * q + col(y))``, in row-major order where the rows of
        ``A`` and ``B`` are sorted.

    Raises
    ------
    ValueError
        For offsets out of order (nothing is read or written outside the buffers).

    Notes
    -----
    One pass, in parallel over the rows of ``A`` (each fills a range known in advance) on
    :func:`available_threads` threads from 2**16 entries; B's empty rows are skipped. Integer products
    wrap around, as in NumPy. O(nnz(A) * nnz(B) + m + p).
    """
    native = _native_module()
    (aip, aix, adv), (bip, bix, bdv) = a, b
    total = aix.shape[0] * bix.shape[0]
    index_dtype = aip.dtype
    b_rows = np.flatnonzero(np.diff(bip)).astype(np.int64, copy=False)
    indices, data = empty((2, total), index_dtype), empty((total,), adv.dtype)
    threads = available_threads() if total >= _PARALLEL_SCATTER_MIN_NNZ else 1
    operands = [np.ascontiguousarray(x) for x in (aip, aix, adv, bip, bix, bdv)]
    native.kron(adv.dtype.kind, *operands, b_rows, int(q), indices[0], indices[1], data, threads)
    return indices, data


def take_plain(indptr: np.ndarray, plain: np.ndarray, sel: np.ndarray, n_plain: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``take`` along the plain dimension of one CSR-like matrix: the copies of its entries, slice by slice.

    Parameters
    ----------
    indptr, plain : numpy.ndarray
        The compressed and plain indices of one matrix, of one dtype (int32 or int64).
    sel : numpy.ndarray
        The picked plain indices, in ``[0, n_plain)``, repeats allowed.
    n_plain : int
        The size of the plain dimension.

    Returns
    -------
    tuple of numpy.ndarray
        int64 ``(new_ptr (n_major + 1,), entry (total,), position (total,))``: the copies' compressed
        indices, and each copy's source entry and new plain index (its position in ``sel``); each slice's
        copies sorted by position (ascending where ``plain`` is sorted within slices and ``sel`` is).

    Raises
    ------
    ValueError
        For offsets out of order or a plain index out of range (nothing is read outside the buffers).

    Notes
    -----
    A count of the picks (``bincount``), then two passes over the slices on :func:`available_threads`
    threads: one counts each slice's copies, one writes them, sorting a slice's copies when ``sel`` is not
    ascending. O(nnz + copies (log of a slice's copies where sorted)).
    """
    indptr, plain = _native_indices(indptr, plain)
    sel = np.ascontiguousarray(sel, dtype=np.int64)
    if sel.shape[0] and (int(sel.min()) < 0 or int(sel.max()) >= n_plain):
        raise ValueError(f"take_plain: the picks must lie in [0, {n_plain}) (min={int(sel.min())}, max={int(sel.max())})")
    count = np.bincount(sel, minlength=n_plain).astype(np.int64, copy=False)
    first = np.cumsum(count) - count
    order = np.argsort(sel, kind="stable").astype(np.int64, copy=False)
    unsorted = bool(sel.shape[0] > 1 and np.any(sel[1:] < sel[:-1]))
    threads = available_threads() if plain.shape[0] >= _PARALLEL_SCATTER_MIN_NNZ else 1
    native = _native_module()
    new_ptr = np.empty(indptr.shape[0], dtype=np.int64)
    native.take_plain_count(indptr, plain, count, new_ptr, threads)
    total = int(new_ptr[-1])
    entry, position = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
    native.take_plain_fill(indptr, plain, count, first, order, new_ptr, entry, position, unsorted, threads)
    return new_ptr, entry, position


def count_nonzero(values: np.ndarray) -> int:
    """``numpy.count_nonzero(values)``; floating and complex values by a compiled parallel count.

    Parameters
    ----------
    values : numpy.ndarray
        Any array. Values of another dtype than float32, float64, complex64 and complex128 are
        counted by NumPy, whose count of integers and bools is vectorised already.

    Returns
    -------
    int
        How many elements are nonzero: NaN is, -0.0 is not, a complex value is when either part is.

    Notes
    -----
    Each value is tested as an unsigned integer with its sign bit shifted out (NumPy compares floats,
    NaN unordered, one at a time), in 32-byte vectors where the CPU has AVX2 (the baseline's 16-byte
    vectors have no 64-bit comparison), on :func:`available_threads` threads from ``2**18`` values.
    """
    if values.dtype not in _LINALG_DTYPES or unavailable_reason() is not None:
        return int(np.count_nonzero(values))
    flat = np.ascontiguousarray(values).reshape(-1)
    threads = available_threads() if flat.shape[0] >= _PARALLEL_COUNT_MIN else 1
    return int(_native_module().count_nonzero(flat, flat.dtype.kind, threads))
