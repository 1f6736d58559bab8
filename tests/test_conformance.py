"""The sparse conformance suite (``conformance/``, installed as ``xsparse.conformance``) and its command
``python -m xsparse conformance``: it runs clean on NumPy, torch and array-api-strict with a few
examples per layout signature, covers every operation that xsparse registers, catches a wrong native
kernel, and picks up a backend registered through the ``xsparse.backends`` entry-point group.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from conftest import backend_params

import xsparse as xs
import xsparse.backends
from xsparse import dispatch
from xsparse.backends import Backend
from xsparse.conformance import cases, runner
from xsparse.conformance import strategies as conformance_strategies

BACKENDS = ["numpy", "torch", "array_api_strict"]
# Enough to reach every layout signature; the suite's own default is 10.
MAX_EXAMPLES = 2
# Operations registered whose cases are still to be added to conformance/cases.py (each reads "no case"
# in the table until then); remove a name with its case. Every built-in operation has one today.
CASES_PENDING: frozenset[str] = frozenset()


def _load_installed_backends() -> None:
    for backend in xs.registered_backends():
        if backend.kernels is not None and backend.is_available():
            backend.load()


@pytest.mark.parametrize("backend", backend_params(BACKENDS))
def test_suite_passes_on_every_operation_and_signature(backend: str) -> None:
    outcomes = runner.run(backend, max_examples=MAX_EXAMPLES, shrink=False)
    failures = [f"{o.name}: {o.detail}" for o in outcomes if o.failed]
    assert not failures, "\n\n".join(failures)
    # the table covers every operation and every signature the registry holds for this backend
    seen = {(o.op, o.signature) for o in outcomes}
    for op in dispatch.operations():
        assert op in cases.CASES or op in CASES_PENDING, f"{op} has no conformance case"
        for sig in runner.signatures(op, backend) if op in cases.CASES else []:
            assert (op, sig) in seen
    assert {o.status for o in outcomes} <= {"pass", "xfail", "unsupported", "skip", "no case"}
    assert {o.op for o in outcomes if o.status == "no case"} <= CASES_PENDING
    passed = sum(o.status == "pass" for o in outcomes)
    assert passed > 0.8 * len(outcomes), runner.summary(outcomes)


def test_every_builtin_operation_has_a_case() -> None:
    _load_installed_backends()
    missing = [op for op in dispatch.operations() if op not in cases.CASES and op not in CASES_PENDING]
    assert not missing, f"operations without a conformance case: {missing}"
    assert not CASES_PENDING & set(cases.CASES), "a pending operation has its case now: remove it from CASES_PENDING"


def test_native_kernels_are_compared_with_the_generic_ones() -> None:
    _load_installed_backends()
    assert runner.has_native("add", (xs.sparse_csr, xs.sparse_csr), "numpy")
    assert not runner.has_native("argmax", (xs.sparse_csr,), "numpy")
    with runner.generic_only("numpy"):
        assert all(k.backend != "numpy" for k in xs.kernels())
    assert any(k.backend == "numpy" for k in xs.kernels())


# -- the suite catches what it should --------------------------------------------------------------


def _wrong_negative(xp: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """A broken native kernel: returns its operand unchanged."""
    return x


@pytest.fixture
def private_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    _load_installed_backends()
    monkeypatch.setattr(dispatch, "_REGISTRY", {op: list(ks) for op, ks in dispatch._REGISTRY.items()})


def test_a_wrong_native_kernel_fails_with_its_example(private_registry: None) -> None:
    dispatch.register("negative", (xs.sparse_csr,), backend="numpy", priority=10)(_wrong_negative)
    outcomes = runner.run("numpy", max_examples=5, ops=["negative"])
    by_name = {o.name: o for o in outcomes}
    bad = by_name["negative(sparse_csr)"]
    assert bad.status == "FAIL" and bad.native and bad.failed
    assert "Falsifying example" in bad.detail or "Draw 1" in bad.detail
    assert by_name["negative(sparse_coo)"].status == "pass"
    table = "\n".join(runner.format_table(outcomes, "numpy"))
    assert "negative(sparse_csr)" in table and "FAIL" in table
    assert "1 FAIL" in runner.summary(outcomes)


def _negative_on_the_default_device(xp: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    """A kernel that forgets the device: its mask lands on the namespace's default device."""
    values = xp.negative(x._vals)
    return x._with_values(xp.where(xp.ones(tuple(values.shape), dtype=xp.bool), values, values), -x.fill_value)


def test_device_mode_catches_a_kernel_that_forgets_the_device(private_registry: None) -> None:
    strict = pytest.importorskip("array_api_strict")
    dispatch.register("negative", (xs.sparse_csr,), backend="array_api_strict", priority=10)(_negative_on_the_default_device)
    # on the default device the kernel is right ...
    outcomes = {o.name: o for o in runner.run("array_api_strict", max_examples=5, ops=["negative"])}
    assert outcomes["negative(sparse_csr)"].status == "pass"
    # ... and on another device its inputs live there, and the mix is caught
    outcomes = {o.name: o for o in runner.run("array_api_strict", max_examples=5, ops=["negative"], device="device1")}
    bad = outcomes["negative(sparse_csr)"]
    assert bad.status == "FAIL" and "device" in bad.detail
    assert outcomes["negative(sparse_coo)"].status == "pass"
    ctx = runner.load_backend("array_api_strict", "device1")
    assert ctx.xp.asarray([1.0]).device == strict.Device("device1")
    assert ctx.xp.zeros((2,), device=strict.Device("device2")).device == strict.Device("device2")


def test_lobpcg_keeps_to_the_device_of_its_inputs() -> None:
    pytest.importorskip("array_api_strict")
    outcomes = runner.run("array_api_strict", max_examples=3, ops=["lobpcg"], device="device1", shrink=False)
    assert {o.status for o in outcomes} == {"pass", "skip"} and sum(o.status == "pass" for o in outcomes) == 6, runner.summary(outcomes)


def test_known_failures_read_xfail_and_xpass_when_fixed(private_registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    dispatch.register("negative", (xs.sparse_csr,), backend="numpy", priority=10)(_wrong_negative)
    monkeypatch.setitem(runner.KNOWN_FAILURES, ("numpy", "negative", "negative(sparse_csr)"), "a test's broken kernel")
    monkeypatch.setitem(runner.KNOWN_FAILURES, (None, "negative", "negative(sparse_coo)"), "not broken at all")
    by_name = {o.name: o for o in runner.run("numpy", max_examples=3, ops=["negative"])}
    assert by_name["negative(sparse_csr)"].status == "xfail"
    assert "a test's broken kernel" in by_name["negative(sparse_csr)"].detail
    assert by_name["negative(sparse_coo)"].status == "XPASS" and by_name["negative(sparse_coo)"].failed


def _refuse(message: str) -> Any:
    def call() -> Any:
        raise xs.NoKernelError(message)

    return call


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (_refuse("tril: no kernel. tril(COMPRESSED) declined: fill value 1.5 is not 0"), None),
        (lambda: 1, r"should raise NoKernelError \(documented: 'is not 0'\) but returned int"),
        (_refuse("tril: no kernel for layouts (sparse_csr)"), r"its message does not match 'is not 0'"),
    ],
    ids=["raised", "returned", "other-message"],
)
def test_a_documented_refusal_passes_only_when_raised_as_documented(call: Any, error: str | None) -> None:
    trial = cases.Trial(call, lambda: pytest.fail("the reference of a refused example is not computed"),
                        raises=(xs.NoKernelError, "is not 0"))  # fmt: skip
    if error is None:
        runner._execute(trial, "tril", "numpy", native=False)
    else:
        with pytest.raises(AssertionError, match=error):
            runner._execute(trial, "tril", "numpy", native=False)


def test_known_failures_name_registered_signatures() -> None:
    _load_installed_backends()
    for (backend, op, name), reason in runner.KNOWN_FAILURES.items():
        assert op in cases.CASES and reason
        names = {runner.signature_name(op, sig) for sig in runner.signatures(op, backend or "numpy")}
        assert name in names, f"KNOWN_FAILURES lists {name}, which {op} does not register"


def test_an_operation_without_a_case_is_reported(private_registry: None) -> None:
    dispatch.register("frobnicate", (xs.sparse_coo,))(_wrong_negative)
    (outcome,) = runner.run("numpy", max_examples=1, ops=["frobnicate"])
    assert outcome.status == "no case" and not outcome.failed
    assert "no case" in "\n".join(runner.format_table([outcome], "numpy"))


# -- a backend from the entry-point group ------------------------------------------------------------


def _publish(monkeypatch: pytest.MonkeyPatch, *backends: Backend) -> None:
    """Make ``backends`` the entry points of the ``xsparse.backends`` group, as installed plug-ins would."""
    module = types.ModuleType("xsparse_conformance_plugin")
    for i, backend in enumerate(backends):
        setattr(module, f"backend{i}", backend)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(xsparse.backends, "_EXTRA", {})
    monkeypatch.setattr(xsparse.backends, "_FAILED", {})
    monkeypatch.setattr(xsparse.backends, "_entry_points_loaded", False)
    eps = [importlib.metadata.EntryPoint(b.name, f"{module.__name__}:backend{i}", "xsparse.backends") for i, b in enumerate(backends)]
    monkeypatch.setattr(xsparse.backends, "entry_points", lambda *, group: eps if group == "xsparse.backends" else [])


def test_entry_point_backend_is_picked_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a library of its own: a plug-in for a built-in backend's library is refused (its arrays would go to
    # the built-in backend, which the suite would then test in the plug-in's name)
    lib = _strict_copy(tmp_path, monkeypatch, "strictplugin")
    _publish(monkeypatch, Backend("strict_plugin", "strictplugin", lambda: lib))
    outcomes = runner.run("strict_plugin", max_examples=2, ops=["abs", "matmul"])
    assert outcomes and all(o.status == "pass" for o in outcomes), runner.summary(outcomes)
    assert {o.op for o in outcomes} == {"abs", "matmul"}
    assert runner.load_backend("strict_plugin").backend == "strict_plugin"


def _strict_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Any:
    """array-api-strict copied under another name into ``tmp_path``: a third-party library that holds to
    the standard as strictly, which xsparse knows by no name of its own."""
    strict = pytest.importorskip("array_api_strict")
    source = Path(strict.__file__).parent
    target = tmp_path / name
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    for path in target.glob("*.py"):
        path.write_text(path.read_text().replace("array_api_strict", name))
    monkeypatch.syspath_prepend(str(tmp_path))
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        monkeypatch.delitem(sys.modules, module)
    return importlib.import_module(name)


def test_dtypes_follow_the_namespace_not_the_backend_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the copy refuses bool arithmetic and floating isin as array-api-strict does, under a name no case knows
    lib = _strict_copy(tmp_path, monkeypatch, "strictcopy")
    _publish(monkeypatch, Backend("strictcopy", "strictcopy", lambda: lib))
    outcomes = runner.run("strictcopy", max_examples=3, ops=["multiply", "add", "isin"], shrink=False)
    failures = [f"{o.name}: {o.detail}" for o in outcomes if o.failed]
    assert not failures, "\n\n".join(failures)
    assert {o.op for o in outcomes if o.status == "pass"} == {"multiply", "add", "isin"}
    assert {o.detail for o in outcomes if o.status == "skip"} == {
        "the namespace's isin takes integers (as the standard's does), and semi-structured operands are floating"
    }
    ctx = runner.load_backend("strictcopy")
    assert not ctx.accepts("multiply", ("bool", "bool")) and ctx.accepts("multiply", ("int8", "int8"))
    assert "bool" not in cases._dtypes_for(cases.BINARY_DTYPES, "multiply", ctx)


class _NoIntegerDivisionByZero:
    """NumPy's namespace whose integer floor_divide and remainder raise on a zero divisor, as torch's do."""

    def __getattr__(self, name: str) -> Any:
        import array_api_compat.numpy as xp

        function = getattr(xp, name)
        if name not in ("floor_divide", "remainder"):
            return function

        def divide(x1: Any, x2: Any) -> Any:
            if xp.isdtype(x2.dtype, "integral") and bool(xp.any(x2 == 0)):
                raise ZeroDivisionError("integer division by zero")
            return function(x1, x2)

        return divide


def test_integer_division_follows_the_namespace() -> None:
    ctx = cases.Context("not_torch", _NoIntegerDivisionByZero())
    for op in ("floor_divide", "remainder"):
        assert cases._dtypes_for(cases.BINARY_DTYPES, op, ctx) == list(cases.FLOATS)
    assert "int64" in cases._dtypes_for(cases.BINARY_DTYPES, "floor_divide", runner.load_backend("numpy"))
    assert ctx.probes[("floor_divide", ("int64", "int64"), (1, 0))] is False  # probed once, kept


def test_run_refuses_a_bad_selection() -> None:
    with pytest.raises(ValueError, match=r"^run: unknown operation\(s\) \(ops=negativ\)\. Pick among: abs, "):
        runner.run("numpy", ops=["negativ"])
    with pytest.raises(ValueError, match=r"^run: no operation selected \(ops=\[\]\)\. Name at least one"):
        runner.run("numpy", ops=[])
    with pytest.raises(ValueError, match=r"^run: every signature needs at least one example \(max_examples=0\)\. Pass 1"):
        runner.run("numpy", max_examples=0, ops=["negative"])
    outcomes = runner.run("numpy", max_examples=1, ops=["negative", "negative"], shrink=False)
    names = [o.name for o in outcomes]
    assert len(names) == len(set(names)) == len(runner.signatures("negative", "numpy"))


def test_load_backend_imports_no_arbitrary_module() -> None:
    if "this" in sys.modules:
        pytest.skip("another test imported `this`: the check would prove nothing")
    with pytest.raises(ValueError, match=r"^load_backend: unknown backend \(backend='this'\)\. Known backends: numpy, "):
        runner.load_backend("this")
    assert "this" not in sys.modules
    with pytest.raises(ValueError, match=r"unknown backend \(backend='os\.path'\)"):
        runner.load_backend("os.path")  # a module, but no Array API namespace
    # an Array API namespace by its module's name resolves, to the backend's own name
    assert runner.load_backend("array_api_compat.numpy").backend == "numpy"


# -- the command ---------------------------------------------------------------------------------------


def test_command_prints_the_table_and_exits_0() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "xsparse", "conformance", "--backend", "numpy", "--max-examples", "2", "--ops", "abs,matmul", "--seed", "3"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Conformance of backend 'numpy'" in out
    assert "abs(sparse_csr)" in out and "matmul(sparse_csr, strided)" in out
    assert out.rstrip().splitlines()[-1].startswith("numpy: ") and "FAIL" not in out


def test_command_exits_1_on_a_failure(private_registry: None, capsys: pytest.CaptureFixture[str]) -> None:
    import xsparse.__main__ as cli

    dispatch.register("negative", (xs.sparse_csr,), backend="numpy", priority=10)(_wrong_negative)
    assert cli.main(["conformance", "--backend", "numpy", "--max-examples", "3", "--ops", "negative"]) == 1
    out = capsys.readouterr().out
    assert "FAIL negative(sparse_csr) on its examples:" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backend", "nonesuch"], r"load_backend: unknown backend \(backend='nonesuch'\)"),
        (["--backend", "this"], r"load_backend: unknown backend \(backend='this'\)"),
        (["--backend", "numpy", "--ops", "abs,frob"], r"unknown operation\(s\) \(ops=frob\)\. Pick among"),
        (["--backend", "numpy", "--ops", ""], r"--ops names no operation \(ops=''\)\. Name at least one"),
        (["--backend", "numpy", "--ops", " , "], r"--ops names no operation \(ops=' , '\)"),
        (["--backend", "numpy", "--device", "gpu7"], r"device_named: backend 'numpy' has no device 'gpu7' \(devices=\['cpu'\]\)\. Pick one"),
    ],
)
def test_command_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    import xsparse.__main__ as cli

    assert cli.main(["conformance", *argv]) == 2
    out, err = capsys.readouterr()
    assert re.search(message, err), err
    assert "Beautiful is better than ugly" not in out  # no module was imported by the name


@pytest.mark.parametrize("value", ["0", "-1"])
def test_command_refuses_max_examples_below_1(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    import xsparse.__main__ as cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["conformance", "--backend", "numpy", "--ops", "negative", "--max-examples", value])
    assert exit_info.value.code == 2
    assert f"--max-examples must be at least 1 (got {value})" in capsys.readouterr().err


def _broken_namespace() -> Any:
    raise TypeError("backend 'broken': no int64 here. Enable it first.")


def test_command_cannot_run_where_the_backend_does_not_load(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import xsparse.__main__ as cli

    _publish(monkeypatch, Backend("broken", "xsparse", _broken_namespace), Backend("ghost", "xsparse_no_such_library", _broken_namespace))
    assert cli.main(["conformance", "--backend", "broken"]) == 2
    assert re.search(
        r"conformance: backend 'broken' cannot be loaded \(TypeError: backend 'broken': no int64 here\. Enable it first\.\)\. Fix what",
        capsys.readouterr().err,
    )
    assert cli.main(["conformance", "--backend", "ghost"]) == 2
    assert re.search(
        r"conformance: load_backend: the library of backend 'ghost' is not installed \(library='xsparse_no_such_library'\)\. "
        r"Install xsparse_no_such_library, or pick an installed backend: numpy, ",
        capsys.readouterr().err,
    )


def test_command_without_jax_64_bit_mode_cannot_run() -> None:
    pytest.importorskip("jax")
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    proc = subprocess.run(
        [sys.executable, "-m", "xsparse", "conformance", "--backend", "jax.numpy", "--ops", "abs", "--max-examples", "1"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "backend 'jax.numpy' cannot be loaded (TypeError: " in proc.stderr and "jax_enable_x64" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_command_prints_the_backend_s_own_name(capsys: pytest.CaptureFixture[str]) -> None:
    import xsparse.__main__ as cli

    assert cli.main(["conformance", "--backend", "array_api_compat.numpy", "--ops", "negative,negative", "--max-examples", "1"]) == 0
    out = capsys.readouterr().out
    assert "conformance of backend 'numpy'" in out and "Conformance of backend 'numpy'" in out
    assert out.rstrip().splitlines()[-1] == f"numpy: {len(runner.signatures('negative', 'numpy'))} pass"
    assert "array_api_compat" not in out


# a plug-in's kernels module that registers an operation of its own
PLUGIN_KERNELS = '''
import xsparse as xs
from xsparse.dispatch import register


@register("frobnicate", (xs.sparse_coo,), backend="strict_plugin")
def _frobnicate_coo_strict_plugin(xp, x):
    """frobnicate(sparse_coo): the operand."""
    return x
'''


def test_command_takes_an_operation_that_a_plugin_registers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, private_registry: None, capsys: pytest.CaptureFixture[str]
) -> None:
    import xsparse.__main__ as cli

    lib = _strict_copy(tmp_path, monkeypatch, "strictplugin")
    (tmp_path / "xsparse_plugin_kernels.py").write_text(PLUGIN_KERNELS)
    monkeypatch.delitem(sys.modules, "xsparse_plugin_kernels", raising=False)
    _publish(monkeypatch, Backend("strict_plugin", "strictplugin", lambda: lib, kernels="xsparse_plugin_kernels"))
    try:
        assert "frobnicate" not in dispatch.operations()  # until the backend loads
        assert cli.main(["conformance", "--backend", "strict_plugin", "--ops", "frobnicate", "--max-examples", "1"]) == 0
    finally:
        sys.modules.pop("xsparse_plugin_kernels", None)
    out = capsys.readouterr().out
    assert "frobnicate(sparse_coo)" in out and out.rstrip().splitlines()[-1] == "strict_plugin: 1 no case"


def test_tests_and_suite_share_the_strategies() -> None:
    import strategies

    assert strategies.dense_cases is conformance_strategies.dense_cases
    assert set(strategies.__all__) == set(conformance_strategies.__all__)


@pytest.mark.parametrize("module", [cases, runner, conformance_strategies], ids=lambda m: m.__name__)
def test_doctests_of_the_suite(module: types.ModuleType) -> None:
    # conformance/ is not in pytest's testpaths (it would be imported twice, as conformance and as
    # xsparse.conformance), so its doctests run here
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
