"""The class insights as one offline page: it opens from disk, loads nothing and runs nothing.

Per lesson: a table of its test cells with their pass rates, the learners who did not attempt
each and those whose failure no catalogued mistake names; a bar chart and a table of the
catalogued mistakes the class hit, each with the catalogue's hint (what to tell the class); the
learners whose answers pass the visible checks and fail the hidden tests; a histogram of the
scores; and the cells a grader scored by hand. The figures are matplotlib PNGs in the page
itself (data: URIs), drawn on matplotlib's Agg canvas through ``Figure`` objects, so that no
global state of pyplot changes for anyone else in the process. Every name on the page (lessons,
exercises, test cells, learners, mistakes, hints, why a grading failed) is HTML-escaped, and the
page's Content-Security-Policy forbids scripts.
"""

import base64
import html
import io
import statistics

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from autograder.instructor.insights_data import LessonInsights

# What the page may load and run: no script, its own inline styles, data: images.
POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
BAR_COLOUR, HIST_COLOUR = "#c0504d", "#4f81bd"
DPI = 100
STYLE = """
body { font-family: "Helvetica Neue", Helvetica, Arial, "DejaVu Sans", sans-serif; margin: 1.5em 2em;
       max-width: 1100px; color: #1d2329; }
h2 { border-bottom: 2px solid #cfd4da; padding-bottom: 0.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.6em 0 1em; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #cfd4da; padding: 0.3em 0.7em; text-align: left; vertical-align: top; }
th { background: #f1f3f5; }
td.number { text-align: right; }
.bar { display: inline-block; height: 0.8em; background: #4f81bd; vertical-align: middle; }
.track { display: inline-block; width: 120px; background: #e9ecef; margin-right: 0.5em; }
.low .bar { background: #c0504d; }
.quiet { color: #5c6670; }
img { max-width: 100%; }
code { font-family: Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 0.92em; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _png(figure: Figure) -> str:
    """The figure as a data: URI of a PNG, drawn on the Agg canvas."""
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def mistakes_figure(found: LessonInsights) -> str:
    """A horizontal bar per catalogued mistake: the learners who hit it, the most frequent on top."""
    counts = found.mistake_counts()
    figure = Figure(figsize=(8, 0.8 + 0.3 * len(counts)))
    axes = figure.subplots()
    labels = [f"{exercise}: {mistake}" for exercise, mistake, _ in counts]
    positions = range(len(counts))
    axes.barh(positions, [count for *_, count in counts], height=0.6, color=BAR_COLOUR)
    axes.set_yticks(positions, labels, parse_math=False)  # a "$" in a name is no formula
    axes.invert_yaxis()
    axes.set_xlim(0, max(found.graded, 1))
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_xlabel(f"learners (of {found.graded} graded)")
    axes.spines[["top", "right"]].set_visible(False)
    return _png(figure)


def scores_figure(found: LessonInsights) -> str:
    """A histogram of the learners' points in the lesson: a bar per whole point (a score between
    two goes to the nearer), or 20 bars from 0 to the lesson's points when it has more than 30."""
    most = found.max_score
    if most <= 30:
        edges = [point - 0.5 for point in range(int(most) + 2)]
    else:
        edges = [most * i / 20 for i in range(21)]
    figure = Figure(figsize=(6, 2.2))
    axes = figure.subplots()
    axes.hist([score for score, _ in found.scores.values()], bins=edges, color=HIST_COLOUR, edgecolor="white")
    axes.set_xlabel(f"points (of {most:g})")
    axes.set_ylabel("learners")
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.spines[["top", "right"]].set_visible(False)
    return _png(figure)


def _rate(passed: int, graded: int) -> str:
    share = passed / graded if graded else 0.0
    low = " low" if share < 0.5 else ""
    return (
        f'<span class="track{low}"><span class="bar" style="width: {share * 100:.0f}%"></span></span>'
        f"{share:.0%}"
    )


def _names(students: list[str]) -> str:
    """Learners' names, folded away when there are many."""
    names = ", ".join(_e(student) for student in students)
    if len(students) <= 8:
        return names
    return f"<details><summary>{len(students)} learners</summary>{names}</details>"


def _summary(found: LessonInsights) -> str:
    scores = [score for score, _ in found.scores.values()]
    parts = [f"{found.graded} learners graded"]
    if scores:
        parts.append(
            f"points: mean {statistics.mean(scores):.1f}, median {statistics.median(scores):g} "
            f"of {found.max_score:g}"
        )
    text = "; ".join(parts) + "."
    if found.failed:
        failed = "".join(f"<li>{_e(student)}: {_e(why)}</li>" for student, why in found.failed.items())
        listed = f"<ul>{failed}</ul>"
        if len(found.failed) > 8:
            listed = f"<details><summary>who, and why</summary>{listed}</details>"
        text += f" <strong>{len(found.failed)} grading(s) failed</strong> and are in no other count:{listed}"
    return f"<p>{text}</p>"


def _counted(students: list[str]) -> str:
    """How many learners, and who (folded away when there are many); empty for none."""
    return f"{len(students)}: {_names(students)}" if students else ""


def _cells(found: LessonInsights) -> str:
    rows = "".join(
        f"<tr><td><code>{_e(c.exercise)}</code></td><td><code>{_e(c.grade_id)}</code></td>"
        f'<td class="number">{c.passed} of {c.graded}</td><td>{_rate(c.passed, c.graded)}</td>'
        f"<td>{_counted(found.unwritten.get(c.grade_id, []))}</td>"
        f"<td>{_counted(found.unexplained.get(c.grade_id, []))}</td></tr>"
        for c in found.cells
    )
    return (
        "<h3>Test cells</h3><p class='quiet'>A cell passes when it got all its points. Not attempted: "
        "the learner's stub still raised NotImplementedError there. No named mistake: written code "
        "that failed with no catalogued mistake named, which the catalogue does not explain yet.</p>"
        "<table><tr><th>exercise</th><th>test cell</th><th>passed</th><th>pass rate</th>"
        "<th>not attempted</th><th>failed, no named mistake</th></tr>"
        f"{rows}</table>"
    )


def _mistakes(found: LessonInsights) -> str:
    counts = found.mistake_counts()
    if not counts:
        return "<h3>Catalogued mistakes</h3><p>No check named a catalogued mistake.</p>"
    rows = "".join(
        f"<tr><td><code>{_e(exercise)}</code></td><td>{_e(mistake)}</td>"
        f'<td class="number">{count}</td><td>{_hint(found.hints.get((exercise, mistake), ""))}</td>'
        f"<td>{_names(found.mistakes[exercise][mistake])}</td></tr>"
        for exercise, mistake, count in counts
    )
    return (
        "<h3>Catalogued mistakes</h3><p class='quiet'>Learners whose checks named each mistake "
        "(a learner counts once per exercise), and the catalogue's hint: what to tell the class.</p>"
        f'<img alt="A bar per catalogued mistake: the learners who hit it" src="{mistakes_figure(found)}">'
        "<table><tr><th>exercise</th><th>mistake</th><th>learners</th><th>what to say</th><th>who</th></tr>"
        f"{rows}</table>"
    )


def _hint(text: str) -> str:
    return _e(text) if text else "<span class='quiet'>(no longer in the catalogue)</span>"


def _manual(found: LessonInsights) -> str:
    if not found.manual:
        return ""
    rows = "".join(
        f"<tr><td>{_e(m.student)}</td><td><code>{_e(m.grade_id)}</code></td>"
        f'<td class="number">{m.score:g} of {m.max_score:g}</td>'
        f'<td class="number">{"" if m.auto is None else f"{m.auto:g}"}</td></tr>'
        for m in found.manual
    )
    return (
        "<h3>Scored by hand</h3><p class='quiet'>Cells a grader scored in the Formgrader: the manual "
        "score replaces the autograded one in the learner's points (the scores above are as graded).</p>"
        "<table><tr><th>learner</th><th>cell</th><th>manual score</th><th>autograded</th></tr>"
        f"{rows}</table>"
    )


def _visible_only(found: LessonInsights) -> str:
    head = "<h3>Visible checks passed, hidden tests failed</h3>"
    if not found.visible_only:
        return head + "<p>Nobody: every answer that passed the visible checks passed the hidden tests.</p>"
    rows = []
    for exercise, students in sorted(found.visible_only.items()):
        cells = "<br>".join(f"<code>{_e(cell)}</code>" for cell in sorted(set().union(*students.values())))
        rows.append(
            f"<tr><td><code>{_e(exercise)}</code></td><td>{cells}</td>"
            f'<td class="number">{len(students)}</td><td>{_names(sorted(students))}</td></tr>'
        )
    return (
        head + "<p class='quiet'>Answers that fit the visible checks' inputs only (their sizes, their "
        "values): worth a look, and perhaps a hint for the lesson's text.</p>"
        "<table><tr><th>exercise</th><th>test cells</th><th>learners</th><th>who</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _scores(found: LessonInsights) -> str:
    if not found.scores:
        return ""
    return f'<h3>Scores</h3><img alt="A histogram of the learners\' points" src="{scores_figure(found)}">'


def _overview(lessons: list[LessonInsights]) -> str:
    rows = []
    for found in lessons:
        scores = [score for score, _ in found.scores.values()]
        mean = f"{statistics.mean(scores):.1f} of {found.max_score:g}" if scores else ""
        top = found.mistake_counts()[:1]
        common = f"{_e(top[0][1])} ({top[0][2]})" if top else ""
        fitted = len({student for students in found.visible_only.values() for student in students})
        rows.append(
            f'<tr><td><a href="#{_e(found.lesson)}">{_e(found.lesson)}</a></td>'
            f'<td class="number">{found.graded}</td><td class="number">{len(found.failed)}</td>'
            f'<td class="number">{mean}</td><td>{common}</td><td class="number">{fitted}</td></tr>'
        )
    return (
        "<table><tr><th>lesson</th><th>graded</th><th>failed gradings</th><th>mean points</th>"
        "<th>most common mistake (learners)</th><th>visible checks only</th></tr>"
        f"{''.join(rows)}</table>"
    )


def page(lessons: list[LessonInsights], csv_name: str) -> str:
    """The whole page: an overview of the lessons, then a section per lesson."""
    sections = "".join(
        f'<section id="{_e(found.lesson)}"><h2>{_e(found.lesson)}</h2>{_summary(found)}{_cells(found)}'
        f"{_mistakes(found)}{_visible_only(found)}{_scores(found)}{_manual(found)}</section>"
        for found in lessons
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>\n"
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">\n'
        f"<title>Class insights</title><style>{STYLE}</style></head><body>\n"
        "<h1>Class insights</h1><p>What the class did, from the verdicts grading recorded. "
        f'The same numbers for a spreadsheet: <a href="{_e(csv_name)}">{_e(csv_name)}</a>.</p>'
        f"{_overview(lessons)}{sections}\n</body></html>\n"
    )
