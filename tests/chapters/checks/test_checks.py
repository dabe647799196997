"""The in-process test runner and the live checks of notebook 02."""
import os
import sys
import textwrap

import pytest
import torch

from rev.chapters.checks import exercises, measure as checks, suite

SAMPLE = textwrap.dedent('''
    """Module docstring of the sample file."""
    import pytest
    import torch

    torch.set_num_threads(1)  # as a conftest might: the run must not leave it so


    def test_adds_up():
        """Two and two make four.

        More detail that the table leaves out."""
        assert 2 + 2 == 4


    def test_breaks():
        """A check that fails on purpose."""
        assert 1 == 2, "one is not two"


    @pytest.mark.skip(reason="not today")
    def test_skipped_one():
        """Skipped by a marker."""


    @pytest.mark.parametrize("n", [1, 2])
    def test_without_a_docstring(n):
        assert n > 0


    @pytest.fixture
    def broken():
        raise RuntimeError("fixture setup fails")


    def test_setup_error(broken):
        pass
''')


@pytest.fixture
def sample_dir(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    return tmp_path


def test_run_tests_records_outcomes_and_descriptions(sample_dir):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    path, cwd, rng = list(sys.path), os.getcwd(), torch.random.get_rng_state()
    try:
        df = suite.run_tests("test_sample.py", base=sample_dir).set_index("test")
        threads_after = torch.get_num_threads()
    finally:
        torch.set_num_threads(threads)
    assert df.loc["test_adds_up", "outcome"] == "passed"
    assert df.loc["test_adds_up", "checks"] == "Two and two make four."
    assert df.loc["test_breaks", "outcome"] == "failed"
    assert "one is not two" in df.loc["test_breaks", "message"]
    assert df.loc["test_skipped_one", "outcome"] == "skipped"
    assert df.loc["test_skipped_one", "message"] == "not today"
    assert df.loc["test_setup_error", "outcome"] == "error"
    params = df.loc["test_without_a_docstring"]
    assert list(params["params"]) == ["1", "2"] and set(params["outcome"]) == {"passed"}
    assert set(params["checks"]) == {"Without a docstring"}
    assert set(df["module"]) == {"Module docstring of the sample file."}
    assert (df["duration_s"] >= 0).all()
    assert df.attrs["exit_code"] == 1
    counts = suite.outcome_counts(df)
    assert (counts["passed"], counts["failed"], counts["skipped"], counts["error"]) == (3, 1, 1, 1)
    assert not suite.all_passed(df)
    # the run left nothing behind that later code could trip on
    assert sys.path == path and os.getcwd() == cwd and torch.equal(torch.random.get_rng_state(), rng)
    assert threads_after == 2
    assert not (sample_dir / ".pytest_cache").exists()


def test_run_tests_keyword_and_rerun(sample_dir):
    """A second run in the same process works, and -k selects."""
    df = suite.run_tests("test_sample.py", keyword="adds or docstring", base=sample_dir)
    assert sorted(df["test"]) == ["test_adds_up", "test_without_a_docstring", "test_without_a_docstring"]
    assert suite.all_passed(df)


def test_run_tests_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        suite.run_tests("test_missing.py", base=tmp_path)


def test_tests_dir_and_profile_selection():
    assert (suite.tests_dir() / "core/test_reversible.py").is_file()
    for profile in ("smoke", "cpu", "t4", "full"):
        for file, _ in suite.selection_for_profile(profile):
            assert (suite.tests_dir() / file).is_file()


def test_what_a_test_checks_is_its_first_sentence_whole():
    doc = """On the exact stream the rebuilt states are bit-identical, so a backward
    must give the stored twin's gradients to rounding. Second sentence.

    A paragraph."""
    assert suite._first_sentence(doc) == ("On the exact stream the rebuilt states are bit-identical, so a backward "
                                           "must give the stored twin's gradients to rounding.")
    assert suite._first_sentence("No full stop\nover two lines") == "No full stop over two lines"
    assert suite._first_sentence(None) == ""


def test_readable_name():
    assert suite.readable_name("test_memory_is_flat[a-1]") == "Memory is flat"


def test_gradient_differences_fp64_are_tiny():
    df = checks.gradient_differences(bases=("reveuler",), streams=("fp64", "fp32"),
                                     geometry=dict(n_layer=2, d_model=16, seq_len=8), batch=2)
    worst = df.groupby("stream")["rel_diff"].max()
    assert worst["fp64"] < 1e-9
    assert worst["fp32"] > worst["fp64"]  # fp32 stream rounding shows up in the rebuilt activations


def test_autocast_cosine_and_broken_variant():
    """Under bf16 autocast the correct backward matches; one that forgets autocast is measurably off."""
    df = checks.autocast_cosines(bases=("reveuler",), streams=("fp32", "fixed"),
                                 geometry=dict(n_layer=2, d_model=32, seq_len=8), batch=2)
    worst = df.groupby(["stream", "variant"])[["cosine", "rel_diff"]].agg({"cosine": "min", "rel_diff": "max"})
    assert worst.loc[("fp32", "correct"), "cosine"] > 0.999
    assert worst.loc[("fixed", "correct"), "rel_diff"] < 1e-6  # bit-exact rebuild: recomputation repeats forward
    assert worst.loc[("fixed", "forgets autocast"), "rel_diff"] > 1e-4


def test_depth_memory_flat_for_reversible_trunk():
    df = checks.depth_memory(depths=(2, 6), trunks=("residual", "reveuler_rev"),
                             geometry=dict(seq_len=32, d_model=32), batch=2)
    assert list(df.index) == [2, 6]
    ratio = checks.growth_ratios(df)
    assert ratio["reveuler_rev"] < 1.05
    assert ratio["residual"] > 1.5


def test_layer_ticks():
    names = ["wte.weight", "wpe.weight", "trunk.blocks.0.ln1.weight", "trunk.blocks.0.mlp.fc.weight",
             "trunk.blocks.1.ln1.weight", "ln_f.weight", "ln_f.bias"]
    assert checks.layer_ticks(names) == ([0.5, 2.5, 4.0, 5.5], ["emb", "L0", "L1", "ln_f"])


# --- break it (exercises 02.1, 02.3) -----------------------------------------

def test_sabotage_checks_refuse_a_correct_backward():
    import contextlib

    from rev.core.integrators import RevEuler
    from rev.core.reversible import AutocastState

    # the correct inverse is refused before any test runs, with a hint at what to change
    with pytest.raises(AssertionError, match="Swap the order"):
        exercises.check_swapped_inverse(RevEuler)
    with pytest.raises(AssertionError, match="nullcontext"):
        exercises.check_autocast_sabotage(AutocastState.context)
    with checks.forgetting_autocast():
        assert isinstance(AutocastState("cpu", True, torch.bfloat16).context(), contextlib.nullcontext)
    assert not isinstance(AutocastState("cpu", True, torch.bfloat16).context(), contextlib.nullcontext)


def test_swapped_inverse_is_caught():
    from rev.core.integrators import INTEGRATORS, RevEuler

    class Swapped(RevEuler):
        def inverse(self, state, call, h, layer, sub):
            y, z = state
            y = sub(y, call("F", z), h)
            return (y, sub(z, call("G", y), h))

    line = exercises.check_swapped_inverse(Swapped)
    assert "O(h^2.0)" in line and line.endswith("tests caught it") and not line.split(";")[1].startswith(" 0 of")
    assert INTEGRATORS["reveuler"] is RevEuler  # the replacement ends with the check


def test_verdict_and_stream_gap_from_tables():
    import pandas as pd

    tests = pd.DataFrame(dict(nodeid=["a", "b"], outcome=["passed", "failed"], message=["", "boom"]))
    assert list(suite.not_ok(tests)["nodeid"]) == ["b"]
    with pytest.raises(AssertionError, match="b: failed boom"):
        suite.require_all_passed(tests)
    suite.require_all_passed(tests.iloc[:1])
    grad = pd.DataFrame(dict(stream=["fp32", "fp64", "fixed"], rel_diff=[1e-8, 1e-16, 0.0]))
    assert checks.stream_gap(grad)["decades"] == pytest.approx(8.0)


# --- the verdicts of section 3 follow the numbers -----------------------------------------------------------


def _cos(ok32: tuple[float, float], bad32: tuple[float, float], okfx: tuple[float, float] = (1.0, 0.0),
         badfx: tuple[float, float] = (0.99997, 8e-3)):
    """An `autocast_cosines`-shaped table: (cosine, relative difference) per stream and variant."""
    import pandas as pd

    rows = [(s, v, c, r) for s, v, (c, r) in (("fp32", "correct", ok32), ("fp32", "forgets autocast", bad32),
                                               ("fixed", "correct", okfx), ("fixed", "forgets autocast", badfx))]
    return pd.DataFrame(rows, columns=["stream", "variant", "cosine", "rel_diff"])


def _mem():
    import pandas as pd

    return pd.DataFrame({"residual": [1.0, 4.0], "residual_ckpt": [1.0, 2.0], "midpoint_rev": [1.0, 1.0],
                         "reveuler_rev": [1.0, 1.0]}, index=pd.Index([2, 8], name="n_layer"))


def test_autocast_verdicts_follow_the_measurement():
    # as measured: the cosine barely moves, the norm bound catches the break, a correct backward passes
    usual = _cos(ok32=(1.0, 8e-8), bad32=(0.99997, 8e-3))
    assert checks.autocast_verdicts(usual) == {"cosine catches": False, "norm bound catches": True,
                                               "correct passes": True}
    # a break the cosine does catch, and one the norm bound misses
    loud = _cos(ok32=(1.0, 8e-8), bad32=(0.9, 5e-5), badfx=(0.9, 8e-3))
    assert checks.autocast_verdicts(loud)["cosine catches"] and not checks.autocast_verdicts(loud)["norm bound catches"]
    # a correct backward already above the norm bound, and one exactly at both bounds (which passes)
    assert not checks.autocast_verdicts(_cos(ok32=(1.0, 3e-4), bad32=(0.99997, 8e-3)))["correct passes"]
    assert checks.autocast_verdicts(_cos(ok32=(0.999, 1e-4), bad32=(0.99997, 8e-3)))["correct passes"]


def test_caught_table_names_the_check_that_fired_with_its_value_and_bound():
    import pandas as pd

    df = pd.DataFrame(dict(test=["test_gradients_under_bf16_autocast", "test_bf16_autocast_exact_on_fixed_stream",
                                 "test_gradients_match_stored_twin_float64", "test_other"],
                           params=["cpu-reveuler"] * 4, outcome=["failed", "failed", "failed", "passed"],
                           message=["AssertionError: largest per-parameter relative gradient error 5.46e-03",
                                    "AssertionError: 0.0054", "wte.weight", ""]))
    t = checks.caught_table(df).reset_index().set_index("test")
    assert t.loc["test_gradients_under_bf16_autocast", ["check that fired", "measured", "bound"]].tolist() == \
        ["relative error", 5.46e-03, "<= 0.0001"]
    assert t.loc["test_bf16_autocast_exact_on_fixed_stream", ["measured", "bound"]].tolist() == [0.0054, "<= 1e-06"]
    assert t.loc["test_gradients_match_stored_twin_float64", "measured"] == "wte.weight"
    assert t.loc["test_other", "verdict"] == "passed anyway" and t["verdict"].tolist().count("caught it") == 3
    df.loc[0, "message"] = "AssertionError: lowest per-parameter gradient cosine 0.99000"
    fired = checks.caught_table(df).iloc[0]
    assert (fired["check that fired"], fired["measured"], fired["bound"]) == ("lowest cosine", 0.99, ">= 0.999")


def test_bounds_are_the_tests_own():
    """The constants the notebook prints and its verdict tables judge by are the ones tests/core/test_reversible.py
    asserts, and its messages are the ones `caught_table` reads."""
    import re

    source = (suite.tests_dir() / "core" / "test_reversible.py").read_text()

    def bounds(pattern: str) -> list[float]:
        return [float(v) for v in re.findall(pattern, source)]

    assert checks.AUTOCAST_COSINE in bounds(r"assert worst >= ([0-9.e-]+), f\"lowest per-parameter")
    assert checks.AUTOCAST_REL_BOUND in bounds(r"assert worst_norm <= ([0-9.e-]+),")
    assert checks.EXACT_REL_BOUND in bounds(r"assert worst <= ([0-9.e-]+), worst")
    assert "lowest per-parameter gradient cosine" in source and "largest per-parameter relative gradient error" in source


def test_test_summary_and_folded_cases():
    import pandas as pd

    df = pd.DataFrame(dict(file=["f.py"] * 3, test=["test_a", "test_a", "test_b"], params=["1", "2", ""],
                           checks=["A check whose description is long enough to be cut off by pandas " * 2] * 3,
                           outcome=["passed", "failed", "skipped"], duration_s=[0.5, 0.25, 0.0],
                           message=["", "boom " * 30, "not today"]))
    summary = suite.by_test(df)
    assert summary.loc[("f.py", "test_a"), ["cases", "passed", "not passed"]].tolist() == [2, 1, 1]
    assert summary.loc[("f.py", "test_b"), "not passed"] == 0 and summary.loc[("f.py", "test_a"), "seconds"] == 0.75
    html = suite.every_case_folded(df)
    assert html.startswith("<details>") and "Every case (3)" in html and ("boom " * 30).strip() in html
