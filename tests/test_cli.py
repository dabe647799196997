"""Bad input on the command line, for every command: what a user will type wrongly ends in one line that says
what to do, a non-zero exit status, no traceback, and nothing written or overwritten (rev.base.cli).

The table walks every command of `rev.__main__.COMMANDS` and every option that takes a value; a command or
option added later without a row here fails `test_every_command_and_option_is_in_the_table`. Each row runs in
this process (`rev.__main__.cli`, what `python -m rev` runs) from an empty temporary folder, so files written by
mistake under the defaults (results/, data/, build/) show up in its snapshot.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import re
import shutil
from pathlib import Path

import pytest
import torch

from rev.__main__ import COMMANDS, cli, main
from rev.book import colab, reference
from rev.book.sequence import SEQUENCE
from rev.base.cli import TRACEBACK_ENV

REPO = Path(__file__).resolve().parents[1]

# (command, arguments, what the message must mention). {tmp}: the empty folder the row runs in; {file}: a file in
# it; {partial}: a folder holding executed copies of only some notebooks.
CASES: list[tuple[str, str, str]] = [
    ("prepare", "--source nope", "unknown source"),
    ("prepare", "--source text:{tmp}/missing.txt", "does not exist"),
    ("prepare", "--vocab-size 0 --stories 10", "vocab_size=0"),
    ("prepare", "--stories 0", "--stories"),
    ("prepare", "--tokens 5x", "--tokens"),
    ("prepare", "--val-fraction 2 --stories 10", "val_fraction"),
    ("prepare", "--val-fraction nan --stories 10", "val_fraction"),
    ("prepare", "--profile nope", "unknown profile"),
    ("prepare", "--seed -1 --stories 10", "a seed is a whole number from 0 to"),
    ("prepare", "--stories 10 --out {file}", "is a file"),
    ("prepare", "--stories 10 --data-root {file}", "is a file"),
    # a local copy that `datasets` reads but that holds another data set's columns
    ("prepare", "--source tinystories --stories 10 --out {tmp}/ts {othercopy}", "has the columns story, label"),
    ("prepare", "--source tinystories --stories 10 --out {tmp}/ts {numbercopy}", "holds int64"),
    ("train", "--profile nope", "unknown profile"),
    ("train", "--profile smoke --device gpu0", "unknown device 'gpu0'"),
    ("train", "--profile smoke --device cuda", "no CUDA GPU"),
    ("train", "--profile smoke --out {file}", "is a file"),
    ("train", "--profile smoke --data-dir {file}", "is a file"),
    ("train", "--profile smoke --batch-size 0", "--batch-size"),
    ("train", "--profile smoke --tokens 0", "--tokens"),
    ("train", "--profile smoke --tokens 10", "less than one batch"),
    ("train", "--profile smoke --lr nan", "--lr"),
    ("train", "--profile smoke --lr -1", "--lr"),
    ("train", "--profile smoke --h 0", "--h"),
    ("train", "--profile smoke --n-layer 0", "--n-layer"),
    ("train", "--profile smoke --stream fp16", "unknown stream"),
    ("train", "--profile smoke --precision fp8", "unknown precision"),
    ("train", "--profile smoke --eval-every 0", "--eval-every"),
    ("train", "--profile smoke --ckpt-every 0", "--ckpt-every"),
    ("train", "--profile smoke --resume maybe", "--resume"),
    ("train", "--profile smoke --resume", "no checkpoint"),
    ("train", "--profile smoke --trunk nope", "--trunk"),
    ("train", "--profile smoke --lr-scaling cubic", "--lr-scaling"),
    ("train", "--profile smoke --noise-scale 0", "--noise-scale"),
    ("train", "--profile smoke --seed 4294967296", "a seed is a whole number from 0 to 4,294,967,295"),
    ("maxbatch", "--profile nope", "unknown profile"),
    ("maxbatch", "--profile smoke --budget-mib 0", "--budget-mib"),
    ("maxbatch", "--profile smoke --budget-mib nan", "--budget-mib"),
    ("maxbatch", "--profile smoke --budget-mib inf", "--budget-mib"),
    ("maxbatch", "--profile smoke --budget-mib 0.5 --trunk residual", "smaller than the model"),
    ("maxbatch", "--profile smoke --n-layer 0", "--n-layer"),
    ("maxbatch", "--profile smoke --trunk nope", "--trunk"),
    ("maxbatch", "--profile smoke --loss-head nope", "--loss-head"),
    ("maxbatch", "--profile smoke --pos-chunk -3", "--pos-chunk: '-3' is neither 'auto' nor a count"),
    ("maxbatch", "--profile smoke --batch-slice two", "--batch-slice: 'two' is neither 'auto' nor a count"),
    ("maxbatch", "--profile smoke --start 0", "--start"),
    ("maxbatch", "--profile smoke --stream fp16", "--stream"),
    ("maxbatch", "--profile smoke --device gpu0", "unknown device"),
    ("maxbatch", "--profile smoke --device cuda", "no CUDA GPU"),
    ("maxbatch", "--profile smoke --precision fp8 --trunk residual", "unknown precision"),
    ("maxbatch", "--profile smoke --json {tmp}", "is a folder"),
    ("maxbatch", "--profile smoke --json {file}/x.json", "is a file"),
    ("bench", "--n-head 5 --depths", "not divisible by n_head=5"),
    ("bench", "--d-model 0", "--d-model"),
    ("bench", "--batch-slices -1", "--batch-slices: '-1' is neither 'auto' nor a count"),
    ("bench", "--n-layer 0", "--n-layer"),
    ("bench", "--n-head 0", "--n-head"),
    ("bench", "--seq-len 0", "--seq-len"),
    ("bench", "--vocab-size 0", "--vocab-size"),
    ("bench", "--batch 0", "--batch"),
    ("bench", "--steps 0", "--steps"),
    ("bench", "--depths 4 0", "--depths"),
    ("bench", "--pos-chunks -1", "--pos-chunks: '-1' is neither 'auto' nor a count"),
    ("bench", "--trunks nope", "--trunks"),
    ("bench", "--heads nope", "--heads"),
    ("bench", "--precision fp8", "--precision"),
    ("bench", "--device gpu0", "unknown device"),
    ("bench", "--json {tmp}", "is a folder"),
    ("report", "--profile nope --results {tmp}", "unknown profile"),
    ("report", "--profile smoke --results {tmp}", "no results"),
    ("report", "--results {file}", "is a file"),
    ("report", "--merge {tmp}/missing.zip --results {tmp}/r", "no archive"),
    ("report", "--merge {file} --results {tmp}/r", "not a revbook results archive"),
    ("workbook", "--profile nope", "unknown profile"),
    ("workbook", "--profile smoke --only nope", "unknown notebook"),
    ("workbook", "--profile smoke --out {file}", "is a file"),
    ("workbook", "--profile smoke --results {file}", "is a file"),
    ("workbook", "--profile smoke --data-dir {file}", "is a file"),
    ("workbook", "--profile smoke --seed x", "'x' is not a whole number: a seed is"),
    ("workbook", "--profile smoke --only 01_integrator_theory --kernel nokernel", "no Jupyter kernel"),
    ("bundle", "--profile nope --out {tmp}/b.zip", "unknown profile"),
    ("bundle", "--profile smoke --out {tmp}", "is a folder"),
    ("bundle", "--profile smoke --out {file}/b.zip", "is a file"),
    ("bundle", "--profile smoke --data-dir {file} --out {tmp}/b.zip", "is a file"),
    ("bundle", "--results nope --results-dir {tmp} --out {tmp}/r.zip", "no results"),
    ("bundle", "--results smoke --results-dir {file}", "is a file"),
    ("student", "--out {file}", "is a file"),
    ("student", "--out {file}/sub", "is a file"),
    ("course", "--out {file}", "is a file"),
    ("course", "--out {tmp}/c --notebooks nope", "no notebook nope"),
    ("course", "--out {tmp}/c --assignment ../x", "--assignment"),
    ("course", "--out {tmp}/c --assignment=", "--assignment"),
    ("course", "--out {tmp}/c --course-id=", "--course-id"),
    ("course", "--out {tmp}/c --profile full", "--profile"),
    ("thermo-shock", "--profile nope", "unknown profile"),
    ("thermo-shock", "--profile smoke --seeds 0", "--seeds"),
    ("thermo-shock", "--profile smoke --jobs 0", "--jobs"),
    ("thermo-shock", "--profile smoke --results {file}", "is a file"),
    ("gpucheck", "", "needs a CUDA GPU"),
    ("gpucheck", "--device gpu0", "CUDA"),
    ("gpucheck", "--steps 0", "--steps"),
    ("gpucheck", "--json {tmp}", "is a folder"),
    ("gpucheck", "--data-dir {file}", "is a file"),
    ("gpucheck", "--reversible residual", "--reversible"),
    ("nbref", "--check {tmp}/missing", "does not exist"),
    ("nbref", "--check {file}", "is a file"),
    ("nbref", "--from {tmp}/missing", "does not exist"),
    ("nbref", "--from {partial}", "no reference was written"),
    ("nbref", "--out {file}", "is a file"),
    ("plan", "--profile k80", "unknown profile"),
    ("plan", "--gpu-memory-gib -3", "GPU's memory in GiB"),
    ("plan", "--gpu-memory-gib inf", "GPU's memory in GiB"),
    ("plan", "--results {file}", "is a file"),
    ("plan", "--device gpu0", "gpu0"),
    ("badges", "--repo ../..", "OWNER/NAME"),
    ("badges", "--repo someone/..", "OWNER/NAME"),
    ("badges", "--repo=-x/revbook", "OWNER/NAME"),
    ("badges", "--repo revbook", "OWNER/NAME"),
    ("badges", "--repo someone/revbook --ref ../main", "branch or tag"),
    ("badges", "--repo someone/revbook --ref main.lock", "branch or tag"),
    ("site", "", "--from DIR"),
    ("site", "--from {tmp}/missing", "no notebooks"),
    ("site", "--profile nope", "unknown profile"),
    ("site", "--from {tmp} --out {file}", "is a file"),
    ("site", "--from {tmp} --results {file}", "is a file"),
    ("site", "--from {tmp} --check --screenshots {file}", "is a file"),
]

# Options any value of their type suits, so no value is "bad" (none now: a seed is a whole number in a range).
ANY_VALUE: set[tuple[str, str]] = set()
# Commands that rewrite files of the repository itself (notebooks, README, references): their rows run against a
# scratch copy, so that a check that stopped working fails this test instead of rewriting the checkout.
TOUCH_REPO = {"badges", "nbref"}


def _options(command: str) -> list[str]:
    """The options of `command` that take a value and can be given wrongly: not flags, not hidden ones."""
    p = argparse.ArgumentParser()
    importlib.import_module(COMMANDS[command][0]).add_arguments(p)
    return [a.option_strings[-1] for a in p._actions
            if a.option_strings and a.nargs != 0 and a.help != argparse.SUPPRESS]


def test_every_command_and_option_is_in_the_table():
    assert {c for c, _, _ in CASES} == set(COMMANDS), "a command without bad-input rows"
    for command in COMMANDS:
        tried = {w.split("=")[0] for c, args, _ in CASES if c == command for w in args.split() if w.startswith("--")}
        missing = [o for o in _options(command) if o not in tried and (command, o) not in ANY_VALUE]
        assert not missing, f"{command}: no bad-input row tries {missing}"


def _snapshot(*roots: Path) -> dict[str, str]:
    """Every file (by content hash) and folder under `roots`: what a command must leave as it found it."""
    seen = {}
    for root in roots:
        for p in sorted(root.rglob("*")) if root.is_dir() else [root]:
            seen[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
    return seen


def _scratch_repo(root: Path, monkeypatch) -> Path:
    """A copy of what `badges` and `nbref` rewrite, which they are pointed at instead of the checkout."""
    for rel in ("notebooks", "colab", "tests/notebooks"):
        shutil.copytree(REPO / rel, root / rel)
    shutil.copy(REPO / "README.md", root / "README.md")
    rewrite, write_references = colab.rewrite, reference.write_references
    monkeypatch.setattr(colab, "rewrite", lambda repo, ref: rewrite(repo, ref, root=root))
    monkeypatch.setattr(reference, "write_references", lambda src: write_references(src, root / "tests/notebooks"))
    return root


# Local TinyStories copies that `datasets` reads but that hold the wrong thing: another data set's columns, or a
# `text` column of numbers. A row names one by its placeholder.
WRONG_COPIES = {"{othercopy}": {"story": ["Once upon a time.", "The end."], "label": [0, 1]},
                "{numbercopy}": {"text": [3, 4]}}


def _argv(command: str, args: str, tmp: Path) -> list[str]:
    words = args.replace("{tmp}", str(tmp)).replace("{file}", str(tmp / "afile"))
    for placeholder in WRONG_COPIES:
        words = words.replace(placeholder, "")
    return [command, *[w.replace("{partial}", str(tmp / "partial")) for w in words.split()]]


def _other_dataset_copy(root: Path, monkeypatch, request, rows: dict) -> None:
    """REV_TINYSTORIES naming a folder in the hub's layout whose splits hold `rows` (another data set's columns)."""
    datasets = pytest.importorskip("datasets")
    from rev.data import tinystories

    folder = root / "Other" / "data"
    folder.mkdir(parents=True)
    for split in ("train", "validation"):
        datasets.Dataset.from_dict(rows).to_parquet(str(folder / f"{split}-00000-of-00001.parquet"))
    monkeypatch.setenv(tinystories.LOCAL_ENV, str(folder.parent))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(root / "hf-cache"))
    if datasets.is_progress_bar_enabled():  # datasets' own bars while it reads the copy are not the command's output
        datasets.disable_progress_bars()
        request.addfinalizer(datasets.enable_progress_bars)


@pytest.mark.parametrize("command,args,says", CASES, ids=[f"{c} {a}" for c, a, _ in CASES])
def test_bad_input_is_one_line_a_failing_status_and_nothing_written(command, args, says, tmp_path, monkeypatch,
                                                                    capsys, tmp_path_factory, request):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(TRACEBACK_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)   # the same answers on a machine with a GPU
    (tmp_path / "afile").write_text("a file where a folder belongs\n")
    if "{partial}" in args:          # executed copies of only some of the notebooks
        (tmp_path / "partial").mkdir()
        for name in SEQUENCE[:3]:
            shutil.copy(reference.REFERENCE_DIR / f"{name}.ipynb", tmp_path / "partial")
    repo = [_scratch_repo(tmp_path_factory.mktemp("repo"), monkeypatch)] if command in TOUCH_REPO else []
    for placeholder, rows in WRONG_COPIES.items():
        if placeholder in args:
            _other_dataset_copy(tmp_path_factory.mktemp("hub"), monkeypatch, request, rows)
        capsys.readouterr()
    before, repo_before = _snapshot(tmp_path), _snapshot(*repo)

    status = cli(_argv(command, args, tmp_path))

    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert status == 2, f"exit status {status}; stderr: {err}"
    assert "Traceback" not in err, err
    if lines and lines[0].startswith("usage:"):     # argparse's own: usage, then one error line
        assert re.match(rf"python -m rev {command}: error: ", lines[-1]), err
    else:
        assert len(lines) == 1 and lines[0].startswith("error: "), f"not one error line: {err!r}"
    assert says in lines[-1], f"the message does not mention {says!r}: {lines[-1]}"
    assert _snapshot(tmp_path) == before, "the command wrote or changed files"
    assert _snapshot(*repo) == repo_before, "the command changed files of the repository"


def test_the_traceback_is_there_when_asked_for(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(TRACEBACK_ENV, "1")
    assert cli(["train", "--profile", "nope"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError: unknown profile 'nope'" in err
    assert err.splitlines()[-1].startswith("error: unknown profile")


def test_in_process_main_raises_the_message_for_callers(tmp_path, monkeypatch):
    """`main` (for tests and scripts) raises the line as SystemExit, chained to the error behind it."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="^error: unknown profile 'nope'") as info:
        main(["maxbatch", "--profile", "nope"])
    assert isinstance(info.value.__cause__, ValueError)


def test_a_kernel_that_fails_to_start_leaves_no_half_written_notebook(tmp_path, monkeypatch):
    """The executed copy is written to a temporary name and renamed only when papermill is done; the temporary
    copy a killed run left behind is cleared when the notebook runs again."""
    import papermill
    from jupyter_client.kernelspec import NoSuchKernel

    from rev.book import workbook

    def fails_after_writing(src, dst, **kw):
        Path(dst).write_text("{half a notebook")      # papermill writes the copy as it goes
        raise NoSuchKernel("gone")

    monkeypatch.setattr(workbook, "check_kernel", lambda kernel: None)   # as if it vanished after the check
    monkeypatch.setattr(papermill, "execute_notebook", fails_after_writing)
    (tmp_path / "b" / "notebooks").mkdir(parents=True)
    (tmp_path / "b" / "notebooks" / ".01_integrator_theory.ipynb.x1.tmp.ipynb").write_text("{")  # a killed run's
    with pytest.raises(NoSuchKernel):
        workbook.run_workbook("smoke", tmp_path / "b", tmp_path / "r", tmp_path / "d", only=["01_integrator_theory"])
    assert [p.name for p in (tmp_path / "b" / "notebooks").iterdir()] == []


def test_a_gpu_number_beyond_those_visible_is_refused(fake_cuda):
    from rev.base.device import pick_device

    assert pick_device("cuda:0") == torch.device("cuda", 0) and pick_device("cuda").type == "cuda"
    with pytest.raises(ValueError, match=r"'cuda:1': only 1 CUDA GPU\(s\) visible"):
        pick_device("cuda:1")
    with pytest.raises(ValueError, match="unknown device 'mps'"):
        pick_device("mps")
