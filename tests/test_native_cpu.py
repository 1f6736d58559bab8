"""Tests of the NumPy backend's compiled CPU conversion kernels (``xsparse.backends._cpu``).

Every result is compared with a NumPy oracle that does the same arithmetic in the same order (so
float sums compare exactly), and the 2-D float64 cases also with SciPy.
"""

from __future__ import annotations

import math
from typing import Any

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
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    np.testing.assert_array_equal(actual, expected, strict=True)


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
    mask = dense != 0
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
    with np.errstate(invalid="ignore", over="ignore"):
        ufunc.at(out, (rows, indices[indptr[0] : indptr[-1]]), data[indptr[0] : indptr[-1]])
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
    ref = sp.csr_array(np.where(np.isnan(dense), 1.0, dense))  # SciPy keeps NaN; compare positions
    np.testing.assert_array_equal(indptr, ref.indptr)
    np.testing.assert_array_equal(indices, ref.indices)
    np.testing.assert_array_equal(data, dense[np.nonzero(dense != 0)])


def test_dense_to_compressed_nan_and_negative_zero() -> None:
    dense = np.array([[0.0, -0.0, np.nan]])
    indptr, indices, data = _cpu.dense_to_compressed(dense, np.int32)
    assert_same(indices, np.array([2], np.int32))
    assert np.isnan(data[0])
    dense_c = np.array([[0, complex(-0.0, -0.0), complex(0, np.nan), 1j]])
    _, indices, _ = _cpu.dense_to_compressed(dense_c, np.int64)
    assert_same(indices, np.array([2, 3], np.int64))


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
    np.testing.assert_array_equal(result, expected, strict=True)


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
