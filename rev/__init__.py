"""rev: reversible training of small GPTs, for the revbook workbook.

Four rooms, imports pointing down only: `rev.core` (the reversible idea) <- `rev.engine` (what trains) <-
`rev.book` (what notebooks 00-07 call) and `rev.chapters` (the companion chapters 08-10).
"""
from .core.model import GPT, GPTConfig, TRUNKS
from .core.reversible import reconstruction_error
from .core.streams import STREAMS

__version__ = "0.1.0"
__all__ = ["GPT", "GPTConfig", "TRUNKS", "STREAMS", "reconstruction_error"]
