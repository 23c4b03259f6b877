# exercise: blockwise_attention
# honest: torch.split over the keys, running log-sum-exp per row, output renormalised at every block
# ruff: noqa
def blockwise_attention(q, k, v, mask=None, block_size=64):
    scale = q.size(-1) ** -0.5
    batch = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    lse = q.new_full((*batch, q.size(-2), 1), float("-inf"))  # log of the running sum of exp(scores)
    out = q.new_zeros((*batch, q.size(-2), v.size(-1)))  # running softmax-weighted mean
    k_blocks = torch.split(k, block_size, dim=-2)
    v_blocks = torch.split(v, block_size, dim=-2)
    start = 0
    for kb, vb in zip(k_blocks, v_blocks):
        end = start + kb.size(-2)
        s = (q @ kb.transpose(-2, -1)) * scale
        if mask is not None:
            mb = mask[..., start:end] if mask.size(-1) != 1 else mask
            s = s.masked_fill(~mb, float("-inf"))
        block_lse = torch.logsumexp(s, dim=-1, keepdim=True)  # -inf where the block is fully masked
        new_lse = torch.logaddexp(lse, block_lse)
        finite = torch.isfinite(new_lse)
        safe = torch.where(finite, new_lse, torch.zeros_like(new_lse))
        old_share = torch.where(finite, torch.exp(lse - safe), torch.zeros_like(lse))
        p = torch.where(finite, torch.exp(s - safe), torch.zeros_like(s))
        out = out * old_share + p @ vb
        lse = new_lse
        start = end
    return out
