"""Alternative correct train_step for lesson 10: F.cross_entropy with ignore_index and
label_smoothing, an explicit smoothed target distribution with the gradients cleared by hand,
F.nll_loss with the gradients cleared both before backward and after the step, and
F.cross_entropy on .view(-1) of the batch's tensors. Alternative train_loop: the lesson's
train_step for each batch when there is no clip, a clip computed by hand, the batches drawn with
next(iter(...)) and .view(-1), and a global-norm clip written out with its coefficient."""

import torch
import torch.nn.functional as F

from solutions.training import sequence_loss, train_step


def train_step_cross_entropy(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None):
    """zero_grad(set_to_none=False) before the forward; F.cross_entropy on the log-probabilities
    (log_softmax of a log_softmax changes nothing) with ignore_index and label_smoothing."""
    optimizer.zero_grad(set_to_none=False)
    model.train()
    states = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
    log_probs = model.generator(states)
    loss = F.cross_entropy(
        log_probs.flatten(0, 1), batch["tgt_out"].flatten(), ignore_index=pad_id, label_smoothing=smoothing
    )
    loss.backward()
    optimizer.step()
    if scheduler:
        scheduler.step()
    return loss.item()


def train_step_smoothed_distribution(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None):
    """The smoothed target written out (1 - smoothing + smoothing / V on the right token,
    smoothing / V elsewhere), a masked mean, the gradients set to None by hand, float(loss)."""
    model.train(True)
    for parameter in model.parameters():
        parameter.grad = None
    tgt_out = batch["tgt_out"]
    log_probs = model.generator(
        model(src=batch["src"], tgt=batch["tgt_in"], src_mask=batch["src_mask"], tgt_mask=batch["tgt_mask"])
    )
    vocab = log_probs.size(-1)
    target = torch.full_like(log_probs, smoothing / vocab)
    target.scatter_add_(-1, tgt_out.unsqueeze(-1), torch.full_like(log_probs[..., :1], 1.0 - smoothing))
    per_token = -(target * log_probs).sum(dim=-1)  # [B, T]
    real = (tgt_out != pad_id).to(per_token.dtype)
    loss = (per_token * real).sum() / real.sum()
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return float(loss)


def train_step_zero_grad_after(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None):
    """F.nll_loss summed over the real tokens, divided by their count, plus the smoothing term;
    the gradients cleared through the model before backward, and again after the step."""
    model.train()
    model.zero_grad()
    memory = model.encode(batch["src"], batch["src_mask"])
    states = model.decode(memory, batch["src_mask"], batch["tgt_in"], batch["tgt_mask"])
    log_probs = model.generator(states).reshape(-1, model.generator.proj.out_features)
    target = batch["tgt_out"].reshape(-1)
    real = target != pad_id
    nll = F.nll_loss(log_probs, target, ignore_index=pad_id, reduction="sum")
    uniform = -log_probs[real].mean(dim=-1).sum()
    loss = ((1 - smoothing) * nll + smoothing * uniform) / real.sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if scheduler is not None:
        scheduler.step()
    return loss.item()


def train_loop_calls_train_step(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
    """train_step for each batch when there is no clip; with one, the step written out around
    clip_grad_norm_, the mode set once before the loop."""
    if clip is None:
        return [train_step(model, batch, optimizer, pad_id, smoothing, scheduler) for batch in batches]
    model.train()
    losses = []
    for batch in batches:
        optimizer.zero_grad()
        log_probs = model.generator(
            model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
        )
        loss = sequence_loss(log_probs, batch["tgt_out"], pad_id, smoothing)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(float(loss))
    return losses


def train_loop_clip_by_hand(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
    """F.cross_entropy; the gradients' norm computed by hand and scaled by clip / norm when it is
    larger (no 1e-6 beside the norm, as clip_grad_norm_ has)."""
    losses = []
    for batch in batches:
        model.train()
        log_probs = model.generator(
            model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
        )
        loss = F.cross_entropy(
            log_probs.flatten(0, 1),
            batch["tgt_out"].flatten(),
            ignore_index=pad_id,
            label_smoothing=smoothing,
        )
        optimizer.zero_grad()
        loss.backward()
        if clip is not None:
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            norm = torch.sqrt(sum((g**2).sum() for g in grads))
            if norm > clip:
                for g in grads:
                    g.mul_(clip / norm)
        optimizer.step()
        if scheduler:
            scheduler.step()
        losses.append(loss.item())
    return losses


def train_step_view(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None):
    """.view(-1) on the batch's target and .view(-1, V) on the log-probabilities (both contiguous,
    as make_batch's tensors are), F.cross_entropy with ignore_index and label_smoothing."""
    model.train()
    optimizer.zero_grad()
    log_probs = model.generator(model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"]))
    loss = F.cross_entropy(
        log_probs.view(-1, log_probs.size(-1)),
        batch["tgt_out"].view(-1),
        ignore_index=pad_id,
        label_smoothing=smoothing,
    )
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()


def train_loop_next_iter(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
    """The batches drawn one by one with next(iter(batches)) until StopIteration; .view(-1) and
    F.cross_entropy; a global-norm clip written out: one norm over all the gradients, each scaled
    by min(1, clip / (norm + 1e-6)), as clip_grad_norm_ does."""
    model.train()
    losses = []
    remaining = iter(batches)
    while True:
        try:
            batch = next(remaining)
        except StopIteration:
            break
        optimizer.zero_grad()
        log_probs = model.generator(
            model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
        )
        vocab, target = log_probs.size(-1), batch["tgt_out"].view(-1)
        loss = F.cross_entropy(
            log_probs.view(-1, vocab), target, ignore_index=pad_id, label_smoothing=smoothing
        )
        loss.backward()
        if clip is not None:
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
            coefficient = torch.clamp(clip / (norm + 1e-6), max=1.0)
            for g in grads:
                g.mul_(coefficient)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    return losses


ALTERNATIVES = {
    "train_step": [
        train_step_cross_entropy,
        train_step_smoothed_distribution,
        train_step_zero_grad_after,
        train_step_view,
    ],
    "train_loop": [train_loop_calls_train_step, train_loop_clip_by_hand, train_loop_next_iter],
}
