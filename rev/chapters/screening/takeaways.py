"""Notebook 03 (screening): its takeaways, Markdown computed from the screening's result (so a screening that
turns out otherwise reads otherwise). Losses closer than `LOSS_TIE` are a tie that one seed cannot order.
"""
from __future__ import annotations

from ...core.reversible import RECON_LIMIT
from ..shared.tables import counted
from ..shared.verdicts import FALLBACK_TIE, within_tie
from .rule import LOSS_TIE, reconstructs
from .streams import stream_lesson


def _bullets(lines: list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines if line)


def coefficient(row: dict) -> float:
    """The coefficient on a block's output in one update: 2h for leapfrog (midpoint), h otherwise."""
    return (2 if row["trunk"].startswith("midpoint") else 1) * row["h"]


def like_for_like(rows: list[dict]) -> str | None:
    """The two reversible integrators at an equal coefficient on f (leapfrog at h, Euler at 2h), fp32 streams:
    the comparison of integrators that an equal h is not."""
    fp32 = [r for r in rows if r["stream"] == "fp32" and r["trunk"] != "residual"]
    pairs = [(a, b) for a in fp32 for b in fp32 if a["trunk"].startswith("midpoint") and
             b["trunk"].startswith("reveuler") and abs(coefficient(a) - coefficient(b)) < 1e-12]
    if not pairs:
        return None
    return "Like for like (an equal coefficient on f per update): " + "; ".join(
        f"`{a['name']}` {a['val_loss']:.3f} against `{b['name']}` {b['val_loss']:.3f} "
        f"({a['val_loss'] - b['val_loss']:+.3f} nats, coefficient {coefficient(a):g})" for a, b in pairs) + \
        f"; within {LOSS_TIE} nats is a tie one seed cannot order."


def screening_takeaways(result: dict) -> str:
    rows, chosen = result["runs"], result["chosen"]
    base = next(r for r in rows if r["trunk"] == "residual")
    rev = [r for r in rows if r["trunk"] != "residual"]
    best = min(rev, key=lambda r: r["val_loss"])
    tied = [r for r in rev if within_tie(r["val_loss"] - best["val_loss"], FALLBACK_TIE)]
    gap = best["val_loss"] - base["val_loss"]
    fixed = [r for r in rev if r["stream"] == "fixed"]
    exact = sum(r["reconstruction_error"] == 0 for r in fixed)
    over = [r["name"] for r in rev if not reconstructs(r)]
    return _bullets([
        f"Lowest reversible loss: `{best['name']}` at {best['val_loss']:.3f} after {result['tokens']:,} tokens"
        + (f", tied (within {LOSS_TIE} nats) with {counted(len(tied) - 1, 'other candidate')}, which one seed cannot order"
           if len(tied) > 1 else f", ahead of every other candidate by more than the {LOSS_TIE}-nat tie")
        + f"; against the baseline's {base['val_loss']:.3f}, "
        + (f"a tie ({gap:+.3f} nats)." if within_tie(gap, FALLBACK_TIE) else f"{abs(gap):.3f} nats "
           + ("behind." if gap > 0 else "ahead.")),
        f"Fixed-point streams rebuilt their input exactly in {exact} of {counted(len(fixed), 'candidate')}; "
        + (f"over the {RECON_LIMIT:g} limit: {', '.join(over)}." if over else
           f"every candidate stayed within the {RECON_LIMIT:g} reconstruction limit."),
        like_for_like(rows),
        stream_lesson(rows, FALLBACK_TIE),
        f"The assignment runs use `{chosen['trunk']}` with h={chosen['h']:g} on an {chosen['stream']} stream.",
    ])
