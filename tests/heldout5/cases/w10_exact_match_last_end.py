# exercise: exact_match
# mistake: cuts the prediction at its last </s> instead of its first, so a row that keeps repeating </s> is wrong
# ruff: noqa
def exact_match(predicted, target, start_id, end_id):
    result = []
    for pred, tgt in zip(predicted.tolist(), target.tolist()):
        tgt = tgt[: tgt.index(end_id) + 1]
        body = pred[1:]
        if end_id in body:
            last = len(body) - 1 - body[::-1].index(end_id)
            body = body[: last + 1]
        result.append(pred[0] == start_id and body == tgt)
    return torch.tensor(result, dtype=torch.bool, device=predicted.device)
