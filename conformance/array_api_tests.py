"""Run the Array API test suite (data-apis/array-api-tests) against a sparse-by-default xsparse namespace.

The suite lives in its own checkout, outside this repository (its code is never copied here)::

    git clone https://github.com/data-apis/array-api-tests PATH
    git -C PATH checkout <the revision in array_api_tests_rev.txt>
    git -C PATH submodule update --init          # the spec, in PATH/array-api
    python conformance/array_api_tests.py --suite PATH --backend numpy [--max-examples 20] [-- PYTEST ARGS]

The namespace under test is ``xsparse.bound_namespace(BACKEND, layout=LAYOUT)`` (COO by default): every
array that the suite creates is sparse. The expected failures of each backend are in
``xfails/<backend>.txt``, one test id per line followed by ``# reason``. The runner checks the suite's
revision against the pin, writes the ids to a temporary file in the suite's format (``--xfails-file``),
runs pytest in this process and prints the counts of passed, failed, xfailed, xpassed and skipped tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import xsparse as xs

__all__ = [
    "PIN_FILE",
    "XFAILS_DIR",
    "RunnerError",
    "check_requirements",
    "check_report_path",
    "check_revision",
    "main",
    "module_spec",
    "parse_args",
    "pinned_revision",
    "suite_requirements",
    "read_xfails",
    "suite_revision",
]

HERE = Path(__file__).resolve().parent
PIN_FILE = HERE / "array_api_tests_rev.txt"
XFAILS_DIR = HERE / "xfails"
BACKENDS = ("numpy", "torch", "array_api_strict")
# The default layouts that xs.bound_namespace takes and Array API code can create: the blocked layouts need
# a blocksize in every creation call, which the suite cannot pass.
LAYOUTS = tuple(str(layout) for layout in xs.Layout if layout is xs.sparse_coo or (layout.is_compressed and not layout.is_blocked))
OUTCOMES = ("passed", "failed", "error", "xfailed", "xpassed", "skipped")

# An xfail line: the test id, at least one space, "#", and the reason (which must not be empty).
_XFAIL_LINE = re.compile(r"^(?P<id>array_api_tests/\S.*?)\s+#\s*(?P<reason>\S.*)$")


class RunnerError(Exception):
    """A problem with the runner's inputs (the checkout, the pin, an xfails file), with how to fix it."""


def pinned_revision(pin_file: Path = PIN_FILE) -> str:
    """The suite revision that the xfails files were written against: the first non-comment line of the pin."""
    for line in pin_file.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            if not re.fullmatch(r"[0-9a-f]{40}", line):
                raise RunnerError(f"array_api_tests: the pin is not a 40-digit commit id (line={line!r}). Fix {pin_file.name}.")
            return line
    raise RunnerError(f"array_api_tests: the pin file has no revision (file={pin_file}). Write the suite's commit id in it.")


def suite_revision(suite: Path) -> str | None:
    """The commit the suite checkout is at, or ``None`` when it is not a git checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", str(suite), "rev-parse", "HEAD"], capture_output=True, text=True, check=False, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return None
    rev = out.stdout.strip()
    return rev if out.returncode == 0 and re.fullmatch(r"[0-9a-f]{40}", rev) else None


def check_revision(suite: Path, pinned: str, *, allow_other: bool = False) -> str | None:
    """Check the checkout at ``suite``: the suite's package, the spec submodule and the pinned revision.

    Returns a warning (a checkout at another revision, with ``allow_other``), or ``None``; raises
    :class:`RunnerError` otherwise.
    """
    if not (suite / "array_api_tests" / "__init__.py").is_file() or not (suite / "conftest.py").is_file():
        raise RunnerError(
            f"array_api_tests: no array-api-tests checkout at the suite path (suite={str(suite)!r}). "
            "Clone https://github.com/data-apis/array-api-tests and pass its directory."
        )
    if not (suite / "array-api" / "spec").is_dir():
        raise RunnerError(
            f"array_api_tests: the suite's spec submodule is missing (path={str(suite / 'array-api')!r}). "
            "Run `git submodule update --init` in the checkout."
        )
    actual = suite_revision(suite)
    if actual == pinned:
        return None
    what = "is not a git checkout" if actual is None else f"is at {actual}"
    message = (
        f"array_api_tests: the suite checkout {what}, not at the pinned revision (pinned={pinned}). "
        f"Run `git -C {suite} checkout {pinned}`, or pass --allow-other-revision to run anyway."
    )
    if allow_other:
        return message
    raise RunnerError(message)


def read_xfails(path: Path) -> list[tuple[str, str]]:
    """The (test id, reason) pairs of an xfails file; blank lines and ``#`` comment lines are skipped."""
    entries: list[tuple[str, str]] = []
    try:
        text = path.read_text()
    except OSError as exc:
        raise RunnerError(
            f"array_api_tests: the xfails file cannot be read (--xfails={str(path)!r}: {exc.strerror or exc}). "
            "Pass an existing file, or --no-xfails to run without one."
        ) from None
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _XFAIL_LINE.match(line)
        if match is None:
            raise RunnerError(
                f"array_api_tests: an xfail line has no reason (file={path.name}, line={number}). "
                "Write `<test id>  # <why it fails>`."
            )
        entries.append((match["id"], match["reason"]))
    return entries


# The backend libraries themselves, for a baseline run (``--plain``).
PLAIN_MODULES = {"numpy": "array_api_compat.numpy", "torch": "array_api_compat.torch", "array_api_strict": "array_api_strict"}


# The modules of the suite's requirements whose import name is not the package's name with "_" for "-".
_MODULE_OF_PACKAGE = {"pytest-json-report": "pytest_jsonreport"}


def suite_requirements(suite: Path) -> dict[str, str]:
    """The libraries the suite's ``requirements.txt`` lists, as ``{module: package}`` (none without the
    file): the names before any version or marker, as pip reads them."""
    path = suite / "requirements.txt"
    if not path.is_file():
        return {}
    wanted = {}
    for line in path.read_text().splitlines():
        name = re.split(r"[\s<>=!~;\[#]", line.strip(), maxsplit=1)[0]
        if name:
            wanted[_MODULE_OF_PACKAGE.get(name.lower(), name.lower().replace("-", "_"))] = name
    return wanted


def check_requirements(requirements: dict[str, str]) -> None:
    """Raise :class:`RunnerError` naming what to install when a library the suite imports (``{module:
    package}``, :func:`suite_requirements`) is missing: pytest would stop at the suite's conftest with a
    usage error and no test run."""
    import importlib.util

    missing = [package for module, package in requirements.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise RunnerError(
            f"array_api_tests: the suite needs libraries that are not installed (missing={missing}). "
            f"Install them with: pip install {' '.join(missing)}"
        )


def check_report_path(report: Path) -> None:
    """Raise :class:`RunnerError` unless the JSON report can be written at ``report``: checked before the
    run, which takes minutes, rather than failing after it."""
    directory = report.parent
    if report.is_dir():
        raise RunnerError(f"array_api_tests: the report path is a directory (--report={str(report)!r}). Pass a file name in it.")
    if not directory.is_dir():
        raise RunnerError(
            f"array_api_tests: the report's directory does not exist (--report={str(report)!r}). Create it, or pass a "
            "path in an existing directory."
        )
    existed = report.exists()
    try:
        # opened, not judged by its permissions: root passes os.access where the file system still refuses
        with report.open("a"):
            pass
    except OSError as exc:
        raise RunnerError(
            f"array_api_tests: the report cannot be written (--report={str(report)!r}: {exc.strerror or exc}). "
            "Pass a path that you can write."
        ) from None
    if not existed:
        report.unlink()


def module_spec(backend: str, layout: str, *, plain: bool = False) -> str:
    """The ``ARRAY_API_TESTS_MODULE`` value: the suite's ``exec('...')`` form, binding ``xp``.

    With ``plain``, the backend library itself (its array-api-compat namespace where it needs one).
    """
    if plain:
        return PLAIN_MODULES[backend]
    return f"exec('import xsparse; xp = xsparse.bound_namespace(\"{backend}\", layout=xsparse.{layout})')"


def parse_args(argv: Sequence[str] | None = None, *, prog: str = "array_api_tests") -> argparse.Namespace:
    """Parse the command line; arguments after ``--`` go to pytest unchanged."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run the Array API test suite against a sparse-by-default xsparse namespace.",
        epilog="Arguments after -- go to pytest, e.g. -- array_api_tests/test_creation_functions.py -k arange",
    )
    parser.add_argument("--suite", required=True, type=Path, help="the array-api-tests checkout")
    parser.add_argument(
        "--backend", required=True, choices=BACKENDS,
        help="the backend of the namespace: one of those with an xfails file (and a --plain baseline)",
    )  # fmt: skip
    parser.add_argument(
        "--layout", default="sparse_coo", choices=LAYOUTS, help="the default layout of created arrays (sparse_coo)"
    )
    parser.add_argument("--max-examples", type=int, default=20, help="Hypothesis examples per test (20)")
    xfails = parser.add_mutually_exclusive_group()
    xfails.add_argument("--xfails", type=Path, default=None, help="the xfails file (xfails/<backend>.txt)")
    xfails.add_argument("--no-xfails", action="store_true", help="run without an xfails file")
    parser.add_argument("--allow-other-revision", action="store_true", help="warn, not fail, on another revision")
    parser.add_argument(
        "--plain", action="store_true", help="test the backend library itself, without xsparse (the baseline)"
    )
    parser.add_argument("--no-shrink", action="store_true", help="skip Hypothesis's shrinking (faster, for iterating)")
    parser.add_argument("--report", type=Path, default=None, help="write the counts and failing ids as JSON here")
    args = parser.parse_args(argv)
    if args.max_examples < 1:
        parser.error(f"--max-examples must be at least 1 (got {args.max_examples})")
    args.pytest_args = extra
    if args.xfails is None and not args.no_xfails and not args.plain:
        args.xfails = XFAILS_DIR / f"{args.backend}.txt"
    return args


@dataclass
class _Outcomes:
    """A pytest plugin that keeps the terminal reporter's counts and the ids of the failing tests."""

    counts: dict[str, int] = field(default_factory=dict)
    failing: list[str] = field(default_factory=list)
    xpassing: list[str] = field(default_factory=list)

    no_shrink: bool = False

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: Any) -> None:
        # After the suite's conftest has loaded its Hypothesis profile: the same settings, minus shrinking.
        if self.no_shrink:
            from hypothesis import Phase, settings

            phases = [p for p in settings().phases if p not in (Phase.shrink, Phase.explain)]
            settings.register_profile("array-api-tests-no-shrink", parent=settings(), phases=phases)
            settings.load_profile("array-api-tests-no-shrink")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        stats = terminalreporter.stats
        self.counts = {name: len(stats.get(name, [])) for name in OUTCOMES}
        self.failing = sorted({r.nodeid for name in ("failed", "error") for r in stats.get(name, [])})
        self.xpassing = sorted({r.nodeid for r in stats.get("xpassed", [])})


@contextlib.contextmanager
def _suite_environment(suite: Path, variables: dict[str, str]) -> Iterator[None]:
    """Run inside the suite's directory, with its package importable and ``variables`` set."""
    saved_env = {name: os.environ.get(name) for name in variables}
    saved_cwd, saved_path = Path.cwd(), list(sys.path)
    os.environ.update(variables)
    os.chdir(suite)
    sys.path.insert(0, str(suite))
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def main(argv: Sequence[str] | None = None, *, prog: str = "array_api_tests") -> int:
    """Check the checkout, run the suite and print the counts; returns pytest's exit status.

    ``prog`` names the command in the usage line (``python -m xsparse array-api-tests`` runs this too).
    """
    args = parse_args(argv, prog=prog)
    suite = args.suite.expanduser().resolve()
    try:
        if args.report is not None:
            check_report_path(args.report)
        warning = check_revision(suite, pinned_revision(), allow_other=args.allow_other_revision)
        check_requirements(suite_requirements(suite))
        xfails = read_xfails(args.xfails) if args.xfails is not None else []
    except (RunnerError, OSError) as exc:
        print(exc, file=sys.stderr)
        return 2
    if warning:
        print(f"warning: {warning}", file=sys.stderr)

    with tempfile.TemporaryDirectory() as tmp:
        ids_file = Path(tmp) / "xfails.txt"
        ids_file.write_text("".join(f"{test_id}\n" for test_id, _ in xfails))
        pytest_args = [
            "-p", "no:cacheprovider", "-q", "-rfEs",
            # Without a test path among the extra arguments, the suite's package runs (not its meta_tests/).
            # pytest itself tells paths from option values (--deselect PATH, -k EXPR) and reads testpaths
            # only when no path is given, from the rootdir.
            f"--rootdir={suite}", "-o", "testpaths=array_api_tests",
            # Timings are not conformance, and this machine may be loaded: no Hypothesis deadline.
            f"--max-examples={args.max_examples}", "--hypothesis-disable-deadline", f"--xfails-file={ids_file}",
            *args.pytest_args,
        ]
        outcomes = _Outcomes(no_shrink=args.no_shrink)
        variables = {"ARRAY_API_TESTS_MODULE": module_spec(args.backend, args.layout, plain=args.plain)}
        with _suite_environment(suite, variables):
            status = int(pytest.main(pytest_args, plugins=[outcomes]))

    counts = ", ".join(f"{outcomes.counts.get(name, 0)} {name}" for name in OUTCOMES)
    tested = PLAIN_MODULES[args.backend] if args.plain else f"xsparse(backend={args.backend}, layout={args.layout})"
    print(f"array-api-tests on {tested}, --max-examples {args.max_examples}: {counts}")
    if args.report is not None:
        report = {
            "backend": args.backend, "layout": args.layout, "max_examples": args.max_examples,
            "revision": pinned_revision(), "counts": outcomes.counts,
            "failing": outcomes.failing, "xpassing": outcomes.xpassing,
        }
        args.report.write_text(json.dumps(report, indent=1) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
