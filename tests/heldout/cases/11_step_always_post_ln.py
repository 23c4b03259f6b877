# exercise: decoder_layer_step
# mistake: ignores layer.norm_first and always computes Post-LN
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.attention import scaled_dot_product_attention
from solutions.multi_head import merge_heads, split_heads


def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    if cache is None:
        cache = {}
    k_mem, v_mem = memory_kv
    n_heads = k_mem.size(1)
    sa = layer.self_attn
    q = split_heads(sa.w_q(x), n_heads)
    k = split_heads(sa.w_k(x), n_heads)
    v = split_heads(sa.w_v(x), n_heads)
    if cache.get("k") is not None:
        k = torch.cat([cache["k"], k], dim=2)
        v = torch.cat([cache["v"], v], dim=2)
    cache["k"], cache["v"] = k, v
    out, _ = scaled_dot_product_attention(q, k, v)
    x = layer.norm1(x + layer.dropout1(sa.w_o(merge_heads(out))))
    ca = layer.cross_attn
    out, _ = scaled_dot_product_attention(split_heads(ca.w_q(x), n_heads), k_mem, v_mem, src_mask)
    x = layer.norm2(x + layer.dropout2(ca.w_o(merge_heads(out))))
    x = layer.norm3(x + layer.dropout3(layer.ffn(x)))
    return x, cache
