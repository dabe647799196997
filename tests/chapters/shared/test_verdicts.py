"""The one home of every verdict (rev.chapters.shared.verdicts): each rule fed the case that turns it (a gap exactly
at the tie, an interval touching 1, a run with a load burst, runs timed apart), and no tie compared anywhere else
in the package or the notebooks."""
from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from rev.chapters.shared import verdicts as V

ROOT = Path(__file__).resolve().parents[3]


# --- ties and losses -----------------------------------------------------------------------------------------

def test_a_gap_exactly_at_the_tie_is_a_tie_and_a_hair_beyond_it_is_not():
    tie = V.Tie(0.25, "a test tie", measured=True)
    assert V.side_of_tie(0.25, tie) == 0 and V.side_of_tie(-0.25, tie) == 0     # `<` would call these a win/loss
    above = math.nextafter(0.25, math.inf)
    assert V.side_of_tie(above, tie) == 1 and V.side_of_tie(-above, tie) == -1
    assert V.side_of_tie(0.0, 0.0) == 0 and V.side_of_tie(1e-12, 0.0) == 1      # a float margin reads the same
    assert V.loss_words(0.25, "a", "b", tie).startswith("a tie, within 0.25 nats")
    assert V.loss_words(above, "a", "b", tie) == "a lost by 0.250 nats"
    assert V.loss_words(-0.5, "a", "b", tie) == "a won by 0.500 nats"
    assert [V.loss_side_word(d, tie) for d in (-0.3, 0.25, 0.3)] == [V.LOWER, V.TIED, V.HIGHER]
    with pytest.raises(ValueError, match="tie margin must be a number >= 0"):
        V.side_of_tie(0.1, -0.01)


def test_ties_with_the_best_include_the_boundary():
    assert V.tied_with_best([2.0, 2.25, 2.5], 0.25) == [True, True, False]


def test_a_tie_carries_its_value_and_its_source():
    measured = V.seed_tie({"seeds": 3, "tie": 0.227})
    assert measured == V.Tie(0.227, "the seed tie measured on runs 1 and 2 over 3 seeds", measured=True)
    assert measured.text() == "0.227 nats, the seed tie measured on runs 1 and 2 over 3 seeds"
    assert V.seed_tie(None) is V.FALLBACK_TIE and V.seed_tie({"seeds": 1}) is V.FALLBACK_TIE
    assert not V.FALLBACK_TIE.measured and "stated fallback" in V.FALLBACK_TIE.text()
    assert measured.wider_than(V.FALLBACK_TIE) and not V.FALLBACK_TIE.wider_than(measured)


def test_ratio_and_size_ties_keep_the_boundary_inside():
    assert V.ratio_side(1.0, 1.5, 1.5) == 0 and V.ratio_side(1.5, 1.0, 1.5) == 0    # exactly 1.5x: a tie
    assert V.ratio_side(1.0, 1.6, 1.5) == -1 and V.ratio_side(1.6, 1.0, 1.5) == 1
    assert V.ratio_side(0.0, 0.0, 1.5) == 0 and V.ratio_side(0.0, 1e-9, 1.5) == -1
    with pytest.raises(ValueError, match="ratio margin must be > 1"):
        V.ratio_side(1.0, 2.0, 1.0)
    assert V.inside_by(0.125, 1.25, 10) and not V.inside_by(0.1250001, 1.25, 10)


# --- intervals and speeds ------------------------------------------------------------------------------------

def test_an_interval_touching_the_reference_holds_it():
    assert V.interval_side(1.0, 1.2, 1.0) == 0 and V.interval_side(0.8, 1.0, 1.0) == 0
    assert V.interval_side(math.nextafter(1.0, 2), 1.2, 1.0) == 1 and V.interval_side(0.8, 0.99, 1.0) == -1
    with pytest.raises(ValueError, match="low end"):
        V.interval_side(2.0, 1.0, 1.0)


def test_a_speed_verdict_needs_interleaved_timing_and_enough_rounds():
    clear = V.Spread(0.8, 0.75, 0.85, 15, "95% bootstrap interval", interleaved=True)
    assert V.speed_verdict(clear) == V.SLOWER
    assert V.speed_verdict(V.Spread(1.3, 1.2, 1.4, 15, "interval", interleaved=True)) == V.FASTER
    assert V.speed_verdict(V.Spread(0.9, 0.8, 1.0, 15, "interval", interleaved=True)) == V.TOO_NOISY
    # the same numbers from runs timed apart: no verdict, however tight
    apart = V.Spread(0.8, 0.79, 0.81, 300, "95% bootstrap interval", interleaved=False)
    assert V.speed_verdict(apart) == V.TIMED_APART and V.speed_verdict(None) == V.TIMED_APART
    # four interleaved rounds, however clear, are too few to test
    four = V.Spread(0.5, 0.45, 0.55, V.MIN_ROUNDS - 1, "quartiles over 4 interleaved rounds", interleaved=True)
    assert V.speed_verdict(four) == V.TOO_NOISY
    assert V.Spread(0.5, math.nan, math.nan, 9, "timed apart").text() == "0.50 (timed apart)"


def test_compare_speeds_reads_a_3_percent_shift_that_overlapping_quartiles_hide():
    rng = np.random.default_rng(1)
    fast, slow = (list(m + 60 * rng.standard_normal(200)) for m in (1000, 970))
    assert np.percentile(slow, 75) > np.percentile(fast, 25)          # the middle halves overlap ...
    assert V.compare_speeds(fast, slow) == V.FASTER and V.compare_speeds(slow, fast) == V.SLOWER
    assert V.compare_speeds([1, 5, 9, 13], [2, 6, 10, 14]) == V.TOO_NOISY


# --- the machine's speed ---------------------------------------------------------------------------------------

def test_a_load_burst_within_a_run_is_a_change_of_the_machines_speed():
    rng = np.random.default_rng(0)
    quiet = list(1000 * (1 + 0.03 * rng.standard_normal(160)))
    burst = quiet[:60] + [s * 0.4 for s in quiet[60:100]] + quiet[100:]
    d = V.machine_drift(burst)
    assert d.changed and d.ratio > 2 and "the machine's speed changed during the run" in d.text()
    steady = V.machine_drift(quiet)
    assert not steady.changed and steady.ratio < 1 + V.DRIFT_LIMIT and "held" in steady.text()
    # a drift just under the limit holds, just over changes (windows of steady steps at two speeds)
    under = V.machine_drift([1000.0] * 80 + [1000.0 / 1.14] * 80)
    over = V.machine_drift([1000.0] * 80 + [1000.0 / 1.16] * 80)
    assert not under.changed and over.changed
    # heavy but stationary step noise is not a change: the extreme windows' medians stay within their noise
    noisy = list(1000 * np.exp(0.5 * rng.standard_normal(160)))
    assert not V.machine_drift(noisy).changed
    assert V.machine_drift([1000.0] * (2 * V.DRIFT_MIN_STEPS - 1)) is None
    ref = V.machine_drift([5.0, 5.1, 2.0, 5.0], per_window=1, source="reference workload")
    assert ref.changed and ref.significant and "reference workload" in ref.text()


# --- one home: no tie compared anywhere else ----------------------------------------------------------------

TIE_NAME = re.compile(r"(?i)(^|_)ties?($|_)")


def _tie_names(node: ast.AST) -> list[str]:
    """Names of ties (`tie`, `LOSS_TIE`, `TIE_INSIDE`, `x.tie`...) in an operand, leaving out a call's arguments:
    `side_of_tie(d, tie) > 0` reads a verdict, `abs(d) <= tie` draws one."""
    if isinstance(node, ast.Call):
        return _tie_names(node.func) if not isinstance(node.func, ast.Name) else []
    own = [node.id] if isinstance(node, ast.Name) else [node.attr] if isinstance(node, ast.Attribute) else []
    return [n for n in own if TIE_NAME.search(n)] + [n for child in ast.iter_child_nodes(node)
                                                      for n in _tie_names(child)]


def _inline_ties(source: str) -> list[str]:
    """The comparisons in Python `source` with a tie among their operands: a verdict drawn outside `verdicts`."""
    return [ast.unparse(node) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Compare)
            and any(_tie_names(operand) for operand in [node.left, *node.comparators])]


def _cell_source(cell: dict) -> str:
    text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in text.splitlines()) + "\n"


def test_the_grep_finds_an_inline_tie():
    assert _inline_ties("if abs(gap) <= LOSS_TIE:\n    pass\n")
    assert _inline_ties("x = (a if d < best - tie else\n     b)\n")
    assert _inline_ties("tied = [r for r in ok if r['v'] <= best + TIE]\n")
    assert _inline_ties("if gap > spread.tie:\n    pass\n") and _inline_ties("n = int((diff < -tie).sum())\n")
    assert not _inline_ties("verdict = side_of_tie(d, tie)\nprint(f'{tie} <= 1')\nok = side_of_tie(d, tie) > 0\n")


def test_no_tie_is_compared_outside_the_verdicts_module():
    home = ROOT / "rev" / "chapters" / "shared" / "verdicts.py"
    offenders = {str(p.relative_to(ROOT)): hits for p in sorted((ROOT / "rev").rglob("*.py")) if p != home
                 for hits in [_inline_ties(p.read_text())] if hits}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        hits = [h for c in cells if c["cell_type"] == "code" for h in _inline_ties(_cell_source(c))]
        if hits:
            offenders[str(nb.relative_to(ROOT))] = hits
    assert not offenders, f"tie comparisons outside rev/chapters/shared/verdicts.py: {offenders}"
