"""The build-it chapter (rev.chapters.integrators.buildit, notebook 01b): the reference memory-free Function against its stored
twin, the fixed stream's exact inverse, memory flat against linear, and the notebook's own solution cell."""
from __future__ import annotations

import gc
from pathlib import Path

import matplotlib
import nbformat
import pytest
import torch

matplotlib.use("Agg")

from rev.chapters.integrators import buildit  # noqa: E402
from rev.chapters.integrators.exercises import check_function  # noqa: E402

NOTEBOOK = Path(__file__).resolve().parents[3] / "notebooks" / "01b_build_the_backward.ipynb"


@pytest.fixture(scope="module")
def trunk() -> tuple[torch.nn.ModuleList, torch.Tensor]:
    return buildit.make_blocks(6, dim=8, hidden=16, gain=1.5, seed=3), buildit.make_input(7, 8, seed=3)


def test_reference_function_matches_stored_twin_in_float64(trunk):
    blocks, x = trunk
    errors = buildit.gradient_errors(buildit.function_trunk(buildit.ReversibleEulerFunction), blocks, x, 0.5)
    worst = buildit.summarise_errors(errors)
    assert worst["input grad"] <= buildit.GRAD_RTOL, worst
    assert worst["param grads"] <= buildit.GRAD_RTOL, worst
    assert len(errors) == 2 + sum(1 for _ in blocks.parameters())  # output, input and every parameter compared


def test_core_function_matches_stored_twin_for_reveuler_and_leapfrog(trunk):
    from rev.core.integrators import Leapfrog

    blocks, x = trunk
    assert (buildit.gradient_errors(buildit.core_trunk, blocks, x, 0.5).rel_error <= buildit.GRAD_RTOL).all()
    leap = Leapfrog()
    errors = buildit.gradient_errors(lambda b, s, h: buildit.core_trunk(b, s, h, leap), blocks, x, 0.5,
                                     reference=lambda b, s, h: buildit.stored_trunk(b, s, h, leap))
    assert (errors.rel_error <= buildit.GRAD_RTOL).all()


def test_fixed_stream_inverts_bit_for_bit_and_fp32_does_not():
    assert buildit.check_fixed_inverse(depth=32)
    drift = buildit.drift_study([1, 16, 32], batch=16).set_index(["stream", "depth"]).error
    assert (drift["fixed"] == 0.0).all()
    assert (drift["fp32"] > drift["fp64"]).all() and (drift["fp64"] > 0).all()
    assert drift["fp32", 32] > drift["fp32", 1]  # fp32 drifts with depth


def test_memory_is_flat_for_the_function_and_linear_for_the_stored_twin():
    df = buildit.memory_study([2, 8], batch=64, dim=16, hidden=64).set_index(["trunk", "depth"])
    free, twin = df.loc["memory-free Function"], df.loc["stored twin"]
    assert free.saved_bytes[8] == free.saved_bytes[2] == 2 * 64 * 16 * 4  # the final y and z only
    assert twin.saved_bytes[8] >= 3.5 * twin.saved_bytes[2]
    assert free.activation_bytes[8] <= 1.05 * free.activation_bytes[2], free
    assert twin.activation_bytes[8] >= 2 * twin.activation_bytes[2], twin


def _tensors_alive() -> int:
    gc.collect()
    return sum(isinstance(o, torch.Tensor) for o in gc.get_objects())


@pytest.mark.parametrize("name", list(buildit.TRUNKS))
def test_measuring_the_saved_tensors_keeps_none_of_them_alive(name, trunk):
    """The forward is measured and dropped without a backward: its graph must go with it (a pack hook that keeps the
    tensor itself ties a tensor saved as its own node's output, tanh's, into a cycle through C++ that never goes)."""
    blocks, x = trunk
    before = _tensors_alive()
    assert buildit.saved_tensor_bytes(buildit.TRUNKS[name], blocks, x, 0.5) > 0
    assert _tensors_alive() == before


@pytest.mark.parametrize("name, says", [("swap the inverse updates", "off by"), ("keep every state", "save only")])
def test_check_catches_each_break(name, says):
    with pytest.raises(AssertionError, match=says):   # the gradient check catches one, the memory check the other
        check_function(buildit.BREAKS[name])


def _solution_namespace() -> dict:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cells = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    assert len(cells) == 1, "notebook 01b has exactly one solution cell (exercise 01b.1)"
    ns: dict = {}
    exec(compile(cells[0].source, f"{NOTEBOOK.name}:solution", "exec"), ns)
    return ns


def test_notebook_solution_matches_rev_gradients_in_float64(trunk):
    blocks, x = trunk
    mine = buildit.function_trunk(_solution_namespace()["MyReversibleEuler"])
    errors = buildit.gradient_errors(mine, blocks, x, 0.5,
                                     reference=buildit.function_trunk(buildit.ReversibleEulerFunction))
    assert (errors.rel_error <= buildit.GRAD_RTOL).all(), errors
    assert check_function(_solution_namespace()["MyReversibleEuler"])  # the check cell's test passes
