"""Deleted test cells come back where they belong, whatever stands before them.

nbgrader 0.9.6 (``OverwriteCells.add_missing_cells``) puts a deleted grade cell back after
the cell right before it in the source, and looks that cell up among the submission's
solution and grade cells only. When the cell before it is a markdown cell (as before every
lesson's first test cell), grading stops with a ``KeyError`` naming that markdown cell, and
the learner scores 0 for having deleted one check by accident. The cell it puts back also
has no id, which nbformat 4.5 requires.
"""

from nbgrader.preprocessors import OverwriteCells


class RestoringOverwriteCells(OverwriteCells):
    """``OverwriteCells`` that puts each missing grade cell after the nearest cell before it
    in the source that the submission still has (at the top when there is none)."""

    def add_missing_grade_cells(self, nb, resources):
        source = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        order = [cell.name for cell in source.source_cells]
        cells = {cell.name: cell for cell in source.source_cells}
        solutions = {cell.name for cell in source.solution_cells}
        for grade_cell in sorted(source.grade_cells, key=lambda cell: order.index(cell.name)):
            present = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells]
            if grade_cell.name in present:
                continue
            self.log.warning(f"Missing grade cell {grade_cell.name} encountered, adding to notebook")
            restored = self.missing_cell_transform(
                cells[grade_cell.name], grade_cell.max_score, is_solution=grade_cell.name in solutions
            )
            restored["id"] = f"restored-{grade_cell.name}"[:64]  # nbformat 4.5 wants every cell to have one
            before = order[: order.index(grade_cell.name)]
            anchor = next((present.index(name) for name in reversed(before) if name in present), -1)
            nb.cells.insert(anchor + 1, restored)
        return nb, resources
