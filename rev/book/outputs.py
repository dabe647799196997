"""What an executed notebook keeps of its progress bars (nothing), and what a reader should never see in it.

A text bar redraws its line with a carriage return, and a nested bar moves the cursor up with an ANSI escape
(`ESC [A`). A terminal shows only the last drawing; a saved notebook keeps every one of them, and a reader (or the
HTML edition) sees dozens of lines per bar and bare `[A` marks. `clean_streams` gives each saved stream what a
terminal would have left on screen (escapes removed, each line cut to what follows its last carriage return,
lines that were only bar residue dropped, a line repeated at once kept once), and then drops the bars' final
states too: a bar is progress for the person waiting, and once the cell has finished it says nothing the cell's
printed lines do not (a cell that has a fact to keep prints it). `noise_lines` lists what is left that a reader
should not see: paths, reprs, bars, raw asserts, unformatted numbers, lines printed twice.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat

_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# tqdm's line: "name:  40%|####      | 20/50 [00:03<00:04, 6.1it/s, loss=2.1]", or "12it [00:01, 8.2it/s]"
# where the total is unknown
BAR = re.compile(r"\b\d{1,3}%\|(?:.*\|)?\s*\d+/\d|\b\d+(?:it|[a-z]+) \[\d+:\d\d(?:<|, )")


def terminal_text(text: str) -> str:
    """`text` as a terminal leaves it (see the module docstring); text without bars comes back unchanged."""
    if "\r" not in text and "\x1b" not in text and not BAR.search(text):
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
    kept = [(i, t) for i, t in kept if not BAR.search(t)]
    if not kept:
        return ""
    # a kept line that was followed by a newline keeps it, also when what came after it was dropped
    return "\n".join(t for _, t in kept) + ("\n" if kept[-1][0] < len(lines) - 1 else "")


def stream_text(out) -> str:
    """A stream output's text (a saved notebook may hold it as a list of strings)."""
    text = out.get("text", "")
    return "".join(text) if isinstance(text, list) else text


def merged_streams(outputs: list) -> list:
    """`outputs` with each run of consecutive stream outputs of one name (a bar's redraws can arrive one output
    each) joined into one copy, so that `terminal_text` sees each whole line; the outputs given are not changed.

    A redraw (text opening with a carriage return) joins the previous output of its stream even when the other
    stream printed in between: it overwrites the line that output left open, so a bar drawn at 0% before a loop
    that prints and at 100% after it is one line, kept where the bar first appeared."""
    merged: list = []
    last: dict[str, int] = {}   # stream name -> where its latest output sits in `merged`
    for out in outputs:
        i = last.get(out.get("name")) if out.get("output_type") == "stream" else None
        if i is not None and (i == len(merged) - 1 or (stream_text(out).startswith("\r")
                                                      and not stream_text(merged[i]).endswith("\n"))):
            merged[i] = copy.copy(merged[i])
            merged[i]["text"] = stream_text(merged[i]) + stream_text(out)
            continue
        if out.get("output_type") == "stream":
            last[out.get("name")] = len(merged)
        merged.append(out)
    return merged


def clean_streams(path: str | Path) -> int:
    """Rewrite the stream outputs of the notebook at `path` as `terminal_text` (merged first, emptied ones
    dropped); returns how many cells changed."""
    nb = nbformat.read(str(path), as_version=4)
    changed = 0
    for cell in nb.cells:
        if "outputs" not in cell:
            continue
        outs = []
        for out in merged_streams(cell.outputs):
            if out.get("output_type") == "stream":
                out = copy.copy(out)
                out["text"] = terminal_text(stream_text(out))
                if not out["text"].strip():
                    continue
            outs.append(out)
        if outs != cell.outputs:
            cell.outputs, changed = outs, changed + 1
    nbformat.write(nb, str(path))
    return changed


# What a reader should never see in an executed copy. Stream and plain-text outputs are read (a notebook's printed
# lines and tables); Markdown outputs are prose, where "True" may open a sentence, and are read only for repeats.
NOISE = {"a machine path": re.compile(r"(?:^|[\s'\"(=])/(?:work|tmp|home|root|Users|content|var|opt)/[\w.-]+"),
         # a run's folder or a file under it, relative to wherever the notebook ran ("results/cpu/run1_baseline")
         "a relative path": re.compile(r"(?<![\w/:.])(?:results|data|build)/[\w.-]+/|[\w-]+\.revtrace\b"),
         # a boolean as a value ("lowered the loss: True"), not as an argument in code a cell shows ("resume=False")
         "a Python boolean": re.compile(r"(?<![=(])\b(?:True|False)\b"),
         "a dict repr": re.compile(r"\{'[^']*': "),
         "a dataclass repr": re.compile(r"\b[A-Z][A-Za-z]+\([a-z_]+="),
         # a value shown as Python quotes it ("profile 'cpu'", "['a', 'b']") or a list of numbers (token ids)
         "a quoted repr": re.compile(r"^\w[\w ]* '[^'\s]+'$|\['[^']*', '|"
                                     r"\b(?:profile|trunk|stream|run|measured|predicted) '[\w./ -]+'"),
         "a list repr": re.compile(r"\[-?\d+(?:\.\d+)?(?:, -?\d+(?:\.\d+)?){3,}"),
         "a progress bar": BAR,
         # pytest's or Python's assertion text where a table or a sentence belongs
         "a raw assert": re.compile(r"^\s*(?:E\s+)?(?:AssertionError: )?assert\s|^AssertionError\b"),
         # a count of five or more digits without separators ("635563837", "131072 bytes"): years, seeds and
         # hashes are not counts, so a digit run beside letters, dots, commas or a hyphen is left alone
         "an unformatted number": re.compile(r"(?<![\w.,/#:-])\d{5,}(?![\w.,/:-]|\.\d)")}
REPEAT_MIN = 30   # characters: a shorter line (a heading, a table's rule) may repeat for good reason


def _plain_texts(cell) -> list[str]:
    texts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            texts.append(stream_text(out))
        elif "text/plain" in out.get("data", {}) and "text/markdown" not in out.get("data", {}):
            plain = out["data"]["text/plain"]
            texts.append("".join(plain) if isinstance(plain, list) else plain)
    return texts


def _markdown_texts(cell) -> list[str]:
    return ["".join(md) if isinstance(md, list) else md
            for out in cell.get("outputs", []) if (md := out.get("data", {}).get("text/markdown"))]


def noise_lines(nb, name: str = "notebook") -> list[str]:
    """Every output line of `nb` (a read notebook) that shows one of `NOISE`, or repeats a printed or Markdown
    line of `REPEAT_MIN` characters or more shown earlier in the notebook (in the same cell or another), as
    "name, cell k: what: line"."""
    found, seen = [], set()
    for k, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        plain = [line for text in _plain_texts(cell) for line in text.splitlines()]
        printed = [line for out in cell.get("outputs", []) if out.get("output_type") == "stream"
                   for line in stream_text(out).splitlines()]
        prose = [line for text in _markdown_texts(cell) for line in text.splitlines()]
        for line in plain:
            for what, pattern in NOISE.items():
                if pattern.search(line):
                    found.append(f"{name}, cell {k}: {what}: {line.strip()[:120]}")
                    break
        for line in printed + prose:
            key = " ".join(line.split())
            if len(key) < REPEAT_MIN or not re.search(r"[A-Za-z]{3}", key) or _table_row(line):
                continue
            if key in seen:
                found.append(f"{name}, cell {k}: a line printed twice: {key[:120]}")
            seen.add(key)
    return found


def _table_row(line: str) -> bool:
    """A table's row or rule (Markdown, or text aligned in columns): tables of one notebook may share a row."""
    return line.lstrip().startswith("|") or set(line.strip()) <= set("-|: =") or re.search(r"\S {2,}\S", line)
