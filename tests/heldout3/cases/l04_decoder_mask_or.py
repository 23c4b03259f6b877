# exercise: decoder_mask
# mistake: combines the padding and causal masks with | instead of &
# ruff: noqa
def decoder_mask(tokens, pad_id):
    return padding_mask(tokens, pad_id) | causal_mask(tokens.size(1), tokens.device)
