"""Krylov solvers for ``A x = b`` written against the Array API: conjugate gradients, BiCGSTAB and
restarted GMRES.

``A`` and the preconditioner enter as callables (``matvec(v)`` is ``A @ v``, ``psolve(r)`` is ``M @ r``,
``M`` approximating the inverse of ``A``), so the solvers know neither layouts nor backends: the public
layer (:mod:`xsparse._iterative`) hands them products through the dispatcher. Vectors stay on the
backend's device; the scalars of the recurrences (inner products, norms) and GMRES's small Hessenberg
least-squares problem live on the host, as Python numbers and NumPy arrays of at most
``(restart + 1) x restart`` entries.

Every solver stops when ``|b - A x| <= tol`` (the caller turns SciPy's ``rtol`` and ``atol`` into ``tol``)
and reports SciPy's ``info``: 0 on convergence, the number of iterations (GMRES: restart cycles) when it
ran out of them, and -1 on a breakdown (a zero or non-finite denominator of the recurrence, or a
non-finite residual), with the last iterate whose residual was finite.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import array_api_compat

from .conversion import to_host

__all__ = ["Solution", "cg", "bicgstab", "gmres", "inner", "norm", "project"]

BREAKDOWN = -1


class Solution(NamedTuple):
    """A solver's result: the iterate, SciPy's ``info``, the residual norm ``|b - A x|`` the solver last
    measured, and the iterations run (GMRES: inner iterations, over every restart cycle)."""

    x: Any
    info: int
    residual: float
    iterations: int


def inner(xp: Any, dtype: Any) -> Callable[[Any, Any], Any]:
    """``(u, v) -> u^H v`` for vectors of ``dtype``, as a Python float (real dtypes) or complex, so that scaling
    a vector by it keeps its dtype (the dtype's kind is read once per solve, not once per product)."""
    # the @ of two vectors is the backend's dot (BLAS in NumPy and torch), by the array's own operator:
    # vecdot, which conjugates for itself, is a generic broadcasting routine in array-api-compat's torch
    # namespace (20 us a call), and its matmul checks promotion first (a third of a 10,000-element dot)
    if xp.isdtype(dtype, "complex floating"):
        return lambda u, v: complex(xp.conj(u) @ v)
    return lambda u, v: float(u @ v)


def project(xp: Any, dtype: Any) -> Callable[[Any, Any], Any]:
    """``(V, w) -> V^H w`` for the rows ``V`` of a basis and a vector ``w`` of ``dtype``, on the device (one
    matrix-vector product; conjugating the vector and the result, not the basis, for complex dtypes)."""
    if xp.isdtype(dtype, "complex floating"):
        return lambda rows, w: xp.conj(rows @ xp.conj(w))
    return lambda rows, w: rows @ w


def norm(xp: Any, v: Any) -> float:
    """The 2-norm of the vector ``v``, as a Python float.

    The backends add the squares of the elements unscaled, which overflow past the square root of the
    dtype's largest value (about 1.8e19 in float32, 1.3e154 in float64) and underflow below that of its
    smallest normal one: a finite vector read as infinite, a small one as 0, and a solver's tolerance
    (a multiple of the norm of b) with it. Where the plain norm is infinite or too small to trust, the
    vector is divided by its largest magnitude first (LAPACK's ``nrm2`` scales as it adds). NumPy warns of
    the overflow of the first attempt ("overflow encountered"), as it does of a solver's inner products
    there; catching it would cost every call more than the norm of 10,000 elements."""
    r = float(xp.linalg.vector_norm(v))
    if _trusted_norm(xp, v.dtype) <= r < math.inf:
        return r
    largest = float(xp.max(xp.abs(v))) if v.shape[0] else 0.0
    if largest == 0 or not math.isfinite(largest):
        return r if r != r else largest  # NaN stays NaN; an infinite element's norm is infinite
    return largest * float(xp.linalg.vector_norm(v / largest))


# keyed by the dtype's type and name: dtypes of two libraries compare with a warning (array_api_strict's)
_TRUSTED_NORM: dict[tuple[type, str], float] = {}


def _trusted_norm(xp: Any, dtype: Any) -> float:
    """The smallest norm of a ``dtype`` vector whose sum of squares lost nothing that matters to underflow:
    an element below the square root of the smallest normal value adds less than a rounding error to it."""
    key = (type(dtype), str(dtype))
    low = _TRUSTED_NORM.get(key)
    if low is None:
        info = xp.finfo(dtype)
        low = _TRUSTED_NORM[key] = math.sqrt(float(info.smallest_normal)) / float(info.eps)
    return low


def _identity(r: Any) -> Any:
    return r


def _start(xp: Any, matvec: Callable[[Any], Any], b: Any, x: Any, tol: float) -> tuple[Any, float, Solution | None]:
    """The residual of the start ``x``, its norm, and the solver's result where there is nothing to iterate."""
    r = b - matvec(x)
    residual = norm(xp, r)
    if residual <= tol:
        return r, residual, Solution(x, 0, residual, 0)
    if not math.isfinite(residual):
        return r, residual, Solution(x, BREAKDOWN, residual, 0)
    return r, residual, None


def cg(
    xp: Any,
    matvec: Callable[[Any], Any],
    b: Any,
    x: Any,
    *,
    tol: float,
    maxiter: int,
    psolve: Callable[[Any], Any] | None = None,
    callback: Callable[[Any], Any] | None = None,
) -> Solution:
    """Preconditioned conjugate gradients (Hestenes & Stiefel) for Hermitian positive definite ``A`` and ``M``,
    from ``x``; one product with ``A`` and one with ``M`` per iteration."""
    dot = inner(xp, b.dtype)
    r, residual, done = _start(xp, matvec, b, x, tol)
    if done is not None:
        return done
    z = r if psolve is None else psolve(r)
    rho = dot(r, z)
    # x, r and p are the solver's own arrays (x is a copy of the start), updated in place as SciPy's are:
    # a new array per update cost a third of each step at 10,000 unknowns; p starts as a copy, since z
    # may be r itself
    p = xp.asarray(z, copy=True)
    for it in range(1, maxiter + 1):
        q = matvec(p)
        curvature = dot(p, q)
        if curvature == 0 or rho == 0 or not _finite(curvature):
            return Solution(x, BREAKDOWN, residual, it - 1)
        alpha = rho / curvature
        r -= alpha * q
        if psolve is None:
            # without a preconditioner z is r, and r^H r is both the next rho and the residual's square
            rho_next = dot(r, r)
            next_residual = math.sqrt(abs(rho_next))
        else:
            next_residual = norm(xp, r)
        if not math.isfinite(next_residual):
            return Solution(x, BREAKDOWN, residual, it - 1)  # x not yet moved: its residual was finite
        x += alpha * p
        residual = next_residual
        if callback is not None:
            callback(x)
        if residual <= tol:
            return Solution(x, 0, residual, it)
        if psolve is None:
            z = r
        else:
            z = psolve(r)
            rho_next = dot(r, z)
        p *= rho_next / rho
        p += z
        rho = rho_next
    return Solution(x, maxiter, residual, maxiter)


def bicgstab(
    xp: Any,
    matvec: Callable[[Any], Any],
    b: Any,
    x: Any,
    *,
    tol: float,
    maxiter: int,
    psolve: Callable[[Any], Any] | None = None,
    callback: Callable[[Any], Any] | None = None,
) -> Solution:
    """BiCGSTAB (van der Vorst 1992), right-preconditioned, for any nonsingular ``A``, from ``x``; two products
    with ``A`` and two with ``M`` per iteration."""
    precondition = psolve or _identity
    dot = inner(xp, b.dtype)
    r, residual, done = _start(xp, matvec, b, x, tol)
    if done is not None:
        return done
    shadow = r
    rho_prev = alpha = omega = 1.0
    p = v = None
    for it in range(1, maxiter + 1):
        rho = dot(shadow, r)
        if rho == 0 or not _finite(rho):
            return Solution(x, BREAKDOWN, residual, it - 1)
        if p is None or v is None:
            p = xp.asarray(r, copy=True)  # the solver's own, updated in place below
        else:
            p -= omega * v
            p *= (rho / rho_prev) * (alpha / omega)
            p += r
        p_hat = precondition(p)
        v = matvec(p_hat)
        denominator = dot(shadow, v)
        if denominator == 0 or not _finite(denominator):
            return Solution(x, BREAKDOWN, residual, it - 1)
        alpha = rho / denominator
        s = r - alpha * v
        s_norm = norm(xp, s)
        if s_norm <= tol:
            x = x + alpha * p_hat
            if callback is not None:
                callback(x)
            return Solution(x, 0, s_norm, it)
        s_hat = precondition(s)
        t = matvec(s_hat)
        tt = dot(t, t)
        omega = dot(t, s) / tt if tt else 0.0
        if omega == 0 or not _finite(omega) or not math.isfinite(s_norm):
            return Solution(x, BREAKDOWN, residual, it - 1)
        x_next, r_next = x + alpha * p_hat + omega * s_hat, s - omega * t
        next_residual = norm(xp, r_next)
        if not math.isfinite(next_residual):
            return Solution(x, BREAKDOWN, residual, it - 1)
        x, r, residual = x_next, r_next, next_residual
        if callback is not None:
            callback(x)
        if residual <= tol:
            return Solution(x, 0, residual, it)
        rho_prev = rho
    return Solution(x, maxiter, residual, maxiter)


def gmres(
    xp: Any,
    matvec: Callable[[Any], Any],
    b: Any,
    x: Any,
    *,
    tol: float,
    restart: int,
    maxiter: int,
    psolve: Callable[[Any], Any] | None = None,
    callback: Callable[[Any], Any] | None = None,
    callback_type: str = "x",
) -> Solution:
    """GMRES(restart) (Saad & Schultz 1986), right-preconditioned, from ``x``, for at most ``maxiter`` restart
    cycles; one product with ``A`` and one with ``M`` per inner iteration.

    The Arnoldi basis is orthogonalised by classical Gram-Schmidt applied twice (two products with the
    basis, kept as the rows of one array, per step, where modified Gram-Schmidt would make one small
    operation per basis vector),
    and the Hessenberg matrix is reduced by Givens rotations on the host as it grows, so that each step
    knows its residual norm without a solve. Right preconditioning (``A M y = b``, ``x = M y``) makes that
    norm the residual of ``b - A x`` itself; each cycle ends by measuring it directly.
    """
    import numpy as np

    precondition = psolve or _identity
    complex_ = xp.isdtype(b.dtype, "complex floating")
    host = np.complex128 if complex_ else np.float64
    device = array_api_compat.device(b)
    r = b - matvec(x)
    residual = norm(xp, r)
    iterations = 0
    basis = _Basis(xp, restart + 1, b)
    onto = project(xp, b.dtype)
    for cycle in range(maxiter + 1):
        if residual <= tol:
            return Solution(x, 0, residual, iterations)
        if not math.isfinite(residual):
            return Solution(x, BREAKDOWN, residual, iterations)
        if cycle == maxiter:
            break
        basis.restart(r / residual)
        h = np.zeros((restart + 1, restart), dtype=host)
        cs, sn = np.zeros(restart, dtype=host), np.zeros(restart, dtype=host)
        g = np.zeros(restart + 1, dtype=host)
        g[0] = residual
        steps = 0
        for j in range(restart):
            w = matvec(precondition(basis.row(j)))
            stacked = basis.rows()
            coefficients = onto(stacked, w)
            w = w - coefficients @ stacked
            again = onto(stacked, w)
            w = w - again @ stacked
            column = to_host(coefficients + again).astype(host)
            w_norm = norm(xp, w)
            if not (np.all(np.isfinite(column)) and math.isfinite(w_norm)):
                break  # the cycle's basis so far still gives a finite update; the residual check then decides
            iterations += 1
            steps = j + 1
            h[: j + 1, j] = column
            h[j + 1, j] = w_norm
            for i in range(j):  # the previous rotations, applied to the new column
                h[i, j], h[i + 1, j] = cs[i] * h[i, j] + sn[i] * h[i + 1, j], -np.conj(sn[i]) * h[i, j] + cs[i] * h[i + 1, j]
            cs[j], sn[j] = _givens(h[j, j], h[j + 1, j])
            h[j, j], h[j + 1, j] = cs[j] * h[j, j] + sn[j] * h[j + 1, j], 0.0
            g[j], g[j + 1] = cs[j] * g[j], -np.conj(sn[j]) * g[j]
            if callback is not None and callback_type == "pr_norm":
                callback(float(abs(g[j + 1])))
            if abs(g[j + 1]) <= tol or w_norm == 0:
                break
            basis.append(w / w_norm)
        if steps == 0:
            return Solution(x, BREAKDOWN, residual, iterations)
        y = _upper_triangular_solve(h[:steps, :steps], g[:steps])
        if not np.all(np.isfinite(y)):
            return Solution(x, BREAKDOWN, residual, iterations)
        weights = xp.asarray(y if complex_ else y.real, dtype=b.dtype, device=device)
        x = x + precondition(xp.matmul(weights, basis.rows(steps)))
        r = b - matvec(x)
        residual = norm(xp, r)
        if callback is not None and callback_type == "x":
            callback(x)
    return Solution(x, maxiter, residual, iterations)


class _Basis:
    """GMRES's Krylov basis: rows of one preallocated ``(capacity, n)`` array written in place, where the
    backend's arrays can be written (NumPy, torch, CuPy, array-api-strict); a list stacked on demand where
    they cannot (JAX), at the cost of a copy per step."""

    def __init__(self, xp: Any, capacity: int, like: Any) -> None:
        self.xp = xp
        self.array = xp.zeros((capacity, int(like.shape[0])), dtype=like.dtype, device=array_api_compat.device(like))
        self.listed: list[Any] | None = None
        self.count = 0

    def restart(self, first: Any) -> None:
        self.count = 0
        if self.listed is not None:
            self.listed = []
        self.append(first)

    def append(self, v: Any) -> None:
        if self.listed is None:
            try:
                self.array[self.count, ...] = v
                self.count += 1
                return
            except (TypeError, ValueError, NotImplementedError):  # an immutable array type
                self.listed = [self.array[i, ...] for i in range(self.count)]
        self.listed.append(v)
        self.count += 1

    def row(self, i: int) -> Any:
        return self.array[i, ...] if self.listed is None else self.listed[i]

    def rows(self, count: int | None = None) -> Any:
        """The first ``count`` rows (default: all written) as one ``(count, n)`` array."""
        count = self.count if count is None else count
        return self.array[:count, ...] if self.listed is None else self.xp.stack(self.listed[:count])


def _finite(value: complex | float) -> bool:
    return math.isfinite(abs(value))


def _givens(a: Any, b: Any) -> tuple[Any, Any]:
    """``(c, s)`` with real ``c`` and ``[[c, s], [-conj(s), c]] @ [a, b] = [rho, 0]``."""
    if b == 0:
        return 1.0, 0.0
    if a == 0:
        return 0.0, b.conjugate() / abs(b)
    scale = math.hypot(abs(a), abs(b))
    c = abs(a) / scale
    return c, (a / abs(a)) * b.conjugate() / scale


def _upper_triangular_solve(r: Any, g: Any) -> Any:
    """Back substitution on the host's small triangular factor (a zero pivot gives a non-finite answer)."""
    import numpy as np

    n = r.shape[0]
    y = np.zeros(n, dtype=r.dtype)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(n - 1, -1, -1):
            y[i] = (g[i] - r[i, i + 1 :] @ y[i + 1 :]) / r[i, i]
    return y
