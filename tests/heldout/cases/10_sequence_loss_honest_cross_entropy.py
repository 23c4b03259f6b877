# exercise: sequence_loss
# honest: F.cross_entropy on the flattened log-probabilities with ignore_index and label_smoothing
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch.nn.functional as F


def sequence_loss(log_probs, target, pad_id, smoothing=0.0):
    V = log_probs.shape[-1]
    return F.cross_entropy(
        log_probs.reshape(-1, V), target.reshape(-1), ignore_index=pad_id, label_smoothing=smoothing
    )
