"""Benchmark xsparse's sparse linear algebra against SciPy, torch.sparse, pydata/sparse and JAX.

The xsparse side is the public API (``a @ x``, ``a @ a``, ``xs.sampled_addmm``): argument checks,
dispatch and the kernels, everything a user's call pays, on every installed backend (NumPy: the
compiled kernels; torch: torch.sparse's; array_api_strict: the generic Array API kernels, on the cases
small enough for them).

Usage::

    python benchmarks/bench_linalg.py [--quick] [--only TEXT]
    python -m xsparse bench [--quick]

Cases (full sizes; ``--quick`` shrinks the matrices about tenfold):

* SpMV (``A @ x``) and SpMM (``A @ X``, X with 64 columns) with ``A`` a 1,000,000 x 1,000,000 matrix
  with 10 entries per row at uniformly random columns (``uniform``), and the 5-point Laplacian of a
  1000 x 1000 grid (``laplace``); float32 and float64 values, int32 and int64 indices.
* SpGEMM ``A @ A`` of the Laplacian.
* SDDMM: ``input + A1 @ B`` sampled at the Laplacian's pattern (``sampled_addmm``), A1 1,000,000 x 64,
  B 64 x 1,000,000 (the transpose of a C-ordered array, as in ``A1 @ A2.T``); SciPy has no SDDMM: its
  column is NumPy's gather-and-sum (``einsum`` of the gathered rows, in blocks).
* The dispatch cost: a SpMV of a 10 x 10 matrix with 30 entries.

Peers: SciPy (``csr_array``, one thread), torch.sparse CSR tensors with 1 and 2 threads
(``torch.set_num_threads``), pydata/sparse ``GCXS`` arrays, and for SpMV and SpMM JAX's ``BCSR``
matrices (``jax.experimental.sparse``, the product compiled once with ``jax.jit``, in 64-bit mode). Every result is checked against SciPy's
once per case.

Also measured: the machine's copy bandwidth (STREAM-style ``numpy.copyto`` with 1 and 2 threads,
counting the bytes read and written), and for each xsparse NumPy kernel its effective bandwidth, the
bytes a kernel must move at least (the sparse operand's indices and values, the dense operands read
once, the result written once) over its time, as a share of the 2-thread copy bandwidth.

Times are the best of a few repeats in this process, the implementations alternating; a case timed
while other processes used more than a quarter of the CPUs is timed again (see ``_harness.py``), and
its other load is reported. Results (table, JSON and one PNG plot per kernel) go to
``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import xsparse as xs
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import xsparse as xs

from _harness import RESULTS_DIR, Impl, copy_bandwidth, format_table, plot_groups, progress, save_json, time_case

K_COLUMNS = 64
XSPARSE_THREADS = os.cpu_count() or 1
# The generic kernels on array_api_strict run only where the work (entries x columns) is at most this.
STRICT_MAX_WORK = 12_000_000
# pydata/sparse compiles its kernels with numba on first use: they are warmed up before timing.

TARGETS = {
    "speedup_vs_scipy": 2.0,  # SpMV/SpMM: at most 0.5 x SciPy's time
    "vs_torch_2t": 1.0,  # SpMV/SpMM: no slower than torch with 2 threads
    "laplace_spmv_copy_share": 0.70,  # Laplacian SpMV: at least 70 % of the 2-thread copy bandwidth
    "spgemm_vs_scipy": 1.0,  # SpGEMM: no slower than SciPy
    "dispatch_vs_scipy": 2.0,  # 10 x 10 SpMV: at most 2 x SciPy's A @ x
    "torch_backend_vs_torch": 1.10,  # every kernel: xsparse[torch] within 10 % of torch.sparse on the same tensors
}


# --- inputs ---------------------------------------------------------------------------------------


def uniform_matrix(n: int, per_row: int, seed: int = 0) -> sp.csr_array:
    rng = np.random.default_rng(seed)
    cols = np.sort(rng.integers(0, n, (n, per_row)), axis=1).reshape(-1)
    indptr = np.arange(0, n * per_row + 1, per_row, dtype=np.int64)
    a = sp.csr_array((rng.standard_normal(n * per_row), cols, indptr), shape=(n, n))
    a.sum_duplicates()  # the rare repeated column
    return a


def laplace_matrix(side: int) -> sp.csr_array:
    t = sp.diags_array([-np.ones(side - 1), 2 * np.ones(side), -np.ones(side - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(side)
    a = (sp.kron(eye, t) + sp.kron(t, eye)).tocsr()
    a.sort_indices()
    return sp.csr_array(a)


def as_types(a: sp.csr_array, dtype: Any, index_dtype: Any) -> sp.csr_array:
    out = sp.csr_array((a.data.astype(dtype), a.indices.astype(index_dtype), a.indptr.astype(index_dtype)), shape=a.shape)
    out.has_canonical_format = True  # SciPy would otherwise re-check; the input is canonical
    return out


# --- peers ----------------------------------------------------------------------------------------


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")
    warnings.filterwarnings("ignore", message=".*Sparse invariant checks are implicitly disabled.*")
    return torch


def _pydata() -> Any:
    try:
        import sparse
    except ImportError:
        return None
    return sparse


def _jax_sparse() -> Any:
    """jax.experimental.sparse in JAX's 64-bit mode (float64 values, int64 indices), or None."""
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    from jax.experimental import sparse as jsparse

    return jsparse


def jax_product(a: sp.csr_array, x: np.ndarray) -> Callable[[], Any]:
    """``A @ x`` with ``A`` a JAX ``BCSR`` matrix, compiled with ``jax.jit`` once (a JAX user's form), and
    waited for."""
    import jax
    import jax.numpy as jnp

    jsparse = _jax_sparse()
    m = jsparse.BCSR((jnp.asarray(a.data), jnp.asarray(a.indices), jnp.asarray(a.indptr)), shape=a.shape)
    jx = jnp.asarray(x)
    f = jax.jit(lambda m, v: m @ v)
    f(m, jx).block_until_ready()  # compiled before timing
    return lambda: f(m, jx).block_until_ready()


def _strict() -> Any:
    try:
        import array_api_strict
    except ImportError:
        return None
    return array_api_strict


def torch_threads(n: int) -> Callable[[], None]:
    torch = _torch()

    def setup() -> None:
        torch.set_num_threads(n)

    return setup


def xsparse_threads() -> None:
    """Give xsparse's kernels all the CPUs again before they are timed.

    torch's wheels ship the same OpenMP runtime as the one xsparse's extension links (libgomp.so.1),
    and a process loads it once: ``torch.set_num_threads(1)`` for the torch peers also sets the
    thread count of xsparse's kernels.
    """
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(XSPARSE_THREADS)


def torch_csr(a: sp.csr_array) -> Any:
    torch = _torch()
    return torch.sparse_csr_tensor(
        torch.from_numpy(a.indptr), torch.from_numpy(a.indices), torch.from_numpy(a.data), size=a.shape
    )


@dataclass
class Case:
    op: str  # spmv, spmm, spgemm, sddmm, dispatch
    matrix: str
    dtype: str
    index: str
    impls: list[Impl]
    check: Callable[[], None]
    bytes_moved: int
    work: int
    repeats: int

    @property
    def label(self) -> str:
        return f"{self.op} {self.matrix} {self.dtype} {self.index}"


def _close(actual: Any, expected: Any, dtype: Any) -> None:
    tol = 1e-4 if np.dtype(dtype) == np.float32 else 1e-10
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=tol, atol=tol * max(1.0, float(np.abs(expected).max(initial=0))))


def product_case(op: str, name: str, a: sp.csr_array, quick: bool, rng: np.random.Generator) -> Case:
    """SpMV (op 'spmv') or SpMM with K_COLUMNS columns ('spmm') of a against every peer."""
    dtype, idx = a.dtype, a.indptr.dtype
    m, n = a.shape
    x = rng.standard_normal(n if op == "spmv" else (n, K_COLUMNS)).astype(dtype)
    ours = xs.sparse_csr_array(a.indptr, a.indices, a.data, a.shape)  # shares SciPy's arrays
    impls = [Impl("xsparse[numpy]", lambda: ours @ x, xsparse_threads), Impl("scipy", lambda: a @ x)]
    torch = _torch()
    if torch is not None:
        t, tx = torch_csr(a), torch.from_numpy(x)
        impls += [Impl("torch 1t", lambda: t @ tx, torch_threads(1)), Impl("torch 2t", lambda: t @ tx, torch_threads(2))]
        ours_t = xs.to_backend(ours, "torch")
        impls.append(Impl("xsparse[torch]", lambda: ours_t @ tx, torch_threads(2)))
    sparse = _pydata()
    if sparse is not None:
        g = sparse.GCXS.from_scipy_sparse(a)
        impls.append(Impl("pydata/sparse", lambda: g @ x))
    if _jax_sparse() is not None:
        impls.append(Impl("jax BCSR", jax_product(a, x)))
    k = 1 if op == "spmv" else K_COLUMNS
    strict = _strict()
    if strict is not None and a.nnz * k <= STRICT_MAX_WORK:
        ours_s, xs_s = xs.to_backend(ours, "array_api_strict"), strict.asarray(x)
        impls.append(Impl("xsparse[array_api_strict]", lambda: ours_s @ xs_s))

    def check() -> None:
        _close(ours @ x, a @ x, dtype)

    isz, vsz = idx.itemsize, dtype.itemsize
    moved = (m + 1) * isz + a.nnz * (isz + vsz) + (n + m) * k * vsz
    # more repeats let the best of them miss the machine's bursts of other load
    # (the xsparse[torch] and torch columns run one torch kernel, so only such bursts tell them apart)
    return Case(op, name, dtype.name, idx.name, impls, check, moved, a.nnz * k, 7 if not quick and op == "spmm" else 12)


def spgemm_case(name: str, a: sp.csr_array, quick: bool) -> Case:
    dtype, idx = a.dtype, a.indptr.dtype
    ours = xs.sparse_csr_array(a.indptr, a.indices, a.data, a.shape)
    impls = [Impl("xsparse[numpy]", lambda: ours @ ours, xsparse_threads), Impl("scipy", lambda: a @ a)]
    torch = _torch()
    if torch is not None:
        t = torch_csr(a)
        impls += [Impl("torch 1t", lambda: t @ t, torch_threads(1)), Impl("torch 2t", lambda: t @ t, torch_threads(2))]
        ours_t = xs.to_backend(ours, "torch")
        impls.append(Impl("xsparse[torch]", lambda: ours_t @ ours_t, torch_threads(2)))
    sparse = _pydata()
    if sparse is not None:
        g = sparse.GCXS.from_scipy_sparse(a)
        impls.append(Impl("pydata/sparse", lambda: g @ g))
    ref = a @ a
    flops = int(np.diff(a.indptr)[a.indices].sum())
    strict = _strict()
    if strict is not None and flops <= STRICT_MAX_WORK // 4:
        ours_s = xs.to_backend(ours, "array_api_strict")
        impls.append(Impl("xsparse[array_api_strict]", lambda: ours_s @ ours_s))

    def check() -> None:
        c = ours @ ours
        r = ref.tocsr()
        r.sort_indices()
        assert np.array_equal(np.asarray(c.crow_indices()), r.indptr) and np.array_equal(np.asarray(c.col_indices()), r.indices)
        _close(c.values(), r.data, dtype)

    isz, vsz = idx.itemsize, dtype.itemsize
    m = a.shape[0]
    moved = 2 * ((m + 1) * isz + a.nnz * (isz + vsz)) + (m + 1) * isz + ref.nnz * (isz + vsz)
    return Case("spgemm", name, dtype.name, idx.name, impls, check, moved, flops, 5)


def sddmm_case(name: str, a: sp.csr_array, quick: bool, rng: np.random.Generator) -> Case:
    dtype, idx = a.dtype, a.indptr.dtype
    m, n = a.shape
    left = rng.standard_normal((m, K_COLUMNS)).astype(dtype)
    right = rng.standard_normal((n, K_COLUMNS)).astype(dtype).T  # (K, n), the transpose of a C-ordered array
    mask = xs.sparse_csr_array(a.indptr, a.indices, a.data, a.shape)
    rows = np.repeat(np.arange(m, dtype=idx), np.diff(a.indptr))

    def numpy_gather() -> np.ndarray:
        out = np.empty(a.nnz, dtype=dtype)
        rt = right.T
        step = 1 << 18
        for s in range(0, a.nnz, step):  # blocks, so that the gathered rows stay a few MB
            e = min(a.nnz, s + step)
            out[s:e] = np.einsum("ij,ij->i", left[rows[s:e]], rt[a.indices[s:e]])
        return out + a.data

    impls = [Impl("xsparse[numpy]", lambda: xs.sampled_addmm(mask, left, right), xsparse_threads), Impl("scipy", numpy_gather)]
    torch = _torch()
    if torch is not None:
        t, tl, tr = torch_csr(a), torch.from_numpy(left), torch.from_numpy(right)
        impls += [
            Impl("torch 1t", lambda: torch.sparse.sampled_addmm(t, tl, tr), torch_threads(1)),
            Impl("torch 2t", lambda: torch.sparse.sampled_addmm(t, tl, tr), torch_threads(2)),
        ]
        mask_t = xs.to_backend(mask, "torch")
        impls.append(Impl("xsparse[torch]", lambda: xs.sampled_addmm(mask_t, tl, tr), torch_threads(2)))
    strict = _strict()
    if strict is not None and a.nnz * K_COLUMNS <= STRICT_MAX_WORK:
        mask_s, ls, rs = xs.to_backend(mask, "array_api_strict"), strict.asarray(left), strict.asarray(right)
        impls.append(Impl("xsparse[array_api_strict]", lambda: xs.sampled_addmm(mask_s, ls, rs)))

    def check() -> None:
        _close(xs.sampled_addmm(mask, left, right).values(), numpy_gather(), dtype)

    isz, vsz = idx.itemsize, dtype.itemsize
    moved = (m + 1) * isz + a.nnz * (isz + 2 * vsz) + (m + n) * K_COLUMNS * vsz
    return Case("sddmm", name, dtype.name, idx.name, impls, check, moved, a.nnz * K_COLUMNS, 9)


def dispatch_case() -> Case:
    """A 10 x 10 SpMV: what a call costs beyond its arithmetic (argument checks, dispatch, wrapping)."""
    from xsparse import dispatch

    a = as_types(sp.random_array((10, 10), density=0.3, format="csr", random_state=np.random.default_rng(1)), np.float64, np.int32)
    x = np.ones(10)
    ours = xs.sparse_csr_array(a.indptr, a.indices, a.data, a.shape)
    xp = xs.get_backend("numpy").load()
    layouts = (xs.sparse_csr, xs.strided)
    impls = [
        Impl("xsparse[numpy]", lambda: ours @ x, xsparse_threads),
        Impl("scipy", lambda: a @ x),
        Impl("xs.matmul", lambda: xs.matmul(ours, x), xsparse_threads),
        Impl("dispatch.call", lambda: dispatch.call("matmul", layouts, "numpy", xp, ours, x), xsparse_threads),
    ]
    torch = _torch()
    if torch is not None:
        t, tx = torch_csr(a), torch.from_numpy(x)
        impls.append(Impl("torch 1t", lambda: t @ tx, torch_threads(1)))
    sparse = _pydata()
    if sparse is not None:
        g = sparse.GCXS.from_scipy_sparse(a)
        impls.append(Impl("pydata/sparse", lambda: g @ x))
    if _jax_sparse() is not None:
        impls.append(Impl("jax BCSR", jax_product(a, x)))

    def check() -> None:
        _close(ours @ x, a @ x, np.float64)

    return Case("dispatch", "10x10", "float64", "int32", impls, check, 0, a.nnz, 7)


def build_cases(quick: bool, only: str | None) -> list[Case]:
    n, side = (100_000, 300) if quick else (1_000_000, 1000)
    rng = np.random.default_rng(0)
    base = {"uniform": uniform_matrix(n, 10), "laplace": laplace_matrix(side)}
    cases: list[Case] = []
    for op in ("spmv", "spmm"):
        for name, a in base.items():
            for dtype in (np.float32, np.float64):
                for idx in (np.int32, np.int64):
                    cases.append(product_case(op, name, as_types(a, dtype, idx), quick, rng))
    for dtype in (np.float32, np.float64):
        for idx in (np.int32, np.int64):
            cases.append(spgemm_case("laplace", as_types(base["laplace"], dtype, idx), quick))
    for dtype in (np.float32, np.float64):
        for idx in (np.int32, np.int64):
            cases.append(sddmm_case("laplace", as_types(base["laplace"], dtype, idx), quick, rng))
    cases.append(dispatch_case())
    if only:
        cases = [c for c in cases if only in c.label]
    return cases


# --- running and reporting ------------------------------------------------------------------------

PEERS = ["xsparse[numpy]", "scipy", "torch 1t", "torch 2t", "pydata/sparse", "jax BCSR", "xsparse[torch]", "xsparse[array_api_strict]"]


def _jax_version() -> str | None:
    if _jax_sparse() is None:
        return None
    import jax

    return str(jax.__version__)


def run(quick: bool, only: str | None = None) -> dict[str, Any]:
    """Measure the copy bandwidth, then every case; return the results (see :func:`report`)."""
    from xsparse.backends import _cpu

    if _cpu.unavailable_reason() is not None:
        raise RuntimeError(f"the compiled kernels are not built: {_cpu.unavailable_reason()}")
    threads = _cpu._native_module().max_threads()
    size = (1 << 26) if quick else (1 << 28)
    bandwidth = {}
    for threads in (1, 2):
        bw, load = copy_bandwidth(size, threads)
        bandwidth[threads] = {"bytes_per_s": bw, "other_load": load}
    cases = build_cases(quick, only)
    rows = []
    for case in progress(cases, len(cases), "bench"):
        case.check()
        timing = time_case(case.impls, case.repeats)
        row: dict[str, Any] = {
            "case": case.label, "op": case.op, "matrix": case.matrix, "dtype": case.dtype, "index": case.index,
            "work": case.work, "bytes": case.bytes_moved, "other_load": timing.other_load, "attempts": timing.attempts,
            "times": timing.best, "errors": timing.errors,
        }  # fmt: skip
        rows.append(row)
    torch = _torch()
    sparse = _pydata()
    return {
        "quick": quick,
        "machine": {
            "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "scipy": scipy.__version__, "torch": getattr(torch, "__version__", None),
            "pydata_sparse": getattr(sparse, "__version__", None), "xsparse": xs.__version__,
            "jax": _jax_version(),
            "xsparse_threads": threads,
        },  # fmt: skip
        "copy_bandwidth": bandwidth,
        "rows": rows,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a / b


def analyse(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Table rows: times in ms, ratios, effective bandwidth, target verdicts."""
    copy2 = results["copy_bandwidth"][2]["bytes_per_s"]
    table = []
    for row in results["rows"]:
        t = row["times"]
        ours, scipy_t, torch2 = t.get("xsparse[numpy]"), t.get("scipy"), t.get("torch 2t")
        out: dict[str, Any] = {"case": row["case"], "load": row["other_load"], "attempts": row["attempts"]}
        for peer in PEERS + ["xs.matmul", "dispatch.call"]:
            if t.get(peer) is not None:
                out[peer] = t[peer] * (1e6 if row["op"] == "dispatch" else 1e3)
        out["scipy/ours"] = _ratio(scipy_t, ours)
        out["torch2t/ours"] = _ratio(torch2, ours)
        out["xs[torch]/torch2t"] = _ratio(t.get("xsparse[torch]"), torch2)
        if row["bytes"] and ours:
            out["GB/s"] = row["bytes"] / ours / 1e9
            out["copy share"] = row["bytes"] / ours / copy2
        verdicts = []
        if row["op"] in ("spmv", "spmm"):
            verdicts.append(out["scipy/ours"] is not None and out["scipy/ours"] >= TARGETS["speedup_vs_scipy"])
            if torch2 is not None:
                verdicts.append(out["torch2t/ours"] >= TARGETS["vs_torch_2t"])
            if row["op"] == "spmv" and row["matrix"] == "laplace":
                verdicts.append(out.get("copy share", 0) >= TARGETS["laplace_spmv_copy_share"])
        elif row["op"] == "spgemm":
            verdicts.append(out["scipy/ours"] is not None and out["scipy/ours"] >= TARGETS["spgemm_vs_scipy"])
        elif row["op"] == "dispatch":
            verdicts.append(out["scipy/ours"] is not None and 1 / out["scipy/ours"] <= TARGETS["dispatch_vs_scipy"])
        if out["xs[torch]/torch2t"] is not None:
            verdicts.append(out["xs[torch]/torch2t"] <= TARGETS["torch_backend_vs_torch"])
        out["target"] = "-" if not verdicts else ("met" if all(verdicts) else "MISSED")
        table.append(out)
    return table


def report(results: dict[str, Any], out_dir: Path = RESULTS_DIR) -> list[str]:
    """The printed report; also writes the JSON results and one PNG plot per kernel to ``out_dir``."""
    table = analyse(results)
    m = results["machine"]
    bw = results["copy_bandwidth"]
    lines = [
        f"xsparse {m['xsparse']} sparse linear algebra, {m['cpus']} CPUs, xsparse threads {m['xsparse_threads']}; "
        f"NumPy {m['numpy']}, SciPy {m['scipy']}, torch {m['torch']}, pydata/sparse {m['pydata_sparse']}, JAX {m.get('jax')}"
        + (" (quick sizes)" if results["quick"] else ""),
        "copy bandwidth (numpy.copyto, read + written): "
        + ", ".join(f"{t} thread{'s' if t > 1 else ''} {v['bytes_per_s'] / 1e9:.1f} GB/s (other load {v['other_load'] or 0:.0%})" for t, v in bw.items()),
        "times in ms (dispatch row: microseconds), best of several runs; scipy/ours and torch2t/ours: speedups of "
        "xsparse[numpy]; GB/s: its effective bandwidth (bytes it must move / time); copy share: of the 2-thread "
        "copy bandwidth; xs[torch]/torch2t: xsparse's torch backend against torch.sparse on the same tensors (both 2 threads); "
        "load: share of the CPUs other processes used while the case was timed",
        "",
    ]
    columns = [("case", "case", "")]
    present = [p for p in PEERS + ["xs.matmul", "dispatch.call"] if any(p in r for r in table)]
    columns += [(p, p, ".3g") for p in present]
    columns += [
        ("scipy/ours", "scipy/ours", ".2f"), ("torch2t/ours", "torch2t/ours", ".2f"),
        ("xs[torch]/torch2t", "xs[torch]/torch2t", ".2f"), ("GB/s", "GB/s", ".1f"),
        ("copy share", "copy share", ".0%"), ("load", "load", ".0%"), ("target", "target", ""),
    ]  # fmt: skip
    lines += format_table(table, columns)
    errors = [f"  {r['case']}: {name}: {err}" for r in results["rows"] for name, err in r["errors"].items()]
    if errors:
        lines += ["", "peers that could not run a case:", *errors]
    missed = [r["case"] for r in table if r["target"] == "MISSED"]
    lines += ["", "targets: " + ("all met" if not missed else "MISSED: " + "; ".join(missed))]
    suffix = "_quick" if results["quick"] else ""
    save_json(out_dir / f"linalg{suffix}.json", {**results, "table": table})
    plots = []
    for op in dict.fromkeys(r["op"] for r in results["rows"]):
        rows = [r for r in results["rows"] if r["op"] == op]
        names = [p for p in PEERS + ["xs.matmul", "dispatch.call"] if any(r["times"].get(p) is not None for r in rows)]
        scale = 1e6 if op == "dispatch" else 1e3
        series = {p: [None if r["times"].get(p) is None else r["times"][p] * scale for r in rows] for p in names}
        path = plot_groups(out_dir / f"linalg_{op}{suffix}.png", f"{op}: time per call", [r["case"][len(op) + 1 :] for r in rows], series,
                           "microseconds" if op == "dispatch" else "milliseconds")  # fmt: skip
        if path is not None:
            plots.append(str(path))
    lines.append(f"results: {out_dir / f'linalg{suffix}.json'}" + (f"; plots: {', '.join(plots)}" if plots else " (no plots: matplotlib is not installed)"))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="matrices about ten times smaller")
    parser.add_argument("--only", help="run only the cases whose label contains this text, e.g. 'spmv laplace'")
    args = parser.parse_args(argv)
    print("\n".join(report(run(args.quick, args.only))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
