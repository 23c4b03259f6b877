# exercise: causal_mask
# mistake: keeps the upper triangle (triu), so each query sees its future instead of its past
# ruff: noqa
def causal_mask(size, device=None):
    return torch.triu(torch.ones(size, size, dtype=torch.bool, device=device))
