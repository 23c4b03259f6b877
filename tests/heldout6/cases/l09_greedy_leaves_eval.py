# exercise: greedy_decode
# mistake: calls model.eval() and never puts the model back in train mode
# ruff: noqa
@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    model.eval()
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), src.device))
        nxt = model.generator(out[:, -1]).argmax(-1)
        if end_symbol is not None:
            nxt[done] = end_symbol
            done = done | (nxt == end_symbol)
        ys = torch.cat([ys, nxt.unsqueeze(1)], dim=1)
        if end_symbol is not None and done.all():
            break
    return ys
