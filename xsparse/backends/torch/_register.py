"""The torch backend's registration: every kernel takes operands whose indices are checked, and no more
elements than torch counts.

torch's kernels read indices unchecked (``check_invariants=False`` is what makes handing the components
over free), and invalid ones read or write outside a buffer, or give a wrong answer. So each kernel, before
it runs, checks the indices of every operand built without the index checks (:func:`verified`): once per
array, since the answer is kept on it, and never for the arrays that torch's kernels or the validator
made. What a kernel does not take (its ``supports`` function's reading of the dtype and device) costs
nothing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from ... import dispatch
from ...formats import SparseArray
from ...formats._invariants import verified

__all__ = ["register"]


def _check_operands(args: tuple[Any, ...]) -> None:
    for arg in args:
        for a in arg if isinstance(arg, (list, tuple)) else (arg,):
            if isinstance(a, SparseArray) and getattr(a, "_bounds_checked", True) is False:
                verified(a)


_INT64_MAX = 2**63 - 1


def _too_many_elements(args: tuple[Any, ...]) -> str | None:
    for arg in args:
        for a in arg if isinstance(arg, (list, tuple)) else (arg,):
            if isinstance(a, SparseArray) and math.prod(a.shape) > _INT64_MAX:
                return f"torch counts a sparse tensor's elements in int64 (numel), and shape {tuple(a.shape)} holds more"
    return None


def register(op: str, signature: Sequence[Hashable], *, backend: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """:func:`xsparse.dispatch.register` for ``backend="torch"``, whose kernel first checks its operands'
    indices (once per array), and declines operands with more elements than torch counts; the undecorated
    function is returned, for the kernels that call one another."""
    if backend != "torch":
        raise ValueError(f"register: the torch backend's registration registers torch kernels only (backend={backend!r}).")
    declines = _declining(options.pop("supports", None))

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def checked(xp: Any, *args: Any, **kwargs: Any) -> Any:
            _check_operands(args)
            return func(xp, *args, **kwargs)

        dispatch.register(op, signature, backend=backend, supports=declines, **options)(checked)
        return func

    return decorate


# one wrapper per ``supports`` function, so that a function registered for several signatures keeps one
_DECLINING: dict[Any, Callable[..., str | None]] = {}


def _declining(supports: Callable[..., str | None] | None) -> Callable[..., str | None]:
    """``supports``, first declining operands with more elements than torch counts."""
    found = _DECLINING.get(supports)
    if found is not None:
        return found

    def declines(xp: Any, *args: Any, **kwargs: Any) -> str | None:
        reason = _too_many_elements(args)
        if reason is None and supports is not None:
            reason = supports(xp, *args, **kwargs)
        return reason

    if supports is not None:
        functools.update_wrapper(declines, supports)
    _DECLINING[supports] = declines
    return declines
