"""`python -m rev plan --profile t4 [--gpu-memory-gib 15] [--json]`: every run of a profile's workbook (trunk,
layers, batch, slices, optimizer steps, tokens), notebook 06's searches and their probes, and the estimated time
per notebook on a Colab T4, computed from the memory ledger on any machine; on a GPU (or with `--time`) also a few
real steps of each trunk timed there and the wall time they imply on this device.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from ...base.cli import device_arg, folder_arg
from ...base.profiles import get_profile
from .cost import LAYER_OVERHEAD_S, STEP_OVERHEAD_S, T4_FLOPS, Work, measured_rates
from .workbook import WorkbookPlan, machine_for, plan_workbook
from ...base.units import GIB, MIB

# notebooks that train nothing, so the estimate leaves them out (data preparation, the toy chapters, the tests)
NOT_ESTIMATED = ("00_setup", "01_integrator_theory", "01b_build_the_backward", "02_tests")


def make_plan(profile: str, gpu_memory_gib: float | None = None, results: Path | None = None) -> WorkbookPlan:
    """The plan for `profile` on a GPU of `gpu_memory_gib` GiB (default: the GPU here if there is one, else a T4's
    15 GiB for a GPU profile, else the CPU)."""
    prof = get_profile(profile)
    if gpu_memory_gib is None and torch.cuda.is_available() and prof.gpu_mem_budget:
        gpu_memory_gib = torch.cuda.get_device_properties(0).total_memory / GIB
    return plan_workbook(prof, machine_for(prof, gpu_memory_gib), results)


def as_json(plan: WorkbookPlan, rates: dict[str, float] | None = None, device: str | None = None) -> dict:
    """The plan as JSON: one entry per training run (`runs`), the measurements, the searches, minutes per notebook
    and the total, as estimated for a T4 (and, with `rates`, at the rates measured on `device`)."""
    out = {
        "profile": plan.profile.name,
        "machine": {"kind": plan.machine.kind, "memory_gib": plan.machine.memory / GIB or None,
                    "autocast": {torch.float16: "fp16", torch.float32: "none (fp32)"}[plan.machine.dtype]},
        "budget_bytes": plan.machine.budget(plan.profile),
        "reversible": plan.pick | {"source": plan.pick_source},
        "runs": [w.as_row() for w in plan.runs],
        "measurements": [w.as_row() for w in plan.work if w.kind != "run"],
        "searches": [{"search": s.name, "found": s.found, "probes": s.probes, "max_probes": plan.profile.search_probes,
                      "budget_bytes": s.budget} for s in plan.searches],
        "notebooks": {nb: plan.t4_seconds(nb) / 60 for nb in plan.notebooks()},
        "not_estimated": list(NOT_ESTIMATED),
        "t4_hours": plan.t4_seconds() / 3600,
        "t4_model": {"flops_per_s": T4_FLOPS, "step_overhead_s": STEP_OVERHEAD_S, "layer_overhead_s": LAYER_OVERHEAD_S,
                     "what": "an estimate: model FLOPs at an assumed effective T4 rate, plus per-step overheads "
                             "(rev.chapters.plan.cost)"},
    }
    if rates:
        out["measured"] = {"device": device, "flops_per_s": rates,
                           "notebooks_minutes": {nb: _device_seconds(plan, rates, nb) / 60 for nb in plan.notebooks()},
                           "hours": _device_seconds(plan, rates) / 3600}
    return out


def _rate(work: Work, rates: dict[str, float]) -> float:
    """The measured rate that prices `work`: the reversible trunk's for a recomputing trunk, else the baseline's."""
    return rates["reversible"] if work.trunk.endswith(("_rev", "_ckpt")) else rates["residual"]


def _device_seconds(plan: WorkbookPlan, rates: dict[str, float], notebook: str | None = None) -> float:
    return sum(w.cpu_seconds or w.flops / _rate(w, rates) for w in plan.work if notebook in (None, w.notebook))


def table_lines(plan: WorkbookPlan, rates: dict[str, float] | None = None, device: str | None = None) -> list[str]:
    prof, m = plan.profile, plan.machine
    where = (f"a GPU with {m.memory / GIB:g} GiB (fp16 autocast, as a T4)" if m.kind == "gpu"
             else "a CPU (fp32)")
    budget = m.budget(prof)
    lines = [f"plan of the {prof.name} workbook on {where}: max-batch budget {budget / MIB:,.0f} MiB",
             f"reversible trunk: {plan.pick['trunk']}, h = {plan.pick['h']:g}, {plan.pick['stream']} stream "
             f"({plan.pick_source})", "",
             f"{'run':<52}{'trunk':<14}{'layers':>7}{'batch':>7}{'slices':>7}{'steps':>8}{'tokens':>13}"
             f"{'T4 min':>9}"]
    for nb in plan.notebooks():
        runs = [w for w in plan.work if w.notebook == nb and w.kind == "run"]
        measured = sum(w.t4_seconds() for w in plan.work if w.notebook == nb and w.kind != "run")
        lines.append(f"{nb}: {plan.t4_seconds(nb) / 60:.1f} min (of which measurements {measured / 60:.1f})")
        for w in runs:
            lines.append(f"  {w.name:<50}{w.trunk:<14}{w.layers:>7}{w.batch:>7}{w.slices:>7}{w.steps:>8}"
                         f"{w.tokens:>13,}{w.t4_seconds() / 60:>9.1f}")
    lines += ["", f"searches of notebook 06 (each at most {prof.search_probes} probes):"]
    lines += [f"  {s.name}: {s.found} in {s.probes} probes under {s.budget / MIB:,.0f} MiB" for s in plan.searches]
    runs = plan.runs
    lines += ["", f"{len(runs)} training runs, {sum(w.tokens for w in runs):,} tokens; estimated T4 time "
                  f"{plan.t4_seconds() / 3600:.2f} h (an estimate: model FLOPs at an assumed {T4_FLOPS / 1e12:g} "
                  f"TFLOP/s, plus {STEP_OVERHEAD_S * 1e3:g} ms a step and {LAYER_OVERHEAD_S * 1e3:g} ms a layer and "
                  f"slice; {', '.join(NOT_ESTIMATED)} train nothing and are left out)"]
    if rates:
        lines += [f"measured on {device}: " + ", ".join(f"{k} {v / 1e12:.2f} TFLOP/s" for k, v in rates.items()),
                  "at these rates this device would take: " + ", ".join(
                      f"{nb} {_device_seconds(plan, rates, nb) / 60:.1f} min" for nb in plan.notebooks())
                  + f"; total {_device_seconds(plan, rates) / 3600:.2f} h"]
    return lines


def time_trunks(plan: WorkbookPlan, device: torch.device) -> dict[str, float]:
    """FLOP/s of a training step of the baseline and of the reversible trunk at the profile's batch on `device`."""
    prof = plan.profile
    configs = {"residual": prof.model_config("residual"),
               "reversible": prof.model_config(plan.pick["trunk"], None, plan.pick["h"], plan.pick["stream"])}
    return measured_rates(configs, prof.batch_size, device)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="auto", help="smoke | cpu | t4 | full | auto")
    p.add_argument("--gpu-memory-gib", type=float, default=None,
                   help="plan for a GPU with this much memory (a Colab T4: 15; default: the GPU here, else 15 for a "
                        "profile with a GPU budget, else the CPU)")
    p.add_argument("--results", type=folder_arg,
                   help="a results root: where its screening has run, its pick is the reversible trunk planned")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--time", action="store_true", help="time a few steps of each trunk here (the default on a GPU)")
    p.add_argument("--device", default="auto", type=device_arg)


def run_cli(args: argparse.Namespace) -> int:
    from ...base.device import amp_dtype, describe, pick_device

    plan = make_plan(args.profile, args.gpu_memory_gib, args.results)
    device = pick_device(args.device)
    rates = time_trunks(plan, device) if args.time or device.type == "cuda" else None
    where = describe(device, amp_dtype(device)) if rates else None
    if args.json:
        print(json.dumps(as_json(plan, rates, where), indent=1))
    else:
        print("\n".join(table_lines(plan, rates, where)))
    return 0
