# exercise: sequence_loss
# mistake: zeroes the padded positions but then takes .mean() over all B*T positions, so padding still counts in the denominator
# ruff: noqa
def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    keep = (target != pad_id).float()
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    smooth = -log_probs.mean(dim=-1)
    loss = (1 - smoothing) * nll + smoothing * smooth
    return (loss * keep).mean()
