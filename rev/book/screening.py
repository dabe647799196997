"""Notebook 03 (screening): the candidates, their short runs, and the rule that picks the reversible trunk the
assignment runs use (`choose`), with its verdicts, its rule in words and its runner-up. Writes
`results/<profile>/screening.json`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..core.model import is_reversible
from ..core.reversible import RECON_LIMIT
from ..engine.files import read_json, write_json
from ..engine.profiles import ProfileLike, get_profile
from .runs import RUNNER_UP, profile_dir, train_run

LOSS_TIE = 0.02           # validation losses closer than this (nats) count as a tie


# --- screening -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Candidate:
    trunk: str
    h: float
    stream: str

    @property
    def name(self) -> str:
        return f"{self.trunk}_h{self.h:g}_{self.stream}"


def screening_candidates(profile: ProfileLike = "cpu") -> list[Candidate]:
    """The baseline, then both reversible integrators at two step sizes on fp32 and at their default step on
    fp64 and fixed (`minimal` screening sets: one step size, fp32, plus one fixed-point run), and in both sets
    `ASSIGNMENT_FINAL`, the reference assignment's final configuration."""
    out = [Candidate("residual", 1.0, "fp32")]
    if get_profile(profile).screening_set == "minimal":
        return out + [Candidate("midpoint_rev", 0.5, "fp32"), Candidate("reveuler_rev", 1.0, "fp32"),
                      Candidate("reveuler_rev", 1.0, "fixed"), ASSIGNMENT_FINAL]
    for trunk, hs in (("midpoint_rev", (0.5, 0.25)), ("reveuler_rev", (1.0, 0.5))):
        out += [Candidate(trunk, h, "fp32") for h in hs]
        out += [Candidate(trunk, hs[0], s) for s in ("fp64", "fixed")]
    return out + [ASSIGNMENT_FINAL]


# the configuration the reference assignment trained its final reversible model with
ASSIGNMENT_FINAL = Candidate("reveuler_rev", 0.5, "fp64")


def screening_tokens(profile: ProfileLike) -> int:
    """Tokens of one screening run: the profile's screening fraction of its budget, at least one batch."""
    prof = get_profile(profile)
    return max(prof.batch_size * prof.seq_len, int(prof.train_tokens * prof.screening_fraction))


def screen(profile: ProfileLike, results: str | Path = "results", data_dir: str | Path = "data",
           candidates: list[Candidate] | None = None, progress: bool = True) -> dict:
    """Short runs of every candidate (`screening_tokens` each); picks the reversible candidate used by the
    assignment runs and says why. Writes screening.json."""
    prof = get_profile(profile)
    tokens = screening_tokens(profile)
    rows = []
    for c in candidates or screening_candidates(profile):
        s = train_run(f"screening/{c.name}", profile, results, data_dir, progress=progress,
                      trunk=c.trunk, h=c.h, stream=c.stream, train_tokens=tokens)
        rows.append({"name": c.name, "trunk": c.trunk, "h": c.h, "stream": c.stream,
                     "val_loss": s["final_val_loss"], "tokens_per_s": s["tokens_per_s"],
                     "reconstruction_error": s["reconstruction_error"], "tokens": s["tokens"]})
    chosen, reason = choose(rows)
    result = {"profile": prof.name, "tokens": tokens, "runs": rows, "chosen": chosen, "reason": reason}
    write_json(profile_dir(results, profile) / "screening.json", result)
    return result


def reconstructs(row: dict, recon_limit: float = RECON_LIMIT) -> bool:
    """A reversible candidate whose trained trunk rebuilt its input within `recon_limit`."""
    return is_reversible(row["trunk"]) and row["reconstruction_error"] is not None \
        and row["reconstruction_error"] <= recon_limit


def _tied(ok: list[dict]) -> list[dict]:
    best = min(r["val_loss"] for r in ok)
    return [r for r in ok if r["val_loss"] <= best + LOSS_TIE]


def _pick(tied: list[dict]) -> dict:
    # an fp32 stream first (half the state memory of fp64, no integer conversions), then the faster one
    return max(tied, key=lambda r: (r["stream"] == "fp32", r["tokens_per_s"]))


def choose(rows: list[dict], recon_limit: float = RECON_LIMIT) -> tuple[dict, str]:
    """Lowest validation loss among reversible candidates that reconstruct well; within a tie, an fp32
    stream (half the state memory of fp64 and no integer conversions), then the faster one, so the choice
    never pays for precision it does not need."""
    rev = [r for r in rows if is_reversible(r["trunk"])]
    ok = [r for r in rev if reconstructs(r, recon_limit)]
    if not ok:
        raise ValueError("no reversible candidate reconstructed its input within "
                         f"{recon_limit}; use the fp64 or fixed stream or a smaller h")
    tied = _tied(ok)
    best = min(r["val_loss"] for r in ok)
    pick = _pick(tied)
    base = next((r for r in rows if r["trunk"] == "residual"), None)
    reason = (f"{pick['name']} reached validation loss {pick['val_loss']:.3f} "
              f"(best reversible {best:.3f}; {len(tied)} candidate(s) within {LOSS_TIE} nats), is the fastest "
              f"{'fp32-stream ' if pick['stream'] == 'fp32' else ''}one among those at {pick['tokens_per_s']:.0f} "
              f"tokens/s, and rebuilt its input with relative "
              f"error {pick['reconstruction_error']:.1e} (limit {recon_limit:g})")
    if base:
        reason += f"; the baseline reached {base['val_loss']:.3f}"
    excluded = [r["name"] for r in rev if r not in ok]
    if excluded:
        reason += f"; excluded for poor reconstruction: {', '.join(excluded)}"
    return {"trunk": pick["trunk"], "h": pick["h"], "stream": pick["stream"]}, reason


def screening_verdicts(rows: list[dict], recon_limit: float = RECON_LIMIT):
    """Each reversible candidate's fate under `choose`: within the reconstruction limit, in the loss tie,
    picked."""
    import pandas as pd

    rev = [r for r in rows if is_reversible(r["trunk"])]
    ok = [r for r in rev if reconstructs(r, recon_limit)]
    tied = _tied(ok) if ok else []
    pick = _pick(tied)["name"] if tied else None
    return pd.DataFrame([{"name": r["name"], "stream": r["stream"], "val_loss": r["val_loss"],
                          "reconstruction_error": r["reconstruction_error"],
                          "within_limit": r in ok, "in_tie": r in tied, "picked": r["name"] == pick}
                         for r in rev]).set_index("name")


def screening_rule(profile: ProfileLike) -> str:
    """The screening's rule in words (Markdown), with the profile's numbers: what `choose` does."""
    prof = get_profile(profile)
    return (f"Each candidate trains on {screening_tokens(profile):,} tokens ({prof.screening_fraction:.0%} of the "
            f"{prof.train_tokens:,}-token budget). Among the reversible candidates whose trained trunk rebuilds its "
            f"input to a relative error of at most `RECON_LIMIT` = {RECON_LIMIT:g}, the lowest validation loss "
            f"wins; candidates within `LOSS_TIE` = {LOSS_TIE} nats of it count as tied, and among those an fp32 "
            f"stream goes first, then the faster one. The rule sees {prof.screening_fraction:.0%} of the budget: a "
            f"candidate that learns more slowly early but ends lower (or fits a larger batch) is invisible to it, "
            f"which notebook 07 checks against the runner-up trained on the full budget.")


def runner_up(rows: list[dict], recon_limit: float = RECON_LIMIT) -> dict | None:
    """The second reversible candidate under the rule: the lowest validation loss among those that reconstruct
    within `recon_limit`, other than `choose`'s pick (None when there is no other)."""
    ok = [r for r in rows if reconstructs(r, recon_limit)]
    if len(ok) < 2:
        return None
    pick = _pick(_tied(ok))
    return min((r for r in ok if r is not pick), key=lambda r: r["val_loss"])


def train_runner_up(profile: ProfileLike, results: str | Path = "results", data_dir: str | Path = "data", seed: int = 0,
                    live: bool = False) -> dict | None:
    """The screening's runner-up trained like run 2 (the profile's batch and token budget), so the choice can
    be checked at the full budget; None when the screening has not run or had no runner-up."""
    path = profile_dir(results, profile) / "screening.json"
    second = runner_up(read_json(path)["runs"]) if path.exists() else None
    if second is None:
        return None
    return train_run(RUNNER_UP, profile, results, data_dir, live=live, seed=seed, trunk=second["trunk"],
                     h=second["h"], stream=second["stream"])


def chosen_reversible(profile: ProfileLike, results: str | Path = "results") -> tuple[dict, str]:
    """The screened choice, or the default (reveuler_rev, h=1, fp32) when screening has not run."""
    path = profile_dir(results, profile) / "screening.json"
    if path.exists():
        s = read_json(path)
        return s["chosen"], s["reason"]
    return ({"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"},
            f"no screening results in {path}: using the default reveuler_rev, h=1.0, fp32")
