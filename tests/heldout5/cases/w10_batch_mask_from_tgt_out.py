# exercise: make_batch
# honest: tgt_mask built from tgt_out, whose padding lies where tgt_in's does (both are n + 1 tokens, then pad_id); written as a mistake by the cases' author, reclassified by the session that measured it
# ruff: noqa
def make_batch(sources, targets, pad_id, start_id, end_id):
    S = max(map(len, sources))
    T = max(map(len, targets)) + 1
    src = torch.full((len(sources), S), pad_id, dtype=torch.long)
    tgt_in = torch.full((len(targets), T), pad_id, dtype=torch.long)
    tgt_out = torch.full((len(targets), T), pad_id, dtype=torch.long)
    for b, (s, t) in enumerate(zip(sources, targets)):
        src[b, : len(s)] = torch.tensor(s, dtype=torch.long)
        tgt_in[b, : len(t) + 1] = torch.tensor([start_id] + t, dtype=torch.long)
        tgt_out[b, : len(t) + 1] = torch.tensor(t + [end_id], dtype=torch.long)
    return {
        "src": src,
        "src_mask": padding_mask(src, pad_id),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": decoder_mask(tgt_out, pad_id),
    }
