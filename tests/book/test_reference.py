"""The reference outputs behind CI's nbval step (rev.book.reference): what is kept, what is compared."""
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from rev.book import reference as R


def _executed(fact: str = "exact: yes\n", figure: str = "iVBORw0KGgo=") -> nbformat.NotebookNode:
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}, "papermill": {"duration": 1.0}})
    params = new_code_cell('PROFILE = "auto"', metadata={"tags": ["parameters"]})
    injected = new_code_cell('PROFILE = "smoke"\nRESULTS_DIR = "/home/me/results"',
                             metadata={"tags": ["injected-parameters"]})
    checked = new_code_cell("# NBVAL_CHECK_OUTPUT\nprint(fact)", execution_count=3, outputs=[
        new_output("stream", name="stdout", text=fact[:4]), new_output("stream", name="stdout", text=fact[4:]),
        new_output("display_data", data={"image/png": figure, "text/plain": "<Figure size 4x3 with 1 Axes>"})])
    timing = new_code_cell("# NBVAL_IGNORE_OUTPUT\nprint(time)", outputs=[new_output("stream", text="3.2 s\n")])
    return nbformat.from_dict({**nb, "cells": [new_markdown_cell("# title"), params, injected, checked, timing]})


def test_reference_keeps_only_checked_outputs_without_images_or_injected_parameters():
    ref = R.reference_copy(_executed())
    assert [c.source.splitlines()[0] for c in ref.cells] == [
        "# title", 'PROFILE = "auto"', "# NBVAL_CHECK_OUTPUT", "# NBVAL_IGNORE_OUTPUT"]
    checked, timing = ref.cells[2], ref.cells[3]
    assert timing.outputs == [] and checked.execution_count is None
    assert all("image/png" not in o.get("data", {}) for o in checked.outputs)
    assert ref.metadata == {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    assert "/home/me" not in nbformat.writes(ref)


def test_same_facts_pass_whatever_the_figures_timings_and_stream_chunks():
    ref = R.reference_copy(_executed())
    fresh = _executed(figure="AAAAAAAAAAAA")
    fresh.cells[3].outputs[:2] = [new_output("stream", name="stdout", text="exact: yes\n")]
    fresh.cells[4].outputs = [new_output("stream", text="9.9 s\n")]
    assert R.compare(fresh, ref) == []


def test_a_changed_fact_is_reported_with_a_diff():
    problems = R.compare(_executed("exact: no\n"), R.reference_copy(_executed()), "01_x")
    assert len(problems) == 1 and "-exact: yes" in problems[0] and "+exact: no" in problems[0]


def test_round_off_residues_and_fifth_digits_are_the_same_fact_on_another_machine():
    same = [("fp64 1e-13, fixed 0", "fp64 2e-13, fixed 0"),                 # both round-off residues
            ("rotation   0e+00   8e-16", "rotation   3e-16   1e-15"),         # widths and residues
            ("ratio 1126.402 | 45.056", "ratio 1126.404 | 45.056")]            # the 7th digit
    for a, b in same:
        assert R.equivalent_text(a, b), (a, b)
        assert R.compare(_executed(b + "\n"), R.reference_copy(_executed(a + "\n"))) == []


def test_a_changed_number_count_or_verdict_is_still_a_difference():
    different = [("loss 0.384", "loss 0.385"),            # the third digit
                 ("44 of 256 weights", "46 of 256 weights"),  # a count
                 ("3 distinct layouts", "2 distinct layouts"),
                 ("fp64 1e-13", "fp64 1e-09"),            # a residue that grew out of round-off
                 ("beats fixed: True", "beats fixed: False"),
                 ("at step 149", "at step 150"),
                 ("1 2 3", "1 2")]
    for a, b in different:
        assert not R.equivalent_text(a, b), (a, b)
        assert len(R.compare(_executed(b + "\n"), R.reference_copy(_executed(a + "\n")))) == 1


def test_an_edited_checked_cell_asks_for_regeneration():
    fresh = _executed()
    fresh.cells[3].source += "\nprint('more')"
    assert "regenerate" in R.compare(fresh, R.reference_copy(_executed()))[0]


def test_write_and_check_round_trip(tmp_path, monkeypatch):
    monkeypatch.setattr("rev.book.sequence.SEQUENCE", ("a", "b"))
    for name in ("a", "b"):
        nbformat.write(_executed(), tmp_path / f"{name}.ipynb")
    R.write_references(tmp_path, tmp_path / "ref")
    assert R.check_references(tmp_path, tmp_path / "ref") == []
    nbformat.write(_executed("exact: no\n"), tmp_path / "b.ipynb")
    (tmp_path / "a.ipynb").unlink()
    problems = R.check_references(tmp_path, tmp_path / "ref")
    assert len(problems) == 2 and problems[0].startswith("a: no executed copy")


def test_the_check_finds_what_a_reader_should_not_see_even_where_it_matches_the_reference(tmp_path, monkeypatch):
    """A boolean printed in an ignored cell is still on the reader's page: the check reads every output."""
    monkeypatch.setattr("rev.book.sequence.SEQUENCE", ("a",))
    nb = _executed()
    nb.cells[4].outputs = [new_output("stream", text="saved in /home/me/results/run1: True\n")]
    nbformat.write(nb, tmp_path / "a.ipynb")
    R.write_references(tmp_path, tmp_path / "ref")
    problems = R.check_references(tmp_path, tmp_path / "ref")
    assert len(problems) == 1 and "a, cell 4: a machine path" in problems[0] and "shown_path" in problems[0]


@pytest.mark.skipif(not any(R.REFERENCE_DIR.glob("*.ipynb")), reason="no committed references yet")
def test_committed_references_match_the_notebooks_checked_cells():
    """A checked cell edited without regenerating the reference fails here, in seconds, not after CI's workbook."""
    from rev.book.sequence import NOTEBOOK_DIR

    for ref in sorted(R.REFERENCE_DIR.glob("*.ipynb")):
        nb = nbformat.read(NOTEBOOK_DIR / ref.name, as_version=4)
        want = [c.source for c in nbformat.read(ref, as_version=4).cells if R.is_checked(c)]
        assert [c.source for c in nb.cells if R.is_checked(c)] == want, \
            f"{ref.stem}: checked cells changed since the reference; run `{R.REGENERATE}`"


def test_the_fourth_digit_is_within_the_tolerance_and_the_third_is_not():
    """REL_TOL is a relative 1e-3: 0.3841 against 0.3843 (5e-4 apart) is the same fact; 0.384 against 0.386
    (5e-3) is not. A tolerance ten times tighter calls the first pair a difference."""
    assert R.equivalent_text("loss 0.3841 nats", "loss 0.3843 nats")
    assert R.equivalent_text("1126.4 tokens/s", "1126.9 tokens/s")
    assert not R.equivalent_text("loss 0.384 nats", "loss 0.386 nats")
