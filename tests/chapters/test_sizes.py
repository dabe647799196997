"""One shape for a chapter's sizes: every chapter (and the book's 07b) owns a typed, frozen size per profile, reached
by `chapter_sizes(profile)` with a name, 'auto' or a `Profile`; the engine's profiles know no chapter."""
import dataclasses
import inspect

import pytest

import rev.base.profiles as profiles
from rev.chapters.landscape import measure as landscape
from rev.chapters import adaptive, lowrank, thermo, trace
from rev.chapters.assignment import sizes as assignment
from rev.chapters.screening import sizes as screening
from rev.base.profiles import PROFILES, get_profile

CHAPTERS = {"adaptive": adaptive, "lowrank": lowrank, "trace": trace, "landscape": landscape, "thermo": thermo,
            "assignment": assignment, "screening": screening}


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_chapter_sizes_every_profile_by_name_or_object(name):
    module = CHAPTERS[name]
    for prof in PROFILES:
        sizes = module.chapter_sizes(prof)
        assert dataclasses.is_dataclass(sizes) and type(sizes).__dataclass_params__.frozen, name
        assert module.chapter_sizes(get_profile(prof)) == sizes


def test_the_engine_knows_no_chapter():
    source = inspect.getsource(profiles)
    for word in ("thermo", "adaptive", "lowrank", "trace", "landscape", "CHAPTER_SIZES", "MAIN_RUNS", "run1_baseline"):
        assert word not in source, word
    # the assignment's and the screening's sizes are theirs too: a profile is geometry, data, budget and optimiser
    fields = {f.name for f in dataclasses.fields(profiles.Profile)}
    assert not fields & {"seeds", "deep_max_layers", "max_batch_min_steps", "screening_fraction", "screening_set"}
