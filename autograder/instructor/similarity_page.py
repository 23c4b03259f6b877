"""The similarity report's offline page: per lesson, the threshold and how often it flags learners
who worked alone, the clusters of flagged learners, the most similar pairs, and each of them with
the lines the two share (not the template's) and their code side by side, the matched code marked.

Everything from a submission (code, lines, names) is text: ``escape`` writes it, and the page's
Content-Security-Policy forbids scripts.
"""

from dataclasses import dataclass
from html import escape

import numpy as np

from autograder.instructor.similarity_pairs import Cluster, Pair

# What the page may load and run: nothing but its own inline styles.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1d1d1f; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; }
td, th { border: 1px solid #ccc; padding: 0.2rem 0.6rem; text-align: left; vertical-align: top; }
tr.flagged td { background: #fff1e0; }
table.shared td { font-family: monospace; font-size: 0.8rem; white-space: pre; }
.side { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 0.8rem; }
.side h4 { margin: 0.3rem 0; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; font-size: 0.8rem; white-space: pre; }
mark { background: #ffd27a; }
details { margin-bottom: 1rem; border-top: 1px solid #ddd; padding-top: 0.4rem; }
summary { cursor: pointer; font-weight: 600; }
p.rate { color: #555; }
"""


@dataclass
class LessonView:
    """What the page shows of one lesson: the sentence on its threshold, all its pairs' count, its
    clusters, the pairs shown (most similar first), each learner's code and each pair's matched
    slices (learner a's, learner b's)."""

    name: str
    rate: str
    compared: int
    clusters: list[Cluster]
    shown: list[Pair]
    codes: dict[str, str]
    slices: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]


def marked(code: str, slices: np.ndarray) -> str:
    """``code`` escaped, with the matched slices (starts in row 0, ends in row 1) in <mark>."""
    pieces, done = [], 0
    for start, end in zip(*slices.astype(int).tolist(), strict=True):
        start, end = max(start, done), min(end, len(code))
        if start >= end:
            continue
        pieces += [escape(code[done:start]), "<mark>", escape(code[start:end]), "</mark>"]
        done = end
    pieces.append(escape(code[done:]))
    return "".join(pieces)


def _anchor(lesson: str, pair: Pair) -> str:
    return escape(f"{lesson}-{pair.student_a}-{pair.student_b}")


def _clusters(view: LessonView) -> list[str]:
    if not view.clusters:
        return ["<p>No pair is flagged.</p>"]
    learners = sum(len(cluster.students) for cluster in view.clusters)
    parts = [
        f"<h3>{len(view.clusters)} cluster(s) of flagged learners, {learners} learner(s)</h3>",
        "<table class='clusters'><tr><th>learners</th><th>flagged pairs</th><th>highest</th></tr>",
    ]
    for cluster in view.clusters:
        links = ", ".join(
            f"<a href='#{_anchor(view.name, p)}'>{escape(p.student_a)} and {escape(p.student_b)} "
            f"({p.similarity:.0%})</a>"
            for p in cluster.pairs
        )
        parts.append(
            f"<tr class='flagged'><td>{escape(', '.join(cluster.students))}</td>"
            f"<td>{len(cluster.pairs)}: {links}</td><td>{cluster.highest:.0%}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _shared(pair: Pair) -> str:
    if not pair.shared:
        return "<p>No line of one is matched in the other but for the template's.</p>"
    rows = "".join(f"<tr><td>{escape(a)}</td><td>{escape(b)}</td></tr>" for a, b in pair.shared)
    return (
        f"<p>{len(pair.shared)} line(s) shared that the released notebook and the reference do not "
        "have (the same shape, names aside):</p><table class='shared'>"
        f"<tr><th>{escape(pair.student_a)}</th><th>{escape(pair.student_b)}</th></tr>{rows}</table>"
    )


def _pairs(view: LessonView) -> list[str]:
    parts = [
        "<h3>Most similar pairs</h3>",
        "<table class='pairs'><tr><th>learner</th><th>learner</th><th>similarity</th>"
        "<th>lines shared</th></tr>",
    ]
    for pair in view.shown:
        parts.append(
            f"<tr class='{'flagged' if pair.flagged else ''}'>"
            f"<td><a href='#{_anchor(view.name, pair)}'>{escape(pair.student_a)}</a></td>"
            f"<td>{escape(pair.student_b)}</td>"
            f"<td>{pair.similarity:.0%}{' flagged' if pair.flagged else ''}</td>"
            f"<td>{len(pair.shared)}</td></tr>"
        )
    parts.append("</table>")
    for pair in view.shown:
        slices_a, slices_b = view.slices[pair.student_a, pair.student_b]
        parts.append(
            f"<details id='{_anchor(view.name, pair)}'{' open' if pair.flagged else ''}><summary>"
            f"{escape(pair.student_a)} and {escape(pair.student_b)}: {pair.similarity:.0%}</summary>"
            f"{_shared(pair)}<div class='side'>"
        )
        for student, matched in ((pair.student_a, slices_a), (pair.student_b, slices_b)):
            code = marked(view.codes[student], matched)
            parts.append(f"<div><h4>{escape(student)}</h4><pre><code>{code}</code></pre></div>")
        parts.append("</div></details>")
    return parts


def page(views: list[LessonView]) -> str:
    """The whole page, lesson by lesson."""
    parts = [
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">',
        f"<title>Similar solutions</title><style>{STYLE}</style></head><body>",
        "<h1>Similar solutions</h1>",
        "<p>Pairs of learners whose code for a lesson is alike, after names, comments, the released "
        "stubs and the reference are set aside. A flagged pair asks a person to look: it is not a "
        "verdict, and no grade depends on it. Learners joined by flagged pairs are one cluster; each "
        "pair shows the lines the two share, then both learners' code, the matched code marked.</p>",
    ]
    for view in views:
        flagged = sum(pair.flagged for pair in view.shown)
        parts += [
            f"<h2>{escape(view.name)}</h2>",
            f"<p>{view.compared:,} pairs compared, {flagged} flagged.</p>",
            f"<p class='rate'>{escape(view.rate)}</p>",
            *_clusters(view),
        ]
        if view.shown:
            parts += _pairs(view)
    parts.append("</body></html>\n")
    return "\n".join(parts)
