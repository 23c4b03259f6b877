# exercise: train_step
# mistake: computes the loss against tgt_in (the decoder's input) instead of tgt_out (the shifted target)
# ruff: noqa
def train_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None):
    model.train()
    out = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
    loss = sequence_loss(model.generator(out), batch["tgt_in"], pad_id, smoothing)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()
