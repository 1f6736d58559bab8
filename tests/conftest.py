"""Fixtures shared by the tests: backends (skipped with a reason when absent) and sparse layouts."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

import xsparse as xs

BACKENDS = ["numpy", "torch", "array_api_strict", "cupy"]
SPARSE_LAYOUTS = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]


def backend_skip_reason(name: str) -> str | None:
    """Why a backend cannot be tested here, or None."""
    if importlib.util.find_spec(name) is None:
        return f"{name} is not installed"
    if name == "cupy":
        try:
            import cupy

            if cupy.cuda.runtime.getDeviceCount() == 0:
                return "CuPy found no CUDA device"
        except Exception as exc:  # any CUDA runtime failure means: no usable GPU here
            return f"CuPy cannot reach a CUDA device ({type(exc).__name__})"
    return None


def load_native_kernels() -> None:
    """Load every usable backend, so that its native kernels are registered before a test module
    parametrises over the registry."""
    for backend in xs.registered_backends():
        if backend.kernels is not None and backend_skip_reason(backend.name) is None:
            backend.load()


def backend_params(names: list[str] = BACKENDS) -> list[Any]:
    return [
        pytest.param(n, marks=pytest.mark.skip(reason=r)) if (r := backend_skip_reason(n)) else n for n in names
    ]


@pytest.fixture(params=backend_params())
def backend(request: pytest.FixtureRequest) -> str:
    """The name of a backend that is installed (and, for CuPy, has a GPU)."""
    return str(request.param)


@pytest.fixture
def xp(backend: str) -> Any:
    """The Array API namespace of the backend."""
    return xs.get_backend(backend).namespace()


@pytest.fixture(params=SPARSE_LAYOUTS, ids=str)
def layout(request: pytest.FixtureRequest) -> xs.Layout:
    """Each sparse layout of the COO and compressed families."""
    return request.param  # type: ignore[no-any-return]
