# exercise: cached_greedy_decode
# mistake: stops when every row has produced end_symbol, but a finished row does not keep producing it (it goes on decoding)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.efficiency import decoder_layer_step
from solutions.multi_head import split_heads


@torch.no_grad()
def cached_greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    layers = list(model.decoder.layers)
    kv = [
        (
            split_heads(l.cross_attn.w_k(memory), l.cross_attn.n_heads),
            split_heads(l.cross_attn.w_v(memory), l.cross_attn.n_heads),
        )
        for l in layers
    ]
    caches = [{} for _ in layers]
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    seen_end = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for t in range(max_len - 1):
        x = model.tgt_embed(ys[:, -1:]) + model.positional.pe[t]
        for i, layer in enumerate(layers):
            x, caches[i] = decoder_layer_step(layer, x, kv[i], src_mask, caches[i])
        token = model.generator(model.decoder.norm(x[:, -1])).argmax(-1)
        ys = torch.cat([ys, token[:, None]], dim=1)
        if end_symbol is not None:
            seen_end |= token == end_symbol
            if seen_end.all():
                break
    return ys
