# exercise: causal_mask
# honest: compares an arange column with an arange row (query index >= key index)
# ruff: noqa
def causal_mask(size, device=None):
    idx = torch.arange(size, device=device)
    return idx.unsqueeze(1) >= idx.unsqueeze(0)
