"""`python -m rev plan`: the t4 workbook's runs and its estimated T4 time, the budget rule that sizes the max-batch
runs, the ledger's searches against measured ones, and bad input."""
from __future__ import annotations

import json

import pytest

from rev.__main__ import cli
from rev.chapters.plan import machine_for, plan_workbook
from rev.chapters.plan.cost import forward_flops, train_flops
from rev.chapters.plan.workbook import GIB
from rev.base.profiles import get_profile
from rev.chapters.assignment.sizes import chapter_sizes as assignment_sizes


def _plan_json(capsys, *args: str) -> dict:
    assert cli(["plan", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def t4() -> dict:
    from rev.chapters.plan.command import as_json, make_plan

    return as_json(make_plan("t4", 15))


def _run(plan: dict, name: str) -> dict:
    return next(r for r in plan["runs"] if r["run"] == name)


def test_the_t4_workbook_fits_a_colab_session_and_every_run_teaches(t4):
    run1, run2, run3 = (_run(t4, n) for n in ("run1_baseline", "run2_reversible_same_batch",
                                              "run3_reversible_max_batch"))
    assert run3["steps"] >= 150 and run3["batch"] > run1["batch"]       # a larger batch, and steps enough
    run4 = _run(t4, "run4_reversible_deep")
    assert run4["layers"] > run1["layers"]
    assert run4["tflop"] <= 2 * run1["tflop"] and run4["tflop"] <= 2 * run2["tflop"]   # about 2x a normal run
    assert 0 < t4["t4_hours"] <= 3
    assert t4["t4_hours"] == pytest.approx(sum(t4["notebooks"].values()) / 60)
    assert all(s["probes"] <= s["max_probes"] for s in t4["searches"])
    for r in t4["runs"]:
        assert {"run", "trunk", "layers", "batch", "steps", "tokens"} <= set(r)
        if r["notebook"] <= "07_report":                              # the profile's sequences
            assert r["tokens"] == r["steps"] * r["batch"] * 512


def test_the_plan_names_every_training_run_the_workbook_makes(t4):
    prof = get_profile("t4")
    names = {r["run"] for r in t4["runs"]}
    main = {"run1_baseline", "run2_reversible_same_batch", "run1b_baseline_maxbatch", "run3_reversible_max_batch",
            "run3b_reversible_max_batch_stream", "run4_reversible_deep", "run2b_screening_runner_up"}
    assert main <= names
    assert sum(n.startswith("screening/") for n in names) == 5          # the fp32 candidates and the residual
    assert sum(n.startswith("recipe_sweep/") for n in names) == 4   # the recipe, two other rates, a token warm-up
    assert not any(n.startswith("seeds/") for n in names) and assignment_sizes(prof).seeds == 1
    for notebook in ("08_training_irreversibility", "09_adaptive_checkpointing", "09b_adaptive_rank",
                     "10_finetune_trace_rollback"):
        assert any(r["notebook"] == notebook for r in t4["runs"]), notebook
    cpu = plan_workbook("cpu", machine_for("cpu"))                      # 3 seeds: runs 1 and 2 twice more each
    assert sum(w.name.startswith("seeds/") for w in cpu.runs) == 2 * (assignment_sizes("cpu").seeds - 1)


def test_the_budget_is_the_profiles_unless_the_gpu_gives_less_and_it_sets_run_3(capsys):
    t4 = get_profile("t4")
    at15 = _plan_json(capsys, "--profile", "t4", "--gpu-memory-gib", "15")
    assert at15["budget_bytes"] == t4.gpu_mem_budget
    # 90% of 1.05 GiB is under the profile's 1 GiB: that is the budget (not 1 GiB, not 1.05 GiB), and run 3 shrinks
    small = _plan_json(capsys, "--profile", "t4", "--gpu-memory-gib", "1.05")
    assert small["budget_bytes"] == int(0.9 * 1.05 * GIB) < t4.gpu_mem_budget
    assert _run(small, "run3_reversible_max_batch")["batch"] < _run(at15, "run3_reversible_max_batch")["batch"]
    # a larger budget: a larger batch, whose tokens are raised so that it still takes max_batch_min_steps steps
    big = plan_workbook(t4.replace(gpu_mem_budget=4 * GIB), machine_for(t4, 15))
    run3 = big.run("run3_reversible_max_batch")
    assert run3.batch > _run(at15, "run3_reversible_max_batch")["batch"]
    assert run3.tokens > t4.train_tokens and run3.steps == assignment_sizes(t4).max_batch_min_steps


def test_the_ledger_replays_the_search_the_notebook_measures():
    """On the CPU, run 3's batch in the plan (the search run on the ledger's predicted steps) lands where the
    measured search finds it (at 9 MiB: 50 planned, 49 measured; the ledger's own tests cover the other trunks)."""
    from rev.measure.maxbatch import find_max_batch

    smoke = get_profile("smoke").replace(cpu_mem_budget=9 * 2**20)
    planned = plan_workbook(smoke, machine_for(smoke)).run("run3_reversible_max_batch").batch
    measured = find_max_batch(smoke.model_config("reveuler_rev"), smoke.cpu_mem_budget, "cpu",
                              start=smoke.batch_size, progress=False).batch
    assert planned == pytest.approx(measured, rel=0.1)


def test_the_t4_estimate_follows_the_flops_of_each_run(t4):
    prof = get_profile("t4")
    run1 = _run(t4, "run1_baseline")
    cfg = prof.model_config("residual")
    passes = -(-run1["steps"] // prof.eval_every)                       # every eval_every steps and at the end
    flops = run1["tokens"] * train_flops(cfg) + passes * prof.eval_tokens * forward_flops(cfg)
    assert run1["tflop"] * 1e12 == pytest.approx(flops, rel=1e-9)
    rev = train_flops(prof.model_config("reveuler_rev")) / train_flops(prof.model_config("residual"))
    assert 1.2 < rev < 1.4                                              # one more forward of the trunk


def test_timing_on_this_device_prices_the_notebooks(capsys):
    out = _plan_json(capsys, "--profile", "smoke", "--time", "--device", "cpu")
    measured = out["measured"]
    assert set(measured["flops_per_s"]) == {"residual", "reversible"} and all(v > 0 for v in measured["flops_per_s"].values())
    assert set(measured["notebooks_minutes"]) == set(out["notebooks"]) and measured["hours"] > 0
    assert cli(["plan", "--profile", "smoke"]) == 0
    text = capsys.readouterr().out
    assert "run3_reversible_max_batch" in text and "estimated T4 time" in text and "an estimate" in text


@pytest.mark.parametrize("args, message", [
    (["--gpu-memory-gib", "-1"], "give the GPU's memory in GiB"),
    (["--gpu-memory-gib", "nan"], "give the GPU's memory in GiB"),
    (["--profile", "k80"], "unknown profile 'k80'"),
])
def test_bad_input_is_one_line_error(args, message, capsys):
    assert cli(["plan", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
