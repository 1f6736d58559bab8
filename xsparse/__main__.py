"""``python -m xsparse``: the backends found here and the table of registered kernels.

Sub-commands: ``bench`` (the linear-algebra benchmarks; ``--gpu`` for the CUDA ones), ``conformance`` (the sparse conformance suite
on one backend) and ``array-api-tests`` (the Array API test suite on a sparse-by-default namespace); with
none, the report is printed.
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


def bench(quick: bool, gpu: bool = False) -> int:
    """Run the linear-algebra benchmark suite of a source checkout: ``benchmarks/bench_linalg.py``, or
    ``benchmarks/bench_gpu.py`` (CuPy and torch CUDA, and 2:4 matmul) with ``gpu``."""
    import importlib.util
    from pathlib import Path

    name = "bench_gpu" if gpu else "bench_linalg"
    script = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"xsparse_{name}", script)
    if not script.is_file() or spec is None or spec.loader is None:
        print(
            f"python -m xsparse bench: the benchmark suite is not here ({script}); it ships with the source "
            "checkout. Clone the repository and install it with `pip install -e .[bench]`.",
            file=sys.stderr,
        )
        return 2
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return int(module.main(["--quick"] if quick else []))


# the last lines of a failure's detail that the progress prints (the exception and its example)
_DETAIL_LINES = 40


def conformance(
    backend: str, max_examples: int, ops: str | None, seed: int | None, device: str | None = None, shard: tuple[int, int] = (1, 1)
) -> int:
    """Run the sparse conformance suite on ``backend``; print progress, the table and the failures.

    ``shard`` (k, n) runs the k-th of every n selected operations (1-based), so that n processes share a
    run: ``--shard 1/4`` to ``--shard 4/4`` together run each operation once.

    Returns 0 when no (operation, layout signature) fails, 1 otherwise, 2 when the suite cannot run.
    """
    try:
        from xsparse.conformance import runner
    except ImportError as exc:
        print(
            f"python -m xsparse conformance: the suite needs Hypothesis ({exc}). Install it with "
            "`pip install xsparse[conformance]`.",
            file=sys.stderr,
        )
        return 2
    selected = None if ops is None else [op.strip() for op in ops.split(",") if op.strip()]
    if selected == []:
        print(
            f"python -m xsparse conformance: --ops names no operation (ops={ops!r}). Name at least one "
            "(--ops add,matmul), or leave --ops out to run them all.",
            file=sys.stderr,
        )
        return 2
    try:
        ctx = runner.load_backend(backend, device)
    except (ValueError, runner.BackendNotInstalled) as exc:
        print(f"python -m xsparse conformance: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # whatever stops the backend from loading, the suite cannot run: exit 2, no traceback
        print(
            f"python -m xsparse conformance: backend {backend!r} cannot be loaded ({type(exc).__name__}: {exc}). "
            "Fix what the error names, or pick another backend.",
            file=sys.stderr,
        )
        return 2
    try:
        # after the backend: its kernels module may register operations of its own
        selected = runner.select_operations(selected)
    except ValueError as exc:
        print(f"python -m xsparse conformance: {exc}", file=sys.stderr)
        return 2
    k, n = shard
    selected = selected[k - 1 :: n]
    if not selected:  # more shards than operations: this one has nothing to run, which is no failure
        print(f"xsparse {xs.__version__}: conformance of backend '{ctx.backend}': no operation in shard {k}/{n}")
        return 0
    name = ctx.backend  # the backend's own name, for an alias such as array_api_compat.numpy

    def progress(outcome: runner.Outcome) -> None:
        print(f"  {outcome.status:<12} {outcome.name}", flush=True)
        if outcome.failed:
            # why, at once as well as in the report at the end: a run cut short by a time limit keeps it
            print("\n".join(f"      | {line}" for line in outcome.detail.rstrip().splitlines()[-_DETAIL_LINES:]), flush=True)

    on = "" if device is None else f" on device {device}"
    part = "" if n == 1 else f", operations {k} of every {n}"
    print(f"xsparse {xs.__version__}: conformance of backend '{name}'{on} ({max_examples} examples per layout signature{part})")
    outcomes = runner.run(name, max_examples=max_examples, ops=selected, seed_value=seed, progress=progress, device=device)
    print()
    print("\n".join(runner.format_table(outcomes, name)))
    print("\n".join(runner.failures_report(outcomes)))
    print()
    print(f"{name}: {runner.summary(outcomes)}")
    return 1 if any(o.failed for o in outcomes) else 0


ARRAY_API_TESTS = "array-api-tests"


def array_api_tests(argv: Sequence[str]) -> int:
    """Run the Array API test suite (a checkout of data-apis/array-api-tests) on a sparse-by-default namespace.

    ``argv`` is the runner's command line (``--suite PATH --backend {numpy,torch,array_api_strict}
    [--max-examples N] [-- PYTEST ARGS]``, see ``conformance/README.md``). Returns pytest's exit status, 2
    when the suite cannot run.
    """
    try:
        from xsparse.conformance import array_api_tests as suite_runner
    except ImportError as exc:
        print(
            f"python -m xsparse {ARRAY_API_TESTS}: the runner needs pytest and Hypothesis ({exc}). Install them with "
            "`pip install pytest hypothesis ndindex`.",
            file=sys.stderr,
        )
        return 2
    return int(suite_runner.main(list(argv), prog=f"python -m xsparse {ARRAY_API_TESTS}"))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [ARRAY_API_TESTS]:
        # the runner parses its own options (and passes what follows ``--`` to pytest unchanged)
        return array_api_tests(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m xsparse", description=__doc__)
    commands = parser.add_subparsers(dest="command", metavar="{bench,conformance,array-api-tests}")
    bench_parser = commands.add_parser("bench", help="benchmark the sparse linear algebra against SciPy, torch and pydata/sparse")
    bench_parser.add_argument("--quick", action="store_true", help="matrices about ten times smaller")
    bench_parser.add_argument(
        "--gpu", action="store_true",
        help="the GPU benchmarks (CuPy and torch CUDA against cupyx and torch, 2:4 matmul); without a CUDA device, says so and exits 0",
    )  # fmt: skip
    conf = commands.add_parser(
        "conformance",
        help="run the sparse conformance suite on a backend",
        description="Every registered operation and layout signature of the backend on Hypothesis inputs, against "
        "the backend's dense computation and the generic kernels; prints a table and exits 1 on any failure.",
    )
    conf.add_argument("--backend", required=True, help="the backend's registry name (numpy, torch, array_api_strict, a plug-in's) or an Array API namespace module (jax.numpy)")
    conf.add_argument("--max-examples", type=int, default=10, help="Hypothesis examples per layout signature, 1 or more (default 10)")
    conf.add_argument("--ops", default=None, help="comma-separated operations to run (default: all registered)")
    conf.add_argument("--seed", type=int, default=None, help="a Hypothesis seed (default: a fixed seed per signature, the same every run)")
    conf.add_argument(
        "--device", default=None,
        help="create every input on this device of the backend (cuda, cuda:1 for torch; device1 for array_api_strict); "
        "default: the backend's default device",
    )  # fmt: skip
    conf.add_argument(
        "--shard", default="1/1", metavar="K/N",
        help="run the K-th of every N operations (1 <= K <= N), so that N processes share the suite (default 1/1: all)",
    )  # fmt: skip
    commands.add_parser(
        ARRAY_API_TESTS,
        add_help=False,
        help="run the Array API test suite on a sparse-by-default namespace (--suite PATH --backend "
        "{numpy,torch,array_api_strict} [--max-examples N]; see --help of the sub-command)",
    )
    args = parser.parse_args(argv)
    shard = (1, 1)
    if args.command == "conformance":
        if args.max_examples < 1:
            conf.error(f"--max-examples must be at least 1 (got {args.max_examples})")
        k, slash, n = args.shard.partition("/")
        if not (slash and k.isdecimal() and n.isdecimal() and 1 <= int(k) <= int(n)):
            conf.error(f"--shard must be K/N with 1 <= K <= N, e.g. 2/4 (got {args.shard!r})")
        shard = (int(k), int(n))
    if args.command == "bench":
        return bench(args.quick, args.gpu)
    if args.command == "conformance":
        return conformance(args.backend, args.max_examples, args.ops, args.seed, args.device, shard)
    print(f"xsparse {xs.__version__}")
    print("\n".join(backends_report()))
    print()
    print("\n".join(kernel_table()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
