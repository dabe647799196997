"""Notebook 08 (training irreversibility): the learning-rate shock on a tiny transformer and a linear perceptron.

Both models learn to reverse random sequences with noisy labels, trained with plain Adam (as in the paper the
chapter checks: no weight decay and no schedule, so `rev.core.optim` is not used) on fresh batches. At
`change_step` the learning rate is multiplied by each factor; the arms share everything before the change.
Then the windowed variance of the update norm, before against after, says whether the response is ordinary or
anomalous (one seed; `seeds` repeats it over seeds and adds the other measures).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ...base.device import pick_device
from .problems import check_positive_int, torch_threads
from .sizes import FluctuationSizes

@dataclass
class ReversalBatch:
    inputs: Tensor          # (B, 2L)  source, separator, noisy reversed source (all but the last token)
    targets: Tensor         # (B, 2L)  next token; -100 (ignored) on the source half
    source: Tensor          # (B, L)
    labels: Tensor          # (B, L)   the noisy reversed source: what the loss asks for
    noise_mask: Tensor      # (B, L)   True where a label was corrupted


LAYOUTS = ("distinct", "paper")
CONVERGED_FACTOR = 1.25  # a run has converged when its loss before the change lies within 25% of the noise floor
PAPER_RESERVED = 4      # the paper's tokens 0..3 are special; data tokens are drawn from {4 .. V-1}
PAPER_SEPARATOR = 3     # one of the reserved tokens marks the start of the answer


def reversal_batch(batch_size: int, seq_len: int, vocab_size: int, noise: float,
                   generator: torch.Generator | None = None, layout: str = "distinct") -> ReversalBatch:
    """Random sequences to be reversed; each label is corrupted with probability `noise`.

    * "distinct": data tokens are 0 .. vocab_size-2 and vocab_size-1 is the separator; a corrupted label is drawn
      uniformly from the *other* data tokens, so exactly the chosen fraction of labels is wrong.
    * "paper" (its Figure 2): tokens 0..3 are reserved (3 is the separator), the source is drawn from
      {4 .. V-1}, and a corrupted label is a uniform draw from {4 .. V-1}, which hits the clean token
      1/(V-4) of the time (the paper's description, taken literally).
    """
    check_positive_int(batch_size, "batch_size")
    check_positive_int(seq_len, "seq_len")
    check_positive_int(vocab_size, "vocab_size", 3 if layout == "distinct" else PAPER_RESERVED + 2)
    if not 0 <= noise < 1:
        raise ValueError(f"noise must be a rate in [0, 1), got {noise!r}")
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
    lo, sep_token = (0, vocab_size - 1) if layout == "distinct" else (PAPER_RESERVED, PAPER_SEPARATOR)
    n_data = vocab_size - 1 if layout == "distinct" else vocab_size - PAPER_RESERVED
    source = torch.randint(lo, lo + n_data, (batch_size, seq_len), generator=generator)
    clean = source.flip(1)
    mask = torch.rand(batch_size, seq_len, generator=generator) < noise
    if layout == "distinct":
        shift = torch.randint(1, n_data, (batch_size, seq_len), generator=generator)
        labels = torch.where(mask, (clean + shift) % n_data, clean)
    else:
        labels = torch.where(mask, torch.randint(lo, vocab_size, (batch_size, seq_len), generator=generator), clean)
    sep = torch.full((batch_size, 1), sep_token, dtype=source.dtype)
    seq = torch.cat([source, sep, labels], dim=1)
    targets = seq[:, 1:].clone()
    targets[:, :seq_len] = -100
    return ReversalBatch(seq[:, :-1], targets, source, labels, mask)


class _Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, d_ff: int):
        super().__init__()
        self.n_head = n_head
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.GELU(), nn.Linear(d_ff, d_model))

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.n_head, d // self.n_head).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.ln2(x))


class TinyCausalTransformer(nn.Module):
    """A pre-LN causal transformer with learned positions; independent of the GPT module on purpose."""

    def __init__(self, sizes: FluctuationSizes):
        super().__init__()
        self.tok = nn.Embedding(sizes.vocab_size, sizes.d_model)
        self.pos = nn.Embedding(2 * sizes.seq_len, sizes.d_model)
        self.blocks = nn.ModuleList(_Block(sizes.d_model, sizes.n_head, sizes.d_ff) for _ in range(sizes.n_layer))
        self.ln = nn.LayerNorm(sizes.d_model)
        self.head = nn.Linear(sizes.d_model, sizes.vocab_size)

    def forward(self, idx: Tensor) -> Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))

    def loss(self, batch: ReversalBatch) -> Tensor:
        logits = self(batch.inputs)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch.targets.reshape(-1), ignore_index=-100)


class LinearPerceptron(nn.Module):
    """One linear map from the one-hot source to the logits of every reversed position (softmax regression)."""

    def __init__(self, sizes: FluctuationSizes):
        super().__init__()
        self.seq_len, self.vocab = sizes.seq_len, sizes.vocab_size
        self.lin = nn.Linear(sizes.seq_len * sizes.vocab_size, sizes.seq_len * sizes.vocab_size)

    def loss(self, batch: ReversalBatch) -> Tensor:
        x = F.one_hot(batch.source, self.vocab).flatten(1).to(self.lin.weight.dtype)
        logits = self.lin(x).view(-1, self.seq_len, self.vocab)
        return F.cross_entropy(logits.reshape(-1, self.vocab), batch.labels.reshape(-1))


MODELS: dict[str, Callable[[FluctuationSizes], nn.Module]] = {
    "transformer": TinyCausalTransformer,
    "linear": LinearPerceptron,
}


def base_learning_rate(kind: str, sizes: FluctuationSizes) -> float:
    """The Adam learning rate a model trains at before the shock."""
    return sizes.linear_lr if kind == "linear" else sizes.lr


def _flat_params(model: nn.Module) -> Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def resolve_device(sizes: FluctuationSizes) -> torch.device:
    """Where the shock experiment runs ("auto": CUDA when present), by the one device rule (`pick_device`)."""
    return pick_device(sizes.device)


def _to(batch: ReversalBatch, device: torch.device) -> ReversalBatch:
    return ReversalBatch(*(t.to(device) for t in (batch.inputs, batch.targets, batch.source, batch.labels,
                                                  batch.noise_mask)))


def _train(model: nn.Module, opt: torch.optim.Optimizer, sizes: FluctuationSizes, gen: torch.Generator,
           n_steps: int, log: dict[str, list], tick: Callable[[], None] | None) -> None:
    device = next(model.parameters()).device
    before = _flat_params(model)
    for _ in range(n_steps):
        # the data stream is drawn on the CPU, so it is the same sequence on every device
        batch = _to(reversal_batch(sizes.batch_size, sizes.seq_len, sizes.vocab_size, sizes.noise, gen,
                                   sizes.layout), device)
        loss = model.loss(batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()
                                                                 if p.grad is not None]))
        opt.step()
        after = _flat_params(model)
        log["update_norm"].append(float((after - before).norm()))
        log["grad_norm"].append(float(grad_norm))
        log["loss"].append(loss.item())
        log["lr"].append(opt.param_groups[0]["lr"])
        before = after
        if tick is not None:
            tick()


def lr_shock_experiment(kind: str, sizes: FluctuationSizes, factors: Sequence[float] = (5.0, 0.2, 1.0),
                        seed: int = 0, progress: Callable | None = None) -> dict[float, pd.DataFrame]:
    """Train to `change_step` once, then continue with the LR multiplied by each factor (1.0 = control).

    The arms share the model, the Adam state and the data stream up to the change, so they are identical
    before it. Returns factor -> per-step log (step, update_norm, grad_norm, loss, lr); grad_norm is the
    minibatch gradient's norm before the step.
    """
    if kind not in MODELS:
        raise ValueError(f"unknown model kind {kind!r}: choose one of {', '.join(MODELS)}")
    if not factors or any(not (f > 0 and math.isfinite(f)) for f in factors):
        raise ValueError(f"factors must be positive finite LR multipliers, got {factors!r}")
    with torch_threads(sizes.threads or torch.get_num_threads()):
        return _lr_shock(kind, sizes, factors, seed, progress)


def _lr_shock(kind: str, sizes: FluctuationSizes, factors: Sequence[float], seed: int,
              progress: Callable | None) -> dict[float, pd.DataFrame]:
    torch.manual_seed(seed)
    model = MODELS[kind](sizes).to(resolve_device(sizes))
    base_lr = base_learning_rate(kind, sizes)
    opt = torch.optim.Adam(model.parameters(), lr=base_lr)
    gen = torch.Generator().manual_seed(seed + 1)
    bar = progress(total=sizes.change_step + len(factors) * (sizes.total_steps - sizes.change_step),
                   desc=kind) if progress is not None else None
    tick = (lambda: bar.update(1)) if bar is not None else None
    shared: dict[str, list] = {"update_norm": [], "grad_norm": [], "loss": [], "lr": []}
    _train(model, opt, sizes, gen, sizes.change_step, shared, tick)
    snapshot = (copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict()), gen.get_state())
    out = {}
    for f in factors:
        model.load_state_dict(snapshot[0])
        # a fresh copy every time: load_state_dict adopts the given moment tensors, which Adam then updates
        # in place, so reusing the snapshot would leak one arm's optimiser state into the next
        opt.load_state_dict(copy.deepcopy(snapshot[1]))
        gen.set_state(snapshot[2])
        for grp in opt.param_groups:
            grp["lr"] = base_lr * f
        log = {k: list(v) for k, v in shared.items()}
        _train(model, opt, sizes, gen, sizes.total_steps - sizes.change_step, log, tick)
        df = pd.DataFrame(log)
        df.insert(0, "step", np.arange(len(df)))
        out[float(f)] = df
    if bar is not None:
        bar.close()
    return out


def windowed_variance(x: Sequence[float], window: int, detrend: bool = True,
                      breaks: Sequence[int] = ()) -> np.ndarray:
    """Variance of x over the trailing `window` values (NaN until the window is full).

    With `detrend`, the variance is taken about the window's own least-squares line, so a slow drift of the
    update norm (training still settling) is not counted as fluctuation. `breaks` are indices where a new
    segment starts (the LR change): no window straddles one, so a jump in level is not read as variance.
    """
    window = check_positive_int(window, "window", 3)
    x = np.asarray(x, float)
    edges = [0, *sorted(int(b) for b in breaks if 0 < b < len(x)), len(x)]
    out = np.full(len(x), np.nan)
    for lo, hi in zip(edges[:-1], edges[1:]):
        y = pd.Series(x[lo:hi])
        var = y.rolling(window).var()
        if detrend:
            t = pd.Series(np.arange(hi - lo, dtype=float))
            var = (var - y.rolling(window).cov(t) ** 2 / t.rolling(window).var()).clip(lower=0.0)
        out[lo:hi] = var.to_numpy()
    return out


def fluctuation_summary(runs: dict[float, pd.DataFrame], sizes: FluctuationSizes,
                        detrend: bool = True) -> pd.DataFrame:
    """Windowed variance of the update norm before and after the change, raw and / eta^2.

    `before` is the last full window before the change; `after` is the mean over every full window after
    it (windows restart at the change, so none straddles it). `response` is an arm's after/before ratio
    divided by the control's (factor 1), so slow drifts common to all arms cancel: > 1 means the arm
    fluctuates more than it would have at the old LR.
    """
    if 1.0 not in runs:
        raise ValueError("the runs need a control arm with factor 1.0")
    w, c = sizes.window, sizes.change_step
    rows = []
    for f, df in runs.items():
        u = df["update_norm"].to_numpy()
        un = u / df["lr"].to_numpy()
        raw = windowed_variance(u, w, detrend, breaks=(c,))
        norm = windowed_variance(un, w, detrend, breaks=(c,))
        after = slice(c + w - 1, None)
        rows.append(dict(factor=f, var_before=raw[c - 1], var_after=float(np.mean(raw[after])),
                         var_before_over_eta2=norm[c - 1], var_after_over_eta2=float(np.mean(norm[after])),
                         mean_step_over_eta_after=float(un[c:].mean()),
                         loss_before=float(df["loss"].to_numpy()[c - w:c].mean()),
                         loss_after=float(df["loss"].to_numpy()[-w:].mean())))
    out = pd.DataFrame(rows)
    out.insert(3, "ratio_raw", out["var_after"] / out["var_before"])
    out.insert(6, "ratio_over_eta2", out["var_after_over_eta2"] / out["var_before_over_eta2"])
    ctrl = out.set_index("factor").loc[1.0]
    out["response_raw"] = out["ratio_raw"] / ctrl["ratio_raw"]
    out["response_over_eta2"] = out["ratio_over_eta2"] / ctrl["ratio_over_eta2"]
    return out


def fluctuation_verdict(summary: pd.DataFrame, up: float = 5.0, down: float = 0.2,
                        column: str = "response_raw") -> str:
    """'ordinary' when the larger LR fluctuates more than the smaller one, 'anomalous' when less."""
    s = summary.set_index("factor")[column]
    if up not in s.index or down not in s.index:
        raise ValueError(f"the summary needs arms with factors {up} and {down}")
    return "ordinary" if s[up] > s[down] else "anomalous"


def noise_floor(sizes: FluctuationSizes) -> float:
    """The lowest expected loss on the answer half: the entropy of the noisy label given the clean one."""
    p = sizes.noise
    if p == 0:
        return 0.0
    if sizes.layout == "distinct":
        others = sizes.vocab_size - 2
        return float(-(1 - p) * math.log(1 - p) - p * math.log(p / others))
    # "paper": the uniform draw keeps the clean token with probability p/n, so it stays with 1 - p + p/n
    n = sizes.vocab_size - PAPER_RESERVED
    keep = 1 - p + p / n
    return float(-keep * math.log(keep) - (n - 1) * (p / n) * math.log(p / n))


def response_row(summary: pd.DataFrame, base_lr: float) -> dict:
    """One line of a base-LR scan: the normalised responses to x5 and /5 and both verdicts."""
    by = summary.set_index("factor")
    return dict(base_lr=base_lr,
                response_x5_over_eta2=float(by.loc[5.0, "response_over_eta2"]),
                response_div5_over_eta2=float(by.loc[0.2, "response_over_eta2"]),
                loss_before=float(by.loc[1.0, "loss_before"]),
                loss_after_x5=float(by.loc[5.0, "loss_after"]),
                verdict_over_eta2=fluctuation_verdict(summary, column="response_over_eta2"),
                verdict_raw=fluctuation_verdict(summary, column="response_raw"))


def lr_scan(kind: str, sizes: FluctuationSizes, multipliers: Sequence[float] | None = None, seed: int = 0,
            progress: Callable | None = None, base_summary: pd.DataFrame | None = None) -> pd.DataFrame:
    """Shock responses of one model at several base learning rates (is its verdict robust?).

    Runs the model's base LR times each multiplier (default: the profile's `linear_scan` or
    `transformer_scan`); pass the summary of the run at the base LR itself as `base_summary` to include it
    without training it again. `converged` marks runs whose loss before the change was within 25% of the
    label-noise floor.
    """
    if multipliers is None:
        multipliers = sizes.linear_scan if kind == "linear" else sizes.transformer_scan
    base = base_learning_rate(kind, sizes)
    rows = [response_row(base_summary, base)] if base_summary is not None else []
    for mult in multipliers:
        s = sizes.replace(**{"linear_lr" if kind == "linear" else "lr": base * mult})
        summary = fluctuation_summary(lr_shock_experiment(kind, s, seed=seed, progress=progress), s)
        rows.append(response_row(summary, base * mult))
    if not rows:
        return pd.DataFrame(columns=["base_lr", "converged"])
    out = pd.DataFrame(rows).sort_values("base_lr").reset_index(drop=True)
    out.insert(1, "converged", out["loss_before"] < CONVERGED_FACTOR * noise_floor(sizes))
    return out
