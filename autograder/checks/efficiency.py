"""Checks for lesson 11: decoder_layer_step and cached_greedy_decode (a key/value cache), and
blockwise_attention (attention without the score matrix).

decoder_layer_step(layer, x, memory_kv, src_mask, cache) -> (out, cache)
    Run over the positions of a target one at a time, feeding back the cache it returns, on a
    decoder layer built here (the contract's attribute names: self_attn, cross_attn with w_q,
    w_k, w_v, w_o and n_heads, ffn, norm1..3, dropout1..3, norm_first). The outputs, stacked
    [B, T, D], must equal PyTorch's own nn.TransformerDecoderLayer run over all T positions at
    once with a causal mask, with the same weights; the cache must grow by one position per
    call, [B, h, t, d_k], and hold the self-attention's keys and values. Post-LN and Pre-LN,
    B = 2 and 3 with a padded source row.

cached_greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None)
    On a small Transformer built here (the lesson 09 names: src_embed, tgt_embed, positional
    with its table ``pe``, encoder, decoder with ``layers`` and ``norm``, generator), against
    full recomputation: the step-by-step loop of lesson 09's checks (greedy.step_by_step) over
    the model's own ``decode``. The tokens must be equal (torch.equal) and, where the learner's
    code calls ``model.generator`` once per step, the log-probabilities too (within float64
    tolerance): they are read with a forward hook on the generator, in the grader's process.

blockwise_attention(q, k, v, mask=None, block_size=64) -> out [..., T_q, d_v]
    Against PyTorch's F.scaled_dot_product_attention without a mask, and against softmax with
    masked keys filled with -inf and fully masked rows set to zero with one: several block sizes,
    a last block shorter than the others, scores that overflow exp, masks of three broadcast
    shapes with a query that may attend to no key. Its memory (the largest tensor it creates,
    ``largest_tensor``) is measured by an experiment cell of the lesson, not by a test cell: the
    judge reaches the learner's code only through inputs and outputs, so it could not see it.

Each exercise's checks live in a module of their own (decoder_step.py, cached_decoding.py,
blockwise.py); this module is the lesson's: its test cells call ``checks.check_*`` here.

The checks pass and read back plain data only (tensors, a dict of tensors, ints), so they run
the same through the judge, where a dict crosses as a copy: that is why decoder_layer_step
returns its cache rather than only updating the dict it was given.
"""

from autograder.checks.blockwise import (  # noqa: F401 - the lesson's names
    FULL_SCORES,
    FULL_SCORES_HINT,
    OVERFLOW_SCALE,
    check_blockwise_large_scores,
    check_blockwise_mask,
    check_blockwise_memory,
    check_blockwise_shapes,
    check_blockwise_values,
    compare_blockwise,
    largest_tensor,
)
from autograder.checks.cached_decoding import (  # noqa: F401 - the lesson's names
    CACHED_MAX_LEN,
    CACHED_MISTAKES,
    HIDDEN_END,
    HIDDEN_SEED,
    START,
    VISIBLE_SEED,
    cached_case,
    check_cached_end_symbol,
    check_cached_shapes,
    check_cached_values,
    compare_cached,
    counting,
)
from autograder.checks.decoder_step import (  # noqa: F401 - the lesson's names
    STEP_MISTAKES,
    case_from,
    check_step_cache,
    check_step_post_ln,
    check_step_pre_ln,
    compare_steps,
    step_case,
)
