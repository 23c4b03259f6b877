# exercise: make_batch
# mistake: forgets the </s> at the end of tgt_out (tgt_out = y_1 ... y_n, then padding)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.masking import decoder_mask, padding_mask


def make_batch(sources, targets, pad_id, start_id, end_id):
    src_len = max(map(len, sources))
    tgt_len = max(map(len, targets)) + 1
    src = torch.full((len(sources), src_len), pad_id, dtype=torch.long)
    tgt_in = torch.full((len(targets), tgt_len), pad_id, dtype=torch.long)
    tgt_out = torch.full((len(targets), tgt_len), pad_id, dtype=torch.long)
    for i, (s, t) in enumerate(zip(sources, targets)):
        src[i, : len(s)] = torch.tensor(s)
        tgt_in[i, : len(t) + 1] = torch.tensor([start_id] + t)
        tgt_out[i, : len(t)] = torch.tensor(t)
    return {
        "src": src,
        "src_mask": padding_mask(src, pad_id),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": decoder_mask(tgt_in, pad_id),
    }
