"""One colour per run, trunk and stream across the book (rev.chapters.shared.palette)."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from rev.chapters.shared import palette  # noqa: E402
from rev.chapters.shared.figures import _COLOURS  # noqa: E402
from rev.chapters.shared.run_plots import plot_runs  # noqa: E402


def _log(folder, losses):
    folder.mkdir(parents=True)
    rows = ["step,tokens,loss,lr,grad_norm,tokens_per_s,val_loss"]
    rows += [f"{i},{(i + 1) * 100},{v},0.001,1.0,1000,{v if i == len(losses) - 1 else ''}" for i, v in enumerate(losses)]
    (folder / "log.csv").write_text("\n".join(rows) + "\n")
    return folder


def test_a_run_has_its_colour_in_every_figure_whatever_its_order(tmp_path):
    run3 = _log(tmp_path / "run3_reversible_max_batch", [6.0, 5.0, 4.0])
    run2 = _log(tmp_path / "run2_reversible_same_batch", [6.0, 5.5, 5.0])
    for order in ({"a": run3, "b": run2}, {"b": run2, "a": run3}):
        fig = plot_runs(order)
        legend = fig.axes[0].get_legend()   # one key per run, in its colour; the curves drawn in the same
        by_label = {t.get_text(): mcolors.to_hex(h.get_color()) for t, h in zip(legend.get_texts(), legend.legend_handles)}
        assert by_label["a"] == palette.RUNS["run3_reversible_max_batch"]
        assert by_label["b"] == palette.RUNS["run2_reversible_same_batch"]
        drawn = {mcolors.to_hex(line.get_color()) for line in fig.axes[0].get_lines()}
        assert {by_label["a"], by_label["b"]} <= drawn
        plt.close(fig)
    assert _COLOURS["run3_reversible_max_batch"] == palette.RUNS["run3_reversible_max_batch"]


def test_families_do_not_share_a_colour():
    streams, backwards = set(palette.STREAMS.values()), set(palette.BACKWARDS.values()) - {palette.RUNS[
        "run2_reversible_same_batch"]}
    assert not streams & set(palette.RUNS.values()) and not streams & set(palette.INTEGRATORS.values())
    assert not backwards & streams
    assert palette.integrator_colour("midpoint_rev") == palette.integrator_colour("midpoint") != \
        palette.integrator_colour("reveuler_rev")


def test_report_losses_and_exactness_are_dots_on_axes_that_tell_the_truth():
    """A loss axis zoomed to the runs (never below 0: it once ran to -1.5) and a log axis have no zero to start
    a bar at: dots; an exact reconstruction is a hollow dot on the floor, labelled."""
    import pandas as pd

    from rev.chapters.shared.figures import plot_reconstruction_error, plot_val_loss

    df = pd.DataFrame({"run": ["run1_baseline", "run1b_baseline_maxbatch", "run3_reversible_max_batch"],
                       "label": ["baseline", "baseline max batch", "reversible max batch"],
                       "trunk": ["residual", "residual", "midpoint_rev"], "h": [1.0, 1.0, 0.5],
                       "stream": ["fp32", "fp32", "fixed"], "batch_size": [16, 4, 55], "tokens": [8e5] * 3,
                       "final_val_loss": [1.655, 0.55, 5.01], "reconstruction_error": [None, None, 0.0],
                       "screening": [False] * 3, "chosen": [False] * 3})
    fig = plot_val_loss(df)
    ax = fig.axes[0]
    assert not ax.patches and ax.get_ylim()[0] >= 0
    plt.close(fig)
    fig = plot_reconstruction_error(df.assign(reconstruction_error=[None, 3e-6, 0.0]))
    ax = fig.axes[0]
    assert not ax.patches and "exactly 0" in [t.get_text() for t in ax.texts]
    hollow = [ln for ln in ax.get_lines() if ln.get_markerfacecolor() == "white"]
    assert len(hollow) == 1 and hollow[0].get_ydata()[0] == ax.get_ylim()[0] * 2
    plt.close(fig)


def test_companion_arms_have_hues_no_run_trunk_or_stream_uses_and_cyan_is_always_the_control():
    taken = (set(palette.RUNS.values()) | set(palette.INTEGRATORS.values()) | set(palette.STREAMS.values())
             | set(palette.BACKWARDS.values()) | {palette.SCREENING, palette.OTHER})
    assert not set(palette.ARMS.values()) & taken and len(set(palette.ARMS.values())) == len(palette.ARMS)
    from rev.chapters.adaptive.findings import variant_colour
    from rev.chapters.thermo.findings import ARM_STYLE

    assert variant_colour("fp32 fixed (span 3)") == ARM_STYLE[1.0][1] == palette.ARMS["control"]
    assert variant_colour("fp32 adaptive") == palette.ARMS["policy"]
    assert variant_colour("fp64 stream") == palette.STREAMS["fp64"]
    assert palette.sweep_colours(4) == sorted(set(palette.sweep_colours(4)), key=palette.sweep_colours(4).index)


def test_the_rank_controller_figure_draws_its_arms_in_the_arm_colours():
    import pandas as pd

    from rev.chapters.lowrank import comparison_figure

    rows = [{"seed": s, "arm": a, "rank": 3 + (a == "fixed"), "peak_bytes": 1e6, "grad_rel_err": 0.1,
             "accuracy": 0.8} for s in range(2) for a in ("controller", "fixed")]
    table = pd.DataFrame(rows)
    table.attrs["logs"] = {(s, a): [{"loss": 1.0}, {"loss": 0.5}] for s in range(2) for a in ("controller", "fixed")}
    fig = comparison_figure(table)
    by_label = {ln.get_label(): mcolors.to_hex(ln.get_color()) for ln in fig.axes[2].get_lines()}
    assert by_label == {"controller": palette.ARMS["policy"], "fixed": palette.ARMS["control"]}
    plt.close(fig)


def test_a_check_against_a_broken_variant_takes_hues_no_run_trunk_or_stream_uses():
    taken = (set(palette.RUNS.values()) | set(palette.INTEGRATORS.values()) | set(palette.STREAMS.values())
             | set(palette.BACKWARDS.values()) | set(palette.ARMS.values()))
    assert not set(palette.CHECKS.values()) & taken and len(set(palette.CHECKS.values())) == 2


def test_no_figure_takes_matplotlibs_default_cycle_instead_of_the_palette():
    """`color="C1"` means whatever matplotlib's cycle puts there: blue or orange would mean an integrator in one
    figure and a stream in the next. Every figure's colours come from `rev.chapters.shared.palette`."""
    import json
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    default = re.compile(r"""color\s*=\s*["']C\d["']|["']C\d["']\s*[,)]|COLORS\s*=\s*\{\s*["']\w+["']\s*:\s*["']C\d""")
    sources = {p: p.read_text() for p in (root / "rev").rglob("*.py")}
    for nb in (root / "notebooks").glob("*.ipynb"):
        sources[nb] = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"]
                                if c["cell_type"] == "code")
    offenders = [f"{p.relative_to(root)}: {m.group(0)}" for p, text in sources.items() for m in default.finditer(text)]
    assert not offenders, offenders


def test_every_run_has_a_colour_of_its_own_in_the_figures(tmp_path):
    """Seven runs, seven colours: two runs drawn alike could not be told apart in any figure."""
    assert len(set(palette.RUNS.values())) == len(palette.RUNS)
    assert palette.SCREENING not in palette.RUNS.values()
    runs = {name: _log(tmp_path / name, [6.0, 5.0 - i / 10, 4.0]) for i, name in enumerate(palette.RUNS)}
    fig = plot_runs(runs)
    legend = fig.axes[0].get_legend()
    drawn = {t.get_text(): mcolors.to_hex(h.get_color()) for t, h in zip(legend.get_texts(), legend.legend_handles)
             if t.get_text() in runs}     # the others key the line styles (training, validation)
    assert set(drawn) == set(runs) and len(set(drawn.values())) == len(runs)
    plt.close(fig)


def test_a_trunk_benched_twice_gets_two_labels_and_token_axes_read_with_separators(tmp_path):
    from rev.chapters.shared.figures import _bench_label

    labels = {_bench_label({"trunk": "midpoint_rev", "batch_slice": 8}, False),
              _bench_label({"trunk": "midpoint_rev", "batch_slice": 0}, False),
              _bench_label({"trunk": "midpoint", "batch_slice": None}, True)}
    assert labels == {"midpoint_rev\n(slices of 8)", "midpoint_rev\n(whole batch)", "midpoint\n(stored twin)"}
    fig = plot_runs({"a": _log(tmp_path / "run1_baseline", [6.0, 5.0, 4.0]),
                     "b": _log(tmp_path / "run2_reversible_same_batch", [6.0, 5.5, 5.0])})
    ax = fig.axes[0]
    assert [a.xaxis.get_major_formatter()(700000, 0) for a in (ax, *ax.child_axes)] == ["700,000", "700,000"]  # inset too
    plt.close(fig)

