# exercise: greedy_decode
# mistake: stops when every row has produced end_symbol, but a row that already finished keeps emitting whatever argmax gives instead of end_symbol
# ruff: noqa
@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), src.device))
        nxt = model.generator(out[:, -1]).argmax(-1)
        ys = torch.cat([ys, nxt.unsqueeze(1)], dim=1)
        if end_symbol is not None and (ys == end_symbol).any(dim=1).all():
            break
    return ys
