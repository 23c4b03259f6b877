"""Reference package, lessons 03 and 05: scaled dot-product attention and multi-head attention.

Oracles: torch.nn.functional.scaled_dot_product_attention (same mask convention:
True = may attend) and nn.MultiheadAttention (opposite convention: attn_mask
True = not allowed, key_padding_mask True = padding). Float64 throughout.
"""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from autograder.checks.oracles import (
    fastpath_disabled,
    load,
    mha_state,
    torch_attn_mask,
    torch_key_padding_mask,
    torch_mha,
)
from solutions import MultiHeadAttention, scaled_dot_product_attention

F64 = torch.float64
TIGHT = {"rtol": 1e-10, "atol": 1e-12}


@pytest.fixture(scope="module", autouse=True)
def _no_torch_fastpath():
    with fastpath_disabled():
        yield


def torch_sdpa(q, k, v, mask=None):
    """PyTorch's output and attention weights [..., T_q, T_k].

    The weights come from torch too: attention applied to v = identity [T_k, T_k]
    returns the weight matrix itself.
    """
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    t_k = k.size(-2)
    identity = torch.eye(t_k, dtype=k.dtype).expand(*k.shape[:-2], t_k, t_k)
    weights = F.scaled_dot_product_attention(q, k, identity, attn_mask=mask)
    return out, weights


def random_qkv(batch_shape, t_q, t_k, d_k, d_v, seed=0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(*batch_shape, t_q, d_k, dtype=F64, generator=generator)
    k = torch.randn(*batch_shape, t_k, d_k, dtype=F64, generator=generator)
    v = torch.randn(*batch_shape, t_k, d_v, dtype=F64, generator=generator)
    return q, k, v


def random_mask(shape, seed=0, p=0.6):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=generator) < p


# --- 03 scaled_dot_product_attention against F.scaled_dot_product_attention --------

B, H, T_Q, T_K, D_K, D_V = 2, 3, 4, 6, 5, 7  # T_q != T_k and d_k != d_v on purpose


def test_sdpa_without_mask_matches_torch():
    q, k, v = random_qkv((B, H), T_Q, T_K, D_K, D_V)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (B, H, T_Q, D_V)
    assert weights.shape == (B, H, T_Q, T_K)
    expected_out, expected_weights = torch_sdpa(q, k, v)
    torch.testing.assert_close(out, expected_out, **TIGHT)
    torch.testing.assert_close(weights, expected_weights, **TIGHT)


def test_sdpa_scales_by_sqrt_d_k_not_d_v():
    # Large scores make the scale matter; d_k = 16 and d_v = 1 tell sqrt(d_k) from sqrt(d_v) or none.
    q, k, v = random_qkv((2,), 3, 5, 16, 1, seed=7)
    out, _ = scaled_dot_product_attention(q * 3, k, v)
    torch.testing.assert_close(out, torch_sdpa(q * 3, k, v)[0], **TIGHT)


@pytest.mark.parametrize(
    "mask_shape",
    [(T_Q, T_K), (B, 1, 1, T_K), (B, 1, T_Q, T_K), (B, H, T_Q, T_K), (1, H, 1, T_K)],
    ids=["[T_q,T_k]", "[B,1,1,T_k]", "[B,1,T_q,T_k]", "[B,h,T_q,T_k]", "[1,h,1,T_k]"],
)
def test_sdpa_with_a_broadcast_boolean_mask_matches_torch(mask_shape):
    q, k, v = random_qkv((B, H), T_Q, T_K, D_K, D_V, seed=1)
    mask = random_mask(mask_shape, seed=2)
    mask[..., 0] = True  # every row keeps a key (fully masked rows have their own test)
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    expected_out, expected_weights = torch_sdpa(q, k, v, mask)
    assert out.shape == (B, H, T_Q, D_V)
    assert weights.shape == (B, H, T_Q, T_K)
    torch.testing.assert_close(out, expected_out, **TIGHT)
    torch.testing.assert_close(weights, expected_weights, **TIGHT)
    assert not weights.masked_select(~mask.expand_as(weights)).any(), "masked keys must get weight 0"


def test_sdpa_with_a_causal_mask_matches_torch_is_causal():
    q, k, v = random_qkv((B, H), 5, 5, D_K, D_V, seed=3)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    out, _ = scaled_dot_product_attention(q, k, v, causal)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), **TIGHT)


def fully_masked_case():
    q, k, v = random_qkv((B, H), T_Q, T_K, D_K, D_V, seed=4)
    mask = random_mask((B, 1, T_Q, T_K), seed=5)
    mask[..., 0] = True
    mask[0, 0, 1] = False  # batch 0, query 1: every key masked
    mask[1, 0, 3] = False  # batch 1, query 3
    return q, k, v, mask


def test_sdpa_fully_masked_rows_give_zero_weights_and_zero_output_not_nan():
    q, k, v, mask = fully_masked_case()
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not out.isnan().any() and not weights.isnan().any()
    assert torch.equal(out[0, :, 1], torch.zeros(H, D_V, dtype=F64))
    assert torch.equal(out[1, :, 3], torch.zeros(H, D_V, dtype=F64))
    assert torch.equal(weights[0, :, 1], torch.zeros(H, T_K, dtype=F64))
    assert torch.equal(weights[1, :, 3], torch.zeros(H, T_K, dtype=F64))


def test_sdpa_fully_masked_rows_match_torch_which_returns_zeros():
    # In PyTorch 2.13 F.scaled_dot_product_attention returns 0 (not NaN) for a fully
    # masked query row, on CPU in float64 and float32, and its gradients there are 0.
    # (nn.MultiheadAttention, by contrast, returns NaN for such a row.)
    q, k, v, mask = fully_masked_case()
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    expected_out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert torch.equal(expected_out[0, :, 1], torch.zeros(H, D_V, dtype=F64)), "torch's own behaviour changed"
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(out, expected_out, **TIGHT)

    upstream = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), upstream)
    expected_grads = torch.autograd.grad(expected_out, (q, k, v), upstream)
    for name, grad, expected in zip("qkv", grads, expected_grads, strict=True):
        assert not grad.isnan().any(), f"NaN in the gradient of {name}"
        torch.testing.assert_close(grad, expected, **TIGHT, msg=lambda m, n=name: f"grad of {n}: {m}")


def test_sdpa_weight_rows_sum_to_one_or_zero_when_fully_masked():
    q, k, v, mask = fully_masked_case()
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    row_sums = weights.sum(dim=-1)  # [B, h, T_q]
    expected = mask.any(dim=-1).expand_as(row_sums).to(F64)  # 1 where some key is allowed, else 0
    torch.testing.assert_close(row_sums, expected, **TIGHT)
    assert (weights >= 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_sdpa_rejects_a_non_boolean_mask(dtype):
    q, k, v = random_qkv((B,), T_Q, T_K, D_K, D_V)
    mask = torch.ones(T_Q, T_K, dtype=dtype)
    with pytest.raises(TypeError, match="bool"):
        scaled_dot_product_attention(q, k, v, mask)


@pytest.mark.parametrize(
    "mask_shape",
    [(T_Q + 1, T_K), (T_Q, T_K - 1), (B + 1, 1, 1, T_K), (H, B, T_Q, T_K)],
    ids=["wrong T_q", "wrong T_k", "wrong B", "grows the scores"],
)
def test_sdpa_rejects_a_mask_that_does_not_broadcast_to_the_scores(mask_shape):
    q, k, v = random_qkv((B,), T_Q, T_K, D_K, D_V)  # scores [B, T_q, T_k]
    with pytest.raises(ValueError, match="broadcast"):
        scaled_dot_product_attention(q, k, v, torch.ones(mask_shape, dtype=torch.bool))


@settings(max_examples=25, deadline=None)
@given(
    batch_shape=st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple),
    t_q=st.integers(1, 6),
    t_k=st.integers(1, 6),
    d_k=st.integers(1, 8),
    d_v=st.integers(1, 8),
    mask_kind=st.sampled_from(["none", "full", "[T_q,T_k]", "keys only"]),
    seed=st.integers(0, 2**16),
)
def test_sdpa_matches_torch_on_random_shapes(batch_shape, t_q, t_k, d_k, d_v, mask_kind, seed):
    q, k, v = random_qkv(batch_shape, t_q, t_k, d_k, d_v, seed=seed)
    mask_shapes = {
        "none": None,
        "full": (*batch_shape, t_q, t_k),
        "[T_q,T_k]": (t_q, t_k),
        "keys only": (*batch_shape, 1, t_k),
    }
    shape = mask_shapes[mask_kind]
    mask = None if shape is None else random_mask(shape, seed=seed + 1)  # may mask whole rows
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    expected_out, expected_weights = torch_sdpa(q, k, v, mask)
    torch.testing.assert_close(out, expected_out, **TIGHT)
    torch.testing.assert_close(weights, expected_weights, **TIGHT)


# --- 05 MultiHeadAttention against nn.MultiheadAttention ---------------------------


def mha_pair(d_model, n_heads, seed=0):
    """(ours, theirs): our MultiHeadAttention holding the weights of a random nn.MultiheadAttention."""
    torch.manual_seed(seed)
    theirs = torch_mha(d_model, n_heads, seed=seed, device="cpu")  # random biases: are they copied?
    ours = load(MultiHeadAttention(d_model, n_heads).to(F64), mha_state(theirs))
    return ours.eval(), theirs.eval()


def torch_outputs(theirs, query, key, value, **masks):
    """theirs' output [B, T_q, D] and per-head weights [B, h, T_q, T_k]."""
    return theirs(query, key, value, need_weights=True, average_attn_weights=False, **masks)


def test_mha_state_dict_has_w_q_w_k_w_v_w_o_in_order():
    keys = list(MultiHeadAttention(8, 2).state_dict())
    expected = [f"{name}.{kind}" for name in ("w_q", "w_k", "w_v", "w_o") for kind in ("weight", "bias")]
    assert keys == expected


def test_mha_has_as_many_parameters_as_torch():
    ours = MultiHeadAttention(12, 3)
    theirs = nn.MultiheadAttention(12, 3)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())


@pytest.mark.parametrize(("d_model", "n_heads"), [(10, 3), (8, 3), (6, 4)])
def test_mha_rejects_d_model_not_divisible_by_n_heads(d_model, n_heads):
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(d_model, n_heads)


def test_mha_self_attention_without_mask_matches_torch():
    ours, theirs = mha_pair(12, 3)
    x = torch.randn(2, 5, 12, dtype=F64)  # [B, T, D]
    out = ours(x, x, x)
    expected_out, expected_weights = torch_outputs(theirs, x, x, x)
    assert out.shape == (2, 5, 12)
    torch.testing.assert_close(out, expected_out, **TIGHT)
    assert ours.attn.shape == (2, 3, 5, 5)  # [B, h, T_q, T_k]
    torch.testing.assert_close(ours.attn, expected_weights, **TIGHT)


def test_mha_cross_attention_with_key_padding_matches_torch():
    ours, theirs = mha_pair(8, 2, seed=1)
    query = torch.randn(3, 4, 8, dtype=F64)  # [B, T_q, D]
    memory = torch.randn(3, 6, 8, dtype=F64)  # [B, T_k, D]
    lengths = torch.tensor([6, 2, 4])
    mask = (torch.arange(6) < lengths[:, None])[:, None, None, :]  # [B, 1, 1, T_k], True = real key
    out = ours(query, memory, memory, mask)
    expected_out, expected_weights = torch_outputs(
        theirs, query, memory, memory, key_padding_mask=torch_key_padding_mask(mask)
    )
    torch.testing.assert_close(out, expected_out, **TIGHT)
    torch.testing.assert_close(ours.attn, expected_weights, **TIGHT)


def test_mha_with_a_causal_mask_matches_torch():
    ours, theirs = mha_pair(8, 4, seed=2)
    x = torch.randn(2, 5, 8, dtype=F64)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()  # [T, T], True = may attend
    out = ours(x, x, x, causal)
    expected_out, expected_weights = torch_outputs(theirs, x, x, x, attn_mask=torch_attn_mask(causal))
    torch.testing.assert_close(out, expected_out, **TIGHT)
    torch.testing.assert_close(ours.attn, expected_weights, **TIGHT)


def test_mha_with_a_per_head_mask_matches_torch():
    ours, theirs = mha_pair(6, 2, seed=3)
    query, key = torch.randn(2, 3, 6, dtype=F64), torch.randn(2, 5, 6, dtype=F64)
    mask = random_mask((2, 2, 3, 5), seed=6)  # [B, h, T_q, T_k]
    mask[..., 0] = True
    torch_mask = torch_attn_mask(mask).reshape(2 * 2, 3, 5)  # torch wants [B * h, T_q, T_k]
    out = ours(query, key, key, mask)
    expected_out, expected_weights = torch_outputs(theirs, query, key, key, attn_mask=torch_mask)
    torch.testing.assert_close(out, expected_out, **TIGHT)
    torch.testing.assert_close(ours.attn, expected_weights, **TIGHT)


def test_mha_fully_masked_query_row_gives_zero_weights_and_the_output_bias():
    # nn.MultiheadAttention returns NaN for such a row; the course's convention is zero
    # attention, so the output is w_o applied to a zero vector: its bias.
    ours, theirs = mha_pair(8, 2, seed=4)
    x = torch.randn(2, 4, 8, dtype=F64)
    mask = torch.ones(2, 1, 4, 4, dtype=torch.bool)
    mask[1, 0, 2] = False  # batch 1, query 2 sees nothing
    out = ours(x, x, x, mask)
    assert not out.isnan().any()
    torch.testing.assert_close(out[1, 2], theirs.out_proj.bias.detach(), **TIGHT)
    assert torch.equal(ours.attn[1, :, 2], torch.zeros(2, 4, dtype=F64))
    expected_out, _ = torch_outputs(theirs, x, x, x)  # the other rows are unaffected by that mask
    torch.testing.assert_close(out[0], expected_out[0], **TIGHT)


@settings(max_examples=20, deadline=None)
@given(
    batch=st.integers(2, 3),
    n_heads=st.integers(2, 4),
    d_k=st.integers(1, 4),
    t_q=st.integers(1, 6),
    t_k=st.integers(1, 6),
    self_attention=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_mha_matches_torch_on_random_shapes(batch, n_heads, d_k, t_q, t_k, self_attention, seed):
    d_model = n_heads * d_k
    ours, theirs = mha_pair(d_model, n_heads, seed=seed)
    generator = torch.Generator().manual_seed(seed)
    t_k = t_q if self_attention else t_k
    query = torch.randn(batch, t_q, d_model, dtype=F64, generator=generator)
    key = query if self_attention else torch.randn(batch, t_k, d_model, dtype=F64, generator=generator)
    lengths = torch.randint(1, t_k + 1, (batch,), generator=generator)  # at least one real key per row
    mask = (torch.arange(t_k) < lengths[:, None])[:, None, None, :]  # [B, 1, 1, T_k]
    out = ours(query, key, key, mask)
    expected_out, expected_weights = torch_outputs(
        theirs, query, key, key, key_padding_mask=torch_key_padding_mask(mask)
    )
    torch.testing.assert_close(out, expected_out, **TIGHT)
    torch.testing.assert_close(ours.attn, expected_weights, **TIGHT)
