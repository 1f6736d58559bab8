"""What a conversion should produce: the target layout and its format parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._layout import Layout

__all__ = ["Target"]


@dataclass(frozen=True)
class Target:
    """The result format of a conversion, resolved by the public layer before dispatch.

    Attributes
    ----------
    layout
        The result layout.
    backend, xp
        The backend the result lives on and its namespace.
    shape
        The shape of the array being converted.
    sparse_dim
        For COO: the number of sparse dimensions (the rest are dense).
    dense_dim
        For compressed layouts: the number of trailing dense dimensions; the batch dimensions are the
        ones before the two sparse dimensions.
    blocksize
        For BSR/BSC the block shape; (1, 1) for CSR/CSC.
    index_dtype
        The backend dtype of the result's indices.
    fill_value
        The value of unspecified elements; for a strided source, the elements equal to it are left out.
    """

    layout: Layout
    backend: Any
    xp: Any
    shape: tuple[int, ...]
    sparse_dim: int
    dense_dim: int
    blocksize: tuple[int, int]
    index_dtype: Any
    fill_value: Any

    @property
    def batch_dim(self) -> int:
        """The number of batch dimensions of a compressed result."""
        return len(self.shape) - 2 - self.dense_dim
