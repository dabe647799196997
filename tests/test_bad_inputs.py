"""Sixteen mistakes a learner or instructor makes that once destroyed work, ended in a traceback, or were accepted
and gave a wrong result. Each is one row: on the command line it ends in one line `error: ...` and exit status 2
(or, for a report over a damaged results folder, a report that names what is broken), in Python in a ValueError or
TypeError that says what to do; and every file is left as it was.

CLI rows run in this process (`rev.__main__.cli`) from an empty temporary folder, against a scratch copy of the
checkout (`rev.base.files.CHECKOUT` points at it), so that a rule that stopped holding overwrites the copy, never
the checkout itself. The rows per option of every command are tests/test_cli.py's; these are the cases behind them.
"""
from __future__ import annotations

import csv
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Callable

import pytest
import torch

from rev.__main__ import cli
from rev.book import colab, reference
from rev.base import files
from rev.measure import probe
from rev.base.cli import TRACEBACK_ENV

REPO = Path(__file__).resolve().parents[1]
MIB = 2**20
SEQ = 64      # the smoke profile's sequence length


# --- what the rows start from ------------------------------------------------------------------------------------

def _run_folder(folder: Path, steps: int = 6, batch: int = 8, trunk: str = "residual", summary: bool = True) -> None:
    """A run folder as `train` leaves it (config.json, log.csv, summary.json), written by hand: fast, and the
    numbers are whatever the row needs."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model": {"trunk": trunk, "h": 1.0, "stream": "fp32",
                                                              "n_layer": 2}, "train": {"seed": 0},
                                                    "batch_size": batch, "steps": steps, "lr": 1e-3}))
    with open(folder / "log.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "val_loss"])
        for s in range(steps):
            w.writerow([s, (s + 1) * batch * SEQ, 6.0 - 0.1 * s, 1e-3, 1.0, 1000.0, 5.9 - 0.1 * s])
    if summary:
        (folder / "summary.json").write_text(json.dumps({
            "trunk": trunk, "h": 1.0, "stream": "fp32", "n_layer": 2, "batch_size": batch, "steps": steps,
            "tokens": steps * batch * SEQ, "final_val_loss": 5.9 - 0.1 * (steps - 1), "final_train_loss": 5.5,
            "tokens_per_s": 1000.0, "peak_memory_bytes": 4 * MIB, "device": "CPU (cpu), fp32 compute",
            "unigram_val_loss": 6.2, "config": {"seed": 0}}))


@pytest.fixture(scope="module")
def finished_run(smoke_data, tmp_path_factory) -> Path:
    """A smoke run trained to its end over 2 steps (2 x 512 tokens), checkpoint and all."""
    from rev.training.loop import TrainConfig, train

    out = tmp_path_factory.mktemp("runs") / "run"
    train(TrainConfig(profile="smoke", trunk="residual", out_dir=out, data_dir=smoke_data, train_tokens=2 * 8 * SEQ,
                      progress=False, device="cpu"))
    return out


def _text_corpus(path: Path, stories: int, words: int) -> Path:
    """A .txt corpus of `stories` stories of `words` words each, split by blank lines."""
    vocab = "the cat sat on a mat and a dog ran far away in the sun".split()
    path.write_text("\n\n".join(" ".join(vocab[(i * 7 + j) % len(vocab)] for j in range(words))
                                for i in range(stories)))
    return path


# Each setup gets (row folder, scratch checkout, request) and returns the argv, with {tmp} and {checkout} filled in.

def _student_into_the_checkout(tmp: Path, checkout: Path, request) -> str:
    return f"student --out {checkout}"


def _student_into_notebooks_parent(tmp: Path, checkout: Path, request) -> str:
    return f"student --out {checkout}/notebooks/.."


def _student_over_a_learners_answers(tmp: Path, checkout: Path, request) -> str:
    from rev.book.student import write_student_edition

    write_student_edition(tmp / "mine")
    answered = tmp / "mine" / "notebooks" / "01_integrator_theory.ipynb"
    answered.write_text(answered.read_text().replace("_Write it here._", "Leapfrog is symmetric, so ..."))
    return f"student --out {tmp}/mine"


def _budget_above_free_memory(tmp: Path, checkout: Path, request) -> str:
    # the machine "has" 40 MiB free: a search under 100 MiB would probe batches it cannot hold (an OOM kill, or a
    # traceback); 100 MiB, not a terabyte, so that a broken check costs seconds of probes, not the machine's RAM
    request.getfixturevalue("monkeypatch").setattr(probe, "available_bytes", lambda dev: 40 * MIB)
    return "maxbatch --profile smoke --trunk residual --budget-mib 100"


def _report_with_seeds_as_a_list(tmp: Path, checkout: Path, request) -> str:
    _run_folder(tmp / "results" / "smoke" / "run1_baseline")
    (tmp / "results" / "smoke" / "seeds.json").write_text("[4.5, 4.6]")
    return f"report --profile smoke --results {tmp}/results"


def _executed_copies_without_cell_metadata(tmp: Path, checkout: Path, request) -> str:
    (tmp / "executed").mkdir()
    for ref in reference.REFERENCE_DIR.glob("*.ipynb"):
        nb = json.loads(ref.read_text())
        for cell in nb["cells"]:
            cell.pop("metadata", None)
        (tmp / "executed" / ref.name).write_text(json.dumps(nb))
    return f"nbref --check {tmp}/executed"


def _report_over_a_killed_run(tmp: Path, checkout: Path, request) -> str:
    _run_folder(tmp / "results" / "smoke" / "run1_baseline")
    killed = tmp / "results" / "smoke" / "run2_reversible_same_batch"
    killed.mkdir()
    (killed / "log.csv").write_text("")          # killed before its first row; no summary.json
    return f"report --profile smoke --results {tmp}/results"


def _resume_past_the_budget(tmp: Path, checkout: Path, request) -> str:
    shutil.copytree(request.getfixturevalue("finished_run"), tmp / "run")
    return f"train --profile smoke --data-dir {request.getfixturevalue('smoke_data')} --out {tmp}/run --resume " \
           f"--tokens {8 * SEQ} --no-progress"


def _train_on_a_short_validation_split(tmp: Path, checkout: Path, request) -> str:
    from rev.data.corpus import prepare

    # a corpus `prepare` accepts (its validation split holds one smoke sequence) standing in for the cpu profile's,
    # whose sequences are 128 tokens: too long for that split
    prepare(f"text:{_text_corpus(tmp / 'c.txt', 300, 60)}", tmp / "data" / "synthetic-cpu", 300,
            val_fraction=0.005, progress=False)
    return f"train --profile cpu --data-dir {tmp}/data --out {tmp}/run --no-progress"


def _prepare_a_short_validation_split(tmp: Path, checkout: Path, request) -> str:
    _text_corpus(tmp / "b.txt", 300, 20)
    return f"prepare --source text:{tmp}/b.txt --vocab-size 300 --val-fraction 0.01 --out {tmp}/short --no-progress"


def _report_on_an_empty_profile(tmp: Path, checkout: Path, request) -> str:
    (tmp / "results" / "smoke").mkdir(parents=True)
    return f"report --profile smoke --results {tmp}/results"


def _badges_at_a_clone_url(tmp: Path, checkout: Path, request) -> str:
    rewrite = colab.rewrite
    request.getfixturevalue("monkeypatch").setattr(colab, "rewrite",
                                                   lambda repo, ref: rewrite(repo, ref, root=checkout))
    return "badges --repo someone/revbook.git"


def _bundle_over_a_file_of_ones_own(tmp: Path, checkout: Path, request) -> str:
    (tmp / "thesis.zip").write_text("not a zip: a person's file that happens to end in .zip")
    return f"bundle --profile smoke --out {tmp}/thesis.zip"


def _site_into_the_checkout(tmp: Path, checkout: Path, request) -> str:
    nb = json.loads((reference.REFERENCE_DIR / "00_setup.ipynb").read_text())
    nb["metadata"]["papermill"] = {"parameters": {"PROFILE": "smoke"}}      # as the workbook leaves a copy
    (tmp / "executed").mkdir()
    (tmp / "executed" / "00_setup.ipynb").write_text(json.dumps(nb))
    return f"site --from {tmp}/executed --out {checkout}"


def _report_over_a_figure_of_ones_own(tmp: Path, checkout: Path, request) -> str:
    _run_folder(tmp / "results" / "smoke" / "run1_baseline")
    (tmp / "results" / "smoke" / "plots").mkdir()
    (tmp / "results" / "smoke" / "plots" / "my_sketch.png").write_bytes(b"\x89PNG a person's figure")
    return f"report --profile smoke --results {tmp}/results"


def _nbref_over_results_of_ones_own(tmp: Path, checkout: Path, request) -> str:
    from rev.book import workbook

    def no_workbook(*args, **kwargs):   # the refusal comes first; a broken one must not cost a workbook run
        raise workbook.WorkbookError("the workbook was started")

    request.getfixturevalue("monkeypatch").setattr(workbook, "run_workbook", no_workbook)
    (tmp / "b" / "results" / "cpu").mkdir(parents=True)
    (tmp / "b" / "results" / "cpu" / "summary.json").write_text("{}")
    return f"nbref --out {tmp}/b"


def _workbook_over_a_student_edition(tmp: Path, checkout: Path, request) -> str:
    import papermill

    from rev.book.student import write_student_edition

    def no_kernel(*args, **kwargs):     # the refusal comes first; a broken one must not cost a notebook run
        raise RuntimeError("papermill was started")

    request.getfixturevalue("monkeypatch").setattr(papermill, "execute_notebook", no_kernel)
    write_student_edition(tmp / "mine")
    return f"workbook --profile smoke --out {tmp}/mine --results {tmp}/results --only 00_setup"


# (case, setup returning the argv, what stderr's one line says | ("REPORT.md", what the report says))
CLI_CASES: list[tuple[str, Callable, str | tuple[str, str]]] = [
    ("1 student --out the checkout", _student_into_the_checkout, "notebooks, inside the checkout's own notebooks/"),
    ("1 student --out notebooks/..", _student_into_notebooks_parent, "notebooks, inside the checkout's own notebooks/"),
    ("2 student over a learner's answers", _student_over_a_learners_answers,
     "01_integrator_theory.ipynb would be replaced and may hold a person's work"),
    ("3 maxbatch budget above free memory", _budget_above_free_memory, "more than this machine has free (40 MiB"),
    ("4 report: seeds.json is a list", _report_with_seeds_as_a_list,
     ("REPORT.md", "smoke/seeds.json (unreadable: a JSON list, not an object)")),
    ("5 nbref --check: cells without metadata", _executed_copies_without_cell_metadata,
     "is not a readable notebook (The notebook is invalid and is missing an expected key: metadata)"),
    ("6 report over a killed run", _report_over_a_killed_run,
     ("REPORT.md", "Broken, so left out: run run2_reversible_same_batch: ")),
    ("7 bench --pos-chunks half", lambda *a: "bench --pos-chunks half", "'half' is neither 'auto' nor a count"),
    ("7 bench --batch-slices two", lambda *a: "bench --batch-slices two", "'two' is neither 'auto' nor a count"),
    ("7 maxbatch --pos-chunk half", lambda *a: "maxbatch --profile smoke --pos-chunk half",
     "'half' is neither 'auto' nor a count"),
    ("7 maxbatch --batch-slice two", lambda *a: "maxbatch --profile smoke --batch-slice two",
     "'two' is neither 'auto' nor a count"),
    ("8 train --resume past the budget", _resume_past_the_budget, "is at step 2, past this run's 1 step"),
    ("9 train: validation split too short", _train_on_a_short_validation_split,
     "too few for one sequence of 128 (it needs 129)"),
    ("9 prepare: validation split too short", _prepare_a_short_validation_split,
     "too few for one sequence of 64 (it needs 65)"),
    ("10 report: a profile folder with no runs", _report_on_an_empty_profile, "no runs in"),
    ("11 badges --repo OWNER/NAME.git", _badges_at_a_clone_url, "without '.git' (someone/revbook)"),
    ("12 train --seed -1", lambda *a: "train --profile smoke --seed -1", "a seed is a whole number from 0 to"),
    # the rule every writing command keeps (rev.base.files.check_output), command by command
    ("rule: course --out the checkout", lambda tmp, checkout, r: f"course --out {checkout} --notebooks 00_setup",
     "the checkout itself"),
    ("rule: bundle --out into rev/", lambda tmp, checkout, r: f"bundle --profile smoke --out {checkout}/rev/b.zip",
     "inside the checkout's own rev/"),
    ("rule: bundle over a file not a bundle", _bundle_over_a_file_of_ones_own, "thesis.zip would be replaced"),
    ("rule: site --out the checkout", _site_into_the_checkout, "the checkout itself"),
    ("rule: report over a figure of one's own", _report_over_a_figure_of_ones_own,
     "plots/my_sketch.png would be replaced"),
    ("rule: nbref over results it did not write", _nbref_over_results_of_ones_own,
     "results/cpu/summary.json would be replaced"),
    ("rule: nbref --out the checkout's tests/", lambda tmp, checkout, r: f"nbref --out {checkout}/tests/build",
     "inside the checkout's own tests/"),
    ("rule: workbook over a student edition", _workbook_over_a_student_edition,
     "00_setup.ipynb would be replaced"),
]


def _snapshot(*roots: Path) -> dict[str, str]:
    seen = {}
    for root in roots:
        for p in sorted(root.rglob("*")):
            seen[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
    return seen


def _is_report(path: str) -> bool:
    return path.endswith("REPORT.md") or "/plots" in path


@pytest.fixture
def scratch_checkout(tmp_path_factory, monkeypatch) -> Path:
    """A copy of the checkout's notebooks/ (and empty rev/ and tests/), standing in for the checkout."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    for rel in ("colab", "tests/notebooks"):
        shutil.copytree(REPO / rel, root / rel)
    shutil.copy(REPO / "README.md", root / "README.md")
    (root / "rev").mkdir()
    monkeypatch.setattr(files, "CHECKOUT", root)
    return root


@pytest.mark.parametrize("case,setup,says", CLI_CASES, ids=[c for c, _, _ in CLI_CASES])
def test_a_mistake_on_the_command_line_gets_one_line_and_leaves_every_file(case, setup, says, tmp_path,
                                                                          scratch_checkout, monkeypatch, capsys,
                                                                          request):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(TRACEBACK_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = setup(tmp_path, scratch_checkout, request).split()
    capsys.readouterr()
    before = _snapshot(tmp_path, scratch_checkout)

    status = cli(argv)

    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    after = _snapshot(tmp_path, scratch_checkout)
    if isinstance(says, tuple):       # a damaged results folder: the report is written, naming what is broken
        assert status == 0, err
        name, text = says
        report = tmp_path / "results" / "smoke" / name
        assert text in report.read_text() and text in out, out
        assert {k: v for k, v in after.items() if not _is_report(k)} == before, "a result was changed"
        return
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2, f"exit status {status}; stderr: {err}"
    last = lines[-1] if lines else ""
    if lines and lines[0].startswith("usage:"):
        assert re.match(rf"python -m rev {argv[0]}: error: ", last), err
    else:
        assert len(lines) == 1 and last.startswith("error: "), f"not one error line: {err!r}"
    assert says in last, f"the message does not say {says!r}: {last}"
    assert after == before, "the command wrote or changed files"


# --- the Python API the notebooks call ---------------------------------------------------------------------------

def _gpt_config(**kw):
    from rev import GPTConfig

    return GPTConfig(vocab_size=64, seq_len=16, n_head=2, d_model=32, **kw)


def _peak_lr_with_infinite_noise():
    from rev.core.optim import peak_lr

    return peak_lr(1e-3, 64, 16, "sqrt", noise_scale=float("inf"))


def _interval_over_a_nan(which: str):
    from rev.measure import stats

    x = [5.93, float("nan"), 5.91]
    return {"mean": lambda: stats.mean_interval(x), "median": lambda: stats.median_interval(x),
            "difference": lambda: stats.median_difference_interval(x, [5.9, 5.8, 5.7])}[which]()


def _train_at_rate_zero(tmp: Path):
    from rev.training.loop import TrainConfig, train

    return train(TrainConfig(profile="smoke", out_dir=tmp / "run", data_dir=tmp / "data", lr=0.0, progress=False))


API_CASES: list[tuple[str, Callable, type, str]] = [
    ("13 GPTConfig(n_layer=4.5)", lambda tmp: _gpt_config(n_layer=4.5), ValueError, "a count has no fraction"),
    ("13 GPTConfig(n_layer='4')", lambda tmp: _gpt_config(n_layer="4"), TypeError, "n_layer must be a whole number"),
    ("14 peak_lr(noise_scale=inf)", lambda tmp: _peak_lr_with_infinite_noise(), ValueError,
     "noise_scale must be a finite number > 0"),
    ("15 mean_interval over a nan", lambda tmp: _interval_over_a_nan("mean"), ValueError, "must be finite numbers"),
    ("15 median_interval over a nan", lambda tmp: _interval_over_a_nan("median"), ValueError,
     "must be finite numbers"),
    ("15 median_difference_interval over a nan", lambda tmp: _interval_over_a_nan("difference"), ValueError,
     "must be finite numbers"),
    ("16 train(lr=0.0)", _train_at_rate_zero, ValueError, "lr must be a finite number > 0, got 0.0"),
]


@pytest.mark.parametrize("case,call,error,says", API_CASES, ids=[c for c, _, _, _ in API_CASES])
def test_a_mistake_in_python_is_refused_early_and_writes_nothing(case, call, error, says, tmp_path):
    with pytest.raises(error, match=re.escape(says)):
        call(tmp_path)
    assert list(tmp_path.iterdir()) == [], "something was written"


def test_a_count_read_back_as_a_whole_float_is_that_count():
    """Counts come back from a results table or JSON as floats: 4.0 layers is 4 (an int the model's range()
    takes), so a model builds from them; 4.5 is refused above."""
    from rev import GPT

    cfg = _gpt_config(n_layer=4.0, pos_chunk=8.0, batch_slice=2.0, keep=(2.0,))
    assert (cfg.n_layer, cfg.pos_chunk, cfg.batch_slice, cfg.keep) == (4, 8, 2, (2,))
    assert all(type(v) is int for v in (cfg.n_layer, cfg.pos_chunk, cfg.batch_slice, *cfg.keep))
    assert len(GPT(cfg).trunk.blocks) == 4
