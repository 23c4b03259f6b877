# exercise: sinusoidal_encoding
# honest: interleaves sines and cosines with torch.stack(..., dim=-1).flatten(1) instead of strided assignment
# ruff: noqa
def sinusoidal_encoding(max_len, d_model):
    if d_model % 2 == 1:
        raise ValueError(f"sinusoidal_encoding needs an even d_model, got {d_model}")
    pos = torch.arange(max_len, dtype=torch.float32).unsqueeze(-1)
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * -(math.log(10000.0) / d_model))
    angles = pos * freq
    return torch.stack((torch.sin(angles), torch.cos(angles)), dim=-1).flatten(1)
