"""Toy dynamics for the integrator theory notebook (01), and the measurements it shows.

Everything here drives the trunk integrators of `rev.core.integrators` on small vector fields, through the same
`step`/`inverse` code and the same streams (`rev.core.streams`) a GPT trunk uses. Nothing re-implements an
integrator; this module only chooses fields, runs them, and measures:

* `walk_forward` / `walk_back` -- `depth` steps of a toy field forward, and the inverse walk back down,
* `roundtrip_error`       -- forward `depth` steps, then inverse `depth` steps: how far from the input?
* `error_budget`          -- a first-order model of that error (rounding x linearised amplification),
* `parasitic_mode`        -- leapfrog's sign-alternating mode on dx/dt = -lam x, measured and predicted,
* `euler_defect`          -- ordinary Euler stepped with +h then -h: the O(h^2) defect,
* `add_sub_check`         -- how often, and by how much, `(a + b) - b != a` on each stream,

Figures and the explorer live in `rev.chapters.integrators.toy_plots`; the notebook's exercise checks in
`rev.chapters.integrators.exercises`.

The toy tensors are tiny (a few hundred points in a few dimensions), so all loops run on one thread:
with more, every small op pays thread-pool synchronisation and gets slower, not faster.
"""
from __future__ import annotations

import cmath
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from ...base.device import single_thread
from ...core.integrators import Integrator, State, get_integrator, integrate, invert
from ...core.streams import get_stream

Field = Callable[[Tensor], Tensor]

# Dtype the field is evaluated in for each stream: a float32 stream goes with a float32 model; the fixed
# stream decodes its grid values to float64, which holds them exactly.
COMPUTE_DTYPE: dict[str, torch.dtype] = {"fp32": torch.float32, "fp64": torch.float64, "fixed": torch.float64}

# Unit roundoff u (half the spacing of floats just above 1): the relative error bound of one rounded add.
# The fixed stream's add and subtract are integer operations, so they never round.
UNIT_ROUNDOFF: dict[str, float] = {"fp32": 2.0 ** -24, "fp64": 2.0 ** -53, "fixed": 0.0}


# --- small helpers ----------------------------------------------------------------------------------------

def _as_integrator(integrator: str | Integrator) -> Integrator:
    return get_integrator(integrator) if isinstance(integrator, str) else integrator


def validate_walk(h: float, depth: int, stream: str) -> None:
    """Refuse a step size, depth or stream name that no walk could use, before any work is done."""
    if not h > 0:
        raise ValueError(f"step size h must be > 0, got {h}")
    if int(depth) != depth or depth < 1:
        raise ValueError(f"depth must be a positive integer, got {depth}")
    get_stream(stream)  # raises ValueError naming the valid streams


def _decoded(state: Sequence[Tensor], stream: str) -> Tensor:
    """All components of a stream state, decoded to float64 and stacked: (n_components, batch, dim)."""
    st = get_stream(stream)
    return torch.stack([st.decode(s, torch.float64) for s in state])


def _rms(t: Tensor) -> float:
    return float(t.pow(2).mean().sqrt())


# --- toy fields -------------------------------------------------------------------------------------------

class TanhField:
    """f(x) = tanh(W x), applied row-wise to a batch x of shape (batch, dim), in x's dtype.

    Near the origin f(x) ~ W x, so the eigenvalues of W set the local growth rates; far from it tanh
    saturates, |f| <= 1, and the flow slows down -- a small stand-in for a normalised residual block.
    """

    def __init__(self, W: Tensor):
        self.W = W.detach().to(torch.float64)
        self._cast: dict[torch.dtype, Tensor] = {}

    @property
    def dim(self) -> int:
        return self.W.shape[0]

    def growth_rate(self) -> float:
        """Largest real part of W's eigenvalues: the fastest exponential growth rate at the origin."""
        return float(torch.linalg.eigvals(self.W).real.max())

    def __call__(self, x: Tensor) -> Tensor:
        W = self._cast.get(x.dtype)
        if W is None:  # cast once per dtype so that every call is bit-identical and cheap
            W = self._cast[x.dtype] = self.W.to(x.dtype).T.contiguous()
        return torch.tanh(x @ W)


def make_tanh_field(dim: int = 8, expansion: float = 0.1, rotation: float = 1.0, seed: int = 0) -> TanhField:
    """A mildly expanding nonlinear field: W = rotation * A + expansion * I with A random antisymmetric.

    The eigenvalues of W are expansion + i*omega_k (|omega_k| of order `rotation`): trajectories spiral
    outward at rate `expansion` until tanh saturates.
    """
    if dim < 2:
        raise ValueError(f"dim must be >= 2, got {dim}")
    g = torch.Generator().manual_seed(seed)
    M = torch.randn(dim, dim, generator=g, dtype=torch.float64)
    A = (M - M.T) / math.sqrt(2 * dim)
    return TanhField(rotation * A + expansion * torch.eye(dim, dtype=torch.float64))


def initial_points(n: int, dim: int, seed: int = 0) -> Tensor:
    """`n` starting points in `dim` dimensions, standard normal, float64."""
    g = torch.Generator().manual_seed(seed + 1)
    return torch.randn(n, dim, generator=g, dtype=torch.float64)


def linear_field(lam: complex) -> Field:
    """dw/dt = -lam * w for complex w = x + i y, written as a real 2-D field on (x, y).

    Real `lam` > 0 is decay; `lam = 1j * omega` is the harmonic oscillator.
    """
    a, b = float(complex(lam).real), float(complex(lam).imag)
    M = torch.tensor([[-a, b], [-b, -a]], dtype=torch.float64)

    def f(v: Tensor) -> Tensor:
        return v @ M.to(v.dtype).T
    return f


# --- forward, then inverse --------------------------------------------------------------------------------
# Named `walk_*` to keep them apart from rev.core.reversible's `run_forward` / `run_inverse`, which step GPT
# blocks on stream storage; these walk a toy field from a float input and return every state.

def walk_forward(integrator: str | Integrator, field: Field, x0: Tensor, h: float, depth: int,
                 stream: str) -> list[State]:
    """All stream states of `depth` steps from `x0` (x0 is cast to the stream's compute dtype first)."""
    validate_walk(h, depth, stream)
    integ = _as_integrator(integrator)
    with single_thread():
        return integrate(integ, x0.to(COMPUTE_DTYPE[stream]), field, h, depth, stream)


def walk_back(integrator: str | Integrator, field: Field, top: State, h: float, depth: int,
              stream: str) -> list[State]:
    """States of the inverse walk from `top` down to layer 0 (returned top-first)."""
    validate_walk(h, depth, stream)
    integ = _as_integrator(integrator)
    with single_thread():
        return invert(integ, top, field, h, depth, stream, COMPUTE_DTYPE[stream])


def roundtrip_error(integrator: str | Integrator, field: Field, x0: Tensor, h: float, depth: int,
                    stream: str) -> float:
    """RMS error of the input state rebuilt by walking `depth` steps forward and then back.

    Compared against the stream's own copy of the input, so 0.0 means every element came back bit for bit.
    """
    states = walk_forward(integrator, field, x0, h, depth, stream)
    back = walk_back(integrator, field, states[-1], h, depth, stream)
    return _rms(_decoded(back[-1], stream) - _decoded(states[0], stream))


def error_profile(integrator: str | Integrator, field: Field, x0: Tensor, h: float, depth: int,
                  stream: str) -> np.ndarray:
    """RMS error of every layer's state during one inverse walk from `depth`: entry l is layer l."""
    states = walk_forward(integrator, field, x0, h, depth, stream)
    back = walk_back(integrator, field, states[-1], h, depth, stream)[::-1]
    return np.array([_rms(_decoded(b, stream) - _decoded(s, stream)) for b, s in zip(back, states)])


def local_errors(integrator: str | Integrator, field: Field, states: list[State], h: float,
                 stream: str) -> list[Tensor]:
    """What one inverse step misses by, applied to the exact stored states: entry l is layer l+1 -> l.

    This is the per-layer `((a + b) - b) - a` of the stream, before any error has been carried along.
    """
    integ = _as_integrator(integrator)
    st = get_stream(stream)
    dtype = COMPUTE_DTYPE[stream]

    def call(name: str, s: Tensor) -> Tensor:
        return field(st.decode(s, dtype))

    out = []
    with single_thread():
        for layer in range(len(states) - 1):
            rebuilt = integ.inverse(states[layer + 1], call, h, layer, st.sub)
            out.append(_decoded(rebuilt, stream) - _decoded(states[layer], stream))
    return out


def spacing(values: Tensor, stream: str) -> Tensor:
    """Gap between each value and the next representable one on `stream` (0 for the exact fixed stream)."""
    if stream == "fixed":
        return torch.zeros_like(values, dtype=torch.float64)
    v = values.detach().abs().to(COMPUTE_DTYPE[stream])
    return (torch.nextafter(v, torch.full_like(v, math.inf)) - v).to(torch.float64)


@dataclass
class ErrorBudget:
    """Per-layer contributions (mean squared error per input entry) to the round-trip error at the input.

    Entry l belongs to the inverse step from layer l+1 to layer l; in this model the input error after
    inverting from depth L is sqrt(sum of the first L entries).
    """

    lower: np.ndarray   # only the roundings that survive on exact inputs (`local_errors`)
    upper: np.ndarray   # every add and every subtract rounding independently
    gain: np.ndarray    # RMS gain of a random perturbation of layer l's state on its way down to the input


def error_budget(integrator: str | Integrator, field: Field, states: list[State], h: float, stream: str,
                 seed: int = 0, n_probes: int = 16) -> ErrorBudget:
    """Both ends of the first-order error model, each carried to the input by the linearised inverse walk.

    To first order the input error is e = sum_l P_l eps_l: eps_l is what step l+1 -> l gets wrong, P_l the
    Jacobian of the rest of the walk down to layer 0. Independent zero-mean eps_l give
    E|e|^2 = sum_l E|P_l eps_l|^2 -- a random walk whose steps are stretched by P_l.
    The size of eps_l depends on cancellation. The walk subtracts b from the stored fl(a + b); on exact
    inputs the subtract's rounding mostly undoes the add's, leaving only `local_errors` (lower end). Once
    the walk carries error, b is slightly off and the two roundings no longer cancel: each is uniform over
    half a spacing either side, variance spacing^2 / 12, and they add (upper end).
    One reverse-mode pass gives P^T r for every layer at once (r a random probe; E[(r . P eps)^2] is
    E|P eps|^2), so the whole curve costs one extra walk rather than `depth` of them.
    The probe average is itself an estimate: with 2 probes its spread at shallow depth was wide enough to
    put a fair measurement outside the band; 16 probes narrow it about threefold for a fraction of a second.
    """
    integ = _as_integrator(integrator)
    fp64 = get_stream("fp64")
    depth = len(states) - 1
    local = local_errors(integ, field, states, h, stream)
    sub_taps: list[tuple[int, Tensor, Tensor]] = []  # (layer, tap, variance of its two roundings)
    state_taps: list[Tensor] = []
    now = [depth - 1]  # the layer the walk is at, read by `sub` when it records a tap

    def sub(s: Tensor, c: Tensor, coef: float) -> Tensor:
        out = fp64.sub(s, c, coef)
        tap = torch.zeros_like(out, requires_grad=True)  # a zero added here: its gradient is P^T r
        sub_taps.append((now[0], tap, (spacing(s, stream) ** 2 + spacing(out, stream) ** 2) / 12))
        return out + tap

    def call(name: str, s: Tensor) -> Tensor:
        return field(s)

    g = torch.Generator().manual_seed(seed + 7)
    lower, upper, gain = np.zeros(depth), np.zeros(depth), np.zeros(depth)
    with single_thread(), torch.enable_grad():
        state: State = tuple(_decoded(states[-1], stream).unbind(0))
        for layer in reversed(range(depth)):
            now[0] = layer
            state = integ.inverse(state, call, h, layer, sub)
            tap = torch.zeros((len(state),) + tuple(state[0].shape), dtype=torch.float64, requires_grad=True)
            state_taps.append(tap)  # appended top layer first
            state = tuple(s + t for s, t in zip(state, tap))
        out = torch.stack(state)
        # the bookkeeping is batched over taps: one tensor op per probe instead of one per tap
        sub_layer = np.array([layer for layer, _, _ in sub_taps], dtype=int)
        sub_var = torch.stack([v for _, _, v in sub_taps])
        local_top_first = torch.stack(local[::-1])
        taps = [t for _, t, _ in sub_taps] + state_taps
        for _ in range(n_probes):
            probe = torch.randn(out.shape, generator=g, dtype=torch.float64)
            grads = torch.autograd.grad((out * probe).sum(), taps, retain_graph=True, materialize_grads=True)
            sub_grads = torch.stack(grads[:len(sub_taps)])
            np.add.at(upper, sub_layer, (sub_grads ** 2 * sub_var).sum(dim=-1).mean(dim=-1).numpy())
            state_grads = torch.stack(grads[len(sub_taps):])  # (layer top first, component, batch, dim)
            lower += (state_grads * local_top_first).sum(dim=(1, 3)).pow(2).mean(dim=1).numpy()[::-1]
            gain += state_grads.pow(2).sum(dim=(1, 3)).mean(dim=1).numpy()[::-1]
    # E|P^T r|^2 = ||P||_F^2; dividing by the entries on both sides gives the RMS gain (1 for P = I)
    per_entry = n_probes * out.shape[0] * out.shape[2]  # probes x components x dim
    return ErrorBudget(lower / per_entry, upper / per_entry, np.sqrt(gain / per_entry))


@dataclass
class DepthStudy:
    """Measured round-trip error against depth for one integrator and stream, with the model's band."""

    integrator: str
    stream: str
    h: float
    depths: np.ndarray       # depths where the round trip was measured
    measured: np.ndarray     # RMS input error after forward + inverse, one per depth
    lower: np.ndarray        # model, lower end, for every depth 1..max
    upper: np.ndarray        # model, upper end, for every depth 1..max
    gain: np.ndarray         # RMS gain from layer l down to the input, l = 0..max-1
    state_rms: np.ndarray    # RMS size of the stream state at each layer 0..max

    def band_at(self, depths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        idx = np.asarray(depths) - 1
        return self.lower[idx], self.upper[idx]

    def inside_band(self, slack: float = 1.25) -> np.ndarray:
        """Per measured depth: is the measurement inside the model band (widened by `slack` for probe noise)?"""
        lo, hi = self.band_at(self.depths)
        return (self.measured >= lo / slack) & (self.measured <= hi * slack)


def model_band(integrator: str | Integrator, field: Field, x0: Tensor, h: float, depth: int, stream: str,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray, ErrorBudget, list[State]]:
    """Lower and upper model error for every depth 1..`depth`, the budget, and the forward states."""
    states = walk_forward(integrator, field, x0, h, depth, stream)
    budget = error_budget(integrator, field, states, h, stream, seed)
    return np.sqrt(np.cumsum(budget.lower)), np.sqrt(np.cumsum(budget.upper)), budget, states


def depth_study(integrator: str, field: Field, x0: Tensor, h: float, depths: Sequence[int], stream: str,
                seed: int = 0) -> DepthStudy:
    """Round-trip error at each depth in `depths`, next to the model band."""
    depths = np.array(sorted({int(d) for d in depths}))
    lower, upper, budget, states = model_band(integrator, field, x0, h, int(depths[-1]), stream, seed)
    # the forward walk to depth d is the first d steps of the longest one, so only the inverse walks differ
    start = _decoded(states[0], stream)
    measured = np.array([_rms(_decoded(walk_back(integrator, field, states[d], h, d, stream)[-1], stream) - start)
                         for d in depths])
    state_rms = np.array([_rms(_decoded(s, stream)) for s in states])
    return DepthStudy(integrator, stream, h, depths, measured, lower, upper, budget.gain, state_rms)


@dataclass
class StepStudy:
    """Measured round-trip error against step size h at a fixed depth, with the model band."""

    integrator: str
    stream: str
    depth: int
    hs: np.ndarray
    measured: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def step_study(integrator: str, field: Field, x0: Tensor, hs: Sequence[float], depth: int, stream: str,
               seed: int = 0) -> StepStudy:
    """Round-trip error for each h in `hs` at fixed `depth`, next to the model band."""
    hs = np.array(sorted(float(h) for h in hs))
    measured, lower, upper = [], [], []
    for h in hs:
        lo, hi, _, states = model_band(integrator, field, x0, h, depth, stream, seed)
        lower.append(lo[-1])
        upper.append(hi[-1])
        back = walk_back(integrator, field, states[-1], h, depth, stream)
        measured.append(_rms(_decoded(back[-1], stream) - _decoded(states[0], stream)))
    return StepStudy(integrator, stream, depth, hs, np.array(measured), np.array(lower), np.array(upper))


def fit_loglog_slope(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Least-squares slope and intercept of log10(y) against log10(x), over the points with y > 0."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = y > 0
    if keep.sum() < 2:
        raise ValueError("need at least two positive points to fit a slope")
    slope, intercept = np.polyfit(np.log10(x[keep]), np.log10(y[keep]), 1)
    return float(slope), float(intercept)


def depth_slope(study: DepthStudy, lo: int = 2, hi: int = 64) -> float:
    """Log-log slope of the measured error against depth for lo <= L <= hi (0.5 is a pure random walk)."""
    keep = (study.depths >= lo) & (study.depths <= hi)
    return fit_loglog_slope(study.depths[keep], study.measured[keep])[0]


# --- leapfrog's parasitic mode ----------------------------------------------------------------------------

def leapfrog_roots(h: float, lam: complex) -> tuple[complex, complex]:
    """Roots of mu^2 + 2 h lam mu - 1 = 0, leapfrog's characteristic equation on dx/dt = -lam x.

    Returns (physical, parasitic) = (-h lam + sqrt(1 + h^2 lam^2), -h lam - sqrt(1 + h^2 lam^2)).
    The physical root is ~ exp(-h lam); the parasitic one is ~ -exp(+h lam): it flips sign every step,
    and since the two roots multiply to -1, whatever one loses in size the other gains.
    """
    if not h > 0:
        raise ValueError(f"step size h must be > 0, got {h}")
    s = cmath.sqrt(1 + (h * lam) ** 2)
    return -h * lam + s, -h * lam - s


@dataclass
class ParasiticMode:
    """Leapfrog on dw/dt = -lam w from w0 = 1: the run, its two-mode prediction, and the parasitic part."""

    lam: complex
    h: float
    n: np.ndarray               # step index 0..n_steps
    w: np.ndarray               # leapfrog trajectory (complex)
    exact: np.ndarray           # exp(-lam n h)
    predicted: np.ndarray       # A mu_phys^n + B mu_par^n, fitted to w0 and the Euler starter w1
    parasitic: np.ndarray       # measured parasitic amplitude |w[n+1] - mu_phys w[n]| / |mu_par - mu_phys|
    parasitic_predicted: np.ndarray  # |B| |mu_par|^n
    mu_phys: complex
    mu_par: complex
    measured_ratio: complex     # median of successive parasitic components p[n+1] / p[n]
    growth_fit: float           # per-step growth of |p[n]| fitted on a log scale
    sign_flips: float           # fraction of steps where the real parasitic component changes sign
    crossover_predicted: float  # step where |B| |mu_par|^n overtakes |A| |mu_phys|^n (inf if never)
    wrong_sign_from: int | None  # first step where leapfrog's (real) answer has the opposite sign to exp(-lam t)


def parasitic_mode(lam: complex, h: float, n_steps: int, stream: str = "fp64") -> ParasiticMode:
    """Run leapfrog (the `rev.core.integrators` one) on dw/dt = -lam w and split the run into its two modes.

    Leapfrog's layer 0 is one Euler step, w1 = (1 - h lam) w0, which differs from the physical root's
    w0 mu_phys by O(h^2): that small mismatch is the seed of the parasitic mode.
    """
    validate_walk(h, n_steps, stream)
    if n_steps < 3:
        raise ValueError("need at least 3 steps to see the parasitic mode")
    states = walk_forward("leapfrog", linear_field(lam), torch.tensor([[1.0, 0.0]]), h, n_steps, stream)
    xy = np.array([_decoded(s, stream)[1, 0].numpy() for s in states])
    w = xy[:, 0] + 1j * xy[:, 1]
    mu_p, mu_q = leapfrog_roots(h, lam)
    n = np.arange(n_steps + 1)
    # w_n = A mu_p^n + B mu_q^n with A + B = w0 and A mu_p + B mu_q = w1
    w0, w1 = w[0], w[1]
    B = (w1 - mu_p * w0) / (mu_q - mu_p)
    A = w0 - B
    predicted = A * mu_p ** n + B * mu_q ** n
    # w[n+1] - mu_p w[n] kills the physical mode and leaves B (mu_q - mu_p) mu_q^n
    p = w[1:] - mu_p * w[:-1]
    parasitic = np.abs(p) / abs(mu_q - mu_p)
    ratio = complex(np.median((p[1:] / p[:-1]).real) + 1j * np.median((p[1:] / p[:-1]).imag))
    slope = np.polyfit(n[:-1], np.log(np.abs(p)), 1)[0]
    flips = float(np.mean(np.sign(p[1:].real) != np.sign(p[:-1].real)))
    # |A| |mu_p|^n = |B| |mu_q|^n  <=>  n = ln(|A| / |B|) / ln(|mu_q| / |mu_p|)
    spread = math.log(abs(mu_q) / abs(mu_p))
    crossover = math.log(abs(A) / abs(B)) / spread if spread > 1e-12 else math.inf
    exact = np.exp(-complex(lam) * n * h)
    wrong = np.nonzero(w.real * exact.real < 0)[0]
    return ParasiticMode(complex(lam), h, n, w, exact, predicted, parasitic, np.abs(B) * np.abs(mu_q) ** n[:-1],
                         mu_p, mu_q, ratio, float(np.exp(slope)), flips, crossover,
                         int(wrong[0]) if len(wrong) else None)


# --- ordinary Euler is not its own inverse ----------------------------------------------------------------

@dataclass
class EulerDefect:
    """Euler stepped with +h and then -h: how far from the start, against h."""

    hs: np.ndarray
    defect: np.ndarray      # RMS of x_back - x
    predicted: np.ndarray   # RMS of -h^2 J(x) f(x), the leading term
    slope: float            # fitted log-log slope of defect against h
    intercept: float


def euler_defect(field: Field, x0: Tensor, hs: Sequence[float], stream: str = "fp64") -> EulerDefect:
    """One `rev.core.integrators.Euler` step with +h, then one with -h; defect = x_back - x.

    x1 = x + h f(x), x_back = x1 - h f(x1) = x - h (f(x1) - f(x)) = x - h^2 J f + O(h^3): slope 2.
    """
    st = get_stream(stream)
    dtype = COMPUTE_DTYPE[stream]
    euler = get_integrator("euler")
    hs = np.array(sorted(float(h) for h in hs))
    if (hs <= 0).any():
        raise ValueError("every h must be > 0 (the backward step uses -h itself)")
    x = x0.to(dtype)

    def call(name: str, s: Tensor) -> Tensor:
        return field(st.decode(s, dtype))

    with single_thread():
        start = euler.init(st.encode(x))
        Jf = torch.func.jvp(field, (x.to(torch.float64),), (field(x.to(torch.float64)),))[1]
        defect, predicted = [], []
        for h in hs:
            there = euler.step(start, call, h, 0, st.add)
            back = euler.step(there, call, -h, 0, st.add)
            defect.append(_rms(_decoded(back, stream) - _decoded(start, stream)))
            predicted.append(h * h * _rms(Jf))
    slope, intercept = fit_loglog_slope(hs, defect)
    return EulerDefect(hs, np.array(defect), np.array(predicted), slope, intercept)


# --- (a + b) - b != a -------------------------------------------------------------------------------------

def _add_sub(stream: str, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """(stream's copy of a, stream's (a + b) - b), both decoded to float64."""
    st = get_stream(stream)
    dtype = COMPUTE_DTYPE[stream]
    s = st.encode(a.to(dtype))
    c = b.to(dtype)
    back = st.sub(st.add(s, c, 1.0), c, 1.0)
    return st.decode(s, torch.float64), st.decode(back, torch.float64)


@dataclass
class AddSubCheck:
    """How `(a + b) - b` compares with `a` on one stream, over many random pairs."""

    stream: str
    ratio: float          # size of b relative to a
    fail_fraction: float  # fraction of pairs where (a + b) - b != a
    rms_error: float      # RMS of ((a + b) - b) - a over all pairs


def add_sub_check(stream: str, ratio: float = 1.0, n_pairs: int = 100_000, seed: int = 0) -> AddSubCheck:
    """Add b to the stream's a and subtract it again, for a ~ N(0,1) and b ~ ratio * N(0,1)."""
    if n_pairs < 1 or not ratio > 0:
        raise ValueError("need n_pairs >= 1 and ratio > 0")
    g = torch.Generator().manual_seed(seed + 11)
    a = torch.randn(n_pairs, generator=g, dtype=torch.float64)
    b = ratio * torch.randn(n_pairs, generator=g, dtype=torch.float64)
    with single_thread():
        orig, back = _add_sub(stream, a, b)
    return AddSubCheck(stream, float(ratio), float((orig != back).double().mean()), _rms(back - orig))


def add_sub_example(stream: str = "fp32", seed: int = 0, n_pairs: int = 1000) -> tuple[float, float, float] | None:
    """The first random pair (a, b) of comparable size where (a + b) - b != a: (a, b, (a + b) - b)."""
    g = torch.Generator().manual_seed(seed + 13)
    a = torch.randn(n_pairs, generator=g, dtype=torch.float64)
    b = torch.randn(n_pairs, generator=g, dtype=torch.float64)
    orig, back = _add_sub(stream, a, b)
    bad = torch.nonzero(orig != back).flatten()
    if len(bad) == 0:
        return None
    i = int(bad[0])
    b_stream = float(b[i].to(COMPUTE_DTYPE[stream]))
    return float(orig[i]), b_stream, float(back[i])
