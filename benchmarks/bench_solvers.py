"""Benchmark xsparse's iterative solvers (``xs.linalg.cg``, ``bicgstab``, ``gmres``) against SciPy's.

SciPy's home ground: Krylov solvers of ``scipy.sparse.linalg`` on a CSR matrix. The xsparse side is the
public call (argument checks, then every product dispatched to the NumPy backend's compiled kernels);
SciPy's is the same call on a ``csr_array``. On torch, where torch has no solver, the reference is the
conjugate gradient loop a user would write with torch's own sparse product (``A @ p``, ``torch.dot``).

Usage::

    python benchmarks/bench_solvers.py [--quick]

Input (``--quick``: a 100 x 100 grid): the 5-point Laplacian of a 400 x 400 grid (160,000 unknowns,
800,000 entries, float64 values, int32 indices) and a right-hand side of standard normal numbers. Both
sides run the same number of iterations of the same recurrence (``rtol`` is set out of reach, so every
solver runs to ``maxiter``: 200 iterations of CG and of BiCGSTAB, 10 restart cycles of GMRES(20)), and the
solutions are checked to agree.

Cases, target: at least as fast as the reference (ratio <= 1.0):

* ``cg``, ``cg jacobi`` (preconditioned by the inverse diagonal, a sparse diagonal matrix on both sides),
  ``bicgstab``, ``gmres`` against SciPy.
* torch: ``cg`` against the hand-written torch loop.

Times are the best of a few repeats, ours and the reference's alternating (see ``bench_structure.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_elementwise import _print_table, cli  # noqa: E402
from bench_structure import _time_pair  # noqa: E402

import xsparse as xs  # noqa: E402  (bench_elementwise made it importable from a checkout)

UNREACHABLE = 1e-30  # a relative residual no solver reaches here: both sides run maxiter iterations


def laplacian(side: int) -> sp.csr_array:
    """The 5-point Laplacian of a ``side`` x ``side`` grid, with int32 indices."""
    t = sp.diags_array([-np.ones(side - 1), 2 * np.ones(side), -np.ones(side - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(side)
    a = (sp.kron(t, eye) + sp.kron(eye, t)).tocsr()
    a.indices, a.indptr = a.indices.astype(np.int32), a.indptr.astype(np.int32)
    return a


def _agree(ours: tuple[Any, int], ref: tuple[Any, int]) -> None:
    (x, info), (y, yinfo) = ours, ref
    assert info > 0 and yinfo > 0, (info, yinfo)  # both ran out of iterations, as set up
    x = np.asarray(x.cpu() if hasattr(x, "cpu") else x)
    np.testing.assert_allclose(x, np.asarray(y), rtol=0, atol=1e-6 * float(np.linalg.norm(y)))


def numpy_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    m = laplacian(100 if quick else 400)
    a = xs.asarray(m)
    b = np.random.default_rng(0).standard_normal(m.shape[0])
    jacobi = sp.diags_array(1.0 / m.diagonal(), format="csr")
    jacobi_ours = xs.asarray(jacobi)
    solve = dict(rtol=UNREACHABLE, maxiter=200)
    cases = [
        ("cg", lambda: xs.linalg.cg(a, b, **solve), lambda: spla.cg(m, b, **solve)),
        ("cg jacobi", lambda: xs.linalg.cg(a, b, M=jacobi_ours, **solve), lambda: spla.cg(m, b, M=jacobi, **solve)),
        ("bicgstab", lambda: xs.linalg.bicgstab(a, b, **solve), lambda: spla.bicgstab(m, b, **solve)),
        (
            "gmres",
            lambda: xs.linalg.gmres(a, b, rtol=UNREACHABLE, restart=20, maxiter=10),
            lambda: spla.gmres(m, b, rtol=UNREACHABLE, restart=20, maxiter=10),
        ),
    ]
    out = []
    for name, ours, ref in cases:
        _agree(ours(), ref())
        out.append({"backend": "numpy", "case": name, "reference": "scipy.sparse.linalg", **_time_pair(ours, ref, repeats), "target": 1.0})
    return out


def torch_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    import torch

    m = laplacian(100 if quick else 400)
    t = torch.sparse_csr_tensor(torch.from_numpy(m.indptr), torch.from_numpy(m.indices), torch.from_numpy(m.data), size=m.shape)
    a = xs.asarray(t)
    b = torch.from_numpy(np.random.default_rng(0).standard_normal(m.shape[0]))

    def torch_cg(iterations: int = 200) -> tuple[Any, int]:
        """Conjugate gradients as a torch user writes them (the reference: the same recurrence)."""
        x = torch.zeros_like(b)
        r = b.clone()
        p = r.clone()
        rho = torch.dot(r, r)
        for _ in range(iterations):
            q = t @ p
            alpha = rho / torch.dot(p, q)
            x += alpha * p
            r -= alpha * q
            if float(torch.linalg.vector_norm(r)) <= UNREACHABLE:
                return x, 0
            rho_next = torch.dot(r, r)
            p = r + (rho_next / rho) * p
            rho = rho_next
        return x, iterations

    def ours() -> Any:
        return xs.linalg.cg(a, b, rtol=UNREACHABLE, maxiter=200)

    _agree(ours(), torch_cg())
    return [{"backend": "torch", "case": "cg", "reference": "torch loop", **_time_pair(ours, torch_cg, repeats), "target": 1.0}]


def main() -> None:
    cli(__doc__ or "", numpy_cases, torch_cases, _print_table)


if __name__ == "__main__":
    main()
