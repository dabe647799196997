"""Progress bars: tqdm's notebook widget where someone is watching, plain text where nobody can.

A notebook executed headless (papermill, `python -m rev workbook`) saves a widget bar as it was drawn before the
work began -- frozen at 0% in the executed copy -- while a text bar saves its last state. The workbook sets
`REV_PROGRESS=text` for the kernels it starts; everything in `rev` draws its bars through `tqdm` here.
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator

from tqdm.auto import tqdm as _auto
from tqdm.std import tqdm as _text

PROGRESS_ENV = "REV_PROGRESS"
TEXT_INTERVAL_S = 5.0   # text bars in a saved notebook: a few updates, not one per step


class TextBar(_text):
    """tqdm's text bar whose postfix (loss, val) waits for the next timed redraw: `set_postfix` would otherwise
    redraw at every step, one more saved output per step."""

    def set_postfix(self, ordered_dict=None, refresh: bool = True, **kwargs) -> None:
        super().set_postfix(ordered_dict, refresh=False, **kwargs)


def tqdm(*args, **kwargs):
    """`tqdm.auto.tqdm`, or the plain text bar (redrawn every few seconds) when `REV_PROGRESS=text`."""
    if os.environ.get(PROGRESS_ENV) == "text":
        kwargs.setdefault("mininterval", TEXT_INTERVAL_S)
        # a bar that erases itself (`leave=False`, an inner loop's) leaves nothing on a terminal; in a saved
        # notebook its drawings would stay behind, frozen mid-way: headless, it is not drawn at all
        kwargs["disable"] = kwargs.get("disable", False) or kwargs.get("leave") is False
        return TextBar(*args, **kwargs)
    return _auto(*args, **kwargs)


@contextlib.contextmanager
def text_progress() -> Iterator[None]:
    """Inside the block, bars are text, here and in the kernels started from here (they inherit the variable)."""
    old = os.environ.get(PROGRESS_ENV)
    os.environ[PROGRESS_ENV] = "text"
    try:
        yield
    finally:
        if old is None:
            del os.environ[PROGRESS_ENV]
        else:
            os.environ[PROGRESS_ENV] = old
