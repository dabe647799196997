"""Notebook 03's words and figures follow its numbers (rev.chapters.screening.rule): the reason and the why column say
when a speed difference is inside the noise, an exact zero is drawn and labelled on its own row, and the fp64
stream's exact rebuild is measured, not asserted."""
from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

from rev.chapters.screening import rule as screening  # noqa: E402
from rev.chapters.screening.streams import PROBE_STEPS  # noqa: E402
from rev.chapters.shared.verdicts import FASTER, SLOWER, TOO_NOISY, Tie  # noqa: E402
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


def test_reason_and_why_never_judge_speeds_timed_apart():
    """The candidates' runs were timed one after another: however far apart their step quartiles lie, the rule's
    speed tie-break is said to be not comparable, never "faster"."""
    for q_fast, q_slow in (((950, 1050), (750, 850)), ((600, 1400), (500, 1200)), (None, None)):
        rows = _rows(q_fast, q_slow)
        chosen, reason = screening.choose(rows)
        assert chosen["trunk"] == "reveuler_rev" and screening.TIMED_APART in reason
        why = screening.screening_verdicts(rows)["why"]
        assert why["fast"] == f"picked: the fastest fp32-stream candidate in the tie by its median step, though the " \
                              f"speeds are {screening.TIMED_APART}"
        assert why["slow"].startswith("in the tie, slower than the pick") and screening.TIMED_APART in why["slow"]
        assert why["exact"] == "in the tie, but on the fixed stream: the rule prefers fp32"
        assert why["bad"].startswith("reconstruction error 1.0e-01 is over the limit")
    assert "1,000 tokens/s (median step; quartiles 950-1,050)" in screening.choose(_rows((950, 1050), (750, 850)))[1]


def test_bars_share_rows_and_label_exact_zeros():
    rows = _rows((950, 1050), (750, 850))
    fig = screening.plot_screening_bars(rows)
    loss, speed, recon = fig.axes
    assert loss.get_shared_y_axes().joined(loss, recon) and loss.get_shared_y_axes().joined(loss, speed)
    assert [t.get_text() for t in loss.get_yticklabels()] == [r["name"] for r in rows]
    labels = {round(t.get_position()[1]): t.get_text().strip() for t in recon.texts}
    assert labels == {0: "no inverse", 1: "1.0e-06", 2: "1.0e-06", 3: "exactly 0", 4: "1.0e-01"}
    assert not loss.patches and not recon.patches      # dots, not bars, where an axis has no zero to measure from
    zero = [ln for ln in recon.get_lines() if ln.get_ydata()[0] == 3][0]
    assert zero.get_markerfacecolor() == "white" and zero.get_xdata()[0] <= recon.get_xlim()[0] * 1.6
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


def test_exactness_lesson_follows_the_measurement():
    exact = {"stream": "fp64", "model_dtype": "float32", "n_layer": 2, "as_trained": 0.0, "float64_blocks": 3.7e-15}
    text = screening.exactness_lesson(exact)
    assert "exactly 0 (a true zero" in text and "float32 number" in text and "3.7e-15" in text
    rounded = dict(exact, as_trained=2e-16)
    text = screening.exactness_lesson(rounded)
    assert "2.0e-16" in text and "did round" in text and "exactly 0" not in text
    assert "still rebuilds exactly" in screening.exactness_lesson(dict(exact, float64_blocks=0.0))


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


def test_a_stream_is_measured_on_its_fp32_twins_weights_and_the_lesson_follows_the_numbers(tmp_path, smoke_data):
    """The fixed stream on trained fp32 weights: the same function (its loss is the run's, a paired difference of
    0 here), an exact rebuild (the fp32 run itself rounds), its own speed; the stream without a twin trains."""
    from rev.chapters.screening import screening_takeaways, stream_lesson

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
    assert vs["verdict"] in (FASTER, SLOWER, TOO_NOISY) and "Against its fp32 twin, timed interleaved" in \
        screening_takeaways(result)
    assert "1 candidate of 4 is another stream" in screening_takeaways(result)
    found = screening.exactness_by_block_dtype(tmp_path / "smoke" / "screening" / fixed["weights"], smoke_data,
                                               stream="fp64")   # notebook 03's fp64 lesson, on the twin's weights
    assert found["stream"] == "fp64" and found["as_trained"] == 0.0 < found["float64_blocks"]
    again = screening.screen("smoke", tmp_path, smoke_data, cands, progress=False)   # cached: the same numbers
    assert again["runs"] == result["runs"]
    wide = stream_lesson([dict(fixed, loss_vs_fp32=0.05)], screening.FALLBACK_TIE)
    assert "more than the screening's" in wide and "5.0e-02" in wide
    at_the_tie = stream_lesson([dict(fixed, loss_vs_fp32=0.25)], Tie(0.25, "a test", measured=False))
    assert "inside the screening's 0.25-nat loss tie" in at_the_tie     # the boundary belongs to the tie


def test_integrators_are_compared_at_an_equal_coefficient_on_f():
    from rev.chapters.screening.takeaways import like_for_like

    rows = [dict(_row("m", "midpoint_rev", "fp32", 3.962, 1, 1e-6), h=0.5, name="midpoint_rev_h0.5_fp32"),
            dict(_row("e1", "reveuler_rev", "fp32", 4.209, 1, 1e-6), h=1.0, name="reveuler_rev_h1_fp32"),
            dict(_row("e5", "reveuler_rev", "fp32", 4.695, 1, 1e-6), h=0.5, name="reveuler_rev_h0.5_fp32")]
    text = like_for_like(rows)
    assert "`midpoint_rev_h0.5_fp32` 3.962 against `reveuler_rev_h1_fp32` 4.209 (-0.247 nats, coefficient 1)" in text
    assert "reveuler_rev_h0.5_fp32" not in text and like_for_like(rows[1:]) is None


