"""What a GPU session checks first, in about a minute: ``bash .ci/gpu probe OUTDIR``.

0. cuSPARSE's sparseToDense, the call the first GPU run's test modules died at: each form (CSR, CSC, COO;
   cupyx's own call and xsparse's ``to_dense``) in a process of its own with synchronous launches, so a
   fault names its form and spares the rest.
1. cuSPARSELt: CuPy's binding (absent from CuPy's wheels) and xsparse's ctypes binding, with the library
   found and its version.
2. The CuPy 2:4 path: a float16 weight converted on CuPy carries the packed form; ``linear`` against the
   dense product, its time and its error.
3. CuPy's int8 2:4 product over 4096 and 8192 columns against the exact product (whether the int8 path's
   2048-column limit can go).
4. torch 2:4 at the size of the target (8192 x 8192 float16 weight, 4096 activation rows): the dense
   product, torch's semi-structured product, ``xs.linear`` on torch and on CuPy; and at 16 rows, where a
   fixed per-call cost shows.
5. Host overhead: a profile of the CuPy backend's SpMV (a Laplacian, where the host is the bottleneck)
   beside cupyx's, and of the torch backend's SpGEMM beside torch's.

Each section runs under a guard: a failure prints its traceback and the next section runs. Timings are
the mean of back-to-back calls between two device synchronisations, after one warm-up call: a probe,
not the benchmark (``benchmarks/bench_gpu.py`` is that).
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp


def section(name: str) -> None:
    print(f"\n##### {name}", flush=True)


def mean_ms(fn: Callable[[], Any], sync: Callable[[], Any], n: int) -> float:
    fn()
    sync()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - start) / n * 1e3


def profile(fn: Callable[[], Any], n: int, top: int = 20) -> None:
    p = cProfile.Profile()
    p.enable()
    for _ in range(n):
        fn()
    p.disable()
    out = io.StringIO()
    pstats.Stats(p, stream=out).sort_stats("tottime").print_stats(top)
    print(out.getvalue()[-5000:])


def pruned(torch: Any, n: int, dtype: Any) -> Any:
    """A random n x n weight with the 2 largest magnitudes of every group of 4 of a row kept."""
    w = torch.randn(n, n, device="cuda")
    groups = w.reshape(n, n // 4, 4)
    keep = groups.abs().topk(2, dim=-1).indices
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(-1, keep, True)
    return (groups * mask).reshape(n, n).to(dtype).contiguous()


_DENSE_CASE = """
import os, sys, traceback
import cupy as cp, cupyx.scipy.sparse as cpx, numpy as np, scipy.sparse as sp, xsparse as xs
from cupyx import cusparse
def case():
    host = sp.random(7, 5, density=0.4, format="csr", random_state=3, dtype=np.{dtype})
    want = host.toarray()
    form, index = "{form}", np.{index}
    ptr, idx, val = (cp.asarray(v) for v in (host.indptr, host.indices, host.data))
    a = xs.sparse_csr_array(ptr.astype(index), idx.astype(index), val, shape=host.shape)
    if form == "cupyx csr":
        got = cusparse.sparseToDense(cpx.csr_matrix((val, idx, ptr), shape=host.shape))
    elif form == "cupyx csc":
        got = cusparse.sparseToDense(cpx.csr_matrix((val, idx, ptr), shape=host.shape).tocsc())
    elif form == "cupyx coo":
        got = cusparse.sparseToDense(cpx.csr_matrix((val, idx, ptr), shape=host.shape).tocoo())
    elif form == "xsparse csr":
        got = xs.to_dense(a)
    elif form == "xsparse csc":
        got = xs.to_dense(xs.to_sparse_csc(a))
    else:
        c = xs.to_sparse_coo(a)
        cp.cuda.runtime.deviceSynchronize()
        print("to_sparse_coo ran: coalesced", c.is_coalesced(), c.index_dtype, flush=True)
        got = xs.to_dense(c)
    cp.cuda.runtime.deviceSynchronize()
    print("max error", float(np.abs(cp.asnumpy(got) - want).max()))

try:
    case()
except BaseException:
    # printed here and the process ended at once: CuPy's exit handlers fail in a poisoned context and
    # bury the traceback under "Error in sys.excepthook"
    traceback.print_exc(file=sys.stdout)
    sys.stdout.flush()
    os._exit(1)
"""


def dense_conversions() -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "CUDA_LAUNCH_BLOCKING": "1"}
    for form in ("cupyx csr", "cupyx csc", "cupyx coo", "xsparse csr", "xsparse csc", "xsparse coo"):
        # one process each (CuPy's import and the CUDA context cost a few seconds): float64 and int32 indices
        # for cupyx's own calls, float32 and int64 (narrowed by the kernels) for xsparse's
        for dtype, index in [("float64", "int32") if form.startswith("cupyx") else ("float32", "int64")]:
            code = _DENSE_CASE.format(form=form, dtype=dtype, index=index)
            try:
                proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=20)
                said = (proc.stdout + proc.stderr).strip().splitlines()
                said = [line for line in said if line not in ("Error in sys.excepthook:", "Original exception was:")]
                tail = said[-1] if proc.returncode == 0 and said else "FAILED\n" + "\n".join(said[:40])
            except subprocess.TimeoutExpired:
                tail = "FAILED: no answer in 20 s"
            print(f"{form} {dtype} {index} indices: {tail}", flush=True)


def spmv_floor(cp: Any, cupy_linalg: Any, mc: Any, v: Any, sync: Callable[[], Any]) -> None:
    """What CuPy's low-level binding costs per SpMV at best: every descriptor and the buffer made once, only
    the values' pointers set per call (dnVecSetValues); and with cusparseSpMV_preprocess where the binding
    has it. The next step for the CuPy SpMV's host time, measured before it is written."""
    try:
        lib, descriptor, handle_of = cupy_linalg._binding()
        dtype = np.dtype(v.dtype)
        cuda_type = cupy_linalg._CUDA_TYPES[dtype]
        alpha, beta = cupy_linalg._scalars(dtype)
        desc_a = descriptor.create(mc)
        out = cp.empty(mc.shape[0], dtype=dtype)
        desc_x = lib.createDnVec(int(v.shape[0]), v.data.ptr, cuda_type)
        desc_y = lib.createDnVec(int(out.shape[0]), out.data.ptr, cuda_type)
        op = lib.CUSPARSE_OPERATION_NON_TRANSPOSE
        size = lib.spMV_bufferSize(handle_of(), op, alpha, desc_a.desc, desc_x, beta, desc_y, cuda_type, 0)
        buffer = cp.empty(max(int(size), 1), dtype=cp.int8)

        def kept() -> None:
            lib.dnVecSetValues(desc_x, v.data.ptr)
            lib.dnVecSetValues(desc_y, out.data.ptr)
            lib.spMV(handle_of(), op, alpha, desc_a.desc, desc_x, beta, desc_y, cuda_type, 0, buffer.data.ptr)

        def bare() -> None:
            lib.spMV(handle_of(), op, alpha, desc_a.desc, desc_x, beta, desc_y, cuda_type, 0, buffer.data.ptr)

        print(f"SpMV floor (ms): all kept, pointers set {mean_ms(kept, sync, 2000):.4f}, the spMV call alone {mean_ms(bare, sync, 2000):.4f}", flush=True)
        # cusparseSpMVAlg_t: CUSPARSE_SPMV_CSR_ALG1 = 2, CUSPARSE_SPMV_CSR_ALG2 = 3 (cusparse.h); the default is 0
        for alg in (2, 3):
            try:
                alg_size = lib.spMV_bufferSize(handle_of(), op, alpha, desc_a.desc, desc_x, beta, desc_y, cuda_type, alg)
                alg_buffer = cp.empty(max(int(alg_size), 1), dtype=cp.int8)

                def with_alg(alg: int = alg, alg_buffer: Any = alg_buffer) -> None:
                    lib.spMV(handle_of(), op, alpha, desc_a.desc, desc_x, beta, desc_y, cuda_type, alg, alg_buffer.data.ptr)

                with_alg()
                sync()
                error = float(cp.abs(out - mc @ v).max())
                print(f"SpMV floor with algorithm {alg} (ms): {mean_ms(with_alg, sync, 2000):.4f} (max error {error:.3g})", flush=True)
            except Exception as exc:
                print(f"SpMV algorithm {alg}: {type(exc).__name__}: {exc}")
        if hasattr(lib, "spMV_preprocess"):
            lib.spMV_preprocess(handle_of(), op, alpha, desc_a.desc, desc_x, beta, desc_y, cuda_type, 0, buffer.data.ptr)
            print(f"SpMV floor after spMV_preprocess (ms): {mean_ms(bare, sync, 2000):.4f}", flush=True)
        else:
            print("CuPy's binding has no spMV_preprocess")
        lib.destroyDnVec(desc_x)
        lib.destroyDnVec(desc_y)
    except Exception:
        traceback.print_exc()


def spgemm_check_variants(torch: Any, tm: Any, sync: Callable[[], Any]) -> None:
    """The torch SpGEMM's sortedness check (xsparse's, and two cheaper forms) on torch's product alone."""
    try:
        from xsparse.backends.torch.linalg import _sorted_csr

        r = tm @ tm
        crow, col = r.crow_indices(), r.col_indices()
        nnz = col.numel()
        inner = crow[1:-1].to(torch.int64)

        def index_fill() -> bool:
            ok = torch.empty(nnz + 1, dtype=torch.bool, device=col.device)
            torch.gt(col[1:], col[:-1], out=ok[1:nnz])
            ok.index_fill_(0, inner, True)
            return bool(ok[1:nnz].all())

        def sync_only() -> bool:
            return bool(torch.gt(col[1:2], col[:1]).all())

        print(
            f"SpGEMM result: nnz {nnz}, index dtype {col.dtype}; the check (ms): xsparse's {mean_ms(lambda: _sorted_csr(r), sync, 200):.4f}, "
            f"with index_fill_ {mean_ms(index_fill, sync, 200):.4f}, one tiny comparison and its wait {mean_ms(sync_only, sync, 200):.4f}; "
            f"torch.mm alone {mean_ms(lambda: tm @ tm, sync, 50):.4f}; sorted: {index_fill()}",
            flush=True,
        )
    except Exception:
        traceback.print_exc()


def int8_exactness(cp: Any, xs: Any, lt_kernels: Any) -> None:
    """cuSPARSELt's int8 product (its int32 accumulator, read as the kernel reads it) against the exact
    product, over 4096 and 8192 columns. The kept values are mostly 127 and -128, so that the sums pass 2**24
    with their low bits set: an epilogue through float32 would round them."""
    rng = np.random.default_rng(0)
    rows, n = 128, 64  # int8's shape table: rows and columns multiples of 128
    for cols in (4096, 8192):  # (at 2048 no sum passes 2**24)
        groups = cols // 4
        w = np.zeros((rows, groups, 4), dtype=np.int8)
        extreme = rng.choice(np.array([127, -128], dtype=np.int8), size=(rows, groups, 2))
        some = rng.integers(-128, 128, size=(rows, groups, 2), dtype=np.int8)
        kept = np.where(rng.random((rows, groups, 2)) < 0.9, extreme, some)
        first = rng.integers(0, 2, size=(rows, groups))
        w[np.arange(rows)[:, None], np.arange(groups)[None, :], first] = kept[..., 0]
        w[np.arange(rows)[:, None], np.arange(groups)[None, :], first + 2] = kept[..., 1]
        w = w.reshape(rows, cols)
        # B's signs follow W's first row, so that the sums of that row grow rather than cancel
        b = np.where(rng.random((cols, n)) < 0.9, np.where(w[:1].T >= 0, 127, -128), rng.integers(-128, 128, size=(cols, n))).astype(np.int8)
        s = xs.to_sparse_semi_structured(cp.asarray(w))
        if s.packed is None:
            print(f"cols={cols}: no packed form (the conversion declined)")
            continue
        # B goes in as its transpose (n x cols, opB = T): cuSPARSELt's int8 product takes no other orientation
        got = cp.asnumpy(lt_kernels._spmm(s.packed, cp.ascontiguousarray(cp.asarray(b.T)), True, n)).astype(np.int64)
        want = w.astype(np.int64) @ b.astype(np.int64)
        wrong = int(np.count_nonzero(got != want))
        print(f"cols={cols}: largest |sum| {int(np.abs(want).max())} (2**24 = {2**24}), {wrong} of {want.size} results differ"
              + (f", largest difference {int(np.abs(got - want).max())}" if wrong else " (exact)"), flush=True)


def main() -> None:
    section("cuSPARSE sparseToDense, one process per form")
    dense_conversions()

    import cupy as cp
    import torch

    import xsparse as xs
    from xsparse.backends.cupy import _cusparselt as ours
    from xsparse.backends.cupy import semi_structured as lt_kernels

    cp_sync, torch_sync = cp.cuda.runtime.deviceSynchronize, torch.cuda.synchronize

    section("cuSPARSELt")
    try:
        from cupy_backends.cuda.libs import cusparselt  # noqa: F401

        print("CuPy's binding: present")
    except ImportError as exc:
        print(f"CuPy's binding: absent ({exc})")
    try:
        binding = ours.load()
        print(f"xsparse's binding: {binding.path}, cuSPARSELt {'.'.join(map(str, binding.version))}")
    except Exception:
        traceback.print_exc()
    print("the 2:4 kernels' reason to decline:", lt_kernels._library_reason())

    section("CuPy 2:4: float16 1024 x 1024 weight, 4096 rows")
    try:
        w = pruned(torch, 1024, torch.float16)
        W = cp.from_dlpack(w)
        S = xs.to_sparse_semi_structured(W)
        print("packed:", S.packed)
        X = cp.random.standard_normal((4096, 1024)).astype(cp.float16)
        got = cp.asnumpy(xs.linear(X, S)).astype(np.float64)
        want = cp.asnumpy(X.astype(cp.float32) @ W.astype(cp.float32).T).astype(np.float64)
        print("relative error against the float32 dense product:", float(np.abs(got - want).max() / np.abs(want).max()))
        print(f"xs.linear {mean_ms(lambda: xs.linear(X, S), cp_sync, 50):.4f} ms, dense {mean_ms(lambda: X @ W.T, cp_sync, 50):.4f} ms")
    except Exception:
        traceback.print_exc()

    section("CuPy 2:4 int8 beyond 2048 columns: exact? (whether _INT8_EXACT_COLS can go)")
    try:
        int8_exactness(cp, xs, lt_kernels)
    except Exception:
        traceback.print_exc()

    section("2:4 at the target: float16 8192 x 8192 weight")
    try:
        w = pruned(torch, 8192, torch.float16)
        sw = torch.sparse.to_sparse_semi_structured(w)
        xw = xs.to_sparse_semi_structured(w)
        cw = None
        if lt_kernels._library_reason() is None:
            cw = xs.to_sparse_semi_structured(cp.from_dlpack(w))
        for rows in (4096, 16):
            x = torch.randn(rows, 8192, device="cuda").half()
            line = [f"rows={rows}: dense {mean_ms(lambda: x @ w.t(), torch_sync, 20):.4f} ms",
                    f"torch 2:4 {mean_ms(lambda: x @ sw.t(), torch_sync, 20):.4f} ms",
                    f"xs.linear[torch] {mean_ms(lambda: xs.linear(x, xw), torch_sync, 20):.4f} ms"]  # fmt: skip
            if cw is not None:
                xc = cp.from_dlpack(x)
                line.append(f"xs.linear[cupy] {mean_ms(lambda: xs.linear(xc, cw), cp_sync, 20):.4f} ms")
            print(", ".join(line), flush=True)
        if cw is not None:
            # the cuSPARSELt product alone (no dispatch, no result view), and what the search settled
            xc = cp.from_dlpack(torch.randn(4096, 8192, device="cuda").half())
            alone = mean_ms(lambda: lt_kernels._spmm(cw.packed, xc, True, 4096), cp_sync, 20)
            print(f"CuPy at 4096 rows: the product alone {alone:.4f} ms, the search's choice {cw.packed.planned(lt_kernels.plan_key(4096, True))}", flush=True)
        x = torch.randn(4096, 8192, device="cuda").half()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                xs.linear(x, xw)
            torch_sync()
        print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=10))
    except Exception:
        traceback.print_exc()

    section("host overhead: CuPy SpMV (300 x 300 Laplacian), torch SpGEMM (the same)")
    try:
        import cupyx.scipy.sparse as cpx

        side = 300
        one = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], (side, side))
        lap = sp.kronsum(one, one, format="csr")
        ptr, idx, val = (cp.asarray(v) for v in (lap.indptr, lap.indices, lap.data))
        m = xs.sparse_csr_array(ptr, idx, val, shape=lap.shape)
        mc = cpx.csr_matrix((val, idx, ptr), shape=lap.shape)
        v = cp.ones(lap.shape[1])
        print(f"SpMV: xsparse[cupy] {mean_ms(lambda: m @ v, cp_sync, 500):.4f} ms, cupyx {mean_ms(lambda: mc @ v, cp_sync, 500):.4f} ms")
        # each layer of xsparse's SpMV on its own (the public function, the dispatcher, the kernel's check,
        # the kernel, its cupyx call, cuSPARSE through cupyx): where the host time above cupyx's goes
        from cupyx import cusparse as cxs
        from xsparse import dispatch
        from xsparse.backends.cupy import linalg as cupy_linalg
        from xsparse.backends.cupy.conversion import to_cupyx

        xp = xs.get_backend("cupy").load()
        layouts = (xs.sparse_csr, xs.strided)
        kernel = dispatch.resolve("matmul", layouts, "cupy")[0]
        layers = {
            "xs.matmul": lambda: xs.matmul(m, v),
            "dispatch.call": lambda: dispatch.call("matmul", layouts, "cupy", xp, m, v),
            "the kernel's check": lambda: kernel.supports(xp, m, v),
            "the kernel": lambda: kernel.func(xp, m, v),
            "_product (direct SpMV, kept descriptor)": lambda: cupy_linalg._product(to_cupyx(m, v.dtype), v, v.dtype, m),
            "_product (a descriptor per call)": lambda: cupy_linalg._product(to_cupyx(m, v.dtype), v, v.dtype),
            "cupyx @": lambda: mc @ v,
            "cupyx.cusparse.spmv": lambda: cxs.spmv(mc, v),
        }
        print("SpMV layers (ms):", ", ".join(f"{name} {mean_ms(fn, cp_sync, 500):.4f}" for name, fn in layers.items()), flush=True)
        spmv_floor(cp, cupy_linalg, mc, v, cp_sync)
        profile(lambda: m @ v, 2000)
        profile(lambda: mc @ v, 2000, 10)
        tt = [torch.from_numpy(z).cuda() for z in (lap.indptr.astype(np.int64), lap.indices.astype(np.int64), lap.data)]
        mt, tm = xs.sparse_csr_array(*tt, shape=lap.shape), torch.sparse_csr_tensor(*tt, size=lap.shape)
        vt = torch.ones(lap.shape[1], dtype=torch.float64, device="cuda")
        print(f"SpMV: torch's own {mean_ms(lambda: tm @ vt, torch_sync, 500):.4f} ms, xsparse[torch] {mean_ms(lambda: mt @ vt, torch_sync, 500):.4f} ms")
        print(f"SpGEMM: xsparse[torch] {mean_ms(lambda: mt @ mt, torch_sync, 50):.4f} ms, torch {mean_ms(lambda: tm @ tm, torch_sync, 50):.4f} ms")
        spgemm_check_variants(torch, tm, torch_sync)
        profile(lambda: mt @ mt, 100)
    except Exception:
        traceback.print_exc()


if __name__ == "__main__":
    main()
