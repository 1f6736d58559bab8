"""The compressed family: CSR, CSC, BSR and BSC as one implementation.

Written in compressed/plain terms, as SciPy writes CSR and CSC in major/minor terms: the layout says
which of the two sparse dimensions is compressed and whether elements are 2-D blocks. CSR and CSC are
the blocksize (1, 1) case whose values carry no block dimensions. Shape ``(*batch, M, N, *dense)``;
``compressed_indices`` ``(*batch, n_compressed + 1)``, ``plain_indices`` ``(*batch, nse)``, ``values``
``(*batch, nse, *block, *dense)``.
"""

from __future__ import annotations

from typing import Any

from .._errors import LayoutError
from ._base import SparseArray
from ._invariants import check_compressed, full_checks_enabled, validate
from ._layout import Layout

__all__ = ["CompressedArray"]


class CompressedArray(SparseArray):
    """A sparse CSR, CSC, BSR or BSC array, batched and hybrid.

    Build one with :func:`xsparse.sparse_compressed_array` (or the per-layout constructors) or a
    conversion; the constructor validates its components (the index-reading checks when ``check`` or
    the context asks for them).
    """

    # _bounds_checked: whether the index-reading invariants are known to hold (checked by the validator,
    # or made so by a trusted kernel), so that later kernels skip the check. _in_range: whether the offsets
    # and plain indices are known to lie in range (implied by _bounds_checked, or checked by the first
    # compiled product that read them), which is all that a product's memory safety needs; it says nothing
    # of their order, which SuperLU, torch and cuSPARSE need.
    __slots__ = ("_compressed", "_plain", "_vals", "_bounds_checked", "_in_range")

    def __init__(
        self,
        compressed_indices: Any,
        plain_indices: Any,
        values: Any,
        shape: tuple[int, ...],
        *,
        layout: Layout,
        backend: Any,
        xp: Any,
        fill_value: Any = 0,
        check: bool | None = None,
        op: str | None = None,
    ) -> None:
        super().__init__(backend=backend, xp=xp, shape=shape, layout=layout, fill_value=fill_value)
        self._compressed = compressed_indices
        self._plain = plain_indices
        self._vals = values
        full = full_checks_enabled(check)
        validate(check_compressed, self, full, op)
        self._bounds_checked = self._in_range = full

    @classmethod
    def _trusted(
        cls, compressed_indices: Any, plain_indices: Any, values: Any, shape: tuple[int, ...], *, layout: Layout, backend: Any, xp: Any, fill_value: Any
    ) -> CompressedArray:
        """An array whose components a compiled kernel made valid by construction, built without the checks.

        For the hot paths of the NumPy backend's structure kernels only (``A[rows]`` of one CSR matrix: whole
        slices of an array that was checked, copied; its triangles; joins of checked operands), where the
        cheap checks cost a quarter of the call.
        ``fill_value`` must already be of the values' kind (the checks would make it so). The tests run
        the validator on these kernels' results. Inside ``check_sparse_tensor_invariants()`` the result is
        checked in full all the same: the arrays it came from may have been made outside that scope.
        """
        if full_checks_enabled(None):
            return cls(compressed_indices, plain_indices, values, shape, layout=layout, backend=backend, xp=xp, fill_value=fill_value)
        a = cls.__new__(cls)
        SparseArray.__init__(a, backend=backend, xp=xp, shape=shape, layout=layout, fill_value=fill_value)
        a._compressed, a._plain, a._vals = compressed_indices, plain_indices, values
        a._bounds_checked = a._in_range = False
        return a

    @property
    def nnz(self) -> int:
        """The number of specified elements (blocks for BSR/BSC) in each batch."""
        return int(self._plain.shape[-1])

    def batch_dim(self) -> int:
        """The number of leading batch dimensions."""
        return int(self._compressed.ndim - 1)

    def sparse_dim(self) -> int:
        return 2

    def dense_dim(self) -> int:
        return int(self._vals.ndim - self.batch_dim() - 1 - (2 if self._layout.is_blocked else 0))

    @property
    def blocksize(self) -> tuple[int, int]:
        """The shape of one stored block, (rows, columns); (1, 1) for CSR and CSC."""
        if not self._layout.is_blocked:
            return (1, 1)
        b = self.batch_dim()
        return (int(self._vals.shape[b + 1]), int(self._vals.shape[b + 2]))

    @property
    def index_dtype(self) -> Any:
        """The dtype of the indices (int32 or int64)."""
        return self._compressed.dtype

    def compressed_indices(self) -> Any:
        """The compressed indices ``(*batch, n_compressed + 1)`` (rows for CSR/BSR, columns for CSC/BSC)."""
        return self._compressed

    def plain_indices(self) -> Any:
        """The plain indices ``(*batch, nse)`` (columns for CSR/BSR, rows for CSC/BSC)."""
        return self._plain

    def values(self) -> Any:
        """The values ``(*batch, nse, *block, *dense)``, a view."""
        return self._vals

    def crow_indices(self) -> Any:
        """The compressed row indices of a CSR or BSR array."""
        return self._named_index("crow_indices", 0, True)

    def col_indices(self) -> Any:
        """The column indices of a CSR or BSR array."""
        return self._named_index("col_indices", 0, False)

    def ccol_indices(self) -> Any:
        """The compressed column indices of a CSC or BSC array."""
        return self._named_index("ccol_indices", 1, True)

    def row_indices(self) -> Any:
        """The row indices of a CSC or BSC array."""
        return self._named_index("row_indices", 1, False)

    def _named_index(self, name: str, compressed_dim: int, compressed: bool) -> Any:
        if self._layout.compressed_dim != compressed_dim:
            own = self._layout.index_names
            raise LayoutError(
                f"{name}: a {self._layout} array has no {name} (it has {own[0]} and {own[1]}). Use "
                f"{own[0]}() / {own[1]}(), or compressed_indices() / plain_indices() which work for every compressed layout."
            )
        return self._compressed if compressed else self._plain

    def transpose_sparse(self) -> CompressedArray:
        """The transpose of the two sparse dimensions, as a view: CSR <-> CSC, BSR <-> BSC.

        The compressed and plain indices are reinterpreted (rows become columns) and, for blocks, the
        two block dimensions of the values are swapped, so that converting then transposing equals
        transposing then converting (the commuting rule of the BSR invariants).
        """
        xp = self._xp
        values = self._vals
        if self._layout.is_blocked:
            b = self.batch_dim()
            axes = list(range(values.ndim))
            axes[b + 1], axes[b + 2] = axes[b + 2], axes[b + 1]
            values = xp.permute_dims(values, tuple(axes))
        b = self.batch_dim()
        shape = list(self._shape)
        shape[b], shape[b + 1] = shape[b + 1], shape[b]
        view = CompressedArray(
            self._compressed, self._plain, values, tuple(shape), layout=self._layout.transposed,
            backend=self._backend, xp=xp, fill_value=self._fill_value, check=False,
        )  # fmt: skip
        view._bounds_checked, view._in_range = self._bounds_checked, self._in_range  # the same index arrays
        return view

    def _components(self) -> dict[str, Any]:
        cname, pname = self._layout.index_names
        return {cname: self._compressed, pname: self._plain, "values": self._vals}

    def _map_components(self, fn: Any, backend: Any, xp: Any) -> CompressedArray:
        return CompressedArray(
            fn(self._compressed), fn(self._plain), fn(self._vals), self._shape, layout=self._layout,
            backend=backend, xp=xp, fill_value=self._fill_value, check=False,
        )  # fmt: skip

    def _with_values(self, values: Any, fill_value: Any) -> CompressedArray:
        """The same indices with new values (same leading shape) and fill value; the indices are shared."""
        lead = self.batch_dim() + 1 + (2 if self._layout.is_blocked else 0)
        shape = self._shape[: self.batch_dim() + 2] + tuple(values.shape[lead:])
        result = CompressedArray(
            self._compressed, self._plain, values, shape, layout=self._layout, backend=self._backend,
            xp=self._xp, fill_value=fill_value, check=False,
        )  # fmt: skip
        result._bounds_checked, result._in_range = self._bounds_checked, self._in_range  # the same index arrays and sparse shape
        return result
