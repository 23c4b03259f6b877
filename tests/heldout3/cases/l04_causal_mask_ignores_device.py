# exercise: causal_mask
# mistake: accepts device but builds the mask on the default device (the CPU) anyway
# ruff: noqa
def causal_mask(size, device=None):
    return torch.tril(torch.ones(size, size)).bool()
