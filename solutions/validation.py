"""Input checks shared by the exercises: clear errors that say what was expected.

They sit outside the learners' part of each exercise, so a learner's stub
calls them too and bad input fails the same way for everyone.
"""

import torch


def check_token_ids(tokens: torch.Tensor, vocab_size: int) -> None:
    """tokens must be an integer tensor with every id in [0, vocab_size)."""
    if tokens.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"token ids must be an integer tensor (torch.long), got dtype {tokens.dtype}")
    if tokens.numel() == 0:
        return
    low, high = int(tokens.min()), int(tokens.max())
    if low < 0 or high >= vocab_size:
        raise ValueError(
            f"token ids must lie in [0, vocab_size) = [0, {vocab_size}), got ids from {low} to {high}"
        )


def check_attention_inputs(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
) -> None:
    """q [..., T_q, d_k], k [..., T_k, d_k], v [..., T_k, d_v], mask Bool broadcastable to [..., T_q, T_k]."""
    if q.size(-1) != k.size(-1):
        raise ValueError(f"q and k must share d_k, got q [..., {q.size(-1)}] and k [..., {k.size(-1)}]")
    if k.size(-2) != v.size(-2):
        raise ValueError(
            f"k and v must share T_k, got k [..., {k.size(-2)}, d_k] and v [..., {v.size(-2)}, d_v]"
        )
    if mask is None:
        return
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be boolean (True means 'may attend'), got dtype {mask.dtype}; "
            "build it with a comparison such as tokens != pad_id"
        )
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    scores = (*batch, q.size(-2), k.size(-2))
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores)
    except RuntimeError:
        broadcast = None
    if broadcast != torch.Size(scores):
        raise ValueError(
            f"mask of shape {list(mask.shape)} does not broadcast to the scores "
            f"[..., T_q, T_k] = {list(scores)}"
        )
