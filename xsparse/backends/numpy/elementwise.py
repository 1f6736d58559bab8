"""Native elementwise kernels of the NumPy backend.

- ``erf`` and ``erfinv``, which the Array API lacks, from ``scipy.special`` (``erfinv`` with the sign of
  its argument copied, as SciPy gives ``erfinv(-0.0) = +0.0``).
- ``add``, ``subtract`` and ``multiply`` of two 2-D CSR (or two CSC) arrays with fill value 0 and one
  shape: the compiled parallel merge of ``_cpu.csr_merge``, with exactly the generic kernel's result
  (the union of the entries, explicit zeros such as those of ``x - x`` kept; a product keeps the
  entries both sides hold and the NaNs of ``inf * 0``). Where it declines (other dtypes, index dtypes
  that differ, or the extension is not built), SciPy's compiled merge (``csr_plus_csr`` and friends,
  zero-copy on the way in), which drops the entries that come out as 0; so it declines a stored -0.0
  (``add``, ``subtract``) and floating values (``multiply``), whose -0.0 results it would lose.
- The unary functions that NumPy computes with a ufunc (``sin``, ``exp``, ...), on large contiguous
  arrays, in pieces on the CPUs that no other task is running on (``_cpu.available_threads``; NumPy
  releases the GIL in its loops): the same ufunc loops, so the same results, as one call. A sparse
  array's values go through this kernel; its indices are shared.
- Every generic elementwise kernel again, run under ``numpy.errstate(all="ignore")``: the results are
  IEEE 754's (``log(0) = -inf``, ``0 / 0 = nan``, integer division by 0 gives 0 as NumPy has it) and no
  ``RuntimeWarning`` reaches the caller. On a sparse array a warning could come from the fill value
  alone, which is computed once whether or not any element is unspecified, so it would say nothing about
  the elements; torch never warns there either. These wrappers have the generic kernels' signatures and
  run before them; the SciPy kernels, more specific, run before the wrappers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from ... import dispatch
from ...dispatch import register
from ...formats import COMPRESSED, CompressedArray, sparse_csr, strided
from ...formats._invariants import verified
from .. import _cpu
from ..array_api import elementwise as generic
from ..array_api.conversion import is_plus_zero
from .conversion import _holds_negative_zero

__all__: list[str] = []


def _quiet(func: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(func)
    def kernel(xp: Any, *args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return func(xp, *args, **kwargs)

    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = f"{(func.__doc__ or '').rstrip('.')}; under numpy.errstate(all='ignore')."
    return kernel


@register("erf", (strided,), backend="numpy")
def _erf_strided_numpy(xp: Any, x: Any) -> Any:
    """erf(strided) through scipy.special.erf; O(numel)."""
    from scipy import special

    with np.errstate(all="ignore"):
        return special.erf(x)


@register("erfinv", (strided,), backend="numpy")
def _erfinv_strided_numpy(xp: Any, x: Any) -> Any:
    """erfinv(strided) through scipy.special.erfinv; O(numel)."""
    from scipy import special

    with np.errstate(all="ignore"):
        out = special.erfinv(x)
    # SciPy gives erfinv(-0.0) = +0.0; erfinv is odd and keeps the sign of its argument everywhere
    # (as torch's does), so copying the sign changes nothing else (a NaN stays NaN)
    return np.copysign(out, x, out=out) if isinstance(out, np.ndarray) else np.copysign(out, x)


# -- unary ufuncs on several threads -------------------------------------------------------------------

# Below this many elements one thread computes the ufunc: handing pieces to other threads costs tens of
# microseconds.
_PARALLEL_MIN_ELEMENTS = 1 << 17
# Pieces start at multiples of this many elements, so that every thread's vector loop runs on
# aligned whole vectors (and no two threads write one cache line).
_PIECE_ALIGN = 64


def _cpus() -> int:
    return _cpu._cpu_count()


@functools.cache
def _pool() -> ThreadPoolExecutor:
    # created on the first large call; its threads idle in a queue between calls
    return ThreadPoolExecutor(max_workers=max(1, _cpus() - 1), thread_name_prefix="xsparse-ufunc")


# Pieces per CPU: on a machine where other processes take CPU time, a worker that gets none leaves its
# pieces to the calling thread (see _in_pieces) instead of holding up the whole call.
_PIECES_PER_CPU = 4


def _in_pieces(n: int, min_piece: int, run: Callable[[int, int], Any]) -> list[Any]:
    """``[run(lo, hi) for each piece]`` of ``range(n)``, the pieces shared between this thread and the pool.

    The calling thread computes the first piece, then, from the last one backwards, every piece that
    no worker has started yet (cancelling it in the pool; the workers take them from the front), then
    waits for the others. ``run`` sets its own NumPy error state (it is per thread).
    """
    threads = _cpu.available_threads()
    if threads < 2:  # the other CPUs are busy: a worker would wait for one
        return [run(0, n)]
    k = max(1, min(threads * _PIECES_PER_CPU, n // max(1, min_piece)))
    bounds = [min(n, (n * i // k) // _PIECE_ALIGN * _PIECE_ALIGN) for i in range(k)] + [n]
    pool = _pool()
    futures = [pool.submit(run, bounds[i], bounds[i + 1]) for i in range(1, k)]
    results: list[Any] = [run(bounds[0], bounds[1])] + [None] * (k - 1)
    stolen = set()
    for i in range(k - 1, 0, -1):
        if not futures[i - 1].cancel():
            break  # a worker has it, and all the pieces before it
        results[i] = run(bounds[i], bounds[i + 1])
        stolen.add(i)
    for i in range(1, k):
        if i not in stolen:
            results[i] = futures[i - 1].result()
    return results


def _parallel_ufunc(ufunc: np.ufunc, x: np.ndarray) -> np.ndarray:
    """``ufunc(x)`` of a C-contiguous array, in pieces on the idle CPUs (:func:`_in_pieces`)."""
    out = np.empty(x.shape, dtype=ufunc.resolve_dtypes((x.dtype, None))[-1])
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)

    def run(lo: int, hi: int) -> None:
        with np.errstate(all="ignore"):
            ufunc(flat_x[lo:hi], out=flat_out[lo:hi])

    _in_pieces(flat_x.shape[0], _PARALLEL_MIN_ELEMENTS // 4, run)
    return out


def _parallel_unary(func: Callable[..., Any], op: str) -> Callable[..., Any]:
    """The strided kernel of a unary function, computed by :func:`_parallel_ufunc` where it can be."""

    @functools.wraps(func)
    def kernel(xp: Any, x: Any) -> Any:
        f = getattr(xp, op, None)
        with np.errstate(all="ignore"):
            if (
                isinstance(f, np.ufunc) and f.nin == 1 and f.nout == 1 and isinstance(x, np.ndarray)
                and x.size >= _PARALLEL_MIN_ELEMENTS and x.flags.c_contiguous and _cpu.available_threads() > 1
            ):  # fmt: skip
                return _parallel_ufunc(f, x)
            # on one thread, the plain call: NumPy allocating the result itself was faster than an
            # empty array passed as out= (by about 2 %, measured on sin of 10,000,000 float64)
            return func(xp, x)

    kernel.__name__ = kernel.__qualname__ = f"_{op}_strided_numpy"
    kernel.__doc__ = (
        f"{op}(strided): NumPy's ufunc, on large contiguous arrays in pieces on the idle CPUs; O(numel); under "
        "numpy.errstate(all='ignore')."
    )
    return kernel


_OPS = (*generic.UNARY, *generic.NATIVE_ONLY_UNARY, "clip", *generic.BINARY)
for _op in _OPS:
    for _k in dispatch.kernels(_op):
        if _k.kind == "generic" and not (_op in generic.NATIVE_ONLY_UNARY and _k.signature == (strided,)):
            if _op in generic.UNARY and _k.signature == (strided,):
                wrapped = _parallel_unary(_k.func, _op)
            else:
                wrapped = _quiet(_k.func, f"{_k.name}_numpy")
            register(_op, _k.signature, backend="numpy", supports=_k.supports)(wrapped)


# -- the compiled merges of two CSR (or CSC) matrices ----------------------------------------------------

_INT32_MAX = int(np.iinfo(np.int32).max)


def _supports_merge(xp: Any, x: Any, y: Any) -> str | None:
    reason = _cpu.unavailable_reason()
    if reason is not None:
        return reason
    if not (isinstance(x, CompressedArray) and isinstance(y, CompressedArray)):
        return "the compiled merge takes compressed arrays only"
    if x.layout is not y.layout or x.layout.is_blocked:
        return f"the compiled merge takes two CSR or two CSC arrays, not ({x.layout}, {y.layout})"
    if tuple(x.shape) != tuple(y.shape) or x.ndim != 2:
        return (
            f"the compiled merge takes 2-D arrays of one shape, without batch or dense dimensions, not shapes "
            f"{tuple(x.shape)} and {tuple(y.shape)} (the generic kernel broadcasts)"
        )
    if not (is_plus_zero(x.fill_value) and is_plus_zero(y.fill_value)):
        return f"the compiled merge handles fill value +0 only, not {x.fill_value!r} and {y.fill_value!r}"
    dtype = np.result_type(x.dtype, y.dtype)
    if not _cpu.supports_arith_dtype(dtype):
        return f"the compiled merge handles int32, int64, float and complex values, not {dtype}"
    if x.index_dtype != y.index_dtype:
        return f"the compiled merge needs one index dtype, not {x.index_dtype} and {y.index_dtype}"
    if x.index_dtype == np.int32 and x.nnz + y.nnz > _INT32_MAX:
        return "the entries of both operands do not fit int32 indices"
    return None


def _merge_kernel(op: str) -> Callable[..., Any]:
    def kernel(xp: Any, x: CompressedArray, y: CompressedArray) -> CompressedArray:
        dtype = np.result_type(x.dtype, y.dtype)
        n_plain = x.shape[1 - x.layout.compressed_dim]
        a = (x._compressed, x._plain, x._vals.astype(dtype, copy=False))
        b = (y._compressed, y._plain, y._vals.astype(dtype, copy=False))
        indptr, indices, data = _cpu.csr_merge(op, a, b, n_plain)
        fill = generic.python_scalar(xp, xp.zeros((), dtype=dtype))
        return CompressedArray(indptr, indices, data, x.shape, layout=x.layout, backend=x._backend, xp=xp, fill_value=fill)

    kernel.__name__ = kernel.__qualname__ = f"_{op}_compiled_compressed_compressed_numpy"
    kernel.__doc__ = (
        f"{op}(CSR, CSR) or ({op}(CSC, CSC)), 2-D, fill 0, one shape: the compiled parallel merge, the generic "
        "kernel's entries; O(nnz)."
    )
    return kernel


for _op in ("add", "subtract", "multiply"):
    register(_op, (COMPRESSED, COMPRESSED), backend="numpy", supports=_supports_merge)(_merge_kernel(_op))


# -- SciPy's compiled merges of two canonical CSR (or CSC) matrices --------------------------------------

# Registered below the compiled merges above (priority -1): they run where those decline or are not built.

_SCIPY_DTYPES = frozenset(
    np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                          np.uint64, np.float32, np.float64, np.complex64, np.complex128)
)  # fmt: skip


def _supports_scipy_sum(xp: Any, x: Any, y: Any) -> str | None:
    reason = _supports_scipy(xp, x, y)
    if reason is None and (_holds_negative_zero(np.asarray(x._vals)) or _holds_negative_zero(np.asarray(y._vals))):
        # SciPy drops every result equal to 0: -0.0 + -0.0 (and -0.0 - +0.0) would read +0.0
        return "SciPy's merge drops the entries that come out as -0.0"
    return reason


def _supports_scipy_product(xp: Any, x: Any, y: Any) -> str | None:
    reason = _supports_scipy(xp, x, y)
    if reason is None and np.issubdtype(np.result_type(x.dtype, y.dtype), np.inexact):
        # a product of two specified elements is kept by the generic kernel: SciPy drops it when it comes
        # out as 0, and a -0.0 (a zero times a negative value, or an underflow) would read +0.0
        return "SciPy's product drops the entries that come out as 0, a -0.0 among them"
    return reason


def _supports_scipy(xp: Any, x: Any, y: Any) -> str | None:
    if not (isinstance(x, CompressedArray) and isinstance(y, CompressedArray)):
        return "SciPy merges compressed arrays only"
    if x.layout is not y.layout or x.layout.is_blocked:
        return "SciPy merges two CSR or two CSC arrays only"
    if tuple(x.shape) != tuple(y.shape) or x.ndim != 2:
        return "SciPy merges 2-D arrays of one shape only (broadcasting and batches go to the generic kernel)"
    if not (is_plus_zero(x.fill_value) and is_plus_zero(y.fill_value)):
        return "SciPy's sparse arrays have fill value +0"
    if np.dtype(x.dtype) not in _SCIPY_DTYPES or np.dtype(y.dtype) not in _SCIPY_DTYPES:
        return f"SciPy's sparse kernels do not handle the dtypes {np.dtype(x.dtype)} and {np.dtype(y.dtype)}"
    return None


def _supports_scipy_difference(xp: Any, x: Any, y: Any) -> str | None:
    reason = _supports_scipy_sum(xp, x, y)
    if reason is None and np.dtype(x.dtype) == np.bool_ and np.dtype(y.dtype) == np.bool_:
        # NumPy refuses to subtract booleans; the generic kernel raises NumPy's own error
        return "NumPy has no subtraction of booleans"
    return reason


def _scipy(a: CompressedArray) -> Any:
    from scipy import sparse

    verified(a)  # SciPy's merges read the indices unchecked (an index past the columns crashed the process)

    container = sparse.csr_array if a.layout is sparse_csr else sparse.csc_array
    # the components are canonical (sorted, unique) by the format's invariants; SciPy's constructor
    # only checks the shapes of the arrays (the kernels verify the order themselves, in O(nnz))
    return container((a._vals, a._plain, a._compressed), shape=a.shape)


def _from_scipy(xp: Any, m: Any, like: CompressedArray) -> CompressedArray:
    idt = np.dtype(like.index_dtype)
    fill = generic.python_scalar(xp, xp.zeros((), dtype=m.data.dtype))
    return CompressedArray(
        m.indptr.astype(idt, copy=False), m.indices.astype(idt, copy=False), m.data, like.shape,
        layout=like.layout, backend=like._backend, xp=xp, fill_value=fill,
    )  # fmt: skip


@register("add", (COMPRESSED, COMPRESSED), backend="numpy", supports=_supports_scipy_sum, priority=-1)
def _add_compressed_compressed_numpy(xp: Any, x: CompressedArray, y: CompressedArray) -> CompressedArray:
    """add(CSR, CSR) or add(CSC, CSC), 2-D, fill 0, one shape: SciPy's csr_plus_csr merge; O(nnz), zeros dropped."""
    return _from_scipy(xp, _scipy(x) + _scipy(y), x)


@register("subtract", (COMPRESSED, COMPRESSED), backend="numpy", supports=_supports_scipy_difference, priority=-1)
def _subtract_compressed_compressed_numpy(xp: Any, x: CompressedArray, y: CompressedArray) -> CompressedArray:
    """subtract(CSR, CSR) or (CSC, CSC), 2-D, fill 0, one shape: SciPy's csr_minus_csr merge; O(nnz), zeros dropped."""
    return _from_scipy(xp, _scipy(x) - _scipy(y), x)


@register("multiply", (COMPRESSED, COMPRESSED), backend="numpy", supports=_supports_scipy_product, priority=-1)
def _multiply_compressed_compressed_numpy(xp: Any, x: CompressedArray, y: CompressedArray) -> CompressedArray:
    """multiply(CSR, CSR) or (CSC, CSC), 2-D, fill 0, one shape: SciPy's csr_elmul_csr merge; O(nnz)."""
    # SciPy evaluates the product on the union of the entries and keeps the non-zero results, so that
    # inf * 0 = nan is kept, as the generic kernel does
    return _from_scipy(xp, _scipy(x).multiply(_scipy(y)), x)
