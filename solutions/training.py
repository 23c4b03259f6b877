"""Lesson 10: batches with masks, the padding-aware loss, the warm-up schedule, one training
step, exact-match accuracy, and the training loop (with optional gradient clipping).

Token conventions of the lesson's toy tasks: ``pad_id`` fills the unused end of a row;
a target row reads ``<s> y_1 ... y_n </s>``. The decoder reads the target without its last
token (``tgt_in``) and must predict it without its first (``tgt_out``).
"""

import torch
from torch import nn

from solutions.masking import decoder_mask, padding_mask


def make_batch(
    sources: list[list[int]], targets: list[list[int]], pad_id: int, start_id: int, end_id: int
) -> dict[str, torch.Tensor]:
    """One training batch from B source and B target sequences of any lengths.

    Returns the dict ``{"src", "src_mask", "tgt_in", "tgt_out", "tgt_mask"}``:
    src Long[B, S] (each source padded with pad_id to the longest, S), src_mask Bool[B, 1, 1, S],
    tgt_in Long[B, T] = <s> y_1 ... y_n, tgt_out Long[B, T] = y_1 ... y_n </s> (both padded,
    T = the longest target + 1), tgt_mask Bool[B, 1, T, T] (padding and causal, of tgt_in).
    """
    ### BEGIN SOLUTION
    length_src = max(len(s) for s in sources)
    length_tgt = max(len(t) for t in targets) + 1
    src = torch.tensor([s + [pad_id] * (length_src - len(s)) for s in sources], dtype=torch.long)
    tgt_in = torch.tensor([[start_id] + t + [pad_id] * (length_tgt - 1 - len(t)) for t in targets])
    tgt_out = torch.tensor([t + [end_id] + [pad_id] * (length_tgt - 1 - len(t)) for t in targets])
    return {
        "src": src,  # [B, S]
        "src_mask": padding_mask(src, pad_id),  # [B, 1, 1, S]
        "tgt_in": tgt_in,  # [B, T]
        "tgt_out": tgt_out,  # [B, T]
        "tgt_mask": decoder_mask(tgt_in, pad_id),  # [B, 1, T, T]
    }
    ### END SOLUTION


def sequence_loss(
    log_probs: torch.Tensor, target: torch.Tensor, pad_id: int, smoothing: float = 0.0
) -> torch.Tensor:
    """The mean label-smoothed negative log-likelihood over the target's non-padding tokens.

    log_probs: [B, T, V] (a log-softmax), target: Long[B, T] -> a scalar tensor. Equal to
    ``F.cross_entropy(log_probs.reshape(-1, V), target.reshape(-1), ignore_index=pad_id,
    label_smoothing=smoothing)``: the smoothed target puts 1 - smoothing on the right token and
    smoothing / V on every token (the right one included).
    """
    ### BEGIN SOLUTION
    keep = target != pad_id  # [B, T]
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # [B, T]
    uniform = -log_probs.mean(dim=-1)  # [B, T]: the cross-entropy against 1/V everywhere
    loss = (1.0 - smoothing) * nll + smoothing * uniform
    return loss[keep].sum() / keep.sum()
    ### END SOLUTION


def rate(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The learning rate of the paper (section 5.3) at ``step`` (counted from 1):
    factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5). A step below 1 is a ValueError.
    """
    ### BEGIN SOLUTION
    if step < 1:
        raise ValueError(f"rate: steps are counted from 1, got step = {step}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
    ### END SOLUTION


def train_step(
    model, batch: dict[str, torch.Tensor], optimizer, pad_id: int, smoothing: float = 0.0, scheduler=None
) -> float:
    """One step of teacher-forced training on ``batch`` (a dict from ``make_batch``).

    Puts the model in training mode, computes ``sequence_loss`` of
    ``model.generator(model(src, tgt_in, src_mask, tgt_mask))`` [B, T, V] against tgt_out,
    clears old gradients, back-propagates, steps the optimizer and then the scheduler (if any).
    Returns the loss as a Python float.
    """
    ### BEGIN SOLUTION
    model.train()
    states = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])  # [B, T, D]
    loss = sequence_loss(model.generator(states), batch["tgt_out"], pad_id, smoothing)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()
    ### END SOLUTION


def exact_match(predicted: torch.Tensor, target: torch.Tensor, start_id: int, end_id: int) -> torch.Tensor:
    """Which rows of a greedy decoding are exactly right.

    predicted: Long[B, L], as ``greedy_decode`` returns it (<s> first, maybe </s> and more after
    it); target: Long[B, T], as ``tgt_out`` (y_1 ... y_n </s>, then padding). A row is right when
    the tokens after <s>, up to and including its first </s>, are the target's up to and
    including its </s>. Returns Bool[B].
    """
    ### BEGIN SOLUTION
    right = []
    for row, answer in zip(predicted.tolist(), target.tolist(), strict=True):
        answer = answer[: answer.index(end_id) + 1]
        output = row[1:]  # drop <s>
        output = output[: output.index(end_id) + 1] if end_id in output else output
        right.append(row[0] == start_id and output == answer)
    return torch.tensor(right, dtype=torch.bool, device=predicted.device)
    ### END SOLUTION


def train_loop(
    model,
    batches,
    optimizer,
    pad_id: int,
    smoothing: float = 0.0,
    scheduler=None,
    clip: float | None = None,
) -> list[float]:
    """One teacher-forced step per batch of ``batches`` (an iterable of ``make_batch`` dicts), in
    order; returns the loss of every step as Python floats.

    Each step is ``train_step``'s, with one addition: when ``clip`` is a number, the gradients of
    all parameters together are scaled down so that their norm is at most ``clip``
    (``nn.utils.clip_grad_norm_``), after ``loss.backward()`` and before ``optimizer.step()``.
    """
    ### BEGIN SOLUTION
    losses = []
    for batch in batches:
        model.train()
        states = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])  # [B, T, D]
        loss = sequence_loss(model.generator(states), batch["tgt_out"], pad_id, smoothing)
        optimizer.zero_grad()
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    return losses
    ### END SOLUTION
