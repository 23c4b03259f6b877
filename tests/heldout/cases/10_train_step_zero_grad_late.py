# exercise: train_step
# mistake: calls optimizer.zero_grad() between backward() and step(), so the step sees no gradients
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
from solutions.training import sequence_loss


def train_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None):
    model.train()
    out = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
    loss = sequence_loss(model.generator(out), batch["tgt_out"], pad_id, smoothing)
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    if scheduler:
        scheduler.step()
    return loss.item()
