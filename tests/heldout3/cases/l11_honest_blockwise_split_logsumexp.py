# exercise: blockwise_attention
# honest: torch.split over the keys, values and mask; each block's partial result merged through its log-sum-exp
# ruff: noqa
def blockwise_attention(q, k, v, mask=None, block_size=64):
    q = q / math.sqrt(q.size(-1))
    k_blocks = torch.split(k, block_size, dim=-2)
    v_blocks = torch.split(v, block_size, dim=-2)
    if mask is None:
        m_blocks = [None] * len(k_blocks)
    elif mask.size(-1) == 1:
        m_blocks = [mask] * len(k_blocks)
    else:
        m_blocks = torch.split(mask, block_size, dim=-1)
    lse = None  # log of the running sum of exp(scores): [..., T_q, 1]
    out = None  # the running output, already normalised
    for kb, vb, mb in zip(k_blocks, v_blocks, m_blocks):
        s = q @ kb.transpose(-2, -1)
        if mb is not None:
            s = s.masked_fill(~mb, float("-inf"))
        block_lse = torch.logsumexp(s, dim=-1, keepdim=True)  # -inf where the block is fully masked
        finite = torch.isfinite(block_lse)
        w = torch.exp(s - torch.where(finite, block_lse, torch.zeros_like(block_lse)))
        block_out = w @ vb
        if lse is None:
            lse, out = block_lse, block_out
            continue
        new_lse = torch.logaddexp(lse, block_lse)
        ok = torch.isfinite(new_lse)
        base = torch.where(ok, new_lse, torch.zeros_like(new_lse))
        out = out * torch.exp(lse - base) + block_out * torch.exp(block_lse - base)
        lse = new_lse
    return out
