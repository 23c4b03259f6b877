# exercise: sequence_loss
# honest: builds the smoothed target distribution with scatter_add_ and takes a masked mean of its cross-entropy
# ruff: noqa
def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    V = log_probs.size(-1)
    dist = torch.full_like(log_probs, smoothing / V)
    dist.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(log_probs[..., :1], 1.0 - smoothing))
    per_token = -(dist * log_probs).sum(dim=-1)  # [B, T]
    keep = (target != pad_id).to(per_token.dtype)
    return (per_token * keep).sum() / keep.sum()
