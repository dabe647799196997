"""Exercise checks and Markdown output for every notebook (00 to the last chapter).

The conventions, written once here and followed by every notebook (the student edition in
`rev.book.student` relies on them):

* An exercise opens with a markdown cell headed `### Exercise NN.k (derive | predict | break it): title`.
* Code the learner writes sits in a *solution cell* (tag `solution`) between `### BEGIN SOLUTION` and
  `### END SOLUTION`, always inside a function body, so that the student edition's stub
  (`raise NotImplementedError("Exercise NN.k: ...")`) only raises when the check calls it, and a student
  notebook run headless still runs to the end. Later cells never use a learner's answer: they use `rev`.
* The check is its own cell (tag `check`): `check("NN.k", test)`, where `test()` calls the learner's code and
  raises `AssertionError` with a message that says what is wrong and what to try. While nbgrader grades
  (`rev.book.course`), an unanswered exercise fails its check cell too, with the same message.
* A written answer is a markdown cell (tag `answer`) holding a collapsed `<details>` block.
"""
from __future__ import annotations

import os
import traceback
from typing import Callable

class Outcome(str):
    """`check`'s result: compares equal to PASS or TODO, and shows nothing when it ends a notebook cell (the
    line `check` printed already says it)."""

    def _ipython_display_(self) -> None:
        pass


PASS, TODO = Outcome("passed"), Outcome("not answered yet")


class ExerciseFailed(AssertionError):
    """A learner's answer ran but gave a wrong result; the message says which exercise and why."""


class ExerciseNotAnswered(AssertionError):
    """Raised instead of reporting "not answered yet" while nbgrader grades: a check cell that raises nothing
    earns its points, so a blank submission would otherwise score full marks."""


def graded() -> bool:
    """True while nbgrader executes the notebook: `nbgrader autograde` and `nbgrader validate` set
    NBGRADER_EXECUTION in the kernel's environment."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def check(exercise: str, test: Callable[[], str | None]) -> Outcome:
    """Run `test` for exercise `exercise` and say how it went, in one line.

    `test()` returns an optional line describing what was verified. A `NotImplementedError` (the student
    edition's stub) prints that the exercise is not answered yet and returns `TODO`, without stopping the
    notebook (under nbgrader it raises `ExerciseNotAnswered` with that line, so the check earns nothing); an
    `AssertionError` is re-raised as `ExerciseFailed` naming the exercise, so a wrong answer is never silently
    accepted; anything else (a crash in the learner's code) propagates with its traceback.
    """
    try:
        detail = test()
    except NotImplementedError as e:
        message = f"Exercise {exercise}: {TODO}. Fill in the solution cell above and run this cell again ({e})."
        if graded():
            raise ExerciseNotAnswered(message) from None
        print(message)
        return TODO
    except AssertionError as e:
        where = traceback.extract_tb(e.__traceback__)[-1]
        raise ExerciseFailed(f"Exercise {exercise}: not yet right. {e or f'(assertion at line {where.lineno})'}") \
            from None
    print(f"Exercise {exercise}: {PASS}." + (f" {detail}" if detail else ""))
    return PASS


def markdown(text: str):
    """Render `text` as Markdown in a notebook (plain text elsewhere): takeaways and computed summaries."""
    from IPython.display import Markdown, display

    display(Markdown(text))
    return None


def recorded_against(guesses: dict[str, object], measured: dict[str, object]) -> str:
    """A predict-then-measure exercise's reading, as Markdown bullets: each prediction the learner recorded before
    the measurement beside what was measured. Numbers say by how much they missed (in percent of the measurement),
    anything else (words, lists of boundaries) whether it matched; a guess left at None says that none was recorded, so none can be checked."""
    def num(v: float) -> str:   # two decimals, or two significant figures below 0.01 (a defect of 1e-7 is not 0.00)
        return f"{v:.2f}" if v == 0 or abs(v) >= 0.01 else f"{v:.2g}"

    lines = []
    for name, value in measured.items():
        guess = guesses.get(name)
        shown = num(value) if isinstance(value, float) else str(value)   # words as words: never a quoted repr
        if value is None:
            lines.append(f"{name}: not measured here, so your prediction cannot be checked.")
        elif guess is None:
            lines.append(f"{name}: measured {shown}; no prediction recorded before the measurement, so none to check.")
        elif isinstance(value, (int, float)) and isinstance(guess, (int, float)) and not isinstance(value, bool):
            miss = f" ({(guess - value) / value:+.0%} of the measurement)" if value else ""
            lines.append(f"{name}: you predicted {num(guess)}, measured {shown}{miss}.")
        else:
            both_lists = isinstance(guess, (list, tuple)) and isinstance(value, (list, tuple))
            same = list(guess) == list(value) if both_lists else str(guess).strip().lower() == str(value).strip().lower()
            lines.append(f"{name}: you predicted {guess}, measured {shown}: "
                         + ("as predicted." if same else "not what you predicted."))
    return "\n".join(f"- {line}" for line in lines)
