"""rev: reversible training of small GPTs, for the revbook workbook."""
__version__ = "0.1.0"
