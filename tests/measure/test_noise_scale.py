"""The gradient noise scale estimator against the exact tr(Sigma) / |G|^2 of a finite population."""
import math

import pytest
import torch
from torch import nn

from rev.core.model import GPT, GPTConfig
from rev.measure.noise_scale import gradient_noise_scale, steps_ratio, tokens_ratio


class Regression(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.lin = nn.Linear(dim, 1, dtype=torch.float64)

    def forward(self, x, y):
        return ((self.lin(x).squeeze(-1) - y) ** 2).mean()


def _population(n: int = 64, dim: int = 5, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g, dtype=torch.float64)
    y = x @ torch.randn(dim, generator=g, dtype=torch.float64) + 0.5 * torch.randn(n, generator=g, dtype=torch.float64)
    return x, y


def _exact_b_simple(model: nn.Module, x, y) -> float:
    """tr(Sigma) / |G|^2 from every example's own gradient: the population the batches are drawn from."""
    grads = []
    for i in range(len(x)):
        model.zero_grad()
        model(x[i:i + 1], y[i:i + 1]).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    model.zero_grad(set_to_none=True)
    g = torch.stack(grads)
    mean = g.mean(0)
    return float(((g - mean) ** 2).sum(1).mean() / (mean @ mean))


def test_estimate_matches_the_exact_noise_scale_of_a_finite_population():
    x, y = _population()
    model = Regression(x.shape[1])
    with torch.no_grad():                       # away from the optimum, so |G| is not tiny
        model.lin.weight.zero_()
    exact = _exact_b_simple(model, x, y)

    def draw(b, gen):                           # with replacement: a batch gradient's noise is Sigma / b exactly
        i = torch.randint(0, len(x), (b,), generator=gen)
        return x[i], y[i]

    est = gradient_noise_scale(model, draw, b_small=2, n_small=8, groups=400, seed=1)
    assert est.b_simple == pytest.approx(exact, rel=0.1)
    assert est.b_simple == pytest.approx(est.trace / est.grad_sq)      # the groups' averages, the same ratio
    assert est.b_big == 16 and all(p.grad is None for p in model.parameters())
    lo, hi = est.interval()
    assert lo < exact < hi and hi - lo < 0.5 * exact                  # 400 groups: a narrow interval round the truth
    few = gradient_noise_scale(model, draw, b_small=2, n_small=8, groups=6, seed=1)
    f_lo, f_hi = few.interval()
    assert f_lo <= few.b_simple <= f_hi and f_hi - f_lo > 2 * (hi - lo)  # six groups: wider, said so
    one = gradient_noise_scale(model, draw, b_small=2, n_small=8, groups=1, seed=1)
    assert all(math.isnan(v) for v in one.interval())                # one group: nothing to resample


def test_a_gpt_keeps_its_weights_and_gives_a_finite_positive_scale():
    cfg = GPTConfig(vocab_size=64, seq_len=16, n_layer=2, n_head=2, d_model=32, trunk="reveuler_rev")
    torch.manual_seed(0)
    model = GPT(cfg)
    before = [p.detach().clone() for p in model.parameters()]

    def draw(b, gen):
        idx = torch.randint(0, 64, (b, 17), generator=gen)
        return idx[:, :-1], idx[:, 1:]

    est = gradient_noise_scale(model, draw, b_small=2, n_small=4, groups=2)
    assert math.isfinite(est.loss) and est.trace > 0
    assert all(torch.equal(a, p) for a, p in zip(before, model.parameters()))


def test_the_trade_off_model_steps_and_tokens():
    # far below the noise scale a batch k times larger needs k times fewer steps and as many tokens
    assert steps_ratio(8, 1, 1e6) == pytest.approx(1 / 8, rel=1e-4)
    assert tokens_ratio(8, 1, 1e6) == pytest.approx(1.0, rel=1e-4)
    # far above it, as many steps and k times the tokens
    assert steps_ratio(800, 100, 1e-3) == pytest.approx(1.0, rel=1e-4)
    assert tokens_ratio(800, 100, 1e-3) == pytest.approx(8.0, rel=1e-3)


@pytest.mark.parametrize("bad", [dict(b_small=0), dict(n_small=1), dict(groups=0)])
def test_sizes_that_cannot_estimate_are_refused(bad):
    kw = dict(b_small=2, n_small=4, groups=1) | bad
    with pytest.raises(ValueError, match="need b_small"):
        gradient_noise_scale(Regression(2), lambda b, g: None, **kw)


def test_an_interval_whose_resamples_see_no_signal_reads_inf_without_a_warning():
    """Groups whose big-batch norm sometimes falls below the small batches' give resamples with |G|^2 <= 0 (inf):
    the upper end is inf, the lower a finite draw, and no nan or numpy warning from interpolating inf - inf."""
    import warnings

    from rev.measure.noise_scale import NoiseScale

    ns = NoiseScale(b_small=2, b_big=8, groups=4, grad_sq=1.0, trace=1.0, loss=1.0,
                    group_small_sq=(2.0, 2.0, 2.0, 2.0), group_big_sq=(1.5, 0.1, 1.4, 0.2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = ns.interval(resamples=400)
    assert hi == float("inf") and 0 < lo < float("inf")
