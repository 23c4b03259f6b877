"""Reference package, lessons 06-08: LayerNorm, feed-forward, encoder and decoder layers and stacks.

Oracles: nn.LayerNorm, nn.TransformerEncoderLayer / nn.TransformerDecoderLayer and
nn.TransformerEncoder / nn.TransformerDecoder (batch_first=True, dropout=0.0) with
their weights copied into ours by autograder/checks/oracles.py. Float64 throughout.
"""

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from autograder.checks.oracles import (
    causal,
    decoder_layer_state,
    encoder_layer_state,
    fastpath_disabled,
    feed_forward_state,
    layer_norm_state,
    load,
    randomize_,
    stack_state,
    torch_attn_mask,
    torch_key_padding_mask,
    torch_layer,
    torch_stack,
)
from solutions import Decoder, DecoderLayer, Encoder, EncoderLayer, LayerNorm, PositionwiseFeedForward

F64 = torch.float64
TIGHT = {"rtol": 1e-10, "atol": 1e-10}


@pytest.fixture(scope="module", autouse=True)
def _no_torch_fastpath():
    # Eval-mode nn.Transformer* layers otherwise take a fused "fast path" (and nested tensors).
    with fastpath_disabled():
        yield


def lengths_to_padding_mask(lengths: torch.Tensor, size: int) -> torch.Tensor:
    """Right-padded sequences -> our padding mask Bool[B, 1, 1, size], True = real token."""
    return (torch.arange(size) < lengths[:, None])[:, None, None, :]


# --- 06 LayerNorm --------------------------------------------------------------------


def test_layer_norm_starts_like_torch_gamma_ones_beta_zeros():
    ours, theirs = LayerNorm(5), nn.LayerNorm(5)
    assert list(ours.state_dict()) == ["gamma", "beta"]
    torch.testing.assert_close(ours.gamma.detach(), theirs.weight.detach(), rtol=0, atol=0)
    torch.testing.assert_close(ours.beta.detach(), theirs.bias.detach(), rtol=0, atol=0)


@pytest.mark.parametrize("eps", [1e-5, 0.1, 1.0])
@pytest.mark.parametrize("shape", [(7,), (3, 7), (2, 3, 7), (2, 2, 3, 7)])
def test_layer_norm_matches_torch(eps, shape):
    # Inputs of variance ~0.1 put eps on the same scale, so eps outside the square
    # root (or missing) and the unbiased variance show up.
    theirs = randomize_(nn.LayerNorm(7, eps=eps, dtype=F64), seed=0)
    ours = load(LayerNorm(7, eps=eps).to(F64), layer_norm_state(theirs))
    x = torch.randn(shape, dtype=F64, generator=torch.Generator().manual_seed(1)) * 0.3
    torch.testing.assert_close(ours(x), theirs(x), **TIGHT)


def test_layer_norm_is_stable_for_a_large_mean_and_a_small_variance():
    # E[x^2] - E[x]^2 loses every digit here (1e12 - 1e12 for a variance of 1e-4).
    theirs = randomize_(nn.LayerNorm(16, dtype=F64), seed=2)
    ours = load(LayerNorm(16).to(F64), layer_norm_state(theirs))
    x = 1e6 + 1e-2 * torch.randn(4, 5, 16, dtype=F64, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-6, atol=1e-6)


# --- 07 PositionwiseFeedForward ----------------------------------------------------


ACTIVATIONS = {"relu": torch.relu, "gelu": lambda t: F.gelu(t, approximate="none")}


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_equals_linear2_of_activation_of_linear1(activation):
    ours = randomize_(PositionwiseFeedForward(6, 24, activation=activation).to(F64), seed=4)
    assert ours.linear1.weight.shape == (24, 6) and ours.linear2.weight.shape == (6, 24)  # D -> d_ff -> D
    x = 2 * torch.randn(
        2, 5, 6, dtype=F64, generator=torch.Generator().manual_seed(9)
    )  # [B, T, D]; wide enough for exact and tanh GELU to differ
    hidden = ACTIVATIONS[activation](F.linear(x, ours.linear1.weight, ours.linear1.bias))  # [B, T, d_ff]
    expected = F.linear(hidden, ours.linear2.weight, ours.linear2.bias)
    torch.testing.assert_close(ours(x), expected, **TIGHT)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_equals_the_feed_forward_block_of_torch_encoder_layer(activation):
    # With its attention output projection set to zero, a Pre-LN torch encoder
    # layer computes x + ffn(norm2(x)): the feed-forward block alone.
    theirs = torch_layer(False, 6, 2, 24, norm_first=True, activation=activation, seed=5, device="cpu")
    with torch.no_grad():
        theirs.self_attn.out_proj.weight.zero_()
        theirs.self_attn.out_proj.bias.zero_()
    theirs.eval()
    ours = load(PositionwiseFeedForward(6, 24, activation=activation).to(F64), feed_forward_state(theirs))
    x = torch.randn(2, 5, 6, dtype=F64, generator=torch.Generator().manual_seed(10))
    with torch.no_grad():
        expected = theirs(x) - x
        torch.testing.assert_close(ours(theirs.norm2(x)), expected, **TIGHT)


@pytest.mark.parametrize("activation", ["tanh", "ReLU", "silu", ""])
def test_feed_forward_rejects_an_unknown_activation(activation):
    with pytest.raises(ValueError, match="activation"):
        PositionwiseFeedForward(4, 8, activation=activation)


# --- 08 Encoder and decoder layers -------------------------------------------------


def attention_keys(prefix):
    return [f"{prefix}.{name}.{kind}" for name in ("w_q", "w_k", "w_v", "w_o") for kind in ("weight", "bias")]


def tail_keys(ffn_and_norms):
    keys = []
    for name in ffn_and_norms:
        kinds = ("gamma", "beta") if name.startswith("norm") else ("weight", "bias")
        keys += [f"{name}.{kind}" for kind in kinds]
    return keys


def test_encoder_layer_state_dict_keys_follow_the_contract():
    keys = list(EncoderLayer(8, 2, 16).state_dict())
    expected = attention_keys("self_attn") + tail_keys(["ffn.linear1", "ffn.linear2", "norm1", "norm2"])
    assert keys == expected


def test_decoder_layer_state_dict_keys_follow_the_contract():
    keys = list(DecoderLayer(8, 2, 16).state_dict())
    expected = (
        attention_keys("self_attn")
        + attention_keys("cross_attn")
        + tail_keys(["ffn.linear1", "ffn.linear2", "norm1", "norm2", "norm3"])
    )
    assert keys == expected


def encoder_layer_pair(d_model, n_heads, d_ff, norm_first, seed=0):
    theirs = torch_layer(False, d_model, n_heads, d_ff, norm_first, seed=seed, device="cpu")
    ours = load(
        EncoderLayer(d_model, n_heads, d_ff, norm_first=norm_first).to(F64), encoder_layer_state(theirs)
    )
    return ours.eval(), theirs.eval()


def decoder_layer_pair(d_model, n_heads, d_ff, norm_first, seed=0):
    theirs = torch_layer(True, d_model, n_heads, d_ff, norm_first, seed=seed, device="cpu")
    ours = load(
        DecoderLayer(d_model, n_heads, d_ff, norm_first=norm_first).to(F64), decoder_layer_state(theirs)
    )
    return ours.eval(), theirs.eval()


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("masks", ["none", "src padding", "causal"])
def test_encoder_layer_matches_torch(norm_first, masks):
    ours, theirs = encoder_layer_pair(8, 2, 16, norm_first, seed=1)
    x = torch.randn(3, 5, 8, dtype=F64, generator=torch.Generator().manual_seed(2))  # [B, T, D]
    if masks == "none":
        ours_mask, torch_masks = None, {}
    elif masks == "src padding":
        ours_mask = lengths_to_padding_mask(torch.tensor([5, 2, 3]), 5)  # [B, 1, 1, T]
        torch_masks = {"src_key_padding_mask": torch_key_padding_mask(ours_mask)}
    else:
        ours_mask = causal(5)
        torch_masks = {"src_mask": torch_attn_mask(ours_mask)}
    with torch.no_grad():
        torch.testing.assert_close(ours(x, ours_mask), theirs(x, **torch_masks), **TIGHT)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("with_masks", [False, True], ids=["no masks", "causal+padding masks"])
def test_decoder_layer_matches_torch(norm_first, with_masks):
    ours, theirs = decoder_layer_pair(8, 4, 16, norm_first, seed=3)
    generator = torch.Generator().manual_seed(4)
    x = torch.randn(3, 4, 8, dtype=F64, generator=generator)  # [B, T_tgt, D]
    memory = torch.randn(3, 6, 8, dtype=F64, generator=generator)  # [B, T_src, D]
    if with_masks:
        src_mask = lengths_to_padding_mask(torch.tensor([6, 1, 4]), 6)  # [B, 1, 1, T_src]
        tgt_padding = lengths_to_padding_mask(torch.tensor([4, 3, 2]), 4)  # [B, 1, 1, T_tgt]
        tgt_mask = tgt_padding & causal(4)  # [B, 1, T_tgt, T_tgt]
        torch_masks = {
            "tgt_mask": torch_attn_mask(causal(4)),
            "tgt_key_padding_mask": torch_key_padding_mask(tgt_padding),
            "memory_key_padding_mask": torch_key_padding_mask(src_mask),
        }
    else:
        src_mask = tgt_mask = None
        torch_masks = {}
    with torch.no_grad():
        out = ours(x, memory, src_mask, tgt_mask)
        torch.testing.assert_close(out, theirs(x, memory, **torch_masks), **TIGHT)


@settings(max_examples=15, deadline=None)
@given(
    batch=st.integers(2, 3),
    n_heads=st.integers(2, 4),
    d_k=st.integers(1, 4),
    t_src=st.integers(1, 6),
    t_tgt=st.integers(1, 6),
    norm_first=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_encoder_and_decoder_layers_match_torch_on_random_shapes(
    batch, n_heads, d_k, t_src, t_tgt, norm_first, seed
):
    d_model = n_heads * d_k
    generator = torch.Generator().manual_seed(seed)
    src = torch.randn(batch, t_src, d_model, dtype=F64, generator=generator)
    tgt = torch.randn(batch, t_tgt, d_model, dtype=F64, generator=generator)
    src_mask = lengths_to_padding_mask(torch.randint(1, t_src + 1, (batch,), generator=generator), t_src)
    src_padding = torch_key_padding_mask(src_mask)

    ours, theirs = encoder_layer_pair(d_model, n_heads, 2 * d_model, norm_first, seed=seed)
    with torch.no_grad():
        memory = theirs(src, src_key_padding_mask=src_padding)
        torch.testing.assert_close(ours(src, src_mask), memory, **TIGHT)

    ours, theirs = decoder_layer_pair(d_model, n_heads, 2 * d_model, norm_first, seed=seed + 1)
    with torch.no_grad():
        expected = theirs(
            tgt, memory, tgt_mask=torch_attn_mask(causal(t_tgt)), memory_key_padding_mask=src_padding
        )
        torch.testing.assert_close(ours(tgt, memory, src_mask, causal(t_tgt)), expected, **TIGHT)


# --- 08 Encoder and decoder stacks -------------------------------------------------


def test_encoder_and_decoder_hold_n_layers_in_a_module_list_and_a_final_norm():
    for stack in (Encoder(8, 2, 16, n_layers=3), Decoder(8, 2, 16, n_layers=3)):
        assert isinstance(stack.layers, nn.ModuleList) and len(stack.layers) == 3
        assert list(stack.state_dict())[-2:] == ["norm.gamma", "norm.beta"]
        assert stack.layers[0] is not stack.layers[1], "each layer needs its own weights"


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_encoder_stack_matches_torch_transformer_encoder(norm_first):
    theirs = torch_stack(torch_layer(False, 8, 2, 16, norm_first, seed=None, device="cpu"), 3, seed=5)
    ours = load(Encoder(8, 2, 16, n_layers=3, norm_first=norm_first).to(F64), stack_state(theirs))
    ours.eval()
    theirs.eval()
    x = torch.randn(3, 5, 8, dtype=F64, generator=torch.Generator().manual_seed(6))
    src_mask = lengths_to_padding_mask(torch.tensor([5, 1, 3]), 5)
    with torch.no_grad():
        expected = theirs(x, src_key_padding_mask=torch_key_padding_mask(src_mask))
        torch.testing.assert_close(ours(x, src_mask), expected, **TIGHT)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_decoder_stack_matches_torch_transformer_decoder(norm_first):
    theirs = torch_stack(torch_layer(True, 8, 2, 16, norm_first, seed=None, device="cpu"), 3, seed=7)
    ours = load(Decoder(8, 2, 16, n_layers=3, norm_first=norm_first).to(F64), stack_state(theirs))
    ours.eval()
    theirs.eval()
    generator = torch.Generator().manual_seed(8)
    x = torch.randn(3, 4, 8, dtype=F64, generator=generator)  # [B, T_tgt, D]
    memory = torch.randn(3, 6, 8, dtype=F64, generator=generator)  # [B, T_src, D]
    src_mask = lengths_to_padding_mask(torch.tensor([6, 2, 5]), 6)
    tgt_padding = lengths_to_padding_mask(torch.tensor([4, 4, 2]), 4)
    with torch.no_grad():
        expected = theirs(
            x,
            memory,
            tgt_mask=torch_attn_mask(causal(4)),
            tgt_key_padding_mask=torch_key_padding_mask(tgt_padding),
            memory_key_padding_mask=torch_key_padding_mask(src_mask),
        )
        out = ours(x, memory, src_mask, tgt_padding & causal(4))
        torch.testing.assert_close(out, expected, **TIGHT)
