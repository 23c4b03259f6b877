"""Lesson 09's initialisation: every matrix of a freshly built Transformer has Xavier's spread.

Xavier's uniform and normal draws share one standard deviation, sqrt(2 / (fan_in + fan_out)), so
the check reads each matrix's deviation, not its distribution. PyTorch's defaults differ from it:
nn.Linear's deviation is 1 / sqrt(3 fan_in), nn.Embedding's is 1. A loop run before the last part
was created leaves that part with its default, the mistake a learner makes most.
"""

import math

import torch

from autograder.checks import core


def xavier_std(parameter: torch.Tensor) -> float:
    """The standard deviation Xavier gives a matrix, uniform or normal: sqrt(2 / (fan_in + fan_out))."""
    receptive = math.prod(parameter.shape[2:])
    return math.sqrt(2.0 / ((parameter.size(0) + parameter.size(1)) * receptive))


def not_xavier(module: torch.nn.Module) -> list[tuple[str, float, float]]:
    """(name, standard deviation, Xavier's) of each matrix whose spread is not Xavier's. The
    allowance is six standard errors of a normal sample's deviation (and at least 20%), so no
    Xavier draw of the checks' sizes falls outside it, while PyTorch's defaults do (nn.Linear's
    1/sqrt(3 fan_in) is 29% to 45% below Xavier's here, nn.Embedding's 1 far above)."""
    off = []
    for name, parameter in module.named_parameters():
        if parameter.dim() < 2:
            continue
        std, xavier = float(parameter.detach().double().std()), xavier_std(parameter)
        if abs(std / xavier - 1) > max(0.2, 6 / math.sqrt(2 * parameter.numel())):
            off.append((name, std, xavier))
    return off


def expect_xavier(exercise: str, module: torch.nn.Module) -> None:
    """Every parameter of the learner's freshly built model with more than one dimension has
    Xavier's spread: the lesson's loop ran after all six parts (the generator last) were created."""
    off = not_xavier(module)
    if not off:
        return
    name, std, xavier = off[0]
    seen = f"{name} has standard deviation {std:.3g} where Xavier gives {xavier:.3g}"
    matrices = sum(1 for parameter in module.parameters() if parameter.dim() >= 2)
    loop = (
        "initialise every parameter with more than one dimension with nn.init.xavier_uniform_, in a loop "
        "over self.parameters() at the end of __init__"
    )
    if all(name.startswith("generator.") for name, _, _ in off):
        why = (
            "the generator's matrix keeps PyTorch's default initialisation while the others are Xavier's: "
            "the Xavier loop ran before the generator was created. Create all six parts first, then " + loop
        )
    elif len(off) == matrices:
        why = f"no matrix is Xavier-initialised ({seen}): {loop}"
        seen = ""
    else:
        listed = ", ".join(name for name, _, _ in off[:4]) + (", ..." if len(off) > 4 else "")
        why = f"{len(off)} of {matrices} matrices are not Xavier-initialised ({listed}): {loop}"
    raise core.CheckFailure(f"{exercise}: " + (f"{seen}; " if seen else "") + why + ".")
