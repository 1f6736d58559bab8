"""Benchmark xsparse's torch products against calling torch directly (the target: within 10 %).

The xsparse side is the public API (``xs.matmul``, ``xs.addmm``, ``xs.mm(reduce=)``,
``xs.sampled_addmm``, ``xs.spsolve`` is left out: torch has no CPU solver to compare with): argument
checks, dispatch, the zero-copy wrap of the components in a torch sparse tensor, torch's kernel. The
torch side calls the same kernel on a torch sparse tensor built once beforehand.

Usage::

    python benchmarks/bench_torch_linalg.py [--quick]

Cases (``--quick`` shrinks them about tenfold): a 20,000 x 20,000 float32 matrix with 50 entries per
row in CSR (and COO, BSR with 4 x 4 blocks), times a 20,000 x 64 dense matrix; sampled_addmm with the
same pattern and 20,000 x 64 factors. Times are the best of several repeats, ours and torch's
alternating; the ratio is ours / torch's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

try:
    import xsparse as xs
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import xsparse as xs

TARGET = 1.10


def _best(fn: Callable[[], Any], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _compare(ours: Callable[[], Any], theirs: Callable[[], Any], repeats: int) -> tuple[float, float]:
    ours(), theirs()  # warm up (and load the kernels)
    a = b = float("inf")
    for _ in range(repeats):
        a = min(a, _best(ours, 1))
        b = min(b, _best(theirs, 1))
    return a, b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="about tenfold smaller cases")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    n, per_row, k = (2_000, 20, 64) if args.quick else (20_000, 50, 64)
    # torch warns once that its compressed layouts are in beta and that invariant checks are off
    warnings.filterwarnings("ignore", message="Sparse (CSR|CSC|BSR|BSC) tensor support is in beta")
    warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")
    gen = torch.Generator().manual_seed(0)
    rows = torch.arange(n).repeat_interleave(per_row)
    cols = torch.randint(0, n, (n * per_row,), generator=gen)
    coo_t = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.randn(n * per_row, generator=gen), (n, n)).coalesce()
    csr_t = coo_t.to_sparse_csr()
    bsr_t = coo_t.to_dense().to_sparse_bsr((4, 4)) if args.quick else csr_t.to_sparse_bsr((4, 4))
    dense = torch.randn(n, k, generator=gen)
    left, right = torch.randn(n, k, generator=gen), torch.randn(k, n, generator=gen)
    bias = torch.randn(n, k, generator=gen)
    # the xsparse arrays share torch's components: both sides multiply the very same data
    shape = (n, n)
    coo = xs.sparse_coo_array(coo_t.indices(), coo_t.values(), shape, is_coalesced=True)
    csr = xs.sparse_csr_array(csr_t.crow_indices(), csr_t.col_indices(), csr_t.values(), shape)
    bsr = xs.sparse_bsr_array(bsr_t.crow_indices(), bsr_t.col_indices(), bsr_t.values(), shape)
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        ("matmul coo @ dense", lambda: xs.matmul(coo, dense), lambda: torch.mm(coo_t, dense)),
        ("matmul csr @ dense", lambda: xs.matmul(csr, dense), lambda: torch.mm(csr_t, dense)),
        ("matmul bsr @ dense", lambda: xs.matmul(bsr, dense), lambda: torch.mm(bsr_t, dense)),
        ("matmul dense.T @ csr", lambda: xs.matmul(dense.T, csr), lambda: torch.mm(dense.T, csr_t)),
        ("addmm csr", lambda: xs.addmm(bias, csr, dense, beta=0.5, alpha=2.0), lambda: torch.addmm(bias, csr_t, dense, beta=0.5, alpha=2.0)),
        ("mm(reduce='amax') csr", lambda: xs.mm(csr, dense, reduce="amax"), lambda: torch.sparse.mm(csr_t, dense, "amax")),
        ("sampled_addmm csr", lambda: xs.sampled_addmm(csr, left, right), lambda: torch.sparse.sampled_addmm(csr_t, left, right)),
    ]
    results = []
    for name, ours, theirs in cases:
        a, b = _compare(ours, theirs, args.repeats)
        results.append({"case": name, "xsparse_s": round(a, 6), "torch_s": round(b, 6), "ratio": round(a / b, 3)})
        print(f"{name:<24} xsparse {a * 1e3:9.3f} ms   torch {b * 1e3:9.3f} ms   ratio {a / b:5.2f}", flush=True)
    print(json.dumps({"n": n, "per_row": per_row, "k": k, "threads": torch.get_num_threads(), "results": results}))
    return 0 if all(r["ratio"] <= TARGET for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
