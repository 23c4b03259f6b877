# exercise: sinusoidal_encoding
# mistake: the exponent uses the pair index i instead of 2i (frequencies 10000^(-i/D))
# ruff: noqa
def sinusoidal_encoding(max_len: int, d_model: int) -> torch.Tensor:
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got {d_model}")
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(max_len).unsqueeze(1).float()
    i = torch.arange(d_model // 2).float()
    div = torch.exp(i * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div)
    return pe
