"""Hidden tests for lesson 01."""

import torch

from autograder.checks import embedding
from autograder.checks.answers import answer
from autograder.checks.core import load_weights
from autograder.checks.device import DEVICE, DTYPE
from autograder.hidden.core import Fresh, replayable
from solutions.embedding import Embedding as Reference


@replayable
def hidden_embedding(fresh: Fresh, cls, trials: int = 3) -> None:
    """Fresh vocabulary sizes, model sizes, batches and weights; the reference's weights are
    loaded into the learner's module (strict) and the outputs compared."""
    for _ in range(trials):
        vocab_size, d_model = fresh.size(5, 40), fresh.size(3, 33)
        batch, length = fresh.size(2, 4), fresh.size(2, 9)
        reference = Reference(vocab_size, d_model).to(device=DEVICE, dtype=DTYPE).eval()
        with torch.no_grad():
            reference.lut.weight.copy_(fresh.tensor(vocab_size, d_model))
        module = embedding.embedding_module(cls, vocab_size, d_model)
        load_weights(embedding.EXERCISE, module, reference.state_dict())
        tokens = embedding.tokens_for(batch, length, vocab_size, fresh.generator)
        embedding.compare(module, tokens, answer(reference, tokens))
