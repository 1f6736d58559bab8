"""Benchmark xsparse's sums over the axes of a CSR array against SciPy (NumPy backend) and torch.

The xsparse side is the public API (``xs.sum(A, axis=...)``): dispatch, the kernels' ``supports``
checks and the kernels, everything a user's call pays.

Usage::

    python benchmarks/bench_reductions.py [--quick]

Cases (full sizes; ``--quick`` shrinks them tenfold): a 1,000,000 x 1,000,000 CSR array with
10,000,000 random entries (int32 indices, float64 values), as in ``bench_elementwise.py``.

NumPy backend, target: at least as fast as SciPy's ``csr_array.sum(axis=...)`` (ratio <= 1.0):

* ``sum(A, axis=0)``, ``sum(A, axis=1)``: xsparse's default result is a COO array over the dimension
  that remains, holding the columns (rows) that have entries (as ``torch.sparse.sum``); SciPy returns a
  dense vector. Both forms are timed: the default, and ``layout=xs.strided`` (SciPy's form).
* ``sum(A)``: the total, a 0-d array (SciPy: a scalar).

torch backend, target: within 10 % of ``torch.sparse.sum`` on the same COO tensor (ratio <= 1.1):
``sum(A, axis=0)``, ``sum(A, axis=1)`` and ``sum(A)`` of a COO array. (torch.sparse.sum does not take
CSR tensors.) And over every axis of the CSR array: ``sum(A)`` against ``torch.sum`` of the CSR tensor,
``max(A)`` against the maximum of its values and of the unspecified 0.

Times are the best of a few repeats in this process, ours and the reference's alternating, as
wall-clock time and as CPU time of the process (all threads). Each result is checked against the
reference once.

The NumPy backend's compiled merges and sums and its parallel ufuncs use as many threads as there are
CPUs that no other task is running on when they are called (``xsparse.backends._cpu.available_threads``):
on a machine that other processes keep busy they run on one thread, and their CPU time then equals
their wall-clock time. Report the load (``uptime``) with the figures.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_elementwise import _as_xsparse, _print_table, _random_csr, _time_pair, cli  # noqa: E402

import xsparse as xs  # noqa: E402  (bench_elementwise made it importable from a checkout)


def _dense(x: Any) -> np.ndarray:
    return np.asarray(xs.to_dense(x) if isinstance(x, xs.SparseArray) else x)


def numpy_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    n, nnz = (100_000, 1_000_000) if quick else (1_000_000, 10_000_000)
    m = _random_csr(np.random.default_rng(0), n, nnz)
    a = _as_xsparse(m)
    rows = []
    for name, ours, ref in [
        ("sum axis=0", lambda: xs.sum(a, axis=0), lambda: m.sum(axis=0)),
        ("sum axis=0 s", lambda: xs.sum(a, axis=0, layout=xs.strided), lambda: m.sum(axis=0)),
        ("sum axis=1", lambda: xs.sum(a, axis=1), lambda: m.sum(axis=1)),
        ("sum axis=1 s", lambda: xs.sum(a, axis=1, layout=xs.strided), lambda: m.sum(axis=1)),
        ("sum", lambda: xs.sum(a), lambda: m.sum()),
    ]:
        np.testing.assert_allclose(_dense(ours()), np.asarray(ref()), rtol=1e-10, atol=1e-10)
        rows.append({"backend": "numpy", "case": name, "reference": "scipy csr_array", **_time_pair(ours, ref, repeats), "target": 1.0})
    return rows


def torch_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    import torch

    from xsparse.backends.torch import to_torch

    n, nnz = (100_000, 1_000_000) if quick else (1_000_000, 10_000_000)
    m = _random_csr(np.random.default_rng(1), n, nnz)
    c = xs.to_backend(xs.to_sparse_csr(_as_xsparse(m), index_dtype="int64"), "torch")
    a = xs.to_sparse_coo(c)
    t, tc = to_torch(a), to_torch(c)
    torch.set_num_threads(os.cpu_count() or 1)
    rows = []
    for name, ours, ref in [
        ("sum axis=0", lambda: xs.sum(a, axis=0), lambda: torch.sparse.sum(t, dim=0)),
        ("sum axis=1", lambda: xs.sum(a, axis=1), lambda: torch.sparse.sum(t, dim=1)),
        ("sum", lambda: xs.sum(a), lambda: torch.sparse.sum(t)),
    ]:
        got, want = ours(), ref()
        got = to_torch(got) if isinstance(got, xs.SparseArray) else got
        assert torch.allclose(got.to_dense(), want.to_dense(), rtol=1e-10, atol=1e-10), name
        rows.append({"backend": "torch", "case": name + " COO", "reference": "torch.sparse.sum", **_time_pair(ours, ref, repeats), "target": 1.1})
    for name, ours, ref in [
        ("sum", lambda: xs.sum(c), lambda: torch.sum(tc)),
        ("max", lambda: xs.max(c), lambda: torch.maximum(tc.values().max(), torch.zeros((), dtype=tc.dtype))),
    ]:
        assert torch.allclose(ours(), ref(), rtol=1e-10, atol=1e-10), name
        rows.append({"backend": "torch", "case": name + " CSR", "reference": "torch, values", **_time_pair(ours, ref, repeats), "target": 1.1})
    return rows


def main() -> None:
    cli(__doc__ or "", numpy_cases, torch_cases, _print_table)


if __name__ == "__main__":
    main()
