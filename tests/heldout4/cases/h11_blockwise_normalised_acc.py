# exercise: blockwise_attention
# honest: keeps the running output already normalised (a weighted average) and merges each block's own softmax into it with weights from the running log-sum-exp
# ruff: noqa
def blockwise_attention(q, k, v, mask=None, block_size=64):
    d_k = q.size(-1)
    shape = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    lse = q.new_full((*shape, q.size(-2), 1), float("-inf"))  # log of the running sum of exp(scores)
    out = q.new_zeros((*shape, q.size(-2), v.size(-1)))
    neg_inf = float("-inf")
    for start in range(0, k.size(-2), block_size):
        kb = k[..., start : start + block_size, :]
        vb = v[..., start : start + block_size, :]
        s = torch.matmul(q, kb.transpose(-1, -2)) / math.sqrt(d_k)
        if mask is not None:
            mb = mask if mask.size(-1) == 1 else mask[..., start : start + block_size]
            s = s.masked_fill(~mb, neg_inf)
        block_lse = torch.logsumexp(s, dim=-1, keepdim=True)  # -inf where the block is all masked
        block_out = torch.nan_to_num(torch.softmax(s, dim=-1), nan=0.0) @ vb
        new_lse = torch.logaddexp(lse, block_lse)
        safe = torch.where(torch.isinf(new_lse), torch.zeros_like(new_lse), new_lse)
        out = out * torch.exp(lse - safe) + block_out * torch.exp(block_lse - safe)
        lse = new_lse
    return out
