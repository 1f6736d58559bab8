"""The sparse-by-default namespace that the Array API test suite runs against, and the suite's runner.

The suite itself (data-apis/array-api-tests) is not needed here: the runner's argument parsing, pin check
and xfails files are tested on their own.
"""

from __future__ import annotations

import inspect
import math
import operator
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import xsparse as xs
from xsparse.backends import backend_of_array
from xsparse.testing import to_numpy

# the runner: conformance/array_api_tests.py, installed as xsparse.conformance.array_api_tests (what
# ``python -m xsparse array-api-tests`` runs)
from xsparse.conformance import array_api_tests as runner


@pytest.fixture
def sp(backend: str) -> Any:
    """The sparse-by-default (COO) namespace of the backend."""
    return xs.bound_namespace(backend, layout=xs.sparse_coo)


def _dense(x: Any) -> np.ndarray:
    d = xs.to_dense(x) if isinstance(x, xs.SparseArray) else x
    return to_numpy(d)


# -- creation functions return sparse arrays ------------------------------------------------------


def test_creation_functions_are_sparse(sp: Any, backend: str) -> None:
    made = {
        "zeros": sp.zeros((2, 3)),
        "ones": sp.ones((3,)),
        "empty": sp.empty((2, 2)),
        "full": sp.full((2, 1), 4.0),
        "eye": sp.eye(3),
        "asarray": sp.asarray([[1.0, 0.0], [0.0, 2.0]]),
        "asarray 0-d": sp.asarray(3.5),
        "arange": sp.arange(5),
        "linspace": sp.linspace(0.0, 1.0, num=4),
        "to_sparse": sp.to_sparse(xs.bound_namespace(backend).asarray([1.0, 0.0])),
    }
    expected = {
        "zeros": np.zeros((2, 3)), "ones": np.ones(3), "full": np.full((2, 1), 4.0), "eye": np.eye(3),
        "asarray": np.array([[1.0, 0.0], [0.0, 2.0]]), "asarray 0-d": np.array(3.5), "arange": np.arange(5),
        "linspace": np.linspace(0.0, 1.0, 4), "to_sparse": np.array([1.0, 0.0]),
    }  # fmt: skip
    for name, x in made.items():
        assert isinstance(x, xs.SparseArray), name
        assert x.layout is xs.sparse_coo and x.backend == backend, name
        if name in expected:
            np.testing.assert_allclose(_dense(x), expected[name], err_msg=name)


@pytest.mark.parametrize("layout", [xs.sparse_csr, xs.sparse_csc])
def test_a_compressed_default_makes_coo_what_it_cannot_hold(backend: str, layout: xs.Layout) -> None:
    """2-d and batched arrays of equal counts get the compressed default; 0-d and 1-d arrays, and batches
    of unequal counts (invariant 3.9), are COO; a layout passed to the call is obeyed."""
    cp = xs.bound_namespace(backend, layout=layout)
    plain = xs.bound_namespace(backend)
    uneven = np.zeros((2, 3, 3))
    uneven[0, 0, 0], uneven[1, 1, 1], uneven[1, 2, 2] = 1.0, 2.0, 3.0
    made = {
        "zeros 2-d": (cp.zeros((2, 3)), layout, np.zeros((2, 3))),
        "zeros batched": (cp.zeros((2, 2, 3)), layout, np.zeros((2, 2, 3))),
        "ones 1-d": (cp.ones(3), xs.sparse_coo, np.ones(3)),
        "full 0-d": (cp.full((), 2.0), xs.sparse_coo, np.array(2.0)),
        "eye": (cp.eye(3), layout, np.eye(3)),
        "asarray 0-d": (cp.asarray(3.5), xs.sparse_coo, np.array(3.5)),
        "asarray 1-d": (cp.asarray([1.0, 0.0]), xs.sparse_coo, np.array([1.0, 0.0])),
        "asarray 2-d": (cp.asarray([[1.0, 0.0], [0.0, 2.0]]), layout, np.array([[1.0, 0.0], [0.0, 2.0]])),
        "asarray uneven batches": (cp.asarray(uneven.tolist()), xs.sparse_coo, uneven),
        "asarray of an array": (cp.asarray(plain.asarray(uneven.tolist())), xs.sparse_coo, uneven),
        "to_sparse uneven": (cp.to_sparse(plain.asarray(uneven.tolist())), xs.sparse_coo, uneven),
        "to_sparse even": (cp.to_sparse(plain.asarray(uneven[:1].tolist())), layout, uneven[:1]),
        "arange": (cp.arange(4), xs.sparse_coo, np.arange(4)),
        "linspace": (cp.linspace(0.0, 1.0, num=3), xs.sparse_coo, np.linspace(0.0, 1.0, 3)),
        "asarray, strided asked": (cp.asarray([1.0, 2.0], layout=xs.strided), xs.strided, np.array([1.0, 2.0])),
    }  # fmt: skip
    for name, (x, expected_layout, expected) in made.items():
        assert xs.layout_of(x) is expected_layout, name
        np.testing.assert_array_equal(_dense(x), expected, err_msg=name)
    with pytest.raises(ValueError, match=r"cannot hold a 1-d array \(shape \(3,\)\)"):
        cp.zeros(3, layout=layout)  # asked for explicitly: the layout's own error
    bsr = xs.bound_namespace(backend, layout=xs.sparse_bsr)
    assert bsr.zeros((4, 4), blocksize=(2, 2)).layout is xs.sparse_bsr
    assert bsr.asarray([1.0, 2.0], blocksize=(2, 2)).layout is xs.sparse_coo, "a 1-d array has no blocks"


def test_like_functions_and_operations_keep_their_layouts(sp: Any, backend: str) -> None:
    csr = xs.to_sparse_csr(xs.bound_namespace(backend).asarray([[1.0, 0.0], [0.0, 2.0]]))
    assert sp.zeros_like(csr).layout is xs.sparse_csr, "the *_like functions keep their input's layout"
    strided = xs.bound_namespace(backend).ones((2, 2))
    assert xs.layout_of(sp.zeros_like(strided)) is xs.strided
    # an operation chooses its result layout itself: sparse + strided is strided, as in torch
    assert xs.layout_of(sp.add(sp.asarray([[1.0, 0.0], [0.0, 2.0]]), strided)) is xs.strided
    assert sp.add(csr, csr).layout is xs.sparse_csr


def test_meshgrid_results_are_sparse() -> None:
    sp = xs.bound_namespace("numpy", layout=xs.sparse_coo)
    if "meshgrid" not in xs.__all__:
        pytest.skip("xsparse defines no meshgrid yet")
    grids = sp.meshgrid(sp.arange(2), sp.arange(3))
    assert all(isinstance(g, xs.SparseArray) and g.layout is xs.sparse_coo for g in grids)
    np.testing.assert_array_equal(_dense(grids[0]), np.meshgrid(np.arange(2), np.arange(3))[0])


def test_namespace_name_signatures_and_extensions(sp: Any, backend: str) -> None:
    assert sp.__name__ == f"xsparse(backend={backend}, layout=sparse_coo)"
    assert xs.bound_namespace(backend).__name__ == f"xsparse(backend={backend})"
    # the bound functions show the public signature (the suite's signature tests read it)
    assert sp.zeros.__name__ == "zeros"
    assert inspect.signature(sp.zeros) == inspect.signature(xs.zeros)
    assert "shape" in inspect.signature(sp.full).parameters
    assert hasattr(xs.bound_namespace(backend), "float64")
    # the namespace's inspection entry point reaches the backend's (or xsparse's own)
    assert hasattr(sp.__array_namespace_info__(), "devices")


def test_extensions_are_xsparse_and_bound(sp: Any, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # xp.fft and xp.linalg are xsparse's extensions (they take sparse arrays), bound like the namespace
    assert {"fft", "linalg"} <= set(xs.__all__)
    for name in ("fft", "linalg"):
        extension = getattr(sp, name)
        assert isinstance(extension, xs._namespace.BoundExtension) and extension is getattr(sp, name)  # cached
        assert extension.__name__ == f"xsparse.{name}" and set(dir(extension)) == set(getattr(xs, name).__all__)
        with pytest.raises(AttributeError, match=rf"the xsparse extension 'xsparse.{name}' has no attribute 'nope'"):
            extension.nope  # noqa: B018
    # an extension module of the backend that xsparse does not define is hidden (it takes no sparse arrays)
    with monkeypatch.context() as m:
        m.setattr(xs, "__all__", [n for n in xs.__all__ if n != "fft"])
        with pytest.raises(AttributeError, match=r"the xsparse namespace has no attribute 'fft' \(the backend's extension"):
            sp.fft  # noqa: B018
    # the frequencies are creation functions: made on the namespace's backend, in its layout
    freq = sp.fft.fftfreq(4, d=0.5)
    assert isinstance(freq, xs.SparseArray) and freq.layout is xs.sparse_coo and freq.backend == backend
    np.testing.assert_allclose(_dense(freq), np.fft.fftfreq(4, d=0.5))
    plain = xs.bound_namespace(backend).fft.rfftfreq(5)
    assert not isinstance(plain, xs.SparseArray) and backend_of_array(plain).name == backend
    np.testing.assert_allclose(_dense(plain), np.fft.rfftfreq(5))
    assert inspect.signature(sp.fft.fftfreq) == inspect.signature(xs.fft.fftfreq)
    # the transforms take sparse arrays and return the backend's strided arrays
    x = sp.asarray([1.0, 0.0, 2.0, 0.0], dtype=sp.complex128)  # the standard's fft takes complex input
    out = sp.fft.fft(x)
    assert not isinstance(out, xs.SparseArray) and backend_of_array(out).name == backend
    np.testing.assert_allclose(_dense(out), np.fft.fft([1.0, 0.0, 2.0, 0.0]))
    np.testing.assert_allclose(_dense(sp.linalg.vector_norm(x)), math.sqrt(5.0))


# -- 0-d arrays and the scalar dunders ---------------------------------------------------------


def test_zero_d_results_are_sparse(sp: Any) -> None:
    x = sp.asarray([[1.0, 0.0], [0.0, 2.0]])
    for value in (x[0, 0], x[1][1], x[0, 1], sp.asarray(1.5)):
        assert isinstance(value, xs.SparseArray) and value.shape == ()


@pytest.mark.parametrize(
    ("values", "dtype", "method", "expected"),
    [
        (7, "int64", "__int__", 7),
        (7, "int64", "__index__", 7),
        (7, "int64", "__float__", 7.0),
        (7, "int64", "__bool__", True),
        (0, "int32", "__bool__", False),
        (0, "int32", "__index__", 0),
        (-2.75, "float64", "__float__", -2.75),
        (-2.75, "float64", "__int__", -2),
        (-2.75, "float64", "__complex__", complex(-2.75, 0.0)),
        (0.0, "float32", "__float__", 0.0),
        (True, "bool", "__bool__", True),
        (False, "bool", "__bool__", False),
    ],
)
def test_scalar_dunders_on_0d(sp: Any, values: Any, dtype: str, method: str, expected: Any) -> None:
    x = sp.asarray(values, dtype=getattr(sp, dtype))
    assert isinstance(x, xs.SparseArray) and x.ndim == 0
    out = getattr(x, method)()
    assert type(out) is type(expected) and out == expected
    # and through the builtins
    builtins: dict[str, Any] = {"__int__": int, "__float__": float, "__bool__": bool, "__complex__": complex, "__index__": operator.index}
    builtin = builtins[method]
    assert builtin(x) == expected


def test_scalar_dunders_on_one_element_and_fill_values(sp: Any) -> None:
    one = sp.asarray([[4]], dtype=sp.int64)
    assert (int(one), operator.index(one), float(one), bool(one)) == (4, 4, 4.0, True)
    assert [10, 20, 30, 40, 50][one] == 50, "a one-element integer array is an index"
    # an unspecified element reads as the fill value
    filled = sp.full((), 3.0)
    assert filled.nnz == 0 and float(filled) == 3.0 and int(filled) == 3
    nan = sp.asarray(math.nan)
    assert math.isnan(float(nan)) and bool(nan)


def test_uint64_above_int64_converts_to_a_python_int(sp: Any) -> None:
    # torch reads no uint64 above int64's range as a Python int; xsparse reads its bits
    if not hasattr(sp, "uint64"):
        pytest.skip("the backend has no uint64")
    big = 2**64 - 3
    x = sp.asarray([big, 1], dtype=sp.uint64)[0]
    assert isinstance(x, xs.SparseArray) and int(x) == big and operator.index(x) == big
    assert int(sp.asarray(5, dtype=sp.uint64)) == 5


def test_scalar_dunder_errors(sp: Any) -> None:
    x = sp.asarray([1, 2, 3])
    for method in ("__int__", "__float__", "__complex__", "__index__"):
        with pytest.raises(
            ValueError,
            match=rf"^{method}: only an array with one element converts to a Python scalar \(size=3, shape=\(3,\)\)\. "
            r"Index one element first, or reduce the array",
        ):
            getattr(x, method)()
    with pytest.raises(TypeError):
        operator.index(sp.asarray(1.5))


@settings(max_examples=20, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=False, width=64) | st.integers(-(2**31), 2**31 - 1))
def test_float_of_0d_matches_python(value: float | int) -> None:
    sp = xs.bound_namespace("numpy", layout=xs.sparse_coo)
    x = sp.asarray(value, dtype=sp.float64)
    assert float(x) == float(value)
    assert bool(x) == bool(value)


def test_to_device_and_array_namespace(sp: Any, backend: str) -> None:
    x = sp.asarray([1.0, 0.0, 2.0])
    assert x.to_device(x.device) is x
    assert x.__array_namespace__() is xs.bound_namespace(backend)
    if backend == "torch":
        import torch

        moved = x.to_device(torch.device("meta"))
        assert moved.device == torch.device("meta") and moved.shape == x.shape
    assert backend_of_array(xs.to_dense(x)).name == backend


# -- the array object's deviations: immutable arrays, no DLPack export ---------------------------------


def test_setitem_raises_and_where_builds_the_result(sp: Any, backend: str) -> None:
    x = sp.asarray([[1.0, 0.0], [0.0, 2.0]])
    before = _dense(x)
    for key, value in (((0, 1), 5.0), (x > 1.0, 0.0), (slice(None), sp.asarray([3.0, 4.0]))):
        with pytest.raises(
            xs.LayoutError,
            match=r"^__setitem__: xsparse sparse arrays are immutable and cannot be assigned to \(layout=sparse_coo, "
            r"shape=\(2, 2\)\)\. Build the result as a new array instead, e\.g\. xsparse\.where\(mask, value, x\)",
        ):
            x[key] = value
    np.testing.assert_array_equal(_dense(x), before)  # nothing was written
    assert isinstance(xs.LayoutError("m"), TypeError)
    # the functional way the message names
    y = sp.where(x > 1.0, sp.asarray(0.0), x)
    np.testing.assert_array_equal(_dense(y), np.where(before > 1.0, 0.0, before))
    assert inspect.signature(type(x).__setitem__).parameters.keys() == {"self", "key", "value"}


def test_dlpack_device_without_export(sp: Any, backend: str) -> None:
    x = sp.asarray([1.0, 0.0, 2.0])
    dense = xs.to_dense(x)
    assert x.__dlpack_device__() == dense.__dlpack_device__()
    device_type, device_id = x.__dlpack_device__()
    if backend == "cupy":
        import cupy

        assert int(device_type) == 2 and device_id == cupy.cuda.Device().id  # kDLCUDA: the current GPU
    else:
        assert int(device_type) == 1 and device_id == 0  # kDLCPU: the other backends are on the CPU here
    empty = sp.zeros((0,))
    assert empty.__dlpack_device__() == dense.__dlpack_device__()
    with pytest.raises(xs.DensificationError, match=r"^__dlpack__: a sparse_coo array has no DLPack representation"):
        x.__dlpack__()


# -- the runner ---------------------------------------------------------------------------------------


def test_runner_parses_arguments(tmp_path: Path) -> None:
    args = runner.parse_args(["--suite", str(tmp_path), "--backend", "torch", "--", "array_api_tests/test_constants.py", "-k", "pi"])
    assert (args.suite, args.backend, args.layout, args.max_examples) == (tmp_path, "torch", "sparse_coo", 20)
    assert args.xfails == runner.XFAILS_DIR / "torch.txt"
    assert args.pytest_args == ["array_api_tests/test_constants.py", "-k", "pi"]
    args = runner.parse_args(["--suite", "s", "--backend", "numpy", "--max-examples", "5", "--no-xfails"])
    assert args.max_examples == 5 and args.xfails is None and args.pytest_args == []
    assert runner.parse_args(["--suite", "s", "--backend", "numpy", "--plain"]).xfails is None
    for bad in (["--suite", "s", "--backend", "jax"], ["--backend", "numpy"], ["--suite", "s", "--backend", "numpy", "--max-examples", "0"],
                ["--suite", "s", "--backend", "numpy", "--layout", "strided"]):  # fmt: skip
        with pytest.raises(SystemExit):
            runner.parse_args(bad)


def test_runner_module_spec() -> None:
    spec = runner.module_spec("numpy", "sparse_coo")
    assert spec.startswith("exec('") and spec.endswith("')")
    namespace: dict[str, Any] = {}
    exec(spec[len("exec('") : -len("')")], namespace)  # the suite's own handling of the exec form
    assert namespace["xp"] is xs.bound_namespace("numpy", layout=xs.sparse_coo)
    assert runner.module_spec("torch", "sparse_coo", plain=True) == "array_api_compat.torch"


def test_pinned_revision() -> None:
    pin = runner.pinned_revision()
    assert len(pin) == 40 and int(pin, 16) >= 0


def test_pin_errors(tmp_path: Path) -> None:
    bad = tmp_path / "pin.txt"
    bad.write_text("# comment only\n")
    with pytest.raises(runner.RunnerError, match=r"^array_api_tests: the pin file has no revision \(file="):
        runner.pinned_revision(bad)
    bad.write_text("main\n")
    with pytest.raises(runner.RunnerError, match=r"^array_api_tests: the pin is not a 40-digit commit id \(line='main'\)"):
        runner.pinned_revision(bad)


def test_missing_suite_requirements_are_named(tmp_path: Path) -> None:
    # the suite's conftest imports pytest-json-report: without it pytest stopped with a usage error and the
    # runner printed counts of nothing; its requirements.txt says what it imports
    assert runner.suite_requirements(tmp_path) == {}
    (tmp_path / "requirements.txt").write_text("pytest\npytest-json-report\nhypothesis>=6.151.0\nndindex>=1.8\n# a comment\n\nxsparse-no-such-package ; python_version>'3'\n")
    wanted = runner.suite_requirements(tmp_path)
    assert wanted == {
        "pytest": "pytest", "pytest_jsonreport": "pytest-json-report", "hypothesis": "hypothesis", "ndindex": "ndindex",
        "xsparse_no_such_package": "xsparse-no-such-package",
    }  # fmt: skip
    with pytest.raises(runner.RunnerError, match=r"missing=\[.*'xsparse-no-such-package'\]\)\. Install them with: pip install .*xsparse-no-such-package$"):
        runner.check_requirements(wanted)
    runner.check_requirements({"json": "json"})


def _fake_suite(path: Path, *, spec: bool = True) -> Path:
    (path / "array_api_tests").mkdir(parents=True)
    (path / "array_api_tests" / "__init__.py").write_text("")
    (path / "conftest.py").write_text("")
    if spec:
        (path / "array-api" / "spec").mkdir(parents=True)
    return path


def _git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, check=True).stdout.strip()


def test_check_revision(tmp_path: Path) -> None:
    with pytest.raises(runner.RunnerError, match=r"^array_api_tests: no array-api-tests checkout at the suite path"):
        runner.check_revision(tmp_path / "missing", "0" * 40)
    no_spec = _fake_suite(tmp_path / "nospec", spec=False)
    with pytest.raises(runner.RunnerError, match=r"^array_api_tests: the suite's spec submodule is missing .* `git submodule update --init`"):
        runner.check_revision(no_spec, "0" * 40)
    plain = _fake_suite(tmp_path / "plain")
    with pytest.raises(runner.RunnerError, match=r"the suite checkout is not a git checkout, not at the pinned revision \(pinned=0{40}\)"):
        runner.check_revision(plain, "0" * 40)
    warning = runner.check_revision(plain, "0" * 40, allow_other=True)
    assert warning is not None and "--allow-other-revision" in warning


def test_check_revision_of_a_git_checkout(tmp_path: Path) -> None:
    suite = _fake_suite(tmp_path / "suite")
    try:
        _git(suite, "init", "-q")
        _git(suite, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "pin")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not usable here")
    head = _git(suite, "rev-parse", "HEAD")
    assert runner.suite_revision(suite) == head
    assert runner.check_revision(suite, head) is None
    with pytest.raises(runner.RunnerError, match=rf"the suite checkout is at {head}, not at the pinned revision"):
        runner.check_revision(suite, "1" * 40)


def test_xfails_files_have_a_reason_on_every_line(tmp_path: Path) -> None:
    for backend in ("numpy", "torch"):
        path = runner.XFAILS_DIR / f"{backend}.txt"
        for test_id, reason in runner.read_xfails(path):
            assert test_id.startswith("array_api_tests/test_") and "::" in test_id
            assert reason.strip()
    good = tmp_path / "x.txt"
    good.write_text("# header\n\narray_api_tests/test_a.py::test_b[c d]  # why it fails\n")
    assert runner.read_xfails(good) == [("array_api_tests/test_a.py::test_b[c d]", "why it fails")]
    bad = tmp_path / "y.txt"
    bad.write_text("# header\narray_api_tests/test_a.py::test_b\n")
    with pytest.raises(runner.RunnerError, match=r"^array_api_tests: an xfail line has no reason \(file=y.txt, line=2\)"):
        runner.read_xfails(bad)


def test_runner_input_errors_say_which_option(tmp_path: Path) -> None:
    missing = tmp_path / "missing.txt"
    with pytest.raises(runner.RunnerError, match=r"^array_api_tests: the xfails file cannot be read \(--xfails='.*missing\.txt': No such file"):
        runner.read_xfails(missing)
    with pytest.raises(runner.RunnerError, match=r"^array_api_tests: the report's directory does not exist \(--report='.*r\.json'\)\. Create it"):
        runner.check_report_path(tmp_path / "no_dir" / "r.json")
    with pytest.raises(runner.RunnerError, match=r"^array_api_tests: the report path is a directory \(--report='.*'\)\. Pass a file name"):
        runner.check_report_path(tmp_path)
    runner.check_report_path(tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists(), "the check leaves no file behind"
    assert runner.LAYOUTS == ("sparse_coo", "sparse_csr", "sparse_csc")
    for layout in runner.LAYOUTS:  # every choice is one the namespace takes
        xs.bound_namespace("numpy", layout=getattr(xs, layout))


def test_runner_main_reports_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert runner.main(["--suite", str(tmp_path), "--backend", "numpy"]) == 2
    assert "no array-api-tests checkout" in capsys.readouterr().err
