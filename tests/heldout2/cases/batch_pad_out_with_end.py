# exercise: make_batch
# mistake: pads tgt_out with end_id instead of pad_id (every position after the target reads </s>)
# ruff: noqa
def make_batch(sources, targets, pad_id, start_id, end_id):
    S = max(len(s) for s in sources)
    T = max(len(t) for t in targets) + 1
    src = torch.tensor([s + [pad_id] * (S - len(s)) for s in sources], dtype=torch.long)
    tgt_in = torch.tensor([[start_id] + t + [pad_id] * (T - 1 - len(t)) for t in targets], dtype=torch.long)
    tgt_out = torch.tensor([t + [end_id] * (T - len(t)) for t in targets], dtype=torch.long)
    return {
        "src": src,
        "src_mask": padding_mask(src, pad_id),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": decoder_mask(tgt_in, pad_id),
    }
