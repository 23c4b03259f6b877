# exercise: make_batch
# mistake: tgt_mask is only the causal mask [T, T]; the padding of tgt_in is left out
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.masking import padding_mask


def make_batch(sources, targets, pad_id, start_id, end_id):
    S = max(len(s) for s in sources)
    T = max(len(t) for t in targets) + 1
    src = torch.tensor([s + [pad_id] * (S - len(s)) for s in sources], dtype=torch.long)
    tgt_in = torch.tensor([[start_id] + t + [pad_id] * (T - 1 - len(t)) for t in targets], dtype=torch.long)
    tgt_out = torch.tensor([t + [end_id] + [pad_id] * (T - 1 - len(t)) for t in targets], dtype=torch.long)
    return {
        "src": src,
        "src_mask": padding_mask(src, pad_id),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": torch.tril(torch.ones(T, T, dtype=torch.bool)),
    }
