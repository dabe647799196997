"""Progress bars: text where a notebook runs headless, tqdm's own choice elsewhere; a page shows a text bar's
last state."""
import io

from tqdm.std import tqdm as text_tqdm

from rev.book.outputs import merged_streams, terminal_text
from rev.book.site import static_output
from rev.engine import progress


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
