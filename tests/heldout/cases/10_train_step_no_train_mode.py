# exercise: train_step
# mistake: never puts the model in training mode (a model left in eval mode trains without dropout)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
from solutions.training import sequence_loss


def train_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None):
    optimizer.zero_grad()
    out = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
    loss = sequence_loss(model.generator(out), batch["tgt_out"], pad_id, smoothing)
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()
