# exercise: decoder_layer_step
# honest: torch's F.scaled_dot_product_attention on the cached keys, heads split with view/transpose inline, cache as a fresh dict
# ruff: noqa: N806, E741, B905, E501 - a learner's style, kept as written
import torch
import torch.nn.functional as F


def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    k_mem, v_mem = memory_kv
    B, h, _, d_k = k_mem.shape

    def heads(t):
        return t.view(B, -1, h, d_k).transpose(1, 2)

    def merge(t):
        return t.transpose(1, 2).reshape(B, -1, h * d_k)

    past_k = (cache or {}).get("k")
    past_v = (cache or {}).get("v")
    state = {}

    def self_block(y):
        a = layer.self_attn
        k, v = heads(a.w_k(y)), heads(a.w_v(y))
        if past_k is not None:
            k, v = torch.cat([past_k, k], dim=-2), torch.cat([past_v, v], dim=-2)
        state["k"], state["v"] = k, v
        return a.w_o(merge(F.scaled_dot_product_attention(heads(a.w_q(y)), k, v)))

    def cross_block(y):
        a = layer.cross_attn
        out = F.scaled_dot_product_attention(heads(a.w_q(y)), k_mem, v_mem, attn_mask=src_mask)
        return a.w_o(merge(out))

    if layer.norm_first:
        x = x + layer.dropout1(self_block(layer.norm1(x)))
        x = x + layer.dropout2(cross_block(layer.norm2(x)))
        x = x + layer.dropout3(layer.ffn(layer.norm3(x)))
    else:
        x = layer.norm1(x + layer.dropout1(self_block(x)))
        x = layer.norm2(x + layer.dropout2(cross_block(x)))
        x = layer.norm3(x + layer.dropout3(layer.ffn(x)))
    return x, state
