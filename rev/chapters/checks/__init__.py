"""Notebook 02 (tests): the project's own tests run in the notebook, the measurements behind them, and break-its.

The package, in the order the notebook tells the story:

* `suite`     the test suite run inside the kernel (`run_tests`), as a table of what each test checks;
* `measure`   the live measurements: reversible gradients against the stored twin's, autocast cosines, activation
              memory against depth; the sabotage contexts the break-its use and the table of what caught them;
* `exercises` the checks of the break-it exercises (02.1 a swapped inverse, 02.3 a forgotten autocast state).

Everything public is re-exported here: `from rev.chapters import checks; checks.gradient_differences()`.
"""
from .suite import (OUTCOMES, TEST_SELECTIONS, all_passed, by_test, describe_item, every_case_folded, not_ok,
                    outcome_counts, readable_name, require_all_passed, run_tests, selection_for_profile, tests_dir)
from .measure import (AUTOCAST_COSINE, AUTOCAST_GEOMETRY, AUTOCAST_REL_BOUND, AUTOCAST_TESTS, DEPTH_GEOMETRY,
                      EXACT_REL_BOUND, GRAD_GEOMETRY, SABOTAGE_FILE, STREAM_MODEL_DTYPE, SWAP_TESTS, autocast_cosines,
                      autocast_verdicts, caught_table, depth_memory, exactly_equal, forgetting_autocast,
                      gradient_differences, growth_ratios, layer_ticks, param_layer, replacing_integrator, stream_gap,
                      worst_autocast)
from .exercises import check_autocast_sabotage, check_swapped_inverse

__all__ = ["OUTCOMES", "TEST_SELECTIONS", "all_passed", "by_test", "describe_item", "every_case_folded", "not_ok",
           "outcome_counts", "readable_name", "require_all_passed", "run_tests", "selection_for_profile", "tests_dir",
           "AUTOCAST_COSINE", "AUTOCAST_GEOMETRY", "AUTOCAST_REL_BOUND", "AUTOCAST_TESTS", "DEPTH_GEOMETRY",
           "EXACT_REL_BOUND", "GRAD_GEOMETRY", "SABOTAGE_FILE", "STREAM_MODEL_DTYPE", "SWAP_TESTS", "autocast_cosines",
           "autocast_verdicts", "caught_table", "depth_memory", "exactly_equal", "forgetting_autocast",
           "gradient_differences", "growth_ratios", "layer_ticks", "param_layer", "replacing_integrator",
           "stream_gap", "worst_autocast",
           "check_autocast_sabotage", "check_swapped_inverse"]
