# exercise: decoder_layer_step
# mistake: puts the newest key/value in front of the cached ones (torch.cat([new, cache])), so the cache's positions are in reverse order
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.attention import scaled_dot_product_attention
from solutions.multi_head import merge_heads, split_heads


def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    cache = {} if cache is None else cache
    k_mem, v_mem = memory_kv
    n = k_mem.size(1)

    def self_attention(y):
        a = layer.self_attn
        q, k, v = split_heads(a.w_q(y), n), split_heads(a.w_k(y), n), split_heads(a.w_v(y), n)
        if cache.get("k") is not None:
            k, v = torch.cat([k, cache["k"]], 2), torch.cat([v, cache["v"]], 2)
        cache["k"], cache["v"] = k, v
        return a.w_o(merge_heads(scaled_dot_product_attention(q, k, v)[0]))

    def cross_attention(y):
        a = layer.cross_attn
        q = split_heads(a.w_q(y), n)
        return a.w_o(merge_heads(scaled_dot_product_attention(q, k_mem, v_mem, src_mask)[0]))

    if layer.norm_first:
        x = x + layer.dropout1(self_attention(layer.norm1(x)))
        x = x + layer.dropout2(cross_attention(layer.norm2(x)))
        x = x + layer.dropout3(layer.ffn(layer.norm3(x)))
    else:
        x = layer.norm1(x + layer.dropout1(self_attention(x)))
        x = layer.norm2(x + layer.dropout2(cross_attention(x)))
        x = layer.norm3(x + layer.dropout3(layer.ffn(x)))
    return x, cache
