"""The torch CUDA path of the semi-structured (2:4) layout: the packed encoding and the products that read it.

``xs.to_sparse_semi_structured`` of a CUDA tensor keeps, next to the portable reference encoding, torch's
``SparseSemiStructuredTensor`` (cuSPARSELt, or CUTLASS on compute capability 8.x) in the array's ``packed``
slot; ``S @ B``, ``A @ S.t()``, ``addmm`` and ``linear`` then run torch's semi-structured kernels. Every test
asserts that ``packed`` was built and that the torch kernel is the one the dispatcher runs (the first
kernel, in resolution order, whose ``supports`` accepts the arguments), and compares the result with the
dense product on the GPU and with the generic (gather) kernel.

The values are small integers, so that every sum is exact in every dtype (int8 included: the contraction
is short enough that no result leaves int8's range, where the hardware's conversion and the generic
kernel's wrap-around could differ) and the comparisons are exact; one test uses random floats with a
float16 tolerance. The whole module is skipped without a CUDA device.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip(
        "torch finds no CUDA device: the packed (cuSPARSELt, CUTLASS) path of the semi-structured layout needs one",
        allow_module_level=True,
    )

from test_semi_structured import SEMI, STRIDED, _first_accepting, _generic_twin, _reason, _small_ints, random_pattern  # noqa: E402

import xsparse as xs  # noqa: E402
from xsparse import dispatch  # noqa: E402
from xsparse.backends.torch import semi_structured as native  # noqa: E402
from xsparse.formats._semi_structured import PATTERNS, SemiStructuredArray  # noqa: E402

SOME = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CUDA = torch.device("cuda")
XP = xs.get_backend("torch").load()
CAPABILITY = torch.cuda.get_device_capability(CUDA)


def _packer_reason(dtype: str) -> str | None:
    reason: str | None = native._packer(getattr(torch, dtype), CUDA)[1]
    return reason


# the dtypes of the layout that torch packs on this GPU (float32 depends on the torch version and the GPU)
PACKED = [d for d in PATTERNS if _packer_reason(d) is None]
UNPACKED = [d for d in PATTERNS if d not in PACKED]


def _weight(seed: int, rows: int, cols: int, dtype: str) -> Any:
    return torch.tensor(random_pattern(np.random.default_rng(seed), rows, cols, dtype, unit=True)).to(getattr(torch, dtype)).to(CUDA)


def _ints(seed: int, shape: tuple[int, ...], dtype: Any) -> Any:
    return torch.tensor(_small_ints(seed, shape)).to(dtype).to(CUDA)


def _dense_product(x: Any, y: Any) -> Any:
    """``x @ y`` on the GPU; int8, which torch's dense CUDA matmul lacks, exactly through int64 on the CPU."""
    if x.dtype == torch.int8:
        return (x.cpu().long() @ y.cpu().long()).to(torch.int8).to(CUDA)
    return x @ y


def _generic(op: str, layouts: tuple[Any, ...], *args: Any) -> Any:
    """The generic kernel's result: on the GPU, but int8 on the CPU (torch's CUDA bmm has no int8)."""
    kernel = _generic_twin(op, layouts)
    if not any(getattr(a, "dtype", None) == torch.int8 for a in args):
        return kernel.func(XP, *args)
    return kernel.func(XP, *(_on_cpu(a) for a in args)).to(CUDA)


def _on_cpu(a: Any) -> Any:
    if isinstance(a, SemiStructuredArray):
        return SemiStructuredArray(a.values().cpu(), a.indices().cpu(), a.shape, backend=a._backend, xp=XP, transposed=a.transposed)
    return a.cpu() if isinstance(a, torch.Tensor) else a


@pytest.fixture
def tf32() -> Any:
    """torch's float32 matmul precision 'high' for the test (the packed float32 kernels compute in TF32)."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    yield
    torch.set_float32_matmul_precision(previous)


def test_float16_packs_on_this_gpu() -> None:
    if CAPABILITY < (8, 0):
        pytest.skip(f"compute capability {CAPABILITY} has no sparse tensor cores")
    assert "float16" in PACKED, _packer_reason("float16")
    assert "bfloat16" in PACKED and "int8" in PACKED, (_packer_reason("bfloat16"), _packer_reason("int8"))


# -- conversions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", list(PATTERNS))
def test_the_conversion_builds_both_encodings(dtype: str) -> None:
    p = PATTERNS[dtype]
    x = _weight(1, 2 * p.min_rows, p.min_cols, dtype)
    s = xs.to_sparse_semi_structured(x)
    reference = xs.to_sparse_semi_structured(x.cpu())
    assert torch.equal(s.values().cpu(), reference.values()) and torch.equal(s.indices().cpu(), reference.indices())
    if dtype in UNPACKED:
        assert s.packed is None
        assert re.match(r"^no torch semi-structured kernel packs torch\.\w+ here: ", _reason("convert", (STRIDED, SEMI), XP, x, _target(x)))
        return
    assert isinstance(s.packed, torch.sparse.SparseSemiStructuredTensor), type(s.packed)
    assert tuple(s.packed.shape) == tuple(x.shape) and s.packed.dtype == x.dtype and s.packed.device == x.device
    assert _first_accepting("convert", (STRIDED, SEMI), XP, x, _target(x)).name == "_convert_strided_semi_structured_torch"
    with torch.no_grad():
        if dtype == "int8":
            # torch's to_dense multiplies by a row-major identity, which cuSPARSELt refuses for int8 (its
            # dense operand must be column-major); the identity on the other side takes that path, exactly
            # (one product per element)
            dense = torch.mm(torch.eye(x.shape[1], dtype=torch.int8, device=CUDA), s.packed.t()).t()
        else:
            dense = s.packed.to_dense()
        assert torch.equal(dense, x), "torch's encoding holds the same matrix"
    assert s.t().packed is s.packed
    for source in (xs.to_sparse_coo(x), xs.to_sparse_csr(x)):
        t = xs.to_sparse_semi_structured(source)
        assert t.packed is not None and torch.equal(t.indices(), s.indices()) and torch.equal(t.values(), s.values())


def _target(x: Any) -> Any:
    from xsparse.formats._spec import Target

    return Target(SEMI, xs.get_backend("torch"), XP, tuple(x.shape), 2, 0, (1, 1), torch.int64, 0)


def test_a_broken_pattern_raises_before_anything_is_packed() -> None:
    x = torch.zeros(64, 64, dtype=torch.float16, device=CUDA)
    x[3, 20:23] = 1
    with pytest.raises(xs.InvariantError, match=r"^invariant ss\.11 violated: to_sparse_semi_structured: row 3, group 5 \(columns 20\.\.23\) holds 3"):
        xs.to_sparse_semi_structured(x)
    with pytest.raises(xs.InvariantError, match=r"^invariant ss\.11 violated: .*row 3, group 5"):
        xs.to_sparse_semi_structured(xs.to_sparse_csr(x))


def test_autograd_keeps_the_generic_path() -> None:
    x = _weight(2, 64, 64, "float16").requires_grad_()
    s = xs.to_sparse_semi_structured(x)
    assert s.packed is None and s.values().requires_grad
    assert re.match(r"^the array requires grad, and torch's packed encoding records no autograd", _reason("convert", (STRIDED, SEMI), XP, x, _target(x)))
    (s @ torch.ones(64, 3, dtype=torch.float16, device=CUDA)).sum().backward()
    assert x.grad is not None
    d = s.detach()
    assert d.packed is None and not d.values().requires_grad
    with torch.no_grad():
        assert xs.to_sparse_semi_structured(x).packed is not None or "float16" in UNPACKED


# -- products ------------------------------------------------------------------------------------------


@SOME
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), n=st.integers(1, 70), lead=st.sampled_from([(), (3,), (2, 5)]))
def test_the_packed_products_equal_the_dense_and_generic_ones(data: st.DataObject, seed: int, n: int, lead: tuple[int, ...]) -> None:
    if not PACKED:
        pytest.skip(f"torch packs no semi-structured dtype on this GPU: {_packer_reason('float16')}")
    dtype = data.draw(st.sampled_from(PACKED))
    p = PATTERNS[dtype]
    rows = p.min_rows * data.draw(st.integers(1, 4))
    # int8: one contraction of at most 64 kept unit values, inside int8's range (see the module docstring)
    cols = p.min_cols * (1 if dtype == "int8" else data.draw(st.integers(1, 2)))
    tdt = getattr(torch, dtype)
    w = _weight(seed, rows, cols, dtype)
    s = xs.to_sparse_semi_structured(w)
    assert s.packed is not None
    b, a, a2, bias = _ints(seed + 1, (cols, n), tdt), _ints(seed + 2, (*lead, cols), tdt), _ints(seed + 3, (n, cols), tdt), _ints(seed + 4, (rows,), tdt)
    wt = w.T
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        # the products torch computes, with the dense operand's rows or columns (n) rarely a multiple of
        # torch's tile, so that torch pads it
        cases = [
            ("matmul", (SEMI, STRIDED), (s, b), _dense_product(w, b)),
            ("matmul", (SEMI, STRIDED), (s, b[:, 0]), _dense_product(w, b)[:, 0]),
            ("matmul", (STRIDED, SEMI), (a, s.t()), _dense_product(a.reshape(-1, cols), wt).reshape(*lead, rows)),
            ("matmul", (STRIDED, SEMI), (a2[0], s.t()), _dense_product(a2, wt)[0]),
            ("addmm", (STRIDED, STRIDED, SEMI), (bias, a2, s.t(), 1, 1), _dense_product(a2, wt) + bias),
            ("addmm", (STRIDED, STRIDED, SEMI), (bias, a2, s.t(), 2, -1), 2 * bias - _dense_product(a2, wt)),
            ("addmm", (STRIDED, SEMI, STRIDED), (b[:1, :].reshape(-1), s, b, 1, 1), _dense_product(w, b) + b[:1, :].reshape(-1)),
        ]
        # torch's packed int8 products decline until a GPU run settles saturation (docs/semi_structured.md)
        native = "torch" if dtype != "int8" else None
        for op, layouts, args, want in cases:
            kernel = _first_accepting(op, layouts, XP, *args)
            assert kernel.backend == native, (op, layouts, kernel.name)
            got = dispatch.call(op, layouts, "torch", XP, *args)
            assert got.device == want.device and got.dtype == want.dtype and tuple(got.shape) == tuple(want.shape), (op, layouts)
            assert torch.equal(got, want), (op, layouts, dtype)
            assert torch.equal(got, _generic(op, layouts, *args)), (op, layouts, dtype)
        # xs.linear, with and without a bias: addmm(bias, input, weight.t()) and input @ weight.t()
        y = xs.linear(a, s, bias)
        assert _first_accepting("addmm", (STRIDED, STRIDED, SEMI), XP, bias, a.reshape(-1, cols), s.t(), 1, 1).backend == native
        want = _dense_product(a.reshape(-1, cols), wt).reshape(*lead, rows)
        assert torch.equal(y, want + bias) and torch.equal(xs.linear(a, s), want)
        assert torch.equal(s @ b, _dense_product(w, b)) and torch.equal(xs.mm(a2, s.t()), _dense_product(a2, wt))
    finally:
        torch.set_float32_matmul_precision(previous)


def test_random_float16_weights_within_float16_tolerance() -> None:
    if "float16" not in PACKED:
        pytest.skip(f"torch packs no float16 here: {_packer_reason('float16')}")
    g = torch.Generator(device=CUDA).manual_seed(0)
    dense = torch.randn(256, 512, device=CUDA, generator=g, dtype=torch.float16)
    mask = torch.tensor([1, 1, 0, 0], dtype=torch.bool, device=CUDA).tile(256, 128)
    w = dense * mask
    x = torch.randn(1000, 512, device=CUDA, generator=g, dtype=torch.float16)
    bias = torch.randn(256, device=CUDA, generator=g, dtype=torch.float16)
    s = xs.to_sparse_semi_structured(w)
    assert s.packed is not None
    want = torch.nn.functional.linear(x.float(), w.float(), bias.float())
    for got in (xs.linear(x, s, bias), xs.linear(x, s) + bias, (s @ x.T).T + bias):
        torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=5e-2)
    generic = _generic_twin("addmm", (STRIDED, STRIDED, SEMI)).func(XP, bias, x, s.t(), 1, 1)
    torch.testing.assert_close(xs.linear(x, s, bias), generic, rtol=1e-2, atol=5e-2)


def test_the_orientations_torch_does_not_compute_run_the_generic_kernel() -> None:
    if "float16" not in PACKED:
        pytest.skip(f"torch packs no float16 here: {_packer_reason('float16')}")
    w = _weight(5, 64, 128, "float16")
    s = xs.to_sparse_semi_structured(w)
    a = _ints(6, (3, 64), torch.float16)
    assert _first_accepting("matmul", (STRIDED, SEMI), XP, a, s).kind == "generic"
    assert re.match(r"^A @ S contracts the dimension along which the 2:4 pattern does not run", _reason("matmul", (STRIDED, SEMI), XP, a, s))
    assert torch.equal(xs.matmul(a, s), a @ w)
    assert _first_accepting("matmul", (SEMI, STRIDED), XP, s.t(), a.T).kind == "generic"
    assert torch.equal(xs.matmul(s.t(), a.T), w.T @ a.T)
    # operands of two dtypes: the generic kernel promotes
    b = _ints(7, (128, 5), torch.float32)
    assert _first_accepting("matmul", (SEMI, STRIDED), XP, s, b).kind == "generic"
    assert torch.equal(xs.matmul(s, b), w.float() @ b)


def test_detach_keeps_the_packed_encoding_and_to_backend_drops_it() -> None:
    if "float16" not in PACKED:
        pytest.skip(f"torch packs no float16 here: {_packer_reason('float16')}")
    w = _weight(8, 64, 64, "float16")
    s = xs.to_sparse_semi_structured(w)
    d = s.detach()
    assert d.packed is not None and d.packed is not s.packed and not d.packed.requires_grad
    b = _ints(9, (64, 4), torch.float16)
    assert _first_accepting("matmul", (SEMI, STRIDED), XP, d, b).backend == "torch" and torch.equal(d @ b, w @ b)
    moved = xs.to_backend(s, "numpy")
    assert moved.packed is None and np.array_equal(moved.to_dense(), w.cpu().numpy())


def test_float32_runs_packed_only_when_tf32_is_allowed(tf32: Any) -> None:
    if "float32" not in PACKED:
        pytest.skip(f"torch packs no float32 here: {_packer_reason('float32')}")
    w = _weight(10, 64, 64, "float32")
    s = xs.to_sparse_semi_structured(w)
    b = _ints(11, (64, 3), torch.float32)
    assert _first_accepting("matmul", (SEMI, STRIDED), XP, s, b).backend == "torch"
    assert torch.equal(s @ b, w @ b)
    torch.set_float32_matmul_precision("highest")
    assert re.match(r"^torch's packed float32 kernels compute in TF32", _reason("matmul", (SEMI, STRIDED), XP, s, b))
    assert torch.equal(s @ b, w @ b), "the generic kernel, in full float32 precision"
