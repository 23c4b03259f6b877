# exercise: greedy_decode
# honest: a preallocated [B, max_len] buffer filled column by column, trimmed to the columns used
# ruff: noqa
@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    batch = src.size(0)
    memory = model.encode(src, src_mask)
    out_tokens = torch.empty(batch, max_len, dtype=torch.long, device=src.device)
    out_tokens[:, 0] = start_symbol
    done = torch.zeros(batch, dtype=torch.bool, device=src.device)
    length = 1
    while length < max_len:
        prefix = out_tokens[:, :length]
        states = model.decode(memory, src_mask, prefix, causal_mask(length, device=src.device))
        best = model.generator(states[:, -1, :]).max(dim=-1).indices
        if end_symbol is not None:
            best = torch.where(done, torch.tensor(end_symbol, device=src.device), best)
            done = done | best.eq(end_symbol)
        out_tokens[:, length] = best
        length += 1
        if end_symbol is not None and done.all():
            break
    return out_tokens[:, :length]
