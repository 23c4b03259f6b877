# exercise: cached_greedy_decode
# mistake: adds the positional row pe[t + 1] to the token at position t (off by one)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.efficiency import decoder_layer_step
from solutions.multi_head import split_heads


@torch.no_grad()
def cached_greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    layers = list(model.decoder.layers)
    mem_kv = [
        (
            split_heads(l.cross_attn.w_k(memory), l.self_attn.n_heads),
            split_heads(l.cross_attn.w_v(memory), l.self_attn.n_heads),
        )
        for l in layers
    ]
    caches = [{} for _ in layers]
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for t in range(max_len - 1):
        x = model.tgt_embed(ys[:, -1:]) + model.positional.pe[t + 1]
        for i, layer in enumerate(layers):
            x, caches[i] = decoder_layer_step(layer, x, mem_kv[i], src_mask, caches[i])
        nxt = model.generator(model.decoder.norm(x[:, -1])).argmax(-1)
        if end_symbol is not None:
            nxt = nxt.masked_fill(done, end_symbol)
            done = done | (nxt == end_symbol)
        ys = torch.cat([ys, nxt[:, None]], dim=1)
        if end_symbol is not None and done.all():
            break
    return ys
