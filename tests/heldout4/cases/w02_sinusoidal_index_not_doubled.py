# exercise: sinusoidal_encoding
# mistake: frequencies 10000^(-i/D) with i = 0, 1, 2, ... instead of 10000^(-2i/D)
# ruff: noqa
def sinusoidal_encoding(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError(f"d_model must be even, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    i = torch.arange(d_model // 2, dtype=torch.float32)
    frequency = torch.exp(-i * math.log(10000.0) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * frequency)
    pe[:, 1::2] = torch.cos(position * frequency)
    return pe
