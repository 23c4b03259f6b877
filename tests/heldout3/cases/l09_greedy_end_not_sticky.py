# exercise: greedy_decode
# mistake: stops when every row has produced end_symbol, but a finished row goes on producing whatever the argmax gives
# ruff: noqa
@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    seen_end = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), src.device))
        next_token = model.generator(out[:, -1]).argmax(-1)
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        if end_symbol is not None:
            seen_end |= next_token == end_symbol
            if seen_end.all():
                break
    return ys
