"""``__array_namespace_info__``: what the xsparse namespace offers on one backend.

The answers are the backend's own (its devices, its dtypes, its default dtypes, its maximum number of
dimensions): sparse arrays store their values in the backend's arrays. Sparse arrays take a boolean
mask as the sole index (``x[mask]``, the standard's boolean indexing) and have data-dependent shapes
(``nonzero``, ``unique_*``), so both capabilities are claimed.
"""

from __future__ import annotations

from typing import Any

from .backends import Backend, get_backend, get_default_backend

__all__ = ["Info", "__array_namespace_info__"]


class Info:
    """The inspection object of the Array API (``xp.__array_namespace_info__()``) for one backend.

    Parameters
    ----------
    backend
        The backend (or its name) the namespace creates arrays on.

    Examples
    --------
    >>> import xsparse as xs
    >>> info = xs.__array_namespace_info__()
    >>> info.capabilities()["boolean indexing"], info.default_device()
    (True, 'cpu')
    >>> info.default_dtypes()["real floating"] == xs.float64
    True
    >>> sorted(info.dtypes(kind="signed integer"))
    ['int16', 'int32', 'int64', 'int8']
    """

    def __init__(self, backend: Backend | str) -> None:
        self._backend = get_backend(backend)

    def __repr__(self) -> str:
        return f"xsparse namespace info(backend={self._backend.name})"

    def _info(self) -> Any:
        return self._backend.namespace().__array_namespace_info__()

    def capabilities(self) -> dict[str, Any]:
        """``"boolean indexing"`` (True: a sparse array takes a boolean mask as its sole index, as strided
        arrays do), ``"data-dependent shapes"`` (True: ``nonzero`` and the ``unique_*`` functions accept
        sparse arrays) and ``"max dimensions"`` (the backend's)."""
        own = dict(self._info().capabilities())
        return {
            "boolean indexing": True,
            "data-dependent shapes": bool(own.get("data-dependent shapes", True)),
            "max dimensions": own.get("max dimensions"),
        }

    def default_device(self) -> Any:
        """The device arrays are created on when no ``device=`` is given (the backend's)."""
        return self._info().default_device()

    def devices(self) -> list[Any]:
        """The devices the backend can place arrays on: a list, as the 2024.12 standard specifies (NumPy
        2.4's own info answers with a tuple, the 2025.12 rule)."""
        return list(self._backend.devices())

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        """The backend's default ``"real floating"``, ``"complex floating"``, ``"integral"`` and ``"indexing"``
        dtypes (sparse arrays take the same; their index arrays are int64 unless built as int32)."""
        return dict(self._info().default_dtypes(device=device))

    def dtypes(self, *, device: Any = None, kind: str | tuple[str, ...] | None = None) -> dict[str, Any]:
        """The backend's dtypes (of ``kind``), by name: every one of them can be a sparse array's dtype."""
        return dict(self._info().dtypes(device=device, kind=kind))


def __array_namespace_info__(*, backend: Backend | str | None = None) -> Info:
    """The inspection object of the xsparse namespace, for ``backend`` (default: the default backend).

    A namespace bound to a backend (``A.__array_namespace__()``) passes its backend, so it answers for
    that backend (``backend=`` is xsparse's addition to the standard's signature).

    Examples
    --------
    >>> import xsparse as xs
    >>> with xs.default_backend("torch"):
    ...     xs.__array_namespace_info__().default_dtypes()["real floating"]
    torch.float32
    >>> xs.__array_namespace_info__(backend="torch").devices()
    [device(type='cpu')]
    """
    return Info(get_default_backend() if backend is None else backend)
