"""Build the NumPy backend's compiled CPU kernels (``xsparse.backends._native``).

The kernels take and return plain buffers (no NumPy headers are needed to build them) and use OpenMP
for their parallel loops. When no C++ compiler is available the package still installs and the NumPy
backend's native kernels decline, so the SciPy and generic kernels take over.
"""

from __future__ import annotations

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class _OptionalBuildExt(build_ext):
    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # pragma: no cover - only without a compiler
            print(f"xsparse: compiled kernels not built ({exc}); the NumPy backend falls back to SciPy.")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # pragma: no cover - only without a compiler
            print(f"xsparse: {ext.name} not built ({exc}); the NumPy backend falls back to SciPy.")


_openmp = [] if os.environ.get("XSPARSE_NO_OPENMP") else ["-fopenmp"]

setup(
    ext_modules=[
        Extension(
            "xsparse.backends._native",
            sources=["xsparse/backends/_native.cpp"],
            language="c++",
            extra_compile_args=["-O3", "-std=c++17", *_openmp],
            extra_link_args=_openmp,
        )
    ],
    cmdclass={"build_ext": _OptionalBuildExt},
)
