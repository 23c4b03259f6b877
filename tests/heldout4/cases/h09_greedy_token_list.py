# exercise: greedy_decode
# honest: keeps the generated columns in a Python list and stacks them, with torch.where to pin finished rows to end_symbol
# ruff: noqa
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        columns = [torch.full((src.size(0),), start_symbol, dtype=torch.long, device=src.device)]
        finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        while len(columns) < max_len:
            ys = torch.stack(columns, dim=1)
            states = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), device=src.device))
            token = model.generator(states[:, -1, :]).argmax(dim=-1)
            if end_symbol is not None:
                token = torch.where(finished, torch.full_like(token, end_symbol), token)
                finished = finished | (token == end_symbol)
            columns.append(token)
            if end_symbol is not None and finished.all():
                break
        return torch.stack(columns, dim=1)
