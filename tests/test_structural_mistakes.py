"""Mistakes in how a module is built, not in what forward computes: each message fires.

The mutation tests replace ``forward``; these build the reference class and then change one
thing about the module it made (an attribute renamed, a bias left out, a buffer registered as
a parameter, one layer repeated), as a learner's ``__init__`` would. The visible test cells of
the exercise run in notebook order, and the first failure must be the message written for that
mistake. The same cells must pass on the unchanged reference (test_mutations.py proves it).
"""

import weakref

import pytest
import torch
from torch import nn

import solutions
from autograder.checks import CheckFailure
from tests.test_mutations import CHECKS


def _rename(old: str, new: str):
    def change(module: nn.Module) -> None:
        setattr(module, new, getattr(module, old))
        delattr(module, old)

    return change


def _replace(name: str, make):
    def change(module: nn.Module) -> None:
        value = make(module, getattr(module, name))
        delattr(module, name)
        setattr(module, name, value)

    return change


def _pe_as_parameter(module: nn.Module) -> None:
    table = module.pe
    del module.pe
    module.pe = nn.Parameter(table)


def _pe_not_persistent(module: nn.Module) -> None:
    table = module.pe
    del module.pe
    module.register_buffer("pe", table, persistent=False)


def _zero_gamma(module: nn.Module) -> None:
    with torch.no_grad():
        module.gamma.zero_()


CASES = [
    (
        "Embedding",
        "lut renamed",
        _rename("lut", "table"),
        "expected an attribute `lut` that is an nn.Embedding",
    ),
    (
        "Embedding",
        "lut of the wrong size",
        _replace("lut", lambda m, lut: nn.Embedding(lut.num_embeddings + 1, lut.embedding_dim)),
        "expected lut = nn.Embedding(vocab_size, d_model)",
    ),
    ("LayerNorm", "gamma renamed", _rename("gamma", "weight"), "no parameter named `gamma`"),
    ("LayerNorm", "gamma starts at zeros", _zero_gamma, "`gamma` must start as all ones"),
    ("PositionwiseFeedForward", "linear1 renamed", _rename("linear1", "fc1"), "got no attribute linear1"),
    (
        "PositionwiseFeedForward",
        "linear1 not an nn.Linear",
        _replace("linear1", lambda m, linear: nn.Sequential(linear)),
        "expected an attribute `linear1` that is an nn.Linear, got Sequential",
    ),
    (
        "MultiHeadAttention",
        "w_q without a bias",
        _replace("w_q", lambda m, linear: nn.Linear(linear.in_features, linear.out_features, bias=False)),
        "the projections have no bias (missing ['w_q.bias'])",
    ),
    ("PositionalEncoding", "pe a parameter", _pe_as_parameter, "Register it as a buffer"),
    ("PositionalEncoding", "pe not persistent", _pe_not_persistent, "the buffer pe is not in the state_dict"),
    (
        "Encoder",
        "one layer repeated",
        _replace("layers", lambda m, layers: nn.ModuleList([layers[0]] * len(layers))),
        "the layers share their parameters",
    ),
    (
        "Decoder",
        "layers in a plain list",
        _replace("layers", lambda m, layers: list(layers)),
        "a plain list hides",
    ),
    (
        "Encoder",
        "no final norm",
        _rename("norm", "final"),
        "a final LayerNorm in an attribute `norm`",
    ),
    (
        "Generator",
        "proj renamed",
        _rename("proj", "linear"),
        "an attribute `proj` that is an nn.Linear",
    ),
    ("Transformer", "generator renamed", _rename("generator", "head"), "expected an attribute `generator`"),
]


def _built_wrongly(exercise: str, change):
    """The reference class, with ``change`` applied to every module it builds."""
    reference = getattr(solutions, exercise)

    def build(self, *args, **kwargs):
        reference.__init__(self, *args, **kwargs)
        change(self)

    return type(f"Wrong{exercise}", (reference,), {"__init__": build})


@pytest.mark.parametrize(("exercise", "name", "change", "message"), CASES, ids=[c[1] for c in CASES])
def test_a_structural_mistake_gets_its_own_message(exercise, name, change, message):
    cls = _built_wrongly(exercise, change)
    for check in CHECKS[exercise]:
        try:
            check(cls)
        except CheckFailure as failure:
            assert message in str(failure), f"{name}: {failure}"
            return
    pytest.fail(f"no visible check of {exercise} caught: {name}")


def _loop_keeping_its_list():
    """A train_loop whose list of losses outlives the call (made outside it, as a default argument
    would be): right on a first call, every earlier loss again on the next."""
    kept: list[float] = []

    def train_loop(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
        for batch in batches:
            kept.append(solutions.train_step(model, batch, optimizer, pad_id, smoothing, scheduler))
        return kept

    return train_loop


def _decoding_remembered():
    """A cached_greedy_decode that keeps each model's first decoding on the model's side and returns
    it again: right on a first call, the old tokens for another source."""
    remembered = weakref.WeakKeyDictionary()

    def cached_greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
        if model not in remembered:
            remembered[model] = solutions.cached_greedy_decode(
                model, src, src_mask, max_len, start_symbol, end_symbol
            )
        return remembered[model]

    return cached_greedy_decode


SECOND_CALLS = [
    ("train_loop", _loop_keeping_its_list, "not outside it or as a default argument"),
    ("cached_greedy_decode", _decoding_remembered, "a second call on the same model"),
]


@pytest.mark.parametrize(("exercise", "make", "message"), SECOND_CALLS, ids=[c[0] for c in SECOND_CALLS])
def test_code_right_on_its_first_call_only_is_caught_on_the_second(exercise, make, message):
    implementation = make()
    for check in CHECKS[exercise]:
        try:
            check(implementation)
        except CheckFailure as failure:
            assert message in str(failure), f"{exercise}: {failure}"
            return
    pytest.fail(f"no visible check of {exercise} caught code that is right on its first call only")
