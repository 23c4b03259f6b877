# exercise: exact_match
# mistake: compares only the tokens before </s>: a prediction that never produces </s> (or stops too late) counts as right
# ruff: noqa
def exact_match(predicted, target, start_id, end_id):
    result = []
    for row, answer in zip(predicted.tolist(), target.tolist()):
        answer = answer[: answer.index(end_id)]
        output = row[1 : 1 + len(answer)]
        result.append(row[0] == start_id and output == answer)
    return torch.tensor(result, dtype=torch.bool, device=predicted.device)
