# exercise: greedy_decode
# honest: preallocates the output filled with end_symbol, writes one column per step, trims at the end
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.masking import causal_mask


@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    batch = src.shape[0]
    memory = model.encode(src, src_mask)
    fill = start_symbol if end_symbol is None else end_symbol
    ys = torch.full((batch, max_len), fill, dtype=torch.long, device=src.device)
    ys[:, 0] = start_symbol
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    length = 1
    while length < max_len:
        states = model.decode(memory, src_mask, ys[:, :length], causal_mask(length, device=src.device))
        token = model.generator(states[:, -1]).argmax(dim=-1)
        if end_symbol is not None:
            token[finished] = end_symbol
            finished = finished | (token == end_symbol)
        ys[:, length] = token
        length += 1
        if end_symbol is not None and finished.all():
            break
    return ys[:, :length].clone()
