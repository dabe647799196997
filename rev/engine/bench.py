"""`python -m rev bench`: every trunk (and, with `--heads`, every loss head) side by side in one run -- peak
memory of a training step, tokens/s, both as ratios to `residual` with the same head -- plus activation memory
against depth.

Timing steps are interleaved across runs (one step of each, then the next round) so that a slow moment of
a shared machine hits every trunk and head alike; the reported figure is the median step.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from .device import amp_dtype, autocast, describe, pick_device
from .files import write_json
from .optim import adamw
from .memory import training_step_memory
from ..core.loss import LOSS_HEADS
from ..core.model import GPT, TRUNKS, GPTConfig

DEPTH_TRUNKS = ("residual", "residual_ckpt", "midpoint_rev", "reveuler_rev")


def make_training_step(cfg: GPTConfig, batch: int, device: torch.device, dtype, seed: int = 0):
    """A fresh model and AdamW, and `step()` running one real training step on a fixed random batch."""
    torch.manual_seed(seed)
    model = GPT(cfg).to(device)
    opt = adamw(model, lr=1e-4)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len + 1), generator=gen).to(device)

    def step() -> None:
        with autocast(device, dtype):
            loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, opt, step


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_trunks(geometry: dict, batch: int, trunks=tuple(TRUNKS), steps: int = 3, device: str = "auto",
                 precision: str = "auto", progress: bool = True, heads=("fused",)) -> dict:
    """Peak step memory and tokens/s of each trunk with each loss head at one geometry and batch.
    `out["runs"]` is a list of rows, one per (trunk, head)."""
    dev = pick_device(device)
    dtype = amp_dtype(dev, precision)
    runs = {}
    for trunk, head in tqdm([(t, hd) for hd in heads for t in trunks], desc="memory", disable=not progress):
        cfg = GPTConfig(**geometry, trunk=trunk, h=TRUNKS[trunk].h, loss_head=head)
        model, opt, step = make_training_step(cfg, batch, dev, dtype)
        step()  # optimizer state exists from here on, as in training
        mem = training_step_memory(model, opt, step, dev)
        runs[trunk, head] = dict(step=step, peak_bytes=mem.peak_bytes, static_bytes=mem.static_bytes,
                                 activation_bytes=mem.activation_bytes, times=[])
    for _ in tqdm(range(steps), desc="timing rounds", disable=not progress):
        for r in runs.values():
            _sync(dev)
            t0 = time.perf_counter()
            r["step"]()
            _sync(dev)
            r["times"].append(time.perf_counter() - t0)
    tokens = batch * geometry["seq_len"]
    out = {}
    for (trunk, head), r in runs.items():
        row = dict(trunk=trunk, head=head, **{k: r[k] for k in ("peak_bytes", "static_bytes", "activation_bytes")})
        row["step_s"] = statistics.median(r["times"])
        row["tokens_per_s"] = tokens / row["step_s"]
        out[trunk, head] = row
    for (trunk, head), r in out.items():
        base = out.get(("residual", head))
        if base:
            r["peak_ratio"] = r["peak_bytes"] / base["peak_bytes"]
            r["activation_ratio"] = r["activation_bytes"] / base["activation_bytes"]
            r["speed_ratio"] = r["tokens_per_s"] / base["tokens_per_s"]
    return {"device": describe(dev, dtype), "torch": torch.__version__, "geometry": geometry, "batch": batch,
            "steps": steps, "runs": list(out.values())}


def bench_depths(geometry: dict, batch: int, depths=(4, 8, 16, 32), trunks=DEPTH_TRUNKS, device: str = "auto",
                 precision: str = "auto", progress: bool = True, head: str = "fused") -> dict:
    """Activation memory of one training step against depth, per trunk (with loss head `head`)."""
    dev = pick_device(device)
    dtype = amp_dtype(dev, precision)
    out: dict[str, dict[int, int]] = {t: {} for t in trunks}
    for trunk in trunks:
        for depth in tqdm(depths, desc=f"depth sweep {trunk}", disable=not progress):
            cfg = GPTConfig(**{**geometry, "n_layer": depth}, trunk=trunk, h=TRUNKS[trunk].h, loss_head=head)
            model, opt, step = make_training_step(cfg, batch, dev, dtype)
            step()
            out[trunk][depth] = training_step_memory(model, opt, step, dev).activation_bytes
            del model, opt, step
    return out


def format_report(res: dict, depth: dict | None = None) -> str:
    mib = 2 ** 20
    lines = [f"device: {res['device']}   torch {res['torch']}   batch {res['batch']}   geometry {res['geometry']}",
             "ratios (/res) are to residual with the same loss head",
             f"{'trunk':<14}{'head':<9}{'peak MiB':>10}{'act MiB':>10}{'tok/s':>10}{'peak/res':>10}{'act/res':>9}"
             f"{'speed/res':>10}"]
    for r in res["runs"]:
        lines.append(f"{r['trunk']:<14}{r['head']:<9}{r['peak_bytes'] / mib:>10.1f}{r['activation_bytes'] / mib:>10.1f}"
                     f"{r['tokens_per_s']:>10.0f}{r.get('peak_ratio', float('nan')):>10.3f}"
                     f"{r.get('activation_ratio', float('nan')):>9.3f}{r.get('speed_ratio', float('nan')):>10.3f}")
    t = {(r["trunk"], r["head"]): r for r in res["runs"]}
    for (trunk, head), r in t.items():
        if trunk in ("midpoint_rev", "reveuler_rev") and ("residual_ckpt", head) in t:
            lines.append(f"{trunk} speed / residual_ckpt speed ({head} head): "
                         f"{r['tokens_per_s'] / t['residual_ckpt', head]['tokens_per_s']:.3f}")
    for (trunk, head), r in t.items():
        if head == "fused" and (trunk, "chunked") in t:
            c = t[trunk, "chunked"]
            lines.append(f"{trunk} fused head vs chunked head: speed {r['tokens_per_s'] / c['tokens_per_s']:.3f}x, "
                         f"peak {r['peak_bytes'] / c['peak_bytes']:.3f}x")
    if depth:
        ds = sorted(next(iter(depth.values())))
        lines.append("activation MiB by depth: " + "  ".join(f"L={d}" for d in ds))
        for trunk, row in depth.items():
            growth = row[ds[-1]] / row[ds[0]] - 1
            lines.append(f"{trunk:<14}" + "".join(f"{row[d] / mib:>9.1f}" for d in ds)
                         + f"   L={ds[-1]} vs L={ds[0]}: {100 * growth:+.1f}%")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--n-layer", type=int, default=10)
    p.add_argument("--n-head", type=int, default=6)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--vocab-size", type=int, default=8192)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=3, help="timed steps per trunk (after one warm-up step)")
    p.add_argument("--trunks", nargs="+", default=list(TRUNKS), choices=list(TRUNKS))
    p.add_argument("--heads", nargs="+", default=["fused"], choices=list(LOSS_HEADS),
                   help="loss heads to compare (see rev.core.loss); the depth sweep uses the first")
    p.add_argument("--depths", nargs="*", type=int, default=[4, 8, 16, 32],
                   help="depths for the activation-memory sweep (none to skip)")
    p.add_argument("--device", default="auto")
    p.add_argument("--precision", default="auto", help="auto | fp32 | bf16 | fp16")
    p.add_argument("--json", type=Path, help="write the figures here as JSON")


def run_cli(args: argparse.Namespace) -> int:
    if args.batch < 1 or args.steps < 1:
        raise SystemExit("--batch and --steps must be >= 1")
    geometry = dict(vocab_size=args.vocab_size, seq_len=args.seq_len, n_layer=args.n_layer,
                    n_head=args.n_head, d_model=args.d_model)
    res = bench_trunks(geometry, args.batch, args.trunks, args.steps, args.device, args.precision,
                       heads=args.heads)
    depth = bench_depths(geometry, args.batch, args.depths, device=args.device, precision=args.precision,
                         head=args.heads[0]) if args.depths else None
    print(format_report(res, depth))
    if args.json:

        res["depths"] = {t: {str(k): v for k, v in row.items()} for t, row in (depth or {}).items()}
        write_json(args.json, res)
        print(f"wrote {args.json}")
    return 0
