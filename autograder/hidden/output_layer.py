"""Hidden tests for lesson 09: fresh sizes, weights and inputs, compared with the reference package."""

from collections.abc import Callable
from typing import Any

import torch

from autograder.checks import core, greedy
from autograder.checks import output_layer as checks
from autograder.checks.answers import answer
from autograder.checks.core import load_weights
from autograder.checks.device import DEVICE, DTYPE
from autograder.checks.initialisation import expect_xavier
from autograder.checks.oracles import randomize_
from autograder.hidden.core import Fresh, replayable
from solutions.output_layer import Generator as ReferenceGenerator
from solutions.output_layer import Transformer as ReferenceTransformer
from solutions.output_layer import greedy_decode as reference_greedy_decode


def _randomize(module: torch.nn.Module, fresh: Fresh) -> torch.nn.Module:
    randomize_(module, fresh.generator)
    return module


@replayable
def hidden_generator(fresh: Fresh, cls, trials: int = 3) -> None:
    """Fresh D, V, B, T and weights; the reference's weights loaded into the learner's Generator.
    The last trial scales the weights so that the logits lie thousands apart."""
    for trial in range(trials):
        d_model, vocab_size = fresh.size(3, 24), fresh.size(5, 40)
        batch, length = fresh.size(2, 4), fresh.size(2, 9)
        reference = _randomize(ReferenceGenerator(d_model, vocab_size).to(device=DEVICE, dtype=DTYPE), fresh)
        if trial == trials - 1:
            with torch.no_grad():
                reference.proj.weight.mul_(1000.0)
        module = checks.generator_module(cls, d_model, vocab_size)
        load_weights(checks.GENERATOR, module, reference.state_dict(), names="proj, an nn.Linear")
        x = fresh.tensor(batch, length + batch, d_model)  # T != B
        checks.compare_generator(module, x, answer(reference, x))


def _states(reference, src, tgt, src_mask, tgt_mask) -> torch.Tensor:
    """decode(encode(src)): the reference's output states."""
    return reference.decode(reference.encode(src, src_mask), src_mask, tgt, tgt_mask)


def _expect_encode_decode(module, reference, src, tgt, src_mask, tgt_mask) -> None:
    """The learner's encode, then its decode of the reference's memory, against the reference's
    (each answer computed after the call it judges, and gone when this returns)."""
    with torch.no_grad():
        mine = checks.call_model("encode's output", module.encode, src, src_mask)
        memory = reference.encode(src, src_mask)
        core.expect_close(checks.TRANSFORMER, "encode's output", mine, memory, checks.MEMORY)
        mine = checks.call_model("decode's output", module.decode, memory, src_mask, tgt, tgt_mask)
        right = reference.decode(memory, src_mask, tgt, tgt_mask)
        core.expect_close(checks.TRANSFORMER, "decode's output", mine, right, checks.STATES)


def _end_from(decode, model, src, src_mask, max_len: int, row: int) -> int:
    """An end symbol that the free decoding of ``row`` reaches at its third token."""
    return int(decode(model, src, src_mask, max_len, greedy.START)[row, 2])


@replayable
def hidden_transformer(fresh: Fresh, cls, trials: int = 2) -> None:
    """Fresh sizes (h >= 2, one or two layers), weights and padded batches; the learner's Transformer
    built with Xavier's spread, then the reference's state_dict loaded into it; forward, encode and
    decode compared."""
    for _ in range(trials):
        n_heads = (2, 4)[fresh.size(0, 1)]
        d_model = n_heads * fresh.size(2, 5)
        args = checks.transformer_args(
            src_vocab=fresh.size(5, 20),
            tgt_vocab=fresh.size(5, 20),
            d_model=d_model,
            n_heads=n_heads,
            d_ff=fresh.size(8, 40),
            n_layers=fresh.size(1, 2),
            max_len=fresh.size(12, 30),
        )
        reference = ReferenceTransformer(**args).to(device=DEVICE, dtype=DTYPE).eval()
        _randomize(reference, fresh)
        module = checks.transformer_module(cls, args)
        expect_xavier(checks.TRANSFORMER, module)  # as built, before the reference's weights
        checks.load_transformer(module, reference.state_dict())
        batch, t_src = fresh.size(2, 3), fresh.size(3, 9)
        t_tgt = fresh.size(3, 9)
        src, tgt, src_mask, tgt_mask = checks.transformer_inputs(
            batch, t_src, t_tgt, args["src_vocab"], args["tgt_vocab"], fresh.generator
        )
        inputs = (src, tgt, src_mask, tgt_mask)
        expected = answer(_states, reference, *inputs)
        checks.compare_transformer(module, *inputs, expected)
        _expect_encode_decode(module, reference, *inputs)
        checks.expect_no_dropout_in_eval(cls, args, reference.state_dict(), inputs, expected)


@replayable
def hidden_greedy_decode(fresh: Fresh, fn, with_end: bool) -> None:
    """A fresh stand-in model and source, a small reference Transformer with fresh weights, and a
    fixed stand-in on which every known mistake shows; each against the reference greedy_decode."""
    cases = []
    model, src, src_mask = greedy.greedy_case(
        int(fresh.size(0, 10**6)), batch=fresh.size(2, 4), t_src=fresh.size(3, 8), generator=fresh.generator
    )
    max_len = fresh.size(4, greedy.GREEDY_VOCAB - 1)
    end = _end_from(greedy.step_by_step, model, src, src_mask, max_len, row=0) if with_end else None
    cases.append((model, src, src_mask, max_len, end))

    args = checks.transformer_args(src_vocab=9, tgt_vocab=10, d_model=8, n_heads=2, d_ff=16, n_layers=1)
    transformer = _randomize(ReferenceTransformer(**args).to(device=DEVICE, dtype=DTYPE).eval(), fresh)
    src = fresh.tokens(3, fresh.size(3, 7), vocab_size=9, low=1)
    src[-1, -1] = 0
    max_len = fresh.size(4, 9)
    src_mask = (src != 0)[:, None, None, :]
    end = _end_from(reference_greedy_decode, transformer, src, src_mask, max_len, row=1) if with_end else None
    cases.append((transformer, src, src_mask, max_len, end))

    fixed = (*greedy.greedy_case(greedy.HIDDEN_SEED), greedy.GREEDY_MAX_LEN, greedy.HIDDEN_END)
    decode_against_reference(greedy.compare_greedy, fn, cases, fixed, with_end)


def decode_against_reference(
    compare: Callable[..., None], fn: Callable[..., Any], cases: list[tuple], fixed: tuple, with_end: bool
) -> None:
    """``compare`` the learner's decoding ``fn`` with the reference greedy_decode on ``fixed`` (the
    stand-in on which every known mistake shows: model, src, src_mask, max_len, its end) with its
    end when ``with_end``, and without one too (lessons 09 and 11), then on each fresh case (model,
    src, src_mask, max_len, end). The fixed case comes first: a fresh case's tokens can match
    another mistake's by chance, and the name would then be wrong."""
    model, src, src_mask, max_len, end = fixed
    first = [(model, src, src_mask, max_len, end if with_end else None)]
    if with_end:  # and to max_len: where every fresh row ends early, one token too many shows only here
        first.append((model, src, src_mask, max_len, None))
    for model, src, src_mask, max_len, end in [*first, *cases]:
        expected = answer(reference_greedy_decode, model, src, src_mask, max_len, greedy.START, end)
        compare(fn, model, src, src_mask, max_len, greedy.START, end, expected=expected)
