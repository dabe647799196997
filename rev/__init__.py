"""rev: reversible training of small GPTs, for the revbook workbook."""
from .model import GPT, GPTConfig, TRUNKS
from .reversible import reconstruction_error
from .streams import STREAMS

__version__ = "0.1.0"
__all__ = ["GPT", "GPTConfig", "TRUNKS", "STREAMS", "reconstruction_error"]
