"""What the integrator theory notebook (01) concludes, computed from its results (its exercise checks are in
`exercises`).

* `survival`                   -- exercise 01.3: which stream brings the input back after depth 64;
* `*_lesson`                   -- what each figure shows, in words computed from the values it draws;
* `takeaways`                  -- the notebook's closing Markdown, every number computed from its results.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import pandas as pd
from torch import Tensor

from ...core.reversible import RECON_LIMIT
from ...core.streams import STREAMS
from .toy import (UNIT_ROUNDOFF, AddSubCheck, DepthStudy, EulerDefect, ParasiticMode, StepStudy, depth_slope,
                  roundtrip_error)

# --- exercise 01.3 ----------------------------------------------------------------------------------------

def survival(field: Callable, x0: Tensor, h: float, depth: int = 64,
             integrators: Sequence[str] = ("leapfrog", "reveuler")) -> pd.DataFrame:
    """RMS error of the input rebuilt after `depth` layers forward and back, per integrator and stream, with a
    verdict: bit for bit, below 1e-12, below the reconstruction limit `RECON_LIMIT`, or above it."""
    rows = []
    for name in integrators:
        for s in STREAMS:
            err = roundtrip_error(name, field, x0, h, depth, s)
            verdict = ("bit for bit" if err == 0 else "below 1e-12" if err < 1e-12
                       else f"below {RECON_LIMIT:g}" if err < RECON_LIMIT else f"above {RECON_LIMIT:g}")
            rows.append(dict(integrator=name, stream=s, error=err, verdict=verdict))
    return pd.DataFrame(rows).set_index(["integrator", "stream"])


def integrators_compared(survivors: pd.DataFrame, factor: float = 2.0) -> str:
    """One line from a `survival` table: per stream, how the two integrators' errors compare, and whether they are
    alike (the same verdict, and errors within `factor` of each other, or both exactly 0)."""
    err, verdict = survivors["error"].unstack(), survivors["verdict"].unstack()
    a, b = err.index[:2]
    parts, alike = [], True
    for s in err.columns:
        ea, eb = float(err.loc[a, s]), float(err.loc[b, s])
        same = verdict.loc[a, s] == verdict.loc[b, s] and (ea == eb == 0 or (
            min(ea, eb) > 0 and max(ea, eb) / min(ea, eb) <= factor))
        alike &= same
        parts.append(f"{s} {_size(ea)} vs {_size(eb)}")
    return (f"{a} vs {b}: " + "; ".join(parts) + ". "
            + (f"Alike on every stream (same verdict, within a factor {factor:g}): the stream, not the integrator, "
               f"sets the floor." if alike else
               f"NOT alike on every stream (verdicts differ or errors are more than a factor {factor:g} apart)."))


# --- what the figures show, in words (computed from the values they draw) ----------------------------------

def _size(err: float) -> str:
    return "exactly 0" if err == 0 else f"{err:.1e}"


def _streams(names: Sequence[str]) -> str:
    return " and ".join(names)


def roundtrip_lesson(rev_back: dict[str, list[float]]) -> str:
    """Section 1's contrast in words: how far reversible Euler, stepped forward and then through its own inverse,
    lands from its start on each stream measured (the squares and triangles of the figure)."""
    worst = {s: max(v) for s, v in rev_back.items()}
    parts = []
    for s, e in worst.items():
        u = UNIT_ROUNDOFF.get(s, 0.0)
        if e == 0:
            parts.append(f"{s}: exactly 0 at every h")
        elif u:
            parts.append(f"{s}: at most {e:.1e}, {e / u:.2g} times its unit roundoff $u = 2^{{{round(math.log2(u))}}}$ "
                         f"(rounding, not a defect of the map)")
        else:
            parts.append(f"{s}: up to {e:.1e}, NOT 0 on a stream meant to be exact")
    return "Reversible Euler, one step forward and one back through its inverse: " + "; ".join(parts) + "."


def starter_lesson(depth_studies: dict[tuple[str, str], DepthStudy]) -> str:
    """What leapfrog's first point (L = 1) shows on each stream, read off the depth study that the figure draws.

    Layer 0 is the Euler starter (x, x) -> (x, x + h f(x)). Its inverse hands the second member x back as it is but
    rebuilds the first by subtracting, (x + h f(x)) - h f(x): one (a + b) - b per element, which rounds on a float
    stream and is exact on the fixed one."""
    at1 = {s: float(st.measured[st.depths == 1][0]) for (name, s), st in depth_studies.items()
           if name == "leapfrog" and (st.depths == 1).any()}
    if not at1:
        return "The depth study did not measure leapfrog at $L = 1$."
    rounded = [s for s, e in at1.items() if e != 0]
    exact = [s for s, e in at1.items() if e == 0]
    text = ("At $L = 1$ leapfrog is only its Euler starter, $(x, x) \\mapsto (x,\\ x + hf(x))$. Its inverse hands "
            "the second member $x$ back unchanged but rebuilds the first by a subtraction, $(x + hf(x)) - hf(x)$: "
            "one $(a + b) - b$ per element, as in section 3. Measured at $L = 1$ (RMS over both members): "
            + ", ".join(f"{s} {_size(e)}" for s, e in at1.items()) + ".")
    if rounded:
        text += (f" On {_streams(rounded)} that one subtraction already rounds, so the first point is one rounding, "
                 f"not 0.")
    if exact:
        text += f" On {_streams(exact)} it gives $x$ back bit for bit."
    return text


def add_sub_lesson(one: dict[str, AddSubCheck], alike_within: float = 0.05) -> str:
    """Section 3's reading of the figure, from the pairs of similar size (|b| ~ |a|): how often float32 and
    float64 miss (alike when within `alike_within`), by how much more float64 misses less, and the fixed stream."""
    f32, f64, fixed = one["fp32"], one["fp64"], one["fixed"]
    alike = abs(f32.fail_fraction - f64.fail_fraction) <= alike_within
    text = (f"With $|b| \\sim |a|$, $(a + b) - b \\ne a$ for {f32.fail_fraction:.1%} of float32 pairs and "
            f"{f64.fail_fraction:.1%} of float64 pairs: "
            + ("about equally *often*, so the failure is about relative sizes, not precision. "
               if alike else "at different rates. "))
    if f64.rms_error > 0:
        ratio = f32.rms_error / f64.rms_error
        near = abs(math.log2(ratio) - 29) <= 2
        text += (f"float64 misses by {ratio:.2g} times less than float32 "
                 + ("(about $2^{29}$, the ratio of their unit roundoffs). " if near else
                    f"(not close to $2^{{29}}$ = {2 ** 29:.2g}, the ratio of their unit roundoffs). "))
    text += (f"The fixed-point stream misses on {fixed.fail_fraction:.1%} of pairs"
             + (": it never misses." if fixed.fail_fraction == 0 else ", although it should never miss."))
    return text


# --- takeaways --------------------------------------------------------------------------------------------

def step_size_reading(studies: dict[tuple[str, str], StepStudy]) -> str:
    """How to read the step-size figure, from its values: per integrator, at the smallest and the largest h, how far
    apart the float streams' errors are (a factor), and the fixed stream's; where the streams part ways at large h
    the reading says so (an integrator that is alike on every stream at one h need not be at another)."""
    lines = []
    for name in dict.fromkeys(n for n, _ in studies):
        floats = {s: st for (n, s), st in studies.items() if n == name and s != "fixed"}
        fixed = studies.get((name, "fixed"))
        ends = []
        for i, where in ((0, "smallest"), (-1, "largest")):
            errs = {s: float(st.measured[i]) for s, st in floats.items()}
            pos = [e for e in errs.values() if e > 0]
            spread = max(pos) / min(pos) if len(pos) == len(errs) and pos else math.inf
            h = float(next(iter(floats.values())).hs[i])
            ends.append((where, h, errs, spread))
        text = "; ".join(f"at the {w} h = {h:g}: " + ", ".join(f"{s} {_size(e)}" for s, e in errs.items())
                         + (f" (a factor {sp:.0f} apart)" if math.isfinite(sp) else "")
                         for w, h, errs, sp in ends)
        parted = ends[1][3] > 10 * max(ends[0][3], 1.0)
        lines.append(f"**{name}**: {text}." + (" The float streams part ways as h grows: a comparison of "
                                              "integrators or streams made at one h (section 4's) does not carry "
                                              "over to another." if parted else "")
                     + ("" if fixed is None else f" Fixed: {_size(float(fixed.measured.max()))} at worst."))
    return "\n".join(f"- {line}" for line in lines)


def _fixed_verdict(every_depth: bool, every_h: bool) -> str:
    """Whether the fixed stream rebuilt its input exactly in the depth study and in the step-size study."""
    if every_depth and every_h:
        return "exactly 0 at every depth and every h"
    missed = [what for what, ok in (("depth", every_depth), ("h", every_h)) if not ok]
    return f"not exactly 0 at some {' and some '.join(missed)} (a block recomputed differently from its forward)"


def takeaways(defect: EulerDefect, rev_back: dict[str, list[float]], one: dict[str, AddSubCheck],
              depth_studies: dict[tuple[str, str], DepthStudy], step_studies: dict[tuple[str, str], StepStudy],
              decay: ParasiticMode, osc: ParasiticMode, profile: str, seconds: float) -> str:
    """The notebook's closing bullets as Markdown, from the results its cells computed."""
    deep = int(max(st.depths[-1] for st in depth_studies.values()))
    lf32, lf64 = depth_studies["leapfrog", "fp32"], depth_studies["leapfrog", "fp64"]
    re32, re64 = depth_studies["reveuler", "fp32"], depth_studies["reveuler", "fp64"]
    fixed_zero = all(not depth_studies[n, "fixed"].measured.any() for n in ("leapfrog", "reveuler"))
    fixed_zero_h = all(not step_studies[n, "fixed"].measured.any() for n in ("leapfrog", "reveuler"))
    inside = sum(int(st.inside_band().sum()) for st in depth_studies.values())
    total = sum(len(st.depths) for st in depth_studies.values())
    slope = {n: depth_slope(depth_studies[n, "fp32"]) for n in ("leapfrog", "reveuler")}
    faster = min(slope.values()) > 0.6 or min(lf32.gain[-1], re32.gain[-1]) > 2
    lam = decay.lam.real
    return "\n".join([
        f"- Ordinary Euler stepped with +h then -h misses by $h^2|Jf|$: fitted slope {defect.slope:.2f}; it is not "
        f"its own inverse. Reversible Euler undoes itself to {max(rev_back['fp64']):.1e} in fp64 and to "
        f"{max(rev_back['fixed']):g} on the fixed stream.",
        f"- $(a + b) - b \\ne a$ for {one['fp32'].fail_fraction:.0%} of float32 pairs of similar size "
        f"({one['fp64'].fail_fraction:.0%} in float64, whose misses are "
        f"{one['fp32'].rms_error / one['fp64'].rms_error:.2g} times smaller; $2^{{29}}$ = {2 ** 29:.2g}), "
        f"{one['fixed'].fail_fraction:.0%} on the fixed stream.",
        f"- After {deep} layers forward and back (h = {lf32.h:g}), the rebuilt input is off by "
        f"{lf32.measured[-1]:.1e} (leapfrog) and {re32.measured[-1]:.1e} (reversible Euler) in float32, "
        f"{lf64.measured[-1]:.1e} and {re64.measured[-1]:.1e} in float64; fixed point: "
        + _fixed_verdict(fixed_zero, fixed_zero_h) + ".",
        f"- The first-order model (rounding of size ~u|x| per add, carried by the inverse walk's gain) brackets "
        f"the measurement at {inside}/{total} (depth, integrator, stream) points. Early on the error grows with "
        f"log-log slope {slope['leapfrog']:.1f} (leapfrog) / {slope['reveuler']:.1f} (reversible Euler) against "
        f"0.5 for a pure random walk; at depth {deep} the inverse walk's gain is {lf32.gain[-1]:.3g} / "
        f"{re32.gain[-1]:.3g} and the state has grown to RMS {lf32.state_rms[-1]:.2g}"
        + (", so the error outgrows $\\sqrt{L}$." if faster else ", close to the random walk."),
        f"- Leapfrog on a decay grows a sign-alternating mode by {decay.growth_fit:.4f} per step (predicted "
        f"$|\\mu_-|$ = {abs(decay.mu_par):.4f}, about $1 + h\\lambda$ = {1 + decay.h * lam:.2f}); "
        + (f"it overtakes the true solution at step {decay.wrong_sign_from}" if decay.wrong_sign_from is not None
           else "it does not overtake the true solution within the run")
        + f" (predicted {decay.crossover_predicted:.0f}). On an oscillator it "
        + ("neither grows nor decays" if abs(osc.growth_fit - 1) < 1e-3 else
           "grows" if osc.growth_fit > 1 else "decays")
        + f" (measured {osc.growth_fit:.4f} per step).",
        f"- Notebook run time: {seconds:.0f} s (profile {profile}).",
    ])
