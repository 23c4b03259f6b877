"""Run every visible and hidden test cell of the Python exercises on a spy of the reference, and
print (as JSON) the device types of every tensor the checks handed to it: its arguments, and the
parameters and buffers of a module when its forward runs.

Run by tests/test_device_choice.py in a fresh process with COURSE_DEVICE=meta, a device no check
could compute on: any "meta" in the output is a tensor that the checks put on the lesson's device
instead of their own. ``--checks-on-the-lesson-device`` first makes the checks' device the lesson's
(the design before the checks moved to the CPU), to show that the spy sees it.

    python -m tests.device_spy [--checks-on-the-lesson-device] [EXERCISE ...]
"""

import functools
import json
import sys
from typing import Any

import torch
from torch import nn

from autograder.checks import device

if "--checks-on-the-lesson-device" in sys.argv:  # before any check module imports DEVICE
    device.DEVICE = device.LESSON_DEVICE

import solutions  # noqa: E402 - after the checks' device is chosen
from autograder import grading  # noqa: E402
from autograder.lessons import written_lessons  # noqa: E402

CPP_LESSON = "12_libtorch"  # its checks take only classes compiled from C++, not a Python spy
seen: dict[str, int] = {}


def record(*values: Any) -> None:
    """Count the device type of every tensor in ``values``, looking into containers and modules."""
    for value in values:
        if isinstance(value, torch.Tensor):
            seen[value.device.type] = seen.get(value.device.type, 0) + 1
        elif isinstance(value, nn.Module):
            record(*value.parameters(), *value.buffers())
        elif isinstance(value, dict):
            record(*value.values())
        elif isinstance(value, list | tuple):
            record(*value)


def spy(reference: Any) -> Any:
    """The reference, recording what it is handed: a function's arguments, or a module's forward
    arguments with its own parameters and buffers."""
    if isinstance(reference, type) and issubclass(reference, nn.Module):

        def forward(self, *args, **kwargs):
            record(self, args, kwargs)
            return reference.forward(self, *args, **kwargs)

        return type(reference.__name__, (reference,), {"forward": forward})

    @functools.wraps(reference)
    def recorded(*args, **kwargs):
        record(args, kwargs)
        return reference(*args, **kwargs)

    return recorded


def main(exercises: list[str]) -> None:
    failures = []
    for lesson in written_lessons():
        if lesson == CPP_LESSON:
            continue
        for test in grading.table(lesson):
            if exercises and test.exercise not in exercises:
                continue
            for code in (test.visible, test.hidden):
                if not code:
                    continue
                try:
                    grading.run(test, code, spy(getattr(solutions, test.exercise)))
                except Exception as error:  # noqa: BLE001 - reported, not raised: the devices are the point
                    failures.append(f"{test.grade_id}: {type(error).__name__}: {error}"[:300])
    print(json.dumps({"devices": seen, "failures": failures}))


if __name__ == "__main__":
    main([a for a in sys.argv[1:] if not a.startswith("--")])
