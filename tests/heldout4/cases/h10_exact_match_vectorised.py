# exercise: exact_match
# honest: vectorised: first </s> found with argmax on each side, lengths compared, then tokens compared up to the target's </s>
# ruff: noqa
def exact_match(predicted, target, start_id, end_id):
    out = predicted[:, 1:]
    n_out, n_tgt = out.size(1), target.size(1)
    tgt_end = (target == end_id).int().argmax(dim=1)  # the target always holds </s>
    out_is_end = out == end_id
    first_end = out_is_end.int().argmax(dim=1) if n_out else torch.zeros_like(tgt_end)
    out_len = torch.where(out_is_end.any(dim=1), first_end + 1, torch.full_like(tgt_end, n_out))
    width = max(n_out, n_tgt)
    out_pad = torch.full((out.size(0), width), -1, dtype=out.dtype, device=out.device)
    tgt_pad = torch.full((target.size(0), width), -2, dtype=target.dtype, device=target.device)
    out_pad[:, :n_out] = out
    tgt_pad[:, :n_tgt] = target
    inside = torch.arange(width, device=out.device)[None, :] <= tgt_end[:, None]
    same = ((out_pad == tgt_pad) | ~inside).all(dim=1)
    return (predicted[:, 0] == start_id) & (out_len == tgt_end + 1) & same
