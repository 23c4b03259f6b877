"""Alternative correct implementations of lesson 11's decoder_layer_step, cached_greedy_decode and
blockwise_attention."""

import math

import torch
import torch.nn.functional as F

from solutions.efficiency import decoder_layer_step

# --- decoder_layer_step ----------------------------------------------------------------


def step_fused_attention(layer, x, memory_kv, src_mask, cache):
    """PyTorch's fused attention, the heads read from the self-attention module, the caller's dict
    updated in place (and returned), the three sub-layers as a list of (norm, function) pairs."""
    n_heads = layer.self_attn.n_heads
    batch, _, d_model = x.shape

    def heads(t):  # [B, 1, D] -> [B, h, 1, d_k]
        return t.reshape(batch, -1, n_heads, d_model // n_heads).permute(0, 2, 1, 3)

    def merged(t):  # [B, h, 1, d_k] -> [B, 1, D]
        return t.permute(0, 2, 1, 3).reshape(batch, -1, d_model)

    def self_attention(h):
        q, k, v = heads(layer.self_attn.w_q(h)), heads(layer.self_attn.w_k(h)), heads(layer.self_attn.w_v(h))
        if "k" in cache and cache["k"] is not None:
            k, v = torch.cat((cache["k"], k), dim=-2), torch.cat((cache["v"], v), dim=-2)
        cache.update(k=k, v=v)
        return layer.self_attn.w_o(merged(F.scaled_dot_product_attention(q, k, v)))

    def cross_attention(h):
        q = heads(layer.cross_attn.w_q(h))
        k_mem, v_mem = memory_kv
        return layer.cross_attn.w_o(
            merged(F.scaled_dot_product_attention(q, k_mem, v_mem, attn_mask=src_mask))
        )

    steps = [(layer.norm1, self_attention), (layer.norm2, cross_attention), (layer.norm3, layer.ffn)]
    for norm, sublayer in steps:
        x = x + sublayer(norm(x)) if layer.norm_first else norm(x + sublayer(x))
    return x, cache


def step_einsum(layer, x, memory_kv, src_mask, cache):
    """Keys and values projected together with one matmul of the stacked weights, attention
    written with einsum and a softmax, a new dict returned (the caller's left as it was)."""
    k_mem, v_mem = memory_kv
    n_heads, d_k = k_mem.shape[1], k_mem.shape[3]
    attn = layer.self_attn
    weight = torch.cat([attn.w_k.weight, attn.w_v.weight], dim=0)  # [2D, D]
    bias = torch.cat([attn.w_k.bias, attn.w_v.bias], dim=0)

    def split(t):
        return t.view(t.size(0), t.size(1), n_heads, d_k).transpose(1, 2)

    def attend(q, k, v, mask=None):
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d_k)
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), float("-inf"))
        return torch.einsum("bhqk,bhkd->bhqd", torch.softmax(scores, dim=-1), v)

    def merge(t):
        return t.transpose(1, 2).reshape(t.size(0), t.size(2), n_heads * d_k)

    new_cache = {}

    def self_attention(h):
        k, v = F.linear(h, weight, bias).chunk(2, dim=-1)
        k, v = split(k), split(v)
        if cache and cache.get("k") is not None:
            k, v = torch.cat([cache["k"], k], 2), torch.cat([cache["v"], v], 2)
        new_cache["k"], new_cache["v"] = k, v
        return attn.w_o(merge(attend(split(attn.w_q(h)), k, v)))

    def cross_attention(h):
        return layer.cross_attn.w_o(merge(attend(split(layer.cross_attn.w_q(h)), k_mem, v_mem, src_mask)))

    if layer.norm_first:
        x = x + self_attention(layer.norm1(x))
        x = x + cross_attention(layer.norm2(x))
        x = x + layer.ffn(layer.norm3(x))
    else:
        x = layer.norm1(x + self_attention(x))
        x = layer.norm2(x + cross_attention(x))
        x = layer.norm3(x + layer.ffn(x))
    return x, new_cache


# --- cached_greedy_decode --------------------------------------------------------------


@torch.no_grad()
def cached_greedy_position_from_length(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    """The position read from the length of ys, the table sliced [t : t + 1], the generator applied
    to [B, 1, D], memory keys and values from the cross-attention's weights with F.linear, a while loop."""
    memory = model.encode(src, src_mask)
    layers = [layer for layer in model.decoder.layers]
    memory_kv = []
    for layer in layers:
        n_heads = layer.self_attn.n_heads
        batch, length, d_model = memory.shape
        kv = []
        for linear in (layer.cross_attn.w_k, layer.cross_attn.w_v):
            projected = F.linear(memory, linear.weight, linear.bias)
            kv.append(projected.view(batch, length, n_heads, d_model // n_heads).transpose(1, 2))
        memory_kv.append(tuple(kv))
    caches = [dict() for _ in layers]
    ys = torch.full((src.shape[0], 1), start_symbol, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    while ys.shape[1] < max_len:
        t = ys.shape[1] - 1
        x = model.tgt_embed(ys[:, t:]) + model.positional.pe[t : t + 1]
        for i, layer in enumerate(layers):
            x, caches[i] = decoder_layer_step(layer, x, memory_kv[i], src_mask, caches[i])
        next_token = model.generator(model.decoder.norm(x))[:, 0].argmax(-1)
        if end_symbol is not None:
            next_token = torch.where(done, torch.full_like(next_token, end_symbol), next_token)
            done = done | next_token.eq(end_symbol)
        ys = torch.cat((ys, next_token.unsqueeze(1)), dim=1)
        if end_symbol is not None and done.all():
            break
    return ys


@torch.no_grad()
def cached_greedy_token_list(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    """Tokens kept as Python lists and turned into a tensor at the end; each layer's state kept as
    a [layer, memory keys and values, cache] triple; the loop counts steps with range."""
    memory = model.encode(src, src_mask)
    state = []
    for layer in model.decoder.layers:
        h = layer.self_attn.n_heads
        k = layer.cross_attn.w_k(memory)
        v = layer.cross_attn.w_v(memory)
        shape = (memory.size(0), memory.size(1), h, memory.size(2) // h)
        state.append([layer, (k.reshape(shape).transpose(1, 2), v.reshape(shape).transpose(1, 2)), {}])
    rows = [[start_symbol] for _ in range(src.size(0))]
    finished = [False] * src.size(0)
    for step in range(max_len - 1):
        last = torch.tensor([[row[-1]] for row in rows], dtype=torch.long, device=src.device)
        x = model.tgt_embed(last) + model.positional.pe[step]
        for entry in state:
            x, entry[2] = decoder_layer_step(entry[0], x, entry[1], src_mask, entry[2])
        best = model.generator(model.decoder.norm(x[:, 0])).argmax(dim=-1).tolist()
        for r, token in enumerate(best):
            token = end_symbol if finished[r] else token
            rows[r].append(token)
            finished[r] = finished[r] or (end_symbol is not None and token == end_symbol)
        if end_symbol is not None and all(finished):
            break
    return torch.tensor(rows, dtype=torch.long, device=src.device)


# --- blockwise_attention ---------------------------------------------------------------


def blockwise_log_sum_exp(q, k, v, mask=None, block_size=64):
    """The blocks walked from the last to the first, each normalised on its own (its own softmax and
    log-sum-exp), merged through the running log-sum-exp with torch.logaddexp, einsum for products."""
    t_k = k.size(-2)
    lse = torch.full((*q.shape[:-1], 1), -math.inf, dtype=q.dtype, device=q.device)  # [..., T_q, 1]
    out = torch.zeros((*q.shape[:-1], v.size(-1)), dtype=q.dtype, device=q.device)
    for start in reversed(range(0, t_k, block_size)):
        keys = slice(start, start + block_size)
        scores = torch.einsum("...qd,...kd->...qk", q, k[..., keys, :]) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = torch.where(mask[..., keys] if mask.size(-1) > 1 else mask, scores, -math.inf)
        block_lse = torch.logsumexp(scores, dim=-1, keepdim=True)  # -inf where the block has no key
        block_out = torch.einsum(
            "...qk,...kd->...qd", torch.exp(scores - torch.nan_to_num(block_lse, neginf=0.0)), v[..., keys, :]
        )
        new_lse = torch.logaddexp(lse, block_lse)
        safe = torch.nan_to_num(new_lse, neginf=0.0)
        out = out * torch.exp(lse - safe) + block_out * torch.exp(block_lse - safe)
        lse = new_lse
    return out


def blockwise_query_tiles(q, k, v, mask=None, block_size=64):
    """Tiles of queries as well as keys (FlashAttention's two loops), the mask expanded as a view and
    sliced per tile, torch.where for the guards, the finished query tiles concatenated."""
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    t_q, t_k = q.size(-2), k.size(-2)
    if mask is not None:
        mask = mask.expand(*batch, t_q, t_k)  # a view: no [T_q, T_k] memory of its own
    tiles = []
    for q_start in range(0, t_q, block_size):
        rows = slice(q_start, min(q_start + block_size, t_q))
        tile = q[..., rows, :] / math.sqrt(q.size(-1))
        best = torch.full((*batch, tile.size(-2), 1), -math.inf, dtype=q.dtype, device=q.device)
        total = torch.zeros_like(best)
        acc = torch.zeros((*batch, tile.size(-2), v.size(-1)), dtype=q.dtype, device=q.device)
        for k_start in range(0, t_k, block_size):
            cols = slice(k_start, min(k_start + block_size, t_k))
            scores = tile @ k[..., cols, :].mT
            if mask is not None:
                scores = torch.where(mask[..., rows, cols], scores, -math.inf)
            new_best = torch.maximum(best, scores.amax(dim=-1, keepdim=True))
            shift = torch.where(torch.isinf(new_best), torch.zeros_like(new_best), new_best)
            weights = torch.exp(scores - shift)
            factor = torch.exp(best - shift)
            total = factor * total + weights.sum(dim=-1, keepdim=True)
            acc = factor * acc + weights @ v[..., cols, :]
            best = new_best
        tiles.append(torch.where(total > 0, acc / total.clamp_min(torch.finfo(q.dtype).tiny), 0.0))
    return torch.cat(tiles, dim=-2)


ALTERNATIVES = {
    "decoder_layer_step": [step_fused_attention, step_einsum],
    "cached_greedy_decode": [cached_greedy_position_from_length, cached_greedy_token_list],
    "blockwise_attention": [blockwise_log_sum_exp, blockwise_query_tiles],
}
