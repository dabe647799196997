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
    lines = text.split("\n")
    kept: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        parts = [p for p in _ESCAPE.sub("", line).split("\r") if p.strip()]
        last = parts[-1].rstrip() if parts else ""
        if not last and line:       # only redraws and escapes: nothing stays on screen
            continue
        if kept and last and kept[-1][1] == last:
            continue
        kept.append((i, last))
    if not kept:
        return ""
    # a kept line that was followed by a newline keeps it, also when what came after it was dropped
    return "\n".join(t for _, t in kept) + ("\n" if kept[-1][0] < len(lines) - 1 else "")


def clean_streams(path: str | Path) -> int:
    """Rewrite the stream outputs of the notebook at `path` as `terminal_text`; returns how many changed."""
    nb = nbformat.read(str(path), as_version=4)
    changed = 0
    for cell in nb.cells:
        merged: list = []
        for out in cell.get("outputs", []):   # a bar's redraws can arrive as one output each: one stream again
            if (out.get("output_type") == "stream" and merged and merged[-1].get("output_type") == "stream"
                    and merged[-1]["name"] == out["name"]):
                merged[-1]["text"] += out["text"]
                changed += 1
            else:
                merged.append(out)
        for out in merged:
            if out.get("output_type") == "stream":
                text = terminal_text(out["text"])
                if text != out["text"]:
                    out["text"], changed = text, changed + 1
        if "outputs" in cell:
            cell["outputs"] = [o for o in merged if not (o.get("output_type") == "stream" and not o["text"].strip())]
    nbformat.write(nb, str(path))
    return changed
