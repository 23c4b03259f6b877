# exercise: sequence_loss
# mistake: label smoothing spreads smoothing / (V - 1) over the wrong tokens only (Annotated-Transformer style), not smoothing / V over every token
# ruff: noqa
def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    V = log_probs.size(-1)
    true_dist = torch.full_like(log_probs, smoothing / (V - 1))
    true_dist.scatter_(-1, target.unsqueeze(-1), 1.0 - smoothing)
    loss = -(true_dist * log_probs).sum(-1)
    keep = target != pad_id
    return loss[keep].mean()
