"""The exceptions and warnings xsparse raises.

Every message has the shape ``<operation>: <what is wrong> (<name>=<value>, ...). <How to fix>.``
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

__all__ = [
    "XSparseError",
    "LayoutError",
    "InvariantError",
    "NoKernelError",
    "DensificationError",
    "BackendMismatchError",
    "SparseEfficiencyWarning",
]


class XSparseError(Exception):
    """Base class of every error raised by xsparse."""

    __module__ = "xsparse"


class LayoutError(XSparseError, TypeError):
    """An operation was given an array of a layout it does not accept."""

    __module__ = "xsparse"


class InvariantError(XSparseError, ValueError):
    """A sparse array's components violate one of its format's invariants.

    The message names the invariant (numbered as in the BSR invariants of the specification, e.g.
    ``5.6``, or ``coo.3`` for COO) and the offending value.
    """

    __module__ = "xsparse"

    def __init__(self, invariant: str, message: str, op: str | None = None, *, provisional: bool = False) -> None:
        super().__init__(f"invariant {invariant} violated: {message}" if op is None else f"invariant {invariant} violated: {op}: {message}")
        self.invariant = invariant
        self.detail = message
        #: The function the message names: the one that was handed the bad components, or None.
        self.operation = op
        self._provisional = provisional

    def met_by(self, op: str, *, provisional: bool = False) -> InvariantError:
        """This violation, its message naming ``op``, unless it already names a function for good.

        A kernel that finds bad indices (of an array built without the index checks) does not know which
        function the user called; each enclosing operation names itself provisionally, so the outermost one,
        the user's call, is the name that reaches the user.
        """
        if self.operation is not None and not self._provisional:
            return self
        return InvariantError(self.invariant, self.detail, op, provisional=provisional)

    @staticmethod
    @contextlib.contextmanager
    def naming(op: str) -> Iterator[None]:
        """Name ``op`` (provisionally) in a violation raised in the scope, as the dispatcher names its
        operations: for a public function whose kernels run under another operation's name."""
        try:
            yield
        except InvariantError as e:
            named = e.met_by(op, provisional=True)
            if named is e:
                raise
            raise named.with_traceback(e.__traceback__) from None


class NoKernelError(XSparseError, NotImplementedError):
    """No registered kernel accepts the operation's layout signature on this backend."""

    __module__ = "xsparse"


class DensificationError(XSparseError, RuntimeError):
    """An operation would materialise a dense copy of a sparse operand without being asked to."""

    __module__ = "xsparse"


class BackendMismatchError(XSparseError, TypeError):
    """The operands of one call live on different backends."""

    __module__ = "xsparse"


class SparseEfficiencyWarning(UserWarning):
    """A declared, slower fallback (a rewrite or conversion) computed the result."""

    __module__ = "xsparse"
