"""Native CPU kernels of the NumPy backend: the compiled kernels of ``_cpu`` and SciPy's.

One module per area of operations; importing the package (which the dispatcher does the first time a
NumPy array reaches it) registers them all.
"""

from __future__ import annotations

from . import conversion, elementwise

__all__ = ["conversion", "elementwise"]
