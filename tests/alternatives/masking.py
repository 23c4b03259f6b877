"""Alternative correct masks for lesson 04: comparisons of index ranges, triu negated, view and
unsqueeze, logical_and, expand: ways a learner might reasonably write them."""

import torch


def causal_arange(size, device=None):
    """Compare key indices with query indices: True where j <= i."""
    index = torch.arange(size, device=device)
    return index[None, :] <= index[:, None]  # [1, T] (keys j) against [T, 1] (queries i)


def causal_not_future(size, device=None):
    """Mark the future (strict upper triangle) and negate it."""
    future = torch.triu(torch.ones(size, size, device=device), diagonal=1).bool()
    return ~future


def causal_tril_of_floats(size, device=None):
    """tril of float ones, turned into booleans by a comparison."""
    return torch.tril(torch.ones(size, size, device=device)) == 1


def padding_unsqueeze(tokens, pad_id):
    return tokens.ne(pad_id).unsqueeze(1).unsqueeze(2)


def padding_view(tokens, pad_id):
    batch, length = tokens.shape
    return torch.logical_not(tokens == pad_id).view(batch, 1, 1, length)


def padding_where(tokens, pad_id):
    keep = torch.where(tokens == pad_id, torch.zeros_like(tokens), torch.ones_like(tokens)).bool()
    return keep.reshape(tokens.size(0), 1, 1, -1)


def decoder_logical_and(tokens, pad_id):
    length = tokens.size(1)
    causal = torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()
    return torch.logical_and((tokens != pad_id)[:, None, None, :], causal)


def decoder_expand(tokens, pad_id):
    """Both masks expanded to the full shape [B, 1, T, T] before combining."""
    batch, length = tokens.shape
    keys = (tokens != pad_id).view(batch, 1, 1, length).expand(batch, 1, length, length)
    index = torch.arange(length, device=tokens.device)
    causal = (index[None, :] <= index[:, None]).expand(batch, 1, length, length)
    return keys & causal


def decoder_masked_fill(tokens, pad_id):
    """Start from the causal mask and switch off the pad keys, row by row."""
    batch, length = tokens.shape
    mask = torch.ones(batch, 1, length, length, dtype=torch.bool, device=tokens.device).tril()
    return mask.masked_fill((tokens == pad_id)[:, None, None, :], False)


ALTERNATIVES = {
    "causal_mask": [causal_arange, causal_not_future, causal_tril_of_floats],
    "padding_mask": [padding_unsqueeze, padding_view, padding_where],
    "decoder_mask": [decoder_logical_and, decoder_expand, decoder_masked_fill],
}
