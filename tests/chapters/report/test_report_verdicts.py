"""The report's headline, findings and exercise 07.1's answer on *contradicting* results: every sentence that states
a measured outcome must turn with the numbers (a slower or faster reversible run, a deep run that loses or wins, a
throughput gap inside its spread), and REPORT.md must say no paragraph twice."""
import csv
import json
import shutil
from pathlib import Path

from rev.chapters.report import summaries, writer as report
from rev.chapters.report.companions import companion_findings
from rev.chapters.report.exercises import race_answer
from rev.chapters.report.headline import NOISY, compare_speed, headline_lines, limits, throughput_caveat
from rev.chapters.shared.results import distinct_runner_up, load_runs, main_run
from rev.chapters.shared.run_log import speed_spread

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


def _headline(root: Path) -> dict[str, str]:
    lines = headline_lines(load_runs(root, PROFILE))
    assert len(lines) == 5
    return {line.split("**")[1]: line for line in lines}


def test_a_slower_reversible_run_reads_slower_and_names_the_price(tmp_path):
    root = _results(tmp_path, _steady(1000), _steady(700))
    h = _headline(root)
    assert "slower by 30%" in h["Throughput"] and NOISY not in h["Throughput"]
    text = "\n".join(report.findings(load_runs(root, PROFILE)))
    assert "): slower. That is the expected price of recomputing" in text
    assert "slower" in race_answer(load_runs(root, PROFILE)).split("same batch the reversible run")[1]


def test_a_faster_reversible_run_reads_faster_and_is_not_called_a_price(tmp_path):
    root = _results(tmp_path, _steady(700), _steady(1000))
    h = _headline(root)
    assert "faster, which recomputing cannot make" in h["Throughput"] and "no price was measured" in h["Throughput"]
    assert "slower" not in h["Throughput"]
    text = "\n".join(report.findings(load_runs(root, PROFILE)))
    assert "): faster. Recomputing cannot make a step faster" in text
    assert "the price of recomputing each block in backward" not in text
    assert "**did not hold**: it ran faster" in race_answer(load_runs(root, PROFILE))


def test_a_gap_inside_the_spread_is_too_noisy_to_tell(tmp_path):
    root = _results(tmp_path, _busy(1000), _busy(900))
    df = load_runs(root, PROFILE)
    lo, _, hi = speed_spread(df.set_index("run").loc["run1_baseline", "path"])
    assert lo < 900 < hi                                     # the 10% gap lies inside the baseline's own spread
    h = _headline(root)
    assert NOISY in h["Throughput"] and "slower by" not in h["Throughput"]
    assert f"): {NOISY}." in "\n".join(report.findings(df))
    assert f"at the same batch -10.0%, {NOISY}" in throughput_caveat(df)
    assert NOISY in race_answer(df).split("same batch the reversible run")[1]


def test_a_3_percent_shift_over_many_steps_is_read_although_the_quartiles_overlap(tmp_path):
    import random

    rng = random.Random(4)
    base = [1000 + rng.gauss(0, 60) for _ in range(300)]
    rev = [970 + rng.gauss(0, 60) for _ in range(300)]          # 3% slower; single steps vary by 6%
    root = _results(tmp_path, base, rev)
    c = compare_speed(*(main_run(load_runs(root, PROFILE), n) for n in ("run1_baseline", "run2_reversible_same_batch")))
    assert c.rev_q[2] > c.base_q[0]                              # the middle halves overlap ...
    assert c.verdict == "slower" and c.interval[1] < 0           # ... and the difference is still plain
    assert "95% bootstrap interval" in c.spread_text() and NOISY not in _headline(root)["Throughput"]


def test_memory_loss_and_batch_lines_turn_with_the_numbers(tmp_path):
    good = _headline(_results(tmp_path / "good", _steady(1000), _steady(700)))
    assert "a cut of 50%" in good["Memory"] and "kept, within the 0.02 nats" in good["Loss"]
    assert "2.00x the batch" in good["Batch"]
    bad = _headline(_results(tmp_path / "bad", _steady(1000), _steady(700), rev_val=4.7, rev_peak=9.0,
                             rev_batch_max=16))
    assert "no cut" in bad["Memory"] and "a cut" not in bad["Memory"]
    assert "not kept, higher by more than the 0.02-nat tie margin" in bad["Loss"]
    assert "no larger batch" in bad["Batch"]


def test_a_deep_run_that_loses_refutes_the_prediction_and_one_that_wins_confirms_it(tmp_path):
    loses = load_runs(_results(tmp_path / "loses", _steady(1000), _steady(700), deep_val=4.9), PROFILE)
    answer = race_answer(loses)
    assert "The deep run ends lowest per token: **did not hold**" in answer
    assert "more layers did not pay" in answer
    assert "higher: depth did not pay on this budget" in "\n".join(report.takeaways(loses))
    wins = load_runs(_results(tmp_path / "wins", _steady(1000), _steady(700), deep_val=4.3), PROFILE)
    assert "The deep run ends lowest per token: **held**" in race_answer(wins)
    assert "the lowest of them" in "\n".join(report.takeaways(wins))


def test_the_exactness_takeaway_reports_the_worst_trained_trunk_not_the_best(tmp_path):
    root = _results(tmp_path, _steady(1000), _steady(700))
    run3 = root / PROFILE / "run3_reversible_max_batch" / "summary.json"
    summary = json.loads(run3.read_text())
    run3.write_text(json.dumps(summary | {"reconstruction_error": 2.57e-3}))
    [line] = [t for t in report.takeaways(load_runs(root, PROFILE)) if t.startswith("**Exactness**")]
    assert "at worst 2.6e-03 (reversible max batch" in line and "batch 40" in line
    assert "at best 1.0e-06" in line and "2570x apart" in line
    run2 = root / PROFILE / "run2_reversible_same_batch" / "summary.json"   # a fixed stream rebuilds exactly
    run2.write_text(json.dumps(json.loads(run2.read_text()) | {"reconstruction_error": 0.0}))
    [line] = [t for t in report.takeaways(load_runs(root, PROFILE)) if t.startswith("**Exactness**")]
    assert "at best exactly 0 (reversible" in line
    assert ", below the 0.01 the training loop trusts (0.26x it)" in line


def test_losses_on_different_corpora_are_compared_in_nats_not_as_a_ratio(tmp_path):
    text = "\n".join(report.findings(load_runs(_results(tmp_path, _steady(1000), _steady(700)), PROFILE)))
    assert "validation loss +0.010 nats (published +0.041, on another corpus and model)" in text
    assert "validation loss 1.00x" not in text and "difference of +0.010 nats." in text


def test_the_headline_says_what_spending_the_memory_bought_and_what_it_did_not(tmp_path):
    # fixture: run 2 ends at 4.51; run 3 (batch 40) at 4.7 on 8 steps of 40 x SEQ, run 4 (5 layers) at deep_val
    lost = _headline(_results(tmp_path / "lost", _steady(1000), _steady(700), deep_val=4.6))["Spent"]
    assert "on depth (5 layers) +0.090 nats" in lost and "on batch (batch 40)" in lost
    assert "neither spending beat the reversible trunk" in lost and "one seed each" in lost
    assert "run 3 took 8 optimizer steps to run 2's 40" in lost and "B_noise" not in lost   # why, from the logs
    # with notebook 06's noise scale on record, the why says where run 3's batch stands against it
    root = tmp_path / "lost"
    (root / PROFILE / "noise_scale.json").write_text(json.dumps({"run 1, end": {"b_simple": 16.0}}))
    assert "a batch 2.5x the measured noise scale (B_noise 16 sequences, above it)" in _headline(root)["Spent"]
    won = _headline(_results(tmp_path / "won", _steady(1000), _steady(700), deep_val=4.3))["Spent"]
    assert "on depth (5 layers) -0.210 nats" in won and "it paid on depth" in won


def test_the_fastest_run_is_named_from_the_table(tmp_path):
    # max-batch runs at 3000 and 2000 tokens/s against same-batch runs at 1000 and below: a max-batch run wins
    fast = load_runs(_results(tmp_path / "fast", _steady(1000), _steady(700)), PROFILE)
    assert "A max-batch run takes the fewest seconds for 20,480 tokens: **held**" in race_answer(fast)
    # a baseline at 10,000 tokens/s beats them: the prediction fails
    slow = load_runs(_results(tmp_path / "slow", _steady(10_000), _steady(700)), PROFILE)
    assert "A max-batch run takes the fewest seconds for 20,480 tokens: **did not hold**. Fewest: baseline" in race_answer(slow)


def test_max_batch_speed_never_contradicts_the_same_batch_price(tmp_path):
    df = load_runs(_results(tmp_path, _steady(1000), _steady(700)), PROFILE)
    text = "\n".join(report.findings(df))
    assert "did not show" not in text
    sentence = next(s for s in report.findings(df) if s.startswith("Each at its own max batch (20 vs 40), the "))
    assert "slower" in sentence and "compares batch sizes as much as trunks" in sentence


def test_report_opens_with_the_headline_and_says_no_paragraph_twice(tmp_path):
    root = _results(tmp_path, _steady(1000), _steady(700))
    text = report.report_markdown(load_runs(root, PROFILE))
    order = [text.index(s) for s in ("## Headline", "## Evidence", "## Companion chapters",
                                     "## Not measured on this machine")]
    assert order == sorted(order)
    head = text.split("## Headline")[1].split("##")[0]
    assert [line.split("**")[1] for line in head.splitlines() if line.startswith("- ")] == \
        ["Memory", "Loss", "Batch", "Throughput", "Spent"]
    paragraphs = [p.strip() for p in text.split("\n") if p.strip() and not p.startswith(("|", "#", "!["))]
    repeated = {p for p in paragraphs if paragraphs.count(p) > 1}
    assert not repeated, f"said twice: {repeated}"


def test_limits_name_the_missing_gpu_only_when_there_is_none(tmp_path):
    cpu = load_runs(_results(tmp_path / "cpu", _steady(1000), _steady(700)), PROFILE)
    assert limits(cpu)[0].startswith("No GPU") and "grows with its batch" in " ".join(limits(cpu))
    assert any("seed 0" in s for s in limits(cpu))
    gpu = load_runs(_results(tmp_path / "gpu", _steady(1000), _steady(700), device="Tesla T4 (cuda), fp16"),
                    PROFILE)
    assert not any(s.startswith("No GPU") for s in limits(gpu))


def test_companion_chapters_say_not_run_ran_or_what_their_files_hold(tmp_path):
    prof = tmp_path / PROFILE
    prof.mkdir()
    assert all(line.endswith(": not run.") for line in companion_findings(prof))
    (prof / "workbook").mkdir()
    (prof / "workbook" / "09b_adaptive_rank.json").write_text("{}")
    (prof / "landscape").mkdir()
    (prof / "landscape" / "measured.json").write_text(json.dumps(
        [{"variant": v, "depth": 4, "batch": 8, "activation_bytes": b, "tokens_per_s": 1.0}
         for v, b in (("stored", 1000), ("ckpt_block", 400), ("reveuler_rev", 200))]))
    lines = {line.split("**")[1].split(" ·")[0]: line for line in companion_findings(prof)}
    assert "ckpt_block 0.40x, reveuler_rev 0.20x (least: reveuler_rev)" in lines["07b"]
    assert "Speeds not ranked" in lines["07b"] and "GiB per GPU over per-block" in lines["07b"]
    assert "ran (workbook record)" in lines["09b"] and lines["08"].endswith("not run.")
    assert "rest on 1 timed step per variant" in lines["07b"]
    (prof / "landscape" / "measured.json").write_text(json.dumps(
        [{"variant": v, "depth": 4, "batch": 8, "activation_bytes": b, "step_times": [0.1, 0.2, 0.1]}
         for v, b in (("stored", 1000), ("reveuler_rev", 200))]))
    (prof / "lowrank").mkdir()
    (prof / "lowrank" / "verdict.json").write_text(json.dumps(
        {"seeds": 8, "wins": 5, "losses": 2, "p": 0.17, "rank_c": 3.2, "rank_f": 4.0, "peak_ratio": 0.87,
         "acc_c": 0.91, "acc_f": 0.92, "acc_p": 0.5, "success": {"met": False, "lower_rank": True,
                                                                 "non_inferior": False, "cosine_ok": True}}))
    (prof / "thermo_summary.json").write_text(json.dumps({"over_seeds": {"source": "run here", "verdicts": [
        {"kind": "transformer", "measure": "update", "seeds": "0:o 1:o 2:o", "verdict": "ordinary"},
        {"kind": "transformer", "measure": "direction", "seeds": "0:a 1:a 2:o", "verdict": "not decided"}]}}))
    lines = {line.split("**")[1].split(" ·")[0]: line for line in companion_findings(prof)}
    assert "rest on 3 timed steps per variant" in lines["07b"]
    assert "closer to the dense one on 5, farther on 2, tied on 1 (exact sign-flip p = 0.170)" in lines["09b"]
    assert "success criterion (lower mean rank at similar accuracy): not met, for want of non-inferior accuracy." \
        in lines["09b"]
    assert ("shock (3 seeds, run here; 1 of 2 verdicts unanimous): transformer ordinary on magnitude, not decided on "
            "direction (magnitude: the paper's measure") in lines["08"]


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


def test_a_few_slow_steps_do_not_turn_a_slower_run_into_a_faster_one(tmp_path):
    """Two slow steps (a busy neighbour) drag the baseline's mean tokens/s far below its median; the max-batch
    finding compares medians, and reads the direction from quartiles that do not overlap."""

    root = _results(tmp_path, _steady(1000), _steady(700))
    folder = root / PROFILE / "run1b_baseline_maxbatch"
    shutil.rmtree(folder)
    _run(folder, "residual", 20, [9000.0] * 14 + [100.0] * 2, 4.6, 15.0)   # mean ~656, median 9,000
    df = load_runs(root, PROFILE)
    text = "\n".join(report.findings(df))
    assert "trained at 2,000 tokens/s against the baseline's 9,000" in text
    assert "): slower. Its larger batch" in text and "more than paid for" not in text
    assert "at the max batches -77.8%, slower" in throughput_caveat(df)


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
    answer = race_answer(df)
    assert "when its batch is larger, lower when it is smaller: **held**" in answer
    assert "baseline max batch at batch 20 (larger than 8, so predicted higher) 5.000 against baseline 4.500, higher" \
        in answer
    # a max batch smaller than the profile's (a stored trunk under a tight budget): more, smaller steps, predicted lower
    shutil.rmtree(folder)
    _run(folder, "residual", 4, _steady(3000, 80), 4.0, 15.0)
    small = race_answer(load_runs(root, PROFILE))
    assert "baseline max batch at batch 4 (smaller than 8, so predicted lower) 4.000 against baseline 4.500, lower" \
        in small and "when it is smaller: **held**" in small
    assert "trained on more and is read at this count from its log" in summaries.loss_and_time_summary(loss_and_time(df))


def test_the_batch_line_says_what_the_batch_bought_in_seconds_and_spent_its_loss(tmp_path):
    """Run 3 (batch 40, 8 steps) against run 1 (batch 8, 40 steps): the batch line gives the speeds with their
    spread and says the GPU figure is not measured; the loss at equal tokens is the Spent line's, against run 2."""
    lines = _headline(_results(tmp_path, _steady(1000), _steady(700)))
    batch = lines["Batch"]
    assert "Run 3 trained at 2,000 tokens/s against run 1's 1,000" in batch and "nats" not in batch
    gpu = "could take up to 5.0x fewer seconds per token"   # named once, among what a CPU cannot measure
    assert gpu not in batch and sum(gpu in line for line in limits(load_runs(tmp_path, PROFILE))) == 1
    assert "on batch (batch 40) +0.190 nats" in lines["Spent"]     # 4.7 against run 2's 4.51, both at their end


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
    assert "on batch (batch 40) at least +0.678 nats" in _headline(root)["Spent"]


def _seeds_file(root: Path, base: list[float], rev: list[float]) -> None:
    from rev.chapters.assignment.seeds import save_spread, seed_spread

    runs = {"run1_baseline": [{"final_val_loss": v} for v in base],
            "run2_reversible_same_batch": [{"final_val_loss": v} for v in rev]}
    save_spread(PROFILE, root, seed_spread(runs))


def test_the_seed_spread_turns_the_loss_and_spent_verdicts(tmp_path):
    # run 2 (4.51) vs run 1 (4.5) one seed each: within the fixed 0.02 tie; run 4 at 4.45 "pays" by 0.06 on depth
    root = _results(tmp_path, _steady(1000), _steady(700), deep_val=4.45)
    one = _headline(root)
    assert "one seed each: kept, within the 0.02 nats" in one["Loss"] and "it paid on depth" in one["Spent"]
    depth = lambda: next(t for t in report.takeaways(load_runs(root, PROFILE)) if t.startswith("**Depth**"))  # noqa: E731
    assert "the lowest of them by more than the 0.020-nat tie" in depth()
    # three seeds where run 2 is steadily 0.1 higher: the loss is not kept; seeds spread 0.05: a 0.06 gain is a tie
    _seeds_file(root, [4.50, 4.55, 4.45], [4.60, 4.65, 4.55])
    three = _headline(root)
    assert "over 3 seeds the mean difference is +0.100 nats" in three["Loss"]
    assert "not kept: higher on average beyond the seeds' spread" in three["Loss"]
    assert "neither spending beat" in three["Spent"] and "the seed tie measured on runs 1 and 2 over 3 seeds" \
        in three["Spent"]
    assert any("Runs 1 and 2 trained on 3 seeds" in line for line in limits(load_runs(root, PROFILE)))
    assert "within the 0.196-nat tie margin of the best (the seed tie measured" in depth()


def test_report_tables_the_headline_numbers_nowhere_else_and_drops_columns_that_say_nothing(tmp_path):
    text = report.report_markdown(load_runs(_results(tmp_path, _steady(1000), _steady(700)), PROFILE))
    assert "### The comparisons in one table" not in text and "### Published reference" not in text
    # the published ratios, once, in one sentence (the headline does not give them)
    assert text.count("published 0.36x") == 1 and "| peak memory" not in text
    runs = text.split("### Runs")[1].split("###")[0]
    assert "train loss" not in runs and "wall s" not in runs and "| layers |" in runs   # layers differ (run 4)


def test_the_throughput_line_reads_the_interleaved_bench_over_runs_timed_apart(tmp_path):
    """Runs timed minutes apart read the reversible one faster (a quieter machine later); notebook 05's bench,
    each round one step of each trunk under the same load, reads it 20% slower: the headline takes the bench."""
    from rev.chapters.shared.results import BENCH_FILE

    root = _results(tmp_path, _steady(700), _steady(1000))
    load = [1.0 + 0.1 * (i % 4) for i in range(15)]           # the load moves from round to round
    rows = [{"trunk": "residual", "step_times": load},
            {"trunk": "reveuler_rev", "step_times": [t / (0.8 * (1 + 0.01 * (i % 3))) for i, t in enumerate(load)]}]
    (root / PROFILE / BENCH_FILE).write_text(json.dumps({"batch": 8, "rounds": 15, "runs": rows}))
    line = _headline(root)["Throughput"]
    assert "timed side by side" in line and "slower by 19%" in line and "faster" not in line
    assert "bootstrap interval of the median over 15 interleaved rounds" in line
    (root / PROFILE / BENCH_FILE).write_text(json.dumps({"batch": 16, "rounds": 15, "runs": rows}))  # another batch
    assert "faster, which recomputing cannot make" in _headline(root)["Throughput"]


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
    spent = _headline(root)["Spent"]
    # its first evaluation after run 2's tokens is step 10: 6 - 3 * 10/16 = 4.125, against run 2's 4.51
    assert "on batch (batch 40) at least -0.385 nats" in spent
    assert "it paid" not in spent and "neither spending beat" in spent
