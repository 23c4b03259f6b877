# exercise: train_loop
# honest: reuses train_step when there is no clip, and writes the clipped step out by hand otherwise
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
from torch import nn

from solutions.training import sequence_loss, train_step


def train_loop(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
    losses = []
    for batch in batches:
        if clip is None:
            losses.append(train_step(model, batch, optimizer, pad_id, smoothing, scheduler))
            continue
        model.train()
        optimizer.zero_grad(set_to_none=True)
        states = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
        loss = sequence_loss(model.generator(states), batch["tgt_out"], pad_id, smoothing)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(float(loss.detach()))
    return losses
