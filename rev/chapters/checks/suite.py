"""The project's own tests, run inside the current process (a notebook kernel, say): notebook 02's first section.

`run_tests` calls pytest with a small plugin that records, for every test, what it checks (the first sentence of its
docstring, or a readable form of its name), its outcome and its duration, and returns them as a table. The run
leaves no state behind that later code could trip on: no cache folder, no test modules on `sys.path`, the working
directory, torch's RNG and thread count as they were. The rest are views of that table.
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd
import torch


OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")

# What each profile runs. `smoke` keeps to the fast trunk checks (CI runs the whole suite separately);
# the other profiles run the reversible-trunk file and the memory tests in full.
_SMOKE_KEYWORD = "(float64 and 3-0.5) or bf16 or checkpointed or refuses or kept"
TEST_SELECTIONS: dict[str, list[tuple[str, str | None]]] = {
    "smoke": [("core/test_reversible.py", _SMOKE_KEYWORD)],
    "full_suite": [("core/test_reversible.py", None),
                   ("core/test_model_and_memory.py", "peak_memory or base_bytes or resident or activation_memory")],
}


def tests_dir() -> Path:
    """The repository's `tests/` folder, found next to the `rev` package."""
    import rev

    path = Path(rev.__file__).resolve().parents[1] / "tests"
    if not path.is_dir():
        raise FileNotFoundError(
            f"no tests folder at {path}: the tests ship with the repository, not with an installed package. "
            f"Clone the repository and `pip install -e .` from it to run them.")
    return path


def selection_for_profile(profile: str) -> list[tuple[str, str | None]]:
    """(file under tests/, pytest -k expression or None) pairs to run for a profile."""
    return TEST_SELECTIONS["smoke" if profile == "smoke" else "full_suite"]


def readable_name(test_name: str) -> str:
    """`test_gradients_match_stored_twin[a-1]` -> `Gradients match stored twin`."""
    base = test_name.split("[", 1)[0]
    base = base.removeprefix("test_")
    words = base.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def _first_sentence(doc: str | None) -> str:
    """A docstring's first sentence, whole even where it runs over several lines (its first line alone can stop
    mid-sentence), up to its first blank line."""
    paragraph = " ".join(ln.strip() for ln in (doc or "").strip().split("\n\n")[0].splitlines())
    match = re.search(r"^.*?\.(?=\s|$)", paragraph)
    return match.group(0) if match else paragraph


def describe_item(item) -> str:
    """What a collected test checks: the first docstring sentence of the test function, else its readable
    name. (A module docstring is about the whole file, so it is kept for the `module` column instead.)"""
    fn = getattr(item, "function", None)
    return _first_sentence(getattr(fn, "__doc__", None)) or readable_name(item.name)


class _Collector:
    """pytest plugin recording one row per test."""

    def __init__(self) -> None:
        self.items: dict[str, dict] = {}
        self.rows: dict[str, dict] = {}

    def pytest_collection_finish(self, session) -> None:
        for item in session.items:  # what is left after -k / -m deselection
            module = getattr(item, "module", None)
            self.items[item.nodeid] = dict(
                file=Path(str(item.fspath)).name,
                test=item.name.split("[", 1)[0],
                params=item.name[len(item.name.split("[", 1)[0]):].strip("[]"),
                checks=describe_item(item),
                module=_first_sentence(getattr(module, "__doc__", None)),
            )

    def pytest_runtest_logreport(self, report) -> None:
        row = self.rows.setdefault(report.nodeid, dict(outcome=None, duration_s=0.0, message=""))
        row["duration_s"] += report.duration
        outcome = _phase_outcome(report)
        # A failing setup or teardown is an error; the call phase decides otherwise. The first bad news wins.
        if outcome is not None and row["outcome"] in (None, "passed"):
            row["outcome"] = outcome
            if report.failed or report.skipped:
                row["message"] = _short_message(report)

    def table(self) -> pd.DataFrame:
        rows = []
        for nodeid, info in self.items.items():
            res = self.rows.get(nodeid, dict(outcome="not run", duration_s=0.0, message=""))
            rows.append(dict(nodeid=nodeid, **info, outcome=res["outcome"] or "not run",
                             duration_s=res["duration_s"], message=res["message"]))
        cols = ["nodeid", "file", "test", "params", "checks", "outcome", "duration_s", "message", "module"]
        return pd.DataFrame(rows, columns=cols)


def _phase_outcome(report) -> str | None:
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if xfail:
            return "xfailed" if report.skipped else "xpassed"
        return report.outcome  # passed | failed | skipped
    if report.failed:
        return "error"
    if report.skipped:  # skipped in setup: a skip marker or pytest.skip in a fixture
        return "xfailed" if xfail else "skipped"
    return None


def _short_message(report) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", None)
    return _first_sentence(crash or str(report.longrepr))[:200]


@contextlib.contextmanager
def _isolated_run():
    """Put back what an in-process pytest run may change: sys.path, cwd, torch's global RNG and its
    intra-op thread count (the suite's conftest makes the test session single-threaded)."""
    path, cwd, rng, threads = list(sys.path), os.getcwd(), torch.random.get_rng_state(), torch.get_num_threads()
    try:
        yield
    finally:
        sys.path[:] = path
        os.chdir(cwd)
        torch.random.set_rng_state(rng)
        torch.set_num_threads(threads)


def run_tests(paths: str | Path | Sequence[str | Path], keyword: str | None = None,
              extra_args: Iterable[str] = (), base: Path | None = None) -> pd.DataFrame:
    """Run pytest in this process on `paths` (relative ones resolved in `base`, by default the repository's
    tests/ folder), optionally filtered by a `-k` expression, and return one row per test: node id, file,
    test, params, what it checks, outcome, duration (s), a one-line failure/skip message, module docstring.

    `df.attrs` carries the pytest exit code, the wall time and pytest's own text output."""
    try:
        import pytest
    except ImportError as e:  # pytest is a test extra, not a core dependency
        raise ImportError("running the tests needs pytest: pip install pytest") from e
    base = tests_dir() if base is None else Path(base)
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    targets = [str(p if Path(p).is_absolute() else base / p) for p in paths]
    for t in targets:
        if not Path(t.split("::", 1)[0]).exists():
            raise FileNotFoundError(f"test path {t} does not exist")
    args = [*targets, "-q", "-p", "no:cacheprovider", "-p", "no:faulthandler",
            # importlib mode imports test files without putting their folder on sys.path, so two runs
            # (or two folders with a same-named file) never clash in sys.modules.
            "--import-mode=importlib", "--rootdir", str(base.parent), "-o", "addopts=", *extra_args]
    if keyword:
        args += ["-k", keyword]
    collector, out = _Collector(), io.StringIO()
    t0 = time.perf_counter()
    with _isolated_run(), contextlib.redirect_stdout(out):
        code = pytest.main(args, plugins=[collector])
    df = collector.table()
    df.attrs.update(exit_code=int(code), wall_s=time.perf_counter() - t0, log=out.getvalue(), args=args)
    if code not in (0, 1, 5):  # 0 ok, 1 some failed, 5 nothing selected; anything else is a usage problem
        raise RuntimeError(f"pytest could not run {targets} (exit code {int(code)}):\n{out.getvalue()[-3000:]}")
    return df


def outcome_counts(df: pd.DataFrame) -> dict[str, int]:
    """Tests per outcome, every outcome listed (zeros included), in a fixed order."""
    counts = df["outcome"].value_counts()
    return {o: int(counts.get(o, 0)) for o in (*OUTCOMES, "not run")}


def all_passed(df: pd.DataFrame) -> bool:
    """True when at least one test ran and none failed, errored or was left unrun."""
    c = outcome_counts(df)
    return len(df) > 0 and c["failed"] == c["error"] == c["xpassed"] == c["not run"] == 0


def not_ok(df: pd.DataFrame) -> pd.DataFrame:
    """The rows of tests that failed, errored, passed unexpectedly or did not run."""
    return df[~df["outcome"].isin(["passed", "skipped", "xfailed"])]


def by_test(df: pd.DataFrame) -> pd.DataFrame:
    """One row per test function of a `run_tests` table: what it checks, its cases, how many passed and how many
    did not, and its seconds (rounded to 0.01 s)."""
    ok = df["outcome"].isin(["passed", "skipped", "xfailed"])
    return (df.assign(passed=(df["outcome"] == "passed").astype(int), not_ok=(~ok).astype(int))
            .groupby(["file", "test"], sort=False)
            .agg(checks=("checks", "first"), cases=("outcome", "size"), passed=("passed", "sum"),
                 not_ok=("not_ok", "sum"), seconds=("duration_s", "sum"))
            .rename(columns={"not_ok": "not passed"}).round({"seconds": 2}))


def every_case_folded(df: pd.DataFrame) -> str:
    """Every case of a `run_tests` table as HTML inside a closed `<details>`: there for a reader who wants it,
    out of the way of one who reads the summary. Messages and descriptions are shown whole."""
    from html import escape

    cases = (df[["test", "params", "outcome", "duration_s", "message"]].round({"duration_s": 2})
             .rename(columns={"params": "parameters", "duration_s": "seconds"}))
    with pd.option_context("display.max_colwidth", None):
        table = cases.to_html(index=False, escape=True)
    return (f"<details><summary>Every case ({len(df)}), with its parameters and outcome</summary>\n\n{table}\n"
            f"</details>") if len(df) else f"<p>{escape('no test was selected')}</p>"


def require_all_passed(df: pd.DataFrame) -> None:
    """Raise `AssertionError` listing every test that did not pass (a notebook's last verdict)."""
    if not all_passed(df):
        raise AssertionError("some selected tests did not pass:\n" + "\n".join(
            f"{r.nodeid}: {r.outcome} {r.message}" for r in not_ok(df).itertuples()))
