"""Lesson 09's Transformer is built with Xavier's spread in every matrix (issue 33): the lesson asks
for the Xavier loop after the six parts, and a loop run before the generator, or none, is told so.
The allowance (six standard errors, at least 20%) is shown wide enough for every Xavier draw of
the checks' sizes and narrow enough for every default one."""

import pytest
import torch
from torch import nn

from autograder.checks import CheckFailure
from autograder.checks import output_layer as checks
from autograder.checks.initialisation import not_xavier
from solutions.embedding import Embedding
from solutions.encoder_decoder import Decoder, Encoder
from solutions.output_layer import Generator, Transformer
from solutions.positional_encoding import PositionalEncoding


class InitBeforeGenerator(Transformer):
    """The held-out mistake: the Xavier loop runs, then the generator is created."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, n_heads=8, d_ff=2048, n_layers=6, dropout=0.1,
                 max_len=5000):  # fmt: skip
        nn.Module.__init__(self)
        self.src_embed = Embedding(src_vocab, d_model)
        self.tgt_embed = Embedding(tgt_vocab, d_model)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(d_model, n_heads, d_ff, n_layers, dropout)
        self.decoder = Decoder(d_model, n_heads, d_ff, n_layers, dropout)
        for parameter in self.parameters():
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)
        self.generator = Generator(d_model, tgt_vocab)


class NoXavier(Transformer):
    """PyTorch's default initialisation everywhere: the loop left out."""

    def __init__(self, src_vocab, tgt_vocab, d_model=512, n_heads=8, d_ff=2048, n_layers=6, dropout=0.1,
                 max_len=5000):  # fmt: skip
        nn.Module.__init__(self)
        self.src_embed = Embedding(src_vocab, d_model)
        self.tgt_embed = Embedding(tgt_vocab, d_model)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(d_model, n_heads, d_ff, n_layers, dropout)
        self.decoder = Decoder(d_model, n_heads, d_ff, n_layers, dropout)
        self.generator = Generator(d_model, tgt_vocab)


class EmbeddingsSkipped(Transformer):
    """The loop runs over the encoder and decoder only: the embeddings and the generator keep defaults."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for part in (self.src_embed.lut, self.tgt_embed.lut, self.generator.proj):
            part.reset_parameters()


def _message(cls) -> str:
    with pytest.raises(CheckFailure) as failure:
        checks.check_transformer_shapes(cls)
    return str(failure.value)


def test_the_loop_before_the_generator_is_told_so():
    message = _message(InitBeforeGenerator)
    assert "the Xavier loop ran before the generator was created" in message, message
    assert message.startswith("Transformer: generator.proj.weight has standard deviation"), message


def test_no_loop_and_a_partial_loop_are_told_which_matrices():
    assert "no matrix is Xavier-initialised" in _message(NoXavier)
    message = _message(EmbeddingsSkipped)
    assert "3 of " in message and "src_embed.lut.weight" in message, message


def test_the_reference_passes_and_says_it_checked_the_spread(capsys):
    checks.check_transformer_shapes(Transformer)
    assert "every matrix Xavier-initialised" in capsys.readouterr().out


@pytest.mark.parametrize("init", [nn.init.xavier_uniform_, nn.init.xavier_normal_])
def test_the_allowance_holds_every_xavier_draw_and_no_default_one(init):
    args = checks.transformer_args()
    for seed in range(60):
        torch.manual_seed(seed)
        model = NoXavier(**args)
        assert len(not_xavier(model)) == sum(p.dim() >= 2 for p in model.parameters())
        for parameter in model.parameters():
            if parameter.dim() > 1:
                init(parameter)
        assert not_xavier(model) == [], seed
