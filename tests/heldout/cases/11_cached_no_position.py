# exercise: cached_greedy_decode
# mistake: uses model.positional on the single new token, which adds pe[0] at every step instead of the token's own position
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.efficiency import decoder_layer_step
from solutions.multi_head import split_heads


@torch.no_grad()
def cached_greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    memory = model.encode(src, src_mask)
    layers = list(model.decoder.layers)
    kv = []
    for layer in layers:
        n = layer.self_attn.n_heads
        kv.append(
            (split_heads(layer.cross_attn.w_k(memory), n), split_heads(layer.cross_attn.w_v(memory), n))
        )
    caches = [{} for _ in layers]
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        x = model.positional(model.tgt_embed(ys[:, -1:]))
        for i, layer in enumerate(layers):
            x, caches[i] = decoder_layer_step(layer, x, kv[i], src_mask, caches[i])
        token = model.generator(model.decoder.norm(x[:, -1])).argmax(-1)
        if end_symbol is not None:
            token = torch.where(done, torch.full_like(token, end_symbol), token)
            done = done | (token == end_symbol)
        ys = torch.cat([ys, token[:, None]], dim=1)
        if end_symbol is not None and done.all():
            break
    return ys
