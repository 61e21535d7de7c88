"""The run view in JupyterLab in headless Chromium, where a person leaves the page mid-run or
opens a run twice: a page reload in the middle of a step-mode run reattaches the view to the
run still alive in the kernel (Step works, ``run.step()`` from code shows), a second view of
the same notebook follows the run too, and a notebook with saved widget state opens with a
kernel silently, unmodified.  The X-ray stays open across Steps; the header's badge and the
status line say the same word; error text reads in both themes.

Real parts only, as in test_lab_browser.py (whose server and browser fixtures this reuses).
"""

from __future__ import annotations

import json
import shutil
import urllib.request

import nbformat
import test_lab_browser as base
from test_lab_browser import (
    ARTIFACTS,
    LIVE_TIMEOUT_MS,
    RENDER_TIMEOUT_MS,
    ROOT,
    _kernel_idle,
    _open,
    _theme,
)

#: Marked as the other browser test is, so the fast tier leaves these out.
pytestmark = base.pytestmark

#: The JupyterLab server and the browser, as the other browser test has them.
browser = base.browser
lab = base.lab

#: In the page: every element drawn as error text, with its contrast against what it is drawn on.
ERROR_CONTRAST_JS = """
() => {""" + base.COLOUR_JS + """
  return [...document.querySelectorAll('.jp-MemfitRenderer .memfit-error')].filter(el => el.getClientRects().length)
    .map(el => { const a = lum(rgb(getComputedStyle(el).color)), b = lum(ground(el));
      return { text: el.textContent.slice(0, 40), ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) }; });
}
"""

STEP_TASK = "what is the total of the numbers in data.txt?"


#: The cells of a step-mode run, paused before its first iteration.
STEP_CELLS = ["%load_ext memfit_jupyter", f"%%memfit_task --step --model memfit/spin-demo --spin-warnings prompt --no-memory --name rr\n{STEP_TASK}"]


def _write_notebook(lab, name: str, cells: list[str]) -> None:
    """A notebook of code cells, with a kernelspec (it opens with a kernel), in the server's folder."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})
    nbformat.write(nb, lab["root"] / name)


def _new_page(browser) -> tuple:
    """A page whose errors (page errors and memfit's console warnings) are collected."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    _watch(page, errors)
    return page, errors


def _run_all(page) -> None:
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")


def _start(page, lab, name: str) -> None:
    """Open notebook ``name``, wait for its kernel, run all its cells."""
    _open(page, lab, name)
    _kernel_idle(page)
    _run_all(page)


def _shut_kernels(lab) -> None:
    """Shut every session and kernel of the server down, as the Running panel would."""
    for kind in ("sessions", "kernels"):
        for item in json.loads(urllib.request.urlopen(f"{lab['url']}/api/{kind}?token={base.TOKEN}").read()):
            req = urllib.request.Request(f"{lab['url']}/api/{kind}/{item['id']}?token={base.TOKEN}", method="DELETE")
            urllib.request.urlopen(req, timeout=30).close()


def _reopen_without_kernel(browser, lab, saved: dict, name: str, errors: list[str], height: int = 1000):
    """``saved`` (a notebook as JSON) written as ``name`` without its kernelspec and opened with
    "No Kernel", as on a machine with no Python; returns the page."""
    for key in ("kernelspec", "language_info"):
        saved["metadata"].pop(key, None)
    (lab["root"] / name).write_text(json.dumps(saved))
    page = browser.new_page(viewport={"width": 1400, "height": height})
    _watch(page, errors)
    _open(page, lab, name)
    try:
        page.wait_for_selector(".jp-Dialog button:has-text('No Kernel')", timeout=15_000).click()
    except Exception:
        pass
    return page


def _watch(page, errors: list[str]) -> None:
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning")
            and ("memfit" in m.text or "TypeError" in m.text or "Error setting state" in m.text) else None)


#: The live run view of the notebook's step-mode run, and what it says.
LIVE = ".jp-Notebook .memfit-live"
VIEW_JS = """() => { const v = document.querySelector('.jp-Notebook .memfit-live'); if (!v) return null;
  return { rows: v.querySelectorAll('.memfit-iteration').length,
    badge: v.querySelector('.memfit-header .memfit-status').textContent,
    line: v.querySelector('.memfit-live-status .memfit-live-label').textContent,
    buttons: [...v.querySelectorAll('.memfit-buttons button')].map(b => b.dataset.action),
    xrayOpen: !!v.querySelector('.memfit-xray[open]') }; }"""


def _view(page) -> dict:
    return page.evaluate(VIEW_JS)


def _wait_rows(page, rows: int) -> None:
    """Wait until the live view shows more than ``rows`` iteration rows and can step again."""
    page.wait_for_function(f"() => {{ const v = document.querySelector('{LIVE}');"
                           f" return v && v.querySelectorAll('.memfit-iteration').length > {rows}"
                           " && v.querySelector('.memfit-buttons button[data-action=step]:not([disabled])'); }",
                           timeout=LIVE_TIMEOUT_MS)


def _step(page, click) -> int:
    """Take one step with ``click()`` and wait for it to show; returns the rows shown then."""
    before = _view(page)["rows"]
    click()
    _wait_rows(page, before)
    _kernel_idle(page)
    return _view(page)["rows"]


def _kernel_run(page, code: str) -> None:
    """Run code in the notebook's kernel as a cell would (the post-cell hooks run too)."""
    page.evaluate("code => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel"
                  ".requestExecute({ code }).done", code)


def test_reload_mid_run_reattaches_and_a_second_view_follows(browser, lab):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    _write_notebook(lab, "reload.ipynb", STEP_CELLS)
    page, errors = _new_page(browser)
    second = None
    try:
        _start(page, lab, "reload.ipynb")
        page.wait_for_selector(f"{LIVE} button[data-action=step]", timeout=LIVE_TIMEOUT_MS)
        _kernel_idle(page)
        view = _view(page)
        assert view["badge"] == view["line"] == "paused", view  # not "pending" above "paused"
        # the X-ray opened before a Step stays open after it
        page.locator(f"{LIVE} .memfit-xray > summary").click()
        rows = _step(page, lambda: page.locator(f"{LIVE} button[data-action=step]").click())
        view = _view(page)
        assert view["xrayOpen"], "the X-ray closed after a Step"
        assert view["badge"] == view["line"] == "paused", view
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
                               timeout=RENDER_TIMEOUT_MS)

        page.reload()
        page.wait_for_selector(".jp-Notebook", timeout=RENDER_TIMEOUT_MS)
        _kernel_idle(page)
        _wait_rows(page, rows - 1)  # live again, with its buttons: the run the kernel holds
        view = _view(page)
        assert view["rows"] == rows and view["badge"] == view["line"] == "paused", view
        rows = _step(page, lambda: page.locator(f"{LIVE} button[data-action=step]").click())
        rows = _step(page, lambda: _kernel_run(page, "rr.step()"))  # from code: the view follows
        page.screenshot(path=str(ARTIFACTS / "reloaded_step_light.png"))

        # the same notebook open in a second tab: a second view of the same run
        second = browser.new_page(viewport={"width": 1400, "height": 1000})
        _watch(second, errors)
        _open(second, lab, "reload.ipynb")
        _kernel_idle(second)
        _wait_rows(second, rows - 1)
        rows = _step(second, lambda: second.locator(f"{LIVE} button[data-action=step]").click())
        _wait_rows(page, rows - 1)  # the first tab saw the step taken in the second
        page.locator(f"{LIVE} button[data-action=continue]").click()
        for p in (page, second):
            p.wait_for_selector(f"{LIVE} .memfit-live-status[data-status=spin_exit], "
                                f"{LIVE} .memfit-live-status[data-status=done]", timeout=LIVE_TIMEOUT_MS)
            view = _view(p)
            assert view["badge"] == view["line"] and view["buttons"] == [], view
        assert not errors, errors
    finally:
        page.screenshot(path=str(ARTIFACTS / "reload_notebook.png"), full_page=True)
        page.close()
        if second is not None:
            second.close()


def test_a_kernel_shut_down_mid_run_leaves_the_saved_copy_with_no_buttons(browser, lab):
    """A paused run whose kernel is shut down (from the Running panel, the REST API or a crash)
    is no longer there to steer: the view turns into the run's saved copy, which says the run had
    not ended, with no Step, Continue or Abort that nobody would answer."""
    _write_notebook(lab, "shutdown.ipynb", STEP_CELLS)
    page, errors = _new_page(browser)
    try:
        _start(page, lab, "shutdown.ipynb")
        page.wait_for_selector(f"{LIVE} button[data-action=step]", timeout=LIVE_TIMEOUT_MS)
        _kernel_idle(page)
        _step(page, lambda: page.locator(f"{LIVE} button[data-action=step]").click())
        page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.shutdown()")
        page.wait_for_function("() => !document.querySelector('.jp-Notebook .memfit-live')", timeout=RENDER_TIMEOUT_MS)
        run = page.locator(".jp-Notebook .jp-MemfitRenderer .memfit-run").first
        assert run.locator(".memfit-header .memfit-status").inner_text() == "unfinished"
        assert "had not ended" in run.locator(".memfit-header .memfit-reason").inner_text()
        assert page.locator(".jp-Notebook .memfit-buttons button").count() == 0
        assert run.locator(".memfit-iteration").count() >= 1  # the iterations it had, still drawn
        page.screenshot(path=str(ARTIFACTS / "kernel_shut_down.png"))
        assert not errors, errors
    finally:
        page.close()


def test_a_notebook_with_saved_widget_state_opens_silently_and_unmodified(browser, lab):
    """The shipped quickstart (saved widget state of models its kernel no longer has) opened
    with a kernel: no error in the console, nothing marked modified, the runs drawn saved."""
    shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", lab["root"] / "quickstart.ipynb")
    saved = json.loads((ROOT / "notebooks" / "quickstart.ipynb").read_text())
    assert saved["metadata"].get("widgets"), "the quickstart no longer holds widget state: test another notebook"
    page, errors = _new_page(browser)
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        _open(page, lab, "quickstart.ipynb")
        _kernel_idle(page)
        page.wait_for_selector(".jp-Notebook .jp-MemfitRenderer .memfit-run", timeout=RENDER_TIMEOUT_MS)
        page.wait_for_timeout(2000)  # the widget manager restores the saved state meanwhile
        assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty") is False
        assert page.locator(".jp-Notebook .memfit-live").count() == 0  # saved runs, not stale live ones
        assert not errors, errors
    finally:
        page.close()


def test_error_text_reads_in_both_themes(browser, lab):
    """A failed tool call's error ("exit code 1") has 4.5:1 contrast or more, light and dark."""
    shutil.copy(ROOT / "tests" / "fixtures" / "saved_runs.ipynb", lab["root"] / "errors.ipynb")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        _open(page, lab, "errors.ipynb")
        try:
            page.wait_for_selector(".jp-Dialog button:has-text('No Kernel')", timeout=15_000).click()
        except Exception:
            pass
        page.wait_for_selector(".jp-Notebook .jp-MemfitRenderer .memfit-run", timeout=RENDER_TIMEOUT_MS)
        for b in page.locator(".jp-Notebook .memfit-run .memfit-expand-all").all():
            b.click()
        for name in ("Light", "Dark"):
            _theme(page, name)
            found = page.evaluate(ERROR_CONTRAST_JS)
            assert len(found) >= 1, "no error text drawn: the fixture lost its failed calls"
            low = [c for c in found if c["ratio"] < 4.5]
            assert not low, f"{name}: error text with too little contrast: {low[:5]}"
            page.locator(".jp-Notebook .memfit-error").first.screenshot(path=str(ARTIFACTS / f"error_text_{name.lower()}.png"))
        _theme(page, "Light")
    finally:
        page.close()


#: Heights in the page: the demo cell's outputs together, and each of them.
DEMO_HEIGHT_JS = """() => { const cell = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')]
  .find(c => c.querySelector('.memfit-compare')); if (!cell) return null;
  const wrap = cell.querySelector('.jp-Cell-outputWrapper');
  return { total: wrap.getBoundingClientRect().height, live: cell.querySelectorAll('.memfit-live').length,
    parts: [...cell.querySelectorAll('.jp-OutputArea-child')].map(o => Math.round(o.getBoundingClientRect().height)),
    text: wrap.innerText }; }"""
#: A demo cell with its iterations closed, live or reopened, fits in about one screen.
DEMO_MAX_PX = 1100


def test_a_demo_is_one_compact_view_live_and_reopened(browser, lab):
    """``%memfit_demo``: one compare view, each side live while it runs (no widget container), its
    height measured live and reopened with no kernel."""
    cells = ["%load_ext memfit_jupyter", "%memfit_demo step-repetition --dir spin-demo-cell"]
    _write_notebook(lab, "demo.ipynb", cells)
    page, errors = _new_page(browser)
    try:
        _start(page, lab, "demo.ipynb")
        # live while the runs go: both sides drawn from their widget models inside the compare view
        page.wait_for_function("() => document.querySelectorAll('.jp-Notebook .memfit-compare .memfit-side .memfit-live')"
                               ".length === 2", timeout=LIVE_TIMEOUT_MS)
        page.wait_for_selector(".jp-Notebook .memfit-demo-outcome", timeout=LIVE_TIMEOUT_MS)
        page.wait_for_selector(".jp-Notebook .memfit-side .memfit-live-status[data-status=failed]", timeout=LIVE_TIMEOUT_MS)
        _kernel_idle(page)
        # measured with the iterations closed (the row that followed the run stays open live)
        page.evaluate("() => document.querySelectorAll('.jp-Notebook .memfit-iteration[open]')"
                      ".forEach(d => d.removeAttribute('open'))")
        live = page.evaluate(DEMO_HEIGHT_JS)
        page.screenshot(path=str(ARTIFACTS / "demo_live_light.png"), full_page=True)
        assert live["live"] == 2 and len(live["parts"]) == 3, live["parts"]  # note, the pair, the table
        assert live["total"] <= DEMO_MAX_PX, f"the live demo cell is {live['total']:.0f} px: {live['parts']}"
        assert "HBox(" not in live["text"] and "VBox(" not in live["text"]
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
                               timeout=RENDER_TIMEOUT_MS)
    finally:
        page.close()
    _shut_kernels(lab)
    saved = json.loads((lab["root"] / "demo.ipynb").read_text())
    assert not [o for c in saved["cells"] for o in c.get("outputs", [])
                if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    page = _reopen_without_kernel(browser, lab, saved, "demo_reopened.ipynb", errors)
    try:
        page.wait_for_selector(".jp-Notebook .memfit-compare .memfit-side .memfit-run", timeout=RENDER_TIMEOUT_MS)
        reopened = page.evaluate(DEMO_HEIGHT_JS)
        page.screenshot(path=str(ARTIFACTS / "demo_reopened_light.png"), full_page=True)
        _theme(page, "Dark")
        page.screenshot(path=str(ARTIFACTS / "demo_reopened_dark.png"), full_page=True)
        _theme(page, "Light")
        assert reopened["live"] == 0 and len(reopened["parts"]) == 3, reopened["parts"]
        assert reopened["total"] <= DEMO_MAX_PX, f"the reopened demo cell is {reopened['total']:.0f} px: {reopened['parts']}"
        assert "HBox(" not in reopened["text"] and "model not found" not in reopened["text"]
        print(f"demo cell height: live {live['total']:.0f} px {live['parts']}, "
              f"reopened {reopened['total']:.0f} px {reopened['parts']}")
        assert not errors, errors
    finally:
        page.close()


def test_the_exported_report_opens_offline_and_reads_as_the_live_view(browser, lab):
    """``%memfit export RUN report.html``: the file opens from file:// with every request off the
    disk refused, draws the full view (the same renderer) and, with "expand all", says what the
    live view says; light and dark follow the reader's system."""
    cells = ["%load_ext memfit_jupyter",
             "%%memfit_task --model memfit/spin-demo --spin-warnings prompt --no-memory --name exported\n" + STEP_TASK,
             "%memfit export exported report.html"]
    _write_notebook(lab, "export.ipynb", cells)
    page, errors = _new_page(browser)
    try:
        _start(page, lab, "export.ipynb")
        page.wait_for_selector(f"{LIVE} .memfit-live-status[data-status=done]", timeout=LIVE_TIMEOUT_MS)
        page.wait_for_function("() => document.querySelector('.jp-Notebook').innerText.includes('opens offline')",
                               timeout=LIVE_TIMEOUT_MS)
        live = page.locator(f"{LIVE} .memfit-run").first
        live.locator(".memfit-expand-all").click()
        live_text = live.inner_text()
    finally:
        page.close()
    report = lab["root"] / "report.html"
    assert report.is_file()
    for scheme in ("light", "dark"):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme=scheme)
        fetched: list[str] = []

        def only_the_file(route, fetched=fetched):
            url = route.request.url
            if url.startswith("file:"):
                route.continue_()
            else:
                fetched.append(url)
                route.abort()

        ctx.route("**/*", only_the_file)
        offline = ctx.new_page()
        _watch(offline, errors)
        offline.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        offline.goto(report.as_uri())
        offline.wait_for_selector(".memfit-run", timeout=RENDER_TIMEOUT_MS)
        offline.locator(".memfit-run .memfit-expand-all").click()
        assert offline.locator(".memfit-run").inner_text() == live_text
        assert offline.evaluate("document.body.dataset.jpThemeLight") == ("true" if scheme == "light" else "false")
        found = offline.evaluate(ERROR_CONTRAST_JS)
        assert found and not [c for c in found if c["ratio"] < 4.5], found
        offline.screenshot(path=str(ARTIFACTS / f"report_{scheme}.png"), full_page=True)
        assert fetched == [], f"the report asked the network for {fetched}"
        ctx.close()
    assert not errors, errors


def test_memory_ranking_bars_are_absolute_and_a_nonsense_query_says_so(browser, lab):
    cells = ["%load_ext memfit_jupyter",
             "%memfit_memory add CSV exports from the billing system use semicolons --tags csv,billing",
             "%memfit_memory add The quarterly report lives in data/reports --tags reports",
             "_ = %memfit_memory search zebra quantum",
             "_ = %memfit_memory list"]
    _write_notebook(lab, "ranking.ipynb", cells)
    page, errors = _new_page(browser)
    try:
        _start(page, lab, "ranking.ipynb")
        page.wait_for_function("() => document.querySelectorAll('.jp-Notebook .memfit-memory').length === 2",
                               timeout=LIVE_TIMEOUT_MS)
        search, listed = page.locator(".jp-Notebook .memfit-memory").all()
        assert "Nothing relevant" in search.locator(".memfit-nothing-relevant").inner_text()
        rows = search.locator(".memfit-rank-row").all()
        assert rows and all("memfit-below-floor" in r.get_attribute("class") for r in rows)
        for r in rows:  # the bar is the score itself (0 to 1), not a share of the best
            width = r.locator(".memfit-final .memfit-bar-fill").evaluate("n => parseFloat(n.style.width)")
            value = float(r.locator(".memfit-final").inner_text())
            assert abs(width - 100 * value) < 1 and width < 50, (width, value)
        assert listed.locator("th[data-key=final]").inner_text() == "stored score"
        stored = [float(x) for x in listed.locator(".memfit-final").all_inner_texts()]
        assert stored and all(v > 0 for v in stored), stored
        search.screenshot(path=str(ARTIFACTS / "memory_nothing_relevant_light.png"))
        _theme(page, "Dark")
        search.screenshot(path=str(ARTIFACTS / "memory_nothing_relevant_dark.png"))
        _theme(page, "Light")
        assert not errors, errors
    finally:
        page.close()


#: Records, in the page, what the live view said while it ran: notes and the rows shown.
LIVE_WATCH_JS = """
() => { window.__memfitSeen = { notes: [], rows: [] };
  new MutationObserver(() => { const v = document.querySelector('.jp-Notebook .memfit-live'); if (!v) return;
    const note = v.querySelector('.memfit-live-note'); if (note) window.__memfitSeen.notes.push(note.textContent);
    const n = v.querySelectorAll('.memfit-iteration').length; const seen = window.__memfitSeen.rows;
    if (!seen.length || seen[seen.length - 1] !== n) seen.push(n); })
  .observe(document.body, { childList: true, subtree: true, characterData: true }); }
"""


def test_the_first_run_of_a_kernel_says_it_loads_the_model_client(browser, lab):
    """The first model call of a kernel imports litellm (seconds): the view says so meanwhile,
    then shows the iterations as they come, not all at once."""
    cells = ["%load_ext memfit_jupyter",
             "import sys; assert 'litellm' not in sys.modules, 'litellm is imported already'",
             "%config MemfitMagics.throttle_ms = 0",  # every event sent as it comes
             "%%memfit_task --model memfit/spin-demo --spin-warnings prompt --no-memory --name first\n" + STEP_TASK]
    _write_notebook(lab, "first.ipynb", cells)
    page, errors = _new_page(browser)
    try:
        _open(page, lab, "first.ipynb")
        _kernel_idle(page)
        page.evaluate(LIVE_WATCH_JS)
        _run_all(page)
        page.wait_for_selector(f"{LIVE} .memfit-live-status[data-status=done]", timeout=LIVE_TIMEOUT_MS)
        outputs = page.locator(".jp-Notebook .jp-OutputArea-output").all_inner_texts()
        assert not [o for o in outputs if "AssertionError" in o or "UsageError" in o], outputs
        seen = page.evaluate("window.__memfitSeen")
        assert any(n.startswith("loading the model client") for n in seen["notes"]), seen["notes"][:5]
        assert page.locator(f"{LIVE} .memfit-live-note").count() == 0  # gone once loaded
        assert len([n for n in seen["rows"] if n > 0]) >= 3, seen["rows"]  # rows came one by one
        assert not errors, errors
    finally:
        page.close()
