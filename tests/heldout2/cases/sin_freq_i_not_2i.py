# exercise: sinusoidal_encoding
# mistake: the exponent uses i/D (arange over D/2 without doubling) instead of 2i/D, so frequencies fall too slowly
# ruff: noqa
def sinusoidal_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    pos = torch.arange(max_len).float().unsqueeze(1)
    i = torch.arange(d_model // 2).float()
    freq = torch.exp(-i * math.log(10000.0) / d_model)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe
