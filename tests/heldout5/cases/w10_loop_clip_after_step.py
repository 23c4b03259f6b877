# exercise: train_loop
# mistake: clips the gradients after optimizer.step() (too late: the step used the unclipped gradients)
# ruff: noqa
def train_loop(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
    losses = []
    model.train()
    for batch in batches:
        optimizer.zero_grad()
        out = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
        loss = sequence_loss(model.generator(out), batch["tgt_out"], pad_id, smoothing)
        loss.backward()
        optimizer.step()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        if scheduler is not None:
            scheduler.step()
        losses.append(float(loss))
    return losses
