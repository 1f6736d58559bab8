"""The COO format: n-dimensional, hybrid (sparse + dense dimensions), possibly uncoalesced."""

from __future__ import annotations

from typing import Any

from .._errors import InvariantError
from ._base import SparseArray
from ._invariants import check_coo, full_checks_enabled, validate
from ._layout import sparse_coo

__all__ = ["COOArray"]


class COOArray(SparseArray):
    """A sparse COO array: ``indices`` ``(sparse_dim, nse)`` and ``values`` ``(nse, *dense_shape)``.

    Duplicate indices are allowed (the array is then *uncoalesced*) and mean the sum of their values.
    Build one with :func:`xsparse.sparse_coo_array` or a conversion; the constructor validates its
    components (the index-reading checks when ``check`` or the context asks for them).
    """

    # _bounds_checked: whether the indices are known to be valid (checked by the validator), so that a
    # backend whose kernels trust them (torch's) need not check them again
    __slots__ = ("_idx", "_vals", "_coalesced", "_bounds_checked")

    def __init__(
        self,
        indices: Any,
        values: Any,
        shape: tuple[int, ...],
        *,
        backend: Any,
        xp: Any,
        coalesced: bool = False,
        fill_value: Any = 0,
        check: bool | None = None,
        op: str | None = None,
    ) -> None:
        super().__init__(backend=backend, xp=xp, shape=shape, layout=sparse_coo, fill_value=fill_value)
        self._idx = indices
        self._vals = values
        # An array with at most one specified element is coalesced whatever it was told.
        self._coalesced = bool(coalesced) or (getattr(indices, "ndim", 0) == 2 and indices.shape[1] <= 1)
        full = full_checks_enabled(check)
        validate(check_coo, self, full, op)
        self._bounds_checked = full

    @classmethod
    def _trusted(cls, indices: Any, values: Any, shape: tuple[int, ...], *, backend: Any, xp: Any, coalesced: bool, fill_value: Any) -> COOArray:
        """A COO array whose components a kernel made valid by construction, built without the checks.

        For the hot paths of point lookups only (``A[i, j]`` and ``A[rows, cols]`` of one CSR or CSC matrix:
        sorted positions of the result and values taken from an array that was checked), where the cheap
        checks cost a third of the call (a tenth for a thousand points).
        ``fill_value`` must already be of the dtype's kind (the checks would make it so). The tests run
        the validator on these kernels' results. Inside ``check_sparse_tensor_invariants()`` the result is
        checked in full all the same: the array it came from may have been made outside that scope.
        """
        if full_checks_enabled(None):
            return cls(indices, values, shape, backend=backend, xp=xp, coalesced=coalesced, fill_value=fill_value)
        a = cls.__new__(cls)
        SparseArray.__init__(a, backend=backend, xp=xp, shape=shape, layout=sparse_coo, fill_value=fill_value)
        a._idx, a._vals = indices, values
        a._coalesced = bool(coalesced) or indices.shape[1] <= 1
        a._bounds_checked = False
        return a

    @property
    def nnz(self) -> int:
        """The number of stored entries, duplicates included (torch's ``nnz`` of a COO tensor)."""
        return int(self._idx.shape[1])

    def sparse_dim(self) -> int:
        return int(self._idx.shape[0])

    def dense_dim(self) -> int:
        return int(self._vals.ndim - 1)

    @property
    def index_dtype(self) -> Any:
        """The dtype of the indices (int32 or int64)."""
        return self._idx.dtype

    def is_coalesced(self) -> bool:
        return self._coalesced

    def indices(self) -> Any:
        """The ``(sparse_dim, nse)`` indices of a coalesced array.

        Raises :class:`~xsparse.InvariantError` on an uncoalesced array, as torch does; call
        :meth:`coalesce` first, or read the raw entries with ``_indices()``.
        """
        self._require_coalesced("indices")
        return self._idx

    def values(self) -> Any:
        """The ``(nse, *dense_shape)`` values of a coalesced array (a view, not a copy)."""
        self._require_coalesced("values")
        return self._vals

    def _indices(self) -> Any:
        """The raw indices, duplicates and unsorted order included (torch's ``_indices()``)."""
        return self._idx

    def _values(self) -> Any:
        """The raw values matching :meth:`_indices` (torch's ``_values()``)."""
        return self._vals

    def _require_coalesced(self, what: str) -> None:
        if not self._coalesced:
            raise InvariantError(
                "coo.coalesced",
                f"{what}() needs a coalesced array, and this one may hold duplicate indices (nnz={self.nnz}). "
                f"Call coalesce() first, or read the raw, possibly duplicated entries with _{what}().",
            )

    def _components(self) -> dict[str, Any]:
        return {"indices": self._idx, "values": self._vals}

    def _map_components(self, fn: Any, backend: Any, xp: Any) -> COOArray:
        return COOArray(
            fn(self._idx), fn(self._vals), self._shape, backend=backend, xp=xp,
            coalesced=self._coalesced, fill_value=self._fill_value, check=False,
        )  # fmt: skip

    def _with_values(self, values: Any, fill_value: Any) -> COOArray:
        """The same indices with new values (same leading shape) and fill value; the indices are shared."""
        result = COOArray(
            self._idx, values, self._shape[: self.sparse_dim()] + tuple(values.shape[1:]), backend=self._backend,
            xp=self._xp, coalesced=self._coalesced, fill_value=fill_value, check=False,
        )  # fmt: skip
        result._bounds_checked = self._bounds_checked  # the same indices and sparse shape
        return result
