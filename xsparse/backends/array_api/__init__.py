"""The generic reference kernels, written against the Array API namespace ``xp`` alone.

They run on any compliant backend (array-api-strict included) and are the oracle the native kernels
are tested against. One module per area of operations; importing the package registers them all.
"""

from __future__ import annotations

from . import conversion, elementwise
from . import indexing
from . import shape
from . import reduction
from . import semi_structured
from . import linalg

__all__ = ["indexing", "conversion", "elementwise", "shape", "reduction", "semi_structured", "linalg"]
