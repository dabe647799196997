"""Progress bars: text where a notebook runs headless, tqdm's own choice elsewhere; a page shows a text bar's
last state."""
import io

from tqdm.std import tqdm as text_tqdm

from rev.book.outputs import merged_streams, terminal_text
from rev.book.site import static_output
from rev.base import progress


def test_text_bars_under_the_workbook_variable(monkeypatch):
    monkeypatch.delenv(progress.PROGRESS_ENV, raising=False)
    with progress.text_progress():
        out = io.StringIO()
        bar = progress.tqdm(range(100), file=out)
        assert isinstance(bar, text_tqdm) and bar.mininterval == progress.TEXT_INTERVAL_S
        for _ in bar:
            bar.set_postfix(loss=1.0)  # no redraw per step: the saved notebook keeps a few lines, not 100
        assert out.getvalue().count("\r") <= 4, out.getvalue()
    assert progress.PROGRESS_ENV not in __import__("os").environ  # restored


def test_pages_show_the_last_state_of_a_redrawn_line():
    assert terminal_text("a 0%\ra 50%\ra 100%\ndone\n") == "a 100%\ndone\n"
    out = {"output_type": "stream", "name": "stderr", "text": "bar 0%\rbar 100%\n"}
    assert static_output(out, {})["text"] == "bar 100%\n" and out["text"] == "bar 0%\rbar 100%\n"


def test_a_bar_redrawn_over_several_outputs_shows_once():
    outs = [{"output_type": "stream", "name": "stderr", "text": ["\r", "bar 0%"]},
            {"output_type": "stream", "name": "stderr", "text": ["\r", "bar 100%"]},
            {"output_type": "stream", "name": "stderr", "text": ["\n"]},
            {"output_type": "stream", "name": "stdout", "text": "done\n"}]
    merged = merged_streams(outs)
    assert len(merged) == 2 and static_output(merged[0], {})["text"] == "bar 100%\n"


def test_an_outer_bar_redrawn_after_the_loop_printed_is_one_line_where_it_first_appeared():
    """A loop with a bar that prints each pass: the bar's 0% and its 100% arrive as two stderr outputs with the
    prints between them; the saved cell shows the bar once, at 100%, then the prints."""
    outs = [{"output_type": "stream", "name": "stderr", "text": "\rpretrain:   0%| 0/2"},
            {"output_type": "stream", "name": "stdout", "text": "reveuler_rev: 20 steps\n"},
            {"output_type": "stream", "name": "stdout", "text": "midpoint_rev: 20 steps\n"},
            {"output_type": "stream", "name": "stderr", "text": "\rpretrain: 100%| 2/2\n"},
            {"output_type": "stream", "name": "stderr", "text": "\rnext: 100%| 1/1\n"}]
    merged = merged_streams(outs)
    assert [(m["name"], m["text"].split("\r")[-1]) for m in merged] == [
        ("stderr", "pretrain: 100%| 2/2\n"), ("stdout", "reveuler_rev: 20 steps\nmidpoint_rev: 20 steps\n"),
        ("stderr", "next: 100%| 1/1\n")]   # a bar drawn after a finished line is a bar of its own
    # and the saved copy keeps the prints, not the bars (rev.book.outputs)
    assert [terminal_text(m["text"]) for m in merged] == ["", "reveuler_rev: 20 steps\nmidpoint_rev: 20 steps\n", ""]


def test_an_inner_bar_that_erases_itself_is_not_drawn_headless(monkeypatch):
    monkeypatch.delenv(progress.PROGRESS_ENV, raising=False)
    with progress.text_progress():
        out = io.StringIO()
        for _ in progress.tqdm(range(3), file=out, desc="outer"):
            for _ in progress.tqdm(range(5), file=out, desc="inner", leave=False):
                pass
    assert "inner" not in out.getvalue() and "\x1b[A" not in out.getvalue()
    assert out.getvalue().rstrip().split("\r")[-1].startswith("outer: 100%")   # its last drawing, the outer bar's
    shown = progress.tqdm(range(5), file=io.StringIO(), leave=False)   # where someone watches, it is drawn
    assert not shown.disable
