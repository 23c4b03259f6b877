"""Hidden tests for lesson 07: the learner's PositionwiseFeedForward against the reference."""

import math

import torch

from autograder.checks import feed_forward as checks
from autograder.checks.answers import answer
from autograder.checks.core import load_weights
from autograder.checks.device import DEVICE, DTYPE
from autograder.hidden.core import Fresh, replayable
from solutions.feed_forward import PositionwiseFeedForward as Reference


@replayable
def hidden_feed_forward(fresh: Fresh, cls, activation: str, trials: int = 3) -> None:
    """Fresh sizes (B, T >= 2, d_ff both 4 * D and not) and fresh weights, for one activation; then
    the module called again, and built with dropout > 0 in eval mode, on the same input."""
    for trial in range(trials):
        d_model = fresh.size(2, 16)
        d_ff = 4 * d_model if trial == 0 else fresh.size(2, 40)
        # building modules draws initial weights: keep the notebook's own random state as it was
        with torch.random.fork_rng(devices=[]):
            reference = Reference(d_model, d_ff, activation=activation)
            learner = checks.build_with(cls, d_model, d_ff, activation)
        reference = reference.to(device=DEVICE, dtype=DTYPE).eval()
        with torch.no_grad():
            for parameter in reference.parameters():
                scale = 1 / math.sqrt(parameter.size(-1)) if parameter.dim() == 2 else 0.5
                parameter.copy_(scale * fresh.tensor(*parameter.shape))
        load_weights(checks.EXERCISE, learner, reference.state_dict())
        x = fresh.tensor(fresh.size(2, 4), fresh.size(2, 7), d_model) * fresh.size(1, 3)
        expected = answer(reference, x)
        checks.compare(learner, activation, x, expected)
        checks.expect_steady(learner, cls, activation, reference.state_dict(), x, expected)


def hidden_bad_activation(cls) -> None:
    """Other activation names raise ValueError."""
    with torch.random.fork_rng(devices=[]):  # leave the notebook's random state alone
        for name in ("tanh", "sigmoid", "swish", "elu", "leaky_relu"):
            checks.expect_value_error(cls, name)
