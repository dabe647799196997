"""The HTML edition checked as a reader's browser shows it: headless Chromium with the network off.

`python -m rev site ... --check` (or `check_site(folder)`) serves the built site on 127.0.0.1 and opens every page
listed in its `site.json` (written by `rev.book.site`) in Debian's Chromium, driven by Playwright. Every request
that leaves 127.0.0.1 is refused and recorded (and host names resolve to nothing, so Chromium's own background
traffic cannot get out either). Each page must then:
* load, with no request failing and no script error;
* show its figures: as many images as the notebook had image outputs, each decoded (naturalWidth > 0);
* render its math: MathJax's own elements (`mjx-container`) in every math span, no `mjx-merror`;
* hold no error output, no `NBVAL_` marker and no machine path from the run's parameters.
Search is checked too (a query gives results, from the local index), and the menu buttons are clicked on one
chapter (`drawer_problems`): at phone width the chapter drawer and the page contents must open, at desktop width
the chapter sidebar must hide. Returns the problems found, one a line.
"""
from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import threading
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Iterator
from urllib.parse import urlparse
from ..base.cli import CommandFailed

# The contract between the site's builder (`rev.book.site`, which writes this file and raises this error) and
# this check, which reads the file: defined here so that the check does not import the builder.
MANIFEST = "site.json"          # what the browser check expects of each page


class SiteError(CommandFailed):
    pass


LOCAL_HOSTS = ("127.0.0.1",)
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
    # the network off for Chromium itself: every host name but the local server's resolves to nothing
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
SEARCH_QUERY = "reversible"

# What a page shows, read in the page after MathJax finished (the function returns a plain object).
_FACTS_JS = """() => {
  const main = document.querySelector('main') || document.body;
  const maths = [...main.querySelectorAll('span.math, div.math')];
  const imgs = [...main.querySelectorAll('article img')].filter(i => !i.closest('.sd-badge, .badge'));
  return {
    h1: (main.querySelector('h1') || {}).textContent || '',
    math: maths.length,
    unrendered: maths.filter(m => !m.querySelector('mjx-container')).length,
    mjx: main.querySelectorAll('mjx-container').length,
    merror: main.querySelectorAll('mjx-merror').length,
    figures: imgs.filter(i => /\\/_images\\//.test(i.src) && !/colab-badge/.test(i.src)).length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
    unnamed: imgs.filter(i => !/colab-badge/.test(i.src)
                           && (!i.alt || /\\.(png|jpe?g|svg|gif)$|_images|[0-9a-f]{20,}/i.test(i.alt))).length,
    errors: main.querySelectorAll('.output.traceback, .output.error, div.cell_output .traceback').length,
    text: main.innerText,
  };
}"""


# Waits for MathJax's first typesetting pass; false where MathJax never started.
_MATHJAX_DONE_JS = """() => (window.MathJax && MathJax.startup && MathJax.startup.promise)
  ? MathJax.startup.promise.then(() => true) : false"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # one line per file would bury the check's own report
        pass


@contextmanager
def serve(folder: Path) -> Iterator[str]:
    """A static web server for `folder` on 127.0.0.1 (a free port) while the block runs; yields its base URL."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def chromium_path() -> str:
    """Chromium to drive: $REVBOOK_CHROMIUM, else the first of chromium / chromium-browser / google-chrome found."""
    found = os.environ.get("REVBOOK_CHROMIUM") or next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
    if not found:
        raise SiteError("no Chromium found: install Debian's (`apt-get install -y chromium`) or point "
                           "REVBOOK_CHROMIUM at one")
    return found


def page_problems(page: dict[str, Any], facts: dict[str, Any], secrets: list[str]) -> list[str]:
    """What is wrong with one page, from the facts the browser read off it (pure: tested without a browser)."""
    where, bad = page["path"], []
    if not facts["h1"].strip():
        bad.append(f"{where}: no title (h1)")
    if facts["figures"] < page["figures"]:
        bad.append(f"{where}: {facts['figures']} figure(s) shown, {page['figures']} expected")
    if facts["broken"]:
        bad.append(f"{where}: image(s) not loaded: {', '.join(facts['broken'][:3])}")
    if facts.get("unnamed"):
        bad.append(f"{where}: {facts['unnamed']} figure(s) with no alt text, or a file name for one")
    if page["math"] and facts["mjx"] == 0:
        bad.append(f"{where}: math expected but MathJax rendered none")
    if facts["unrendered"]:
        bad.append(f"{where}: {facts['unrendered']} of {facts['math']} math element(s) not rendered")
    if facts["merror"]:
        bad.append(f"{where}: {facts['merror']} MathJax error(s) (bad TeX)")
    if facts["errors"]:
        bad.append(f"{where}: {facts['errors']} error output(s)")
    if "NBVAL_" in facts["text"]:
        bad.append(f"{where}: an NBVAL_ marker is visible")
    bad += [f"{where}: shows the run's path {s}" for s in secrets if s and s in facts["text"]]
    return bad


def _screenshot(pw_page: Any, path: Path, scroll_to: str | None = None) -> None:
    if scroll_to:
        pw_page.evaluate(f"() => {{ const e = document.querySelector({scroll_to!r}); "
                         "if (e) e.scrollIntoView({block: 'center'}); }")
        pw_page.wait_for_timeout(300)
    path.parent.mkdir(parents=True, exist_ok=True)
    pw_page.screenshot(path=str(path))


PHONE, DESKTOP = {"width": 390, "height": 844}, {"width": 1280, "height": 900}
# what each menu button must do, as the reader sees it: on a phone the chapter drawer and the page contents open
# as dialogs; on a desktop the chapter sidebar hides
_DRAWERS_JS = """() => {
  const shown = e => !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  const open = id => { const d = document.getElementById(id); return !!d && d.open; };
  return {chapters: open('pst-primary-sidebar-modal'), contents: open('pst-secondary-sidebar-modal'),
          sidebar: shown(document.getElementById('pst-primary-sidebar'))};
}"""


def _click_visible(tab: Any, selector: str) -> bool:
    button = next((b for b in tab.query_selector_all(selector) if b.is_visible()), None)
    if button is None:
        return False
    button.click()
    tab.wait_for_timeout(300)
    return True


def drawer_problems(browser: Any, base: str, path: str, timeout_ms: int) -> list[str]:
    """Click the menu buttons of one chapter page: at phone width the chapter drawer (☰) and the page contents
    must open, at desktop width ☰ must hide the chapter sidebar. (A page can carry hidden duplicates of these
    buttons that the theme's scripts bind to instead: then a click does nothing.)"""
    problems = []
    for size, checks in ((PHONE, ((".primary-toggle", "chapters", True, "the chapter drawer did not open"),
                                  (".secondary-toggle", "contents", True, "the page contents did not open"))),
                         (DESKTOP, ((".primary-toggle", "sidebar", False, "the chapter sidebar did not hide"),))):
        context = browser.new_context(viewport=size, service_workers="block")
        for selector, key, want, what in checks:
            tab = context.new_page()
            tab.goto(base + path, wait_until="load", timeout=timeout_ms)
            if not _click_visible(tab, selector):
                problems.append(f"{path} at {size['width']} px: no visible {selector} button")
            elif tab.evaluate(_DRAWERS_JS)[key] != want:
                problems.append(f"{path} at {size['width']} px: {what} when its button was clicked")
            tab.close()
        context.close()
    return problems


def check_site(site: str | Path, screenshots: str | Path | None = None, timeout_ms: int = 30_000,
               secrets: tuple[str, ...] = ()) -> list[str]:
    """Open every page of the site in `site` with the network off; returns the problems found (empty: passed).
    `screenshots`: a folder for PNGs of the landing page, a chapter with math and figures, and the report;
    `secrets`: text no page may show (this machine's folders, say)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        raise SiteError('playwright not installed: `pip install -e ".[site]"`') from e
    site = Path(site)
    if not (site / MANIFEST).is_file():
        raise SiteError(f"{site} has no {MANIFEST}: check a folder that `python -m rev site` built")
    manifest = json.loads((site / MANIFEST).read_text())
    problems: list[str] = []
    outside: list[str] = []
    shots = Path(screenshots) if screenshots else None
    chapters = [p for p in manifest["pages"] if p["kind"] == "chapter"]
    showcase = next((p for p in chapters if p["math"] and p["figures"]), None)

    def route(r: Any) -> None:
        url = urlparse(r.request.url)
        if url.scheme in ("data", "blob") or url.hostname in LOCAL_HOSTS:
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    with serve(site) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True)
        context = browser.new_context(viewport={"width": 1280, "height": 900}, service_workers="block")
        context.route("**/*", route)
        for page in manifest["pages"]:
            tab = context.new_page()
            failed: list[str] = []
            tab.on("pageerror", lambda e, f=failed: f.append(f"script error: {e}"))
            tab.on("requestfailed", lambda r, f=failed: f.append(f"request failed: {r.url}"))
            tab.on("response", lambda r, f=failed: f.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
            response = tab.goto(base + page["path"], wait_until="load", timeout=timeout_ms)
            if response is None or not response.ok:
                problems.append(f"{page['path']}: did not load ({response.status if response else 'no response'})")
                tab.close()
                continue
            # MathJax is a deferred script, run before the load event: by now it has started, or it never will
            if page["math"] and not tab.evaluate(_MATHJAX_DONE_JS):
                problems.append(f"{page['path']}: MathJax did not start (its script missing or broken?)")
            facts = tab.evaluate(_FACTS_JS)
            problems += page_problems(page, facts, list(secrets))
            problems += [f"{page['path']}: {f}" for f in failed if not any(o in f for o in outside)]
            if shots and page["kind"] == "landing":
                _screenshot(tab, shots / "landing.png")
            if shots and page["kind"] == "report":
                _screenshot(tab, shots / "report.png")
                _screenshot(tab, shots / "report-figure.png", "article img")
            if shots and page is showcase:
                _screenshot(tab, shots / f"chapter-{Path(page['path']).stem}.png")
                _screenshot(tab, shots / f"chapter-{Path(page['path']).stem}-figure.png", "div.cell_output img")
            tab.close()
        if chapters:
            problems += drawer_problems(browser, base, chapters[0]["path"], timeout_ms)
        tab = context.new_page()
        tab.goto(f"{base}search.html?q={SEARCH_QUERY}", wait_until="load", timeout=timeout_ms)
        try:
            tab.wait_for_selector("#search-results li", timeout=timeout_ms)
        except Exception:  # noqa: BLE001
            problems.append(f"search.html: no results for {SEARCH_QUERY!r}")
        browser.close()
    problems += [f"fetched from outside: {u}" for u in sorted(set(outside))]
    print(f"site check: {len(manifest['pages'])} pages and search in Chromium, network off: "
          + (f"{len(problems)} problem(s)" if problems else "passed"))
    return problems
