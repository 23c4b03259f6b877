# exercise: make_batch
# mistake: T is the longest target's length without the + 1, so the longest row loses its last token (its </s> in tgt_out)
# ruff: noqa
def make_batch(sources, targets, pad_id, start_id, end_id):
    S = max(len(s) for s in sources)
    T = max(len(t) for t in targets)
    src = torch.tensor([s + [pad_id] * (S - len(s)) for s in sources], dtype=torch.long)
    tgt_in = torch.tensor([([start_id] + t + [pad_id] * T)[:T] for t in targets], dtype=torch.long)
    tgt_out = torch.tensor([(t + [end_id] + [pad_id] * T)[:T] for t in targets], dtype=torch.long)
    return {
        "src": src,
        "src_mask": padding_mask(src, pad_id),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": decoder_mask(tgt_in, pad_id),
    }
