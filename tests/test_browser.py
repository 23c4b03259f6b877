"""The course as people open it, in a real browser: Chromium from the distribution's packages,
driven by Playwright (its own browser download is never used).

A learner's `make lab` on a copy of lesson 03: Run All on a mistaken exercise shows the named
mistake and still runs the rest of the lesson; the fixed exercise shows ✓ lines; nbgrader's
Validate button gives grading's verdict both ways. Then a feedback page, opened from disk with
every network request refused, shows its formulas typeset and its tables ruled.

Screenshots go to workspace/screenshots/ (untracked); `make screenshots` copies the README's
two into docs/images/.
"""

import contextlib
import inspect
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from autograder import lessons
from autograder.engine.judge import JUDGE_METADATA

LESSON = "03_attention"
NOTEBOOK = f"{LESSON}/{lessons.notebook_name(LESSON)}"
SCREENSHOTS = lessons.ROOT / "workspace" / "screenshots"
# Debian's package installs /usr/bin/chromium; CHROMIUM names another Chromium-based browser
# (a hosted CI runner's own Chrome, say)
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
TOKEN = "course-browser-test"
STUB = "# YOUR CODE HERE\n    raise NotImplementedError()"
NO_SCALING_HINT = "The scores are not scaled: divide q kᵀ by sqrt(d_k) before the softmax."
SECONDS = 1000  # Playwright counts milliseconds


def _solution_body() -> str:
    """The reference's body of scaled_dot_product_attention, between its solution markers."""
    from solutions.attention import scaled_dot_product_attention

    source = inspect.getsource(scaled_dot_product_attention)
    body = source.split("### BEGIN SOLUTION\n")[1].split("    ### END SOLUTION")[0]
    return body.strip("\n").removeprefix("    ")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for_server(url: str, process: subprocess.Popen, log: Path, seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"`make lab` exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"JupyterLab did not answer in {seconds} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def _served(target: str, log: Path, options: tuple[str, ...] = (), **variables):
    """`make <target>` (lab or formgrader) on a free port with the test's token, more ``options``
    for jupyter lab and ``variables`` for make, running until the block ends; yields its URL."""
    port = _free_port()
    options = ("--no-browser", f"--port={port}", f"--IdentityProvider.token={TOKEN}", *options)
    variables["LAB_ARGS"] = " ".join(options)
    with log.open("w") as out:
        process = subprocess.Popen(
            ["make", "-s", target, *(f"{name}={value}" for name, value in variables.items())],
            cwd=lessons.ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # make, JupyterLab, its kernels and zygote: one group to stop
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for_server(url, process, log)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`make lab` on a copy of the learner's lesson 03; yields the server's URL."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(lessons.COURSE / LESSON, root / LESSON)
    settings = root.parent / f"{root.name}-settings"
    # No news or update checks: nothing reaches for the network, and no pop-up covers the lesson
    notification = settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    notification.parent.mkdir(parents=True)
    notification.write_text('{"fetchNews": "false", "checkForUpdates": false}')
    # Every cell in the page, as the screenshots show them (by default JupyterLab leaves cells
    # far off screen out of it)
    tracker = settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
    tracker.parent.mkdir(parents=True)
    tracker.write_text('{"windowingMode": "none"}')
    options = (
        "--LabApp.expose_app_in_browser=True",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={settings}",
    )
    with _served("lab", root.parent / f"{root.name}-lab.log", options, LAB_ROOT=root) as url:
        yield url, root


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"no browser at {CHROMIUM}: apt-get install chromium, or set CHROMIUM"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
        )
        yield chromium
        chromium.close()


# JavaScript run in the page, on JupyterLab's application object (exposed by
# --LabApp.expose_app_in_browser): the open notebook, its cells and its kernel. Every wait reads
# it with optional chaining: JupyterLab defines window.jupyterapp only once it has started, and a
# predicate that throws ends Playwright's wait at once instead of returning false.
PANEL = "window.jupyterapp?.shell?.currentWidget"
READY = f"""() => {{
  const panel = {PANEL};
  return !!(panel?.content && panel.context?.isReady
    && panel.sessionContext?.session?.kernel?.status === 'idle'
    && panel.content.widgets.length > 0);
}}"""
SET_EXERCISE = f"""(source) => {{
  const cell = {PANEL}.content.widgets.find(c => (c.model.getMetadata('nbgrader') || {{}}).solution);
  cell.model.sharedModel.setSource(source);
}}"""
EXERCISE_SOURCE = f"""() => {PANEL}.content.widgets
  .find(c => (c.model.getMetadata('nbgrader') || {{}}).solution).model.sharedModel.getSource()"""
# Every code cell has run (an execution count) and the kernel is idle again
ALL_RUN = f"""() => {{
  const code = ({PANEL}?.content?.widgets ?? []).filter(c => c.model.type === 'code');
  return {PANEL}?.sessionContext?.session?.kernel?.status === 'idle'
    && code.length > 0 && code.every(c => c.model.executionCount !== null);
}}"""
# Each code cell's grade_id, execution count and outputs (from the notebook's model: JupyterLab
# leaves cells far off screen out of the page)
CELLS = f"""() => {PANEL}.content.widgets.filter(c => c.model.type === 'code').map(c => ({{
  grade_id: (c.model.getMetadata('nbgrader') || {{}}).grade_id,
  count: c.model.executionCount,
  outputs: c.model.outputs.toJSON(),
}}))"""
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _shown(cell: dict) -> dict:
    """A code cell as a learner sees it: the text of its outputs (a traceback as printed), and
    whether a figure is among them."""
    text = []
    for output in cell["outputs"]:
        if output["output_type"] == "stream":
            text.append("".join(output["text"]))
        elif output["output_type"] == "error":
            text.append(ANSI.sub("", "\n".join(output["traceback"])))
        else:
            text.append("".join(output.get("data", {}).get("text/plain", "")))
    image = any("image/png" in output.get("data", {}) for output in cell["outputs"])
    # the words alone: a long message is wrapped over lines
    words = " ".join(" ".join(text).split())
    return {"grade_id": cell["grade_id"], "count": cell["count"], "text": words, "image": image}


DIRTY = f"() => {PANEL}.context.model.dirty"


def _run_all(page) -> list[dict]:
    """Run All from a clean slate (outputs cleared), then every code cell's outputs."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')")
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    try:
        page.wait_for_function(ALL_RUN, timeout=240 * SECONDS, polling=500)
    except Exception:  # noqa: BLE001 - Playwright's timeout or a closed page: say which cells did not run
        unrun = [cell["grade_id"] for cell in page.evaluate(CELLS) if cell["count"] is None]
        raise AssertionError(f"Run All stopped before these cells ran: {unrun}") from None
    return [_shown(cell) for cell in page.evaluate(CELLS)]


def _validate(page) -> str:
    """Save, press nbgrader's Validate button on the toolbar, and read its verdict."""
    page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    page.get_by_role("button", name="Validate").click()
    dialog = page.locator(".jp-Dialog-content")
    dialog.wait_for(timeout=180 * SECONDS)
    verdict = dialog.inner_text()
    return verdict


def _close_dialog(page) -> None:
    page.locator(".jp-Dialog-content").get_by_role("button").last.click()
    page.locator(".jp-Dialog-content").wait_for(state="detached", timeout=10 * SECONDS)


def _scroll_to(page, grade_id: str) -> None:
    page.evaluate(
        f"""(id) => {PANEL}.content.widgets
          .find(c => (c.model.getMetadata('nbgrader') || {{}}).grade_id === id).node.scrollIntoView()""",
        grade_id,
    )


def test_a_learner_runs_fixes_and_validates_a_lesson(lab, browser):
    url, root = lab
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    page.goto(f"{url}/lab/tree/{NOTEBOOK}?token={TOKEN}")
    page.wait_for_function(READY, timeout=180 * SECONDS, polling=500)

    # Opening the lesson changes nothing in it (its kernel's name is the kernel's own)
    page.wait_for_timeout(2 * SECONDS)
    assert not page.evaluate(DIRTY), "the notebook shows as modified right after it opened"
    # The learner's JupyterLab has no instructor panels
    assert page.get_by_text("Formgrader").count() == 0
    assert page.get_by_role("button", name="Validate").count() == 1

    stub = page.evaluate(EXERCISE_SOURCE)
    assert STUB in stub, stub
    body = _solution_body()
    mistaken = body.replace(" / math.sqrt(d_k)", "")
    assert mistaken != body
    page.evaluate(SET_EXERCISE, stub.replace(STUB, mistaken))

    cells = _run_all(page)
    tests = [cell for cell in cells if cell["grade_id"].startswith("test_")]
    failing = [cell for cell in tests if "CheckFailure" in cell["text"]]
    assert failing, [cell["text"] for cell in tests]
    assert any(NO_SCALING_HINT in cell["text"] for cell in failing), [cell["text"] for cell in failing]
    # Run All went on past the failures: a figure below the first failing check was drawn
    first_failure = cells.index(failing[0])
    assert any(cell["image"] for cell in cells[first_failure + 1 :]), "no figure after the failing check"
    _scroll_to(page, tests[0]["grade_id"])
    page.screenshot(path=SCREENSHOTS / "lab_named_mistake.png")

    verdict = _validate(page)
    assert "The following cell failed" in verdict and "a known mistake, no scaling" in verdict, verdict
    _close_dialog(page)

    page.evaluate(SET_EXERCISE, stub.replace(STUB, body))
    cells = _run_all(page)
    tests = [cell for cell in cells if cell["grade_id"].startswith("test_")]
    assert all("✓" in cell["text"] and "CheckFailure" not in cell["text"] for cell in tests), [
        cell["text"] for cell in tests
    ]
    _scroll_to(page, tests[0]["grade_id"])
    page.screenshot(path=SCREENSHOTS / "lab_checks_pass.png")

    verdict = _validate(page)
    assert "Success! Your notebook passes all the tests." in verdict, verdict
    page.screenshot(path=SCREENSHOTS / "lab_validate.png")
    _close_dialog(page)
    page.close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    """A workspace in which ada's lesson 03 (a bundled sample) is graded, in the sandbox, and has its
    feedback."""
    from autograder.authoring.samples import SAMPLES
    from autograder.engine.pipeline import Pipeline

    inbox = tmp_path_factory.mktemp("inbox")
    shutil.copytree(SAMPLES / "ada" / LESSON, inbox / "ada" / LESSON)
    workspace = tmp_path_factory.mktemp("workspace")
    pipeline = Pipeline(workspace, release=workspace / "release", log=lambda line: None)
    pipeline.release([LESSON])
    pipeline.collect_folder(inbox)
    pipeline.autograde()
    assert pipeline.feedback(), pipeline.problems
    return workspace


def test_the_formgrader_opens_on_the_graded_workspace(graded, browser):
    with _served("formgrader", graded.parent / f"{graded.name}-formgrader.log", WORKSPACE=graded) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 700})
        page.goto(f"{url}/login?token={TOKEN}")  # the session's cookie, which the Formgrader's pages need
        page.goto(f"{url}/formgrader")
        row = page.locator("table tr", has_text=LESSON)
        row.first.wait_for(timeout=60 * SECONDS)
        text = page.inner_text("body")
        assert "No data available" not in text and "exchange directory" not in text, text[:2000]
        page.screenshot(path=SCREENSHOTS / "formgrader.png")
        page.goto(f"{url}/formgrader/manage_students")
        page.locator("table tr", has_text="ada").first.wait_for(timeout=60 * SECONDS)

        # The Formgrader's Autograde button grades as the pipeline does: the course's Execute step,
        # whose judge leaves its record in the notebook, and the same score
        autograded = graded / "autograded" / "ada" / LESSON
        shutil.rmtree(autograded)
        page.goto(f"{url}/formgrader/manage_submissions/{LESSON}")
        row = page.locator("table tr", has_text="ada").first
        graded_reply = lambda reply: reply.url.endswith("/autograde")  # noqa: E731
        with page.expect_response(graded_reply, timeout=240 * SECONDS) as reply:
            row.locator("td.autograde a").click()
        assert reply.value.json()["success"], reply.value.json()["log"][-3000:]
        notebook = autograded / lessons.notebook_name(LESSON)
        assert JUDGE_METADATA in nbformat.read(notebook, as_version=4).metadata
        page.reload()
        score = page.locator("table tr", has_text="ada").first.locator("td.score")
        assert score.inner_text(timeout=60 * SECONDS) == "6 / 6"
        page.close()


@pytest.fixture(scope="module")
def taken_in(tmp_path_factory) -> Path:
    """A workspace that has taken in ben's lesson 03 (a bundled sample that leaves out the scaling)
    and not graded it, with the verdict of an earlier grading that stopped."""
    from autograder.authoring.samples import SAMPLES
    from autograder.engine import verdicts
    from autograder.engine.pipeline import Pipeline
    from autograder.engine.submission import Graded

    inbox = tmp_path_factory.mktemp("inbox")
    shutil.copytree(SAMPLES / "ben" / LESSON, inbox / "ben" / LESSON)
    workspace = tmp_path_factory.mktemp("taken_in")
    pipeline = Pipeline(workspace, release=workspace / "release", log=lambda line: None)
    pipeline.release([LESSON])
    pipeline.collect_folder(inbox)
    verdicts.write(workspace, Graded(LESSON, "ben", {}, [], failure="an earlier run stopped"))
    return workspace


def test_the_formgraders_autograde_button_records_the_verdict(taken_in, browser):
    from autograder.engine import verdicts

    stale = verdicts.read(verdicts.path(taken_in, LESSON, "ben"))
    log = taken_in.parent / f"{taken_in.name}-formgrader.log"
    with _served("formgrader", log, WORKSPACE=taken_in) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 700})
        page.goto(f"{url}/login?token={TOKEN}")
        page.goto(f"{url}/formgrader/manage_submissions/{LESSON}")
        row = page.locator("table tr", has_text="ben").first
        graded_reply = lambda reply: reply.url.endswith("/autograde")  # noqa: E731
        with page.expect_response(graded_reply, timeout=240 * SECONDS) as reply:
            row.locator("td.autograde a").click()
        assert reply.value.json()["success"], reply.value.json()["log"][-3000:]
        page.reload()
        shown = (
            page.locator("table tr", has_text="ben")
            .first.locator("td.score")
            .inner_text(timeout=60 * SECONDS)
        )
        page.close()

    verdict = verdicts.read(verdicts.path(taken_in, LESSON, "ben"))
    assert stale.failure is not None and verdict.failure is None and verdict.graded_at >= stale.graded_at
    assert shown == f"{verdict.score:g} / {verdict.max_score:g}" and verdict.score < verdict.max_score
    # what the judge saw: every cell ben's mistake costs points names it
    failing = [cell for cell in verdict.cells.values() if cell.points < cell.max_points]
    assert failing and all(cell.mistakes == ["no scaling"] for cell in failing)


# Text of the page's body that still holds a formula's delimiter, outside code and printed output
RAW_MATH = """() => {
  const skip = new Set(['PRE', 'CODE', 'SCRIPT', 'STYLE', 'TEXTAREA']);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const raw = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    let inside = node.parentElement;
    while (inside && !skip.has(inside.tagName)) inside = inside.parentElement;
    if (!inside && /\\$|\\\\\\(|\\\\\\[/.test(node.textContent)) raw.push(node.textContent.trim());
  }
  return raw;
}"""
CELL_BORDER = "() => getComputedStyle(document.querySelector('table td')).borderTopStyle"
GLOSSARY_FONT = """() => {
  const cell = [...document.querySelectorAll('td')].find(td => td.textContent.trim() === '注意力');
  return getComputedStyle(cell).fontFamily;
}"""


def test_a_feedback_page_reads_offline(graded, browser):
    (path,) = (graded / "feedback" / "ada" / LESSON).glob("*.html")
    context = browser.new_context(viewport={"width": 1100, "height": 760}, offline=True)
    page = context.new_page()
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")

    assert page.evaluate(RAW_MATH) == []
    assert page.locator("mjx-container svg").count() > 20
    assert [url for url in requested if not url.startswith(("file:", "data:"))] == []
    assert page.evaluate(CELL_BORDER) == "solid"
    assert "WenQuanYi Zen Hei" in page.evaluate(GLOSSARY_FONT)
    page.locator("table", has_text="scores").first.scroll_into_view_if_needed()
    page.evaluate("() => window.scrollBy(0, -120)")
    page.screenshot(path=SCREENSHOTS / "feedback_offline.png")
    context.close()


# A hostile learner's solution cell ends by displaying objects whose representations are scripts:
# no import, nothing a check flags (issue 21).
ATTACK = """

class _Shown:
    def _repr_html_(self):
        return "<script>console.log('CANARY')</script><img src=x onerror=\\"document.title='PWNED'\\">"


class _Run:
    def _repr_javascript_(self):
        return "console.log('CANARY')"


display(_Shown())
_Run()
"""


def _attacker(folder: Path) -> Path:
    """mallory's lesson 03: ada's correct solution, whose cell displays the attack."""
    from autograder.authoring.samples import SAMPLES

    shutil.copytree(SAMPLES / "ada" / LESSON, folder / "mallory" / LESSON)
    path = folder / "mallory" / NOTEBOOK
    nb = nbformat.read(path, as_version=4)
    (cell,) = [cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("solution")]
    cell.source += ATTACK
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="module")
def attacked(tmp_path_factory) -> Path:
    """A workspace in which mallory's lesson 03 is graded, in the sandbox, and has its feedback."""
    from autograder.engine.pipeline import Pipeline

    inbox = tmp_path_factory.mktemp("inbox")
    _attacker(inbox)
    workspace = tmp_path_factory.mktemp("attacked")
    pipeline = Pipeline(workspace, release=workspace / "release", log=lambda line: None)
    pipeline.release([LESSON])
    pipeline.collect_folder(inbox)
    pipeline.autograde()
    assert pipeline.feedback(), pipeline.problems
    return workspace


class _Watch:
    """What a page's scripts did: its console's messages and its uncaught errors."""

    def __init__(self, page) -> None:
        self.console: list[str] = []
        self.errors: list[str] = []
        page.on("console", lambda message: self.console.append(message.text))
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def attacked(self, page) -> list[str]:
        """What of the attacker's ran: the canary logged, the title set, an error from its code."""
        ran = [text for text in self.console if "CANARY" in text]
        ran += [error for error in self.errors if "CANARY" in error or "PWNED" in error]
        return ran + (["title: PWNED"] if page.title() == "PWNED" else [])


def test_nbconverts_page_of_the_notebook_as_it_ran_runs_the_attack(tmp_path, browser):
    """The control: the outputs the attack displays, in nbconvert's page with nothing removed."""
    from nbconvert.exporters import HTMLExporter
    from nbformat import v4

    html = "<script>console.log('CANARY')</script><img src=x onerror=\"document.title='PWNED'\">"
    outputs = [
        v4.new_output("display_data", data={"text/html": html, "text/plain": "<_Shown>"}),
        v4.new_output("execute_result", data={"application/javascript": "console.log('CANARY')"}),
    ]
    nb = v4.new_notebook(cells=[v4.new_code_cell("display(_Shown())\n_Run()", outputs=outputs)])
    page_path = tmp_path / "as_it_ran.html"
    page_path.write_text(HTMLExporter().from_notebook_node(nb)[0], encoding="utf-8")
    page = browser.new_page()
    watch = _Watch(page)
    page.goto(page_path.as_uri())
    page.wait_for_function("() => document.title === 'PWNED'", timeout=10 * SECONDS)
    assert "CANARY" in watch.console and watch.attacked(page)
    page.close()


def test_the_attackers_feedback_page_runs_nothing(attacked, browser):
    (path,) = (attacked / "feedback" / "mallory" / LESSON).glob("*.html")
    context = browser.new_context(viewport={"width": 1100, "height": 760}, offline=True)
    page = context.new_page()
    watch = _Watch(page)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    page.wait_for_timeout(1 * SECONDS)  # time for an image's onerror, were it there

    assert watch.attacked(page) == [] and watch.errors == []
    assert page.locator("script").count() == 0  # the graded notebook was made inert
    assert page.locator("mjx-container svg").count() > 20  # the typeset formulas still show
    page.get_by_text("Student's answer").first.scroll_into_view_if_needed()
    page.screenshot(path=SCREENSHOTS / "feedback_attacked.png")
    context.close()


def _submission_id(workspace: Path, student: str) -> str:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{workspace / 'gradebook.db'}") as gradebook:
        notebook = Path(NOTEBOOK).stem
        return gradebook.find_submission_notebook(notebook, LESSON, student).id


def _graded_before_the_defence(workspace: Path) -> None:
    """The graded notebook as nbgrader alone leaves it: the attack's outputs put back."""
    path = workspace / "autograded" / "mallory" / NOTEBOOK
    nb = nbformat.read(path, as_version=4)
    (cell,) = [cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("solution")]
    html = "<script>console.log('CANARY')</script><img src=x onerror=\"document.title='PWNED'\">"
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": html, "text/plain": "<_Shown>"}),
        nbformat.v4.new_output("execute_result", data={"application/javascript": "console.log('CANARY')"}),
    ]
    nbformat.write(nb, path)


def _open_submission(page, url: str, submission: str):
    """The Formgrader's view of a submission, once nbgrader's scripts have filled in its scores (the
    template leaves the inputs empty; formgrade.js writes each cell's points into them)."""
    watch = _Watch(page)
    with page.expect_response(lambda reply: reply.url.endswith(f"/submissions/{submission}/")) as reply:
        page.goto(f"{url}/formgrader/submissions/{submission}/")
    page.wait_for_function(
        "() => [...document.querySelectorAll('input.score')].some(input => input.placeholder !== '')",
        timeout=60 * SECONDS,
    )
    page.wait_for_timeout(1 * SECONDS)
    return watch, reply.value.headers.get("content-security-policy", "")


# nbgrader's formgrade.js, when MathJax did not load (offline, or refused by the policy: MathJax 2
# would run any text/x-mathjax-config script in the page): the view works, formulas show as TeX.
NO_MATHJAX = "MathJax is not defined"


def test_the_formgrader_shows_the_attackers_submission_and_runs_none_of_it(attacked, browser):
    submission = _submission_id(attacked, "mallory")
    log = attacked.parent / f"{attacked.name}-formgrader.log"
    with _served("formgrader", log, WORKSPACE=attacked) as url:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"{url}/login?token={TOKEN}")
        watch, policy = _open_submission(page, url, submission)
        assert "script-src 'self' 'sha256-" in policy and "unsafe-inline" not in policy
        assert watch.attacked(page) == [] and watch.errors == [NO_MATHJAX]
        assert page.locator("#notebook script").count() == 0  # the graded notebook was made inert
        # nbgrader's own scripts ran: its inline one (allowed by its hash) took the links' data-link
        # attributes away, and formgrade.js filled in the scores
        assert page.locator("[data-link]").count() == 0
        page.get_by_text("Student's answer").first.scroll_into_view_if_needed()
        page.screenshot(path=SCREENSHOTS / "formgrader_attacked.png")

        # A notebook graded before the course made graded notebooks inert: the policy stops it
        _graded_before_the_defence(attacked)
        watch, _ = _open_submission(page, url, submission)
        assert page.locator("#notebook script").count() == 2  # the attack is in the page
        assert watch.attacked(page) == [] and watch.errors == [NO_MATHJAX]
        assert page.locator("[data-link]").count() == 0
        page.close()
