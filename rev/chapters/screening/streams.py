"""Notebook 03: the fp64 and fixed-point candidates, measured on their fp32 twin's trained weights.

A stream changes how the trunk's state is held and inverted, not the function its blocks compute: an fp64 or
fixed-point twin of an fp32 candidate trains the same blocks from the same start, and a full short run of it
measures the fp32 run's loss a second time, to rounding (3.962 / 3.962 / 3.962 for one integrator's three streams
in a cpu screening), at the price of a run. So the screening trains each (integrator, h) once, on fp32, and
measures every other stream of it on those trained weights, paired (one set of weights, one cause):

- its validation loss, on the batches the fp32 run's last evaluation used (the difference is the stream's
  rounding and nothing else),
- its reconstruction error, as training measures it at a run's end,
- its speed: tokens/s over `PROBE_STEPS` training steps from those weights at the run's batch, interleaved with
  the same steps of the fp32 weights (one step of each per round, on the round's batch), so its speed against its
  fp32 twin (`speed_vs_fp32`, the median round ratio with its bootstrap interval) is a ratio a busy machine cannot
  fake; its speed against a candidate trained at another time is not compared.

What this cannot see, said where it is shown: rounding that steers training itself over many steps (run 3b trains
the other stream in full, notebook 06). Results are cached in ``results/<profile>/screening_streams.json``, keyed by
the fp32 run they were measured on.
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path

import torch

from ...core.model import GPT
from ...core.reversible import reconstruction_error
from ...measure.bench import quartiles
from ...base.files import read_json, write_json
from ...measure.slicing import measured_slices
from ...core.optim import adamw
from ...base.profiles import ProfileLike
from ...measure.slicing import as_planned
from ...core.step import train_step
from ...training.loop import TrainConfig, ensure_data, evaluate, plan_run, untimed_steps
from ...training.checkpoint import load_model
from ..shared.runs import profile_dir, round_ratio
from ..shared.verdicts import speed_verdict

PROBE_STEPS = 16          # timed training steps per stream (after `untimed_steps` of warm-up)
STREAMS_FILE = "screening_streams.json"


def with_stream(model: GPT, stream: str) -> GPT:
    """The same weights with the trunk's state held on `stream` (the blocks, and so the function, unchanged)."""
    cfg = dataclasses.replace(model.cfg, stream=stream)
    twin = GPT(cfg)
    twin.load_state_dict(model.state_dict())
    return twin


def _planned(weights: GPT, stream: str, plan, device: torch.device) -> GPT:
    """`weights` on `stream`, in the slicing a training step at the plan's batch would run."""
    slicing = measured_slices(plan.model, plan.batch_size, device, None)
    model = GPT(as_planned(with_stream(weights, stream).cfg, slicing, device.type))
    model.load_state_dict(weights.state_dict())
    return model


def measure_stream(twin_summary: dict, stream: str, data_dir: str | Path, steps: int = PROBE_STEPS) -> dict:
    """`stream` measured on the trained weights of the fp32 run `twin_summary`: validation loss (its last
    evaluation's batches), reconstruction error (the batch `train` measures on), and tokens/s over `steps` timed
    training steps at the run's batch and last learning rate, each round one step of the stream's model and one of
    the fp32 weights' on the same batch (`step_times`, `fp32_step_times`): the median, quartiles and the ratio to
    fp32 round by round."""
    cfg = TrainConfig(**{k: v for k, v in twin_summary["config"].items() if k in TrainConfig.__dataclass_fields__}
                      | {"stream": stream, "data_dir": data_dir, "progress": False})
    plan = plan_run(cfg)
    device = torch.device("cpu")
    data = ensure_data(plan.profile, Path(data_dir), progress=False)
    weights = load_model(twin_summary["config"]["out_dir"])
    model, ref = _planned(weights, stream, plan, device), _planned(weights, "fp32", plan, device)
    val_loss = evaluate(model, data, plan, device, None)
    x, _ = data.get_batch("val", min(8, plan.batch_size), plan.model.seq_len, torch.Generator().manual_seed(7))
    recon = reconstruction_error(model, x)
    opts = {id(m): adamw(m, plan.min_lr, plan.profile.weight_decay) for m in (model, ref)}
    gen = torch.Generator().manual_seed(cfg.seed)
    warm = untimed_steps(steps + 2)
    times: dict[int, list[float]] = {id(model): [], id(ref): []}
    for i in range(warm + steps):
        xb, yb = data.get_batch("train", plan.batch_size, plan.model.seq_len, gen)
        for m in ((model, ref) if i % 2 else (ref, model)):   # alternate who goes first: no order bias
            t0 = time.perf_counter()
            train_step(m, opts[id(m)], xb, yb, clip=plan.profile.grad_clip)
            if i >= warm:
                times[id(m)].append(time.perf_counter() - t0)
    tokens = plan.batch_size * plan.model.seq_len
    speeds = [tokens / t for t in times[id(model)]]
    q1, q3 = quartiles(speeds)
    return {"val_loss": val_loss, "reconstruction_error": recon, "tokens_per_s": statistics.median(speeds),
            "tokens_per_s_q1": q1, "tokens_per_s_q3": q3, "steps": steps, "step_speeds": speeds,
            "step_times": times[id(model)], "fp32_step_times": times[id(ref)]}


def stream_row(profile: ProfileLike, results: str | Path, data_dir: str | Path, name: str, stream: str,
               twin_name: str, twin_summary: dict) -> dict:
    """The screening row of the `stream` candidate `name`, measured on the fp32 run `twin_name` (cached)."""
    path = profile_dir(results, profile) / STREAMS_FILE
    cached = read_json(path) if path.exists() else {}
    key = {"twin": twin_name, "twin_run": twin_summary.get("run_key"), "stream": stream, "steps": PROBE_STEPS,
           "timing": "interleaved with fp32"}
    hit = cached.get(name)
    if hit is None or hit.get("key") != key:
        hit = {"key": key, **measure_stream(twin_summary, stream, data_dir)}
        cached[name] = hit
        write_json(path, cached)
    return {"val_loss": hit["val_loss"], "tokens_per_s": hit["tokens_per_s"],
            "tokens_per_s_q1": hit["tokens_per_s_q1"], "tokens_per_s_q3": hit["tokens_per_s_q3"],
            "reconstruction_error": hit["reconstruction_error"], "tokens": twin_summary["tokens"],
            "weights": twin_name, "loss_vs_fp32": hit["val_loss"] - twin_summary["final_val_loss"],
            "step_speeds": hit.get("step_speeds"), "speed_vs_fp32": speed_vs_fp32(hit)}


def speed_vs_fp32(hit: dict) -> dict | None:
    """A stream's speed over its fp32 twin's from the interleaved probe (`runs.round_ratio`: the median of the
    rounds' ratios and its bootstrap interval) with its verdict (`verdicts.speed_verdict`), as a row keeps it."""
    if not hit.get("step_times") or not hit.get("fp32_step_times"):
        return None
    s = round_ratio(hit["step_times"], hit["fp32_step_times"])
    return {"ratio": s.value, "lo": s.lo, "hi": s.hi, "rounds": s.n, "verdict": speed_verdict(s)}
