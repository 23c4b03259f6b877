# exercise: sinusoidal_encoding
# honest: builds the sines and cosines as two [max_len, D/2] tables and interleaves them with stack and flatten
# ruff: noqa
def sinusoidal_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"sinusoidal_encoding needs an even d_model, got {d_model}")
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angles = pos * inv_freq[None, :]
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(start_dim=1)
