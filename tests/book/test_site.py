"""The HTML edition (`python -m rev site`): what a reader's copy of a notebook drops and keeps, the clear errors,
a real Sphinx build of a two-chapter site, and that site opened in headless Chromium with the network off.

The build and browser tests skip where the site extra or Chromium is missing, unless REVBOOK_SITE=1 (CI sets it
after installing them), where a missing tool fails instead of skipping."""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from rev.book import sequence, site, workbook
from rev.book.colab import SETUP_CELL
from rev.book.site_check import page_problems

REQUIRED = os.environ.get("REVBOOK_SITE") == "1"
PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
BADGE = "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]" \
        "(https://colab.research.google.com/github/someone/somebook/blob/v2/notebooks/{name}.ipynb)"


def _need(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing and REQUIRED:
        pytest.fail(f"REVBOOK_SITE=1 but {missing} not installed")
    if missing:
        pytest.skip(f"{missing} not installed (the site extra)")


def _code(source: str, outputs: list | None = None, tags: list[str] | None = None) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source, outputs=outputs or [], execution_count=1)
    if tags:
        cell.metadata["tags"] = tags
    return cell


def _progress_bar(model_id: str = "bar") -> tuple[nbformat.NotebookNode, dict]:
    """A tqdm-style widget output (initial text/plain, as saved) and the widget state holding its final state."""
    out = nbformat.v4.new_output("display_data", data={
        site.WIDGET_VIEW: {"model_id": model_id, "version_major": 2, "version_minor": 0},
        "text/plain": "train:   0%|          | 0/9 [00:00<?, ?it/s]"})
    state = {
        model_id: {"model_name": "HBoxModel", "state": {"children": ["IPY_MODEL_d", "IPY_MODEL_p", "IPY_MODEL_t"]}},
        "d": {"model_name": "HTMLModel", "state": {"value": "train:\u2007100%"}},
        "p": {"model_name": "FloatProgressModel", "state": {"min": 0.0, "max": 9.0, "value": 9.0}},
        "t": {"model_name": "HTMLModel", "state": {"value": "\u20079/9\u2007[00:01&lt;00:00]"}},
    }
    return out, state


def executed_notebook(name: str, results_dir: str = "/machine/results") -> nbformat.NotebookNode:
    """A small notebook as papermill leaves it: injected parameters, outputs, widget state."""
    bar, state = _progress_bar()
    image = nbformat.v4.new_output("display_data", data={"image/png": PNG_1PX, "text/plain": "<Figure>"})
    printed = nbformat.v4.new_output("stream", name="stdout", text=f"checked: True\nreused {results_dir}/smoke/run1\n")
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(f"# {name} · A chapter\n\n{BADGE.format(name=name)}\n\n"
                                      "Reversible Euler maps $x$ to $x + h f(x)$; the cost is `$HOME`-free."),
        _code('PROFILE = "auto"\nREPO_URL = "https://github.com/someone/somebook"\nREPO_REF = "v2"',
              tags=["parameters"]),
        _code(f'PROFILE = "smoke"\nRESULTS_DIR = "{results_dir}"\n', tags=["injected-parameters"]),
        _code(SETUP_CELL),
        nbformat.v4.new_markdown_cell("## A section\n\n$$\\phi = \\frac{\\eta}{4}\\,|U|^2$$"),
        _code("# NBVAL_CHECK_OUTPUT\nprint('checked:', True)  # NBVAL_IGNORE_OUTPUT", [printed]),
        _code("for _ in tqdm(range(9)):\n    pass", [bar]),
        _code("### BEGIN SOLUTION\nanswer = 42\n### END SOLUTION", tags=["solution"]),
        nbformat.v4.new_markdown_cell("<details><summary>Answer</summary>\n\nIt is $42$.\n\n</details>"),
        _code("plt.plot([1, 2]); plt.show()", [image]),
    ])
    nb.metadata["papermill"] = {"parameters": {"PROFILE": "smoke", "RESULTS_DIR": results_dir,
                                               "DATA_DIR": "/machine/data"}, "end_time": "2030-01-02T03:04:05"}
    nb.metadata["widgets"] = {site.WIDGET_STATE: {"state": state, "version_major": 2, "version_minor": 0}}
    return nb


# -------------------------------------------------------------------------------------------------------------
# A reader's copy (no Sphinx needed)
# -------------------------------------------------------------------------------------------------------------

def test_markers_leave_the_code_and_other_comments_stay():
    src = "# NBVAL_CHECK_OUTPUT\nx = 1  # NBVAL_IGNORE_OUTPUT\n# a comment that says why\nprint(x)"
    assert site.strip_markers(src) == "x = 1\n# a comment that says why\nprint(x)"


def test_reader_copy_drops_plumbing_and_keeps_the_lesson():
    nb = executed_notebook("04_run1_baseline")
    before = nbformat.writes(nb)
    page = site.prepare_notebook(nb, "../colab-badge.svg", "a note", {"/machine/results": "results"})
    assert nbformat.writes(nb) == before, "the executed notebook itself must not change"
    sources = [c.source for c in page.cells]
    text = "\n".join(sources)
    outputs = [o for c in page.cells if c.cell_type == "code" for o in c.outputs]
    assert "reused results/smoke/run1\n" in [o.get("text", "").split("True\n")[-1] for o in outputs]
    assert "/machine/results" not in text and not any("injected-parameters" in c.metadata.get("tags", [])
                                                       for c in page.cells)
    hidden = [c for c in page.cells if "remove-cell" in c.metadata.get("tags", [])]
    assert [c.source.splitlines()[0] for c in hidden] == ['PROFILE = "auto"', SETUP_CELL.splitlines()[0]], \
        "parameters and set-up cells stay in the notebook (so a download runs) but off the page"
    assert "NBVAL_" not in text and "print('checked:', True)" in text
    assert site.REMOTE_BADGE not in text and "](../colab-badge.svg)" in text
    assert "blob/v2/notebooks/04_run1_baseline.ipynb" in text, "the badge's link is kept"
    assert sources[1] == "a note"
    solution = next(c for c in page.cells if "solution" in c.metadata.get("tags", []))
    assert "hide-input" in solution.metadata["tags"]
    assert "widgets" not in page.metadata and "papermill" not in page.metadata
    outputs = [o for c in page.cells if c.cell_type == "code" for o in c.outputs]
    assert not any(site.WIDGET_VIEW in o.get("data", {}) for o in outputs)
    bar = next(o for o in outputs if "rev-progress" in o.get("data", {}).get("text/html", ""))
    assert '<progress max="9.0" value="9.0">' in bar.data["text/html"]
    assert bar.data["text/plain"] == "train: 100% 9/9 [00:01<00:00]", "the final state, not the saved 0%"
    assert site.figure_count(page) == 1 and site.has_math(page)


def test_a_widget_a_page_cannot_show_is_dropped():
    out, state = _progress_bar()
    state["p"]["model_name"] = "IntSliderModel"
    assert site.static_output(out, state) is None
    assert site.static_output(out, {}) is None
    plain = nbformat.v4.new_output("stream", name="stdout", text="x\n")
    assert site.static_output(plain, state) is plain


def test_dollars_in_code_are_not_math():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("costs `$5` or `$HOME`, no $ math")])
    assert not site.has_math(nb)
    nb.cells.append(nbformat.v4.new_markdown_cell("now $h^2$"))
    assert site.has_math(nb)


def test_every_chapter_of_the_workbook_has_its_landing_line():
    assert set(site.CHAPTER_LINES) == set(sequence.SEQUENCE)


def test_a_folder_without_executed_notebooks_says_what_to_run(tmp_path, capsys):
    with pytest.raises(site.SiteError, match="python -m rev workbook"):
        site.notebooks_folder(tmp_path)
    nbformat.write(nbformat.v4.new_notebook(cells=[_code("x = 1")]), tmp_path / "00_setup.ipynb")
    nb = nbformat.read(tmp_path / "00_setup.ipynb", as_version=4)
    nb.cells[0].execution_count = None
    nbformat.write(nb, tmp_path / "00_setup.ipynb")
    with pytest.raises(site.SiteError, match="never executed.*00_setup"):
        site.executed_notebooks(site.notebooks_folder(tmp_path))
    from rev.__main__ import main

    with pytest.raises(SystemExit, match="^error: .*never executed"):    # the command line's one error path
        main(["site", "--from", str(tmp_path), "--out", str(tmp_path / "site")])


def test_a_run_that_failed_is_refused(tmp_path):
    nb = executed_notebook("00_setup")
    nb.cells[-1].outputs.append(nbformat.v4.new_output("error", ename="ValueError", evalue="boom", traceback=[]))
    nbformat.write(nb, tmp_path / "00_setup.ipynb")
    with pytest.raises(site.SiteError, match="ValueError: boom"):
        site.executed_notebooks(tmp_path)
    nb.cells[-1].metadata["tags"] = ["raises-exception"]   # a deliberate error is part of the lesson
    nbformat.write(nb, tmp_path / "00_setup.ipynb")
    assert [n for n, _ in site.executed_notebooks(tmp_path)] == ["00_setup"]


def test_a_folder_that_is_not_a_site_is_cleared_only_with_force(tmp_path):
    (tmp_path / "thesis.tex").write_text("precious")
    with pytest.raises(ValueError, match=r"thesis.tex would be replaced .* pass --force"):
        site._clear(tmp_path)
    assert (tmp_path / "thesis.tex").is_file()
    with pytest.raises(site.SiteError, match="is a file"):
        site._clear(tmp_path / "thesis.tex")
    (tmp_path / site.MANIFEST).write_text("{}")       # a site built here: replaced without a word
    site._clear(tmp_path)
    assert not tmp_path.exists()
    (tmp_path / "own").mkdir(parents=True)
    (tmp_path / "own" / "thesis.tex").write_text("precious")
    site._clear(tmp_path / "own", force=True)
    assert not (tmp_path / "own").exists()


def test_workbook_site_flag_builds_from_its_own_build_folder(monkeypatch, tmp_path):
    calls = {}
    monkeypatch.setattr(workbook, "run_workbook", lambda *a, **k: [])
    monkeypatch.setattr(site, "build_site", lambda src, out, results: calls.update(src=src, out=out, results=results))
    args = argparse.Namespace(profile="smoke", out=None, results=tmp_path, data_dir=Path("data"), only=None,
                              kernel="python3", seed=0, force=False, site=True)
    assert workbook.run_cli(args) == 0
    assert calls == {"src": Path("build/smoke/notebooks"), "out": Path("build/smoke/site"), "results": tmp_path}


def test_counts_read_back_as_floats_print_as_integers():
    import pandas as pd

    from rev.chapters.shared.results import whole_numbers

    df = whole_numbers(pd.DataFrame({"batch": [21.0, 8.0], "layers": [2.0, None], "h": [1.0, 0.5],
                                     "loss": [5.1, 5.2]}), ["batch", "layers", "h", "absent"])
    assert df["batch"].tolist() == [21, 8] and str(df["batch"].dtype) == "int64"
    assert df["layers"].isna().iloc[1] and df["h"].tolist() == [1.0, 0.5], "missing and fractional values stay float"
    assert "21.0" not in df.to_string() and " 21 " in df.to_string()


def test_page_problems_name_what_a_reader_would_miss():
    page = {"path": "notebooks/x.html", "figures": 2, "math": True}
    good = {"h1": "x", "figures": 2, "broken": [], "mjx": 3, "math": 3, "unrendered": 0, "merror": 0, "errors": 0,
            "text": "fine"}
    assert page_problems(page, good, ["/machine/results"]) == []
    bad = {**good, "figures": 1, "mjx": 0, "unrendered": 3, "errors": 1, "unnamed": 1,
           "text": "# NBVAL_CHECK_OUTPUT /machine/results"}
    found = "\n".join(page_problems(page, bad, ["/machine/results"]))
    for what in ("1 figure(s) shown, 2 expected", "MathJax rendered none", "3 of 3 math", "error output",
                 "NBVAL_", "/machine/results", "1 figure(s) with no alt text"):
        assert what in found


# -------------------------------------------------------------------------------------------------------------
# A real build, then a real browser
# -------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> Path:
    _need("sphinx", "myst_nb", "sphinx_book_theme", "mathjax")
    root = tmp_path_factory.mktemp("site")
    results = root / "results"
    (results / "smoke" / "plots").mkdir(parents=True)
    shutil.copy(site.ASSETS / "colab-badge.svg", results / "smoke" / "plots" / "loss.svg")
    (results / "smoke" / "REPORT.md").write_text("# Report (smoke)\n\n| run | batch |\n|---|---|\n| a | 21 |\n\n"
                                                 "![loss](plots/loss.svg)\n")
    (root / "build" / "notebooks").mkdir(parents=True)
    for name in ("00_setup", "01_integrator_theory"):
        nbformat.write(executed_notebook(name, str(results)), root / "build" / "notebooks" / f"{name}.ipynb")
    index = site.build_site(root / "build", root / "build" / "site")
    return index.parent


@pytest.mark.slow
def test_the_site_is_built_offline_with_local_assets_only(built_site):
    manifest = json.loads((built_site / site.MANIFEST).read_text())
    assert [p["path"] for p in manifest["pages"]] == [
        "index.html", "notebooks/00_setup.html", "notebooks/01_integrator_theory.html", "report.html"]
    assert manifest["ref"] == "v2" and manifest["repo_url"] == "https://github.com/someone/somebook"
    assert (built_site / "_static" / "mathjax" / "tex-chtml-full.js").is_file()
    assert not list(built_site.rglob("*.map")), "source maps are for the theme's developers, not readers"
    assert (built_site / ".nojekyll").is_file(), "GitHub Pages would hide _static/ without it"
    for html_file in [built_site / p["path"] for p in manifest["pages"]]:
        text = html_file.read_text()
        remote = [m for m in re.findall(r'<(?:script|img)[^>]+src="([^"]+)"|<link[^>]+href="([^"]+)"', text)
                  for m in m if m.startswith(("http:", "https:", "//")) and not m.startswith("https://github.com")]
        assert not remote, f"{html_file.name} loads {remote}"
        assert "NBVAL_" not in text and str(built_site.parents[1] / "results") not in text
    chapter = (built_site / "notebooks" / "00_setup.html").read_text()
    assert "BUNDLE_ZIP" not in chapter and "Set-up: use the code" not in chapter
    assert "colab.research.google.com/github/someone/somebook/blob/v2/notebooks/00_setup.ipynb" in chapter
    assert "Show the solution" in chapter, "solution code folded under its own prompt"
    assert "rev-progress" in chapter and "colab-badge.svg" in chapter and "reused results/smoke/run1" in chapter
    landing = (built_site / "index.html").read_text()
    assert "01_integrator_theory · A chapter" in landing and site.CHAPTER_LINES["01_integrator_theory"] in landing
    assert "report.html" in landing and "2030-01-02" in landing


@pytest.mark.slow
def test_the_site_reads_in_a_browser_with_the_network_off_and_breakage_is_caught(built_site, tmp_path):
    _need("playwright")
    if shutil.which("chromium") is None and not os.environ.get("REVBOOK_CHROMIUM"):
        if REQUIRED:
            pytest.fail("REVBOOK_SITE=1 but no chromium")
        pytest.skip("no chromium (apt-get install chromium)")
    from rev.book.site_check import check_site

    assert check_site(built_site) == []
    broken = tmp_path / "broken"
    shutil.copytree(built_site, broken)
    (broken / "_static" / "mathjax" / "tex-chtml-full.js").unlink()
    page = broken / "notebooks" / "01_integrator_theory.html"
    page.write_text(page.read_text().replace("</article>", '<img src="https://example.org/x.png"></article>', 1))
    problems = "\n".join(check_site(broken, timeout_ms=5_000))
    assert "MathJax" in problems and "fetched from outside: https://example.org/x.png" in problems
