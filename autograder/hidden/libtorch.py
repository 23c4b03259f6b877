"""Hidden tests for lesson 12: the C++ modules against the Python reference, fresh sizes and values.

The Python reference of lessons 01, 07 and 05 is the oracle here: the learner's C++ module gets the
reference's fresh random weights by name (strict), and both run on the same fresh inputs; a module
with dropout is then built again with dropout > 0, and in eval mode must give the same output twice.
"""

import torch

from autograder.checks import core
from autograder.checks import libtorch as checks
from autograder.checks.answers import answer
from autograder.checks.device import DEVICE, DTYPE
from autograder.checks.embedding import tokens_for
from autograder.checks.multi_head import keeps_global_rng
from autograder.hidden.core import Fresh, replayable
from solutions.embedding import Embedding
from solutions.feed_forward import PositionwiseFeedForward
from solutions.multi_head import MultiHeadAttention


def _randomized(module: torch.nn.Module, fresh: Fresh, scale: float) -> torch.nn.Module:
    module = module.to(device=DEVICE, dtype=DTYPE).eval()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(fresh.tensor(*parameter.shape) * scale)
    return module


@keeps_global_rng
@replayable
def hidden_cpp_embedding(fresh: Fresh, cls, trials: int = 3) -> None:
    for _ in range(trials):
        vocab_size, d_model = fresh.size(5, 40), fresh.size(3, 33)
        reference = _randomized(Embedding(vocab_size, d_model), fresh, 1.0)
        module = checks.embedding_module(cls, vocab_size, d_model)
        core.load_weights(checks.EMBEDDING, module, reference.state_dict(), "lut")
        tokens = tokens_for(fresh.size(2, 4), fresh.size(2, 9), vocab_size, fresh.generator)
        with torch.no_grad():
            expected = reference(tokens)
        checks.compare_embedding(module, tokens, expected)


@keeps_global_rng
@replayable
def hidden_cpp_feed_forward(fresh: Fresh, cls, trials: int = 3) -> None:
    for _ in range(trials):
        d_model, d_ff = fresh.size(3, 16), fresh.size(5, 40)
        reference = _randomized(PositionwiseFeedForward(d_model, d_ff), fresh, d_model**-0.5)
        module = checks.feed_forward_module(cls, d_model, d_ff)
        core.load_weights(checks.FEED_FORWARD, module, reference.state_dict(), "linear1, linear2")
        x = fresh.tensor(fresh.size(2, 4), fresh.size(2, 9), d_model)
        with torch.no_grad():
            expected = reference(x)
        checks.compare_feed_forward(module, x, expected)
        checks.expect_feed_forward_dropout(cls, reference.state_dict(), x, answer(reference, x))


@keeps_global_rng
@replayable
def hidden_cpp_multi_head_attention(fresh: Fresh, cls, trials: int = 2) -> None:
    """Fresh sizes (h >= 2, T_q != T_k), masks of several broadcast shapes, one query seeing no key."""
    for _ in range(trials):
        b, h, t_q = fresh.size(2, 4), fresh.size(2, 4), fresh.size(2, 8)
        d_k, t_k = h + fresh.size(1, 4), t_q + fresh.size(1, 4)
        d_model = h * d_k
        reference = _randomized(MultiHeadAttention(d_model, h), fresh, d_model**-0.5)
        module = checks.built(checks.MHA, cls, d_model, h)
        core.load_weights(checks.MHA, module, reference.state_dict(), "w_q, w_k, w_v, w_o")
        query, key, value = (fresh.tensor(b, t, d_model) for t in (t_q, t_k, t_k))
        masks = [None, fresh.bools(t_q, t_k), fresh.bools(b, 1, 1, t_k), fresh.bools(b, 1, t_q, t_k)]
        for mask in masks[1:]:
            mask[..., 0] = True
        masks[-1][0, 0, -1] = False  # this query sees no key: zeros, as lesson 03
        for mask in masks:
            with torch.no_grad():
                expected = reference(query, key, value, mask)
            checks.compare_mha(module, h, query, key, value, mask, expected, reference.attn)
        inputs = {"query": query, "key": key, "value": value, "mask": masks[-1]}
        checks.expect_mha_in_eval(cls, h, reference.state_dict(), inputs, answer(reference, *inputs.values()))
