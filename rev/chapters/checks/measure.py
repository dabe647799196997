"""The checks behind notebook 02 beyond running the suite (`rev.chapters.checks.suite`): live measurements and break-its.

* `gradient_differences` / `autocast_cosines`: the memory-free reversible trunks against their stored twins
  on the same weights, parameter by parameter.
* `depth_memory`: activation bytes of one training step against depth, per trunk.
* Break it: `forgetting_autocast` and `replacing_integrator` sabotage the reversible backward for the length of a
  `with` block; `check_swapped_inverse` / `check_autocast_sabotage` (exercises 02.1, 02.3) run the relevant tests
  on the learner's sabotage and show which of them catch it, and which of their bounds (`caught_table`).
"""
from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Sequence
from unittest import mock

import pandas as pd
import torch
import torch.nn.functional as F

from ...base.device import single_thread
from ...core.integrators import INTEGRATORS, Integrator
from ...core.model import GPT, GPTConfig, reversible_twin
from ...core.reversible import AutocastState

# ----------------------------------------------------------------------------------------------------------
# Live figure 1: gradients of the reversible trunks against their stored twins
# ----------------------------------------------------------------------------------------------------------

def param_layer(name: str) -> str:
    """Short label of where a parameter sits: `emb`, `L0`, `L1`, ..., `ln_f` (for plot ticks)."""
    parts = name.split(".")
    if "blocks" in parts:
        return f"L{parts[parts.index('blocks') + 1]}"
    return "emb" if parts[0] in ("wte", "wpe") else parts[0]


def layer_ticks(names: Sequence[str]) -> tuple[list[float], list[str]]:
    """Tick positions (the middle of each `param_layer` group of consecutive parameters) and labels."""
    groups: list[tuple[str, list[int]]] = []
    for i, name in enumerate(names):
        label = param_layer(name)
        if not groups or groups[-1][0] != label:
            groups.append((label, []))
        groups[-1][1].append(i)
    return [sum(ix) / len(ix) for _, ix in groups], [label for label, _ in groups]


def _twin_models(base: str, stream: str, dtype: torch.dtype, geometry: dict, h: float, seed: int) -> tuple[GPT, GPT]:
    torch.manual_seed(seed)
    stored = GPT(GPTConfig(**geometry, trunk=base, h=h, stream=stream)).to(dtype)
    rev = GPT(GPTConfig(**geometry, trunk=reversible_twin(base), h=h, stream=stream)).to(dtype)
    rev.load_state_dict(stored.state_dict())  # the same weights, so any difference is the backward's
    return stored, rev


def _batch(geometry: dict, batch: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    seq = torch.randint(0, geometry["vocab_size"], (batch, geometry["seq_len"] + 1), generator=gen)
    return seq[:, :-1], seq[:, 1:]


def _grads(model: GPT, idx: torch.Tensor, tgt: torch.Tensor, autocast: bool = False) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = model(idx, tgt)
    loss.backward()  # outside autocast, as in training
    return {n: p.grad.detach().double().clone() for n, p in model.named_parameters()}


GRAD_GEOMETRY = dict(vocab_size=64, seq_len=16, n_layer=4, n_head=2, d_model=32)
# the size of the bf16 autocast tests in tests/core/test_reversible.py (4 layers, d_model 64): notebook 02's autocast
# section measures there, so its verdicts are about the tests whose rows it shows. Deeper, an fp32-stream rebuild
# can cross a bf16 rounding boundary and move a correct backward's gradients by ~1e-3 (6 layers, seed 0 on a CPU).
AUTOCAST_GEOMETRY = {**GRAD_GEOMETRY, "n_layer": 4, "d_model": 64}


STREAM_MODEL_DTYPE = {"fp32": torch.float32, "fp64": torch.float64, "fixed": torch.float64}


def gradient_differences(bases: Sequence[str] = ("midpoint", "reveuler"),
                         streams: Sequence[str] = ("fp32", "fp64", "fixed"),
                         geometry: dict | None = None, h: float = 0.5, batch: int = 3,
                         seed: int = 0) -> pd.DataFrame:
    """Per-parameter relative gradient difference |g_rev - g_stored| / |g_stored| of each reversible trunk
    against its stored twin, for each residual-stream storage, each in the model dtype it is meant for
    (`STREAM_MODEL_DTYPE`: a stream never sums below its model's dtype, so an fp32 stream in a float64 model
    would be a float64 one).

    A float64 or fixed-point stream inverts (almost) exactly, so the differences sit at float64 rounding; an
    fp32 stream loses bits on every add and subtract and the rebuilt activations -- and so the gradients --
    carry that error."""
    geometry = {**GRAD_GEOMETRY, **(geometry or {})}
    idx, tgt = _batch(geometry, batch, seed + 1)
    rows = []
    for base in bases:
        for stream in streams:
            stored, rev = _twin_models(base, stream, STREAM_MODEL_DTYPE[stream], geometry, h, seed)
            gs, gr = _grads(stored, idx, tgt), _grads(rev, idx, tgt)
            for name in gs:
                den = gs[name].norm().item()
                rows.append(dict(trunk=reversible_twin(base), stream=stream, param=name,
                                 rel_diff=(gr[name] - gs[name]).norm().item() / max(den, 1e-300),
                                 grad_norm=den))
    return pd.DataFrame(rows)


# The bounds of the two bf16 tests in tests/core/test_reversible.py (tests/chapters/checks/test_checks.py reads that file and
# fails if these drift from it): `test_gradients_under_bf16_autocast` asks for a lowest per-parameter cosine of at
# least AUTOCAST_COSINE and then, since a cosine ignores scale, a largest relative gradient error of at most
# AUTOCAST_REL_BOUND; `test_bf16_autocast_exact_on_fixed_stream` asks for a relative error of at most EXACT_REL_BOUND.
AUTOCAST_COSINE = 0.999
AUTOCAST_REL_BOUND = 1e-4
EXACT_REL_BOUND = 1e-6


def _ignore_saved_state(self: AutocastState) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


@contextlib.contextmanager
def forgetting_autocast(context: Callable[[AutocastState], contextlib.AbstractContextManager] = _ignore_saved_state):
    """A deliberately broken reversible backward: block recomputation re-enters `context(saved_state)` instead
    of the autocast state saved in forward -- by default nothing, so it runs in full precision. Used only to
    show what the bf16 checks catch."""
    with mock.patch.object(AutocastState, "context", context):
        yield


def worst_autocast(cos: pd.DataFrame) -> pd.DataFrame:
    """Largest 1 - cosine and relative difference per (stream, variant) of an `autocast_cosines` table."""
    return (cos.assign(one_minus_cos=(1 - cos["cosine"]).clip(lower=0))
            .groupby(["stream", "variant"])[["one_minus_cos", "rel_diff"]].max())


def autocast_verdicts(cos: pd.DataFrame, stream: str = "fp32", cosine: float = AUTOCAST_COSINE,
                      rel_bound: float = AUTOCAST_REL_BOUND) -> dict[str, bool]:
    """From an `autocast_cosines` table, on `stream`: does each bound of the bf16 test (cosine >= `cosine`, relative
    error <= `rel_bound`) fail the broken backward, and does the correct backward pass both?"""
    w = worst_autocast(cos)
    ok, bad = w.loc[(stream, "correct")], w.loc[(stream, "forgets autocast")]
    return {"cosine catches": bool(bad.one_minus_cos > 1 - cosine),
            "norm bound catches": bool(bad.rel_diff > rel_bound),
            "correct passes": bool(ok.one_minus_cos <= 1 - cosine and ok.rel_diff <= rel_bound)}


def autocast_cosines(bases: Sequence[str] = ("midpoint", "reveuler"), streams: Sequence[str] = ("fp32",),
                     geometry: dict | None = None, h: float = 0.5, batch: int = 3, seed: int = 0,
                     broken: bool = True) -> pd.DataFrame:
    """Per-parameter cosine similarity (and relative difference) of reversible and stored gradients under
    bf16 autocast (CPU), float32 weights, for each residual-stream storage in `streams`. With `broken`,
    also the same for a reversible backward that forgets to re-enter autocast (`variant` column: "correct"
    / "forgets autocast").

    On an fp32 stream even a correct backward rebuilds activations one float32 rounding off, and where that
    moves a value across a bf16 rounding boundary the recomputed block differs by a whole bf16 step; on the
    bit-exact `fixed` stream the recomputation repeats forward exactly."""
    geometry = {**AUTOCAST_GEOMETRY, **(geometry or {})}
    idx, tgt = _batch(geometry, batch, seed + 1)
    variants = [("correct", contextlib.nullcontext)] + ([("forgets autocast", forgetting_autocast)] if broken else [])
    rows = []
    for base in bases:
        for stream in streams:
            stored, rev = _twin_models(base, stream, torch.float32, geometry, h, seed)
            gs = _grads(stored, idx, tgt, autocast=True)
            for variant, ctx in variants:
                with ctx():
                    gr = _grads(rev, idx, tgt, autocast=True)
                for name in gs:
                    cos = F.cosine_similarity(gs[name].flatten(), gr[name].flatten(), dim=0).item()
                    rel = (gr[name] - gs[name]).norm().item() / max(gs[name].norm().item(), 1e-300)
                    rows.append(dict(trunk=reversible_twin(base), stream=stream, variant=variant, param=name,
                                     cosine=cos, rel_diff=rel))
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------------------
# Live figure 2: activation memory against depth
# ----------------------------------------------------------------------------------------------------------

# Tokens per batch (batch x seq_len) well above 24 x d_model, so that a layer's activations outweigh its
# parameters and gradients: below that, the step's peak sits in the gradient phase and hides how
# checkpointing scales.
DEPTH_GEOMETRY = dict(vocab_size=256, seq_len=64, n_head=2, d_model=32)


def depth_memory(depths: Sequence[int] = (2, 4, 8, 16),
                 trunks: Sequence[str] = ("residual", "residual_ckpt", "midpoint_rev", "reveuler_rev"),
                 geometry: dict | None = None, batch: int = 16, device: str = "cpu",
                 progress: bool = False) -> pd.DataFrame:
    """Activation bytes (peak of one training step minus parameters, gradients and optimizer state) for each
    trunk and depth: a table with one row per depth and one column per trunk."""
    from ...measure.bench import (
        bench_depths,  # one implementation of the sweep, shared with `python -m rev bench`
    )

    geometry = {**DEPTH_GEOMETRY, **(geometry or {})}
    geometry.setdefault("n_layer", min(depths))
    with single_thread():
        res = bench_depths(geometry, batch, tuple(depths), tuple(trunks), device=device, precision="fp32",
                           progress=progress)
    df = pd.DataFrame(res)
    df.index.name = "n_layer"
    return df.sort_index()


def growth_ratios(df: pd.DataFrame) -> pd.Series:
    """Activation bytes at the deepest depth over those at the shallowest, per trunk (1.0 = flat)."""
    return df.loc[df.index.max()] / df.loc[df.index.min()]


# ----------------------------------------------------------------------------------------------------------
# Break it: sabotage the backward, and see which tests catch it (exercises 02.1, 02.3)
# ----------------------------------------------------------------------------------------------------------

SABOTAGE_FILE = "core/test_reversible.py"
# The fast tests each sabotage could trip, on the reversible-Euler trunk only, so that a check stays at seconds.
AUTOCAST_TESTS = "bf16 and reveuler"
SWAP_TESTS = "reveuler and ((float64 and 3-0.5) or bf16)"


@contextlib.contextmanager
def replacing_integrator(name: str, integrator: type[Integrator]):
    """Every trunk built inside the `with` block that names integrator `name` gets `integrator` instead (the
    stored twin too, so only what differs between step and inverse can show)."""
    with mock.patch.dict(INTEGRATORS, {name: integrator}):
        yield


def _first_number(text: str) -> float | None:
    found = re.search(r"[-+]?\d+\.?\d*(?:e[-+]?\d+)?", text)
    return float(found.group()) if found else None


def _fired(test: str, message: str) -> tuple[str, float | str | None, str]:
    """Which check of a failing test fired, what it measured and its bound, from the test's one-line message."""
    m = message.removeprefix("AssertionError: ").strip()
    if "gradient cosine" in m:
        return "lowest cosine", _first_number(m), f">= {AUTOCAST_COSINE}"
    if "relative gradient error" in m:
        return "relative error", _first_number(m), f"<= {AUTOCAST_REL_BOUND:g}"
    if "exact" in test:
        return "relative error", _first_number(m), f"<= {EXACT_REL_BOUND:g}"
    return "first differing gradient", m.split()[0] if m else None, "rtol 1e-6"


def caught_table(df: pd.DataFrame) -> pd.DataFrame:
    """From a `run_tests` table: per test case, whether it caught the sabotage, which of its checks fired (for the
    bf16 test: its cosine bound, or, checked second, its relative-norm bound), the value measured and the bound."""
    rows = []
    for r in df.itertuples():
        bad = r.outcome in ("failed", "error")
        check, measured, bound = _fired(r.test, r.message) if bad else ("", None, "")
        rows.append({"test": r.test, "case": r.params, "verdict": "caught it" if bad else "passed anyway",
                     "check that fired": check, "measured": measured, "bound": bound})
    return pd.DataFrame(rows).set_index(["test", "case"])


# ----------------------------------------------------------------------------------------------------------
# Facts read off the notebook's tables
# ----------------------------------------------------------------------------------------------------------

def stream_gap(grad: pd.DataFrame) -> dict[str, float]:
    """From a `gradient_differences` table: the largest relative difference per stream, and how many decades
    the fp32 stream's lies above the fp64 stream's (`decades`), next to the unit-roundoff ratio 2^29."""
    worst = grad.groupby("stream")["rel_diff"].max()
    out = {s: float(v) for s, v in worst.items()}
    out["decades"] = math.log10(out["fp32"] / max(out["fp64"], 1e-300))
    out["roundoff_decades"] = 29 * math.log10(2)
    return out


def exactly_equal(grad: pd.DataFrame, stream: str = "fp32") -> list[str]:
    """From a `gradient_differences` table: where (`param_layer` labels, in model order) some parameter's gradient
    came out exactly equal to the stored twin's on `stream`, in either trunk."""
    rows = grad[(grad["stream"] == stream) & (grad["rel_diff"] == 0)]
    return list(dict.fromkeys(param_layer(p) for p in rows["param"]))
