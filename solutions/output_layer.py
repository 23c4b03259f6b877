"""Lesson 09: the output layer, the whole Transformer, and greedy decoding."""

import torch
from torch import nn

from solutions.embedding import Embedding
from solutions.encoder_decoder import Decoder, Encoder
from solutions.masking import causal_mask
from solutions.positional_encoding import PositionalEncoding


class Generator(nn.Module):
    """Project decoder states to the vocabulary and return log-probabilities.

    x: [B, T, D] -> log_softmax(proj(x), -1): [B, T, V]
    """

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        ### BEGIN SOLUTION
        self.proj = nn.Linear(d_model, vocab_size)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        return torch.log_softmax(self.proj(x), dim=-1)  # [B, T, V]
        ### END SOLUTION


class Transformer(nn.Module):
    """The encoder-decoder Transformer of "Attention Is All You Need".

    src: Long[B, T_src], tgt: Long[B, T_tgt]; src_mask broadcastable to
    [B, h, 1, T_src] (padding), tgt_mask to [B, h, T_tgt, T_tgt] (causal and padding).
    forward returns the decoder's states [B, T_tgt, D]; ``generator`` turns
    them into log-probabilities [B, T_tgt, V_tgt].
    Matrices are initialised with Xavier-uniform, as in the paper's code.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 512,
        n_heads: int = 8,
        d_ff: int = 2048,
        n_layers: int = 6,
        dropout: float = 0.1,
        max_len: int = 5000,
    ):
        super().__init__()
        ### BEGIN SOLUTION
        self.src_embed = Embedding(src_vocab, d_model)
        self.tgt_embed = Embedding(tgt_vocab, d_model)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(d_model, n_heads, d_ff, n_layers, dropout)
        self.decoder = Decoder(d_model, n_heads, d_ff, n_layers, dropout)
        self.generator = Generator(d_model, tgt_vocab)
        for parameter in self.parameters():
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)
        ### END SOLUTION

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None) -> torch.Tensor:
        """src: Long[B, T_src] -> memory: [B, T_src, D]"""
        ### BEGIN SOLUTION
        return self.encoder(self.positional(self.src_embed(src)), src_mask)
        ### END SOLUTION

    def decode(
        self,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt: torch.Tensor,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        """memory: [B, T_src, D], tgt: Long[B, T_tgt] -> [B, T_tgt, D]"""
        ### BEGIN SOLUTION
        return self.decoder(self.positional(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)
        ### END SOLUTION

    def forward(
        self,
        src: torch.Tensor,
        tgt: torch.Tensor,
        src_mask: torch.Tensor | None,
        tgt_mask: torch.Tensor | None,
    ) -> torch.Tensor:
        ### BEGIN SOLUTION
        return self.decode(self.encode(src, src_mask), src_mask, tgt, tgt_mask)
        ### END SOLUTION


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    src: torch.Tensor,
    src_mask: torch.Tensor | None,
    max_len: int,
    start_symbol: int,
    end_symbol: int | None = None,
) -> torch.Tensor:
    """Decode by taking the most likely next token, one step at a time.

    src: Long[B, T_src] -> Long[B, L] with L <= max_len, starting with start_symbol.
    Once a row has produced end_symbol it keeps producing end_symbol; decoding
    stops early when every row has. The caller puts the model in eval mode (dropout off)
    beforehand: this function leaves the model's mode as it is.
    """
    ### BEGIN SOLUTION
    memory = model.encode(src, src_mask)  # [B, T_src, D]
    ys = torch.full((src.size(0), 1), start_symbol, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len - 1):
        out = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), src.device))
        next_token = model.generator(out[:, -1]).argmax(dim=-1)  # [B]
        if end_symbol is not None:
            next_token = next_token.masked_fill(finished, end_symbol)
            finished |= next_token == end_symbol
        ys = torch.cat([ys, next_token[:, None]], dim=1)  # [B, t + 1]
        if end_symbol is not None and bool(finished.all()):
            break
    return ys
    ### END SOLUTION
