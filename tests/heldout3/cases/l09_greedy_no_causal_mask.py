# exercise: greedy_decode
# mistake: decodes the prefix with tgt_mask=None (no causal mask), so earlier positions see later ones
# ruff: noqa
@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, None)
        next_token = model.generator(out[:, -1]).argmax(-1)
        if end_symbol is not None:
            next_token = torch.where(finished, torch.full_like(next_token, end_symbol), next_token)
            finished = finished | (next_token == end_symbol)
        ys = torch.cat([ys, next_token.unsqueeze(1)], dim=1)
        if end_symbol is not None and finished.all():
            break
    return ys
