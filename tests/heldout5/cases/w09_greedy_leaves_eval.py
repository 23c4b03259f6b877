# exercise: greedy_decode
# mistake: calls model.eval() and leaves the model in eval mode (does not restore its training mode)
# ruff: noqa
@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    model.eval()
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), src.device))
        next_token = model.generator(out[:, -1]).argmax(dim=-1)
        if end_symbol is not None:
            next_token[finished] = end_symbol
            finished |= next_token == end_symbol
        ys = torch.cat([ys, next_token[:, None]], dim=1)
        if end_symbol is not None and finished.all():
            break
    return ys
