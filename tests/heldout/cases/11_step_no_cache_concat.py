# exercise: decoder_layer_step
# mistake: never joins the new key/value to the cache: the newest position attends only to itself, and the cache holds only the newest
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written

from solutions.attention import scaled_dot_product_attention
from solutions.multi_head import merge_heads, split_heads


def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    k_mem, v_mem = memory_kv
    h = k_mem.size(1)

    def self_attn(y):
        a = layer.self_attn
        q, k, v = (split_heads(w(y), h) for w in (a.w_q, a.w_k, a.w_v))
        new_cache = {"k": k, "v": v}
        out, _ = scaled_dot_product_attention(q, k, v)
        return a.w_o(merge_heads(out)), new_cache

    def cross_attn(y):
        a = layer.cross_attn
        out, _ = scaled_dot_product_attention(split_heads(a.w_q(y), h), k_mem, v_mem, src_mask)
        return a.w_o(merge_heads(out))

    if layer.norm_first:
        s, cache = self_attn(layer.norm1(x))
        x = x + layer.dropout1(s)
        x = x + layer.dropout2(cross_attn(layer.norm2(x)))
        x = x + layer.dropout3(layer.ffn(layer.norm3(x)))
    else:
        s, cache = self_attn(x)
        x = layer.norm1(x + layer.dropout1(s))
        x = layer.norm2(x + layer.dropout2(cross_attn(x)))
        x = layer.norm3(x + layer.dropout3(layer.ffn(x)))
    return x, cache
