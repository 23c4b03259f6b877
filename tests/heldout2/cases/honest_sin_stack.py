# exercise: sinusoidal_encoding
# honest: sin and cos interleaved by stacking on a new last axis and flattening, instead of strided assignment
# ruff: noqa
def sinusoidal_encoding(max_len, d_model):
    if d_model % 2 == 1:
        raise ValueError(f"d_model has to be even for sin/cos pairs, got {d_model}")
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    inv = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angles = pos * inv
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(max_len, d_model)
