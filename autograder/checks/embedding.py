"""Checks for lesson 01: Embedding(vocab_size, d_model), forward(tokens [B, T]) -> [B, T, D].

Oracle: torch.nn.Embedding with its weights copied into the learner's ``lut``
(load_weights with 'lut.weight'), times sqrt(d_model). Inputs: B=2 != T=5,
vocab_size V=11 and d_model D=6 chosen so that sqrt(D), D, 1/sqrt(D) and
sqrt(V) are all different scales; the tokens use both ends of the vocabulary
and repeat an id.
"""

import math

import torch
from torch import nn

from autograder.checks import core
from autograder.checks.answers import Expected, answer
from autograder.checks.device import DEVICE, DTYPE, random_tensor

EXERCISE = "Embedding"
B, T, V, D = 2, 5, 11, 6
OUT = "[B, T, D]"

MISTAKES = core.catalogue(
    EXERCISE,
    {
        "no sqrt(d_model) scale": lambda self, tokens: self.lut(tokens),
        "scaled by d_model instead of sqrt(d_model)": lambda self, tokens: (
            self.lut(tokens) * self.lut.embedding_dim
        ),
        "divided by sqrt(d_model)": lambda self, tokens: self.lut(tokens) / math.sqrt(self.lut.embedding_dim),
        "scaled by sqrt(vocab_size)": lambda self, tokens: (
            self.lut(tokens) * math.sqrt(self.lut.num_embeddings)
        ),
    },
)


def tokens_for(batch: int, length: int, vocab_size: int, generator: torch.Generator) -> torch.Tensor:
    """Long[B, T] random ids that include 0, vocab_size - 1 and a repeated id."""
    tokens = torch.randint(0, vocab_size, (batch, length), generator=generator)
    tokens[0, 0], tokens[-1, -1] = 0, vocab_size - 1
    tokens[-1, 0] = tokens[0, -1]
    return tokens.to(DEVICE)


def embedding_module(cls, vocab_size: int, d_model: int):
    """The learner's module, with a ``lut`` that is an nn.Embedding of the right size."""
    module = core.build(EXERCISE, cls, vocab_size, d_model)
    how = "create it in __init__ with self.lut = nn.Embedding(vocab_size, d_model)."
    lut = core.expect_attribute(EXERCISE, module, "lut", nn.Embedding, "an nn.Embedding", how)
    expect_lut_size(EXERCISE, lut, vocab_size, d_model, "nn.Embedding")
    return module


def expect_lut_size(exercise: str, lut: nn.Embedding, vocab_size: int, d_model: int, spelled: str) -> None:
    """``lut`` holds vocab_size rows of d_model; ``spelled`` is its class as the learner writes it."""
    if (lut.num_embeddings, lut.embedding_dim) != (vocab_size, d_model):
        raise core.CheckFailure(
            f"{exercise}: expected lut = {spelled}(vocab_size, d_model) = {spelled}({vocab_size}, "
            f"{d_model}), got {spelled}({lut.num_embeddings}, {lut.embedding_dim})"
        )


def compare(module, tokens: torch.Tensor, expected: Expected) -> None:
    """The learner's output against ``expected()`` (computed after the learner's call), naming a
    known mistake when it matches one."""
    out = core.output(EXERCISE, module, {"tokens": tokens})
    wrong = core.mistake_outputs(MISTAKES, module, tokens)
    core.expect_close(EXERCISE, "the output", out, expected(), OUT, wrong)


def check_embedding_shapes(cls) -> None:
    """lut is nn.Embedding(V, D); the output is [B, T, D], float like the weights, on their device."""
    module = embedding_module(cls, V, D)
    tokens = tokens_for(B, T, V, torch.Generator().manual_seed(0))
    out = core.output(EXERCISE, module, {"tokens": tokens})
    core.expect_shape(EXERCISE, "the output", out, OUT, (B, T, D))
    if out.dtype != DTYPE:
        raise core.CheckFailure(
            f"{EXERCISE}: expected the output in the dtype of the weights ({DTYPE}, which the check "
            f"uses), got {out.dtype}; multiply by a Python float and do not convert with .float()."
        )
    core.expect_device(EXERCISE, "the output", out, tokens.device)
    core.passed(f"{EXERCISE} has lut = nn.Embedding(V, D) and maps tokens [B, T] to {OUT} = [{B}, {T}, {D}]")


def check_embedding_values(cls) -> None:
    """Equal to torch's nn.Embedding (same weights copied in) times sqrt(d_model)."""
    oracle = nn.Embedding(V, D).to(device=DEVICE, dtype=DTYPE)
    with torch.no_grad():
        oracle.weight.copy_(random_tensor(V, D, seed=1))
    module = embedding_module(cls, V, D)
    core.load_weights(EXERCISE, module, {"lut.weight": oracle.weight.detach().clone()})
    tokens = tokens_for(B, T, V, torch.Generator().manual_seed(2))
    compare(module, tokens, answer(lambda: oracle(tokens) * math.sqrt(D)))
    core.passed(f"{EXERCISE} equals torch's nn.Embedding (same weights) times sqrt(d_model) = sqrt({D})")


CATALOGUE = {EXERCISE: MISTAKES}
