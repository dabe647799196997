"""A Colab double for the suite: `google.colab` as far as the set-up cell and the Colab driver use it, and the
driver's own cells to run in a simulated Colab (tests/book/test_colab.py, tests/book/test_resume.py)."""
from __future__ import annotations

from pathlib import Path

import nbformat

from rev.book.colab import ROOT

# Colab's google.colab, as far as the set-up cell and the driver use it: `drive.mount(mountpoint)` puts the user's
# Drive under mountpoint/MyDrive. Here MyDrive is a link to `FAKE_DRIVE_ENV`'s folder, which outlives the
# simulated /content as a real Drive outlives a runtime.
FAKE_DRIVE_ENV = "REVBOOK_FAKE_DRIVE"
FAKE_DRIVE_MODULE = f"""import os
from pathlib import Path

mounts = []


def mount(mountpoint, **kwargs):
    mounts.append(str(mountpoint))
    mine = Path(mountpoint) / "MyDrive"
    mine.parent.mkdir(parents=True, exist_ok=True)
    if not mine.exists():
        mine.symlink_to(os.environ["{FAKE_DRIVE_ENV}"], target_is_directory=True)
    print(f"Mounted at {{mountpoint}}")
"""


def fake_google_colab(folder: Path) -> Path:
    """A `google.colab` package with a `drive` module under `folder` (namespace `google`, so another google package
    still imports); returns `folder`."""
    (folder / "google" / "colab").mkdir(parents=True)
    (folder / "google" / "colab" / "__init__.py").write_text("")
    (folder / "google" / "colab" / "drive.py").write_text(FAKE_DRIVE_MODULE)
    return folder


def driver_cells(*ids: str) -> list[str]:
    """The sources of the Colab driver's cells with these ids (colab/revbook_colab.ipynb)."""
    cells = {c.get("id"): c.source for c in nbformat.read(ROOT / "colab" / "revbook_colab.ipynb", as_version=4).cells}
    return [cells[i] for i in ids]
