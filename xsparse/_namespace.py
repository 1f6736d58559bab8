"""Namespaces bound to one backend: what ``A.__array_namespace__()`` returns."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from .backends import Backend, default_backend, get_backend

__all__ = ["BoundNamespace", "bound_namespace"]


class BoundNamespace:
    """The xsparse namespace with its creation functions bound to one backend.

    Functions that take ``backend=`` get this namespace's backend (and, when ``layout`` is given, that
    default layout); dtypes and constants come from the backend's own namespace, so code written against
    the Array API runs unchanged on xsparse arrays.
    """

    def __init__(self, backend: Backend, layout: Any = None, api_version: str | None = None) -> None:
        self._backend = backend
        self._layout = layout
        self.__array_api_version__ = api_version or "2024.12"

    def __repr__(self) -> str:
        layout = f", layout={self._layout}" if self._layout is not None else ""
        return f"xsparse namespace(backend={self._backend.name}{layout})"

    def __getattr__(self, name: str) -> Any:
        import xsparse

        if name.startswith("_") or (name not in xsparse.__all__ and not hasattr(self._backend.namespace(), name)):
            raise AttributeError(f"the xsparse namespace has no attribute {name!r}")
        if name in xsparse.__all__:
            obj = getattr(xsparse, name)
            if callable(obj) and not isinstance(obj, type):
                params, var_keyword = _keyword_parameters(obj)
                bound: dict[str, Any] = {}
                if "backend" in params:
                    bound["backend"] = self._backend
                if self._layout is not None and "layout" in params:
                    bound["layout"] = self._layout
                if bound or var_keyword:
                    return functools.partial(_with_defaults, self._backend, obj, bound)
            return obj
        return getattr(self._backend.namespace(), name)


def _keyword_parameters(func: Any) -> tuple[frozenset[str], bool]:
    """The keyword-only parameters of ``func``, and whether it takes ``**kwargs``."""
    # Only keyword-only parameters are bound: ``to_backend(x, backend, /)`` names its target, not the
    # backend of its input, and a positional parameter would clash with the caller's arguments.
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return frozenset(), False
    keyword_only = frozenset(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)
    return keyword_only, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _with_defaults(backend: Backend, func: Any, defaults: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    # The namespace's backend is also the default backend during the call, so that lists and scalars go
    # to it where a function takes ``backend=`` only through ``**kwargs`` (``sparse_csr_array``).
    with default_backend(backend):
        return func(*args, **{**defaults, **kwargs})


@functools.lru_cache(maxsize=None)
def _cached(backend_name: str, layout: Any, api_version: str | None) -> BoundNamespace:
    return BoundNamespace(get_backend(backend_name), layout, api_version)


def bound_namespace(backend: Backend | str, *, layout: Any = None, api_version: str | None = None) -> BoundNamespace:
    """The xsparse namespace bound to ``backend`` (and, optionally, defaulting to a sparse ``layout``).

    Examples
    --------
    >>> import xsparse as xs
    >>> xp = xs.bound_namespace("numpy", layout=xs.sparse_csr)
    >>> xp.zeros((3, 4)).layout
    xsparse.sparse_csr
    """
    name = backend.name if isinstance(backend, Backend) else get_backend(backend).name
    return _cached(name, layout, api_version)
