# exercise: greedy_decode
# honest: a while loop on the length, finished rows tracked with torch.where and a list of tokens
# ruff: noqa
@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    ys = src.new_full((src.size(0), 1), start_symbol)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    while ys.size(1) < max_len:
        states = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), device=src.device))
        token = model.generator(states[:, -1, :]).argmax(dim=-1)
        if end_symbol is not None:
            token = torch.where(finished, torch.full_like(token, end_symbol), token)
            finished = finished | token.eq(end_symbol)
        ys = torch.cat((ys, token.unsqueeze(-1)), dim=-1)
        if end_symbol is not None and finished.all():
            break
    return ys
