# exercise: sinusoidal_encoding
# mistake: cosines in the even columns and sines in the odd ones (swapped)
# ruff: noqa
def sinusoidal_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    pos = torch.arange(max_len).float().unsqueeze(1)
    freq = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.cos(pos * freq)
    pe[:, 1::2] = torch.sin(pos * freq)
    return pe
