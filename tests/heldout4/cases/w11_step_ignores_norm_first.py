# exercise: decoder_layer_step
# mistake: always computes the Post-LN layer, ignoring layer.norm_first
# ruff: noqa
def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    cache = {} if cache is None else cache
    k_mem, v_mem = memory_kv
    h = k_mem.size(1)
    sa = layer.self_attn
    q = split_heads(sa.w_q(x), h)
    k = split_heads(sa.w_k(x), h)
    v = split_heads(sa.w_v(x), h)
    if cache.get("k") is not None:
        k = torch.cat([cache["k"], k], dim=2)
        v = torch.cat([cache["v"], v], dim=2)
    cache["k"], cache["v"] = k, v
    out, _ = scaled_dot_product_attention(q, k, v)
    x = layer.norm1(x + sa.w_o(merge_heads(out)))
    ca = layer.cross_attn
    q = split_heads(ca.w_q(x), h)
    out, _ = scaled_dot_product_attention(q, k_mem, v_mem, src_mask)
    x = layer.norm2(x + ca.w_o(merge_heads(out)))
    x = layer.norm3(x + layer.ffn(x))
    return x, cache
