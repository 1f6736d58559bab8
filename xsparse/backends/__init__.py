"""The backend registry: which array library owns an array, and how to reach its namespace.

A backend is an Array API library (NumPy, torch, CuPy, array-api-strict, or any other namespace that
array-api-compat recognises). Nothing here imports a library the user has not imported: detection goes
through :func:`array_api_compat.array_namespace`, which inspects the array's type, and a backend's
native kernel module is imported the first time an array of that backend reaches the dispatcher.

Third-party backends register through the ``xsparse.backends`` entry-point group: each entry point loads
a :class:`Backend` instance.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import importlib.util
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

import array_api_compat

__all__ = [
    "Backend",
    "get_backend",
    "backend_of_array",
    "registered_backends",
    "default_backend",
    "set_default_backend",
    "get_default_backend",
    "release_cached_memory",
]


def _compat(module: str) -> Callable[[], Any]:
    def namespace() -> Any:
        # sys.modules first: import_module's own lookup costs tens of microseconds per operation
        return sys.modules.get(module) or importlib.import_module(module)

    return namespace


def _info_devices(xp: Any) -> list[Any]:
    return list(xp.__array_namespace_info__().devices())


def _numpy_repeat(x: Any, counts: Any, total: int) -> Any:
    import numpy as np

    return np.repeat(x, counts)


def _torch_repeat(x: Any, counts: Any, total: int) -> Any:
    import torch

    # output_size spares a CUDA device a synchronisation to learn the result's length; torch then trusts
    # the counts, and counts of an array built without the index checks would write out of bounds. On the
    # CPU the length costs nothing, and torch checks the counts itself.
    if x.device.type == "cpu":
        return torch.repeat_interleave(x, counts)
    return torch.repeat_interleave(x, counts, output_size=total)


def _torch_devices(xp: Any) -> list[Any]:
    import torch

    cuda = [torch.device("cuda", i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    return [torch.device("cpu"), *cuda]


@dataclass(frozen=True, eq=False)
class Backend:
    """An array library that can own the components of xsparse arrays.

    Parameters
    ----------
    name
        The name users pass to ``backend=`` and :func:`xsparse.to_backend` (``"numpy"``, ``"torch"``).
    library
        The top-level module of the library; the backend is *available* when it can be imported.
    namespace_loader
        Returns the library's Array API namespace (its array-api-compat wrapper where it needs one).
    kernels
        The module that registers the backend's native kernels, imported on first use; ``None`` for a
        backend that runs on the generic kernels alone.
    devices_of
        Lists the devices the backend can place arrays on, given its namespace.
    contiguity
        Tells whether an array is C-contiguous, or ``None`` where the library has no such notion.
    repeat
        ``repeat(x, counts, total)``: each element of the 1-D ``x`` repeated by the matching element of
        ``counts`` (``total`` elements in all), where the library has a primitive that takes an array of
        counts; ``None`` otherwise (the index arithmetic then uses a binary search, which the Array API
        has everywhere).
    """

    name: str
    library: str
    namespace_loader: Callable[[], Any] = field(repr=False)
    kernels: str | None = None
    devices_of: Callable[[Any], list[Any]] = field(default=_info_devices, repr=False)
    contiguity: Callable[[Any], bool | None] = field(default=lambda x: None, repr=False)
    repeat: Callable[[Any, Any, int], Any] | None = field(default=None, repr=False)

    def is_available(self) -> bool:
        """Whether the library can be imported here."""
        return self.library in sys.modules or importlib.util.find_spec(self.library) is not None

    def namespace(self) -> Any:
        """The Array API namespace of the library (importing it)."""
        return self.namespace_loader()

    def load(self) -> Any:
        """Import the backend's native kernels (once) and return its namespace."""
        xp = self.namespace()
        if self.kernels is not None and self.kernels not in sys.modules:
            importlib.import_module(self.kernels)
        return xp

    def is_contiguous(self, x: Any) -> bool | None:
        """Whether ``x`` is C-contiguous; ``None`` where the library has no such notion."""
        return self.contiguity(x)

    def devices(self) -> list[Any]:
        """The devices arrays of this backend can live on."""
        return self.devices_of(self.namespace())


def _strict_contiguity(x: Any) -> bool | None:
    # array-api-strict has no public notion of memory layout, but its arrays wrap NumPy arrays, whose
    # strides (a broadcast's zeros, a flip's negatives) DLPack hands on to the library an array moves to
    flags = getattr(getattr(x, "_array", None), "flags", None)
    return None if flags is None else bool(flags.c_contiguous)


_BUILTIN = {
    b.name: b
    for b in (
        Backend(
            "numpy", "numpy", _compat("array_api_compat.numpy"), "xsparse.backends.numpy",
            contiguity=lambda x: bool(x.flags.c_contiguous), repeat=_numpy_repeat,
        ),
        Backend(
            "torch", "torch", _compat("array_api_compat.torch"), "xsparse.backends.torch", _torch_devices,
            contiguity=lambda x: bool(x.is_contiguous()), repeat=_torch_repeat,
        ),
        Backend(
            "cupy", "cupy", _compat("array_api_compat.cupy"), "xsparse.backends.cupy",
            contiguity=lambda x: bool(x.flags.c_contiguous),
        ),
        Backend("array_api_strict", "array_api_strict", _compat("array_api_strict"), contiguity=_strict_contiguity),
    )
}
_DETECT: list[tuple[Callable[[Any], bool], str]] = [
    (array_api_compat.is_numpy_namespace, "numpy"),
    (array_api_compat.is_torch_namespace, "torch"),
    (array_api_compat.is_cupy_namespace, "cupy"),
    (array_api_compat.is_array_api_strict_namespace, "array_api_strict"),
]
_EXTRA: dict[str, Backend] = {}
_entry_points_loaded = False


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group="xsparse.backends"):
        backend = ep.load()
        if callable(backend) and not isinstance(backend, Backend):
            backend = backend()
        if not isinstance(backend, Backend):
            raise TypeError(
                f"xsparse.backends entry point '{ep.name}' loaded {type(backend).__name__}, not an "
                "xsparse.backends.Backend. Make the entry point name a Backend instance or a function returning one."
            )
        _EXTRA.setdefault(backend.name, backend)


def registered_backends() -> list[Backend]:
    """Every backend xsparse knows: the built-in ones and those of installed entry points."""
    _load_entry_points()
    return [*_BUILTIN.values(), *_EXTRA.values()]


def get_backend(name: str | Backend) -> Backend:
    """The backend called ``name``; raises ValueError naming the known ones when there is none."""
    if isinstance(name, Backend):
        return name
    if name in _BUILTIN:
        return _BUILTIN[name]
    _load_entry_points()
    if name in _EXTRA:
        return _EXTRA[name]
    namespace = _array_api_module(name)
    if namespace is not None:
        # any Array API library, by the name of its namespace module (jax.numpy): the generic backend
        return backend_of_array(namespace.asarray(0))
    known = ", ".join(repr(b.name) for b in registered_backends())
    raise ValueError(
        f"get_backend: unknown backend (backend={name!r}). Known backends: {known}; any module that is an Array API "
        "namespace (jax.numpy) works by its name too, and a third-party backend registers through the "
        "'xsparse.backends' entry-point group."
    )


def _array_api_module(name: str) -> Any:
    """The module called ``name`` where it is an Array API namespace (it declares ``__array_api_version__``),
    else None."""
    if not name or not all(part.isidentifier() for part in name.split(".")):
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    return module if hasattr(module, "__array_api_version__") and hasattr(module, "asarray") else None


def backend_of_array(x: Any) -> Backend:
    """The backend that owns the (strided) array ``x``.

    A namespace that is none of the built-in ones becomes a generic backend named after its module, so
    any Array API library works on the generic kernels.
    """
    xp = array_api_compat.array_namespace(x)
    for is_it, name in _DETECT:
        if is_it(xp):
            return _BUILTIN[name]
    # a plug-in backend for this library wins over the generic one made up below
    _load_entry_points()
    for backend in _EXTRA.values():
        if backend.library == xp.__name__.split(".")[0]:
            return backend
    name = xp.__name__
    if name not in _EXTRA:
        _require_int64(xp, name)
    backend = Backend(name, name.split(".")[0], lambda: xp)
    _EXTRA.setdefault(name, backend)
    return _EXTRA[name]


def _require_int64(xp: Any, name: str) -> None:
    """Raise where the namespace makes another dtype when int64 is asked (JAX without its 64-bit mode): the
    generic kernels compute positions and sort keys in int64, which would silently wrap around."""
    if not (hasattr(xp, "asarray") and hasattr(xp, "int64")):
        return  # no namespace to compute with: its first operation says so
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = xp.asarray(0, dtype=xp.int64).dtype
    if got != xp.int64:
        hint = " (JAX without 64-bit mode: call jax.config.update('jax_enable_x64', True) at start-up, or set JAX_ENABLE_X64=1)"
        raise TypeError(
            f"backend {name!r}: xsparse computes indices in int64, and this library gives {got} where int64 is asked"
            f"{hint if name.split('.')[0] == 'jax' else ''}. Enable its 64-bit integers first."
        )


_default: contextvars.ContextVar[str] = contextvars.ContextVar("xsparse_default_backend", default="numpy")


def get_default_backend() -> Backend:
    """The backend that Python scalars and lists go to (NumPy unless changed in this context)."""
    return get_backend(_default.get())


def set_default_backend(name: str | Backend) -> None:
    """Set the default backend for the current thread / context (see :func:`default_backend`)."""
    _default.set(get_backend(name).name)


@contextlib.contextmanager
def default_backend(name: str | Backend) -> Iterator[Backend]:
    """Context manager that makes ``name`` the default backend inside the ``with`` block.

    Examples
    --------
    >>> import xsparse as xs
    >>> with xs.default_backend("array_api_strict"):
    ...     print(xs.get_default_backend().name)
    array_api_strict
    >>> xs.get_default_backend().name
    'numpy'
    """
    backend = get_backend(name)
    token = _default.set(backend.name)
    try:
        yield backend
    finally:
        _default.reset(token)


def release_cached_memory() -> int:
    """Give back to the system the large output buffers the NumPy backend keeps for reuse.

    Products and sums whose result is 4 MiB or more (a SpMM of many columns, the sums of a million
    columns) take its memory from the blocks that earlier results of about that size released, instead of a fresh mapping with a page fault per page.
    The pool holds at most four blocks and an eighth of the machine's memory; this empties it (as
    ``torch.cuda.empty_cache`` does for torch's CUDA allocator).

    Returns
    -------
    int
        The number of bytes freed; 0 when nothing was held (or the compiled kernels were never used).

    Examples
    --------
    >>> import xsparse as xs
    >>> xs.backends.release_cached_memory() >= 0
    True
    """
    if "xsparse.backends._cpu" not in sys.modules:
        return 0
    return int(sys.modules["xsparse.backends._cpu"].release_cached_memory())
