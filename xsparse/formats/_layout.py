"""The layouts of xsparse arrays and the families the dispatcher matches on."""

from __future__ import annotations

import enum

__all__ = [
    "Layout",
    "LayoutFamily",
    "strided",
    "sparse_coo",
    "sparse_csr",
    "sparse_csc",
    "sparse_bsr",
    "sparse_bsc",
    "sparse_semi_structured",
    "COMPRESSED",
    "BLOCKED",
    "INDEXED",
    "ANY_SPARSE",
    "ANY",
]


class Layout(enum.Enum):
    """How an array's elements are stored.

    ``strided`` is a backend's own dense array; every other member is a sparse layout. ``str()`` gives the
    short name (``"sparse_csr"``).
    """

    strided = "strided"
    sparse_coo = "sparse_coo"
    sparse_csr = "sparse_csr"
    sparse_csc = "sparse_csc"
    sparse_bsr = "sparse_bsr"
    sparse_bsc = "sparse_bsc"
    sparse_semi_structured = "sparse_semi_structured"

    # Members are singletons, so identity hashing is exact; Enum's own __hash__ runs Python code on every
    # dictionary lookup, ten of them in each dispatched call.
    __hash__ = object.__hash__

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"xsparse.{self.value}"

    @property
    def is_sparse(self) -> bool:
        """Whether the layout is a sparse one (everything but ``strided``)."""
        return self is not Layout.strided

    @property
    def is_compressed(self) -> bool:
        """Whether the layout belongs to the compressed family (CSR, CSC, BSR, BSC)."""
        return self in _COMPRESSED_INFO

    @property
    def is_blocked(self) -> bool:
        """Whether the layout stores 2-D blocks (BSR, BSC)."""
        return self in _COMPRESSED_INFO and _COMPRESSED_INFO[self][1]

    @property
    def compressed_dim(self) -> int:
        """Which of the two sparse dimensions is compressed: 0 for rows (CSR, BSR), 1 for columns."""
        return _COMPRESSED_INFO[self][0]

    @property
    def transposed(self) -> Layout:
        """The layout of the transpose of the two sparse dimensions (CSR <-> CSC, BSR <-> BSC)."""
        return _TRANSPOSED.get(self, self)

    @property
    def index_names(self) -> tuple[str, str]:
        """The torch names of the compressed and plain indices (``crow_indices``, ``col_indices``)."""
        return ("crow_indices", "col_indices") if self.compressed_dim == 0 else ("ccol_indices", "row_indices")


# layout -> (compressed sparse dimension, blocked)
_COMPRESSED_INFO = {
    Layout.sparse_csr: (0, False),
    Layout.sparse_csc: (1, False),
    Layout.sparse_bsr: (0, True),
    Layout.sparse_bsc: (1, True),
}
_TRANSPOSED = {
    Layout.sparse_csr: Layout.sparse_csc,
    Layout.sparse_csc: Layout.sparse_csr,
    Layout.sparse_bsr: Layout.sparse_bsc,
    Layout.sparse_bsc: Layout.sparse_bsr,
}

strided = Layout.strided
sparse_coo = Layout.sparse_coo
sparse_csr = Layout.sparse_csr
sparse_csc = Layout.sparse_csc
sparse_bsr = Layout.sparse_bsr
sparse_bsc = Layout.sparse_bsc
sparse_semi_structured = Layout.sparse_semi_structured


class LayoutFamily(frozenset):  # type: ignore[type-arg]
    """A named set of layouts, usable as one element of a kernel's layout signature."""

    name: str

    def __new__(cls, name: str, members: tuple[Layout, ...]) -> LayoutFamily:
        self = super().__new__(cls, members)
        self.name = name
        return self

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__


COMPRESSED = LayoutFamily("COMPRESSED", (sparse_csr, sparse_csc, sparse_bsr, sparse_bsc))
BLOCKED = LayoutFamily("BLOCKED", (sparse_bsr, sparse_bsc))
INDEXED = LayoutFamily("INDEXED", (sparse_coo, sparse_csr, sparse_csc, sparse_bsr, sparse_bsc))
ANY_SPARSE = LayoutFamily("ANY_SPARSE", tuple(layout for layout in Layout if layout.is_sparse))
ANY = LayoutFamily("ANY", tuple(Layout))
