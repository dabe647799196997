"""Command line: `python -m rev COMMAND ...`, one command per entry of `COMMANDS` (`python -m rev --help` lists them all).

Each sub-command lives in the module that owns its logic; that module exposes `add_arguments(parser)` and
`run_cli(args) -> int`. Modules are imported only when their command runs, so `--help` stays fast.

A mistake the user can make ends any command the same way: one line `error: ...` on stderr, exit status 2, nothing
written (`rev.base.cli` says how a command reports one; `REV_TRACEBACK=1` shows the traceback behind the line).
"""
from __future__ import annotations

import argparse
import importlib
import sys
import traceback

COMMANDS = {
    "prepare": ("rev.data.corpus", "tokenize a corpus into data/<name>/"),
    "train": ("rev.training.loop", "train one run of a profile"),
    "maxbatch": ("rev.measure.maxbatch", "find the largest batch that fits"),
    "bench": ("rev.measure.bench", "memory and speed of every trunk, side by side"),
    "report": ("rev.chapters.report.writer", "tables, plots and REPORT.md from results"),
    "workbook": ("rev.book.workbook", "run the notebook sequence headless"),
    "bundle": ("rev.book.bundle", "pack code, tokenizer and token files for Colab"),
    "student": ("rev.book.student", "write the student edition of the notebooks (solutions stubbed)"),
    "course": ("rev.book.course", "write an nbgrader course (source/ assignments, nbgrader_config.py)"),
    "thermo-shock": ("rev.chapters.thermo.cache", "chapter 08's LR shock at the paper's size over seeds, cached"),
    "gpucheck": ("rev.training.gpucheck", "the CUDA path checked on a GPU, one table (est. under 8 min on an H100)"),
    "nbref": ("rev.book.reference", "write (or --check) the reference outputs of the checked notebook cells"),
    "plan": ("rev.chapters.plan.command", "every run of a profile's workbook and its estimated T4 time, before it runs"),
    "badges": ("rev.book.colab", "point every Colab badge and REPO_URL at a repository (after publishing a fork)"),
    "site": ("rev.book.site", "the HTML edition: a static book from the executed notebooks (--check: in a browser)"),
}


def main(argv: list[str] | None = None) -> int:
    """Run one command in this process; returns its exit status. Bad usage raises argparse's `SystemExit(2)`; an
    anticipated error (`rev.base.cli.USER_ERRORS`) raises `SystemExit("error: <one line>")`, chained to it."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m rev", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    wanted = argv[0] if argv and argv[0] in COMMANDS else None
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if name == wanted:
            importlib.import_module(module).add_arguments(p)
    args = parser.parse_args(argv)
    from .base.cli import USER_ERRORS, one_line

    try:
        return int(importlib.import_module(COMMANDS[args.command][0]).run_cli(args) or 0)
    except USER_ERRORS as e:
        raise SystemExit(f"error: {one_line(e)}") from e


def cli(argv: list[str] | None = None) -> int:
    """What `python -m rev` runs: `main`, with an error message printed as it is (no traceback) and exit status 2."""
    from .base.cli import show_traceback

    try:
        return main(argv)
    except SystemExit as e:
        if not isinstance(e.code, str):       # argparse: 2 after a usage error, 0 after --help
            return 0 if e.code is None else int(e.code)
        cause = e.__cause__ or e.__context__
        if cause is not None and show_traceback():
            traceback.print_exception(cause)
        print(e.code, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(cli())
