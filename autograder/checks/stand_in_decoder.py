"""The stand-ins lesson 11's checks run the learner's code on (autograder/checks/efficiency.py).

A decoder layer and a small Transformer written here with PyTorch's basic modules and the
contract's attribute names (self_attn, cross_attn with w_q, w_k, w_v, w_o and n_heads, ffn,
norm1..3, norm_first; src_embed, tgt_embed, positional with ``pe``, encoder, decoder with
``layers`` and ``norm``, generator), so that the checks need no reference code.
"""

import math

import torch
from torch import nn

from autograder.checks.device import DEVICE, DTYPE
from autograder.checks.oracles import randomize_, sinusoidal_table

# ---------------------------------------------------------------------------------------
# The checks' own decoder layer and model, with the contract's attribute names
# ---------------------------------------------------------------------------------------


def attention(q, k, v, mask=None) -> torch.Tensor:
    """softmax(q k^T / sqrt(d_k)) v; a query with no key to attend to gets zeros."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # [B, h, T_q, T_k]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    return weights @ v  # [B, h, T_q, d_k]


def split(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """[B, T, D] -> [B, h, T, d_k]"""
    return x.reshape(x.size(0), x.size(1), n_heads, -1).transpose(1, 2)


def merge(x: torch.Tensor) -> torch.Tensor:
    """[B, h, T, d_k] -> [B, T, D]"""
    return x.transpose(1, 2).reshape(x.size(0), x.size(2), -1)


class _LayerNorm(nn.Module):
    def __init__(self, d_model: int):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
        return self.gamma * (x - mean) / torch.sqrt(var + 1e-5) + self.beta


class _MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def forward(self, query, key, value, mask=None):
        q, k, v = (
            split(w(t), self.n_heads) for w, t in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        return self.w_o(merge(attention(q, k, v, mask)))


class _FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))


class StandInDecoderLayer(nn.Module):
    """A decoder layer with the contract's names and lesson 08's forward (Post-LN or Pre-LN)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, norm_first: bool = False):
        super().__init__()
        self.self_attn = _MultiHeadAttention(d_model, n_heads)
        self.cross_attn = _MultiHeadAttention(d_model, n_heads)
        self.ffn = _FeedForward(d_model, d_ff)
        self.norm1, self.norm2, self.norm3 = _LayerNorm(d_model), _LayerNorm(d_model), _LayerNorm(d_model)
        self.dropout1, self.dropout2, self.dropout3 = nn.Dropout(0.0), nn.Dropout(0.0), nn.Dropout(0.0)
        self.norm_first = norm_first

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.self_attn(h, h, h, tgt_mask)
            h = self.norm2(x)
            x = x + self.cross_attn(h, memory, memory, src_mask)
            return x + self.ffn(self.norm3(x))
        x = self.norm1(x + self.self_attn(x, x, x, tgt_mask))
        x = self.norm2(x + self.cross_attn(x, memory, memory, src_mask))
        return self.norm3(x + self.ffn(x))


class _Embedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.lut = nn.Embedding(vocab_size, d_model)
        self.d_model = d_model

    def forward(self, tokens):
        return self.lut(tokens) * math.sqrt(self.d_model)


class _Positional(nn.Module):
    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.register_buffer("pe", sinusoidal_table(max_len, d_model))
        self.dropout = nn.Dropout(0.0)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])


class _Stack(nn.Module):
    def __init__(self, layers: list[nn.Module], d_model: int):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = _LayerNorm(d_model)


class _EncoderStack(_Stack):
    """One Post-LN self-attention block and the final norm: x [B, S, D] -> memory [B, S, D]."""

    def forward(self, x, src_mask=None):
        return self.norm(x + self.layers[0](x, x, x, src_mask))


class _DecoderStack(_Stack):
    """lesson 08's Decoder: every layer, then the final norm; x [B, T, D] -> [B, T, D]."""

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)


class _Generator(nn.Module):
    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        return torch.log_softmax(self.proj(x), dim=-1)


class StandInTransformer(nn.Module):
    """Lesson 09's Transformer with the contract's part names, written here (no learner code).

    Its encoder is one Post-LN self-attention block without a feed-forward network (any fixed
    function of the source that respects its padding would do); its decoder is ``n_layers``
    StandInDecoderLayers and a final norm, as in lesson 08. Both stacks have a forward, so
    ``model.encoder(x, src_mask)`` and ``model.decoder(x, memory, src_mask, tgt_mask)`` work as
    lesson 08's do; the checks count these calls (autograder/checks/efficiency.py).
    """

    def __init__(self, src_vocab, tgt_vocab, d_model, n_heads, d_ff, n_layers, norm_first=False,
                 max_len=32):  # fmt: skip
        super().__init__()
        self.src_embed = _Embedding(src_vocab, d_model)
        self.tgt_embed = _Embedding(tgt_vocab, d_model)
        self.positional = _Positional(d_model, max_len)
        self.encoder = _EncoderStack([_MultiHeadAttention(d_model, n_heads)], d_model)
        layers = [StandInDecoderLayer(d_model, n_heads, d_ff, norm_first) for _ in range(n_layers)]
        self.decoder = _DecoderStack(layers, d_model)
        self.generator = _Generator(d_model, tgt_vocab)

    def encode(self, src, src_mask):
        return self.encoder(self.positional(self.src_embed(src)), src_mask)  # [B, S, D]

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.positional(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)  # [B, T, D]

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)


GENERATOR_SCALE, POSITION_SCALE = 4.0, 6.0


def stand_in_model(seed: int, src_vocab=9, tgt_vocab=10, d_model=8, n_heads=2, d_ff=16, n_layers=2,
                   norm_first=False) -> StandInTransformer:  # fmt: skip
    """A StandInTransformer with seeded random matrices, float64, in eval mode.

    Random Transformers tend to repeat one token forever; to make the tokens depend on the step
    and the row, the biases start at 0 (the norms at gamma 1, beta 0), the generator's weights
    are scaled up, and the positional table is the sinusoidal one times POSITION_SCALE (any
    fixed table is a valid one: decoding reads it from model.positional.pe).
    """
    model = StandInTransformer(src_vocab, tgt_vocab, d_model, n_heads, d_ff, n_layers, norm_first)
    randomize_(model, seed, bias_std=0.0)
    with torch.no_grad():
        for embed in (model.src_embed, model.tgt_embed):
            embed.lut.weight.mul_(1.0 / math.sqrt(d_model))  # after the sqrt(D) scale: about unit size
        model.generator.proj.weight.mul_(GENERATOR_SCALE)
        model.positional.pe.mul_(POSITION_SCALE)
    return model.to(device=DEVICE, dtype=DTYPE).eval()


def memory_kv_of(layer: nn.Module, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The cross-attention's keys and values of the memory [B, S, D]: each [B, h, S, d_k]."""
    n_heads = layer.self_attn.n_heads
    with torch.no_grad():
        return split(layer.cross_attn.w_k(memory), n_heads), split(layer.cross_attn.w_v(memory), n_heads)
