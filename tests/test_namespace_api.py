"""The rest of the Array API namespace: creation, sorting, searching, set and data type functions, the
constants, ``__array_namespace_info__`` and the ``linalg`` extension, on sparse and strided arrays,
compared with the backend's own function of the dense array."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import xsparse as xs
from xsparse.testing import assert_sparse_equal, to_numpy

from strategies import dense_cases

FEW = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
LAYOUTS = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr]
LAYOUT_IDS = [str(layout) for layout in LAYOUTS]
STRICT_ONLY = {"ArrayAPIStrictFlags", "Device", "get_array_api_strict_flags", "set_array_api_strict_flags", "reset_array_api_strict_flags"}


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _arr(xp: Any, x: Any) -> Any:
    """NumPy returns scalars for 0-d results; compare them as 0-d arrays."""
    return xp.asarray(x)


def _dense(x: Any) -> Any:
    return xs.to_dense(x)


# -- the namespace's names ---------------------------------------------------------------------------


def test_namespace_has_every_name_of_the_standard() -> None:
    strict = pytest.importorskip("array_api_strict")
    wanted = set(strict.__all__) - STRICT_ONLY
    missing = sorted(name for name in wanted if not hasattr(xs, name))
    assert missing == []
    assert xs.__array_api_version__ == "2024.12"


def test_namespace_has_the_fft_extension() -> None:
    strict = pytest.importorskip("array_api_strict")
    assert "fft" in xs.__all__
    assert sorted(xs.fft.__all__) == sorted(strict.fft.__all__)
    assert all(callable(getattr(xs.fft, name)) for name in strict.fft.__all__)


def test_linalg_has_every_function_of_the_extension() -> None:
    strict = pytest.importorskip("array_api_strict")
    missing = sorted(name for name in strict.linalg.__all__ if not hasattr(xs.linalg, name))
    assert missing == []
    # the standard's functions, and SciPy's Krylov solvers (docs/linalg.md), nothing else
    assert sorted(xs.linalg.__all__) == sorted([*strict.linalg.__all__, "bicgstab", "cg", "gmres"])


def test_constants() -> None:
    assert (xs.e, xs.pi, xs.inf, xs.newaxis) == (math.e, math.pi, math.inf, None)
    assert math.isnan(xs.nan)


def test_dtypes_are_the_default_backends(backend: str) -> None:
    xp = xs.get_backend(backend).namespace()
    with xs.default_backend(backend):
        for name in xs._dtypes.DTYPE_NAMES:
            if hasattr(xp, name):
                assert getattr(xs, name) == getattr(xp, name)


def test_unknown_attribute_and_missing_dtype_raise(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    with pytest.raises(AttributeError, match="module 'xsparse' has no attribute 'float128'"):
        xs.float128  # noqa: B018
    bare = xs.Backend("bare", "numpy", lambda: types.SimpleNamespace(__name__="bare"))
    monkeypatch.setattr(xs._dtypes, "get_default_backend", lambda: bare)
    with pytest.raises(AttributeError, match=r"xsparse\.uint64: the default backend 'bare' has no dtype 'uint64'\. Use a backend"):
        xs.uint64  # noqa: B018


# -- data type functions -----------------------------------------------------------------------------


# (from, to, whether the standard's promotion table casts it): pairs within one kind, where torch's own
# can_cast allowed every cast down the kind
CASTS_WITHIN_A_KIND = [
    ("int64", "int32", False), ("int32", "int64", True), ("uint64", "int64", False), ("int8", "uint8", False),
    ("uint32", "uint16", False), ("uint8", "int16", True), ("int64", "uint64", False), ("float64", "float32", False),
    ("float32", "float64", True), ("float32", "complex64", True), ("float64", "complex64", False),
    ("complex128", "complex64", False), ("complex64", "float64", False),
]  # fmt: skip


@pytest.mark.parametrize(("source", "target", "expected"), CASTS_WITHIN_A_KIND)
def test_can_cast_within_a_kind_is_the_standards_on_every_backend(backend: str, xp: Any, source: str, target: str, expected: bool) -> None:
    if not (hasattr(xp, source) and hasattr(xp, target)):
        pytest.skip(f"the backend has no {source} or {target}")
    assert xs.can_cast(getattr(xp, source), getattr(xp, target)) is expected
    assert xs.can_cast(xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([1], dtype=getattr(xp, source)), (2,)), getattr(xp, target)) is expected


def test_can_cast_of_half_precision() -> None:
    torch = pytest.importorskip("torch")
    assert xs.can_cast(torch.float16, torch.float32) and xs.can_cast(torch.bfloat16, torch.complex64)
    assert not xs.can_cast(torch.float32, torch.float16) and not xs.can_cast(torch.float32, torch.bfloat16)
    assert not xs.can_cast(torch.float16, torch.bfloat16) and not xs.can_cast(torch.bfloat16, torch.float16)
    assert not xs.can_cast(np.float32, np.float16) and xs.can_cast(np.float16, np.complex64)


def test_dtype_functions_match_the_backend(backend: str, xp: Any) -> None:
    a = xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([1], dtype=xp.int8), (2,))
    assert xs.result_type(a, xp.int16) == xp.result_type(xp.int8, xp.int16)
    assert xs.result_type(xp.float32, xp.float64) == xp.float64
    assert xs.result_type(a, 1) == xp.int8
    assert xs.can_cast(a, xp.int16) == xp.can_cast(xp.int8, xp.int16)
    assert not xs.can_cast(xp.float64, xp.int8)
    assert xs.finfo(xp.float32).bits == 32
    assert xs.iinfo(xp.int16).max == 32767
    assert xs.isdtype(xp.float32, "real floating") and not xs.isdtype(xp.int8, ("bool", "real floating"))
    assert xs.isdtype(xp.int8, xp.int8)
    with xs.default_backend(backend):
        assert xs.result_type("float32", "float64") == xp.result_type(xp.float32, xp.float64)
        assert xs.finfo("float64").eps == xp.finfo(xp.float64).eps


def test_dtype_function_errors() -> None:
    with pytest.raises(ValueError, match=r"result_type: at least one array or dtype is needed \(got none\)\. Pass"):
        xs.result_type()
    with pytest.raises(ValueError, match=r"result_type: at least one argument must be an array or a dtype .* Python scalars alone"):
        xs.result_type(1, 2.0)
    with pytest.raises(TypeError, match=r"finfo: the dtype must be a floating-point one \(type=int8\)\. Use xsparse.iinfo"):
        xs.finfo("int8")
    with pytest.raises(TypeError, match=r"iinfo: the dtype must be an integer one \(type=float64\)\. Use xsparse.finfo"):
        xs.iinfo("float64")
    with pytest.raises(TypeError, match=r"isdtype: the first argument must be a dtype, got an array \(ndarray\)\. Pass x.dtype"):
        xs.isdtype(np.zeros(2), "bool")
    with pytest.raises(TypeError, match=r"can_cast: to is neither an array nor a dtype \(to=\[1\]\)\. Pass an array"):
        xs.can_cast("int8", [1])
    with pytest.raises(TypeError, match=r"can_cast: to is neither an array nor a dtype \(to='float16x'\)\. Pass an array, a backend dtype"):
        xs.can_cast("int8", "float16x")


_STANDARD_PAIRS = [
    (a, b)
    for group in (("int8", "int16", "int32", "int64"), ("uint8", "uint16", "uint32", "uint64"), ("float32", "float64", "complex64", "complex128"))
    for a in group
    for b in group
] + [(u, i) for u in ("uint8", "uint16", "uint32") for i in ("int8", "int16", "int32", "int64")]


def test_result_type_follows_the_standards_table(backend: str, xp: Any) -> None:
    # NumPy implements the standard's table for every pair it defines: the reference for every backend
    # (torch refuses every pair with uint16, uint32 or uint64)
    for a, b in _STANDARD_PAIRS:
        if hasattr(xp, a) and hasattr(xp, b):
            want = np.result_type(np.dtype(a), np.dtype(b)).name
            for pair in ((a, b), (b, a)):
                got = xs.result_type(getattr(xp, pair[0]), getattr(xp, pair[1]))
                assert got == getattr(xp, want), (pair, got, want)
    if hasattr(xp, "uint32"):
        s = xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([1], dtype=xp.uint32), (2,))
        assert xs.result_type(s, xp.uint8, xp.uint16) == xp.uint32
        assert xs.result_type(s, xp.int8, 1) == xp.int64
        assert xs.result_type(xp.uint32, xp.uint64, 3) == xp.uint64


def test_result_type_refuses_what_the_standard_leaves_undefined() -> None:
    with pytest.raises(TypeError, match=r"result_type: the Array API defines no promotion of int8 with uint64 \(dtypes=\(int8, uint64\)\)\. Cast one operand"):
        xs._dtypes._promote("result_type", "int8", "uint64")
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"result_type: the Array API defines no promotion of uint64 with int16"):
        xs.result_type(torch.uint64, torch.int16)
    with pytest.raises(TypeError, match=r"result_type: the Array API defines no promotion of bool with uint16"):
        xs.result_type(torch.bool, torch.uint16)


def test_finfo_and_iinfo_are_the_standards_objects(backend: str, xp: Any) -> None:
    for name in ("float32", "float64", "complex64", "complex128"):
        if not hasattr(xp, name):
            continue
        own, got = xp.finfo(getattr(xp, name)), xs.finfo(getattr(xp, name))
        real = {"complex64": "float32", "complex128": "float64"}.get(name, name)
        assert got.dtype == getattr(xp, real) and not isinstance(got.dtype, str)
        assert type(got.bits) is int and got.bits == int(own.bits)
        for field in ("eps", "max", "min", "smallest_normal"):
            assert type(getattr(got, field)) is float and getattr(got, field) == float(getattr(own, field))
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        if not hasattr(xp, name):
            continue
        own_i, got_i = xp.iinfo(getattr(xp, name)), xs.iinfo(getattr(xp, name))
        assert got_i.dtype == getattr(xp, name) and not isinstance(got_i.dtype, str)
        assert (type(got_i.min), type(got_i.max), type(got_i.bits)) == (int, int, int)
        assert (got_i.min, got_i.max, got_i.bits) == (int(own_i.min), int(own_i.max), int(own_i.bits))


# -- __array_namespace_info__ ------------------------------------------------------------------------


def test_namespace_info_tells_the_backends_truth(backend: str, xp: Any) -> None:
    info = xs._info.Info(backend)
    own = xp.__array_namespace_info__()
    assert info.capabilities()["boolean indexing"] is True
    assert info.capabilities()["max dimensions"] == own.capabilities()["max dimensions"]
    assert info.default_dtypes() == dict(own.default_dtypes())
    assert info.dtypes(kind="integral") == dict(own.dtypes(kind="integral"))
    assert info.default_device() in info.devices()
    with xs.default_backend(backend):
        assert getattr(xs, "__array_namespace_info__")().default_dtypes() == info.default_dtypes()
    # a list for 2024.12 (NumPy 2.4's own info answers with a tuple), of devices the backend has
    assert isinstance(info.devices(), list) and info.devices()
    assert {str(d) for d in info.devices()} <= {str(d) for d in own.devices()}
    assert xs.__array_namespace_info__(backend=backend).default_dtypes() == info.default_dtypes()
    # a bound namespace answers with xsparse's info for its backend, not the default backend's
    bound = xs.bound_namespace(backend, layout=xs.sparse_coo).__array_namespace_info__()
    assert isinstance(bound, xs._info.Info) and isinstance(bound.devices(), list)
    assert bound.default_dtypes() == info.default_dtypes()
    # the capability is the truth: a sparse array takes a boolean mask as its sole index
    s = xs.sparse_coo_array(xp.asarray([[0, 2]]), xp.asarray([1.0, 3.0], dtype=xp.float64), (3,))
    mask = xp.asarray([True, False, True])
    assert_sparse_equal(s[mask], xs.to_dense(s)[mask])


# -- creation ------------------------------------------------------------------------------------------


def test_asarray_arange_linspace(backend: str, xp: Any) -> None:
    with xs.default_backend(backend):
        d = xs.asarray([[1.0, 0.0], [0.0, 2.0]], dtype="float64")
        assert_sparse_equal(d, xp.asarray([[1.0, 0.0], [0.0, 2.0]], dtype=xp.float64))
        for layout in LAYOUTS[:3]:
            s = xs.asarray([[1.0, 0.0], [0.0, 2.0]], dtype="float64", layout=layout)
            assert_sparse_equal(s, d, check_layout=layout)
            assert xs.asarray(s) is s
            assert_sparse_equal(xs.asarray(s, dtype="float32"), xp.astype(d, xp.float32), check_layout=layout)
            assert_sparse_equal(xs.asarray(s, layout=xs.strided), d, check_layout="strided")
        b = xs.asarray(d, layout=xs.sparse_bsr, blocksize=(1, 2))
        assert b.blocksize == (1, 2)
        assert_sparse_equal(xs.asarray(xs.to_sparse_csr(d), layout=xs.sparse_bsr, blocksize=(2, 1)), d, check_layout=xs.sparse_bsr)
        assert_sparse_equal(xs.arange(1, 7, 2), xp.arange(1, 7, 2))
        assert_sparse_equal(xs.arange(5, dtype="float64", layout=xs.sparse_coo), xp.arange(5, dtype=xp.float64), check_layout=xs.sparse_coo)
        assert_sparse_equal(xs.linspace(0.0, 1.0, 4, endpoint=False), xp.linspace(0.0, 1.0, 4, endpoint=False))
        assert_sparse_equal(xs.linspace(0.0, 1.0, 3, layout=xs.sparse_coo), xp.linspace(0.0, 1.0, 3), check_layout=xs.sparse_coo)
        # CuPy imports no host memory through DLPack (its from_dlpack raises TypeError "CPU arrays cannot be
        # directly imported to CuPy"): there the source is a device array of the backend itself
        source = xp.asarray([1.0, 2.0], dtype=xp.float64) if backend == "cupy" else np.asarray([1.0, 2.0])
        assert_sparse_equal(xs.from_dlpack(source), xp.asarray([1.0, 2.0], dtype=xp.float64))


def test_asarray_errors(xp: Any) -> None:
    s = xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([1.0], dtype=xp.float64), (2,))
    with pytest.raises(ValueError, match=r"asarray: copy=False but the array must be cast \(dtype='float32', device=None\)\. Pass copy=None"):
        xs.asarray(s, dtype="float32", copy=False)
    other = "numpy" if s._backend.name != "numpy" else "array_api_strict"
    with pytest.raises(ValueError, match=rf"from_dlpack: copy=False but the array must be moved \(device=None, backend='{other}'\)\. Pass copy=None"):
        xs.from_dlpack(s, copy=False, backend=other)
    with pytest.raises(ValueError, match=r"asarray: copy=False but a sequence of arrays is always copied into a new array \(len\(obj\)=2\)\. Pass copy=None"):
        xs.asarray([s[0], s[1]], copy=False)


@pytest.mark.parametrize("layout", LAYOUTS[:3], ids=LAYOUT_IDS[:3])
@FEW
@given(data=st.data())
def test_asarray_of_nested_sparse_elements(backend: str, xp: Any, layout: xs.Layout, data: Any) -> None:
    dtype = data.draw(st.sampled_from(["float64", "int32", "uint8", "bool"]))
    case = data.draw(dense_cases(xp, dtype=dtype, fill=None, max_batch_dims=0, max_dense_dims=0))
    assume(math.prod(tuple(case.array.shape)) > 0)
    s = case.sparse(layout)
    m, n = tuple(s.shape)
    host = to_numpy(case.array)
    # the Array API test suite's idiom: a nested list of 0-d elements read with __getitem__
    elements = [[s[i, j] for j in range(n)] for i in range(m)]
    want = xp.asarray(host.tolist(), dtype=getattr(xp, dtype))
    assert_sparse_equal(xs.asarray(elements), want, check_layout="strided")
    assert_sparse_equal(xs.asarray(elements, dtype="float64"), xp.asarray(host.astype(np.float64).tolist(), dtype=xp.float64))
    assert_sparse_equal(xs.asarray(elements, layout=xs.sparse_coo), want, check_layout=xs.sparse_coo)
    # rows (1-D sparse arrays) and strided arrays mixed with them, stacked
    rows = [s[i, ...] if i % 2 == 0 else case.array[i, ...] for i in range(m)]
    assert_sparse_equal(xs.asarray(rows), want)
    # a Python scalar among the elements promotes as a weak scalar of its kind
    scalar = {"float64": 1.5, "bool": True}.get(dtype, 1)
    mixed = xs.asarray([s[0, 0], scalar])
    assert mixed.dtype == s.dtype
    assert_sparse_equal(mixed, xp.asarray([host[0, 0].item(), scalar], dtype=getattr(xp, dtype)))
    # a bound namespace (every array sparse) takes the same path
    sp = xs.bound_namespace(backend, layout=xs.sparse_coo)
    got = sp.asarray([[s[i, j] for j in range(n)] for i in range(m)], dtype=getattr(xp, dtype))
    assert_sparse_equal(got, want, check_layout=xs.sparse_coo)


def test_from_dlpack_of_a_sparse_array(backend: str, xp: Any) -> None:
    s = xs.sparse_coo_array(xp.asarray([[0, 2]]), xp.asarray([1.0, -2.0], dtype=xp.float64), (3,))
    assert xs.from_dlpack(s) is s
    copied = xs.from_dlpack(s, copy=True)
    assert copied is not s and copied.layout is s.layout
    assert_sparse_equal(copied, xs.to_dense(s), check_layout=xs.sparse_coo)
    assert xs.from_dlpack(s, device=s.device) is s
    assert_sparse_equal(xs.from_dlpack(s, device=s.device, copy=True), xs.to_dense(s), check_layout=xs.sparse_coo)
    other = "numpy" if backend != "numpy" else "array_api_strict"
    moved = xs.from_dlpack(s, backend=other)
    assert moved._backend.name == other
    assert_sparse_equal(moved, xs.get_backend(other).namespace().asarray(to_numpy(xs.to_dense(s))), check_layout=xs.sparse_coo)
    # a bound namespace's from_dlpack returns the sparse array too
    assert xs.bound_namespace(backend, layout=xs.sparse_coo).from_dlpack(s) is s


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid(backend: str, xp: Any, indexing: str) -> None:
    x = xs.sparse_coo_array(xp.asarray([[0, 2]]), xp.asarray([1.0, 3.0], dtype=xp.float64), (4,))
    y = xp.asarray([5.0, 6.0, 7.0], dtype=xp.float64)
    z = xs.sparse_coo_array(xp.asarray([[1]]), xp.asarray([2.0], dtype=xp.float64), (2,))
    got = xs.meshgrid(x, y, z, indexing=indexing)
    want = xp.meshgrid(_dense(x), y, _dense(z), indexing=indexing)
    for g, w, layout in zip(got, want, [xs.sparse_coo, "strided", xs.sparse_coo]):
        assert_sparse_equal(g, w, check_layout=layout)
    for g, w in zip(xs.meshgrid(y, y, indexing=indexing), xp.meshgrid(y, y, indexing=indexing)):
        assert_sparse_equal(g, w)
    with pytest.raises(ValueError, match=r"meshgrid: indexing must be 'xy' or 'ij' \(indexing='yx'\)"):
        xs.meshgrid(x, indexing="yx")
    with pytest.raises(ValueError, match=r"meshgrid: every array must be 1-D \(arrays\[0\].shape=\(3, 3\)\)"):
        xs.meshgrid(xp.ones((3, 3)))


@pytest.mark.parametrize("layout", LAYOUTS + [xs.sparse_bsc], ids=LAYOUT_IDS + ["sparse_bsc"])
@FEW
@given(data=st.data())
def test_tril_triu_keep_the_layout(backend: str, xp: Any, layout: xs.Layout, data: Any) -> None:
    case = data.draw(dense_cases(xp, dtype="float64", max_dense_dims=2 if layout is xs.sparse_coo else 0))
    k = data.draw(st.integers(-3, 3))
    s = case.sparse(layout)
    if layout is xs.sparse_coo and case.dense_dim:
        s = xs.to_sparse(case.array, layout=xs.sparse_coo, sparse_dim=case.array.ndim - data.draw(st.integers(0, min(2, case.dense_dim))))
    assert_sparse_equal(xs.tril(s, k=k), xp.tril(case.array, k=k) if case.dense_dim == 0 else _tril_last(xp, case.array, k, True), check_layout=layout)
    assert_sparse_equal(xs.triu(s, k=k), xp.triu(case.array, k=k) if case.dense_dim == 0 else _tril_last(xp, case.array, k, False), check_layout=layout)


def _tril_last(xp: Any, x: Any, k: int, lower: bool) -> Any:
    host = to_numpy(x)
    return xp.asarray(np.tril(host, k) if lower else np.triu(host, k))


def test_tril_strided_and_errors(xp: Any) -> None:
    d = xp.reshape(xp.arange(9.0), (3, 3))
    assert_sparse_equal(xs.tril(d, k=-1), xp.tril(d, k=-1))
    s = xs.to_sparse_csr(d, fill_value=4.0)
    with pytest.raises(xs.NoKernelError, match=r"tril: no kernel .* declined: fill value 4.0 is not 0"):
        xs.tril(s)
    # the zeros written are +0.0, which a -0.0 fill value is not (the other side would read -0.0)
    negative = xs.to_sparse_csr(d + 1.0, fill_value=-0.0)
    with pytest.raises(xs.NoKernelError, match=r"triu: no kernel .* declined: fill value -0.0 is not 0"):
        xs.triu(negative)
    with pytest.raises(ValueError, match=r"triu: x must have at least 2 dimensions \(x.shape=\(3,\)\)"):
        xs.triu(xp.arange(3))
    with pytest.raises(TypeError, match=r"^tril: k must be an integer, got float \(k=1\.5\)\. Pass the diagonal's offset as an integer\.$"):
        xs.tril(d, k=1.5)  # type: ignore[arg-type]


# -- sorting -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
@FEW
@given(data=st.data())
def test_sort_stays_sparse(backend: str, xp: Any, layout: xs.Layout, data: Any) -> None:
    dtype = data.draw(st.sampled_from(["float64", "int32"]))
    case = data.draw(dense_cases(xp, dtype=dtype, fill=None, max_dense_dims=0))
    assume(not _is_nan(case.fill_value))
    s = case.sparse(layout)
    axis = data.draw(st.integers(-case.array.ndim, case.array.ndim - 1))
    descending = data.draw(st.booleans())
    got = xs.sort(s, axis=axis, descending=descending)
    # a specified -0.0 follows the lane's unspecified +0.0 (docs/decisions.md, "Sorting without
    # stability"), where a stable dense sort keeps the zeros in index order: tests/test_sorting.py checks
    # the zeros' order bit for bit
    assert_sparse_equal(got, xp.sort(case.array, axis=axis, descending=descending), check_layout=layout, check_signed_zeros=False)
    if case.array.ndim:
        assert_sparse_equal(xs.argsort(s, axis=axis, descending=descending), xp.argsort(case.array, axis=axis, descending=descending, stable=True))


@FEW
@given(data=st.data())
def test_sort_along_a_dense_dimension(backend: str, xp: Any, data: Any) -> None:
    case = data.draw(dense_cases(xp, dtype="float64", fill=None, max_batch_dims=0))
    assume(case.dense_dim > 0 and not _is_nan(case.fill_value))
    s = case.sparse(xs.sparse_csr)
    got = xs.sort(s, axis=-1)
    assert_sparse_equal(got, xp.sort(case.array, axis=-1), check_layout=xs.sparse_csr)
    assert got.nnz == s.nnz


def test_sort_strided_and_errors(xp: Any) -> None:
    d = xp.asarray([[3.0, 1.0], [0.0, -1.0]], dtype=xp.float64)
    assert_sparse_equal(xs.sort(d, axis=0), xp.sort(d, axis=0))
    assert_sparse_equal(xs.argsort(d), xp.argsort(d))
    hybrid = xs.to_sparse_coo(d, sparse_dim=1)
    with pytest.raises(xs.NoKernelError, match=r"sort: no kernel .* declined: sorting along sparse dimension 0 of a hybrid array"):
        xs.sort(hybrid, axis=0)
    nan_fill = xs.to_sparse_coo(d, fill_value=math.nan)
    with pytest.raises(xs.NoKernelError, match="the fill value is NaN"):
        xs.sort(nan_fill)
    with pytest.raises(ValueError, match=r"sort: axis 2 is out of range for an array of 2 dimensions \(axis=2\)"):
        xs.sort(hybrid, axis=2)
    with pytest.raises(ValueError, match=r"argsort: a 0-d array has no axis to sort along"):
        xs.argsort(xp.asarray(1.0))
    with pytest.raises(TypeError, match=r"sort: expected an xsparse array or a backend array, got list"):
        xs.sort([1, 2])
    if hasattr(xp, "complex128"):
        with pytest.raises(TypeError, match=r"sort: complex values have no order"):
            xs.sort(xs.to_sparse_coo(xp.asarray([1j, 0j])))


# -- searching -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
@pytest.mark.parametrize("side", ["left", "right"])
@FEW
@given(data=st.data())
def test_searchsorted_sparse_values(backend: str, xp: Any, layout: xs.Layout, side: str, data: Any) -> None:
    case = data.draw(dense_cases(xp, dtype="float64", fill=None))
    assume(not _is_nan(case.fill_value))
    edges = xp.asarray([-2.0, -1.0, 0.0, 0.0, 1.5, 3.0], dtype=xp.float64)
    s = case.sparse(layout)
    got = xs.searchsorted(edges, s, side=side)
    assert_sparse_equal(got, xp.searchsorted(edges, case.array, side=side), check_layout=layout)


@pytest.mark.parametrize("side", ["left", "right"])
@FEW
@given(data=st.data())
def test_searchsorted_in_a_sparse_vector(backend: str, xp: Any, side: str, data: Any) -> None:
    n = data.draw(st.integers(0, 8))
    fill = data.draw(st.sampled_from([0.0, 1.5, -1.0]))
    host = np.sort(np.asarray(data.draw(st.lists(st.sampled_from([-2.0, -1.0, 0.0, 1.5, 2.0]), min_size=n, max_size=n)), dtype=np.float64))
    x1 = xs.to_sparse_coo(xp.asarray(host), fill_value=fill)
    queries = xp.asarray([-3.0, -1.0, 0.0, 1.0, 1.5, 5.0], dtype=xp.float64)
    assert_sparse_equal(xs.searchsorted(x1, queries, side=side), xp.searchsorted(xp.asarray(host), queries, side=side))
    q = xs.to_sparse_coo(queries)
    assert_sparse_equal(xs.searchsorted(x1, q, side=side), xp.searchsorted(xp.asarray(host), queries, side=side), check_layout=xs.sparse_coo)


@pytest.mark.parametrize("side", ["left", "right"])
@FEW
@given(data=st.data())
def test_searchsorted_with_nan_in_a_sparse_vector(backend: str, xp: Any, side: str, data: Any) -> None:
    """NaN sorts last, in the values, the fill value and the queries (NumPy's order, the reference on every
    backend: torch's own search is undefined with NaN in the sorted array): a NaN query comes after a fill
    value that is not NaN."""
    n = data.draw(st.integers(0, 8))
    fill = data.draw(st.sampled_from([0.0, 1.5, math.nan]))
    host = np.sort(np.asarray(data.draw(st.lists(st.sampled_from([-1.0, 0.0, 1.5, math.nan]), min_size=n, max_size=n)), dtype=np.float64))
    x1 = xs.to_sparse_coo(xp.asarray(host), fill_value=fill)
    queries = np.asarray([math.nan, -3.0, 0.0, 1.5, 5.0])
    got = xs.searchsorted(x1, xp.asarray(queries), side=side)
    np.testing.assert_array_equal(to_numpy(got), np.searchsorted(host, queries, side=side))


def test_searchsorted_errors(xp: Any) -> None:
    edges = xp.asarray([0.0, 1.0], dtype=xp.float64)
    assert_sparse_equal(xs.searchsorted(edges, edges), xp.searchsorted(edges, edges))
    with pytest.raises(ValueError, match=r"searchsorted: side must be 'left' or 'right' \(side='middle'\)"):
        xs.searchsorted(edges, edges, side="middle")
    with pytest.raises(ValueError, match=r"searchsorted: x1 must be 1-D \(x1.shape=\(1, 2\)\)"):
        xs.searchsorted(xp.reshape(edges, (1, 2)), edges)
    with pytest.raises(ValueError, match=r"searchsorted: sorter must be a strided integer array of x1's shape"):
        xs.searchsorted(edges, edges, sorter=xp.asarray([0]))
    with pytest.raises(ValueError, match=r"searchsorted: sorter must be a strided integer array of x1's shape"):
        xs.searchsorted(edges, edges, sorter=xp.asarray([0.0, 1.0], dtype=xp.float64))


# -- set functions -------------------------------------------------------------------------------------


def _np_unique(host: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    values, index, inverse, counts = np.unique(host.reshape(-1), return_index=True, return_inverse=True, return_counts=True, equal_nan=False)
    return values, index, inverse.reshape(host.shape), counts


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
@FEW
@given(data=st.data())
def test_unique_functions(backend: str, xp: Any, layout: xs.Layout, data: Any) -> None:
    dtype = data.draw(st.sampled_from(["float64", "int64"]))
    case = data.draw(dense_cases(xp, dtype=dtype, fill=None))
    s = case.sparse(layout)
    host = to_numpy(case.array)
    if _is_nan(case.fill_value) and s.size > math.prod(tuple(s._vals.shape)):
        with pytest.raises(xs.NoKernelError, match="the fill value is NaN"):
            xs.unique_values(s)
        return
    assume(not np.isnan(host).any() if host.dtype.kind == "f" else True)
    values, index, inverse, counts = _np_unique(host)
    u = xs.unique_all(s)
    np.testing.assert_array_equal(to_numpy(u.values), values)
    np.testing.assert_array_equal(to_numpy(u.indices), index)
    np.testing.assert_array_equal(to_numpy(u.counts), counts)
    assert_sparse_equal(u.inverse_indices, xp.asarray(inverse), check_layout=layout, check_dtype=False)
    v, c = xs.unique_counts(s)
    np.testing.assert_array_equal(to_numpy(v), values)
    np.testing.assert_array_equal(to_numpy(c), counts)
    v, inv = xs.unique_inverse(s)
    np.testing.assert_array_equal(to_numpy(v), values)
    assert_sparse_equal(inv, xp.asarray(inverse), check_layout=layout, check_dtype=False)
    np.testing.assert_array_equal(to_numpy(xs.unique_values(s)), values)
    # strided arrays: the backend's own functions, and xsparse's unique_all
    np.testing.assert_array_equal(np.sort(to_numpy(xs.unique_values(case.array))), values)
    np.testing.assert_array_equal(to_numpy(xs.unique_all(case.array).indices), index)


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
@FEW
@given(data=st.data())
def test_isin(backend: str, xp: Any, layout: xs.Layout, data: Any) -> None:
    case = data.draw(dense_cases(xp, dtype="int64", fill=None))
    invert = data.draw(st.booleans())
    s = case.sparse(layout)
    pool = xp.asarray([0, 1, 3, -2, 7], dtype=xp.int64)

    def isin(a: Any, b: Any) -> Any:
        # the negation taken here: array-api-strict's isin takes invert and ignores it
        found = xp.isin(a, b)
        return xp.logical_not(found) if invert else found

    assert_sparse_equal(xs.isin(s, pool, invert=invert), isin(case.array, pool), check_layout=layout)
    queries = xp.asarray([0, 1, 2, 3, -2, 5], dtype=xp.int64)
    assert_sparse_equal(xs.isin(queries, s, invert=invert), isin(queries, xp.reshape(case.array, (-1,))))
    assert_sparse_equal(xs.isin(s, s), xp.isin(case.array, xp.reshape(case.array, (-1,))), check_layout=layout)


@pytest.mark.parametrize("layout", LAYOUTS[:3], ids=LAYOUT_IDS[:3])
@FEW
@given(data=st.data())
def test_unique_of_complex_values(backend: str, xp: Any, layout: xs.Layout, data: Any) -> None:
    # torch cannot sort complex values on the CPU: xsparse orders them by (real, imag), NumPy's order
    assume(hasattr(xp, "complex128"))
    case = data.draw(dense_cases(xp, dtype="complex128", fill=None, max_dense_dims=0))
    host = to_numpy(case.array)
    assume(not np.isnan(host).any() and not (isinstance(case.fill_value, complex) and case.fill_value != case.fill_value))
    values, index, inverse, counts = _np_unique(host)
    for x in (case.sparse(layout), case.array):
        u = xs.unique_all(x)
        np.testing.assert_array_equal(to_numpy(u.values), values)
        np.testing.assert_array_equal(to_numpy(u.indices), index)
        np.testing.assert_array_equal(to_numpy(u.counts), counts)
        v, c = xs.unique_counts(x)
        np.testing.assert_array_equal(to_numpy(v), values)
        np.testing.assert_array_equal(to_numpy(c), counts)
        v, inv = xs.unique_inverse(x)
        np.testing.assert_array_equal(to_numpy(v), values)
        np.testing.assert_array_equal(to_numpy(xs.to_dense(inv)), inverse)
        np.testing.assert_array_equal(to_numpy(xs.unique_values(x)), values)


def test_unique_nan_fill_raises(xp: Any) -> None:
    s = xs.to_sparse_coo(xp.asarray([math.nan, 1.0, math.nan], dtype=xp.float64), fill_value=math.nan)
    with pytest.raises(xs.NoKernelError, match=r"^unique_values: the fill value is NaN and x has unspecified elements, each of which would be a distinct unique value"):
        xs.unique_values(s)


# -- linalg --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
@FEW
@given(data=st.data())
def test_linalg_reductions(backend: str, xp: Any, layout: xs.Layout, data: Any) -> None:
    case = data.draw(dense_cases(xp, dtype="float64", fill=None, max_dense_dims=1 if layout is xs.sparse_coo else 0))
    assume(not _is_nan(case.fill_value))
    s = case.sparse(layout)
    d = case.array
    offset = data.draw(st.integers(-2, 2))
    if case.dense_dim == 0:
        got = xs.linalg.diagonal(s, offset=offset)
        assert_sparse_equal(got, xp.linalg.diagonal(d, offset=offset), check_layout=xs.sparse_coo)
        # a sum: the sign of a zero trace is not tracked (docs/decisions.md, "Signs of zeros that xsparse does not track")
        assert_sparse_equal(
            xs.linalg.trace(s, offset=offset), _arr(xp, xp.linalg.trace(d, offset=offset)), rtol=1e-12, atol=1e-12,
            check_signed_zeros=False,
        )  # fmt: skip
    assume(0 not in tuple(d.shape))
    for ord in (2, 1, xs.inf, -xs.inf, 0, 3):
        assert_sparse_equal(xs.linalg.vector_norm(s, ord=ord), _arr(xp, xp.linalg.vector_norm(d, ord=ord)), rtol=1e-10, atol=1e-12)
    axis = data.draw(st.integers(-d.ndim, d.ndim - 1))
    keepdims = data.draw(st.booleans())
    assert_sparse_equal(xs.linalg.vector_norm(s, axis=axis, keepdims=keepdims), _arr(xp, xp.linalg.vector_norm(d, axis=axis, keepdims=keepdims)), rtol=1e-10, atol=1e-12)
    if case.dense_dim == 0:
        for mord in ("fro", 1, -1, xs.inf, -xs.inf):
            assert_sparse_equal(xs.linalg.matrix_norm(s, ord=mord, keepdims=keepdims), _arr(xp, xp.linalg.matrix_norm(d, ord=mord, keepdims=keepdims)), rtol=1e-10, atol=1e-12)


def test_linalg_products(backend: str, xp: Any) -> None:
    d = xp.asarray([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [4.0, 0.0, 0.0]], dtype=xp.float64)
    for layout in LAYOUTS[:3]:
        s = xs.to_sparse(d, layout=layout)
        for n in (0, 1, 2, 3):
            got = xs.linalg.matrix_power(s, n)
            assert_sparse_equal(got, xp.linalg.matrix_power(d, n), check_layout=layout)
    v = xp.asarray([0.0, 2.0, -1.0], dtype=xp.float64)
    sv = xs.to_sparse_coo(v)
    # an unspecified zero times -1 reads +0.0 (docs/decisions.md, "Signs of zeros that xsparse does not track")
    assert_sparse_equal(xs.linalg.outer(sv, v), xp.linalg.outer(v, v), check_layout="strided", check_signed_zeros=False)
    assert_sparse_equal(xs.linalg.outer(sv, sv), xp.linalg.outer(v, v), check_layout=xs.sparse_coo, check_signed_zeros=False)
    assert_sparse_equal(xs.linalg.outer(v, v), xp.linalg.outer(v, v))
    a = xs.to_sparse_coo(d)
    b = xs.to_sparse_coo(xp.flip(d, axis=0))
    assert_sparse_equal(xs.linalg.cross(a, b), xp.linalg.cross(d, xp.flip(d, axis=0)))
    assert_sparse_equal(xs.linalg.cross(a, b, axis=-2), xp.linalg.cross(d, xp.flip(d, axis=0), axis=-2))
    m = xp.asarray([[2.0, 0.0, 1.0], [0.0, 3.0, 0.0], [1.0, 0.0, 4.0]], dtype=xp.float64)
    assert_sparse_equal(xs.linalg.solve(xs.to_sparse_csr(m), v), xp.linalg.solve(m, v), rtol=1e-12, atol=1e-12)
    assert xs.linalg.matmul is xs.matmul and xs.linalg.tensordot is xs.tensordot and xs.linalg.vecdot is xs.vecdot
    assert_sparse_equal(xs.linalg.matrix_transpose(a), xp.linalg.matrix_transpose(d))


_FACTORIZATIONS: list[tuple[str, dict[str, Any]]] = [
    ("cholesky", {}), ("cholesky", {"upper": True}), ("det", {}), ("eigh", {}), ("eigvalsh", {}), ("inv", {}),
    ("matrix_rank", {}), ("matrix_rank", {"rtol": 0.5}), ("pinv", {}), ("pinv", {"rtol": 0.5}), ("qr", {}),
    ("qr", {"mode": "complete"}), ("slogdet", {}), ("svd", {}), ("svd", {"full_matrices": False}), ("svdvals", {}),
]  # fmt: skip


def _spd_case(xp: Any, data: Any) -> Any:
    """A symmetric, diagonally dominant (so positive definite) matrix or batch, with the sparsity of a drawn case."""
    case = data.draw(dense_cases(xp, dtype="float64", fill=False, max_batch_dims=1, max_dense_dims=0))
    k = min(case.array.shape[-2:])
    # the backends' own routines differ on empty matrices (NumPy's matrix_rank raises)
    assume(k > 0 and 0 not in tuple(case.array.shape))
    host = to_numpy(case.array)[..., :k, :k]
    host = np.where(np.isfinite(host), np.clip(host, -100.0, 100.0), 1.0)
    dominant = host + np.swapaxes(host, -1, -2) + (2.0 * np.abs(host).sum() + 1.0) * np.eye(k)
    return xp.asarray(dominant)


def _sparse_of(d: Any, layout: xs.Layout) -> Any:
    # the batches of a compressed array hold equal numbers of elements, which a drawn batch need not
    return xs.to_sparse(d, layout=layout if d.ndim == 2 else xs.sparse_coo)


def _parts(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, tuple) else (result,)


@pytest.mark.parametrize("layout", LAYOUTS[:3], ids=LAYOUT_IDS[:3])
@pytest.mark.parametrize("name, kwargs", _FACTORIZATIONS, ids=[f"{n}-{'-'.join(k) or 'default'}" for n, k in _FACTORIZATIONS])
@FEW
@given(data=st.data())
def test_dense_factorizations_of_sparse_operands(backend: str, xp: Any, layout: xs.Layout, name: str, kwargs: dict[str, Any], data: Any) -> None:
    d = _spd_case(xp, data)
    s = _sparse_of(d, layout)
    got, want = getattr(xs.linalg, name)(s, **kwargs), getattr(xp.linalg, name)(d, **kwargs)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and hasattr(got, "_fields") and len(got) == len(want)
    # the same dense routine on the same dense matrix: the same numbers, strided
    for g, w in zip(_parts(got), _parts(want)):
        assert_sparse_equal(g, _arr(xp, w), check_layout="strided")
    # strided operands go to the backend's function unchanged
    for g, w in zip(_parts(getattr(xs.linalg, name)(d, **kwargs)), _parts(want)):
        assert_sparse_equal(g, _arr(xp, w))


def test_factorization_results_are_named_tuples(xp: Any) -> None:
    s = xs.to_sparse_csr(xp.asarray([[4.0, 1.0], [1.0, 3.0]], dtype=xp.float64))
    assert xs.linalg.eigh(s)._fields == ("eigenvalues", "eigenvectors")
    assert xs.linalg.qr(s)._fields == ("Q", "R")
    assert xs.linalg.slogdet(s)._fields == ("sign", "logabsdet")
    assert xs.linalg.svd(s)._fields == ("U", "S", "Vh")
    # an array rtol may be sparse too (it broadcasts against the result)
    rtol = xs.to_sparse_coo(xp.asarray(0.5, dtype=xp.float64))
    d = xs.to_dense(s)
    assert_sparse_equal(xs.linalg.pinv(s, rtol=rtol), xp.linalg.pinv(d, rtol=xp.asarray(0.5, dtype=xp.float64)))


@pytest.mark.parametrize("layout", LAYOUTS[:3], ids=LAYOUT_IDS[:3])
@FEW
@given(data=st.data())
def test_dense_routes_of_solve_matrix_power_and_matrix_norm(backend: str, xp: Any, layout: xs.Layout, data: Any) -> None:
    d = _spd_case(xp, data)
    s = _sparse_of(d, layout)
    k = int(d.shape[-1])
    rhs = xp.asarray(np.arange(1.0, math.prod((*d.shape[:-1], 2)) + 1.0).reshape((*d.shape[:-1], 2)))
    want = xp.linalg.solve(d, rhs)
    assert_sparse_equal(xs.linalg.solve(s, rhs), want, rtol=1e-9, atol=1e-12, check_layout="strided")
    # a sparse right-hand side is read as its dense matrix
    assert_sparse_equal(xs.linalg.solve(s, xs.to_sparse_coo(rhs)), want, rtol=1e-9, atol=1e-12, check_layout="strided")
    if d.ndim == 2:
        vec = xp.asarray(np.arange(1.0, k + 1.0))
        assert_sparse_equal(xs.linalg.solve(s, vec), xp.linalg.solve(d, vec), rtol=1e-9, atol=1e-12)
    n = data.draw(st.integers(-3, -1))
    assert_sparse_equal(xs.linalg.matrix_power(s, n), xp.linalg.matrix_power(d, n), check_layout="strided")
    if k:
        for ord in ("nuc", 2, -2):
            assert_sparse_equal(xs.linalg.matrix_norm(s, ord=ord), _arr(xp, xp.linalg.matrix_norm(d, ord=ord)), check_layout="strided")


@FEW
@given(data=st.data())
def test_outer_of_sparse_vectors_is_sparse(backend: str, xp: Any, data: Any) -> None:
    names = [n for n in ("int8", "uint8", "uint16", "uint32", "int32", "float32", "float64") if hasattr(xp, n)]
    dt1, dt2 = data.draw(st.sampled_from(names)), data.draw(st.sampled_from(names))
    try:
        want_dtype = xs.result_type(getattr(xp, dt1), getattr(xp, dt2))
    except TypeError:
        want_dtype = None
    assume(want_dtype is not None)
    # torch's index_select (in the sparse product's gather) has no uint16/32/64 kernel: that is the
    # product's limit, tracked apart from outer's promotion (which a mixed pair such as int8 x uint32 tests)
    assume(backend != "torch" or str(want_dtype) not in ("torch.uint16", "torch.uint32", "torch.uint64"))
    # small non-negative values fit every dtype; zeros leave elements unspecified (none, some, all)
    values = st.lists(st.sampled_from([0, 0, 1, 2, 4]), max_size=6)
    x1 = xp.asarray(data.draw(values), dtype=getattr(xp, dt1))
    x2 = xp.asarray(data.draw(values), dtype=getattr(xp, dt2))
    got = xs.linalg.outer(xs.to_sparse_coo(x1), xs.to_sparse_coo(x2))
    assert got.dtype == want_dtype
    want = xp.linalg.outer(xp.astype(x1, want_dtype), xp.astype(x2, want_dtype))
    assert_sparse_equal(got, want, check_layout=xs.sparse_coo)


def test_linalg_errors(xp: Any) -> None:
    s = xs.to_sparse_csr(xp.asarray([[4.0, 1.0], [1.0, 3.0]], dtype=xp.float64))
    with pytest.raises(ValueError, match=r"matrix_norm: ord must be one of 'fro', 'nuc', 1, -1, 2, -2, inf, -inf \(ord=3\)"):
        xs.linalg.matrix_norm(s, ord=3)
    with pytest.raises(ValueError, match=r"matrix_power: the matrices must be square \(x.shape=\(2, 3\)\)"):
        xs.linalg.matrix_power(xp.ones((2, 3)), 2)
    with pytest.raises(TypeError, match=r"vector_norm: x must have a floating-point dtype"):
        xs.linalg.vector_norm(xs.to_sparse_coo(xp.asarray([1, 2])))
    with pytest.raises(ValueError, match=r"cross: the vectors along axis -1 must have 3 elements"):
        xs.linalg.cross(s, s)
    with pytest.raises(ValueError, match=r"cross: axis must be negative and name a dimension of both operands \(axis=0"):
        xs.linalg.cross(s, s, axis=0)
    with pytest.raises(ValueError, match=r"outer: both operands must be 1-D"):
        xs.linalg.outer(s, s)
    fives = xs.sparse_coo_array(xp.asarray([[0]]), xp.asarray([1.0], dtype=xp.float64), (3,), fill_value=5.0)
    with pytest.raises(xs.NoKernelError, match=r"^outer: the outer product of two sparse vectors is sparse only for fill values 0 \(x1 fill_value=5\.0, x2 fill_value=5\.0\)\. Pass xsparse\.to_dense\(x2\)"):
        xs.linalg.outer(fives, fives)
    dense = xs.linalg.outer(fives, xs.to_dense(fives))
    assert [[float(v) for v in row] for row in xs.testing.to_numpy(dense)] == [[1.0, 5.0, 5.0], [5.0, 25.0, 25.0], [5.0, 25.0, 25.0]]
    with pytest.raises(ValueError, match=r"diagonal: x must have at least 2 dimensions"):
        xs.linalg.diagonal(xs.to_sparse_coo(xp.asarray([1.0])))
    with pytest.raises(TypeError, match=r"diagonal: offset must be an integer, got str \(offset='1'\)\. Pass an integer offset\."):
        xs.linalg.diagonal(s, offset="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"det: x must have at least 2 dimensions \(x.shape=\(2,\)\)"):
        xs.linalg.det(xs.to_sparse_coo(xp.asarray([1.0, 2.0])))


def test_linalg_errors_name_the_function_on_every_backend(xp: Any) -> None:
    # each of these raised the backend's own error (a torch RuntimeError, JAX's "add got incompatible shapes"
    # for cholesky of a 2 x 3 matrix), an error named after another function, or took 0.5 for axis 0
    s = xs.to_sparse_csr(xp.asarray([[4.0, 1.0], [1.0, 3.0]], dtype=xp.float64))
    wide = xs.to_sparse_coo(xp.asarray([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]], dtype=xp.float64))
    ints = xs.to_sparse_coo(xp.asarray([[2, 0], [0, 3]], dtype=xp.int64))
    bools = xs.to_sparse_coo(xp.asarray([True, False, True]))
    v3 = xp.asarray([1.0, 2.0, 3.0], dtype=xp.float64)
    for name in ("cholesky", "det", "eigh", "eigvalsh", "inv", "slogdet"):
        with pytest.raises(ValueError, match=rf"^{name}: the matrices must be square \(x.shape=\(2, 3\)\)\. Pass square matrices\.$"):
            getattr(xs.linalg, name)(wide)
    for name in ("cholesky", "det", "eigh", "eigvalsh", "inv", "matrix_rank", "pinv", "qr", "slogdet", "svd", "svdvals"):
        with pytest.raises(TypeError, match=rf"^{name}: x must have a floating-point dtype \(x.dtype=.*int64\)\. Cast it first"):
            getattr(xs.linalg, name)(ints)
    with pytest.raises(TypeError, match=r"^matrix_power: x must have a floating-point dtype \(x.dtype=.*int64\)"):
        xs.linalg.matrix_power(ints, -1)
    with pytest.raises(TypeError, match=r"^matrix_power: x has a boolean dtype \(x.dtype=bool\); powers are products"):
        xs.linalg.matrix_power(xs.to_sparse_coo(xp.asarray([[True, False], [False, True]])), 2)
    with pytest.raises(TypeError, match=r"^matrix_power: n must be an integer, got float \(n=2\.0\)\. Pass an integer power\.$"):
        xs.linalg.matrix_power(s, 2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^qr: mode must be 'reduced' or 'complete' \(mode='bogus'\)\. Pick one of them\.$"):
        xs.linalg.qr(s, mode="bogus")
    with pytest.raises(TypeError, match=r"^svd: full_matrices must be True or False, got str \(full_matrices='no'\)\. Pass a bool\.$"):
        xs.linalg.svd(s, full_matrices="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^cholesky: upper must be True or False, got str \(upper='no'\)\. Pass a bool\.$"):
        xs.linalg.cholesky(s, upper="no")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^matrix_rank: rtol must be None, a real number or an array, got str \(rtol='x'\)\. Pass"):
        xs.linalg.matrix_rank(s, rtol="x")
    with pytest.raises(ValueError, match=r"^pinv: rtol must broadcast against the batch shape of x \(rtol.shape=\(2, 2\), x.shape=\(2, 2\)\)\. Pass"):
        xs.linalg.pinv(s, rtol=s)
    with pytest.raises(TypeError, match=r"^trace: offset must be an integer, got float \(offset=1\.0\)\. Pass an integer offset\.$"):
        xs.linalg.trace(s, offset=1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^outer: x1 has a boolean dtype \(x1.dtype=bool\); outer is defined for numeric dtypes\. Cast it first\.$"):
        xs.linalg.outer(bools, bools)
    with pytest.raises(TypeError, match=r"^cross: x1 has a boolean dtype \(x1.dtype=bool\); cross is defined for numeric dtypes\."):
        xs.linalg.cross(bools, bools)
    with pytest.raises(ValueError, match=r"^cross: the shapes do not broadcast \(\(2, 3\), \(4, 3\)\)\. Make each size equal, or 1\.$"):
        xs.linalg.cross(xs.to_sparse_coo(xp.ones((2, 3), dtype=xp.float64)), xp.ones((4, 3), dtype=xp.float64))
    with pytest.raises(TypeError, match=r"^cross: axis must be an integer, got float \(axis=-1\.0\)\."):
        xs.linalg.cross(xs.to_sparse_coo(v3), v3, axis=-1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^vecdot: axis must be an integer, got float \(axis=-1\.0\)\."):
        xs.linalg.vecdot(s, s, axis=-1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^tensordot: axes must be an integer, got float \(axes=0\.5\)\. Pass integer axes"):
        xs.linalg.tensordot(s, s, axes=([0.5], [0]))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^tensordot: axes must be an integer, not a bool \(axes=True\)\."):
        xs.linalg.tensordot(s, s, axes=True)
    with pytest.raises(ValueError, match=r"^tensordot: axes must be an int or two sequences of equal length \(axes=\(0, 0\)\)\. Pass"):
        xs.linalg.tensordot(s, s, axes=(0, 0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^solve: x1 or x2 must have a floating-point dtype \(x1.dtype=int64, x2.dtype=int64\)\. Cast the system"):
        xs.linalg.solve(ints, xp.asarray([1, 2], dtype=xp.int64))
    with pytest.raises(TypeError, match=r"^solve: x1 has a boolean dtype \(x1.dtype=bool\); solve is defined for numeric dtypes\."):
        xs.linalg.solve(xs.to_sparse_coo(xp.asarray([[True, False], [False, True]])), xp.asarray([1.0, 2.0], dtype=xp.float64))


@pytest.mark.parametrize("shape", [(0, 0), (2, 0), (0, 3), (2, 3, 0)])
def test_matrix_norm_of_matrices_without_rows_or_columns(xp: Any, shape: tuple[int, ...]) -> None:
    # the largest of no column (row) sums is 0, as NumPy and torch give; the max under ord=1 and inf raised
    d = xp.zeros(shape, dtype=xp.float64)
    s = xs.to_sparse_coo(d)
    for ord in (1, xs.inf, "fro"):
        for keepdims in (False, True):
            assert_sparse_equal(xs.linalg.matrix_norm(s, ord=ord, keepdims=keepdims), _arr(xp, xp.linalg.matrix_norm(d, ord=ord, keepdims=keepdims)))
    if shape[-1] == 0:
        with pytest.raises(ValueError, match=r"^matrix_norm: ord=-1 is the smallest column sum, and the matrices have none \(x.shape=.*\)\. Pass"):
            xs.linalg.matrix_norm(s, ord=-1)
    # the smallest of no singular values: NumPy's and torch's own errors (a reduction's, an IndexError) were raised
    for operand in (s, d):
        with pytest.raises(ValueError, match=r"^matrix_norm: ord=-2 is the smallest singular value, and the matrices have none \(x.shape=.*\)\. Pass"):
            xs.linalg.matrix_norm(operand, ord=-2)


def test_linalg_arguments_of_every_library(xp: Any) -> None:
    # NumPy integers are integers ("Errors" in docs/decisions.md), and a NumPy float64 a Python float:
    # diagonal, matrix_power and tensordot refused np.int64, array_api_strict refused addmm's np.float64 beta
    d = xp.asarray([[4.0, 1.0, 0.0], [1.0, 3.0, 0.0], [0.0, 0.0, 2.0]], dtype=xp.float64)
    s = xs.to_sparse_csr(d)
    assert_sparse_equal(xs.linalg.diagonal(s, offset=np.int64(1)), xp.linalg.diagonal(d, offset=1))
    assert_sparse_equal(xs.linalg.trace(s, offset=np.int64(-1)), _arr(xp, xp.linalg.trace(d, offset=-1)))
    assert_sparse_equal(xs.linalg.matrix_power(s, np.int64(2)), xp.linalg.matrix_power(d, 2), check_layout=xs.sparse_csr)
    assert_sparse_equal(xs.linalg.tensordot(s, d, axes=np.int64(1)), xp.linalg.tensordot(d, d, axes=1), check_layout="strided")
    assert_sparse_equal(xs.linalg.tensordot(s, d, axes=([np.int64(1)], [np.int64(0)])), xp.linalg.tensordot(d, d, axes=([1], [0])))
    assert_sparse_equal(xs.linalg.vector_norm(s, ord=np.int64(1)), _arr(xp, xp.linalg.vector_norm(d, ord=1)))
    assert_sparse_equal(xs.addmm(d, s, d, beta=np.float64(2.0)), 2.0 * d + d @ d)
    # an integer operand of solve takes the other's dtype (array_api_strict promotes no integer with a
    # float, torch's dense solve takes no integers)
    ints = xp.asarray([[2, 0], [1, 4]], dtype=xp.int64)
    rhs = xp.asarray([2.0, 9.0], dtype=xp.float32)
    want = xp.linalg.solve(xp.astype(ints, xp.float32), rhs)
    for a in (xs.to_sparse_csr(ints), xs.to_sparse_coo(xp.reshape(ints, (1, 2, 2)))):
        got = xs.linalg.solve(a, rhs if a.ndim == 2 else xp.reshape(rhs, (1, 2, 1)))
        assert got.dtype == xp.float32
        assert_sparse_equal(xp.reshape(got, (2,)), want, rtol=1e-6, atol=1e-6)


# -- fft -----------------------------------------------------------------------------------------------

_ONE_AXIS = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
_N_AXES = ["fftn", "ifftn", "rfftn", "irfftn"]
_REAL_INPUT = {"rfft", "ihfft", "rfftn"}


@pytest.mark.parametrize("name", _ONE_AXIS + _N_AXES)
@FEW
@given(data=st.data())
def test_fft_transforms_of_sparse_input_are_strided(backend: str, xp: Any, name: str, data: Any) -> None:
    dtype = "float64" if name in _REAL_INPUT else "complex128"
    assume(hasattr(xp, dtype))
    case = data.draw(dense_cases(xp, dtype=dtype, fill=None, max_dense_dims=1))
    d = case.array
    assume(d.ndim >= 1 and 0 not in tuple(d.shape))
    layout = data.draw(st.sampled_from(LAYOUTS[:3] if case.dense_dim == 0 and d.ndim == 2 else [xs.sparse_coo]))
    s = case.sparse(layout) if layout is not xs.sparse_coo else xs.to_sparse_coo(d, fill_value=case.fill_value)
    norm = data.draw(st.sampled_from(["backward", "ortho", "forward"]))
    kwargs: dict[str, Any] = {"norm": norm}
    if name in _ONE_AXIS:
        kwargs["axis"] = data.draw(st.integers(-d.ndim, d.ndim - 1))
        kwargs["n"] = data.draw(st.none() | st.integers(2, 6))
        # a Hermitian input of one element has no output length (2 * (1 - 1) = 0): every backend refuses it
        assume(name not in ("irfft", "hfft") or kwargs["n"] is not None or d.shape[kwargs["axis"]] > 1)
    else:
        axes = data.draw(st.none() | st.lists(st.integers(0, d.ndim - 1), min_size=1, max_size=d.ndim, unique=True))
        kwargs["axes"] = axes
        if axes is not None:
            kwargs["s"] = data.draw(st.none() | st.just([2] * len(axes)))
        last = d.ndim - 1 if axes is None else axes[-1]
        assume(name != "irfftn" or kwargs.get("s") is not None or d.shape[last] > 1)
    want = getattr(xp.fft, name)(d, **kwargs)
    got = getattr(xs.fft, name)(s, **kwargs)
    # the backend's own transform of the same dense array
    assert_sparse_equal(got, want, check_layout="strided")
    assert_sparse_equal(getattr(xs.fft, name)(d, **kwargs), want)


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUT_IDS)
@FEW
@given(data=st.data())
def test_fft_shifts_keep_the_layout(backend: str, xp: Any, name: str, layout: xs.Layout, data: Any) -> None:
    case = data.draw(dense_cases(xp, dtype="float64", fill=None, max_dense_dims=0 if layout is not xs.sparse_coo else 1))
    assume(not _is_nan(case.fill_value))
    s = case.sparse(layout)
    d = case.array
    axes = data.draw(st.none() | st.integers(-d.ndim, d.ndim - 1) | st.lists(st.integers(0, d.ndim - 1), min_size=1, max_size=d.ndim, unique=True))
    got = getattr(xs.fft, name)(s, axes=axes)
    assert got.layout is layout and got.fill_value == s.fill_value
    assert_sparse_equal(got, getattr(xp.fft, name)(d, axes=axes), check_layout=layout)
    assert_sparse_equal(getattr(xs.fft, name)(d, axes=axes), getattr(xp.fft, name)(d, axes=axes))


@pytest.mark.parametrize("name", ["fftfreq", "rfftfreq"])
def test_fft_frequencies_are_creation_functions(backend: str, xp: Any, name: str) -> None:
    for n in (1, 2, 5, 8):
        for d in (1.0, 0.25):
            want = getattr(xp.fft, name)(n, d=d)
            got = getattr(xs.fft, name)(n, d=d, backend=backend)
            assert_sparse_equal(got, want, check_layout="strided")
            # the backend's default real floating dtype, or the one asked for
            assert got.dtype == xp.__array_namespace_info__().default_dtypes()["real floating"]
            got32 = getattr(xs.fft, name)(n, d=d, dtype="float32", backend=backend)
            assert_sparse_equal(got32, getattr(xp.fft, name)(n, d=d, dtype=xp.float32))
            sparse = getattr(xs.fft, name)(n, d=d, backend=backend, layout=xs.sparse_coo)
            assert_sparse_equal(sparse, want, check_layout=xs.sparse_coo)
    device = xs.__array_namespace_info__(backend=backend).default_device()
    assert getattr(xs.fft, name)(4, device=device, backend=backend).device == device
    with xs.default_backend(backend):
        assert_sparse_equal(getattr(xs.fft, name)(4), getattr(xp.fft, name)(4))


def test_fft_errors(xp: Any) -> None:
    s = xs.to_sparse_coo(xp.asarray([1.0, 0.0, 2.0], dtype=xp.float64))
    with pytest.raises(ValueError, match=r"fft: norm must be 'backward', 'ortho' or 'forward' \(norm='both'\)\. Pass one of them"):
        xs.fft.fft(s, norm="both")
    with pytest.raises(ValueError, match=r"rfftn: x must have at least one dimension \(x.shape=\(\)\)\. Reshape it to 1-D first"):
        xs.fft.rfftn(xs.to_sparse_coo(xp.asarray(1.0, dtype=xp.float64)))
    with pytest.raises(ValueError, match=r"fftshift: axes must name dimensions of x \(axes=\(1,\), x.ndim=1\)\. Pass axes in \[-1, 0\]"):
        xs.fft.fftshift(s, axes=1)
    with pytest.raises(ValueError, match=r"fftfreq: n must be a positive int \(n=0\)\. Pass the number of samples"):
        xs.fft.fftfreq(0)
    with pytest.raises(ValueError, match=r"rfftfreq: n must be a positive int \(n=2.5\)"):
        xs.fft.rfftfreq(2.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"fftfreq: dtype must be a real floating-point dtype \(dtype='int32'\)\. Pass e.g. 'float64'"):
        xs.fft.fftfreq(4, dtype="int32")
    with pytest.raises(TypeError, match=r"fft: expected an xsparse array or a backend array, got list"):
        xs.fft.fft([1.0, 2.0])
    assert xs.fft.ifftshift(s, axes=()) is s



@pytest.mark.parametrize("layout", [xs.sparse_coo, xs.sparse_csr], ids=str)
def test_fft_transforms_check_axes_before_densifying(xp: Any, layout: xs.Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    d = xp.asarray([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]], dtype=xp.complex128)
    s = xs.to_sparse(d, layout=layout)
    import xsparse._conversion

    densified: list[Any] = []
    to_dense = xsparse._conversion.to_dense
    monkeypatch.setattr(xsparse._conversion, "to_dense", lambda x, *a, **k: densified.append(x) or to_dense(x, *a, **k))
    with pytest.raises(IndexError, match=r"^fft: axis 2 is out of range for x\.ndim=2 \(axis=2\)\. Pass axes in \[-2, 1\]\.$"):
        xs.fft.fft(s, axis=2)
    with pytest.raises(IndexError, match=r"^fftn: axis 3 is out of range for x\.ndim=2 \(axes=\(0, 3\)\)\. Pass axes in \[-2, 1\]\.$"):
        xs.fft.fftn(s, axes=(0, 3))
    with pytest.raises(TypeError, match=r"^ifft: axis must be an int \(axis=1\.0\)\. Pass integer axes\.$"):
        xs.fft.ifft(s, axis=1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^rfftn: axes must be None or a sequence of ints \(axes=1\)\. Pass e\.g\. axes=\(0, 1\)\.$"):
        xs.fft.rfftn(xs.real(s), axes=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^fftshift: axes must be None, an int or a sequence of ints \(axes=1\.0\)\. Pass integer axes\.$"):
        xs.fft.fftshift(s, axes=1.0)  # type: ignore[arg-type]
    assert densified == []
    # the checks accept what the backend's transform accepts
    assert_sparse_equal(xs.fft.fft(s, axis=-2), xp.fft.fft(d, axis=-2), check_layout="strided")
    assert_sparse_equal(xs.fft.fftn(s, axes=[1]), xp.fft.fftn(d, axes=[1]), check_layout="strided")


def test_fft_frequencies_take_numpy_integers() -> None:
    for name in ("fftfreq", "rfftfreq"):
        assert_sparse_equal(getattr(xs.fft, name)(np.int64(4)), np.asarray(getattr(np.fft, name)(4)))
        with pytest.raises(ValueError, match=rf"^{name}: n must be a positive int \(n=True\)\. Pass the number of samples\.$"):
            getattr(xs.fft, name)(True)


def test_zero_d_results_are_arrays_not_numpy_scalars() -> None:
    # NumPy's functions return scalars (numpy.float64) for 0-d results; xsparse returns 0-d arrays
    x = np.asarray(2.0)
    v = np.ones(3)
    a = xs.to_sparse(np.asarray([[1.0, 0.0], [0.0, 2.0]]))
    results = [
        xs.sqrt(x),
        xs.add(x, 1.0),
        xs.multiply(2.0, x),
        xs.sqrt(xs.sum(a)),
        xs.matmul(v, v),
        xs.vecdot(v, v),
        xs.linalg.vecdot(v, v),
        xs.tensordot(v, v, axes=1),
    ]
    for r in results:
        assert type(r) is np.ndarray and r.shape == ()


def test_bound_namespace_checks_its_arguments() -> None:
    a = xs.to_sparse(np.eye(2))
    assert a.__array_namespace__(api_version="2023.12").__array_api_version__ == "2023.12"
    for bad in ("bogus", "2025.12"):
        with pytest.raises(ValueError, match=rf"^bound_namespace: xsparse implements the Array API versions 2021\.12, 2022\.12, 2023\.12, 2024\.12, not '{bad}'"):
            a.__array_namespace__(api_version=bad)
    for bad in ("sparse_csr", 3, xs.sparse_semi_structured):
        with pytest.raises(xs.LayoutError, match=r"^bound_namespace: the creation functions make strided, COO or compressed arrays"):
            xs.bound_namespace("numpy", layout=bad)
    # strided is the namespace without a default layout
    assert xs.bound_namespace("numpy", layout=xs.strided) is xs.bound_namespace("numpy")


@pytest.mark.parametrize("layout", [None, xs.sparse_coo])
def test_bound_namespace_dir(layout: Any) -> None:
    ns = xs.bound_namespace("numpy", layout=layout)
    names = dir(ns)
    assert {"zeros", "asarray", "to_sparse", "linalg", "fft", "float64", "__array_namespace_info__"} <= set(names)
    for name in names:
        getattr(ns, name)  # everything listed is there


def test_bound_namespace_with_a_block_shape() -> None:
    ns = xs.bound_namespace("numpy", layout=xs.sparse_bsr, blocksize=(2, 2))
    assert repr(ns) == "xsparse namespace(backend=numpy, layout=sparse_bsr, blocksize=(2, 2))"
    eye = np.eye(4)
    made = {
        "zeros": (ns.zeros((4, 4)), np.zeros((4, 4))),
        "eye": (ns.eye(4), eye),
        "ones batched": (ns.ones((2, 4, 2)), np.ones((2, 4, 2))),
        "full": (ns.full((4, 2), 3.0), np.full((4, 2), 3.0)),
        "asarray": (ns.asarray(eye.tolist()), eye),
        "to_sparse": (ns.to_sparse(eye), eye),
        "meshgrid": (ns.meshgrid(np.arange(2.0), np.arange(4.0))[0], np.meshgrid(np.arange(2.0), np.arange(4.0))[0]),
    }
    for name, (got, want) in made.items():
        assert got.layout is xs.sparse_bsr and got.blocksize == (2, 2), name
        assert_sparse_equal(got, want)
    assert ns.zeros((4, 4), blocksize=(1, 4)).blocksize == (1, 4)  # a call's own block shape wins
    assert ns.arange(4).layout is xs.sparse_coo  # 1-d: no blocks
    with pytest.raises(xs.InvariantError, match=r"shape \(3, 3\) is not a whole number of blocks of blocksize \(2, 2\)"):
        ns.zeros((3, 3))
    with pytest.raises(ValueError, match=r"^bound_namespace: blocksize is the block shape of a sparse_bsr or sparse_bsc default layout \(layout=sparse_csr"):
        xs.bound_namespace("numpy", layout=xs.sparse_csr, blocksize=(2, 2))


def test_errors_name_the_function_called() -> None:
    # each of these runs another public function inside, whose name its errors carried
    a = xs.to_sparse(np.eye(3))
    with pytest.raises(ValueError, match=r"^vector_norm: axis 3 is out of range for an array of 2 dimensions"):
        xs.linalg.vector_norm(a, axis=3)
    with pytest.raises(ValueError, match=r"^clip: the shapes \(3, 3\) and \(4,\) do not broadcast"):
        xs.clip(a, np.ones(4), None)
    with pytest.raises(IndexError, match=r"^index_select: index 5 is out of bounds for axis 0 of size 3"):
        xs.index_select(a, 0, [5])


def test_flags_are_bools() -> None:
    # bool() would read "no" as true
    a = xs.to_sparse(np.eye(3))
    calls = {
        "sum: keepdims": lambda: xs.sum(a, keepdims="yes"),
        "max: keepdims": lambda: xs.max(a, axis=0, keepdims=1),
        "sort: descending": lambda: xs.sort(a[0], descending="x"),
        "spsolve: left": lambda: xs.spsolve(xs.to_sparse_csr(np.eye(2)), np.ones(2), left="no"),
        "pca_lowrank: center": lambda: xs.pca_lowrank(a, center="x"),
        "vector_norm: keepdims": lambda: xs.linalg.vector_norm(a, keepdims=None),
    }
    for what, call in calls.items():
        with pytest.raises(TypeError, match=rf"^{what} must be True or False, got \w+ \(.*\)\. Pass a bool\."):
            call()
    assert xs.sum(a, axis=0, keepdims=np.bool_(True)).shape == (1, 3)


def test_where_shapes_and_astype_dtype_are_checked() -> None:
    a = xs.to_sparse(np.eye(3))
    with pytest.raises(ValueError, match=r"^where: the shapes \(2, 2\) and \(3, 3\) do not broadcast"):
        xs.where(np.ones((2, 2), dtype=bool), a, 0.0)  # NumPy's own broadcast error named no function
    for x in (a, np.ones(2)):
        with pytest.raises(TypeError, match=r"^astype: dtype is required \(dtype=None\)\. Pass the dtype to cast to"):
            xs.astype(x, None)
