"""End to end: the instructor's pipeline on the bundled sample submissions.

Runs `python -m autograder demo` once into a scratch workspace and asserts the exact
score of every graded cell of every sample, the problems reported, the hints in the
feedback, and grades.csv.
"""

import csv
import html
import re
import subprocess
import sys

import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder import lessons
from autograder.authoring.samples import MISTAKE_EDITS, SAMPLES
from autograder.engine import cpp_cache
from autograder.engine.nbgrader_config import COURSE_ID

SAMPLE_LESSONS = sorted({p.name for p in SAMPLES.glob("*/*") if p.is_dir()}, key=lessons.LESSON_NAMES.index)

# ben's typical mistakes: the test cells they fail (every other cell scores full points),
# and the hint each failure must carry in the feedback.
BEN_FAILS = {
    "01_embedding": {
        "cells": ["test_Embedding_values"],
        "hints": ["no sqrt(d_model) scale. The looked-up vectors are not scaled"],
    },
    "02_positional_encoding": {
        "cells": [
            "test_sinusoidal_encoding_values",
            "test_PositionalEncoding_buffer",
            "test_PositionalEncoding_values",
            "test_PositionalEncoding_dropout",
        ],
        "hints": ["sin and cos swapped. The even columns hold cos and the odd columns sin"],
    },
    "03_attention": {
        "cells": [
            "test_scaled_dot_product_attention_values",
            "test_scaled_dot_product_attention_mask",
            "test_scaled_dot_product_attention_fully_masked",
        ],
        "hints": ["no scaling. The scores are not scaled: divide q kᵀ by sqrt(d_k) before the softmax."],
    },
    "04_masking": {
        "cells": ["test_decoder_mask_values"],
        "hints": ["OR instead of AND. Your mask lets a query attend where either mask allows it (|)."],
    },
    "05_multi_head": {
        "cells": [
            "test_split_heads",
            "test_split_heads_blocks",
            "test_MultiHeadAttention_cross_attention",
            "test_MultiHeadAttention_mask",
            "test_MultiHeadAttention_attn",
        ],
        "hints": ["view straight to [B, h, T, d_k].", "heads split without transpose."],
    },
    "06_layer_norm": {
        "cells": ["test_LayerNorm_matches_torch", "test_LayerNorm_statistics", "test_LayerNorm_large_mean"],
        "hints": ["unbiased variance. The variance is divided by D - 1"],
    },
    "07_feed_forward": {
        "cells": ["test_PositionwiseFeedForward_relu", "test_PositionwiseFeedForward_gelu"],
        "hints": ["no activation. There is no non-linearity between linear1 and linear2"],
    },
    "08_encoder_decoder": {
        "cells": ["test_EncoderLayer_post_ln", "test_EncoderLayer_mask", "test_Encoder_values"],
        "hints": [
            "no residual connection around the feed-forward network.",
            "Make EncoderLayer pass its own checks",
        ],
    },
    "09_output_layer": {
        "cells": [
            "test_Generator_values",
            "test_Generator_large_logits",
            "test_greedy_decode_values",
            "test_greedy_decode_end_symbol",
        ],
        "hints": ["softmax instead of log_softmax.", "next token read from the first position."],
    },
    # train_step and train_loop call ben's own sequence_loss, so they fail too, and say where to look
    "10_training": {
        "cells": [
            "test_sequence_loss_values",
            "test_sequence_loss_smoothing",
            "test_train_step",
            "test_train_loop_steps",
            "test_train_loop_clip",
        ],
        "hints": ["padding not ignored.", "the fault is in your sequence_loss"],
    },
    "11_efficiency": {
        "cells": ["test_cached_greedy_decode_values", "test_cached_greedy_decode_end_symbol"],
        "hints": ["position 0 at every step."],
    },
    "12_libtorch": {
        "cells": ["test_CppMultiHeadAttention_cross_attention", "test_CppMultiHeadAttention_mask"],
        "hints": ["heads split with view, without transpose. x.view({B, h, T, d_k}) cuts the sequence"],
    },
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("demo")
    result = subprocess.run(
        [sys.executable, "-m", "autograder", "demo", "--into", str(workspace)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return workspace, result.stdout


def _test_points(lesson: str) -> dict[str, float]:
    source = nbformat.read(lessons.source_path(lesson), as_version=4)
    return {
        c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"]
        for c in source.cells
        if c.metadata.nbgrader.get("grade")
    }


def _cell_scores(workspace, student: str, lesson: str) -> dict[str, float]:
    notebook = lessons.notebook_name(lesson).removesuffix(".ipynb")
    with Gradebook(f"sqlite:///{workspace / 'gradebook.db'}", course_id=COURSE_ID) as gb:
        submission = gb.find_submission_notebook(notebook, lesson, student)
        return {grade.name: grade.score for grade in submission.grades}


def _expected(student: str, lesson: str) -> dict[str, float]:
    points = _test_points(lesson)
    if student == "cho":
        return dict.fromkeys(points, 0.0)
    if student == "ben":
        return {cell: 0.0 if cell in BEN_FAILS[lesson]["cells"] else p for cell, p in points.items()}
    return points


GRADED = (
    [(s, lesson) for s in ("ada", "ben", "cho") for lesson in SAMPLE_LESSONS]
    + [
        ("dev", "03_attention"),
        ("fay", "03_attention"),
    ]
    + ([("eve", "01_embedding")] if "01_embedding" in SAMPLE_LESSONS else [])
)


def test_every_lesson_with_samples_has_ben_mistakes():
    assert set(BEN_FAILS) == set(MISTAKE_EDITS) == set(SAMPLE_LESSONS)


@pytest.mark.parametrize(("student", "lesson"), GRADED)
def test_every_cell_scores_exactly_as_expected(demo, student, lesson):
    workspace, _ = demo
    assert _cell_scores(workspace, student, lesson) == _expected(student, lesson)


def test_corrupt_notebook_is_reported_and_the_rest_still_graded(demo):
    workspace, output = demo
    assert "eve / 03_attention: attention.ipynb is not a valid notebook (NotJSONError" in output
    assert not (workspace / "autograded" / "eve" / "03_attention").exists()
    problems = list(csv.reader((workspace / "problems.csv").open()))
    assert [
        "dev",
        "03_attention",
        "deleted test cells restored and graded: test_scaled_dot_product_attention_mask",
    ] in (problems)


def test_the_judge_agrees_with_every_honest_notebook(demo):
    """The samples' mistakes are honest ones: the independent judge fails exactly the cells the
    notebook failed (the scores above), so nobody is suspected of tampering."""
    workspace, _ = demo
    problems = list(csv.reader((workspace / "problems.csv").open()))
    assert [row for row in problems if row[2].startswith("tampering suspected")] == []


@pytest.mark.parametrize("lesson", SAMPLE_LESSONS)
def test_feedback_names_each_typical_mistake(demo, lesson):
    workspace, _ = demo
    page = html.unescape(
        (workspace / "feedback" / "ben" / lesson / lessons.notebook_name(lesson))
        .with_suffix(".html")
        .read_text()
    )
    for hint in BEN_FAILS[lesson]["hints"]:
        assert hint in " ".join(page.split()), f"feedback for ben/{lesson} lacks the hint {hint!r}"
    assert "BEGIN HIDDEN TESTS" not in page and "autograder.hidden" not in page


def test_grades_csv_has_a_row_per_submission_and_totals(demo):
    workspace, output = demo
    rows = list(csv.DictReader((workspace / "grades.csv").open()))
    graded = {(r["student"], r["lesson"]) for r in rows if r["lesson"] != "TOTAL"}
    assert graded == set(GRADED)
    ada_total = next(r for r in rows if r["student"] == "ada" and r["lesson"] == "TOTAL")
    assert (
        float(ada_total["score"])
        == float(ada_total["max_score"])
        == sum(sum(_test_points(lesson).values()) for lesson in SAMPLE_LESSONS)
    )
    assert "Scores (student x lesson)" in output and "s per notebook" in output


def test_the_demo_runs_the_instructors_week_on_the_sample_course(demo):
    workspace, output = demo
    rows = {(r["student"], r["lesson"]): r for r in csv.DictReader((workspace / "grades.csv").open())}
    # autograder/sample_course: ben is one second late in 02 (1 day, 10%), and 24 h 31 min late in 04
    # across the night the clocks go back (2 days, 20%); ada is on time; dev's time is the files' own
    assert (
        rows["ben", "02_positional_encoding"]["days_late"],
        rows["ben", "02_positional_encoding"]["after_late"],
    ) == (
        "1",
        f"{float(rows['ben', '02_positional_encoding']['score']) * 0.9:g}",
    )
    assert (
        rows["ben", "04_masking"]["days_late"] == "2"
        and "(timestamp.txt)" in rows["ben", "04_masking"]["handed_in"]
    )
    assert rows["ada", "TOTAL"]["after_late"] == rows["ada", "TOTAL"]["score"]
    assert (
        rows["dev", "03_attention"]["after_late"] == rows["dev", "03_attention"]["score"]
    )  # never on files' time
    canvas = (workspace / "canvas.csv").read_text(encoding="utf-8")
    assert canvas.splitlines()[1].startswith("    Points Possible") and '"Okafor, Benjamin ""Ben"""' in canvas
    assert "Ева Смирнова" in (workspace / "moodle.csv").read_text(encoding="utf-8")
    assert "no scaling" in (workspace / "insights" / "index.html").read_text()
    assert (workspace / "insights" / "insights.csv").is_file() and (
        workspace / "similarity" / "similarity.csv"
    ).is_file()
    assert "ben,03_attention" in (workspace / "regrades.csv").read_text()
    for shown in ("canvas.csv (Canvas)", "Insights:", "Similarity:", "Regrade:  ben / 03_attention"):
        assert shown in output
    # lesson 12's trusted header and binding object are made at release, so grading builds only units
    assert "the grader's C++ header and binding object made in" in output
    [header_line] = (
        (cpp_cache.records(cpp_cache.shared_cache(workspace)) / cpp_cache.PCH_LOG).read_text().splitlines()
    )
    assert re.search(" (built|linked from .+) in ", header_line)
