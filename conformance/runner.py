"""The runner of the conformance suite: every (operation, layout signature) of a backend, a Hypothesis
run each, and the table of outcomes.

For each operation registered in :mod:`xsparse.dispatch` and each concrete layout signature that a
kernel of the backend or a generic kernel covers, the runner draws ``max_examples`` inputs with the
operation's case (:mod:`.cases`), calls the public function, and checks

- every invariant of a sparse result and its elements against the same backend's dense computation
  (:func:`xsparse.testing.assert_sparse_equal`);
- where the backend has a native kernel for the signature, the result against the same call made with
  the generic kernels alone, and whether that native kernel ran on at least one example (a native kernel
  that declines every drawn example leaves the generic kernel compared with itself: the table says so);
- where the dense computation itself has no kernel on the backend (``NoKernelError``), that the public
  call fails the same clear way (``unsupported``).

A failure is recorded with Hypothesis's falsifying example; :data:`KNOWN_FAILURES` lists the failures
that are known, with their reason, so that they read ``xfail`` (and ``XPASS``, a failure, once fixed).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.machinery
import importlib.util
import itertools
import re
import sys
import time
import traceback
import warnings
import zlib
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter

import xsparse as xs
from xsparse import dispatch
from xsparse.testing import assert_sparse_equal

from .cases import CASES, GENERIC_SIGNS_WRONG, SIGNS_NOT_TRACKED, Context, Signature, Trial
from .strategies import DeviceNamespace, device_named

__all__ = [
    "Outcome",
    "KNOWN_FAILURES",
    "BackendNotInstalled",
    "signatures",
    "signature_name",
    "has_native",
    "generic_only",
    "NativeRecord",
    "recording_native",
    "load_backend",
    "select_operations",
    "run_signature",
    "signature_seed",
    "run",
    "format_table",
    "summary",
    "failures_report",
]

# (backend or None for every backend, operation, signature as printed) -> why it fails
KNOWN_FAILURES: dict[tuple[str | None, str, str], str] = {}
# the detail of a passing signature whose native kernel declined every example
NATIVE_IDLE = "the native kernel declined every example: the generic kernel was compared with itself"


@dataclass
class Outcome:
    """The result of one (operation, signature) on one backend.

    ``status`` is ``"pass"``, ``"FAIL"``, ``"xfail"``, ``"XPASS"``, ``"unsupported"``, ``"skip"`` or
    ``"no case"``; ``detail`` says why (a skip reason, or the falsifying example and the error).
    ``native`` says whether the backend has a native kernel for the signature, ``examples`` how many
    drawn examples ran, and ``native_examples`` on how many of them a native kernel of the signature
    accepted the call.
    """

    op: str
    signature: Signature
    status: str
    detail: str = ""
    native: bool = False
    seconds: float = 0.0
    examples: int = 0
    native_examples: int = 0

    @property
    def name(self) -> str:
        return signature_name(self.op, self.signature)

    @property
    def native_idle(self) -> bool:
        """A native kernel is registered for the signature, yet it declined every example that ran: the
        comparison with the generic kernels compared the generic kernel with itself."""
        return self.native and self.examples > 0 and self.native_examples == 0

    @property
    def failed(self) -> bool:
        return self.status in ("FAIL", "XPASS")


def signature_name(op: str, signature: Sequence[Hashable]) -> str:
    """``op(layout, ...)``, as the kernel table of ``python -m xsparse`` spells it."""
    return f"{op}({', '.join(str(s) for s in signature)})"


def _concrete(element: Hashable) -> list[Hashable]:
    return sorted(element, key=str) if isinstance(element, frozenset) else [element]


_ORDER = {str(layout): i for i, layout in enumerate([xs.strided, xs.sparse_coo, xs.sparse_csr, xs.sparse_csc,
                                                    xs.sparse_bsr, xs.sparse_bsc, xs.sparse_semi_structured])}  # fmt: skip


def signatures(op: str, backend: str) -> list[Signature]:
    """The concrete layout signatures of ``op`` that a kernel of ``backend`` or a generic kernel covers."""
    found: set[Signature] = set()
    for k in dispatch.kernels(op):
        if k.backend is None or k.backend == backend:
            found.update(itertools.product(*(_concrete(e) for e in k.signature)))
    return sorted(found, key=lambda sig: [_ORDER.get(str(s), len(_ORDER)) for s in sig])


def has_native(op: str, sig: Signature, backend: str) -> bool:
    """Whether ``backend`` has a native kernel (not a rewrite) of ``op`` for ``sig``."""
    return any(k.backend == backend and not k.rewrite and k.matches(sig) for k in dispatch.kernels(op))


@contextlib.contextmanager
def generic_only(backend: str) -> Iterator[None]:
    """Inside the block, the dispatcher sees no native kernel of ``backend`` (the generic tier runs)."""
    saved = dispatch._REGISTRY
    dispatch._REGISTRY = {op: [k for k in ks if k.backend != backend] for op, ks in saved.items()}
    try:
        yield
    finally:
        dispatch._REGISTRY = saved


@dataclass
class NativeRecord:
    """The native kernels that ran inside :func:`recording_native` while ``listening`` was True."""

    listening: bool = False
    ran: set[dispatch.Kernel] = field(default_factory=set)
    # kernel -> the reasons it gave for declining (the first few), over the whole block
    declined: dict[dispatch.Kernel, list[str]] = field(default_factory=dict)

    @contextlib.contextmanager
    def listen(self) -> Iterator[set[dispatch.Kernel]]:
        """Record the kernels that run inside the block; yields the set of those kernels (fresh)."""
        self.ran = set()
        self.listening = True
        try:
            yield self.ran
        finally:
            self.listening = False


def _recorded(kernel: dispatch.Kernel, record: NativeRecord) -> dispatch.Kernel:
    func, supports = kernel.func, kernel.supports

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        if record.listening:
            record.ran.add(kernel)
        return func(*args, **kwargs)

    if supports is None:
        return replace(kernel, func=run)

    def declines(*args: Any, **kwargs: Any) -> str | None:
        reason = supports(*args, **kwargs)
        if reason is not None and record.listening:
            reasons = record.declined.setdefault(kernel, [])
            if len(reasons) < 3 and reason not in reasons:
                reasons.append(reason)
        return reason

    return replace(kernel, func=run, supports=declines)


@contextlib.contextmanager
def recording_native(backend: str) -> Iterator[NativeRecord]:
    """Inside the block, every native kernel of ``backend`` that runs while the yielded record listens
    (:meth:`NativeRecord.listen`) is added to it. The registry is swapped for one whose native kernels
    are wrapped, as :func:`generic_only` swaps it, so that the dispatcher's path outside the runner
    carries no hook at all."""
    record = NativeRecord()
    saved = dispatch._REGISTRY
    dispatch._REGISTRY = {
        op: [_recorded(k, record) if k.backend == backend and not k.rewrite else k for k in ks] for op, ks in saved.items()
    }
    try:
        yield record
    finally:
        dispatch._REGISTRY = saved


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Floating-point warnings (array_api_strict computes with NumPy) and declared fallbacks are silent."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", xs.SparseEfficiencyWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


class Unsupported(Exception):
    """The backend has no kernel for the dense reference, and the public call raised NoKernelError too."""


def _compare(trial: Trial, actual: Any, expected: Any, signed_zeros: bool) -> None:
    if trial.compare is not None:
        trial.compare(actual, expected)
        return
    if trial.zeros is not None:
        expected = trial.zeros(actual, expected)
    # NumPy's functions give NumPy scalars for 0-d operands
    actual, expected = (np.asarray(r) if isinstance(r, np.generic) else r for r in (actual, expected))
    tol: dict[str, Any] = {}
    if trial.rtol is not None:
        tol["rtol"] = trial.rtol
    if trial.atol is not None:
        tol["atol"] = trial.atol
    if not tol:
        from .cases import float_tolerance

        tol = float_tolerance(expected.dtype)
    assert_sparse_equal(actual, expected, check_layout=trial.layout, check_signed_zeros=signed_zeros, **tol)


def _expect_error(trial: Trial, raises: tuple[type[Exception], str]) -> None:
    kind, pattern = raises
    try:
        with quiet():
            result = trial.call()
    except kind as exc:
        if not re.search(pattern, str(exc)):
            raise AssertionError(f"the call raised {kind.__name__} as documented, but its message does not match {pattern!r}: {exc}") from None
        return
    raise AssertionError(f"the call should raise {kind.__name__} (documented: {pattern!r}) but returned {type(result).__name__}")


def _execute(
    trial: Trial, op: str, backend: str, native: bool, accepted: Callable[[set[dispatch.Kernel]], None] | None = None,
    record: NativeRecord | None = None,
) -> None:
    """Run one trial; with ``record``, ``accepted`` receives the native kernels that the public call ran."""
    if trial.raises is not None:
        _expect_error(trial, trial.raises)
        return
    with quiet():
        try:
            expected = trial.expected()
        except xs.NoKernelError as exc:
            try:
                trial.call()
            except xs.NoKernelError:
                raise Unsupported(str(exc).split(". ")[0]) from None
            raise AssertionError(f"the dense reference has no kernel ({exc}), but the sparse call ran") from None
        listening: contextlib.AbstractContextManager[set[dispatch.Kernel]]
        listening = record.listen() if record is not None else contextlib.nullcontext(set())
        with listening as ran:
            actual = trial.call()
        if accepted is not None:
            accepted(ran)
    signed_zeros = trial.signed_zeros and op not in SIGNS_NOT_TRACKED
    _compare(trial, actual, expected, signed_zeros)
    if trial.check is not None:
        trial.check(actual)
    if native:
        try:
            with quiet(), generic_only(backend):
                generic = trial.call()
        except xs.NoKernelError:
            return  # an operation that only native kernels compute (erf: the Array API has none)
        try:
            _compare(trial, actual, generic, signed_zeros and (backend, op) not in GENERIC_SIGNS_WRONG)
        except AssertionError as exc:
            raise AssertionError(f"the native kernel's result differs from the generic kernel's: {exc}") from None


def signature_seed(backend: str, op: str, sig: Signature, seed_value: int | None = None, round: int = 0) -> int:
    """The Hypothesis seed of one signature's run (and of its ``round``-th further round): fixed by the
    backend, the signature and ``seed_value``, and different from signature to signature, so that each
    draws examples of its own (one seed for all would draw the same choices for every signature of an
    operation)."""
    return zlib.crc32(f"{backend}|{signature_name(op, sig)}|{seed_value}|{round}".encode())


def run_signature(
    op: str, sig: Signature, ctx: Context, *, max_examples: int, seed_value: int | None = None, shrink: bool = True,
    native_rounds: int = 3,
) -> Outcome:
    """Run the case of ``op`` on ``sig`` for ``max_examples`` Hypothesis examples; return the outcome.

    Where the backend has a native kernel for the signature and it declined every example, up to
    ``native_rounds`` further rounds of ``max_examples`` examples each are drawn (other seeds), until
    one accepts; if none does, the outcome says so (:attr:`Outcome.native_idle`). The examples are
    reproducible: each round's seed is :func:`signature_seed` (of ``seed_value``, if given).
    """
    start = time.perf_counter()
    c = CASES.get(op)
    if c is None:
        return Outcome(op, sig, "no case", "no conformance case for this operation")
    reason = c.skip(ctx, sig)
    if reason is not None:
        return Outcome(op, sig, "skip", reason)
    native = has_native(op, sig, ctx.backend)
    known = KNOWN_FAILURES.get((ctx.backend, op, signature_name(op, sig))) or KNOWN_FAILURES.get(
        (None, op, signature_name(op, sig))
    )
    unsupported: list[str] = []
    # the native kernels of this signature, and on how many examples one of them accepted the call
    own = {k for k in dispatch.kernels(op) if k.backend == ctx.backend and not k.rewrite and k.matches(sig)}
    counts = {"examples": 0, "native": 0}

    def accepted(ran: set[dispatch.Kernel]) -> None:
        counts["examples"] += 1
        counts["native"] += bool(ran & own)

    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink and known is None else [])

    @settings(
        max_examples=max_examples, deadline=None, database=None, phases=phases, suppress_health_check=list(HealthCheck),
        derandomize=False, print_blob=False,
    )  # fmt: skip
    @given(data=st.data())
    def check(data: st.DataObject) -> None:
        trial = c.build(data.draw, ctx, sig)
        try:
            _execute(trial, op, ctx.backend, native, accepted, record)
        except Unsupported as exc:
            unsupported.append(str(exc))

    report: list[str] = []

    def outcome(status: str, detail: str = "") -> Outcome:
        return Outcome(op, sig, status, detail, native, time.perf_counter() - start, counts["examples"], counts["native"])

    try:
        with with_reporter(lambda message: report.append(str(message))), recording_native(ctx.backend) as record:
            for round in range(1 + (native_rounds if native else 0)):
                seed(signature_seed(ctx.backend, op, sig, seed_value, round))(check)()
                if counts["native"] or unsupported:
                    break
    except Exception as exc:
        detail = "\n".join([*report, "".join(traceback.format_exception_only(type(exc), exc)).strip()])
        return outcome("xfail", f"{known}\n{detail}") if known is not None else outcome("FAIL", detail)
    if known is not None:
        return outcome("XPASS", f"listed as a known failure ({known}) but passed")
    if unsupported:
        return outcome("unsupported", unsupported[0])
    if native and counts["examples"] and not counts["native"]:
        reasons = sorted(f"{k.name}: {r}" for k, rs in record.declined.items() if k in own for r in rs)
        return outcome("pass", "; ".join([NATIVE_IDLE, *reasons]))
    return outcome("pass")


class BackendNotInstalled(ImportError):
    """The library of a registered backend is not installed here."""


def _declares_namespace(name: str) -> bool:
    """Whether ``name`` is a module whose source declares ``__array_api_version__``, found without
    importing the module: a name from a command line must not run arbitrary modules (``this``)."""
    if name in sys.modules:
        return hasattr(sys.modules[name], "__array_api_version__")
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return False
    try:
        # a top-level name is looked up without running anything; the parents of a dotted one would be
        # imported by importlib.util.find_spec, so they are walked with the path finder instead
        spec = importlib.util.find_spec(parts[0])
        for i in range(1, len(parts)):
            if spec is None or spec.submodule_search_locations is None:
                return False
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), list(spec.submodule_search_locations))
    except (ImportError, ValueError):
        return False
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return False
    try:
        return "__array_api_version__" in Path(spec.origin).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def load_backend(name: str, device: str | None = None) -> Context:
    """The context of the backend called ``name``, its native kernels registered.

    ``name`` is a registered backend's name (``xs.registered_backends()``) or the name of a module that
    is an Array API namespace (``jax.numpy``), which :func:`xsparse.get_backend` resolves; no other
    module is imported. The context holds the backend's own name (``numpy`` for
    ``array_api_compat.numpy``). With ``device`` (a name :func:`.strategies.device_named`
    understands), every input is created on that device instead of the backend's default one.

    Raises ValueError for an unknown name or device and :class:`BackendNotInstalled` where the backend's
    library is missing; anything else the backend raises while loading propagates.
    """
    registered = xs.registered_backends()
    if name not in {b.name for b in registered} and not _declares_namespace(name):
        raise ValueError(
            f"load_backend: unknown backend (backend={name!r}). Known backends: {', '.join(b.name for b in registered)}; "
            "an Array API namespace module (jax.numpy) works by its name too, and a third-party backend registers "
            "through the 'xsparse.backends' entry-point group."
        )
    backend = xs.get_backend(name)
    if not backend.is_available():
        installed = ", ".join(b.name for b in registered if b.is_available())
        raise BackendNotInstalled(
            f"load_backend: the library of backend {backend.name!r} is not installed (library={backend.library!r}). "
            f"Install {backend.library}, or pick an installed backend: {installed}."
        )
    xp = backend.load()
    return Context(backend.name, xp if device is None else DeviceNamespace(xp, device_named(backend, device)))


def select_operations(ops: Sequence[str] | None) -> list[str]:
    """The operations to run: every registered one for ``None``, else ``ops`` once each, in order.

    Raises ValueError for an empty selection and for a name the registry does not hold (load the
    backend first: its kernels module may register operations).
    """
    known = dispatch.operations()
    if ops is None:
        return list(known)
    selected = list(dict.fromkeys(ops))
    if not selected:
        raise ValueError("run: no operation selected (ops=[]). Name at least one, or pass ops=None to run them all.")
    unknown = [op for op in selected if op not in known]
    if unknown:
        raise ValueError(f"run: unknown operation(s) (ops={','.join(unknown)}). Pick among: {', '.join(known)}.")
    return selected


def run(
    backend: str,
    *,
    max_examples: int = 10,
    ops: Sequence[str] | None = None,
    seed_value: int | None = None,
    progress: Any = None,
    shrink: bool = True,
    device: str | None = None,
    native_rounds: int = 3,
) -> list[Outcome]:
    """Run the suite on ``backend`` (its inputs on ``device``, if given); ``progress`` (a callable)
    receives each outcome as it comes. ``native_rounds`` is :func:`run_signature`'s.

    ``ops`` selects operations (each runs once); an empty selection or an unknown name raises
    ValueError, as does ``max_examples`` below 1.
    """
    if max_examples < 1:
        raise ValueError(f"run: every signature needs at least one example (max_examples={max_examples}). Pass 1 or more.")
    ctx = load_backend(backend, device)
    outcomes = []
    for op in select_operations(ops):
        sigs = signatures(op, ctx.backend)
        if op not in CASES:
            sigs = sigs[:1] if sigs else [()]
        for sig in sigs:
            out = run_signature(
                op, sig, ctx, max_examples=max_examples, seed_value=seed_value, shrink=shrink, native_rounds=native_rounds
            )
            outcomes.append(out)
            if progress is not None:
                progress(out)
    return outcomes


def _cell(o: Outcome) -> str:
    if o.status in ("skip", "unsupported") or (o.status == "pass" and o.detail):
        return f"{o.status}({o.detail.splitlines()[0] if o.detail else ''})"
    return o.status


def _kernel(o: Outcome) -> str:
    if not o.native:
        return "-"
    return "idle" if o.native_idle else "native"


def format_table(outcomes: Sequence[Outcome], backend: str) -> list[str]:
    """One row per (operation, layout signature): its outcome, and whether a native kernel was compared
    (``native``), or is registered but declined every example (``idle``)."""
    label = "operation / layout signature"
    width = max([len(label), *(len(o.name) for o in outcomes)])
    lines = [f"Conformance of backend '{backend}' (native: compared with the generic kernels too; idle: the "
             "native kernel declined every example):",
             f"  {label:<{width}}  {'kernel':<7}  outcome", "  " + "-" * (width + 18)]  # fmt: skip
    for o in outcomes:
        lines.append(f"  {o.name:<{width}}  {_kernel(o):<7}  {_cell(o)}")
    return lines


def summary(outcomes: Sequence[Outcome]) -> str:
    """``N pass, N FAIL, ...`` over the outcomes."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    order = ["pass", "FAIL", "XPASS", "xfail", "unsupported", "skip", "no case"]
    text = ", ".join(f"{counts[s]} {s}" for s in order if s in counts)
    idle = sum(o.native_idle for o in outcomes)
    return f"{text} ({idle} with an idle native kernel)" if idle else text


def failures_report(outcomes: Sequence[Outcome]) -> list[str]:
    """The falsifying example and error of every failure."""
    lines: list[str] = []
    for o in outcomes:
        if o.failed:
            lines += ["", f"{o.status} {o.name} on its examples:", *("  " + line for line in o.detail.splitlines())]
    return lines

