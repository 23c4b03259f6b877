# exercise: exact_match
# mistake: does not drop the <s> at the front of the prediction before comparing
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def exact_match(predicted, target, start_id, end_id):
    result = []
    for pred, tgt in zip(predicted.tolist(), target.tolist()):
        tgt = tgt[: tgt.index(end_id) + 1]
        if end_id in pred:
            pred = pred[: pred.index(end_id) + 1]
        result.append(pred == tgt)
    return torch.tensor(result, dtype=torch.bool)
