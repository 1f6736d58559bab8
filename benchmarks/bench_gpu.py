"""Benchmark xsparse's sparse products and 2:4 matmul on a CUDA GPU against cupyx.scipy.sparse and torch.

The xsparse side is the public API (``A @ x``, ``A @ A``, ``xs.linear``): argument checks, dispatch and
whichever kernel dispatch picks on the backend of the arrays (``python -m xsparse`` and the
``kernels`` entry of the JSON name them: on CuPy the generic Array API kernels unless a CuPy backend
registers its own). The peers are called directly on components shared with the xsparse arrays.

Usage::

    python benchmarks/bench_gpu.py [--quick] [--only TEXT] [--out DIR] [--repeats N] [--budget-s S] [--torch-device cpu]

``--torch-device cpu`` runs the torch implementations on the CPU (CuPy's need a GPU), which checks the
harness on a machine without one; its times mean nothing.

Cases (full sizes; ``--quick`` shrinks them):

* SpMV (``A @ x``) and SpMM (``A @ X``, X with 64 columns) with the matrices of ``bench_linalg.py``: a
  1,000,000 x 1,000,000 matrix with 10 entries per row at uniformly random columns (``uniform``), and
  the 5-point Laplacian of a 1000 x 1000 grid (``laplace``); float32 and float64 values; int32 indices
  (all four implementations) and int64 indices (torch only: xsparse's CuPy kernels hand cuSPARSE int32
  indices, narrowed once per array, and cupyx's ``csr_matrix`` narrows those that fit when it is built,
  so both would time int32 products).
  ``--quick``: 100,000 rows and a 300 x 300 grid.
* SpGEMM ``A @ A`` of the Laplacian, same dtypes and indices.
* 2:4 matmul: ``X @ W.T`` (``torch.nn.functional.linear(X, W)``) for square weights W of 4096, 8192 and
  16384 (``--quick``: 1024 and 4096) in float16 and bfloat16, pruned to 2:4 (the 2 largest magnitudes of
  every group of 4 along a row kept), and activations X of 16, 64, 256, 1024, 4096 and 8192 rows
  (``--quick``: 16, 256, 4096). The dense cuBLAS product of the pruned W against torch's
  ``to_sparse_semi_structured`` weight (cuSPARSELt, torch's default) and
  ``SparseSemiStructuredTensorCUTLASS``, and xsparse's ``to_sparse_semi_structured`` weight on torch
  CUDA tensors and on CuPy arrays (bfloat16 reaches CuPy through DLPack only where CuPy has it: CuPy 14
  with ``ml_dtypes`` installed; otherwise that implementation reports the error). An xsparse
  implementation that takes longer than half a second per call is not run at the larger activations of
  that weight.

Implementations of the sparse cases: ``xsparse[cupy]`` (``xs.sparse_csr_array`` over CuPy arrays),
``cupyx`` (``cupyx.scipy.sparse.csr_matrix``), ``xsparse[torch]`` (over CUDA tensors) and ``torch``
(``torch.sparse_csr_tensor`` on CUDA). Every result is checked once against SciPy's on the CPU (the 2:4
products against the dense product of the pruned weight); an implementation that raises or computes a
wrong result is reported with its error, and the others go on.

Timing: each measurement is a loop of calls lasting at least 20 ms between two device
synchronisations (``torch.cuda.synchronize`` and ``cupy.cuda.Device().synchronize``, both
device-wide); each implementation is first called once untimed (first-call costs, the result checked),
then timed once and in one loop to size its loops; the loops run ``--repeats`` times, the
implementations alternating, and the best is kept (an implementation whose single call takes more
than a second is measured by that call alone).
The times are what a caller waits for in a loop of calls: the host's launch overhead where it exceeds
the GPU's work, the GPU's work otherwise.

Targets (the table's ``target`` column): on the int32 sparse cases, xsparse[cupy] within 10 % of
cupyx.scipy.sparse and of torch CUDA (time ratio at most 1.10); 2:4 float16 with an 8192 x 8192 weight
at least 1.3 x faster than the dense matmul for 4096 or more activation rows (the faster of the
xsparse implementations). The table also shows torch's own 2:4 speedups.

Results: the tables on stdout, progress on stderr, JSON in ``benchmarks/results/gpu.json``
(``gpu_quick.json`` with ``--quick``; ``--out`` for another directory), rewritten after every case so
that a run cut short keeps what it measured. Cases that would start after ``--budget-s`` seconds
(default 500) are skipped and listed.

Exit status: 0 when the benchmarks ran, whatever the targets, and also when neither CuPy nor torch can
use a CUDA device (nothing to run: a message on stderr names what is missing); 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import math
import platform
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import xsparse as xs
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import xsparse as xs

from _harness import RESULTS_DIR, cpu_ticks, format_table, other_load, save_json

# the matrices of bench_linalg.py; imported by name so that mypy checks this file alone
_linalg: Any = importlib.import_module("bench_linalg")
as_types, laplace_matrix, uniform_matrix = _linalg.as_types, _linalg.laplace_matrix, _linalg.uniform_matrix

K_COLUMNS = 64
PER_ROW = 10
# a measurement is a loop of calls lasting at least this long (between two synchronisations)
MIN_MEASUREMENT_S = 0.02
MAX_CALLS = 5000
# an implementation whose timed warm-up call took longer than this is measured by that call alone
SLOW_CALL_S = 1.0
# 2:4: an xsparse implementation slower than this per call is not run at larger activations
GIVE_UP_S = 0.5
DEFAULT_BUDGET_S = 500.0

# sizes, full and --quick: sparse (rows of the uniform matrix, side of the Laplacian's grid); 2:4 (weight
# sides, activation rows)
SPARSE_SIZES = {False: (1_000_000, 1000), True: (100_000, 300)}
SEMI_SIZES = {False: ((4096, 8192, 16384), (16, 64, 256, 1024, 4096, 8192)), True: ((1024, 4096), (16, 256, 4096))}

TARGET_VS_PEERS = 1.10  # xsparse[cupy] time / peer time, sparse int32 cases
TARGET_24_SPEEDUP = 1.3  # dense time / xsparse 2:4 time, float16, n = 8192, rows >= 4096
TARGET_24_N = 8192
TARGET_24_ROWS = 4096

SPARSE_IMPLS = ["xsparse[cupy]", "cupyx", "xsparse[torch]", "torch"]
SEMI_IMPLS = ["dense", "torch 2:4", "torch 2:4 cutlass", "xsparse[torch]", "xsparse[cupy]"]
XSPARSE_SEMI = ("xsparse[torch]", "xsparse[cupy]")


# --- the device -----------------------------------------------------------------------------------


@dataclass
class Gpu:
    """The libraries that can use a CUDA device (None where not), and why the others cannot."""

    cupy: Any
    cupyx_sparse: Any
    torch: Any
    cupy_reason: str | None
    torch_reason: str | None
    torch_device: str = "cuda"

    def sync(self) -> None:
        if self.torch is not None and self.torch_device != "cpu":
            self.torch.cuda.synchronize()
        if self.cupy is not None:
            self.cupy.cuda.Device().synchronize()

    def free(self) -> None:
        """Return the cached blocks of both allocators to the device (they share its memory)."""
        gc.collect()
        if self.cupy is not None:
            self.cupy.get_default_memory_pool().free_all_blocks()
            self.cupy.get_default_pinned_memory_pool().free_all_blocks()
        if self.torch is not None and self.torch_device != "cpu":
            self.torch.cuda.empty_cache()


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= 300 else text[:297] + "..."


def probe(torch_device: str = "cuda") -> Gpu:
    """The usable libraries; ``torch_device="cpu"`` checks the harness itself on a machine without a GPU."""
    cupy = cupyx_sparse = torch = None
    cupy_reason = torch_reason = None
    try:
        cupy = importlib.import_module("cupy")
        cupyx_sparse = importlib.import_module("cupyx.scipy.sparse")
        if cupy.cuda.runtime.getDeviceCount() < 1:
            cupy_reason = "CuPy sees no CUDA device"
    except Exception as exc:  # not installed, or installed without a usable driver or CUDA libraries
        cupy_reason = f"CuPy is not usable ({_describe(exc)})"
    if cupy_reason is not None:
        cupy = cupyx_sparse = None
    try:
        torch = importlib.import_module("torch")
        if torch_device != "cpu" and not torch.cuda.is_available():
            torch_reason = f"torch {torch.__version__} has no CUDA device (torch.cuda.is_available() is False)"
    except Exception as exc:
        torch_reason = f"torch is not usable ({_describe(exc)})"
    if torch_reason is not None:
        torch = None
    else:
        # torch warns once that its compressed layouts are in beta and that invariant checks are off
        warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")
        warnings.filterwarnings("ignore", message=".*Sparse invariant checks are implicitly disabled.*")
    return Gpu(cupy, cupyx_sparse, torch, cupy_reason, torch_reason, torch_device)


# --- timing ---------------------------------------------------------------------------------------


@dataclass
class Timing:
    """Best seconds per call (None: failed or skipped), calls per measurement, errors, warnings."""

    best: dict[str, float | None]
    calls: dict[str, int]
    errors: dict[str, str]
    warnings: dict[str, list[str]] = field(default_factory=dict)
    other_load: float | None = None


@contextmanager
def _no_gc() -> Iterator[None]:
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _timed(fn: Callable[[], Any], number: int, sync: Callable[[], None]) -> float:
    with _no_gc(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sync()
        start = time.perf_counter()
        for _ in range(number):
            fn()
        sync()
        return (time.perf_counter() - start) / number


def _calls_for(seconds_per_call: float) -> int:
    return max(1, min(MAX_CALLS, math.ceil(MIN_MEASUREMENT_S / max(seconds_per_call, 1e-7))))


def time_gpu(impls: dict[str, Callable[[], Any]], check: Callable[[Any], None], gpu: Gpu, repeats: int, errors: dict[str, str]) -> Timing:
    """Time the implementations of one case on the device (see the module docstring).

    Each is called once (its result checked with ``check``; the warnings it emits are kept), then once
    more and in one loop, timed, to size its measurement loop; then the loops run ``repeats`` times,
    alternating. One whose single call takes more than ``SLOW_CALL_S`` is measured by that call alone.
    """
    timing = Timing({name: None for name in impls}, {}, errors)
    for name, fn in impls.items():
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = fn()
                gpu.sync()
            if caught:
                timing.warnings[name] = sorted({f"{w.category.__name__}: {w.message}"[:300] for w in caught})
            check(result)
            del result
            once = _timed(fn, 1, gpu.sync)
            if once > SLOW_CALL_S:
                timing.best[name], timing.calls[name] = once, 1
                continue
            number = _calls_for(once)
            if number > 1:  # a single call's time includes a synchronisation: size the loop on a loop
                number = _calls_for(_timed(fn, number, gpu.sync))
            timing.calls[name] = number
        except Exception as exc:  # an implementation that cannot run this case is reported, not fatal
            errors[name] = _describe(exc)
            gpu.free()
    looped = {name: n for name, n in timing.calls.items() if timing.best[name] is None}
    before = cpu_ticks()
    for _ in range(repeats):
        for name, number in list(looped.items()):
            try:
                seconds = _timed(impls[name], number, gpu.sync)
            except Exception as exc:
                errors[name] = _describe(exc)
                timing.best[name] = None
                del looped[name]
                gpu.free()
                continue
            previous = timing.best[name]
            timing.best[name] = seconds if previous is None else min(previous, seconds)
    timing.other_load = other_load(before, cpu_ticks())
    return timing


# --- results on the host ---------------------------------------------------------------------------


def _host(x: Any) -> np.ndarray:
    """A CuPy array or torch tensor (or anything NumPy takes) as a NumPy array."""
    module = type(x).__module__
    if module.startswith("torch"):
        t = x.detach()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        return np.asarray(t.cpu().numpy())
    if module.startswith("cupy"):
        return np.asarray(x.get())
    return np.asarray(x)


def _host_csr(r: Any) -> sp.csr_array:
    """A sparse result (xsparse array, torch sparse tensor, cupyx matrix) as a SciPy CSR array."""
    c: Any
    if isinstance(r, xs.SparseArray) or type(r).__module__.startswith("torch"):
        c = r.to_sparse_csr()  # an xsparse array or torch tensor in CSR already is returned as is
        parts = (c.values(), c.col_indices(), c.crow_indices())
    else:  # cupyx.scipy.sparse
        c = r.tocsr()
        parts = (c.data, c.indices, c.indptr)
    data, indices, indptr = (_host(p) for p in parts)
    return sp.csr_array((data, indices, indptr), shape=tuple(int(s) for s in r.shape))


def _tolerance(dtype: Any) -> float:
    return 1e-4 if np.dtype(dtype) == np.float32 else 1e-10


def _check_dense(actual: Any, expected: np.ndarray) -> None:
    got = _host(actual)
    if got.shape != expected.shape:
        raise AssertionError(f"wrong result: shape {got.shape}, expected {expected.shape}")
    scale = max(1.0, float(np.abs(expected).max(initial=0)))
    err = float(np.abs(got.astype(np.float64) - expected).max(initial=0))
    if not err <= _tolerance(expected.dtype) * scale:
        raise AssertionError(f"wrong result: largest deviation {err:.3g} from SciPy's (allowed {_tolerance(expected.dtype) * scale:.3g})")


def _check_sparse(actual: Any, expected: sp.csr_array) -> None:
    got = _host_csr(actual)
    if got.shape != expected.shape:
        raise AssertionError(f"wrong result: shape {got.shape}, expected {expected.shape}")
    scale = max(1.0, float(abs(expected).max()))
    err = float(abs(got.astype(np.float64) - expected).max())
    if not err <= _tolerance(expected.dtype) * scale:
        raise AssertionError(f"wrong result: largest deviation {err:.3g} from SciPy's (allowed {_tolerance(expected.dtype) * scale:.3g})")


# --- the sparse cases -----------------------------------------------------------------------------


def sparse_specs(only: str | None) -> list[tuple[str, str, Any, Any]]:
    """(op, matrix, value dtype, index dtype) of every sparse case whose label contains ``only``."""
    specs = []
    for op in ("spmv", "spmm"):
        for matrix in ("uniform", "laplace"):
            for dtype in (np.float32, np.float64):
                for idx in (np.int32, np.int64):
                    specs.append((op, matrix, dtype, idx))
    for dtype in (np.float32, np.float64):
        for idx in (np.int32, np.int64):
            specs.append(("spgemm", "laplace", dtype, idx))
    return [s for s in specs if only is None or only in sparse_label(*s)]


def sparse_label(op: str, matrix: str, dtype: Any, idx: Any) -> str:
    return f"{op} {matrix} {np.dtype(dtype).name} {np.dtype(idx).name}"


def sparse_impls(gpu: Gpu, a: sp.csr_array, x: np.ndarray | None) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """The implementations of ``a @ x`` (``a @ a`` when ``x`` is None), each built under a guard."""
    impls: dict[str, Callable[[], Any]] = {}
    errors: dict[str, str] = {}

    def add(name: str, make: Callable[[], Callable[[], Any]]) -> None:
        try:
            impls[name] = make()
        except Exception as exc:
            errors[name] = _describe(exc)

    shape = (int(a.shape[0]), int(a.shape[1]))
    if gpu.cupy is not None and a.indptr.dtype == np.int32:
        cp, cpx = gpu.cupy, gpu.cupyx_sparse
        try:
            c_ptr, c_idx, c_val = cp.asarray(a.indptr), cp.asarray(a.indices), cp.asarray(a.data)
            c_x = None if x is None else cp.asarray(x)
        except Exception as exc:
            errors["xsparse[cupy]"] = errors["cupyx"] = _describe(exc)
        else:

            def make_xs_cupy() -> Callable[[], Any]:
                m = xs.sparse_csr_array(c_ptr, c_idx, c_val, shape=shape)
                return (lambda: m @ m) if c_x is None else (lambda: m @ c_x)

            def make_cupyx() -> Callable[[], Any]:
                m = cpx.csr_matrix((c_val, c_idx, c_ptr), shape=shape)
                return (lambda: m @ m) if c_x is None else (lambda: m @ c_x)

            add("xsparse[cupy]", make_xs_cupy)
            add("cupyx", make_cupyx)
    if gpu.torch is not None:
        torch = gpu.torch
        try:
            device = torch.device(gpu.torch_device)
            t_ptr, t_idx, t_val = (torch.from_numpy(v).to(device) for v in (a.indptr, a.indices, a.data))
            t_x = None if x is None else torch.from_numpy(x).to(device)
        except Exception as exc:
            errors["xsparse[torch]"] = errors["torch"] = _describe(exc)
        else:

            def make_xs_torch() -> Callable[[], Any]:
                m = xs.sparse_csr_array(t_ptr, t_idx, t_val, shape=shape)
                return (lambda: m @ m) if t_x is None else (lambda: m @ t_x)

            def make_torch() -> Callable[[], Any]:
                m = torch.sparse_csr_tensor(t_ptr, t_idx, t_val, size=shape)
                return (lambda: m @ m) if t_x is None else (lambda: m @ t_x)

            add("xsparse[torch]", make_xs_torch)
            add("torch", make_torch)
    order = {name: i for i, name in enumerate(SPARSE_IMPLS)}
    return dict(sorted(impls.items(), key=lambda kv: order[kv[0]])), errors


def run_sparse(gpu: Gpu, quick: bool, only: str | None, repeats: int, deadline: float, emit: Callable[[dict[str, Any]], None]) -> None:
    specs = sparse_specs(only)
    n, side = SPARSE_SIZES[quick]
    rng = np.random.default_rng(0)
    base: dict[str, sp.csr_array] = {}
    inputs: dict[tuple[str, str, str], tuple[np.ndarray | None, Any]] = {}
    for op, matrix, dtype, idx in specs:
        label = sparse_label(op, matrix, dtype, idx)
        row: dict[str, Any] = {"case": label, "group": "sparse", "op": op, "matrix": matrix, "dtype": np.dtype(dtype).name, "index": np.dtype(idx).name}
        if time.perf_counter() > deadline:
            emit({**row, "skipped": "time budget spent", "times": {}, "errors": {}})
            continue
        if matrix not in base:
            base[matrix] = uniform_matrix(n, PER_ROW) if matrix == "uniform" else laplace_matrix(side)
        a = as_types(base[matrix], dtype, idx)
        key = (op, matrix, np.dtype(dtype).name)
        if key not in inputs:
            inputs.clear()  # the cases of one (op, matrix, dtype) follow one another
            x = None if op == "spgemm" else rng.standard_normal(a.shape[1] if op == "spmv" else (a.shape[1], K_COLUMNS)).astype(dtype)
            inputs[key] = (x, (a @ a).tocsr() if x is None else a @ x)
        x, expected = inputs[key]

        def check(result: Any, expected: Any = expected) -> None:
            if isinstance(expected, np.ndarray):
                _check_dense(result, expected)
            else:
                _check_sparse(result, expected)

        impls, errors = sparse_impls(gpu, a, x)
        timing = time_gpu(impls, check, gpu, repeats, errors)
        del impls
        gpu.free()
        emit({
            **row, "shape": list(a.shape), "nnz": int(a.nnz), "times": timing.best, "calls": timing.calls,
            "errors": timing.errors, "warnings": timing.warnings, "other_load": timing.other_load,
        })  # fmt: skip


# --- the 2:4 cases --------------------------------------------------------------------------------


def semi_label(n: int, dtype: str, rows: int) -> str:
    return f"2:4 n={n} {dtype} r={rows}"


def prune_2_4(torch: Any, w: Any) -> Any:
    """Keep the 2 largest magnitudes of every group of 4 consecutive elements of a row, zero the others."""
    rows, cols = w.shape
    groups = w.reshape(rows, cols // 4, 4)
    keep = groups.abs().topk(2, dim=-1).indices
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(-1, keep, True)
    return (groups * mask).reshape(rows, cols)


def semi_weights(gpu: Gpu, n: int, dtype: str) -> tuple[Any, dict[str, Any], dict[str, str]]:
    """The pruned dense weight and its sparse forms per implementation (built under guards)."""
    torch = gpu.torch
    gen = torch.Generator(device=gpu.torch_device).manual_seed(n)
    dense = prune_2_4(torch, torch.randn(n, n, generator=gen, device=gpu.torch_device)).to(getattr(torch, dtype)).contiguous()
    weights: dict[str, Any] = {"dense": dense}
    errors: dict[str, str] = {}
    makers: dict[str, Callable[[], Any]] = {
        "torch 2:4": lambda: torch.sparse.to_sparse_semi_structured(dense),
        "torch 2:4 cutlass": lambda: torch.sparse.SparseSemiStructuredTensorCUTLASS.from_dense(dense),
        "xsparse[torch]": lambda: xs.to_sparse_semi_structured(dense),
    }
    if gpu.cupy is None:
        errors["xsparse[cupy]"] = f"not run: {gpu.cupy_reason}"
    else:
        # CuPy 14 imports bfloat16 tensors through DLPack when ml_dtypes is installed, and raises a
        # NotImplementedError naming ml_dtypes otherwise, which is reported as this implementation's error
        cupy = gpu.cupy
        makers["xsparse[cupy]"] = lambda: xs.to_sparse_semi_structured(cupy.from_dlpack(dense))
    for name, make in makers.items():
        try:
            weights[name] = make()
            gpu.sync()
        except Exception as exc:
            errors[name] = _describe(exc)
            gpu.free()
    return dense, weights, errors


def semi_impls(gpu: Gpu, x: Any, weights: dict[str, Any], gave_up: dict[str, str]) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    linear = gpu.torch.nn.functional.linear
    impls: dict[str, Callable[[], Any]] = {}
    errors = dict(gave_up)

    def product(w: Any) -> Callable[[], Any]:
        return lambda: linear(x, w)

    for name in ("dense", "torch 2:4", "torch 2:4 cutlass"):
        if name in weights:
            impls[name] = product(weights[name])
    if "xsparse[torch]" in weights and "xsparse[torch]" not in gave_up:
        w_t = weights["xsparse[torch]"]
        impls["xsparse[torch]"] = lambda: xs.linear(x, w_t)
    if "xsparse[cupy]" in weights and "xsparse[cupy]" not in gave_up:
        try:
            w_c, x_c = weights["xsparse[cupy]"], gpu.cupy.from_dlpack(x)
        except Exception as exc:
            errors["xsparse[cupy]"] = _describe(exc)
        else:
            impls["xsparse[cupy]"] = lambda: xs.linear(x_c, w_c)
    return impls, errors


def run_semi(gpu: Gpu, quick: bool, only: str | None, repeats: int, deadline: float, emit: Callable[[dict[str, Any]], None]) -> None:
    sizes, activations = SEMI_SIZES[quick]
    for n in sizes:
        for dtype in ("float16", "bfloat16"):
            wanted = [r for r in activations if only is None or only in semi_label(n, dtype, r)]
            if not wanted:
                continue
            rows = {r: {"case": semi_label(n, dtype, r), "group": "2:4", "n": n, "dtype": dtype, "rows": r, "flops": 2 * r * n * n} for r in wanted}
            if gpu.torch is None:
                for r in wanted:
                    emit({**rows[r], "skipped": f"the 2:4 cases need torch CUDA: {gpu.torch_reason}", "times": {}, "errors": {}})
                continue
            if time.perf_counter() > deadline:
                for r in wanted:
                    emit({**rows[r], "skipped": "time budget spent", "times": {}, "errors": {}})
                continue
            torch = gpu.torch
            try:
                dense, weights, weight_errors = semi_weights(gpu, n, dtype)
            except Exception as exc:  # e.g. out of memory while making the weight
                gpu.free()
                for r in wanted:
                    emit({**rows[r], "skipped": f"no weight: {_describe(exc)}", "times": {}, "errors": {}})
                continue
            gave_up: dict[str, str] = {}
            for r in wanted:
                if time.perf_counter() > deadline:
                    emit({**rows[r], "skipped": "time budget spent", "times": {}, "errors": {}})
                    continue
                try:
                    gen = torch.Generator(device=gpu.torch_device).manual_seed(r)
                    x = torch.randn(r, n, generator=gen, device=gpu.torch_device).to(dense.dtype)
                    expected = torch.nn.functional.linear(x, dense).float()
                    norm = float(expected.norm())
                except Exception as exc:
                    gpu.free()
                    emit({**rows[r], "skipped": f"no activations: {_describe(exc)}", "times": {}, "errors": {}})
                    continue

                def check(result: Any, expected: Any = expected, norm: float = norm) -> None:
                    got = result if type(result).__module__.startswith("torch") else torch.from_dlpack(result)
                    if tuple(got.shape) != tuple(expected.shape):
                        raise AssertionError(f"wrong result: shape {tuple(got.shape)}, expected {tuple(expected.shape)}")
                    err = float((got.float() - expected).norm()) / max(norm, 1e-30)
                    if not err <= 2e-2:
                        raise AssertionError(f"wrong result: relative error {err:.3g} against the dense product (allowed 0.02)")

                impls, errors = semi_impls(gpu, x, weights, gave_up)
                errors.update(weight_errors)
                timing = time_gpu(impls, check, gpu, repeats, errors)
                del impls, x, expected
                for name in XSPARSE_SEMI:
                    seconds = timing.best.get(name)
                    if seconds is not None and seconds > GIVE_UP_S and name not in gave_up:
                        gave_up[name] = f"not run: {seconds:.2f} s per call at r={r} already; larger activations take longer"
                emit({
                    **rows[r], "times": timing.best, "calls": timing.calls, "errors": timing.errors,
                    "warnings": timing.warnings, "other_load": timing.other_load,
                })  # fmt: skip
            del dense, weights
            gpu.free()


# --- analysis and report --------------------------------------------------------------------------


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _ms(t: dict[str, float | None], name: str) -> float | None:
    v = t.get(name)
    return None if v is None else v * 1e3


def analyse_sparse(row: dict[str, Any]) -> dict[str, Any]:
    t = row["times"]
    out: dict[str, Any] = {"case": row["case"], "load": row.get("other_load")}
    for name in SPARSE_IMPLS:
        out[name] = _ms(t, name)
    ours = t.get("xsparse[cupy]")
    out["cupy/cupyx"] = _ratio(ours, t.get("cupyx"))
    out["cupy/torch"] = _ratio(ours, t.get("torch"))
    out["xtorch/torch"] = _ratio(t.get("xsparse[torch]"), t.get("torch"))
    if row.get("skipped"):
        out["target"] = "skipped"
    elif row["index"] != "int32":
        out["target"] = "-"  # cuSPARSE through cupyx takes int32 indices: no CuPy comparison here
    else:
        peers = [p for p in ("cupyx", "torch") if t.get(p) is not None]
        if not peers or (ours is None and "xsparse[cupy]" not in row.get("errors", {})):
            out["target"] = "-"  # nothing to compare, or no CuPy at all (the report names what is missing)
        else:
            met = ours is not None and all(ours / t[p] <= TARGET_VS_PEERS for p in peers)
            out["target"] = "met" if met else "MISSED"
    return out


def analyse_semi(row: dict[str, Any]) -> dict[str, Any]:
    t = row["times"]
    out: dict[str, Any] = {"case": row["case"], "load": row.get("other_load")}
    for name in SEMI_IMPLS:
        out[name] = _ms(t, name)
    dense = t.get("dense")
    out["dense TFLOP/s"] = None if dense is None else row["flops"] / dense / 1e12
    out["dense/cusparselt"] = _ratio(dense, t.get("torch 2:4"))
    out["dense/cutlass"] = _ratio(dense, t.get("torch 2:4 cutlass"))
    ours = [t[name] for name in XSPARSE_SEMI if t.get(name) is not None]
    out["dense/xsparse"] = _ratio(dense, min(ours)) if ours else None
    if row.get("skipped"):
        out["target"] = "skipped"
    elif row["n"] == TARGET_24_N and row["dtype"] == "float16" and row["rows"] >= TARGET_24_ROWS:
        speedup = out["dense/xsparse"]
        out["target"] = "met" if speedup is not None and speedup >= TARGET_24_SPEEDUP else "MISSED"
    else:
        out["target"] = "-"
    return out


def _kernels(gpu: Gpu) -> dict[str, list[str]]:
    """The kernels dispatch tries, in order, for the products benchmarked (after the backends loaded)."""
    out: dict[str, list[str]] = {}
    signatures = {
        "csr @ strided": (xs.sparse_csr, xs.strided),
        "csr @ csr": (xs.sparse_csr, xs.sparse_csr),
        "strided @ semi_structured": (xs.strided, xs.sparse_semi_structured),
    }
    for backend, present in (("cupy", gpu.cupy is not None), ("torch", gpu.torch is not None)):
        if not present:
            continue
        for what, layouts in signatures.items():
            try:
                out[f"{backend}: {what}"] = [f"{k.name} [{k.kind}]" for k in xs.dispatch.resolve("matmul", layouts, backend)]
            except Exception as exc:
                out[f"{backend}: {what}"] = [_describe(exc)]
    return out


def machine(gpu: Gpu) -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "numpy": np.__version__, "xsparse": xs.__version__}
    torch, cupy = gpu.torch, gpu.cupy
    if torch is not None:
        info["gpu"] = torch.cuda.get_device_name() if gpu.torch_device != "cpu" else "none (torch on the CPU: a check of the harness)"
        info["torch"] = torch.__version__
        info["torch_cuda"] = torch.version.cuda
        cusparselt = getattr(torch.backends, "cusparselt", None)
        try:
            info["cusparselt"] = cusparselt.version() if cusparselt is not None and cusparselt.is_available() else None
        except Exception as exc:
            info["cusparselt"] = _describe(exc)
    else:
        info["torch"] = gpu.torch_reason
    if cupy is not None:
        info["cupy"] = cupy.__version__
        info["cupy_cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        if "gpu" not in info:
            name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
            info["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
    else:
        info["cupy"] = gpu.cupy_reason
    return info


def report(results: dict[str, Any]) -> list[str]:
    m = results["machine"]
    lines = [
        f"xsparse {m['xsparse']} on {m.get('gpu', 'no GPU')}: torch {m.get('torch')} (CUDA {m.get('torch_cuda')}, "
        f"cuSPARSELt {m.get('cusparselt')}), CuPy {m.get('cupy')}" + (" (quick sizes)" if results["quick"] else ""),
        "times in ms per call, best of several loops of calls between device synchronisations; ratios: "
        "xsparse time / peer time (cupy/cupyx, cupy/torch: xsparse[cupy]; xtorch/torch: xsparse[torch]); "
        "load: share of the CPUs other processes used while the case was timed",
    ]
    sparse_rows = [analyse_sparse(r) for r in results["rows"] if r["group"] == "sparse"]
    semi_rows = [analyse_semi(r) for r in results["rows"] if r["group"] == "2:4"]
    if sparse_rows:
        columns = [("case", "case", "")] + [(n, n, ".3g") for n in SPARSE_IMPLS]
        columns += [("cupy/cupyx", "cupy/cupyx", ".2f"), ("cupy/torch", "cupy/torch", ".2f"), ("xtorch/torch", "xtorch/torch", ".2f")]
        columns += [("load", "load", ".0%"), ("target", "target", "")]
        lines += ["", f"SpMV, SpMM ({K_COLUMNS} columns), SpGEMM; target: xsparse[cupy] at most {TARGET_VS_PEERS:.2f} x cupyx's and torch's time (int32)"]
        lines += format_table(sparse_rows, columns)
    if semi_rows:
        columns = [("case", "case", "")] + [(n, n, ".3g") for n in SEMI_IMPLS]
        columns += [("dense TFLOP/s", "dense TFLOP/s", ".0f"), ("dense/cusparselt", "dense/cuSPARSELt", ".2f"),
                    ("dense/cutlass", "dense/CUTLASS", ".2f"), ("dense/xsparse", "dense/xsparse", ".2f")]  # fmt: skip
        columns += [("load", "load", ".0%"), ("target", "target", "")]
        lines += [
            "",
            "2:4 matmul X @ W.T (W n x n, X r x n); dense/...: speedups over the dense cuBLAS product; target: "
            f"dense/xsparse >= {TARGET_24_SPEEDUP} for float16, n={TARGET_24_N}, r >= {TARGET_24_ROWS}",
        ]
        lines += format_table(semi_rows, columns)
    if not results["rows"]:
        lines += ["", "no case matched --only"]
    # one line per distinct (implementation, error), with the cases it happened in
    grouped: dict[tuple[str, str], list[str]] = {}
    for r in results["rows"]:
        if r.get("skipped"):
            grouped.setdefault(("case skipped", str(r["skipped"])), []).append(r["case"])
        for name, err in r.get("errors", {}).items():
            grouped.setdefault((name, err), []).append(r["case"])
    if grouped:
        lines += ["", "implementations that did not run or failed:"]
        for (name, err), cases in grouped.items():
            where = ", ".join(cases[:3]) + (f" and {len(cases) - 3} more" if len(cases) > 3 else "")
            lines.append(f"  {name}: {err} [{where}]")
    warned = sorted({f"  {name}: {w}" for r in results["rows"] for name, ws in r.get("warnings", {}).items() for w in ws})
    if warned:
        lines += ["", "warnings (first call of each case):", *warned]
    if results.get("kernels"):
        lines += ["", "kernels dispatch tries (in order):", *(f"  {k}: {', '.join(v)}" for k, v in results["kernels"].items())]
    missed = [r["case"] for r in sparse_rows + semi_rows if r["target"] == "MISSED"]
    met = [r["case"] for r in sparse_rows + semi_rows if r["target"] == "met"]
    lines += ["", f"targets: {len(met)} met, {len(missed)} MISSED" + (": " + "; ".join(missed) if missed else "")]
    lines.append(f"elapsed {results['elapsed_s']:.0f} s" + ("" if results["complete"] else " (incomplete)"))
    return lines


def _payload(results: dict[str, Any]) -> dict[str, Any]:
    table = [analyse_sparse(r) if r["group"] == "sparse" else analyse_semi(r) for r in results["rows"]]
    return {**results, "table": table}


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller matrices, weights and activations")
    parser.add_argument("--only", help="run only the cases whose label contains this text, e.g. 'spmv laplace' or '2:4 n=8192 float16'")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="directory of the JSON results (default: benchmarks/results)")
    parser.add_argument("--repeats", type=int, default=5, help="timed loops per implementation and case; the best is kept (default 5)")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S, help=f"start no case after this many seconds (default {DEFAULT_BUDGET_S:.0f})")
    parser.add_argument(
        "--torch-device", default="cuda", choices=("cuda", "cpu"),
        help="the torch implementations' device; cpu checks the harness on a machine without a GPU (its times mean nothing)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    gpu = probe(args.torch_device)
    if gpu.cupy is None and gpu.torch is None:
        print(f"bench_gpu: nothing to run, no CUDA device is usable. CuPy: {gpu.cupy_reason}. torch: {gpu.torch_reason}.", file=sys.stderr)
        return 0
    for what, reason in (("CuPy", gpu.cupy_reason), ("torch CUDA", gpu.torch_reason)):
        if reason is not None:
            print(f"bench_gpu: {what} is missing, its implementations are left out: {reason}", file=sys.stderr)
    path = args.out / f"gpu{'_quick' if args.quick else ''}.json"
    results: dict[str, Any] = {"quick": args.quick, "machine": machine(gpu), "rows": [], "complete": False, "elapsed_s": 0.0}
    deadline = started + args.budget_s

    def emit(row: dict[str, Any]) -> None:
        results["rows"].append(row)
        results["elapsed_s"] = time.perf_counter() - started
        times = ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in row.get("times", {}).items() if v is not None)
        failed = ", ".join(row.get("errors", {}))
        print(f"[{results['elapsed_s']:5.0f} s] {row['case']}: {row.get('skipped') or times}" + (f" (not run: {failed})" if failed else ""), file=sys.stderr, flush=True)
        save_json(path, _payload(results))

    run_sparse(gpu, args.quick, args.only, args.repeats, deadline, emit)
    run_semi(gpu, args.quick, args.only, args.repeats, deadline, emit)
    results["kernels"] = _kernels(gpu)
    results["complete"] = True
    results["elapsed_s"] = time.perf_counter() - started
    save_json(path, _payload(results))
    print("\n".join(report(results)))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
