"""Fixtures shared by the tests: backends (skipped with a reason when absent) and sparse layouts."""

from __future__ import annotations

import importlib.util
import sys
import warnings
from typing import Any

import pytest

import xsparse as xs
from xsparse.conformance.strategies import DeviceNamespace, device_named

BACKENDS = ["numpy", "torch", "array_api_strict", "cupy"]
SPARSE_LAYOUTS = [xs.sparse_coo, xs.sparse_csr, xs.sparse_csc, xs.sparse_bsr, xs.sparse_bsc]


def backend_skip_reason(name: str) -> str | None:
    """Why a backend cannot be tested here, or None."""
    if importlib.util.find_spec(name) is None:
        return f"{name} is not installed"
    if name == "cupy":
        try:
            # a warning at CuPy's import (several CuPy packages installed, a library it failed to preload)
            # is no reason to skip; under the suite's filterwarnings = error it would be an exception here
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import cupy

                if cupy.cuda.runtime.getDeviceCount() == 0:
                    return "CuPy found no CUDA device"
        except Exception as exc:  # any CUDA runtime failure means: no usable GPU here
            return f"CuPy cannot reach a CUDA device ({type(exc).__name__}: {exc})"
    return None


_CUPY_GPU: list[bool] = []


@pytest.fixture(autouse=True)
def _cuda_errors_surface_in_their_test() -> Any:
    """Wait for the GPU after each test that used one, so that an asynchronous CUDA error (an illegal
    address in a kernel, which poisons the context for every later test) fails the test that caused it,
    not the next one. Costs nothing where CuPy and torch's CUDA were not used."""
    yield
    cupy = sys.modules.get("cupy")
    if cupy is not None and getattr(cupy, "__file__", None):
        if not _CUPY_GPU:
            _CUPY_GPU.append(backend_skip_reason("cupy") is None)
        if _CUPY_GPU[0]:
            cupy.cuda.runtime.deviceSynchronize()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.synchronize()


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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--device", action="append", default=[], metavar="BACKEND=DEVICE",
        help="create the inputs that tests draw through the xp fixture on DEVICE of BACKEND (torch=cuda, "
        "array_api_strict=device1); repeatable, one per backend",
    )  # fmt: skip


def _devices(config: pytest.Config) -> dict[str, str]:
    pairs = [opt.partition("=") for opt in config.getoption("--device")]
    bad = [b for b, eq, d in pairs if not (eq and b and d)]
    if bad:
        raise pytest.UsageError(f"pytest --device: expected BACKEND=DEVICE (got={bad!r}). Pass e.g. --device torch=cuda.")
    return {b: d for b, _, d in pairs}


@pytest.fixture
def xp(backend: str, request: pytest.FixtureRequest) -> Any:
    """The Array API namespace of the backend; with ``--device BACKEND=DEVICE``, one that creates its
    arrays on that device."""
    b = xs.get_backend(backend)
    device = _devices(request.config).get(backend)
    return b.namespace() if device is None else DeviceNamespace(b.namespace(), device_named(b, device))


@pytest.fixture(params=SPARSE_LAYOUTS, ids=str)
def layout(request: pytest.FixtureRequest) -> xs.Layout:
    """Each sparse layout of the COO and compressed families."""
    return request.param  # type: ignore[no-any-return]
