"""The one table format every notebook uses."""
import math

import numpy as np
import pandas as pd

from rev.chapters.shared.tables import MISSING, format_number, tidy


def test_whole_numbers_print_as_integers_and_others_to_four_figures():
    assert format_number(7.0) == "7" and format_number(np.float64(57344.0)) == "57,344"
    assert format_number(np.int64(21)) == "21" and format_number(3) == "3"
    assert format_number(1.53421) == "1.534" and format_number(0.000003) == "3.000e-06"
    assert format_number(5149.3) == "5,149" and format_number(37728.4) == "37,728"  # not 3.773e+04
    assert format_number(2.5e7 + 0.4) == "25,000,000" and format_number(-12.25) == "-12.25"
    assert format_number(float("nan")) == MISSING and format_number(None) == MISSING
    assert format_number(True) == "yes" and format_number(False) == "no" and format_number("fp32") == "fp32" and format_number(-math.inf) == "-inf"


def test_tidy_formats_cell_by_cell_so_a_transposed_table_reads_right():
    df = pd.DataFrame({"batch": [7.0, 29.0], "loss": [1.2681, 2.2993], "trunk": ["residual", "reveuler_rev"]},
                      index=["run1b", "run3"])
    shown = tidy(df.T)
    assert shown.loc["batch", "run1b"] == "7" and shown.loc["loss", "run3"] == "2.299"
    assert shown.loc["trunk", "run3"] == "reveuler_rev"
    assert "7.0" not in shown.to_string() and df.loc["run1b", "batch"] == 7.0  # the original is untouched


def test_a_column_reads_one_way_and_its_header_in_words():
    """0.001323 beside 8.750e-04 in one column reads as two formats; a column with a value below 1e-3 writes its
    values below 1e-2 in scientific notation (larger values as before); snake_case headers as words."""
    df = pd.DataFrame({"grad_error": [0.001323, 8.75e-4, 0.0, 0.5], "loss": [0.4375, 8.938, 1.0, 2.5],
                       "tokens_per_s_q1": [1.0, 2.0, 3.0, 4.0], "fits": [True, False, True, True]},
                      index=pd.Index(list("abcd"), name="run_name"))
    shown = tidy(df)
    assert list(shown.columns) == ["grad error", "loss", "tokens/s q1", "fits"] and shown.index.name == "run name"
    assert shown["grad error"].tolist() == ["1.323e-03", "8.750e-04", "0", "0.5"]   # 0.5 (an h, say) stays
    assert shown["loss"].tolist() == ["0.4375", "8.938", "1", "2.5"]    # no value below 1e-3: unchanged
    assert shown["fits"].tolist() == ["yes", "no", "yes", "yes"]
    assert list(tidy(df, headers=False).columns) == list(df.columns)


def test_checked_states_a_claim_as_a_sentence_either_way():
    from rev.chapters.shared.tables import checked

    assert checked("the loss fell", True) == "✓ the loss fell"
    assert checked("the loss fell", False) == "✗ the loss fell: does not hold"
    assert "True" not in checked("x", True) and "False" not in checked("x", False)


def test_verdict_table_says_each_of_the_three_outcomes_and_formats_measured_numbers():
    from rev.chapters.shared.tables import verdict_table

    t = verdict_table([("error below the limit", 1.25e-7, "≤ 1e-6", True),
                       ("loss within the tie", 0.0312, "≤ 0.02 nats", False),
                       ("faster", 1.02, "interval excludes 1", None),
                       ("tokens", 104448.0, "—", True)])
    assert list(t.columns) == ["measured", "bound", "verdict"]
    assert list(t["verdict"]) == ["holds", "does not hold", "not judged", "holds"]
    assert t.loc["error below the limit", "measured"] == "1.250e-07"
    assert t.loc["tokens", "measured"] == "104,448"
