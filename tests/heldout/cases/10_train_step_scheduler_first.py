# exercise: train_step
# mistake: steps the scheduler before the optimizer
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
from solutions.training import sequence_loss


def train_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None):
    model.train()
    optimizer.zero_grad()
    states = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
    loss = sequence_loss(model.generator(states), batch["tgt_out"], pad_id, smoothing)
    loss.backward()
    if scheduler is not None:
        scheduler.step()
    optimizer.step()
    return loss.item()
