"""How long the similarity report takes for a generated class of 200 learners on lessons 05 and 10
(tests/similarity_class.py), and how many pairs it compares. Run:
`.venv/bin/python -m tests.benchmarks.bench_similarity`."""

import tempfile
import time
from pathlib import Path

from autograder.instructor.similarity import similarity
from tests import similarity_class

LEARNERS = 200


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        similarity_class.write_workspace(workspace, similarity_class.independent_class(LEARNERS, seed=0))
        start = time.perf_counter()
        report = similarity(workspace)
        seconds = time.perf_counter() - start
        print(
            f"{LEARNERS} learners, lessons {', '.join(similarity_class.LESSONS)}: {len(report.pairs)} pairs "
            f"compared in {seconds:.1f} s ({len(report.flagged)} flagged at {report.threshold}); "
            f"page {report.page.stat().st_size // 1024} KiB, table {report.table.stat().st_size // 1024} KiB"
        )


if __name__ == "__main__":
    main()
