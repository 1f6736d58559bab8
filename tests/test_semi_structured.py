"""The semi-structured (2:4) layout: encoding, round trips, conversions, products, transposes, errors.

Random patterns are drawn per dtype of torch's table (float16, bfloat16, int8 keep 2 of 4; float32 keeps
1 of 2) on every backend that has the dtype; every group keeps anything from none to all of what the
pattern allows. Products are compared with the dense product of the same backend: the values are small
integers, so that every partial sum is exact in every dtype (int8 wraps the same way on both sides), and
the comparison is exact.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from conftest import backend_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_errors import MESSAGE_SHAPE

import xsparse as xs
from xsparse import dispatch
from xsparse._semi_structured import detach
from xsparse.formats._semi_structured import PATTERNS, SemiStructuredArray, pattern_for, unpack_metadata
from xsparse.testing import assert_sparse_equal, check_invariants, to_numpy

FEW = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SOME = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

CPU_BACKENDS = backend_params(["numpy", "torch", "array_api_strict"])
TORCH = backend_params(["torch"])


def _ns(backend: str) -> Any:
    return xs.get_backend(backend).namespace()


def _dtype_names(xp: Any) -> list[str]:
    """The dtypes of torch's table that the namespace has (array-api-strict has no float16, NumPy no bfloat16)."""
    return [name for name in PATTERNS if hasattr(xp, name)]


def _as(xp: Any, a: np.ndarray, dtype: str) -> Any:
    """A backend array of ``dtype`` with the (small, integer) values of ``a``."""
    return xp.astype(xp.asarray(a.astype(np.float32)), getattr(xp, dtype))


def _np(x: Any) -> np.ndarray:
    """A float64 NumPy copy (bfloat16 has no NumPy dtype)."""
    if hasattr(x, "detach"):
        x = x.detach().float()
    return to_numpy(x).astype(np.float64)


def random_pattern(rng: np.random.Generator, rows: int, cols: int, dtype: str, *, unit: bool = False) -> np.ndarray:
    """A dense ``(rows, cols)`` float64 array whose every group keeps between 0 and ``kept`` non-zero elements."""
    p = PATTERNS[dtype]
    groups = cols // p.group
    counts = rng.integers(0, p.kept + 1, size=(rows, groups))
    # a random permutation of each group's positions; its first `count` positions are specified
    order = np.argsort(rng.random((rows, groups, p.group)), axis=-1)
    ranks = np.argsort(order, axis=-1)
    mask = ranks < counts[:, :, None]
    magnitude = 1 if unit else rng.integers(1, 3, size=mask.shape)
    values = magnitude * rng.choice([-1, 1], size=mask.shape)
    return (values * mask).reshape(rows, cols).astype(np.float64)


@st.composite
def semi_cases(draw: st.DrawFn, xp: Any, *, unit: bool = False) -> tuple[str, np.ndarray]:
    dtype = draw(st.sampled_from(_dtype_names(xp)))
    p = PATTERNS[dtype]
    rows = p.min_rows * draw(st.integers(1, 2))
    cols = p.min_cols * draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return dtype, random_pattern(rng, rows, cols, dtype, unit=unit)


def _small_ints(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).integers(-1, 2, size=shape).astype(np.float64)


# -- the encoding ------------------------------------------------------------------------------------------

# The nibbles of the comment in formats/_semi_structured.py: specified positions -> (i0, i1) -> nibble.
TWO_FOUR = [
    ((0, 1), 0b0100), ((0, 2), 0b1000), ((0, 3), 0b1100), ((1, 2), 0b1001), ((1, 3), 0b1101), ((2, 3), 0b1110),
    ((), 0b1110), ((3,), 0b1110), ((2,), 0b1110), ((1,), 0b1001), ((0,), 0b1000),
]  # fmt: skip


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_every_2_4_nibble_of_the_comment(backend: str) -> None:
    xp = _ns(backend)
    row = np.zeros(128)
    for g, (specified, _) in enumerate(TWO_FOUR):
        for q in specified:
            row[4 * g + q] = 1 + q
    s = xs.to_sparse_semi_structured(_as(xp, np.tile(row, (128, 1)), "int8"))
    nibbles = to_numpy(unpack_metadata(xp, s.indices(), s.pattern))[0, : len(TWO_FOUR)]
    assert nibbles.tolist() == [n for _, n in TWO_FOUR]
    kept = _np(s.values())[0, : 2 * len(TWO_FOUR)].reshape(-1, 2)
    for (specified, nibble), pair in zip(TWO_FOUR, kept):
        positions = (nibble & 3, nibble >> 2)
        assert pair.tolist() == [1.0 + q if q in specified else 0.0 for q in positions]


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_1_2_nibbles_and_word_packing(backend: str) -> None:
    xp = _ns(backend)
    # pairs: element 0 kept, element 1 kept, empty; then 0b0100, 0b1110, 0b1110 in the low nibbles
    row = np.zeros(32)
    row[0], row[3] = 5, 7
    s = xs.to_sparse_semi_structured(_as(xp, np.tile(row, (32, 1)), "float32"))
    assert (s.indices().shape, str(s.indices().dtype).rsplit(".", 1)[-1]) == ((32, 4), "int16")
    word = int(to_numpy(s.indices())[0, 0]) & 0xFFFF
    assert [(word >> (4 * j)) & 0xF for j in range(4)] == [0b0100, 0b1110, 0b1110, 0b1110]
    assert _np(s.values())[0, :3].tolist() == [5.0, 7.0, 0.0]
    assert_sparse_equal(s, _as(xp, np.tile(row, (32, 1)), "float32"))


@pytest.mark.parametrize("backend", TORCH)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "float32"])
def test_same_nibbles_and_values_as_torch_cutlass(backend: str, dtype: str) -> None:
    """torch's CUTLASS metadata, with its tensor-core word interleave undone, is the portable encoding."""
    import torch
    from torch.sparse._semi_structured_conversions import (
        _calculate_meta_reordering_scatter_offsets,
        sparse_semi_structured_from_dense_cutlass,
    )

    p = PATTERNS[dtype]
    dense = torch.tensor(random_pattern(np.random.default_rng(7), p.min_rows, 2 * p.min_cols, dtype)).to(getattr(torch, dtype))
    values, reordered = sparse_semi_structured_from_dense_cutlass(dense)
    rows, words = reordered.shape
    offsets = _calculate_meta_reordering_scatter_offsets(rows, words, reordered.dtype, dense.device)
    metadata = reordered.reshape(-1)[offsets].reshape(rows, words)
    s = xs.to_sparse_semi_structured(dense)
    assert torch.equal(s.indices(), metadata)
    assert torch.equal(s.values(), values)


# -- the seed's examples and arithmetic --------------------------------------------------------------------


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_the_seed_construction_example(backend: str) -> None:
    """``torch.Tensor([0, 0, 1, 1]).tile((128, 32)).half()``: ones kept, metadata -4370 everywhere."""
    xp = _ns(backend)
    a = xp.tile(xp.asarray([0, 0, 1, 1], dtype=xp.float16), (128, 32))
    s = xs.to_sparse_semi_structured(a)
    assert s.shape == (128, 128) and not s.transposed
    assert tuple(s.values().shape) == (128, 64) and bool(xp.all(s.values() == 1))
    assert tuple(s.indices().shape) == (128, 8) and s.indices().dtype == xp.int16
    assert bool(xp.all(s.indices() == -4370))
    assert_sparse_equal(s, a)


def test_the_seed_16x16_tile_breaks_the_table() -> None:
    """The seed's prose calls its example a 16x16 tensor, which its own table (multiples of 64) rejects."""
    a = np.tile(np.asarray([0, 0, 1, 1], dtype=np.float16), (16, 4))
    with pytest.raises(xs.InvariantError, match=r"^invariant ss\.5 violated: .*positive multiple of 64 .*\(shape=\(16, 16\)\)\. Pad it with zeros to \(64, 64\)"):
        xs.to_sparse_semi_structured(a)


@pytest.mark.parametrize(
    ("dtype", "shape", "ratio"),
    [("float16", (64, 64), 9 / 16), ("int8", (128, 128), 10 / 16), ("float32", (32, 32), 9 / 16)],
)
def test_compression_ratio(dtype: str, shape: tuple[int, int], ratio: float) -> None:
    """M_sparse / M_dense = 1/2 + 1/e for 2:4 (the seed's formula); float32 (1:2) pays 4 bits per kept element."""
    s = xs.to_sparse_semi_structured(np.zeros(shape, dtype=dtype))
    sparse_bytes = s.values().nbytes + s.indices().nbytes
    assert sparse_bytes / (math.prod(shape) * np.dtype(dtype).itemsize) == ratio


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_the_seed_mm_and_linear_examples(backend: str) -> None:
    xp = _ns(backend)
    a = xp.tile(xp.asarray([0, 0, 1, 1], dtype=xp.float16), (64, 16))
    b = xp.asarray(np.random.default_rng(0).random((64, 64)), dtype=xp.float16)
    a_sparse = xs.to_sparse_semi_structured(a)
    np.testing.assert_allclose(_np(a_sparse @ b), _np(a @ b), rtol=1e-3)
    # nn.Linear(64, 64) with its weight masked to the pattern
    rng = np.random.default_rng(1)
    x = xp.asarray(rng.random((64, 64)), dtype=xp.float16)
    weight = xp.asarray(rng.random((64, 64)) - 0.5, dtype=xp.float16) * a
    bias = xp.asarray(rng.random(64), dtype=xp.float16)
    y = xs.linear(x, xs.to_sparse_semi_structured(weight), bias)
    np.testing.assert_allclose(_np(y), _np(x @ xp.matrix_transpose(weight) + bias), rtol=1e-2, atol=1e-2)


# -- round trips and conversions ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@SOME
@given(data=st.data())
def test_round_trip_through_dense(backend: str, data: st.DataObject) -> None:
    xp = _ns(backend)
    dtype, dense = data.draw(semi_cases(xp))
    x = _as(xp, dense, dtype)
    s = xs.to_sparse_semi_structured(x)
    p = pattern_for("test", x.dtype)
    rows, cols = dense.shape
    assert isinstance(s, SemiStructuredArray) and s.layout is xs.sparse_semi_structured
    assert tuple(s.values().shape) == (rows, cols // 2) and s.values().dtype == x.dtype
    assert tuple(s.indices().shape) == (rows, cols // p.columns_per_word)
    assert s.indices().dtype == getattr(xp, p.metadata_dtype)
    assert s.nnz == rows * cols // 2 and (s.sparse_dim(), s.dense_dim()) == (2, 0)
    assert_sparse_equal(s, x)
    assert_sparse_equal(xs.to_dense(s), x)
    again = xs.to_sparse_semi_structured(s.to_dense())
    assert (to_numpy(again.indices()) == to_numpy(s.indices())).all()
    assert xs.to_sparse_semi_structured(s) is s


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@FEW
@given(data=st.data())
def test_conversions_to_and_from_coo_and_compressed(backend: str, data: st.DataObject) -> None:
    xp = _ns(backend)
    dtype, dense = data.draw(semi_cases(xp))
    x = _as(xp, dense, dtype)
    s = xs.to_sparse_semi_structured(x)
    for to in (xs.to_sparse_coo, xs.to_sparse_csr, xs.to_sparse_csc, lambda a: xs.to_sparse_bsr(a, (2, 4))):
        c = to(s)
        assert_sparse_equal(c, x)
        if to is not xs.to_sparse_coo:
            assert_sparse_equal(c, to(x)), "the same elements as the conversion of the dense array"
        # the way back drops the explicit zeros (padding, in-block zeros) and pads again: the same components
        back = xs.to_sparse_semi_structured(c)
        assert (to_numpy(back.indices()) == to_numpy(s.indices())).all()
        assert (_np(back.values()) == _np(s.values())).all()
        # the transposed array converts to the transposed matrix
        assert_sparse_equal(to(s.t()), xp.matrix_transpose(x))
    # every kept value, padding included, is a specified element of the COO array
    assert xs.to_sparse_coo(s).nnz == s.nnz == xs.to_sparse_csr(s).nnz
    # from sparse arrays that specify only the non-zero elements
    for source in (xs.to_sparse_coo(x), xs.to_sparse_csr(x), xs.to_sparse_csc(x)):
        t = xs.to_sparse_semi_structured(source)
        assert (to_numpy(t.indices()) == to_numpy(s.indices())).all()
        assert_sparse_equal(t, x)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_uncoalesced_coo_and_int32_indices(backend: str) -> None:
    xp = _ns(backend)
    # (0, 1) is given twice and sums to 3; (0, 2) once
    coo = xs.sparse_coo_array(xp.asarray([[0, 0, 0], [1, 2, 1]], dtype=xp.int32), xp.asarray([1.0, 4.0, 2.0], dtype=xp.float32), (32, 32))
    s = xs.to_sparse_semi_structured(xs.to_sparse_coo(xs.to_dense(coo)))
    t = xs.to_sparse_semi_structured(coo)
    assert _np(t.values())[0, :3].tolist() == [3.0, 4.0, 0.0]  # 1:2: (0, 1) keeps pair 0, (0, 2) pair 1, pair 2 is padding
    assert (to_numpy(t.indices()) == to_numpy(s.indices())).all()
    assert xs.to_sparse_coo(t, index_dtype="int32").index_dtype == xp.int32


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_fill_value_is_kept(backend: str) -> None:
    xp = _ns(backend)
    dense = np.ones((32, 32))
    dense[:, ::2] = 5
    x = _as(xp, dense, "float32")
    coo = xs.to_sparse_coo(x, fill_value=1.0)
    s = xs.to_sparse_semi_structured(coo)
    assert s.fill_value == 1.0
    assert bool(xp.all(s.values() == 5))
    assert_sparse_equal(s, x)
    assert xs.to_sparse_csr(s).fill_value == 1.0
    assert "fill_value=1.0" in repr(s)


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_to_backend(backend: str) -> None:
    xp = _ns(backend)
    x = _as(xp, random_pattern(np.random.default_rng(3), 64, 64, "float16"), "float16")
    s = xs.to_sparse_semi_structured(x)
    other = "torch" if backend == "numpy" else "numpy"
    moved = xs.to_backend(s.t(), other)
    assert moved.backend == other and moved.transposed and moved.shape == (64, 64)
    assert_sparse_equal(moved, xs.to_backend(xp.matrix_transpose(x), other))


# -- transposes, detach, repr -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_transpose_is_a_flag_on_shared_components(backend: str) -> None:
    xp = _ns(backend)
    x = _as(xp, random_pattern(np.random.default_rng(4), 32, 64, "float32"), "float32")
    s = xs.to_sparse_semi_structured(x)
    for t in (s.t(), s.T, s.mT, xs.matrix_transpose(s)):
        assert isinstance(t, SemiStructuredArray)
        assert t.transposed and t.shape == (64, 32) and t.stored_shape == (32, 64)
        assert t.values() is s.values() and t.indices() is s.indices()
        assert_sparse_equal(t, xp.matrix_transpose(x))
    back = s.t().t()
    assert not back.transposed and back.shape == s.shape and back.values() is s.values()
    assert "transposed=True" in repr(s.t()) and "transposed" not in repr(s)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_detach_is_the_array_itself_without_autograd(backend: str) -> None:
    xp = _ns(backend)
    s = xs.to_sparse_semi_structured(xp.zeros((32, 32), dtype=xp.float32))
    if backend == "torch":
        assert s.detach() is not s and s.detach().values() is not s.values()
        assert_sparse_equal(s.detach(), s.to_dense())
    else:
        assert s.detach() is s


@pytest.mark.parametrize("backend", TORCH)
def test_autograd_flows_through_the_values_and_detach_cuts_it(backend: str) -> None:
    import torch

    dense = torch.tensor(random_pattern(np.random.default_rng(5), 64, 64, "float16")).half().requires_grad_()
    s = xs.to_sparse_semi_structured(dense)
    assert s.values().requires_grad and not s.detach().values().requires_grad
    assert s.detach().indices() is s.indices()
    (s @ torch.ones(64, 2, dtype=torch.float16)).sum().backward()
    assert dense.grad is not None
    # d(sum(S @ ones))/dS = 2 at every kept position (padding included), 0 elsewhere
    kept = xs.to_dense(xs.to_sparse_semi_structured(torch.ones(64, 64, dtype=torch.float16) * (dense != 0)))
    assert bool(((dense.grad == 2) | (kept == 0)).all())


# -- products -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@SOME
@given(data=st.data(), n=st.integers(1, 5), seed=st.integers(0, 2**32 - 1))
def test_matmul_both_ways_and_both_orientations(backend: str, data: st.DataObject, n: int, seed: int) -> None:
    xp = _ns(backend)
    dtype, dense = data.draw(semi_cases(xp))
    x = _as(xp, dense, dtype)
    xt = xp.matrix_transpose(x)
    s = xs.to_sparse_semi_structured(x)
    rows, cols = dense.shape

    def check(got: Any, want: Any) -> None:
        assert tuple(got.shape) == tuple(want.shape) and got.dtype == want.dtype
        assert (_np(got) == _np(want)).all()

    b = _as(xp, _small_ints(seed, (cols, n)), dtype)
    a = _as(xp, _small_ints(seed + 1, (n, rows)), dtype)
    check(xs.matmul(s, b), x @ b)  # the pattern along the contraction: gather
    check(xs.matmul(a, s), a @ x)  # the pattern along the output: column lists
    bt = _as(xp, _small_ints(seed + 2, (rows, n)), dtype)
    at = _as(xp, _small_ints(seed + 3, (n, cols)), dtype)
    check(xs.matmul(s.t(), bt), xt @ bt)
    check(xs.matmul(at, s.t()), at @ xt)  # torch's mm(dense, sparse.t()), the linear case
    # vectors and batches
    v = _as(xp, _small_ints(seed + 4, (cols,)), dtype)
    check(xs.matmul(s, v), x @ v)
    check(xs.matmul(_as(xp, _small_ints(seed + 5, (rows,)), dtype), s), _as(xp, _small_ints(seed + 5, (rows,)), dtype) @ x)
    batch = _as(xp, _small_ints(seed + 6, (2, cols, n)), dtype)
    check(xs.matmul(s, batch), x @ batch)
    left = _as(xp, _small_ints(seed + 7, (2, 3, cols)), dtype)
    check(xs.matmul(left, s.t()), left @ xt)


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
def test_the_matmul_operator_and_mm_both_ways(backend: str) -> None:
    xp = _ns(backend)
    x = _as(xp, random_pattern(np.random.default_rng(6), 64, 64, "float16"), "float16")
    s = xs.to_sparse_semi_structured(x)
    b = _as(xp, _small_ints(0, (64, 3)), "float16")
    bt = xp.matrix_transpose(b)
    assert (_np(s @ b) == _np(x @ b)).all() and (_np(xs.mm(s, b)) == _np(x @ b)).all()
    assert (_np(bt @ s.t()) == _np(bt @ xp.matrix_transpose(x))).all()
    assert (_np(xs.mm(bt, s.t())) == _np(bt @ xp.matrix_transpose(x))).all()
    assert (_np(bt @ s) == _np(bt @ x)).all()


@pytest.mark.parametrize("backend", backend_params(["array_api_strict"]))
def test_a_strict_array_on_the_left_of_the_operator(backend: str) -> None:
    """array-api-strict's ``__matmul__`` raises for a foreign operand instead of returning NotImplemented."""
    xp = _ns(backend)
    s = xs.to_sparse_semi_structured(xp.zeros((32, 32), dtype=xp.float32))
    a = xp.ones((2, 32), dtype=xp.float32)
    with pytest.raises(TypeError, match=r"^Expected Array or Python scalar; got <class 'xsparse\.formats\._semi_structured\.SemiStructuredArray'>$"):
        a @ s
    assert (_np(xs.matmul(a, s)) == 0).all() and (_np(s.t() @ xp.matrix_transpose(a)) == 0).all()


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_mixed_dtypes_promote_as_the_backend_does(backend: str) -> None:
    xp = _ns(backend)
    x = _as(xp, random_pattern(np.random.default_rng(8), 32, 32, "float32"), "float32")
    s = xs.to_sparse_semi_structured(x)
    b = xp.asarray(_small_ints(1, (32, 2)), dtype=xp.float64)
    got = xs.matmul(s, b)
    assert got.dtype == xp.float64 and (_np(got) == _np(xp.astype(x, xp.float64) @ b)).all()


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@FEW
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_addmm_both_signatures(backend: str, data: st.DataObject, seed: int) -> None:
    xp = _ns(backend)
    dtype, dense = data.draw(semi_cases(xp, unit=True))
    x = _as(xp, dense, dtype)
    s = xs.to_sparse_semi_structured(x)
    rows, cols = dense.shape
    b = _as(xp, _small_ints(seed, (cols, 3)), dtype)
    bias = _as(xp, _small_ints(seed + 1, (3,)), dtype)
    for beta, alpha in ((1, 1), (2, -1), (0, 2)):
        got = xs.addmm(bias, s, b, beta=beta, alpha=alpha)
        want = (x @ b) * alpha + (bias * beta if beta else xp.zeros_like(bias))
        assert (_np(got) == _np(want)).all()
    # torch's addmm(bias, dense, sparse.t())
    a = _as(xp, _small_ints(seed + 2, (3, cols)), dtype)
    bias_rows = _as(xp, _small_ints(seed + 3, (rows,)), dtype)
    got = xs.addmm(bias_rows, a, s.t())
    assert (_np(got) == _np(a @ xp.matrix_transpose(x) + bias_rows)).all()


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_addmm_with_beta_zero_ignores_nan_input(backend: str) -> None:
    xp = _ns(backend)
    x = _as(xp, random_pattern(np.random.default_rng(9), 32, 32, "float32"), "float32")
    s = xs.to_sparse_semi_structured(x)
    b = xp.ones((32, 2), dtype=xp.float32)
    nan = xp.full((32, 2), math.nan, dtype=xp.float32)
    got = xs.addmm(nan, s, b, beta=0)
    assert (_np(got) == _np(x @ b)).all()
    # the kernel itself, as the linear-algebra layer calls it
    got = dispatch.call("addmm", (xs.strided, xs.sparse_semi_structured, xs.strided), backend, xp, nan, s, b, 0, 1)
    assert (_np(got) == _np(x @ b)).all()


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))
@pytest.mark.parametrize("budget", [2**22, 1], ids=["one chunk", "a chunk per slot"])
def test_half_precision_products_add_in_float32(backend: str, budget: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # rows of 40000, 40000, -40000, -40000 (in float16, past half its range when added) times ones: the
    # dense product adds in float32 and gives 0; the gather takes the kept slots a chunk at a time (one per
    # chunk once rows * columns reach its budget) and rounded its running sum to float16 after each: inf
    from xsparse.backends.array_api import semi_structured

    monkeypatch.setattr(semi_structured, "_GATHER_BUDGET", budget)
    xp = _ns(backend)
    w = xp.astype(xp.tile(xp.asarray([1.0, 1.0, 0.0, 0.0]), (64, 16)), xp.float16)
    b = np.zeros((64, 8), dtype=np.float32)
    b[0:16:4], b[1:16:4] = 40000.0, 40000.0
    b[16:32:4], b[17:32:4] = -40000.0, -40000.0
    b = xp.astype(xp.asarray(b), xp.float16)
    s = xs.to_sparse_semi_structured(w)
    for got, want in ((s @ b, w @ b), (xs.matmul(xp.matrix_transpose(b), s.t()), xp.matrix_transpose(b) @ xp.matrix_transpose(w))):
        assert got.dtype == xp.float16
        assert (_np(got) == 0).all() and (_np(want) == 0).all()


@pytest.mark.parametrize("backend", backend_params(["numpy", "torch"]))  # array_api_strict mixes no kinds
def test_addmm_scales_in_the_result_dtype(backend: str) -> None:
    # beta and alpha multiply in the promoted dtype, as the other layouts' addmm: 0.5 times an int8 input
    # added to a float32 product (the scalar cast to int8 raised), 0.5 times an int8 product
    xp = _ns(backend)
    w = xp.tile(xp.asarray([1.0, 0.0], dtype=xp.float32), (32, 16))
    x = xp.ones((4, 32), dtype=xp.float32)
    s, c = xs.to_sparse_semi_structured(w), xs.to_sparse_csr(w)
    got = xs.addmm(xp.full((32,), 3, dtype=xp.int8), x, s.t(), beta=0.5)
    assert got.dtype == xp.float32 and (_np(got) == 17.5).all()
    assert (_np(got) == _np(xs.addmm(xp.full((32,), 3, dtype=xp.int8), x, c.mT, beta=0.5))).all()
    wi = xp.tile(xp.asarray([1, 2, 0, 0], dtype=xp.int8), (128, 32))
    got = xs.addmm(xp.zeros((128,), dtype=xp.float32), xp.ones((4, 128), dtype=xp.int8), xs.to_sparse_semi_structured(wi).t(), alpha=0.5)
    assert got.dtype == xp.float32 and (_np(got) == 48.0).all()


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_clone_and_asarray_copy(backend: str) -> None:
    xp = _ns(backend)
    w = xp.tile(xp.asarray([1.0, 0.0], dtype=xp.float32), (32, 16))
    s = xs.to_sparse_semi_structured(w)
    for c in (xs.clone(s), xs.asarray(s, copy=True)):
        assert c.layout is xs.sparse_semi_structured and c.shape == s.shape
        assert c.values() is not s.values() and c.indices() is not s.indices()
        assert (_np(xs.to_dense(c)) == _np(w)).all()
        check_invariants(c)
    t = xs.clone(s.t())
    assert t.shape == (32, 32) and (_np(xs.to_dense(t)) == _np(xp.matrix_transpose(w))).all()

@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_products_through_the_transposed_lists_keep_infinities(backend: str) -> None:
    # row 0 keeps the even columns and the other rows are empty, so the columns' lists are padded: a padding
    # slot must add nothing, not 0 * inf. The oracle is the CSR product of the same specified elements.
    xp = _ns(backend)
    d = np.zeros((32, 32), np.float32)
    d[0, ::2] = 1.0
    s = xs.to_sparse_semi_structured(xp.asarray(d))
    csr = xs.to_sparse_csr(s)
    a = np.ones((2, 32), np.float32)
    a[0, 0], a[1, 0] = math.inf, math.nan
    a = xp.asarray(a)
    for got, want in [
        (xs.matmul(a, s), xs.matmul(a, csr)),
        (xs.matmul(s.t(), xs.matrix_transpose(a)), xs.matmul(csr.mT, xs.matrix_transpose(a))),
        (xs.matmul(a[0, :], s), xs.matmul(a[0, :], csr)),
    ]:
        np.testing.assert_array_equal(_np(got), _np(want))
    assert _np(xs.matmul(a, s))[0, :4].tolist() == [math.inf, 0.0, math.inf, 0.0]


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@FEW
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), lead=st.sampled_from([(), (4,), (2, 3)]))
def test_linear(backend: str, data: st.DataObject, seed: int, lead: tuple[int, ...]) -> None:
    xp = _ns(backend)
    dtype, dense = data.draw(semi_cases(xp, unit=True))
    weight = _as(xp, dense, dtype)
    out_features, in_features = dense.shape
    x = _as(xp, _small_ints(seed, (*lead, in_features)), dtype)
    bias = _as(xp, _small_ints(seed + 1, (out_features,)), dtype)
    w = xs.to_sparse_semi_structured(weight)
    got = xs.linear(x, w, bias)
    assert tuple(got.shape) == (*lead, out_features)
    assert (_np(got) == _np(x @ xp.matrix_transpose(weight) + bias)).all()
    assert (_np(xs.linear(x, w)) == _np(x @ xp.matrix_transpose(weight))).all()
    assert (_np(xs.linear(x, weight, bias)) == _np(got)).all(), "a dense weight gives the same"


def test_the_kernels_are_registered_where_the_docs_say() -> None:
    generic = {(k.op, k.signature) for k in xs.kernels() if k.backend is None and xs.sparse_semi_structured in k.signature}
    semi, strided = xs.sparse_semi_structured, xs.strided
    assert {("matmul", (semi, strided)), ("matmul", (strided, semi)), ("addmm", (strided, semi, strided)),
            ("addmm", (strided, strided, semi)), ("convert", (strided, semi)), ("convert", (semi, strided)),
            ("convert", (xs.sparse_coo, semi)), ("convert", (semi, xs.sparse_coo)), ("detach", (semi,))} <= generic  # fmt: skip
    assert [k.kind for k in dispatch.resolve("matmul", (semi, strided), "array_api_strict")] == ["generic"]


# -- errors ----------------------------------------------------------------------------------------------


def _f16(shape: tuple[int, int] = (64, 64)) -> np.ndarray:
    return np.zeros(shape, dtype=np.float16)


def _violating() -> np.ndarray:
    a = _f16()
    a[3, 20:23] = 1.0  # row 3, group 5 holds 3
    return a


def _semi() -> SemiStructuredArray:
    return xs.to_sparse_semi_structured(np.tile(np.asarray([0, 0, 1, 1], dtype=np.float16), (64, 16)))


def _build(values: Any, metadata: Any, **kwargs: Any) -> SemiStructuredArray:
    xp = _ns("numpy")
    return SemiStructuredArray(values, metadata, backend=xs.get_backend("numpy"), xp=xp, **kwargs)


def _bad_nibble() -> SemiStructuredArray:
    s = _semi()
    meta = np.array(s.indices())
    meta[2, 1] = 0b0111  # group 4 of row 2: i0 = 3 > i1 = 1
    return _build(np.array(s.values()), meta, check=True)


ERRORS: list[Any] = [
    ("dtype", lambda: xs.to_sparse_semi_structured(np.zeros((64, 64))), xs.InvariantError,
     r"^invariant ss\.2 violated: to_sparse_semi_structured: dtype float64 has no semi-structured layout \(dtype=float64\)\. Cast the array to float16, bfloat16 or int8"),
    ("ndim", lambda: xs.to_sparse_semi_structured(np.zeros((2, 64, 64), dtype=np.float16)), xs.InvariantError,
     r"^invariant ss\.4 violated: to_sparse_semi_structured: a semi-structured array is 2-D with no dense dimensions \(shape=\(2, 64, 64\), dense_dim=0\)\. Convert one matrix"),
    ("hybrid", lambda: xs.to_sparse_semi_structured(xs.to_sparse_coo(np.zeros((64, 64, 2), dtype=np.float16), sparse_dim=2)), xs.InvariantError,
     r"^invariant ss\.4 violated: .*\(shape=\(64, 64, 2\), dense_dim=1\)"),
    ("shape-int8", lambda: xs.to_sparse_semi_structured(np.zeros((128, 64), dtype=np.int8)), xs.InvariantError,
     r"^invariant ss\.5 violated: to_sparse_semi_structured: a semi-structured array of int8 needs rows that are a positive multiple of 128 and columns that are a positive multiple of 128 \(shape=\(128, 64\)\)\. Pad it with zeros to \(128, 128\)"),
    ("shape-empty", lambda: xs.to_sparse_semi_structured(np.zeros((0, 32), dtype=np.float32)), xs.InvariantError,
     r"^invariant ss\.5 violated: .*\(shape=\(0, 32\)\)\. Pad it with zeros to \(32, 32\)"),
    ("pattern", lambda: xs.to_sparse_semi_structured(_violating()), xs.InvariantError,
     r"^invariant ss\.11 violated: to_sparse_semi_structured: row 3, group 5 \(columns 20\.\.23\) holds 3 specified elements, but an array of float16 keeps at most 2 of every 4 \(2:4 sparsity; row=3, group=5, count=3\)\. Zero out"),
    ("pattern-coo", lambda: xs.to_sparse_semi_structured(xs.to_sparse_coo(_violating())), xs.InvariantError,
     r"^invariant ss\.11 violated: .*row 3, group 5 .*holds 3 specified elements"),
    ("pattern-1-2", lambda: xs.to_sparse_semi_structured(np.ones((32, 32), dtype=np.float32)), xs.InvariantError,
     r"^invariant ss\.11 violated: .*row 0, group 0 \(columns 0\.\.1\) holds 2 specified elements, but an array of float32 keeps at most 1 of every 2 \(1:2 sparsity"),
    ("not-an-array", lambda: xs.to_sparse_semi_structured([[1.0]]), TypeError,
     r"^to_sparse_semi_structured: x must be an xsparse array or a backend array, got list\. Create one"),
    ("to-sparse-layout", lambda: xs.to_sparse(_f16(), layout=xs.sparse_semi_structured), xs.LayoutError,
     r"^to_sparse\(layout=sparse_semi_structured\): the sparse_semi_structured layout has its own conversion .*Call xsparse\.to_sparse_semi_structured"),
    ("to-sparse-layout-of-itself", lambda: xs.to_sparse(_semi(), layout=xs.sparse_semi_structured), xs.LayoutError,
     r"^to_sparse\(layout=sparse_semi_structured\): the sparse_semi_structured layout has its own conversion .*Call xsparse\.to_sparse_semi_structured"),
    # the validator
    ("ss.1", lambda: _build([1.0], np.zeros((64, 4), dtype=np.int16)), xs.InvariantError,
     r"^invariant ss\.1 violated: values must be a strided array of the backend, got list\. Pass an array"),
    ("ss.2", lambda: _build(np.zeros((64, 32)), np.zeros((64, 4), dtype=np.int16)), xs.InvariantError,
     r"^invariant ss\.2 violated: sparse_semi_structured: dtype float64 has no semi-structured layout"),
    ("ss.3", lambda: _build(np.zeros((64, 32), dtype=np.float16), np.zeros((64, 4), dtype=np.int32)), xs.InvariantError,
     r"^invariant ss\.3 violated: the metadata of a float16 array must be int16 words, got int32 \(metadata\.dtype=int32\)\. Build the array"),
    ("ss.4", lambda: _build(np.zeros((64, 32), dtype=np.float16), np.zeros((64, 4, 1), dtype=np.int16)), xs.InvariantError,
     r"^invariant ss\.4 violated: a semi-structured array and its values and metadata are 2-D \(values\.shape=\(64, 32\), metadata\.shape=\(64, 4, 1\), shape=\(64, 64\)\)\. Convert"),
    ("ss.5", lambda: _build(np.zeros((64, 16), dtype=np.float16), np.zeros((64, 2), dtype=np.int16)), xs.InvariantError,
     r"^invariant ss\.5 violated: sparse_semi_structured: a semi-structured array of float16 needs .*\(shape=\(64, 32\)\)"),
    ("ss.6", lambda: _build(np.zeros((64, 32), dtype=np.float16), np.zeros((64, 8), dtype=np.int16)), xs.InvariantError,
     r"^invariant ss\.6 violated: metadata\.shape must be \(64, 4\) for values of shape \(64, 32\) \(one int16 word per 16 columns\), got \(64, 8\)\. Give the metadata"),
    ("ss.7", lambda: _build(np.zeros((64, 64), dtype=np.float16), np.zeros((64, 8), dtype=np.int16), shape=(128, 64)), xs.InvariantError,
     r"^invariant ss\.7 violated: shape must be \(64, 128\) for stored values of shape \(64, 64\) \(transposed=False\), got \(128, 64\)\. Leave the shape out"),
    ("ss.9", lambda: _build(np.zeros((32, 64), dtype=np.float16).T, np.zeros((64, 4), dtype=np.int16)), xs.InvariantError,
     r"^invariant ss\.9 violated: values must be contiguous\. Pass a contiguous copy\."),
    ("ss.10", _bad_nibble, xs.InvariantError,
     r"^invariant ss\.10 violated: every metadata nibble of a 2:4 array must be two 2-bit indices i0 < i1 \(bits 0-1 and 2-3\), got 0b0111 for row 2, group 4 \(row=2, group=4\)\. Build the metadata"),
    # products
    ("matmul-inner", lambda: _semi() @ np.ones((32, 2), dtype=np.float16), ValueError,
     r"^matmul: the contracted dimensions differ \(x1\.shape=\(64, 64\), x2\.shape=\(32, 2\)"),
    ("matmul-inner-vector", lambda: np.ones(32, dtype=np.float16) @ _semi(), ValueError,
     r"^matmul: the contracted dimensions differ \(x1\.shape=\(32,\), x2\.shape=\(64, 64\)"),
    ("matmul-semi-semi", lambda: _semi() @ _semi(), xs.NoKernelError,
     r"^matmul: no kernel for layouts \(sparse_semi_structured, sparse_semi_structured\) on backend 'numpy'\."),
    ("matmul-fill", lambda: xs.to_sparse_semi_structured(xs.to_sparse_coo(np.ones((32, 32), dtype=np.float32), fill_value=1.0)) @ np.ones((32, 1), dtype=np.float32),
     xs.NoKernelError, r"^matmul: no kernel .* declined: the product is computed with fill value 0, and this operand has fill_value=1\.0\."),
    ("addmm-alpha", lambda: dispatch.call("addmm", (xs.strided, xs.sparse_semi_structured, xs.strided), "numpy", np, np.zeros(2, dtype=np.int8),
                                          xs.to_sparse_semi_structured(np.zeros((128, 128), dtype=np.int8)), np.zeros((128, 2), dtype=np.int8), 1, 0.5),
     xs.NoKernelError, r"^addmm: no kernel .* declined: alpha=0\.5 is not an integer, and the result dtype is an integer dtype\."),
    ("addmm-complex", lambda: dispatch.call("addmm", (xs.strided, xs.strided, xs.sparse_semi_structured), "numpy", np, np.zeros(2, dtype=np.float32),
                                            np.zeros((2, 32), dtype=np.float32), xs.to_sparse_semi_structured(np.zeros((32, 32), dtype=np.float32)), 1j, 1),
     xs.NoKernelError, r"^addmm: no kernel .* declined: beta=1j is complex, and the result dtype is real\."),
    ("addmm-fill", lambda: xs.addmm(np.zeros(1, dtype=np.float32), np.zeros((2, 32), dtype=np.float32),
                                    xs.to_sparse_semi_structured(xs.to_sparse_coo(np.ones((32, 32), dtype=np.float32), fill_value=1.0))),
     xs.NoKernelError, r"^addmm: no kernel .* declined: the product is computed with fill value 0, and this operand has fill_value=1\.0\."),
    ("linear-weight", lambda: xs.linear(np.ones((2, 64), dtype=np.float16), np.ones(64, dtype=np.float16)), ValueError,
     r"^linear: weight must be 2-D \(out_features, in_features\) \(weight\.shape=\(64,\)\)\. Pass a matrix\."),
    ("linear-input", lambda: xs.linear(np.ones((2, 32), dtype=np.float16), _semi()), ValueError,
     r"^linear: input's last dimension must equal weight's in_features=64 \(input\.shape=\(2, 32\), weight\.shape=\(64, 64\)\)\. Give input the shape \(\.\.\., 64\)\."),
    ("linear-bias", lambda: xs.linear(np.ones((2, 64), dtype=np.float16), _semi(), np.ones(3, dtype=np.float16)), ValueError,
     r"^linear: bias must have the shape \(64,\) \(bias\.shape=\(3,\), out_features=64\)\. Pass one bias per output feature\."),
    ("linear-list", lambda: xs.linear([1.0], _semi()), TypeError, r"^linear: input must be an xsparse array or a backend array, got list"),
    ("detach-dense", lambda: detach(np.ones(2)), TypeError,
     r"^detach: x must be an xsparse array, got ndarray\. A backend array has its own detach \(torch\)\."),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "match"), [pytest.param(c, e, m, id=i) for i, c, e, m in ERRORS])
def test_errors(call: Any, exc: type[BaseException], match: str) -> None:
    with pytest.raises(exc, match=match) as info:
        call()
    assert MESSAGE_SHAPE.fullmatch(str(info.value)), str(info.value)


@pytest.mark.parametrize("backend", backend_params(["array_api_strict"]))
def test_components_on_two_devices(backend: str) -> None:
    import array_api_strict as xps

    devices = list(xps.__array_namespace_info__().devices())
    values = xps.zeros((32, 16), dtype=xps.float32, device=devices[0])
    metadata = xps.zeros((32, 4), dtype=xps.int16, device=devices[1])
    with pytest.raises(xs.InvariantError, match=r"^invariant ss\.8 violated: metadata is on device .* but values are on device .*\. Move them to one device"):
        SemiStructuredArray(values, metadata, backend=xs.get_backend(backend), xp=xps)


@pytest.mark.parametrize("backend", backend_params(["torch"]))
def test_operands_of_two_backends(backend: str) -> None:
    import torch

    with pytest.raises(xs.BackendMismatchError, match=r"^matmul: the operands live on different backends \('numpy', 'torch'\)\. Move them to one"):
        _semi() @ torch.ones(64, 2, dtype=torch.float16)


def test_checks_of_a_valid_array_pass_in_full() -> None:
    with xs.check_sparse_tensor_invariants():
        s = _semi()
    check_invariants(s)
    check_invariants(s.t())


# -- the torch CUDA path, seen from a CPU -------------------------------------------------------------------
#
# The packed encoding is built only from CUDA tensors (tests/test_semi_structured_cuda.py runs it). On CPU,
# the torch kernels of the CUDA path decline with their reasons, which these tests read. Their bodies run
# here too with a *stand-in*: a semi-structured array whose packed slot holds the dense stored matrix, which
# torch.mm and torch.addmm multiply as they multiply torch's SparseSemiStructuredTensor. That checks the
# kernels' own arithmetic (orientations, vectors, batches, beta and alpha, the fused bias) against the
# generic kernel and the dense product, which the GPU then repeats with the real encoding.

SEMI, STRIDED = xs.sparse_semi_structured, xs.strided


def _first_accepting(op: str, layouts: tuple[Any, ...], xp: Any, *args: Any) -> Any:
    """The kernel ``dispatch.call`` runs for these arguments: the first in resolution order that accepts them."""
    for kernel in dispatch.resolve(op, layouts, "torch"):
        if kernel.supports is None or kernel.supports(xp, *args) is None:
            return kernel
    raise AssertionError(f"no kernel of {op}{layouts} accepts the arguments")


def _reason(op: str, layouts: tuple[Any, ...], xp: Any, *args: Any) -> str:
    """The reason the torch kernel of the CUDA path gives for declining these arguments."""
    [kernel] = [k for k in dispatch.resolve(op, layouts, "torch") if k.backend == "torch"]
    reason = kernel.supports(xp, *args)
    assert reason is not None, f"{kernel.name} accepts"
    return str(reason)


def _target(x: Any, fill_value: Any = 0) -> Any:
    from xsparse.formats._spec import Target

    backend = xs.get_backend("torch")
    return Target(SEMI, backend, backend.load(), tuple(x.shape), 2, 0, (1, 1), backend.load().int64, fill_value)


def _stand_in(s: SemiStructuredArray, dense: Any) -> SemiStructuredArray:
    """``s`` with the dense stored matrix in its packed slot (see the section comment)."""
    return SemiStructuredArray(s.values(), s.indices(), backend=xs.get_backend("torch"), xp=xs.get_backend("torch").load(), packed=dense)


@pytest.mark.parametrize("backend", TORCH)
def test_cpu_arrays_carry_no_packed_encoding_and_the_cuda_kernels_say_why(backend: str) -> None:
    import torch

    xp = xs.get_backend(backend).load()
    x = torch.tensor(random_pattern(np.random.default_rng(10), 64, 64, "float16")).half()
    cuda = r"^torch's semi-structured kernels \(cuSPARSELt, CUTLASS\) need CUDA tensors, and this one is on cpu$"
    for source, layout in ((x, STRIDED), (xs.to_sparse_coo(x), xs.sparse_coo), (xs.to_sparse_csr(x), xs.sparse_csr)):
        s = xs.to_sparse_semi_structured(source)
        assert s.packed is None and s.t().packed is None
        assert re.match(cuda, _reason("convert", (layout, SEMI), xp, source, _target(x)))
        assert _first_accepting("convert", (layout, SEMI), xp, source, _target(x)).kind == "generic"
    s = xs.to_sparse_semi_structured(x)
    b = torch.ones(64, 3, dtype=torch.float16)
    no_packed = r"^the semi-structured operand carries no packed encoding \(packed=None\); xs\.to_sparse_semi_structured of a CUDA tensor .* builds one$"
    assert re.match(no_packed, _reason("matmul", (SEMI, STRIDED), xp, s, b))
    assert re.match(no_packed, _reason("matmul", (STRIDED, SEMI), xp, b.T, s.t()))
    assert re.match(no_packed, _reason("addmm", (STRIDED, STRIDED, SEMI), xp, b[0, :1], b.T, s.t(), 1, 1))
    assert re.match(no_packed, _reason("addmm", (STRIDED, SEMI, STRIDED), xp, b[:, 0], s, b, 1, 1))
    assert _first_accepting("matmul", (STRIDED, SEMI), xp, b.T, s.t()).kind == "generic"


@pytest.mark.parametrize("backend", TORCH)
def test_the_decline_reasons_are_part_of_the_no_kernel_error(backend: str) -> None:
    import torch

    s = xs.to_sparse_semi_structured(xs.to_sparse_coo(torch.ones(32, 32), fill_value=1.0))
    with pytest.raises(
        xs.NoKernelError,
        match=r"^matmul: no kernel for layouts \(sparse_semi_structured, strided\) on backend 'torch'\. matmul\(sparse_semi_structured, "
        r"strided\) \[native, torch\] declined: the semi-structured operand carries no packed encoding \(packed=None\); .* "
        r"\[generic, any backend\] declined: the product is computed with fill value 0",
    ) as info:
        s @ torch.ones(32, 1)
    assert MESSAGE_SHAPE.fullmatch(str(info.value)), str(info.value)
    xp = xs.get_backend(backend).load()
    ones = xs.to_sparse_coo(torch.ones(32, 32), fill_value=1.0)
    assert re.match(
        r"^torch's semi-structured encoding reads the unspecified elements as 0, and the fill value is 1\.0$",
        _reason("convert", (xs.sparse_coo, SEMI), xp, ones, _target(ones, 1.0)),
    )
    x = torch.zeros(32, 32, requires_grad=True)
    assert re.match(
        r"^the array requires grad, and torch's packed encoding records no autograd; .* Convert x\.detach\(\) to get the packed one$",
        _reason("convert", (STRIDED, SEMI), xp, x, _target(x)),
    )


@pytest.mark.parametrize("backend", TORCH)
def test_the_packed_slot_is_shared_by_t_kept_by_detach_and_dropped_by_everything_else(backend: str) -> None:
    import torch

    x = torch.tensor(random_pattern(np.random.default_rng(11), 64, 64, "float16")).half()
    s = _stand_in(xs.to_sparse_semi_structured(x), x)
    assert s.packed is x and s.t().packed is x and s.T.t().packed is x and s.mT.packed is x
    detached = s.detach()
    assert detached.packed is not x and torch.equal(detached.packed, x) and detached.transposed is False
    assert s.t().detach().transposed and s.t().detach().packed is not None
    assert s._with_values(s.values() * 2, 0).packed is None, "new values: the packed encoding no longer matches"
    assert xs.to_backend(s, "numpy").packed is None and xs.to_backend(s, "numpy").to_dense().shape == (64, 64)
    assert xs.to_sparse_semi_structured(s) is s


def _generic_twin(op: str, layouts: tuple[Any, ...]) -> Any:
    return next(k for k in dispatch.resolve(op, layouts, "torch") if k.kind == "generic")


@pytest.mark.parametrize("backend", TORCH)
@FEW
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), n=st.integers(1, 9), lead=st.sampled_from([(), (3,), (2, 3)]))
def test_the_packed_kernels_with_a_stand_in_equal_the_generic_and_dense_products(
    backend: str, data: st.DataObject, seed: int, n: int, lead: tuple[int, ...]
) -> None:
    import torch

    xp = xs.get_backend(backend).load()
    dtype = data.draw(st.sampled_from(["float16", "bfloat16", "float32"]))
    p = PATTERNS[dtype]
    rows, cols = p.min_rows * data.draw(st.integers(1, 2)), p.min_cols * data.draw(st.integers(1, 2))
    tdt = getattr(torch, dtype)
    w = torch.tensor(random_pattern(np.random.default_rng(seed), rows, cols, dtype, unit=True)).to(tdt)
    s = _stand_in(xs.to_sparse_semi_structured(w), w)

    def ints(k: int, *shape: int) -> Any:
        return torch.tensor(_small_ints(seed + k, shape)).to(tdt)

    b, a, a2, bias = ints(1, cols, n), ints(2, *lead, cols), ints(3, n, cols), ints(4, rows)
    nan = torch.full((n, rows), math.nan, dtype=tdt)
    cases = [
        ("matmul", (SEMI, STRIDED), (s, b), w @ b),
        ("matmul", (SEMI, STRIDED), (s, b[:, 0]), w @ b[:, 0]),
        ("matmul", (SEMI, STRIDED), (s, ints(5, 2, cols, n)), w @ ints(5, 2, cols, n)),
        ("matmul", (STRIDED, SEMI), (a, s.t()), a @ w.T),
        ("addmm", (STRIDED, STRIDED, SEMI), (bias, a2, s.t(), 1, 1), bias + a2 @ w.T),  # torch.addmm, fused bias
        ("addmm", (STRIDED, STRIDED, SEMI), (bias, a2, s.t(), 2, -1), 2 * bias - a2 @ w.T),
        ("addmm", (STRIDED, STRIDED, SEMI), (bias[:1], a2, s.t(), 1, 1), bias[:1] + a2 @ w.T),
        ("addmm", (STRIDED, STRIDED, SEMI), (nan, a2, s.t(), 0, 3), 3 * (a2 @ w.T)),
        ("addmm", (STRIDED, SEMI, STRIDED), (ints(6, n), s, b, 1, 2), ints(6, n) + 2 * (w @ b)),
    ]
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # the packed float32 kernels compute in TF32
    try:
        for op, layouts, args, want in cases:
            assert _first_accepting(op, layouts, xp, *args).backend == "torch", (op, layouts)
            got = dispatch.call(op, layouts, "torch", xp, *args)
            assert tuple(got.shape) == tuple(want.shape) and got.dtype == want.dtype, (op, layouts)
            assert torch.equal(got, want), (op, layouts)
            assert torch.equal(got, _generic_twin(op, layouts).func(xp, *args)), (op, layouts)
        # what xs.linear runs, with and without a bias
        y = xs.linear(a, s, bias)
        assert _first_accepting("addmm", (STRIDED, STRIDED, SEMI), xp, bias, a.reshape(-1, cols), s.t(), 1, 1).backend == "torch"
        assert torch.equal(y, a @ w.T + bias) and torch.equal(xs.linear(a, s), a @ w.T)
    finally:
        torch.set_float32_matmul_precision(previous)


@pytest.mark.parametrize("backend", TORCH)
def test_the_packed_kernels_decline_what_torch_does_not_compute(backend: str) -> None:
    import torch

    xp = xs.get_backend(backend).load()
    w = torch.tensor(random_pattern(np.random.default_rng(12), 64, 128, "float16")).half()
    s = _stand_in(xs.to_sparse_semi_structured(w), w)
    b, a = torch.ones(128, 2, dtype=torch.float16), torch.ones(2, 64, dtype=torch.float16)
    orientation = r"^{} contracts the dimension along which the 2:4 pattern does not run, which torch's semi-structured kernels do not compute \(they compute S @ B and A @ S\.t\(\)\)$"
    assert re.match(orientation.format(r"S\.t\(\) @ B"), _reason("matmul", (SEMI, STRIDED), xp, s.t(), a.T))
    assert re.match(orientation.format("A @ S"), _reason("matmul", (STRIDED, SEMI), xp, a, s))
    assert re.match(orientation.format("A @ S"), _reason("addmm", (STRIDED, STRIDED, SEMI), xp, a[0, :1], a, s, 1, 1))
    # the generic kernel computes the other orientations, with the same answer
    assert torch.equal(xs.matmul(a, s), a @ w) and torch.equal(xs.matmul(s.t(), a.T), w.T @ a.T)
    assert re.match(
        r"^torch's semi-structured kernels multiply operands of one dtype, got torch\.float16 and b\.dtype=torch\.float32$",
        _reason("matmul", (SEMI, STRIDED), xp, s, b.float()),
    )
    assert torch.equal(xs.matmul(s, b.float()), w.float() @ b.float()), "the generic kernel promotes"
    assert re.match(r"^a is empty \(a\.shape=\(0, 128\)\)$", _reason("matmul", (STRIDED, SEMI), xp, torch.ones(0, 128, dtype=torch.float16), s.t()))
    assert re.match(
        r"^input\.dtype=torch\.float32 promotes the result beyond the operands' torch\.float16, which the packed product computes in$",
        _reason("addmm", (STRIDED, STRIDED, SEMI), xp, torch.ones(64), torch.ones(2, 128, dtype=torch.float16), s.t(), 1, 1),
    )
    grad = torch.ones(128, 2, dtype=torch.float16, requires_grad=True)
    assert re.match(r"^an operand requires grad, and torch's semi-structured products have no backward for it$", _reason("matmul", (SEMI, STRIDED), xp, s, grad))
    with torch.no_grad():
        assert _first_accepting("matmul", (SEMI, STRIDED), xp, s, grad).backend == "torch"
    w32 = torch.tensor(random_pattern(np.random.default_rng(13), 32, 32, "float32")).float()
    s32 = _stand_in(xs.to_sparse_semi_structured(w32), w32)
    assert torch.get_float32_matmul_precision() == "highest"
    assert re.match(
        r"^torch's packed float32 kernels compute in TF32, and torch\.get_float32_matmul_precision\(\) is 'highest'; "
        r"torch\.set_float32_matmul_precision\('high'\) allows TF32 products$",
        _reason("matmul", (SEMI, STRIDED), xp, s32, torch.ones(32, 1)),
    )
    filled = SemiStructuredArray(s.values(), s.indices(), backend=xs.get_backend(backend), xp=xp, fill_value=2.0, packed=w)
    assert re.match(r"^the packed product reads the unspecified elements as 0, and the fill value is 2\.0$", _reason("matmul", (SEMI, STRIDED), xp, filled, b))
