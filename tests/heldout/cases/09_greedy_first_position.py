# exercise: greedy_decode
# mistake: picks the next token from the first position's log-probabilities (out[:, 0]) instead of the last one
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.masking import causal_mask


@torch.no_grad()
def greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), src.device))
        next_word = model.generator(out[:, 0]).argmax(-1)
        if end_symbol is not None:
            next_word = torch.where(done, torch.full_like(next_word, end_symbol), next_word)
            done = done | (next_word == end_symbol)
        ys = torch.cat([ys, next_word.unsqueeze(1)], dim=1)
        if end_symbol is not None and done.all():
            break
    return ys
