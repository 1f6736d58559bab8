"""Iterative solvers of ``A x = b`` (``xs.linalg.cg``, ``bicgstab``, ``gmres``), with SciPy's signatures.

The system matrix and the preconditioner enter through products only: a sparse array of any layout (its
products dispatched as :func:`xsparse.matmul`'s), a strided matrix, or a callable ``v -> A @ v`` (a SciPy
``LinearOperator`` is one). The recurrences are written once against the Array API
(:mod:`xsparse.backends.array_api.iterative`), so the same call runs on NumPy, torch (CPU or CUDA), CuPy
or any other backend, with the vectors on the backend's device.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable
from typing import Any

import array_api_compat

from . import dispatch
from ._common import backend_of, dtype_name, integer_argument, is_strided, namespace_of
from ._conversion import layout_of
from ._elementwise import convert_result
from ._linalg import working_dtype
from .backends import Backend
from .backends.array_api import iterative
from .formats import Layout, SparseArray, strided

__all__ = ["cg", "bicgstab", "gmres"]

_FLOATING = ("real floating", "complex floating")


def cg(
    A: Any,
    b: Any,
    x0: Any = None,
    *,
    rtol: float = 1e-5,
    atol: float = 0.0,
    maxiter: int | None = None,
    M: Any = None,
    callback: Callable[[Any], Any] | None = None,
    layout: Layout | None = None,
) -> tuple[Any, int]:
    """Solve ``A x = b`` by the conjugate gradient method, for Hermitian positive definite ``A``
    (``scipy.sparse.linalg.cg``'s signature and result).

    Parameters
    ----------
    A
        The ``(N, N)`` system: a sparse array of any layout (fill value 0), a strided matrix, or a
        callable that returns ``A @ v`` for a strided ``v`` of shape ``(N,)`` (a SciPy ``LinearOperator``
        on the NumPy backend).
    b
        The right-hand side, a strided ``(N,)`` array; it fixes the backend and the device.
    x0
        The starting guess, ``(N,)`` (default: zeros).
    rtol, atol
        The iteration stops when ``|b - A x| <= max(rtol * |b|, atol)`` (2-norms); both non-negative.
    maxiter
        The most iterations (default ``10 * N``).
    M
        The preconditioner, approximating the inverse of ``A`` (Hermitian positive definite): applied as
        ``M @ r``, and given as ``A`` is.
    callback
        Called as ``callback(xk)`` after every iteration with the current iterate: the solver's own
        array, which the next iteration updates in place (as SciPy's does); copy it to keep it.
    layout
        The layout of ``x`` (default strided).

    Returns
    -------
    x, info
        The solution (the dtype below) and SciPy's ``info``: 0 when the tolerance was met, the number of
        iterations when ``maxiter`` ran out first, -1 on a breakdown (a zero or non-finite denominator
        of the recurrence, as an ``A`` that is not positive definite can give, or a residual that overflows),
        with the last finite iterate.

    Notes
    -----
    The solution's dtype is the promotion of the floating dtypes among ``A``, ``b``, ``x0`` and ``M``
    (the default floating dtype where all are integers; float32 for float16 and bfloat16). Each iteration
    makes one product with ``A`` and one with ``M``, and reads two numbers on the host. Gradients do not
    flow through the solvers: on torch the solution does not require grad.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 2, 4], [0, 1, 0, 1], [4.0, 1.0, 1.0, 3.0], (2, 2))
    >>> x, info = xs.linalg.cg(a, np.asarray([1.0, 2.0]), rtol=1e-10)
    >>> info, np.round(x, 6).tolist()
    (0, [0.090909, 0.636364])
    """
    return _solve("cg", iterative.cg, A, b, x0, M, rtol, atol, maxiter, callback, layout)


def bicgstab(
    A: Any,
    b: Any,
    x0: Any = None,
    *,
    rtol: float = 1e-5,
    atol: float = 0.0,
    maxiter: int | None = None,
    M: Any = None,
    callback: Callable[[Any], Any] | None = None,
    layout: Layout | None = None,
) -> tuple[Any, int]:
    """Solve ``A x = b`` by BiCGSTAB, for any nonsingular ``A`` (``scipy.sparse.linalg.bicgstab``'s
    signature and result).

    The parameters, the result and the dtype are :func:`cg`'s; ``A`` and ``M`` need not be Hermitian.
    ``M`` preconditions from the right (``A M y = b``, ``x = M y``), so the tolerance applies to the
    residual of ``A x = b`` itself. Each iteration makes two products with ``A`` and two with ``M``.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 2, 3], [0, 1, 1], [2.0, 1.0, 4.0], (2, 2))
    >>> x, info = xs.linalg.bicgstab(a, np.asarray([3.0, 8.0]), rtol=1e-10)
    >>> info, np.round(x, 6).tolist()
    (0, [0.5, 2.0])
    """
    return _solve("bicgstab", iterative.bicgstab, A, b, x0, M, rtol, atol, maxiter, callback, layout)


def gmres(
    A: Any,
    b: Any,
    x0: Any = None,
    *,
    rtol: float = 1e-5,
    atol: float = 0.0,
    restart: int | None = None,
    maxiter: int | None = None,
    M: Any = None,
    callback: Callable[[Any], Any] | None = None,
    callback_type: str | None = None,
    layout: Layout | None = None,
) -> tuple[Any, int]:
    """Solve ``A x = b`` by restarted GMRES, for any nonsingular ``A`` (``scipy.sparse.linalg.gmres``'s
    signature and result).

    The parameters, the result and the dtype are :func:`cg`'s, except:

    Parameters
    ----------
    restart
        The inner iterations between restarts, the size of the Krylov basis kept (default 20, at most
        ``N``).
    maxiter
        The most restart cycles (default ``min(10 * N, 10000)``, SciPy's); ``info`` counts them too.
    M
        Preconditions from the right (``A M y = b``, ``x = M y``), so the tolerance applies to the
        residual of ``A x = b`` itself, which every cycle measures. (SciPy preconditions from the left;
        the solution is the same, within the tolerance.)
    callback, callback_type
        ``"x"`` (default): ``callback(xk)`` after every restart cycle with the current iterate;
        ``"pr_norm"``: ``callback(residual)`` after every inner iteration with ``|b - A x| / |b|`` as the
        Arnoldi process estimates it. SciPy's ``"legacy"`` is not offered.

    Examples
    --------
    >>> import numpy as np
    >>> import xsparse as xs
    >>> a = xs.sparse_csr_array([0, 2, 3], [0, 1, 1], [2.0, 1.0, 4.0], (2, 2))
    >>> x, info = xs.linalg.gmres(a, np.asarray([3.0, 8.0]), rtol=1e-10)
    >>> info, np.round(x, 6).tolist()
    (0, [0.5, 2.0])
    """
    op = "gmres"
    if callback_type is None:
        callback_type = "x"
    if callback_type not in ("x", "pr_norm"):
        raise ValueError(
            f"{op}: callback_type must be 'x' or 'pr_norm' (callback_type={callback_type!r}). Pass 'x' for the iterate "
            "after each restart cycle, or 'pr_norm' for the relative residual after each inner iteration."
        )
    with _untracked(b):
        system = _System(op, A, b, x0, M, rtol, atol, maxiter, callback)
    n = system.n
    if restart is None:
        restart = 20
    restart = integer_argument(op, "restart", restart, "Pass a positive number of inner iterations, e.g. restart=20.")
    if restart < 1:
        raise ValueError(f"{op}: restart must be positive (restart={restart}). Pass a positive number of inner iterations, e.g. restart=20.")
    cycles = min(10 * n, 10000) if maxiter is None else system.maxiter
    bnorm = system.bnorm
    inner = callback if callback is None or callback_type == "x" or not bnorm else (lambda residual: callback(residual / bnorm))
    with _untracked(b):
        solution = iterative.gmres(
            system.xp,
            system.matvec,
            system.b,
            system.x0,
            tol=system.tol,
            restart=min(restart, max(n, 1)),
            maxiter=cycles,
            psolve=system.psolve,
            callback=inner,
            callback_type=callback_type,
        )
    return convert_result(solution.x, layout, op), solution.info


def _solve(
    op: str, kernel: Callable[..., iterative.Solution], A: Any, b: Any, x0: Any, M: Any, rtol: Any, atol: Any, maxiter: Any, callback: Any,
    layout: Layout | None,
) -> tuple[Any, int]:
    """The solve of :func:`cg` and :func:`bicgstab`: checks, then the kernel, then ``layout=``."""
    with _untracked(b):
        system = _System(op, A, b, x0, M, rtol, atol, maxiter, callback)
        solution = kernel(
            system.xp, system.matvec, system.b, system.x0, tol=system.tol, maxiter=system.maxiter, psolve=system.psolve, callback=callback
        )
    return convert_result(solution.x, layout, op), solution.info


class _System:
    """The checked arguments of a solve: the backend, the products with ``A`` and ``M`` in the working dtype,
    the right-hand side, the start and the absolute tolerance."""

    def __init__(
        self, op: str, A: Any, b: Any, x0: Any, M: Any, rtol: Any, atol: Any, maxiter: Any, callback: Any
    ) -> None:
        self.op = op
        if isinstance(b, SparseArray) or not is_strided(b, op):
            what = f"layout={b.layout}" if isinstance(b, SparseArray) else f"type {type(b).__name__}"
            raise TypeError(f"{op}: b must be a strided (N,) array of a backend ({what}). Pass xsparse.to_dense(b), or the backend's asarray of it.")
        arrays = {name: x for name, x in (("A", A), ("x0", x0), ("M", M)) if x is not None and (name == "x0" or not _is_callable_operator(x))}
        for name, x in arrays.items():
            if not isinstance(x, SparseArray) and not is_strided(x, op):
                raise TypeError(
                    f"{op}: {name} must be an xsparse array, a strided matrix or a callable v -> {name} @ v, got "
                    f"{type(x).__name__}. Convert a SciPy, torch or pydata/sparse matrix with xsparse.asarray first."
                )
        self.backend: Backend = backend_of(b, *arrays.values(), op=op)
        xp = self.xp = namespace_of(self.backend)
        if b.ndim != 1:
            raise ValueError(
                f"{op}: b must be 1-D (b.shape={tuple(b.shape)}). Solve for one right-hand side at a time, or use "
                "xsparse.spsolve for a matrix of them."
            )
        n = self.n = int(b.shape[0])
        for name, x in {"b": b, **arrays}.items():
            if x.dtype == xp.bool:
                raise TypeError(f"{op}: {name} has a boolean dtype ({name}.dtype=bool). Convert it to a floating dtype first.")
        floating = [x.dtype for x in (b, *arrays.values()) if xp.isdtype(x.dtype, _FLOATING)]
        if floating:
            dtype = working_dtype(xp, xp.result_type(*floating))
        else:
            dtype = xp.__array_namespace_info__().default_dtypes(device=array_api_compat.device(b))["real floating"]
        self.dtype = dtype
        self.matvec = self._operator("A", A, n)
        self.psolve = None if M is None else self._operator("M", M, n)
        self.b = _finite_vector(op, xp, "b", xp.astype(b, dtype, copy=False))
        if x0 is None:
            self.x0 = xp.zeros((n,), dtype=dtype, device=array_api_compat.device(b))
        else:
            if isinstance(x0, SparseArray) or tuple(x0.shape) != (n,):
                shape = f"layout={x0.layout}" if isinstance(x0, SparseArray) else f"x0.shape={tuple(x0.shape)}"
                raise ValueError(f"{op}: x0 must be a strided array of b's shape ({shape}, b.shape=({n},)). Pass a strided ({n},) guess.")
            self.x0 = _finite_vector(op, xp, "x0", xp.astype(x0, dtype, copy=True))
        rtol = _tolerance(op, "rtol", rtol)
        atol = _tolerance(op, "atol", atol)
        self.bnorm = iterative.norm(xp, self.b)
        self.tol = max(rtol * self.bnorm, atol)
        if maxiter is None:
            self.maxiter = 10 * n
        else:
            self.maxiter = integer_argument(op, "maxiter", maxiter, "Pass a positive number of iterations.")
            if self.maxiter < 1:
                raise ValueError(f"{op}: maxiter must be positive (maxiter={self.maxiter}). Pass a positive number of iterations.")
        if callback is not None and not callable(callback):
            raise TypeError(f"{op}: callback must be callable or None, got {type(callback).__name__}.")

    def _operator(self, name: str, A: Any, n: int) -> Callable[[Any], Any]:
        op, xp, dtype = self.op, self.xp, self.dtype
        if _is_callable_operator(A):
            shape = getattr(A, "shape", None)
            if shape is not None and tuple(shape) != (n, n):
                raise ValueError(f"{op}: {name} must be ({n}, {n}) for b of shape ({n},) ({name}.shape={tuple(shape)}). Pass a square operator of b's size.")
            return _checked_callable(op, name, A, xp, dtype, n)
        if A.ndim != 2 or tuple(A.shape) != (n, n):
            raise ValueError(
                f"{op}: {name} must be a ({n}, {n}) matrix for b of shape ({n},) ({name}.shape={tuple(A.shape)}). Pass a square "
                "system of b's size."
            )
        if isinstance(A, SparseArray):
            if A.dtype != dtype:
                from ._indexing import astype

                A = astype(A, dtype, copy=False)
            if xp.isdtype(A.dtype, _FLOATING) and not bool(xp.all(xp.isfinite(A._vals))):
                raise ValueError(f"{op}: {name} holds a NaN or an infinity (shape={tuple(A.shape)}, nnz={A.nnz}). Pass a matrix of finite values.")
            if A.fill_value != 0:
                raise ValueError(
                    f"{op}: {name} has fill value {A.fill_value!r}; a system matrix's unspecified elements are zeros. Pass a "
                    "matrix with fill value 0 (xsparse.to_sparse(xsparse.to_dense(A)) builds one)."
                )
            return _repeated_product(xp, A, (layout_of(A), strided), self.backend.name, dtype, n)
        A = xp.astype(A, dtype, copy=False)
        if not bool(xp.all(xp.isfinite(A))):
            raise ValueError(f"{op}: {name} holds a NaN or an infinity (shape={tuple(A.shape)}). Pass a matrix of finite values.")
        return lambda v: A @ v  # the array's own operator: array-api-compat's matmul checks promotion each time


def _repeated_product(xp: Any, A: SparseArray, layouts: tuple[Layout, Layout], backend: str, dtype: Any, n: int) -> Callable[[Any], Any]:
    """``v -> A @ v`` by the matmul kernel chosen once: the first product goes through the dispatcher (whose
    errors name invalid indices, and after which the kernels trust ``A``'s), the next ones to the kernel
    directly, for vectors of the kind it accepted. Its checks cost a torch SpMV of 10,000 rows a third of
    its time, at every step."""
    kernel = dispatch.chosen("matmul", layouts, backend, xp, A, xp.zeros((n,), dtype=dtype, device=A.device))
    first = [True]

    def product(v: Any) -> Any:
        if kernel is None or first[0] or v.dtype != dtype or tuple(v.shape) != (n,):
            first[0] = False
            return dispatch.call("matmul", layouts, backend, xp, A, v)
        return kernel.func(xp, A, v)

    return product


def _untracked(b: Any) -> contextlib.AbstractContextManager[Any]:
    """No autograd recording while checking and iterating (torch would keep every iterate's graph); ``b``'s
    backend is the solve's, or the checks raise."""
    if array_api_compat.is_torch_array(b):
        import torch

        return torch.no_grad()
    return contextlib.nullcontext()


def _is_callable_operator(x: Any) -> bool:
    return callable(x) and not isinstance(x, SparseArray) and not hasattr(x, "__array_namespace__")


def _checked_callable(op: str, name: str, f: Callable[[Any], Any], xp: Any, dtype: Any, n: int) -> Callable[[Any], Any]:
    def product(v: Any) -> Any:
        out = f(v)
        if isinstance(out, SparseArray) or not hasattr(out, "shape") or tuple(out.shape) != (n,):
            got = f"layout={out.layout}" if isinstance(out, SparseArray) else f"shape={tuple(getattr(out, 'shape', ()))}, type {type(out).__name__}"
            raise ValueError(f"{op}: the callable {name} returned no strided ({n},) array for a vector of b's shape ({got}). Return {name} @ v.")
        if out.dtype == dtype:
            return out
        if xp.isdtype(out.dtype, "complex floating") and not xp.isdtype(dtype, "complex floating"):
            # a cast would drop the imaginary parts and solve another system, reporting convergence
            raise TypeError(
                f"{op}: the callable {name} returned complex values for a real right-hand side ({name}(v).dtype="
                f"{dtype_name(out.dtype)}, the solver's dtype={dtype_name(dtype)}). Pass b as a complex array "
                "(xsparse.astype(b, 'complex128')), so that the solver works in complex numbers."
            )
        return xp.astype(out, dtype)

    return product


def _finite_vector(op: str, xp: Any, name: str, v: Any) -> Any:
    if not bool(xp.all(xp.isfinite(v))):
        raise ValueError(f"{op}: {name} holds a NaN or an infinity ({name}.shape={tuple(v.shape)}). Pass finite values.")
    return v


def _tolerance(op: str, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)) or float(value) < 0:
        raise ValueError(f"{op}: {name} must be a finite non-negative number ({name}={value!r}). Pass e.g. {name}=1e-5.")
    return float(value)
