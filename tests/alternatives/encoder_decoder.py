"""Alternative correct encoder and decoder layers and stacks (lesson 08).

They differ from the reference the way a learner's might: a shared residual helper,
functional dropout and F.layer_norm with the norms' own gamma/beta, sub-modules created in
another order, separate Pre-LN / Post-LN methods, stacks built with copy.deepcopy (the
Annotated Transformer's `clones`) or appended in a loop, and a stack made of the alternative
layers rather than the reference's.
"""

import copy

import torch.nn.functional as F
from torch import nn

from solutions import LayerNorm, MultiHeadAttention, PositionwiseFeedForward


def _layer_norm(norm, x):
    """The course's LayerNorm computed by torch's own function with its gamma and beta."""
    return F.layer_norm(x, x.shape[-1:], norm.gamma, norm.beta, norm.eps)


class EncoderLayerResidualHelper(nn.Module):
    """One residual helper for both sub-layers; F.dropout; norms through F.layer_norm."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.p, self.pre = dropout, norm_first

    def _residual(self, x, norm, sublayer):
        if self.pre:
            return x + F.dropout(sublayer(_layer_norm(norm, x)), self.p, self.training)
        return _layer_norm(norm, x + F.dropout(sublayer(x), self.p, self.training))

    def forward(self, x, src_mask=None):
        x = self._residual(x, self.norm1, lambda h: self.self_attn(h, h, h, src_mask))
        return self._residual(x, self.norm2, self.ffn)


class EncoderLayerTwoMethods(nn.Module):
    """Norms created first; Post-LN and Pre-LN as two methods; no dropout modules."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm2 = LayerNorm(d_model)
        self.norm1 = LayerNorm(d_model)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.forward_impl = self._pre if norm_first else self._post

    def _post(self, x, mask):
        attended = x + self.self_attn(query=x, key=x, value=x, mask=mask)
        x = self.norm1(attended)
        return self.norm2(x + self.ffn(x))

    def _pre(self, x, mask):
        normed = self.norm1(x)
        x = self.self_attn(normed, normed, normed, mask) + x
        return self.ffn(self.norm2(x)) + x

    def forward(self, x, src_mask=None):
        return self.forward_impl(x, src_mask)


class DecoderLayerResidualHelper(nn.Module):
    """One residual helper for the three sub-layers; F.dropout; norms through F.layer_norm."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = (LayerNorm(d_model) for _ in range(3))
        self.p, self.pre = dropout, norm_first

    def _residual(self, x, norm, sublayer):
        if self.pre:
            return x + F.dropout(sublayer(_layer_norm(norm, x)), self.p, self.training)
        return _layer_norm(norm, x + F.dropout(sublayer(x), self.p, self.training))

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        x = self._residual(x, self.norm1, lambda h: self.self_attn(h, h, h, tgt_mask))
        x = self._residual(x, self.norm2, lambda h: self.cross_attn(h, memory, memory, src_mask))
        return self._residual(x, self.norm3, self.ffn)


class DecoderLayerTwoMethods(nn.Module):
    """Sub-modules created in another order; Post-LN and Pre-LN written out separately."""

    def __init__(self, d_model, n_heads, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.norm3, self.norm2, self.norm1 = LayerNorm(d_model), LayerNorm(d_model), LayerNorm(d_model)
        self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        if not self.norm_first:
            x = self.norm1(self.self_attn(x, x, x, mask=tgt_mask) + x)
            x = self.norm2(self.cross_attn(x, memory, memory, mask=src_mask) + x)
            return self.norm3(self.ffn(x) + x)
        h = self.norm1(x)
        y = x + self.self_attn(h, h, h, mask=tgt_mask)
        z = y + self.cross_attn(self.norm2(y), memory, memory, mask=src_mask)
        return z + self.ffn(self.norm3(z))


class EncoderDeepCopies(nn.Module):
    """The Annotated Transformer's `clones`: deep copies of one prototype layer."""

    def __init__(self, d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False):
        super().__init__()
        prototype = EncoderLayerTwoMethods(d_model, n_heads, d_ff, dropout, norm_first)
        self.layers = nn.ModuleList([copy.deepcopy(prototype) for _ in range(n_layers)])
        self.norm = LayerNorm(d_model)

    def forward(self, x, src_mask=None):
        for layer in self.layers:
            x = layer(x, src_mask=src_mask)
        return self.norm(x)


class EncoderAppended(nn.Module):
    """Layers appended in a loop; the loop written with an index."""

    def __init__(self, d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(n_layers):
            self.layers.append(EncoderLayerResidualHelper(d_model, n_heads, d_ff, dropout, norm_first))
        self.norm = LayerNorm(d_model)

    def forward(self, x, src_mask=None):
        out = x
        for index in range(len(self.layers)):
            out = self.layers[index](out, src_mask)
        return _layer_norm(self.norm, out)


class DecoderDeepCopies(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False):
        super().__init__()
        prototype = DecoderLayerTwoMethods(d_model, n_heads, d_ff, dropout, norm_first)
        self.layers = nn.ModuleList([copy.deepcopy(prototype) for _ in range(n_layers)])
        self.norm = LayerNorm(d_model)

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        for layer in self.layers:
            x = layer(x, memory, src_mask=src_mask, tgt_mask=tgt_mask)
        return self.norm(x)


class DecoderAppended(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(n_layers):
            self.layers.append(DecoderLayerResidualHelper(d_model, n_heads, d_ff, dropout, norm_first))
        self.norm = LayerNorm(d_model)

    def forward(self, x, memory, src_mask=None, tgt_mask=None):
        out = x
        for index in range(len(self.layers)):
            out = self.layers[index](out, memory, src_mask, tgt_mask)
        return _layer_norm(self.norm, out)


ALTERNATIVES = {
    "EncoderLayer": [EncoderLayerResidualHelper, EncoderLayerTwoMethods],
    "DecoderLayer": [DecoderLayerResidualHelper, DecoderLayerTwoMethods],
    "Encoder": [EncoderDeepCopies, EncoderAppended],
    "Decoder": [DecoderDeepCopies, DecoderAppended],
}
