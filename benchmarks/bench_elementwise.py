"""Benchmark xsparse's elementwise functions against SciPy (NumPy backend) and torch (torch backend).

The xsparse side is the public API (``xs.add(A, B)``, ``A * B``, ``xs.sin(A)``): dispatch, the
kernels' ``supports`` checks and the kernels, everything a user's call pays.

Usage::

    python benchmarks/bench_elementwise.py [--quick]

Cases (full sizes; ``--quick`` shrinks the sparse ones tenfold):

NumPy backend, target: at least as fast as the reference (ratio <= 1.0):

* ``A + B``, ``A - B``, ``A * B``: two 1,000,000 x 1,000,000 CSR arrays with 10,000,000 random
  entries each (int32 indices, float64 values), against the same matrices as SciPy ``csr_array``s
  (``A + B``, ``A - B``, ``A.multiply(B)``).
* ``sin(A)``: against ``numpy.sin`` of A's values (the whole cost of a zero-preserving function).

(Sums over the axes of the same arrays: ``benchmarks/bench_reductions.py``.)

torch backend, target: within 10 % of calling torch directly (ratio <= 1.1), for the operations torch
has, on the same torch sparse tensors:

* ``COO + COO`` (both concatenate the entries), ``COO * COO``, ``CSR + CSR``, ``CSR * CSR``,
  ``COO * 2.5``, ``sin(COO)``, ``sin(CSR)``: arrays of the sizes above;
* ``dense + COO``, ``COO * dense``: a 4,000 x 4,000 COO array with 1,600,000 entries and a dense
  array of the same shape. For ``COO * dense`` xsparse first checks that the dense operand is finite
  (one read of all of it; not for integer dtypes): torch's product gives 0 where an infinite or NaN
  dense element meets an unspecified one, where IEEE 754 (and xsparse) give NaN, so torch only runs
  when the two agree. That read, not the wrapper, is what the ratio measures beyond 1.

Times are the best of a few repeats in this process, ours and the reference's alternating, as wall-clock
time and as CPU time of the process (all threads), which is the fairer measure on a loaded machine. Each
result is checked against the reference once.

The NumPy backend's compiled merges and sums and its parallel ufuncs use as many threads as there are
CPUs that no other task is running on when they are called (``xsparse.backends._cpu.available_threads``):
on a machine that other processes keep busy they run on one thread, and their CPU time then equals
their wall-clock time. Report the load (``uptime``) with the figures.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.sparse as sp

try:
    import xsparse as xs
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import xsparse as xs


def _random_csr(rng: np.random.Generator, n: int, nnz: int) -> sp.csr_array:
    rows = rng.integers(0, n, nnz, dtype=np.int64)
    cols = rng.integers(0, n, nnz, dtype=np.int64)
    m = sp.coo_array((rng.standard_normal(nnz), (rows, cols)), shape=(n, n)).tocsr()
    m.sum_duplicates()
    return sp.csr_array((m.data, m.indices.astype(np.int32), m.indptr.astype(np.int32)), shape=(n, n))


def _as_xsparse(m: sp.csr_array) -> Any:
    return xs.sparse_csr_array(m.indptr, m.indices, m.data, m.shape)


def _once(fn: Callable[[], Any]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (all threads of this process) of one call."""
    gc.collect()
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def _time_pair(ours: Callable[[], Any], ref: Callable[[], Any], repeats: int) -> dict[str, float]:
    """The best wall-clock and CPU times of ``ours`` and ``ref``, run alternately."""
    runs: dict[str, list[tuple[float, float]]] = {"ours": [], "ref": []}
    for _ in range(repeats):
        runs["ours"].append(_once(ours))
        runs["ref"].append(_once(ref))
    return {
        "ours": min(w for w, _ in runs["ours"]), "ref": min(w for w, _ in runs["ref"]),
        "ours_cpu": min(c for _, c in runs["ours"]), "ref_cpu": min(c for _, c in runs["ref"]),
    }  # fmt: skip


def _same_csr(x: Any, m: Any) -> None:
    got = sp.csr_array((np.asarray(x.values()), np.asarray(x.col_indices()), np.asarray(x.crow_indices())), shape=x.shape)
    diff = abs(got - m)
    assert diff.nnz == 0 or float(diff.max()) <= 1e-12 * max(1.0, float(abs(m).max())), "results differ"


def numpy_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    n, nnz = (100_000, 1_000_000) if quick else (1_000_000, 10_000_000)
    rng = np.random.default_rng(0)
    ma, mb = _random_csr(rng, n, nnz), _random_csr(rng, n, nnz)
    a, b = _as_xsparse(ma), _as_xsparse(mb)
    rows = []
    for name, ours, ref in [
        ("A + B", lambda: a + b, lambda: ma + mb),
        ("A - B", lambda: a - b, lambda: ma - mb),
        ("A * B", lambda: a * b, lambda: ma.multiply(mb)),
    ]:
        _same_csr(ours(), ref())
        rows.append({"backend": "numpy", "case": name, "reference": "scipy csr_array", **_time_pair(ours, ref, repeats), "target": 1.0})
    values = ma.data
    np.testing.assert_array_equal(np.asarray(xs.sin(a).values()), np.sin(values))
    times = _time_pair(lambda: xs.sin(a), lambda: np.sin(values), repeats)
    rows.append({"backend": "numpy", "case": "sin(A)", "reference": "numpy.sin(values)", **times, "target": 1.0})
    return rows


def torch_cases(quick: bool, repeats: int) -> list[dict[str, Any]]:
    import torch
    import warnings

    from xsparse.backends.torch import to_torch

    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    n, nnz = (100_000, 1_000_000) if quick else (1_000_000, 10_000_000)
    rng = np.random.default_rng(1)
    ma, mb = _random_csr(rng, n, nnz), _random_csr(rng, n, nnz)
    # int64 indices, torch's own (torch widens int32 COO indices on every call)
    a_csr = xs.to_backend(xs.to_sparse_csr(_as_xsparse(ma), index_dtype="int64"), "torch")
    b_csr = xs.to_backend(xs.to_sparse_csr(_as_xsparse(mb), index_dtype="int64"), "torch")
    a_coo, b_coo = xs.to_sparse_coo(a_csr), xs.to_sparse_coo(b_csr)
    ta_csr, tb_csr = to_torch(a_csr), to_torch(b_csr)
    ta_coo, tb_coo = to_torch(a_coo), to_torch(b_coo)
    side = 1_200 if quick else 4_000
    dense = torch.from_numpy(rng.standard_normal((side, side)))
    # np.where, not a product with the mask: that leaves a -0.0 wherever the value was negative, and a
    # -0.0 is a specified element (docs/decisions.md, "Signed zeros")
    s_coo = xs.to_sparse_coo(torch.from_numpy(np.where(rng.random((side, side)) < 0.1, rng.standard_normal((side, side)), 0.0)))
    ts_coo = to_torch(s_coo)
    cases = [
        ("COO + COO", lambda: a_coo + b_coo, lambda: ta_coo + tb_coo),
        ("COO * COO", lambda: a_coo * b_coo, lambda: ta_coo * tb_coo),
        ("CSR + CSR", lambda: a_csr + b_csr, lambda: ta_csr + tb_csr),
        ("CSR * CSR", lambda: a_csr * b_csr, lambda: ta_csr * tb_csr),
        ("COO * 2.5", lambda: a_coo * 2.5, lambda: ta_coo * 2.5),
        ("sin(COO)", lambda: xs.sin(a_coo), lambda: torch.sin(ta_coo)),
        ("sin(CSR)", lambda: xs.sin(a_csr), lambda: torch.sin(ta_csr)),
        ("dense + COO", lambda: dense + s_coo, lambda: dense + ts_coo),
        ("COO * dense", lambda: s_coo * dense, lambda: ts_coo * dense),
    ]
    rows = []
    torch.set_num_threads(os.cpu_count() or 1)
    for name, ours, ref in cases:
        got, want = ours(), ref()
        assert _close(to_torch(got) if isinstance(got, xs.SparseArray) else got, want), name
        rows.append({"backend": "torch", "case": name, "reference": "torch", **_time_pair(ours, ref, repeats), "target": 1.1})
    return rows


def _close(got: Any, want: Any) -> bool:
    """Whether two torch tensors (strided or sparse, of any layout) hold the same elements, to 1e-12."""
    import torch

    if got.layout == torch.strided or want.layout == torch.strided:
        return bool(torch.allclose(got.to_dense(), want.to_dense(), rtol=1e-12, atol=1e-12))
    diff = (got.to_sparse_coo() - want.to_sparse_coo()).coalesce()
    return diff._nnz() == 0 or bool(diff._values().abs().max() <= 1e-12)


def _print_table(rows: list[dict[str, Any]], quick: bool) -> None:
    import platform

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"xsparse {xs.__version__}, numpy {np.__version__}, scipy {scipy.__version__}, python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {load:.1f}{', quick sizes' if quick else ''}"
    )
    print("best of the repeats; ratio = xsparse / reference (wall clock, and CPU time of all threads)")
    head = f"{'backend':<7} {'case':<12} {'reference':<18} {'xsparse s':>10} {'ref s':>9} {'ratio':>6} {'cpu ratio':>9} {'target':>7}  met"
    print(head)
    print("-" * len(head))
    for r in rows:
        ratio = r["ours"] / r["ref"]
        cpu_ratio = r["ours_cpu"] / r["ref_cpu"] if r["ref_cpu"] > 0 else float("nan")
        met = "yes" if ratio <= r["target"] else "NO"
        print(
            f"{r['backend']:<7} {r['case']:<12} {r['reference']:<18} {r['ours']:>10.4f} {r['ref']:>9.4f} {ratio:>6.2f} "
            f"{cpu_ratio:>9.2f} {r['target']:>7.2f}  {met}"
        )


Cases = Callable[[bool, int], list[dict[str, Any]]]


def cli(doc: str, numpy_cases: Cases, torch_cases: Cases, print_table: Callable[[list[dict[str, Any]], bool], None]) -> None:
    """The command line shared by the CPU benchmarks: ``--quick``, the NumPy-backend cases, the torch ones
    where torch is installed, one table."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer repeats")
    args = parser.parse_args()
    repeats = 5 if args.quick else 7
    rows = numpy_cases(args.quick, repeats)
    if importlib.util.find_spec("torch") is None:
        print("torch is not installed: the torch cases are left out")
    else:
        rows += torch_cases(args.quick, repeats)
    print_table(rows, args.quick)


def main() -> None:
    cli(__doc__ or "", numpy_cases, torch_cases, _print_table)


if __name__ == "__main__":
    main()
