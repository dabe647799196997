"""The screening rule and the workbook's run bookkeeping."""
import pytest

from rev.book.runs import RECON_LIMIT, choose, screening_candidates


def _row(name, trunk, stream, val, speed, recon):
    return {"name": name, "trunk": trunk, "h": 1.0, "stream": stream, "val_loss": val, "tokens_per_s": speed,
            "reconstruction_error": recon}


def test_choose_takes_lowest_loss_among_good_reconstructions():
    rows = [_row("base", "residual", "fp32", 2.0, 900, None),
            _row("a", "midpoint_rev", "fp32", 2.3, 800, 1e-6),
            _row("b", "reveuler_rev", "fp32", 2.1, 700, 1e-6),
            _row("c", "reveuler_rev", "fp32", 1.5, 700, 10 * RECON_LIMIT)]
    chosen, reason = choose(rows)
    assert chosen["trunk"] == "reveuler_rev" and "excluded for poor reconstruction: c" in reason
    assert "2.100" in reason and "baseline reached 2.000" in reason


def test_ties_prefer_fp32_then_speed():
    rows = [_row("x", "reveuler_rev", "fp64", 2.000, 999, 0.0),
            _row("y", "reveuler_rev", "fp32", 2.010, 500, 1e-6),
            _row("z", "midpoint_rev", "fp32", 2.005, 600, 1e-6)]
    assert choose(rows)[0]["trunk"] == "midpoint_rev"


def test_no_good_candidate_is_a_clear_error():
    with pytest.raises(ValueError, match="fp64 or fixed"):
        choose([_row("a", "midpoint_rev", "fp32", 2.0, 1, 1.0)])


def test_screening_sets():
    assert len(screening_candidates("smoke")) < len(screening_candidates("cpu"))
    names = [c.name for c in screening_candidates("cpu")]
    assert len(names) == len(set(names)) and names[0] == "residual_h1_fp32"
