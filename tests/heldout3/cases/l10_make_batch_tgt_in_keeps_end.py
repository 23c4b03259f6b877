# exercise: make_batch
# mistake: pads <s> y </s> to T + 1 and cuts it into row[:-1] / row[1:], so a shorter row's tgt_in keeps its </s> where padding belongs
# ruff: noqa
def make_batch(sources, targets, pad_id, start_id, end_id):
    s_len = max(map(len, sources))
    full_len = max(map(len, targets)) + 2
    src = torch.tensor([s + [pad_id] * (s_len - len(s)) for s in sources], dtype=torch.long)
    full = torch.tensor(
        [[start_id] + t + [end_id] + [pad_id] * (full_len - 2 - len(t)) for t in targets], dtype=torch.long
    )
    tgt_in, tgt_out = full[:, :-1], full[:, 1:]
    return {
        "src": src,
        "src_mask": padding_mask(src, pad_id),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": decoder_mask(tgt_in, pad_id),
    }
