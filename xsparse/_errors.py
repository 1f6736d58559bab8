"""The exceptions and warnings xsparse raises.

Every message has the shape ``<operation>: <what is wrong> (<name>=<value>, ...). <How to fix>.``
"""

from __future__ import annotations

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

    def __init__(self, invariant: str, message: str) -> None:
        super().__init__(f"invariant {invariant} violated: {message}")
        self.invariant = invariant


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
