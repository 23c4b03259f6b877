# exercise: cached_greedy_decode
# mistake: sends the last layer's output straight to the generator, skipping model.decoder.norm
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.efficiency import decoder_layer_step
from solutions.multi_head import split_heads


@torch.no_grad()
def cached_greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    layers = model.decoder.layers
    kv = []
    for layer in layers:
        h = layer.cross_attn.n_heads
        kv.append(
            (split_heads(layer.cross_attn.w_k(memory), h), split_heads(layer.cross_attn.w_v(memory), h))
        )
    caches = [None] * len(layers)
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for t in range(max_len - 1):
        x = model.tgt_embed(ys[:, -1:]) + model.positional.pe[t]
        for i, layer in enumerate(layers):
            x, caches[i] = decoder_layer_step(layer, x, kv[i], src_mask, caches[i])
        token = model.generator(x[:, -1]).argmax(dim=-1)
        if end_symbol is not None:
            token[finished] = end_symbol
            finished |= token == end_symbol
        ys = torch.cat([ys, token.unsqueeze(1)], 1)
        if end_symbol is not None and finished.all():
            break
    return ys
