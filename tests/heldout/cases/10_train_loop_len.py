# exercise: train_loop
# mistake: indexes the batches with range(len(batches)), which fails on a generator
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
from torch import nn

from solutions.training import sequence_loss


def train_loop(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
    losses = []
    for i in range(len(batches)):
        batch = batches[i]
        model.train()
        out = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
        loss = sequence_loss(model.generator(out), batch["tgt_out"], pad_id, smoothing)
        optimizer.zero_grad()
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    return losses
