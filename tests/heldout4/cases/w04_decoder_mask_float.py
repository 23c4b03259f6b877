# exercise: decoder_mask
# mistake: multiplies the padding mask by a float tril matrix, so the mask comes back as floats, not booleans
# ruff: noqa
def decoder_mask(tokens, pad_id):
    size = tokens.size(1)
    subsequent = torch.tril(torch.ones(size, size, device=tokens.device))
    return padding_mask(tokens, pad_id) * subsequent
