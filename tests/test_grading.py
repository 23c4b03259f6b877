"""The grading table of every lesson is read from its test cells (autograder/grading.py)."""

import pytest

from autograder import grading, lessons


@pytest.mark.parametrize("lesson", lessons.written_lessons())
def test_every_exercise_has_visible_checks_and_hidden_tests(lesson):
    table = grading.table(lesson)
    assert len({test.grade_id for test in table}) == len(table)
    for exercise in lessons.EXERCISES[lesson]:
        tests = [test for test in table if test.exercise == exercise]
        assert tests, f"{lesson}: {exercise} has no test cell"
        assert all(test.points > 0 and test.visible for test in tests), tests
        assert any(test.hidden for test in tests), f"{lesson}: {exercise} has no hidden tests"
        assert all("HIDDEN TESTS" not in test.visible + test.hidden for test in tests)


def test_the_points_are_the_notebooks_points():
    table = grading.table("05_multi_head")
    assert [(t.grade_id, t.exercise, t.points) for t in table[:2]] == [
        ("test_split_heads", "split_heads", 2.0),
        ("test_split_heads_blocks", "split_heads", 1.0),
    ]
    assert table[0].visible == "checks.check_split_heads(split_heads)"
    assert table[0].hidden.endswith("hidden_split_heads(split_heads)")
    assert table[1].hidden == ""


def test_a_test_cell_that_names_no_exercise_is_refused():
    with pytest.raises(ValueError, match="test_attention_values names no exercise"):
        grading.exercise_of("03_attention", "test_attention_values")
