"""``python -m xsparse``: the backends report and the kernel table, generated from the registry."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import xsparse as xs
import xsparse.__main__ as cli
from xsparse import dispatch


def _load_installed_backends() -> None:
    """Register the native kernels of every installed backend, as ``python -m xsparse`` does."""
    for backend in xs.registered_backends():
        if backend.kernels is not None and backend.is_available():
            backend.load()


@pytest.fixture(scope="module")
def report() -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "xsparse"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def _parse_table(lines: list[str]) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The columns and the rows ``{signature: {column: cell}}`` of the kernel table in ``lines``."""
    start = next(i for i, line in enumerate(lines) if line.startswith("Registered kernels"))
    header, rule = lines[start + 1], lines[start + 2]
    assert header.startswith("  operation / layout signature") and set(rule.strip()) == {"-"}
    columns = header.split()[4:]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[start + 3 :]:
        if not line.strip():
            break
        signature, *cells = line.rsplit(maxsplit=len(columns))
        assert len(cells) == len(columns), line
        assert signature.strip() not in rows, f"row {signature.strip()!r} appears twice"
        rows[signature.strip()] = {c: v for c, v in zip(columns, cells) if v != "-"}
    return columns, rows


Entry = tuple[str, list[list[str]], "str | None", bool]  # op, the layouts of each element, backend, rewrite


def _entries(kernels: list[dispatch.Kernel]) -> list[Entry]:
    """The registered kernels with each signature element spelled as the names of its layouts."""
    return [
        (k.op, [sorted(map(str, e)) if isinstance(e, frozenset) else [str(e)] for e in k.signature], k.backend, k.rewrite)
        for k in kernels
    ]


# the registry of a fresh interpreter with every installed backend loaded, as ``python -m xsparse`` sees it
FRESH_REGISTRY = """
import json, xsparse as xs
for b in xs.registered_backends():
    if b.kernels is not None and b.is_available():
        b.load()
print(json.dumps([
    (k.op, [sorted(map(str, e)) if isinstance(e, frozenset) else [str(e)] for e in k.signature], k.backend, k.rewrite)
    for k in xs.kernels()
]))
"""


def _row_name(op: str, layouts: tuple[str, ...]) -> str:
    if op == "convert":
        return f"convert: {layouts[0]} -> {layouts[1]}"
    return f"{op}({', '.join(layouts)})"


def _expected_table(entries: list[Entry]) -> dict[str, dict[str, str]]:
    """Every registered (operation, concrete layout signature, backend), as the table should show it."""
    expected: dict[str, dict[str, str]] = {}
    for op, elements, backend, rewrite in entries:
        column = "generic" if backend is None else backend
        for layouts in itertools.product(*elements):
            cells = expected.setdefault(_row_name(op, layouts), {})
            if cells.get(column) != "yes":
                cells[column] = "rewrite" if rewrite else "yes"
    return expected


def test_runs_and_reports_backends(report: list[str]) -> None:
    assert report[0] == f"xsparse {xs.__version__}"
    assert report[1] == "Backends:"
    lines = {line.split()[0]: line for line in report[2:] if line.startswith("  ") and line.split()}
    for backend in xs.registered_backends():
        line = lines[backend.name]
        if backend.is_available():
            devices = ", ".join(str(d) for d in backend.devices())
            assert line.endswith(f"devices: {devices}"), line
        else:
            assert line.endswith("not installed"), line
    assert "devices: cpu" in lines["numpy"]


def test_table_is_the_registry(report: list[str]) -> None:
    # compared with the registry of another fresh interpreter: this one may hold kernels that other tests
    # registered or imported
    out = subprocess.run([sys.executable, "-c", FRESH_REGISTRY], capture_output=True, text=True, timeout=120, check=True)
    entries = [(op, elements, backend, rewrite) for op, elements, backend, rewrite in json.loads(out.stdout)]
    columns, rows = _parse_table(report)
    assert columns[0] == "generic"
    assert set(columns) == {"generic"} | {backend for _, _, backend, _ in entries if backend is not None}
    assert rows == _expected_table(entries)
    # a spot check of what the registry holds today
    assert rows["convert: strided -> sparse_csr"]["generic"] == "yes"
    assert rows["coalesce(sparse_coo)"]["numpy"] == "yes"


def test_table_in_process_is_the_registry() -> None:
    _load_installed_backends()
    assert _parse_table(cli.kernel_table())[1] == _expected_table(_entries(xs.kernels()))


def test_help() -> None:
    proc = subprocess.run([sys.executable, "-m", "xsparse", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: python -m xsparse")


# -- the table generator, on a private registry ---------------------------------------------------


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[dispatch.Kernel]]:
    _load_installed_backends()  # so that no backend registers into the private dict below
    private: dict[str, list[dispatch.Kernel]] = {}
    monkeypatch.setattr(dispatch, "_REGISTRY", private)
    return private


def _frob(xp: Any, *args: Any) -> None:
    """A test kernel."""


def test_table_expands_families_and_prefers_direct_kernels(registry: dict[str, list[dispatch.Kernel]]) -> None:
    dispatch.register("frob", (xs.sparse_csc, xs.strided), rewrite=True)(_frob)
    dispatch.register("frob", (xs.sparse_csc, xs.strided))(_frob)
    dispatch.register("frob", (xs.sparse_csr, xs.strided), rewrite=True)(_frob)
    from xsparse.formats import BLOCKED

    dispatch.register("frob", (BLOCKED, xs.strided), backend="a_long_backend_name")(_frob)
    columns, rows = _parse_table(cli.kernel_table())
    assert columns == ["generic", "a_long_backend_name"]
    assert rows == {
        "frob(sparse_csc, strided)": {"generic": "yes"},
        "frob(sparse_csr, strided)": {"generic": "rewrite"},
        "frob(sparse_bsr, strided)": {"a_long_backend_name": "yes"},
        "frob(sparse_bsc, strided)": {"a_long_backend_name": "yes"},
    }
    assert rows == _expected_table(_entries(xs.kernels()))
    lines = cli.kernel_table()
    assert all(len(line) == len(lines[1]) for line in lines[2:]), "the rule and the rows line up with the header"


def test_main_prints_the_report(registry: dict[str, list[dispatch.Kernel]], capsys: pytest.CaptureFixture[str]) -> None:
    dispatch.register("frob", (xs.sparse_coo,))(_frob)
    assert cli.main([]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"xsparse {xs.__version__}" and "Backends:" in out
    assert _parse_table(out)[1] == {"frob(sparse_coo)": {"generic": "yes"}}


# -- python -m xsparse array-api-tests ------------------------------------------------------------

# A stand-in for a data-apis/array-api-tests checkout: the options the runner passes, and two tests that
# read the namespace from ARRAY_API_TESTS_MODULE in the suite's ``exec('...')`` form.
FAKE_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--max-examples")
    parser.addoption("--hypothesis-disable-deadline", action="store_true")
    parser.addoption("--xfails-file")
"""
FAKE_TESTS = """
import os

def _xp():
    spec = os.environ["ARRAY_API_TESTS_MODULE"]
    assert spec.startswith("exec('") and spec.endswith("')")
    scope = {}
    exec(spec[len("exec('"):-len("')")], scope)
    return scope["xp"]

def test_arrays_are_sparse():
    import xsparse
    x = _xp().asarray([1.0, 0.0, 2.0])
    assert isinstance(x, xsparse.SparseArray) and x.layout is xsparse.sparse_coo and x.backend == "numpy"

def test_setitem_fails():
    _xp().zeros(3)[0] = 1.0
"""


def _fake_suite(path: Path) -> Path:
    (path / "array_api_tests").mkdir(parents=True)
    (path / "array_api_tests" / "__init__.py").write_text("")
    (path / "array_api_tests" / "test_fake.py").write_text(FAKE_TESTS)
    (path / "conftest.py").write_text(FAKE_CONFTEST)
    (path / "array-api" / "spec").mkdir(parents=True)
    return path


def test_array_api_tests_runs_the_suite(tmp_path: Path) -> None:
    suite = _fake_suite(tmp_path / "suite")
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "xsparse", "array-api-tests", "--suite", str(suite), "--backend", "numpy",
         "--max-examples", "3", "--allow-other-revision", "--no-xfails", "--report", str(report)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr  # pytest's status: a test failed
    assert "not at the pinned revision" in proc.stderr  # the fake checkout is no git checkout: a warning
    assert "array-api-tests on xsparse(backend=numpy, layout=sparse_coo), --max-examples 3: 1 passed, 1 failed" in proc.stdout
    result = json.loads(report.read_text())
    assert result["counts"]["passed"] == 1 and result["counts"]["failed"] == 1
    assert result["failing"] == ["array_api_tests/test_fake.py::test_setitem_fails"]
    assert "__setitem__: xsparse sparse arrays are immutable" in proc.stdout


def test_array_api_tests_forwards_its_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the runner parses the sub-command's arguments itself: its errors and usage name the sub-command
    assert cli.main(["array-api-tests", "--suite", str(tmp_path / "missing"), "--backend", "numpy"]) == 2
    assert "array_api_tests: no array-api-tests checkout at the suite path" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["array-api-tests", "--backend", "numpy"])
    assert capsys.readouterr().err.startswith("usage: python -m xsparse array-api-tests")
    proc = subprocess.run([sys.executable, "-m", "xsparse", "--help"], capture_output=True, text=True, timeout=60)
    assert "array-api-tests" in proc.stdout and "conformance" in proc.stdout and "bench" in proc.stdout


# A second test file and the suite's meta_tests/, which a run of the suite must not collect.
OTHER_TESTS = """
def test_other():
    pass
"""


def _run_array_api_tests(suite: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xsparse", "array-api-tests", "--suite", str(suite), "--backend", "numpy",
         "--max-examples", "1", "--allow-other-revision", "--no-xfails", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("pytest_args", "counts"),
    [
        (["./array_api_tests/test_other.py"], "1 passed, 0 failed"),
        (["SUITE/array_api_tests/test_other.py"], "1 passed, 0 failed"),
        (["--deselect", "array_api_tests/test_fake.py::test_setitem_fails"], "2 passed, 0 failed"),
        (["-k", "other or sparse"], "2 passed, 0 failed"),
    ],
    ids=["relative", "absolute", "deselect", "keyword"],
)
def test_array_api_tests_finds_the_test_paths(tmp_path: Path, pytest_args: list[str], counts: str) -> None:
    # a path in any spelling replaces the suite's package; an option's value (--deselect PATH) is no path
    suite = _fake_suite(tmp_path / "suite")
    (suite / "array_api_tests" / "test_other.py").write_text(OTHER_TESTS)
    (suite / "meta_tests").mkdir()
    (suite / "meta_tests" / "test_meta.py").write_text(OTHER_TESTS)
    proc = _run_array_api_tests(suite, "--", *(a.replace("SUITE", str(suite)) for a in pytest_args))
    assert f"--max-examples 1: {counts}, 0 error, 0 xfailed, 0 xpassed, 0 skipped" in proc.stdout, proc.stdout + proc.stderr


def test_array_api_tests_checks_the_report_path_before_the_run(tmp_path: Path) -> None:
    suite = _fake_suite(tmp_path / "suite")
    proc = _run_array_api_tests(suite, "--report", str(tmp_path / "missing" / "r.json"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    missing = str(tmp_path / "missing" / "r.json")
    assert f"array_api_tests: the report's directory does not exist (--report={missing!r}). Create it" in proc.stderr
    assert "array-api-tests on" not in proc.stdout  # refused before the run


def test_array_api_tests_option_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # no suite at the path: an option that were let through would fail there, not run pytest
    common = ["array-api-tests", "--suite", str(tmp_path / "missing"), "--backend", "numpy"]
    for extra, message in [
        (["--layout", "sparse_foo"], "argument --layout: invalid choice: 'sparse_foo' (choose from 'sparse_coo', 'sparse_csr', 'sparse_csc')"),
        (["--layout", "sparse_bsr"], "argument --layout: invalid choice: 'sparse_bsr'"),
        (["--xfails", str(tmp_path / "x.txt"), "--no-xfails"], "argument --no-xfails: not allowed with argument --xfails"),
        (["--backend", "cupy"], "argument --backend: invalid choice: 'cupy' (choose from 'numpy', 'torch', 'array_api_strict')"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*common, *extra])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err
    suite = _fake_suite(tmp_path / "suite")
    missing = str(tmp_path / "missing.txt")
    assert cli.main(["array-api-tests", "--suite", str(suite), "--backend", "numpy", "--allow-other-revision", "--xfails", missing]) == 2
    assert (
        f"array_api_tests: the xfails file cannot be read (--xfails={missing!r}: No such file or directory). Pass an existing "
        "file, or --no-xfails" in capsys.readouterr().err
    )


def test_bench_gpu_says_what_is_missing_without_a_device(capsys: pytest.CaptureFixture[str]) -> None:
    # on a machine with a usable CUDA device this would run the GPU benchmarks instead
    import importlib.util

    torch_cuda = importlib.util.find_spec("torch") is not None and __import__("torch").cuda.is_available()
    if torch_cuda or importlib.util.find_spec("cupy") is not None:
        pytest.skip("a CUDA library is installed here: the GPU benchmarks would run")
    assert cli.main(["bench", "--gpu", "--quick"]) == 0
    assert "bench_gpu: nothing to run, no CUDA device is usable" in capsys.readouterr().err


def test_bench_gpu_harness_runs_with_torch_on_the_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--torch-device cpu`` runs the GPU benchmark's harness (inputs, result checks, timing loops, the
    table and the JSON) without a GPU; the times mean nothing, only that every step runs."""
    import importlib.util

    pytest.importorskip("torch")
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gpu.py"
    spec = importlib.util.spec_from_file_location("xsparse_bench_gpu_cpu_check", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    args = ["--quick", "--torch-device", "cpu", "--only", "spgemm laplace float64 int32", "--repeats", "1", "--out", str(tmp_path)]
    assert module.main(args) == 0
    results = json.loads((tmp_path / "gpu_quick.json").read_text())
    (row,) = results["rows"]
    assert row["case"] == "spgemm laplace float64 int32" and row["nnz"] > 0
    for name in ("xsparse[torch]", "torch"):  # both ran and matched SciPy's product
        assert name not in row["errors"] and row["times"][name] is not None, row
    (table,) = results["table"]
    assert table["target"] == "-", "no CuPy: no target to meet or miss"
    assert results["complete"] and "spgemm laplace float64 int32" in capsys.readouterr().out


# -- packaging: what `pip install` ships for these commands -----------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_lists_every_package_and_the_conformance_data() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "xsparse").rglob("__init__.py")}
    found.add("xsparse.conformance")
    assert set(config["packages"]) == found, "a package directory is missing from (or stale in) pyproject.toml"
    assert config["package-dir"] == {"xsparse.conformance": "conformance"}
    shipped = {
        path.relative_to(ROOT / "conformance").as_posix()
        for pattern in config["package-data"]["xsparse.conformance"]
        for path in (ROOT / "conformance").glob(pattern)
    }
    # what conformance/array_api_tests.py reads next to itself
    assert {"array_api_tests_rev.txt", "README.md", "xfails/numpy.txt", "xfails/torch.txt"} <= shipped


def test_conformance_shards_share_the_operations(capsys: pytest.CaptureFixture[str]) -> None:
    # the GPU runs split the suite over processes: --shard K/N runs every N-th operation from the K-th
    ran = []
    for k in (1, 2, 3):
        assert cli.main(["conformance", "--backend", "numpy", "--ops", "negative,abs,sin,cos", "--max-examples", "1", "--shard", f"{k}/3"]) == 0
        out = capsys.readouterr().out
        assert f"operations {k} of every 3" in out
        ran.append({line.split()[1].split("(")[0] for line in out.splitlines() if line.startswith("  pass")})
    assert ran == [{"negative", "cos"}, {"abs"}, {"sin"}]
    # more shards than operations: the extra ones run nothing, and that is no failure
    assert cli.main(["conformance", "--backend", "numpy", "--ops", "negative", "--max-examples", "1", "--shard", "2/4"]) == 0
    assert "no operation in shard 2/4" in capsys.readouterr().out
    for bad in ("0/2", "3/2", "2", "a/b", "\u00b2/3"):
        with pytest.raises(SystemExit):
            cli.main(["conformance", "--backend", "numpy", "--shard", bad])
        assert "--shard must be K/N with 1 <= K <= N" in capsys.readouterr().err
