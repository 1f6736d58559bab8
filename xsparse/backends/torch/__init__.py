"""Native kernels of the torch backend: torch.sparse's own, zero-copy.

One module per area of operations; importing the package (which the dispatcher does the first time a
torch tensor reaches it) registers them all.
"""

from __future__ import annotations

from . import conversion, elementwise
from . import indexing
from . import reduction
from . import semi_structured
from . import linalg
from . import sorting
from .conversion import from_torch, to_torch

__all__ = ["indexing", "conversion", "elementwise", "reduction", "semi_structured", "linalg", "sorting", "from_torch", "to_torch"]
