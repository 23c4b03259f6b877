# exercise: exact_match
# honest: vectorised: pads both sides to one width with -1, keeps the target's positions up to its first </s> (cumsum), compares there
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written


def exact_match(predicted, target, start_id, end_id):
    body = predicted[:, 1:]
    B, T = target.shape
    width = max(T, body.size(1))
    pred = body.new_full((B, width), -1)
    pred[:, : body.size(1)] = body
    tgt = target.new_full((B, width), -1)
    tgt[:, :T] = target
    is_end = (tgt == end_id).long()
    in_answer = (is_end.cumsum(dim=1) - is_end) == 0  # up to and including the first </s>
    return ((pred == tgt) | ~in_answer).all(dim=1) & (predicted[:, 0] == start_id)
