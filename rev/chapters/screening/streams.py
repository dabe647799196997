"""Notebook 03: the fp64 and fixed-point candidates, measured on their fp32 twin's trained weights.

A stream changes how the trunk's state is held and inverted, not the function its blocks compute: an fp64 or
fixed-point twin of an fp32 candidate trains the same blocks from the same start, and a full short run of it
measures the fp32 run's loss a second time, to rounding (3.962 / 3.962 / 3.962 for one integrator's three streams
in a cpu screening), at the price of a run. So the screening trains each (integrator, h) once, on fp32, and
measures every other stream of it on those trained weights, paired (one set of weights, one cause):

- its validation loss, on the batches the fp32 run's last evaluation used (the difference is the stream's
  rounding and nothing else),
- its reconstruction error, as training measures it at a run's end,
- its speed: tokens/s over `PROBE_STEPS` training steps from those weights at the run's batch.

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
from ...measure.stats import quartiles
from ...base.files import read_json, write_json
from ...measure.maxbatch import measured_slices
from ...core.optim import adamw
from ...base.profiles import ProfileLike
from ...measure.slicing import as_planned
from ...core.step import train_step
from ...training.loop import TrainConfig, ensure_data, evaluate, load_model, plan_run, untimed_steps
from ..shared.runs import profile_dir
from ..shared.tables import counted

PROBE_STEPS = 16          # timed training steps per stream (after `untimed_steps` of warm-up)
STREAMS_FILE = "screening_streams.json"


def with_stream(model: GPT, stream: str) -> GPT:
    """The same weights with the trunk's state held on `stream` (the blocks, and so the function, unchanged)."""
    cfg = dataclasses.replace(model.cfg, stream=stream)
    twin = GPT(cfg)
    twin.load_state_dict(model.state_dict())
    return twin


def measure_stream(twin_summary: dict, stream: str, data_dir: str | Path, steps: int = PROBE_STEPS) -> dict:
    """`stream` measured on the trained weights of the fp32 run `twin_summary`: validation loss (its last
    evaluation's batches), reconstruction error (the batch `train` measures on) and tokens/s over `steps` timed
    training steps at the run's batch and last learning rate (median and quartiles)."""
    cfg = TrainConfig(**{k: v for k, v in twin_summary["config"].items() if k in TrainConfig.__dataclass_fields__}
                      | {"stream": stream, "data_dir": data_dir, "progress": False})
    plan = plan_run(cfg)
    device = torch.device("cpu")
    data = ensure_data(plan.profile, Path(data_dir), progress=False)
    weights = load_model(twin_summary["config"]["out_dir"])
    slicing = measured_slices(plan.model, plan.batch_size, device, None)
    model = with_stream(weights, stream)
    model = GPT(as_planned(model.cfg, slicing, device.type))
    model.load_state_dict(weights.state_dict())
    val_loss = evaluate(model, data, plan, device, None)
    x, _ = data.get_batch("val", min(8, plan.batch_size), plan.model.seq_len, torch.Generator().manual_seed(7))
    recon = reconstruction_error(model, x)
    opt = adamw(model, plan.min_lr, plan.profile.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    warm = untimed_steps(steps + 2)
    speeds = []
    for i in range(warm + steps):
        xb, yb = data.get_batch("train", plan.batch_size, plan.model.seq_len, gen)
        t0 = time.perf_counter()
        train_step(model, opt, xb, yb, clip=plan.profile.grad_clip)
        if i >= warm:
            speeds.append(plan.batch_size * plan.model.seq_len / (time.perf_counter() - t0))
    q1, q3 = quartiles(speeds)
    return {"val_loss": val_loss, "reconstruction_error": recon, "tokens_per_s": statistics.median(speeds),
            "tokens_per_s_q1": q1, "tokens_per_s_q3": q3, "steps": steps, "step_speeds": speeds}


def stream_row(profile: ProfileLike, results: str | Path, data_dir: str | Path, name: str, stream: str,
               twin_name: str, twin_summary: dict) -> dict:
    """The screening row of the `stream` candidate `name`, measured on the fp32 run `twin_name` (cached)."""
    path = profile_dir(results, profile) / STREAMS_FILE
    cached = read_json(path) if path.exists() else {}
    key = {"twin": twin_name, "twin_run": twin_summary.get("run_key"), "stream": stream, "steps": PROBE_STEPS}
    hit = cached.get(name)
    if hit is None or hit.get("key") != key:
        hit = {"key": key, **measure_stream(twin_summary, stream, data_dir)}
        cached[name] = hit
        write_json(path, cached)
    return {"val_loss": hit["val_loss"], "tokens_per_s": hit["tokens_per_s"],
            "tokens_per_s_q1": hit["tokens_per_s_q1"], "tokens_per_s_q3": hit["tokens_per_s_q3"],
            "reconstruction_error": hit["reconstruction_error"], "tokens": twin_summary["tokens"],
            "weights": twin_name, "loss_vs_fp32": hit["val_loss"] - twin_summary["final_val_loss"],
            "step_speeds": hit.get("step_speeds")}


def stream_lesson(rows: list[dict], tie: float) -> str:
    """What the paired stream measurements show, in words: the largest loss difference a stream made on the same
    weights against the screening's loss tie `tie`, and what this design leaves out."""
    paired = [r for r in rows if r.get("loss_vs_fp32") is not None]
    if not paired:
        return "Every candidate trained its own run: no stream was measured on another run's weights."
    worst = max(paired, key=lambda r: abs(r["loss_vs_fp32"]))
    gap = abs(worst["loss_vs_fp32"])
    verdict = (f"inside the screening's {tie}-nat loss tie: a loss difference between candidates is the integrator's "
               "and h's, not the stream's" if gap < tie else
               f"more than the screening's {tie}-nat loss tie: here the stream changes the function measurably")
    moved = "left the validation loss unchanged, bit for bit" if gap == 0 else \
        f"moved the validation loss by at most {gap:.1e} nats"
    return (f"{counted(len(paired), 'candidate')} of {len(rows)} {'is' if len(paired) == 1 else 'are'} another "
            f"stream of an fp32 candidate, measured on its trained weights rather than trained again. On the same "
            f"weights a stream {moved} ({worst['name']}), {verdict}. What this leaves out: rounding that steers "
            "training over many steps; run 3b (notebook 06) trains the other stream in full.")
