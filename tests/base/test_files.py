"""The rule every command that writes keeps (rev.base.files.check_output) and the record that tells a copy a
person edited from one a command wrote (edited_files, record_written). Each command's use of it is a row of
tests/test_bad_inputs.py; here the rule itself, on a scratch checkout, with the inputs where a plausible wrong rule
answers otherwise: a folder whose name only begins like a source folder, the checkout's parent, the one exception."""
from __future__ import annotations

import pytest

from rev.base import files


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    root = tmp_path / "revbook"
    for folder in ("notebooks", "rev", "tests/notebooks"):
        (root / folder).mkdir(parents=True)
    monkeypatch.setattr(files, "CHECKOUT", root)
    return root


@pytest.mark.parametrize("dest, why", [
    ("", "the checkout itself"),
    ("notebooks", "inside the checkout's own notebooks/"),
    ("notebooks/..", "the checkout itself"),                 # resolved: the path as typed would pass a name test
    ("rev/core/x.zip", "inside the checkout's own rev/"),
    ("tests/build", "inside the checkout's own tests/"),
    ("..", "a folder that holds the checkout"),              # replacing it would take the checkout along
])
def test_the_checkout_and_its_own_folders_are_never_written(checkout, dest, why):
    with pytest.raises(ValueError, match=f"would write into .*, {why}"):
        files.check_output(checkout / dest)


@pytest.mark.parametrize("dest", ["build/student", "notebooks_extra/x", "revisions", "results/smoke", "../elsewhere"])
def test_other_folders_are_free_to_write(checkout, dest):
    files.check_output(checkout / dest)     # "notebooks_extra" and "revisions" only begin like a source folder


def test_the_one_exception_is_the_folder_named_and_nothing_beside_it(checkout):
    refs = checkout / "tests" / "notebooks"
    files.check_output(refs, may_write=[refs])
    files.check_output(refs / "sub", may_write=[refs])
    with pytest.raises(ValueError, match="inside the checkout's own tests/"):
        files.check_output(checkout / "tests" / "core", may_write=[refs])


def test_files_a_person_may_have_edited_are_named_and_replaced_only_with_force(tmp_path):
    lost = [tmp_path / f"nb{i}.ipynb" for i in range(7)]
    with pytest.raises(ValueError, match=r"nb0.ipynb, .*nb4.ipynb and 2 more would be replaced .* pass --force"):
        files.check_output(tmp_path, lost)
    with pytest.raises(ValueError, match=r"nb6.ipynb would be replaced .* pass --force to replace it,"):
        files.check_output(tmp_path, lost[-1:])
    files.check_output(tmp_path, lost, force=True)
    files.check_output(tmp_path, [])


def test_the_record_tells_an_edited_copy_from_an_untouched_one(tmp_path):
    a, b, gone = tmp_path / "a.ipynb", tmp_path / "sub" / "b.ipynb", tmp_path / "c.ipynb"
    b.parent.mkdir()
    for p in (a, b):
        p.write_text(f"written {p.name}")
    assert files.edited_files(tmp_path, [a, b, gone]) == [a, b]     # not recorded: nothing says they are ours
    files.record_written(tmp_path, [a, b])
    assert files.edited_files(tmp_path, [a, b, gone]) == []         # as written; a missing file loses nothing
    b.write_text("a learner's answer")
    assert files.edited_files(tmp_path, [a, b]) == [b]
    (tmp_path / files.WRITTEN_RECORD).write_text("{damaged")
    assert files.edited_files(tmp_path, [a, b]) == [a, b]           # a damaged record vouches for nothing
