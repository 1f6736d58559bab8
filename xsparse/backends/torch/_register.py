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
from ...formats import COOArray, CompressedArray
from ...formats._invariants import verified

__all__ = ["register"]


# the arrays that carry indices (type tests: an isinstance of the abstract SparseArray costs a tenth of a
# small product)
_INDEXED = frozenset((COOArray, CompressedArray))
_INT64_MAX = 2**63 - 1


def _indexed(args: Sequence[Any]) -> list[Any]:
    """The COO and compressed arrays among ``args`` and in the lists among them (concat's operands)."""
    found = []
    for arg in args:
        if type(arg) in _INDEXED:
            found.append(arg)
        elif type(arg) in (list, tuple):
            found.extend(_indexed(arg))
    return found


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
            for a in _indexed(args):
                if a._bounds_checked is False:
                    verified(a)
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
        for a in _indexed(args):
            if math.prod(a._shape) > _INT64_MAX:
                return f"torch counts a sparse tensor's elements in int64 (numel), and shape {a._shape} holds more"
        return None if supports is None else supports(xp, *args, **kwargs)

    if supports is not None:
        functools.update_wrapper(declines, supports)
    _DECLINING[supports] = declines
    return declines
