# exercise: exact_match
# mistake: compares the predicted row after <s> in full (tokens after the first </s> included) instead of cutting it after its first </s>
# ruff: noqa
def exact_match(predicted, target, start_id, end_id):
    result = []
    for pred, tgt in zip(predicted.tolist(), target.tolist()):
        answer = tgt[: tgt.index(end_id) + 1]
        result.append(pred[0] == start_id and pred[1:] == answer)
    return torch.tensor(result, dtype=torch.bool, device=predicted.device)
