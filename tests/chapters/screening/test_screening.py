"""Notebook 03's rule and figures follow its numbers (rev.chapters.screening.rule): speeds timed apart never rank,
the why column labels each candidate's fate, an exact zero is drawn and labelled on its own row, and the fp64
stream's exact rebuild is measured, not asserted."""
from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from rev.chapters.screening import rule as screening  # noqa: E402
from rev.chapters.screening.streams import PROBE_STEPS  # noqa: E402
from rev.chapters.shared.verdicts import FASTER, SLOWER, TOO_NOISY  # noqa: E402
from rev.core.reversible import RECON_LIMIT  # noqa: E402


def _row(name: str, trunk: str, stream: str, val: float, speed: float, recon: float | None,
         q: tuple[float, float] | None = None) -> dict:
    row = {"name": name, "trunk": trunk, "h": 1.0, "stream": stream, "val_loss": val, "tokens_per_s": speed,
           "reconstruction_error": recon}
    if q is not None:
        row["tokens_per_s_q1"], row["tokens_per_s_q3"] = q
    return row


def _rows(q_fast: tuple[float, float] | None, q_slow: tuple[float, float] | None) -> list[dict]:
    return [_row("base", "residual", "fp32", 2.0, 900, None),
            _row("fast", "reveuler_rev", "fp32", 2.005, 1000, 1e-6, q_fast),
            _row("slow", "midpoint_rev", "fp32", 2.000, 800, 1e-6, q_slow),
            _row("exact", "reveuler_rev", "fixed", 2.001, 600, 0.0),
            _row("bad", "reveuler_rev", "fp32", 1.5, 700, 10 * RECON_LIMIT)]


def test_the_rule_never_ranks_by_speeds_timed_apart():
    """Tied candidates: the cheapest stream first, then the lower loss, however the speeds lie: the runs were timed
    one after another, so a faster median step says nothing."""
    for fast_speed in (1000, 10):   # the same pick with `fast` ten times faster or a hundred times slower
        rows = _rows((950, 1050), (750, 850))
        rows[1]["tokens_per_s"] = fast_speed
        chosen, reason = screening.choose(rows)
        assert chosen["trunk"] == "midpoint_rev" and reason.startswith("slow: val loss 2.000")
        why = screening.screening_verdicts(rows)["why"]
        assert why.to_dict() == {"fast": "tied, higher loss", "slow": "picked", "exact": "tied, costlier stream",
                                 "bad": "over the limit"}


def test_stream_cost_then_loss_orders_a_tie_and_a_twin_is_not_a_rival():
    rows = [_row("fx", "reveuler_rev", "fixed", 2.000, 1, 0.0), _row("f64", "midpoint_rev", "fp64", 2.010, 1, 0.0),
            _row("far", "midpoint_rev", "fp32", 2.021, 1, 1e-6)]
    assert screening.choose(rows)[0]["stream"] == "fp64"      # 0.010 behind is inside the tie; 0.021 is not
    assert screening.screening_verdicts(rows)["why"].to_dict() == {"fx": "tied, costlier stream", "f64": "picked",
                                                                   "far": "outside the tie"}
    twin = dict(_row("twin", "midpoint_rev", "fixed", 2.010, 1, 0.0), loss_vs_fp32=0.0)
    assert screening.screening_verdicts(rows + [twin])["why"]["twin"] == "tied, costlier stream"   # twin not tied
    f32 = _row("t32", "midpoint_rev", "fp32", 2.010, 1, 1e-6)
    assert screening.screening_verdicts(rows + [f32, dict(twin, weights="t32")])["why"]["twin"] == "equals fp32 twin"
    assert screening.screening_verdicts([dict(rows[0], reconstruction_error=None)])["why"]["fx"] == "no error measured"


def test_bars_share_rows_and_label_exact_zeros():
    rows = _rows((950, 1050), (750, 850))
    fig = screening.plot_screening_bars(rows)
    loss, recon = fig.axes    # no speed panel: speeds timed apart are not comparable
    assert loss.get_shared_y_axes().joined(loss, recon)
    assert [t.get_text() for t in loss.get_yticklabels()] == [r["name"] for r in rows]
    labels = {round(t.get_position()[1]): t.get_text().strip() for t in recon.texts}
    assert labels == {0: "no inverse", 1: "1.0e-06", 2: "1.0e-06", 3: "exactly 0", 4: "1.0e-01"}
    assert not loss.patches and not recon.patches      # dots, not bars, where an axis has no zero to measure from
    zero = [ln for ln in recon.get_lines() if ln.get_ydata()[0] == 3][0]
    assert zero.get_markerfacecolor() == "white" and zero.get_xdata()[0] <= recon.get_xlim()[0] * 1.6
    matplotlib.pyplot.close(fig)
    fig = screening.plot_screening_bars(rows, unigram=2.5)
    unigram = [ln for ln in fig.axes[0].get_lines() if list(ln.get_xdata()) == [2.5, 2.5]]
    assert unigram and fig.axes[0].get_xlim()[1] > 2.5 and "unigram 2.500" in \
        [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    matplotlib.pyplot.close(fig)


def test_curves_take_their_integrators_colours_and_tell_step_sizes_apart_beside_the_axes(tmp_path):
    import json

    from matplotlib import colors as mcolors

    from rev.chapters.shared import palette

    runs = {}
    for i, (trunk, h) in enumerate((("residual", 1.0), ("midpoint_rev", 0.5), ("midpoint_rev", 0.25),
                                    ("reveuler_rev", 1.0), ("reveuler_rev", 0.5))):
        d = tmp_path / f"{trunk}_h{h:g}_fp32"
        d.mkdir()
        (d / "log.csv").write_text("step,tokens,loss,lr,grad_norm,tokens_per_s,val_loss\n"
                                   f"0,64,{6 - i / 10},0.001,1.0,100.0,\n1,128,{5.5 - i / 10},0.001,1.0,100.0,5.4\n")
        (d / "summary.json").write_text(json.dumps({"trunk": trunk, "h": h}))
        runs[d.name] = d
    fig = screening.plot_screening_curves(runs)
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1 - 1  # beside the axes, not over them
    keys = {t.get_text(): (mcolors.to_hex(h.get_color()), h.get_linestyle(), h.get_marker())
            for t, h in zip(legend.get_texts(), legend.legend_handles) if t.get_text() in runs}
    assert len(set(keys.values())) == len(runs)            # every run told apart
    assert {name: c for name, (c, _, _) in keys.items()} == {
        name: palette.integrator_colour(name.split("_h")[0]) for name in runs}   # in its integrator's colour
    matplotlib.pyplot.close(fig)


@pytest.mark.slow
def test_fp64_stream_with_float32_blocks_rebuilds_exactly(tmp_path):
    """The measurement itself, on a tiny trained fp64 run: exact with float32 blocks, rounding with float64 ones."""
    from rev.chapters.shared.runs import train_run

    s = train_run("screening/tiny_fp64", "smoke", tmp_path / "results", tmp_path / "data", progress=False,
                  trunk="reveuler_rev", h=0.5, stream="fp64", train_tokens=1024)
    found = screening.exactness_by_block_dtype(s["config"]["out_dir"], tmp_path / "data")
    assert found["as_trained"] == 0.0 and 0 < found["float64_blocks"] < 1e-12


def test_stream_twins_pair_each_stream_with_its_fp32_candidate_only():
    C = screening.Candidate
    cands = [C("residual", 1.0, "fp32"), C("reveuler_rev", 1.0, "fp32"), C("reveuler_rev", 1.0, "fixed"),
             C("reveuler_rev", 0.5, "fp64"), C("midpoint_rev", 0.5, "fp64")]
    assert screening.stream_twins(cands) == {"reveuler_rev_h1_fixed": "reveuler_rev_h1_fp32"}
    full = screening.screening_candidates("cpu")
    twins = screening.stream_twins(full)
    assert len(twins) == sum(c.stream != "fp32" for c in full)   # the cpu set trains every fp32 twin
    assert all(t.endswith("_fp32") and t.rsplit("_", 1)[0] == n.rsplit("_", 1)[0] for n, t in twins.items())


def test_a_stream_is_measured_on_its_fp32_twins_weights(tmp_path, smoke_data):
    """The fixed stream on trained fp32 weights: the same function (its loss is the run's, a paired difference of
    0 here), an exact rebuild (the fp32 run itself rounds), its own speed; the stream without a twin trains."""
    C = screening.Candidate
    cands = [C("residual", 1.0, "fp32"), C("reveuler_rev", 1.0, "fp32"), C("reveuler_rev", 1.0, "fixed"),
             C("reveuler_rev", 0.5, "fp64")]
    result = screening.screen("smoke", tmp_path, smoke_data, cands, progress=False)
    rows = {r["name"]: r for r in result["runs"]}
    fixed, fp32 = rows["reveuler_rev_h1_fixed"], rows["reveuler_rev_h1_fp32"]
    assert fixed["weights"] == "reveuler_rev_h1_fp32" and rows["reveuler_rev_h0.5_fp64"]["weights"] == "reveuler_rev_h0.5_fp64"
    assert not (tmp_path / "smoke" / "screening" / "reveuler_rev_h1_fixed").exists()
    assert fixed["reconstruction_error"] == 0.0 and fp32["reconstruction_error"] > 0
    assert abs(fixed["loss_vs_fp32"]) < 1e-3 and fixed["val_loss"] == pytest.approx(fp32["val_loss"], abs=1e-3)
    assert fixed["tokens_per_s_q1"] <= fixed["tokens_per_s"] <= fixed["tokens_per_s_q3"]
    # its speed against its fp32 twin: timed interleaved on the same weights, so it carries a verdict
    vs = fixed["speed_vs_fp32"]
    assert vs["rounds"] == PROBE_STEPS and vs["lo"] <= vs["ratio"] <= vs["hi"]
    assert vs["verdict"] in (FASTER, SLOWER, TOO_NOISY)
    found = screening.exactness_by_block_dtype(tmp_path / "smoke" / "screening" / fixed["weights"], smoke_data,
                                               stream="fp64")   # notebook 03's fp64 lesson, on the twin's weights
    assert found["stream"] == "fp64" and found["as_trained"] == 0.0 < found["float64_blocks"]
    again = screening.screen("smoke", tmp_path, smoke_data, cands, progress=False)   # cached: the same numbers
    assert again["runs"] == result["runs"]
