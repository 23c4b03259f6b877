"""A Content-Security-Policy for the Formgrader's view of a submission, which shows the learner's
notebook inside the instructor's Jupyter session.

The graded notebook is inert already (autograder/engine/inert.py); the policy is for a notebook graded
before that, and for whatever a sanitiser misses. It is added by a Jupyter server extension (on in
jupyter_config/instructor) as a tornado output transform, for the Formgrader's submission pages
only: JupyterLab's own pages, and the Formgrader's other pages (which show no notebook), keep
their headers as they are. nbgrader's handler, its templates and its scripts are used unchanged.

* The view, ``/formgrader/submissions/<id>/``: scripts from the server itself (nbgrader's static
  files) and the inline scripts of nbgrader's ``formgrade`` template, each by its SHA-256 hash,
  never ``'unsafe-inline'``. The scripts of the template's ``nav`` macro and its two ``onclick``
  handlers never change: they are rendered from nbgrader's own template file and hashed once, at
  start-up. The script of its ``header`` macro holds the submission's ids and the server's URL: it
  is hashed in each page, and only in the page's ``<head>``, which nbgrader's template writes
  before any of the notebook (the notebook's name and its assignment's come from the instructor,
  not the learner). A script the learner's notebook put into the page has no allowed hash and
  does not run. MathJax 2 from its CDN is not allowed either: it evaluates every
  ``text/x-mathjax-config`` script in the page, the learner's too, so the view shows formulas as
  their TeX source.
* The submission's other files, ``/formgrader/submissions/<id>/<path>`` (nbgrader serves the
  graded folder there, for the figures a notebook links to): a sandbox without scripts, so that an
  HTML or SVG file a learner handed in opens in an origin of its own and runs nothing.

A hash per script was chosen over a nonce: a nonce would have to be added to nbgrader's own
``<script>`` elements by rewriting its template or its pages, while a hash needs neither.
"""

import base64
import functools
import hashlib
import re
from typing import Any

from jinja2 import Environment, FileSystemLoader
from jupyter_server.serverapp import ServerApp
from nbgrader.server_extensions.formgrader import handlers
from tornado.httputil import HTTPHeaders, HTTPServerRequest
from tornado.web import OutputTransform

HEADER = "Content-Security-Policy"
# nbgrader's own routes under the submissions' URL: its scripts' folder, and the buttons' redirects.
_COMPONENTS = "components"
_NAVIGATION = {"next", "prev", "next_incorrect", "prev_incorrect"}
INLINE_SCRIPT = re.compile(rb"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", re.DOTALL | re.IGNORECASE)
_HANDLER = re.compile(r"""\son[a-z]+="([^"]*)\"""")
FILES_POLICY = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'"


def script_hash(source: bytes) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source).digest()).decode("ascii") + "'"


def nbgraders_own_scripts() -> tuple[set[str], set[str]]:
    """The hashes of the inline scripts and of the event handlers (``onclick``) of nbgrader's ``nav``
    macro, which every submission view holds as they are."""
    environment = Environment(loader=FileSystemLoader(f"{handlers.template_path}/formgrade"))
    macros = environment.get_template("formgrade_macros.html.j2").module
    nav = macros.nav({"base_url": "", "submission_id": "", "index": 0, "total": 1, "assignment_id": ""})
    scripts = {script_hash(script) for script in INLINE_SCRIPT.findall(nav.encode("utf-8"))}
    return scripts, {script_hash(handler.encode("utf-8")) for handler in _HANDLER.findall(nav)}


def view_policy(page: bytes, scripts: set[str], events: set[str]) -> str:
    """The policy of a submission view: the server's scripts, nbgrader's own inline ``scripts`` and
    event handlers (``events``, their hashes), and the inline scripts of the page's head."""
    head = page[: page.find(b"</head>")] if b"</head>" in page else b""
    allowed = sorted(scripts | {script_hash(script) for script in INLINE_SCRIPT.findall(head)})
    sources = " ".join(["'self'", *allowed, "'unsafe-hashes'", *sorted(events)])
    return f"script-src {sources}; object-src 'none'; base-uri 'none'"


class SubmissionPolicy(OutputTransform):
    """Adds the policy to the responses under ``<base_url>formgrader/submissions/`` (see above)."""

    def __init__(self, base_url: str, scripts: set[str], events: set[str], request: HTTPServerRequest):
        super().__init__(request)
        prefix = re.escape(base_url.rstrip("/") + "/formgrader/submissions/")
        match = re.fullmatch(prefix + r"([^/]+)(?:/(.*))?", request.path)
        submission, path = match.groups() if match else (_COMPONENTS, None)
        self._view = submission != _COMPONENTS and not path
        self._files = submission != _COMPONENTS and bool(path) and path.strip("/") not in _NAVIGATION
        self._scripts = scripts
        self._events = events

    def transform_first_chunk(
        self, status_code: int, headers: HTTPHeaders, chunk: bytes, finishing: bool
    ) -> tuple[int, HTTPHeaders, bytes]:
        if self._view and headers.get("Content-Type", "").startswith("text/html"):
            headers.add(HEADER, view_policy(chunk, self._scripts, self._events))
        elif self._files:
            headers.add(HEADER, FILES_POLICY)
        return status_code, headers, chunk


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    return [{"module": "autograder.engine.formgrader_policy"}]


def _load_jupyter_server_extension(server: ServerApp) -> None:
    """Add the transform, first, so that it sees each page before anything compresses it."""
    scripts, events = nbgraders_own_scripts()
    policy = functools.partial(SubmissionPolicy, server.base_url, scripts, events)
    server.web_app.transforms.insert(0, policy)
