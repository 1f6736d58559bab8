"""Benchmark xsparse's indexing and structure operations on the NumPy backend against SciPy.

SciPy's home ground: picking rows, columns and elements of a CSR matrix, its triangles and diagonal,
stacking, converting between formats. The xsparse side is the public API (``A[rows]``, ``xs.tril(A)``,
``xs.linalg.diagonal(A)``, ...): argument checks, dispatch and the kernels, everything a user's call pays.

Usage::

    python benchmarks/bench_structure.py [--quick]

Input (full size; ``--quick`` shrinks it tenfold): a 200,000 x 200,000 CSR matrix with 2,000,000 entries
at uniformly random positions (float64 values, int32 indices, duplicates summed), the same matrix as a
SciPy ``csr_array``. ``rows`` and ``cols`` are 1,000 random indices (repeats possible, unsorted).

Cases, target: at least as fast as SciPy (ratio <= 1.0):

* ``A[i, j]``, ``A[i]`` (SciPy: ``A[[i]]``, a 1 x n matrix), ``A[rows]``, ``A[:, cols]``,
  ``A[rows, cols]`` (1,000 points), ``A[n/200:n/4]``, ``A[:, n/200:n/4]``: xsparse keeps CSR where both
  dimensions remain (``A[i]``, ``A[rows, cols]`` and ``A[i, j]`` give COO arrays of 1 and 0 dimensions).
* ``diagonal`` (SciPy: ``A.diagonal()``, a dense vector; xsparse: a 1-D COO array), ``tril``,
  ``triu k=1`` (``scipy.sparse.tril(A, format="csr")``).
* ``vstack``, ``hstack`` of ``[A, A]`` (``scipy.sparse.vstack(..., format="csr")``).
* ``to CSC``, ``to COO`` (``A.tocsc()``, ``A.tocoo()``), ``COO to CSR`` and ``COO to CSC`` of ``A``'s
  canonical COO form (``tocsr()``, ``tocsc()`` of SciPy's ``coo_array``), ``COO @ x`` of it and a vector.
* ``checked CSR``: building ``A`` from its components with the index checks
  (``sparse_csr_array(..., check_invariants=True)``; SciPy: ``csr_array((data, indices, indptr))``, then
  ``check_format(full_check=True)``).
* ``sum``, ``max`` of every element (``A.sum()``, ``A.max()``), and of a 10 x 10 CSR matrix with 30 entries
  (``sum small``, ``max small``: the cost of a call around a tiny reduction).
* ``count_nonzero``, ``vector_norm`` (``scipy.sparse.linalg.norm(A)``, the Frobenius norm).
* ``kron T, I``: the 1-D Laplacian of 1,000 points (``--quick``: 300) times the identity, as CSR
  (``scipy.sparse.kron(T, I, format="csr")``), the 2-D Laplacian's construction; ``kron R, S``: a
  10,000 x 10,000 matrix with 100,000 random entries (``--quick``: 3,000 and 30,000) times a 50 x 50 one
  with 250, as COO (``format="coo"``).
* ``block_diag`` of ``[A, A]``, and of 1,000 (``--quick``: 100) CSR matrices of 10 x 10 with about 30
  entries each (``scipy.sparse.block_diag(..., format="csr")``).

Times are the best of a few repeats, ours and the reference's alternating, as wall-clock time and as CPU
time of the process (all threads) per call; a call shorter than about 50 ms is repeated within each
measurement. Each result is checked against SciPy's once.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import _calls_per_measurement  # noqa: E402
from bench_elementwise import _as_xsparse, _print_table, _random_csr, cli  # noqa: E402

import xsparse as xs  # noqa: E402  (bench_elementwise made it importable from a checkout)


def _same(ours: Any, ref: Any) -> None:
    """``ours`` (an xsparse or NumPy array) holds the elements of ``ref`` (a SciPy matrix, array or scalar)."""
    if isinstance(ours, xs.SparseArray) and ours.ndim == 2:
        c = cast(xs.COOArray, xs.to_sparse_coo(ours))
        got = sp.coo_array((np.asarray(c.values()), tuple(np.asarray(c.indices()))), shape=c.shape).tocsr()
        diff = got - sp.csr_array(ref)
        assert diff.nnz == 0 or float(abs(diff).max()) == 0.0
        return
    dense = np.asarray(xs.to_dense(ours) if isinstance(ours, xs.SparseArray) else ours)
    want = ref.toarray() if sp.issparse(ref) else np.asarray(ref)
    np.testing.assert_allclose(dense, np.reshape(want, dense.shape), rtol=1e-12, atol=0)


def _per_call(fn: Callable[[], Any], number: int) -> tuple[float, float]:
    """Wall-clock and CPU seconds (all threads) per call, over ``number`` calls, the collector paused."""
    gc.collect()
    gc.disable()
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(number):
            fn()
        return (time.perf_counter() - wall) / number, (time.process_time() - cpu) / number
    finally:
        gc.enable()


def _time_pair(ours: Callable[[], Any], ref: Callable[[], Any], repeats: int) -> dict[str, float]:
    """The best times per call of ``ours`` and ``ref``, run alternately; a fast call is repeated within a
    measurement (to about 50 ms), so that microseconds are measured, not the clock's resolution."""
    numbers = {"ours": _calls_per_measurement(ours), "ref": _calls_per_measurement(ref)}
    runs: dict[str, list[tuple[float, float]]] = {"ours": [], "ref": []}
    for _ in range(repeats):
        runs["ours"].append(_per_call(ours, numbers["ours"]))
        runs["ref"].append(_per_call(ref, numbers["ref"]))
    return {
        "ours": min(w for w, _ in runs["ours"]), "ref": min(w for w, _ in runs["ref"]),
        "ours_cpu": min(c for _, c in runs["ours"]), "ref_cpu": min(c for _, c in runs["ref"]),
    }  # fmt: skip


def numpy_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    n, nnz = (20_000, 200_000) if quick else (200_000, 2_000_000)
    rng = np.random.default_rng(0)
    m = _random_csr(rng, n, nnz)
    a = _as_xsparse(m)
    rows, cols = rng.integers(0, n, 1000), rng.integers(0, n, 1000)
    i = 5
    j = int(m.indices[m.indptr[i]]) if m.indptr[i + 1] > m.indptr[i] else 7  # a stored element
    lo, hi = n // 200, n // 4
    mcoo = m.tocoo()  # canonical: sorted by row, then column
    coo = xs.sparse_coo_array(np.stack([mcoo.row, mcoo.col]), mcoo.data, mcoo.shape, is_coalesced=True)
    # Kronecker products: the 1-D Laplacian with the identity (the 2-D Laplacian's construction), and two
    # random matrices
    k = 300 if quick else 1000
    mt = sp.diags_array([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], offsets=[-1, 0, 1], format="csr")
    meye = sp.eye_array(k, format="csr")
    mr, ms = _random_csr(rng, 10 * k, 100 * k), _random_csr(rng, 50, 250)
    t, eye, r, s = (_as_xsparse(x) for x in (mt, meye, mr, ms))
    # block_diag of many small blocks: 1,000 (--quick: 100) CSR matrices of 10 x 10, 30 entries each
    mblocks = [_random_csr(rng, 10, 30) for _ in range(100 if quick else 1000)]
    blocks = [_as_xsparse(x) for x in mblocks]
    x = rng.standard_normal(n)
    msmall = _random_csr(rng, 10, 30)
    small = _as_xsparse(msmall)

    def checked() -> Any:
        c = sp.csr_array((m.data, m.indices, m.indptr), shape=m.shape, copy=False)
        c.check_format(full_check=True)
        return c

    cases = [
        ("A[i, j]", lambda: a[i, j], lambda: m[i, j]),
        ("A[i]", lambda: a[i], lambda: m[[i]]),
        ("A[rows]", lambda: a[rows], lambda: m[rows]),
        ("A[:, cols]", lambda: a[:, cols], lambda: m[:, cols]),
        ("A[rows, cols]", lambda: a[rows, cols], lambda: m[rows, cols]),
        ("A[lo:hi]", lambda: a[lo:hi], lambda: m[lo:hi]),
        ("A[:, lo:hi]", lambda: a[:, lo:hi], lambda: m[:, lo:hi]),
        ("diagonal", lambda: xs.linalg.diagonal(a), lambda: m.diagonal()),
        ("tril", lambda: xs.tril(a), lambda: sp.tril(m, format="csr")),
        ("triu k=1", lambda: xs.triu(a, k=1), lambda: sp.triu(m, k=1, format="csr")),
        ("vstack", lambda: xs.vstack([a, a]), lambda: sp.vstack([m, m], format="csr")),
        ("hstack", lambda: xs.hstack([a, a]), lambda: sp.hstack([m, m], format="csr")),
        ("to CSC", lambda: xs.to_sparse_csc(a), lambda: m.tocsc()),
        ("to COO", lambda: xs.to_sparse_coo(a), lambda: m.tocoo()),
        ("COO to CSR", lambda: xs.to_sparse_csr(coo), lambda: mcoo.tocsr()),
        ("COO to CSC", lambda: xs.to_sparse_csc(coo), lambda: mcoo.tocsc()),
        ("COO @ x", lambda: coo @ x, lambda: mcoo @ x),
        ("checked CSR", lambda: xs.sparse_csr_array(m.indptr, m.indices, m.data, m.shape, check_invariants=True), checked),
        ("sum", lambda: xs.sum(a), lambda: m.sum()),
        ("max", lambda: xs.max(a), lambda: m.max()),
        ("sum small", lambda: xs.sum(small), lambda: msmall.sum()),
        ("max small", lambda: xs.max(small), lambda: msmall.max()),
        ("count_nonzero", lambda: xs.count_nonzero(a), lambda: m.count_nonzero()),
        ("vector_norm", lambda: xs.linalg.vector_norm(a), lambda: spla.norm(m)),
        ("kron T, I", lambda: xs.kron(t, eye, layout=xs.sparse_csr), lambda: sp.kron(mt, meye, format="csr")),
        ("kron R, S", lambda: xs.kron(r, s), lambda: sp.kron(mr, ms, format="coo")),
        ("block_diag", lambda: xs.block_diag(a, a), lambda: sp.block_diag([m, m], format="csr")),
        ("block_diag many", lambda: xs.block_diag(*blocks), lambda: sp.block_diag(mblocks, format="csr")),
    ]
    out = []
    for name, ours, ref in cases:
        _same(ours(), ref())
        out.append({"backend": "numpy", "case": name, "reference": "scipy csr_array", **_time_pair(ours, ref, repeats), "target": 1.0})
    return out


def torch_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    return []  # SciPy's home ground only


def main() -> None:
    cli(__doc__ or "", numpy_cases, torch_cases, _print_table)


if __name__ == "__main__":
    main()
