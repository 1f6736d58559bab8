"""Run the examples of every ``docs/*.md`` page once per backend.

pytest's ``--doctest-glob='*.md'`` already runs the pages with the NumPy default backend. This module
runs each page again with every installed backend as the default (``xs.default_backend(name)``), with an
output checker that reads ``backend=numpy`` and ``backend=torch`` in a ``repr`` as the same text, so one
expected output serves every backend. Anything else must match exactly (``ELLIPSIS``, as pytest's
doctest runs use, and the examples' own ``# doctest:`` directives apply).
"""

from __future__ import annotations

import contextvars
import doctest
import importlib.util
import re
from pathlib import Path

import pytest

import xsparse as xs
from xsparse import dispatch

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.md"))
DOC_BACKENDS = ["numpy", "torch"]
OPTIONFLAGS = doctest.ELLIPSIS

_BACKEND_FIELD = re.compile(r"\bbackend=(?:numpy|torch)\b")


class BackendNeutralChecker(doctest.OutputChecker):
    """An OutputChecker for which ``backend=numpy`` and ``backend=torch`` are the same text."""

    @staticmethod
    def normalise(text: str) -> str:
        return _BACKEND_FIELD.sub("backend=<default>", text)

    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        return super().check_output(self.normalise(want), self.normalise(got), optionflags)


def _backend_params() -> list[object]:
    params: list[object] = []
    for name in DOC_BACKENDS:
        if importlib.util.find_spec(name) is None:
            params.append(pytest.param(name, marks=pytest.mark.skip(reason=f"{name} is not installed")))
        else:
            params.append(name)
    return params


def run_page(path: Path, backend: str) -> tuple[doctest.TestResults, str]:
    """Run the examples of one page with ``backend`` as the default; return the results and the report.

    The page runs in a copy of the current context, so a default backend or an invariant-check switch
    that an example sets does not leak into other tests. Kernels that the page's examples register (their
    functions belong to the page's own module name) are removed from the registry afterwards, in case a
    page fails before removing them itself.
    """
    module = f"xsparse_docs_{path.stem}"
    text = path.read_text(encoding="utf-8")
    test = doctest.DocTestParser().get_doctest(text, {"__name__": module}, path.name, str(path), 0)
    runner = doctest.DocTestRunner(checker=BackendNeutralChecker(), optionflags=OPTIONFLAGS, verbose=False)
    report: list[str] = []

    def run() -> doctest.TestResults:
        with xs.default_backend(backend):
            runner.run(test, out=report.append, clear_globs=True)
        return runner.summarize(verbose=False)

    try:
        results = contextvars.copy_context().run(run)
    finally:
        _forget_kernels_of(module)
    return results, "".join(report)


def _forget_kernels_of(module: str) -> None:
    """Remove the kernels whose functions were defined in ``module`` (and operations left empty)."""
    for op in list(dispatch._REGISTRY):
        kept = [k for k in dispatch._REGISTRY[op] if getattr(k.func, "__module__", None) != module]
        if kept:
            dispatch._REGISTRY[op][:] = kept
        else:
            del dispatch._REGISTRY[op]


_IMPORT = re.compile(r"^>>> import (\w+)", re.MULTILINE)


def _missing_imports(page: Path) -> list[str]:
    """The top-level modules that the page's examples import and this machine lacks (pydata/sparse on a
    GPU machine set up for the GPU checks alone): such a page is skipped, not failed."""
    names = sorted(set(_IMPORT.findall(page.read_text(encoding="utf-8"))))
    return [name for name in names if importlib.util.find_spec(name) is None]


@pytest.mark.parametrize("backend", _backend_params())
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_examples(page: Path, backend: str) -> None:
    missing = _missing_imports(page)
    if missing:
        pytest.skip(f"{page.name} imports {', '.join(missing)}, which is not installed")
    results, report = run_page(page, backend)
    assert results.attempted > 0, f"{page.name} has no examples"
    if results.failed:
        pytest.fail(f"{results.failed} of {results.attempted} examples of {page.name} failed with backend {backend!r}:\n{report}", pytrace=False)


def test_the_documented_pages_exist() -> None:
    names = {p.name for p in PAGES}
    assert {"layouts.md", "invariants.md", "dispatch.md", "decisions.md", "backends.md"} <= names


@pytest.mark.parametrize(
    ("want", "got", "same"),
    [
        ("shape=(2, 2), layout=sparse_csr, backend=numpy)", "shape=(2, 2), layout=sparse_csr, backend=torch)", True),
        ("layout=sparse_csr, backend=torch)", "layout=sparse_csr, backend=numpy)", True),
        ("backend=numpy)", "backend=array_api_strict)", False),
        ("nnz=3, backend=numpy)", "nnz=4, backend=torch)", False),
        ("values=[1., 2.]", "values=[1, 2]", False),
    ],
)
def test_checker_ignores_only_the_backend_field(want: str, got: str, same: bool) -> None:
    assert BackendNeutralChecker().check_output(want + "\n", got + "\n", OPTIONFLAGS) is same


def test_a_wrong_example_fails_and_nothing_leaks(tmp_path: Path) -> None:
    page = tmp_path / "wrong.md"
    page.write_text(
        "```python\n"
        ">>> import xsparse as xs\n"
        ">>> xs.set_default_backend('array_api_strict')\n"
        ">>> xs.sparse_csr_array([0, 1], [0], [1.0], dtype='float64').nnz\n"
        "2\n"
        "\n```\n",
        encoding="utf-8",
    )
    before = xs.get_default_backend().name
    results, report = run_page(page, "numpy")
    assert (results.attempted, results.failed) == (3, 1)
    assert "Expected:\n    2\nGot:\n    1" in report
    assert xs.get_default_backend().name == before
