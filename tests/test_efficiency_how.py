"""Lesson 11's checks judge how the cache is used, and each exercise on its own: a wrong
decoder_layer_step called by a right cached_greedy_decode is named as decoder_layer_step's fault,
and the stand-in model's stacks can be called as lesson 08's are."""

import inspect
import math

import pytest
import torch

from autograder.checks import blockwise, core
from autograder.checks import efficiency as checks
from solutions import efficiency as reference
from solutions.multi_head import split_heads

LEARNER_STEP = """
from autograder.checks.decoder_step import _step_variant

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


# ---------------------------------------------------------------------------------------
# blockwise_attention: the reference, and its memory, which an experiment cell measures
# ---------------------------------------------------------------------------------------


def _qkv(seed: int, t_q=37, t_k=50, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, t_q, 8, dtype=torch.float64, generator=generator) * scale
    k = torch.randn(2, 3, t_k, 8, dtype=torch.float64, generator=generator)
    v = torch.randn(2, 3, t_k, 6, dtype=torch.float64, generator=generator)  # d_v != d_k
    return q, k, v


@pytest.mark.parametrize("block_size", [1, 16, 50, 64])
def test_blockwise_attention_equals_pytorchs(block_size):
    q, k, v = _qkv(1, scale=3.0)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(reference.blockwise_attention(q, k, v, block_size=block_size), expected)


def test_blockwise_attention_survives_scores_that_overflow_exp():
    q, k, v = _qkv(2, scale=400.0)  # scores of several hundred: exp overflows in float64 past 709
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    out = reference.blockwise_attention(q, k, v, block_size=16)
    assert torch.isfinite(out).all() and torch.allclose(out, expected)


def test_blockwise_attention_masks_as_lesson_03_does():
    from solutions.attention import scaled_dot_product_attention

    q, k, v = _qkv(3)
    mask = torch.rand(2, 1, 37, 50, generator=torch.Generator().manual_seed(4)) > 0.4
    mask[0, 0, 5] = False  # a query that may attend to no key at all
    padding = torch.ones(2, 1, 1, 50, dtype=torch.bool)
    padding[1, ..., 33:] = False  # broadcast over the queries
    for m in (mask, padding):
        out = reference.blockwise_attention(q, k, v, m, block_size=16)
        assert torch.allclose(out, scaled_dot_product_attention(q, k, v, m)[0])
        assert torch.allclose(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=m))
    assert torch.equal(reference.blockwise_attention(q, k, v, mask, 16)[0, :, 5], torch.zeros(3, 6).double())


def test_blockwise_attention_memory_grows_linearly_and_the_full_matrix_quadratically():
    from solutions.attention import scaled_dot_product_attention

    def full(q, k, v):
        return scaled_dot_product_attention(q, k, v)[0]

    sizes = (128, 256, 512)
    blockwise, whole = [], []
    for n in sizes:
        q = torch.randn(1, 2, n, 16)
        blockwise.append(math.prod(checks.largest_tensor(reference.blockwise_attention, q, q, q, None, 32)))
        whole.append(math.prod(checks.largest_tensor(full, q, q, q)))
    assert whole == [2 * n * n for n in sizes]  # the weights [B, h, T, T]
    assert blockwise == [2 * n * 32 for n in sizes]  # one block of scores [B, h, T, block_size]


def _full_scores(q, k, v, mask=None, block_size=64):
    """The right values through lesson 03's attention: the whole score matrix at once."""
    from solutions.attention import scaled_dot_product_attention

    return scaled_dot_product_attention(q, k, v, mask)[0]


def test_the_memory_check_names_the_full_score_matrix_and_passes_the_honest_ones(capsys):
    from tests.alternatives import ALTERNATIVES

    with pytest.raises(core.CheckFailure) as failure:
        checks.check_blockwise_memory(_full_scores)
    assert checks.FULL_SCORES in str(failure.value) and checks.FULL_SCORES_HINT in str(failure.value)
    assert "131,072 numbers" in str(failure.value)  # [1, 2, 256, 256]
    for honest in (reference.blockwise_attention, *ALTERNATIVES["blockwise_attention"]):
        assert checks.check_blockwise_memory(honest) < 256 * 256  # fewer numbers than one head's scores
    assert capsys.readouterr().out.count("✓") == 3


def test_the_blockwise_variant_without_a_switch_is_the_reference():
    q, k, v = _qkv(5, scale=3.0)
    mask = torch.rand(2, 1, 37, 50, generator=torch.Generator().manual_seed(6)) > 0.4
    mask[1, 0, 3] = False
    for block_size in (1, 7, 64):
        for m in (None, mask):
            assert torch.equal(
                blockwise.blockwise_variant(q, k, v, m, block_size),
                reference.blockwise_attention(q, k, v, m, block_size),
            )
