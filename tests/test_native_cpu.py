"""Tests of the NumPy backend's compiled CPU conversion kernels (``xsparse.backends._cpu``).

Every result is compared with a NumPy oracle that does the same arithmetic in the same order (so
float sums compare exactly), and the 2-D float64 cases also with SciPy.
"""

from __future__ import annotations

import math
import subprocess
import sys
from typing import Any, cast

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from xsparse.backends import _cpu

pytestmark = pytest.mark.skipif(
    _cpu.unavailable_reason() is not None, reason=str(_cpu.unavailable_reason())
)

VALUE_DTYPES = [
    np.dtype(t)
    for t in (
        np.bool_,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.float32,
        np.float64,
        np.complex64,
        np.complex128,
    )
]
INDEX_DTYPES = [np.dtype(np.int32), np.dtype(np.int64)]

Triple = tuple[np.ndarray, np.ndarray, np.ndarray]
# major, minor, values, n_major, n_minor, memory layout
CooCase = tuple[np.ndarray, np.ndarray, np.ndarray, int, int, str]
LAYOUTS = ["c", "step", "reversed", "fortran", "trailing"]

# From this many entries the COO conversion scatters on several threads (when it can afford their
# counters); the large cases below are sized around it.
PARALLEL_NNZ = _cpu._PARALLEL_SCATTER_MIN_NNZ

# No deadline: the first call of a parallel kernel starts OpenMP's threads.
examples = settings(deadline=None, max_examples=150)


# --- data -----------------------------------------------------------------------------------------


def random_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype, zeros: float = 0.0) -> np.ndarray:
    """Random values over the dtype's whole range (so integer sums wrap), with special floats."""
    out: np.ndarray
    if dtype.kind == "b":
        out = rng.random(shape) < 0.5
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        out = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    else:
        real = dtype.type(0).real.dtype
        out = rng.standard_normal(shape).astype(real)
        if dtype.kind == "c":
            out = out + 1j * rng.standard_normal(shape).astype(real)
        out = out.astype(dtype)
        flat = out.reshape(-1)
        if flat.size:
            special = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=real).astype(dtype)
            picks = rng.random(flat.size) < 0.05
            flat[picks] = rng.choice(special, size=int(picks.sum()))
    if zeros:
        out = np.where(rng.random(shape) < zeros, np.zeros((), dtype), out)
    return np.asarray(out, dtype=dtype)


def relayout(a: np.ndarray, layout: str) -> np.ndarray:
    """An array equal to ``a`` with the given memory layout (a view of a larger or permuted buffer)."""
    if layout == "c" or a.ndim == 0:
        return np.ascontiguousarray(a)
    if layout == "step":
        big = np.zeros((2 * a.shape[0], *a.shape[1:]), a.dtype)
        big[::2] = a
        return big[::2]
    if layout == "reversed":
        return np.ascontiguousarray(a[::-1])[::-1]
    if layout == "trailing" and a.ndim >= 3:  # trailing dimensions that cannot merge into one axis
        return np.ascontiguousarray(a.swapaxes(1, 2)).swapaxes(1, 2)
    return np.asfortranarray(a)


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same dtype, shape and elements (NaNs equal), and the same signs of zeros (-0.0 is not +0.0)."""
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected, strict=True)
    if actual.dtype.kind in "fc":
        for a, e in ((actual.real, expected.real), (actual.imag, expected.imag)):
            np.testing.assert_array_equal(np.signbit(a) & (a == 0), np.signbit(e) & (e == 0), err_msg="signs of zeros")


def not_plus_zero(dense: np.ndarray) -> np.ndarray:
    """Where an element is not +0 (per part of a complex): the specified elements with fill value +0.0,
    -0.0 and NaN included (docs/decisions.md, "Fill values")."""
    if dense.dtype.kind not in "fc":
        return np.asarray(dense != 0)
    parts = (dense.real, dense.imag) if dense.dtype.kind == "c" else (dense,)
    return np.asarray(np.any([(p != 0) | np.signbit(p) for p in parts], axis=0))


# --- oracles --------------------------------------------------------------------------------------


def oracle_coo_to_compressed(
    major: np.ndarray, minor: np.ndarray, values: np.ndarray, n_major: int, sum_duplicates: bool
) -> Triple:
    """Stable sort by (major, minor); merge runs of equal coordinates summing in input order."""
    order = np.lexsort((minor, major))  # stable: equal keys keep their input order
    major, minor, values = major[order], minor[order], values[order]
    if sum_duplicates and major.size:
        starts = np.flatnonzero(np.r_[True, (major[1:] != major[:-1]) | (minor[1:] != minor[:-1])])
        bounds = np.r_[starts, major.size]
        sums = []
        for s, e in zip(bounds[:-1], bounds[1:]):
            acc = values[s : s + 1].copy()  # arrays, not scalars: integer sums wrap silently
            for k in range(s + 1, e):
                with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, float overflow
                    acc = (acc | values[k : k + 1]) if values.dtype == bool else acc + values[k : k + 1]
            sums.append(acc)
        major, minor, values = major[starts], minor[starts], np.concatenate(sums)
    counts = np.bincount(major, minlength=n_major)
    indptr = np.r_[0, np.cumsum(counts)].astype(minor.dtype)
    return indptr, minor, values


def oracle_dense_to_compressed(dense: np.ndarray, index_dtype: np.dtype) -> Triple:
    mask = not_plus_zero(dense)
    if dense.ndim > 2:
        mask = mask.reshape(*dense.shape[:2], math.prod(dense.shape[2:])).any(axis=2)
    rows, cols = np.nonzero(mask)
    indptr = np.r_[0, np.cumsum(np.bincount(rows, minlength=dense.shape[0]))].astype(index_dtype)
    return indptr, cols.astype(index_dtype), dense[rows, cols]


def oracle_compressed_to_dense(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n_major: int, n_minor: int
) -> np.ndarray:
    out = np.zeros((n_major, n_minor, *data.shape[1:]), data.dtype)
    rows = np.repeat(np.arange(n_major), np.diff(indptr))
    ufunc = np.logical_or if data.dtype == bool else np.add
    cols, vals = indices[indptr[0] : indptr[-1]], data[indptr[0] : indptr[-1]]
    with np.errstate(invalid="ignore", over="ignore"):
        if data.dtype.kind not in "fc":
            ufunc.at(out, (rows, cols), vals)
            return out
        # an element still +0 (all bits zero) takes the value as it is, so that a stored -0.0 keeps
        # its sign (+0.0 + -0.0 is +0.0); after that the values add up in storage order
        for r, c, v in zip(rows, cols, vals):
            out[r, c] = np.where(not_plus_zero(out[r, c]), out[r, c] + v, v)
    return out


# --- strategies -----------------------------------------------------------------------------------

dense_shapes = st.lists(st.integers(0, 3), max_size=2).map(tuple)


@st.composite
def coo_cases(draw: st.DrawFn) -> CooCase:
    index_dtype = draw(st.sampled_from(INDEX_DTYPES))
    dtype = draw(st.sampled_from(VALUE_DTYPES))
    n_major = draw(st.integers(0, 12))
    n_minor = draw(st.integers(0, 12))
    nnz = draw(st.integers(0, 200)) if n_major and n_minor else 0
    # A small pool of coordinates makes duplicates common; n_major = 1 makes slices long enough
    # for the insertion and pair sorts.
    pool = draw(st.integers(1, 400))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    coords = rng.integers(0, [[max(n_major, 1)], [max(n_minor, 1)]], size=(2, min(pool, max(nnz, 1))))
    pick = rng.integers(0, coords.shape[1], size=nnz)
    major, minor = coords[0, pick].astype(index_dtype), coords[1, pick].astype(index_dtype)
    values = random_values(rng, (nnz, *draw(dense_shapes)), dtype)
    layout = draw(st.sampled_from(LAYOUTS))
    return major, minor, values, n_major, n_minor, layout


@st.composite
def dense_cases(draw: st.DrawFn) -> tuple[np.ndarray, np.dtype]:
    dtype = draw(st.sampled_from(VALUE_DTYPES))
    shape = (draw(st.integers(0, 15)), draw(st.integers(0, 15)), *draw(dense_shapes))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dense = random_values(rng, shape, dtype, zeros=draw(st.sampled_from([0.0, 0.5, 0.9, 1.0])))
    layout = draw(st.sampled_from(["c", "transpose", "fortran", "step", "reversed", "trailing"]))
    if layout == "transpose":  # a transposed view, as from dense.T
        dense = np.ascontiguousarray(dense.swapaxes(0, 1)).swapaxes(0, 1)
    elif layout == "step":
        big = np.zeros((2 * shape[0], 3 * shape[1], *shape[2:]), dtype)
        big[::2, ::3] = dense
        dense = big[::2, ::3]
    elif layout == "reversed":
        dense = np.ascontiguousarray(dense[::-1, ::-1])[::-1, ::-1]
    elif layout == "trailing" and dense.ndim == 4:  # trailing dimensions that cannot merge
        dense = np.ascontiguousarray(dense.swapaxes(2, 3)).swapaxes(2, 3)
    elif layout == "fortran":
        dense = np.asfortranarray(dense)
    return dense, draw(st.sampled_from(INDEX_DTYPES))


# --- coo_to_compressed ----------------------------------------------------------------------------


@examples
@given(case=coo_cases(), sum_duplicates=st.booleans())
def test_coo_to_compressed_matches_oracle(case: CooCase, sum_duplicates: bool) -> None:
    major, minor, values, n_major, n_minor, layout = case
    expected = oracle_coo_to_compressed(major, minor, values, n_major, sum_duplicates)
    actual = _cpu.coo_to_compressed(
        relayout(major, layout),
        relayout(minor, layout),
        relayout(values, layout),
        n_major,
        n_minor,
        sum_duplicates=sum_duplicates,
    )
    for a, e in zip(actual, expected):
        assert_same(a, e)


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize(
    ("n_major", "n_minor", "nnz", "pool"),
    [
        (1, 1000, PARALLEL_NNZ + 1, 5000),  # one long slice: pair sort
        (3000, 100, 2 * PARALLEL_NNZ, 10**6),  # slices of ~40: insertion sort
        (20_000, 10**6, 3 * PARALLEL_NNZ, 150_000),  # short slices, many duplicates
        (10**6, 10**6, PARALLEL_NNZ, 10**6),  # more slices than entries: serial scatter
    ],
)
@pytest.mark.parametrize(("dense_shape", "layout"), [((), "c"), ((2,), "c"), ((), "step"), ((2,), "fortran")])
def test_coo_to_compressed_large(
    index_dtype: np.dtype, n_major: int, n_minor: int, nnz: int, pool: int, dense_shape: tuple[int, ...], layout: str
) -> None:
    rng = np.random.default_rng(nnz + n_major)
    coords = rng.integers(0, [[n_major], [n_minor]], size=(2, pool))
    pick = rng.integers(0, pool, size=nnz)
    major, minor = coords[0, pick].astype(index_dtype), coords[1, pick].astype(index_dtype)
    # Distinct integer-valued floats: any summation order is exact, and the unsummed order is visible.
    values = np.arange(nnz * math.prod(dense_shape), dtype=np.float64).reshape(nnz, *dense_shape)
    for sum_duplicates in (True, False):
        indptr, indices, data = _cpu.coo_to_compressed(
            relayout(major, layout),
            relayout(minor, layout),
            relayout(values, layout),
            n_major,
            n_minor,
            sum_duplicates=sum_duplicates,
        )
        order = np.lexsort((minor, major))
        if sum_duplicates:
            keys = major[order].astype(np.int64) * n_minor + minor[order]
            starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
            exp_minor = minor[order][starts]
            exp_data = np.add.reduceat(values[order], starts, axis=0)
            exp_major = major[order][starts]
        else:
            exp_major, exp_minor, exp_data = major[order], minor[order], values[order]
        exp_indptr = np.r_[0, np.cumsum(np.bincount(exp_major, minlength=n_major))].astype(index_dtype)
        assert_same(indptr, exp_indptr)
        assert_same(indices, exp_minor)
        assert_same(data, exp_data)


@examples
@given(case=coo_cases())
def test_coo_to_compressed_matches_scipy(case: CooCase) -> None:
    major, minor, _, n_major, n_minor, _ = case
    values = np.random.default_rng(major.size).standard_normal(major.size)
    indptr, indices, data = _cpu.coo_to_compressed(major, minor, values, n_major, n_minor)
    ref = sp.coo_array((values, (major, minor)), shape=(n_major, n_minor)).tocsr()
    ref.sum_duplicates()
    np.testing.assert_array_equal(indptr, ref.indptr)
    np.testing.assert_array_equal(indices, ref.indices)
    np.testing.assert_allclose(data, ref.data, rtol=1e-12, atol=1e-12)


def test_coo_to_compressed_keeps_index_dtype_and_releases_merged_tail() -> None:
    major = np.array([1, 1, 0, 1], np.int32)
    minor = np.array([2, 2, 0, 2], np.int32)
    indptr, indices, data = _cpu.coo_to_compressed(major, minor, np.ones((4, 2), np.float32), 2, 3)
    assert indptr.dtype == indices.dtype == np.int32
    assert_same(indptr, np.array([0, 1, 2], np.int32))
    assert_same(indices, np.array([0, 2], np.int32))
    assert_same(data, np.array([[1, 1], [3, 3]], np.float32))
    # Shrunk in place, not a view of an nnz-sized buffer.
    assert indices.base is None and data.base is None
    assert indices.flags.owndata and data.flags.owndata


def test_coo_to_compressed_rejects_bad_input() -> None:
    idx = np.array([0, 1], np.int64)
    with pytest.raises(ValueError, match="out of range"):
        _cpu.coo_to_compressed(np.array([0, 2], np.int64), idx, np.ones(2), 2, 2)
    with pytest.raises(ValueError, match="out of range"):
        _cpu.coo_to_compressed(np.array([0, -1], np.int64), idx, np.ones(2), 2, 2)
    with pytest.raises(TypeError):
        _cpu.coo_to_compressed(idx, idx.astype(np.int32), np.ones(2), 2, 2)
    with pytest.raises(TypeError):
        _cpu.coo_to_compressed(idx.astype(np.int16), idx.astype(np.int16), np.ones(2), 2, 2)
    with pytest.raises(TypeError, match="float16"):
        _cpu.coo_to_compressed(idx, idx, np.ones(2, np.float16), 2, 2)
    with pytest.raises(ValueError):
        _cpu.coo_to_compressed(idx, idx, np.ones(3), 2, 2)


# --- dense_to_compressed --------------------------------------------------------------------------


@examples
@given(case=dense_cases())
def test_dense_to_compressed_matches_oracle(case: tuple[np.ndarray, np.dtype]) -> None:
    dense, index_dtype = case
    actual = _cpu.dense_to_compressed(dense, index_dtype)
    for a, e in zip(actual, oracle_dense_to_compressed(dense, index_dtype)):
        assert_same(a, e)


@pytest.mark.parametrize("layout", ["c", "transpose"])
def test_dense_to_compressed_matches_scipy(layout: str) -> None:
    rng = np.random.default_rng(0)
    dense = random_values(rng, (300, 200), np.dtype(np.float64), zeros=0.5)
    if layout == "transpose":
        dense = np.ascontiguousarray(dense.T).T
    indptr, indices, data = _cpu.dense_to_compressed(dense, np.int64)
    # SciPy keeps NaN and leaves out -0.0 (which is specified): compare the positions of 1.0 in their place
    ref = sp.csr_array(np.where(not_plus_zero(dense), 1.0, 0.0))
    np.testing.assert_array_equal(indptr, ref.indptr)
    np.testing.assert_array_equal(indices, ref.indices)
    assert_same(data, dense[np.nonzero(not_plus_zero(dense))])


def test_dense_to_compressed_nan_and_negative_zero() -> None:
    """With fill value +0.0, -0.0 (either part of a complex) and NaN are specified; only +0 is left out."""
    for dtype in (np.float32, np.float64):
        dense = np.array([[0.0, -0.0, np.nan, 0.0]], dtype=dtype)
        indptr, indices, data = _cpu.dense_to_compressed(dense, np.int32)
        assert_same(indices, np.array([1, 2], np.int32))
        assert np.signbit(data[0]) and data[0] == 0 and np.isnan(data[1])
    for cdtype in (np.complex64, np.complex128):
        dense_c = np.zeros((1, 6), dtype=cdtype)
        dense_c.real = [0.0, -0.0, 0.0, -0.0, 0.0, 0.0]
        dense_c.imag = [0.0, 0.0, -0.0, -0.0, np.nan, 1.0]
        _, indices, data = _cpu.dense_to_compressed(dense_c, np.int64)
        assert_same(indices, np.array([1, 2, 3, 4, 5], np.int64))
        assert_same(data[:3], dense_c[0, 1:4])
    # a block (trailing dimension) with only a -0.0 is specified
    _, indices, _ = _cpu.dense_to_compressed(np.array([[[0.0, 0.0], [0.0, -0.0]]]), np.int64)
    assert_same(indices, np.array([1], np.int64))


def test_compressed_to_dense_keeps_negative_zero() -> None:
    """A stored -0.0 (either part of a complex) is written as -0.0, not added to +0.0; duplicates after it add up."""
    indptr = np.array([0, 2, 4], np.int64)
    indices = np.array([0, 1, 1, 1], np.int64)
    data = np.array([-0.0, complex(-0.0, 1.0), complex(2.0, -0.0), complex(-0.0, -0.0)], np.complex128)
    out = _cpu.compressed_to_dense(indptr, indices, data, 2, 2)
    expected = np.zeros((2, 2), np.complex128)
    expected.real = [[-0.0, -0.0], [0.0, 2.0]]
    expected.imag = [[0.0, 1.0], [0.0, -0.0]]
    assert_same(out, expected)
    real = _cpu.compressed_to_dense(indptr, indices, np.array([-0.0, -0.0, 1.0, -1.0]), 2, 2)
    assert_same(real, np.array([[-0.0, -0.0], [0.0, 0.0]]))


# --- compressed_to_dense --------------------------------------------------------------------------


@examples
@given(case=coo_cases(), slack=st.booleans(), out_layout=st.sampled_from(["none", "c", "fortran", "trailing"]))
def test_compressed_to_dense_matches_oracle(case: CooCase, slack: bool, out_layout: str) -> None:
    major, minor, values, n_major, n_minor, layout = case
    # Slices in input order: unsorted, with duplicates.
    order = np.argsort(major, kind="stable")
    indices, data = minor[order], values[order]
    indptr = np.r_[0, np.cumsum(np.bincount(major, minlength=n_major))].astype(major.dtype)
    if slack:  # unused entries before indptr[0] and after indptr[-1]
        indptr = indptr + 2
        indices = np.r_[np.zeros(2, indices.dtype), indices, np.zeros(3, indices.dtype)]
        pad = np.ones((1, *data.shape[1:]), data.dtype)
        data = np.concatenate([pad, pad, data, pad, pad, pad])
    expected = oracle_compressed_to_dense(indptr, indices, data, n_major, n_minor)
    out = None
    if out_layout != "none":
        out = np.zeros(expected.shape, expected.dtype)
        if out_layout == "fortran":
            out = np.asfortranarray(out)
        elif out_layout == "trailing" and out.ndim == 4:
            out = np.zeros(expected.shape[:2] + expected.shape[2:][::-1], expected.dtype).swapaxes(2, 3)
    result = _cpu.compressed_to_dense(
        relayout(indptr, layout), relayout(indices, layout), relayout(data, layout), n_major, n_minor, out=out
    )
    if out is not None:
        assert result is out
    assert_same(np.ascontiguousarray(result), expected)


@examples
@given(case=dense_cases())
def test_round_trip(case: tuple[np.ndarray, np.dtype]) -> None:
    dense, index_dtype = case
    indptr, indices, data = _cpu.dense_to_compressed(dense, index_dtype)
    back = _cpu.compressed_to_dense(indptr, indices, data, *dense.shape[:2])
    assert_same(back, np.ascontiguousarray(dense))


def test_compressed_to_dense_rejects_bad_input() -> None:
    indptr = np.array([0, 1, 2], np.int64)
    data = np.ones(2)
    with pytest.raises(ValueError, match="out of range"):
        _cpu.compressed_to_dense(indptr, np.array([0, 3], np.int64), data, 2, 3)
    with pytest.raises(ValueError, match="non-decreasing"):
        _cpu.compressed_to_dense(np.array([0, 2, 1], np.int64), np.array([0, 1], np.int64), data, 2, 3)
    with pytest.raises(ValueError, match="non-decreasing"):
        _cpu.compressed_to_dense(np.array([0, 1, 3], np.int64), np.array([0, 1], np.int64), data, 2, 3)
    with pytest.raises(ValueError, match="out must be"):
        _cpu.compressed_to_dense(indptr, np.array([0, 1], np.int64), data, 2, 3, out=np.zeros((3, 2)))


# --- index capacity -------------------------------------------------------------------------------


def test_index_capacity_check() -> None:
    # A real int32 overflow needs more than 2**31 entries; the check the conversions share is
    # exercised directly, and through dense_to_compressed with an empty but very wide array.
    _cpu._check_index_capacity(2**31 - 1, np.dtype(np.int32), "nnz")
    with pytest.raises(OverflowError, match="use int64 indices"):
        _cpu._check_index_capacity(2**31, np.dtype(np.int32), "nnz")
    _cpu._check_index_capacity(2**31, np.dtype(np.int64), "nnz")
    wide = np.zeros((0, 2**31), bool)
    with pytest.raises(OverflowError, match="use int64 indices"):
        _cpu.dense_to_compressed(wide, np.int32)
    indptr, indices, data = _cpu.dense_to_compressed(wide, np.int64)
    assert_same(indptr, np.zeros(1, np.int64))
    assert indices.size == data.size == 0


# --- dtypes and availability ----------------------------------------------------------------------


def test_supports_dtype() -> None:
    for dtype in VALUE_DTYPES:
        assert _cpu.supports_dtype(dtype)
    unsupported: list[Any] = [np.float16, np.dtype(">f8"), np.dtype("S3"), object, "not a dtype"]
    for dtype in unsupported:
        assert not _cpu.supports_dtype(dtype)


def test_unavailable_reason_is_none_when_built() -> None:
    assert _cpu.unavailable_reason() is None


def test_native_import_runs_once_when_threads_ask_at_once() -> None:
    """Threads that need the compiled kernels at once import them once: the import sets OMP_WAIT_POLICY for
    its duration, and two at once would undo each other's change (a KeyError, or the variable left set).
    In a fresh interpreter, with the import slowed down until a second one starts (it never does)."""
    code = """
import importlib, os, sys, threading, types
os.environ.pop("OMP_WAIT_POLICY", None)
from xsparse.backends import _cpu
assert "xsparse.backends._native" not in sys.modules
seen, second = [], threading.Event()
def slow_import(name):
    seen.append(os.environ.get("OMP_WAIT_POLICY"))
    if len(seen) > 1:
        second.set()
    second.wait(1.0)
    return importlib.import_module(name)
_cpu.importlib = types.SimpleNamespace(import_module=slow_import)
errors = []
def use():
    try:
        errors.append(_cpu.unavailable_reason())
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=use) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(seen, errors, os.environ.get("OMP_WAIT_POLICY"))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['PASSIVE'] [None, None, None, None] None"


# --- elementwise merges and sums (``_cpu.csr_merge``, ``_cpu.csr_sums`` and their registered kernels) -----

import xsparse as xs  # noqa: E402
from xsparse import dispatch  # noqa: E402
from xsparse.formats import CompressedArray  # noqa: E402

XP = xs.get_backend("numpy").load()
MERGE_OPS = ["add", "subtract", "multiply"]
ARITH_DTYPES = [np.dtype(t) for t in (np.int32, np.int64, np.float32, np.float64, np.complex128)]
merge_examples = settings(deadline=None, max_examples=100)


def _kernel(op: str, name: str) -> Any:
    (k,) = [k for k in dispatch.kernels(op) if k.name == name]
    return k


def _generic_binary(op: str) -> Any:
    (k,) = [k for k in dispatch.kernels(op) if k.kind == "generic" and k.name == f"_{op}_indexed_indexed"]
    return k


def random_canonical(
    rng: np.random.Generator, shape: tuple[int, int], density: float, dtype: np.dtype, index_dtype: np.dtype, layout: Any
) -> CompressedArray:
    """A canonical CSR or CSC array with random (and special: inf, NaN, -0.0, 0) values."""
    mask = rng.random(shape) < density
    if layout is xs.sparse_csc:
        mask = mask.T
    major, minor = np.nonzero(mask)
    indptr = np.r_[0, np.cumsum(np.bincount(major, minlength=mask.shape[0]))].astype(index_dtype)
    values = random_values(rng, (minor.size,), dtype, zeros=0.1)
    return CompressedArray(indptr, minor.astype(index_dtype), values, shape, layout=layout, backend=xs.get_backend("numpy"), xp=XP)


def assert_same_sparse(actual: Any, expected: Any) -> None:
    """The same layout, shape, fill value and stored entries (indices, index dtype, values bit for bit,
    but for complex values, whose products NumPy may compute with fused multiply-adds: to 1 ulp)."""
    assert actual.layout is expected.layout and tuple(actual.shape) == tuple(expected.shape)
    assert actual.fill_value == expected.fill_value and type(actual.fill_value) is type(expected.fill_value)
    assert_same(np.asarray(actual.compressed_indices()), np.asarray(expected.compressed_indices()))
    assert_same(np.asarray(actual.plain_indices()), np.asarray(expected.plain_indices()))
    got, want = np.asarray(actual.values()), np.asarray(expected.values())
    if want.dtype.kind == "c":
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=4 * np.finfo(want.dtype).eps, atol=0)
    else:
        assert_same(got, want)


@st.composite
def merge_cases(draw: st.DrawFn) -> tuple[CompressedArray, CompressedArray]:
    m, n = draw(st.integers(0, 9)), draw(st.integers(0, 40))
    dtype = draw(st.sampled_from(ARITH_DTYPES))
    index_dtype = np.dtype(draw(st.sampled_from(INDEX_DTYPES)))
    layout = draw(st.sampled_from([xs.sparse_csr, xs.sparse_csc]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    # density 0 gives nnz = 0; low densities give empty rows; high ones long rows (the merge, not the
    # pairwise comparisons) and many indices in common
    da, db = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0])), draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    a = random_canonical(rng, (m, n), da, dtype, index_dtype, layout)
    b = random_canonical(rng, (m, n), db, dtype, index_dtype, layout)
    if draw(st.booleans()):  # the same pattern on both sides: every entry in common (x - x gives zeros)
        b = a._with_values(random_values(rng, a.values().shape, dtype), b.fill_value)
    return a, b


@merge_examples
@given(case=merge_cases(), op=st.sampled_from(MERGE_OPS))
def test_compiled_merge_matches_generic_kernel(case: tuple[CompressedArray, CompressedArray], op: str) -> None:
    a, b = case
    native = _kernel(op, f"_{op}_compiled_compressed_compressed_numpy")
    assert native.supports(XP, a, b) is None
    with np.errstate(all="ignore"):
        expected = _generic_binary(op).func(XP, a, b)
        actual = native.func(XP, a, b)
    assert_same_sparse(actual, expected)
    # and through the public function, which picks the compiled kernel
    assert_same_sparse(getattr(xs, op)(a, b), expected)


@pytest.mark.parametrize("op", MERGE_OPS)
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_compiled_merge_large_matches_generic_kernel(op: str, index_dtype: np.dtype, monkeypatch: pytest.MonkeyPatch) -> None:
    """Enough entries for the parallel chunks, rows short (pairwise) and long (merged), NaNs from inf * 0."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: 2)  # however busy the machine is
    rng = np.random.default_rng(7)
    a = random_canonical(rng, (3000, 400), 0.04, np.dtype(np.float64), index_dtype, xs.sparse_csr)
    b = random_canonical(rng, (3000, 400), 0.04, np.dtype(np.float64), index_dtype, xs.sparse_csr)
    dense_rows = random_canonical(rng, (3000, 400), 0.5, np.dtype(np.float64), index_dtype, xs.sparse_csr)
    native = _kernel(op, f"_{op}_compiled_compressed_compressed_numpy")
    for x, y in ((a, b), (a, dense_rows), (dense_rows, dense_rows)):
        with np.errstate(all="ignore"):
            assert_same_sparse(native.func(XP, x, y), _generic_binary(op).func(XP, x, y))


def test_compiled_merge_keeps_what_the_generic_kernel_keeps() -> None:
    """x - x keeps its (zero) entries; a product keeps the NaN of inf * 0 and drops 2 * 0."""
    a = xs.sparse_csr_array([0, 2, 3], [0, 2, 1], [1.0, np.inf, 2.0], (2, 3))
    b = xs.sparse_csr_array([0, 1, 2], [0, 2], [3.0, 5.0], (2, 3))
    diff = xs.subtract(b, b)
    assert diff.nnz == 2 and np.asarray(diff.values()).tolist() == [0.0, 0.0]
    prod = xs.multiply(a, b)
    assert np.asarray(prod.col_indices()).tolist() == [0, 2]
    np.testing.assert_array_equal(np.asarray(prod.values()), [3.0, np.nan])


def test_compiled_merge_declines_with_reasons() -> None:
    rng = np.random.default_rng(0)
    f64, i32 = np.dtype(np.float64), np.dtype(np.int32)
    a = random_canonical(rng, (4, 5), 0.5, f64, i32, xs.sparse_csr)
    supports = _kernel("add", "_add_compiled_compressed_compressed_numpy").supports
    assert supports(XP, a, a) is None
    with_fill = a._with_values(a.values(), 1.0)
    assert "fill value +0" in supports(XP, a, with_fill)
    assert "two CSR or two CSC" in supports(XP, a, xs.to_sparse_csc(a))
    assert "two CSR or two CSC" in supports(XP, xs.to_sparse_bsr(a, blocksize=(1, 1)), xs.to_sparse_bsr(a, blocksize=(1, 1)))
    batched = xs.to_sparse_csr(np.stack([xs.to_dense(a)] * 2))
    assert "2-D arrays of one shape" in supports(XP, batched, batched)
    hybrid = xs.to_sparse_csr(np.stack([xs.to_dense(a)] * 2, axis=-1), dense_dim=1)
    assert "2-D arrays of one shape" in supports(XP, hybrid, hybrid)
    booleans = xs.to_sparse_csr(xs.to_dense(a) > 0)
    assert "not bool" in supports(XP, booleans, booleans)
    wide = xs.to_sparse_csr(a, index_dtype="int64")
    assert "one index dtype" in supports(XP, a, wide)
    assert "compressed arrays only" in supports(XP, a, xs.to_sparse_coo(a))


def test_compiled_merge_rejects_non_canonical_rows() -> None:
    # built without the index checks: a row whose indices are not increasing (invariant 5.6)
    bad = CompressedArray(np.array([0, 2], np.int64), np.array([2, 1], np.int64), np.array([1.0, 2.0]), (1, 3),
                          layout=xs.sparse_csr, backend=xs.get_backend("numpy"), xp=XP, check=False)  # fmt: skip
    good = xs.sparse_csr_array([0, 1], [0], [1.0], (1, 3))
    with pytest.raises(ValueError, match="not strictly increasing"):
        _cpu.csr_merge("add", (good.crow_indices(), good.col_indices(), good.values()),
                       (bad.crow_indices(), bad.col_indices(), bad.values()), 3)  # fmt: skip
    with pytest.raises(TypeError, match="one dtype"):
        _cpu.csr_merge("add", (good.crow_indices(), good.col_indices(), good.values()),
                       (good.crow_indices(), good.col_indices(), good.values().astype(np.float32)), 3)  # fmt: skip


@st.composite
def sum_cases(draw: st.DrawFn) -> CompressedArray:
    m, n = draw(st.integers(0, 9)), draw(st.integers(0, 30))
    dtype = draw(st.sampled_from([*ARITH_DTYPES, np.dtype(np.int16)]))
    layout = draw(st.sampled_from([xs.sparse_csr, xs.sparse_csc]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    a = random_canonical(rng, (m, n), density, dtype, draw(st.sampled_from(INDEX_DTYPES)), layout)
    if dtype.kind in "fc" and draw(st.booleans()):  # finite values only, so that sums compare closely
        a = a._with_values(np.nan_to_num(np.asarray(a.values()), nan=1.0, posinf=2.0, neginf=-2.0), 0)
    return a


def _compare_reductions(actual: Any, expected: Any, strided_result: bool) -> None:
    got: Any
    want: Any
    if strided_result:  # a hint: the caller converts whatever comes back
        actual, expected = (xs.to_dense(x) if isinstance(x, xs.SparseArray) else x for x in (actual, expected))
    if isinstance(expected, xs.SparseArray):
        assert isinstance(actual, xs.SparseArray) and actual.layout is expected.layout
        got, want = cast(Any, actual), cast(Any, expected)
        assert_same(np.asarray(got.indices()), np.asarray(want.indices()))
        assert actual.fill_value == expected.fill_value
        actual, expected = got.values(), want.values()
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.kind in "fc":
        atol = 1e-5 if expected.dtype in (np.float32, np.complex64) else 1e-12
        # real and imaginary parts apart: assert_allclose compares complex infinities as unequal
        np.testing.assert_allclose(actual.real, expected.real, rtol=1e-5, atol=atol)
        np.testing.assert_allclose(actual.imag, expected.imag, rtol=1e-5, atol=atol)
    else:
        assert_same(actual, expected)


@merge_examples
@given(a=sum_cases(), axis=st.sampled_from([0, 1, None, (0, 1)]), strided_result=st.booleans(), keepdims=st.booleans())
def test_compiled_sums_match_generic_kernel(a: CompressedArray, axis: Any, strided_result: bool, keepdims: bool) -> None:
    from xsparse.backends.array_api.reduction import ReduceSpec

    axes = (0, 1) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    layout = xs.strided if strided_result else None
    native = _kernel("sum", "_sum_compressed_numpy")
    generic = _kernel("sum", "_sum_compressed")
    for name in ("sum", "count_nonzero", "max"):
        if name == "max" and a.dtype.kind == "c":
            continue
        dtype = XP.int64 if name == "count_nonzero" else (np.dtype(np.int64) if a.dtype.kind == "i" and name == "sum" else a.dtype)
        spec = ReduceSpec(axes, keepdims, dtype, layout=layout)
        native = _kernel(name, f"_{name}_compressed_numpy")
        generic = _kernel(name, f"_{name}_compressed")
        assert native.supports(XP, a, spec) is None
        with np.errstate(all="ignore"):
            _compare_reductions(native.func(XP, a, spec), generic.func(XP, a, spec), strided_result)


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("axis", [0, 1])
def test_csr_sums_large_matches_scipy(index_dtype: np.dtype, axis: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Enough entries for the per-thread copies of the column sums, and the row chunks."""
    monkeypatch.setattr(_cpu, "available_threads", lambda: 2)  # however busy the machine is
    rng = np.random.default_rng(3)
    a = random_canonical(rng, (2000, 300), 0.1, np.dtype(np.float64), index_dtype, xs.sparse_csr)
    a = a._with_values(rng.standard_normal(a.nnz), 0)
    m = sp.csr_array((np.asarray(a.values()), np.asarray(a.col_indices()), np.asarray(a.crow_indices())), shape=a.shape)
    sums, seen = _cpu.csr_sums(np.asarray(a.crow_indices()), np.asarray(a.col_indices()), np.asarray(a.values()), 300, axis, seen=True)
    np.testing.assert_allclose(sums, m.sum(axis=axis), rtol=1e-12, atol=1e-12)
    if axis == 0:
        assert seen is not None
        assert_same(seen, np.bincount(np.asarray(a.col_indices()), minlength=300) > 0)
        cols = np.asarray(a.col_indices()).copy()
        cols[cols == 299] = 298  # column 299 empty (csr_sums reads the rows unsorted as well)
        # an empty column, no stored -0.0: its sum (started from -0.0) is made +0.0, and it is not seen
        sums, seen = _cpu.csr_sums(np.asarray(a.crow_indices()), cols, np.asarray(a.values()), 300, 0, seen=True)
        assert seen is not None and not seen[299] and sums[299] == 0 and not np.signbit(sums[299])
        assert_same(seen, np.bincount(cols, minlength=300) > 0)
        # a stored -0.0 as well: the columns are found without the signs of the sums
        values = np.asarray(a.values()).copy()
        values[0] = -0.0
        sums, seen = _cpu.csr_sums(np.asarray(a.crow_indices()), cols, values, 300, 0, seen=True)
        assert seen is not None and not seen[299] and np.signbit(sums[299]) == np.False_
        assert_same(seen, np.bincount(cols, minlength=300) > 0)
        # a column whose only values are -0.0: seen, and its sum -0.0
        only = cols == 297
        values[only] = -0.0
        sums, seen = _cpu.csr_sums(np.asarray(a.crow_indices()), cols, values, 300, 0, seen=True)
        assert seen is not None and seen[297] and not seen[299] and np.signbit(sums[297]) and not np.signbit(sums[299])
    # and the full sum, in pieces on several threads
    np.testing.assert_allclose(float(xs.sum(a)), m.sum(), rtol=1e-12)


def test_csr_sums_rejects_bad_input() -> None:
    indptr, data = np.array([0, 2], np.int64), np.array([1.0, 2.0])
    with pytest.raises(ValueError, match="index is out of range"):
        _cpu.csr_sums(indptr, np.array([0, 5], np.int64), data, 3, 0)
    with pytest.raises(ValueError, match="not non-decreasing"):
        _cpu.csr_sums(np.array([0, 3], np.int64), np.array([0, 1], np.int64), data, 3, 1)
    with pytest.raises(TypeError, match="does not support values of dtype bool"):
        _cpu.csr_sums(indptr, np.array([0, 1], np.int64), data > 0, 3, 0)


def test_available_threads() -> None:
    assert 1 <= _cpu.available_threads() <= _cpu._cpu_count()


def test_parallel_ufunc_matches_numpy_and_shares_the_indices(monkeypatch: pytest.MonkeyPatch) -> None:
    from xsparse.backends.numpy import elementwise

    monkeypatch.setattr(_cpu, "available_threads", lambda: 2)  # however busy the machine is

    rng = np.random.default_rng(5)
    n = elementwise._PARALLEL_MIN_ELEMENTS * 2 + 77
    x = rng.standard_normal(n) * 10
    x[::1000] = np.inf
    for name in ("sin", "exp", "sqrt", "isnan"):
        with np.errstate(all="ignore"):
            assert_same(np.asarray(getattr(xs, name)(x)), getattr(np, name)(x))
    ints = rng.integers(-100, 100, n).astype(np.int32)
    assert_same(np.asarray(xs.sin(ints)), np.sin(ints))
    a = xs.sparse_csr_array(np.array([0, n]), np.arange(n), x, (1, n))
    s = xs.sin(a)
    assert s.crow_indices() is a.crow_indices() and s.col_indices() is a.col_indices()
    with np.errstate(all="ignore"):
        assert_same(np.asarray(s.values()), np.sin(x))


# --- the full check of compressed indices ------------------------------------------------------------------


def _holds_5_1_to_5_6(ci: np.ndarray, pi: np.ndarray, n_minor: int) -> bool:
    """Invariants 5.1-5.6, one batch and one slice at a time (the oracle)."""
    nse = pi.shape[-1]
    nb = math.prod(ci.shape[:-1])
    for p, x in zip(ci.reshape(nb, ci.shape[-1]), pi.reshape(nb, nse)):
        if p[0] != 0 or p[-1] != nse or np.any(np.diff(p) < 0) or np.any(np.diff(p) > n_minor):
            return False
        for lo, hi in zip(p[:-1], p[1:]):
            row = x[lo:hi]
            if np.any(row < 0) or np.any(row >= n_minor) or np.any(np.diff(row) <= 0):
                return False
    return True


@st.composite
def compressed_indices(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    """Offsets and plain indices of a batch of canonical matrices (empty slices likely), then, most often,
    one fault: a swap, a duplicate, an index out of range, an offset moved or its ends wrong."""
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    batch = draw(st.sampled_from([(), (), (1,), (3,), (2, 2)]))
    n_major, n_minor = draw(st.integers(0, 6)), draw(st.integers(0, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    nb = math.prod(batch)
    nse = draw(st.integers(0, n_major * n_minor))
    ci = np.zeros((nb, n_major + 1), dtype=np.int64)
    pi = np.zeros((nb, nse), dtype=np.int64)
    for b in range(nb):
        cells = np.sort(rng.choice(n_major * n_minor, nse, replace=False)) if nse else np.zeros(0, np.int64)
        ci[b, 1:] = np.cumsum(np.bincount(cells // max(n_minor, 1), minlength=n_major))[:n_major]
        pi[b] = cells % max(n_minor, 1)
    fault = draw(st.sampled_from(["none", "swap", "duplicate", "high", "negative", "huge", "offset", "first", "last"]))
    if fault in ("swap", "duplicate", "high", "negative", "huge") and nse:
        b, k = int(rng.integers(nb)), int(rng.integers(nse))
        if fault == "swap" and nse > 1:
            pi[b, [k, (k + 1) % nse]] = pi[b, [(k + 1) % nse, k]]
        elif fault == "duplicate" and nse > 1:
            pi[b, k] = pi[b, k - 1]
        else:
            pi[b, k] = {"high": n_minor, "negative": -1, "huge": np.iinfo(dtype).max, "swap": 0, "duplicate": 0}[fault]
    elif fault in ("offset", "first", "last") and nb:
        b = int(rng.integers(nb))
        r = {"offset": int(rng.integers(n_major + 1)), "first": 0, "last": n_major}[fault]
        ci[b, r] += int(rng.choice([-1, 1]))
    return ci.reshape(*batch, n_major + 1).astype(dtype), pi.reshape(*batch, nse).astype(dtype), n_minor


@examples
@given(case=compressed_indices())
def test_compressed_canonical_agrees_with_the_invariants(case: tuple[np.ndarray, np.ndarray, int]) -> None:
    ci, pi, n_minor = case
    assert _cpu.compressed_canonical(ci, pi, n_minor) == _holds_5_1_to_5_6(ci, pi, n_minor)


def test_compressed_canonical_declines_index_arrays_of_two_dtypes() -> None:
    ci, pi = np.array([0, 1], dtype=np.int64), np.array([0], dtype=np.int32)
    assert _holds_5_1_to_5_6(ci, pi, 1)
    assert not _cpu.compressed_canonical(ci, pi, 1)  # the validator's own checks decide
    assert _cpu.compressed_canonical(ci, pi.astype(np.int64), 1)
