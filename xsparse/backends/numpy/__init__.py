"""Native CPU kernels of the NumPy backend: the compiled kernels of ``_cpu`` and SciPy's.

One module per area of operations; importing the package (which the dispatcher does the first time a
NumPy array reaches it) registers them all.
"""

from __future__ import annotations

from . import conversion, elementwise
from . import indexing
from . import linalg
from . import reduction
from . import shape
from . import solve
from . import sorting

__all__ = ["indexing", "linalg", "conversion", "elementwise", "reduction", "shape", "solve", "sorting"]
