"""Progress bars: text where a notebook runs headless, tqdm's own choice elsewhere; a page shows a text bar's
last state."""
import io

from tqdm.std import tqdm as text_tqdm

from rev.book.site import overwritten, static_output
from rev.engine import progress


def test_text_bars_under_the_workbook_variable(monkeypatch):
    monkeypatch.delenv(progress.PROGRESS_ENV, raising=False)
    with progress.text_progress():
        bar = progress.tqdm(range(3), file=io.StringIO())
        assert type(bar) is text_tqdm and bar.mininterval == progress.TEXT_INTERVAL_S
        bar.close()
    assert progress.PROGRESS_ENV not in __import__("os").environ  # restored


def test_pages_show_the_last_state_of_a_redrawn_line():
    assert overwritten("a 0%\ra 50%\ra 100%\ndone\n") == "a 100%\ndone\n"
    out = {"output_type": "stream", "name": "stderr", "text": "bar 0%\rbar 100%\n"}
    assert static_output(out, {})["text"] == "bar 100%\n" and out["text"] == "bar 0%\rbar 100%\n"
