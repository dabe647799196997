"""Notebooks 03-06: the takeaways, Markdown computed from the results (so a run that turns out otherwise reads
otherwise).
"""
from __future__ import annotations

from ..core.reversible import RECON_LIMIT
from ..engine.maxbatch import MaxDepth
from .results import deep_capped, loss_head_finding, stream_reliability
from .runs import RUN3B, loss_levels
from .screening import reconstructs


# --- takeaways: Markdown computed from the results --------------------------------------------------------

def _bullets(lines: list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines)


def screening_takeaways(result: dict) -> str:
    rows, chosen = result["runs"], result["chosen"]
    base = next(r for r in rows if r["trunk"] == "residual")
    rev = [r for r in rows if r["trunk"] != "residual"]
    best = min(rev, key=lambda r: r["val_loss"])
    fixed = [r for r in rev if r["stream"] == "fixed"]
    exact = sum(r["reconstruction_error"] == 0 for r in fixed)
    over = [r["name"] for r in rev if not reconstructs(r)]
    return _bullets([
        f"Best reversible candidate: `{best['name']}` at {best['val_loss']:.3f} vs the baseline's "
        f"{base['val_loss']:.3f} ({best['val_loss'] - base['val_loss']:+.3f} nats) after {result['tokens']:,} tokens.",
        f"Fixed-point streams rebuilt their input exactly in {exact} of {len(fixed)} runs; "
        + (f"over the {RECON_LIMIT:g} limit: {', '.join(over)}." if over else
           f"every candidate stayed within the {RECON_LIMIT:g} reconstruction limit."),
        f"The assignment runs use `{chosen['trunk']}` with h={chosen['h']:g} on an {chosen['stream']} stream.",
    ])


def baseline_takeaways(run1: dict) -> str:
    uniform, unigram = loss_levels(run1).values()
    return _bullets([
        f"The baseline reached validation loss {run1['final_val_loss']:.3f} after {run1['tokens']:,} tokens "
        f"({run1['steps']} steps of {run1['batch_size']} x {run1['model_config']['seq_len']} tokens).",
        f"An untrained model scores the uniform guess ln V = {uniform:.2f}; the baseline ended "
        f"{unigram - run1['final_val_loss']:+.3f} nats below the context-free line ({unigram:.3f}): positive "
        f"means it uses context.",
        f"One training step at batch {run1['batch_size']} peaked at {run1['peak_memory_bytes'] / 2**20:.1f} MiB; "
        f"it trained at {run1['tokens_per_s']:,.0f} tokens/s.",
    ])


def same_batch_takeaways(run1: dict, run2: dict) -> str:
    mem = run2["peak_memory_bytes"] / run1["peak_memory_bytes"]
    speed = run2["tokens_per_s"] / run1["tokens_per_s"]
    return _bullets([
        f"At batch {run2['batch_size']} the reversible trunk peaked at {mem:.2f}x the baseline's memory "
        f"({run2['peak_memory_bytes'] / 2**20:.1f} vs {run1['peak_memory_bytes'] / 2**20:.1f} MiB).",
        f"It trained at {speed:.2f}x the baseline's speed ({run2['tokens_per_s']:,.0f} vs "
        f"{run1['tokens_per_s']:,.0f} tokens/s).",
        f"Validation loss {run2['final_val_loss']:.3f} vs {run1['final_val_loss']:.3f} "
        f"({run2['final_val_loss'] - run1['final_val_loss']:+.3f} nats) at equal tokens.",
        f"The trained trunk rebuilds its input with relative error {run2['reconstruction_error']:.1e} "
        f"(limit {RECON_LIMIT:g}).",
    ])


def max_batch_takeaways(mb: dict, chosen: dict, runs: dict[str, dict], deep: MaxDepth,
                        ablation: dict | None = None) -> str:
    """`runs`: the summaries of run1_baseline, run1b_baseline_maxbatch, run3_reversible_max_batch and
    run4_reversible_deep (and run 3b, `RUN3B`, when it ran), by name; `ablation`: `loss_head_ablation`'s result."""
    b_base, b_rev = mb["residual"]["batch"], mb[chosen["trunk"]]["batch"]
    run1, run1b = runs["run1_baseline"], runs["run1b_baseline_maxbatch"]
    run3, run4 = runs["run3_reversible_max_batch"], runs["run4_reversible_deep"]
    unigram = f"; a context-free model scores {run3['unigram_val_loss']:.3f}" if run3.get("unigram_val_loss") else ""
    capped = " (the search's cap, not the memory limit)" if deep_capped(deep.to_dict()) else ""
    lines = [
        f"Under {mb['budget_bytes'] / 2**20:.0f} MiB the reversible trunk fits batch {b_rev} against the "
        f"baseline's {b_base}: {b_rev / b_base:.2f}x.",
        f"At their max batches: validation loss {run3['final_val_loss']:.3f} (reversible) vs "
        f"{run1b['final_val_loss']:.3f} (baseline); {run3['tokens_per_s']:,.0f} vs {run1b['tokens_per_s']:,.0f} "
        f"tokens/s. The same tokens took {run3['steps']} vs {run1b['steps']} optimizer steps{unigram}.",
    ]
    run3b = runs.get(RUN3B)
    if run3b:
        ok, why = stream_reliability(run3b["stream"], run3b["reconstruction_error"])
        ok3, why3 = stream_reliability(run3["stream"], run3["reconstruction_error"])
        lines.append(f"Run 3b, the same trunk on {run3b['stream']} at its own max batch {run3b['batch_size']}: "
                     f"validation loss {run3b['final_val_loss']:.3f}, {run3b['tokens_per_s']:,.0f} tokens/s "
                     f"({run3b['tokens_per_s'] / run3['tokens_per_s']:.2f}x run 3 on {run3['stream']}); run 3b is "
                     f"{why}; run 3 is {why3}.")
    lines.append(f"Spending the memory on depth: {deep.n_layer} reversible layers{capped} in the baseline's memory at "
                 f"batch {deep.batch} reached {run4['final_val_loss']:.3f} vs the baseline's "
                 f"{run1['final_val_loss']:.3f} at equal tokens.")
    if loss_head_finding(ablation):
        lines.append(loss_head_finding(ablation))
    return _bullets(lines)
