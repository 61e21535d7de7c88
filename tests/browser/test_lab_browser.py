"""JupyterLab in headless Chromium: saved memfit outputs render with no kernel; a notebook
run live, saved, its kernel shut down and reopened shows the same runs and memory ranking,
readable in the light and the dark theme.

Real parts only: a JupyterLab server on 127.0.0.1 (random port, known token), Debian's
chromium driven by Playwright, the built labextension, a real kernel for the live part.
Screenshots go to test-artifacts/browser/ (git-ignored).  Needs what
tests/browser/setup.sh installs; the test runs that script itself when chromium or
playwright is missing, and skips only when they cannot be installed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.kernel]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "saved_runs.ipynb"
BUILT = ROOT / "memfit_jupyter" / "labextension"
ARTIFACTS = ROOT / "test-artifacts" / "browser"
CHROMIUM = "/usr/bin/chromium"
RUN_MIME = "application/vnd.memfit.run+json"
TOKEN = "memfit-browser-test"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
#: Generous upper bounds for a loaded 2-core machine; a healthy run takes a fraction.
START_TIMEOUT_S = 120
RENDER_TIMEOUT_MS = 90_000
LIVE_TIMEOUT_MS = 180_000


def _have_browser() -> str | None:
    """None when chromium and playwright are usable, else why not."""
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} is missing"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing"
    return None


@pytest.fixture(scope="module")
def browser():
    missing = _have_browser()
    if missing:
        setup = subprocess.run(["bash", str(ROOT / "tests" / "browser" / "setup.sh")],
                               capture_output=True, text=True, timeout=900)
        if _have_browser():
            pytest.skip(f"{missing} and tests/browser/setup.sh could not install it: "
                        f"{(setup.stdout + setup.stderr).strip()[-500:]}")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> object:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


LIVE_CELLS = [
    "%load_ext memfit_jupyter",
    "%%memfit_task --model memfit/demo --name demo\nwhat is the total of the numbers in data.txt?",
    "%memfit_memory add CSV exports from the billing system use semicolons --tags csv,billing",
    "%memfit_memory add The quarterly report lives in data/reports --tags reports",
    "_ = %memfit_memory search csv semicolons",
    "%%memfit_task --model memfit/spin-demo --spin-warnings prompt --name spun --quiet\nwhat is the total of the numbers in data.txt?",
    "import memfit_jupyter\nmemfit_jupyter.compare(demo, spun, labels=('demo', 'spin-demo'))",
]


def _live_notebook() -> dict:
    import nbformat

    cells = [nbformat.v4.new_code_cell(src) for src in LIVE_CELLS]
    nb = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    return nb


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server serving a temporary folder with the fixture notebooks."""
    import nbformat

    if not (BUILT / "package.json").exists():
        pytest.fail("the labextension is not built: run `pip install -e .`")
    base = tmp_path_factory.mktemp("lab")
    root = base / "root"
    root.mkdir()
    shutil.copy(FIXTURE, root / "saved_runs.ipynb")  # the server may save; never the fixture
    nbformat.write(nbformat.from_dict(_live_notebook()), root / "live.ipynb")
    # The extension as built now comes first on the path, ahead of an installed copy that
    # an editable install may have left behind.
    data = base / "data"
    (data / "labextensions").mkdir(parents=True)
    (data / "labextensions" / "memfit-jupyter").symlink_to(BUILT, target_is_directory=True)
    settings = base / "settings"
    (settings / "@jupyterlab" / "notebook-extension").mkdir(parents=True)
    # Render every cell (no windowing), so all outputs are in the page to read.
    (settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none", "autoStartDefaultKernel": False}))
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port = _free_port()
    env = {**os.environ, "JUPYTER_PATH": os.pathsep.join([str(data), os.environ.get("JUPYTER_PATH", "")]),
           "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(base / "ws"),
           "JUPYTER_RUNTIME_DIR": str(base / "runtime")}
    log = open(base / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", "--ip=127.0.0.1",
         f"--port={port}",
         "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}",
         f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
         "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            _get(f"{url}/api/status?token={TOKEN}")
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"JupyterLab did not start: {(base / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.3)
    try:
        yield {"url": url, "root": root, "log": base / "lab.log"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _open(page, lab, name: str) -> None:
    # a workspace of its own per page: nothing restored from an earlier page
    page.goto(f"{lab['url']}/lab/workspaces/{name.split('.')[0]}/tree/{name}?reset&token={TOKEN}")
    page.wait_for_selector(".jp-Notebook", timeout=RENDER_TIMEOUT_MS)


def _page(browser, errors: list[str]):
    """A new page whose script errors and console errors go to ``errors``."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return page


def _no_kernel_dialog(page) -> None:
    """A notebook with no kernelspec asks which kernel to start: answer "No Kernel"."""
    try:
        dialog = page.wait_for_selector(".jp-Dialog", timeout=15_000)
    except Exception:
        return
    button = dialog.query_selector("button:has-text('No Kernel')")
    if button is not None:
        button.click()
    page.wait_for_selector(".jp-Dialog", state="detached", timeout=15_000)


def _saved(name: str) -> list[dict]:
    nb = json.loads(FIXTURE.read_text())
    return [o["data"][name] for c in nb["cells"] for o in c.get("outputs", []) if name in o.get("data", {})]


def test_saved_runs_render_with_no_kernel(browser, lab):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    _open(page, lab, "saved_runs.ipynb")
    _no_kernel_dialog(page)
    runs = _saved(RUN_MIME)
    page.wait_for_function(f"document.querySelectorAll('.jp-MemfitRenderer .memfit-run').length >= {len(runs)}",
                           timeout=RENDER_TIMEOUT_MS)
    page.wait_for_selector(".jp-MemfitRenderer .memfit-memory", timeout=RENDER_TIMEOUT_MS)
    page.screenshot(path=str(ARTIFACTS / "saved_runs.png"))
    assert _get(f"{lab['url']}/api/kernels?token={TOKEN}") == [], "a kernel is running"

    panels = page.locator(".jp-MemfitRenderer .memfit-run")
    # Ranked above text/html: no memfit output fell back to its HTML.
    assert page.locator(".jp-MemfitRenderer").count() == len(runs) + 1
    assert page.get_by_text("open in JupyterLab to see it").count() == 0

    demo = panels.nth(0)
    header = demo.locator(".memfit-header").inner_text()
    assert runs[0]["status"] in header and runs[0]["task"] in header and runs[0]["answer"] in header
    assert demo.locator(".memfit-iteration").count() == runs[0]["totals"]["iterations"] + 1
    assert demo.locator(".memfit-event-action .memfit-tool").all_text_contents() == [
        e["tool"] for e in runs[0]["events"] if e["type"] == "action"]
    demo.screenshot(path=str(ARTIFACTS / "demo_run.png"))

    spins = [e for e in runs[1]["events"] if e["type"] == "spin" and e["is_spinning"]]
    assert panels.nth(1).locator(".memfit-event-spin.memfit-alert").count() == len(spins) > 0
    outage = panels.nth(2)
    states = [e["to_state"] for e in runs[2]["events"] if e["type"] == "breaker" and e.get("rejected") is not True]
    assert outage.locator('.memfit-breaker[data-tier="primary"]').get_attribute("data-state") == states[-1]
    outage.screenshot(path=str(ARTIFACTS / "outage_run.png"))
    synth = [e for e in runs[3]["events"] if e["type"] == "synthesis"][0]
    assert f"Synthesis ({synth['strategy']})" in panels.nth(3).locator(".memfit-event-synthesis").first.text_content()
    assert "tokens" in panels.nth(4).locator(".memfit-context").inner_text()

    catalogue = panels.nth(5)
    catalogue.locator(".memfit-expand-all").click()  # one line per iteration until opened
    text = catalogue.inner_text()
    for expected in ("Degradation plan", "Spin detected", "L4 critical", "chosen", "Trial 1 of 3",
                     "future_event", "Breaker primary: CLOSED → OPEN"):
        assert expected in text, expected
    catalogue.screenshot(path=str(ARTIFACTS / "catalogue_run.png"))
    assert "version 99" in panels.nth(6).locator(".memfit-problems").inner_text()
    assert "missing fields: run_id, status, totals, events" in panels.nth(7).locator(".memfit-problems").inner_text()

    [ranking] = _saved("application/vnd.memfit.memory+json")
    memory = page.locator(".jp-MemfitRenderer .memfit-memory")
    assert memory.locator(".memfit-rank-row").count() == len(ranking["results"])
    assert memory.locator(".memfit-memory-content").first.inner_text() == ranking["results"][0]["content"]
    memory.screenshot(path=str(ARTIFACTS / "memory_ranking.png"))
    assert not errors, errors
    page.close()


#: In-page helpers of the contrast checks: a CSS colour's channels, its relative luminance (WCAG's
#: formula) and the colour an element is drawn on (the first opaque background up its parents).
COLOUR_JS = """
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = c => { const [r, g, b] = c.slice(0, 3).map(v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ground = el => { for (let n = el; n; n = n.parentElement) {
    const c = rgb(getComputedStyle(n).backgroundColor); if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c; }
    return [255, 255, 255]; };
"""

#: In the page: the contrast ratio of each title's text against the background it is drawn on
#: (WCAG's formula), and every element that sticks out of its output cell.
CHECKS_JS = """
() => {""" + COLOUR_JS + """
  const titles = [...document.querySelectorAll('.jp-MemfitRenderer :is(.memfit-title, .memfit-event-title,'
    + ' .memfit-iteration-name, .memfit-section-title, .memfit-badge, .memfit-live-label, .memfit-button)')]
    .filter(el => el.getClientRects().length);
  const contrast = titles.map(el => { const a = lum(rgb(getComputedStyle(el).color)), b = lum(ground(el));
    return { text: el.textContent.slice(0, 40), ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) }; });
  const overflow = [];
  for (const out of document.querySelectorAll('.jp-OutputArea-output')) {
    const box = out.getBoundingClientRect();
    for (const el of out.querySelectorAll('.jp-MemfitRenderer *')) {
      const r = el.getBoundingClientRect();
      // sticking out of a scroll box that itself fits is scrolled, not overflowing
      let clipped = false;
      for (let n = el.parentElement; n && n !== out; n = n.parentElement) {
        if (getComputedStyle(n).overflowX !== 'visible' && n.getBoundingClientRect().right <= box.right + 1) {
          clipped = true; break; }
      }
      if (r.width && r.right > box.right + 1 && !clipped) overflow.push(`${el.className} ${Math.round(r.right)} > `
        + `${Math.round(box.right)}: ${el.textContent.slice(0, 40)}`);
    }
  }
  return { contrast, overflow, titles: titles.length };
}
"""


def _check_theme(page, name: str, least: int = 20) -> None:
    result = page.evaluate(CHECKS_JS)
    assert result["titles"] > least, result
    low = [c for c in result["contrast"] if c["ratio"] < 4.5]
    assert not low, f"{name}: titles with too little contrast: {low[:10]}"
    assert not result["overflow"], f"{name}: elements overflow their cell: {result['overflow'][:10]}"


def _kernel_idle(page) -> None:
    page.wait_for_function("() => { const app = window.jupyterapp; const w = app && app.shell.currentWidget;"
                           " const k = w && w.sessionContext && w.sessionContext.session &&"
                           " w.sessionContext.session.kernel; return k && k.status === 'idle'; }",
                           timeout=LIVE_TIMEOUT_MS)


#: The run view's DOM with open/closed (view state, not content) left out.
RUN_DOM_JS = ("() => [...document.querySelectorAll('.jp-Notebook .jp-MemfitRenderer .memfit-run')]"
              ".slice(0, 1).map(n => n.innerHTML.replace(/ open=\"\"/g, ''))[0]")


def _save_and_shut_down(page, lab, name: str, reopened: str) -> dict:
    """Save the notebook open in ``page``, close the page and shut its kernel down; the saved
    notebook, also written as ``reopened`` without the kernel it names (opened where no kernel
    runs, JupyterLab then asks, and we say "No Kernel")."""
    page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=RENDER_TIMEOUT_MS)
    page.close()
    # shut the kernel down: end its session (the page is gone, nothing starts it again)
    for kind in ("sessions", "kernels"):
        for item in _get(f"{lab['url']}/api/{kind}?token={TOKEN}"):
            req = urllib.request.Request(f"{lab['url']}/api/{kind}/{item['id']}?token={TOKEN}", method="DELETE")
            urllib.request.urlopen(req, timeout=30).close()
    assert _get(f"{lab['url']}/api/kernels?token={TOKEN}") == []
    saved_nb = json.loads((lab["root"] / name).read_text())
    copy = json.loads(json.dumps(saved_nb))
    for key in ("kernelspec", "language_info"):  # JupyterLab would start a kernel for either
        copy["metadata"].pop(key, None)
    (lab["root"] / reopened).write_text(json.dumps(copy))
    return saved_nb


def test_live_run_saved_and_reopened_with_no_kernel(browser, lab):
    """Run a notebook live, save it, shut the kernel down, reopen it: the runs and the memory
    ranking render from the saved outputs, as they looked live, with no error in the page."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    page = _page(browser, errors)
    _open(page, lab, "live.ipynb")
    _kernel_idle(page)
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    try:
        page.wait_for_function("() => { const n = document.querySelector('.jp-Notebook .memfit-live');"
                               " return n && n.querySelector('.memfit-live-status[data-status=done]'); }",
                               timeout=LIVE_TIMEOUT_MS)
        page.wait_for_selector(".jp-Notebook .memfit-compare", timeout=LIVE_TIMEOUT_MS)
        _kernel_idle(page)
    finally:
        page.screenshot(path=str(ARTIFACTS / "live_notebook.png"), full_page=True)
    live = page.locator(".jp-Notebook .memfit-live").first
    assert "42" in live.locator(".memfit-header").inner_text()
    assert live.locator(".memfit-iteration").count() == 4  # setup and three iterations, one line each
    live.screenshot(path=str(ARTIFACTS / "live_run.png"))
    live_dom = page.evaluate(RUN_DOM_JS)
    # the two memories added by hand, and what the demo run's triage kept by rules (its outcome)
    rank_rows = page.locator(".jp-Notebook .jp-MemfitRenderer .memfit-memory .memfit-rank-row")
    rows = rank_rows.count()
    assert rows >= 2 and "semicolons" in rank_rows.first.inner_text()
    # a header click sorts the ranking (the saved HTML's script never ran in JupyterLab)
    ranking = page.locator(".jp-Notebook .memfit-memory").first
    ranking.locator("th[data-key=t]").click()
    assert ranking.locator("th[data-key=t]").get_attribute("aria-sort") == "descending"
    outputs = page.locator(".jp-Notebook .jp-OutputArea-output").all_inner_texts()
    assert not [o for o in outputs if "Traceback" in o or "UsageError" in o or "Error displaying" in o], outputs
    # no stderr block: warnings raised during the run are in the run's view
    assert page.locator(".jp-Notebook .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    _check_theme(page, "light")

    saved_nb = _save_and_shut_down(page, lab, "live.ipynb", "reopened.ipynb")
    assert all("application/vnd.jupyter.widget-view+json" not in o.get("data", {})
               for c in saved_nb["cells"] for o in c.get("outputs", [])), "a saved output holds a widget view"

    page = _page(browser, errors)
    _open(page, lab, "reopened.ipynb")
    _no_kernel_dialog(page)
    page.wait_for_selector(".jp-Notebook .jp-MemfitRenderer .memfit-run", timeout=RENDER_TIMEOUT_MS)
    page.wait_for_selector(".jp-Notebook .jp-MemfitRenderer .memfit-memory", timeout=RENDER_TIMEOUT_MS)
    assert _get(f"{lab['url']}/api/kernels?token={TOKEN}") == [], "a kernel is running"
    assert page.locator(".jp-Notebook .memfit-live").count() == 0
    assert page.get_by_text("model not found").count() == 0
    saved_dom = page.evaluate(RUN_DOM_JS)
    if saved_dom != live_dom:
        (ARTIFACTS / "live_dom.html").write_text(live_dom)
        (ARTIFACTS / "saved_dom.html").write_text(saved_dom)
    assert saved_dom == live_dom, "the saved view differs from the live one (see test-artifacts/browser)"
    assert page.locator(".jp-Notebook .memfit-memory .memfit-rank-row").count() == rows
    assert page.locator(".jp-Notebook .memfit-compare .memfit-side .memfit-run").count() == 2
    page.screenshot(path=str(ARTIFACTS / "reopened_light.png"), full_page=True)
    _check_theme(page, "light, reopened")
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=RENDER_TIMEOUT_MS)
    page.wait_for_timeout(500)  # the theme's stylesheet applies
    page.screenshot(path=str(ARTIFACTS / "reopened_dark.png"), full_page=True)
    _check_theme(page, "dark")
    page.locator(".jp-Notebook .memfit-run .memfit-toggle-presentation").first.click()
    _check_theme(page, "dark, presentation size")
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    assert not errors, errors
    page.close()


#: A fork's memory in a notebook: two runs of memory-lesson keep their lessons in one store, a fork
#: of the second stores a note of its own, and ``--run`` shows what the fork reads.
FORK_NOTE = "the numbers file is numbers.txt, one number a line"
FORK_MEMORY_CELLS = [
    "%load_ext memfit_jupyter",
    "import os\nfrom memfit_jupyter import Agent\nos.makedirs('lesson', exist_ok=True)\n"
    "lessons = dict(model='memfit/memory-lesson', workdir='lesson', memory='lesson-memory')\n"
    "Agent(**lessons).start('What is the total of the numbers in the numbers file?').run()\n"
    "parent = Agent(**lessons).start('What is the total of the numbers in the numbers file?')\n"
    "parent.run()\n"
    f"child = parent.fork(2, action={{'tool': 'memory_insert', 'params': {{'content': {FORK_NOTE!r}}}}})\n"
    "child.run()\n"
    "print(child.status, len(child.memory.live))",
    "%memfit_memory --run child list",
]


def test_a_forks_memory_shown_live_saved_and_reopened(browser, lab):
    """``%memfit_memory --run child list`` in a live notebook: the ranking holds the fork's own
    note over the lessons of the run before; saved, its kernel shut down and reopened, the same
    rows, readable in the light and the dark theme."""
    import nbformat

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in FORK_MEMORY_CELLS], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, lab["root"] / "fork_memory.ipynb")
    errors: list[str] = []
    page = _page(browser, errors)
    _open(page, lab, "fork_memory.ipynb")
    _kernel_idle(page)
    page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    rows = page.locator(".jp-Notebook .jp-MemfitRenderer .memfit-memory .memfit-rank-row")
    try:
        rows.first.wait_for(timeout=LIVE_TIMEOUT_MS)
        _kernel_idle(page)
    finally:
        page.screenshot(path=str(ARTIFACTS / "fork_memory_live_light.png"), full_page=True)
    said = page.locator(".jp-Notebook .jp-OutputArea-output").all_inner_texts()
    assert any(t.strip() == "done 3" for t in said), said  # the fork's note and the run before's two lessons
    live = rows.all_inner_texts()
    assert len(live) == 3 and any(FORK_NOTE in r for r in live), live
    assert not [t for t in said if "Traceback" in t or "UsageError" in t], said
    _check_theme(page, "light", least=0)
    page.locator(".jp-Notebook .memfit-memory").first.screenshot(path=str(ARTIFACTS / "fork_memory_ranking.png"))

    _save_and_shut_down(page, lab, "fork_memory.ipynb", "fork_memory_reopened.ipynb")
    page = _page(browser, errors)
    _open(page, lab, "fork_memory_reopened.ipynb")
    _no_kernel_dialog(page)
    page.wait_for_selector(".jp-Notebook .jp-MemfitRenderer .memfit-memory", timeout=RENDER_TIMEOUT_MS)
    assert _get(f"{lab['url']}/api/kernels?token={TOKEN}") == [], "a kernel is running"
    reopened = page.locator(".jp-Notebook .jp-MemfitRenderer .memfit-memory .memfit-rank-row").all_inner_texts()
    assert reopened == live
    _theme(page, "Dark")
    page.screenshot(path=str(ARTIFACTS / "fork_memory_reopened_dark.png"), full_page=True)
    _check_theme(page, "dark, reopened", least=0)
    _theme(page, "Light")
    assert not errors, errors
    page.close()


#: What the slowly writing model streams as its action reply (the fault server, in this process).
STREAMED_REPLY = json.dumps({
    "thought": "The task asks only for a greeting, so I will finish at once and say hello; no file needs "
               "reading and no tool but finish is needed here.",
    "action_type": "answer", "tool": "finish", "params": {"answer": "hello"}})


def _stream_notebook(api_base: str) -> dict:
    import nbformat

    cells = [
        "%load_ext memfit_jupyter",
        f"%%memfit_task --model openai/streamer --api-base {api_base} --structured schema --tools finish "
        "--reflection none --no-memory --max-iterations 1 --name streamed\nSay hello, then finish.",
        # no memory: what earlier tests stored in the same folder stays out of the prompt
        "%%memfit_task --step --model memfit/spin-demo --reflection auto --spin-warnings prompt --no-memory --name stepped\n"
        "what is the total of the numbers in data.txt?",
    ]
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells], metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


#: Records, in the page, every streamed text the run view showed (for a readable failure).
STREAM_WATCH_JS = """
() => { window.__memfitStreamSeen = [];
  new MutationObserver(() => { for (const n of document.querySelectorAll('.memfit-stream-text')) {
    const row = n.closest('.memfit-iteration');
    window.__memfitStreamSeen.push([row && row.getAttribute('data-iteration'), !!n.closest('.jp-Notebook .memfit-live'),
      n.textContent.length, n.textContent.slice(0, 30)]); } })
  .observe(document.body, { childList: true, subtree: true, characterData: true }); }
"""


def _theme(page, name: str) -> None:
    page.evaluate(f"window.jupyterapp.commands.execute('apputils:change-theme', {{theme: 'JupyterLab {name}'}})")
    light = "true" if name == "Light" else "false"
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'", timeout=RENDER_TIMEOUT_MS)
    page.wait_for_timeout(500)  # the theme's stylesheet applies


def test_streaming_the_cost_estimate_and_the_prompt_xray_live(browser, lab):
    """A model that writes slowly (a real OpenAI-compatible server on 127.0.0.1): its thought shows
    in the iteration's row as it streams, then the parsed action; the header says no price is known
    for it, and gives the expected cost of an iteration of a scripted model; a Step click in step
    mode shows in the X-ray what changed in the prompt, the injected reflection highlighted."""
    import nbformat

    sys.path.insert(0, str(ROOT / "tests"))
    from fault_server import FaultServer

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    server = FaultServer(stream_delay_s=0.15).start()
    server.script("streamer", [f"ok:{STREAMED_REPLY}"])
    nbformat.write(nbformat.from_dict(_stream_notebook(server.api_base)), lab["root"] / "stream.ipynb")
    errors: list[str] = []
    page = _page(browser, errors)
    try:
        _open(page, lab, "stream.ipynb")
        _kernel_idle(page)
        _theme(page, "Dark")
        page.evaluate(STREAM_WATCH_JS)
        # not awaited: the command's promise resolves only once every cell has run
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        first = page.locator(".jp-Notebook .memfit-live").first
        # the thought as it is written, in the row of iteration 1, marked streaming
        try:
            page.wait_for_function("() => { const r = document.querySelector('.jp-Notebook .memfit-live "
                                   ".memfit-iteration[data-iteration=\"1\"] .memfit-stream-row .memfit-stream-text');"
                                   " return r && r.textContent.startsWith('The task asks'); }",  # the redacted stream
                                   timeout=LIVE_TIMEOUT_MS, polling=100)  # holds back the word it ends in
        except Exception:
            pytest.fail(f"the streamed thought never showed: {page.evaluate('window.__memfitStreamSeen')} "
                        f"errors {errors}")
        row = first.locator(".memfit-iteration[data-iteration='1'] .memfit-stream-row")
        partial = row.locator(".memfit-stream-text").inner_text()
        thought = json.loads(STREAMED_REPLY)["thought"]
        assert thought.startswith(partial.rstrip("…")) and len(partial) < len(thought), partial
        assert row.locator(".memfit-badge").inner_text() == "streaming"
        assert "streaming the action" in first.locator(".memfit-streaming-note").inner_text()
        assert first.locator(".memfit-estimate").inner_text() == "cost per iteration: no price known for openai/streamer"
        first.screenshot(path=str(ARTIFACTS / "streaming_dark.png"))
        _check_theme(page, "dark, streaming", least=8)
        page.wait_for_selector(".jp-Notebook .memfit-live .memfit-live-status[data-status=done]", timeout=LIVE_TIMEOUT_MS)
        # the parsed action took the stream's place
        assert first.locator(".memfit-stream-row, .memfit-stream, .memfit-streaming-note").count() == 0
        assert first.locator(".memfit-header .memfit-answer").inner_text() == "answer hello"
        assert first.locator(".memfit-event-action .memfit-thought").inner_text() == thought
        first.screenshot(path=str(ARTIFACTS / "streamed_done_dark.png"))

        page.wait_for_function("() => document.querySelectorAll('.jp-Notebook .memfit-live').length === 2"
                               " && document.querySelectorAll('.jp-Notebook .memfit-live')[1]"
                               ".querySelector('button[data-action=step]')", timeout=LIVE_TIMEOUT_MS)
        _kernel_idle(page)
        stepped = page.locator(".jp-Notebook .memfit-live").nth(1)
        estimate = stepped.locator(".memfit-estimate").inner_text()
        assert estimate.startswith("≈ $") and "per iteration" in estimate, estimate
        assert stepped.locator(".memfit-xray summary").first.inner_text() == (
            "X-ray: the next prompt · 1 new message since the last step")
        stepped.locator("button[data-action=step]").click()
        page.wait_for_function("() => { const s = document.querySelectorAll('.jp-Notebook .memfit-live')[1]"
                               ".querySelector('.memfit-xray > summary'); return s && s.textContent.includes('2 new'); }",
                               timeout=LIVE_TIMEOUT_MS)
        _kernel_idle(page)
        xray = stepped.locator(".memfit-xray").first
        assert xray.locator("summary").first.inner_text() == (
            "X-ray: the next prompt · 2 new messages since the last step · 1 guidance")
        xray.locator("summary").first.click()
        # the reflection the loop appended to the failed observation is what is highlighted
        guidance = xray.locator(":scope > .memfit-guidance .memfit-guidance-text")
        assert guidance.count() == 1 and "[CRITICAL REFLECTION]" in guidance.inner_text()
        assert "Observation (shell) FAILED" in xray.locator(":scope > .memfit-guidance pre").inner_text()
        assert "Observation" not in guidance.inner_text()
        # the full prompt is one click away
        xray.locator(".memfit-prompt-full > summary").click()
        assert xray.locator(".memfit-prompt-full .memfit-message").count() == 4
        stepped.screenshot(path=str(ARTIFACTS / "xray_dark.png"))
        _check_theme(page, "dark, X-ray", least=8)
        _theme(page, "Light")
        stepped.screenshot(path=str(ARTIFACTS / "xray_light.png"))
        first.screenshot(path=str(ARTIFACTS / "streamed_done_light.png"))
        _check_theme(page, "light, X-ray", least=8)

        # deltas never enter the saved bundle
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
                               timeout=RENDER_TIMEOUT_MS)
        saved = json.loads((lab["root"] / "stream.ipynb").read_text())
        runs = [o["data"][RUN_MIME] for c in saved["cells"] for o in c.get("outputs", []) if RUN_MIME in o.get("data", {})]
        assert len(runs) == 2 and runs[0]["status"] == "done"
        assert not [e for r in runs for e in r["events"] if e["type"] == "model_delta"]
        assert [e["thought"] for e in runs[0]["events"] if e["type"] == "action"] == [thought]
        assert not errors, errors
    finally:
        page.screenshot(path=str(ARTIFACTS / "stream_notebook.png"), full_page=True)
        page.close()
        server.stop()
