# exercise: sequence_loss
# mistake: label smoothing as in the Annotated Transformer: smoothing / (V - 1) on every wrong token and 1 - smoothing on the right one, not PyTorch's smoothing / V on every token
# ruff: noqa
def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    V = log_probs.size(-1)
    dist = torch.full_like(log_probs, smoothing / (V - 1))
    dist.scatter_(-1, target.unsqueeze(-1), 1.0 - smoothing)
    loss = -(dist * log_probs).sum(-1)
    keep = target != pad_id
    return (loss * keep).sum() / keep.sum()
