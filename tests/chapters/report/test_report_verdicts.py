"""The report's headline, findings and exercise 07.1's answer on *contradicting* results: every sentence that states
a measured outcome must turn with the numbers (a slower or faster reversible step in the interleaved bench, a deep
run that loses or wins, a bench interval holding 1, a loss gap exactly at the tie), runs timed apart get no speed
verdict however their timings read, and REPORT.md must say no paragraph twice."""
import csv
import json
import shutil
from pathlib import Path

from rev.chapters.report import writer as report
from rev.chapters.report.evidence import worst_reconstruction
from rev.chapters.report.headline import conclusion_line, drifted_runs, headline_lines, spent_line
from rev.chapters.screening import distinct_runner_up
from rev.chapters.shared.results import BENCH_FILE, load_runs
from rev.chapters.shared.verdicts import TOO_NOISY

PROFILE = "smoke"
SEQ = 64


def _run(folder: Path, trunk: str, batch: int, speeds: list[float], val_end: float, peak_mib: float,
         n_layer: int = 2, recon: float | None = None, device: str = "CPU (cpu), fp32 compute") -> None:
    """A finished run folder as `train` leaves it, without training: one log row per entry of `speeds` (that
    step's tokens/s), validation loss falling linearly from 6.0 to `val_end`; the summary's tokens/s is the
    harmonic mean over the timed steps (what `train` reports), the first two steps being warm-up."""
    folder.mkdir(parents=True)
    per, steps = batch * SEQ, len(speeds)
    with open(folder / "log.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "tokens", "loss", "lr", "grad_norm", "tokens_per_s", "val_loss"])
        for s, v in enumerate(speeds):
            w.writerow([s, (s + 1) * per, 6.0, 1e-3, 1.0, v, 6.0 + (val_end - 6.0) * (s + 1) / steps])
    timed = speeds[2:]
    (folder / "summary.json").write_text(json.dumps({
        "trunk": trunk, "h": 1.0, "stream": "fp32", "n_layer": n_layer, "batch_size": batch, "steps": steps,
        "tokens": steps * per, "final_val_loss": val_end, "final_train_loss": val_end,
        "tokens_per_s": len(timed) / sum(1 / v for v in timed), "reconstruction_error": recon,
        "unigram_val_loss": 6.5, "peak_memory_bytes": int(peak_mib * 2**20), "device": device,
        "config": {"seed": 0}}))


def _steady(v: float, n: int = 40) -> list[float]:
    """Per-step speeds within 1% of `v`: a quiet machine."""
    return [v * (1 + 0.01 * ((i % 3) - 1)) for i in range(n)]


def _busy(v: float, n: int = 40) -> list[float]:
    """Per-step speeds swinging between half and 1.5x `v`: a machine under changing load."""
    return [v * (0.5 if i % 2 else 1.5) for i in range(n)]


def _results(tmp_path: Path, base_speeds, rev_speeds, rev_val: float = 4.51, rev_peak: float = 4.0,
             deep_val: float = 4.4, rev_batch_max: int = 40, device: str = "CPU (cpu), fp32 compute") -> Path:
    """A profile folder with all five main runs and maxbatch.json; the numbers that matter are the arguments."""
    prof = tmp_path / PROFILE
    _run(prof / "run1_baseline", "residual", 8, base_speeds, 4.5, 8.0, device=device)
    _run(prof / "run2_reversible_same_batch", "reveuler_rev", 8, rev_speeds, rev_val, rev_peak, recon=1e-6,
         device=device)
    _run(prof / "run1b_baseline_maxbatch", "residual", 20, _steady(3000, 16), 4.6, 15.0, device=device)
    _run(prof / "run3_reversible_max_batch", "reveuler_rev", rev_batch_max, _steady(2000, 8), 4.7, 15.0,
         recon=1e-6, device=device)
    _run(prof / "run4_reversible_deep", "reveuler_rev", 8, _steady(600), deep_val, 7.5, n_layer=5, recon=1e-6,
         device=device)
    (prof / "maxbatch.json").write_text(json.dumps({
        "budget_bytes": 16 * 2**20, "residual": {"trunk": "residual", "batch": 20},
        "reveuler_rev": {"trunk": "reveuler_rev", "batch": rev_batch_max}}))
    (prof / "screening.json").write_text(json.dumps({
        "runs": [], "chosen": {"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"}, "reason": "test"}))
    return tmp_path


def _bench(root: Path, base: list[float], rev: list[float], batch: int = 8, twin: list[float] | None = None) -> None:
    """Notebook 05's interleaved bench at `batch`: residual and reveuler_rev (and, given `twin`, the stored twin
    reveuler and reveuler_rev on the whole batch), one step of each per round."""
    rows = [{"trunk": "residual", "step_times": base}, {"trunk": "reveuler_rev", "step_times": rev, "batch_slice": 4}]
    if twin is not None:
        rows += [{"trunk": "reveuler", "step_times": twin},
                 {"trunk": "reveuler_rev", "step_times": [t / 0.75 for t in twin], "batch_slice": 0}]
    (root / PROFILE / BENCH_FILE).write_text(json.dumps({"batch": batch, "seq_len": SEQ, "rounds": len(base),
                                                         "runs": rows}))


def _headline(root: Path) -> dict[str, str]:
    lines = headline_lines(load_runs(root, PROFILE))
    return {line.split("**")[1]: line for line in lines}


SPEED_WORDS = ("faster", "slower", "too noisy")


def _speed_verdicts(text: str) -> list[str]:
    """The lines of `text` that draw a speed verdict (a line that names a prediction and says it was not tested
    draws none)."""
    return [line for line in text.splitlines() if any(w in line.lower() for w in SPEED_WORDS)
            and "**not tested**" not in line]


def test_the_throughput_line_turns_with_the_bench_and_never_reads_the_runs(tmp_path):
    """Slower, faster and too noisy come from the interleaved bench; the runs' own speeds (here 1000 and 700,
    "slower" by any run-to-run statistic) are never read: without a bench the line says not measured."""
    rounds = [1.0 + 0.1 * (i % 4) for i in range(15)]           # the load moves from round to round
    cases = {"slower": [t / 0.8 for t in rounds], "faster": [t / 1.3 for t in rounds],
             "noisy": [t * (0.6 if i % 2 else 1.6) for i, t in enumerate(rounds)]}
    lines = {}
    for name, rev in cases.items():
        root = _results(tmp_path / name, _steady(1000), _steady(700))
        _bench(root, rounds, rev)
        lines[name] = _headline(root)["Throughput"]
    assert "timed side by side" in lines["slower"] and "slower by 20%" in lines["slower"]
    assert "faster by 30%" in lines["faster"] and "slower" not in lines["faster"]
    assert TOO_NOISY in lines["noisy"] and "slower by" not in lines["noisy"]
    assert "bootstrap interval of the median over 15 interleaved rounds" in lines["slower"]
    # the residual differs in architecture too: its ratio is never called the price of recomputation
    assert "architecture together" in lines["slower"] and "price of recomputing" not in lines["slower"]
    root = _results(tmp_path / "twin", _steady(1000), _steady(700))
    _bench(root, rounds, cases["slower"], twin=[t * 1.1 for t in rounds])   # the twin: 1.1x the residual's time
    twin = _headline(root)["Throughput"]
    assert "against its stored twin, both on the whole batch, 0.75x" in twin
    assert "slower by 25%, the price of recomputing each block" in twin
    none = _headline(_results(tmp_path / "none", _steady(1000), _steady(700)))["Throughput"]
    assert none.startswith("**Throughput**: not measured") and "slower" not in none
    other_batch = _results(tmp_path / "other", _steady(1000), _steady(700))
    _bench(other_batch, rounds, cases["slower"], batch=16)       # a bench at another batch is not run 2's price
    assert _headline(other_batch)["Throughput"].startswith("**Throughput**: not measured")


def test_a_results_folder_timed_at_different_machine_speeds_gets_no_speed_verdict_between_runs(tmp_path):
    """Five runs, each timed on a machine running at its own speed (a load burst in one, a quiet machine for run 3,
    a busy one for run 1): re-reporting the folder draws no speed verdict between any two runs in REPORT.md; the
    only speed verdict is the bench's."""
    burst = _steady(1000, 20) + _steady(300, 20) + _steady(1000, 20)      # a burst of load in run 2's middle
    root = _results(tmp_path, _steady(250), burst)
    for name, speed in (("run3_reversible_max_batch", 8400), ("run1b_baseline_maxbatch", 120_000)):
        folder = root / PROFILE / name
        summary = json.loads((folder / "summary.json").read_text())
        shutil.rmtree(folder)
        _run(folder, summary["trunk"], summary["batch_size"], _steady(speed, summary["steps"]),
             summary["final_val_loss"], summary["peak_memory_bytes"] / 2**20, recon=summary["reconstruction_error"])
    report.write_report(root, PROFILE)
    text = (root / PROFILE / "REPORT.md").read_text()
    df = load_runs(root, PROFILE)
    assert _speed_verdicts(text) == [] and "tokens/s against" not in text
    assert _headline(root)["Throughput"].startswith("**Throughput**: not measured")
    # run 2's log carries its burst: the machine's speed changed during it (runs 3 and 1b logged too few steps to
    # tell), which notebook 07 tables beside the bench
    drifts = dict(drifted_runs(df))
    assert len(drifts) == 3 and [n for n, d in drifts.items() if d.changed] == ["run2_reversible_same_batch"]
    # with notebook 05's bench on record, its verdict is the one speed verdict of the page
    rounds = [1.0 + 0.1 * (i % 4) for i in range(15)]
    _bench(root, rounds, [t / 0.8 for t in rounds])
    report.write_report(root, PROFILE)
    verdicts = _speed_verdicts((root / PROFILE / "REPORT.md").read_text())
    # the bench's verdict, in its headline line and in the one-line conclusion that sums the headline up
    assert len(verdicts) == 2 and verdicts[0].startswith("**In one line**")
    assert "0.80x the tokens/s (slower)" in verdicts[0]
    assert verdicts[1].startswith("- **Throughput**") and "slower by 20%" in verdicts[1]


def test_memory_loss_and_batch_lines_turn_with_the_numbers(tmp_path):
    good = _headline(_results(tmp_path / "good", _steady(1000), _steady(700)))
    assert "a cut of 50%" in good["Memory"] and "the tie being a stated fallback" in good["Loss"]
    assert ": a tie, within 0.02 nats" in good["Loss"] and "2.00x the batch" in good["Batch"]
    bad = _headline(_results(tmp_path / "bad", _steady(1000), _steady(700), rev_val=4.7, rev_peak=9.0,
                             rev_batch_max=16))
    assert "no cut" in bad["Memory"] and "a cut" not in bad["Memory"]
    assert "run 2 lost by 0.200 nats" in bad["Loss"]
    assert "no larger batch" in bad["Batch"]


def test_a_loss_gap_exactly_at_the_tie_is_a_tie(tmp_path):
    """Run 1 at 4.5, run 2 at 4.75: a gap of exactly 0.25 nats (both exact in binary) against a measured seed tie of
    0.25 reads a tie; the wrong boundary (`<`) would call it a loss. A hair beyond it is a loss."""
    from rev.chapters.assignment.seeds import save_spread

    root = _results(tmp_path / "edge", _steady(1000), _steady(700), rev_val=4.75)
    spread = {"seeds": 2, "level": 0.95, "tie": 0.25, "sd": 0.1, "diff": [0.25, 0.2], "diff_mean": 0.225,
              "selected_seed": 0, "verdict_seeds": 1}
    save_spread(PROFILE, tmp_path / "edge", spread)
    assert "a tie, within 0.25 nats" in _headline(root)["Loss"]
    beyond = _results(tmp_path / "beyond", _steady(1000), _steady(700), rev_val=4.75 + 2 ** -20)
    save_spread(PROFILE, tmp_path / "beyond", spread)
    assert "run 2 lost by 0.250 nats" in _headline(beyond)["Loss"]


def test_the_worst_trained_reconstruction_is_the_largest_error_not_the_smallest(tmp_path):
    root = _results(tmp_path, _steady(1000), _steady(700))
    run3 = root / PROFILE / "run3_reversible_max_batch" / "summary.json"
    run3.write_text(json.dumps(json.loads(run3.read_text()) | {"reconstruction_error": 2.57e-3}))
    run2 = root / PROFILE / "run2_reversible_same_batch" / "summary.json"   # a fixed stream rebuilds exactly
    run2.write_text(json.dumps(json.loads(run2.read_text()) | {"reconstruction_error": 0.0}))
    assert worst_reconstruction(load_runs(root, PROFILE)) == ("run3_reversible_max_batch", 2.57e-3)
    df = load_runs(root, PROFILE)
    assert worst_reconstruction(df.assign(reconstruction_error=None)) is None     # no trunk measured one


def test_the_headline_says_what_spending_the_memory_bought_and_what_it_did_not(tmp_path):
    # fixture: run 2 ends at 4.51; run 3 (batch 40) at 4.7 on 8 steps of 40 x SEQ, run 4 (5 layers) at deep_val
    root = _results(tmp_path / "lost", _steady(1000), _steady(700), deep_val=4.6)
    lost = spent_line(load_runs(root, PROFILE))
    assert "on depth (5 layers) +0.090 nats" in lost and "on batch (batch 40)" in lost
    assert "neither spending beat the reversible trunk" in lost and "one seed each" in lost
    not_won = _headline(root)["Not won"]
    assert "on batch (batch 40) +0.190 nats; on depth (5 layers) +0.090 nats" in not_won
    assert "it did not pay" in _headline(root)["Batch"]
    won_root = _results(tmp_path / "won", _steady(1000), _steady(700), deep_val=4.3)
    won = spent_line(load_runs(won_root, PROFILE))
    assert "on depth (5 layers) -0.210 nats" in won and "it paid on depth" in won
    assert "on depth" not in _headline(won_root)["Not won"]           # what paid is not listed as not won
    # the run that ended lowest at equal tokens, named when it is not a reversible one (here run 1, at 4.5)
    assert "Lowest at 20,480 tokens: baseline (batch 8), 4.500." in _headline(root)["Not won"]
    assert "Lowest at" not in _headline(won_root)["Not won"]          # run 4, reversible, ended lowest there


def test_the_max_batch_ratio_is_said_to_follow_the_budget(tmp_path):
    """The budget (16 MiB) sits above run 1's own 8 MiB step here; below it (a 6 MiB budget), the line says the
    baseline's max batch is small because of it."""
    root = _results(tmp_path, _steady(1000), _steady(700))
    assert "The ratio follows the budget (16.0 MiB sits above the baseline's own 8.0 MiB step" in \
        _headline(root)["Batch"]
    mb = json.loads((root / PROFILE / "maxbatch.json").read_text())
    (root / PROFILE / "maxbatch.json").write_text(json.dumps(mb | {"budget_bytes": 6 * 2**20}))
    assert "6.0 MiB sits below the baseline's own 8.0 MiB step at batch 8, so the baseline fits only batch 20" in \
        _headline(root)["Batch"]


def test_report_opens_with_the_headline_and_says_no_paragraph_twice(tmp_path):
    root = _results(tmp_path, _steady(1000), _steady(700))
    text = report.report_markdown(load_runs(root, PROFILE))
    order = [text.index(s) for s in ("**In one line**", "## Headline", "## Evidence")]
    assert order == sorted(order) and text.splitlines()[2].startswith("**In one line**")   # the first screen
    assert "## Companion" not in text and "## Not measured" not in text     # one "not measured" line, not a section
    head = text.split("## Headline")[1].split("##")[0]
    assert [line.split("**")[1] for line in head.splitlines() if line.startswith("- ")] == \
        ["Memory", "Loss", "Batch", "Throughput", "Not won", "Not measured"]
    paragraphs = [p.strip() for p in text.split("\n") if p.strip() and not p.startswith(("|", "#", "!["))]
    repeated = {p for p in paragraphs if paragraphs.count(p) > 1}
    assert not repeated, f"said twice: {repeated}"


def test_the_not_measured_line_names_the_missing_gpu_only_when_there_is_none(tmp_path):
    _results(tmp_path / "cpu", _steady(1000), _steady(700))
    _results(tmp_path / "gpu", _steady(1000), _steady(700), device="Tesla T4 (cuda), fp16")
    assert "throughput and max batch on a GPU" in _headline(tmp_path / "cpu")["Not measured"]
    assert "on a GPU" not in _headline(tmp_path / "gpu")["Not measured"]
    assert "the seed-to-seed spread of the loss" in _headline(tmp_path / "cpu")["Not measured"]


def test_the_conclusion_line_turns_with_memory_speed_loss_and_spending(tmp_path):
    rounds = [1.0 + 0.1 * (i % 4) for i in range(15)]
    root = _results(tmp_path / "a", _steady(1000), _steady(700), deep_val=4.6)
    _bench(root, rounds, [t / 0.8 for t in rounds])
    line = conclusion_line(load_runs(root, PROFILE))
    assert line.startswith("**In one line**: 0.50x the memory, 0.80x the tokens/s (slower)")
    assert "loss against the baseline's: a tie" in line and "the freed memory did not pay" in line
    other = _results(tmp_path / "b", _steady(1000), _steady(700), rev_val=4.7, rev_peak=9.0, deep_val=4.3)
    line = conclusion_line(load_runs(other, PROFILE))
    assert line.startswith("**In one line**: 1.12x the memory, unmeasured tokens/s")
    assert "loss against the baseline's: higher" in line and "spent on depth, the freed memory paid" in line


def test_the_runner_up_differs_from_the_pick_in_trunk_or_h():
    def row(name, trunk, h, stream, val):
        return {"name": name, "trunk": trunk, "h": h, "stream": stream, "val_loss": val, "tokens_per_s": 1.0,
                "reconstruction_error": 0.0}
    screening = {"chosen": {"trunk": "reveuler_rev", "h": 1.0, "stream": "fp32"},
                 "runs": [row("pick", "reveuler_rev", 1.0, "fp32", 1.534),
                          row("twin", "reveuler_rev", 1.0, "fixed", 1.534),
                          row("mid", "midpoint_rev", 0.5, "fp32", 1.61), row("half", "reveuler_rev", 0.5, "fp32", 1.58),
                          {**row("bad", "midpoint_rev", 0.25, "fp32", 1.0), "reconstruction_error": 1.0}]}
    assert distinct_runner_up(screening)["name"] == "half"        # not the twin on another stream, not the bad one
    # within LOSS_TIE of the lowest, the screening's rule: an fp32 stream before a lower loss on the fixed stream
    tied = {**screening, "runs": screening["runs"] + [row("half_fixed", "reveuler_rev", 0.5, "fixed", 1.575)]}
    assert distinct_runner_up(tied)["name"] == "half"
    screening["runs"] = screening["runs"][:2]
    assert distinct_runner_up(screening) is None


def test_runs_that_trained_on_more_tokens_are_compared_at_the_shared_count(tmp_path):
    """The max-batch runs train on a larger budget; 07.1 compares every main run at the fewest tokens any trained
    on, reading the longer runs from their logs, instead of setting their final loss beside a shorter run's."""

    from rev.chapters.shared.results import loss_and_time

    root = _results(tmp_path, _steady(1000), _steady(700))
    folder = root / PROFILE / "run1b_baseline_maxbatch"
    shutil.rmtree(folder)
    _run(folder, "residual", 20, _steady(3000, 48), 3.0, 15.0)    # 3x the tokens, the lowest final loss
    df = load_runs(root, PROFILE)
    row = loss_and_time(df).set_index("run").loc["run1b_baseline_maxbatch"]
    assert row["trained_tokens"] == 3 * row["tokens"] == 61_440
    assert row["val_loss"] == 5.0                                 # 6 + (3 - 6) * 16 / 48, at 20,480 tokens
    assert row["tokens"] == loss_and_time(df)["tokens"].min()      # every run read at the one shared count


def test_without_an_evaluation_at_run_2s_tokens_the_spent_line_gives_a_bound(tmp_path):
    """Run 3 on twice run 2's tokens, evaluated only after them: its first evaluation bounds its gap from below."""
    root = _results(tmp_path, _steady(1000), _steady(700))
    folder = root / PROFILE / "run3_reversible_max_batch"
    shutil.rmtree(folder)
    _run(folder, "reveuler_rev", 40, _steady(2000, 16), 4.7, 15.0, recon=1e-6)
    log = (folder / "log.csv").read_text().splitlines()
    rows = [log[0]] + [r if i in (9, 15) else r.rsplit(",", 1)[0] + "," for i, r in enumerate(log[1:])]
    (folder / "log.csv").write_text("\n".join(rows) + "\n")
    # run 2 ends at 40 x 8 x SEQ tokens (4.51); run 3's first evaluation after that is step 10: 6 - 1.3 * 10/16
    assert "on batch (batch 40) at least +0.678 nats" in spent_line(load_runs(root, PROFILE))
    assert "at least +0.678 nats, it did not pay" in _headline(root)["Batch"]


def _seeds_file(root: Path, base: list[float], rev: list[float]) -> None:
    from rev.chapters.assignment.seeds import save_spread, seed_spread

    runs = {"run1_baseline": [{"final_val_loss": v} for v in base],
            "run2_reversible_same_batch": [{"final_val_loss": v} for v in rev]}
    save_spread(PROFILE, root, seed_spread(runs))


def test_the_seed_spread_turns_the_loss_and_spent_verdicts(tmp_path):
    # run 2 (4.51) vs run 1 (4.5) one seed each: within the fixed 0.02 tie; run 4 at 4.45 "pays" by 0.06 on depth
    root = _results(tmp_path, _steady(1000), _steady(700), deep_val=4.45)
    one = _headline(root)
    assert ": a tie, within 0.02 nats" in one["Loss"]
    assert "it paid on depth" in spent_line(load_runs(root, PROFILE))
    # three seeds where run 2 is steadily 0.1 higher: the loss is not kept; seeds spread 0.05: a 0.06 gain is a tie
    _seeds_file(root, [4.50, 4.55, 4.45], [4.60, 4.65, 4.55])
    three = _headline(root)
    assert "over the 2 seeds other than seed 0 (the screening's, which picked the trunk) the mean difference is +0.100" in three["Loss"]
    assert "run 2 is higher beyond the seeds' spread" in three["Loss"]
    spent = spent_line(load_runs(root, PROFILE))
    assert "neither spending beat" in spent and "the seed tie measured on runs 1 and 2 over 3 seeds" in spent
    assert "the seed-to-seed spread" not in three["Not measured"]   # measured now


def test_report_tables_the_headline_numbers_nowhere_else_and_drops_columns_that_say_nothing(tmp_path):
    text = report.report_markdown(load_runs(_results(tmp_path, _steady(1000), _steady(700)), PROFILE))
    assert "### The comparisons in one table" not in text and "### Published reference" not in text
    assert "| peak memory" not in text
    runs = text.split("### Runs")[1].split("###")[0]
    assert "train loss" not in runs and "wall s" not in runs and "| layers |" in runs   # layers differ (run 4)
    assert "tokens/s" not in runs                                  # the runs were timed apart: no speed column


def test_a_gap_that_is_only_a_bound_never_counts_as_paid(tmp_path):
    """Run 3 evaluated only after run 2's tokens, at a loss well below run 2's: its gap at equal tokens is at
    least that (negative) figure, and could be anything above it. A bound says nothing of a win: with run 4
    losing, neither spending paid."""
    root = _results(tmp_path, _steady(1000), _steady(700), deep_val=4.6)
    folder = root / PROFILE / "run3_reversible_max_batch"
    shutil.rmtree(folder)
    _run(folder, "reveuler_rev", 40, _steady(2000, 16), 3.0, 15.0, recon=1e-6)
    log = (folder / "log.csv").read_text().splitlines()
    rows = [log[0]] + [r if i in (9, 15) else r.rsplit(",", 1)[0] + "," for i, r in enumerate(log[1:])]
    (folder / "log.csv").write_text("\n".join(rows) + "\n")
    head = _headline(root)
    # its first evaluation after run 2's tokens is step 10: 6 - 3 * 10/16 = 4.125, against run 2's 4.51
    assert "at least -0.385 nats, a lower bound that cannot say" in head["Batch"]
    assert "it paid" not in head["Batch"] and "on batch (batch 40) at least -0.385 nats" in head["Not won"]
