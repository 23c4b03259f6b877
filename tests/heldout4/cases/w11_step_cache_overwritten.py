# exercise: decoder_layer_step
# mistake: stores only the newest position's key and value in the cache instead of appending them to the earlier ones
# ruff: noqa
def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    cache = cache or {}
    k_mem, v_mem = memory_kv
    h = k_mem.size(1)

    def self_attention(y):
        a = layer.self_attn
        q = split_heads(a.w_q(y), h)
        k_new = split_heads(a.w_k(y), h)
        v_new = split_heads(a.w_v(y), h)
        if cache.get("k") is not None:
            k = torch.cat([cache["k"], k_new], dim=2)
            v = torch.cat([cache["v"], v_new], dim=2)
        else:
            k, v = k_new, v_new
        cache["k"], cache["v"] = k_new, v_new
        out, _ = scaled_dot_product_attention(q, k, v)
        return a.w_o(merge_heads(out))

    def cross_attention(y):
        a = layer.cross_attn
        q = split_heads(a.w_q(y), h)
        out, _ = scaled_dot_product_attention(q, k_mem, v_mem, src_mask)
        return a.w_o(merge_heads(out))

    if layer.norm_first:
        x = x + self_attention(layer.norm1(x))
        x = x + cross_attention(layer.norm2(x))
        x = x + layer.ffn(layer.norm3(x))
    else:
        x = layer.norm1(x + self_attention(x))
        x = layer.norm2(x + cross_attention(x))
        x = layer.norm3(x + layer.ffn(x))
    return x, cache
