"""`python -m rev bench`: which models it compares, the per-sequence memory it measures, and its report."""
import pytest

from rev.base.cli import pos_chunk_arg
from rev.measure.bench import bench_configs, bench_trunks, format_report
from rev.measure.maxbatch import MaxBatch, Probe

GEOMETRY = dict(vocab_size=64, seq_len=128, n_layer=2, n_head=2, d_model=32)


def test_configs_chunk_only_trunks_that_recompute():
    cfgs = bench_configs(GEOMETRY, ("residual", "residual_ckpt", "reveuler_rev"), ("fused", "chunked"),
                         ("auto", 0, 32), split_heads=True)
    runs = [(c.trunk, c.loss_head, c.pos_chunk, c.split_heads) for c in cfgs]
    assert sum(r[0] == "residual" for r in runs) == 2          # once per head: chunks would change nothing
    assert sum(r[0] == "residual_ckpt" for r in runs) == 6     # 3 chunks x 2 heads, never split
    assert sum(r[0] == "reveuler_rev" for r in runs) == 12     # 3 chunks x 2 heads x (whole, split)
    assert len(set(runs)) == len(runs)
    sliced = bench_configs(GEOMETRY, ("residual", "reveuler_rev"), ("fused",), ("auto",), batch_slices=("auto", 0))
    assert [(c.trunk, c.batch_slice) for c in sliced] == [("residual", "auto"), ("reveuler_rev", "auto"),
                                                          ("reveuler_rev", 0)]


def test_per_sequence_memory_falls_with_the_chunk_and_report_compares():
    res = bench_trunks(GEOMETRY, 4, trunks=("residual", "reveuler_rev"), steps=1, device="cpu", progress=False,
                       pos_chunks=(0, 16), per_sequence=True, batch_slices=(0,))
    rows = {(r["trunk"], r["pos_chunk"]): r for r in res["runs"]}
    assert set(rows) == {("residual", None), ("reveuler_rev", 0), ("reveuler_rev", 16)}
    assert all(r["bytes_per_sequence"] > 0 for r in rows.values())
    assert rows["reveuler_rev", 16]["bytes_per_sequence"] < rows["reveuler_rev", 0]["bytes_per_sequence"]
    assert rows["reveuler_rev", 0]["bytes_per_sequence"] < rows["residual", None]["bytes_per_sequence"]
    text = format_report(res)
    assert "MiB/seq" in text and "reveuler_rev fused 16 off vs no position chunks" in text


def test_batch_slices_lower_memory_per_sequence_and_the_ledger_accounts_for_it():
    """At batches of 8 and 16 (1024 rows and more: the loss head's chunk of logits no longer grows with the batch)."""
    res = bench_trunks(GEOMETRY, 8, trunks=("residual", "reveuler_rev"), steps=3, device="cpu", progress=False,
                       pos_chunks=(0,), per_sequence=True, batch_slices=(0, 1))
    rows = {(r["trunk"], r["batch_slice"]): r for r in res["runs"]}
    assert set(rows) == {("residual", None), ("reveuler_rev", 0), ("reveuler_rev", 1)}
    sliced, whole = rows["reveuler_rev", 1], rows["reveuler_rev", 0]
    assert sliced["bytes_per_sequence"] < 0.7 * whole["bytes_per_sequence"]
    # sliced, the state and its gradients are most of what a sequence costs (at this small width the input state
    # each slice rebuilds, kept for a second backward, shows too); whole, the blocks' activations are most of it
    assert abs(sliced["ledger"]["remainder"]) <= 0.3 * sliced["ledger"]["measured"], sliced["ledger"]
    assert whole["ledger"]["remainder"] > 0.5 * whole["ledger"]["measured"], whole["ledger"]
    lo, hi = sliced["tokens_per_s_quartiles"]
    assert lo <= hi and len(sliced["step_times"]) == 3
    text = format_report(res)
    assert "reveuler_rev fused off 1x8 vs no batch slices: speed" in text and "[rounds" in text   # 8 slices of 1
    assert "memory per sequence, MiB" in text and "state gradients" in text


def test_search_probes_give_memory_per_sequence():
    res = MaxBatch("residual", 6, 1000, [Probe(2, 300, True), Probe(4, 500, True), Probe(8, 900, False),
                                          Probe(6, 700, True)])
    assert res.memory_line().bytes_per_sequence == pytest.approx(100.0)  # through the two largest fits, 4 and 6
    assert res.to_dict()["bytes_per_sequence"] == pytest.approx(100.0)
    assert MaxBatch("residual", 1, 1000, [Probe(1, 300, True), Probe(2, 1200, False)]).memory_line() is None


def test_pos_chunk_argument():
    assert pos_chunk_arg("auto") == "auto" and pos_chunk_arg("0") == 0 and pos_chunk_arg("64") == 64
    for bad in ("-1", "x"):
        with pytest.raises(ValueError, match="pos_chunk"):
            pos_chunk_arg(bad)


def test_fp16_gradient_error_of_the_fused_head_is_within_twice_plain():
    """What `bench --precision fp16` prints per head: at 2048 rows and a 2048-token vocabulary the fused head's
    gradient under fp16 autocast (loss scaled as a GradScaler does) is as close to fp32 as the plain head's."""
    import torch

    from rev import GPT, GPTConfig
    from rev.measure.bench import gradient_error

    err = {}
    for head in ("fused", "plain"):
        torch.manual_seed(0)
        model = GPT(GPTConfig(vocab_size=2048, seq_len=128, n_layer=1, n_head=2, d_model=32, loss_head=head))
        err[head] = gradient_error(model, 16, torch.device("cpu"), torch.float16)
    assert 0 < err["plain"] < 2e-3 and err["fused"] <= 2 * err["plain"], err
    assert gradient_error(model, 2, torch.device("cpu"), None) == 0.0


def test_bench_fp16_on_cpu_reports_each_runs_gradient_error():
    res = bench_trunks(GEOMETRY, 2, trunks=("residual",), steps=1, device="cpu", precision="fp16", progress=False,
                       heads=("fused", "plain"))
    assert "float16" in res["device"] and all(0 < r["grad_error"] < 1e-2 for r in res["runs"])
    assert "grad err" in format_report(res)
    plain = bench_trunks(GEOMETRY, 2, trunks=("residual",), steps=1, device="cpu", precision="fp32", progress=False)
    assert "grad_error" not in plain["runs"][0] and "grad err" not in format_report(plain)


def test_depth_sweep_counts_activations_not_the_foreach_update(monkeypatch):
    """CUDA's default AdamW is foreach, whose update allocates temporaries that grow with the parameter count;
    the depth sweep measures forward and backward, so a reversible trunk stays flat under it too."""
    import torch

    from rev.measure import bench, probe

    monkeypatch.setattr(probe, "adamw", lambda model, lr: torch.optim.AdamW(model.parameters(), lr=lr, foreach=True))
    geometry = dict(vocab_size=256, seq_len=64, n_layer=2, n_head=2, d_model=64)
    act = bench.bench_depths(geometry, 4, depths=(4, 16), trunks=("residual", "reveuler_rev"), device="cpu",
                             progress=False)
    stored, rev = (act[t][16] - act[t][4] for t in ("residual", "reveuler_rev"))
    assert stored > 1e6 and rev < 0.02 * stored, act


def test_the_ledger_gives_a_working_set_only_to_trunks_that_recompute():
    res = bench_trunks(GEOMETRY, 4, trunks=("residual", "midpoint_rev"), steps=1, device="cpu", progress=False,
                       per_sequence=True)
    ledgers = {r["trunk"]: r["ledger"] for r in res["runs"]}
    assert "fixed working set" not in ledgers["residual"]      # a stored trunk's intercept is a fit's offset
    assert ledgers["midpoint_rev"].get("fixed working set") is not None
