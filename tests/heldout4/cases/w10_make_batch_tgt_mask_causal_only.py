# exercise: make_batch
# mistake: the target mask is only causal: it forgets to mask the padding of tgt_in
# ruff: noqa
def make_batch(sources, targets, pad_id, start_id, end_id):
    S = max(len(s) for s in sources)
    T = max(len(t) for t in targets) + 1
    src = torch.full((len(sources), S), pad_id, dtype=torch.long)
    tgt_in = torch.full((len(targets), T), pad_id, dtype=torch.long)
    tgt_out = torch.full((len(targets), T), pad_id, dtype=torch.long)
    for i, (s, t) in enumerate(zip(sources, targets)):
        src[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        tgt_in[i, : len(t) + 1] = torch.tensor([start_id] + list(t), dtype=torch.long)
        tgt_out[i, : len(t) + 1] = torch.tensor(list(t) + [end_id], dtype=torch.long)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    return {
        "src": src,
        "src_mask": padding_mask(src, pad_id),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": causal.expand(len(targets), 1, T, T),
    }
