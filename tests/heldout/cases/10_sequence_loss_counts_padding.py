# exercise: sequence_loss
# mistake: averages over every position, padding included
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written


def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    smooth = -log_probs.mean(-1)
    return ((1 - smoothing) * nll + smoothing * smooth).mean()
