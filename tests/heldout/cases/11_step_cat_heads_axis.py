# exercise: decoder_layer_step
# mistake: concatenates the cache along dim=1 (the heads) instead of dim=2 (the positions)
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch

from solutions.attention import scaled_dot_product_attention
from solutions.multi_head import merge_heads, split_heads


def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    cache = cache or {}
    k_mem, v_mem = memory_kv
    h = k_mem.shape[1]

    def self_attention(y):
        att = layer.self_attn
        q = split_heads(att.w_q(y), h)
        k = split_heads(att.w_k(y), h)
        v = split_heads(att.w_v(y), h)
        if cache.get("k") is not None:
            k = torch.cat((cache["k"], k), dim=1)
            v = torch.cat((cache["v"], v), dim=1)
        cache["k"], cache["v"] = k, v
        out, _ = scaled_dot_product_attention(q, k, v)
        return att.w_o(merge_heads(out))

    def cross_attention(y):
        att = layer.cross_attn
        out, _ = scaled_dot_product_attention(split_heads(att.w_q(y), h), k_mem, v_mem, src_mask)
        return att.w_o(merge_heads(out))

    if layer.norm_first:
        x = x + layer.dropout1(self_attention(layer.norm1(x)))
        x = x + layer.dropout2(cross_attention(layer.norm2(x)))
        return x + layer.dropout3(layer.ffn(layer.norm3(x))), cache
    x = layer.norm1(x + layer.dropout1(self_attention(x)))
    x = layer.norm2(x + layer.dropout2(cross_attention(x)))
    return layer.norm3(x + layer.dropout3(layer.ffn(x))), cache
