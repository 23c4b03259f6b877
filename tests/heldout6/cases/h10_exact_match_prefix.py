# exercise: exact_match
# honest: compares the prediction's tokens right after <s> with the whole answer up to its </s>, by slicing the same length
# ruff: noqa
def exact_match(predicted, target, start_id, end_id):
    out = []
    for row, answer in zip(predicted.tolist(), target.tolist()):
        n = answer.index(end_id) + 1
        out.append(row[0] == start_id and row[1 : 1 + n] == answer[:n])
    return torch.tensor(out, dtype=torch.bool, device=predicted.device)
