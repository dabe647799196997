"""Notebook 06 and REPORT.md: what spending the saved memory bought, computed once.

Run 3 spends the reversible trunk's saved memory on batch, run 4 on depth; each is read against run 2 (the same
trunk at the profile's batch and depth, so the spending is the one difference) at equal tokens, one seed each,
against one tie (`verdicts.Tie`). Notebook 06 (its verdict table) and the report's headline
(`report.headline.spent_line`) both read `memory_spent`'s result, so they cannot disagree.

The two spendings are set against each other only when they spent the same memory: the max-batch search runs
under the profile's budget, the depth search under the baseline's own peak (and a layer cap), and a head-to-head
verdict between unequal budgets would compare the budgets.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..shared.record import Gap, RunRecord, gap_at_equal_tokens
from ..shared.verdicts import Tie, side_of_tie
from ...base.units import MIB

SAME_BUDGET = 0.01   # two budgets within 1% of each other spent the same memory


@dataclass(frozen=True)
class Spent:
    """One spending: `what` ("batch" or "depth"), the run that spent it, its size in words, its gap to the
    reference run at equal tokens, and the memory it was allowed (`budget_bytes`; `capped`: the depth search stopped
    at its layer cap, not at the budget)."""
    what: str
    run: str
    size: str
    gap: Gap
    budget_bytes: int | None
    capped: bool = False

    def side(self, tie: Tie) -> int | None:
        """-1 won, +1 lost, 0 a tie against the reference (`verdicts.side_of_tie`); for a lower bound (`Gap.bound`)
        only a loss can be told (the true gap is at least this one), else None."""
        side = side_of_tie(self.gap.diff, tie)
        if self.gap.bound:
            return 1 if side > 0 else None
        return side

    def budget_text(self) -> str:
        if not self.budget_bytes:
            return "an unrecorded budget"
        return f"{self.budget_bytes / MIB:,.1f} MiB" + (" (capped by the search's layer limit)" if self.capped else "")


@dataclass(frozen=True)
class Spending:
    """Both spendings against `ref` under one tie."""
    ref: str
    tie: Tie
    arms: tuple[Spent, ...]

    def won(self) -> list[str]:
        """What the memory paid on: the spendings that beat the reference beyond the tie."""
        return [a.what for a in self.arms if a.side(self.tie) == -1]

    def lost(self) -> list[str]:
        return [a.what for a in self.arms if a.side(self.tie) == 1]

    def same_budget(self) -> bool:
        """Whether batch and depth spent the same memory (both budgets recorded, within `SAME_BUDGET`, depth not
        stopped by its layer cap): only then are they compared with each other."""
        by = {a.what: a for a in self.arms}
        if set(by) != {"batch", "depth"} or by["depth"].capped:
            return False
        b, d = by["batch"].budget_bytes, by["depth"].budget_bytes
        return bool(b and d) and abs(b - d) <= SAME_BUDGET * max(b, d)

    def head_to_head(self) -> int | None:
        """Batch's gap minus depth's against the tie (-1: batch better, +1: depth better, 0: a tie); None when they
        spent different memory or a gap is only a bound."""
        by = {a.what: a for a in self.arms}
        if not self.same_budget() or any(a.gap.bound for a in self.arms):
            return None
        return side_of_tie(by["batch"].gap.diff - by["depth"].gap.diff, self.tie)


def memory_spent(ref: Mapping, ref_name: str, batch_run: Mapping | None, depth_run: Mapping | None, tie: Tie,
             maxbatch: Mapping | None = None) -> Spending | None:
    """The spendings of `batch_run` (run 3) and `depth_run` (run 4) against `ref` (run 2, or run 1 when run 2 is
    missing), each a run summary or a `load_runs` row; `maxbatch` (maxbatch.json) gives the budgets. None when
    neither can be set beside `ref` at equal tokens."""
    mb = maxbatch or {}
    deep = mb.get("deep") if isinstance(mb.get("deep"), Mapping) else {}
    base = RunRecord.of(ref)
    arms = []
    for what, name, run in (("batch", "run 3", batch_run), ("depth", "run 4", depth_run)):
        gap = gap_at_equal_tokens(RunRecord.of(run), base)
        if gap is None:
            continue
        if what == "batch":
            arms.append(Spent(what, name, f"batch {int(run['batch_size'])}", gap, mb.get("budget_bytes")))
        else:
            capped = deep.get("max_layers") is not None and deep.get("n_layer") == deep.get("max_layers")
            arms.append(Spent(what, name, f"{int(run['n_layer'])} layers", gap, deep.get("budget_bytes"), capped))
    return Spending(ref_name, tie, tuple(arms)) if arms else None
