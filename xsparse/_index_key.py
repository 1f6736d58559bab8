"""What an index key means: ``x[key]`` resolved against a shape into a plan of index items.

A key (an integer, a slice, ``None``, ``Ellipsis``, or a tuple of them) is resolved once, in the public
layer, into a tuple of items in the order of the result's dimensions: :class:`Int` selects one index of
an input dimension (which disappears), :class:`Slice` keeps ``length`` indices ``start, start + step,
...`` of an input dimension (any non-zero step, negative too), :class:`NewAxis` inserts a dimension of
size 1. Every input dimension is covered by exactly one :class:`Int` or :class:`Slice`, in order, so a
kernel applies the items one after the other. Bounds and negative indices are resolved here: kernels
see only non-negative, in-bounds integers.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Union

from .formats._invariants import dtype_name

__all__ = ["Int", "Slice", "NewAxis", "Item", "parse_key", "result_shape", "normalize_index", "is_array_index", "is_bool_dtype", "is_integer_dtype"]


@dataclass(frozen=True)
class Int:
    """Select index ``index`` (in bounds, non-negative) of input dimension ``dim``; the dimension disappears."""

    dim: int
    index: int

    @property
    def sizes(self) -> tuple[int, ...]:
        """The sizes of the result dimensions this item makes: none."""
        return ()


@dataclass(frozen=True)
class Slice:
    """Keep the ``length`` indices ``start + k * step`` (k = 0 .. length - 1) of input dimension ``dim``."""

    dim: int
    start: int
    step: int
    length: int

    @property
    def stop(self) -> int:
        """The exclusive end of the progression (``start + step * length``), usable with ``arange``."""
        return self.start + self.step * self.length

    def is_identity(self, size: int) -> bool:
        """Whether the slice keeps a dimension of ``size`` unchanged."""
        return self.step == 1 and self.start == 0 and self.length == size

    @property
    def sizes(self) -> tuple[int, ...]:
        """The sizes of the result dimensions this item makes: its length."""
        return (self.length,)


@dataclass(frozen=True)
class NewAxis:
    """Insert a dimension of size 1 (``None`` in a key)."""

    @property
    def sizes(self) -> tuple[int, ...]:
        """The sizes of the result dimensions this item makes: one of size 1."""
        return (1,)


Item = Union[Int, Slice, NewAxis]


def normalize_index(op: str, index: Any, size: int, dim: int) -> int:
    """``index`` as a non-negative integer in ``[0, size)``; raises IndexError naming the fix otherwise."""
    i = _as_int(op, index)
    if not -size <= i < size:
        raise IndexError(
            f"{op}: index {i} is out of bounds for dimension {dim} of size {size} (index={i}, dim={dim}, size={size}). "
            f"Use an index in [{-size}, {size})."
        )
    return i + size if i < 0 else i


def is_bool_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` (of any backend) is the boolean dtype."""
    return dtype_name(dtype) == "bool"


_INTEGER_NAMES = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def is_integer_dtype(dtype: Any) -> bool:
    """Whether ``dtype`` (of any backend) is an integer dtype: ``isdtype(dtype, "integral")`` by its name,
    a dictionary lookup where NumPy's ``isdtype`` costs a microsecond (an index is checked on every call)."""
    return dtype_name(dtype) in _INTEGER_NAMES


def is_array_index(index: Any) -> bool:
    """Whether a key part is an array index (integer array indexing or a boolean mask), not an integer.

    Arrays (strided or sparse) of one or more dimensions, and boolean arrays of any; a 0-d integer array
    is an integer (the standard makes ``A[i]`` and ``A[asarray(i)]`` equivalent). This test comes before
    any integer test: a one-element array also converts with ``__index__``.
    """
    if isinstance(index, (bool, int, slice, list, tuple)) or index is None or index is Ellipsis:
        return False
    shape = getattr(index, "shape", None)
    if shape is None or not hasattr(index, "dtype"):
        return False
    return len(tuple(shape)) > 0 or is_bool_dtype(index.dtype)


def _as_int(op: str, index: Any) -> int:
    if isinstance(index, bool) or is_bool_dtype(getattr(index, "dtype", "")):
        raise TypeError(
            f"{op}: a boolean index is not supported (index={index!r}). Use an integer, a slice, None or Ellipsis, "
            "or a boolean array as the sole index of x[...] (a mask)."
        )
    if is_array_index(index):
        raise TypeError(
            f"{op}: an array index is not supported here (shape={tuple(index.shape)}). Pass an integer, or gather along one "
            "axis with xsparse.take(x, indices, axis=...)."
        )
    try:
        return operator.index(index)
    except TypeError:
        raise TypeError(
            f"{op}: only integers, slices, None and Ellipsis are valid indices (index={index!r}, type={type(index).__name__}). "
            "Gather along one axis with xsparse.take(x, indices, axis=...)."
        ) from None


def _slice(op: str, s: slice, size: int, dim: int) -> Slice:
    try:
        start, stop, step = s.indices(size)
    except ValueError:
        raise ValueError(f"{op}: a slice step cannot be zero (index={s!r}, dim={dim}). Use a non-zero step such as 1 or -1.") from None
    except TypeError:
        raise TypeError(
            f"{op}: slice bounds must be integers or None (index={s!r}, dim={dim}). Pass integers, e.g. slice(0, 3)."
        ) from None
    length = len(range(start, stop, step))
    if length <= 1:
        # the step of a progression of one element or none is not read: a step past int64 (NumPy takes
        # one) would overflow the kernels' index arithmetic
        step = 1 if step > 0 else -1
    return Slice(dim, start if length else 0, step, length)


def parse_key(op: str, shape: tuple[int, ...], key: Any) -> tuple[Item, ...]:
    """Resolve ``key`` against ``shape`` into the items of :mod:`xsparse._index_key` (see the module docstring)."""
    if type(key) is tuple and len(key) == len(shape):
        # one element (A[i, j]), the most frequent small call: what the general path below makes of it
        found: list[Item] = []
        for d, p in enumerate(key):
            if type(p) is not int or not -shape[d] <= p < shape[d]:
                break
            found.append(Int(d, p + shape[d] if p < 0 else p))
        else:
            return tuple(found)
    parts = key if isinstance(key, tuple) else (key,)
    if any(isinstance(p, list) for p in parts):
        raise TypeError(
            f"{op}: a list is not a valid index (key={key!r}). Use integers, slices, None and Ellipsis, or gather with "
            "xsparse.take(x, indices, axis=...)."
        )
    n_ellipsis = sum(p is Ellipsis for p in parts)
    if n_ellipsis > 1:
        raise IndexError(f"{op}: an index can hold at most one Ellipsis (key={key!r}). Remove the extra ones.")
    n_consuming = sum(p is not None and p is not Ellipsis for p in parts)
    if n_consuming > len(shape):
        raise IndexError(
            f"{op}: too many indices for an array of {len(shape)} dimensions (indices={n_consuming}, shape={shape}). "
            "Give at most one index per dimension."
        )
    expanded: list[Any] = []
    for p in parts:
        if p is Ellipsis:
            expanded.extend([slice(None)] * (len(shape) - n_consuming))
        else:
            expanded.append(p)
    expanded.extend([slice(None)] * (len(shape) - sum(p is not None for p in expanded)))
    items: list[Item] = []
    dim = 0
    for p in expanded:
        if p is None:
            items.append(NewAxis())
        elif isinstance(p, slice):
            items.append(_slice(op, p, shape[dim], dim))
            dim += 1
        else:
            items.append(Int(dim, normalize_index(op, p, shape[dim], dim)))
            dim += 1
    return tuple(items)


def result_shape(shape: tuple[int, ...], items: tuple[Item, ...]) -> tuple[int, ...]:
    """The shape of ``x[key]`` for an array of ``shape`` and the resolved ``items``."""
    return tuple(n for it in items for n in it.sizes)
