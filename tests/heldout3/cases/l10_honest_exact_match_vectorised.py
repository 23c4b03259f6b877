# exercise: exact_match
# honest: vectorised with cumulative sums marking everything after the first </s>, no Python loop over rows
# ruff: noqa
def exact_match(predicted, target, start_id, end_id):
    B = predicted.size(0)
    body = predicted[:, 1:]
    T = target.size(1)
    # the target's part up to and including its </s>
    tgt_keep = (target == end_id).long().cumsum(1).sub((target == end_id).long()) == 0
    tgt_len = tgt_keep.sum(1)
    # the prediction's part up to and including its first </s> (all of it when there is none)
    pred_keep = (body == end_id).long().cumsum(1).sub((body == end_id).long()) == 0
    pred_len = pred_keep.sum(1)
    width = max(T, body.size(1))
    pad_value = -1
    p = torch.full((B, width), pad_value, dtype=torch.long, device=predicted.device)
    t = torch.full((B, width), pad_value, dtype=torch.long, device=predicted.device)
    p[:, : body.size(1)] = body.masked_fill(~pred_keep, pad_value)
    t[:, :T] = target.masked_fill(~tgt_keep, pad_value)
    return (predicted[:, 0] == start_id) & (pred_len == tgt_len) & (p == t).all(1)
