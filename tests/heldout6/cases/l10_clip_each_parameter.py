# exercise: train_loop
# mistake: clips each parameter's gradient on its own instead of the norm of all gradients together
# ruff: noqa
def train_loop(model, batches, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None):
    losses = []
    for batch in batches:
        model.train()
        out = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
        loss = sequence_loss(model.generator(out), batch["tgt_out"], pad_id, smoothing)
        optimizer.zero_grad()
        loss.backward()
        if clip is not None:
            for p in model.parameters():
                if p.grad is not None:
                    nn.utils.clip_grad_norm_(p, clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(loss.item())
    return losses
