# exercise: sinusoidal_encoding
# honest: sin and cos stacked on a new last axis and reshaped, which interleaves them (no in-place slices)
# ruff: noqa
def sinusoidal_encoding(max_len, d_model):
    if d_model % 2 == 1:
        raise ValueError(f"sinusoidal_encoding needs an even d_model, got {d_model}")
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(-1)
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    angle = pos * inv_freq  # [max_len, D/2]
    return torch.stack((angle.sin(), angle.cos()), dim=-1).reshape(max_len, d_model)
