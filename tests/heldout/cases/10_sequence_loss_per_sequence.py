# exercise: sequence_loss
# mistake: sums the loss over each sequence's tokens and averages over the B sequences (divides by B, not by the number of tokens)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written


def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    keep = (target != pad_id).float()
    nll = -log_probs.gather(2, target[..., None])[..., 0]
    uniform = -log_probs.mean(dim=2)
    loss = ((1.0 - smoothing) * nll + smoothing * uniform) * keep
    return loss.sum(dim=1).mean()
