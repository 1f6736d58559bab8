"""The NumPy backend's structure kernels: compressed -> COO, CSR <-> CSC (BSR <-> BSC), joins along a
sparse dimension, ``count_nonzero`` and the 2-norm over every element.

The compiled helpers (``_cpu.expand_compressed``, ``transpose_compressed``, ``join_plain`` and
``count_nonzero``) are compared with NumPy oracles on random components of every shape (nnz = 0, empty
slices, batches, trailing dense dimensions, int32 and int64 indices in and out, values of several
dtypes), and on inputs large enough for their parallel paths. The registered kernels are compared with
the dense result and with the generic kernel of the same operation on Hypothesis inputs from
``tests/strategies.py``.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import load_native_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_conversions import assert_same_components, conversion_target

import strategies as S
import xsparse as xs
from xsparse import dispatch
from xsparse.backends import _cpu
from xsparse.backends.array_api.reduction import ReduceSpec
from xsparse.formats import CompressedArray
from xsparse.testing import assert_sparse_equal

load_native_kernels()

XP = xs.get_backend("numpy").load()
INDEX_DTYPES = [np.dtype(np.int32), np.dtype(np.int64)]
VALUE_DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int64, np.float16, np.float32, np.float64, np.complex128)]
COMPRESSED_LAYOUTS = [xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]
NATIVE = pytest.mark.skipif(_cpu.unavailable_reason() is not None, reason=str(_cpu.unavailable_reason()))

examples = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _kernel(op: str, name: str) -> dispatch.Kernel:
    (k,) = [k for k in dispatch.kernels(op) if k.name == name]
    return k


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, expected.dtype, actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)


# -- raw components and their oracles ----------------------------------------------------------------

Components = tuple[np.ndarray, np.ndarray, np.ndarray]


def random_components(
    rng: np.random.Generator, nb: int, m: int, n: int, nse: int, index_dtype: np.dtype, value_dtype: np.dtype, tail: tuple[int, ...]
) -> Components:
    """``(indptr (nb, m + 1), plain (nb, nse), values (nb, nse, *tail))``: canonical slices (sorted,
    distinct plain indices), ``nse`` entries in every batch at random positions (empty slices included)."""
    indptr = np.zeros((nb, m + 1), dtype=index_dtype)
    plain = np.zeros((nb, nse), dtype=index_dtype)
    for b in range(nb):
        cells = np.sort(rng.choice(m * n, size=nse, replace=False)) if nse else np.zeros(0, dtype=np.int64)
        indptr[b, 1:] = np.cumsum(np.bincount(cells // max(n, 1), minlength=m))
        plain[b] = cells % max(n, 1)
    raw = rng.standard_normal((nb, nse, *tail)) * 100
    values = (raw > 0) if value_dtype.kind == "b" else raw.astype(value_dtype)
    return indptr, plain, values


@st.composite
def component_cases(
    draw: st.DrawFn, *, nb: int | None = None, m: int | None = None, value_dtype: np.dtype | None = None, tail: tuple[int, ...] | None = None
) -> Components:
    nb = draw(st.integers(0, 3)) if nb is None else nb
    m = draw(st.integers(0, 6)) if m is None else m
    n = draw(st.integers(0, 20))  # rows longer than the compiled fill run of 8
    nse = draw(st.sampled_from(sorted({0, min(1, m * n), (m * n) // 3, m * n})))
    index_dtype = draw(st.sampled_from(INDEX_DTYPES))
    value_dtype = draw(st.sampled_from(VALUE_DTYPES)) if value_dtype is None else value_dtype
    tail = draw(st.sampled_from([(), (2,), (2, 3), (0,)])) if tail is None else tail
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return random_components(rng, nb, m, n, nse, index_dtype, value_dtype, tail)


def n_plain(parts: Components) -> int:
    """A plain size that every plain index fits."""
    plain = parts[1]
    return int(plain.max()) + 1 + 2 if plain.size else 3


def oracle_expand(indptr: np.ndarray, plain: np.ndarray, dtype: np.dtype) -> np.ndarray:
    nb, m = indptr.shape[0], indptr.shape[1] - 1
    major = [np.repeat(np.arange(m), np.diff(indptr[b])) for b in range(nb)]
    flat = np.concatenate(major) if nb else np.zeros(0, dtype=np.int64)
    return np.stack([flat, plain.reshape(-1)]).astype(dtype)


def oracle_transpose(parts: Components, n: int, dtype: np.dtype) -> Components:
    indptr, plain, values = parts
    nb, m = indptr.shape[0], indptr.shape[1] - 1
    out_ptr = np.zeros((nb, n + 1), dtype=dtype)
    out_plain = np.zeros(plain.shape, dtype=dtype)
    out_values = np.zeros_like(values)
    for b in range(nb):
        major = np.repeat(np.arange(m), np.diff(indptr[b]))
        order = np.argsort(plain[b], kind="stable")
        out_ptr[b, 1:] = np.cumsum(np.bincount(plain[b], minlength=n))
        out_plain[b] = major[order]
        out_values[b] = values[b][order]
    return out_ptr, out_plain, out_values


def oracle_join(parts: list[Components], offsets: list[int], dtype: np.dtype) -> Components:
    nb, m = parts[0][0].shape[0], parts[0][0].shape[1] - 1
    total = sum(p[1].shape[1] for p in parts)
    out_ptr = np.zeros((nb, m + 1), dtype=dtype)
    out_plain = np.zeros((nb, total), dtype=dtype)
    out_values = np.zeros((nb, total, *parts[0][2].shape[2:]), dtype=parts[0][2].dtype)
    for b in range(nb):
        q = 0
        for i in range(m):
            for (ptr, plain, values), off in zip(parts, offsets):
                s, e = ptr[b, i], ptr[b, i + 1]
                out_plain[b, q : q + e - s] = plain[b, s:e] + off
                out_values[b, q : q + e - s] = values[b, s:e]
                q += e - s
            out_ptr[b, i + 1] = q
    return out_ptr, out_plain, out_values


# -- the compiled helpers against the oracles ------------------------------------------------------


@NATIVE
@examples
@given(parts=component_cases(), out_dtype=st.sampled_from(INDEX_DTYPES), rows=st.sampled_from([(0, 1), (1, 0), (2, 1)]))
def test_expand_compressed_matches_oracle(parts: Components, out_dtype: np.dtype, rows: tuple[int, int]) -> None:
    indptr, plain, _ = parts
    out = np.full((3, plain.size), -7, dtype=out_dtype)
    _cpu.expand_compressed(indptr, plain, out, *rows)
    expected = oracle_expand(indptr, plain, out_dtype)
    assert_same(out[rows[0]], expected[0])
    assert_same(out[rows[1]], expected[1])
    untouched = 3 - rows[0] - rows[1]
    assert (out[untouched] == -7).all()


@NATIVE
@examples
@given(parts=component_cases(), out_dtype=st.sampled_from(INDEX_DTYPES))
def test_transpose_compressed_matches_oracle(parts: Components, out_dtype: np.dtype) -> None:
    n = n_plain(parts)
    got = _cpu.transpose_compressed(*parts, n, out_dtype)
    assert got is not None
    for actual, expected in zip(got, oracle_transpose(parts, n, out_dtype)):
        assert_same(actual, expected)


@st.composite
def join_cases(draw: st.DrawFn) -> tuple[list[Components], list[int]]:
    """Operands of one batch count, number of slices, value dtype and entry shape (index dtypes may differ)."""
    first = draw(component_cases())
    nb, m = first[0].shape[0], first[0].shape[1] - 1
    more = draw(st.lists(component_cases(nb=nb, m=m, value_dtype=first[2].dtype, tail=first[2].shape[2:]), max_size=2))
    parts = [first, *more]
    sizes = [n_plain(p) for p in parts]
    return parts, [sum(sizes[:k]) for k in range(len(parts))]


@NATIVE
@examples
@given(case=join_cases(), out_dtype=st.sampled_from(INDEX_DTYPES))
def test_join_plain_matches_oracle(case: tuple[list[Components], list[int]], out_dtype: np.dtype) -> None:
    parts, offsets = case
    got = _cpu.join_plain(parts, offsets, out_dtype)
    for actual, expected in zip(got, oracle_join(parts, offsets, out_dtype)):
        assert_same(actual, expected)


@NATIVE
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_structure_helpers_in_parallel(index_dtype: np.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """Enough entries (and batches) for the parallel ranges of every helper, against SciPy and the oracles."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: 2)  # however busy the machine is
    rng = np.random.default_rng(11)
    m, n = 3000, 700
    s = sp.random_array((m, n), density=0.06, format="csr", random_state=rng)
    indptr, plain, values = (np.asarray(x).astype(t)[None] for x, t in ((s.indptr, index_dtype), (s.indices, index_dtype), (s.data, np.float64)))
    out = np.empty((2, s.nnz), dtype=index_dtype)
    _cpu.expand_compressed(indptr, plain, out, 0, 1)
    coo = s.tocoo()
    assert_same(out, np.stack([coo.row, coo.col]).astype(index_dtype))
    t = s.tocsc()
    got = _cpu.transpose_compressed(indptr, plain, values, n, index_dtype)
    assert got is not None
    assert_same(got[0][0], t.indptr.astype(index_dtype))
    assert_same(got[1][0], t.indices.astype(index_dtype))
    assert_same(got[2][0], t.data)
    h = sp.hstack([s, s, s], format="csr")
    joined = _cpu.join_plain([(indptr, plain, values)] * 3, [0, n, 2 * n], index_dtype)
    assert_same(joined[0][0], h.indptr.astype(index_dtype))
    assert_same(joined[1][0], h.indices.astype(index_dtype))
    assert_same(joined[2][0], h.data)
    # batches with blocks of values, split across the threads' ranges
    parts = random_components(rng, 3, 900, 60, 9000, index_dtype, np.dtype(np.complex128), (2,))
    got = _cpu.transpose_compressed(*parts, 60, index_dtype)
    assert got is not None
    for actual, expected in zip(got, oracle_transpose(parts, 60, index_dtype)):
        assert_same(actual, expected)
    out = np.empty((2, parts[1].size), dtype=index_dtype)
    _cpu.expand_compressed(parts[0], parts[1], out, 1, 0)
    assert_same(out[::-1], oracle_expand(parts[0], parts[1], index_dtype))
    for actual, expected in zip(_cpu.join_plain([parts, parts], [0, 60], index_dtype), oracle_join([parts, parts], [0, 60], index_dtype)):
        assert_same(actual, expected)


@NATIVE
def test_transpose_declines_slices_that_do_not_increase() -> None:
    """A repeated (or unsorted) plain index in a slice: None, nothing computed (the caller sums them)."""
    indptr = np.array([[0, 2, 3]], dtype=np.int64)
    values = np.array([[1.0, 2.0, 3.0]])
    assert _cpu.transpose_compressed(indptr, np.array([[1, 1, 0]]), values, 2, np.int64) is None
    assert _cpu.transpose_compressed(indptr, np.array([[1, 0, 0]]), values, 2, np.int64) is None


@NATIVE
@pytest.mark.parametrize("threads", [1, 2])
def test_transpose_of_an_output_beyond_the_caches(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """An output of more than 8 MiB (the scatter that prefetches) equals SciPy's CSC; one slice out of order, or
    a repeat within a slice, anywhere in it (not only where a range of slices starts) declines."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: threads)
    rng = np.random.default_rng(12)
    s = sp.random_array((20_000, 30_000), density=0.0015, format="csr", random_state=rng)
    assert s.nnz * (8 + 4) > 8 << 20
    indptr, plain, values = s.indptr.astype(np.int32)[None], s.indices.astype(np.int32)[None], s.data[None]
    got = _cpu.transpose_compressed(indptr, plain, values, 30_000, np.int32)
    assert got is not None
    t = s.tocsc()
    assert_same(got[0][0], t.indptr.astype(np.int32))
    assert_same(got[1][0], t.indices.astype(np.int32))
    assert_same(got[2][0], t.data)
    row = 11_111 + int(np.flatnonzero(np.diff(s.indptr)[11_111:] >= 3)[0])  # 3 or more entries, past the first range
    k = int(s.indptr[row])
    for wrong in ((plain[0, k + 1], plain[0, k]), (plain[0, k], plain[0, k])):
        bad = plain.copy()
        bad[0, k], bad[0, k + 1] = wrong
        assert _cpu.transpose_compressed(indptr, bad, values, 30_000, np.int32) is None


@NATIVE
def test_structure_helpers_reject_bad_components() -> None:
    values = np.array([[1.0, 2.0]])
    good = np.array([[0, 1, 2]], dtype=np.int64)
    plain = np.array([[0, 1]], dtype=np.int64)
    out = np.empty((2, 2), dtype=np.int64)
    for indptr in (np.array([[0, 2, 1]]), np.array([[1, 1, 2]]), np.array([[0, 1, 1]]), np.array([[0, 1, 3]])):
        with pytest.raises(ValueError, match="not non-decreasing from 0 to nse"):
            _cpu.expand_compressed(indptr, plain, out, 0, 1)
        with pytest.raises(ValueError, match="not non-decreasing from 0 to nse"):
            _cpu.transpose_compressed(indptr, plain, values, 2, np.int64)
        with pytest.raises(ValueError, match="not non-decreasing from 0 to nse"):
            _cpu.join_plain([(good, plain, values), (indptr, plain, values)], [0, 2], np.int64)
    for bad in (np.array([[0, 2]]), np.array([[-1, 0]])):
        with pytest.raises(ValueError, match="plain index is out of range"):
            _cpu.transpose_compressed(good, bad, values, 2, np.int64)
    with pytest.raises(TypeError, match="Python objects"):
        _cpu.transpose_compressed(good, plain, values.astype(object), 2, np.int64)


@NATIVE
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float32, np.float64, np.complex64, np.float16])
def test_count_nonzero_matches_numpy(dtype: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """NaN, infinities and the smallest subnormal count, -0.0 does not, a complex value counts when either
    part is nonzero; small sizes (with a tail beyond the last vector) and parallel ones."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: 2)
    rng = np.random.default_rng(2)
    for n in (0, 1, 37, 1000, _cpu._PARALLEL_COUNT_MIN * 2 + 5):
        x = rng.integers(-2, 3, n).astype(dtype)
        if np.dtype(dtype).kind in "fc":
            x[rng.random(n) < 0.05] = np.nan
            x[rng.random(n) < 0.05] = -0.0
            x[rng.random(n) < 0.05] = -np.inf
            x[rng.random(n) < 0.05] = np.finfo(dtype).smallest_subnormal
        if np.dtype(dtype).kind == "c":
            x.imag[rng.random(n) < 0.3] = 1
        assert _cpu.count_nonzero(x) == np.count_nonzero(x)
        assert _cpu.count_nonzero(x[::3]) == np.count_nonzero(x[::3])
    with pytest.raises(TypeError, match="unsupported value type"):
        _cpu._native_module().count_nonzero(np.zeros(3, np.int8), "i", 1)


# -- the registered kernels against the dense result and the generic kernels ------------------------


@NATIVE
@FEW
@given(data=st.data())
def test_compressed_to_coo_kernel(data: st.DataObject) -> None:
    case = data.draw(S.dense_cases(XP, fill=None), label="case")
    layout = data.draw(st.sampled_from([xs.sparse_csr, xs.sparse_csc]), label="layout")
    index_dtype = data.draw(st.sampled_from([None, "int32", "int64"]), label="index_dtype")
    x = case.sparse(layout)
    target = conversion_target(x, xs.sparse_coo, index_dtype=index_dtype)
    kernel = _kernel("convert", "_convert_compressed_coo_numpy")
    assert kernel.supports is None or kernel.supports(XP, x, target) is None
    result = kernel.func(XP, x, target)
    assert_sparse_equal(result, case.array)
    assert result.is_coalesced()
    assert_same_components(result, _kernel("convert", "_convert_compressed_coo").func(XP, x, target))


@NATIVE
@FEW
@given(data=st.data())
def test_compressed_to_compressed_kernel(data: st.DataObject) -> None:
    case = data.draw(S.dense_cases(XP, fill=None), label="case")
    src = data.draw(st.sampled_from(COMPRESSED_LAYOUTS), label="src")
    dst = data.draw(st.sampled_from([src.transposed, src]), label="dst")
    index_dtype = data.draw(st.sampled_from([None, "int32", "int64"]), label="index_dtype")
    x = case.sparse(src)
    target = conversion_target(x, dst, index_dtype=index_dtype, blocksize=case.blocksize if dst.is_blocked else None)
    kernel = _kernel("convert", "_convert_compressed_compressed_numpy")
    assert kernel.supports(XP, x, target) is None
    result = kernel.func(XP, x, target)
    assert_sparse_equal(result, case.array)
    assert_same_components(result, _kernel("convert", "_convert_compressed_compressed").func(XP, x, target))


@NATIVE
def test_compressed_conversions_of_non_canonical_slices() -> None:
    """A slice that repeats a column (built without the index checks): its duplicates are summed, as
    before; one whose columns are unsorted but distinct converts exactly."""
    numpy_backend = xs.get_backend("numpy")
    expected = np.array([[2.0, 0.0, 5.0], [0.0, 8.0, 0.0]])
    for columns, values in (([0, 2, 2, 1], [2.0, 1.0, 4.0, 8.0]), ([2, 0, 2, 1], [1.0, 2.0, 4.0, 8.0])):  # sorted, and not
        repeated = CompressedArray(np.array([0, 3, 4]), np.array(columns), np.array(values), (2, 3),
                                   layout=xs.sparse_csr, backend=numpy_backend, xp=XP, check=False)  # fmt: skip
        for layout in (xs.sparse_csc, xs.sparse_coo):
            r = xs.to_sparse(repeated, layout=layout)
            assert_sparse_equal(r, expected)
    unsorted = CompressedArray(np.array([0, 2, 3]), np.array([2, 0, 1]), np.array([1.0, 2.0, 8.0]), (2, 3),
                               layout=xs.sparse_csr, backend=numpy_backend, xp=XP, check=False)  # fmt: skip
    assert_sparse_equal(xs.to_sparse_csc(unsorted), np.array([[2.0, 0.0, 1.0], [0.0, 8.0, 0.0]]))
    csc = CompressedArray(np.array([0, 2, 2, 3]), np.array([1, 1, 0]), np.array([1.0, 2.0, 4.0]), (2, 3),
                          layout=xs.sparse_csc, backend=numpy_backend, xp=XP, check=False)  # fmt: skip
    coo = xs.to_sparse_coo(csc)
    assert coo.is_coalesced()
    assert_sparse_equal(coo, np.array([[0.0, 0.0, 4.0], [3.0, 0.0, 0.0]]))


@NATIVE
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_conversion_kernels_in_parallel(index_dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cpu, "available_threads", lambda: 2)
    rng = np.random.default_rng(4)
    one = np.where(rng.random((400, 300)) < 0.3, rng.standard_normal((400, 300)), 0.0)
    batched = np.stack([one, one[::-1, ::-1]])  # batches of one number of elements
    for dense, layout in itertools.product((one, batched), (xs.sparse_csr, xs.sparse_csc)):
        x = xs.to_sparse(dense, layout=layout, index_dtype=index_dtype)
        for target in (xs.sparse_coo, layout.transposed):
            native = _kernel("convert", "_convert_compressed_coo_numpy" if target is xs.sparse_coo else "_convert_compressed_compressed_numpy")
            generic = _kernel("convert", "_convert_compressed_coo" if target is xs.sparse_coo else "_convert_compressed_compressed")
            t = conversion_target(x, target)
            result = native.func(XP, x, t)
            assert_sparse_equal(result, dense)
            assert_same_components(result, generic.func(XP, x, t))


def test_compressed_to_compressed_declines_block_changes() -> None:
    x = xs.to_sparse(np.eye(4), layout=xs.sparse_bsr, blocksize=(2, 2))
    supports = _kernel("convert", "_convert_compressed_compressed_numpy").supports
    assert "change of block shape" in supports(XP, x, conversion_target(x, xs.sparse_bsc, blocksize=(1, 1)))
    assert "change of block shape" in supports(XP, x, conversion_target(x, xs.sparse_csc))
    assert supports(XP, x, conversion_target(x, xs.sparse_bsc, blocksize=(2, 2))) is None


def draw_sparse_join(data: st.DataObject, layout: xs.Layout) -> tuple[list[Any], list[Any], int]:
    """``(operands, dense parts, axis)``: compressed operands joined along one of their sparse dimensions.
    Unbatched operands are slices of one array at block boundaries; batched ones the array and flips of
    it (every batch of the result then holds one number of elements)."""
    case = data.draw(S.dense_cases(XP, fill=None), label="case")
    b = case.batch_dim
    axis = b + data.draw(st.integers(0, 1), label="sparse axis")
    dense = case.array
    if b:
        flips = data.draw(st.lists(st.lists(st.integers(0, dense.ndim - 1), unique=True), max_size=2), label="flips")
        parts = [dense, *(np.flip(dense, axis=tuple(f)) if f else dense for f in flips)]
    else:
        step = case.blocksize[axis] if layout.is_blocked else 1
        cuts = sorted(data.draw(st.lists(st.integers(0, dense.shape[axis] // step), max_size=3), label="cuts"))
        edges = [0, *(c * step for c in cuts), dense.shape[axis]]
        parts = [np.take(dense, np.arange(lo, hi), axis=axis) for lo, hi in zip(edges[:-1], edges[1:])]
    return [xs.to_sparse(p, **case.kwargs(layout)) for p in parts], parts, axis


@NATIVE
@FEW
@given(data=st.data())
def test_concat_kernel_along_both_sparse_dimensions(data: st.DataObject) -> None:
    layout = data.draw(st.sampled_from(COMPRESSED_LAYOUTS), label="layout")
    operands, parts, axis = draw_sparse_join(data, layout)
    kernel = _kernel("concat", "_concat_compressed_numpy")
    assert kernel.supports(XP, operands, axis) is None
    result = kernel.func(XP, operands, axis)
    assert_sparse_equal(result, np.concatenate(parts, axis=axis))
    assert_same_components(result, _kernel("concat", "_concat_compressed").func(XP, operands, axis))


@NATIVE
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_concat_kernel_in_parallel(index_dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cpu, "available_threads", lambda: 2)
    rng = np.random.default_rng(8)
    dense = np.where(rng.random((300, 500)) < 0.4, rng.standard_normal((300, 500)), 0.0)
    x = xs.to_sparse(dense, layout=xs.sparse_csr, index_dtype=index_dtype)
    wide = xs.to_sparse(dense, layout=xs.sparse_csr, index_dtype="int64")
    kernel, generic = _kernel("concat", "_concat_compressed_numpy"), _kernel("concat", "_concat_compressed")
    for operands in ([x, x, x], [x, wide]):
        for axis in (0, 1):
            result = kernel.func(XP, operands, axis)
            assert_sparse_equal(result, np.concatenate([dense] * len(operands), axis=axis))
            assert_same_components(result, generic.func(XP, operands, axis))


def test_concat_kernel_declines_batch_and_dense_dimensions() -> None:
    a = xs.to_sparse(np.ones((2, 3, 4, 2)), layout=xs.sparse_csr, dense_dim=1)
    supports = _kernel("concat", "_concat_compressed_numpy").supports
    assert "joins along a sparse dimension" in supports(XP, [a, a], 0)
    assert "joins along a sparse dimension" in supports(XP, [a, a], 3)
    assert supports(XP, [a, a], 1) is None and supports(XP, [a, a], 2) is None


@FEW
@given(data=st.data())
def test_count_nonzero_kernel_counts_the_fill(data: st.DataObject) -> None:
    """Over both sparse dimensions of a 2-D CSR/CSC: the stored values counted where they lie, plus every
    unspecified element when the fill value is nonzero (NaN is), as the generic kernel counts."""
    case = data.draw(S.dense_cases(XP, fill=None, max_batch_dims=0, max_dense_dims=0), label="case")
    layout = data.draw(st.sampled_from([xs.sparse_csr, xs.sparse_csc]), label="layout")
    keepdims = data.draw(st.booleans(), label="keepdims")
    x = case.sparse(layout)
    spec = ReduceSpec((0, 1), keepdims, XP.int64)
    native, generic = _kernel("count_nonzero", "_count_nonzero_compressed_numpy"), _kernel("count_nonzero", "_count_nonzero_compressed")
    assert native.supports(XP, x, spec) is None
    result = native.func(XP, x, spec)
    assert_same(np.asarray(result), np.asarray(generic.func(XP, x, spec)))
    assert_same(np.asarray(result), np.asarray(np.count_nonzero(case.host), dtype=np.int64).reshape((1, 1) if keepdims else ()))


def test_count_nonzero_kernel_in_parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stored zeros (of both signs) are not counted, NaN is, on the parallel path; a nonzero fill counts."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: 2)
    rng = np.random.default_rng(9)
    s = sp.random_array((1000, 1000), density=0.3, format="csr", random_state=rng)
    values = s.data.copy()
    values[rng.random(values.size) < 0.2] = 0.0
    values[rng.random(values.size) < 0.05] = -0.0
    values[rng.random(values.size) < 0.01] = np.nan
    x = xs.sparse_csr_array(s.indptr, s.indices, values, shape=s.shape)
    assert x.nnz > _cpu._PARALLEL_COUNT_MIN
    assert_same(np.asarray(xs.count_nonzero(x)), np.asarray(np.count_nonzero(values), dtype=np.int64))
    filled = x._with_values(x.values(), 2.0)
    assert int(xs.count_nonzero(filled)) == np.count_nonzero(values) + 1000 * 1000 - x.nnz


def _norm_case(data: st.DataObject) -> tuple[Any, np.ndarray]:
    dtype = data.draw(st.sampled_from(["float64", "complex128"]), label="dtype")
    case = data.draw(S.dense_cases(XP, fill=None, dtype=dtype), label="case")
    layout = data.draw(st.sampled_from([xs.sparse_coo, *COMPRESSED_LAYOUTS]), label="layout")
    return case.sparse(layout), case.host


@FEW
@given(data=st.data())
def test_vector_norm_kernel(data: st.DataObject) -> None:
    """The 2-norm over every element of every indexed layout (batches, dense dimensions, fill values
    NaN included) equals the generic kernel's and the dense norm."""
    x, host = _norm_case(data)
    keepdims = data.draw(st.booleans(), label="keepdims")
    axis = data.draw(st.sampled_from([None, tuple(range(x.ndim)), tuple(range(-1, -x.ndim - 1, -1))]), label="axis")
    native, generic = _kernel("vector_norm", "_vector_norm_indexed_numpy"), _kernel("vector_norm", "_vector_norm_sparse")
    assert native.supports(XP, x, axis, keepdims, 2) is None
    result = np.asarray(native.func(XP, x, axis, keepdims, 2))
    with np.errstate(all="ignore"):
        expected = np.asarray(generic.func(XP, x, axis, keepdims, 2))
        dense = np.sqrt(np.sum(np.abs(host.astype(np.complex128 if host.dtype.kind == "c" else np.float64)) ** 2))
    assert result.dtype == expected.dtype and result.shape == expected.shape == ((1,) * x.ndim if keepdims else ())
    np.testing.assert_allclose(result, expected, rtol=1e-12)
    np.testing.assert_allclose(result.reshape(()), dense, rtol=1e-12)


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr, xs.sparse_bsc])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_vector_norm_kernel_special_values(layout: xs.Layout, dtype: str) -> None:
    """Overflow gives inf and NaN propagates, silently, as in the generic kernel; the fill value counts
    once per unspecified element, and not at all when every element is specified."""
    native, generic = _kernel("vector_norm", "_vector_norm_indexed_numpy"), _kernel("vector_norm", "_vector_norm_sparse")
    big = 1e200
    cases = [
        (np.array([[big, 0.0], [0.0, 1.0]]), 0.0),
        (np.array([[np.nan, 0.0], [0.0, 1.0]]), 0.0),
        (np.array([[np.inf, 0.0], [0.0, -np.inf]]), 0.0),
        (np.array([[3.0, 2.0], [2.0, 4.0]]), 2.0),
        (np.array([[3.0, -2.0], [1.0, 4.0]]), -2.0),
        (np.array([[3.0, np.inf], [np.inf, 4.0]]), np.inf),
        (np.array([[3.0, 0.0], [1.0, 4.0]]), np.nan),
        (np.array([[3.0, 5.0], [1.0, 4.0]]), np.nan),
        (np.zeros((2, 2)), 1.5),
        (np.zeros((0, 2)), 0.0),
    ]
    for dense, fill in cases:
        x = xs.to_sparse(dense.astype(dtype), layout=layout, fill_value=fill, blocksize=(1, 1) if layout.is_blocked else None)
        result = np.asarray(native.func(XP, x, None, False, 2))
        with np.errstate(all="ignore"):
            expected = np.asarray(generic.func(XP, x, None, False, 2))
        assert result.dtype == expected.dtype
        np.testing.assert_allclose(result, expected, rtol=1e-6)
        assert float(xs.linalg.vector_norm(x)) == pytest.approx(float(expected), rel=1e-6, nan_ok=True)


@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr])
def test_vector_norm_kernel_complex_with_one_infinite_part(layout: xs.Layout) -> None:
    """|inf + nanj| is inf (the standard's abs), so the norm is: the squares of the parts add up to NaN."""
    native, generic = _kernel("vector_norm", "_vector_norm_indexed_numpy"), _kernel("vector_norm", "_vector_norm_sparse")
    cases = [
        (complex(np.inf, np.nan), np.inf),
        (complex(np.nan, -np.inf), np.inf),
        (complex(np.nan, 1.0), np.nan),
        (complex(-np.inf, 0.0), np.inf),
    ]
    for z, want in cases:
        x = xs.to_sparse(np.array([[z, 1 + 0j], [0j, 2j]]), layout=layout)
        assert native.supports(XP, x, None, False, 2) is None
        result = float(np.asarray(native.func(XP, x, None, False, 2)))
        with np.errstate(all="ignore"):
            expected = float(np.asarray(generic.func(XP, x, None, False, 2)))
        assert result == pytest.approx(want, nan_ok=True) and expected == pytest.approx(want, nan_ok=True), (z, result, expected)


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc])
def test_complex_sums_across_slices_without_the_extension(layout: xs.Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the compiled sums, complex sums across the compressed slices are added, not multiplied by a
    row of ones: (1 + 0j) * (inf + 0j) is inf + nanj, the sum inf + 0j."""
    monkeypatch.setattr(_cpu, "unavailable_reason", lambda: "the extension is not built")
    d = np.array([[np.inf + 0j, 1], [1, 0]])
    if layout is xs.sparse_csc:
        d = d.T
    a = xs.to_sparse(d, layout=layout)
    axis = a.layout.compressed_dim
    for result in (xs.to_dense(xs.sum(a, axis=axis)), xs.sum(a, axis=axis, layout=xs.strided)):
        got, want = np.asarray(result), np.sum(d, axis=axis)
        np.testing.assert_array_equal(got.real, want.real)
        np.testing.assert_array_equal(got.imag, want.imag)


def test_vector_norm_kernel_declines() -> None:
    supports = _kernel("vector_norm", "_vector_norm_indexed_numpy").supports
    a = xs.to_sparse(np.eye(3), layout=xs.sparse_csr)
    assert supports(XP, a, None, False, 2) is None and supports(XP, a, (1, -2), True, 2) is None
    assert "not ord=1" in supports(XP, a, None, False, 1)
    assert "not ord=inf" in supports(XP, a, None, False, math.inf)
    assert "not axis=0" in supports(XP, a, 0, False, 2)
    assert "not axis=(0, 0)" in supports(XP, a, (0, 0), False, 2)
    assert "not float16" in supports(XP, xs.to_sparse(np.eye(3, dtype=np.float16), layout=xs.sparse_csr), None, False, 2)
    # a single-precision BLAS dot sums in single precision: the generic kernel's pairwise sum is more accurate
    assert "not float32" in supports(XP, xs.to_sparse(np.eye(3, dtype=np.float32), layout=xs.sparse_csr), None, False, 2)
    assert "not complex64" in supports(XP, xs.to_sparse(np.eye(3, dtype=np.complex64), layout=xs.sparse_csr), None, False, 2)
    uncoalesced = xs.sparse_coo_array(np.array([[0, 0], [1, 1]]), np.array([3.0, -3.0]), (2, 2))
    assert not uncoalesced.is_coalesced()
    assert "uncoalesced" in supports(XP, uncoalesced, None, False, 2)
    assert float(xs.linalg.vector_norm(uncoalesced)) == 0.0  # the duplicates cancel before the magnitude


def test_indices_in_the_other_byte_order() -> None:
    """Indices given big-endian are copied in the native order by the constructors (the compiled kernels read
    that order), and convert and index as native ones do."""
    d = np.array([[0.0, 2.0, 0.0, 1.0], [3.0, 0.0, 0.0, 0.0], [0.0, 0.0, 4.0, 5.0]])
    c = xs.to_sparse_csr(d)
    swapped = xs.sparse_csr_array(c.crow_indices().astype(">i8"), c.col_indices().astype(">i8"), c.values(), d.shape)
    assert swapped.index_dtype == np.dtype("int64") and swapped.index_dtype.isnative
    assert_sparse_equal(xs.to_sparse_csc(swapped), d)
    assert_sparse_equal(xs.to_sparse_coo(swapped), d)
    assert_sparse_equal(swapped[np.array([2, 0, 1]), np.array([3, 1, 1])], d[[2, 0, 1], [3, 1, 1]])
    assert_sparse_equal(xs.linalg.diagonal(swapped, offset=1), np.diagonal(d, offset=1).copy())


@NATIVE
def test_transpose_leaves_a_hypersparse_result_to_the_scatter() -> None:
    """A result with far more slices than entries would need per-thread counters several times its size:
    the compiled transpose declines it (None), and the conversion still gives the transpose."""
    n = 5_000_000
    ci, pi = np.array([[0, 3]], dtype=np.int32), np.array([[1, 5, n - 1]], dtype=np.int32)
    assert _cpu.transpose_compressed(ci, pi, np.ones((1, 3)), n, np.int32) is None
    x = xs.sparse_csr_array(ci[0], pi[0], np.array([1.0, 2.0, 3.0]), (1, n))
    t = xs.to_sparse_csc(x)
    counts = np.diff(np.asarray(t.ccol_indices()))
    assert counts.sum() == 3 and counts[1] == counts[5] == counts[n - 1] == 1
    np.testing.assert_array_equal(np.asarray(t.values()), [1.0, 2.0, 3.0])


@NATIVE
@examples
@given(
    counts=st.lists(st.integers(0, 4), max_size=40), n_extra=st.integers(0, 3), index_dtype=st.sampled_from(INDEX_DTYPES)
)
def test_sorted_offsets_match_a_count(counts: list[int], n_extra: int, index_dtype: np.dtype) -> None:
    """The offsets of coalesced entries (empty rows first, last and between) are the running count."""
    n_major = len(counts) + n_extra
    major = np.repeat(np.arange(len(counts)), counts).astype(index_dtype)
    minor = np.concatenate([np.arange(c) for c in counts] or [np.zeros(0)]).astype(index_dtype)
    expected = np.concatenate([[0], np.cumsum(np.bincount(major, minlength=n_major))])
    np.testing.assert_array_equal(_cpu.sorted_offsets(major, minor, n_major), expected)


@NATIVE
@pytest.mark.parametrize("threads", [1, 2])
def test_sorted_offsets_large_and_out_of_order(threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries out of row-major order, repeated or out of range give None, and nothing is written outside
    the offsets (a huge or negative row in the middle once wrote past them)."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: threads)
    rng = np.random.default_rng(0)
    keys = np.unique(rng.integers(0, 50_000 * 7, 300_000))
    major, minor = keys // 7, keys % 7
    expected = np.concatenate([[0], np.cumsum(np.bincount(major, minlength=60_000))])
    np.testing.assert_array_equal(_cpu.sorted_offsets(major, minor, 60_000), expected)
    cases = [
        (np.insert(major, 150_000, 0), np.insert(minor, 150_000, 0)),  # a row out of order
        (np.insert(major, 150_000, major[150_000]), np.insert(minor, 150_000, minor[150_000])),  # a repeated position
        (np.insert(major, 150_000, 1 << 40), np.insert(minor, 150_000, 0)),  # huge, in the middle
        (np.insert(major, 150_000, -5), np.insert(minor, 150_000, 0)),  # negative, in the middle
        (np.append(major, 60_000), np.append(minor, 0)),  # beyond the last row
        (major[::-1].copy(), minor[::-1].copy()),
    ]
    for bad_major, bad_minor in cases:
        assert _cpu.sorted_offsets(bad_major, bad_minor, 60_000) is None


def test_coo_wrongly_marked_coalesced_converts_as_any_other() -> None:
    """The coalesced flag is the caller's word: entries out of order or repeated are sorted and summed."""
    a = xs.sparse_coo_array(np.array([[0, 0, 1], [1, 1, 0]]), np.array([1.0, 2.0, 4.0]), (2, 2), is_coalesced=True)
    c = xs.to_sparse_csr(a)
    assert c.col_indices().tolist() == [1, 0] and c.values().tolist() == [3.0, 4.0]
    with xs.check_sparse_tensor_invariants():
        xs.sparse_csr_array(c.crow_indices(), c.col_indices(), c.values(), c.shape)
    # indices out of range are the validator's error, whichever path reads them
    for rows, cols in (([0, 1], [0, 5]), ([0, 3], [0, 1]), ([-1, 0], [0, 0])):
        bad = xs.sparse_coo_array(np.array([rows, cols]), np.array([1.0, 2.0]), (2, 2), is_coalesced=True)
        with pytest.raises(xs.InvariantError, match=r"^invariant coo\.5 violated: to_sparse\(layout=sparse_csr\): indices\[[01]\] must lie in \[0, 2\)"):
            xs.to_sparse_csr(bad)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_coalesced_coo_to_csr_without_the_sort(data: st.DataObject) -> None:
    """A COO array marked coalesced converts to the CSR that the counting sort gives (batches, dense
    dimensions, empty rows, int32 and int64 indices), sharing its values."""
    c = data.draw(S.dense_cases(XP, max_batch_dims=1, max_dense_dims=1))
    coo = xs.to_sparse_coo(XP.asarray(c.host), sparse_dim=len(c.shape) - c.dense_dim, index_dtype=c.index_dtype, fill_value=c.fill_value)
    coo = coo.coalesce()
    assert coo.is_coalesced()
    kwargs = {"layout": xs.sparse_csr, "dense_dim": c.dense_dim}
    try:
        got = xs.to_sparse(coo, **kwargs)
    except xs.InvariantError:
        return  # batches of unequal counts: the general conversion refuses them too (tested there)
    unmarked = xs.sparse_coo_array(coo.indices(), coo.values(), coo.shape, fill_value=coo.fill_value)
    assert not unmarked.is_coalesced() or unmarked.nnz <= 1  # (one entry is coalesced by definition)
    expected = xs.to_sparse(unmarked, **kwargs)
    assert_same_components(got, expected)
    if coo.values().size and got.batch_dim() == 0:
        assert np.shares_memory(np.asarray(got.values()), np.asarray(coo.values()))
