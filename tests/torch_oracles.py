"""PyTorch's own modules as oracles: copy their weights into the course's modules.

Each ``*_state`` function maps the parameters of a PyTorch module to the state-dict
keys that the course contract names (docs/contract.md), in the contract's
order; each ``copy_*`` function loads that state into one of our modules with
``strict=True`` and returns it. Only names from the contract are used (``w_q``,
``gamma``, ``ffn.linear1``, ``layers``, ``norm``...), so the helpers work for a
learner's implementation as well as for the reference package.

Mask conventions differ: ours are True where a query *may attend*, while
``nn.MultiheadAttention`` and the ``nn.Transformer*`` layers take ``attn_mask``
True where attending is *not allowed* and ``key_padding_mask`` True at padding.
``to_torch_attn_mask`` and ``to_torch_key_padding_mask`` convert.

PyTorch's inference "fast path" (eval mode, no grad) turns a padded batch into a
nested tensor in ``nn.TransformerEncoder`` and zeroes padded positions; compare
under ``torch_fastpath_disabled()`` (and build encoders with
``enable_nested_tensor=False``).
"""

import contextlib
import math
from collections.abc import Iterator

import torch
from torch import nn

Tensor = torch.Tensor
State = dict[str, Tensor]


def _prefixed(prefix: str, state: State) -> State:
    return {f"{prefix}.{key}": value for key, value in state.items()}


def _detached(state: State) -> State:
    return {key: value.detach().clone() for key, value in state.items()}


def linear_state(linear: nn.Linear) -> State:
    """nn.Linear -> {weight, bias}."""
    if linear.bias is None:
        raise ValueError("the course's linear layers have a bias; build the torch module with bias=True")
    return _detached({"weight": linear.weight, "bias": linear.bias})


def layer_norm_state(norm: nn.LayerNorm) -> State:
    """nn.LayerNorm -> {gamma, beta} (our LayerNorm's parameter names)."""
    if norm.weight is None or norm.bias is None:
        raise ValueError("our LayerNorm has gamma and beta; build nn.LayerNorm with elementwise_affine=True")
    return _detached({"gamma": norm.weight, "beta": norm.bias})


def mha_state(mha: nn.MultiheadAttention) -> State:
    """nn.MultiheadAttention -> {w_q, w_k, w_v, w_o}.{weight, bias}.

    PyTorch packs the three input projections into in_proj_weight [3D, D] and
    in_proj_bias [3D], in the order q, k, v; out_proj is w_o.
    """
    if mha.in_proj_weight is None:
        raise ValueError("need kdim == vdim == embed_dim (a packed in_proj_weight)")
    if mha.in_proj_bias is None:
        raise ValueError("need bias=True")
    if mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError("add_bias_kv and add_zero_attn have no counterpart in the course's module")
    w_q, w_k, w_v = mha.in_proj_weight.chunk(3, dim=0)  # 3 x [D, D]
    b_q, b_k, b_v = mha.in_proj_bias.chunk(3, dim=0)  # 3 x [D]
    state = {
        "w_q.weight": w_q,
        "w_q.bias": b_q,
        "w_k.weight": w_k,
        "w_k.bias": b_k,
        "w_v.weight": w_v,
        "w_v.bias": b_v,
    }
    state.update(_prefixed("w_o", linear_state(mha.out_proj)))
    return _detached(state)


def feed_forward_state(layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer) -> State:
    """The feed-forward part of a torch Transformer layer -> {linear1, linear2}.{weight, bias}."""
    return {
        **_prefixed("linear1", linear_state(layer.linear1)),
        **_prefixed("linear2", linear_state(layer.linear2)),
    }


def encoder_layer_state(layer: nn.TransformerEncoderLayer) -> State:
    """nn.TransformerEncoderLayer -> our EncoderLayer: self_attn, ffn, norm1, norm2."""
    return {
        **_prefixed("self_attn", mha_state(layer.self_attn)),
        **_prefixed("ffn", feed_forward_state(layer)),
        **_prefixed("norm1", layer_norm_state(layer.norm1)),
        **_prefixed("norm2", layer_norm_state(layer.norm2)),
    }


def decoder_layer_state(layer: nn.TransformerDecoderLayer) -> State:
    """nn.TransformerDecoderLayer -> our DecoderLayer: self_attn, cross_attn, ffn, norm1..3.

    PyTorch calls the cross-attention ``multihead_attn``.
    """
    return {
        **_prefixed("self_attn", mha_state(layer.self_attn)),
        **_prefixed("cross_attn", mha_state(layer.multihead_attn)),
        **_prefixed("ffn", feed_forward_state(layer)),
        **_prefixed("norm1", layer_norm_state(layer.norm1)),
        **_prefixed("norm2", layer_norm_state(layer.norm2)),
        **_prefixed("norm3", layer_norm_state(layer.norm3)),
    }


def _stack_state(stack: nn.TransformerEncoder | nn.TransformerDecoder, layer_state) -> State:
    if stack.norm is None:
        raise ValueError(
            "our Encoder/Decoder end with a LayerNorm; build the torch stack with norm=nn.LayerNorm(D)"
        )
    state: State = {}
    for index, layer in enumerate(stack.layers):
        state.update(_prefixed(f"layers.{index}", layer_state(layer)))
    state.update(_prefixed("norm", layer_norm_state(stack.norm)))
    return state


def encoder_state(encoder: nn.TransformerEncoder) -> State:
    """nn.TransformerEncoder(..., norm=nn.LayerNorm(D)) -> our Encoder: layers.<i>.*, norm."""
    return _stack_state(encoder, encoder_layer_state)


def decoder_state(decoder: nn.TransformerDecoder) -> State:
    """nn.TransformerDecoder(..., norm=nn.LayerNorm(D)) -> our Decoder: layers.<i>.*, norm."""
    return _stack_state(decoder, decoder_layer_state)


def _load(ours: nn.Module, state: State) -> nn.Module:
    ours.load_state_dict(state, strict=True)
    return ours


def copy_layer_norm(ours: nn.Module, theirs: nn.LayerNorm) -> nn.Module:
    return _load(ours, layer_norm_state(theirs))


def copy_mha(ours: nn.Module, theirs: nn.MultiheadAttention) -> nn.Module:
    return _load(ours, mha_state(theirs))


def copy_feed_forward(ours: nn.Module, theirs: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer):
    return _load(ours, feed_forward_state(theirs))


def copy_encoder_layer(ours: nn.Module, theirs: nn.TransformerEncoderLayer) -> nn.Module:
    return _load(ours, encoder_layer_state(theirs))


def copy_decoder_layer(ours: nn.Module, theirs: nn.TransformerDecoderLayer) -> nn.Module:
    return _load(ours, decoder_layer_state(theirs))


def copy_encoder(ours: nn.Module, theirs: nn.TransformerEncoder) -> nn.Module:
    return _load(ours, encoder_state(theirs))


def copy_decoder(ours: nn.Module, theirs: nn.TransformerDecoder) -> nn.Module:
    return _load(ours, decoder_state(theirs))


def to_torch_attn_mask(mask: Tensor) -> Tensor:
    """Ours (True = may attend) -> torch's attn_mask (True = not allowed)."""
    return ~mask


def to_torch_key_padding_mask(mask: Tensor) -> Tensor:
    """Our padding mask Bool[B, 1, 1, T_k] (True = real token) -> Bool[B, T_k] (True = pad)."""
    if mask.dim() != 4 or mask.size(1) != 1 or mask.size(2) != 1:
        raise ValueError(f"expected a padding mask [B, 1, 1, T_k], got {list(mask.shape)}")
    return ~mask[:, 0, 0, :]


@torch.no_grad()
def randomize_parameters_(module: nn.Module, seed: int, bias_std: float = 0.5) -> nn.Module:
    """Fill every parameter with seeded random values, in place.

    Matrices get N(0, 1/fan_in); vectors (biases, LayerNorm weights and biases)
    get N(0, bias_std^2), LayerNorm weights around 1. PyTorch initialises biases
    to 0 and LayerNorms to (1, 0) and a stack's layers as copies of each other,
    which would hide a bias or gamma/beta mixed up, or layers copied in the
    wrong order.
    """
    generator = torch.Generator().manual_seed(seed)
    for name, parameter in module.named_parameters():
        if parameter.dim() >= 2:
            std = 1.0 / math.sqrt(parameter.size(-1))
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * std
        else:
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * bias_std
            if "norm" in name and name.endswith("weight"):
                noise = noise + 1.0
        parameter.copy_(noise)
    return module


@contextlib.contextmanager
def torch_fastpath_disabled() -> Iterator[None]:
    """Run nn.MultiheadAttention / nn.TransformerEncoderLayer on their plain (reference) path."""
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)
