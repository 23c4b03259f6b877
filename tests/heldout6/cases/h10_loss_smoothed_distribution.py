# exercise: sequence_loss
# honest: builds the smoothed target distribution (smoothing / V everywhere, plus 1 - smoothing on the right token) with scatter_add and takes the masked mean of its cross-entropy
# ruff: noqa
def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    V = log_probs.size(-1)
    dist = torch.full_like(log_probs, smoothing / V)
    dist.scatter_add_(
        -1,
        target.unsqueeze(-1),
        torch.full_like(target, 1.0, dtype=log_probs.dtype).unsqueeze(-1) * (1.0 - smoothing),
    )
    per_token = -(dist * log_probs).sum(dim=-1)
    keep = (target != pad_id).to(log_probs.dtype)
    return (per_token * keep).sum() / keep.sum()
