"""Every notebook's first two code cells, and `python -m rev badges`: where the repository lives.

A notebook opened from its Colab badge (or copied anywhere on its own) starts in a kernel without `rev`. Its
`parameters` cell names the repository (`REPO_URL`, `REPO_REF`, or a `BUNDLE_ZIP` from `python -m rev bundle`);
the set-up cell right after it, `SETUP_CELL`, the same in every notebook, fetches and installs the code when
`rev` does not import, and makes `RESULTS_DIR` / `DATA_DIR` absolute under the checkout, so relative defaults
work from any working directory; on Colab it makes them absolute under `DRIVE_DIR` on Google Drive instead
(mounting it), so a runtime reset that wipes /content keeps every finished run, checkpoint, notebook marker and the
prepared data, and running again resumes (`rev.book.workbook`, `rev.training.loop`'s `resume="auto"`).
`DRIVE_DIR = ""` keeps them in the checkout. It runs before `rev` exists, so it is plain Python and this module is
only its source of truth (`add_setup_cell` puts it and the parameters it reads into a notebook, `update_notebooks`
into every notebook; tests/book/test_colab.py keeps them equal).

``python -m rev badges --repo OWNER/NAME [--ref REF]`` rewrites every Colab badge and every `REPO_URL` /
`REPO_REF` default (notebooks, colab/, README.md, colab/README.md): run it once after publishing a fork.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import nbformat

from ..base.files import write_text

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_GLOBS = ("notebooks/*.ipynb", "colab/*.ipynb")
MARKDOWN_FILES = ("README.md", "colab/README.md")

# The set-up cell. Why each choice:
# * `rev` importable (a checkout, `pip install -e .`, the workbook): nothing is fetched, only the folders are
#   resolved, against the checkout `rev` comes from, so "results" means <checkout>/results from any cwd.
# * otherwise the code goes to ./revbook (on Colab /content/revbook, visible in the file browser; a bundle zip
#   unpacks there too, its top folder being revbook/), or to the checkout the kernel was started in.
# * pip gets `torch==<the installed version>` as a requirement: it keeps Colab's CUDA build (or any build)
#   and fails rather than swap it; `--no-deps` would need a second copy of pyproject's dependency list here.
# * a running kernel does not re-read .pth files, so the checkout also goes onto sys.path.
SETUP_CELL = '''\
#@title Set-up (nothing to read here: it fetches the code when a notebook is opened alone) { display-mode: "form" }
# Set-up: use the code if it is here; otherwise (Colab, a notebook opened alone) fetch and install it first.
import importlib.util, subprocess, sys, zipfile
from importlib.metadata import version
from pathlib import Path


def mount_drive(path):  # Google Drive, mounted at the folder above MyDrive when a path on it is not there yet
    parts = Path(path).parts
    if "MyDrive" in parts and not Path(*parts[:parts.index("MyDrive") + 1]).is_dir():
        from google.colab import drive
        drive.mount(str(Path(*parts[:parts.index("MyDrive")])))


spec = importlib.util.find_spec("rev")
# the checkout: the one an installed rev comes from, else the folder we run in (or above it), else ./revbook
places = ([Path(spec.origin).parents[1]] if spec else []) + [Path.cwd(), *Path.cwd().parents]
ROOT = next((p for p in places if (p / "pyproject.toml").is_file() and (p / "rev").is_dir()), Path.cwd() / "revbook")
if spec is None:
    if BUNDLE_ZIP and not ROOT.exists():  # a zip from `python -m rev bundle` (code + data) holds revbook/
        mount_drive(BUNDLE_ZIP)
        zipfile.ZipFile(BUNDLE_ZIP).extractall(ROOT.parent)
    elif not ROOT.exists():
        subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", REPO_REF, REPO_URL, str(ROOT)], check=True)
    # torch pinned to the installed build: pip keeps Colab's CUDA torch and never downloads another
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", str(ROOT), f"torch=={version('torch')}"],
                   check=True)
    sys.path.insert(0, str(ROOT))
    print(f"installed rev from {ROOT}")
# on Colab the results and the prepared data live on Google Drive, where a runtime reset keeps them for a re-run
HOME = Path(DRIVE_DIR) if DRIVE_DIR and "google.colab" in sys.modules else ROOT
if HOME != ROOT:
    mount_drive(DRIVE_DIR)
    print(f"results and data on Google Drive: {HOME} (DRIVE_DIR = '' keeps them in {ROOT})")
RESULTS_DIR, DATA_DIR = str(HOME / RESULTS_DIR), str(HOME / DATA_DIR)'''

# the parameters every notebook's first cell ends with (comments kept by `badges`, which rewrites only values)
REPO_PARAMETERS = '''\
REPO_URL = "{url}"  # where the set-up cell fetches the code from
REPO_REF = "{ref}"  # its branch or tag
BUNDLE_ZIP = ""  # or a zip made by `python -m rev bundle` (say on Google Drive) to use instead'''
# where the results and data go on Colab (the set-up cell mounts Google Drive); a line of its own, added after the
# repository's to parameters cells written before it
DRIVE_PARAMETER = 'DRIVE_DIR = "/content/drive/MyDrive/revbook"  # on Colab: results and data here, kept across resets; "" keeps them local'
_DRIVE = re.compile(r"^DRIVE_DIR = ", re.M)

DEFAULT_REPO, DEFAULT_REF = "revbook/revbook", "main"
_BADGE = re.compile(r"https://colab\.research\.google\.com/github/([\w.-]+/[\w.-]+)/blob/([\w.-]+)/([\w./-]+\.ipynb)")
_URL = re.compile(r'^(REPO_URL = )"([^"]*)"', re.M)
_REF = re.compile(r'^(REPO_REF = )"([^"]*)"', re.M)
_OLD_DIRS = {'RESULTS_DIR = "../results"': 'RESULTS_DIR = "results"  # in the repository, or an absolute path',
             'DATA_DIR = "../data"': 'DATA_DIR = "data"'}


def repo_url(repo: str) -> str:
    return f"https://github.com/{repo}"


def badge_url(repo: str, ref: str, path: str) -> str:
    """The Colab link that opens `path` (relative to the repository root) of `repo` at `ref`."""
    return f"https://colab.research.google.com/github/{repo}/blob/{ref}/{path}"


def notebook_paths(root: Path = ROOT) -> list[Path]:
    return sorted(p for pattern in NOTEBOOK_GLOBS for p in root.glob(pattern))


def code_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [c for c in nb.cells if c.cell_type == "code"]


def add_setup_cell(nb: nbformat.NotebookNode, repo: str = DEFAULT_REPO, ref: str = DEFAULT_REF) -> bool:
    """Give `nb` the repository parameters and the set-up cell (idempotent); returns whether it changed."""
    params = code_cells(nb)[0]
    before = params.source
    for old, new in _OLD_DIRS.items():
        params.source = params.source.replace(old, new)
    if not _REF.search(params.source):   # no block yet; an older lone REPO_URL line (the colab driver's) goes
        url = _URL.search(params.source)
        params.source = re.sub(r"^REPO_URL = .*\n?", "", params.source, flags=re.M).rstrip("\n") + "\n" + \
            REPO_PARAMETERS.format(url=url.group(2) if url else repo_url(repo), ref=ref)
    if not _DRIVE.search(params.source):
        params.source = params.source.rstrip("\n") + "\n" + DRIVE_PARAMETER
    changed = params.source != before
    second = code_cells(nb)[1]
    if any(line in SETUP_CELL.splitlines()[:2] for line in second.source.splitlines()[:1]):
        changed |= second.source != SETUP_CELL
        second.source = SETUP_CELL
    else:
        second = nbformat.v4.new_code_cell(SETUP_CELL)
        nb.cells.insert(nb.cells.index(params) + 1, second)
        changed = True
    changed |= {k: second.metadata.get(k) for k in SETUP_METADATA} != SETUP_METADATA
    second.metadata.update(SETUP_METADATA)
    return changed


def update_notebooks(root: Path = ROOT) -> list[Path]:
    """`add_setup_cell` on every notebook under `root` (the workbook's and colab/'s), keeping each one's repository;
    returns the notebooks changed. After editing `SETUP_CELL` or the parameters it reads, run it once and commit."""
    changed = []
    for path in notebook_paths(root):
        text = path.read_text()
        nb = nbformat.reads(text, as_version=4)
        if not add_setup_cell(nb):
            continue
        # the two cells patched into the file as it is: nbformat's own writer would also give every cell without
        # an id a random one, a diff of noise in each notebook
        raw = json.loads(text)
        if len(raw["cells"]) < len(nb.cells):       # a set-up cell inserted: the file takes nbformat's cells
            raw["cells"] = json.loads(nbformat.writes(nb))["cells"]
        for own, cell in zip((c for c in raw["cells"] if c["cell_type"] == "code"), code_cells(nb)[:2]):
            own["source"] = cell.source.splitlines(keepends=True)
            own["metadata"] = dict(cell.metadata)
        write_text(path, json.dumps(raw, indent=1, ensure_ascii=False) + "\n")
        changed.append(path)
    return changed


# The set-up cell is the same dull plumbing in every notebook: collapsed, so a learner scrolls past one line (Colab's
# form view shows its title; JupyterLab and the HTML edition hide the source), still there to open and read.
SETUP_METADATA = {"cellView": "form", "jupyter": {"source_hidden": True}}


def references(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """Every place that names the repository: (file, what, "OWNER/NAME@REF"); badges also name their file."""
    found = []
    for path in notebook_paths(root) + [root / f for f in MARKDOWN_FILES if (root / f).is_file()]:
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        if path.suffix == ".ipynb":   # the parameters as the notebook defines them (cell source, not JSON)
            params = code_cells(nbformat.reads(text, as_version=4))[0].source
            url, ref = _URL.search(params), _REF.search(params)
            repo = url.group(2).removeprefix("https://github.com/") if url else None
            found.append((rel, "REPO_URL", f"{repo}@{ref.group(2) if ref else None}"))
        for m in _BADGE.finditer(text):
            found.append((rel, f"badge {m.group(3)}", f"{m.group(1)}@{m.group(2)}"))
    return found


# GitHub's rules: an owner is letters, digits and single inner hyphens (at most 39); a repository name letters,
# digits, '.', '_' and '-', but not '.' or '..' (which would turn the badge URLs into paths elsewhere)
_OWNER = re.compile(r"[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}")
_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")


def valid_repo(repo: str) -> bool:
    owner, _, name = repo.partition("/")
    return bool(_OWNER.fullmatch(owner) and _NAME.fullmatch(name) and name not in (".", ".."))


def valid_ref(ref: str) -> bool:
    """A branch or tag name git accepts, without '/' (kept out so it cannot be read as part of a path)."""
    return bool(re.fullmatch(r"[\w.-]+", ref)) and ".." not in ref and not ref.startswith(("-", ".")) \
        and not ref.endswith((".", ".lock"))


def rewrite(repo: str, ref: str = DEFAULT_REF, root: Path = ROOT) -> list[Path]:
    """Point every badge and `REPO_URL` / `REPO_REF` default under `root` at `repo` (OWNER/NAME) at `ref`;
    returns the files changed."""
    if repo.lower().endswith(".git"):   # a clone URL's ending: GitHub serves no page at OWNER/NAME.git/blob/...
        raise ValueError(f"--repo {repo!r}: give OWNER/NAME without '.git' ({repo[:-4]}): the badges open "
                         f"github.com/OWNER/NAME/blob/..., which GitHub does not serve under a name ending in .git")
    if not valid_repo(repo) or not valid_ref(ref):
        raise ValueError(f"--repo {repo!r} --ref {ref!r}: give OWNER/NAME as GitHub spells them (e.g. "
                         f"someone/revbook) and a branch or tag without '/' or '..'")
    changed = []
    for path in notebook_paths(root) + [root / f for f in MARKDOWN_FILES if (root / f).is_file()]:
        text = path.read_text()
        new = _BADGE.sub(lambda m: badge_url(repo, ref, m.group(3)), text)
        if path.suffix == ".ipynb":
            nb = nbformat.reads(new, as_version=4)
            params = code_cells(nb)[0]
            params.source = _REF.sub(rf'\g<1>"{ref}"', _URL.sub(rf'\g<1>"{repo_url(repo)}"', params.source))
            new = nbformat.writes(nb) + "\n"
        if new != text:
            write_text(path, new)
            changed.append(path)
    return changed


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", required=True, help="OWNER/NAME of the published repository on GitHub")
    p.add_argument("--ref", default=DEFAULT_REF, help="branch or tag the badges and set-up cells use (default main)")


def run_cli(args: argparse.Namespace) -> int:
    changed = rewrite(args.repo, args.ref)
    for path in changed:
        print(f"rewrote {path.relative_to(ROOT)}")
    print(f"every badge and REPO_URL now points at {repo_url(args.repo)} ({args.ref}); {len(changed)} file(s) changed")
    return 0
