"""`python -m rev bench`: every trunk side by side in one run -- and with `--heads` every loss head, with
`--pos-chunks` every position chunk of the recompute -- peak memory of a training step, tokens/s, both as ratios
to `residual` with the same head, with `--per-sequence` the memory each extra sequence costs (peaks at two
batches), plus activation memory against depth. Under `--precision bf16` or `fp16` (fp16 autocast allowed on
a CPU here) each run also gets its gradient's relative error against fp32, the loss scaled as a GradScaler does.

Timing steps are interleaved across runs (one step of each, then the next round) so that a slow moment of
a shared machine hits every trunk and head alike; the reported figure is the median step.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from ..base.progress import tqdm

from ..base.cli import batch_slice_arg, device_arg, file_arg, pos_chunk_arg, positive_int
from ..base.device import PRECISIONS, amp_dtype, autocast, describe, pick_device
from ..base.files import write_json
from .memory import MemoryLine, training_step_memory
from .probe import make_training_step, step_peak
from .stats import quartiles
from ..core.loss import LOSS_HEADS
from ..core.model import GPT, TRUNKS, GPTConfig, is_reversible, trunk_spec
from .ledger import format_ledger, sequence_ledger
from .slicing import as_planned, plan_slices, recomputes
from ..base.units import MIB

DEPTH_TRUNKS = ("residual", "residual_ckpt", "midpoint_rev", "reveuler_rev")


LOSS_SCALE = 2.0 ** 16  # a GradScaler's initial scale: what multiplies an fp16 loss before its backward


def bench_amp_dtype(device: torch.device, precision: str) -> torch.dtype | None:
    """`amp_dtype`, except that fp16 autocast is allowed on the CPU too: there the bench measures what fp16 does
    to the gradients (training on a CPU still refuses it)."""
    return torch.float16 if precision == "fp16" else amp_dtype(device, precision)


def gradient_error(model: GPT, batch: int, device: torch.device, dtype: torch.dtype | None, seed: int = 1) -> float:
    """Relative error ||g - g32|| / ||g32|| of the model's gradient (every parameter together) under autocast to
    `dtype`, against its gradient in fp32 on the same random batch and weights; under fp16 the loss is multiplied
    by `LOSS_SCALE` before backward and the gradient divided by it after, as a GradScaler does. inf where the
    gradient overflowed (a GradScaler would skip that step); 0.0 for fp32 (`dtype` None)."""
    if dtype is None:
        return 0.0
    cfg, params = model.cfg, [p for p in model.parameters() if p.requires_grad]
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len + 1), generator=gen).to(device)

    def grads(amp: torch.dtype | None) -> list[torch.Tensor]:
        scale = LOSS_SCALE if amp == torch.float16 else 1.0
        with autocast(device, amp):
            loss = model(idx[:, :-1], idx[:, 1:])
        return [g.double() / scale for g in torch.autograd.grad(loss * scale, params)]

    ref = grads(None)
    got = grads(dtype)
    num = sum(((g - r) ** 2).sum() for g, r in zip(got, ref))
    den = sum((r ** 2).sum() for r in ref)
    return float((num / den).sqrt())


def round_ratios(times: list[float], other_times: list[float]) -> list[float]:
    """Speed over the other's, round by round, from two lists of step seconds timed interleaved (both steps of a
    round ran under the same load)."""
    return [o / t for t, o in zip(times, other_times)]


def round_ratio_quartiles(run: dict, other: dict) -> tuple[float, float]:
    """Quartiles over the interleaved rounds of `run`'s speed over `other`'s."""
    return quartiles(round_ratios(run["step_times"], other["step_times"]))


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_configs(geometry: dict, trunks=tuple(TRUNKS), heads=("fused",), pos_chunks=("auto",),
                  split_heads: bool = False, batch_slices=("auto",)) -> list[GPTConfig]:
    """The models `bench_trunks` compares: each trunk with each loss head, and each position chunk and batch
    slice where the trunk recomputes (a stored trunk keeps its activations, so neither would change anything: it
    runs once), plus the head-by-head attention split for reversible trunks with `split_heads`."""
    out = []
    for head in heads:
        for trunk in trunks:
            spec = TRUNKS[trunk]
            recomputed = spec.backward != "stored"
            for chunk in (pos_chunks if recomputed else pos_chunks[:1]):
                for rows in (batch_slices if recomputed else batch_slices[:1]):
                    for split in ((False, True) if split_heads and spec.backward == "reversible" else (False,)):
                        out.append(GPTConfig(**geometry, trunk=trunk, h=spec.h, loss_head=head, pos_chunk=chunk,
                                             split_heads=split, batch_slice=rows))
    return out


def run_label(cfg: GPTConfig) -> dict:
    """What tells one bench run from another: trunk, head, positions per chunk and sequences per batch slice
    (None: not recomputed) and split."""
    recomputed = trunk_spec(cfg.trunk).backward != "stored"
    return dict(trunk=cfg.trunk, head=cfg.loss_head, pos_chunk=cfg.positions_per_chunk if recomputed else None,
                batch_slice=cfg.sequences_per_slice if recomputed else None, split_heads=cfg.split_heads)


def bench_trunks(geometry: dict, batch: int, trunks=tuple(TRUNKS), steps: int = 3, device: str = "auto",
                 precision: str = "auto", progress: bool = True, heads=("fused",), pos_chunks=("auto",),
                 split_heads: bool = False, per_sequence: bool = False, batch_slices=("auto",)) -> dict:
    """Peak step memory and tokens/s of each model of `bench_configs` at one geometry and batch; with
    `per_sequence`, also the memory each extra sequence costs: the slope of the measured peak between `batch`
    and `2 * batch` (activations dominate at both when `batch` is not tiny). Under autocast each row also has
    `grad_error`, the model's relative gradient error against fp32 (`gradient_error`). `out["runs"]` is a list
    of rows; each has its median step and, over the interleaved rounds, the quartiles of its tokens/s and of its
    speed ratio to residual in the same round (the spread a verdict must respect)."""
    dev = pick_device(device)
    dtype = bench_amp_dtype(dev, precision)
    runs = []
    for cfg in tqdm(bench_configs(geometry, trunks, heads, pos_chunks, split_heads, batch_slices), desc="memory",
                    disable=not progress):
        slicing = plan_slices(cfg, batch, dev.type)   # no budget here: on a GPU "auto" runs the batch whole
        cfg = as_planned(cfg, slicing, dev.type)
        model, opt, step = make_training_step(cfg, batch, dev, dtype)
        step()  # optimizer state exists from here on, as in training
        mem = training_step_memory(model, opt, step, dev)
        row = run_label(cfg) | dict(peak_bytes=mem.peak_bytes, static_bytes=mem.static_bytes,
                                    activation_bytes=mem.activation_bytes, slices=slicing.slices)
        if per_sequence:
            peak2 = step_peak(cfg, 2 * batch, dev, dtype)
            line = MemoryLine.through(batch, mem.peak_bytes, 2 * batch, peak2)
            row["bytes_per_sequence"] = line.bytes_per_sequence
            # the line's intercept above the static part is a working set only where the trunk recomputes in
            # slices; for a stored trunk it is a fit's offset (it can be negative), not something a step holds
            fixed = line.static_bytes - mem.static_bytes if recomputes(cfg) else None
            led = sequence_ledger(cfg, line.bytes_per_sequence, fixed, dtype or torch.float32)
            row["ledger"] = led.as_row() | {"moment": led.moment}
        if dtype is not None:
            row["grad_error"] = gradient_error(model, batch, dev, dtype)
        runs.append((row, step, []))
    for _ in tqdm(range(steps), desc="timing rounds", disable=not progress):
        for _, step, times in runs:
            _sync(dev)
            t0 = time.perf_counter()
            step()
            _sync(dev)
            times.append(time.perf_counter() - t0)
    tokens = batch * geometry["seq_len"]
    rows = []
    for row, _, times in runs:
        row["step_s"] = statistics.median(times)
        row["tokens_per_s"] = tokens / row["step_s"]
        row["tokens_per_s_quartiles"] = quartiles([tokens / t for t in times])
        row["step_times"] = times
        rows.append(row)
    for r in rows:
        base = next((b for b in rows if b["trunk"] == "residual" and b["head"] == r["head"]), None)
        if base:
            r["peak_ratio"] = r["peak_bytes"] / base["peak_bytes"]
            r["activation_ratio"] = r["activation_bytes"] / base["activation_bytes"]
            r["speed_ratio"] = r["tokens_per_s"] / base["tokens_per_s"]
            # round by round: both steps of a round ran under the same load
            r["speed_ratio_quartiles"] = round_ratio_quartiles(r, base)
    return {"device": describe(dev, dtype), "torch": torch.__version__, "geometry": geometry, "batch": batch,
            "steps": steps, "runs": rows}


def bench_depths(geometry: dict, batch: int, depths=(4, 8, 16, 32), trunks=DEPTH_TRUNKS, device: str = "auto",
                 precision: str = "auto", progress: bool = True, head: str = "fused") -> dict:
    """Activation memory of one training step against depth, per trunk (with loss head `head`): the peak of its
    forward and backward above parameters, gradients and AdamW's state. The update is left out: it holds no
    activations, and foreach AdamW (CUDA's default) allocates temporaries that grow with the parameter count."""
    dev = pick_device(device)
    dtype = bench_amp_dtype(dev, precision)
    out: dict[str, dict[int, int]] = {t: {} for t in trunks}
    for trunk in trunks:
        for depth in tqdm(depths, desc=f"depth sweep {trunk}", disable=not progress):
            cfg = GPTConfig(**{**geometry, "n_layer": depth}, trunk=trunk, loss_head=head)
            model, opt, step = make_training_step(cfg, batch, dev, dtype)
            step()
            out[trunk][depth] = training_step_memory(model, opt, step.forward_backward, dev).activation_bytes
            del model, opt, step
    return out


def _run_name(r: dict) -> str:
    chunk = "-" if r["pos_chunk"] is None else str(r["pos_chunk"] or "off")
    rows = "-" if r.get("batch_slice") is None else str(r["batch_slice"] or "off")
    if r.get("slices", 1) > 1:
        rows += f"x{r['slices']}"
    return f"{r['trunk']:<14}{r['head']:<9}{chunk + ('+heads' if r['split_heads'] else ''):<11}{rows:<7}"


def _compare(rows: list[dict], name: str, pick, other) -> list[str]:
    """Lines "run vs other run: speed x, peak x[, per sequence x]" for each row `pick` selects whose partner
    `other(row, candidate)` exists."""
    lines = []
    for r in filter(pick, rows):
        o = next((c for c in rows if c is not r and other(r, c)), None)
        if o is None:
            continue
        lo, hi = round_ratio_quartiles(r, o)
        text = (f"{_run_name(r).strip()} vs {name(o)}: speed {r['tokens_per_s'] / o['tokens_per_s']:.3f}x "
                f"[rounds {lo:.2f}-{hi:.2f}], peak {r['peak_bytes'] / o['peak_bytes']:.3f}x")
        if "bytes_per_sequence" in r:
            text += f", memory per sequence {r['bytes_per_sequence'] / o['bytes_per_sequence']:.3f}x"
        lines.append(" ".join(text.split()))
    return lines


def format_report(res: dict, depth: dict | None = None) -> str:
    mib = MIB
    rows = res["runs"]
    per_seq = all("bytes_per_sequence" in r for r in rows)
    grad_err = all("grad_error" in r for r in rows) and bool(rows)
    lines = [f"device: {res['device']}   torch {res['torch']}   batch {res['batch']}   geometry {res['geometry']}",
             "chunk: positions per chunk in the recompute (- stored trunk, off: whole sequence; +heads: attention "
             "head by head); slice: sequences per batch slice x slices per step (off: the whole batch); ratios "
             f"(/res) are to residual with the same loss head; [quartiles] over {res['steps']} interleaved rounds",
             f"{'trunk':<14}{'head':<9}{'chunk':<11}{'slice':<7}{'peak MiB':>9}{'act MiB':>9}"
             + (f"{'MiB/seq':>9}" if per_seq else "")
             + f"{'tok/s':>8} {'[quartiles]':<13}{'peak/res':>9}{'act/res':>9}{'speed/res':>10} {'[quartiles]':<13}"
             + (f"{'grad err':>10}" if grad_err else "")]
    for r in rows:
        lo, hi = r["tokens_per_s_quartiles"]
        slo, shi = r.get("speed_ratio_quartiles", (float("nan"), float("nan")))
        lines.append(_run_name(r) + f"{r['peak_bytes'] / mib:>9.1f}{r['activation_bytes'] / mib:>9.1f}"
                     + (f"{r['bytes_per_sequence'] / mib:>9.2f}" if per_seq else "")
                     + f"{r['tokens_per_s']:>8.0f} {f'[{lo:.0f}, {hi:.0f}]':<13}{r.get('peak_ratio', float('nan')):>9.3f}"
                     f"{r.get('activation_ratio', float('nan')):>9.3f}{r.get('speed_ratio', float('nan')):>10.3f} "
                     f"{f'[{slo:.2f}, {shi:.2f}]':<13}"
                     + (f"{r['grad_error']:>10.2e}" if grad_err else ""))
    if grad_err:
        lines.append("grad err: relative error of the model's gradient under this autocast against fp32 "
                     f"(fp16: loss scaled by {LOSS_SCALE:.0f} as a GradScaler does)")
    same = lambda a, b, *keys: all(a[k] == b[k] for k in keys)  # noqa: E731
    lines += _compare(rows, lambda o: f"residual_ckpt ({o['head']} head)",
                      lambda r: is_reversible(r["trunk"]),
                      lambda r, c: c["trunk"] == "residual_ckpt" and same(r, c, "head", "pos_chunk", "batch_slice"))
    lines += _compare(rows, lambda o: "the chunked head", lambda r: r["head"] == "fused",
                      lambda r, c: c["head"] == "chunked" and same(r, c, "trunk", "pos_chunk", "split_heads", "batch_slice"))
    lines += _compare(rows, lambda o: "no position chunks",
                      lambda r: bool(r["pos_chunk"]) or r["split_heads"],
                      lambda r, c: c["pos_chunk"] == 0 and not c["split_heads"]
                      and same(r, c, "trunk", "head", "batch_slice"))
    lines += _compare(rows, lambda o: "no batch slices", lambda r: bool(r.get("batch_slice")),
                      lambda r, c: c.get("batch_slice") == 0 and same(r, c, "trunk", "head", "pos_chunk", "split_heads"))
    if per_seq:
        lines += format_ledger({" ".join(_run_name(r).split()): r["ledger"] for r in rows})
    if depth:
        ds = sorted(next(iter(depth.values())))
        lines.append("activation MiB by depth: " + "  ".join(f"L={d}" for d in ds))
        for trunk, row in depth.items():
            growth = row[ds[-1]] / row[ds[0]] - 1
            lines.append(f"{trunk:<14}" + "".join(f"{row[d] / mib:>9.1f}" for d in ds)
                         + f"   L={ds[-1]} vs L={ds[0]}: {100 * growth:+.1f}%")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--d-model", type=positive_int, default=384)
    p.add_argument("--n-layer", type=positive_int, default=10)
    p.add_argument("--n-head", type=positive_int, default=6)
    p.add_argument("--seq-len", type=positive_int, default=512)
    p.add_argument("--vocab-size", type=positive_int, default=8192)
    p.add_argument("--batch", type=positive_int, default=8)
    p.add_argument("--steps", type=positive_int, default=3, help="timed steps per trunk (after one warm-up step)")
    p.add_argument("--trunks", nargs="+", default=list(TRUNKS), choices=list(TRUNKS))
    p.add_argument("--heads", nargs="+", default=["fused"], choices=list(LOSS_HEADS),
                   help="loss heads to compare (see rev.core.loss); the depth sweep uses the first")
    p.add_argument("--pos-chunks", nargs="+", type=pos_chunk_arg, default=["auto"],
                   help="positions per chunk to compare in the recompute: auto | 0 (off) | numbers")
    p.add_argument("--batch-slices", nargs="+", type=batch_slice_arg, default=["auto"],
                   help="sequences per batch slice to compare in the recompute: auto | 0 (off) | numbers")
    p.add_argument("--split-heads", action="store_true",
                   help="also run each reversible trunk with attention backpropagated head by head")
    p.add_argument("--per-sequence", action="store_true",
                   help="also measure each model at twice the batch: memory per extra sequence")
    p.add_argument("--depths", nargs="*", type=positive_int, default=[4, 8, 16, 32],
                   help="depths for the activation-memory sweep (none to skip)")
    p.add_argument("--device", default="auto", type=device_arg)
    p.add_argument("--precision", default="auto", choices=list(PRECISIONS),
                   help="autocast dtype (auto: bf16 or fp16 on a GPU by its capability, fp32 on a CPU); under bf16 "
                        "or fp16 (allowed on a CPU here) each run also gets its relative gradient error against "
                        "fp32, with the loss scaled by 2^16 under fp16 as a GradScaler does")
    p.add_argument("--json", type=file_arg, help="write the figures here as JSON")


def run_cli(args: argparse.Namespace) -> int:
    geometry = dict(vocab_size=args.vocab_size, seq_len=args.seq_len, n_layer=args.n_layer,
                    n_head=args.n_head, d_model=args.d_model)
    GPTConfig(**geometry)  # a geometry that cannot be built (n_head not dividing d_model) fails before any timing
    res = bench_trunks(geometry, args.batch, args.trunks, args.steps, args.device, args.precision,
                       heads=args.heads, pos_chunks=args.pos_chunks, split_heads=args.split_heads,
                       per_sequence=args.per_sequence, batch_slices=args.batch_slices)
    depth = bench_depths(geometry, args.batch, args.depths, device=args.device, precision=args.precision,
                         head=args.heads[0]) if args.depths else None
    print(format_report(res, depth))
    if args.json:
        res["depths"] = {t: {str(k): v for k, v in row.items()} for t, row in (depth or {}).items()}
        write_json(args.json, res)
        print(f"wrote {args.json}")
    return 0
