"""Hostile submissions that cost the grader time, disk or memory: every step that processes a
submission's output is bounded per submission (issue 31, Deliver 7).

Each attack is shown succeeding without its defence (the cap set off, or a stand-in that lacks
it) and then failing with it. The caps here are small (MiB and seconds, not the defaults' GiB),
so that each case runs in seconds.
"""

import threading
import time

from bs4 import BeautifulSoup

from autograder.engine import feedback_page
from autograder.engine.feedback_page import MATH_NOTICE_ID, MathCaps, Typesetter, offline_page

# One formula that expands itself until MathJax's macro limit: 2 to 3 ms and 0.9 KiB of SVG each.
# 41,000 of them (580 KB of a submission's output) took 109 s here and made a 36.8 MiB page.
BOMB = "$\\def\\a{\\a}\\a$ "
HONEST = "$x^2 + \\frac{a}{b}$ "  # 3.6 KiB of SVG each
NO_CAPS = MathCaps(formulas=10**9, seconds=10**6, svg_mib=10**6, text_mib=10**6)
# A Node.js process that starts as typeset_math.cjs does, then never answers.
NEVER_ANSWERS = (
    "process.stdout.write(JSON.stringify({css: ''}) + '\\n');\nprocess.stdin.on('data', () => {});\n"
)


def _page(body: str) -> str:
    return f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>\n<p>{body}</p>\n</body></html>'


def _offline(page: str, caps: MathCaps) -> tuple[str, float]:
    """The page made offline by a typesetter of its own with ``caps``, and the seconds it took."""
    with Typesetter(caps) as typesetter:
        start = time.perf_counter()
        html = offline_page(page, typesetter)
        return html, time.perf_counter() - start


def _notice(html: str) -> str:
    soup = BeautifulSoup(html, "html.parser")
    notice = soup.find(id=MATH_NOTICE_ID)
    assert notice is not None and soup.body.find(True) is notice, "the notice comes first in the body"
    return notice.get_text()


def test_a_page_of_recursive_macros_is_shown_as_tex_and_says_why():
    page = _page(BOMB * 2100)
    uncapped, uncapped_s = _offline(page, NO_CAPS)
    assert uncapped.count("<svg") == 2100 and len(uncapped) > 1.5 * 2**20  # the attack: seconds, MiB
    capped, capped_s = _offline(page, MathCaps())
    assert "<svg" not in capped and len(capped) < len(page) + 50_000
    assert _notice(capped) == (
        "The formulas on this page are shown as their TeX source, not typeset: "
        "it holds 2,100 formulas, over the cap of 2,000."
    )
    assert capped.count(BOMB) == 2100  # the TeX, as the page's text
    assert capped_s < uncapped_s / 4, (capped_s, uncapped_s)


def test_typesetting_stops_at_the_time_cap():
    page = _page(BOMB * 600)  # under the cap on formulas
    uncapped, _ = _offline(page, MathCaps(seconds=10**6))
    assert uncapped.count("<svg") == 600
    capped, capped_s = _offline(page, MathCaps(seconds=0.3))
    assert "<svg" not in capped and capped_s < 3, capped_s
    assert _notice(capped).endswith("not typeset: typesetting them took more than 0.3 s.")


def test_typesetting_stops_at_the_size_cap():
    page = _page(HONEST * 400)  # 1.4 MiB typeset: a lesson's page holds up to 216 formulas, 0.6 MiB
    uncapped, _ = _offline(page, MathCaps())
    assert uncapped.count("<svg") == 400 and len(uncapped) > 2**20 and MATH_NOTICE_ID not in uncapped
    capped, _ = _offline(page, MathCaps(svg_mib=1))
    assert "<svg" not in capped and _notice(capped).endswith("typeset, they came to more than 1 MiB.")
    text, _ = _offline(page, MathCaps(text_mib=0.005))
    assert "<svg" not in text and _notice(text).endswith("to search, over the cap of 0.005 MiB.")


def _wait_for(typesetter: Typesetter, ended: list[BaseException]) -> None:
    try:
        offline_page(_page("$x$"), typesetter)
    except RuntimeError as error:
        ended.append(error)


def test_a_page_whose_typesetting_never_ends_costs_its_time_cap_and_the_next_page_is_typeset(
    tmp_path, monkeypatch
):
    script = feedback_page.SCRIPT
    stand_in = tmp_path / "never_answers.cjs"
    stand_in.write_text(NEVER_ANSWERS)
    monkeypatch.setattr(feedback_page, "SCRIPT", stand_in)
    # without the cap: the grader waits as long as the Node.js process does
    with Typesetter(NO_CAPS) as typesetter:
        ended: list[BaseException] = []
        waiting = threading.Thread(target=_wait_for, args=(typesetter, ended), daemon=True)
        waiting.start()
        waiting.join(timeout=3)
        assert waiting.is_alive()
        typesetter._process.kill()  # what lets the thread end, with the error of a stopped process
        waiting.join(timeout=30)
        assert "stopped" in str(ended[0])
    monkeypatch.setattr(feedback_page, "GRACE_S", 0.5)
    with Typesetter(MathCaps(seconds=0.5)) as typesetter:
        start = time.perf_counter()
        hung = offline_page(_page("$x$"), typesetter)
        assert time.perf_counter() - start < 5
        assert _notice(hung).endswith("typesetting them took more than 0.5 s.") and "<svg" not in hung
        assert not typesetter.running  # ended: its next page gets a new process
        monkeypatch.setattr(feedback_page, "SCRIPT", script)
        assert offline_page(_page("$y$"), typesetter).count("<svg") == 1
        assert typesetter.running
