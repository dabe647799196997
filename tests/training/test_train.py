"""The training engine on the smoke profile: learning, exact resume, LR schedule, max batch, DDP, failures."""
import csv
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rev.measure.maxbatch import (DepthProbe, MemoryLine, find_max_batch, find_max_depth, largest_fitting,
                                  measure_memory_line)
from rev.core.model import GPT, TRUNKS
from rev.base.profiles import get_profile
from rev.core.optim import lr_at
from rev.data.tokens import load
from rev.training.loop import TrainConfig, TrainingDiverged, eval_sample, evaluate, plan_run, train
from rev.training.checkpoint import load_model

SMOKE = get_profile("smoke")
ONE_BATCH = SMOKE.batch_size * SMOKE.seq_len


@pytest.fixture(scope="module")
def data_dir(smoke_data) -> Path:
    return smoke_data


def _cfg(data_dir: Path, out: Path, **kw) -> TrainConfig:
    base = dict(profile="smoke", data_dir=data_dir, out_dir=out, progress=False)
    return TrainConfig(**{**base, **kw})


def _losses(run: Path) -> list[float]:
    with open(run / "log.csv") as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]


@pytest.mark.parametrize("trunk", list(TRUNKS))
def test_loss_falls_for_every_trunk(trunk, data_dir, tmp_path):
    s = train(_cfg(data_dir, tmp_path / trunk, trunk=trunk, train_tokens=40 * ONE_BATCH))
    losses = _losses(tmp_path / trunk)
    assert len(losses) == 40 == s["steps"]
    assert sum(losses[-5:]) / 5 < losses[0] - 0.5, losses[::5]
    assert math.isfinite(s["final_val_loss"]) and s["peak_memory_bytes"] > 0
    assert (s["reconstruction_error"] is not None) == TRUNKS[trunk][0].startswith(("leap", "reveuler"))


def test_resume_after_kill_is_exact(data_dir, tmp_path):
    kw = dict(trunk="reveuler_rev", train_tokens=30 * ONE_BATCH, ckpt_every=10)
    train(_cfg(data_dir, tmp_path / "whole", **kw))
    stopped = train(_cfg(data_dir, tmp_path / "cut", stop_after=17, **kw))
    assert stopped["stopped_early"] and not (tmp_path / "cut" / "summary.json").exists()
    train(_cfg(data_dir, tmp_path / "cut", resume=True, **kw))
    a, b = load_model(tmp_path / "whole"), load_model(tmp_path / "cut")
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), name
    assert _losses(tmp_path / "whole") == _losses(tmp_path / "cut")


def _evaluated(data_dir: Path, batch: int, eval_tokens: int = SMOKE.eval_tokens) -> float:
    torch.manual_seed(0)
    model = GPT(SMOKE.model_config("residual"))
    plan = plan_run(_cfg(data_dir, None, batch_size=batch, eval_tokens=eval_tokens))
    return evaluate(model, load(data_dir / SMOKE.data_name), plan, torch.device("cpu"), None)


def test_every_run_is_evaluated_on_one_fixed_sample_whatever_its_batch(data_dir):
    data = load(data_dir / SMOKE.data_name)
    x, _ = eval_sample(data, SMOKE.eval_tokens, SMOKE.seq_len)
    assert x.shape == (SMOKE.eval_tokens // SMOKE.seq_len, SMOKE.seq_len)
    assert torch.equal(x, eval_sample(data, SMOKE.eval_tokens, SMOKE.seq_len)[0])
    # the run's batch only cuts the sample into pieces (3 leaves a shorter last piece, weighted by its tokens):
    # the loss is the same to rounding; a sample drawn per batch, or the pieces' unweighted mean, is not
    whole = _evaluated(data_dir, batch=16)
    for batch in (1, 3, 8, 40):
        assert _evaluated(data_dir, batch) == pytest.approx(whole, rel=1e-6), batch
    assert _evaluated(data_dir, 16, eval_tokens=SMOKE.eval_tokens // 2) != pytest.approx(whole, rel=1e-4)


def test_evaluation_at_the_profiles_batch_is_the_per_batch_mean_it_was(data_dir):
    """At the profile's batch (a power of two) the fixed sample is the batches the old evaluation drew, and the
    weighted mean rounds as their plain mean did: smoke and cpu runs at their profile's batch keep their numbers."""
    torch.manual_seed(0)
    model = GPT(SMOKE.model_config("residual"))
    data = load(data_dir / SMOKE.data_name)
    plan = plan_run(_cfg(data_dir, None))
    gen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        old = torch.stack([model(*data.get_batch("val", SMOKE.batch_size, SMOKE.seq_len, gen)).float()
                           for _ in range(SMOKE.eval_tokens // ONE_BATCH)]).mean()
    assert evaluate(model, data, plan, torch.device("cpu"), None) == float(old)


def test_lr_at_step_is_a_function_of_the_step_alone(data_dir, tmp_path):
    plan = plan_run(_cfg(data_dir, tmp_path, train_tokens=50 * ONE_BATCH))
    args = (plan.steps, plan.warmup_steps, plan.lr, plan.min_lr)
    reached = [lr_at(n, *args) for n in range(plan.steps)]
    assert reached[plan.steps // 2] == lr_at(plan.steps // 2, *args)
    assert max(reached) <= plan.lr and reached[-1] >= plan.min_lr
    assert reached[plan.warmup_steps - 1] == pytest.approx(plan.lr)
    train(_cfg(data_dir, tmp_path / "run", train_tokens=12 * ONE_BATCH, ckpt_every=100))
    with open(tmp_path / "run" / "log.csv") as f:
        rows = list(csv.DictReader(f))
    plan = plan_run(_cfg(data_dir, tmp_path / "run", train_tokens=12 * ONE_BATCH))
    for r in rows:
        assert float(r["lr"]) == lr_at(int(r["step"]), plan.steps, plan.warmup_steps, plan.lr, plan.min_lr)


def test_max_batch_is_bracketed_by_measured_probes():
    cfg = SMOKE.model_config("residual")
    res = find_max_batch(cfg, budget_bytes=12 * 2**20, device="cpu", progress=False)
    fits = {p.batch: p for p in res.probes}
    assert fits[res.batch].fits and fits[res.batch].peak_bytes <= res.budget_bytes
    assert not fits[res.batch + 1].fits and fits[res.batch + 1].peak_bytes > res.budget_bytes
    assert all(p.fits == (p.batch <= res.batch) for p in res.probes)
    rev = find_max_batch(SMOKE.model_config("reveuler_rev"), budget_bytes=12 * 2**20, device="cpu",
                         progress=False)
    assert rev.batch > res.batch



def test_max_depth_probes_hold_layer_counts():
    cfg = SMOKE.model_config("reveuler_rev")
    res = find_max_depth(cfg, batch=4, budget_bytes=12 * 2**20, max_layers=6, device="cpu", progress=False)
    assert res.batch == 4 and 1 <= res.n_layer <= 6
    assert all(isinstance(p, DepthProbe) and p.fits == (p.n_layer <= res.n_layer) for p in res.probes)
    assert res.to_dict()["n_layer"] == res.n_layer


def test_memory_line_predicts_the_measured_max_batch():
    cfg = SMOKE.model_config("residual")
    line = measure_memory_line(cfg, 2, 8, device="cpu")
    assert line.static_bytes > 0 and line.bytes_per_sequence > 0
    found = find_max_batch(cfg, budget_bytes=12 * 2**20, device="cpu", progress=False).batch
    assert abs(line.max_batch(12 * 2**20) - found) <= max(2, found // 4)
    assert MemoryLine.through(2, 1000, 4, 1600).max_batch(3400) == 10  # a budget exactly at a peak fits


@pytest.mark.parametrize("top", [0, 1, 7, 8, 9, 100])
def test_largest_fitting_finds_the_threshold(top):
    assert largest_fitting(lambda n: n <= top, 8, 100) == top

@pytest.mark.parametrize("gallop", [False, True])
def test_a_search_makes_at_most_its_probes_and_answers_a_size_that_fitted(gallop):
    top = 37
    tried = []
    fits = lambda n: tried.append(n) or n <= top  # noqa: E731
    assert largest_fitting(fits, 8, 1000, gallop) == top
    needed = len(tried)
    for cap in (needed, needed + 5):     # enough probes: the same answer, in the same probes
        tried.clear()
        assert largest_fitting(fits, 8, 1000, gallop, max_probes=cap) == top and len(tried) == needed
    for cap in (needed - 1, 3):          # fewer: the largest size that fitted among those tried, never more
        tried.clear()
        found = largest_fitting(fits, 8, 1000, gallop, max_probes=cap)
        assert len(tried) == cap and found == max(n for n in tried if n <= top) <= top
    assert found < top                   # 3 probes do not reach it
    with pytest.raises(ValueError, match="max_probes"):
        largest_fitting(fits, 8, 1000, max_probes=0)


def test_ddp_two_processes_match_one_process(data_dir, tmp_path, force_cpu):
    # on the CPU (gloo) wherever the suite runs: two processes on a machine with one GPU would be refused
    common = ["--profile", "smoke", "--trunk", "reveuler_rev", "--data-dir", str(data_dir), "--no-progress",
              "--tokens", str(6 * ONE_BATCH), "--eval-every", "3", "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517",
                    "-m", "rev", "train", "--out", str(tmp_path / "ddp"), *common], check=True, env=env,
                   capture_output=True, timeout=240)
    subprocess.run([sys.executable, "-m", "rev", "train", "--out", str(tmp_path / "one"), *common], check=True,
                   env=env, capture_output=True, timeout=240)
    a, b = load_model(tmp_path / "ddp"), load_model(tmp_path / "one")
    torch.manual_seed(0)
    init = GPT(a.cfg).state_dict()
    moved = max((p - p0).abs().max().item() for p, p0 in zip(b.state_dict().values(), init.values()))
    assert moved > 1e-3  # the runs really trained, so the tolerance below is tight by comparison
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        # fp32 all-reduce sums in another order than one process does; Adam can turn such 1e-8 gradient
        # differences on near-zero gradients into ~1e-6 weight differences, three orders below `moved`
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(data_dir, tmp_path):
    def poison(step, row, model):
        if step == 6:
            with torch.no_grad():
                model.trunk.blocks[0].mlp.fc.weight.fill_(float("nan"))

    out = tmp_path / "nan"
    with pytest.raises(TrainingDiverged, match="loss became nan at step 7"):
        train(_cfg(data_dir, out, train_tokens=20 * ONE_BATCH, ckpt_every=5, callback=poison))
    good = torch.load(out / "ckpt.pt", weights_only=True)
    assert good["step"] == 5 and all(torch.isfinite(v).all() for v in good["model"].values())
    assert not (out / "summary.json").exists()


@pytest.mark.parametrize("kw, match", [
    (dict(profile="huge"), "unknown profile"),
    (dict(train_tokens=ONE_BATCH - 1), "less than one batch"),
    (dict(batch_size=0), "batch_size must be >= 1"),
    (dict(trunk="resnet"), "unknown trunk"),
    (dict(resume=True), "no checkpoint"),
])
def test_bad_arguments_write_nothing(kw, match, data_dir, tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ValueError, match=match):
        train(_cfg(data_dir, out, **kw))
    assert not out.exists()


def test_resume_from_foreign_checkpoint_is_refused(data_dir, tmp_path):
    out = tmp_path / "run"
    train(_cfg(data_dir, out, trunk="residual", train_tokens=2 * ONE_BATCH))
    before = (out / "log.csv").read_text()
    with pytest.raises(ValueError, match="different model"):
        train(_cfg(data_dir, out, trunk="reveuler_rev", train_tokens=2 * ONE_BATCH, resume=True))
    assert (out / "log.csv").read_text() == before


def test_resume_refuses_a_checkpoint_past_the_budget_and_takes_one_at_it(data_dir, tmp_path):
    """A finished 2-step run resumed under a 1-step budget would rewrite its config and summary as a run of 1 planned
    step that took 2: refused, nothing written. Under its own budget there is nothing left to train: resumed."""
    out = tmp_path / "run"
    train(_cfg(data_dir, out, train_tokens=2 * ONE_BATCH))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(ValueError, match=rf"at step 2, past this run's 1 step .*--tokens {2 * ONE_BATCH} or more"):
        train(_cfg(data_dir, out, train_tokens=ONE_BATCH, resume=True))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert train(_cfg(data_dir, out, train_tokens=2 * ONE_BATCH, resume=True))["steps"] == 2


def test_budget_smaller_than_model_is_refused():
    with pytest.raises(ValueError, match="smaller than the model"):
        find_max_batch(SMOKE.model_config("residual"), budget_bytes=2**20, device="cpu", progress=False)


@pytest.mark.parametrize("top", [0, 1, 7, 50, 51, 99, 100])
@pytest.mark.parametrize("guess", [1, 48, 50, 51, 60, 100])
def test_galloping_from_a_guess_finds_the_threshold_in_few_probes(top, guess):
    probes = []
    fits = lambda n: probes.append(n) or n <= top  # noqa: E731
    assert largest_fitting(fits, guess, 100, gallop=True) == top
    assert all(1 <= n <= 100 for n in probes)
    if guess in (top, top + 1) and 0 < top < 100:
        assert len(probes) <= 2, probes  # a right guess costs its own probe and its neighbour's
    if abs(guess - top) <= 1 and 0 < top < 100:
        assert len(probes) <= 4, probes
