"""`python -m rev bench`: which models it compares, the per-sequence memory it measures, and its report."""
import pytest

from rev.core.model import pos_chunk_arg
from rev.engine.bench import bench_configs, bench_trunks, format_report
from rev.engine.maxbatch import MaxBatch, Probe

GEOMETRY = dict(vocab_size=64, seq_len=128, n_layer=2, n_head=2, d_model=32)


def test_configs_chunk_only_trunks_that_recompute():
    cfgs = bench_configs(GEOMETRY, ("residual", "residual_ckpt", "reveuler_rev"), ("fused", "chunked"),
                         ("auto", 0, 32), split_heads=True)
    runs = [(c.trunk, c.loss_head, c.pos_chunk, c.split_heads) for c in cfgs]
    assert sum(r[0] == "residual" for r in runs) == 2          # once per head: chunks would change nothing
    assert sum(r[0] == "residual_ckpt" for r in runs) == 6     # 3 chunks x 2 heads, never split
    assert sum(r[0] == "reveuler_rev" for r in runs) == 12     # 3 chunks x 2 heads x (whole, split)
    assert len(set(runs)) == len(runs)


def test_per_sequence_memory_falls_with_the_chunk_and_report_compares():
    res = bench_trunks(GEOMETRY, 4, trunks=("residual", "reveuler_rev"), steps=1, device="cpu", progress=False,
                       pos_chunks=(0, 16), per_sequence=True)
    rows = {(r["trunk"], r["pos_chunk"]): r for r in res["runs"]}
    assert set(rows) == {("residual", None), ("reveuler_rev", 0), ("reveuler_rev", 16)}
    assert all(r["bytes_per_sequence"] > 0 for r in rows.values())
    assert rows["reveuler_rev", 16]["bytes_per_sequence"] < rows["reveuler_rev", 0]["bytes_per_sequence"]
    assert rows["reveuler_rev", 0]["bytes_per_sequence"] < rows["residual", None]["bytes_per_sequence"]
    text = format_report(res)
    assert "MiB/seq" in text and "reveuler_rev fused 16 vs no position chunks" in text


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
