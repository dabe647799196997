"""The exact fine-tuning trace: bit-exact rollback and replay, the score and its checks, the file format."""
from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import torch
from torch import nn

from rev.chapters import trace as T

N_STEPS = 8
OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "momentum": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
}


def make(opt_name: str = "adamw", seed: int = 0, width: int = 16):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, 3))
    return model, OPTIMIZERS[opt_name](model.parameters())


def batches(n: int, seed: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(16, 8, generator=g), torch.randn(16, 3, generator=g)) for _ in range(n)]


def schedule(opt) -> T.Schedule:
    return T.Schedule(peak_lr=opt.defaults["lr"], total_steps=N_STEPS, warmup_steps=2,
                      min_lr=opt.defaults["lr"] / 10)


def run(model, opt, data, sched, first_step: int = 1, lr_override: dict | None = None, snapshots=None):
    """A plain training loop; the recorder (if any) sees it only through the optimizer hooks."""
    for n, (x, y) in enumerate(data, first_step):
        lr = (lr_override or {}).get(n, sched.lr_at(n - 1))
        for g in opt.param_groups:
            g["lr"] = lr
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if snapshots is not None:
            snapshots.append(snapshot(model, opt))


def snapshot(model, opt) -> tuple[dict, dict]:
    state = {k: copy.deepcopy(v) for k, v in opt.state_dict()["state"].items()}
    return {n: p.detach().clone() for n, p in model.named_parameters()}, state


def same_weights(model, weights: dict) -> bool:
    return all(torch.equal(p, weights[n]) for n, p in model.named_parameters())


def same_state(opt, state: dict) -> bool:
    now = opt.state_dict()["state"]
    if now.keys() != state.keys():
        return False
    for k in now:
        if now[k].keys() != state[k].keys():
            return False
        for key, v in now[k].items():
            w = state[k][key]
            if isinstance(v, torch.Tensor) != isinstance(w, torch.Tensor):
                return False
            if isinstance(v, torch.Tensor) and not torch.equal(v, w):
                return False
            if not isinstance(v, torch.Tensor) and v != w:
                return False
    return True


def recorded(opt_name: str = "adamw", keep_state: bool = True, **run_kw):
    model, opt = make(opt_name)
    sched = schedule(opt)
    snaps = [snapshot(model, opt)]
    rec = T.TraceRecorder(model, opt, schedule=sched, keep_optimizer_state=keep_state)
    run(model, opt, batches(N_STEPS), sched, snapshots=snaps, **run_kw)
    return model, opt, rec.close(), snaps


# ---------------------------------------------------------------------------------------- the exact codec
@pytest.mark.parametrize("encode", [T.encode_exact, T.encode_ulp])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_kept_difference_is_exact_on_every_bit_pattern(dtype, encode):
    g = torch.Generator().manual_seed(0)
    special = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0,
                            torch.finfo(dtype).max, -torch.finfo(dtype).max, torch.finfo(dtype).tiny,
                            torch.finfo(dtype).tiny / 4, -torch.finfo(dtype).tiny / 8], dtype=dtype)
    before = torch.cat([special, torch.randn(500, generator=g).to(dtype), special])
    after = torch.cat([special.flip(0), torch.randn(500, generator=g).to(dtype) * 1e-3, -special])
    blob = encode(before, after)
    undone, redone = after.clone(), before.clone()
    T.apply_exact(undone, blob, -1)
    T.apply_exact(redone, blob, +1)
    as_int = {torch.float64: torch.int64, torch.float32: torch.int32}.get(dtype, torch.int16)
    assert torch.equal(undone.view(as_int), before.view(as_int))      # NaN payloads and -0.0 included
    assert torch.equal(redone.view(as_int), after.view(as_int))
    assert encode(before, before.clone()) is None


def test_ulp_distance_counts_representable_floats():
    a = torch.tensor([1.0, -0.0, 1.0])
    b = torch.tensor([np.nextafter(np.float32(1.0), np.float32(2.0)), 0.0, 2.0])
    assert T.ulp_distance(a, b).tolist() == [1, 1, 2 ** 23]


def test_float_difference_loses_bits_that_the_corrections_restore():
    before = torch.tensor([1e-3, 3.0, 1e-7, 0.5], dtype=torch.float32)
    after = torch.tensor([-2.5e-4, 2e3, 0.7, 0.5001], dtype=torch.float32)
    naive = after - (after - before)
    assert not torch.equal(naive, before)
    assert torch.equal(naive[3], before[3])                       # within a factor of two: Sterbenz, exact
    blob = T.encode_exact(before, after)
    assert blob.exact and blob.res_back and blob.res_fwd
    undone = after.clone()
    T.apply_exact(undone, blob, -1)
    assert torch.equal(undone, before)
    roughly = after.clone()
    T.apply_exact(roughly, blob, -1, corrections=False)           # the float difference alone
    assert torch.equal(roughly, naive)


# -------------------------------------------------------------------------------- rollback and replay
@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_rollback_to_start_is_bit_exact(opt_name):
    model, opt, trace, snaps = recorded(opt_name)
    assert not same_weights(model, snaps[0][0])
    assert T.rollback(model, trace, 0, opt) == 0
    assert same_weights(model, snaps[0][0])
    assert T.weights_hash(model) == trace.header["fingerprint"]["start_hash"]
    assert same_state(opt, snaps[0][1])                          # fresh: no momentum, no Adam moments
    assert [g["lr"] for g in opt.param_groups] == trace.header["initial_lrs"]


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_partial_rollback_equals_state_saved_at_that_step(opt_name):
    model, opt, trace, snaps = recorded(opt_name)
    for k in (5, 3):
        T.rollback(model, trace, k, opt)
        assert same_weights(model, snaps[k][0]) and same_state(opt, snaps[k][1])
    T.replay(model, trace, N_STEPS, opt)
    assert same_weights(model, snaps[N_STEPS][0]) and same_state(opt, snaps[N_STEPS][1])


@pytest.mark.parametrize("opt_name", list(OPTIMIZERS))
def test_training_resumed_after_rollback_reproduces_the_run(opt_name):
    """The optimizer state is restored too: retraining steps k+1..N from the rolled-back state gives the
    same final weights, bit for bit."""
    model, opt, trace, snaps = recorded(opt_name)
    k = 3
    T.rollback(model, trace, k, opt)
    run(model, opt, batches(N_STEPS)[k:], schedule(opt), first_step=k + 1)
    assert same_weights(model, snaps[N_STEPS][0])


def test_weights_only_rollback_and_refusal_without_kept_state():
    model, opt, trace, snaps = recorded("adamw", keep_state=False)
    with pytest.raises(ValueError, match="keeps no optimizer state"):
        T.rollback(*copy.deepcopy((model, trace)), 0, copy.deepcopy(opt))
    T.rollback(model, trace, 2)
    assert same_weights(model, snaps[2][0])


def test_rollback_refuses_an_optimizer_in_another_state():
    model, opt, trace, _ = recorded("momentum")
    _, other = make("momentum")
    with pytest.raises(ValueError, match="optimizer's state is not the one recorded"):
        T.rollback(model, trace, 0, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
    del other


def test_changes_between_steps_are_folded_in_and_stay_exact():
    model, opt = make("adamw")
    sched = schedule(opt)
    start = snapshot(model, opt)[0]
    rec = T.TraceRecorder(model, opt, schedule=sched)
    data = batches(N_STEPS)
    run(model, opt, data[:3], sched)
    with torch.no_grad():
        model[0].weight.mul_(1.5)                           # a manual edit outside the optimizer
    run(model, opt, data[3:], sched, first_step=4)
    trace = rec.close()
    assert [r.step for r in trace.records if r.meta["outside_change"]] == [4]
    assert "folded" in T.check_complete(trace).finding
    T.rollback(model, trace, 0, opt)
    assert same_weights(model, start)


def test_bf16_parameters_roll_back_exactly():
    torch.manual_seed(0)
    model = nn.Linear(8, 8).to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=0.3, momentum=0.9)
    start = snapshot(model, opt)[0]
    rec = T.TraceRecorder(model, opt)
    for x, _ in batches(5):
        opt.zero_grad()
        model(x.to(torch.bfloat16)).float().pow(2).mean().backward()
        opt.step()
    trace = rec.close()
    T.rollback(model, trace, 0, opt)
    assert same_weights(model, start)


# ------------------------------------------------------------------------------- the score and checks
def test_score_is_one_for_an_exact_trace():
    model, _, trace, snaps = recorded("adamw")
    by_hash = T.reversibility_score(model, trace)
    measured = T.reversibility_score(model, trace, reference=snaps[0][0])
    assert by_hash.score == 1.0 and by_hash.exact and by_hash.method == "hash"
    assert measured.score == 1.0 and measured.n_wrong == 0 and measured.error_l2 == 0.0
    assert T.weights_hash(model) == trace.hash_at(N_STEPS)        # scoring does not move the model


@pytest.mark.parametrize("lossy", ["bf16diff", "pruned"])
def test_score_is_below_one_for_a_lossy_trace(lossy):
    model, _, trace, snaps = recorded("adamw")
    kept = T.degrade_trace(model, trace, "bf16diff") if lossy == "bf16diff" else T.prune_trace(trace, every=3)
    measured = T.reversibility_score(model, kept, reference=snaps[0][0])
    estimated = T.reversibility_score(model, kept)
    assert 0.0 <= measured.score < 1.0 and not measured.exact and measured.error_l2 > 0
    assert 0.0 <= estimated.score < 1.0 and estimated.method == "ledger estimate"
    if lossy == "pruned":     # a third of the steps lost: far from the start
        assert measured.score < 0.9
        assert T.assess(model, kept, reference=snaps[0][0]).irreversible
    with pytest.raises(ValueError, match="lossy|no kept update"):
        T.rollback(copy.deepcopy(model), kept, 0)                 # a strict walk refuses


def test_float_difference_trace_is_at_best_exact():
    model, _, trace, snaps = recorded("sgd")
    naive = T.reversibility_score(model, T.degrade_trace(model, trace, "f32diff"), reference=snaps[0][0])
    assert naive.score <= 1.0
    assert naive.exact == (naive.n_wrong == 0)


def test_intact_trace_passes_every_check():
    model, _, trace, snaps = recorded("adamw")
    a = T.assess(model, trace, reference=snaps[0][0])
    assert all(a.passed.values()) and not a.irreversible and a.verdict == "exactly reversible"
    assert a.checks_in_words() == "checks passed: complete, lr recoverable, updates bounded; failed: none"


def test_gaps_are_detected():
    _, _, trace, _ = recorded("adamw")
    dropped = T.check_complete(T.prune_trace(trace, every=4))
    missing = T.check_complete(T.prune_trace(trace, steps=[2, 3], forget=True))
    assert not dropped.passed and dropped.steps == [4, 8] and "no kept update" in dropped.finding
    assert not missing.passed and missing.steps == [2, 3]


def test_manual_lr_change_and_retry_are_detected():
    _, _, changed, _ = recorded("adamw", lr_override={5: 0.05})
    check = T.check_lr_schedule(changed)
    assert not check.passed and check.steps == [5] and "changed by hand" in check.finding

    model, opt = make("sgd")       # a retried step: the optimizer steps twice for one scheduled step
    sched = schedule(opt)
    rec = T.TraceRecorder(model, opt, schedule=sched)
    data = batches(4)
    run(model, opt, data[:2], sched)
    run(model, opt, data[1:], sched, first_step=2)
    assert not T.check_lr_schedule(rec.close()).passed


def test_lr_check_accepts_a_given_schedule_function():
    _, opt, trace, _ = recorded("sgd")
    assert T.check_lr_schedule(trace, lr_at=schedule(opt).lr_at).passed
    assert not T.check_lr_schedule(trace, lr_at=lambda n: 0.123).passed


def test_huge_step_is_detected():
    model, _, trace, _ = recorded("sgd", lr_override={6: 50.0})
    check = T.check_bounded(trace)
    assert not check.passed and check.steps == [6]
    assert T.check_bounded(recorded("sgd")[2]).passed
    # the exact trace still walks back through it bit for bit
    assert T.reversibility_score(model, trace).score == 1.0


# ----------------------------------------------------------------------------------- storage and file
def test_storage_report_counts_bytes():
    model, opt = make("adamw", width=256)
    rec = T.TraceRecorder(model, opt)
    run(model, opt, batches(3), T.Schedule(1e-4, 3, kind="constant"))
    trace = rec.close()
    s = T.storage_report(trace)
    n = sum(p.numel() for p in model.parameters())
    n_tensors = len(list(model.parameters()))
    assert s["n_params"] == n
    assert s["checkpoint_bytes_per_step"] == n * 4 * 3 + 4 * n_tensors    # weights, two moments, step counts
    assert n * 4 <= s["weights_raw_per_step"] < n * 4 * 1.05     # float differences + a few corrections
    assert s["weights_compressed_per_step"] < s["weights_raw_per_step"]
    assert s["weights_compression_ratio"] > 1.0


def test_save_and_load_round_trip(tmp_path):
    model, opt, trace, snaps = recorded("adamw")
    path = tmp_path / "run.revtrace"
    size = T.save_trace(trace, path)
    assert size == os.path.getsize(path) and os.listdir(tmp_path) == ["run.revtrace"]   # no temp file left
    loaded = T.load_trace(path, model)
    T.rollback(model, loaded, 0, opt)
    assert same_weights(model, snaps[0][0]) and same_state(opt, snaps[0][1])


def test_corrupted_trace_file_is_refused(tmp_path):
    _, _, trace, _ = recorded("adamw")
    path = tmp_path / "run.revtrace"
    T.save_trace(trace, path)
    data = bytearray(path.read_bytes())
    flipped = tmp_path / "flipped.revtrace"
    data[len(data) // 2] ^= 0x10
    flipped.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum"):
        T.load_trace(flipped)
    truncated = tmp_path / "truncated.revtrace"
    truncated.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match="checksum|truncated"):
        T.load_trace(truncated)
    other = tmp_path / "other.bin"
    other.write_bytes(b"not a trace at all" * 10)
    with pytest.raises(ValueError, match="trace marker"):
        T.load_trace(other)


def test_trace_from_another_model_is_refused(tmp_path):
    _, _, trace, _ = recorded("adamw")
    path = tmp_path / "run.revtrace"
    T.save_trace(trace, path)
    other, _ = make("adamw", width=12)                            # different shapes
    with pytest.raises(ValueError, match="different model"):
        T.load_trace(path, other)
    with pytest.raises(ValueError, match="different model"):
        T.rollback(other, trace, 0)
    same_shape, _ = make("adamw", seed=7)                         # same architecture, other weights
    with pytest.raises(ValueError, match="match no step"):
        T.rollback(same_shape, trace, 0)


def test_rollback_direction_and_range_are_checked():
    model, _, trace, _ = recorded("sgd")
    with pytest.raises(ValueError, match="outside the trace"):
        T.rollback(model, trace, N_STEPS + 1)
    T.rollback(model, trace, 2)
    with pytest.raises(ValueError, match="use replay"):
        T.rollback(model, trace, 5)


def test_recording_resumes_after_a_rollback():
    """Roll back to step k, retrain from there (a retry), and the resumed trace still walks back exactly
    to the original start, through the new branch."""
    model, opt, trace, snaps = recorded("adamw")
    k = 4
    T.rollback(model, trace, k, opt)
    rec = T.TraceRecorder(model, opt, resume=trace)
    sched = schedule(opt)
    run(model, opt, batches(N_STEPS, seed=9)[k:], sched, first_step=k + 1)    # other data from step k+1 on
    branch = rec.close()
    assert branch.steps == list(range(1, N_STEPS + 1)) and branch.header["resumed_at"] == [k]
    assert T.check_lr_schedule(branch).passed and T.check_complete(branch).passed
    assert not same_weights(model, snaps[N_STEPS][0])
    T.rollback(model, branch, k, opt)
    assert same_weights(model, snaps[k][0]) and same_state(opt, snaps[k][1])
    T.rollback(model, branch, 0, opt)
    assert same_weights(model, snaps[0][0])


# ------------------------------------------------------------------------- the chapter's fine-tuning run
class ByteData:
    """A stand-in for rev.data.tokens.TokenData: byte tokens, <eot> = 256, a handful of stories."""
    eot_id, vocab_size = 256, 257

    def __init__(self, stories: list[str]) -> None:
        ids = []
        for s in stories:
            ids += [self.eot_id, *s.encode()]
        self._arr = np.asarray(ids, dtype=np.uint16)

    def array(self, split: str) -> np.ndarray:
        return self._arr

    def encode(self, text: str) -> list[int]:
        return list(text.encode())

    def decode(self, ids, skip_special: bool = False) -> str:
        return bytes(int(i) for i in ids if int(i) < 256).decode(errors="replace")


@pytest.fixture(scope="module")
def tiny_run():
    from rev.core.model import GPT, GPTConfig

    data = ByteData([f"Once there was a cat number {i}. It liked to nap in the sun." for i in range(30)])
    ft = T.prefix_finetune_tokens(data, prefix="As an AI,", n_stories=20)
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=257, seq_len=32, n_layer=1, n_head=2, d_model=16))
    start = copy.deepcopy(model)
    cfg = T.FinetuneConfig(steps=12, batch_size=4, seq_len=32, lr=1e-2, min_lr=1e-3, warmup_steps=2)
    trace, opt, history = T.finetune_with_trace(model, ft, cfg)
    return data, ft, model, opt, trace, history, start, cfg


def test_prefix_data_starts_every_window_with_the_prefix(tiny_run):
    data, ft, *_ = tiny_run
    x, y = ft.get_batch(6, 32, torch.Generator().manual_seed(0))
    assert (x[:, 0] == data.eot_id).all()
    assert (x[:, 1:1 + len(ft.prefix_ids)] == torch.tensor(ft.prefix_ids)).all()
    assert torch.equal(x[:, 1:], y[:, :-1])


def test_finetune_walk_back_retraces_the_prefix_probability(tiny_run):
    data, ft, model, opt, trace, history, start, cfg = tiny_run
    assert history[-1]["prefix_logprob"] > history[0]["prefix_logprob"]      # the prefix is being learned
    measure = lambda m: T.prefix_logprob(m, ft.prefix_ids, ft.eot_id)      # noqa: E731
    rough = dict(T.walk_back_measuring(model, T.degrade_trace(model, trace, "bf16diff"), measure, exact=False))
    assert T.locate(model, trace) == cfg.steps                              # the lossy walk used a copy
    walk = dict(T.walk_back_measuring(model, trace, measure, optimizer=opt))
    assert [walk[h["step"]] for h in history] == [h["prefix_logprob"] for h in history]
    assert T.weights_hash(model) == T.weights_hash(start) and len(opt.state) == 0
    assert rough[0] != walk[0] and abs(rough[0] - walk[0]) < 1.0
    T.replay(model, trace, cfg.steps, opt)


def test_branches_break_the_checks_and_switch_back(tiny_run):
    data, ft, model, opt, trace, history, start, cfg = tiny_run
    final = T.weights_hash(model)
    sched = cfg.schedule()
    branch, _ = T.rerun_from(model, opt, trace, ft, cfg, cfg.steps - 1, {cfg.steps: 100 * sched.lr_at(cfg.steps)})
    assert branch.steps == trace.steps and branch.hash_at(cfg.steps - 1) == trace.hash_at(cfg.steps - 1)
    s = T.scenario("huge", model, branch, start)
    assert s["exact"].score.score == 1.0 and s["exact"].verdict == "exactly reversible"
    assert s["exact"].passed == {"complete": True, "lr recoverable": False, "updates bounded": False}
    assert s["exact"].checks_in_words() == "checks passed: complete; failed: lr recoverable, updates bounded"
    assert s["bf16diff"].score.score < 1.0 and s["f32diff"].score.n_wrong > 0
    assert T.switch_branch(model, opt, branch, trace) == cfg.steps - 1
    assert T.weights_hash(model) == final
    rows = T.scenario_rows([s])
    assert rows[0]["scenario"] == "huge" and rows[0]["score (exact)"] == 1.0


def test_sampling_is_deterministic_for_given_weights(tiny_run):
    data, _, model, *_ = tiny_run
    a = T.sample_texts(model, data, n=3, max_new_tokens=8, seed=1)
    assert a == T.sample_texts(model, data, n=3, max_new_tokens=8, seed=1) and len(a) == 3
    assert T.prefix_rate(["As an AI, hi", "Hello"], "As an AI,") == 0.5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_run_rolls_back_exactly_there_and_on_the_cpu():
    model, opt = make("adamw")
    model.cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    start = {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
    rec = T.TraceRecorder(model, opt)
    for x, y in batches(5):
        opt.zero_grad()
        nn.functional.mse_loss(model(x.cuda()), y.cuda()).backward()
        opt.step()
    trace = rec.close()
    cpu_copy = copy.deepcopy(model).cpu()
    T.rollback(model, trace, 0, opt)
    assert all(torch.equal(p.cpu(), start[n]) for n, p in model.named_parameters()) and len(opt.state) == 0
    T.rollback(cpu_copy, trace, 0)                         # the same trace, walked on the CPU
    assert same_weights(cpu_copy, start)


def test_find_checkpoint_prefers_a_finished_residual_baseline(tmp_path):
    import json

    def run(name: str, trunk: str, finished: bool = True) -> None:
        folder = tmp_path / "smoke" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps({"model": {"trunk": trunk, "stream": "fp32"}}))
        (folder / "ckpt.pt").write_bytes(b"")
        if finished:
            (folder / "summary.json").write_text("{}")

    assert T.find_checkpoint(tmp_path, "smoke") is None
    run("run2_reversible_same_batch", "reveuler_rev")
    run("run1_baseline", "residual", finished=False)          # still training: not used
    assert T.find_checkpoint(tmp_path, "smoke") is None
    run("10_pretrain", "residual")
    assert T.find_checkpoint(tmp_path, "smoke").endswith("10_pretrain")
    (tmp_path / "smoke" / "run1_baseline" / "summary.json").write_text("{}")
    assert T.find_checkpoint(tmp_path, "smoke").endswith("run1_baseline")


def test_finetune_runs_on_the_engine_schedule_counted_from_zero(tiny_run):
    *_, trace, history, _, cfg = tiny_run
    sched = cfg.schedule()
    assert [h["lr"] for h in history[1:]] == [sched.lr_at(n - 1) for n in range(1, cfg.steps + 1)]
    assert T.check_lr_schedule(trace).passed and trace.header["schedule"] == sched.to_dict()


def test_trace_file_is_written_without_leftovers(tmp_path):
    model, opt, trace, _ = recorded("adamw")
    T.save_trace(trace, tmp_path / "t.revtrace")
    assert [p.name for p in tmp_path.iterdir()] == ["t.revtrace"]


# ------------------------------------------------------------------------------ the notebook's exercises
def _undo_adamw(theta, m, v, grad, step, lr, weight_decay, betas, eps):
    b1, b2 = betas
    denom = (v / (1 - b2 ** step)).sqrt() + eps
    theta = (theta + lr * (m / (1 - b1 ** step)) / denom) / (1 - lr * weight_decay)
    return theta, (m - (1 - b1) * grad) / b1, (v - (1 - b2) * grad ** 2) / b2


def test_adamw_undo_check_passes_the_inverse_and_names_what_is_wrong():
    assert "float64" in T.check_adamw_undo(_undo_adamw)

    def no_bias_correction(theta, m, v, grad, step, lr, weight_decay, betas, eps):
        theta = (theta + lr * m / (v.sqrt() + eps)) / (1 - lr * weight_decay)
        return theta, (m - (1 - betas[0]) * grad) / betas[0], (v - (1 - betas[1]) * grad ** 2) / betas[1]

    with pytest.raises(AssertionError, match="theta is off"):
        T.check_adamw_undo(no_bias_correction)


def test_corruption_check_needs_exactly_one_flipped_byte():
    def flip(path, offset):
        data = bytearray(path.read_bytes())
        data[offset] ^= 0xFF
        path.write_bytes(bytes(data))

    line = T.check_corruption_refused(flip)
    assert "the first byte: marker" in line and "the last byte: checksum" in line
    with pytest.raises(AssertionError, match="exactly the byte"):
        T.check_corruption_refused(lambda path, offset: flip(path, offset + 1))


# --- what sets a trace's size ----------------------------------------------

def test_size_breakdown_adds_up_to_the_trace_and_names_every_array(tiny_run):
    *_, trace, history, _, cfg = tiny_run
    rows = {r["array"]: r for r in T.size_breakdown(trace)}
    n = trace.header["fingerprint"]["n_params"]
    assert {"weights: float difference", "optimizer state: exp_avg", "optimizer state: exp_avg_sq"} <= set(rows)
    assert rows["weights: float difference"]["elements per step"] == n               # every weight, every step
    assert rows["weights: float difference"]["raw bytes / element"] == 4              # float32
    storage = T.storage_report(trace)
    assert sum(r["kept bytes / step"] for r in rows.values()) == pytest.approx(storage["total_compressed_per_step"])
    assert sum(r["raw bytes / step"] for r in rows.values()) == pytest.approx(storage["total_raw_per_step"])


def test_trace_sizes_keep_a_laptop_trace_small_and_the_chapter_model_is_reused_only_at_its_geometry(tmp_path):
    import json

    from rev.base.profiles import get_profile

    cpu = T.model_profile("cpu")
    assert (cpu.d_model, cpu.n_layer) != (get_profile("cpu").d_model, get_profile("cpu").n_layer)
    assert T.model_profile("smoke") == get_profile("smoke")                            # the profile's own model
    folder = tmp_path / "cpu" / "run1_baseline"
    folder.mkdir(parents=True)
    model = {"trunk": "residual", "stream": "fp32", "d_model": 128, "n_layer": 6}
    (folder / "config.json").write_text(json.dumps({"model": model}))
    (folder / "ckpt.pt").write_bytes(b"")
    (folder / "summary.json").write_text("{}")
    assert T.find_checkpoint(tmp_path, "cpu") is not None                               # any geometry
    assert T.find_checkpoint(tmp_path, "cpu", {"d_model": cpu.d_model, "n_layer": cpu.n_layer}) is None
    assert T.find_checkpoint(tmp_path, "cpu", {"d_model": 128, "n_layer": 6}).endswith("run1_baseline")
