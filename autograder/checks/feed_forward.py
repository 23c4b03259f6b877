"""Checks for lesson 07: PositionwiseFeedForward(d_model, d_ff, dropout=0.0, activation="relu").

Oracle: the feed-forward part of torch.nn.TransformerEncoderLayer, linear2(activation(linear1(x))),
with its linear1 and linear2 weights copied in (the names match), for activation "relu" and
"gelu" (torch's exact, erf-based GELU). An unknown activation must raise ValueError.
Inputs: [B, T, D] = [2, 5, 8] with d_ff = 20 (not 4 * D, so a hard-coded width shows).
"""

import functools
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import core
from autograder.checks.answers import Expected, answer
from autograder.checks.device import random_tensor
from autograder.checks.eval_mode import (
    DROPOUT_ON_OUTPUT,
    EVAL_DROPOUT,
    NO_DROPOUT_IN_TRAINING,
    built_dropout,
    dropped,
    expect_dropout_in_training,
    expect_dropout_off_in_eval,
    expect_same_on_second_call,
)
from autograder.checks.oracles import feed_forward_state, torch_layer

EXERCISE = "PositionwiseFeedForward"
B, T, D, D_FF = 2, 5, 8, 20
X = "[B, T, D]"
SECOND_CALL = ", and a second call gives the same"
SIGNATURE = 'PositionwiseFeedForward(d_model, d_ff, dropout=0.0, activation="relu")'
ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


# The mistakes' outputs. ``ffn`` is the learner's module (or a stand-in holding its linear1,
# linear2 and the name of the activation it was asked for); ``x`` is the input [B, T, D].
def _activation(ffn):
    """The activation the module was asked for, as a function (a name or a function is stored)."""
    activation = ffn.activation
    return ACTIVATIONS[activation] if isinstance(activation, str) else activation


def _asked_for_gelu(ffn) -> bool:
    return ffn.activation == "gelu" or ffn.activation is F.gelu


def _train_dropout(ffn, h):
    """``h`` through the module's dropout in train mode (a stand-in holding the linears drops nothing)."""
    return F.dropout(h, built_dropout(ffn), training=getattr(ffn, "training", False))


def _ffn(ffn, x, activation):
    return ffn.linear2(_train_dropout(ffn, activation(ffn.linear1(x))))


def _undropped(ffn, x):
    return ffn.linear2(_activation(ffn)(ffn.linear1(x)))


def _tanh_gelu(ffn, x):
    if _asked_for_gelu(ffn):
        return _ffn(ffn, x, lambda h: F.gelu(h, approximate="tanh"))
    return _ffn(ffn, x, _activation(ffn))


MISTAKES = core.catalogue(
    EXERCISE,
    {
        "no activation": lambda ffn, x: ffn.linear2(_train_dropout(ffn, ffn.linear1(x))),
        "activation after linear2 too": lambda ffn, x: _activation(ffn)(_ffn(ffn, x, _activation(ffn))),
        "activation after linear2 instead of between": lambda ffn, x: _activation(ffn)(
            _ffn(ffn, x, lambda h: h)
        ),
        "activation on the input": lambda ffn, x: ffn.linear2(
            _train_dropout(ffn, ffn.linear1(_activation(ffn)(x)))
        ),
        "tanh approximation of GELU": _tanh_gelu,
        "ReLU where GELU was asked for": lambda ffn, x: _ffn(ffn, x, F.relu),
        "GELU where ReLU was asked for": lambda ffn, x: _ffn(ffn, x, F.gelu),
        "sigmoid instead of ReLU": lambda ffn, x: _ffn(ffn, x, torch.sigmoid),
        "residual added inside the feed-forward network": lambda ffn, x: x + _ffn(ffn, x, _activation(ffn)),
        "dropout also in eval mode": lambda ffn, x: _ffn(ffn, x, lambda h: dropped(ffn, _activation(ffn)(h))),
        NO_DROPOUT_IN_TRAINING: _undropped,
        DROPOUT_ON_OUTPUT: lambda ffn, x: _train_dropout(ffn, _undropped(ffn, x)),
    },
)


# --- oracle and inputs ---------------------------------------------------------------------


def torch_encoder_layer(d_model: int, d_ff: int, activation: str, seed: int) -> nn.TransformerEncoderLayer:
    """An nn.TransformerEncoderLayer (one head, float64 on DEVICE, seeded random weights) whose
    feed-forward block is the oracle; built without moving the learner's random state."""
    with torch.random.fork_rng(devices=[]):
        return torch_layer(False, d_model, 1, d_ff, activation=activation, seed=seed)


def torch_feed_forward(layer, x: torch.Tensor) -> torch.Tensor:
    """What the torch layer's feed-forward block computes (dropout is 0): linear2(act(linear1(x)))."""
    with torch.no_grad():
        return layer.linear2(layer.activation(layer.linear1(x)))


def compare(module, activation: str, x, expected: Expected) -> None:
    """The learner's module (built for ``activation``) on x against ``expected()`` (computed after
    the learner's call), naming the mistake the output matches."""
    out = core.output(EXERCISE, module, {"x": x})
    stand_in = SimpleNamespace(linear1=module.linear1, linear2=module.linear2, activation=activation)
    wrong = core.mistake_outputs(MISTAKES, stand_in, x)
    core.expect_close(EXERCISE, f"the output (activation={activation!r})", out, expected(), X, wrong)


def build_with(
    cls, d_model: int, d_ff: int, activation: str | None, state=None, dropout: float | None = None
):
    """The learner's module in float64 on DEVICE (activation None: the default; dropout None: not
    passed, so the default), ``state`` loaded."""
    kwargs = {} if activation is None else {"activation": activation}
    if dropout is not None:
        core.expect_parameter(EXERCISE, cls, "dropout", SIGNATURE)
        kwargs["dropout"] = dropout
    module = core.build(EXERCISE, cls, d_model, d_ff, **kwargs)
    if state is not None:
        core.load_weights(EXERCISE, module, state)
    return module


def expect_steady(module, cls, activation: str | None, state: dict, x, expected: Expected) -> None:
    """``module`` (the learner's, dropout 0, ``state`` loaded), whose output on x was right, called
    twice more, and the learner's module built with dropout = EVAL_DROPOUT, in eval mode, with
    ``state`` loaded, twice: every output is ``expected()``, dropout 0's (computed after the
    learner's calls); then in train mode once, where it must drop hidden units (neither nothing
    nor entries of the output). Torch's global random state is left as it was (building draws
    weights, a dropout draws masks)."""
    d_ff, d_model = state["linear1.weight"].shape
    expect_same_on_second_call(EXERCISE, functools.partial(core.output, EXERCISE, module, {"x": x}), expected)
    with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
        dropping = build_with(cls, d_model, d_ff, activation, state, dropout=EVAL_DROPOUT)
        run = functools.partial(core.output, EXERCISE, dropping, {"x": x})
        expect_dropout_off_in_eval(EXERCISE, MISTAKES, run, expected, X)
        dropping.train()
        expect_dropout_in_training(EXERCISE, MISTAKES, run, expected, EVAL_DROPOUT)


# --- the checks ----------------------------------------------------------------------------


def check_feed_forward_shapes(cls) -> None:
    """linear1: D -> d_ff and linear2: d_ff -> D (torch's names and shapes); output [B, T, D]."""
    module = build_with(cls, D, D_FF, None)
    for name, shape in (("linear1", (D_FF, D)), ("linear2", (D, D_FF))):
        how = f"create it in __init__ as self.{name} = nn.Linear(...) (the name lets torch's weights load)."
        linear = core.expect_attribute(EXERCISE, module, name, nn.Linear, "an nn.Linear", how)
        core.expect_shape(
            EXERCISE,
            f"{name}.weight",
            linear.weight,
            "[d_ff, D]" if name == "linear1" else "[D, d_ff]",
            shape,
        )
    core.load_weights(EXERCISE, module, feed_forward_state(torch_encoder_layer(D, D_FF, "relu", seed=0)))
    x = random_tensor(B, T, D, seed=1)
    out = core.output(EXERCISE, module, {"x": x})
    core.expect_output_like(EXERCISE, out, X, (B, T, D), x)
    core.passed(f"{EXERCISE} has linear1 (D -> d_ff) and linear2 (d_ff -> D) and maps {X} to {X}")


def _check_activation(cls, activation: str | None, seed: int) -> None:
    name = activation or "relu"
    layer = torch_encoder_layer(D, D_FF, name, seed=seed)
    module = build_with(cls, D, D_FF, activation, feed_forward_state(layer))
    x = random_tensor(B, T, D, seed=seed + 10, scale=2.0)
    expected = answer(torch_feed_forward, layer, x)
    compare(module, name, x, expected)
    expect_steady(module, cls, activation, feed_forward_state(layer), x, expected)


def check_feed_forward_relu(cls) -> None:
    """The default activation: equal to nn.TransformerEncoderLayer's linear2(relu(linear1(x)))."""
    _check_activation(cls, None, seed=20)
    core.passed(
        f"{EXERCISE} with the default activation='relu' equals torch's linear2(relu(linear1(x))); built "
        f"with dropout = {EVAL_DROPOUT}, it drops nothing in eval mode{SECOND_CALL}"
    )


def check_feed_forward_gelu(cls) -> None:
    """activation='gelu': equal to nn.TransformerEncoderLayer's linear2(gelu(linear1(x))), exact GELU."""
    _check_activation(cls, "gelu", seed=40)
    core.passed(
        f"{EXERCISE} with activation='gelu' equals torch's linear2(gelu(linear1(x))) (exact GELU); built "
        f"with dropout = {EVAL_DROPOUT}, it drops nothing in eval mode{SECOND_CALL}"
    )


def expect_value_error(cls, activation: str) -> None:
    """Building the module with an unknown activation name must raise ValueError."""
    build_with(cls, D, D_FF, None)  # a stub fails here with "not implemented yet"
    try:
        cls(D, D_FF, activation=activation)
    except ValueError:
        return
    except Exception as error:
        raise core.CheckFailure(
            f"{EXERCISE}(d_model, d_ff, activation={activation!r}) raised {type(error).__name__}: {error}; "
            "an unknown activation should raise a ValueError that names the allowed ones ('relu', 'gelu')."
        ) from error
    raise core.CheckFailure(
        f"{EXERCISE}(d_model, d_ff, activation={activation!r}) was accepted; in __init__, raise a "
        "ValueError that names the allowed activations ('relu', 'gelu') for any other name."
    )


def check_feed_forward_bad_activation(cls) -> None:
    """An activation other than 'relu' or 'gelu' raises ValueError when the module is built."""
    expect_value_error(cls, "swish")
    core.passed(f"{EXERCISE}(..., activation='swish') raises ValueError")


CATALOGUE = {EXERCISE: MISTAKES}
