# exercise: train_step
# mistake: calls optimizer.zero_grad() after loss.backward(), so the step is taken with the gradients just cleared
# ruff: noqa
def train_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None):
    model.train()
    out = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
    loss = sequence_loss(model.generator(out), batch["tgt_out"], pad_id, smoothing)
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()
