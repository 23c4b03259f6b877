"""Lesson 04: causal, padding and decoder masks (True means "may attend")."""

import torch


def causal_mask(size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Bool[size, size], True where key index <= query index (row = query, column = key)."""
    ### BEGIN SOLUTION
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()
    ### END SOLUTION


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Bool[B, 1, 1, T], True where the token is not padding.

    The two singleton axes broadcast over heads and query positions, so one
    mask serves the scores [B, h, T_q, T_k] of every head and every query.
    """
    ### BEGIN SOLUTION
    return (tokens != pad_id)[:, None, None, :]  # [B, T] -> [B, 1, 1, T]
    ### END SOLUTION


def decoder_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Bool[B, 1, T, T]: a query may attend to a key that is neither padding nor in its future."""
    ### BEGIN SOLUTION
    size = tokens.size(1)
    return padding_mask(tokens, pad_id) & causal_mask(size, tokens.device)  # [B,1,1,T] & [T,T]
    ### END SOLUTION
