# exercise: greedy_decode
# mistake: picks the next token from the first position's output (out[:, 0]) instead of the last (out[:, -1])
# ruff: noqa
@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), src.device))
        prob = model.generator(out[:, 0])
        nxt = prob.argmax(-1)
        if end_symbol is not None:
            nxt = torch.where(done, torch.full_like(nxt, end_symbol), nxt)
            done = done | (nxt == end_symbol)
        ys = torch.cat([ys, nxt.unsqueeze(1)], dim=1)
        if end_symbol is not None and done.all():
            break
    return ys
