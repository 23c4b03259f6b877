# exercise: sequence_loss
# mistake: the smoothing term sums -log p over the vocabulary instead of averaging it (weight smoothing on every token, not smoothing / V)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written


def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    mask = target.ne(pad_id)
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    smooth = -log_probs.sum(-1)
    loss = (1 - smoothing) * nll + smoothing * smooth
    return (loss * mask).sum() / mask.sum()
