# exercise: train_loop
# mistake: clip_grad_value_ (clamps each gradient entry) instead of clip_grad_norm_ (scales the total norm)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
from torch import nn

from solutions.training import sequence_loss


def train_loop(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
    losses = []
    for batch in batches:
        model.train()
        states = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
        loss = sequence_loss(model.generator(states), batch["tgt_out"], pad_id, smoothing)
        optimizer.zero_grad()
        loss.backward()
        if clip:
            nn.utils.clip_grad_value_(model.parameters(), clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(float(loss))
    return losses
