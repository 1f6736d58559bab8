"""The semi-structured (2:4) format: the kept values of a 2-D array and a metadata encoding of where they were.

Semi-structured sparsity (NVIDIA's "fine-grained structured sparsity") keeps ``n`` of every ``2n``
consecutive elements of a row: 2 of 4 for the 16- and 8-bit dtypes, 1 of 2 for float32. The array is
stored as two components, as torch's ``SparseSemiStructuredTensor`` exposes them:

- ``values`` ``(rows, cols // 2)``: the kept elements of each row, in column order, in the array's dtype;
- ``metadata`` ``(rows, cols // columns_per_word)``: where in its group each kept element was, packed into
  int16 words (float16, bfloat16, float32) or int32 words (int8) as the comment below describes.

This module holds the encoding (written against the Array API namespace ``xp`` alone), the format class
and its one validator. It is the *portable reference* form, the same on every backend. An accelerator's
encoding of the same stored matrix (torch's ``SparseSemiStructuredTensor`` on CUDA: cuSPARSELt's single
buffer of values and metadata, or CUTLASS's values and interleaved metadata) is built by a backend's
conversion kernel and rides along in the array's ``packed`` slot; this module only carries it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import array_api_compat

from .._errors import InvariantError
from ._base import SparseArray
from ._invariants import _fail, _is_array, dtype_name, full_checks_enabled
from ._layout import sparse_semi_structured

__all__ = [
    "Pattern",
    "PATTERNS",
    "SemiStructuredArray",
    "check_semi_structured",
    "pattern_for",
    "check_stored_shape",
    "pattern_violation",
    "unpack_metadata",
    "pack_nibbles",
    "nibbles_from_positions",
    "kept_positions",
    "kept_columns",
]

# -- the metadata encoding ------------------------------------------------------------------------------
#
# A row is cut into groups of 4 consecutive elements (2:4 dtypes), of which at most 2 are specified.
# Each group is described by one 4-bit nibble holding two 2-bit in-group indices, the lower one first:
#
#     bit      3   2   1   0
#            [  i1  ][  i0  ]      0 <= i0 < i1 <= 3: the positions of the two kept elements
#
#     [x, x, 0, 0] -> (0, 1) -> 0b0100        [0, x, x, 0] -> (1, 2) -> 0b1001
#     [x, 0, x, 0] -> (0, 2) -> 0b1000        [0, x, 0, x] -> (1, 3) -> 0b1101
#     [x, 0, 0, x] -> (0, 3) -> 0b1100        [0, 0, x, x] -> (2, 3) -> 0b1110
#
# A group with fewer than 2 specified elements still keeps 2: the missing ones are padded with explicit
# fill-value elements at the first free position of 2, 3, 0, 1 (torch's choices, which are also the
# only ones that stay valid for 1:2 below):
#
#     [0, 0, 0, 0] -> (2, 3) -> 0b1110        [x, 0, 0, 0] -> (0, 2) -> 0b1000
#     [0, 0, 0, x] -> (2, 3) -> 0b1110        [0, x, 0, 0] -> (1, 2) -> 0b1001
#     [0, 0, x, 0] -> (2, 3) -> 0b1110
#
# Nibbles are packed into the signed words of the metadata, group 0 of the word in the least
# significant nibble, and words follow each other along the row:
#
#     int16 word (float16, bfloat16): | g3 | g2 | g1 | g0 |            4 groups = 16 columns
#     int32 word (int8):              | g7 | g6 | ... | g1 | g0 |      8 groups = 32 columns
#
# so a row of the tile [0, 0, 1, 1] has 0b1110 in every nibble: 0xEEEE, which reads -4370 as int16
# (the value the seed's example prints), and 2 bits of metadata per kept element.
#
# float32 is 1:2: groups of 2 elements, one kept. The hardware sees a float32 as two 16-bit halves, so
# a pair of float32 is a group of 4 halves whose kept element's two halves are kept: element 0 ->
# halves (0, 1) -> 0b0100, element 1 -> halves (2, 3) -> 0b1110 (an empty pair keeps element 1). One
# nibble per pair, packed into int16 words as above: 4 pairs = 8 columns per word, 4 bits of metadata per
# kept element.
#
# These are exactly the nibbles of torch's CUTLASS metadata before its tensor-core interleave (torch
# reorders the int16/int32 words; it does not change them), and the same values as the seed's example.


@dataclass(frozen=True)
class Pattern:
    """The sparsity pattern and shape constraints of one value dtype.

    Attributes
    ----------
    kept, group
        ``kept`` of every ``group`` consecutive elements of a row are kept (2 of 4, or 1 of 2).
    metadata_dtype
        The name of the dtype of the metadata words (``int16`` or ``int32``).
    min_rows, min_cols
        The stored array's rows and columns must be positive multiples of these (torch's table).
    """

    dtype: str
    kept: int
    group: int
    metadata_dtype: str
    min_rows: int
    min_cols: int

    @property
    def nibbles_per_word(self) -> int:
        """Groups described by one metadata word (4 per int16, 8 per int32)."""
        return 4 if self.metadata_dtype == "int16" else 8

    @property
    def word_bits(self) -> int:
        return 4 * self.nibbles_per_word

    @property
    def columns_per_word(self) -> int:
        """Columns of the stored array described by one metadata word."""
        return self.group * self.nibbles_per_word

    @property
    def name(self) -> str:
        """``"2:4"`` or ``"1:2"``."""
        return f"{self.kept}:{self.group}"


# torch's table (the seed): float16 and bfloat16 need multiples of 64, int8 multiples of 128. float32,
# which the seed lists only as 1:2, takes torch's CUTLASS minimum for it (32 rows and 32 columns).
PATTERNS = {
    "float16": Pattern("float16", 2, 4, "int16", 64, 64),
    "bfloat16": Pattern("bfloat16", 2, 4, "int16", 64, 64),
    "int8": Pattern("int8", 2, 4, "int32", 128, 128),
    "float32": Pattern("float32", 1, 2, "int16", 32, 32),
}


def pattern_for(op: str, dtype: Any) -> Pattern:
    """The pattern of a value dtype, or :class:`~xsparse.InvariantError` ``ss.2`` naming the supported ones."""
    name = dtype_name(dtype)
    found = PATTERNS.get(name)
    if found is None:
        raise _fail(
            "ss.2",
            f"dtype {name} has no semi-structured layout (dtype={name}). Cast the array to float16, bfloat16 or "
            "int8 (2:4 sparsity) or float32 (1:2 sparsity) first, e.g. with xp.astype(x, xp.float16)",
            op,
        )
    return found


def _round_up(n: int, m: int) -> int:
    return max(m, -(-n // m) * m)


def check_stored_shape(op: str, pattern: Pattern, shape: tuple[int, ...]) -> None:
    """Invariant ``ss.5``: the stored rows and columns are positive multiples of the dtype's minimum."""
    rows, cols = shape
    if rows <= 0 or cols <= 0 or rows % pattern.min_rows or cols % pattern.min_cols:
        padded = (_round_up(rows, pattern.min_rows), _round_up(cols, pattern.min_cols))
        raise _fail(
            "ss.5",
            f"a semi-structured array of {pattern.dtype} needs rows that are a positive multiple of {pattern.min_rows} "
            f"and columns that are a positive multiple of {pattern.min_cols} (shape={shape}). Pad it with zeros to "
            f"{padded}, or keep it in another layout such as sparse_csr",
            op,
        )


def pattern_violation(op: str, pattern: Pattern, row: int, group: int, count: int) -> InvariantError:
    """Invariant ``ss.11``: one group of a row holds more specified elements than the pattern keeps."""
    first = group * pattern.group
    return _fail(
        "ss.11",
        f"row {row}, group {group} (columns {first}..{first + pattern.group - 1}) holds {count} specified "
        f"elements, but an array of {pattern.dtype} keeps at most {pattern.kept} of every {pattern.group} ({pattern.name} "
        f"sparsity; row={row}, group={group}, count={count}). Zero out (prune) the extra elements of every such group "
        "first, or keep the array in another layout such as sparse_csr",
        op,
    )


# -- encoding and decoding (Array API only) -------------------------------------------------------------


def _device(x: Any) -> Any:
    return array_api_compat.device(x)


def _powers_of_16(xp: Any, pattern: Pattern, device: Any) -> Any:
    return xp.asarray([16**j for j in range(pattern.nibbles_per_word)], dtype=xp.int64, device=device)


def unpack_metadata(xp: Any, metadata: Any, pattern: Pattern) -> Any:
    """The int64 nibbles ``(rows, groups)`` of the metadata words, group 0 first."""
    rows, n_words = metadata.shape
    words = xp.astype(metadata, xp.int64)
    words = xp.where(words < 0, words + 2**pattern.word_bits, words)  # the word's unsigned value
    nibbles = (words[:, :, None] // _powers_of_16(xp, pattern, _device(metadata))) % 16
    return xp.reshape(nibbles, (rows, n_words * pattern.nibbles_per_word))


def pack_nibbles(xp: Any, nibbles: Any, pattern: Pattern) -> Any:
    """The metadata words ``(rows, groups // nibbles_per_word)`` of int64 nibbles ``(rows, groups)``."""
    rows, groups = nibbles.shape
    per = pattern.nibbles_per_word
    grouped = xp.reshape(xp.astype(nibbles, xp.int64), (rows, groups // per, per))
    words = xp.sum(grouped * _powers_of_16(xp, pattern, _device(nibbles)), axis=-1, dtype=xp.int64)
    # the unsigned value as the signed word of the same bits, kept in range before the cast
    words = xp.where(words >= 2 ** (pattern.word_bits - 1), words - 2**pattern.word_bits, words)
    return xp.astype(words, getattr(xp, pattern.metadata_dtype))


def nibbles_from_positions(xp: Any, positions: Any, pattern: Pattern) -> Any:
    """The nibbles of sorted in-group positions ``(..., kept)`` (see the encoding comment)."""
    if pattern.kept == 2:
        return positions[..., 0] + 4 * positions[..., 1]
    # 1:2: element q keeps the halves (2q, 2q + 1)
    return 10 * positions[..., 0] + 4


def kept_positions(xp: Any, metadata: Any, pattern: Pattern) -> Any:
    """The in-group positions ``(rows, groups, kept)`` (int64, increasing) that the metadata encodes."""
    nibbles = unpack_metadata(xp, metadata, pattern)
    if pattern.kept == 2:
        return xp.stack([nibbles % 4, nibbles // 4], axis=-1)
    return ((nibbles % 4) // 2)[:, :, None]


def kept_columns(xp: Any, metadata: Any, pattern: Pattern) -> Any:
    """The column ``(rows, cols // 2)`` (int64, increasing along each row) of every kept value."""
    positions = kept_positions(xp, metadata, pattern)
    rows, groups, kept = positions.shape
    first = xp.arange(groups, dtype=xp.int64, device=_device(metadata)) * pattern.group
    return xp.reshape(positions + first[None, :, None], (rows, groups * kept))


# -- the format class -----------------------------------------------------------------------------------


class SemiStructuredArray(SparseArray):
    """A 2-D semi-structured (2:4, or 1:2 for float32) sparse array: kept values plus metadata.

    The components describe the *stored* matrix ``W`` of shape ``(rows, cols)``, whose rows hold the
    pattern; ``transposed=True`` makes the array ``W.T`` (shape ``(cols, rows)``) without moving any data,
    as torch's ``SparseSemiStructuredTensor`` does: the transpose of a row pattern is not a row pattern,
    so :meth:`t` flips the flag instead of re-encoding. Build one with
    :func:`xsparse.to_sparse_semi_structured`; the constructor validates the components (the check that
    reads the metadata when ``check`` or the context asks for it).

    ``packed`` is an optional second encoding of the same stored matrix for an accelerator library
    (torch's ``SparseSemiStructuredTensor`` on CUDA, the CuPy backend's cuSPARSELt buffer), built once by
    a backend's conversion kernel and read by its matmul kernels. It is never built lazily: an array
    either carries it from its construction or does not. The transpose view shares it (it still encodes
    the stored matrix; the products read the ``transposed`` flag); anything that changes the values or
    the backend drops it, and torch's ``detach`` detaches it. The validator does not look inside it: the
    kernel that builds it is responsible for it encoding the same matrix as the components.
    """

    __slots__ = ("_vals", "_meta", "_transposed", "_packed")

    def __init__(
        self,
        values: Any,
        metadata: Any,
        shape: tuple[int, ...] | None = None,
        *,
        backend: Any,
        xp: Any,
        transposed: bool = False,
        fill_value: Any = 0,
        check: bool | None = None,
        packed: Any = None,
    ) -> None:
        stored = _stored_shape(values)
        if shape is None:
            shape = stored[::-1] if transposed else stored
        super().__init__(backend=backend, xp=xp, shape=shape, layout=sparse_semi_structured, fill_value=fill_value)
        self._vals = values
        self._meta = metadata
        self._transposed = bool(transposed)
        self._packed = packed
        check_semi_structured(self, full_checks_enabled(check))

    @property
    def nnz(self) -> int:
        """The number of specified elements: every kept value, the padding of sparser groups included."""
        return int(self._vals.shape[0] * self._vals.shape[1])

    def sparse_dim(self) -> int:
        return 2

    def dense_dim(self) -> int:
        return 0

    @property
    def pattern(self) -> Pattern:
        """The sparsity pattern of the dtype (``pattern.name`` is ``"2:4"`` or ``"1:2"``)."""
        return pattern_for("pattern", self._vals.dtype)

    @property
    def transposed(self) -> bool:
        """Whether the array is the transpose of the stored matrix (see the class docstring)."""
        return self._transposed

    @property
    def packed(self) -> Any:
        """The accelerator encoding of the stored matrix a backend built with the array, or ``None``."""
        return self._packed

    @property
    def stored_shape(self) -> tuple[int, int]:
        """The shape of the stored matrix, whose rows hold the pattern."""
        rows, cols = self._shape
        return (cols, rows) if self._transposed else (rows, cols)

    def values(self) -> Any:
        """The kept values ``(rows, cols // 2)`` of the stored matrix, in the array's dtype (a view)."""
        return self._vals

    def indices(self) -> Any:
        """The metadata ``(rows, cols // columns_per_word)``, int16 words (int32 for int8) (a view).

        ``cols // 16`` int16 words for float16 and bfloat16, ``cols // 32`` int32 words for int8 and
        ``cols // 8`` int16 words for float32: 2 bits per kept element (4 for float32); see
        ``docs/semi_structured.md`` for the bit layout.
        """
        return self._meta

    def t(self) -> SemiStructuredArray:
        """The transpose, as a view: the same components with the ``transposed`` flag flipped."""
        return SemiStructuredArray(
            self._vals, self._meta, self._shape[::-1], backend=self._backend, xp=self._xp,
            transposed=not self._transposed, fill_value=self._fill_value, check=False, packed=self._packed,
        )  # fmt: skip

    def detach(self) -> SemiStructuredArray:
        """See :func:`xsparse._semi_structured.detach`: the same array, cut from autograd on torch."""
        from .._semi_structured import detach

        return cast(SemiStructuredArray, detach(self))

    def _components(self) -> dict[str, Any]:
        return {"values": self._vals, "metadata": self._meta}

    def _map_components(self, fn: Any, backend: Any, xp: Any) -> SemiStructuredArray:
        return SemiStructuredArray(
            fn(self._vals), fn(self._meta), self._shape, backend=backend, xp=xp,
            transposed=self._transposed, fill_value=self._fill_value, check=False,
        )  # fmt: skip

    def _with_values(self, values: Any, fill_value: Any) -> SemiStructuredArray:
        """The same metadata (shared) and flag with new kept values of the same shape."""
        return SemiStructuredArray(
            values, self._meta, self._shape, backend=self._backend, xp=self._xp,
            transposed=self._transposed, fill_value=fill_value,
        )  # fmt: skip

    def __repr__(self) -> str:
        from .._repr import sparse_repr

        text = sparse_repr(self)
        if not self._transposed:
            return text
        layout = f", layout={self._layout}"
        return text.replace(layout, f", transposed=True{layout}", 1)


def _stored_shape(values: Any) -> tuple[int, ...]:
    shape = tuple(getattr(values, "shape", ()))
    if len(shape) != 2:
        return shape
    return (int(shape[0]), 2 * int(shape[1]))


# -- the validator ----------------------------------------------------------------------------------------


def check_semi_structured(a: SemiStructuredArray, full: bool) -> None:
    """Check the invariants ``ss.1``-``ss.9`` of a semi-structured array; ``full`` adds ``ss.10``, which reads the metadata.

    ``ss.11`` (no group holds more specified elements than the pattern keeps) is a property of the
    dense array being converted, checked by the conversions: the components cannot express a violation.
    """
    xp = a._xp
    values, metadata = a._vals, a._meta
    for name, x in (("values", values), ("metadata", metadata)):
        if not _is_array(xp, x):
            raise _fail("ss.1", f"{name} must be a strided array of the backend, got {type(x).__name__}. Pass an array of the backend, e.g. xp.asarray({name})")
    pattern = pattern_for("sparse_semi_structured", values.dtype)
    meta_dtype = dtype_name(metadata.dtype)
    if meta_dtype != pattern.metadata_dtype:
        raise _fail(
            "ss.3",
            f"the metadata of a {pattern.dtype} array must be {pattern.metadata_dtype} words, got {meta_dtype} "
            f"(metadata.dtype={meta_dtype}). Build the array with xsparse.to_sparse_semi_structured, which encodes it",
        )
    if values.ndim != 2 or metadata.ndim != 2 or len(a.shape) != 2:
        raise _fail(
            "ss.4",
            f"a semi-structured array and its values and metadata are 2-D (values.shape={tuple(values.shape)}, "
            f"metadata.shape={tuple(metadata.shape)}, shape={a.shape}). Convert one matrix at a time",
        )
    stored = _stored_shape(values)
    check_stored_shape("sparse_semi_structured", pattern, (int(stored[0]), int(stored[1])))
    expected_meta = (stored[0], stored[1] // pattern.columns_per_word)
    if tuple(metadata.shape) != expected_meta:
        raise _fail(
            "ss.6",
            f"metadata.shape must be {expected_meta} for values of shape {tuple(values.shape)} (one {pattern.metadata_dtype} "
            f"word per {pattern.columns_per_word} columns), got {tuple(metadata.shape)}. Give the metadata that encodes these values",
        )
    logical = stored[::-1] if a.transposed else stored
    if tuple(a.shape) != logical:
        raise _fail(
            "ss.7",
            f"shape must be {logical} for stored values of shape {tuple(values.shape)} (transposed={a.transposed}), "
            f"got {a.shape}. Leave the shape out to infer it",
        )
    device = a._backend_device(values)
    if a._backend_device(metadata) != device:
        raise _fail(
            "ss.8",
            f"metadata is on device {a._backend_device(metadata)} but values are on device {device}. Move them to one "
            "device, e.g. with xp.asarray(metadata, device=values.device)",
        )
    for name, x in (("values", values), ("metadata", metadata)):
        if a._backend.is_contiguous(x) is False:
            raise _fail("ss.9", f"{name} must be contiguous. Pass a contiguous copy")
    if full:
        _check_nibbles(xp, metadata, pattern)


def _check_nibbles(xp: Any, metadata: Any, pattern: Pattern) -> None:
    nibbles = unpack_metadata(xp, metadata, pattern)
    if pattern.kept == 2:
        bad = (nibbles % 4) >= (nibbles // 4)
        rule = "two 2-bit indices i0 < i1 (bits 0-1 and 2-3)"
    else:
        bad = (nibbles != 4) & (nibbles != 14)
        rule = "0b0100 (element 0 kept) or 0b1110 (element 1 kept)"
    if bool(xp.any(bad)):
        flat = xp.reshape(bad, (-1,))
        at = int(xp.argmax(xp.astype(flat, xp.int8)))
        groups = nibbles.shape[1]
        row, group = divmod(at, groups)
        value = int(xp.reshape(nibbles, (-1,))[at])
        raise _fail(
            "ss.10",
            f"every metadata nibble of a {pattern.name} array must be {rule}, got {value:#06b} for row {row}, group "
            f"{group} (row={row}, group={group}). Build the metadata with xsparse.to_sparse_semi_structured",
        )
