# exercise: greedy_decode
# honest: switches the model to eval inside and restores the mode it found in a finally block; preallocates the output and trims it
# ruff: noqa
@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    was_training = model.training
    model.eval()
    try:
        memory = model.encode(src, src_mask)
        B = src.size(0)
        ys = torch.full((B, max_len), start_symbol, dtype=torch.long, device=src.device)
        finished = torch.zeros(B, dtype=torch.bool, device=src.device)
        length = 1
        while length < max_len:
            prefix = ys[:, :length]
            out = model.decode(memory, src_mask, prefix, causal_mask(length, src.device))
            nxt = model.generator(out[:, -1]).argmax(dim=-1)
            if end_symbol is not None:
                nxt = torch.where(finished, torch.full_like(nxt, end_symbol), nxt)
                finished = finished | (nxt == end_symbol)
            ys[:, length] = nxt
            length += 1
            if end_symbol is not None and bool(finished.all()):
                break
        return ys[:, :length]
    finally:
        model.train(was_training)
