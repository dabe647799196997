"""Every training run a profile's workbook makes, sized before any runs: the searches of notebook 06 replayed on the
memory ledger's predicted steps (`rev.measure.ledger.step_memory`), with the same search (`largest_fitting`, the
profile's `search_probes`) and the same budgets and slicing rules the notebooks use, on a machine that need not be
the one the workbook is for.

One `Work` per training run (screening, the main runs and their seed replicas, the recipe sweep, the runner-up,
the companion chapters' runs) and per measurement that trains or evaluates steps (search probes, timed steps,
gradient evaluations). What the plan cannot know before the workbook runs, it assumes and says so: the screening's
pick (reveuler_rev, h = 1, fp32, unless a results folder holds the screening) and the runner-up (the other
integrator).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ...core.model import GPTConfig, stored_twin
from ...measure.ledger import step_memory
from ...base.profiles import Profile, ProfileLike, get_profile
from ..assignment.sizes import chapter_sizes as assignment_sizes, max_batch_tokens
from ...measure.search import largest_fitting
from ...measure.probe import CUDA_FRACTION
from ...measure.slicing import SlicePlan, plan_slices, planned_by_probes
from ...training.loop import untimed_steps
from .cost import Work, gpt_work
from ...base.units import GIB



@dataclass(frozen=True)
class Machine:
    """What the plan sizes the workbook for: a GPU of `memory` bytes (a T4's fp16 autocast), or a CPU (fp32, the
    profile's `cpu_mem_budget`)."""

    kind: str                # "gpu" | "cpu"
    memory: int = 0          # a GPU's memory, bytes

    @property
    def dtype(self) -> torch.dtype:
        return torch.float16 if self.kind == "gpu" else torch.float32

    @property
    def available(self) -> int:
        """What a training step may use: 90% of an empty GPU (`cuda_budget`); a CPU's RAM is not the limit."""
        return int(CUDA_FRACTION * self.memory) if self.kind == "gpu" else 1 << 62

    def budget(self, prof: Profile) -> int:
        """The max-batch searches' budget (notebook 06's `memory_budget`)."""
        return prof.gpu_budget(self.available) if self.kind == "gpu" else prof.cpu_mem_budget


def machine_for(profile: ProfileLike, gpu_memory_gib: float | None = None) -> Machine:
    """A GPU of `gpu_memory_gib` GiB when given; else a T4 (15 GiB) for a profile with a GPU budget, a CPU for one
    without."""
    if gpu_memory_gib is not None:
        if not math.isfinite(gpu_memory_gib) or gpu_memory_gib <= 0:
            raise ValueError(f"--gpu-memory-gib {gpu_memory_gib}: give the GPU's memory in GiB, a number > 0 "
                             f"(a Colab T4: 15)")
        return Machine("gpu", int(gpu_memory_gib * GIB))
    return Machine("gpu", 15 * GIB) if get_profile(profile).gpu_mem_budget else Machine("cpu")


# --- the searches, replayed on the ledger ----------------------------------------------------------------------

@dataclass(frozen=True)
class Search:
    """One predicted search of notebook 06: what it looks for, what it finds, in how many probes."""

    name: str
    found: int
    probes: int
    budget: int


def _fits(cfg: GPTConfig, batch: int, budget: float, machine: Machine) -> bool:
    return step_memory(cfg, batch, machine.dtype).peak <= budget


def _counted(fits) -> tuple[list[int], callable]:
    tried: list[int] = []
    return tried, lambda n: tried.append(n) or fits(n)


def max_batch(prof: Profile, cfg: GPTConfig, machine: Machine, name: str) -> Search:
    """`find_max_batch` under the profile's budget: on a GPU the probes run one sequence a slice (its thinnest
    slicing), on a CPU the CPU's slices."""
    budget = machine.budget(prof)
    probe_cfg = dataclasses.replace(cfg, batch_slice=1) if _gpu_plans(cfg, machine) else cfg
    tried, fits = _counted(lambda b: _fits(probe_cfg, b, budget, machine))
    found = largest_fitting(fits, prof.batch_size, 1 << 16, max_probes=prof.search_probes)
    return Search(name, found, len(tried), budget)


def max_depth(prof: Profile, cfg: GPTConfig, batch: int, budget: float, machine: Machine) -> Search:
    """`find_max_depth`: the deepest `cfg` at `batch` within `budget` (run 1's peak), up to `deep_max_layers`."""
    tried, fits = _counted(lambda n: _fits(dataclasses.replace(cfg, n_layer=n), batch, budget, machine))
    found = largest_fitting(fits, cfg.n_layer, assignment_sizes(prof).deep_max_layers, max_probes=prof.search_probes)
    return Search("depth of run 4", found, len(tried), int(budget))


def training_slices(cfg: GPTConfig, batch: int, machine: Machine) -> SlicePlan:
    """How `train` slices a step at `batch` (`measured_slices`): on a GPU the fewest slices that fit what the GPU can
    give, on a CPU the CPU's rule."""
    if not _gpu_plans(cfg, machine):
        return plan_slices(cfg, batch, "cpu")
    fits = lambda s: _fits(dataclasses.replace(cfg, batch_slice=s), batch, machine.available, machine)  # noqa: E731
    return plan_slices(cfg, batch, "cuda", fits)


def _gpu_plans(cfg: GPTConfig, machine: Machine) -> bool:
    return planned_by_probes(cfg, "cuda" if machine.kind == "gpu" else "cpu")


# --- the workbook ------------------------------------------------------------------------------------------------

DEFAULT_PICK = {"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"}


@dataclass
class WorkbookPlan:
    profile: Profile
    machine: Machine
    pick: dict
    pick_source: str
    work: list[Work] = field(default_factory=list)
    searches: list[Search] = field(default_factory=list)

    @property
    def runs(self) -> list[Work]:
        return [w for w in self.work if w.kind == "run"]

    def run(self, name: str) -> Work:
        return next(w for w in self.work if w.name == name)

    def t4_seconds(self, notebook: str | None = None) -> float:
        return sum(w.t4_seconds() for w in self.work if notebook in (None, w.notebook))

    def notebooks(self) -> list[str]:
        return list(dict.fromkeys(w.notebook for w in self.work))


def plan_workbook(profile: ProfileLike, machine: Machine, results: str | Path | None = None) -> WorkbookPlan:
    """The plan of `profile`'s whole workbook on `machine`; with `results`, the screening's pick is read from there
    when it has run."""
    prof = get_profile(profile)
    pick, source = DEFAULT_PICK, "assumed: the default pick when no screening has run"
    if results is not None and (Path(results) / prof.name / "screening.json").is_file():
        from ..screening.rule import chosen_reversible

        pick, source = chosen_reversible(prof, results)[0], "the screening's pick in the results folder"
    plan = WorkbookPlan(prof, machine, {k: pick[k] for k in ("trunk", "h", "stream")}, source)
    _screening(plan)
    _run(plan, "04_run1_baseline", "run1_baseline", prof.model_config("residual"), prof.batch_size, prof.train_tokens)
    _run(plan, "05_run2_reversible_same_batch", "run2_reversible_same_batch", _pick_cfg(plan), prof.batch_size,
         prof.train_tokens)
    _seeds_and_bench(plan)
    _notebook_06(plan)
    _run(plan, "07_report", "run2b_screening_runner_up", _runner_up(plan), prof.batch_size, prof.train_tokens)
    from .companions import companion_work

    plan.work += companion_work(prof, machine)
    return plan


def _pick_cfg(plan: WorkbookPlan, **changes) -> GPTConfig:
    p = {**plan.pick, **changes}
    return plan.profile.model_config(p["trunk"], changes.get("n_layer"), p["h"], p["stream"])


def _runner_up(plan: WorkbookPlan) -> GPTConfig:
    """The screening's best reversible candidate with another (trunk, h) than the pick: assumed the other
    integrator at its own step."""
    other = "midpoint_rev" if plan.pick["trunk"] == "reveuler_rev" else "reveuler_rev"
    return plan.profile.model_config(other)


def _run(plan: WorkbookPlan, notebook: str, name: str, cfg: GPTConfig, batch: int, tokens: int,
         eval_every: int | None = None) -> Work:
    """A `train` run: its steps, its slicing on the machine, and its validation passes."""
    prof = plan.profile
    steps = tokens // (batch * prof.seq_len)
    every = eval_every or prof.eval_every
    evaluations = steps // every + (steps % every != 0)
    work = gpt_work(notebook, name, "run", cfg, batch, steps, training_slices(cfg, batch, plan.machine).slices,
                    evaluations, prof.eval_tokens)
    plan.work.append(work)
    return work


def _measure(plan: WorkbookPlan, notebook: str, name: str, cfg: GPTConfig, batch: int, steps: int) -> None:
    plan.work.append(gpt_work(notebook, name, "measure", cfg, batch, steps))


def _screening(plan: WorkbookPlan) -> None:
    """Notebook 03: a short run of every candidate without an fp32 twin in the set; the others timed on their
    twin's weights (`screening.streams`)."""
    from ..screening.rule import screening_candidates, screening_tokens, stream_twins
    from ..screening.streams import PROBE_STEPS

    prof = plan.profile
    candidates = screening_candidates(prof)
    twins = stream_twins(candidates)
    for c in candidates:
        cfg = prof.model_config(c.trunk, None, c.h, c.stream)
        if c.name in twins:
            _measure(plan, "03_screening", f"screening stream {c.name}", cfg, prof.batch_size,
                     PROBE_STEPS + untimed_steps(PROBE_STEPS + 2))
        else:
            _run(plan, "03_screening", f"screening/{c.name}", cfg, prof.batch_size, screening_tokens(prof))


def _seeds_and_bench(plan: WorkbookPlan) -> None:
    """Notebook 05: the interleaved bench (15 steps of three trunks), runs 1 and 2 again at the other seeds (one
    validation pass each, at the end)."""
    from ..assignment.seeds import replica_name

    prof = plan.profile
    nb = "05_run2_reversible_same_batch"
    for cfg in (prof.model_config("residual"), _pick_cfg(plan, trunk=stored_twin(plan.pick["trunk"])), _pick_cfg(plan)):
        _measure(plan, nb, f"bench {cfg.trunk}", cfg, prof.batch_size, 15 + 2)
    for seed in range(1, assignment_sizes(prof).seeds):
        for run, cfg in (("run1_baseline", prof.model_config("residual")), ("run2_reversible_same_batch", _pick_cfg(plan))):
            _run(plan, nb, replica_name(run, seed), cfg, prof.batch_size, prof.train_tokens, eval_every=10 ** 9)


def _notebook_06(plan: WorkbookPlan) -> None:
    """Notebook 06: the memory lines and searches, the noise scale, the recipe sweep, runs 1b, 3, 3b and 4."""
    from ..assignment.noise import noise_sizes
    from ..assignment.recipe import CELLS, SWEEP_DIR, sweep_steps
    from ..assignment.searches import line_batches, other_stream
    from ...core.loss import LOSS_HEADS

    prof, machine, nb = plan.profile, plan.machine, "06_run3_reversible_max_batch"
    residual, chosen = prof.model_config("residual"), _pick_cfg(plan)
    other = other_stream(plan.pick)
    other_cfg = prof.model_config(other["trunk"], None, other["h"], other["stream"])
    b1, b2 = line_batches(prof)
    for cfg in (residual, prof.model_config("residual_ckpt"), chosen):   # the memory lines (prediction, ledger)
        for b in (b1, b2):
            _measure(plan, nb, f"memory line {cfg.trunk} at batch {b}", cfg, b, 2)
    base = max_batch(prof, residual, machine, "max batch residual (run 1b)")
    rev = max_batch(prof, chosen, machine, f"max batch {chosen.trunk} (run 3)")
    ablation = [max_batch(prof, dataclasses.replace(cfg, loss_head=head), machine, f"max batch {cfg.trunk}, {head} head")
                for cfg in (residual, chosen) for head in LOSS_HEADS if head != cfg.loss_head]
    third = max_batch(prof, other_cfg, machine, f"max batch {chosen.trunk} on {other['stream']} (run 3b)")
    plan.searches += [base, rev, *ablation, third]
    for s, cfg in ((base, residual), (rev, chosen), (third, other_cfg)):
        _measure(plan, nb, f"{s.name}: {s.probes} probes", cfg, s.found, 2 * s.probes)
    sz = noise_sizes(prof)
    _measure(plan, nb, "noise scale (3 points)", residual, sz.b_small, 3 * sz.groups * sz.n_small)
    tokens = max_batch_tokens(prof, [base.found, rev.found, third.found])
    _run(plan, nb, "run1b_baseline_maxbatch", residual, base.found, tokens)
    for cell in CELLS:
        _run(plan, nb, f"{SWEEP_DIR}/{cell.name}", chosen, rev.found, sweep_steps(prof) * rev.found * prof.seq_len)
    _run(plan, nb, "run3_reversible_max_batch", chosen, rev.found, tokens)
    _run(plan, nb, "run3b_reversible_max_batch_stream", other_cfg, third.found, tokens)
    run1_peak = step_memory(residual, prof.batch_size, machine.dtype).peak
    depth = max_depth(prof, chosen, prof.batch_size, run1_peak, machine)
    plan.searches.append(depth)
    deep = _pick_cfg(plan, n_layer=depth.found)
    _measure(plan, nb, f"{depth.name}: {depth.probes} probes", deep, prof.batch_size, 2 * depth.probes)
    _run(plan, nb, "run4_reversible_deep", deep, prof.batch_size, prof.train_tokens)
