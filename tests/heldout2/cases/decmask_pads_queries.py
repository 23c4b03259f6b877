# exercise: decoder_mask
# mistake: puts the padding on the query axis ([B, 1, T, 1]) instead of the key axis, so real queries still attend to padded keys
# ruff: noqa
def decoder_mask(tokens, pad_id):
    T = tokens.size(1)
    not_pad = (tokens != pad_id)[:, None, :, None]
    return not_pad & causal_mask(T, tokens.device)
