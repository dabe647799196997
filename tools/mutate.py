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


CORE = "tests/core"
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
             '            g["lr"] = lr', '            g["lr"] = plan.lr', ("tests/training/test_train_settings.py",)),
    Mutation("M10", "gradients clipped to the profile's grad_clip", "rev/core/step.py",
             "clip_grad_norm_(model.parameters(), clip) if clip",
             'clip_grad_norm_(model.parameters(), float("inf")) if clip', ("tests/training/test_train_settings.py",)),
    Mutation("M11", "weight decay on matrices only", "rev/core/optim.py",
             '{"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}',
             '{"params": [p for p in params if p.dim() < 2], "weight_decay": weight_decay}',
             ("tests/training/test_train_settings.py",)),
    Mutation("M12", "linear warm-up (step 0 gets lr/warmup)", "rev/core/optim.py",
             "return lr * (step + 1) / warmup_steps", "return lr * step / warmup_steps",
             ("tests/training/test_train_settings.py",)),
    Mutation("M13", "validation every eval_every steps and at the end", "rev/training/loop.py",
             "if (step + 1) % plan.eval_every == 0 or last:", "if step % plan.eval_every == 0 or last:",
             ("tests/training/test_train_settings.py",)),
    Mutation("M14", "resume restores the sampler", "rev/training/loop.py",
             'gen.set_state(ckpt["sampler_rng"])', "gen.manual_seed(cfg.seed)",
             ("tests/training/test_train.py::test_resume_after_kill_is_exact",)),
    Mutation("M15", "targets are the inputs shifted by one", "rev/data/tokens.py",
             "x, y = chunk[:, :-1].contiguous(), chunk[:, 1:].contiguous()",
             "x, y = chunk[:, :-1].contiguous(), chunk[:, :-1].contiguous()", ("tests/data/test_data.py",)),
    Mutation("M16", "max batch: the largest n that fits", "rev/measure/search.py",
             "    return lo\n", "    return lo + 1\n", ("tests/training/test_train.py::test_largest_fitting_finds_the_threshold",)),
    Mutation("M17", "trace walk: final weights-hash verification", "rev/chapters/trace/walk.py",
             "if verify and weights_hash(model) != trace.hash_at(to_step):",
             "if False and weights_hash(model) != trace.hash_at(to_step):",
             ("tests/chapters/trace/test_trace_promises.py",)),
    Mutation("M18", "trace walk: LR restored to the one recorded at the step", "rev/chapters/trace/walk.py",
             'lrs = trace.header["initial_lrs"] if step == 0 or rec is None else rec.lrs',
             'lrs = trace.header["initial_lrs"]', ("tests/chapters/trace/test_trace_promises.py",)),
]
CLI, OOM, RESUME = "tests/test_cli.py", "tests/measure/test_maxbatch_oom.py", "tests/training/test_resume_key.py"
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
    Mutation("M22", "max batch: a probe out of memory is a miss, not the end of the search", "rev/measure/probe.py",
             "        failed = True\n", "        raise\n", (OOM,)),
    Mutation("M23", "max batch: a probe out of memory does not fit", "rev/measure/probe.py",
             "        return None, False\n", "        return None, True\n", (OOM,)),
    Mutation("M24", "max batch: torch.OutOfMemoryError is out of memory whatever its message", "rev/measure/probe.py",
             "    if isinstance(error, torch.cuda.OutOfMemoryError):", "    if False:", (OOM,)),
    Mutation("M25", "TinyStories: validation from the data set's own validation split", "rev/data/tinystories.py",
             '(("train", "train"), ("val", "validation"))', '(("train", "train"), ("val", "train"))',
             ("tests/data/test_tinystories_local.py",)),
    Mutation("M26", "TinyStories: a local copy is read by datasets instead of the hub", "rev/data/tinystories.py",
             "datasets.load_dataset(path, split=hf)", "datasets.load_dataset(TINYSTORIES, split=hf)",
             ("tests/data/test_tinystories_local.py",)),
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
# Bad input: one line (or a clear exception) and every file as it was; each the row of tests/test_bad_inputs.py or
# the test that turns on it. Then the promises whose tests once held only inputs where a wrong rule agreed.
BAD, FILES = "tests/test_bad_inputs.py", "tests/base/test_files.py"
MUTATIONS += [
    Mutation("M35", "nothing writes into the checkout or its own folders", "rev/base/files.py",
             '    if dest == CHECKOUT:\n        return "the checkout itself"', "    if False:\n        pass",
             (FILES, BAD)),
    Mutation("M36", "a source folder is a folder, not a name prefix", "rev/base/files.py",
             "        if dest.is_relative_to(CHECKOUT / folder):",
             "        if str(dest).startswith(str(CHECKOUT / folder)):", (FILES,)),
    Mutation("M37", "a copy a learner edited is replaced only with --force", "rev/base/files.py",
             "    folder, record = Path(folder), _record(Path(folder))", "    return []", (BAD, FILES)),
    Mutation("M38", "course: an instructor's edit in source/ is replaced only with --force", "rev/book/course.py",
             "    check_output(out, edited_files(out, replaced), force=force)", "    pass", (BAD,)),
    Mutation("M39", "bundle: a file that is not a bundle is replaced only with --force", "rev/base/files.py",
             "    check_output(out, [out] if out.is_file() and not _same_kind_of_zip(out, extra) else [], force=force)",
             "    pass", (BAD,)),
    Mutation("M40", "site: where it goes is checked, toolchain or not", "rev/book/site.py",
             "    check_out(Path(out), force)  ", "    pass  ", (BAD,)),
    Mutation("M41", "report: a figure of one's own in plots/ is replaced only with --force",
             "rev/chapters/report/writer.py", '    check_output(profile_dir, theirs, force=force, what="--results")',
             "    pass", (BAD,)),
    Mutation("M42", "nbref: results it did not write are never cleared", "rev/book/reference.py",
             '    check_output(out, theirs + foreign_copies(out / "notebooks"), force=force)', "    pass", (BAD,)),
    Mutation("M43", "workbook: a notebook that is not an executed copy is replaced only with --force",
             "rev/book/workbook.py",
             '    check_output(build / "notebooks", foreign_copies(build / "notebooks", names), force=force)',
             "    pass", (BAD,)),
    Mutation("M44", "max batch: a budget above free memory is refused before any probe", "rev/measure/probe.py",
             "    if have is not None and budget_bytes > have:", "    if False:",
             (BAD, "tests/measure/test_budget_check.py")),
    Mutation("M45", "max batch: the CPU allocator's refusal is a miss", "rev/measure/probe.py",
             ', "can\'t allocate memory")', ")", ("tests/measure/test_budget_check.py",)),
    Mutation("M46", "report: a profile file of the wrong shape is named and read as absent",
             "rev/chapters/shared/results.py", "    if not isinstance(value, kind):", "    if False:", (BAD,)),
    Mutation("M47", "nbref: a file that is not a notebook is a user error naming it", "rev/book/sequence.py",
             "    except (nbformat.ValidationError, ValueError,", "    except (ValueError,", (BAD,)),
    Mutation("M48", "report: a run whose log cannot be read is listed as broken", "rev/chapters/shared/results.py",
             "        except ValueError as e:\n            broken[", "        except KeyError as e:\n            broken[",
             (BAD,)),
    Mutation("M49", "auto-or-count arguments say what they take", "rev/base/cli.py",
             "class CountArgError(argparse.ArgumentTypeError, ValueError):", "class CountArgError(ValueError):",
             (BAD,)),
    Mutation("M50", "train --resume refuses a checkpoint past the budget", "rev/training/loop.py",
             '    if ckpt is not None and int(ckpt["step"]) > plan.steps:',
             '    if ckpt is not None and int(ckpt["step"]) >= plan.steps:', ("tests/training/test_train.py", BAD)),
    Mutation("M51", "train: a split too short for one sequence is refused before anything is written",
             "rev/training/loop.py", "    data.check_sequences(plan.model.seq_len)", "    pass", (BAD,)),
    Mutation("M52", "prepare: a split too short for one sequence is refused", "rev/data/corpus.py",
             '        check_sequence_fits(split, splits[split]["tokens"], seq_len, ', "        (split, ",
             ("tests/data/test_data.py", BAD)),
    Mutation("M53", "one sequence needs seq_len + 1 tokens", "rev/data/tokens.py", "    if n_tokens <= seq_len:",
             "    if n_tokens < seq_len:", ("tests/data/test_data.py",)),
    Mutation("M54", "report: a profile folder without runs is an error", "rev/chapters/report/writer.py",
             '    if not len(df) and not df.attrs["broken"]:', "    if False:", (BAD,)),
    Mutation("M55", "badges: a name ending in .git is refused", "rev/book/colab.py",
             '    if repo.lower().endswith(".git"):', "    if False:", (BAD,)),
    Mutation("M56", "a seed is a whole number from 0 to 2**32 - 1", "rev/base/cli.py",
             "    if not 0 <= seed <= SEED_MAX:", "    if False:", (BAD,)),
    Mutation("M57", "a count has no fraction", "rev/core/model.py",
             "        if not math.isfinite(value) or value != int(value):", "        if not math.isfinite(value):", (BAD,)),
    Mutation("M58", "a noise scale is finite", "rev/core/optim.py",
             "    if not (math.isfinite(noise_scale) and noise_scale > 0):", "    if not noise_scale > 0:", (BAD,)),
    Mutation("M59", "interval samples are finite", "rev/measure/stats.py", "    bad = np.flatnonzero(~np.isfinite(x))",
             "    bad = []", (BAD,)),
    Mutation("M60", "a learning rate is finite and above 0", "rev/core/optim.py",
             "and math.isfinite(base_lr) and base_lr > 0):", "):", (BAD,)),
    Mutation("M61", "a 95% bootstrap interval leaves 2.5% on each side", "rev/measure/stats.py",
             "    tail = (1 - level) / 2", "    tail = (1 - level)", ("tests/measure/test_stats.py",)),
    Mutation("M62", "an early spike against the whole run's median norm", "rev/chapters/shared/run_log.py",
             "median_grad_norm=float(np.nanmedian(norm))", "median_grad_norm=float(np.nanmedian(early))",
             ("tests/chapters/shared/test_stall_rule.py",)),
    Mutation("M63", "a GPU plan says memory forced it below 16,384 rows only below them", "rev/measure/slicing.py",
             "    if plan.sequences * cfg.seq_len < GPU_MIN_ROWS:", "    if True:", ("tests/measure/test_slicing.py",)),
    Mutation("M64", "the fused head keeps an fp32 input gradient", "rev/measure/ledger.py",
             "        return cfg.d_model * 4 ", "        return cfg.d_model * act ", ("tests/measure/test_ledger.py",)),
    Mutation("M65", "a large_string text column is text", "rev/data/tinystories.py",
             '        if kind not in ("string", "large_string"):', '        if kind not in ("string",):',
             ("tests/data/test_tinystories_local.py",)),
    Mutation("M66", "09's best fixed rival by gradient error first", "rev/chapters/adaptive/placement.py",
             'key=lambda r: (grad_error(r["grad_cos_min"], floor), r["max_recon_error"])',
             'key=lambda r: (r["max_recon_error"], grad_error(r["grad_cos_min"], floor))',
             ("tests/chapters/adaptive/test_adaptive.py",)),
    Mutation("M67", "a plain-text result is read for noise", "rev/book/outputs.py",
             '        elif "text/plain" in out.get("data", {}) and', "        elif False and", ("tests/book/test_outputs.py",)),
    Mutation("M68", "references agree to four significant digits", "rev/book/reference.py", "REL_TOL = 1e-3 ",
             "REL_TOL = 1e-4 ", ("tests/book/test_reference.py",)),
    Mutation("M69", "a prediction in words against a number is compared as words", "rev/chapters/shared/exercises.py",
             " and isinstance(guess, (int, float)) and not isinstance(value, bool):", " and not isinstance(value, bool):",
             ("tests/chapters/shared/test_recorded_predictions.py",)),
    Mutation("M70", "every run has a colour of its own", "rev/chapters/shared/palette.py",
             '"run3b_reversible_max_batch_stream": "#e377c2"', '"run3b_reversible_max_batch_stream": "#ff7f0e"',
             ("tests/chapters/shared/test_palette.py",)),
    Mutation("M71", "a gap that is only a bound never counts as paid", "rev/chapters/assignment/spending.py",
             "        if self.gap.bound:", "        if False:", ("tests/chapters/report/test_report_verdicts.py",)),
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
