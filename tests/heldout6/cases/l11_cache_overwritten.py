# exercise: decoder_layer_step
# mistake: stores only the newest key and value in the cache (overwrites it instead of concatenating), so each step attends to itself alone
# ruff: noqa
def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    cache = cache or {}
    k_mem, v_mem = memory_kv
    h = k_mem.size(1)

    def self_attn(y):
        a = layer.self_attn
        q = split_heads(a.w_q(y), h)
        k = split_heads(a.w_k(y), h)
        v = split_heads(a.w_v(y), h)
        cache["k"], cache["v"] = k, v
        out, _ = scaled_dot_product_attention(q, k, v)
        return a.w_o(merge_heads(out))

    def cross_attn(y):
        a = layer.cross_attn
        q = split_heads(a.w_q(y), h)
        out, _ = scaled_dot_product_attention(q, k_mem, v_mem, src_mask)
        return a.w_o(merge_heads(out))

    if layer.norm_first:
        x = x + self_attn(layer.norm1(x))
        x = x + cross_attn(layer.norm2(x))
        x = x + layer.ffn(layer.norm3(x))
    else:
        x = layer.norm1(x + self_attn(x))
        x = layer.norm2(x + cross_attn(x))
        x = layer.norm3(x + layer.ffn(x))
    return x, cache
