"""``python -m xsparse``: the backends found here and the table of registered kernels.

Sub-commands grow with the project; with none, the report is printed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import sys
from collections import defaultdict
from collections.abc import Sequence

import xsparse as xs


def _version(library: str) -> str:
    try:
        return importlib.metadata.version(library.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        try:
            return str(getattr(__import__(library), "__version__", "?"))
        except ImportError:
            return "?"


def backends_report() -> list[str]:
    lines = ["Backends:"]
    for backend in xs.registered_backends():
        if not backend.is_available():
            lines.append(f"  {backend.name:<18} not installed")
            continue
        try:
            backend.load()
            devices = ", ".join(str(d) for d in backend.devices())
        except Exception as exc:  # a broken install is reported, not fatal to the report
            lines.append(f"  {backend.name:<18} {_version(backend.library):<14} unusable: {type(exc).__name__}: {exc}")
            continue
        lines.append(f"  {backend.name:<18} {_version(backend.library):<14} devices: {devices}")
    return lines


def _signature(op: str, signature: Sequence[object]) -> str:
    if op == "convert" and len(signature) == 2:
        return f"convert: {signature[0]} -> {signature[1]}"
    return f"{op}({', '.join(str(s) for s in signature)})"


def _concrete(element: object) -> list[object]:
    return sorted(element, key=str) if isinstance(element, frozenset) else [element]


def kernel_table() -> list[str]:
    """One row per concrete layout signature, one column per backend with native kernels.

    A layout family in a registered signature is expanded into its layouts, so the table says, for
    each pair of layouts, which backends have a native kernel; the generic column runs everywhere.
    Native kernels may still decline particular inputs (a dtype, a fill value), and then the generic
    kernel runs.
    """
    rows: dict[str, dict[str, str]] = defaultdict(dict)
    columns: list[str] = ["generic"]
    for k in xs.kernels():
        col = "generic" if k.backend is None else k.backend
        if col not in columns:
            columns.append(col)
        for signature in itertools.product(*(_concrete(e) for e in k.signature)):
            cells = rows[_signature(k.op, signature)]
            # a direct kernel is what runs, whatever rewrite is also declared for the same layouts
            if cells.get(col) != "yes":
                cells[col] = "rewrite" if k.rewrite else "yes"
    label = "operation / layout signature"
    width = max((len(r) for r in rows), default=0)
    width = max(width, len(label))
    widths = {c: max(8, len(c)) for c in columns}
    header = f"  {label:<{width}}  " + "  ".join(f"{c:<{widths[c]}}" for c in columns)
    lines = [
        "Registered kernels (generic: Array API only, runs on every backend; a native kernel may decline an input):",
        header,
        "  " + "-" * (len(header) - 2),
    ]
    for sig in sorted(rows):
        lines.append(f"  {sig:<{width}}  " + "  ".join(f"{rows[sig].get(c, '-'):<{widths[c]}}" for c in columns))
    return lines


def bench(quick: bool) -> int:
    """Run the linear-algebra benchmark suite, ``benchmarks/bench_linalg.py`` of a source checkout."""
    import importlib.util
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_linalg.py"
    spec = importlib.util.spec_from_file_location("xsparse_bench_linalg", script)
    if not script.is_file() or spec is None or spec.loader is None:
        print(
            f"python -m xsparse bench: the benchmark suite is not here ({script}); it ships with the source "
            "checkout. Clone the repository and install it with `pip install -e .[bench]`.",
            file=sys.stderr,
        )
        return 2
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.main(["--quick"] if quick else []))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xsparse", description=__doc__)
    commands = parser.add_subparsers(dest="command", metavar="{bench}")
    bench_parser = commands.add_parser("bench", help="benchmark the sparse linear algebra against SciPy, torch and pydata/sparse")
    bench_parser.add_argument("--quick", action="store_true", help="matrices about ten times smaller")
    args = parser.parse_args(argv)
    if args.command == "bench":
        return bench(args.quick)
    print(f"xsparse {xs.__version__}")
    print("\n".join(backends_report()))
    print()
    print("\n".join(kernel_table()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
