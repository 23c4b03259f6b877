"""Lesson 11's checks judge how the cache is used, and each exercise on its own: a wrong
decoder_layer_step called by a right cached_greedy_decode is named as decoder_layer_step's fault,
and the stand-in model's stacks can be called as lesson 08's are."""

import inspect

import pytest
import torch

from autograder.checks import core
from autograder.checks import efficiency as checks
from solutions import efficiency as reference
from solutions.multi_head import split_heads

LEARNER_STEP = """
from autograder.checks.efficiency import _step_variant

def decoder_layer_step(layer, x, memory_kv, src_mask, cache):
    return _step_variant(layer, x, memory_kv, src_mask, cache, **MISTAKE)
"""


def _learner_notebook(switch: dict) -> dict:
    """A notebook's globals: a decoder_layer_step with one catalogued mistake and the reference
    cached_greedy_decode, written in the notebook (so it calls that decoder_layer_step)."""
    namespace = {"MISTAKE": switch, "split_heads": split_heads, "torch": torch}
    exec(LEARNER_STEP, namespace)  # noqa: S102 - the test's own source
    source = inspect.getsource(reference.cached_greedy_decode)
    source = source.replace("    ### BEGIN SOLUTION\n", "").replace("    ### END SOLUTION\n", "")
    exec(source, namespace)  # noqa: S102 - the reference, as a learner would paste it
    return namespace


STEP_SWITCHES = {
    "cache not appended": {"append": False},
    "attention ignores the cache": {"attend": "new"},
    "cache concatenated along the wrong axis": {"cat_dim": 1},
    "scores scaled by sqrt(D) instead of sqrt(d_k)": {"scale": "D"},
}


@pytest.mark.parametrize("name", sorted(STEP_SWITCHES))
def test_a_wrong_step_is_named_where_it_is(name):
    notebook = _learner_notebook(STEP_SWITCHES[name])
    hint = core.named(checks.STEP_MISTAKES, name).hint
    for check in (checks.check_cached_values, checks.check_cached_end_symbol):
        with pytest.raises(core.CheckFailure) as failure:
            check(notebook["cached_greedy_decode"])
        message = str(failure.value)
        assert "the decoder_layer_step it calls fails its own check" in message
        assert hint in message
        assert "caches emptied at every step" not in message


def test_a_right_step_leaves_the_verdict_to_cached_greedy_decode():
    notebook = _learner_notebook({})
    notebook["cached_greedy_decode"].__globals__["decoder_layer_step"] = reference.decoder_layer_step
    checks.check_cached_values(notebook["cached_greedy_decode"])  # the reference: passes
    wrong = checks.CACHED_MISTAKES[0].compute  # a catalogued cached mistake reads no learner step
    with pytest.raises(core.CheckFailure, match=checks.CACHED_MISTAKES[0].name):
        checks.check_cached_values(wrong)


def test_the_stand_in_stacks_have_forwards():
    model, src, src_mask = checks.cached_case(checks.VISIBLE_SEED)
    tgt = torch.tensor([[1, 4, 2], [1, 3, 3], [1, 5, 7]], device=src.device)
    causal = torch.ones(3, 3, dtype=torch.bool, device=src.device).tril()
    with torch.no_grad():
        memory = model.encoder(model.positional(model.src_embed(src)), src_mask)
        assert torch.equal(memory, model.encode(src, src_mask))
        states = model.decoder(model.positional(model.tgt_embed(tgt)), memory, src_mask, causal)
        assert torch.equal(states, model.decode(memory, src_mask, tgt, causal))
        assert states.shape == (3, 3, 8)


def test_counting_sees_one_position_per_step_for_the_reference():
    model, src, src_mask = checks.cached_case(checks.VISIBLE_SEED)
    with checks.counting(model) as work:
        out = reference.cached_greedy_decode(model, src, src_mask, checks.CACHED_MAX_LEN, checks.START)
    steps = out.size(1) - 1
    assert (work.encoder, work.full_layers, work.memory) == (1, 0, [1, 1])
    assert work.queries == [[1] * steps, [1] * steps]
