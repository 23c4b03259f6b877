"""Alternative correct make_batch, sequence_loss, rate and exact_match for lesson 10: pad_sequence
and torch.full batching, F.cross_entropy, F.nll_loss and an explicit smoothed distribution,
piecewise and math-module schedules, a vectorised and a row-by-row exact match."""

import math

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

# --- make_batch --------------------------------------------------------------------------


def make_batch_pad_sequence(sources, targets, pad_id, start_id, end_id):
    """pad_sequence for the rows, the masks written inline."""

    def padded(rows):
        return pad_sequence([torch.tensor(row) for row in rows], batch_first=True, padding_value=pad_id)

    src = padded(sources)
    tgt_in = padded([[start_id] + t for t in targets])
    tgt_out = padded([t + [end_id] for t in targets])
    length = tgt_in.size(1)
    causal = torch.tril(torch.ones(length, length, dtype=torch.bool))
    return {
        "src": src,
        "src_mask": (src != pad_id).unsqueeze(1).unsqueeze(2),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": (tgt_in != pad_id)[:, None, None, :] & causal,
    }


def make_batch_full(sources, targets, pad_id, start_id, end_id):
    """torch.full tensors filled row by row; one full target row, shifted by slicing."""
    batch = len(sources)
    src = torch.full((batch, max(len(s) for s in sources)), pad_id, dtype=torch.long)
    full = torch.full((batch, max(len(t) for t in targets) + 2), pad_id, dtype=torch.long)
    for row, (source, target) in enumerate(zip(sources, targets, strict=True)):
        src[row, : len(source)] = torch.tensor(source)
        full[row, : len(target) + 2] = torch.tensor([start_id, *target, end_id])
    tgt_in, tgt_out = full[:, :-1].clone(), full[:, 1:].clone()
    tgt_in[tgt_in == end_id] = pad_id  # the decoder never reads a </s>
    index = torch.arange(tgt_in.size(1))
    tgt_mask = (tgt_in != pad_id).view(batch, 1, 1, -1) & (index[None, :] <= index[:, None])
    return {"src": src, "src_mask": (src != pad_id).view(batch, 1, 1, -1), "tgt_in": tgt_in,
            "tgt_out": tgt_out, "tgt_mask": tgt_mask}  # fmt: skip


# --- sequence_loss -----------------------------------------------------------------------


def sequence_loss_cross_entropy(log_probs, target, pad_id, smoothing=0.0):
    """PyTorch's cross-entropy (log_softmax of log-probabilities changes nothing)."""
    vocab = log_probs.size(-1)
    return F.cross_entropy(
        log_probs.reshape(-1, vocab), target.reshape(-1), ignore_index=pad_id, label_smoothing=smoothing
    )


def sequence_loss_nll(log_probs, target, pad_id, smoothing=0.0):
    """F.nll_loss for the right token, a masked mean for the uniform term."""
    vocab = log_probs.size(-1)
    nll = F.nll_loss(log_probs.view(-1, vocab), target.view(-1), ignore_index=pad_id)
    keep = (target != pad_id).float()
    uniform = (-log_probs.mean(-1) * keep).sum() / keep.sum()
    return (1 - smoothing) * nll + smoothing * uniform


def sequence_loss_distribution(log_probs, target, pad_id, smoothing=0.0):
    """The smoothed target distribution written out, then masked_select."""
    vocab = log_probs.size(-1)
    true_dist = torch.full_like(log_probs, smoothing / vocab)
    true_dist.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(log_probs[..., :1], 1 - smoothing))
    per_token = -(true_dist * log_probs).sum(-1)
    return per_token.masked_select(target != pad_id).mean()


# --- rate --------------------------------------------------------------------------------


def rate_piecewise(step, d_model, warmup, factor=1.0):
    if step <= 0:
        raise ValueError("step must be >= 1")
    scale = factor * d_model**-0.5
    if step < warmup:
        return scale * step * warmup**-1.5
    return scale / step**0.5


def rate_math(step, d_model, warmup, factor=1.0):
    if step < 1:
        raise ValueError(f"steps start at 1, not {step}")
    return factor / math.sqrt(d_model) * min(1 / math.sqrt(step), step / math.pow(warmup, 1.5))


# --- exact_match -------------------------------------------------------------------------


def exact_match_vectorised(predicted, target, start_id, end_id):
    """Pad both to one width, compare up to the target's </s> position; the prediction's first
    </s> is then at the same position, because the target has no </s> before it."""
    output = predicted[:, 1:]
    width = max(output.size(1), target.size(1))
    output = F.pad(output, (0, width - output.size(1)), value=-1)
    answer = F.pad(target, (0, width - target.size(1)), value=-1)
    last = (answer == end_id).int().argmax(dim=1)  # the target's </s>
    inside = torch.arange(width, device=target.device)[None, :] <= last[:, None]
    return ((output == answer) | ~inside).all(dim=1)


def exact_match_rows(predicted, target, start_id, end_id):
    """Row by row with tensor operations: the first </s> found with nonzero."""
    right = torch.zeros(predicted.size(0), dtype=torch.bool, device=predicted.device)
    for row in range(predicted.size(0)):
        answer = target[row, : int((target[row] == end_id).nonzero()[0]) + 1]
        output = predicted[row, 1:]
        ends = (output == end_id).nonzero()
        if len(ends) > 0:
            output = output[: int(ends[0]) + 1]
        right[row] = output.shape == answer.shape and bool((output == answer).all())
    return right


ALTERNATIVES = {
    "make_batch": [make_batch_pad_sequence, make_batch_full],
    "sequence_loss": [sequence_loss_cross_entropy, sequence_loss_nll, sequence_loss_distribution],
    "rate": [rate_piecewise, rate_math],
    "exact_match": [exact_match_vectorised, exact_match_rows],
}
