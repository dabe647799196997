"""01 §5's reading guide follows the figure's values (rev.chapters.integrators.toy_lessons.step_size_reading)."""
import numpy as np

from rev.chapters.integrators.toy import StepStudy
from rev.chapters.integrators.toy_lessons import step_size_reading


def _st(name, stream, small, large):
    hs = np.array([0.1, 1.0])
    return StepStudy(name, stream, 64, hs, np.array([small, large]), hs * 0, hs * 0 + 1)


def test_the_reading_says_where_the_streams_part_ways():
    alike = {("leapfrog", "fp32"): _st("leapfrog", "fp32", 1e-6, 1e-5), ("leapfrog", "fp64"): _st("leapfrog", "fp64", 2e-6, 2e-5),
             ("leapfrog", "fixed"): _st("leapfrog", "fixed", 0.0, 0.0)}
    text = step_size_reading(alike)
    assert "at the largest h = 1: fp32 1.0e-05, fp64 2.0e-05 (a factor 2 apart)" in text and "part ways" not in text
    assert "Fixed: exactly 0 at worst" in text
    parted = {**alike, ("leapfrog", "fp64"): _st("leapfrog", "fp64", 2e-6, 1e-12)}
    assert "part ways as h grows" in step_size_reading(parted)
