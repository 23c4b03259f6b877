# exercise: causal_mask
# mistake: upper triangle (triu): each query may attend to the future instead of the past
# ruff: noqa
def causal_mask(size, device=None):
    return torch.triu(torch.ones(size, size, device=device)).bool()
