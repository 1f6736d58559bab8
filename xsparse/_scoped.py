"""Settings scoped to a block or a call, and warning filters scoped to a call, without changing what other
threads, tasks or scopes see.

Python's own tools for both restore a snapshot, which undoes what others did meanwhile:

- ``ContextVar.reset(token)`` puts back the value the variable held when the token was made, so a scope
  left out of order (a generator suspended inside a ``with``, closed after its caller entered another
  scope) restores a setting over the caller's, and a ``with`` kept as a stack of plain values pops
  whatever is on top, another scope's entry included. Here each scope removes exactly its own entry.
- ``warnings.catch_warnings()`` puts back a copy of the whole (process-wide) filter list on exit, dropping
  the filters that other threads added meanwhile. Here one filter is added and exactly that one removed.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import re
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, TypeVar, cast

__all__ = ["Scope", "ScopeEntry", "ignoring_warnings"]

F = TypeVar("F", bound=Callable[..., Any])


class ScopeEntry:
    """One scope's setting in a context's stack: who entered it, the value, and the token of that entry."""

    __slots__ = ("owner", "value", "token")

    def __init__(self, owner: object, value: Any, token: contextvars.Token[Any] | None = None) -> None:
        self.owner = owner
        self.value = value
        self.token = token


class Scope:
    """Base of a context manager and decorator that sets a value for its block (or decorated call).

    The current context's stack of entries lives in the subclass's ``_var``, innermost last. Entering
    pushes an entry; leaving removes the innermost entry of this instance, wherever it is in the stack,
    so scopes left out of order (generators) each restore only their own setting. An instance may be
    entered in several threads or tasks at once (each context has its own stack) and re-entered.
    """

    _var: ClassVar[contextvars.ContextVar[tuple[ScopeEntry, ...]]]
    _op: ClassVar[str]

    def _value(self) -> Any:
        raise NotImplementedError

    def _enter(self) -> None:
        entry = ScopeEntry(self, self._value())
        # the token only proves, on leaving, that this is the context that entered: reset() refuses a
        # token of another context (a stack copied into a task or a contextvars.Context holds the entry too)
        entry.token = self._var.set((*self._var.get(), entry))

    def _leave(self) -> None:
        stack = self._var.get()
        for i in range(len(stack) - 1, -1, -1):
            entry = stack[i]
            if entry.owner is self:
                break
        else:
            raise self._elsewhere()
        try:
            self._var.reset(cast("contextvars.Token[tuple[ScopeEntry, ...]]", entry.token))
        except (ValueError, RuntimeError):
            raise self._elsewhere() from None
        self._var.set(stack[:i] + stack[i + 1 :])

    def _elsewhere(self) -> RuntimeError:
        return RuntimeError(
            f"{self._op}: the block is left in another context than the one that entered it (a generator or coroutine "
            f"suspended inside the `with` and resumed in another thread, asyncio task or contextvars.Context), whose "
            f"setting it cannot restore (scope={self!r}). Enter and leave the block in one context; to scope the body "
            f"of a generator, decorate the generator function with {self._op}(...) instead."
        )

    def __call__(self, func: F) -> F:
        """Decorate ``func``: the setting is on while its body runs (generators and coroutines included)."""
        if inspect.isasyncgenfunction(func):
            wrapper: Callable[..., Any] = _async_generator(self, func)
        elif inspect.iscoroutinefunction(func):
            wrapper = _coroutine(self, func)
        elif inspect.isgeneratorfunction(func):
            wrapper = _generator(self, func)
        else:
            wrapper = _function(self, func)
        return functools.wraps(func)(wrapper)  # type: ignore[return-value]


def _function(scope: Scope, func: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        scope._enter()
        try:
            return func(*args, **kwargs)
        finally:
            scope._leave()

    return run


def _coroutine(scope: Scope, func: Callable[..., Any]) -> Callable[..., Any]:
    # A coroutine runs in its task's context from start to end, so one scope around it leaks nowhere: while
    # it awaits, other tasks run in their own contexts.
    async def run(*args: Any, **kwargs: Any) -> Any:
        scope._enter()
        try:
            return await func(*args, **kwargs)
        finally:
            scope._leave()

    return run


# A generator runs in the context of whoever resumes it, so a scope around its whole life would be seen by
# its caller between two items, and left in whichever context closes it. The setting is therefore on for
# each resumption only (the protocol of ``yield from``, written out).


def _generator(scope: Scope, func: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        gen = func(*args, **kwargs)
        sent: Any = None
        error: BaseException | None = None
        while True:
            scope._enter()
            try:
                item = gen.send(sent) if error is None else gen.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                scope._leave()
                error = None
            try:
                sent = yield item
            except GeneratorExit:
                scope._enter()
                try:
                    gen.close()
                finally:
                    scope._leave()
                raise
            except BaseException as exc:  # handed to the generator, as yield from does
                error = exc

    return run


def _async_generator(scope: Scope, func: Callable[..., Any]) -> Callable[..., Any]:
    async def run(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        agen = func(*args, **kwargs)
        sent: Any = None
        error: BaseException | None = None
        while True:
            scope._enter()
            try:
                item = await (agen.asend(sent) if error is None else agen.athrow(error))
            except StopAsyncIteration:
                return
            finally:
                scope._leave()
                error = None
            try:
                sent = yield item
            except GeneratorExit:
                scope._enter()
                try:
                    await agen.aclose()
                finally:
                    scope._leave()
                raise
            except BaseException as exc:  # handed to the generator, as the synchronous wrapper does
                error = exc

    return run


# -- warning filters ------------------------------------------------------------------------------------

_FILTERS_LOCK = threading.Lock()
_FILTER_USERS: dict[tuple[Any, ...], int] = {}


@contextmanager
def ignoring_warnings(category: type[Warning], message: str = "") -> Iterator[None]:
    """Ignore the warnings of ``category`` whose text matches ``message`` (from its start) in the block.

    Adds one filter to the front of ``warnings.filters`` and removes exactly that one afterwards, where
    ``warnings.catch_warnings()`` would put back a copy of the whole list and drop what other threads added
    meanwhile. The filter list is one per process, so other threads ignore the same warnings while the
    block runs; blocks that overlap in several threads share one filter, removed when the last one ends.
    """
    # the tuple warnings.filterwarnings inserts (re.compile caches the pattern, and patterns compare equal)
    item = ("ignore", re.compile(message, re.I) if message else None, category, None, 0)
    with _FILTERS_LOCK:
        users = _FILTER_USERS.get(item, 0)
        if users == 0:
            warnings.filterwarnings("ignore", message=message, category=category)
        _FILTER_USERS[item] = users + 1
    try:
        yield
    finally:
        with _FILTERS_LOCK:
            _FILTER_USERS[item] -= 1
            if _FILTER_USERS[item] == 0:
                del _FILTER_USERS[item]
                try:
                    cast(list[Any], warnings.filters).remove(item)  # a list, typed as a Sequence
                except ValueError:
                    pass  # another thread's catch_warnings() put back a list without it
