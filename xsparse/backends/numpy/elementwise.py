"""Native elementwise kernels of the NumPy backend.

- ``erf`` and ``erfinv``, which the Array API lacks, from ``scipy.special``.
- ``add``, ``subtract`` and ``multiply`` of two 2-D CSR (or two CSC) arrays with fill value 0 and one
  shape, through SciPy's compiled merge (``csr_plus_csr`` and friends), zero-copy on the way in.
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
from typing import Any

import numpy as np

from ... import dispatch
from ...dispatch import register
from ...formats import COMPRESSED, CompressedArray, sparse_csr, strided
from ..array_api import elementwise as generic

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
        return special.erfinv(x)


_OPS = (*generic.UNARY, *generic.NATIVE_ONLY_UNARY, "clip", *generic.BINARY)
for _op in _OPS:
    for _k in dispatch.kernels(_op):
        if _k.kind == "generic" and not (_op in generic.NATIVE_ONLY_UNARY and _k.signature == (strided,)):
            register(_op, _k.signature, backend="numpy", supports=_k.supports)(_quiet(_k.func, f"{_k.name}_numpy"))


# -- SciPy's compiled merges of two canonical CSR (or CSC) matrices --------------------------------------

_SCIPY_DTYPES = frozenset(
    np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                          np.uint64, np.float32, np.float64, np.complex64, np.complex128)
)  # fmt: skip


def _supports_scipy(xp: Any, x: Any, y: Any) -> str | None:
    if not (isinstance(x, CompressedArray) and isinstance(y, CompressedArray)):
        return "SciPy merges compressed arrays only"
    if x.layout is not y.layout or x.layout.is_blocked:
        return "SciPy merges two CSR or two CSC arrays only"
    if tuple(x.shape) != tuple(y.shape) or x.ndim != 2:
        return "SciPy merges 2-D arrays of one shape only (broadcasting and batches go to the generic kernel)"
    if x.fill_value != 0 or y.fill_value != 0:
        return "SciPy's sparse arrays have fill value 0"
    if np.dtype(x.dtype) not in _SCIPY_DTYPES or np.dtype(y.dtype) not in _SCIPY_DTYPES:
        return f"SciPy's sparse kernels do not handle the dtypes {np.dtype(x.dtype)} and {np.dtype(y.dtype)}"
    return None


def _supports_scipy_difference(xp: Any, x: Any, y: Any) -> str | None:
    reason = _supports_scipy(xp, x, y)
    if reason is None and np.dtype(x.dtype) == np.bool_ and np.dtype(y.dtype) == np.bool_:
        # NumPy refuses to subtract booleans; the generic kernel raises NumPy's own error
        return "NumPy has no subtraction of booleans"
    return reason


def _scipy(a: CompressedArray) -> Any:
    from scipy import sparse

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


@register("add", (COMPRESSED, COMPRESSED), backend="numpy", supports=_supports_scipy)
def _add_compressed_compressed_numpy(xp: Any, x: CompressedArray, y: CompressedArray) -> CompressedArray:
    """add(CSR, CSR) or add(CSC, CSC), 2-D, fill 0, one shape: SciPy's csr_plus_csr merge; O(nnz), zeros dropped."""
    return _from_scipy(xp, _scipy(x) + _scipy(y), x)


@register("subtract", (COMPRESSED, COMPRESSED), backend="numpy", supports=_supports_scipy_difference)
def _subtract_compressed_compressed_numpy(xp: Any, x: CompressedArray, y: CompressedArray) -> CompressedArray:
    """subtract(CSR, CSR) or (CSC, CSC), 2-D, fill 0, one shape: SciPy's csr_minus_csr merge; O(nnz), zeros dropped."""
    return _from_scipy(xp, _scipy(x) - _scipy(y), x)


@register("multiply", (COMPRESSED, COMPRESSED), backend="numpy", supports=_supports_scipy)
def _multiply_compressed_compressed_numpy(xp: Any, x: CompressedArray, y: CompressedArray) -> CompressedArray:
    """multiply(CSR, CSR) or (CSC, CSC), 2-D, fill 0, one shape: SciPy's csr_elmul_csr merge; O(nnz)."""
    # SciPy evaluates the product on the union of the entries and keeps the non-zero results, so that
    # inf * 0 = nan is kept, as the generic kernel does
    return _from_scipy(xp, _scipy(x).multiply(_scipy(y)), x)
