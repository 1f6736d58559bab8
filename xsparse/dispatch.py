"""The kernel registry and its resolution.

A kernel is registered for an operation, a *layout signature* (one element per array operand, each a
layout or a family of layouts) and a backend name, or ``backend=None`` for a generic kernel written only
against the Array API. This module knows neither formats nor backends: callers hand it the operands'
layouts, the backend's name and its namespace ``xp``.

Resolution, for ``call(op, layouts, backend, xp, *args)``:

1. the backend's native kernels whose signature matches, most specific first;
2. the generic kernels whose signature matches, most specific first;
3. the declared rewrites (a kernel that re-expresses the operation through others, e.g. CSC as the
   transpose of CSR), the backend's own before the generic ones, most specific first; using one emits
   :class:`~xsparse.SparseEfficiencyWarning`;
4. :class:`~xsparse.NoKernelError`, listing the registered signatures and every kernel's reason for
   declining.

A kernel may decline through its ``supports`` callable, which takes the kernel's own arguments and
returns ``None`` (accepted) or a sentence saying why not; the dispatcher then moves on. Among matching
kernels of one tier, a signature is more specific than another when each of its elements is a subset of
the other's; two matching kernels of one tier where neither is more specific are an ambiguity, which
:func:`ambiguities` reports (and the test suite asserts there are none).

A :class:`~xsparse.InvariantError` that a kernel raises (bad indices of an array built without the index
checks) is given the operation's name, provisionally, so that the outermost operation, the one the user
called, is named. When a kernel raises an error of its library instead (a compiled kernel that can say
only that some index is bad, NumPy's "index out of bounds"), the validator runs on the operands built
without the index checks, and an invalid one raises its :class:`~xsparse.InvariantError` in its place.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._errors import InvariantError, NoKernelError, SparseEfficiencyWarning, XSparseError

__all__ = ["Kernel", "register", "call", "resolve", "kernels", "operations", "ambiguities"]

Supports = Callable[..., "str | None"]


def _members(element: Hashable) -> frozenset[Hashable]:
    return element if isinstance(element, frozenset) else frozenset((element,))


@dataclass(frozen=True)
class Kernel:
    """One registered implementation of an operation."""

    op: str
    signature: tuple[Hashable, ...]
    backend: str | None
    func: Callable[..., Any] = field(compare=False)
    supports: Supports | None = field(default=None, compare=False)
    rewrite: bool = False
    priority: int = 0

    @property
    def kind(self) -> str:
        """``"native"``, ``"generic"`` or ``"rewrite"``."""
        if self.rewrite:
            return "rewrite"
        return "generic" if self.backend is None else "native"

    @property
    def name(self) -> str:
        return self.func.__name__

    def matches(self, layouts: Sequence[Hashable]) -> bool:
        return len(layouts) == len(self.signature) and all(
            layout in _members(element) for layout, element in zip(layouts, self.signature)
        )

    def at_least_as_specific_as(self, other: Kernel) -> bool:
        return all(_members(a) <= _members(b) for a, b in zip(self.signature, other.signature))

    def describe(self) -> str:
        where = self.backend if self.backend is not None else "any backend"
        layouts = ", ".join(str(e) for e in self.signature)
        return f"{self.op}({layouts}) [{self.kind}, {where}]"


_REGISTRY: dict[str, list[Kernel]] = {}


def register(
    op: str,
    signature: Sequence[Hashable],
    *,
    backend: str | None = None,
    supports: Supports | None = None,
    rewrite: bool = False,
    priority: int = 0,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as a kernel of ``op`` for ``signature`` on ``backend``.

    ``backend=None`` registers a generic kernel (Array API only). ``rewrite=True`` declares a fallback
    that re-expresses the operation through other operations; using it warns. Among kernels of one
    tier with the same signature, a higher ``priority`` is tried first.
    """

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        global _VERSION
        kernel = Kernel(op, tuple(signature), backend, func, supports, rewrite, priority)
        _REGISTRY.setdefault(op, []).append(kernel)
        _VERSION += 1
        return func

    return decorate


def _tier_order(candidates: list[Kernel]) -> list[Kernel]:
    """Order matching kernels so that a more specific signature comes before a less specific one."""
    ordered: list[Kernel] = []
    remaining = sorted(candidates, key=lambda k: -k.priority)
    while remaining:
        # the kernels that no other remaining kernel is strictly more specific than
        front = [
            k
            for k in remaining
            if not any(
                o is not k and o.at_least_as_specific_as(k) and not k.at_least_as_specific_as(o) for o in remaining
            )
        ]
        ordered.extend(front)
        remaining = [k for k in remaining if all(k is not f for f in front)]
    return ordered


# The order of resolution is a pure function of an operation's registered kernels, and computing it
# costs tens of microseconds -- ten times a SpMV of a small matrix -- so it is memoised per (operation,
# layouts, backend). Each entry records what it was computed from: the registry's version (which every
# registration bumps), the operation's kernel list (held, so that its identity cannot be reused) and
# that list's length. A registration, a replaced registry or kernel list (as tests do with
# monkeypatch), or kernels removed from the list, all make the entry stale, and a stale entry is
# recomputed, never used. It memoises the registry; it holds no state of any array.
_VERSION = 0
_NO_KERNELS: list[Kernel] = []
_RESOLVED: dict[tuple[str, tuple[Hashable, ...], str], tuple[int, list[Kernel], int, tuple[Kernel, ...]]] = {}


def _resolved(op: str, layouts: tuple[Hashable, ...], backend: str) -> tuple[Kernel, ...]:
    kernels = _REGISTRY.get(op, _NO_KERNELS)
    key = (op, layouts, backend)
    # the record is read before the order is computed: a register() in another thread while it is computed
    # then leaves the entry stale, where a record read afterwards would stamp an old order as current
    version, count = _VERSION, len(kernels)
    hit = _RESOLVED.get(key)
    if hit is not None and hit[0] == version and hit[1] is kernels and hit[2] == count:
        return hit[3]
    ordered = tuple(_resolve(op, layouts, backend, kernels))
    _RESOLVED[key] = (version, kernels, count, ordered)
    return ordered


def resolve(op: str, layouts: Sequence[Hashable], backend: str) -> list[Kernel]:
    """The kernels that ``call`` would try for these layouts on this backend, in order."""
    return list(_resolved(op, tuple(layouts), backend))


def chosen(op: str, layouts: Sequence[Hashable], backend: str, xp: Any, *args: Any, **kwargs: Any) -> Kernel | None:
    """The kernel :func:`call` runs for these arguments (the first whose ``supports`` accepts them), or
    None where none does or it is a declared rewrite (which warns: left to ``call``).

    For a caller that repeats one operation on arguments of the same kinds, such as an iterative
    solver's products with one matrix: it calls ``kernel.func(xp, ...)`` directly after a first call
    through :func:`call` (whose error handling names invalid indices), skipping the checks each time.
    """
    for kernel in _resolved(op, tuple(layouts), backend):
        if kernel.supports is None or kernel.supports(xp, *args, **kwargs) is None:
            return None if kernel.rewrite else kernel
    return None


def _resolve(op: str, layouts: Sequence[Hashable], backend: str, kernels: Sequence[Kernel]) -> list[Kernel]:
    candidates = [k for k in list(kernels) if k.matches(layouts)]
    native = [k for k in candidates if k.backend == backend and not k.rewrite]
    generic = [k for k in candidates if k.backend is None and not k.rewrite]
    # the backend's own rewrites before the generic ones, as for direct kernels: each (backend, kind)
    # pair is one tier, the grouping that ambiguities() checks
    native_rewrites = [k for k in candidates if k.rewrite and k.backend == backend]
    generic_rewrites = [k for k in candidates if k.rewrite and k.backend is None]
    return _tier_order(native) + _tier_order(generic) + _tier_order(native_rewrites) + _tier_order(generic_rewrites)


def call(op: str, layouts: Sequence[Hashable], backend: str, xp: Any, *args: Any, **kwargs: Any) -> Any:
    """Run ``op`` with the first kernel that accepts the arguments; see the module docstring."""
    layouts = layouts if type(layouts) is tuple else tuple(layouts)
    # _resolved, inlined: this is every operation's path, and a small SpMV costs a few microseconds
    kernels = _REGISTRY.get(op, _NO_KERNELS)
    hit = _RESOLVED.get((op, layouts, backend))
    if hit is not None and hit[0] == _VERSION and hit[1] is kernels and hit[2] == len(kernels):
        ordered = hit[3]
    else:
        ordered = _resolved(op, layouts, backend)
    declined: list[tuple[Kernel, str]] = []  # put in words only for the error: most calls pass a decline
    for kernel in ordered:
        supports = kernel.supports
        if supports is not None:
            reason = supports(xp, *args, **kwargs)
            if reason is not None:
                declined.append((kernel, reason))
                continue
        if kernel.rewrite:
            warnings.warn(
                f"{op}: no direct kernel for layouts ({_layout_list(layouts)}) on backend '{backend}'; "
                f"computing it through the declared rewrite {kernel.name}. Convert the operands to a layout "
                f"with a direct kernel (see xsparse.kernels('{op}')) to avoid the extra work.",
                SparseEfficiencyWarning,
                stacklevel=3,
            )
        try:
            return kernel.func(xp, *args, **kwargs)
        except InvariantError as e:
            # InvariantError.naming inlined: a context manager would cost every call on this path
            named = e.met_by(op, provisional=True)
            if named is e:
                raise
            raise named.with_traceback(e.__traceback__) from None
        except XSparseError:
            raise
        except Exception as error:
            if isinstance(error, ValueError):
                # an operand on a device without int64 (array_api_strict's "no_x64"), where the kernels' int64
                # positions fail: said as invariant 4.1, on this error path only
                lacking = _device_without_int64(xp, args)
                if lacking is not None:
                    raise lacking.met_by(op, provisional=True) from error
            # an operand built without the index checks is trusted; a kernel that trips over its invalid
            # indices raises its library's error ("index 7 is out of bounds", "repeats may not contain negative
            # values", a compiled routine's "invalid index"). Only then, on this error path, the validator runs
            # on those operands and says which invariant broke, and where.
            from .formats._invariants import explain_bad_indices  # (the formats import this module)

            try:
                explain_bad_indices(args)
            except InvariantError as found:
                raise found.met_by(op, provisional=True) from None
            raise
    registered = "; ".join(k.describe() for k in _REGISTRY.get(op, [])) or "none"
    why = "".join(f" {k.describe()} declined: {reason.rstrip('.')}." for k, reason in declined)
    # where a kernel for these layouts declined, its reason (a fill value, a dtype) is what to change first
    fix = "Change what a declining kernel's reason names, or convert" if declined else "Convert"
    raise NoKernelError(
        f"{op}: no kernel for layouts ({_layout_list(layouts)}) on backend '{backend}'.{why} "
        f"Registered: {registered}. {fix} an operand to a supported layout (e.g. with xsparse.to_sparse_csr) "
        f"or to a supported backend with xsparse.to_backend."
    )


def _device_without_int64(xp: Any, args: tuple[Any, ...]) -> InvariantError | None:
    """Invariant 4.1's violation of the first operand (or operand in a list) on a device without int64, or None."""
    from .formats._invariants import int64_device_violation  # (the formats import this module)

    for arg in args:
        for x in arg if isinstance(arg, (list, tuple)) else (arg,):
            device = getattr(x, "device", None)
            violation = None if device is None else int64_device_violation(xp, device)
            if violation is not None:
                return violation
    return None


def _layout_list(layouts: Iterable[Hashable]) -> str:
    return ", ".join(str(layout) for layout in layouts)


def kernels(op: str | None = None) -> list[Kernel]:
    """The registered kernels, of one operation or of all, in registration order."""
    if op is not None:
        return list(_REGISTRY.get(op, []))
    return [k for ks in _REGISTRY.values() for k in ks]


def operations() -> list[str]:
    """The names of the operations that have at least one kernel."""
    return sorted(_REGISTRY)


def ambiguities() -> list[tuple[Kernel, Kernel]]:
    """Pairs of kernels of one tier that can both match a signature while neither is more specific.

    Two kernels conflict when their signatures overlap element by element, they share an operation, a
    backend, a kind and a priority, and neither signature is a subset of the other.
    """
    found = []
    for op_kernels in _REGISTRY.values():
        for i, a in enumerate(op_kernels):
            for b in op_kernels[i + 1 :]:
                if (a.backend, a.kind, a.priority) != (b.backend, b.kind, b.priority) or len(a.signature) != len(b.signature):
                    continue
                overlap = all(_members(x) & _members(y) for x, y in zip(a.signature, b.signature))
                if overlap and not a.at_least_as_specific_as(b) and not b.at_least_as_specific_as(a):
                    found.append((a, b))
                elif overlap and a.signature == b.signature:
                    found.append((a, b))
    return found
