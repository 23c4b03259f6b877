# exercise: cached_greedy_decode
# honest: keeps the tokens in a Python list of columns, memory keys/values through the layer's own split, caches passed as None at first
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.efficiency import decoder_layer_step


@torch.no_grad()
def cached_greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    B = src.shape[0]
    memory = model.encode(src, src_mask)
    blocks = list(model.decoder.layers)
    memory_kv = []
    for block in blocks:
        heads = block.cross_attn.n_heads
        d_k = memory.shape[-1] // heads
        k = block.cross_attn.w_k(memory).view(B, -1, heads, d_k).transpose(1, 2)
        v = block.cross_attn.w_v(memory).view(B, -1, heads, d_k).transpose(1, 2)
        memory_kv.append((k, v))
    caches = [None for _ in blocks]
    columns = [torch.full((B,), start_symbol, dtype=torch.long, device=src.device)]
    ended = torch.zeros(B, dtype=torch.bool, device=src.device)
    position = 0
    while len(columns) < max_len:
        x = model.tgt_embed(columns[-1][:, None]) + model.positional.pe[position : position + 1]
        for i, block in enumerate(blocks):
            x, caches[i] = decoder_layer_step(block, x, memory_kv[i], src_mask, caches[i])
        token = model.generator(model.decoder.norm(x))[:, 0].argmax(dim=-1)
        if end_symbol is not None:
            token = torch.where(ended, end_symbol, token)
            ended = ended | token.eq(end_symbol)
        columns.append(token)
        position += 1
        if end_symbol is not None and bool(ended.all()):
            break
    return torch.stack(columns, dim=1)
