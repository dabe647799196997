"""The screening rule and the workbook's run bookkeeping."""
import pytest

from rev.chapters.shared.runs import main_run_dirs
from rev.chapters.screening.rule import choose, screening_candidates, screening_verdicts
from rev.core.reversible import RECON_LIMIT


def _row(name, trunk, stream, val, speed, recon):
    return {"name": name, "trunk": trunk, "h": 1.0, "stream": stream, "val_loss": val, "tokens_per_s": speed,
            "reconstruction_error": recon}


def test_choose_takes_lowest_loss_among_good_reconstructions():
    rows = [_row("base", "residual", "fp32", 2.0, 900, None),
            _row("a", "midpoint_rev", "fp32", 2.3, 800, 1e-6),
            _row("b", "reveuler_rev", "fp32", 2.1, 700, 1e-6),
            _row("c", "reveuler_rev", "fp32", 1.5, 700, 10 * RECON_LIMIT)]
    chosen, reason = choose(rows)
    assert chosen["trunk"] == "reveuler_rev" and reason.startswith("b: val loss 2.100")


def test_ties_prefer_fp32_then_the_lower_loss_never_speed():
    rows = [_row("x", "reveuler_rev", "fp64", 2.000, 999, 0.0),
            _row("y", "reveuler_rev", "fp32", 2.005, 500, 1e-6),
            _row("z", "midpoint_rev", "fp32", 2.010, 900, 1e-6)]   # faster, but timed apart: speed does not decide
    assert choose(rows)[0]["trunk"] == "reveuler_rev"


def test_no_good_candidate_is_a_clear_error():
    with pytest.raises(ValueError, match="fp64 or fixed"):
        choose([_row("a", "midpoint_rev", "fp32", 2.0, 1, 1.0)])


def test_screening_sets():
    assert len(screening_candidates("smoke")) < len(screening_candidates("cpu"))
    names = [c.name for c in screening_candidates("cpu")]
    assert len(names) == len(set(names)) and names[0] == "residual_h1_fp32"


def test_verdicts_agree_with_choose_and_a_tighter_limit_leaves_exact_streams():
    rows = [_row("base", "residual", "fp32", 2.0, 900, None),
            _row("a", "reveuler_rev", "fp32", 2.10, 700, 1e-6),
            _row("b", "reveuler_rev", "fixed", 2.11, 300, 0.0),
            _row("c", "midpoint_rev", "fp32", 1.5, 700, 10 * RECON_LIMIT)]
    v = screening_verdicts(rows)
    assert list(v.index[v["picked"]]) == ["a"] and choose(rows)[0]["stream"] == "fp32"
    assert not v.loc["c", "within_limit"] and v.loc["b", "in_tie"]
    strict = screening_verdicts(rows, recon_limit=1e-8)
    assert list(strict.index[strict["within_limit"]]) == ["b"]
    assert choose(rows, recon_limit=1e-8)[0]["stream"] == "fixed"


def test_main_run_dirs_use_the_profile_folder_and_labels(tmp_path):
    dirs = main_run_dirs(tmp_path, "smoke", ["run1_baseline", "run2_reversible_same_batch"])
    assert list(dirs.values()) == [tmp_path / "smoke" / "run1_baseline", tmp_path / "smoke" / "run2_reversible_same_batch"]
    assert len(set(dirs)) == 2


def test_a_ratio_of_one_round_says_round_not_rounds():
    from rev.chapters.shared.runs import round_ratio

    assert round_ratio([1.0], [2.0]).kind == "quartiles over 1 interleaved round"
    assert round_ratio([1.0] * 6, [2.0] * 6).kind.endswith("over 6 interleaved rounds")
