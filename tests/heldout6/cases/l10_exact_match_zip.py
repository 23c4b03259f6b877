# exercise: exact_match
# mistake: compares with zip, which stops at the shorter list, so a prediction cut off before its </s> (decoding hit max_len) counts as right when its tokens so far match
# ruff: noqa
def exact_match(predicted, target, start_id, end_id):
    result = []
    for row, answer in zip(predicted.tolist(), target.tolist()):
        answer = answer[: answer.index(end_id) + 1]
        ok = row[0] == start_id and all(a == b for a, b in zip(row[1:], answer))
        result.append(ok)
    return torch.tensor(result, dtype=torch.bool, device=predicted.device)
