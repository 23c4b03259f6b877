# exercise: sinusoidal_encoding
# mistake: the exponent uses i (0, 1, 2, ...) instead of 2i, so the frequencies fall off half as fast
# ruff: noqa
def sinusoidal_encoding(max_len, d_model):
    if d_model % 2 != 0:
        raise ValueError("d_model must be even")
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    i = torch.arange(d_model // 2, dtype=torch.float32)
    freq = torch.exp(-i * math.log(10000.0) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe
