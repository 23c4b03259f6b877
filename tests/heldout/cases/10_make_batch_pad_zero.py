# exercise: make_batch
# mistake: pads the source with a hard-coded 0 instead of pad_id
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.masking import decoder_mask, padding_mask


def make_batch(sources, targets, pad_id, start_id, end_id):
    S = max(len(s) for s in sources)
    T = max(len(t) for t in targets) + 1
    src = torch.zeros(len(sources), S, dtype=torch.long)
    for i, s in enumerate(sources):
        src[i, : len(s)] = torch.tensor(s)
    tgt_in = torch.tensor([[start_id] + t + [pad_id] * (T - 1 - len(t)) for t in targets])
    tgt_out = torch.tensor([t + [end_id] + [pad_id] * (T - 1 - len(t)) for t in targets])
    return {
        "src": src,
        "src_mask": padding_mask(src, pad_id),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": decoder_mask(tgt_in, pad_id),
    }
