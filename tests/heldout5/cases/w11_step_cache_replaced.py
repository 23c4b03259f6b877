# exercise: decoder_layer_step
# mistake: the cache is overwritten with the newest key and value instead of appended to (attends only to itself)
# ruff: noqa
def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    cache = cache if cache is not None else {}
    k_mem, v_mem = memory_kv
    h = k_mem.size(1)

    def self_att(y):
        a = layer.self_attn
        q, k, v = (split_heads(w(y), h) for w in (a.w_q, a.w_k, a.w_v))
        cache["k"], cache["v"] = k, v
        out, _ = scaled_dot_product_attention(q, cache["k"], cache["v"])
        return a.w_o(merge_heads(out))

    def cross_att(y):
        a = layer.cross_attn
        out, _ = scaled_dot_product_attention(split_heads(a.w_q(y), h), k_mem, v_mem, src_mask)
        return a.w_o(merge_heads(out))

    if layer.norm_first:
        x = x + layer.dropout1(self_att(layer.norm1(x)))
        x = x + layer.dropout2(cross_att(layer.norm2(x)))
        x = x + layer.dropout3(layer.ffn(layer.norm3(x)))
    else:
        x = layer.norm1(x + layer.dropout1(self_att(x)))
        x = layer.norm2(x + layer.dropout2(cross_att(x)))
        x = layer.norm3(x + layer.dropout3(layer.ffn(x)))
    return x, cache
