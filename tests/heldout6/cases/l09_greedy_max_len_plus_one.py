# exercise: greedy_decode
# mistake: loops max_len times after the start token, so a row can come back max_len + 1 tokens long
# ruff: noqa
@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        out = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), src.device))
        nxt = model.generator(out[:, -1]).argmax(-1)
        if end_symbol is not None:
            nxt = torch.where(done, torch.full_like(nxt, end_symbol), nxt)
            done = done | (nxt == end_symbol)
        ys = torch.cat([ys, nxt.unsqueeze(1)], dim=1)
        if end_symbol is not None and done.all():
            break
    return ys
