"""Hidden tests for lesson 08: the learner's layers and stacks against the reference package.

Every call draws fresh sizes (B >= 2, h >= 2, T_tgt != T_src), fresh masks and fresh random
parameters; the reference module's parameters are loaded into the learner's by name. Each trial
ends with the learner's module built once more with dropout > 0, in eval mode, on the last inputs:
two calls must both give the reference's output.
"""

from autograder.checks import encoder_decoder as checks
from autograder.checks.answers import answer
from autograder.checks.core import build, load_weights
from autograder.checks.device import DEVICE, DTYPE
from autograder.checks.oracles import causal, randomize_
from autograder.hidden.core import Fresh, replayable
from solutions import Decoder, DecoderLayer, Encoder, EncoderLayer


def _sizes(fresh: Fresh) -> tuple[int, int, int, int]:
    batch, heads, d_k = fresh.size(2, 4), fresh.size(2, 4), fresh.size(2, 4)
    d_model = heads * d_k
    return batch, heads, d_model, d_model + fresh.size(1, 9)


def _padding(fresh: Fresh, batch: int, length: int):
    """Bool[B, 1, 1, T]: right padding of random lengths, at least one sequence padded."""
    lengths = [fresh.size(1, length) for _ in range(batch)]
    lengths[0], lengths[-1] = length, max(1, length - 2)
    return checks.lengths_mask(lengths, length)


def _state(reference) -> dict:
    return {k: v.detach().clone() for k, v in reference.state_dict().items()}


def _pair(fresh: Fresh, reference_cls, cls, exercise: str, *args, norm_first: bool):
    reference = reference_cls(*args, dropout=0.0, norm_first=norm_first)
    reference = randomize_(reference.to(device=DEVICE, dtype=DTYPE), fresh.size(0, 10**6))
    reference.eval()
    learner = build(exercise, cls, *args, dropout=0.0, norm_first=norm_first)
    if exercise in ("Encoder", "Decoder"):  # the layers' structure first: it explains a failed load
        checks.check_stack_structure(exercise, learner, args[3])
    load_weights(exercise, learner, _state(reference))
    return reference, learner


@replayable
def hidden_encoder_layer(fresh: Fresh, cls, norm_first: bool, masked: bool, trials: int = 2) -> None:
    for _ in range(trials):
        batch, heads, d_model, d_ff = _sizes(fresh)
        length = fresh.size(3, 8)
        reference, learner = _pair(
            fresh, EncoderLayer, cls, "EncoderLayer", d_model, heads, d_ff, norm_first=norm_first
        )
        x = fresh.tensor(batch, length, d_model)
        padding = _padding(fresh, batch, length)
        for mask in (padding, padding & causal(length, DEVICE)) if masked else (None,):
            checks.compare_encoder_layer(learner, norm_first, x, mask, answer(reference, x, mask))
        state, expected = _state(reference), answer(reference, x, mask)
        args = (d_model, heads, d_ff)
        checks.expect_steady("EncoderLayer", learner, cls, args, norm_first, state, (x, mask), expected)


@replayable
def hidden_decoder_layer(fresh: Fresh, cls, norm_first: bool, masked: bool, trials: int = 2) -> None:
    for _ in range(trials):
        batch, heads, d_model, d_ff = _sizes(fresh)
        t_tgt = fresh.size(2, 7)
        t_src = t_tgt + fresh.size(1, 4)
        reference, learner = _pair(
            fresh, DecoderLayer, cls, "DecoderLayer", d_model, heads, d_ff, norm_first=norm_first
        )
        x, memory = fresh.tensor(batch, t_tgt, d_model), fresh.tensor(batch, t_src, d_model)
        src_mask = tgt_mask = None
        if masked:
            src_mask = _padding(fresh, batch, t_src)
            tgt_mask = _padding(fresh, batch, t_tgt) & causal(t_tgt, DEVICE)
        expected = answer(reference, x, memory, src_mask, tgt_mask)
        checks.compare_decoder_layer(learner, norm_first, x, memory, src_mask, tgt_mask, expected)
        inputs = (x, memory, src_mask, tgt_mask)
        args = (d_model, heads, d_ff)
        checks.expect_steady(
            "DecoderLayer", learner, cls, args, norm_first, _state(reference), inputs, expected
        )


@replayable
def hidden_encoder(fresh: Fresh, cls, trials: int = 2) -> None:
    for trial in range(trials):
        batch, heads, d_model, d_ff = _sizes(fresh)
        n_layers, length = fresh.size(2, 3), fresh.size(3, 8)
        args = (d_model, heads, d_ff, n_layers)
        norm_first = bool(trial % 2)
        reference, learner = _pair(fresh, Encoder, cls, "Encoder", *args, norm_first=norm_first)
        x, mask = fresh.tensor(batch, length, d_model), _padding(fresh, batch, length)
        checks.compare_encoder(learner, x, mask, answer(reference, x, mask))
        state, expected = _state(reference), answer(reference, x, mask)
        checks.expect_steady("Encoder", learner, cls, args, norm_first, state, (x, mask), expected)


@replayable
def hidden_decoder(fresh: Fresh, cls, trials: int = 2) -> None:
    for trial in range(trials):
        batch, heads, d_model, d_ff = _sizes(fresh)
        n_layers, t_tgt = fresh.size(2, 3), fresh.size(2, 7)
        t_src = t_tgt + fresh.size(1, 4)
        args = (d_model, heads, d_ff, n_layers)
        norm_first = bool(trial % 2)
        reference, learner = _pair(fresh, Decoder, cls, "Decoder", *args, norm_first=norm_first)
        x, memory = fresh.tensor(batch, t_tgt, d_model), fresh.tensor(batch, t_src, d_model)
        src_mask = _padding(fresh, batch, t_src)
        tgt_mask = _padding(fresh, batch, t_tgt) & causal(t_tgt, DEVICE)
        expected = answer(reference, x, memory, src_mask, tgt_mask)
        checks.compare_decoder(learner, x, memory, src_mask, tgt_mask, expected)
        inputs = (x, memory, src_mask, tgt_mask)
        checks.expect_steady("Decoder", learner, cls, args, norm_first, _state(reference), inputs, expected)
