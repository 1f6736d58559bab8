"""Tests of the CuPy backend's cuSPARSELt path for the semi-structured (2:4) layout
(``xsparse/backends/cupy/semi_structured.py``).

The first part runs everywhere: the registry, the import discipline, and every reason to decline that the
kernels give from the operands' metadata alone (on NumPy arrays, with a stand-in packed form). The second
part needs CuPy, a CUDA device of compute capability 8.0 or newer and cuSPARSELt, and skips otherwise:
each kernel is run directly on Hypothesis inputs (random 2:4 float16 and int8 weights;
activations of several row counts, in C order, Fortran order, strided and unaligned; transposed views;
``linear`` with and without a bias), asserting that the packed form exists and that the kernel accepts
the input, and its result is compared with the dense computation and with the generic kernel. Weights
are +-1 and activations small integers, so every partial sum is exact in every dtype (int8 wraps the same
way on every side) and the comparisons are exact.
"""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from conftest import backend_skip_reason
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_semi_structured import random_pattern

import xsparse as xs
from xsparse import dispatch
from xsparse.backends import backend_of_array
from xsparse.backends.cupy import semi_structured as lt_kernels
from xsparse.backends.cupy.semi_structured import CusparseLtPacked, plan_key
from xsparse.formats import COMPRESSED
from xsparse.formats._semi_structured import PATTERNS, SemiStructuredArray
from xsparse.formats._spec import Target

SS, STRIDED, COO = xs.sparse_semi_structured, xs.strided, xs.sparse_coo
NP = xs.get_backend("numpy").load()

TESTED = {
    ("convert", (STRIDED, SS)), ("convert", (COO, SS)), ("convert", (COMPRESSED, SS)),
    ("matmul", (SS, STRIDED)), ("matmul", (STRIDED, SS)),
    ("addmm", (STRIDED, SS, STRIDED)), ("addmm", (STRIDED, STRIDED, SS)),
}  # fmt: skip


def _gpu_skip_reason() -> str | None:
    reason = backend_skip_reason("cupy") or lt_kernels._library_reason()
    if reason is not None:
        return reason
    import cupy

    cc = lt_kernels._compute_capability(cupy.cuda.Device().id)
    return None if cc >= 80 else f"cuSPARSELt needs compute capability 8.0 or newer, the GPU has {cc // 10}.{cc % 10}"


GPU_SKIP = _gpu_skip_reason()
gpu = pytest.mark.skipif(GPU_SKIP is not None, reason=f"needs CuPy with cuSPARSELt on a GPU: {GPU_SKIP}")


# -- runs everywhere ------------------------------------------------------------------------------------


def _native(op: str, layouts: tuple[Any, ...]) -> dispatch.Kernel:
    found = [k for k in dispatch.resolve(op, layouts, "cupy") if k.kind == "native"]
    assert found, f"no native cupy kernel for {op}{layouts}"
    return found[0]


def _reason(op: str, layouts: tuple[Any, ...], xp: Any, *args: Any) -> str:
    kernel = _native(op, layouts)
    assert kernel.supports is not None
    reason = kernel.supports(xp, *args)
    assert isinstance(reason, str) and reason, f"{kernel.describe()} accepted {args!r}"
    return reason


def _ss_target(x: Any, fill: Any = 0) -> Target:
    """The target that ``xs.to_sparse_semi_structured(x)`` dispatches with."""
    backend = x._backend if isinstance(x, xs.SparseArray) else backend_of_array(x)
    xp = backend.load()
    return Target(SS, backend, xp, tuple(x.shape), 2, 0, (1, 1), xp.int64, fill)


def _tiled(dtype: str, shape: tuple[int, int]) -> np.ndarray:
    return np.tile(np.asarray([0, 0, 1, 1], dtype=dtype), (shape[0], shape[1] // 4))


def _with_stand_in(s: SemiStructuredArray, dtype: str, *, fill: Any = 0) -> SemiStructuredArray:
    """``s`` (NumPy) carrying a stand-in packed form: what a CuPy conversion would attach, minus the buffer."""
    packed = CusparseLtPacked(np.zeros(16, dtype=np.uint8), s.stored_shape, dtype, 0)
    return SemiStructuredArray(s.values(), s.indices(), s.shape, backend=s._backend, xp=s._xp, transposed=s.transposed, fill_value=fill, packed=packed)


def test_every_kernel_is_tested() -> None:
    registered = {(k.op, k.signature) for k in xs.kernels() if k.backend == "cupy" and SS in k.signature}
    assert registered == TESTED


def test_kernels_follow_the_style() -> None:
    for k in xs.kernels():
        if k.backend == "cupy" and SS in k.signature:
            assert k.name.startswith(f"_{k.op}_") and k.name.endswith("_cupy"), k.name
            doc = (k.func.__doc__ or "").strip()
            assert doc and "\n" not in doc, k.name


def test_importing_the_kernels_imports_no_cupy() -> None:
    code = "import sys, xsparse.backends.cupy; print(sorted(m for m in ('cupy', 'cupy_backends') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_plan_keys_tell_shapes_and_orders_apart() -> None:
    keys = {plan_key(n, nk) for n in (16, 32) for nk in (False, True)}
    assert len(keys) == 4
    assert plan_key(16, True) == plan_key(16, True) == (16, "nk")
    p = CusparseLtPacked(np.zeros(16, dtype=np.uint8), (64, 64), "float16", 0)
    assert p.planned(plan_key(16, True)) is None
    assert "CusparseLtPacked(shape=(64, 64), dtype=float16, device=0, bytes=16)" == repr(p)


def test_dense_operands_are_padded_to_sixteen() -> None:
    assert [lt_kernels._round_up(n) for n in (1, 15, 16, 17, 64)] == [16, 16, 16, 32, 64]


def test_views_share_the_packed_form_and_new_values_drop_it() -> None:
    s = _with_stand_in(xs.to_sparse_semi_structured(_tiled("float16", (64, 64))), "float16")
    assert s.t().packed is s.packed and s.t().t().packed is s.packed
    assert s._with_values(s.values() * 2, 0).packed is None


def test_conversion_declines_dtypes_fill_values_and_shapes() -> None:
    op = ("convert", (STRIDED, SS))
    x64 = np.zeros((64, 64))
    assert "take float16, bfloat16 and int8 values, got float64" in _reason(*op, NP, x64, _ss_target(x64))
    x32 = np.zeros((64, 64), dtype=np.float32)
    assert "in TF32" in _reason(*op, NP, x32, _ss_target(x32))
    x16 = np.zeros((64, 64), dtype=np.float16)
    assert "fill value is 1.0" in _reason(*op, NP, x16, _ss_target(x16, 1.0))
    assert "fill value is nan" in _reason(*op, NP, x16, _ss_target(x16, float("nan")))
    odd = np.zeros((64, 32), dtype=np.float16)
    assert "(64, 32) is outside the float16 table" in _reason(*op, NP, odd, _ss_target(odd))
    coo = xs.to_sparse_coo(np.zeros((2, 64, 64), dtype=np.float16))
    assert "one 2-D matrix" in _reason("convert", (COO, SS), NP, coo, _ss_target(coo))
    csr = xs.to_sparse_csr(np.zeros((64, 64), dtype=np.float32))
    assert "in TF32" in _reason("convert", (xs.sparse_csr, SS), NP, csr, _ss_target(csr))
    # an uncoalesced COO is declined with a reason too (the check once read its values(), which refuse one)
    dup = xs.sparse_coo_array([[0, 0], [1, 1]], np.asarray([1.0, 2.0], dtype=np.float32), (64, 64))
    assert not dup.is_coalesced()
    assert "in TF32" in _reason("convert", (COO, SS), NP, dup, _ss_target(dup))


def test_conversion_declines_without_cusparselt(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # neither CuPy's binding (absent from CuPy's wheels) nor the library for xsparse's own
    from xsparse.backends.cupy import _cusparselt as ours

    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.cusparselt", None)  # its import fails
    monkeypatch.setattr(lt_kernels, "_BINDING", [])
    monkeypatch.setattr(ours, "_LOADED", [])
    monkeypatch.setattr(ours, "_candidates", lambda: [str(tmp_path / "libcusparseLt.so.0")])
    lt_kernels._library_reason.cache_clear()
    try:
        x = np.zeros((64, 64), dtype=np.float16)
        reason = _reason("convert", (STRIDED, SS), NP, x, _ss_target(x))
    finally:
        lt_kernels._library_reason.cache_clear()
    assert reason.startswith("cuSPARSELt cannot be loaded (OSError: cannot load cuSPARSELt (libcusparseLt.so.0): ")
    assert "Install the nvidia-cusparselt-cu12 or -cu13 package" in reason


@pytest.mark.skipif(GPU_SKIP is not None, reason="needs CuPy with cuSPARSELt on a GPU")
def test_conversion_declines_host_arrays() -> None:
    x = np.zeros((64, 64), dtype=np.float16)
    assert "not on a CUDA device (device='cpu')" in _reason("convert", (STRIDED, SS), NP, x, _ss_target(x))


def test_products_decline_without_the_packed_form() -> None:
    s = xs.to_sparse_semi_structured(_tiled("float16", (64, 128)))
    b = np.ones((128, 16), dtype=np.float16)
    assert "carries no cuSPARSELt-packed form" in _reason("matmul", (SS, STRIDED), NP, s, b)
    assert "carries no cuSPARSELt-packed form" in _reason("matmul", (STRIDED, SS), NP, b.T, s.t())
    assert "carries no cuSPARSELt-packed form" in _reason("addmm", (STRIDED, STRIDED, SS), NP, b[0], b.T, s.t(), 1, 1)


def test_products_decline_the_orientations_the_hardware_does_not_accelerate() -> None:
    s = _with_stand_in(xs.to_sparse_semi_structured(_tiled("float16", (64, 128))), "float16")
    wrong = "runs along the non-contracted dimension"
    assert wrong in _reason("matmul", (SS, STRIDED), NP, s.t(), np.ones((64, 16), dtype=np.float16))
    assert wrong in _reason("matmul", (STRIDED, SS), NP, np.ones((16, 64), dtype=np.float16), s)
    assert wrong in _reason("addmm", (STRIDED, SS, STRIDED), NP, np.ones(16, dtype=np.float16), s.t(), np.ones((64, 16), dtype=np.float16), 1, 1)


def test_products_decline_other_dtypes_fill_values_and_devices() -> None:
    s = _with_stand_in(xs.to_sparse_semi_structured(_tiled("float16", (64, 128))), "float16")
    b32 = np.ones((128, 16), dtype=np.float32)
    assert "operands of one dtype, got float16 and float32" in _reason("matmul", (SS, STRIDED), NP, s, b32)
    filled = _with_stand_in(xs.to_sparse_semi_structured(_tiled("float16", (64, 128))), "float16", fill=1.0)
    assert "fill value is 1.0" in _reason("matmul", (SS, STRIDED), NP, filled, b32.astype(np.float16))
    # everything else fits: the NumPy operand is the one thing wrong
    assert "on device 'cpu' and the packed matrix on device 0" in _reason("matmul", (SS, STRIDED), NP, s, b32.astype(np.float16))
    bias32 = np.ones(64, dtype=np.float32)
    a = np.ones((16, 128), dtype=np.float16)
    assert "input's dtype float32 differs from the operands' float16" in _reason("addmm", (STRIDED, STRIDED, SS), NP, bias32, a, s.t(), 1, 1)


def test_int8_products_decline_long_rows_and_fractional_scalars() -> None:
    long = _with_stand_in(xs.to_sparse_semi_structured(_tiled("int8", (128, 4096))), "int8")
    assert "limited to 2048 columns" in _reason("matmul", (SS, STRIDED), NP, long, np.ones((4096, 16), dtype=np.int8))
    s = _with_stand_in(xs.to_sparse_semi_structured(_tiled("int8", (128, 128))), "int8")
    a = np.ones((16, 128), dtype=np.int8)
    bias = np.ones(128, dtype=np.int8)
    assert "alpha=0.5 is not an integer" in _reason("addmm", (STRIDED, STRIDED, SS), NP, bias, a, s.t(), 1, 0.5)
    assert "beta=1.5 is not an integer" in _reason("addmm", (STRIDED, STRIDED, SS), NP, bias, a, s.t(), 1.5, 1)


def test_a_prune_check_disagreement_keeps_the_portable_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    x = _tiled("float16", (64, 64))
    ref = xs.to_sparse_semi_structured(x)
    monkeypatch.setattr(lt_kernels, "_pack", lambda dense: None)
    with pytest.warns(xs.SparseEfficiencyWarning, match=r"^to_sparse_semi_structured: cuSPARSELt's prune check rejects a matrix that xsparse's validator accepted \(shape=\(64, 64\), dtype=float16\); the array keeps the portable encoding only .* Please report this as a bug of xsparse\.$"):
        out = lt_kernels._with_packed(ref, x)
    assert out is ref and out.packed is None


# -- needs a GPU ----------------------------------------------------------------------------------------

EXAMPLES = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCALARS = [(1, 1), (0, 1), (1, 2), (2, -1)]


@functools.cache
def _cp() -> Any:
    import cupy

    return cupy


@functools.cache
def _xp() -> Any:
    return xs.get_backend("cupy").load()


@functools.cache
def _bfloat16() -> Any:
    """NumPy's bfloat16 dtype where CuPy computes with it (ml_dtypes installed), else None."""
    try:
        import ml_dtypes

        dtype = np.dtype(ml_dtypes.bfloat16)
        _cp().asarray(np.ones(4, dtype=dtype)) * 2
        return dtype
    except Exception:  # no ml_dtypes, or a CuPy without bfloat16: the dtype is left out of the draws
        return None


def _dtypes() -> list[str]:
    # CuPy has bfloat16 only through ml_dtypes, whose dtype the Array API functions refuse: xsparse takes
    # bfloat16 from torch (test_bfloat16_of_cupy_is_refused_clearly)
    return ["float16", "int8"]


@gpu
def test_bfloat16_of_cupy_is_refused_clearly() -> None:
    dtype = _bfloat16()
    if dtype is None:
        pytest.skip("no ml_dtypes, or CuPy computes no bfloat16 here")
    with pytest.raises(TypeError, match=r"^to_sparse_semi_structured: backend 'cupy' has no such dtype among its Array API dtypes .*hold bfloat16 in torch"):
        xs.to_sparse_semi_structured(_cp().zeros((64, 64), dtype=dtype))


def _device(a: np.ndarray, dtype: str) -> Any:
    """A CuPy array of ``dtype`` holding the small integers of ``a``."""
    host = a.astype(_bfloat16() if dtype == "bfloat16" else dtype)
    return _cp().asarray(host)


def _host(x: Any) -> np.ndarray:
    return _cp().asnumpy(x).astype(np.float64)


def _expected(dense: np.ndarray, dtype: str) -> np.ndarray:
    """The exact float64 result in ``dtype``'s arithmetic: int8 wraps, the floats are exact here."""
    if dtype == "int8":
        return ((dense.astype(np.int64) + 128) % 256 - 128).astype(np.float64)
    return dense


def _run_native(op: str, layouts: tuple[Any, ...], *args: Any) -> Any:
    kernel = _native(op, layouts)
    assert kernel.supports is not None
    reason = kernel.supports(_xp(), *args)
    assert reason is None, f"{kernel.describe()} declined: {reason}"
    return kernel.func(_xp(), *args)


def _run_generic(op: str, layouts: tuple[Any, ...], *args: Any) -> Any:
    found = [k for k in dispatch.resolve(op, layouts, "cupy") if k.kind == "generic"]
    assert found, f"no generic kernel for {op}{layouts}"
    return found[0].func(_xp(), *args)


def _convert(x: Any) -> SemiStructuredArray:
    """``x`` converted by the CuPy kernel, which must accept it and attach the packed form."""
    s = _run_native("convert", (STRIDED, SS), x, _ss_target(x))
    assert isinstance(s.packed, CusparseLtPacked)
    return s


@st.composite
def weights(draw: st.DrawFn) -> tuple[str, np.ndarray]:
    dtype = draw(st.sampled_from(_dtypes()))
    p = PATTERNS[dtype]
    rows, cols = p.min_rows * draw(st.integers(1, 2)), p.min_cols * draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return dtype, random_pattern(rng, rows, cols, dtype, unit=True)


def _activations(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).integers(-2, 3, size=shape).astype(np.float64)


def _shaped(a: np.ndarray, dtype: str, form: str) -> Any:
    """The CuPy matrix ``a`` in memory form ``form`` (its values do not change)."""
    cp = _cp()
    x = _device(a, dtype)
    if form == "fortran":
        return cp.asfortranarray(x)
    if form == "strided":
        wide = cp.zeros((x.shape[0], 2 * x.shape[1]), dtype=x.dtype)
        wide[:, ::2] = x
        return wide[:, ::2]
    if form == "unaligned":
        flat = cp.zeros(x.size + 1, dtype=x.dtype)
        view = flat[1:].reshape(x.shape)
        view[...] = x
        return view
    return x


FORMS = ["c", "fortran", "strided", "unaligned"]


@gpu
@EXAMPLES
@given(w=weights())
def test_conversion_attaches_the_packed_form(w: tuple[str, np.ndarray]) -> None:
    dtype, dense = w
    x = _device(dense, dtype)
    s = _convert(x)
    ref = _run_generic("convert", (STRIDED, SS), x, _ss_target(x))
    for mine, theirs in ((s.values(), ref.values()), (s.indices(), ref.indices())):
        np.testing.assert_array_equal(_host(mine), _host(theirs))
    np.testing.assert_array_equal(_host(xs.to_dense(s)), dense)
    packed = s.packed
    assert packed.shape == dense.shape and packed.dtype == dtype and packed.device_id == x.device.id
    assert packed.buffer.dtype == _cp().uint8 and packed.buffer.size > 0
    assert s.t().packed is packed
    # the public function reaches the same kernel
    assert isinstance(xs.to_sparse_semi_structured(x).packed, CusparseLtPacked)


@gpu
@EXAMPLES
@given(w=weights(), layout=st.sampled_from([COO, xs.sparse_csr, xs.sparse_bsr]))
def test_conversion_from_sparse_layouts(w: tuple[str, np.ndarray], layout: xs.Layout) -> None:
    dtype, dense = w
    x = _device(dense, dtype)
    a = xs.to_sparse(x, layout=layout, blocksize=(2, 4) if layout is xs.sparse_bsr else None)
    s = _run_native("convert", (layout, SS), a, _ss_target(a))
    assert isinstance(s.packed, CusparseLtPacked)
    np.testing.assert_array_equal(_host(xs.to_dense(s)), dense)
    expected = _convert(x)
    np.testing.assert_array_equal(_host(s.indices()), _host(expected.indices()))
    # the two packed forms describe the same matrix: their products agree
    b = _device(_activations(0, (dense.shape[1], 16)), dtype)
    np.testing.assert_array_equal(_host(_run_native("matmul", (SS, STRIDED), s, b)), _host(_run_native("matmul", (SS, STRIDED), expected, b)))


@gpu
@EXAMPLES
@given(w=weights(), n=st.sampled_from([1, 3, 8, 16, 40]), form=st.sampled_from([*FORMS, "vector", "batched"]), seed=st.integers(0, 2**32 - 1))
def test_sparse_times_dense(w: tuple[str, np.ndarray], n: int, form: str, seed: int) -> None:
    dtype, dense = w
    s = _convert(_device(dense, dtype))
    k = dense.shape[1]
    if form == "vector":
        host = _activations(seed, (k,))
        b = _device(host, dtype)
    elif form == "batched":
        host = _activations(seed, (2, k, n))
        b = _device(host, dtype)
    else:
        host = _activations(seed, (k, n))
        b = _shaped(host, dtype, form)
    result = _run_native("matmul", (SS, STRIDED), s, b)
    assert result.dtype == b.dtype and result.flags.c_contiguous and tuple(result.shape) == (dense @ host).shape
    np.testing.assert_array_equal(_host(result), _expected(dense @ host, dtype))
    np.testing.assert_array_equal(_host(result), _host(_run_generic("matmul", (SS, STRIDED), s, b)))


@gpu
@EXAMPLES
@given(w=weights(), m=st.sampled_from([1, 3, 16, 17, 64]), form=st.sampled_from([*FORMS, "vector", "batched"]), seed=st.integers(0, 2**32 - 1))
def test_dense_times_transposed_sparse(w: tuple[str, np.ndarray], m: int, form: str, seed: int) -> None:
    dtype, dense = w
    s = _convert(_device(dense, dtype)).t()
    k = dense.shape[1]
    if form == "vector":
        host = _activations(seed, (k,))
        a = _device(host, dtype)
    elif form == "batched":
        host = _activations(seed, (2, m, k))
        a = _device(host, dtype)
    else:
        host = _activations(seed, (m, k))
        a = _shaped(host, dtype, form)
    result = _run_native("matmul", (STRIDED, SS), a, s)
    assert result.dtype == a.dtype and tuple(result.shape) == (host @ dense.T).shape
    if result.ndim == 2 and m % 16 == 0 and m:
        # no padding: the transpose of cuSPARSELt's row-major product, not a copy into row order
        assert result.flags.f_contiguous
    np.testing.assert_array_equal(_host(result), _expected(host @ dense.T, dtype))
    np.testing.assert_array_equal(_host(result), _host(_run_generic("matmul", (STRIDED, SS), a, s)))


@gpu
@EXAMPLES
@given(w=weights(), m=st.sampled_from([1, 5, 32]), scalars=st.sampled_from(SCALARS), vector_bias=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_addmm_both_orientations(w: tuple[str, np.ndarray], m: int, scalars: tuple[int, int], vector_bias: bool, seed: int) -> None:
    dtype, dense = w
    beta, alpha = scalars
    s = _convert(_device(dense, dtype))
    rows, k = dense.shape
    # the linear case: addmm(bias, a, s.t()) = beta * bias + alpha * a @ W.T
    a_host = _activations(seed, (m, k))
    bias_host = _activations(seed + 1, (rows,) if vector_bias else (m, rows))
    a, bias = _device(a_host, dtype), _device(bias_host, dtype)
    result = _run_native("addmm", (STRIDED, STRIDED, SS), bias, a, s.t(), beta, alpha)
    expected = _expected(beta * bias_host + alpha * (a_host @ dense.T), dtype)
    np.testing.assert_array_equal(_host(result), expected)
    np.testing.assert_array_equal(_host(result), _host(_run_generic("addmm", (STRIDED, STRIDED, SS), bias, a, s.t(), beta, alpha)))
    # S @ B with an input: beta * input + alpha * W @ b
    b_host = _activations(seed + 2, (k, m))
    input_host = _activations(seed + 3, (rows, m))
    b, input = _device(b_host, dtype), _device(input_host, dtype)
    result = _run_native("addmm", (STRIDED, SS, STRIDED), input, s, b, beta, alpha)
    np.testing.assert_array_equal(_host(result), _expected(beta * input_host + alpha * (dense @ b_host), dtype))


@gpu
@EXAMPLES
@given(w=weights(), lead=st.sampled_from([(1,), (7,), (2, 5)]), with_bias=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_linear_runs_the_packed_product(w: tuple[str, np.ndarray], lead: tuple[int, ...], with_bias: bool, seed: int) -> None:
    dtype, dense = w
    rows, k = dense.shape
    s = xs.to_sparse_semi_structured(_device(dense, dtype))
    assert isinstance(s.packed, CusparseLtPacked)
    x_host = _activations(seed, (*lead, k))
    bias_host = _activations(seed + 1, (rows,)) if with_bias else None
    calls = []
    original = lt_kernels._spmm

    def counting(*args: Any) -> Any:
        calls.append(args[3])
        return original(*args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lt_kernels, "_spmm", counting)
        y = xs.linear(_device(x_host, dtype), s, None if bias_host is None else _device(bias_host, dtype))
    assert len(calls) == 1, "linear did not run the cuSPARSELt product"
    expected = x_host @ dense.T + (0 if bias_host is None else bias_host)
    assert tuple(y.shape) == (*lead, rows)
    np.testing.assert_array_equal(_host(y), _expected(expected, dtype))


@gpu
def test_the_plan_memo_searches_once_per_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    dense = random_pattern(np.random.default_rng(0), 64, 128, "float16", unit=True)
    s = _convert(_device(dense, "float16"))
    searches = []
    original = lt_kernels._search

    def counting(*args: Any) -> Any:
        searches.append(args[4])
        return original(*args)

    monkeypatch.setattr(lt_kernels, "_search", counting)
    a = _device(_activations(1, (32, 128)), "float16")
    first = xs.matmul(a, s.t())
    second = xs.matmul(a, s.t())
    assert searches == [32]
    np.testing.assert_array_equal(_host(first), _host(second))
    choice = s.packed.planned(plan_key(32, True))
    assert choice is not None and isinstance(choice.alg_id, int)
    assert all(name in lt_kernels._SPLIT_K_ATTRIBUTES and value > 0 for name, value in choice.split_k), choice
    xs.matmul(_device(_activations(2, (48, 128)), "float16"), s.t())
    assert searches == [32, 48]
    # one plan kept per product shape, reused by the later products of that shape
    assert set(s.packed._made) == {plan_key(32, True), plan_key(48, True)}


@gpu
def test_a_non_default_stream() -> None:
    cp = _cp()
    dense = random_pattern(np.random.default_rng(1), 64, 64, "float16", unit=True)
    host = _activations(3, (20, 64))
    with cp.cuda.Stream(non_blocking=True):
        s = _convert(_device(dense, "float16"))
        y = _run_native("matmul", (STRIDED, SS), _device(host, "float16"), s.t())
        observed = _host(y)
    np.testing.assert_array_equal(observed, host @ dense.T)


@gpu
def test_int8_is_exact_at_the_longest_rows_it_takes() -> None:
    rng = np.random.default_rng(5)
    mask = random_pattern(rng, 128, 2048, "int8", unit=True) != 0
    dense = np.where(mask, rng.choice([-128, 127], size=mask.shape), 0).astype(np.float64)
    host = rng.choice([-128, 127], size=(16, 2048)).astype(np.float64)
    s = _convert(_device(dense, "int8"))
    a = _device(host, "int8")
    result = _run_native("matmul", (STRIDED, SS), a, s.t())
    np.testing.assert_array_equal(_host(result), _expected(host @ dense.T, "int8"))
    np.testing.assert_array_equal(_host(result), _host(_run_generic("matmul", (STRIDED, SS), a, s.t())))


@gpu
def test_what_is_declined_still_gets_the_generic_answer() -> None:
    cp = _cp()
    dense = random_pattern(np.random.default_rng(2), 64, 64, "float16", unit=True)
    s = xs.to_sparse_semi_structured(_device(dense, "float16"))
    b = _device(_activations(4, (64, 8)), "float16")
    # A @ S and S.t() @ B contract along the pattern's other dimension
    assert "non-contracted" in _reason("matmul", (STRIDED, SS), _xp(), b.T, s)
    np.testing.assert_array_equal(_host(xs.matmul(b.T, s)), _activations(4, (64, 8)).T @ dense)
    np.testing.assert_array_equal(_host(xs.matmul(s.t(), b)), dense.T @ _activations(4, (64, 8)))
    # operands of two dtypes are promoted by the generic kernel
    b32 = b.astype(cp.float32)
    assert "one dtype" in _reason("matmul", (SS, STRIDED), _xp(), s, b32)
    assert xs.matmul(s, b32).dtype == cp.float32
    # float32 (1:2) stays on the generic kernels
    f = random_pattern(np.random.default_rng(3), 32, 32, "float32", unit=True)
    sf = xs.to_sparse_semi_structured(_device(f, "float32"))
    assert sf.packed is None
    np.testing.assert_array_equal(_host(xs.to_dense(sf)), f)
    # int8 rows longer than 2048 columns
    long = xs.to_sparse_semi_structured(_device(random_pattern(np.random.default_rng(4), 128, 4096, "int8", unit=True), "int8"))
    assert "limited to 2048 columns" in _reason("matmul", (STRIDED, SS), _xp(), cp.ones((16, 4096), dtype=cp.int8), long.t())


@gpu
def test_the_cuda_type_constants_match_cupys() -> None:
    runtime = _cp().cuda.runtime
    assert lt_kernels._TYPES["float16"].value == runtime.CUDA_R_16F
    assert lt_kernels._TYPES["bfloat16"].value == runtime.CUDA_R_16BF
    assert lt_kernels._TYPES["int8"].value == runtime.CUDA_R_8I
    lt = lt_kernels._cusparselt()
    for t in lt_kernels._TYPES.values():
        assert isinstance(getattr(lt, t.compute), int)
