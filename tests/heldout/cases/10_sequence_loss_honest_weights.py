# exercise: sequence_loss
# honest: builds the smoothed target distribution explicitly and weights each row by a float padding mask
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    V = log_probs.size(-1)
    dist = torch.full_like(log_probs, smoothing / V)
    dist.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(log_probs[..., :1], 1.0 - smoothing))
    per_token = -(dist * log_probs).sum(-1)
    weight = (target != pad_id).to(log_probs.dtype)
    return (per_token * weight).sum() / weight.sum()
