"""PyTorch's own modules as oracles, in one place: their weights under the contract's names.

Each ``*_state`` function maps the parameters of a PyTorch module to the state-dict keys that
the contract names (docs/contract.md): ``w_q``/``w_k``/``w_v``/``w_o`` of multi-head attention
(PyTorch packs the first three into ``in_proj_weight [3D, D]``, in the order q, k, v, and calls
``w_o`` ``out_proj``), ``gamma``/``beta`` of a LayerNorm, ``ffn.linear1``/``ffn.linear2``,
``norm1``... of a layer, ``layers.<i>`` and ``norm`` of a stack. The values are detached
copies, so loading them never ties a learner's module to the oracle. Only the contract's names
are used, so the states load into a learner's module as well as into the reference package.

Masks: ours are True where a query *may attend*; PyTorch's ``attn_mask`` is True where it may
NOT, and its ``key_padding_mask`` is True at padding. ``torch_attn_mask`` and
``torch_key_padding_mask`` convert.

PyTorch starts biases at 0, LayerNorms at (1, 0) and a stack's layers as copies of each other,
which would hide a missing bias, gamma and beta swapped, or layers loaded in the wrong order:
``randomize_`` gives every parameter seeded random values instead, the same on every device.
PyTorch's inference "fast path" (eval mode, no grad) takes other kernels and turns a padded
batch into a nested tensor; compare under ``plain_torch()``, with the oracles in train mode and
dropout 0.
"""

import contextlib
import math
from collections.abc import Iterator

import torch
from torch import nn

from autograder.checks.device import DEVICE, DTYPE, exact_matmul

State = dict[str, torch.Tensor]


def prefixed(prefix: str, state: State) -> State:
    return {f"{prefix}.{key}": value for key, value in state.items()}


def _detached(state: State) -> State:
    return {key: value.detach().clone() for key, value in state.items()}


def linear_state(linear: nn.Linear) -> State:
    """nn.Linear -> {weight, bias}."""
    if linear.bias is None:
        raise ValueError("the course's linear layers have a bias; build the torch module with bias=True")
    return _detached({"weight": linear.weight, "bias": linear.bias})


def layer_norm_state(norm: nn.LayerNorm) -> State:
    """nn.LayerNorm -> {gamma, beta}."""
    if norm.weight is None or norm.bias is None:
        raise ValueError(
            "the course's LayerNorm has gamma and beta; build nn.LayerNorm with elementwise_affine=True"
        )
    return _detached({"gamma": norm.weight, "beta": norm.bias})


def mha_state(mha: nn.MultiheadAttention) -> State:
    """nn.MultiheadAttention -> {w_q, w_k, w_v, w_o}.{weight, bias}."""
    if mha.in_proj_weight is None or mha.in_proj_bias is None:
        raise ValueError("need kdim == vdim == embed_dim and bias=True (a packed in_proj_weight with biases)")
    if mha.bias_k is not None or mha.add_zero_attn:
        raise ValueError("add_bias_kv and add_zero_attn have no counterpart in the course's module")
    state: State = {}
    weights, biases = mha.in_proj_weight.chunk(3, dim=0), mha.in_proj_bias.chunk(3, dim=0)  # 3 x [D, D], [D]
    for name, weight, bias in zip(("w_q", "w_k", "w_v"), weights, biases, strict=True):
        state |= {f"{name}.weight": weight, f"{name}.bias": bias}
    return _detached(state) | prefixed("w_o", linear_state(mha.out_proj))


def feed_forward_state(layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer) -> State:
    """The feed-forward part of a torch Transformer layer -> {linear1, linear2}.{weight, bias}."""
    return prefixed("linear1", linear_state(layer.linear1)) | prefixed("linear2", linear_state(layer.linear2))


def encoder_layer_state(layer: nn.TransformerEncoderLayer) -> State:
    """nn.TransformerEncoderLayer -> EncoderLayer: self_attn, ffn, norm1, norm2."""
    return (
        prefixed("self_attn", mha_state(layer.self_attn))
        | prefixed("ffn", feed_forward_state(layer))
        | prefixed("norm1", layer_norm_state(layer.norm1))
        | prefixed("norm2", layer_norm_state(layer.norm2))
    )


def decoder_layer_state(layer: nn.TransformerDecoderLayer) -> State:
    """nn.TransformerDecoderLayer -> DecoderLayer: self_attn, cross_attn (PyTorch's
    multihead_attn), ffn, norm1, norm2, norm3."""
    return (
        prefixed("self_attn", mha_state(layer.self_attn))
        | prefixed("cross_attn", mha_state(layer.multihead_attn))
        | prefixed("ffn", feed_forward_state(layer))
        | prefixed("norm1", layer_norm_state(layer.norm1))
        | prefixed("norm2", layer_norm_state(layer.norm2))
        | prefixed("norm3", layer_norm_state(layer.norm3))
    )


def stack_state(stack: nn.TransformerEncoder | nn.TransformerDecoder) -> State:
    """nn.TransformerEncoder / nn.TransformerDecoder with a final norm -> Encoder / Decoder:
    layers.<i>.*, norm."""
    if stack.norm is None:
        raise ValueError(
            "the course's Encoder and Decoder end with a LayerNorm; build the torch stack with norm="
        )
    layer_state = encoder_layer_state if isinstance(stack, nn.TransformerEncoder) else decoder_layer_state
    state: State = {}
    for index, layer in enumerate(stack.layers):
        state |= prefixed(f"layers.{index}", layer_state(layer))
    return state | prefixed("norm", layer_norm_state(stack.norm))


Seed = int | torch.Generator | None


def _seeded(module: nn.Module, seed: Seed) -> nn.Module:
    """With a seed: random parameters (``randomize_``) and train mode, which with dropout 0 is
    PyTorch's plain, exact path. Without: PyTorch's own initial values."""
    return module if seed is None else randomize_(module, seed).train()


def torch_layer(
    decoder: bool, d_model: int, n_heads: int, d_ff: int, norm_first: bool = False, *, seed: Seed,
    activation: str = "relu", device: torch.device | str | None = None,
) -> nn.TransformerEncoderLayer | nn.TransformerDecoderLayer:  # fmt: skip
    """nn.TransformerEncoderLayer (or, with ``decoder``, nn.TransformerDecoderLayer) built as the
    course's layers are: batch first, dropout 0, float64, on ``device`` (DEVICE by default)."""
    kind = nn.TransformerDecoderLayer if decoder else nn.TransformerEncoderLayer
    layer = kind(
        d_model, n_heads, d_ff, dropout=0.0, activation=activation, batch_first=True,
        norm_first=norm_first, device=device or DEVICE, dtype=DTYPE,
    )  # fmt: skip
    return _seeded(layer, seed)


def torch_stack(
    layer: nn.TransformerEncoderLayer | nn.TransformerDecoderLayer, n_layers: int, *, seed: Seed
) -> nn.TransformerEncoder | nn.TransformerDecoder:
    """``n_layers`` copies of ``layer``, then a final nn.LayerNorm: the course's Encoder or Decoder.
    The seed matters: PyTorch's layers start as copies of each other. (No nested tensors: they
    would change the padded outputs' values.)"""
    weight = layer.linear1.weight
    norm = nn.LayerNorm(weight.size(1), device=weight.device, dtype=weight.dtype)
    if isinstance(layer, nn.TransformerDecoderLayer):
        return _seeded(nn.TransformerDecoder(layer, n_layers, norm=norm), seed)
    return _seeded(nn.TransformerEncoder(layer, n_layers, norm=norm, enable_nested_tensor=False), seed)


def torch_mha(
    d_model: int, n_heads: int, *, seed: Seed, device: torch.device | str | None = None
) -> nn.MultiheadAttention:
    """nn.MultiheadAttention as the course's is built: batch first, with biases, dropout 0, float64."""
    mha = nn.MultiheadAttention(
        d_model, n_heads, dropout=0.0, bias=True, batch_first=True, device=device or DEVICE, dtype=DTYPE
    )
    return _seeded(mha, seed)


@torch.no_grad()
def randomize_(module: nn.Module, seed: int | torch.Generator, bias_std: float = 0.5) -> nn.Module:
    """Seeded random parameters, in place: matrices N(0, 1/fan_in), vectors N(0, bias_std^2), a
    norm's weight (gamma) around 1. The same values on every device."""
    generator = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(seed)
    for name, parameter in module.named_parameters():
        if parameter.dim() >= 2:
            std = 1.0 / math.sqrt(parameter.size(-1))
            values = torch.randn(parameter.shape, generator=generator, dtype=DTYPE) * std
        else:
            values = torch.randn(parameter.shape, generator=generator, dtype=DTYPE) * bias_std
            if name.endswith("gamma") or ("norm" in name and name.endswith("weight")):
                values = values + 1.0
        parameter.copy_(values.to(parameter.device))
    return module


def torch_attn_mask(mask: torch.Tensor) -> torch.Tensor:
    """Ours (True = may attend) -> PyTorch's attn_mask (True = not allowed)."""
    return ~mask


def torch_key_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Our padding mask Bool[B, 1, 1, T_k] (True = real token) -> Bool[B, T_k] (True = padding)."""
    if mask.dim() != 4 or mask.size(1) != 1 or mask.size(2) != 1:
        raise ValueError(f"expected a padding mask [B, 1, 1, T_k], got {list(mask.shape)}")
    return ~mask[:, 0, 0, :]


def causal(size: int, device: torch.device | None = None) -> torch.Tensor:
    """Bool[T, T], True where the key is not after the query (ours: True = may attend)."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """The paper's table [max_len, D] in float64: pe[pos, 2i] = sin(pos / 10000^(2i/D)),
    pe[pos, 2i+1] = cos(pos / 10000^(2i/D))."""
    position = torch.arange(max_len, dtype=DTYPE)[:, None]
    column = torch.arange(d_model)
    angle = position / 10000 ** ((column - column % 2).to(DTYPE) / d_model)
    return torch.where(column % 2 == 0, torch.sin(angle), torch.cos(angle))


@contextlib.contextmanager
def fastpath_disabled() -> Iterator[None]:
    """nn.MultiheadAttention and the nn.Transformer* layers on their plain (reference) path."""
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


@contextlib.contextmanager
def plain_torch() -> Iterator[None]:
    """No gradients, exact float64 matmuls and no fused fast path: how oracles are run."""
    with fastpath_disabled(), torch.no_grad(), exact_matmul():
        yield


def load(ours: nn.Module, state: State) -> nn.Module:
    """``ours`` with ``state`` loaded strictly; for the tests of the reference package (a check
    loads a learner's module with ``core.load_weights``, which turns a mismatch into a message)."""
    ours.load_state_dict(state, strict=True)
    return ours
