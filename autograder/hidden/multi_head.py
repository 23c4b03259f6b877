"""Hidden tests for lesson 05: fresh sizes and values, compared with the reference package."""

import torch

from autograder.checks import core, multi_head
from autograder.checks.answers import answer
from autograder.checks.device import DEVICE, DTYPE
from autograder.hidden.core import Fresh, replayable
from solutions.multi_head import MultiHeadAttention as Reference
from solutions.multi_head import merge_heads as reference_merge
from solutions.multi_head import split_heads as reference_split


def _sizes(fresh: Fresh) -> tuple[int, int, int, int]:
    """B, h >= 2, d_k and T, drawn so that h != d_k (a swapped axis shows)."""
    b, h, t = fresh.size(2, 4), fresh.size(2, 4), fresh.size(2, 9)
    d_k = h + fresh.size(1, 4)
    return b, h, d_k, t


@replayable
def hidden_split_heads(fresh: Fresh, fn, trials: int = 3) -> None:
    for _ in range(trials):
        b, h, d_k, t = _sizes(fresh)
        x = fresh.tensor(b, t, h * d_k)
        multi_head.compare_split(fn, x, h, expected=answer(reference_split, x, h))


@replayable
def hidden_merge_heads(fresh: Fresh, fn, trials: int = 3) -> None:
    for _ in range(trials):
        b, h, d_k, t = _sizes(fresh)
        x = fresh.tensor(b, h, t, d_k)
        multi_head.compare_merge(fn, x, expected=answer(reference_merge, x))
        # the output of a split is not contiguous: merging it must give the features back
        multi_head.compare_merge(fn, reference_split(fresh.tensor(b, t, h * d_k), h))


def _pair(cls, fresh: Fresh, d_model: int, n_heads: int):
    """The reference with fresh random weights and biases, and the learner's module holding them."""
    reference = Reference(d_model, n_heads).to(device=DEVICE, dtype=DTYPE).eval()
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.copy_(fresh.tensor(*parameter.shape) / (d_model**0.5 if parameter.dim() == 2 else 2))
    module = core.build(multi_head.MHA, cls, d_model, n_heads)
    core.load_weights(multi_head.MHA, module, reference.state_dict())
    return reference, module


def _with_weights(reference, *inputs):
    """The reference's output and the attention weights it kept."""
    return reference(*inputs), reference.attn


@multi_head.keeps_global_rng
@replayable
def hidden_multi_head_attention(fresh: Fresh, cls, masked: bool, trials: int = 2) -> None:
    """Fresh sizes (h >= 2, T_q != T_k), cross-attention and self-attention; with ``masked``,
    masks of several broadcast shapes, one query row fully masked; then the module built with
    dropout > 0, in eval mode, on the cross-attention's inputs."""
    for _ in range(trials):
        b, h, d_k, t_q = _sizes(fresh)
        t_k = t_q + fresh.size(1, 4)
        reference, module = _pair(cls, fresh, h * d_k, h)
        query, key, value = (
            fresh.tensor(b, t_q, h * d_k),
            fresh.tensor(b, t_k, h * d_k),
            fresh.tensor(b, t_k, h * d_k),
        )
        cases = [(query, key, value), (query, query, query)]  # cross-attention, self-attention
        for q, k, v in cases:
            masks = [None]
            if masked:
                t_keys = k.size(1)
                masks = [
                    fresh.bools(q.size(1), t_keys),
                    fresh.bools(b, 1, 1, t_keys),
                    fresh.bools(b, 1, q.size(1), t_keys),
                    fresh.bools(b, h, q.size(1), t_keys),
                ]
                for mask in masks:
                    mask[..., 0] = True  # most queries see some key ...
                masks[-1][:, :, -1, :] = False  # ... and one sees none
            for mask in masks:
                expected = answer(_with_weights, reference, q, k, v, mask)
                multi_head.compare_mha(module, h, q, k, v, mask, expected, keeps_attn=True)
        # called again, and built with dropout > 0 in eval mode: dropout 0's output every time
        expected = answer(_with_weights, reference, query, key, value)
        multi_head.expect_steady(module, cls, h, reference.state_dict(), (query, key, value, None), expected)
