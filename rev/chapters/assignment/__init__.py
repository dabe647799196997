"""Notebooks 04-06 (the assignment's runs): the baseline, the reversible trunk at the same batch, and the
reversible trunk at the batch its memory allows.

The runs themselves are trained and read through `rev.chapters.shared` (`runs`, `run_log`, `results`,
`run_plots`); this package holds what the three notebooks conclude from them, in their order:

* `sizes`     per profile: the seeds of runs 1 and 2, the fewest steps of a max-batch run, the depth run's cap;
* `baseline`  04: how steady this machine's clock is, read from run 1's step log;
* `searches`  06: the max-batch and depth searches under one memory budget, the loss-head ablation, the ledger;
* `noise`     06: the gradient noise scale of run 1, what it predicts a larger batch buys, the estimator's check;
* `recipe`    06: the large-batch recipe (square-root rate, warm-up floor) checked by a sweep at the max batch;
* `arms`      05: run 2 against run 1 in three arms (residual, stored twin, reversible), one cause each;
* `seeds`     05: runs 1 and 2 over seeds: the effect's interval, one run's seed spread, the tie it implies;
* `spending`  06 and REPORT.md: what spending the saved memory on batch (run 3) or depth (run 4) bought, once;
* `exercises` the small models the exercises derive (a step's cost, a step's memory) and the checks of 04-06.

Everything public is re-exported here: `from rev.chapters.assignment import measure_noise`.
"""
from .baseline import (FASTER, SLOWER, TOO_NOISY, compare_speeds, plot_step_speeds, speed_halves, spread_share,
                       timed_steps)
from .searches import (LOSS_HEADS_FILE, line_batches, loss_head_ablation, max_batch_table, memory_budget,
                       memory_ledgers, other_stream, predict_max_batches, search_key, search_max_batches,
                       search_max_depth, train_kwargs)
from .noise import (NOISE_FILE, NOISE_SIZES, PREDICTION_NATS, check_noise_scale, measure_noise,
                    noise_scale_for_predictions, noise_sizes, NoiseSizes, predict, Prediction, prediction_check,
                    prediction_table, prediction_tolerance, trajectory)
from .recipe import CELLS, RECIPE, SWEEP_DIR, SWEEP_STEPS, Cell, plot_sweep, recipe_sweep, sweep_steps
from .arms import GRAD_AGREE, bench_row, paired_twin, save_bench, three_arms
from .seeds import (SEEDS_DIR, SEEDS_FILE, load_spread, plot_seeds, replica_name, save_spread, seed_spread,
                    seeds_reading, seeds_side, train_replicas)
from .spending import Spending, Spent, memory_spent
from ..shared.verdicts import seed_tie
from .exercises import (COMPARE_CASES, LINE_CASES, SEARCH_CASES, check_bisection, check_compare_speeds,
                        check_max_batch_from_line, check_speed_ratio, check_unigram_loss, memory_split,
                        predicted_speed_ratio, predictions_against, trunk_flop_share)

__all__ = ["FASTER", "SLOWER", "TOO_NOISY", "compare_speeds", "plot_step_speeds", "speed_halves", "spread_share",
           "timed_steps", "LOSS_HEADS_FILE", "line_batches", "loss_head_ablation", "max_batch_table",
           "memory_budget", "memory_ledgers", "other_stream", "predict_max_batches", "search_key",
           "search_max_batches", "search_max_depth", "train_kwargs", "NOISE_FILE", "NOISE_SIZES", "PREDICTION_NATS",
           "check_noise_scale", "measure_noise", "noise_scale_for_predictions", "noise_sizes", "NoiseSizes",
           "predict", "Prediction", "prediction_check", "prediction_table", "prediction_tolerance", "trajectory",
           "CELLS", "RECIPE", "SWEEP_DIR", "SWEEP_STEPS", "Cell", "plot_sweep", "recipe_sweep", "sweep_steps",
           "GRAD_AGREE", "bench_row", "paired_twin", "save_bench", "three_arms", "SEEDS_DIR", "SEEDS_FILE",
           "load_spread", "plot_seeds", "replica_name", "save_spread", "seed_spread", "seeds_reading", "seeds_side",
           "train_replicas", "Spending", "Spent", "memory_spent", "seed_tie", "COMPARE_CASES", "LINE_CASES",
           "SEARCH_CASES", "check_bisection", "check_compare_speeds", "check_max_batch_from_line",
           "check_speed_ratio", "check_unigram_loss", "memory_split", "predicted_speed_ratio", "predictions_against",
           "trunk_flop_share"]
