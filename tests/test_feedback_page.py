"""Feedback pages that show every formula, table and Chinese glossary with no network
(autograder/engine/feedback_page.py): typeset at generation time, no CDN, one style block."""

import re

import jinja2
import nbformat
import pytest
from bs4 import BeautifulSoup
from nbformat import v4
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory

from autograder import lessons
from autograder.engine import feedback_page
from autograder.engine.feedback_page import (
    MATH_NOTICE_ID,
    POLICY,
    STYLE_ID,
    MathCaps,
    MathJaxMissing,
    OfflineFeedbackExporter,
    Typesetter,
    make_offline,
    offline_feedback,
    offline_page,
)

# What MathJax would still take for a formula, were it on the page.
DELIMITER = re.compile(r"\$|\\\(|\\\[|\\begin\{")


@pytest.fixture(scope="module")
def typesetter():
    with Typesetter() as typesetter:
        yield typesetter


def soup_of(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


def visible_text(html: str) -> str:
    """The text a reader sees in the page's body, but for code, output and typeset formulas."""
    soup = soup_of(html)
    for element in soup.find_all(["pre", "code", "script", "style", "mjx-container"]):
        element.decompose()
    return soup.body.get_text()


def assert_self_contained(html: str) -> None:
    soup = soup_of(html)
    assert not [script for script in soup.find_all("script") if script.get("src")]
    assert not [link for link in soup.find_all("link") if re.match(r"(https?:)?//", link.get("href", ""))]
    for remote in ["cdnjs", "jsdelivr", "unpkg", "mathjax/2.7", "MathJax.Hub", "x-mathjax-config"]:
        assert remote not in html
    assert len(soup.find_all("style", id=STYLE_ID)) == 1
    # the policy comes first in the head, before anything it governs
    assert soup.head.find(True).attrs == {"http-equiv": "Content-Security-Policy", "content": POLICY}
    assert not soup.find_all("script")


def test_generated_feedback_is_offline(tmp_path):
    """A notebook through nbgrader's GenerateFeedback, configured by offline_feedback(): its
    exporter with nbgrader's feedback template, its pages typeset and self-contained."""
    nb = v4.new_notebook()
    nb.cells = [
        v4.new_markdown_cell(
            "# Costs\n\nScores $QK^\\top$ cost $O(T^2)$ when $a<b$, not `$x$`:\n\n"
            "$$\\mathrm{softmax}\\left(\\frac{QK^\\top}{\\sqrt{d_k}}\\right)V$$\n\n"
            "| step | time |\n|:--|--:|\n| scores | $O(T_q T_k d_k)$ |\n\n"
            "| English | 中文 |\n|---|---|\n| attention | 注意力 |"
        ),
        v4.new_code_cell(
            "print('price: $5 and $6')",
            outputs=[v4.new_output("stream", name="stdout", text="price: $5 and $6\n")],
        ),
    ]
    converter = GenerateFeedback(coursedir=CourseDirectory(root=str(tmp_path)), config=offline_feedback())
    assert converter.exporter_class is OfflineFeedbackExporter
    exporter = converter.exporter_class(parent=converter, config=converter.config)
    grades = {"notebook": "costs", "score": 1.0, "max_score": 2.0, "late_penalty": 0.0}
    html, _ = exporter.from_notebook_node(nb, resources={"nbgrader": grades})

    assert "costs (Score: 1.0 / 2.0)" in html  # nbgrader's feedback template, not nbconvert's own
    assert not DELIMITER.search(visible_text(html))
    soup = soup_of(html)
    assert len(soup.find_all("svg")) == 5
    assert len(soup.find_all("mjx-container", display="true")) == 1
    assert_self_contained(html)
    assert "price: $5 and $6\n" in [pre.get_text() for pre in soup.find_all("pre")]
    assert [code.get_text() for code in soup.find_all("code")] == ["$x$"]
    assert '<td style="text-align:right"><mjx-container' in html
    style = soup.find("style", id=STYLE_ID).get_text()
    assert '"Noto Sans CJK SC"' in style and "border: 1px solid" in style


def test_a_second_page_compiles_no_template_and_is_the_same(tmp_path, monkeypatch):
    """nbgrader makes an exporter per page: the templates the first compiled are reused by the next."""
    compiled = []
    compile_template = jinja2.Environment.compile
    monkeypatch.setattr(
        jinja2.Environment,
        "compile",
        lambda self, *a, **k: compiled.append(1) or compile_template(self, *a, **k),
    )
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("Scores $QK^\\top$.")])
    grades = {"notebook": "costs", "score": 1.0, "max_score": 2.0, "late_penalty": 0.0}
    converter = GenerateFeedback(coursedir=CourseDirectory(root=str(tmp_path)), config=offline_feedback())
    pages = []
    for _ in range(2):
        compiled.clear()
        exporter = converter.exporter_class(parent=converter, config=converter.config)
        pages.append(exporter.from_notebook_node(nb, resources={"nbgrader": grades})[0])
    assert compiled == [] and pages[0] == pages[1] and "costs (Score: 1.0 / 2.0)" in pages[1]


PAGE = r"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>$t$</title>
<script src="https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML"> </script>
<script type="text/x-mathjax-config">MathJax.Hub.Config({});</script>
</head><body>
<p>Dollars $x^2$, parentheses \(y\), 😀 and $a &lt; b$ and $c<br>+ d$.</p>
<p>Display $$z$$ and \[w\] and \begin{align}e &amp;= f\end{align}</p>
<p>Escaped: costs \$5, \$6.</p>
<pre>total: $5 and $6</pre>
<p>Code <code>$q$</code>, <span class="tex2jax_ignore">$7 and $8</span>, <b>$9</b> and <i>$</i>.</p>
</body></html>
"""


def test_delimiters_escapes_and_skipped_text(typesetter):
    html = offline_page(PAGE, typesetter)
    soup = soup_of(html)
    formulas = soup.find_all("mjx-container")
    assert len(formulas) == 7
    assert 'data-c="3C"' in str(formulas[2])  # the "<" of a &lt; b, read as MathJax reads the page
    assert len(soup.find_all("mjx-container", display="true")) == 3
    assert "total: $5 and $6" in html and "<code>$q$</code>" in html and "$7 and $8" in html
    text = visible_text(html)
    assert "Escaped: costs $5, $6." in text and "😀 and  and ." in text
    assert not DELIMITER.search(text.split("Escaped")[0])  # the first two paragraphs: all typeset
    assert "<b>$9</b> and <i>$</i>" in html  # a formula never spans an element
    assert "<title>$t$</title>" in html  # only the body is searched, as MathJax does
    assert_self_contained(html)


def test_idempotent(typesetter):
    once = offline_page(PAGE, typesetter)
    assert offline_page(once, typesetter) == once


def test_a_page_made_offline_before_the_policy_gets_it(typesetter):
    once = offline_page(PAGE, typesetter)
    without = once.replace(f'\n<meta http-equiv="Content-Security-Policy" content="{POLICY}">', "")
    assert without != once and offline_page(without, typesetter) == once


def test_a_page_past_a_cap_keeps_its_formulas_as_text_and_says_why_once():
    """Past a cap (tests/test_hostile_bounds.py), the page is the page as written, its formulas
    included, with a notice first in the body; made offline again, it stays as it is."""
    with Typesetter(MathCaps(formulas=3)) as typesetter:
        html = offline_page(PAGE, typesetter)
        assert offline_page(html, typesetter) == html
    soup = soup_of(html)
    assert soup.body.find(True).attrs["id"] == MATH_NOTICE_ID and not soup.find_all("mjx-container")
    assert "it holds 7 formulas, over the cap of 3." in soup.body.find(True).get_text()
    assert "Dollars $x^2$, parentheses \\(y\\), 😀 and $a &lt; b$" in html  # as written: text
    assert_self_contained(html)


def test_definitions_stay_on_their_page(typesetter):
    """A learner's \\newcommand is theirs: the next page typesets as if it never was."""
    [[(_, _, defined)]] = typesetter.typeset(["$\\newcommand{\\R}{\\mathbb{R}}\\R$"])
    [[(_, _, undefined)]] = typesetter.typeset(["$\\R$"])
    assert 'fill="red"' not in defined and 'fill="red"' in undefined


def test_a_lesson_page_written_with_the_cdn_is_made_offline(tmp_path):
    """A page written before, by nbgrader's own feedback template (MathJax from the CDN), made
    offline: feedback released before this course typeset its pages."""
    converter = GenerateFeedback(coursedir=CourseDirectory(root=str(tmp_path)))
    exporter = converter.exporter_class(parent=converter, config=converter.config)
    grades = {"notebook": "attention", "score": 6.0, "max_score": 6.0, "late_penalty": 0.0}
    nb = nbformat.read(lessons.source_path("03_attention"), as_version=4)
    for cell in nb.cells:  # the lesson's text and outputs, without a gradebook's scores
        cell.metadata.pop("nbgrader")
    html, _ = exporter.from_notebook_node(nb, resources={"nbgrader": grades})
    page = tmp_path / "attention.html"
    page.write_text(html, encoding="utf-8")
    before = page.read_text(encoding="utf-8")
    make_offline([page])
    after = page.read_text(encoding="utf-8")

    assert DELIMITER.search(visible_text(before))
    assert not DELIMITER.search(visible_text(after))
    soup = soup_of(after)
    assert len(soup.find_all("svg")) == len(soup.find_all("mjx-container")) > 50
    assert [pre.get_text() for pre in soup.find_all("pre")] == [
        pre.get_text() for pre in soup_of(before).find_all("pre")
    ]
    assert_self_contained(after)
    make_offline([page])
    assert page.read_text(encoding="utf-8") == after


def test_without_node(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MathJaxMissing, match=r"`node` is not on PATH.*make setup"):
        Typesetter()


def test_without_mathjax(monkeypatch, tmp_path):
    monkeypatch.setattr(feedback_page, "MATHJAX", tmp_path / "mathjax")
    with pytest.raises(MathJaxMissing, match=r"mathjax-full 3\.2\.2 .* missing: run `make setup`") as raised:
        Typesetter()
    install = f"npm install --silent --no-audit --no-fund --prefix {tmp_path}/mathjax mathjax-full@3.2.2"
    assert install in str(raised.value)


def test_the_makefile_installs_the_version_the_pages_need():
    makefile = (lessons.ROOT / "Makefile").read_text()
    assert f"mathjax-full@{feedback_page.MATHJAX_VERSION}" in makefile
