"""Alternative correct implementations of lesson 09's Generator, Transformer and greedy_decode."""

import torch
import torch.nn.functional as F
from torch import nn

from solutions.embedding import Embedding
from solutions.encoder_decoder import Decoder, Encoder
from solutions.output_layer import Generator
from solutions.positional_encoding import PositionalEncoding

# --- Generator -------------------------------------------------------------------------


class GeneratorLogSumExp(nn.Module):
    """log-probabilities as logits minus their log-sum-exp."""

    def __init__(self, d_model, vocab_size):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        logits = self.proj(x)
        return logits - torch.logsumexp(logits, dim=-1, keepdim=True)


class GeneratorFunctional(nn.Module):
    """F.linear on proj's weights, then an nn.LogSoftmax module."""

    def __init__(self, d_model, vocab_size):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)
        self.log_softmax = nn.LogSoftmax(dim=-1)

    def forward(self, x):
        return self.log_softmax(F.linear(x, self.proj.weight, self.proj.bias))


class GeneratorShifted(nn.Module):
    """The max subtracted by hand before exp and log (the stable softmax written out)."""

    def __init__(self, d_model, vocab_size):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        logits = self.proj(x)
        shifted = logits - logits.amax(dim=x.dim() - 1, keepdim=True)
        return shifted - shifted.exp().sum(dim=-1, keepdim=True).log()


# --- Transformer -----------------------------------------------------------------------


class TransformerInline(nn.Module):
    """Parts created in another order, Xavier's loop over named_parameters, forward written out
    without calling encode/decode, and the positional table added by hand."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, n_heads=8, d_ff=2048, n_layers=6, dropout=0.1,
                 max_len=5000):  # fmt: skip
        super().__init__()
        self.generator = Generator(d_model, tgt_vocab)
        self.decoder = Decoder(d_model, n_heads, d_ff, n_layers, dropout)
        self.encoder = Encoder(d_model, n_heads, d_ff, n_layers, dropout)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.tgt_embed = Embedding(tgt_vocab, d_model)
        self.src_embed = Embedding(src_vocab, d_model)
        for name, parameter in self.named_parameters():
            if parameter.ndim >= 2 and "norm" not in name:
                nn.init.xavier_uniform_(parameter)

    def _embed(self, table, tokens):
        x = table(tokens)
        return self.positional.dropout(x + self.positional.pe[: tokens.size(1)])

    def encode(self, src, src_mask):
        return self.encoder(self._embed(self.src_embed, src), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self._embed(self.tgt_embed, tgt), memory, src_mask, tgt_mask)

    def forward(self, src, tgt, src_mask, tgt_mask):
        memory = self.encoder(self._embed(self.src_embed, src), src_mask)
        return self.decoder(self._embed(self.tgt_embed, tgt), memory, src_mask, tgt_mask)


class TransformerKeywords(nn.Module):
    """Keyword arguments everywhere, Xavier-normal initialisation, forward through encode/decode."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, n_heads=8, d_ff=2048, n_layers=6, dropout=0.1,
                 max_len=5000):  # fmt: skip
        super().__init__()
        self.src_embed = Embedding(vocab_size=src_vocab, d_model=d_model)
        self.tgt_embed = Embedding(vocab_size=tgt_vocab, d_model=d_model)
        self.positional = PositionalEncoding(d_model=d_model, max_len=max_len, dropout=dropout)
        self.encoder = Encoder(
            d_model=d_model, n_heads=n_heads, d_ff=d_ff, n_layers=n_layers, dropout=dropout
        )
        self.decoder = Decoder(
            d_model=d_model, n_heads=n_heads, d_ff=d_ff, n_layers=n_layers, dropout=dropout
        )
        self.generator = Generator(d_model=d_model, vocab_size=tgt_vocab)
        for parameter in self.parameters():
            if parameter.dim() > 1:
                nn.init.xavier_normal_(parameter)

    def encode(self, src, src_mask):
        return self.encoder(x=self.positional(self.src_embed(src)), src_mask=src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        y = self.positional(self.tgt_embed(tgt))
        return self.decoder(x=y, memory=memory, src_mask=src_mask, tgt_mask=tgt_mask)

    def forward(self, src, tgt, src_mask, tgt_mask):
        return self.decode(memory=self.encode(src, src_mask), src_mask=src_mask, tgt=tgt, tgt_mask=tgt_mask)


# --- greedy_decode ---------------------------------------------------------------------


@torch.no_grad()
def greedy_decode_preallocated(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    """A preallocated [B, max_len] buffer filled column by column, a [1, 1, t, t] mask from triu,
    the generator on every position, truncated at the end."""
    memory = model.encode(src, src_mask)
    batch = src.size(0)
    ys = torch.full((batch, max_len), start_symbol, dtype=torch.long, device=src.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
    length = 1
    while length < max_len:
        prefix = ys[:, :length]
        mask = ~torch.ones(length, length, dtype=torch.bool, device=src.device).triu(1)
        log_probs = model.generator(model.decode(memory, src_mask, prefix, mask[None, None]))
        token = log_probs[:, -1, :].max(dim=-1).indices
        if end_symbol is not None:
            token = torch.where(finished, torch.full_like(token, end_symbol), token)
            finished = finished | (token == end_symbol)
        ys[:, length] = token
        length += 1
        if end_symbol is not None and finished.all():
            break
    return ys[:, :length]


@torch.no_grad()
def greedy_decode_per_row(model, src, src_mask, max_len, start_symbol, end_symbol=None):
    """Each row decoded on its own with Python lists, then padded with end_symbol to the longest."""
    rows = []
    for row in range(src.size(0)):
        source = src[row : row + 1]
        mask = None if src_mask is None else src_mask[row : row + 1]
        memory = model.encode(source, mask)
        tokens = [start_symbol]
        while len(tokens) < max_len and (end_symbol is None or tokens[-1] != end_symbol or len(tokens) == 1):
            ys = torch.tensor([tokens], device=src.device)
            causal = torch.tril(torch.ones(len(tokens), len(tokens), device=src.device)).bool()
            out = model.decode(memory, mask, ys, causal)
            tokens.append(int(model.generator(out)[0, -1].argmax()))
        rows.append(tokens)
    width = max(len(tokens) for tokens in rows)
    padded = [tokens + [end_symbol] * (width - len(tokens)) for tokens in rows]
    return torch.tensor(padded, dtype=torch.long, device=src.device)


ALTERNATIVES = {
    "Generator": [GeneratorLogSumExp, GeneratorFunctional, GeneratorShifted],
    "Transformer": [TransformerInline, TransformerKeywords],
    "greedy_decode": [greedy_decode_preallocated, greedy_decode_per_row],
}
