"""Mutation check of our own (on demand, not in CI): one-line sabotages of the README's promises.

    python tools/mutate.py                 # every mutation; prints a table mutation -> test that caught it
    python tools/mutate.py --only M03 M07  # some of them

Each mutation replaces one exact line fragment in a scratch copy of the repository (the checkout itself is never
touched), runs the tests that guard that promise, and records the first failing test. A mutation no test catches
is a gap: add a test, or list it in EQUIVALENT with the reason it cannot change behaviour.

Why a curated list and not mutmut: mutmut 3 over rev/core, rev/measure and rev/training makes well over a thousand mutants, and
each needs the core and engine tests (about a minute on 2 cores), so a run takes a day, most of it on mutants of
messages and defaults that say nothing about the promises. A few dozen sabotages of what the README
promises take a few minutes and each names the test that guards it.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPY_IGNORE = shutil.ignore_patterns(".venv", ".git", "data", "results", "build", "mutants", "__pycache__",
                                     "*.egg-info", ".pytest_cache")


@dataclass(frozen=True)
class Mutation:
    id: str
    promise: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]


CORE, ENGINE = "tests/core", "tests/engine"
MUTATIONS = [
    Mutation("M01", "fixed stream: add/subtract exact (int64 grid)", "rev/core/streams.py",
             'return FixedStream()', 'return Stream("fixed", torch.float32)',
             (f"{CORE}/test_promises.py", f"{CORE}/test_reversible.py")),
    Mutation("M02", "backward restarts from kept boundary states", "rev/core/reversible.py",
             "state = kept.pop(layer + 1)", "kept.pop(layer + 1)", (f"{CORE}/test_promises.py",)),
    Mutation("M03", "autocast replayed around each recomputed block", "rev/core/reversible.py",
             "with torch.enable_grad(), self.autocast.context():", "with torch.enable_grad():",
             (f"{CORE}/test_reversible.py",)),
    Mutation("M04", "reversible gradients equal the stored twin's (scale)", "rev/core/reversible.py",
             "(g * coef).to(out.dtype)", "(g * coef * 1.001).to(out.dtype)", (f"{CORE}/test_reversible.py",)),
    Mutation("M05", "reversible Euler inverse undoes updates in reverse order", "rev/core/integrators.py",
             '        z = sub(z, call("G", y), h)\n        y = sub(y, call("F", z), h)',
             '        y = sub(y, call("F", z), h)\n        z = sub(z, call("G", y), h)',
             (f"{CORE}/test_reversible.py",)),
    Mutation("M06", "leapfrog: Euler starter at layer 0, 2h after", "rev/core/integrators.py",
             "return h if layer == 0 else 2 * h", "return 2 * h", (f"{CORE}/test_promises.py",)),
    Mutation("M07", "reconstruction_error measures the rebuilt input", "rev/core/reversible.py",
             "return state_error(start, back, stream)", "return state_error(start, start, stream)",
             (f"{CORE}/test_reversible.py",)),
    Mutation("M08", "chunked loss is the mean over all rows", "rev/core/loss.py",
             "        return loss / n\n", "        return loss / (n + 1)\n", (f"{CORE}/test_model_and_memory.py",)),
    Mutation("M09", "the optimizer uses the scheduled LR", "rev/training/loop.py",
             '            g["lr"] = lr', '            g["lr"] = plan.lr', (f"{ENGINE}/test_train_settings.py",)),
    Mutation("M10", "gradients clipped to the profile's grad_clip", "rev/core/step.py",
             "clip_grad_norm_(model.parameters(), clip) if clip",
             'clip_grad_norm_(model.parameters(), float("inf")) if clip', (f"{ENGINE}/test_train_settings.py",)),
    Mutation("M11", "weight decay on matrices only", "rev/core/optim.py",
             '{"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}',
             '{"params": [p for p in params if p.dim() < 2], "weight_decay": weight_decay}',
             (f"{ENGINE}/test_train_settings.py",)),
    Mutation("M12", "linear warm-up (step 0 gets lr/warmup)", "rev/core/optim.py",
             "return lr * (step + 1) / warmup_steps", "return lr * step / warmup_steps",
             (f"{ENGINE}/test_train_settings.py",)),
    Mutation("M13", "validation every eval_every steps and at the end", "rev/training/loop.py",
             "if (step + 1) % plan.eval_every == 0 or last:", "if step % plan.eval_every == 0 or last:",
             (f"{ENGINE}/test_train_settings.py",)),
    Mutation("M14", "resume restores the sampler", "rev/training/loop.py",
             'gen.set_state(ckpt["sampler_rng"])', "gen.manual_seed(cfg.seed)",
             (f"{ENGINE}/test_train.py::test_resume_after_kill_is_exact",)),
    Mutation("M15", "targets are the inputs shifted by one", "rev/data/tokens.py",
             "x, y = chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()",
             "x, y = chunk[:, :-1].contiguous(), chunk[:, :-1].contiguous()", (f"{ENGINE}/test_data.py",)),
    Mutation("M16", "max batch: the largest n that fits", "rev/measure/maxbatch.py",
             "    return lo\n", "    return lo + 1\n", (f"{ENGINE}/test_train.py::test_largest_fitting_finds_the_threshold",)),
    Mutation("M17", "trace walk: final weights-hash verification", "rev/chapters/trace/walk.py",
             "if verify and weights_hash(model) != trace.hash_at(to_step):",
             "if False and weights_hash(model) != trace.hash_at(to_step):",
             ("tests/chapters/test_trace_promises.py",)),
    Mutation("M18", "trace walk: LR restored to the one recorded at the step", "rev/chapters/trace/walk.py",
             'lrs = trace.header["initial_lrs"] if step == 0 or rec is None else rec.lrs',
             'lrs = trace.header["initial_lrs"]', ("tests/chapters/test_trace_promises.py",)),
]
CLI, OOM, RESUME = "tests/test_cli.py", f"{ENGINE}/test_maxbatch_oom.py", f"{ENGINE}/test_resume_key.py"
MUTATIONS += [
    Mutation("M19", "student edition: nothing of a solution survives its stub", "rev/book/student.py",
             "        elif not inside:\n            out.append(line)", "        else:\n            out.append(line)",
             ("tests/book/test_student_stubs.py",)),
    Mutation("M20", "resume='auto': another token budget is another run", "rev/training/loop.py",
             '           "steps": plan.steps, "warmup_steps"', '           "warmup_steps"', (RESUME,)),
    Mutation("M21", "resume='auto': another batch is another run", "rev/training/loop.py",
             'key = {"model": plan.model.to_dict(), "profile": asdict(plan.profile), "batch_size": plan.batch_size,',
             'key = {"model": plan.model.to_dict(), "profile": asdict(plan.profile),',
             (RESUME,)),
    Mutation("M22", "max batch: a probe out of memory is a miss, not the end of the search", "rev/measure/maxbatch.py",
             "        failed = True\n", "        raise\n", (OOM,)),
    Mutation("M23", "max batch: a probe out of memory does not fit", "rev/measure/maxbatch.py",
             "        return None, False\n", "        return None, True\n", (OOM,)),
    Mutation("M24", "max batch: torch.OutOfMemoryError is out of memory whatever its message", "rev/measure/maxbatch.py",
             "    if isinstance(error, torch.cuda.OutOfMemoryError):", "    if False:", (OOM,)),
    Mutation("M25", "TinyStories: validation from the data set's own validation split", "rev/data/tinystories.py",
             '(("train", "train"), ("val", "validation"))', '(("train", "train"), ("val", "train"))',
             (f"{ENGINE}/test_tinystories_local.py",)),
    Mutation("M26", "TinyStories: a local copy is read by datasets instead of the hub", "rev/data/tinystories.py",
             "datasets.load_dataset(path, split=hf)", "datasets.load_dataset(TINYSTORIES, split=hf)",
             (f"{ENGINE}/test_tinystories_local.py",)),
    Mutation("M27", "command line: a user error is one line, not a traceback", "rev/__main__.py",
             "    except USER_ERRORS as e:", "    except ():", (CLI,)),
    Mutation("M28", "badges: only OWNER/NAME rewrites the badges", "rev/book/colab.py",
             "    if not valid_repo(repo) or not valid_ref(ref):", "    if not valid_ref(ref):", (CLI,)),
    Mutation("M29", "nbref: every executed copy checked before a reference is written", "rev/book/reference.py",
             "    if missing:\n", "    if False:\n", (CLI,)),
    Mutation("M30", "workbook: a missing kernel refused before anything runs", "rev/book/workbook.py",
             "    check_kernel(kernel)\n", "    pass\n", (CLI,)),
    Mutation("M31", "workbook: executed notebooks written atomically", "rev/book/workbook.py",
             '            with atomic_path(dst, suffix=".ipynb") as tmp:', "            for tmp in [dst]:", (CLI,)),
    Mutation("M32", "command line: nan and inf are not a positive number", "rev/base/cli.py",
             "    if not math.isfinite(value) or value <= 0:", "    if value <= 0:", (CLI,)),
    Mutation("M33", "command line: a path through a file is refused as a folder", "rev/base/cli.py",
             "    if not _first_existing(path).is_dir():", "    if False:", (CLI,)),
    Mutation("M34", "command line: a device name torch cannot parse is a user error", "rev/base/device.py",
             "    except RuntimeError:  # torch's", "    except KeyError:  # torch's", (CLI,)),
]
EQUIVALENT: dict[str, str] = {}  # mutation id -> why no test can catch it


def first_failure(output: str) -> str:
    m = re.search(r"^FAILED (\S+)", output, re.MULTILINE)
    if m:
        return m.group(1)
    m = re.search(r"^ERROR (\S+)", output, re.MULTILINE)  # a fixture failed: name it, but it is not a catch
    return f"an error (not a failed assertion) in {m.group(1)}" if m else "(failed, no test named)"


def run_one(m: Mutation, scratch: Path, timeout: int) -> str:
    path = scratch / m.file
    original = (REPO / m.file).read_text()
    if original.count(m.old) != 1:
        return f"STALE: the fragment occurs {original.count(m.old)} times in {m.file}; update the mutation"
    path.write_text(original.replace(m.old, m.new))
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:randomly", *m.tests]
        res = subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"caught: timed out after {timeout} s"
    finally:
        path.write_text(original)
    if res.returncode == 0:
        return f"equivalent: {EQUIVALENT[m.id]}" if m.id in EQUIVALENT else "NOT CAUGHT"
    return f"caught by {first_failure(res.stdout)}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", help="mutation ids to run (default all)")
    p.add_argument("--timeout", type=int, default=600, help="seconds per mutation")
    args = p.parse_args(argv)
    chosen = [m for m in MUTATIONS if not args.only or m.id in args.only]
    with tempfile.TemporaryDirectory(prefix="rev-mutate-") as tmp:
        scratch = Path(tmp) / "repo"
        shutil.copytree(REPO, scratch, ignore=COPY_IGNORE)
        print(f"| id | promise | mutation ({len(chosen)}, in a scratch copy) | result |\n|---|---|---|---|", flush=True)
        bad = 0
        for m in chosen:
            result = run_one(m, scratch, args.timeout)
            bad += result.startswith(("NOT CAUGHT", "STALE"))
            change = f"`{m.file}`: `{m.old.strip().splitlines()[0]}` -> `{m.new.strip().splitlines()[0]}`"
            print(f"| {m.id} | {m.promise} | {change} | {result} |", flush=True)
    print(f"{len(chosen) - bad} of {len(chosen)} mutations caught or equivalent")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
