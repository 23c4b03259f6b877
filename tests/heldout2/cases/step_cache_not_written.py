# exercise: decoder_layer_step
# mistake: attends over the cache plus the new key but never writes the new key and value back into the cache
# ruff: noqa
def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    if cache is None:
        cache = {}
    k_mem, v_mem = memory_kv
    h = k_mem.size(1)

    def self_att(y):
        a = layer.self_attn
        q = split_heads(a.w_q(y), h)
        k = split_heads(a.w_k(y), h)
        v = split_heads(a.w_v(y), h)
        if cache.get("k") is not None:
            k = torch.cat([cache["k"], k], dim=2)
            v = torch.cat([cache["v"], v], dim=2)
        else:
            cache["k"], cache["v"] = k, v
        out, _ = scaled_dot_product_attention(q, k, v)
        return a.w_o(merge_heads(out))

    def cross(y):
        a = layer.cross_attn
        q = split_heads(a.w_q(y), h)
        out, _ = scaled_dot_product_attention(q, k_mem, v_mem, src_mask)
        return a.w_o(merge_heads(out))

    if layer.norm_first:
        x = x + layer.dropout1(self_att(layer.norm1(x)))
        x = x + layer.dropout2(cross(layer.norm2(x)))
        x = x + layer.dropout3(layer.ffn(layer.norm3(x)))
    else:
        x = layer.norm1(x + layer.dropout1(self_att(x)))
        x = layer.norm2(x + layer.dropout2(cross(x)))
        x = layer.norm3(x + layer.dropout3(layer.ffn(x)))
    return x, cache
