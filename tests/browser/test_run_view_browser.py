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

#: The JupyterLab server and the browser, as the other browser test has them.
browser = base.browser
lab = base.lab

#: In the page: every element drawn as error text, with its contrast against what it is drawn on.
ERROR_CONTRAST_JS = """
() => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = c => { const [r, g, b] = c.slice(0, 3).map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ground = el => { for (let n = el; n; n = n.parentElement) {
    const c = rgb(getComputedStyle(n).backgroundColor); if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c; }
    return [255, 255, 255]; };
  return [...document.querySelectorAll('.jp-MemfitRenderer .memfit-error')].filter(el => el.getClientRects().length)
    .map(el => { const a = lum(rgb(getComputedStyle(el).color)), b = lum(ground(el));
      return { text: el.textContent.slice(0, 40), ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) }; });
}
"""

STEP_TASK = "what is the total of the numbers in data.txt?"


def _step_notebook() -> dict:
    cells = ["%load_ext memfit_jupyter",
             f"%%memfit_task --step --model memfit/spin-demo --no-memory --name rr\n{STEP_TASK}"]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})


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
    nbformat.write(nbformat.from_dict(_step_notebook()), lab["root"] / "reload.ipynb")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    _watch(page, errors)
    second = None
    try:
        _open(page, lab, "reload.ipynb")
        _kernel_idle(page)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
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


def test_a_notebook_with_saved_widget_state_opens_silently_and_unmodified(browser, lab):
    """The shipped quickstart (saved widget state of models its kernel no longer has) opened
    with a kernel: no error in the console, nothing marked modified, the runs drawn saved."""
    shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", lab["root"] / "quickstart.ipynb")
    saved = json.loads((ROOT / "notebooks" / "quickstart.ipynb").read_text())
    assert saved["metadata"].get("widgets"), "the quickstart no longer holds widget state: test another notebook"
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    _watch(page, errors)
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
