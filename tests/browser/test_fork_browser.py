"""Fork from here, in JupyterLab in headless Chromium with a real kernel: a scripted run is forked at
a step from its view (bad input first: one line, nothing made), the child runs live under the run,
the run's tree lists it (step, outcome, cost) and a click compares the two with the divergence
marked; saved and reopened, the tree and the child are still there, and with no kernel the
button writes the line of code that makes the fork.  Readable in the light and the dark theme.

Real parts only, as in test_lab_browser.py (whose server and browser fixtures this reuses).
"""

from __future__ import annotations

import json

import nbformat
import test_lab_browser as base
from test_lab_browser import (
    ARTIFACTS,
    LIVE_TIMEOUT_MS,
    RENDER_TIMEOUT_MS,
    RUN_MIME,
    _kernel_idle,
    _open,
    _theme,
)
from test_run_view_browser import ERROR_CONTRAST_JS, _reopen_without_kernel, _shut_kernels, _watch

pytestmark = base.pytestmark

browser = base.browser
lab = base.lab

TASK = "what is the total of the numbers in data.txt?"
GUIDANCE = "the file was read already: give the total as the answer"
#: The step forked at, and the action given there instead of the model's.
AT = 3
ACTION = {"tool": "finish", "params": {"answer": "42"}}
PARENT = ".jp-Notebook .jp-MemfitRenderer"
TREE = f"{PARENT} .memfit-fork-tree"
CHILD = f"{PARENT} .memfit-fork-child"


def _notebook() -> dict:
    cells = ["%load_ext memfit_jupyter", f"%%memfit_task --model memfit/spin-demo --spin-warnings prompt --no-memory --name rr\n{TASK}"]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}})


def _open_form(page, at: int):
    """Open iteration ``at``'s row and its Fork from here form; returns the form."""
    row = page.locator(f"{PARENT} .memfit-run-host .memfit-iteration[data-iteration='{at}']").first
    # The view may have left it open (it follows the run's newest step); once seen, a row stays as
    # it is, even when the run's last events arrive after its status said done (live.ts).
    if row.get_attribute("open") is None:
        row.locator(":scope > summary").click()
    button = row.locator(".memfit-fork-open")
    button.wait_for(state="visible", timeout=RENDER_TIMEOUT_MS)
    button.click()
    form = row.locator(".memfit-fork-form")
    form.wait_for(timeout=RENDER_TIMEOUT_MS)
    return form


def _save(page) -> None:
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
                           timeout=RENDER_TIMEOUT_MS)


def _readable(page, theme: str) -> None:
    """The fork form's and the tree's text reads against what it is drawn on (WCAG AA)."""
    low = [c for c in page.evaluate(FORK_CONTRAST_JS) if c["ratio"] < 4.5]
    assert not low, f"{theme}: fork text with too little contrast: {low[:10]}"
    low = [c for c in page.evaluate(ERROR_CONTRAST_JS) if c["ratio"] < 4.5]
    assert not low, f"{theme}: error text with too little contrast: {low[:10]}"


#: The contrast of the fork parts' text (titles, labels, inputs, the tree's nodes, the code lines).
FORK_CONTRAST_JS = """
() => {""" + base.COLOUR_JS + """
  const sel = '.jp-MemfitRenderer :is(.memfit-fork-open, .memfit-fork-form-title, .memfit-fork-field > .memfit-label,'
    + ' .memfit-fork-input, .memfit-fork-node-button, .memfit-fork-changes, .memfit-fork-compare-hint,'
    + ' .memfit-fork-magic, .memfit-fork-call, .memfit-fork-tree .memfit-section-title, .memfit-fork-child > .memfit-section-title)';
  return [...document.querySelectorAll(sel)].filter(el => el.getClientRects().length && el.textContent.trim() !== ''
      || el.matches('input, textarea, select')).map(el => {
    const a = lum(rgb(getComputedStyle(el).color)), b = lum(ground(el));
    return { text: (el.value || el.textContent).slice(0, 40), ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) }; });
}
"""


def test_fork_from_a_step_runs_the_child_and_the_tree_survives_reopening(browser, lab):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.from_dict(_notebook()), lab["root"] / "fork.ipynb")
    page = browser.new_page(viewport={"width": 1400, "height": 1100})
    errors: list[str] = []
    _watch(page, errors)
    try:
        _open(page, lab, "fork.ipynb")
        _kernel_idle(page)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_selector(f"{PARENT} .memfit-live .memfit-live-status[data-status=done]", timeout=LIVE_TIMEOUT_MS)
        _kernel_idle(page)
        run_id = page.evaluate(f"() => document.querySelector('{PARENT} .memfit-meta').textContent.match(/run (\\w+)/)[1]")
        assert page.locator(f"{PARENT} .memfit-fork-node").count() == 0

        # bad input: one clear line in the form, no fork made
        form = _open_form(page, AT)
        form.locator("select[name=tool]").select_option("read_file")
        form.locator("textarea[name=params]").fill("{path: data.txt")
        form.locator("button[data-action=fork]").click()
        error = form.locator(".memfit-fork-error")
        page.wait_for_function(f"() => {{ const e = document.querySelector('{PARENT} .memfit-fork-form .memfit-fork-error');"
                               " return e && e.textContent.trim() !== ''; }", timeout=LIVE_TIMEOUT_MS)
        assert "not JSON" in error.inner_text() and "\n" not in error.inner_text().strip()
        _kernel_idle(page)
        assert page.locator(f"{PARENT} .memfit-fork-node").count() == 0
        assert page.locator(f"{PARENT} .memfit-fork-child").count() == 0

        # the fork: guidance and the action step 3 takes instead of the model's
        form.locator("textarea[name=guidance]").fill(GUIDANCE)
        form.locator("select[name=tool]").select_option(ACTION["tool"])
        form.locator("textarea[name=params]").fill(json.dumps(ACTION["params"]))
        page.screenshot(path=str(ARTIFACTS / "fork_form_light.png"), full_page=True)
        _readable(page, "light")
        form.locator("button[data-action=fork]").click()
        # the child appears under the run, live, and runs to its end
        page.wait_for_selector(f"{CHILD} .memfit-live", timeout=LIVE_TIMEOUT_MS)
        page.wait_for_selector(f"{CHILD} .memfit-live .memfit-live-status[data-status=done]", timeout=LIVE_TIMEOUT_MS)
        page.wait_for_selector(f"{TREE} .memfit-fork-node[data-status=done]", timeout=LIVE_TIMEOUT_MS)
        _kernel_idle(page)
        assert page.locator(f"{PARENT} .memfit-run-host .memfit-fork-form").count() == 0  # closed once made
        node = page.locator(f"{TREE} .memfit-fork-node")
        assert node.count() == 1 and node.get_attribute("data-at") == str(AT)
        text = node.inner_text()
        assert f"step {AT}" in text and "done" in text and "$" in text and GUIDANCE[:30] in text, text
        assert "42" in page.locator(f"{CHILD} .memfit-header").inner_text()

        page.locator(TREE).screenshot(path=str(ARTIFACTS / "fork_tree_only_light.png"))
        page.locator(CHILD).screenshot(path=str(ARTIFACTS / "fork_child_light.png"))
        # a click on the fork compares it with the run, the diverged step marked on both sides
        node.locator("button").click()
        compare = page.locator(f"{PARENT} .memfit-fork-compare .memfit-compare")
        compare.wait_for(timeout=RENDER_TIMEOUT_MS)
        assert f"Diverged at iteration {AT}" in compare.locator(".memfit-diverged").inner_text()
        assert compare.locator(f".memfit-diverged-row[data-iteration='{AT}']").count() == 2
        page.screenshot(path=str(ARTIFACTS / "fork_tree_light.png"), full_page=True)
        _readable(page, "light")
        _theme(page, "Dark")
        page.screenshot(path=str(ARTIFACTS / "fork_tree_dark.png"), full_page=True)
        _readable(page, "dark")
        _theme(page, "Light")
        _save(page)
    finally:
        page.screenshot(path=str(ARTIFACTS / "fork_notebook.png"), full_page=True)

    saved = json.loads((lab["root"] / "fork.ipynb").read_text())
    [out] = [o for c in saved["cells"] for o in c.get("outputs", []) if RUN_MIME in o.get("data", {})]
    [fork] = out["metadata"][RUN_MIME]["forks"]
    assert fork["at"] == AT and fork["status"] == "done" and fork["trace"]["parent"]["run"] == run_id
    assert fork["trace"]["answer"] == "42" and fork["changes"]["guidance"] == GUIDANCE

    try:
        # reloaded with the kernel: the tree and the child are there, the run still forks
        page.reload()
        page.wait_for_selector(".jp-Notebook", timeout=RENDER_TIMEOUT_MS)
        _kernel_idle(page)
        page.wait_for_selector(f"{TREE} .memfit-fork-node[data-at='{AT}']", timeout=RENDER_TIMEOUT_MS)
        page.wait_for_selector(f"{CHILD} .memfit-header", timeout=RENDER_TIMEOUT_MS)
        page.wait_for_selector(f"{PARENT} .memfit-run-host .memfit-live", timeout=LIVE_TIMEOUT_MS)
        form = _open_form(page, 2)
        assert form.locator("button[data-action=fork]").count() == 1
        assert not errors, errors
    finally:
        page.close()

    # reopened with no kernel: the tree is still there, and the button writes the code to run
    _shut_kernels(lab)
    page = _reopen_without_kernel(browser, lab, saved, "fork_reopened.ipynb", errors, height=1100)
    try:
        page.wait_for_selector(f"{TREE} .memfit-fork-node[data-at='{AT}'][data-status=done]", timeout=RENDER_TIMEOUT_MS)
        assert page.locator(f"{PARENT} .memfit-live").count() == 0
        assert "42" in page.locator(f"{CHILD} .memfit-run .memfit-header").inner_text()
        form = _open_form(page, 2)
        assert form.locator("button[data-action=fork]").count() == 0
        form.locator("textarea[name=guidance]").fill("add the numbers once")
        magic = form.locator(".memfit-fork-magic").inner_text()
        assert magic == f"%memfit fork {run_id} --at 2 --guidance 'add the numbers once'", magic
        call = form.locator(".memfit-fork-call").inner_text()
        assert call.startswith('child = run.fork(at=2, guidance="add the numbers once")'), call
        form.screenshot(path=str(ARTIFACTS / "fork_code_light.png"))
        page.locator(TREE).screenshot(path=str(ARTIFACTS / "fork_tree_reopened_light.png"))
        page.locator(f"{TREE} .memfit-fork-node button").click()
        page.wait_for_selector(f"{PARENT} .memfit-fork-compare .memfit-diverged-row", timeout=RENDER_TIMEOUT_MS)
        page.screenshot(path=str(ARTIFACTS / "fork_reopened_light.png"), full_page=True)
        _readable(page, "light (reopened)")
        _theme(page, "Dark")
        page.screenshot(path=str(ARTIFACTS / "fork_reopened_dark.png"), full_page=True)
        form.screenshot(path=str(ARTIFACTS / "fork_code_dark.png"))
        page.locator(TREE).screenshot(path=str(ARTIFACTS / "fork_tree_reopened_dark.png"))
        _readable(page, "dark (reopened)")
        _theme(page, "Light")
        assert not errors, errors
    finally:
        page.close()
