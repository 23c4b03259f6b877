# exercise: exact_match
# honest: per row with tensor ops (nonzero to find the first </s>, shape and elementwise comparison) instead of lists
# ruff: noqa
def exact_match(predicted, target, start_id, end_id):
    out = predicted[:, 1:]
    B = predicted.size(0)
    result = torch.zeros(B, dtype=torch.bool, device=predicted.device)
    for b in range(B):
        t_end = int((target[b] == end_id).nonzero()[0])
        answer = target[b, : t_end + 1]
        hits = (out[b] == end_id).nonzero()
        row = out[b, : int(hits[0]) + 1] if len(hits) else out[b]
        result[b] = (
            bool(predicted[b, 0] == start_id) and row.shape == answer.shape and bool((row == answer).all())
        )
    return result
