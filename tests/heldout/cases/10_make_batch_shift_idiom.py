# exercise: make_batch
# mistake: pads <s> y </s> to the longest + 2 and shifts it (full[:, :-1], full[:, 1:]), so a shorter row's tgt_in still holds its </s> where the contract has padding
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.masking import decoder_mask, padding_mask


def make_batch(sources, targets, pad_id, start_id, end_id):
    S = max(len(s) for s in sources)
    T = max(len(t) for t in targets) + 2
    src = torch.tensor([s + [pad_id] * (S - len(s)) for s in sources])
    full = torch.tensor([[start_id] + t + [end_id] + [pad_id] * (T - 2 - len(t)) for t in targets])
    tgt_in, tgt_out = full[:, :-1], full[:, 1:]
    return {
        "src": src,
        "src_mask": padding_mask(src, pad_id),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": decoder_mask(tgt_in, pad_id),
    }
