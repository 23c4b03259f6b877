"""Hidden tests for lesson 06: the learner's LayerNorm against the reference on fresh inputs."""

import torch

from autograder.checks import layer_norm as checks
from autograder.checks.answers import answer
from autograder.checks.device import DEVICE, DTYPE
from autograder.hidden.core import Fresh, replayable
from solutions.layer_norm import LayerNorm as Reference


def _reference(d_model: int, eps: float, fresh: Fresh) -> Reference:
    """The reference LayerNorm with a random gamma (around 1) and beta."""
    reference = Reference(d_model, eps=eps).to(device=DEVICE, dtype=DTYPE)
    with torch.no_grad():
        reference.gamma.copy_(1.0 + 0.5 * fresh.tensor(d_model))
        reference.beta.copy_(fresh.tensor(d_model))
    return reference


@replayable
def hidden_layer_norm(fresh: Fresh, cls, shifted: bool, trials: int = 3) -> None:
    """Fresh shapes ([B, T, D] with B, T >= 2, and one [B, h, T, D]) and a fresh eps; with
    ``shifted``, rows with a large mean and a small spread."""
    for trial in range(trials):
        d_model = fresh.size(3, 24)
        shape = (fresh.size(2, 4), fresh.size(2, 7), d_model)
        if trial == trials - 1:
            shape = (fresh.size(2, 3), fresh.size(2, 3), *shape[1:])
        eps = 1e-5 if trial == 0 else 10 ** -fresh.size(1, 4)
        if shifted:
            x = checks.shifted_input(shape, fresh.generator)
        else:
            x = fresh.tensor(*shape) * fresh.size(1, 5) + fresh.tensor(*shape[:-1], 1)
        reference = _reference(d_model, eps, fresh)
        with torch.random.fork_rng(devices=[]):  # leave the notebook's random state alone
            learner = checks.build_with(cls, d_model, None if eps == 1e-5 else eps, reference.state_dict())
        checks.compare(learner, x, answer(reference, x), eps, what=f"the output (eps={eps:g})")
