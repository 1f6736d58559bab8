"""Shared machinery of the benchmark suite: timing, machine load, memory bandwidth, progress, tables, plots.

Timing follows ``bench_conversions.py``: every implementation of a case is timed in this process, the
implementations alternating so that all see the same machine, and the best of the repeats is kept.
Functions that take microseconds are timed in loops long enough for the clock. The share of the CPUs
that *other* processes used while a case was timed is recorded with it ("other load"); when it is
above a threshold the case is timed again (after a pause), up to a few times, and the quietest attempt
is kept.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Impl",
    "Timing",
    "RESULTS_DIR",
    "copy_bandwidth",
    "cpu_ticks",
    "other_load",
    "progress",
    "time_case",
    "format_table",
    "plot_groups",
    "save_json",
]

RESULTS_DIR = Path(__file__).resolve().parent / "results"

# A case whose timing window saw other processes use more than this share of the CPUs is timed again.
LOAD_THRESHOLD = 0.25
ATTEMPTS = 3
# Functions faster than this are called in a loop that lasts at least this long per measurement.
MIN_MEASUREMENT_S = 0.05
# An implementation whose warm-up call took longer than this (a peer far slower than the others) is
# measured once per attempt.
SLOW_CALL_S = 2.0


# --- machine load ---------------------------------------------------------------------------------


def cpu_ticks() -> tuple[int, float, float] | None:
    """Busy ticks of the whole machine, CPU ticks of this process, and the wall clock (Linux)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
    except OSError:
        return None
    own = os.times()
    hz = os.sysconf("SC_CLK_TCK")
    return sum(ticks) - ticks[3] - ticks[4], (own.user + own.system) * hz, time.perf_counter() * hz


def other_load(before: tuple[int, float, float] | None, after: tuple[int, float, float] | None) -> float | None:
    """Share of the machine's CPUs that other processes used between two :func:`cpu_ticks`."""
    if before is None or after is None:
        return None
    busy, own, wall = (a - b for a, b in zip(after, before))
    if wall <= 0:
        return None
    return max(0.0, (busy - own) / ((os.cpu_count() or 1) * wall))


# --- timing ---------------------------------------------------------------------------------------


@dataclass
class Impl:
    """One implementation of a case: ``fn`` is timed; ``setup`` (untimed) runs before each measurement
    (e.g. ``torch.set_num_threads``)."""

    name: str
    fn: Callable[[], Any]
    setup: Callable[[], Any] | None = None


@dataclass
class Timing:
    """The best time of each implementation (seconds; None when it failed), the other load, attempts."""

    best: dict[str, float | None]
    other_load: float | None
    attempts: int
    errors: dict[str, str] = field(default_factory=dict)


def _calls_per_measurement(fn: Callable[[], Any]) -> int:
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    if once >= MIN_MEASUREMENT_S:
        return 1
    return max(1, int(MIN_MEASUREMENT_S / max(once, 1e-7)))


def _measure(fn: Callable[[], Any], number: int) -> float:
    if number == 1:
        gc.collect()
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        del result  # freed outside the timed region
        return elapsed
    gc_was = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number
    finally:
        if gc_was:
            gc.enable()


def _attempt(impls: Sequence[Impl], repeats: int) -> Timing:
    best: dict[str, float | None] = {}
    numbers: dict[str, int] = {}
    slow: set[str] = set()
    errors: dict[str, str] = {}
    for impl in impls:  # warm up (first-call costs: imports, JIT compilation, thread start-up)
        try:
            if impl.setup:
                impl.setup()
            start = time.perf_counter()
            numbers[impl.name] = _calls_per_measurement(impl.fn)
            if time.perf_counter() - start > SLOW_CALL_S:
                slow.add(impl.name)
            best[impl.name] = float("inf")
        except Exception as exc:  # a peer that cannot run this case is reported, not fatal
            best[impl.name] = None
            errors[impl.name] = f"{type(exc).__name__}: {exc}"[:200]
    before = cpu_ticks()
    for repeat in range(repeats):
        for impl in impls:
            if best[impl.name] is None or (repeat and impl.name in slow):
                continue
            if impl.setup:
                impl.setup()
            best[impl.name] = min(best[impl.name], _measure(impl.fn, numbers[impl.name]))  # type: ignore[type-var]
    return Timing(best, other_load(before, cpu_ticks()), 1, errors)


def time_case(impls: Sequence[Impl], repeats: int, *, threshold: float = LOAD_THRESHOLD, attempts: int = ATTEMPTS) -> Timing:
    """Time the implementations of one case, again while other processes load the machine.

    Parameters
    ----------
    impls
        The implementations; each is warmed up once, then timed ``repeats`` times, alternating.
    repeats
        Measurements per implementation and attempt; the best is kept.
    threshold, attempts
        While the other load of an attempt exceeds ``threshold``, wait a moment and try again, up to
        ``attempts`` attempts in all; the attempt with the lowest other load is returned.
    """
    kept: Timing | None = None
    for attempt in range(1, attempts + 1):
        timing = _attempt(impls, repeats)
        timing.attempts = attempt
        if kept is None or (timing.other_load or 0.0) < (kept.other_load or 0.0):
            kept = timing
        kept.attempts = attempt
        if timing.other_load is None or timing.other_load <= threshold:
            break
        time.sleep(1.0)
    assert kept is not None
    return kept


# --- memory bandwidth -----------------------------------------------------------------------------


def copy_bandwidth(nbytes: int, threads: int, repeats: int = 7) -> tuple[float, float | None]:
    """STREAM-style copy bandwidth with NumPy, ``(bytes read + written) / time`` in bytes per second.

    ``threads`` Python threads each copy a contiguous share with ``numpy.copyto``, which releases the
    GIL, so that they run in parallel. Returns the best bandwidth and the other load while measuring.
    """
    n = nbytes // 8
    src = np.ones(n)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # touch the pages
    bounds = [n * t // threads for t in range(threads + 1)]
    parts = [(dst[a:b], src[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]

    def copy() -> None:
        if threads == 1:
            np.copyto(dst, src)
            return
        workers = [threading.Thread(target=np.copyto, args=p) for p in parts[1:]]
        for w in workers:
            w.start()
        np.copyto(*parts[0])
        for w in workers:
            w.join()

    timing = time_case([Impl("copy", copy)], repeats)
    seconds = timing.best["copy"]
    assert seconds is not None
    return 2 * src.nbytes / seconds, timing.other_load


# --- progress, tables, plots, files ---------------------------------------------------------------


def progress(items: Iterable[Any], total: int, desc: str) -> Iterable[Any]:
    """``tqdm`` when it is installed, else a plain counter on stderr."""
    try:
        from tqdm import tqdm

        yield from tqdm(items, total=total, desc=desc, file=sys.stderr, dynamic_ncols=True)
        return
    except ImportError:
        pass
    for i, item in enumerate(items, 1):
        print(f"\r{desc}: {i}/{total}", end="", file=sys.stderr, flush=True)
        yield item
    print(file=sys.stderr)


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, str]]) -> list[str]:
    """Rows as text: ``columns`` are (key, header, format spec); missing values print as ``-``."""
    cells = [[h for _, h, _ in columns]]
    for row in rows:
        line = []
        for key, _, spec in columns:
            value = row.get(key)
            line.append("-" if value is None else format(value, spec))
        cells.append(line)
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    out = []
    for j, r in enumerate(cells):
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if j == 0:
            out.append("-" * len(out[0]))
    return out


def plot_groups(path: Path, title: str, groups: Sequence[str], series: dict[str, Sequence[float | None]], ylabel: str) -> Path | None:
    """A grouped bar chart (log scale) of ``series`` (name -> one value per group); None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(groups) * max(1, len(series)) / 3), 4.5))
    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    for i, (name, values) in enumerate(series.items()):
        heights = [np.nan if v is None else v for v in values]
        ax.bar(x + (i - (len(series) - 1) / 2) * width, heights, width, label=name)
    ax.set_xticks(x, groups, rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def save_json(path: Path, payload: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, default=str))
    return path
