# exercise: exact_match
# mistake: compares the prediction after <s> position by position with the whole padded target row, so the </s> that greedy decoding repeats after the answer never equals the padding
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def exact_match(predicted, target, start_id, end_id):
    T = target.size(1)
    body = predicted[:, 1 : T + 1]
    if body.size(1) < T:
        return torch.zeros(target.size(0), dtype=torch.bool)
    return (body == target).all(dim=1) & (predicted[:, 0] == start_id)
