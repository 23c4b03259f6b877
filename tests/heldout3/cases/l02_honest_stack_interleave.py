# exercise: sinusoidal_encoding
# honest: sines and cosines stacked on a new last axis and flattened (interleaved), frequencies through exp and log
# ruff: noqa
def sinusoidal_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"sinusoidal_encoding needs an even d_model, got {d_model}")
    pos = torch.arange(max_len).float().unsqueeze(-1)  # [max_len, 1]
    freq = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
    angles = pos * freq  # [max_len, D/2]
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(start_dim=-2)
