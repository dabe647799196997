"""`train(TrainConfig) -> summary`: one token-budgeted run of a profile, for any trunk.

The run writes into its folder
  config.json   what was asked and what it resolved to
  log.csv       step, tokens, loss, lr, grad_norm, tokens_per_s, val_loss (on eval steps)
  ckpt.pt       model, optimizer, scaler, RNG and sampler state (written atomically; `resume=True` continues)
  summary.json  final losses, speed, peak memory, reconstruction error of the trained trunk, wall time

Steps = train_tokens // (batch_size * seq_len). The learning rate at step n is `lr_at(n, ...)`: linear
warm-up then cosine decay, a function of the step number alone, so a resumed run takes the same path. Under
`torchrun` the same function runs data-parallel (gloo on CPU, nccl on GPU): every rank draws the *global*
batch from the same seeded generator and keeps its own slice, so N processes see exactly the data one
process would.

`resume="auto"` makes a run safe to start again after an interruption (what the notebooks use): a finished
run with the same resolved settings (`run_key`) is returned from its summary.json, an unfinished one continues
from its checkpoint (as `resume=True`), anything else starts afresh.

A resumed run restores weights, optimizer, loss scaler, RNG and sampler, so on a CPU it repeats the uninterrupted
run bit for bit (tests/training/test_train.py checks it). On CUDA it is as deterministic as the kernels: no
determinism setting is made (it would cost speed), and some backward kernels (attention, the embedding's
gradient) may add in a different order from run to run, so a resumed run can differ from an uninterrupted one
in the last bits, and those differences grow as training goes on; `python -m rev gpucheck` measures how far.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist
from ..base.progress import tqdm

from ..base.cli import CommandFailed, check_seed, device_arg, folder_arg, positive_float, positive_int, seed_arg
from ..base.files import atomic_path, read_json, shown_path, write_json
from .checkpoint import load_checkpoint, load_scaler_state, save_checkpoint
from ..core.optim import LR_SCALINGS, WARMUP_FLOOR_STEPS, adamw, lr_at, peak_lr, warmup_steps
from ..base.device import amp_dtype, autocast, describe, pick_device
from ..measure.slicing import resolved
from ..measure.memory import peak_memory, state_tensors
from ..core.model import GPT, TRUNKS, GPTConfig, trunk_spec
from ..base.profiles import Profile, ProfileLike, get_profile
from ..core.step import train_step
from ..core.reversible import RECON_LIMIT, reconstruction_error

LOG_FIELDS = ["step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "val_loss"]


class TrainingDiverged(CommandFailed):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


@dataclass
class TrainConfig:
    profile: ProfileLike = "cpu"             # a name ('auto' resolved once, in plan_run) or a Profile
    trunk: str = "residual"
    out_dir: str | Path | None = None        # default results/<profile>/<trunk>
    data_dir: str | Path = "data"            # root; the corpus: data_dir/<data_name> or its stand-in (profile_folder)
    h: float | None = None                   # default: the trunk's own (1.0 residual/reveuler, 0.5 midpoint)
    stream: str = "fp32"
    n_layer: int | None = None               # overrides the profile's depth
    # the model's memory options (see GPTConfig): loss head, MLP position chunk, batch slice, attention head by
    # head, kept states
    loss_head: str = "fused"
    pos_chunk: int | str | None = "auto"
    batch_slice: int | str | None = "auto"
    split_heads: bool = False
    keep: tuple[int, ...] = ()
    batch_size: int | None = None            # global batch; default the profile's
    train_tokens: int | None = None
    lr: float | None = None
    lr_scaling: str = "none"                 # how lr follows batch_size / profile batch: none | sqrt | linear
    warmup_floor: int = WARMUP_FLOOR_STEPS   # fewest warm-up steps, whatever the batch (rev.core.optim)
    noise_scale: float | None = None         # a measured B_noise (sequences): the lr rule saturates beyond it
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"                  # auto: bf16 on capability >= 8, fp16+GradScaler below, fp32 on CPU
    eval_every: int | None = None
    eval_tokens: int | None = None           # validation tokens per pass (default the profile's)
    ckpt_every: int | None = None
    resume: bool | str = False               # True: continue ckpt.pt; "auto": reuse / continue / start
    recon_threshold: float = RECON_LIMIT     # warn above this relative reconstruction error
    stop_after: int | None = None            # stop (as if killed) after this many steps; for tests and demos
    progress: bool = True
    callback: Callable[[int, dict, GPT], None] | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "callback"}
        d["profile"] = self.profile.name if isinstance(self.profile, Profile) else self.profile
        d["keep"] = list(self.keep)
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in d.items()}


@dataclass
class Plan:
    """Everything a run resolves from its config and profile, checked before anything is written."""
    profile: Profile
    model: GPTConfig
    batch_size: int
    steps: int
    warmup_steps: int
    lr: float
    min_lr: float
    eval_every: int
    eval_tokens: int
    ckpt_every: int
    out_dir: Path
    data_dir: Path


def run_key(cfg: TrainConfig, plan: Plan, dtype: torch.dtype | None) -> dict:
    """What fixes a run's numbers: model, profile, batch, schedule, seed and compute dtype (not where its
    files live, nor how often it checkpoints), and the corpus folder it reads: a run made on a synthetic
    stand-in is not reused once the real corpus is there. Two runs with equal keys train the same model;
    JSON-shaped so it compares equal after a round trip through summary.json or a checkpoint."""
    from ..data.corpus import profile_folder

    key = {"model": plan.model.to_dict(), "profile": asdict(plan.profile), "batch_size": plan.batch_size,
           "data": profile_folder(plan.profile, plan.data_dir).name,
           "steps": plan.steps, "warmup_steps": plan.warmup_steps, "lr": plan.lr, "min_lr": plan.min_lr,
           "eval_every": plan.eval_every, "eval_tokens": plan.eval_tokens, "seed": cfg.seed,
           "compute": "fp32" if dtype is None else str(dtype).replace("torch.", "")}
    return json.loads(json.dumps(key))


def plan_run(cfg: TrainConfig) -> Plan:
    prof = get_profile(cfg.profile)
    trunk_spec(cfg.trunk)  # an unknown trunk fails before any number is worked out
    check_seed(cfg.seed)
    batch = prof.batch_size if cfg.batch_size is None else cfg.batch_size
    if batch < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch}")
    tokens = prof.train_tokens if cfg.train_tokens is None else cfg.train_tokens
    per_step = batch * prof.seq_len
    if tokens < per_step:
        raise ValueError(f"train_tokens={tokens} is less than one batch ({batch} x {prof.seq_len} = {per_step} "
                         f"tokens): raise the token budget or lower the batch size")
    model = prof.model_config(cfg.trunk, cfg.n_layer, cfg.h, cfg.stream, loss_head=cfg.loss_head,
                              pos_chunk=cfg.pos_chunk, batch_slice=cfg.batch_slice, split_heads=cfg.split_heads,
                              keep=tuple(cfg.keep))
    base_lr = prof.lr if cfg.lr is None else cfg.lr
    lr = peak_lr(base_lr, batch, prof.batch_size, cfg.lr_scaling, cfg.noise_scale)
    steps = tokens // per_step
    out = Path(cfg.out_dir) if cfg.out_dir is not None else Path("results") / prof.name / cfg.trunk
    return Plan(prof, model, batch, steps, warmup_steps(prof.warmup_tokens, per_step, steps, cfg.warmup_floor), lr,
                prof.min_lr * lr / prof.lr, cfg.eval_every or prof.eval_every,
                cfg.eval_tokens or prof.eval_tokens, cfg.ckpt_every or prof.ckpt_every, out,
                Path(cfg.data_dir))


# --- distributed ------------------------------------------------------------------------------------

def _dist_setup(device: torch.device) -> tuple[int, int]:
    """(rank, world) -- initialises the process group when launched by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return dist.get_rank(), world


def _local_device(device: torch.device) -> torch.device:
    """Under torchrun, a CUDA run's process `LOCAL_RANK` takes GPU number `LOCAL_RANK` of its node; more processes
    than GPUs is an error that says what to start instead (sharing a GPU would need nccl to allow it)."""
    if device.type == "cuda" and "LOCAL_RANK" in os.environ:
        rank, gpus = int(os.environ["LOCAL_RANK"]), torch.cuda.device_count()
        if rank >= gpus:
            procs = os.environ.get("LOCAL_WORLD_SIZE", str(rank + 1))
            raise ValueError(f"torchrun started {procs} processes on this node but it has {gpus} GPU"
                             f"{'s' if gpus != 1 else ''}, so process {rank} has none: start it with "
                             f"--nproc_per_node {gpus} (one process per GPU), or run every process on the CPU "
                             f"with --device cpu")
        dev = torch.device("cuda", rank)
        torch.cuda.set_device(dev)
        return dev
    return device


# --- data -------------------------------------------------------------------------------------------

def ensure_data(prof: Profile, data_dir: Path, progress: bool = True):
    """Load the profile's corpus, preparing it first when it is not there yet."""
    from ..data.corpus import prepare_profile, profile_folder
    from ..data.tokens import load

    folder = profile_folder(prof, data_dir)
    if folder.name != prof.data_name:  # never silent: the summary records it too (data, data_source)
        print(f"note: profile {prof.name!r} trains on {shown_path(folder)}, the synthetic stand-in notebook 00 prepared when "
              f"its {prof.data_source} corpus was unreachable")
    if not (folder / "meta.json").exists():
        print(f"data for profile {prof.name!r} not found in {shown_path(folder)}: preparing it now "
              f"(source {prof.data_source!r}, vocabulary {prof.vocab_size})")
        prepare_profile(prof, data_dir, progress=progress)
    return load(folder, model_vocab_size=prof.vocab_size)


# --- evaluation ----------------------------------------------------------------------------------------

EVAL_SEED = 1234   # the validation sample's generator: one sample for every run, every call


def eval_sample(data, eval_tokens: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The validation sample every run of a profile is scored on: `eval_tokens // seq_len` sequences (at least one)
    drawn from the validation split by a generator of its own, so it depends on neither the run's batch nor its
    seed."""
    return data.get_batch("val", max(1, eval_tokens // seq_len), seq_len, torch.Generator().manual_seed(EVAL_SEED))


@torch.no_grad()
def evaluate(model: GPT, data, plan: Plan, device: torch.device, dtype, rank: int = 0, world: int = 1) -> float:
    """Mean validation loss per token on `eval_sample` (the same every call and every run), evaluated in pieces of
    at most the run's batch (a forward pass at the batch a training step fits): the pieces change how the sum is
    rounded, never what is summed. Under torchrun each process scores every `world`-th piece."""
    model.eval()
    x, y = eval_sample(data, plan.eval_tokens, plan.model.seq_len)
    piece = max(1, plan.batch_size // world)
    losses, counts = [], []
    for i in range(rank * piece, x.size(0), world * piece):
        xs, ys = x[i:i + piece].to(device), y[i:i + piece].to(device)
        with autocast(device, dtype):
            losses.append(model(xs, ys).float())
        counts.append(ys.numel())
    # a token-weighted mean of the pieces' means (the last piece may be shorter), in one reduction; a process with
    # no piece (more processes than pieces) adds nothing
    counts_t = torch.tensor(counts or [0.0], dtype=torch.float32, device=device)
    total = (torch.stack(losses or [torch.zeros((), device=device)]) * counts_t).sum()
    count = counts_t.sum()
    if world > 1:
        dist.all_reduce(total)
        dist.all_reduce(count)
    model.train()
    return float(total / count)


def _slice(t: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    n = t.size(0) // world
    return t[rank * n:(rank + 1) * n]


# --- the run ----------------------------------------------------------------------------------------

def _read_log(path: Path, upto_step: int) -> list[dict]:
    if not path.exists():
        return []
    with open(path) as f:
        return [r for r in csv.DictReader(f) if int(r["step"]) < upto_step]


def _finished(plan: Plan, key: dict) -> dict | None:
    """The summary of a finished run in `plan.out_dir` with this `run_key`, else None."""
    path = plan.out_dir / "summary.json"
    if not path.exists():
        return None
    try:
        summary = read_json(path)
    except ValueError:  # a damaged summary: train again rather than trust it
        return None
    return summary if summary.get("run_key") == key else None


def _auto_checkpoint(path: Path, plan: Plan, key: dict) -> dict | None:
    """`resume="auto"`: the checkpoint to continue from, or None (start afresh) when there is none or it
    belongs to other settings (then it is overwritten as the new run goes)."""
    if not path.exists():
        return None
    try:
        ckpt = load_checkpoint(path, plan.model)
    except ValueError as e:
        print(f"{e}\nstarting {plan.out_dir} afresh")
        return None
    if ckpt.get("run_key") != key:
        print(f"the checkpoint in {plan.out_dir} was written with other settings: starting afresh")
        return None
    print(f"resuming {plan.out_dir} from its checkpoint at step {ckpt['step']} of {plan.steps}")
    return ckpt


_SAID: set[str] = set()


def _say_once(line: str) -> None:
    """Print `line` the first time this process has it to say: a notebook cell that trains several seeds of one
    shape would otherwise print the same slicing note once per run."""
    if line not in _SAID:
        _SAID.add(line)
        print(line)


def untimed_steps(steps: int) -> int:
    """How many first steps of a `steps`-step run are left out of its tokens/s: allocation, caches and first-call
    costs warm up there. Readers of a run's log (rev.chapters.shared.run_log) leave out the same ones."""
    return min(steps - 1, max(2, steps // 20))


def train(cfg: TrainConfig) -> dict:
    """Run (or resume) one training run; returns the summary also written to summary.json."""
    plan, device, dtype, key = _resolve(cfg)
    if cfg.resume == "auto" and (done := _finished(plan, key)) is not None:
        # the run's folder by name: a notebook's saved copy names no place on the machine that ran it
        print(f"reusing the finished run {Path(plan.out_dir).name} (same settings; train with resume=False to redo it)")
        return done
    rank, world = _dist_setup(device)
    if plan.batch_size % world:
        raise ValueError(f"batch_size {plan.batch_size} must be divisible by the {world} processes")
    ckpt = _checkpoint_to_resume(cfg, plan, key)
    data = ensure_data(plan.profile, plan.data_dir, cfg.progress and rank == 0)
    data.check_sequences(plan.model.seq_len)   # before anything is written: not at the first evaluation
    # before the seed: on a GPU the plan's probes build models of their own
    model_cfg, slicing = resolved(plan.model, plan.batch_size // world, device, dtype)
    if rank == 0 and (slicing.slices > 1 or device.type == "cuda"):
        _say_once(f"each step runs {slicing.describe()} ({slicing.reason})")
    run = _Run.start(cfg, plan, key, model_cfg, device, dtype, world, ckpt)
    writer = rank == 0
    rows = _open_log(cfg, plan, world, run.start_step, ckpt is not None, writer)

    stopped = False
    bar = tqdm(range(run.start_step, plan.steps), desc=f"{plan.profile.name}/{cfg.trunk}",
               disable=not (cfg.progress and writer), initial=run.start_step, total=plan.steps)
    with contextlib.closing(bar):
        for step in bar:
            x, y = data.get_batch("train", plan.batch_size, plan.model.seq_len, run.gen)
            row = run.step(step, _slice(x, rank, world).to(device), _slice(y, rank, world).to(device))
            last = step == plan.steps - 1
            if (step + 1) % plan.eval_every == 0 or last:
                row["val_loss"] = evaluate(run.model, data, plan, device, dtype, rank, world)
            rows.append(row)
            if writer:
                _append_log(plan.out_dir / "log.csv", row)
            bar.set_postfix(loss=f"{row['loss']:.3f}", val=row["val_loss"] if row["val_loss"] != "" else "-")
            if cfg.callback is not None:
                cfg.callback(step, row, run.model)
            if ((step + 1) % plan.ckpt_every == 0 or last) and writer:
                save_checkpoint(plan.out_dir / "ckpt.pt", run.state(step + 1))
            if cfg.stop_after is not None and step + 1 - run.start_step >= cfg.stop_after and not last:
                stopped = True
                break

    summary = _summarise(cfg, plan, run, data, rows, world, stopped) | {"batch_slicing": slicing.to_dict()}
    if writer and not stopped:
        write_json(plan.out_dir / "summary.json", summary)
    return summary


def _resolve(cfg: TrainConfig) -> tuple[Plan, torch.device, torch.dtype | None, dict]:
    """The run's plan, device, compute dtype and key, all checked before anything is read or written."""
    if cfg.resume not in (True, False, "auto"):
        raise ValueError(f"resume must be True, False or 'auto', got {cfg.resume!r}")
    plan = plan_run(cfg)
    device = _local_device(pick_device(cfg.device))
    dtype = amp_dtype(device, cfg.precision)
    return plan, device, dtype, run_key(cfg, plan, dtype)


def _checkpoint_to_resume(cfg: TrainConfig, plan: Plan, key: dict) -> dict | None:
    """The checkpoint this run continues from (None: it starts afresh); one past the run's budget is refused."""
    path = plan.out_dir / "ckpt.pt"
    ckpt = _auto_checkpoint(path, plan, key) if cfg.resume == "auto" else \
        load_checkpoint(path, plan.model) if cfg.resume else None
    if ckpt is not None and int(ckpt["step"]) > plan.steps:
        per_step = plan.batch_size * plan.model.seq_len
        raise ValueError(f"cannot resume: the checkpoint in {shown_path(plan.out_dir)} is at step {ckpt['step']}, "
                         f"past this run's {plan.steps} step{'s' if plan.steps != 1 else ''} "
                         f"({plan.steps * per_step:,} tokens): give --tokens {int(ckpt['step']) * per_step} or more "
                         f"to train it further, or another --out for a new run")
    return ckpt


def _open_log(cfg: TrainConfig, plan: Plan, world: int, start: int, resumed: bool, writer: bool) -> list[dict]:
    """config.json written, and log.csv cut back to the steps before `start`; returns those steps' rows."""
    rows = _read_log(plan.out_dir / "log.csv", start) if resumed else []
    if writer:
        plan.out_dir.mkdir(parents=True, exist_ok=True)
        write_json(plan.out_dir / "config.json", {"train": cfg.to_dict(), "model": plan.model.to_dict(),
                                                    "profile": asdict(plan.profile), "batch_size": plan.batch_size,
                                                    "steps": plan.steps, "lr": plan.lr, "world_size": world})
        _rewrite_log(plan.out_dir / "log.csv", rows)
    return rows


@dataclass
class _Meters:
    """What a run has measured so far. A checkpoint carries them, so a resumed run's summary reads like one run's."""
    peak_bytes: int | None = None
    timed_tokens: int = 0
    timed_s: float = 0.0
    wall_before: float = 0.0              # seconds the run took before this process took it up
    started: float = field(default_factory=time.perf_counter)

    def wall_s(self) -> float:
        return self.wall_before + time.perf_counter() - self.started

    def to_dict(self) -> dict:
        return {"peak_bytes": self.peak_bytes, "timed_tokens": self.timed_tokens, "timed_s": self.timed_s,
                "wall_s": self.wall_s()}

    @classmethod
    def from_dict(cls, d: dict) -> "_Meters":
        return cls(d.get("peak_bytes"), d.get("timed_tokens", 0), d.get("timed_s", 0.0), d.get("wall_s", 0.0))


@dataclass
class _Run:
    """One run's live state, all that a checkpoint saves: model, optimizer, loss scaler, sampler, meters."""
    cfg: TrainConfig
    plan: Plan
    key: dict
    model: GPT
    ddp: torch.nn.Module
    opt: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    gen: torch.Generator
    device: torch.device
    dtype: torch.dtype | None
    start_step: int = 0
    meters: _Meters = field(default_factory=_Meters)

    @classmethod
    def start(cls, cfg: TrainConfig, plan: Plan, key: dict, model_cfg: GPTConfig, device: torch.device,
              dtype: torch.dtype | None, world: int, ckpt: dict | None) -> "_Run":
        """A fresh run (seeded), or the checkpoint's state restored."""
        torch.manual_seed(cfg.seed)
        # the run's settings keep "auto" (a slicing changes memory and time, not the model); the model runs the plan
        model = GPT(model_cfg).to(device)
        run = cls(cfg, plan, key, model, torch.nn.parallel.DistributedDataParallel(model) if world > 1 else model,
                  adamw(model, plan.lr, plan.profile.weight_decay),
                  torch.amp.GradScaler(device.type, enabled=dtype == torch.float16),
                  torch.Generator().manual_seed(cfg.seed), device, dtype)
        if ckpt is not None:
            model.load_state_dict(ckpt["model"])
            run.opt.load_state_dict(ckpt["optimizer"])
            load_scaler_state(run.scaler, ckpt["scaler"])
            run.gen.set_state(ckpt["sampler_rng"])
            torch.set_rng_state(ckpt["torch_rng"])
            run.start_step, run.meters = int(ckpt["step"]), _Meters.from_dict(ckpt.get("meters", {}))
        return run

    def step(self, step: int, x: torch.Tensor, y: torch.Tensor) -> dict:
        """One optimizer step at the schedule's rate; its log row (val_loss still empty). The second step of a
        process (the optimizer's state exists by then) is measured for the run's peak memory."""
        plan = self.plan
        lr = lr_at(step, plan.steps, plan.warmup_steps, plan.lr, plan.min_lr)
        for g in self.opt.param_groups:
            g["lr"] = lr
        t0 = time.perf_counter()
        one = lambda: train_step(self.ddp, self.opt, x, y, clip=plan.profile.grad_clip,  # noqa: E731
                                 amp=autocast(self.device, self.dtype), scaler=self.scaler)
        if step == self.start_step + 1 and self.meters.peak_bytes is None:
            self.model.zero_grad(set_to_none=True)
            report = peak_memory(one, state_tensors(self.model, self.opt), self.device)
            self.meters.peak_bytes, (loss, norm) = report.peak_bytes, report.result
        else:
            loss, norm = one()
        loss_v = float(loss)
        if not math.isfinite(loss_v):
            raise TrainingDiverged(f"loss became {loss_v} at step {step}: stopped. The last good checkpoint "
                                   f"({plan.out_dir / 'ckpt.pt'}) is kept; lower the learning rate (now {lr:.3g}) "
                                   f"or check the data")
        dt = time.perf_counter() - t0
        tokens = plan.batch_size * plan.model.seq_len
        if step >= self.start_step + untimed_steps(plan.steps):
            self.meters.timed_tokens, self.meters.timed_s = self.meters.timed_tokens + tokens, self.meters.timed_s + dt
        return {"step": step, "tokens": (step + 1) * tokens, "loss": loss_v, "lr": lr, "grad_norm": float(norm),
                "tokens_per_s": tokens / dt, "val_loss": ""}

    def state(self, step: int) -> dict:
        """What `save_checkpoint` writes after `step` steps."""
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "scaler": self.scaler.state_dict(), "sampler_rng": self.gen.get_state(),
                "torch_rng": torch.get_rng_state(), "step": step, "model_config": self.plan.model.to_dict(),
                "run_key": self.key, "meters": self.meters.to_dict()}


def _rewrite_log(path: Path, rows: list[dict]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, LOG_FIELDS)
        w.writeheader()
        w.writerows(rows)


def _append_log(path: Path, row: dict) -> None:
    with open(path, "a", newline="") as f:
        csv.DictWriter(f, LOG_FIELDS).writerow(row)


def _summarise(cfg: TrainConfig, plan: Plan, run: _Run, data, rows: list[dict], world: int, stopped: bool) -> dict:
    model, device, dtype, meters = run.model, run.device, run.dtype, run.meters
    losses = [float(r["loss"]) for r in rows]
    vals = [float(r["val_loss"]) for r in rows if r["val_loss"] not in ("", None)]
    recon = None
    if model.trunk.integrator.reversible:
        x, _ = data.get_batch("val", min(8, plan.batch_size), plan.model.seq_len, torch.Generator().manual_seed(7))
        with autocast(device, dtype):
            recon = reconstruction_error(model, x.to(device))
        if recon > cfg.recon_threshold:
            warnings.warn(f"trained trunk reconstructs its input with relative error {recon:.3g} > "
                          f"{cfg.recon_threshold}: reversible gradients are unreliable; use stream='fp64' or "
                          f"'fixed', a smaller h, or kept states")
    tail = losses[-max(1, len(losses) // 10):]
    return {
        "run": plan.out_dir.name, "profile": plan.profile.name, "trunk": cfg.trunk, "h": plan.model.h,
        "stream": plan.model.stream, "n_layer": plan.model.n_layer, "batch_size": plan.batch_size,
        "steps": len(rows), "planned_steps": plan.steps, "tokens": len(rows) * plan.batch_size * plan.model.seq_len,
        "lr": plan.lr, "lr_scaling": cfg.lr_scaling, "n_params": model.n_params(),
        "final_train_loss": sum(tail) / len(tail) if tail else None,
        "final_val_loss": vals[-1] if vals else None, "unigram_val_loss": data.unigram_loss(),
        "data": data.path.name, "data_source": data.meta.get("source"),
        "tokens_per_s": meters.timed_tokens / meters.timed_s if meters.timed_s > 0 else None,
        "peak_memory_bytes": meters.peak_bytes, "reconstruction_error": recon, "wall_s": meters.wall_s(),
        "device": describe(device, dtype), "torch": torch.__version__, "world_size": world,
        "stopped_early": stopped, "config": cfg.to_dict(), "model_config": plan.model.to_dict(), "run_key": run.key,
    }


# --- command line ------------------------------------------------------------------------------------

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default="auto")
    p.add_argument("--trunk", default="residual", choices=list(TRUNKS))
    p.add_argument("--out", type=folder_arg, help="run folder (default results/<profile>/<trunk>)")
    p.add_argument("--data-dir", type=folder_arg, default=Path("data"))
    p.add_argument("--resume", nargs="?", const=True, default=False, type=_resume_mode,
                   help="continue from the run folder's checkpoint; `--resume auto`: reuse a finished run with "
                        "the same settings, continue an unfinished one, else start")
    p.add_argument("--h", type=positive_float)
    p.add_argument("--stream", default="fp32")
    p.add_argument("--n-layer", type=positive_int)
    p.add_argument("--batch-size", type=positive_int)
    p.add_argument("--tokens", type=positive_int, dest="train_tokens")
    p.add_argument("--lr", type=positive_float)
    p.add_argument("--lr-scaling", default="none", choices=LR_SCALINGS)
    p.add_argument("--noise-scale", type=positive_float, help="a measured gradient noise scale, in sequences: "
                   "the lr rule stops growing with the batch beyond it")
    p.add_argument("--seed", type=seed_arg, default=0, help="a whole number from 0 to 2**32 - 1")
    p.add_argument("--device", default="auto", type=device_arg)
    p.add_argument("--precision", default="auto")
    p.add_argument("--eval-every", type=positive_int)   # 0 would silently mean the profile's
    p.add_argument("--ckpt-every", type=positive_int)
    p.add_argument("--stop-after", type=int, help=argparse.SUPPRESS)
    p.add_argument("--no-progress", action="store_true")


def _resume_mode(text: str) -> str:
    if text != "auto":
        raise argparse.ArgumentTypeError(f"--resume takes no value or 'auto', not {text!r}")
    return text


def run_cli(args: argparse.Namespace) -> int:
    cfg = TrainConfig(profile=get_profile(args.profile), trunk=args.trunk, out_dir=args.out,
                      data_dir=args.data_dir, h=args.h, stream=args.stream, n_layer=args.n_layer,
                      batch_size=args.batch_size, train_tokens=args.train_tokens, lr=args.lr,
                      lr_scaling=args.lr_scaling, noise_scale=args.noise_scale, seed=args.seed, device=args.device,
                      precision=args.precision, eval_every=args.eval_every, ckpt_every=args.ckpt_every, resume=args.resume,
                      stop_after=args.stop_after, progress=not args.no_progress)
    try:
        s = train(cfg)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps({k: s[k] for k in ("run", "steps", "final_train_loss", "final_val_loss", "tokens_per_s",
                                            "peak_memory_bytes", "reconstruction_error", "wall_s")}, indent=2))
    return 0
