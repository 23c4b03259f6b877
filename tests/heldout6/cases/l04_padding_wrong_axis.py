# exercise: padding_mask
# mistake: puts the token axis on the query axis: [B, 1, T, 1] instead of [B, 1, 1, T]
# ruff: noqa
def padding_mask(tokens, pad_id):
    return (tokens != pad_id).unsqueeze(1).unsqueeze(-1)
