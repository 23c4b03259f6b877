"""Hidden tests for lesson 03."""

from autograder.checks import attention
from autograder.hidden.core import Fresh, replayable
from solutions.attention import scaled_dot_product_attention as reference


@replayable
def hidden_scaled_dot_product_attention(fresh: Fresh, fn, masked: bool, trials: int = 3) -> None:
    """Fresh sizes (h >= 2, T_q != T_k, d_k != d_v); with ``masked``, masks of several broadcast
    shapes, one of them with a fully masked query row."""
    for _ in range(trials):
        b, h, t_q, d_k = fresh.size(2, 4), fresh.size(2, 4), fresh.size(2, 9), fresh.size(2, 8)
        t_k, d_v = t_q + fresh.size(1, 4), d_k + fresh.size(1, 4)
        q, k, v = fresh.tensor(b, h, t_q, d_k), fresh.tensor(b, h, t_k, d_k), fresh.tensor(b, h, t_k, d_v)
        if not masked:
            attention.compare(fn, q, k, v, None, oracle=reference)
            continue
        for mask_shape in ((t_q, t_k), (b, 1, 1, t_k), (b, h, t_q, t_k)):
            mask = fresh.bools(*mask_shape)
            mask[..., 0] = True  # most queries see some key ...
            mask[..., -1, :] = False  # ... the last sees none
            attention.compare(fn, q, k, v, mask, oracle=reference)


@replayable
def hidden_attention_fully_masked(fresh: Fresh, fn, trials: int = 2) -> None:
    """The visible check's case on fresh inputs: a mask [B, 1, T_q, T_k] shaped as the visible
    check's, every query keeping its first key and losing its last, and one query (a fresh one)
    that may attend to nothing."""
    for _ in range(trials):
        b, h, t_q, d_k = fresh.size(2, 4), fresh.size(2, 4), fresh.size(3, 9), fresh.size(2, 8)
        t_k, d_v = t_q + fresh.size(1, 4), d_k + fresh.size(1, 4)
        q, k, v = fresh.tensor(b, h, t_q, d_k), fresh.tensor(b, h, t_k, d_k), fresh.tensor(b, h, t_k, d_v)
        mask = fresh.bools(b, 1, t_q, t_k)
        mask[..., 0] = True
        mask[..., -1] = False
        mask[:, :, fresh.size(0, t_q - 1), :] = False
        attention.compare(fn, q, k, v, mask, oracle=reference)
