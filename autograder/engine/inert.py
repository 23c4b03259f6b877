"""Graded notebooks that show what a submission printed and drew, and run nothing in a page.

Any HTML made from a learner's notebook is written by the learner (nbconvert's CVE-2021-32862): a
solution cell that displays ``<script>`` or ``<img onerror=...>``, an object whose
``_repr_javascript_`` returns code, an SVG with a script in it, a markdown cell with raw HTML or a
``javascript:`` link. nbconvert copies them into the pages it writes (the feedback page, the
Formgrader's view of a submission), where they would run with the instructor's Jupyter session.
nbconvert's own ``HTMLExporter.sanitize_html`` is off by default, works on the page it writes only
(not on the graded notebook that the Formgrader renders) and is built on bleach, which is no longer
developed. ``InertNotebook`` makes the notebook itself inert, with nh3 (the Rust sanitiser ammonia)
and one allow-list:

* ``text/html`` outputs keep text, tables, lists, formatting, links to http(s) and images whose
  source is a ``data:image/...`` URL; everything else (scripts, styles, event handlers, frames,
  forms, SVG, ids) goes;
* ``image/svg+xml`` becomes an ``<img>`` of a ``data:`` URL (a script in an image never runs);
  ``image/png``, ``image/jpeg`` and ``image/gif`` are kept when they are base64 and nothing else;
  every other MIME type (``application/javascript`` and the other scripts, widget views, PDF, JSON)
  is dropped, and an output left with nothing to show is dropped too;
* markdown (cells, ``text/markdown`` outputs) is left exactly as written unless nbconvert's own
  markdown parser finds raw HTML in it or a link or image whose URL's scheme is not http(s),
  mailto, ``attachment:`` or ``data:image``: then it becomes the HTML nbconvert renders from it,
  sanitised, on one line in a ``<div>`` (so that rendering it again changes nothing). LaTeX, code
  spans and tables in honest markdown are never touched;
* raw cells (nbconvert copies them into an HTML page as they are) are sanitised as HTML;
* cell attachments keep their PNG, JPEG and GIF images only;
* the notebook's widget state (``metadata.widgets``, which nbconvert writes into a page with the
  script that renders it) is removed.

Code cells' sources are left alone: nbconvert escapes them. So are streams and errors: nbconvert
escapes their text. The course's checks print text only (a ``CheckFailure`` is an error output).
"""

import base64
import binascii
import re
from typing import Any
from urllib.parse import urlsplit

import nh3
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Bool

RASTER = ("image/png", "image/jpeg", "image/gif")
# The MIME types an output keeps (the sanitised ones are rewritten on the way).
KEPT = {"text/plain", "text/html", "text/markdown", "text/latex", "image/svg+xml", *RASTER}
_ATTRIBUTES = {
    **nh3.ALLOWED_ATTRIBUTES,
    "th": {*nh3.ALLOWED_ATTRIBUTES["th"], "style"},
    "td": {*nh3.ALLOWED_ATTRIBUTES["td"], "style"},
}
_URL_SCHEMES = {"http", "https", "mailto", "data"}
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
# What browsers ignore in a URL's scheme ("java\tscript:" is "javascript:").
_IGNORED_IN_URL = re.compile(r"[\x00-\x20\x7f]")


def _kept_url(tag: str, attribute: str, value: str) -> str | None:
    """An image shows a ``data:image`` URL only (no request leaves the page); a link never leads to a
    ``data:`` URL (a page of the learner's)."""
    scheme = urlsplit(_IGNORED_IN_URL.sub("", value)).scheme.lower()
    if tag == "img" and attribute == "src":
        return value if value.lower().startswith("data:image/") else None
    if attribute in ("href", "cite") and scheme == "data":
        return None
    return value


def sanitise_html(html: str) -> str:
    """``html`` with nothing left that runs or reaches out: the allow-list above."""
    return nh3.clean(
        html,
        attributes=_ATTRIBUTES,
        allowed_classes={"table": {"dataframe"}},
        filter_style_properties={"text-align"},
        url_schemes=_URL_SCHEMES,
        attribute_filter=_kept_url,
    )


def _safe_link(token: dict[str, Any]) -> bool:
    """Whether a markdown link or image leads where a page may send its reader or fetch from."""
    url = _IGNORED_IN_URL.sub("", token["attrs"]["url"]).lower()
    scheme = urlsplit(url).scheme
    if token["type"] == "image":
        return scheme in ("", "http", "https", "attachment") or url.startswith("data:image/")
    return scheme in ("", "http", "https", "mailto")


def _needs_sanitising(tokens: list[dict[str, Any]]) -> bool:
    """Whether markdown tokens (nbconvert's parser's) hold raw HTML or a link or image to elsewhere."""
    for token in tokens:
        if token["type"] in ("block_html", "inline_html"):
            return True
        if token["type"] in ("link", "image") and not _safe_link(token):
            return True
        if _needs_sanitising(token.get("children", [])):
            return True
    return False


def sanitise_markdown(source: str, attachments: dict[str, Any] | None = None) -> str:
    """``source`` as written, or if it holds raw HTML or links elsewhere, the HTML nbconvert renders
    from it (with the cell's ``attachments``), sanitised, as one line that markdown passes through."""
    tokens, _ = MarkdownWithMath(renderer=None).parse(source)
    if not _needs_sanitising(tokens) or _is_inert_block(source):
        return source
    renderer = IPythonRenderer(escape=False, attachments=attachments)
    rendered = MarkdownWithMath(renderer=renderer).render(source)
    return f"<div>{_one_line(sanitise_html(rendered))}</div>"


def _one_line(html: str) -> str:
    """``html`` on one line: a markdown HTML block that starts with ``<div>`` ends at a blank line."""
    return html.strip().replace("\n", "&#10;")


def _is_inert_block(source: str) -> bool:
    """Whether markdown is one ``<div>`` block of sanitised HTML, as sanitise_markdown writes it."""
    wrapped = source.startswith("<div>") and source.endswith("</div>")
    return wrapped and _one_line(sanitise_html(source)) == source


def _is_base64(data: Any) -> bool:
    if not isinstance(data, str) or not _BASE64.fullmatch(data):
        return False
    try:
        base64.b64decode("".join(data.split()), validate=True)
    except binascii.Error:
        return False
    return True


def _text(value: str | list[str]) -> str:
    """A notebook's multi-line string, which nbformat may hold as a list of lines."""
    return "".join(value) if isinstance(value, list) else value


def _svg_as_image(svg: str | list[str]) -> str:
    data = base64.b64encode(_text(svg).encode("utf-8")).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}">'


def inert_data(data: dict[str, Any]) -> dict[str, Any]:
    """An output's MIME bundle with only what shows and nothing that runs."""
    kept = {mime: value for mime, value in data.items() if mime in KEPT}
    for mime in RASTER:
        if mime in kept and not _is_base64(kept[mime]):
            del kept[mime]
    if "image/svg+xml" in kept:
        svg = kept.pop("image/svg+xml")
        kept.setdefault("text/html", _svg_as_image(svg))
    if "text/html" in kept:
        kept["text/html"] = sanitise_html(_text(kept["text/html"]))
    if "text/markdown" in kept:
        kept["text/markdown"] = sanitise_markdown(_text(kept["text/markdown"]))
    return kept


def _inert_outputs(outputs: list[NotebookNode]) -> list[NotebookNode]:
    """Outputs with inert MIME bundles; one whose bundle is left empty is dropped."""
    kept = []
    for output in outputs:
        if "data" in output:
            output.data = inert_data(output.data)
            if not output.data:
                continue
        kept.append(output)
    return kept


def _inert_attachments(attachments: dict[str, Any]) -> dict[str, Any]:
    """The attachments' raster images, each with its base64 data and nothing else."""
    kept = {}
    for name, bundle in attachments.items():
        images = {mime: data for mime, data in bundle.items() if mime in RASTER and _is_base64(data)}
        if images:
            kept[name] = images
    return kept


class InertNotebook(Preprocessor):
    """Makes a notebook inert: nothing in any page made from it runs (see the module's docstring)."""

    # nbconvert's steps are off unless configured on; nbgrader registers its steps as they are.
    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(
        self, cell: NotebookNode, resources: dict[str, Any], index: int
    ) -> tuple[NotebookNode, dict[str, Any]]:
        if "attachments" in cell:
            cell.attachments = _inert_attachments(cell.attachments)
        if cell.cell_type == "code":
            cell.outputs = _inert_outputs(cell.outputs)
        elif cell.cell_type == "markdown":
            cell.source = sanitise_markdown(cell.source, cell.get("attachments"))
        elif cell.cell_type == "raw":
            cell.source = sanitise_html(cell.source)
        return cell, resources
