# exercise: causal_mask
# honest: compares column and row indices from torch.arange (key <= query) instead of tril
# ruff: noqa
def causal_mask(size, device=None):
    idx = torch.arange(size, device=device)
    return idx[None, :] <= idx[:, None]
