"""rev: reversible training of small GPTs, for the revbook workbook.

Seven rooms, imports pointing down only: `rev.core` (the reversible idea, the model, its optimizer and training step)
<- `rev.base` (profiles, device, files, the command line's plumbing) <- `rev.data` (text to token files) and
`rev.measure` (memory, slicing, the max-batch search, benches, statistics), which do not import each other <-
`rev.training` (a token-budgeted run) <- `rev.chapters` (what each notebook calls, one package per chapter) and
`rev.book` (what turns the notebooks into editions: the headless workbook run, reference outputs, student edition,
course, HTML site, Colab bundle). The last two do not import each other.
"""
from .core.model import GPT, GPTConfig, TRUNKS
from .core.reversible import reconstruction_error
from .core.streams import STREAMS

__version__ = "0.1.0"
__all__ = ["GPT", "GPTConfig", "TRUNKS", "STREAMS", "reconstruction_error"]
