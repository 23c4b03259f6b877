"""Reference solutions: one implementation of every exercise in the course.

Each module matches one lesson. The code between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` is what a learner writes; the lesson notebooks in
``solutions/lessons`` take their exercise cells from these definitions, so the
package is the one source of every solution.

Conventions (see ``docs/contract.md``): batch first; ``B`` batch, ``T``
sequence length (``T_q``/``T_k`` where they differ), ``D = d_model``, ``h``
heads, ``d_k = D // h``. Boolean masks, True means "may attend".
"""

from solutions.attention import scaled_dot_product_attention
from solutions.efficiency import blockwise_attention, cached_greedy_decode, decoder_layer_step
from solutions.embedding import Embedding
from solutions.encoder_decoder import Decoder, DecoderLayer, Encoder, EncoderLayer
from solutions.feed_forward import PositionwiseFeedForward
from solutions.layer_norm import LayerNorm
from solutions.masking import causal_mask, decoder_mask, padding_mask
from solutions.multi_head import MultiHeadAttention, merge_heads, split_heads
from solutions.output_layer import Generator, Transformer, greedy_decode
from solutions.positional_encoding import PositionalEncoding, sinusoidal_encoding
from solutions.training import exact_match, make_batch, rate, sequence_loss, train_loop, train_step

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Embedding",
    "Encoder",
    "EncoderLayer",
    "Generator",
    "LayerNorm",
    "MultiHeadAttention",
    "PositionalEncoding",
    "PositionwiseFeedForward",
    "Transformer",
    "blockwise_attention",
    "cached_greedy_decode",
    "causal_mask",
    "decoder_layer_step",
    "decoder_mask",
    "exact_match",
    "greedy_decode",
    "make_batch",
    "merge_heads",
    "padding_mask",
    "rate",
    "scaled_dot_product_attention",
    "sequence_loss",
    "sinusoidal_encoding",
    "split_heads",
    "train_loop",
    "train_step",
]
