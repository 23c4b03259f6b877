"""Graded notebooks that run nothing in a page (autograder/engine/inert.py): each way a submission can put
a script into the pages made from it, first as nbconvert writes it into its page, then gone after
the course's step; and what honest learners and the lessons show, kept as it was."""

import base64
import copy
import io
import json
import re

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter
from nbformat import v4

from autograder import lessons
from autograder.checks.failure import wrap_message
from autograder.engine import formgrader_policy
from autograder.engine.inert import InertNotebook, sanitise_markdown
from autograder.engine.nbgrader_config import course_config

CANARY = "console.log('CANARY')"
PWNED = "document.title='PWNED'"
SVG = f"<svg xmlns='http://www.w3.org/2000/svg'><script>{CANARY}</script><circle r='4'/></svg>"
WIDGET_STATE = {
    "application/vnd.jupyter.widget-state+json": {
        "state": {"m": {"model_name": "HTMLModel", "state": {"value": f'<img src=x onerror="{PWNED}">'}}},
        "version_major": 2,
        "version_minor": 0,
    }
}


def _shown(data: dict) -> nbformat.NotebookNode:
    return v4.new_code_cell("show()", outputs=[v4.new_output("display_data", data=data)])


def _attack(name: str) -> nbformat.NotebookNode:
    """A learner's notebook with one way of putting a script into a page."""
    cells = {
        "html <script>": [_shown({"text/html": f"<p>Done.</p><script>{CANARY}</script>"})],
        "html onerror": [_shown({"text/html": f'<img src=x onerror="{PWNED}">'})],
        "inline svg in html": [_shown({"text/html": SVG})],
        "_repr_javascript_": [_shown({"text/plain": "<Table>", "application/javascript": CANARY})],
        "text/markdown": [_shown({"text/markdown": f'**Done** <img src=x onerror="{PWNED}">'})],
        "markdown cell": [v4.new_markdown_cell(f"My notes <script>{CANARY}</script>")],
        "javascript: link": [v4.new_markdown_cell(f"[the answer](javascript:{CANARY})")],
        "widget": [_shown({"application/vnd.jupyter.widget-view+json": {"model_id": "m"}})],
    }[name]
    nb = v4.new_notebook(cells=cells)
    if name == "widget":
        nb.metadata.widgets = WIDGET_STATE
    return nb


ATTACKS = [
    "html <script>",
    "html onerror",
    "inline svg in html",
    "_repr_javascript_",
    "text/markdown",
    "markdown cell",
    "javascript: link",
    "widget",
]


def _active(html: str) -> list[str]:
    """What of the attacker's would run in the page: scripts with the canary, the widget manager
    (which renders the widget state's HTML), event handlers, ``javascript:`` links, SVG scripts."""
    soup = BeautifulSoup(html, "html.parser")
    found = [str(script) for script in soup.find_all("script") if "CANARY" in script.get_text()]
    found += [str(script) for script in soup.find_all("script", src=True) if "widget" in script["src"]]
    found += [str(script) for script in soup.find_all("script") if "widget-state" in script.get("type", "")]
    found += [
        f"<{element.name} {name}>"
        for element in soup.find_all(True)
        for name in element.attrs
        if name.lower().startswith("on")
    ]
    found += [str(a) for a in soup.find_all(href=True) if "javascript:" in a["href"].replace(" ", "").lower()]
    found += [str(svg) for svg in soup.find_all("svg") if svg.find("script")]
    return found


def _page(nb: nbformat.NotebookNode, template: str) -> str:
    html, _ = HTMLExporter(template_name=template).from_notebook_node(nb)
    return html


def _inert(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb, _ = InertNotebook()(copy.deepcopy(nb), {})  # as nbconvert and nbgrader call it
    return nb


# "classic" is the Formgrader's and nbgrader's feedback template's base; "lab" is nbconvert's default.
@pytest.mark.parametrize("template", ["classic", "lab"])
@pytest.mark.parametrize("attack", ATTACKS)
def test_nbconvert_writes_the_attack_into_its_page_and_the_inert_notebook_does_not(attack, template):
    nb = _attack(attack)
    assert _active(_page(nb, template)), "nbconvert's own page no longer runs this: update the test"
    assert _active(_page(_inert(nb), template)) == []


def test_what_is_left_of_an_attack_shows_as_text():
    (cell,) = _inert(_attack("markdown cell")).cells
    assert cell.source == "<div><p>My notes </p></div>"
    (cell,) = _inert(_attack("javascript: link")).cells
    assert cell.source == '<div><p><a rel="noopener noreferrer">the answer</a></p></div>'
    (output,) = _inert(_attack("_repr_javascript_")).cells[0].outputs
    assert output.data == {"text/plain": "<Table>"}
    assert _inert(_attack("widget")).cells[0].outputs == []
    assert "widgets" not in _inert(_attack("widget")).metadata


def test_an_svg_output_becomes_an_image():
    (output,) = _inert(v4.new_notebook(cells=[_shown({"image/svg+xml": SVG})])).cells[0].outputs
    (image,) = BeautifulSoup(output.data["text/html"], "html.parser").find_all("img")
    assert image["src"] == "data:image/svg+xml;base64," + base64.b64encode(SVG.encode()).decode()
    assert set(output.data) == {"text/html"}


def test_images_must_be_base64_and_raw_cells_are_sanitised():
    forged = {"image/png": '"><script>console.log(1)</script>', "text/plain": "<Figure>"}
    (output,) = _inert(v4.new_notebook(cells=[_shown(forged)])).cells[0].outputs
    assert output.data == {"text/plain": "<Figure>"}
    raw = v4.new_raw_cell(f"<b>ok</b><script>{CANARY}</script>", metadata={"raw_mimetype": "text/html"})
    assert _inert(v4.new_notebook(cells=[raw])).cells[0].source == "<b>ok</b>"


def test_attachments_keep_their_raster_images_only():
    attachments = {
        "figure.png": {"image/png": "iVBORw0KGgo="},
        "drawing.svg": {"image/svg+xml": SVG},
        "forged.png": {'image/png" onerror="x': "iVBORw0KGgo="},
    }
    cell = v4.new_markdown_cell("![figure](attachment:figure.png)", attachments=attachments)
    (inert,) = _inert(v4.new_notebook(cells=[cell])).cells
    assert inert.attachments == {"figure.png": {"image/png": "iVBORw0KGgo="}}
    assert inert.source == cell.source


def _png() -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(2, 2))
    axes.plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


TABLE = (
    '<table><thead><tr><th>step</th><th align="right">ms</th></tr></thead>'
    '<tbody><tr><td>scores</td><td style="text-align: right;">1.5</td></tr></tbody></table>'
)
HONEST_MARKDOWN = (
    "When $a < b$ and $|x| > 0$, $$\\mathrm{softmax}(QK^\\top / \\sqrt{d_k})V$$ is what `x<y>` "
    "and `<s>` say.\n\n| step | cost |\n|:--|--:|\n| scores | $O(T^2)$ |\n\n> a quote, *emphasis*, "
    "[a link](https://pytorch.org) and ![a figure](attachment:figure.png)\n\n"
    "```python\nif a < b:\n    pass\n```"
)


def test_honest_outputs_and_markdown_are_kept_as_they_were():
    failure = wrap_message("CheckFailure: scaled_dot_product_attention: your output matches a known mistake")
    cells = [
        v4.new_markdown_cell(HONEST_MARKDOWN, attachments={"figure.png": {"image/png": _png()}}),
        _shown({"image/png": _png(), "text/plain": "<Figure size 200x200 with 1 Axes>"}),
        v4.new_code_cell(
            "check()",
            outputs=[
                v4.new_output("stream", name="stdout", text="✓ shape [B, h, T_q, d_v]\n"),
                v4.new_output("error", ename="CheckFailure", evalue="no scaling", traceback=failure),
                v4.new_output("execute_result", data={"text/plain": "0.5", "text/latex": "$\\frac{1}{2}$"}),
            ],
        ),
    ]
    nb = v4.new_notebook(cells=cells)
    assert _inert(nb) == nb
    (output,) = _inert(v4.new_notebook(cells=[_shown({"text/html": TABLE})])).cells[0].outputs
    assert output.data["text/html"] == TABLE.replace("text-align: right;", "text-align:right")


def test_sanitised_markdown_stays_as_it_is():
    once = sanitise_markdown(f'$a<b$ <img src=x onerror="{PWNED}">\n\n```\n<b>\n\n</b>\n```')
    code = "<pre><code>&lt;b&gt;&#10;&#10;&lt;/b&gt;&#10;</code></pre>"
    assert once == f"<div><p>$a&lt;b$ <img></p>&#10;{code}</div>"
    assert sanitise_markdown(once) == once


@pytest.mark.parametrize("lesson", lessons.written_lessons())
def test_every_lesson_is_inert_as_it_is(lesson):
    """The lessons' own text, formulas and tables go through the step unchanged."""
    for path in (lessons.source_path(lesson), lessons.COURSE / lesson / lessons.notebook_name(lesson)):
        nb = nbformat.read(path, as_version=4)
        assert _inert(nb) == nb, path


def test_grading_and_feedback_make_notebooks_inert(tmp_path):
    config = course_config(tmp_path)
    execute, inert, *_ = config.Autograde.autograde_preprocessors
    assert execute.__name__.endswith("Execute") and inert is InertNotebook
    assert config.GenerateFeedback.preprocessors[0] == "autograder.engine.inert.InertNotebook"


def test_the_formgrader_view_allows_nbgraders_scripts_by_hash_and_no_other():
    from nbgrader.server_extensions.formgrader import handlers

    scripts, events = formgrader_policy.nbgraders_own_scripts()
    assert len(scripts) == 1 and len(events) == 2  # the nav macro's script, its two onclick handlers
    exporter = HTMLExporter(template_name="formgrade", extra_template_basedirs=[handlers.template_path])
    resources = {"submission_id": "s1", "notebook_id": "attention", "assignment_id": "03_attention"}
    resources |= {"index": 0, "total": 1, "base_url": "", "student": "mallory", "notebook_path": "x"}
    page = exporter.from_notebook_node(_attack("html <script>"), resources=resources)[0].encode()
    policy = formgrader_policy.view_policy(page, scripts, events)
    allowed = set(re.findall(r"'sha256-[^']+'", policy))
    inline = [
        formgrader_policy.script_hash(script) for script in formgrader_policy.INLINE_SCRIPT.findall(page)
    ]
    attackers = formgrader_policy.script_hash(CANARY.encode())
    assert attackers in inline and attackers not in allowed
    assert set(inline) - {attackers} <= allowed  # nbgrader's own, in the head and in the nav
    assert "'unsafe-inline'" not in policy and "'unsafe-eval'" not in policy


@pytest.mark.parametrize(
    ("path", "policy"),
    [
        ("/formgrader/submissions/s1/", "view"),
        ("/formgrader/submissions/s1/figure.svg", "files"),
        ("/formgrader/submissions/s1/next", None),
        ("/formgrader/submissions/components/x.js", None),
        ("/formgrader/manage_submissions/03_attention", None),
        ("/lab", None),
    ],
)
def test_the_policy_covers_the_submissions_pages_only(path, policy):
    from tornado.httputil import HTTPHeaders, HTTPServerRequest, RequestStartLine

    start = RequestStartLine("GET", path, "HTTP/1.1")
    request = HTTPServerRequest(start_line=start, headers=HTTPHeaders({"Host": "localhost"}))
    transform = formgrader_policy.SubmissionPolicy("/", {"'sha256-x'"}, set(), request)
    headers = HTTPHeaders({"Content-Type": "text/html; charset=UTF-8"})
    _, headers, _ = transform.transform_first_chunk(200, headers, b"<head></head>", True)
    found = headers.get(formgrader_policy.HEADER)
    expected = {"view": "script-src 'self' 'sha256-x'", "files": "sandbox;", None: None}[policy]
    assert found == expected if policy is None else found.startswith(expected)


def test_the_instructors_jupyter_serves_the_policy():
    config = json.loads(
        (lessons.ROOT / "jupyter_config" / "instructor" / "jupyter_server_config.json").read_text()
    )
    assert config["ServerApp"]["jpserver_extensions"]["autograder.engine.formgrader_policy"] is True
