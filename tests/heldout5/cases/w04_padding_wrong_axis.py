# exercise: padding_mask
# mistake: shape [B, 1, T, 1] (masks query rows) instead of [B, 1, 1, T] (masks key columns)
# ruff: noqa
def padding_mask(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(1).unsqueeze(-1)
