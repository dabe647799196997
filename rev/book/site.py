"""`python -m rev site`: the HTML edition of the executed workbook, to read without running anything.

It serves the notebooks that `python -m rev workbook` executed (in `rev.book.sequence.SEQUENCE` order), the
report (`REPORT.md` and its figures), a landing page, navigation and search, as a static folder that opens from
disk or any web server. Sphinx + myst-nb + sphinx-book-theme build it (the `site` extra: ``pip install -e
".[site]"``) with ``nb_execution_mode = "off"``: nothing is re-run, so each page shows what that run printed.

A reader sees a copy, changed at build time; the notebooks and what nbval compares keep everything:
* papermill's injected-parameters cell is dropped (it holds this machine's paths); the parameters cell and the
  set-up cell are left off the page (each chapter page says which profile it ran with, instead) but kept in the
  notebook the page offers for download, which therefore runs where it is opened;
* `# NBVAL_...` marker comments are stripped from the displayed code; outputs name the run's results and data
  folders `results` and `data` (the parameters' defaults), not by this machine's absolute paths;
* widget outputs (tqdm's progress bars under papermill) become static HTML of their final state and the widget
  state goes, so no widget manager is fetched from a CDN; interactive widgets only run behind `INTERACTIVE`,
  which the workbook leaves off, so their static figure is what the page has;
* a solution cell shows its output with its code folded (exercise answers are already folded in `<details>`);
* the Colab badge image (remote) becomes a local file, its link unchanged; the launch buttons open
  `REPO_URL` at `REPO_REF`, read from the notebooks' own parameters cell (what `python -m rev badges` sets);
* MathJax comes from the site itself (the django-static-mathjax wheel carries a MathJax 3 build), so math
  renders with the network off.

`rev.book.site_check` (``--check``) opens the built site in headless Chromium with the network off.
"""
from __future__ import annotations

import argparse
import copy
import html
import importlib.util
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import nbformat

from ..base.cli import UserError, folder_arg
from ..base.files import check_output
from ..base.results_folder import PLOTS_DIR, REPORT_NAME
from .colab import SETUP_CELL, _REF, _URL
from .outputs import merged_streams, stream_text, terminal_text
from .sequence import SEQUENCE, read_notebook
from .site_check import MANIFEST, SiteError
from ..base.units import MIB

ASSETS = Path(__file__).resolve().parent / "site_assets"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
REMOTE_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")
_SETUP_FIRST_LINE = SETUP_CELL.splitlines()[0]
# a marker alone on its line, or trailing code: nbval reads them, a reader has no use for them
_MARKER_LINE = re.compile(r"^[ \t]*#[ \t]*NBVAL_[A-Z_]+[ \t]*\n?", re.M)
_MARKER_TAIL = re.compile(r"[ \t]*#[ \t]*NBVAL_[A-Z_]+[ \t]*$", re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_MATH = re.compile(r"\$\$|(?<![\\$])\$[^$\n]+\$")

# One line per chapter for the landing page (the notebook's title says the rest). A chapter added to the
# workbook's SEQUENCE without a line here still gets a page; tests/book/test_site.py asks for its line.
CHAPTER_LINES = {
    "00_setup": "the machine, the autocast dtype training will use, and the corpus turned into token files",
    "01_integrator_theory": "a residual block is forward Euler; leapfrog and reversible Euler can be run backwards",
    "01b_build_the_backward": "write the memory-free backward as a torch.autograd.Function and test it",
    "02_tests": "the test suite for the reversible trunks run live, and memory flat in depth measured",
    "03_screening": "the reversible integrators and streams at several step sizes; the trunk for the runs picked",
    "04_run1_baseline": "the ordinary residual GPT: the curve every later run is compared with",
    "05_run2_reversible_same_batch": "the reversible trunk at the baseline's batch: memory saved, speed paid",
    "06_run3_reversible_max_batch": "the largest batch each trunk fits, the max-batch runs, and the deepest model",
    "07_report": "what the reversible trunk bought and what it cost, against the published figures",
    "07b_where_reversible_stands": "reversible trunks beside checkpointing, offload and model parallelism",
    "08_training_irreversibility": "why training itself cannot be run backwards: four potentials, measured",
    "09_adaptive_checkpointing": "the reversal defect decides where an exact copy of the stream is kept",
    "09b_adaptive_rank": "the reversal defect as a rank signal for a low-rank state, tested in the open",
    "10_finetune_trace_rollback": "an exact trace of fine-tuning, walked back to the starting weights",
}


@dataclass
class Page:
    """One page of the site, as the browser check will look for it."""
    path: str        # relative to the site root, e.g. notebooks/04_run1_baseline.html
    kind: str        # landing | chapter | report
    title: str
    figures: int     # images the page must show
    math: bool       # whether the page has math for MathJax to render


# -------------------------------------------------------------------------------------------------------------
# The notebooks, as a reader sees them
# -------------------------------------------------------------------------------------------------------------

_SOLUTION_MARKS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.MULTILINE)


def strip_markers(source: str) -> str:
    """`source` without its `# NBVAL_...` marker comments."""
    return _MARKER_TAIL.sub("", _MARKER_LINE.sub("", source))


def _child_ids(state: dict) -> list[str]:
    return [c.removeprefix("IPY_MODEL_") for c in state.get("children", []) if isinstance(c, str)]


def widget_html(model_id: str, models: dict[str, Any]) -> str | None:
    """Static HTML of widget `model_id` in its saved final state (boxes, HTML/labels, progress bars: what tqdm
    draws), or None for a widget a static page cannot show."""
    model = models.get(model_id)
    if model is None:
        return None
    name, state = model.get("model_name", ""), model.get("state", {})
    if name in ("HBoxModel", "VBoxModel", "BoxModel"):
        parts = [widget_html(c, models) for c in _child_ids(state)]
        if any(p is None for p in parts):
            return None
        return f'<div class="rev-progress">{"".join(parts)}</div>'
    if name == "HTMLModel":
        return f"<span>{state.get('value', '')}</span>"
    if name == "LabelModel":
        return f"<span>{html.escape(str(state.get('value', '')))}</span>"
    if name in ("FloatProgressModel", "IntProgressModel"):
        lo, hi, v = state.get("min", 0), state.get("max", 100), state.get("value", 0)
        return f'<progress max="{hi - lo}" value="{v - lo}"></progress>'
    return None


def _html_text(fragment: str) -> str:
    """The words of an HTML fragment (tqdm pads with figure spaces), for the output's text/plain."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).replace("\u2007", " ").split())


def static_output(out: nbformat.NotebookNode, models: dict[str, Any]) -> nbformat.NotebookNode | None:
    """`out` with a widget view replaced by static HTML of its final state and a stream's redrawn lines by their
    last state; None drops it."""
    if out.get("output_type") == "stream" and ("\r" in stream_text(out) or "\x1b" in stream_text(out)):
        out = copy.copy(out)
        out["text"] = terminal_text(stream_text(out))
        return out
    data = out.get("data", {})
    if WIDGET_VIEW not in data:
        return out
    fragment = widget_html(data[WIDGET_VIEW].get("model_id", ""), models)
    if fragment is None:
        return None
    return nbformat.v4.new_output("display_data", data={"text/html": fragment, "text/plain": _html_text(fragment)})


def notebook_title(nb: nbformat.NotebookNode, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", cell.source, re.M)
            if m:
                return m.group(1).strip()
    return fallback


def _shown_outputs(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The outputs a page shows (cells tagged remove-cell / remove-output have none there)."""
    return [o for c in nb.cells if c.cell_type == "code"
            if not {"remove-cell", "remove-output"} & set(c.metadata.get("tags", [])) for o in c.get("outputs", [])]


def has_math(nb: nbformat.NotebookNode) -> bool:
    """Whether any markdown (cells or text/markdown outputs) holds `$` math outside inline code."""
    texts = [c.source for c in nb.cells if c.cell_type == "markdown"]
    texts += [o.data["text/markdown"] for o in _shown_outputs(nb) if "text/markdown" in o.get("data", {})]
    return any(_MATH.search(_INLINE_CODE.sub("", t)) for t in texts)


def figure_count(nb: nbformat.NotebookNode) -> int:
    return sum(any(t in o.get("data", {}) for t in IMAGE_TYPES) for o in _shown_outputs(nb))


def error_outputs(nb: nbformat.NotebookNode) -> list[str]:
    """`ename: evalue` of every error output outside cells tagged `raises-exception` (deliberate errors)."""
    return [f"{o.get('ename')}: {o.get('evalue')}" for c in nb.cells if c.cell_type == "code"
            if "raises-exception" not in c.metadata.get("tags", []) for o in c.get("outputs", [])
            if o.get("output_type") == "error"]


def is_executed(nb: nbformat.NotebookNode) -> bool:
    return "papermill" in nb.metadata or any(c.get("execution_count") for c in nb.cells if c.cell_type == "code")


def relative_paths(out: nbformat.NotebookNode, paths: dict[str, str]) -> nbformat.NotebookNode:
    """`out` with each absolute folder in `paths` written as its short name (the run's results folder as
    `results`, say): what a reader's own run would print, not this machine's layout."""
    def fix(text: Any) -> Any:
        if isinstance(text, list):
            return [fix(t) for t in text]
        if not isinstance(text, str):
            return text
        for folder in sorted(paths, key=len, reverse=True):  # the longer first: one folder may hold another
            text = text.replace(folder, paths[folder])
        return text

    if "text" in out:
        out["text"] = fix(out["text"])
    for mime in [m for m in out.get("data", {}) if m.startswith("text/")]:
        out["data"][mime] = fix(out["data"][mime])
    return out


def prepare_notebook(nb: nbformat.NotebookNode, badge: str, note: str = "",
                     paths: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The reader's copy of executed notebook `nb` (see the module docstring): `badge` is the local image's path
    as the page refers to it, `note` a line of Markdown put under the notebook's first cell, `paths` absolute
    folders to show by a short name in the outputs."""
    nb = copy.deepcopy(nb)
    models = nb.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    nb.metadata.pop("papermill", None)
    cells = []
    for cell in nb.cells:
        tags = set(cell.metadata.get("tags", []))
        if "injected-parameters" in tags:
            continue
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace(REMOTE_BADGE, badge)
        elif cell.cell_type == "code":
            if "parameters" in tags or cell.source.startswith(_SETUP_FIRST_LINE):
                # off the page, kept in the .ipynb the page offers for download, so that copy still runs
                tags.add("remove-cell")
            cell.source = strip_markers(cell.source)
            if "solution" in tags:  # folded, so a reader can try the exercise before seeing it
                tags.add("hide-input")
                cell.source = _SOLUTION_MARKS.sub("", cell.source)   # nbgrader's marks are for the course
                cell.metadata["mystnb"] = {"code_prompt_show": "Show the solution",
                                           "code_prompt_hide": "Hide the solution"}
            cell.outputs = [relative_paths(o, paths or {}) for o in
                            (static_output(o, models) for o in merged_streams(cell.get("outputs", [])))
                            if o is not None]
        if tags:
            cell.metadata["tags"] = sorted(tags)
        cells.append(cell)
    if note and cells:
        cells.insert(1, nbformat.v4.new_markdown_cell(note))
    nb.cells = cells
    return nb


# -------------------------------------------------------------------------------------------------------------
# Where things come from
# -------------------------------------------------------------------------------------------------------------

def notebooks_folder(src: Path) -> Path:
    """`src` itself or its `notebooks/` (the workbook's build folder), whichever holds the executed copies."""
    for folder in (src / "notebooks", src):
        if folder.is_dir() and any(folder.glob("*.ipynb")):
            return folder
    raise SiteError(f"no notebooks in {src}: give the folder the workbook wrote its executed copies to, e.g. "
                    f"`python -m rev workbook --profile smoke` then `python -m rev site --profile smoke` "
                    f"(it reads build/smoke/notebooks)")


def executed_notebooks(folder: Path) -> list[tuple[str, nbformat.NotebookNode]]:
    """The executed notebooks in `folder`, in workbook order; raises SiteError when there are none, or when
    one holds an error output."""
    found, unexecuted, errors = [], [], []
    for name in SEQUENCE:
        path = folder / f"{name}.ipynb"
        if not path.is_file():
            continue
        nb = read_notebook(path)
        if not is_executed(nb):
            unexecuted.append(name)
            continue
        errors += [f"{name}: {e}" for e in error_outputs(nb)]
        found.append((name, nb))
    if errors:
        raise SiteError(f"error outputs in {folder} (a run that failed?): " + "; ".join(errors[:5]))
    if not found:
        what = f"only notebooks that were never executed ({', '.join(unexecuted)})" if unexecuted else \
            f"none of the workbook's notebooks ({SEQUENCE[0]}.ipynb, ...)"
        raise SiteError(f"{folder} holds {what}: the site is built from executed copies; run "
                        f"`python -m rev workbook --profile smoke --out DIR` and give `--from DIR`")
    if unexecuted:
        print(f"site: left out, never executed: {', '.join(unexecuted)}", file=sys.stderr)
    return found


def run_parameters(nbs: list[tuple[str, nbformat.NotebookNode]]) -> dict[str, Any]:
    """What the workbook ran with (papermill's record) and the repository the notebooks name."""
    params: dict[str, Any] = {}
    for _, nb in nbs:
        params = dict(nb.metadata.get("papermill", {}).get("parameters", {}))
        if params:
            break
    first = next(c for c in nbs[0][1].cells if "parameters" in c.metadata.get("tags", []) or c.cell_type == "code")
    url, ref = _URL.search(first.source), _REF.search(first.source)
    params.setdefault("REPO_URL", url.group(2) if url else "https://github.com/revbook/revbook")
    params.setdefault("REPO_REF", ref.group(2) if ref else "main")
    return params


def mathjax_folder() -> Path:
    """The MathJax 3 build the site serves (from the django-static-mathjax wheel, importable as `mathjax`)."""
    spec = importlib.util.find_spec("mathjax")
    es5 = Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax" / "es5" if spec and \
        spec.submodule_search_locations else None
    if es5 is None or not (es5 / "tex-chtml-full.js").is_file():
        raise SiteError('no local MathJax: install the site extra, `pip install -e ".[site]"`')
    return es5


def _need_toolchain() -> None:
    missing = [m for m in ("sphinx", "myst_nb", "sphinx_book_theme") if importlib.util.find_spec(m) is None]
    if missing:
        raise SiteError(f"{', '.join(missing)} not installed: the site's toolchain is an optional extra, "
                        f'`pip install -e ".[site]"`')


# -------------------------------------------------------------------------------------------------------------
# The Sphinx source
# -------------------------------------------------------------------------------------------------------------

def conf_py(repo_url: str, ref: str) -> str:
    """Sphinx configuration of the site (written into the generated source folder)."""
    options = {
        "repository_url": repo_url, "repository_branch": ref, "path_to_docs": "",
        "use_repository_button": True, "use_download_button": True, "home_page_in_toc": False,
        "launch_buttons": {"colab_url": "https://colab.research.google.com", "notebook_interface": "jupyterlab"},
        "show_toc_level": 2,
        # no top navbar: pydata-sphinx-theme's default fills `#pst-header` (a second search box) and with it hidden
        # duplicates of the sidebar toggles, which the theme's scripts bind to first, so the visible ☰ and
        # contents buttons did nothing (`site_check` clicks them at phone and desktop width)
        "navbar_start": [], "navbar_center": [], "navbar_end": [], "navbar_persistent": [],
    }
    return "\n".join([
        '"""Generated by `python -m rev site`."""',
        'project = "revbook"',
        'author = "the revbook authors"',
        'copyright = "the revbook authors"',
        # githubpages writes .nojekyll: GitHub Pages would otherwise hide _static/ and _images/
        'extensions = ["myst_nb", "sphinx.ext.githubpages"]',
        'exclude_patterns = ["_build"]',
        'html_theme = "sphinx_book_theme"',
        'html_title = "revbook: reversible training of language models"',
        f"html_theme_options = {options!r}",
        'html_static_path = ["_static"]',
        'html_css_files = ["revbook.css"]',
        'html_js_files = ["revbook.js"]',
        "html_show_sphinx = False",
        # MathJax from the site itself; the full TeX build needs no extension fetched at view time
        'mathjax_path = "mathjax/tex-chtml-full.js"',
        'myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]',
        'nb_execution_mode = "off"',
        "nb_merge_streams = True",
        # Markdown outputs (computed findings) are parsed as MyST, with the dollar math above, as the cells are: a
        # finding that writes $2^{29}$ renders as math (commonmark would leave the dollars, and no MathJax loads)
        'nb_render_markdown_format = "myst"',
        # no widget manager from a CDN: widget outputs were made static already
        "nb_ipywidgets_js = {}",
        'suppress_warnings = ["myst.header", "mystnb.unknown_mime_type"]',
        "",
    ])


def landing_page(pages: list[Page], params: dict[str, Any], report: bool, when: str) -> str:
    """index.md: what the book is, the chapters with a line each, how to run it, the report."""
    profile, repo_url, ref = params.get("PROFILE", "?"), params["REPO_URL"], params["REPO_REF"]
    colab = f"https://colab.research.google.com/github/{repo_url.removeprefix('https://github.com/')}" \
            f"/blob/{ref}/notebooks/00_setup.ipynb"
    chapters = [p for p in pages if p.kind == "chapter"]
    lines = [
        "# revbook: reversible training of language models",
        "",
        "A residual trunk `x += f(x)` keeps every layer's activations for backward. A *reversible* trunk can be "
        "run backward, so its backward pass rebuilds each layer's input from its output and stores nothing per "
        "layer: activation memory flat in depth, for about one extra forward of compute. This workbook builds "
        "that, tests it against ordinary autograd, measures what it saves and what it costs, and trains small "
        "GPTs with it.",
        "",
        f"This is the **{profile}** edition: every chapter below was executed by `python -m rev workbook "
        f"--profile {profile}` ({when}), and each page shows what that run printed. "
        + ("The smoke profile is the one CI runs, in seconds per chapter: its models are tiny, so its numbers show "
           "the machinery at work, not results to quote; the `cpu` edition trains for real."
           if profile == "smoke" else ""),
        "",
        "## Chapters",
        "",
        '<ul class="rev-chapters">',
    ]
    for p in chapters:
        name = Path(p.path).stem
        line = CHAPTER_LINES.get(name, "")
        lines.append(f'<li><a href="{html.escape(p.path)}">{html.escape(p.title)}</a>'
                     + (f" — {html.escape(line)}" if line else "") + "</li>")
    lines += ["</ul>", ""]
    if report:
        lines += ["## The report", "",
                  "[The report](report.md) gathers the runs' tables and figures: validation loss at equal tokens, "
                  "peak memory, the largest batch each trunk fits, tokens/s and the reconstruction error of the "
                  "trained trunks.", ""]
    lines += [
        "## Run it yourself", "",
        "On a laptop CPU (the `cpu` profile, under half an hour on 2 cores), from a checkout of the repository:", "",
        "```bash",
        "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && "
        'pip install -e ".[notebooks,site]"',
        "python -m rev workbook --profile cpu --site      # the report, then this site, in build/cpu/site",
        "jupyter lab notebooks/                           # or open the chapters one by one",
        "```", "",
        f"In Colab, every chapter opens on its own from its badge (or the launch button at the top of its page), "
        f"from [{repo_url}]({repo_url}) at `{ref}`:", "",
        f"[![Open In Colab](colab-badge.svg)]({colab})", "",
        "## How this edition is made", "",
        "Each chapter starts with a parameters cell (profile, folders, seed) and a set-up cell that installs the "
        "code where it is missing; both are left out of these pages, as are the markers the tests read. Solution "
        "code is folded under the exercise it answers; written answers are folded under \"Answer\".", "",
        "```{toctree}", ":hidden:", ":caption: Chapters", "",
        *[p.path.removesuffix(".html") for p in chapters], "```", "",
    ]
    if report:
        lines += ["```{toctree}", ":hidden:", ":caption: Results", "", "report", "```", ""]
    return "\n".join(lines)


def copy_report(results_root: Path, profile: str, source: Path) -> Page | None:
    """report.md (and its plots) from results/<profile>/REPORT.md, or None when the run wrote none."""
    folder = results_root / profile
    report = folder / REPORT_NAME
    if not report.is_file():
        return None
    text = report.read_text()
    if (folder / PLOTS_DIR).is_dir():
        shutil.copytree(folder / PLOTS_DIR, source / PLOTS_DIR)
    figures = len(re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text))
    title = next(iter(re.findall(r"^#\s+(.+)$", text, re.M)), "Report")
    (source / "report.md").write_text(text)
    return Page("report.html", "report", title, figures, bool(_MATH.search(_INLINE_CODE.sub("", text))))


def write_source(nbs: list[tuple[str, nbformat.NotebookNode]], params: dict[str, Any], source: Path,
                 results_root: Path | None) -> list[Page]:
    """The Sphinx source folder of the site; returns its pages."""
    (source / "notebooks").mkdir(parents=True)
    static = source / "_static"
    static.mkdir()
    for asset in ("revbook.css", "revbook.js"):
        shutil.copy2(ASSETS / asset, static / asset)
    shutil.copy2(ASSETS / "colab-badge.svg", source / "colab-badge.svg")
    es5 = mathjax_folder()
    (static / "mathjax").mkdir()
    shutil.copy2(es5 / "tex-chtml-full.js", static / "mathjax" / "tex-chtml-full.js")
    shutil.copytree(es5 / "output" / "chtml" / "fonts" / "woff-v2", static / "mathjax" / "output" / "chtml" /
                    "fonts" / "woff-v2")
    profile = str(params.get("PROFILE", "?"))
    # the folders as the parameters cell names them by default (what a reader's own run prints)
    paths = {str(params[k]): short for k, short in (("RESULTS_DIR", "results"), ("DATA_DIR", "data")) if params.get(k)}
    pages = [Page("index.html", "landing", "revbook", 0, False)]
    for name, nb in nbs:
        note = f'<p class="rev-edition">Executed with the <code>{html.escape(profile)}</code> profile by ' \
               f'<code>python -m rev workbook</code>; this page hides the parameters and set-up cells (the notebook offered for download keeps them).</p>'
        page = prepare_notebook(nb, "../colab-badge.svg", note, paths)
        nbformat.write(page, source / "notebooks" / f"{name}.ipynb")
        pages.append(Page(f"notebooks/{name}.html", "chapter", notebook_title(page, name), figure_count(page),
                          has_math(page)))
    report = copy_report(results_root, profile, source) if results_root else None
    if report:
        pages.append(report)
    when = next((nb.metadata.get("papermill", {}).get("end_time", "")[:10] for _, nb in reversed(nbs)
                 if nb.metadata.get("papermill", {}).get("end_time")), "") or "date unknown"
    (source / "index.md").write_text(landing_page(pages, params, report is not None, when))
    (source / "conf.py").write_text(conf_py(str(params["REPO_URL"]), str(params["REPO_REF"])))
    return pages


# -------------------------------------------------------------------------------------------------------------
# Build
# -------------------------------------------------------------------------------------------------------------

def _clear(out: Path, force: bool = False) -> None:
    """Check that `out` may be emptied for a new build (`check_out`), then empty it."""
    check_out(out, force)
    if out.exists():
        shutil.rmtree(out)


def check_out(out: Path, force: bool = False) -> None:
    """Whether `out` may be replaced by a new build: a site this command built (its manifest is there) is; any
    other folder's files only with `force`, and never the checkout or its own folders (`check_output`)."""
    if out.exists() and not out.is_dir():
        raise SiteError(f"{out} is a file: --out names the folder the site goes to")
    ours = (out / MANIFEST).is_file()
    check_output(out, [] if ours or not out.is_dir() else [p for p in out.rglob("*") if p.is_file()], force=force)


def build_site(src: str | Path, out: str | Path, results: str | Path | None = None, quiet: bool = True,
               force: bool = False) -> Path:
    """Build the HTML edition from the executed notebooks in `src` (or `src`/notebooks) into `out`; `results`
    is the results root holding <profile>/REPORT.md (default: where the workbook wrote them, from papermill's
    record). Returns `out`/index.html. `out` is replaced whole: a folder that is not a site built here only with
    `force`."""
    t0 = time.perf_counter()
    nbs = executed_notebooks(notebooks_folder(Path(src)))  # the input first: a wrong folder is the likelier mistake
    check_out(Path(out), force)                            # then where it goes, wherever the toolchain is missing
    _need_toolchain()
    from sphinx.cmd.build import build_main

    params = run_parameters(nbs)
    results_root = Path(results) if results else Path(params["RESULTS_DIR"]) if params.get("RESULTS_DIR") else None
    out = Path(out)
    _clear(out, force)
    with tempfile.TemporaryDirectory(prefix="revbook-site-") as tmp:
        source = Path(tmp) / "source"
        source.mkdir()
        pages = write_source(nbs, params, source, results_root)
        warnings = Path(tmp) / "warnings.txt"
        argv = ["-b", "html", "-d", str(Path(tmp) / "doctrees"), "-w", str(warnings), "-j", "1"]
        code = build_main(argv + (["-q"] if quiet else []) + [str(source), str(out)])
        warned = [w for w in warnings.read_text().splitlines() if w.strip()] if warnings.is_file() else []
    if code != 0:
        raise SiteError(f"sphinx failed (exit {code}): " + "; ".join(warned[-5:]))
    for source_map in out.rglob("*.map"):  # the theme's debugging aids (3 MiB): a reader's browser never asks
        source_map.unlink()
    # only a machine's absolute path is worth a word: the workbook passes folders inside the checkout relative to it
    # ("data", "results"), and a word like "data" is on every page
    shown = [f"{p.path} shows {k}" for p in pages for k in ("RESULTS_DIR", "DATA_DIR")
             if params.get(k) and Path(str(params[k])).is_absolute() and str(params[k]) in (out / p.path).read_text()]
    if shown:  # what a chapter printed, kept; said here because a published page then shows this machine's paths
        print("site: pages that show this run's folders: " + "; ".join(shown), file=sys.stderr)
    manifest = {"profile": params.get("PROFILE"), "repo_url": params["REPO_URL"], "ref": params["REPO_REF"],
                "pages": [asdict(p) for p in pages], "warnings": warned}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"site: {len(pages)} pages, {size / MIB:.1f} MiB, in {time.perf_counter() - t0:.0f} s -> "
          f"{out / 'index.html'}" + (f" ({len(warned)} sphinx warnings, listed in {out / MANIFEST})" if warned else ""))
    return out / "index.html"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="src", type=Path,
                   help="folder of executed notebooks (the workbook's build folder or its notebooks/)")
    p.add_argument("--out", type=folder_arg, help="where the site goes (default: site/ beside the notebooks folder)")
    p.add_argument("--profile", help="shortcut for the workbook's own build folder: --from build/PROFILE/notebooks "
                                     "--out build/PROFILE/site")
    p.add_argument("--results", type=folder_arg,
                   help="results root holding PROFILE/REPORT.md (default: the one the workbook ran with)")
    p.add_argument("--check", action="store_true",
                   help="then open every page in headless Chromium with the network off (rev.book.site_check)")
    p.add_argument("--screenshots", type=folder_arg, help="with --check: save screenshots of some pages here")
    p.add_argument("--verbose", action="store_true", help="show sphinx's progress")
    p.add_argument("--force", action="store_true", help="replace --out although it is not a site built here")


def run_cli(args: argparse.Namespace) -> int:
    if args.src is None and args.profile is None:
        raise UserError("give --from DIR (executed notebooks) or --profile PROFILE (build/PROFILE/notebooks)")
    if args.src is None:
        from ..base.profiles import resolve_profile_name  # "auto" names the folder the workbook used

        args.profile = resolve_profile_name(args.profile)
    src = args.src or Path("build") / args.profile / "notebooks"
    out = args.out or (src.parent if src.name == "notebooks" else src) / "site"
    index = build_site(src, out, args.results, quiet=not args.verbose, force=args.force)
    if args.check:
        from .site_check import check_site

        problems = check_site(index.parent, screenshots=args.screenshots)
        if problems:        # a check's findings, like `nbref --check`'s: listed, exit status 1
            print("site check failed:\n  " + "\n  ".join(problems), file=sys.stderr)
            return 1
    return 0
