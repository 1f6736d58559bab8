"""Native kernels of the CuPy backend: cuSPARSE through cupyx.scipy.sparse, cuSPARSELt, and custom CUDA kernels.

One module per area of operations; importing the package (which the dispatcher does the first time a
CuPy array reaches it) registers them all. CuPy itself is imported only when a kernel runs, so importing
this package (or xsparse) never imports CuPy.
"""

from __future__ import annotations

from . import conversion
from . import elementwise
from . import linalg
from . import semi_structured
from .conversion import from_cupyx, to_cupyx

__all__ = ["conversion", "elementwise", "linalg", "semi_structured", "from_cupyx", "to_cupyx"]
