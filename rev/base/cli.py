"""What every `python -m rev` command shares: how an anticipated mistake is reported, and argument checks.

The rule each command keeps: a mistake the user can make (a value out of range, a file where a folder belongs, an
unknown name) ends the command with one line `error: <what is wrong and what to do>` on stderr and exit status 2,
before anything is written or overwritten. A command reports one by raising:

* `UserError`, or any `ValueError` / `OSError` with a clear message (the package already raises those for bad
  input: an unknown profile, a missing file), or `CommandFailed` for work that could not be done (a notebook that
  failed, a run that diverged); `rev.__main__.main` turns each into `SystemExit("error: ...")`, the one place that
  does. A command never raises `SystemExit` itself.

`rev.__main__.cli` prints that line and returns 2; set `REV_TRACEBACK=1` to see where it came from. A bad value
caught by argparse (the validators below, used as `type=`) gets argparse's usage line and exit status 2 instead.
Where a command writes, `rev.base.files.check_output` says where it may not (the checkout and its own folders)
and what it replaces only with `--force` (what a person may have edited).
"""
from __future__ import annotations

import argparse
import math
import operator
import os
from pathlib import Path

TRACEBACK_ENV = "REV_TRACEBACK"


class UserError(ValueError):
    """An anticipated mistake in what was asked for; the message says what to do instead. A ValueError, so callers
    of the library functions that raise it (notebooks) catch it as they catch every other bad argument."""


class CommandFailed(RuntimeError):
    """The work asked for could not be done, for a reason the message names and the user can act on (a notebook
    that failed, a run that diverged, a tool not installed): reported as one line, like a mistake in what was asked."""


# What a command raises for bad input or for work it could not do. Not RuntimeError and the rest: those mean a bug,
# and keep their traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, CommandFailed)


def show_traceback() -> bool:
    return os.environ.get(TRACEBACK_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


def one_line(error: BaseException) -> str:
    """The error's message on one line (a message spread over lines stays readable joined)."""
    text = " ".join(part.strip() for part in str(error).splitlines() if part.strip())
    return text or type(error).__name__


# --- argparse validators (type=...) ---------------------------------------------------------------------------

def positive_int(text: str) -> int:
    """A whole number >= 1 (batch sizes, steps, seeds to run, processes)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number: give one >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not >= 1: give a whole number >= 1")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (learning rates, step sizes, memory budgets): not 0, negative, nan or inf."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: give a finite number > 0") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number > 0: give one, e.g. 1.5")
    return value


# What a seed may be: a whole number every generator seeded from it takes as it is (torch's manual_seed maps a
# negative seed to another number without a word; numpy's legacy seeding stops at 2**32 - 1).
SEED_MAX = 2**32 - 1


def check_seed(seed: object) -> int:
    """`seed` when it is a whole number in [0, SEED_MAX]; a ValueError (TypeError for a non-number) saying so."""
    try:
        if isinstance(seed, bool):
            raise TypeError
        seed = operator.index(seed)
    except TypeError:
        raise TypeError(f"seed {seed!r}: a seed is a whole number from 0 to {SEED_MAX:,} (2**32 - 1)") from None
    if not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed {seed}: a seed is a whole number from 0 to {SEED_MAX:,} (2**32 - 1)")
    return seed


class CountArgError(argparse.ArgumentTypeError, ValueError):
    """A bad `auto`-or-count value: a ValueError for callers in Python, and argparse's own type error, so that the
    command line shows this message (argparse replaces a plain ValueError's with "invalid <function> value")."""


def _count_arg(name: str, unit: str):
    def parse(text: str) -> int | str:
        if text == "auto":
            return text
        try:
            value = int(text)
        except ValueError:
            value = -1
        if value < 0:
            raise CountArgError(f"{text!r} is neither 'auto' nor a count: give auto (the default), 0 (off) or a "
                                f"whole number of {unit} ({name})")
        return value
    parse.__name__ = f"{name}_arg"
    parse.__doc__ = f'A command-line `{name}`: "auto" or a number of {unit} (0: off).'
    return parse


pos_chunk_arg = _count_arg("pos_chunk", "positions per chunk")
batch_slice_arg = _count_arg("batch_slice", "sequences per slice")


def seed_arg(text: str) -> int:
    """A command-line seed (`check_seed`)."""
    try:
        return check_seed(int(text))
    except ValueError as e:
        why = str(e) if text.strip().lstrip("+-").isdigit() else \
            f"{text!r} is not a whole number: a seed is a whole number from 0 to {SEED_MAX:,} (2**32 - 1)"
        raise argparse.ArgumentTypeError(why) from None


def device_arg(text: str) -> str:
    """A device name `pick_device` accepts on this machine (auto, cpu, cuda, cuda:N), checked before any work."""
    from .device import pick_device

    try:
        pick_device(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _first_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def folder_arg(text: str) -> Path:
    """A folder: an existing one or one not made yet (output folders, or roots a command reads when they are
    there); never an existing file, nor a path through one, which would fail only once the work is done."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder: give a new or existing folder")
    if not _first_existing(path).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {_first_existing(path)} is a file, not a folder: "
                                         f"give a path through folders")
    return path


def file_arg(text: str) -> Path:
    """A file to write: new, or an existing file to replace; never an existing folder (or a path through a file)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder: give the name of a file to write (in it, or elsewhere)")
    if not path.exists() and not _first_existing(path.parent).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {_first_existing(path.parent)} is a file, not a folder: "
                                         f"give a path through folders")
    return path


def existing_folder(text: str) -> Path:
    """A folder to read from, which must be there."""
    path = Path(text)
    if not path.is_dir():
        what = "is a file" if path.exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text} {what}: give an existing folder")
    return path
