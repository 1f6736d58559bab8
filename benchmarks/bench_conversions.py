"""Benchmark xsparse's conversions on the NumPy backend against SciPy.

The xsparse side is the public API (``xs.to_sparse_csr`` of an uncoalesced COO array, and of a dense
array): dispatch, checks and the compiled kernels, everything a user's call pays.

Usage::

    python benchmarks/bench_conversions.py [--quick]

Cases (the full sizes; ``--quick`` shrinks them about tenfold):

* ``coo->csr int64`` / ``coo->csr int32``: a 1,000,000 x 1,000,000 COO array with 10,000,000
  entries in random order, about 10 % of them duplicates of others, float64 values, converted to
  canonical CSR (indices sorted within rows, duplicates summed). SciPy's time is that of
  ``coo_array((v, (r, c)), shape).tocsr()``: ``tocsr`` itself sums duplicates and sorts indices
  (the result has ``has_canonical_format``, which is asserted), so nothing more is needed for the
  canonical result; the time of ``tocsr()`` alone on a prebuilt ``coo_array`` is reported too.
* ``dense->csr``: a 5,000 x 5,000 float64 array with half of its entries zero, vs
  ``scipy.sparse.csr_array(dense)``.

Times are the best of a few repeats in this process, ours and SciPy's alternating. Memory is
measured in a fresh subprocess per case and implementation, after its inputs are built: the
peak of NumPy's allocations seen by :mod:`tracemalloc`, and the growth of the process's peak
resident set (VmHWM, reset through ``/proc/self/clear_refs`` once the inputs exist) over its
resident set at that point. Both are compared with the size of the result (the target is at most
1.5 times). Results are checked against SciPy's once per case.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc
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

MEMORY_TARGET = 1.5  # peak extra memory / result size


def _cases(quick: bool) -> list[dict[str, Any]]:
    if quick:
        n, nnz, side = 100_000, 1_000_000, 1_000
    else:
        n, nnz, side = 1_000_000, 10_000_000, 5_000
    return [
        {"name": "coo->csr int64", "kind": "coo", "n": n, "nnz": nnz, "index_dtype": "int64"},
        {"name": "coo->csr int32", "kind": "coo", "n": n, "nnz": nnz, "index_dtype": "int32"},
        {"name": "dense->csr", "kind": "dense", "side": side},
    ]


def _make_inputs(case: dict[str, Any]) -> tuple[Any, ...]:
    rng = np.random.default_rng(0)
    if case["kind"] == "coo":
        n, nnz = case["n"], case["nnz"]
        n_unique = nnz - nnz // 10
        rows = rng.integers(0, n, n_unique)
        cols = rng.integers(0, n, n_unique)
        again = rng.integers(0, n_unique, nnz - n_unique)  # duplicates of existing entries
        order = rng.permutation(nnz)
        rows = np.concatenate([rows, rows[again]])[order].astype(case["index_dtype"])
        cols = np.concatenate([cols, cols[again]])[order].astype(case["index_dtype"])
        values = rng.random(nnz)
        # the xsparse input shares the row and column arrays (rows of one (2, nnz) index array)
        indices = np.stack([rows, cols])
        coo = xs.sparse_coo_array(indices, values, (n, n))
        return indices[0], indices[1], values, (n, n), coo
    side = case["side"]
    dense = rng.random((side, side))
    dense[rng.random((side, side)) < 0.5] = 0.0
    return (dense,)


def _ours(case: dict[str, Any], inputs: tuple[Any, ...]) -> tuple[np.ndarray, ...]:
    """The conversion through xsparse's public API on the NumPy backend (dispatch included)."""
    source = inputs[-1] if case["kind"] == "coo" else inputs[0]
    csr = xs.to_sparse_csr(source)
    return csr.crow_indices(), csr.col_indices(), csr.values()


def _scipy(case: dict[str, Any], inputs: tuple[Any, ...]) -> Any:
    if case["kind"] == "coo":
        rows, cols, values, shape, _ = inputs
        return sp.coo_array((values, (rows, cols)), shape=shape).tocsr()
    (dense,) = inputs
    return sp.csr_array(dense)


def _result_bytes(result: Any) -> int:
    arrays = (result.indptr, result.indices, result.data) if sp.issparse(result) else result
    return sum(a.nbytes for a in arrays)


def _cpu_ticks() -> tuple[int, float, float] | None:
    """Busy ticks of the whole machine, CPU ticks of this process, and the wall clock (Linux)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    own = os.times()
    hz = os.sysconf("SC_CLK_TCK")
    return sum(ticks) - ticks[3] - ticks[4], (own.user + own.system) * hz, time.perf_counter() * hz


def _other_load(before: tuple[int, float, float] | None, after: tuple[int, float, float] | None) -> float | None:
    """Fraction of the machine's CPUs that other processes used between two _cpu_ticks()."""
    if before is None or after is None:
        return None
    busy, own, wall = (a - b for a, b in zip(after, before))
    return max(0.0, (busy - own) / ((os.cpu_count() or 1) * wall))


def _time_once(fn: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    del result  # freed outside the timed region
    return elapsed


# --- memory, in a fresh process -------------------------------------------------------------------


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _measure_memory(case: dict[str, Any], impl: str) -> dict[str, Any]:
    """Peak memory of one conversion above its inputs (run in a fresh process)."""
    fn = _ours if impl == "ours" else _scipy
    inputs = _make_inputs(case)
    gc.collect()
    # Hand the heap's free memory (temporaries of the input generation) back to the OS, so that
    # the conversion cannot reuse already-resident pages and hide its allocations from the RSS.
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    base_rss = _status_kib("VmRSS")
    try:  # resets VmHWM to the current RSS, so that building the inputs does not count
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        hwm_reset = True
    except OSError:  # without it VmHWM would include the input generation: no RSS figure
        hwm_reset = False
    result = fn(case, inputs)
    rss_delta = (_status_kib("VmHWM") - base_rss) * 1024 if hwm_reset else None
    result_bytes = _result_bytes(result)
    del result
    gc.collect()
    tracemalloc.start()
    result = fn(case, inputs)
    traced_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"result_bytes": result_bytes, "tracemalloc_peak": traced_peak, "rss_peak_delta": rss_delta}


def _memory_in_subprocess(case: dict[str, Any], impl: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps({"case": case, "impl": impl})],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the memory measurement of {case['name']} ({impl}) failed:\n{proc.stderr}")
    measured: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return measured


# --- the benchmark --------------------------------------------------------------------------------


def _check_equal(case: dict[str, Any], ours: tuple[np.ndarray, ...], ref: Any) -> None:
    indptr, indices, data = ours
    assert ref.has_canonical_format
    np.testing.assert_array_equal(indptr, ref.indptr)
    np.testing.assert_array_equal(indices, ref.indices)
    if case["kind"] == "coo":  # duplicates may be summed in another order
        np.testing.assert_allclose(data, ref.data, rtol=1e-12, atol=0)
    else:
        np.testing.assert_array_equal(data, ref.data)


def _time_case(case: dict[str, Any], repeats: int) -> dict[str, Any]:
    """Check ours against SciPy once, then time both (and SciPy's tocsr() alone) alternately."""
    inputs = _make_inputs(case)
    ours_result = _ours(case, inputs)
    ref = _scipy(case, inputs)
    _check_equal(case, ours_result, ref)
    nnz_out = int(ours_result[0][-1])
    del ours_result, ref

    timed = {"ours": lambda: _ours(case, inputs), "scipy": lambda: _scipy(case, inputs)}
    if case["kind"] == "coo":
        rows, cols, values, shape, _ = inputs
        timed["scipy_tocsr"] = sp.coo_array((values, (rows, cols)), shape=shape).tocsr
    best = dict.fromkeys(timed, float("inf"))
    before = _cpu_ticks()
    for _ in range(repeats):  # alternate, so that all see the same machine load
        for name, fn in timed.items():
            best[name] = min(best[name], _time_once(fn))
    row: dict[str, Any] = {
        "case": case["name"],
        "nnz_out": nnz_out,
        "ours_s": best["ours"],
        "scipy_s": best["scipy"],
        "speedup": best["scipy"] / best["ours"],
        # Other processes slow the two-thread kernels much more than single-threaded SciPy.
        "other_load": _other_load(before, _cpu_ticks()),
    }
    if "scipy_tocsr" in best:
        row["scipy_tocsr_s"] = best["scipy_tocsr"]
        row["speedup_vs_tocsr_only"] = best["scipy_tocsr"] / best["ours"]
    row["meets_speed_target"] = row["speedup"] >= 1.0
    return row


def run(quick: bool) -> list[dict[str, Any]]:
    """Time and measure every case.

    Parameters
    ----------
    quick : bool
        Use inputs about ten times smaller and fewer repeats.

    Returns
    -------
    list of dict
        One row per case: times in seconds (``ours_s``, ``scipy_s``, and ``scipy_tocsr_s`` for the
        COO cases), ``speedup`` (SciPy's time over ours), the result's size and the peak memory
        above the inputs in bytes for both implementations, their ratios to the result's size,
        whether the targets (at least as fast as SciPy, peak at most 1.5 x the result) hold, and
        ``other_load``, the share of the CPUs that other processes used during the timings.
    """
    from xsparse.backends import _cpu

    unavailable = _cpu.unavailable_reason()
    if unavailable is not None:
        raise RuntimeError(f"the compiled kernels are not built: {unavailable}")
    repeats = 3 if quick else 7
    cases = _cases(quick)
    # All timings first, then the memory measurements: the timings then need the machine to be
    # quiet for a shorter while.
    rows = [_time_case(case, repeats) for case in cases]
    for case, row in zip(cases, rows):
        for impl in ("ours", "scipy"):
            mem = _memory_in_subprocess(case, impl)
            row[f"{impl}_result_bytes"] = mem["result_bytes"]
            row[f"{impl}_tracemalloc_peak"] = mem["tracemalloc_peak"]
            row[f"{impl}_rss_peak_delta"] = mem["rss_peak_delta"]
            row[f"{impl}_tracemalloc_ratio"] = mem["tracemalloc_peak"] / mem["result_bytes"]
            rss = mem["rss_peak_delta"]
            row[f"{impl}_rss_ratio"] = None if rss is None else rss / mem["result_bytes"]
        row["meets_memory_target"] = row["ours_tracemalloc_ratio"] <= MEMORY_TARGET and (
            row["ours_rss_ratio"] is None or row["ours_rss_ratio"] <= MEMORY_TARGET
        )
    return rows


def _print_table(rows: list[dict[str, Any]], quick: bool) -> None:
    mb = 1 / 2**20
    print(
        f"xsparse compiled conversions vs SciPy {scipy.__version__} (NumPy {np.__version__}), "
        f"{os.cpu_count()} CPUs{', quick sizes' if quick else ''}"
    )
    print(
        "times: best of several runs; memory: peak above the inputs, in a fresh process (tm: tracemalloc, "
        "RSS: peak resident set growth), (x) = times the result's size; other load: share of the CPUs that "
        "other processes used during the timings\n"
    )
    header = (
        f"{'case':<16} {'nnz out':>10} {'ours ms':>8} {'scipy ms':>9} {'speedup':>8} "
        f"{'result MB':>9} {'ours tm MB (x)':>15} {'ours RSS MB (x)':>16} "
        f"{'scipy tm MB (x)':>16} {'scipy RSS MB (x)':>17} {'other load':>10}"
    )
    print(header)
    print("-" * len(header))

    def mem(row: dict[str, Any], impl: str, what: str) -> str:
        value, ratio = row[f"{impl}_{what}"], row[f"{impl}_{what.split('_')[0]}_ratio"]
        return "n/a" if value is None else f"{value * mb:.0f} ({ratio:.2f})"

    for row in rows:
        print(
            f"{row['case']:<16} {row['nnz_out']:>10} {row['ours_s'] * 1e3:>8.1f} {row['scipy_s'] * 1e3:>9.1f} "
            f"{row['speedup']:>7.2f}x {row['ours_result_bytes'] * mb:>9.0f} "
            f"{mem(row, 'ours', 'tracemalloc_peak'):>15} {mem(row, 'ours', 'rss_peak_delta'):>16} "
            f"{mem(row, 'scipy', 'tracemalloc_peak'):>16} {mem(row, 'scipy', 'rss_peak_delta'):>17} "
            f"{'n/a' if row['other_load'] is None else format(row['other_load'], '.0%'):>10}"
        )
    print()
    for row in rows:
        if "scipy_tocsr_s" in row:
            print(
                f"{row['case']}: SciPy tocsr() alone on a prebuilt coo_array {row['scipy_tocsr_s'] * 1e3:.1f} ms "
                f"(speedup {row['speedup_vs_tocsr_only']:.2f}x)"
            )
    missed = [
        f"{row['case']} ({'speed' if not row['meets_speed_target'] else 'memory'})"
        for row in rows
        if not (row["meets_speed_target"] and row["meets_memory_target"])
    ]
    print(f"targets (>= SciPy's speed, peak <= {MEMORY_TARGET}x result): " + ("all met" if not missed else "MISSED: " + ", ".join(missed)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer repeats")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a memory measurement in a fresh process
    args = parser.parse_args()
    if args.child:
        spec = json.loads(args.child)
        print(json.dumps(_measure_memory(spec["case"], spec["impl"])))
        return
    _print_table(run(args.quick), args.quick)


if __name__ == "__main__":
    main()
