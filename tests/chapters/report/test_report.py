"""The report: tables, findings, REPORT.md and merging, on run folders written by real (tiny) training runs."""
import json
import shutil
import zipfile
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from rev.chapters.report import writer as report  # noqa: E402
from rev.chapters.report.headline import headline_lines  # noqa: E402
from rev.__main__ import main  # noqa: E402
from rev.base.results_folder import make_results_archive, merge  # noqa: E402
from rev.chapters.shared.figures import plot_loss_vs_tokens, plots  # noqa: E402
from rev.chapters.shared.results import deep_capped, headline, load_all, load_runs, published_reference  # noqa: E402
from rev.data.corpus import prepare_profile  # noqa: E402
from rev.base.profiles import get_profile  # noqa: E402
from rev.training.loop import TrainConfig, train  # noqa: E402

PROFILE = "smoke"
ONE_BATCH = 8 * 64                  # smoke: batch 8, sequence 64
T4 = "Tesla T4 (cuda), float16 compute"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """results/smoke with a baseline, a reversible run at the same batch, a screening run and maxbatch.json."""
    data = tmp_path_factory.mktemp("data")
    prepare_profile(get_profile(PROFILE), data, progress=False)
    root = tmp_path_factory.mktemp("results")
    prof = root / PROFILE
    # on the CPU wherever the suite runs: the tests below read the runs' device back ("CPU ...")
    kw = dict(profile=PROFILE, data_dir=data, train_tokens=4 * ONE_BATCH, eval_every=2, progress=False, device="cpu")
    base = train(TrainConfig(trunk="residual", out_dir=prof / "run1_baseline", **kw))
    rev = train(TrainConfig(trunk="reveuler_rev", out_dir=prof / "run2_reversible_same_batch", **kw))
    # the screening's chosen run is the same configuration; copying it keeps the fixture fast
    shutil.copytree(prof / "run2_reversible_same_batch", prof / "screening" / "reveuler_rev_h1.0_fp32",
                    ignore=shutil.ignore_patterns("ckpt.pt"))
    (prof / "screening.json").write_text(json.dumps({
        "runs": [{"run": "reveuler_rev_h1.0_fp32", "final_val_loss": rev["final_val_loss"]}],
        "chosen": {"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"}, "reason": "lowest validation loss"}))
    budget = 3 * base["peak_memory_bytes"]

    def search(trunk: str, batch: int, peak_at_8: int) -> dict:
        # probes scaled from the measured peak at batch 8, as the doubling + bisection search would leave them
        probes = [{"batch": b, "peak_bytes": peak_at_8 * b // 8, "fits": peak_at_8 * b // 8 <= budget}
                  for b in (8, 16, batch, batch + 1)]
        return {"trunk": trunk, "batch": batch, "budget_bytes": budget, "probes": probes}

    (prof / "maxbatch.json").write_text(json.dumps({
        "budget_bytes": budget, "residual": search("residual", 24, base["peak_memory_bytes"]),
        "reveuler_rev": search("reveuler_rev", 40, rev["peak_memory_bytes"])}))
    return root


@pytest.fixture(scope="module")
def runs(results):
    return load_runs(results, PROFILE)


def _summary(results: Path, run: str) -> dict:
    return json.loads((results / PROFILE / run / "summary.json").read_text())


def _median_speed(results: Path, run: str) -> float:
    """A run's tokens/s as `load_runs` reads it: the median of its timed steps."""
    from rev.chapters.shared.run_log import speed_spread

    return speed_spread(results / PROFILE / run)[1]


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_load_runs_has_one_row_per_run_and_flags_screening(runs):
    assert list(runs["run"]) == ["run1_baseline", "run2_reversible_same_batch", "reveuler_rev_h1.0_fp32"]
    assert list(runs["screening"]) == [False, False, True]
    assert runs.loc[runs["screening"], "chosen"].all()
    assert set(runs.attrs["missing"]) == {"run1b_baseline_maxbatch", "run3_reversible_max_batch",
                                          "run4_reversible_deep"}
    assert (runs["device"].str.startswith("CPU")).all() and (runs["status"] == "complete").all()


def test_headline_has_the_expected_rows_and_measured_ratios(runs, results):
    h = headline(runs).set_index("key")
    assert list(h.index) == ["val_loss", "peak_memory", "max_batch", "tokens_per_s", "reconstruction_error",
                             "val_loss_max_batch", "deep_layers"]
    base, rev = _summary(results, "run1_baseline"), _summary(results, "run2_reversible_same_batch")
    assert h.loc["peak_memory", "ratio"] == pytest.approx(rev["peak_memory_bytes"] / base["peak_memory_bytes"])
    # throughput comes from the interleaved bench alone: these runs have none, so the row is empty, whatever the
    # runs' own (timed apart) tokens/s
    assert h.loc["tokens_per_s"].isna()[["baseline", "reversible", "ratio"]].all()
    assert _median_speed(results, "run1_baseline") > 0
    assert h.loc["max_batch", "ratio"] == pytest.approx(40 / 24)
    # both runs end on the same evaluation, so "equal tokens" is their final validation loss
    assert h.loc["val_loss", "baseline"] == pytest.approx(base["final_val_loss"])
    assert h.loc["val_loss", "reversible"] == pytest.approx(rev["final_val_loss"])
    assert h.loc["reconstruction_error", "reversible"] == pytest.approx(rev["reconstruction_error"])
    assert h.loc["max_batch", "published_ratio"] == pytest.approx(432 / 152)
    assert h.loc["val_loss_max_batch"].isna()[["baseline", "reversible"]].all()   # those runs are missing
    text = report.format_headline(headline(runs))
    assert text.iloc[2]["baseline"] == "24" and text.iloc[2]["reversible vs baseline"] == "1.667x"
    loss = text.iloc[0]   # a cross-entropy is compared as a difference, never a ratio
    assert loss["reversible vs baseline"] == f"{rev['final_val_loss'] - base['final_val_loss']:+.3f} nats"
    assert loss[report.PUBLISHED_SOURCE].endswith("nats (another corpus)") and "x" not in loss["reversible vs baseline"]


def test_report_states_the_measured_ratios_and_no_run_speed(runs, results):
    base, rev = _summary(results, "run1_baseline"), _summary(results, "run2_reversible_same_batch")
    text = report.report_markdown(runs)
    ratio = rev["peak_memory_bytes"] / base["peak_memory_bytes"]
    assert f"the baseline's {base['peak_memory_bytes'] / 2**20:,.1f} MiB: {ratio:.2f}x" in text
    assert f"**In one line**: {ratio:.2f}x the memory" in text
    assert "the reversible trunk fits batch 40 against the baseline's 24: 1.67x the batch" in text
    assert f"{_median_speed(results, 'run2_reversible_same_batch'):,.0f}" not in text   # timed apart
    assert "published" in text


def test_unigram_line_is_measured_and_stated(runs, results):
    base = _summary(results, "run1_baseline")
    assert 0 < base["unigram_val_loss"] < 7  # below ln(512) = 6.24 plus smoothing slack on the smoke corpus
    assert base["unigram_val_loss"] == _summary(results, "run2_reversible_same_batch")["unigram_val_loss"]
    fig = plot_loss_vs_tokens(runs)
    assert any(line.get_label() == "context-free (unigram) model" for line in fig.axes[1].lines)


def test_a_depth_search_at_its_layer_cap_is_capped():
    capped = {"budget_bytes": 100 * 2**20, "n_layer": 12, "max_layers": 12}
    assert not deep_capped(None) and deep_capped(capped) and not deep_capped({**capped, "max_layers": 64})


def test_headline_and_plots_survive_an_empty_profile(tmp_path):
    df = load_runs(tmp_path, PROFILE)
    assert len(df) == 0 and headline_lines(df)[0] == "**Memory**: not measured (needs `run1_baseline` and " \
        "`run2_reversible_same_batch`)."
    assert headline(df)["ratio"].isna().all()
    for fig in plots(df).values():
        assert fig.axes


def test_a_damaged_summary_is_named_not_fatal(results, tmp_path):
    shutil.copytree(results / PROFILE, tmp_path / PROFILE, ignore=shutil.ignore_patterns("ckpt.pt"))
    (tmp_path / PROFILE / "run2_reversible_same_batch" / "summary.json").write_text("{not json")
    df = load_runs(tmp_path, PROFILE)
    row = df.set_index("run").loc["run2_reversible_same_batch"]
    assert row["status"].startswith("incomplete") and row["final_val_loss"] > 0   # read from its log instead
    assert "run2_reversible_same_batch/summary.json (unreadable)" in "\n".join(report.broken_lines(df))
    assert "summary.json (unreadable)" in report.report_markdown(df)


def test_published_reference_is_labelled():
    ref = published_reference().set_index("key")
    assert (ref["source"] == "published, RTX 5070 Ti, bf16").all()
    assert ref.loc["max_batch", "ratio"] == pytest.approx(2.84, abs=0.01)
    assert ref.loc["tokens_per_s", "ratio"] == pytest.approx(0.65, abs=0.01)


def test_write_report_writes_markdown_and_pngs(results):
    path = report.write_report(results, PROFILE)
    text = path.read_text()
    assert path == results / PROFILE / "REPORT.md"
    assert "## Headline" in text and "published, RTX 5070 Ti, bf16" in text and "run1_baseline" in text
    pngs = sorted((results / PROFILE / "plots").glob("*.png"))
    assert {p.stem for p in pngs} == {"loss_vs_tokens", "val_loss", "tokens_per_s", "peak_memory", "max_batch",
                                      "reconstruction_error"}
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"plots/{p.name}" in text
    assert not [p for p in (results / PROFILE).iterdir() if p.name.startswith(".")]  # no scratch left


def test_cli_writes_the_report(results, capsys):
    assert main(["report", "--profile", PROFILE, "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert "peak memory at batch 8" in out and "REPORT.md" in out


def _as_if_from_t4(results: Path, tmp_path: Path) -> Path:
    """A results archive of the same runs, relabelled as made on a T4 (what Colab would send back)."""
    other = tmp_path / "colab_results"
    shutil.copytree(results / PROFILE, other / PROFILE)
    for s in (other / PROFILE).rglob("summary.json"):
        s.write_text(json.dumps({**json.loads(s.read_text()), "device": T4}))
    return make_results_archive(PROFILE, other, tmp_path / "results-smoke.zip")


def test_merge_keeps_both_devices_side_by_side(results, tmp_path):
    root = tmp_path / "mine"
    shutil.copytree(results, root)
    before = _snapshot(root / PROFILE)
    written = merge(_as_if_from_t4(results, tmp_path), root)
    assert written == [root / "smoke-tesla-t4"]           # local CPU runs of that profile stay untouched
    assert _snapshot(root / PROFILE) == before
    merged = load_runs(root, "smoke-tesla-t4")
    assert (merged["device"] == T4).all() and merged["origin"].str.startswith("merged").all()
    assert not any(merged["path"].map(lambda p: (Path(p) / "ckpt.pt").exists()))
    both = load_all(root)
    assert set(both["device"]) == {T4, _summary(results, "run1_baseline")["device"]}
    assert "device" in both and set(both["profile"]) == {PROFILE, "smoke-tesla-t4"}
    text = report.report_markdown(load_runs(root, PROFILE), all_runs=both)
    assert "All results in this folder" in text and T4 in text


def test_merge_into_an_empty_root_uses_the_profile_name(results, tmp_path):
    assert merge(_as_if_from_t4(results, tmp_path), tmp_path / "fresh") == [tmp_path / "fresh" / PROFILE]


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path


@pytest.mark.parametrize("kind", ["not_zip", "code_bundle", "escape", "no_runs", "wrong_marker"])
def test_merge_refuses_a_bad_archive_and_touches_nothing(results, tmp_path, kind):
    bad = tmp_path / "bad.zip"
    if kind == "not_zip":
        bad.write_text("this is not a zip")
    else:
        _zip(bad, {
            "code_bundle": {"revbook/rev/__init__.py": "", "revbook/pyproject.toml": ""},
            "escape": {"results/smoke/../../evil/summary.json": "{}"},
            "no_runs": {"results/smoke/notes.txt": "hello"},
            "wrong_marker": {"results/smoke/ARCHIVE.json": '{"kind": "other"}',
                             "results/smoke/run1_baseline/summary.json": "{}"},
        }[kind])
    before = _snapshot(results)
    with pytest.raises(ValueError, match="not a revbook results archive"):
        merge(bad, results)
    assert _snapshot(results) == before
    assert not [p for p in results.iterdir() if p.name.startswith(".merge")]


def test_loss_and_time_ranks_runs_and_says_who_wins(runs, results):
    from rev.chapters.shared.results import loss_and_time

    table = loss_and_time(runs)
    assert list(table["val_loss"]) == sorted(table["val_loss"])
    base = _summary(results, "run1_baseline")
    row = table.set_index("run").loc["run1_baseline"]
    assert row["tokens"] == base["tokens"] and row["val_loss"] == pytest.approx(base["final_val_loss"])
    assert row["train_seconds"] == pytest.approx(base["tokens"] / _median_speed(results, "run1_baseline"))


def test_stored_bytes_per_layer_is_the_slope_difference_per_layer(runs, results):
    from rev.chapters.shared.results import stored_bytes_per_layer

    mb = runs.attrs["maxbatch"]
    base, rev = _summary(results, "run1_baseline"), _summary(results, "run2_reversible_same_batch")
    expected = (base["peak_memory_bytes"] - rev["peak_memory_bytes"]) / 8 / base["n_layer"]  # fixture: peak ∝ batch
    got = stored_bytes_per_layer(mb["residual"]["probes"], mb["reveuler_rev"]["probes"], base["n_layer"])
    assert got == pytest.approx(expected, rel=1e-3)
    assert stored_bytes_per_layer([], mb["reveuler_rev"]["probes"], 2) is None


def test_worst_reconstruction_and_exercise_checks(runs):
    from rev.chapters.report import exercises as rx
    from rev.chapters.report.evidence import worst_reconstruction
    from rev.chapters.shared.results import stored_bytes_per_layer

    run, err = worst_reconstruction(runs)
    assert run in set(runs["run"]) and err == runs["reconstruction_error"].max()
    assert "bytes per layer per sequence" in rx.check_stored_bytes_per_layer(stored_bytes_per_layer)
    assert "above the 0.01 limit" in rx.check_with_reconstruction_error(rx.with_reconstruction_error)
    with pytest.raises(AssertionError, match="divide by n_layer"):
        rx.check_stored_bytes_per_layer(lambda b, r, n: n * stored_bytes_per_layer(b, r, n))
    def residual_slope_only(b, r, n):   # the likely slip: forgetting what both trunks store (embeddings, logits)
        import numpy as np
        pts = np.array([(p["batch"], p["peak_bytes"]) for p in b], dtype=float)
        return float(np.polyfit(pts[:, 0], pts[:, 1], 1)[0]) / n
    with pytest.raises(AssertionError, match="subtract the reversible slope"):
        rx.check_stored_bytes_per_layer(residual_slope_only)

    def in_place(df, err):   # edits the frame it was given: the report would read the edit back
        df.loc[df["reconstruction_error"].notna(), "reconstruction_error"] = err
        return df
    with pytest.raises(AssertionError, match="edit a copy"):
        rx.check_with_reconstruction_error(in_place)
    with pytest.raises(AssertionError, match="the baseline has no inverse"):
        rx.check_with_reconstruction_error(lambda df, err: df.assign(reconstruction_error=err))


def test_the_runs_table_gives_the_residual_no_step_size_and_names_the_runner_up():
    import pandas as pd

    from rev.chapters.report.evidence import runs_table

    df = pd.DataFrame({"run": ["run1_baseline", "run2b_screening_runner_up"], "trunk": ["residual", "reveuler_rev"],
                       "h": [1.0, 0.5], "stream": ["fp32", "fp32"], "n_layer": [6, 6], "batch_size": [16, 16],
                       "tokens": [1000, 1000], "final_val_loss": [2.0, 2.1]})
    t = runs_table(df).set_index("run")
    assert t.loc["run1_baseline", "h"] == "—" and t.loc["run2b_screening_runner_up (runner-up)", "h"] == "0.5"
