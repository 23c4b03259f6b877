"""Lesson 11: incremental decoding with a key/value cache."""

import math

import torch

from solutions.attention import scaled_dot_product_attention
from solutions.multi_head import merge_heads, split_heads


def decoder_layer_step(
    layer: torch.nn.Module,
    x: torch.Tensor,
    memory_kv: tuple[torch.Tensor, torch.Tensor],
    src_mask: torch.Tensor | None,
    cache: dict | None,
) -> tuple[torch.Tensor, dict]:
    """One DecoderLayer (lesson 08) applied to the newest target position only.

    x: [B, 1, D], the layer's input at the newest position t (counted from 1).
    memory_kv: (k_mem, v_mem), each [B, h, S, d_k]: the cross-attention's keys and values,
        split_heads(layer.cross_attn.w_k(memory)) and the same with w_v, computed once.
    src_mask: Bool[B, 1, 1, S] (padding of the source) or None.
    cache: {"k": [B, h, t-1, d_k], "v": [B, h, t-1, d_k]}, the self-attention's keys and
        values of the earlier positions; empty (or None, or holding None) at the first step.
    Returns (out [B, 1, D], cache) with cache["k"] and cache["v"] now [B, h, t, d_k]: out
    equals the last position of layer(x_1..t, memory, src_mask, causal_mask(t)).
    Post-LN or Pre-LN as layer.norm_first says; dropout does nothing in eval mode.
    """
    ### BEGIN SOLUTION
    cache = {} if cache is None else cache
    k_mem, v_mem = memory_kv  # [B, h, S, d_k] each
    n_heads = k_mem.size(1)

    def self_attention(y: torch.Tensor) -> torch.Tensor:  # [B, 1, D] -> [B, 1, D]
        attn = layer.self_attn
        q = split_heads(attn.w_q(y), n_heads)  # [B, h, 1, d_k]
        k = split_heads(attn.w_k(y), n_heads)  # [B, h, 1, d_k]
        v = split_heads(attn.w_v(y), n_heads)  # [B, h, 1, d_k]
        if cache.get("k") is not None:
            k = torch.cat([cache["k"], k], dim=2)  # [B, h, t, d_k]
            v = torch.cat([cache["v"], v], dim=2)  # [B, h, t, d_k]
        cache["k"], cache["v"] = k, v
        out, _ = scaled_dot_product_attention(q, k, v)  # no mask: the cache holds only the past
        return attn.w_o(merge_heads(out))  # [B, 1, D]

    def cross_attention(y: torch.Tensor) -> torch.Tensor:  # [B, 1, D] -> [B, 1, D]
        attn = layer.cross_attn
        q = split_heads(attn.w_q(y), n_heads)  # [B, h, 1, d_k]
        out, _ = scaled_dot_product_attention(q, k_mem, v_mem, src_mask)  # [B, h, 1, d_k]
        return attn.w_o(merge_heads(out))  # [B, 1, D]

    if layer.norm_first:
        x = x + layer.dropout1(self_attention(layer.norm1(x)))
        x = x + layer.dropout2(cross_attention(layer.norm2(x)))
        x = x + layer.dropout3(layer.ffn(layer.norm3(x)))
    else:
        x = layer.norm1(x + layer.dropout1(self_attention(x)))
        x = layer.norm2(x + layer.dropout2(cross_attention(x)))
        x = layer.norm3(x + layer.dropout3(layer.ffn(x)))
    return x, cache  # [B, 1, D], {"k", "v": [B, h, t, d_k]}
    ### END SOLUTION


@torch.no_grad()
def cached_greedy_decode(
    model: torch.nn.Module,
    src: torch.Tensor,
    src_mask: torch.Tensor | None,
    max_len: int,
    start_symbol: int,
    end_symbol: int | None = None,
) -> torch.Tensor:
    """greedy_decode (lesson 09), computed incrementally with a key/value cache per layer.

    src: Long[B, S] -> Long[B, L] with L <= max_len, starting with start_symbol: the same
    tokens as greedy_decode. The source is encoded once; each decoder layer's memory keys
    and values are computed once; at each step only the newest token is embedded (with its
    position's row of the positional table) and run through every layer with
    decoder_layer_step, then through model.decoder.norm and model.generator.
    Once a row has produced end_symbol it keeps producing it; decoding stops when every
    row has. The caller puts the model in eval mode (dropout off) beforehand: this function
    leaves the model's mode as it is.
    """
    ### BEGIN SOLUTION
    memory = model.encode(src, src_mask)  # [B, S, D]
    layers = list(model.decoder.layers)
    memory_kv = []
    for layer in layers:  # the cross-attention's keys and values, once per layer
        n_heads = layer.self_attn.n_heads
        k_mem = split_heads(layer.cross_attn.w_k(memory), n_heads)  # [B, h, S, d_k]
        v_mem = split_heads(layer.cross_attn.w_v(memory), n_heads)  # [B, h, S, d_k]
        memory_kv.append((k_mem, v_mem))
    caches = [{} for _ in layers]  # one per layer: {"k", "v": [B, h, t, d_k]}
    pe = model.positional.pe  # [max_len, D]
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for t in range(max_len - 1):
        x = model.tgt_embed(ys[:, -1:]) + pe[t]  # the newest token at position t: [B, 1, D]
        for index, layer in enumerate(layers):
            x, caches[index] = decoder_layer_step(layer, x, memory_kv[index], src_mask, caches[index])
        log_probs = model.generator(model.decoder.norm(x[:, -1]))  # [B, V]
        next_token = log_probs.argmax(dim=-1)  # [B]
        if end_symbol is not None:
            next_token = next_token.masked_fill(finished, end_symbol)
            finished |= next_token == end_symbol
        ys = torch.cat([ys, next_token[:, None]], dim=1)  # [B, t + 2]
        if end_symbol is not None and bool(finished.all()):
            break
    return ys
    ### END SOLUTION


def blockwise_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    block_size: int = 64,
) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_k)) v, walking the keys in blocks: the [T_q, T_k] scores never exist.

    q: [..., T_q, d_k], k: [..., T_k, d_k], v: [..., T_k, d_v]; mask: Bool broadcasting against
    [..., T_q, T_k], True where a query may attend to a key, or None. Returns out [..., T_q, d_v],
    equal to scaled_dot_product_attention's output; a query that may attend to no key gets zeros.
    For each query row it keeps a running maximum m, a running sum l of exp(score - m) and a
    running output acc; when a block raises m, the old l and acc are rescaled by exp(m_old - m_new).
    The largest tensor it builds is one block of scores, [..., T_q, block_size].
    """
    ### BEGIN SOLUTION
    scale = 1.0 / math.sqrt(q.size(-1))
    t_k = k.size(-2)
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    rows = (*batch, q.size(-2), 1)
    running_max = q.new_full(rows, float("-inf"))  # m: [..., T_q, 1]
    running_sum = q.new_zeros(rows)  # l: [..., T_q, 1]
    acc = q.new_zeros((*batch, q.size(-2), v.size(-1)))  # [..., T_q, d_v]
    for start in range(0, t_k, block_size):
        end = min(start + block_size, t_k)
        scores = q @ k[..., start:end, :].transpose(-2, -1) * scale  # [..., T_q, b]
        if mask is not None:
            block_mask = mask[..., start:end] if mask.size(-1) > 1 else mask  # a mask may broadcast over keys
            scores = scores.masked_fill(~block_mask, float("-inf"))
        new_max = torch.maximum(running_max, scores.amax(dim=-1, keepdim=True))  # [..., T_q, 1]
        shift = new_max.masked_fill(new_max == float("-inf"), 0.0)  # no key yet: exp(-inf - 0) = 0
        weights = torch.exp(scores - shift)  # [..., T_q, b], masked keys give 0
        rescale = torch.exp(running_max - shift)  # [..., T_q, 1]: exp(m_old - m_new)
        running_sum = running_sum * rescale + weights.sum(dim=-1, keepdim=True)
        acc = acc * rescale + weights @ v[..., start:end, :]
        running_max = new_max
    return acc / running_sum.masked_fill(running_sum == 0, 1.0)  # fully masked rows: 0 / 1 = 0
    ### END SOLUTION
