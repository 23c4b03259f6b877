"""Feedback pages that a learner can open from disk, with no network.

nbgrader's feedback page (nbconvert's HTML exporter with nbgrader's ``feedback`` template) loads
MathJax from a CDN: offline, every formula shows as its TeX source. Its tables have neither
borders nor padding, and its fonts say nothing about the glossaries' Chinese. Here a page is
rewritten as it is written:

* every formula becomes inline SVG, typeset by MathJax 3 (the npm package mathjax-full, which
  ``make setup`` installs into the virtual environment) in Node.js (autograder/engine/typeset_math.cjs):
  the page needs neither fonts nor scripts to show it;
* the CDN's MathJax ``<script>`` elements are removed, and a Content-Security-Policy
  (``POLICY``) first in the head forbids every script, plugin, form and request: what a
  submission displayed is sanitised before (autograder/engine/inert.py), and this holds for a page made
  from a notebook graded before that. The page needs no more than its inline styles (nbconvert's,
  this module's) and images from ``data:`` URLs (figures, the notebook's attachments);
* one style block is added (``STYLE_ID``): what the SVG needs, tables with borders and padding,
  a font stack whose fallback covers Chinese, inline code kept in one piece, code blocks that
  scroll instead of running off the page.

Formulas are found as MathJax finds them in a browser, with the notebooks' delimiters (``$``,
``$$``, ``\\(``, ``\\[``, ``\\begin{...}``; ``\\$`` is a dollar): in the text of the page's body,
cut at every tag but ``<br>``, ``<wbr>`` and comments, outside ``<pre>``, ``<code>`` (a dollar
in code or in printed output is not math) and the other elements MathJax skips.

MathJax's work on one page is capped (``MathCaps``: formulas, seconds, bytes of SVG, text
searched), as everything a submission produces is hostile: past a cap, none of the page's
formulas is typeset, the page shows them as the TeX source they are (text, as the rest of the
page), and a notice first in its body says why. A page whose typesetting outlasts its time cap
ends the Node.js process, and the next page gets a new one: no page holds up the others.

``offline_feedback()`` makes nbgrader's GenerateFeedback (the pipeline, ``nbgrader
generate_feedback``, the Formgrader's button) write such pages, with one Node.js process for all
the pages a Python process writes; ``make_offline()`` rewrites pages already written, with one
Node.js process per call. A page that is offline already keeps its formulas and style as they
are; it gets the policy if it has none.
"""

import atexit
import json
import os
import re
import select
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from html import escape, unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from jinja2 import BytecodeCache, Environment
from jinja2.bccache import Bucket
from nbconvert.exporters import HTMLExporter
from nbformat import NotebookNode
from traitlets.config import Config

MATHJAX_VERSION = "3.2.2"
# Where `make setup` installs mathjax-full: in the virtual environment, outside the tracked tree.
MATHJAX = Path(sys.prefix) / "mathjax"
SCRIPT = Path(__file__).with_name("typeset_math.cjs")
# The id of the style block that an offline page carries, once: it also marks the page as done.
STYLE_ID = "offline-feedback"
# What an offline page may load and run: no script, its own inline styles, data: images.
POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
_POLICY_META = f'\n<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
_HEAD = re.compile(r"<head\b[^>]*>", re.IGNORECASE)
# The id of the notice first in a page's body when its formulas were left as TeX (MathCaps).
MATH_NOTICE_ID = "math-as-source"

# Elements whose content MathJax leaves alone (its skipHtmlTags), and the classes that say so
# for any element (MathJax 3's name, and MathJax 2's that notebooks' markdown still uses).
_SKIPPED_TAGS = {"script", "noscript", "style", "textarea", "pre", "code", "annotation", "annotation-xml"}
_IGNORE_CLASS = re.compile(r"(?:^|\s)(?:mathjax_ignore|tex2jax_ignore)(?:\s|$)")
# Elements that a formula may span, and the text MathJax reads for them (comments read as "").
_INCLUDED_TAGS = {"br": "\n", "wbr": ""}
_VOID_TAGS = set("area base br col embed hr img input link meta source track wbr".split())
# A character reference, as html.unescape (and so html.parser) recognises one.
_CHARREF = re.compile(r"&(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")
# Text where no delimiter, escape or environment of MathJax's can start is not sent to it.
_MAY_HOLD_MATH = re.compile(r"[$\\]")

_CJK = '"Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Zen Hei", "PingFang SC", "Microsoft YaHei"'
# Added after MathJax's own rules. Numbers are right-aligned where the page says so: nbconvert's
# markdown tables carry style="text-align: right" (which no rule here overrides), older
# converters align="right", pandas' tables nothing (their cells hold numbers).
_STYLE = f"""
body {{
  font-family: "Helvetica Neue", Helvetica, Arial, {_CJK}, sans-serif;
}}
code, kbd, pre, samp {{
  font-family: Menlo, Monaco, Consolas, "DejaVu Sans Mono", "Courier New", "Noto Sans Mono CJK SC",
    {_CJK}, monospace;
}}
/* Inline code moves to the next line whole; only a span longer than a line wraps. */
:not(pre) > code {{
  display: inline-block;
  max-width: 100%;
  overflow-wrap: break-word;
}}
pre, pre code {{
  white-space: pre;
  word-break: normal;
  overflow-wrap: normal;
  overflow-x: auto;
}}
.rendered_html table, .output_html table {{
  border-collapse: collapse;
  margin: 1em 0;
  font-variant-numeric: tabular-nums;
}}
.rendered_html th, .rendered_html td, .output_html th, .output_html td {{
  border: 1px solid #cfd4da;
  padding: 0.35em 0.75em;
  vertical-align: top;
}}
.rendered_html thead th, .output_html thead th {{
  background-color: #eef1f5;
}}
.rendered_html tbody tr:nth-child(even), .output_html tbody tr:nth-child(even) {{
  background-color: #f8f9fb;
}}
th[align="right"], td[align="right"], table.dataframe td {{
  text-align: right;
}}
th[align="center"], td[align="center"] {{
  text-align: center;
}}
mjx-container[jax="SVG"][display="true"] {{
  overflow-x: auto;
  overflow-y: hidden;
}}
"""


class MathJaxMissing(RuntimeError):
    """Node.js or the mathjax-full package, which typeset the feedback pages, is not installed."""


def _install_hint() -> str:
    command = f"npm install --silent --no-audit --no-fund --prefix {MATHJAX} mathjax-full@{MATHJAX_VERSION}"
    return f"run `make setup` (it runs `{command}`)"


@dataclass(frozen=True)
class MathCaps:
    """How much MathJax may do for one page. The lessons' own pages hold at most 216 formulas,
    0.6 MiB of SVG, typeset in 0.13 s: the caps leave ten times that and more for a learner's
    own markdown, and bound what a submission's output can cost (uncapped, 41,000 recursive
    macros took 109 s and made a 36.8 MiB page; 428 s on a loaded grader)."""

    formulas: int = 2_000
    seconds: float = 10.0  # between formulas; past it and GRACE_S more, the Node.js process ends
    svg_mib: float = 8.0
    text_mib: float = 4.0  # the page's text that MathJax would search (where `$` or `\\` is)


GRACE_S = 5.0  # how long past ``MathCaps.seconds`` a page may take before Node.js is ended
START_TIMEOUT_S = 120.0  # Node.js and MathJax loading, on a loaded machine


class MathCapped(Exception):
    """A page whose formulas were not typeset: typesetting them passed a cap (the message says
    which, in words a learner reads on the page)."""


class Typesetter:
    """MathJax 3 in one Node.js process, typesetting page after page, each within ``caps``.

    ``css`` is the style the SVG output needs on a page. Threads may share one: it typesets for
    one at a time. Close it (or use it as a context manager) when the batch is done; the Node.js
    process also ends when this one does. A process ended at a page's time cap is started again
    for the next page.
    """

    def __init__(self, caps: MathCaps = MathCaps()) -> None:  # noqa: B008 (frozen: one shared default is safe)
        self.caps = caps
        self._node = shutil.which("node")
        if self._node is None:
            raise MathJaxMissing(
                "Feedback pages are typeset by MathJax in Node.js, and `node` is not on PATH: "
                f"install Node.js, then {_install_hint()}."
            )
        package = MATHJAX / "node_modules" / "mathjax-full" / "package.json"
        found = json.loads(package.read_text())["version"] if package.is_file() else None
        if found != MATHJAX_VERSION:
            what = "is missing" if found is None else f"is version {found}"
            raise MathJaxMissing(
                f"Feedback pages are typeset by MathJax, and mathjax-full {MATHJAX_VERSION} under "
                f"{MATHJAX} {what}: {_install_hint()}."
            )
        self._modules = package.parent.parent
        self.pid = os.getpid()
        self._lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        """Start the Node.js process, and read the style its SVG needs (its first line)."""
        self._buffer: list[bytes] = []
        self._process = subprocess.Popen(
            [self._node, str(SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "NODE_PATH": str(self._modules)},
        )
        try:
            self.css: str = json.loads(self._answer(START_TIMEOUT_S))["css"]
        except TimeoutError:
            self._end()
            raise RuntimeError(f"MathJax's Node.js process gave no answer in {START_TIMEOUT_S:g} s") from None

    def _answer(self, timeout_s: float) -> str:
        """The process's next line; TimeoutError if none comes within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        stream = self._process.stdout.fileno()
        while not self._buffer or b"\n" not in self._buffer[-1]:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stream], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(stream, 2**20)
            if not chunk:
                raise RuntimeError(f"MathJax's Node.js process ({SCRIPT.name}) stopped: see its error above")
            self._buffer.append(chunk)
        line, rest = b"".join(self._buffer).split(b"\n", 1)
        self._buffer = [rest] if rest else []
        return line.decode("utf-8")

    @property
    def running(self) -> bool:
        """Whether its Node.js process is still there to typeset."""
        return self._process.poll() is None

    def typeset(self, strings: list[str]) -> list[list[tuple[int, int, str]]]:
        """For each of one page's strings, the formulas in it: (start, end, the HTML to put there).
        MathCapped when typesetting them passes one of ``caps``."""
        caps = self.caps
        searched = sum(map(len, strings))
        if searched > caps.text_mib * 2**20:
            raise MathCapped(
                f"its text holds {searched / 2**20:.1f} MiB to search, over the cap of {caps.text_mib:g} MiB"
            )
        limits = {"formulas": caps.formulas, "seconds": caps.seconds, "bytes": int(caps.svg_mib * 2**20)}
        with self._lock:
            if not self.running:
                self._start()
            self._process.stdin.write((json.dumps({"strings": strings, "caps": limits}) + "\n").encode())
            self._process.stdin.flush()
            try:
                reply = json.loads(self._answer(caps.seconds + GRACE_S))
            except TimeoutError:
                self._end()  # in the middle of one formula: the next page gets a new process
                raise MathCapped(self._why("seconds", 0)) from None
        if "capped" in reply:
            raise MathCapped(self._why(reply["capped"], reply.get("count", 0)))
        found: list[list[tuple[int, int, str]]] = [[] for _ in strings]
        for string, start, end, html in reply["math"]:
            found[string].append((start, end, html))
        return found

    def _why(self, cap: str, count: int) -> str:
        """Which cap a page passed, in words (the Node.js process names the cap)."""
        caps = self.caps
        if cap == "formulas":
            return f"it holds {count:,} formulas, over the cap of {caps.formulas:,}"
        if cap == "bytes":
            return f"typeset, they came to more than {caps.svg_mib:g} MiB"
        return f"typesetting them took more than {caps.seconds:g} s"

    def _end(self) -> None:
        """End the Node.js process now, whatever it is doing."""
        self._process.kill()
        self.close()

    def close(self) -> None:
        """End the Node.js process (it stops when its input ends)."""
        if self._process.stdin and not self._process.stdin.closed:
            try:
                self._process.stdin.close()
            except BrokenPipeError:
                pass  # it has ended already
        self._process.wait()
        self._process.stdout.close()

    def __enter__(self) -> "Typesetter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class _Text:
    """A run of page text where formulas may be: what MathJax reads, and where in the page's HTML
    each of its characters starts and ends."""

    parts: list[str] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)

    def add(self, text: str, start: int, end: int) -> None:
        """``text``, read from the page between ``start`` and ``end``: a character a place where
        it is as long as that, else all of it in that place (a character reference, a ``<br>``)."""
        self.parts.append(text)
        if len(text) == end - start:
            self.starts.extend(range(start, end))
            self.ends.extend(range(start + 1, end + 1))
        else:
            self.starts.extend([start] * len(text))
            self.ends.extend([end] * len(text))

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _is_mathjax(script: dict[str, str | None]) -> bool:
    """Whether a ``<script>`` element's attributes say that it loads or configures MathJax."""
    return "mathjax" in (script.get("src") or "").lower() or script.get("type") == "text/x-mathjax-config"


class _PageScanner(HTMLParser):
    """Reads a page once: the runs of text MathJax would search, MathJax's ``<script>`` elements,
    and where the head ends."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.html = html
        self.texts: list[_Text] = []
        self.scripts: list[tuple[int, int]] = []
        self.head_end: int | None = None
        self.body_start: int | None = None  # where the body's content starts
        self._lines = [0] + [match.end() for match in re.finditer("\n", html)]
        self._in_body = False
        self._open: list[tuple[str, bool]] = []  # open elements, and whether they skip math
        self._skipping = 0
        self._script_start: int | None = None
        self._text = _Text()
        self._data_start: int | None = None  # text read: it ends where the next thing starts
        self.feed(html)
        self.close()
        self._here(len(html))
        self._cut()

    def _here(self, at: int | None = None) -> int:
        """Where the parser is in the page (or ``at``), the text before it now complete."""
        if at is None:
            line, column = self.getpos()
            at = self._lines[line - 1] + column
        if self._data_start is not None:
            self._add_data(self._data_start, at)
            self._data_start = None
        return at

    def _add_data(self, start: int, end: int) -> None:
        """The page's text between ``start`` and ``end``, as it reads: each character reference
        there (``&lt;``) is the character(s) it stands for, all at the reference's place."""
        done = start
        for match in _CHARREF.finditer(self.html, start, end):
            self._text.add(self.html[done : match.start()], done, match.start())
            self._text.add(unescape(match.group()), match.start(), match.end())
            done = match.end()
        self._text.add(self.html[done:end], done, end)

    def _cut(self) -> None:
        """MathJax's string ends here: keep it if a formula may be in it."""
        if _MAY_HOLD_MATH.search(self._text.text):
            self.texts.append(self._text)
        self._text = _Text()

    def handle_data(self, data: str) -> None:
        at = self._here()
        if self._in_body and not self._skipping:
            self._data_start = at

    def handle_comment(self, data: str) -> None:
        self._here()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        at = self._here()
        if tag in _INCLUDED_TAGS:
            if self._in_body and not self._skipping:
                self._text.add(_INCLUDED_TAGS[tag], at, at + len(self.get_starttag_text() or ""))
            return
        self._cut()
        attributes = dict(attrs)
        if tag == "body" and self.body_start is None:
            self.body_start = at + len(self.get_starttag_text() or "")
        self._in_body = self._in_body or tag == "body"
        if tag == "script" and _is_mathjax(attributes):
            self._script_start = at
        if tag not in _VOID_TAGS:
            skips = tag in _SKIPPED_TAGS or bool(_IGNORE_CLASS.search(attributes.get("class") or ""))
            self._open.append((tag, skips))
            self._skipping += skips

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID_TAGS:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        at = self._here()
        self._cut()
        if tag == "head" and self.head_end is None:
            self.head_end = at
        if tag == "script" and self._script_start is not None:
            self.scripts.append((self._script_start, self.html.index(">", at) + 1))
            self._script_start = None
        if any(name == tag for name, _ in self._open):
            while True:
                name, skips = self._open.pop()
                self._skipping -= skips
                if name == tag:
                    break

    def handle_decl(self, decl: str) -> None:
        self._here()
        self._cut()

    handle_pi = unknown_decl = handle_decl


def offline_page(html: str, typesetter: Typesetter) -> str:
    """The page ``html`` with its formulas typeset, MathJax's scripts removed, the style and the
    policy added (only the policy, if the page was made offline before it had one)."""
    if f'<style id="{STYLE_ID}">' not in html:
        html = _typeset(html, typesetter)
    return _with_policy(html)


def _with_policy(html: str) -> str:
    """``html`` with ``POLICY`` first in its head (where it was, or added)."""
    head = _HEAD.search(html)
    at = head.end() if head else 0
    if html.startswith(_POLICY_META, at):
        return html
    return html[:at] + _POLICY_META + html[at:]


def _typeset(html: str, typesetter: Typesetter) -> str:
    """The page ``html`` with its formulas typeset, MathJax's scripts removed, the style added."""
    page = _PageScanner(html)
    edits = [(start, end, "") for start, end in page.scripts]
    try:
        typeset = typesetter.typeset([text.text for text in page.texts])
    except MathCapped as capped:
        at = len(html) if page.body_start is None else page.body_start
        why = f"The formulas on this page are shown as their TeX source, not typeset: {capped}."
        edits.append((at, at, f'\n<p id="{MATH_NOTICE_ID}" style="color: #a04000">{escape(why)}</p>'))
        typeset = [[] for _ in page.texts]
    for text, found in zip(page.texts, typeset, strict=True):
        edits += [(text.starts[start], text.ends[end - 1], svg) for start, end, svg in found]
    head_end = page.head_end or 0
    edits.append((head_end, head_end, f'<style id="{STYLE_ID}">{typesetter.css}{_STYLE}</style>\n'))
    pieces, done = [], 0
    for start, end, new in sorted(edits):
        pieces += [html[done:start], new]
        done = end
    return "".join([*pieces, html[done:]])


def make_offline(pages: list[Path]) -> None:
    """Rewrite the feedback pages ``pages`` in place as offline pages, with one Node.js process."""
    with Typesetter() as typesetter:
        for page in pages:
            html = page.read_text(encoding="utf-8")
            offline = offline_page(html, typesetter)
            if offline != html:
                page.write_text(offline, encoding="utf-8")


_shared: Typesetter | None = None
_shared_lock = threading.Lock()


def _shared_typesetter() -> Typesetter:
    """This process's typesetter, started when first needed (again if it stopped, or in a fork)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.pid != os.getpid() or not _shared.running:
            _shared = Typesetter()
            atexit.register(_shared.close)
        return _shared


class _CompiledTemplates(BytecodeCache):
    """Jinja's compiled templates, kept in this process's memory: each is compiled again only when
    its source changes (jinja compares a checksum of it)."""

    def __init__(self) -> None:
        self.code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        if bucket.key in self.code:
            bucket.bytecode_from_string(self.code[bucket.key])

    def dump_bytecode(self, bucket: Bucket) -> None:
        self.code[bucket.key] = bucket.bytecode_to_string()


_COMPILED_TEMPLATES = _CompiledTemplates()


class OfflineFeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter, writing pages that show everything with no network (see above)."""

    def _create_environment(self) -> Environment:
        """nbconvert's environment, with the templates compiled once per process: nbgrader makes a new
        exporter, hence a new environment, for every page, and compiling its nine templates took a
        fifth of each page's time."""
        environment = super()._create_environment()
        environment.bytecode_cache = _COMPILED_TEMPLATES
        return environment

    def from_notebook_node(
        self, nb: NotebookNode, resources: dict[str, Any] | None = None, **kw: Any
    ) -> tuple[str, dict[str, Any]]:
        """The notebook's page, offline."""
        html, resources = super().from_notebook_node(nb, resources, **kw)
        return offline_page(html, _shared_typesetter()), resources


def offline_feedback() -> Config:
    """nbgrader configuration under which every way of generating feedback writes offline pages."""
    c = Config()
    c.GenerateFeedback.exporter_class = OfflineFeedbackExporter
    return c


NOTICE_ID = "late-work"
# nbgrader's heading "<notebook> (Score: x / y)", then the notice of an earlier run, if one added it
_HEADING = re.compile(r'</h4>(?:\n<p id="late-work"[^>]*>[^<]*</p>)?', re.IGNORECASE)


def with_notice(html: str, text: str) -> str:
    """``html`` with ``text``, escaped, under the page's score heading (before anything of the
    learner's); a notice of ours already there is replaced."""
    notice = f'</h4>\n<p id="{NOTICE_ID}" style="color: #a04000; font-weight: bold">{escape(text)}</p>'
    return _HEADING.sub(lambda _: notice, html, count=1)


def add_notice(page: Path, text: str) -> None:
    """Rewrite the feedback page ``page`` with ``text`` as its notice (``with_notice``)."""
    page.write_text(with_notice(page.read_text(encoding="utf-8"), text), encoding="utf-8")
