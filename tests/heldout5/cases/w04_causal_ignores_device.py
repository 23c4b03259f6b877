# exercise: causal_mask
# mistake: ignores the device argument, always builds the mask on the CPU
# ruff: noqa
def causal_mask(size, device=None):
    return torch.tril(torch.ones(size, size, dtype=torch.bool))
