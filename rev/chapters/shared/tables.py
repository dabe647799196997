"""How every notebook shows a table: whole numbers as integers, other numbers to a few significant figures.

Counts (batch, layers, steps, tokens) often arrive as floats -- from JSON, or from a column that also holds a
missing value -- and pandas prints them as `7.0` or `57344.000000`; a column of small values prints as
`0.000003`. `tidy` returns a copy for display that reads as a person would write it: cell by cell, so a transposed
table (one run per column, a mix of kinds per row) comes out right too, except that a column holding a value below
1e-3 writes its values below 1e-2 in scientific notation too (one column reads one way: 1.323e-03 beside
8.750e-04, not 0.001323; an h of 0.5 in a transposed run's column stays 0.5); yes/no for booleans; column headers in
words (`tokens_per_s_q1` reads "tokens/s q1").
"""
from __future__ import annotations

import math
import re
from numbers import Integral, Real
from typing import Any

import pandas as pd

MISSING = "—"


def format_number(value: Any, sig: int = 4) -> Any:
    """One cell for display: an integer, a whole float, or a float with `sig` or more digits before the point as a
    (rounded) integer, with thousands separators; another float to `sig` significant figures
    (scientific below 1e-3); NaN or None as a dash; a boolean as yes/no; anything else (text) unchanged."""
    if value is None or isinstance(value, bool):
        return MISSING if value is None else "yes" if value else "no"
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


def tidy(df: pd.DataFrame, sig: int = 4, headers: bool = True) -> pd.DataFrame:
    """A copy of `df` for display, each cell through `format_number`, a column with a value below 1e-3 in one
    notation; with `headers`, column names and the axes' names in words (`header`). Row labels stay as written:
    there they are most often names a reader types (a profile's `d_model`, a run's folder)."""
    out = df.copy().astype(object)
    for c in out.columns:
        out[c] = [_in_column(v, sig, _scientific(df[c])) for v in df[c]]
    if headers:
        out = out.rename(columns=header)
        out.index = out.index.set_names([header(n) for n in out.index.names])
        out.columns = out.columns.set_names([header(n) for n in out.columns.names])
    return out


def header(name: Any) -> Any:
    """A field name in words: underscores as spaces, `per_s` as "/s" (`tokens_per_s_q1` -> "tokens/s q1");
    anything but a snake_case string unchanged, and so are names a reader looks up as they are written: a run's
    folder (`run1_baseline`), a trunk (`midpoint_rev`) or a name built on one (`reveuler_rev_h1_fp32`)."""
    if not isinstance(name, str) or "_" not in name:
        return name
    if " " in name:   # a field with words after it ("MiB_per_sequence (line)"): each word on its own
        return " ".join(header(word) for word in name.split(" "))
    if _identifier(name) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)+", name):
        return name
    return name.replace("_per_s", "/s").replace("_", " ")


def _identifier(name: str) -> bool:
    from ...core.model import TRUNKS
    from .main_runs import EXTRA_RUNS, MAIN_RUNS

    runs = (*MAIN_RUNS, *EXTRA_RUNS)
    return (name in runs or name in TRUNKS or any(name.startswith(f"{t}_") for t in TRUNKS)
            or re.fullmatch(r"run\d+[a-z]?_\w+", name) is not None)


def _numbers(values) -> list[float]:
    return [float(v) for v in values if isinstance(v, Real) and not isinstance(v, (bool, Integral))
            and math.isfinite(float(v))]


def _scientific(column) -> bool:
    """Does this column hold a fraction small enough (below 1e-3, not 0) to need scientific notation?"""
    return any(0 < abs(v) < 1e-3 for v in _numbers(column))


def _in_column(value: Any, sig: int, scientific: bool) -> Any:
    if scientific and isinstance(value, Real) and not isinstance(value, (bool, Integral)):
        v = float(value)
        if math.isfinite(v) and 0 < abs(v) < 1e-2:   # the 1e-3..1e-2 values beside the smaller ones
            return f"{v:.{sig - 1}e}"
    return format_number(value, sig)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`3 steps`, `1 step`: a count with its noun in the right number (never "step(s)")."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def checked(claim: str, holds: bool) -> str:
    """A measured claim as a reader's checklist line: `✓ claim` where it holds, `✗ claim: does not hold` where it
    does not, so a notebook states a check as a sentence rather than printing `claim: True` (a Python value)."""
    return f"✓ {claim}" if holds else f"✗ {claim}: does not hold"


def verdict_table(rows: list[tuple[str, Any, str, bool | None]]) -> pd.DataFrame:
    """A verdict table, one row per claim: (claim, measured, bound, holds). `measured` is a number (shown by
    `format_number`) or text; `bound` says what the claim asks of it ("≤ 1e-6", "interval excludes 1");
    `holds` None reads "not judged" (too few rounds, a tie), so the table can say each of the three outcomes."""
    verdict = {True: "holds", False: "does not hold", None: "not judged"}
    return pd.DataFrame([{"claim": c, "measured": format_number(m), "bound": b, "verdict": verdict[h]}
                         for c, m, b, h in rows]).set_index("claim")
