# exercise: sinusoidal_encoding
# mistake: sines in the first half of the columns and cosines in the second half (concatenated) instead of interleaved
# ruff: noqa
def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    angles = pos * freq
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
