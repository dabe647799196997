"""The set-up cell every notebook shares, `python -m rev badges`, the synthetic stand-in corpus, and,
opt-in, one notebook bootstrapping itself in a fresh virtual environment where `rev` is not installed."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from fake_colab import FAKE_DRIVE_ENV, driver_cells, fake_google_colab
from rev.book import colab
from rev.chapters.report.writer import corpus_used
from rev.data.corpus import prepare_stand_in, profile_folder, stand_in_name
from rev.base.profiles import get_profile

ROOT = colab.ROOT
NOTEBOOKS = colab.notebook_paths()


def _params_and_setup(path: Path) -> tuple[str, str]:
    cells = colab.code_cells(nbformat.read(path, as_version=4))
    return cells[0], cells[1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_setup_cell_follows_the_parameters_and_is_the_same_everywhere(path):
    params, setup = _params_and_setup(path)
    assert "parameters" in params.metadata.get("tags", []), f"{path.name}: first code cell lost its parameters tag"
    assert setup.source == colab.SETUP_CELL, (
        f"{path.name}: the second code cell is not rev.book.colab.SETUP_CELL; put it back with "
        f"`rev.book.colab.add_setup_cell` (edit the cell in colab.py, never in one notebook)")
    assert setup.metadata.get("jupyter", {}).get("source_hidden") and setup.metadata.get("cellView") == "form", (
        f"{path.name}: the set-up cell is not collapsed (JupyterLab source_hidden, Colab form view): "
        f"`rev.book.colab.add_setup_cell` sets both")
    assert setup.source.startswith("#@title "), f"{path.name}: Colab's form view needs the #@title line first"
    for name in ("REPO_URL", "REPO_REF", "BUNDLE_ZIP", "RESULTS_DIR", "DATA_DIR"):
        assert f"\n{name} = " in "\n" + params.source, f"{path.name}: the parameters cell does not set {name}"
    assert '"../' not in params.source, f"{path.name}: a default relative to notebooks/ is back (cwd-dependent)"


def _run_cells(params: str, setup: str, cwd: Path, **overrides) -> dict:
    """Execute the parameters cell (with papermill-style overrides) and the set-up cell in `cwd`."""
    ns: dict = {}
    old = Path.cwd()
    os.chdir(cwd)
    try:
        exec(params, ns)
        ns.update(overrides)
        exec(setup, ns)
    finally:
        os.chdir(old)
    return ns


@pytest.mark.parametrize("path", NOTEBOOKS[:2], ids=lambda p: p.stem)
def test_setup_cell_resolves_the_folders_from_any_working_directory(path, tmp_path):
    params, setup = _params_and_setup(path)
    ns = _run_cells(params.source, setup.source, tmp_path)     # rev imports: nothing is fetched
    assert ns["ROOT"] == ROOT and not (tmp_path / "revbook").exists()
    assert (ns["RESULTS_DIR"], ns["DATA_DIR"]) == (str(ROOT / "results"), str(ROOT / "data"))
    # what the workbook passes (absolute folders) stays as it is
    ns = _run_cells(params.source, setup.source, tmp_path, RESULTS_DIR=str(tmp_path / "r"), DATA_DIR="/abs/d")
    assert (ns["RESULTS_DIR"], ns["DATA_DIR"]) == (str(tmp_path / "r"), "/abs/d")


def test_on_colab_the_set_up_cell_keeps_results_and_data_on_drive(tmp_path, monkeypatch):
    """Colab (google.colab imported): the folders go under DRIVE_DIR, Drive mounted once at the folder above
    MyDrive; DRIVE_DIR = "" keeps them in the checkout, as does any machine that is not Colab; folders given whole
    (what the workbook passes each notebook) stay as they are."""
    import importlib

    monkeypatch.setenv(FAKE_DRIVE_ENV, str(tmp_path / "cloud"))
    (tmp_path / "cloud").mkdir()
    monkeypatch.syspath_prepend(str(fake_google_colab(tmp_path / "site")))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.delitem(sys.modules, "google.colab.drive", raising=False)
    params, setup = _params_and_setup(NOTEBOOKS[0])
    drive_dir = tmp_path / "content" / "drive" / "MyDrive" / "revbook"
    assert not (tmp_path / "content" / "drive").exists()

    ns = _run_cells(params.source, setup.source, tmp_path, DRIVE_DIR=str(drive_dir))     # not Colab
    assert (ns["RESULTS_DIR"], ns["DATA_DIR"]) == (str(ROOT / "results"), str(ROOT / "data"))
    importlib.import_module("google.colab")                                          # Colab
    mounts = importlib.import_module("google.colab.drive").mounts
    for _ in range(2):                                                               # a second cell: mounted already
        ns = _run_cells(params.source, setup.source, tmp_path, DRIVE_DIR=str(drive_dir))
        assert (ns["RESULTS_DIR"], ns["DATA_DIR"]) == (str(drive_dir / "results"), str(drive_dir / "data"))
    assert mounts == [str(tmp_path / "content" / "drive")]
    assert (tmp_path / "content" / "drive" / "MyDrive").resolve() == (tmp_path / "cloud").resolve()
    ns = _run_cells(params.source, setup.source, tmp_path, DRIVE_DIR="")              # kept local
    assert ns["RESULTS_DIR"] == str(ROOT / "results")
    ns = _run_cells(params.source, setup.source, tmp_path, DRIVE_DIR=str(drive_dir), RESULTS_DIR="/abs/r")
    assert ns["RESULTS_DIR"] == "/abs/r" and ns["DATA_DIR"] == str(drive_dir / "data")
    assert 'DRIVE_DIR = "/content/drive/MyDrive/revbook"' in params.source      # the default: Colab's Drive


def test_add_setup_cell_is_idempotent_and_converts_an_old_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# t"),
                nbformat.v4.new_code_cell('PROFILE = "auto"\nRESULTS_DIR = "../results"\nDATA_DIR = "../data"'),
                nbformat.v4.new_code_cell("import rev")]
    assert colab.add_setup_cell(nb, "me/fork", "dev")
    params, setup, rest = colab.code_cells(nb)
    assert setup.source == colab.SETUP_CELL and rest.source == "import rev"
    assert 'REPO_URL = "https://github.com/me/fork"' in params.source and 'REPO_REF = "dev"' in params.source
    assert '"../' not in params.source and colab.DRIVE_PARAMETER in params.source
    assert not colab.add_setup_cell(nb), "a second pass changed the notebook again"
    assert len(colab.code_cells(nb)) == 3


def test_every_badge_and_repo_url_names_the_same_repository():
    refs = colab.references(ROOT)
    named = {where for _, _, where in refs}
    assert len(named) == 1, ("badges and REPO_URL/REPO_REF defaults disagree: "
                             + "; ".join(f"{f} {what}: {w}" for f, what, w in refs)
                             + " -- run `python -m rev badges --repo OWNER/NAME [--ref REF]`")
    badges = {(f, what) for f, what, _ in refs if what.startswith("badge ")}
    for path in NOTEBOOKS:     # each notebook's badge opens that notebook
        rel = path.relative_to(ROOT).as_posix()
        assert (rel, f"badge {rel}") in badges, f"{rel} has no Colab badge that opens {rel}"
    assert any(f == "README.md" for f, _ in badges), "README.md has no Colab badge"


def _copy_tree(dest: Path) -> Path:
    for rel in ("notebooks", "colab"):
        shutil.copytree(ROOT / rel, dest / rel)
    for f in colab.MARKDOWN_FILES:
        (dest / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, dest / f)
    return dest


def test_badges_rewrites_every_place_and_they_agree(tmp_path):
    root = _copy_tree(tmp_path)
    changed = colab.rewrite("someone/revfork", "v1.2", root=root)
    assert {p.relative_to(root).as_posix() for p in changed} >= {"README.md", "colab/README.md",
                                                                 "notebooks/00_setup.ipynb"}
    assert {w for _, _, w in colab.references(root)} == {"someone/revfork@v1.2"}
    params, setup = _params_and_setup(root / "notebooks" / "00_setup.ipynb")
    assert 'REPO_URL = "https://github.com/someone/revfork"' in params.source and setup.source == colab.SETUP_CELL
    assert colab.rewrite("someone/revfork", "v1.2", root=root) == [], "a second rewrite changed files again"
    # one stray badge is caught
    readme = root / "README.md"
    readme.write_text(readme.read_text() + "\n" + colab.badge_url("other/repo", "main", "notebooks/00_setup.ipynb"))
    assert len({w for _, _, w in colab.references(root)}) == 2
    with pytest.raises(ValueError, match="OWNER/NAME"):
        colab.rewrite("not-a-repo", root=root)


def test_update_notebooks_changes_only_the_two_cells_of_the_notebooks_behind(tmp_path):
    root = _copy_tree(tmp_path)
    assert colab.update_notebooks(root) == []                      # the committed notebooks are up to date
    old = root / "notebooks" / "04_run1_baseline.ipynb"
    before = json.loads(old.read_text())
    params = next(c for c in before["cells"] if c["cell_type"] == "code")
    params["source"] = [line for line in params["source"] if not line.startswith("DRIVE_DIR")]
    params["source"][-1] = params["source"][-1].rstrip("\n")
    old.write_text(json.dumps(before, indent=1, ensure_ascii=False) + "\n")
    assert colab.update_notebooks(root) == [old]
    after = json.loads(old.read_text())
    assert colab.DRIVE_PARAMETER in "".join(next(c for c in after["cells"] if c["cell_type"] == "code")["source"])
    assert [c for c in after["cells"][2:]] == [c for c in before["cells"][2:]]   # the rest as it was, ids included
    assert old.read_text() == (ROOT / "notebooks" / old.name).read_text()


def test_badges_command_is_registered():
    from rev.__main__ import COMMANDS

    assert COMMANDS["badges"][0] == "rev.book.colab"


# --- no silent data substitution -------------------------------------------------------------------------------

def test_the_stand_in_corpus_has_its_own_folder_and_name(tmp_path):
    prof = dataclasses.replace(get_profile("smoke"), name="offline", data_source="tinystories",
                               data_name="tinystories", data_tokens=20_000)
    assert stand_in_name(prof) != prof.data_name and "synthetic" in stand_in_name(prof)
    assert profile_folder(prof, tmp_path) == tmp_path / "tinystories"        # nothing yet: the profile's own
    folder = prepare_stand_in(prof, tmp_path, progress=False)
    assert folder == tmp_path / stand_in_name(prof) == profile_folder(prof, tmp_path)
    assert not (tmp_path / "tinystories").exists(), "the stand-in was written under the real corpus's name"
    shutil.copytree(folder, tmp_path / "tinystories")                          # the real one, once prepared, wins
    assert profile_folder(prof, tmp_path) == tmp_path / "tinystories"


def test_the_report_names_the_corpus_the_runs_read():
    df = pd.DataFrame({"data_source": ["synthetic", "synthetic", None],
                       "data": ["synthetic-instead-of-tinystories"] * 2 + [None]})
    assert corpus_used(df) == "`synthetic` (data folder `synthetic-instead-of-tinystories`)"
    assert corpus_used(df.iloc[2:]) == "not recorded"


# --- a simulated Colab: its torch build and Jupyter kernel must survive the set-up and the driver's install ---------

# What Colab has installed (a CUDA torch, a kernel older than the newest): fake distributions, metadata only.
COLAB_INSTALLED = {"torch": "2.5.1+cu121", "numpy": "1.26.4", "pandas": "2.2.2", "matplotlib": "3.8.0",
                   "tqdm": "4.66.5", "tokenizers": "0.19.1", "ipykernel": "6.17.1", "jupyter-client": "6.1.12",
                   "nbformat": "5.10.4", "nbclient": "0.10.0", "psutil": "5.9.5", "google-colab": "1.0.0"}
# What the package index offers (fake wheels): newer builds of Colab's packages, each a temptation to upgrade, and
# what rev and the driver need that Colab lacks.
INDEX = [("torch", "2.13.0", ()), ("ipykernel", "6.29.5", ()), ("jupyter-client", "8.6.2", ()),
         ("psutil", "6.0.0", ()), ("nbformat", "5.10.4", ()), ("datasets", "2.21.0", ()), ("pytest", "8.3.2", ()),
         ("papermill", "2.6.0", ("nbclient>=0.2.0", "nbformat>=5.2.0"))]
KERNEL = ("torch", "ipykernel", "jupyter-client", "psutil")


def _metadata(name: str, version: str, requires=()) -> str:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n"
                                                                                for r in requires)


def _fake_installed(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(_metadata(name, version))
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("".join(f"{info.name}/{f},,\n" for f in ("METADATA", "INSTALLER", "RECORD")))


def _fake_wheel(folder: Path, name: str, version: str, requires=()) -> None:
    import zipfile

    norm = name.replace("-", "_")
    info = f"{norm}-{version}.dist-info"
    with zipfile.ZipFile(folder / f"{norm}-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{info}/METADATA", _metadata(name, version, requires))
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "".join(f"{info}/{f},,\n" for f in ("METADATA", "WHEEL", "RECORD")))


def _simulated_colab(tmp: Path) -> tuple[Path, dict, Path]:
    """(python, environment, /content) of a Colab double: a venv whose only real packages are pip and setuptools
    (linked from this one), fake distributions for `COLAB_INSTALLED` (a `torch` and a `google.colab` module that
    import), a local index of fake wheels (`INDEX`) and pip kept offline."""
    import sysconfig

    venv = tmp / "venv"
    _sh(sys.executable, "-m", "venv", "--without-pip", venv)
    py = venv / "bin" / "python"
    site = Path(_sh(py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    here = Path(sysconfig.get_paths()["purelib"])
    for name in ("pip", "setuptools", "_distutils_hack"):   # linked, not copied: a second or two saved
        (site / name).symlink_to(here / name, target_is_directory=True)
        for info in here.glob(f"{name}-*.dist-info"):
            (site / info.name).symlink_to(info, target_is_directory=True)
    for name, version in COLAB_INSTALLED.items():
        _fake_installed(site, name, version)
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(
        f"__version__ = {COLAB_INSTALLED['torch']!r}\n\n\nclass cuda:\n    @staticmethod\n"
        f"    def is_available():\n        return False\n")
    fake_google_colab(site)
    index = tmp / "index"
    index.mkdir()
    for name, version, requires in INDEX:
        _fake_wheel(index, name, version, requires)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "VIRTUAL_ENV", "PYTHONPATH"))}
    # offline; no build isolation, so the editable build uses the venv's setuptools (pip reads 0 as "off")
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(index), PYTHONNOUSERSITE="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_BUILD_ISOLATION="0")
    content = tmp / "content"
    content.mkdir()
    return py, env, content


def _bundle(tmp: Path) -> Path:
    """A zip as `python -m rev bundle` makes, holding revbook/ with the real pyproject.toml (its dependencies are
    what is being installed) and a stub package."""
    import zipfile

    out = tmp / "revbook.zip"
    with zipfile.ZipFile(out, "w") as z:
        for f in ("pyproject.toml", "README.md"):
            z.write(ROOT / f, f"revbook/{f}")
        z.writestr("revbook/rev/__init__.py", "")
    return out


VERSIONS = "import json; from importlib.metadata import version; print(json.dumps({n: version(n) for n in %r}))"


@pytest.mark.slow  # a venv, then two offline pip installs (about 10 s)
def test_in_a_simulated_colab_the_set_up_and_the_driver_keep_colabs_torch_and_kernel(tmp_path):
    py, env, content = _simulated_colab(tmp_path)
    # the parameters; where are we (IN_COLAB, torch), `sh`, the install (the set-up cell runs from rev.book.colab)
    params, *driver = driver_cells("colab-01", "colab-03", "colab-04", "colab-08")
    script = tmp_path / "kernel.py"
    drive = content / "drive" / "MyDrive" / "revbook"
    (tmp_path / "cloud").mkdir()
    env[FAKE_DRIVE_ENV] = str(tmp_path / "cloud")
    script.write_text("\n\n".join([
        "import google.colab  # Colab's kernel has it imported",
        params, f"BUNDLE_ZIP = {str(_bundle(tmp_path))!r}", f"DRIVE_DIR = {str(drive)!r}", colab.SETUP_CELL,
        f"print('after set-up', {{n: __import__('importlib.metadata').metadata.version(n) for n in {KERNEL!r}}})",
        *driver]))
    run = subprocess.run([py, str(script)], cwd=content, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"the set-up or the install failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert f"installed rev from {content / 'revbook'}" in run.stdout and "IN_COLAB" not in run.stderr
    assert f"Mounted at {content / 'drive'}" in run.stdout and f"results and data on Google Drive: {drive}" in run.stdout
    kept = {n: COLAB_INSTALLED[n] for n in KERNEL}
    assert f"after set-up {kept}" in run.stdout, "the set-up cell changed Colab's packages"
    after = json.loads(_sh(py, "-c", VERSIONS % (KERNEL + ("papermill", "pytest", "datasets", "rev"),), env=env).stdout)
    assert {n: after[n] for n in KERNEL} == kept, "the driver's install upgraded Colab's packages"
    assert after["papermill"] == "2.6.0" and after["pytest"] == "8.3.2" and after["datasets"] == "2.21.0"


# --- a notebook opened alone, in a fresh environment (opt-in: about 5 minutes on 2 cores) -----------------------

FRESH = os.environ.get("REVBOOK_FRESH_VENV") == "1"
FRESH_NOTEBOOK = os.environ.get("REVBOOK_FRESH_NOTEBOOK", "00_setup")


def _sh(*cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, **kw)


def _snapshot_repo(dest: Path) -> Path:
    """A git repository holding this working tree as it is (tracked and untracked, not ignored): the
    `REPO_URL` the notebook clones."""
    files = _sh("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).stdout
    for rel in filter(None, files.split("\0")):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    _sh("git", "init", "-q", "-b", "main", cwd=dest)
    _sh("git", "add", "-A", cwd=dest)
    _sh("git", "-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "-q", "-m", "snapshot",
        cwd=dest)
    return dest


@pytest.mark.slow
@pytest.mark.skipif(not FRESH, reason="opt-in, about 5 minutes (a fresh venv with torch, then the notebook "
                                      "installs rev): REVBOOK_FRESH_VENV=1 [REVBOOK_FRESH_NOTEBOOK=00_setup]")
def test_a_notebook_opened_alone_bootstraps_and_runs_to_the_end(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("no git here: the set-up cell clones REPO_URL with git")
    t0 = time.perf_counter()
    venv = tmp_path / "venv"
    try:   # what Colab has: its torch, papermill, ipykernel; not rev. --no-compile: setting up, not under test
        _sh(sys.executable, "-m", "venv", venv)
        _sh(venv / "bin" / "python", "-m", "pip", "install", "-q", "--no-compile", "torch==2.13.0", "papermill",
            "ipykernel")
    except (subprocess.CalledProcessError, OSError) as e:
        pytest.skip(f"cannot create a virtual environment with torch==2.13.0, papermill and ipykernel here: "
                    f"{getattr(e, 'stderr', '') or e}")
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "VIRTUAL_ENV", "PYTHONPATH"))}
    # an empty Jupyter data folder: no user kernelspec can send the kernel to another Python
    env.update(JUPYTER_DATA_DIR=str(tmp_path / "jupyter"), MPLBACKEND="Agg",
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    work = tmp_path / "work"                      # the notebook alone, in an empty folder
    work.mkdir()
    in_venv = dict(cwd=work, env=env)             # never from the checkout: its rev/ would import
    assert subprocess.run([py, "-c", "import rev"], capture_output=True, **in_venv).returncode != 0, \
        "rev is already importable in the fresh environment"
    torch_before = _sh(py, "-c", "import torch; print(torch.__version__)", **in_venv).stdout.strip()
    t_venv = time.perf_counter() - t0

    repo = _snapshot_repo(tmp_path / "origin")
    shutil.copy(ROOT / "notebooks" / f"{FRESH_NOTEBOOK}.ipynb", work)
    t1 = time.perf_counter()
    run = subprocess.run([py, "-m", "papermill", f"{FRESH_NOTEBOOK}.ipynb", "out.ipynb", "-k", "python3",
                          "-p", "PROFILE", "smoke", "-p", "REPO_URL", f"file://{repo}", "-p", "REPO_REF", "main"],
                         capture_output=True, text=True, timeout=1800, **in_venv)
    t_notebook = time.perf_counter() - t1
    print(f"\nfresh venv {t_venv:.0f} s, {FRESH_NOTEBOOK} bootstrapped and run in {t_notebook:.0f} s", flush=True)
    assert run.returncode == 0, f"papermill failed:\n{run.stderr[-4000:]}"
    out = nbformat.read(work / "out.ipynb", as_version=4)
    setup_out = "".join(o.get("text", "") for o in colab.code_cells(out)[2].outputs)  # [1]: papermill's injected
    assert "installed rev from" in setup_out and (work / "revbook" / "rev" / "__init__.py").is_file()
    assert (work / "revbook" / "results").exists() or (work / "revbook" / "data").is_dir(), \
        "the notebook wrote nothing under the checkout: RESULTS_DIR/DATA_DIR were not made absolute there"
    assert _sh(py, "-c", "import torch; print(torch.__version__)", **in_venv).stdout.strip() == torch_before, \
        "installing rev changed torch"
    assert "nvidia" not in _sh(py, "-m", "pip", "list", **in_venv).stdout.lower(), "a CUDA package was installed"
