"""What an executed notebook keeps of its progress bars: each bar's last state, once.

A text bar redraws its line with a carriage return, and a nested bar moves the cursor up with an ANSI escape
(`ESC [A`). A terminal shows only the last drawing; a saved notebook keeps every one of them, and a reader (or the
HTML edition) sees dozens of lines per bar and bare `[A` marks. `clean_streams` gives each saved stream what a
terminal would have left on screen: escapes removed, each line cut to what follows its last carriage return,
lines that were only bar residue dropped, and a line repeated at once (a bar's final state drawn again by its
close) kept once.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def terminal_text(text: str) -> str:
    """`text` as a terminal leaves it (see the module docstring); text without bars comes back unchanged."""
    if "\r" not in text and "\x1b" not in text:
        return text
    out: list[str] = []
    for line in text.split("\n"):
        shown = _ESCAPE.sub("", line)
        parts = [p for p in shown.split("\r") if p.strip()]
        last = parts[-1].rstrip() if parts else ""
        if not last and line:       # only redraws and escapes: nothing stays on screen
            continue
        if out and last and out[-1] == last:
            continue
        out.append(last)
    return "\n".join(out)


def clean_streams(path: str | Path) -> int:
    """Rewrite the stream outputs of the notebook at `path` as `terminal_text`; returns how many changed."""
    nb = nbformat.read(str(path), as_version=4)
    changed = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text = terminal_text(out["text"])
                if text != out["text"]:
                    out["text"], changed = text, changed + 1
        cell["outputs"] = [o for o in cell.get("outputs", [])
                           if not (o.get("output_type") == "stream" and not o["text"].strip())]
    nbformat.write(nb, str(path))
    return changed
