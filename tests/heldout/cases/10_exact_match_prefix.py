# exercise: exact_match
# mistake: compares with zip, so a prediction cut short (no </s> before max_len) that is a prefix of the target counts as right
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch


def exact_match(predicted, target, start_id, end_id):
    out = []
    for pred, tgt in zip(predicted.tolist(), target.tolist()):
        ok = pred[0] == start_id
        for p, t in zip(pred[1:], tgt):
            if p != t:
                ok = False
                break
            if t == end_id:
                break
        out.append(ok)
    return torch.tensor(out)
