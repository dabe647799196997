"""How every notebook shows a table: whole numbers as integers, other numbers to a few significant figures.

Counts (batch, layers, steps, tokens) often arrive as floats -- from JSON, or from a column that also holds a
missing value -- and pandas prints them as `7.0` or `57344.000000`; a column of small values prints as
`0.000003`. `tidy` returns a copy for display that reads as a person would write it. It formats cell by cell, so
a transposed table (one run per column, a mix of kinds per row) comes out right too.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import pandas as pd

MISSING = "—"


def format_number(value: Any, sig: int = 4) -> Any:
    """One cell for display: an integer, a whole float, or a float with `sig` or more digits before the point as a
    (rounded) integer, with thousands separators; another float to `sig` significant figures
    (scientific below 1e-3); NaN or None as a dash; anything else (text, booleans) unchanged."""
    if value is None or isinstance(value, bool):
        return MISSING if value is None else value
    if isinstance(value, Integral):
        return _integer(int(value))
    if isinstance(value, Real):
        v = float(value)
        if math.isnan(v):
            return MISSING
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if (v.is_integer() or abs(v) >= 10 ** (sig - 1)) and abs(v) < 2 ** 53:
            return _integer(round(v))  # `sig` figures before the point: the fraction is noise
        if v != 0 and abs(v) < 1e-3:
            return f"{v:.{sig - 1}e}"
        return f"{v:.{sig}g}"
    return value


def _integer(n: int) -> str:
    return f"{n:,}"   # separators from 1,000 up, as the text's numbers have them: one column reads one way


def tidy(df: pd.DataFrame, sig: int = 4) -> pd.DataFrame:
    """A copy of `df` for display, each cell through `format_number` (index and column names unchanged)."""
    out = df.copy().astype(object)
    for c in out.columns:
        out[c] = [format_number(v, sig) for v in df[c]]
    return out


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`3 steps`, `1 step`: a count with its noun in the right number (never "step(s)")."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
