# exercise: causal_mask
# mistake: True marks the future (blocked) positions, torch.triu(diagonal=1), the nn.MultiheadAttention convention
# ruff: noqa
def causal_mask(size, device=None):
    return torch.triu(torch.ones(size, size, dtype=torch.bool, device=device), diagonal=1)
