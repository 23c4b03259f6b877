# exercise: sequence_loss
# honest: builds the smoothed target distribution from one_hot, takes its cross-entropy with the log-probabilities, and averages over the non-padding positions
# ruff: noqa
def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    vocab = log_probs.size(-1)
    one_hot = torch.nn.functional.one_hot(target, vocab).to(log_probs.dtype)
    dist = one_hot * (1.0 - smoothing) + smoothing / vocab
    per_token = -(dist * log_probs).sum(dim=-1)
    keep = (target != pad_id).to(log_probs.dtype)
    return (per_token * keep).sum() / keep.sum()
