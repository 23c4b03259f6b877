"""Hidden tests for lesson 11: fresh sizes, weights and inputs, compared with the reference package."""

from autograder.checks import efficiency as checks
from autograder.checks.answers import answer
from autograder.checks.device import DEVICE, DTYPE
from autograder.checks.oracles import randomize_
from autograder.hidden.core import Fresh, replayable
from autograder.hidden.output_layer import decode_against_reference
from solutions.efficiency import blockwise_attention as reference_blockwise
from solutions.encoder_decoder import DecoderLayer as ReferenceDecoderLayer
from solutions.masking import causal_mask
from solutions.output_layer import Transformer as ReferenceTransformer
from solutions.output_layer import greedy_decode as reference_greedy_decode


@replayable
def hidden_decoder_layer_step(fresh: Fresh, fn, norm_first: bool, trials: int = 2) -> None:
    """Fresh sizes (h of 2 or 4, B of 2 or 3, up to 7 positions), a reference DecoderLayer with fresh
    weights, a source with padding; then a fixed layer built by the checks on which every known
    mistake shows. Each run position by position against the full layer's forward."""
    for _ in range(trials):
        n_heads = (2, 4)[fresh.size(0, 1)]
        d_model, d_ff = n_heads * fresh.size(2, 4), fresh.size(8, 24)
        batch, t_tgt, t_src = fresh.size(2, 3), fresh.size(3, 7), fresh.size(3, 8)
        layer = ReferenceDecoderLayer(d_model, n_heads, d_ff, norm_first=norm_first)
        layer = randomize_(layer.to(device=DEVICE, dtype=DTYPE), fresh.generator).eval()
        x, memory = fresh.tensor(batch, t_tgt, d_model), fresh.tensor(batch, t_src, d_model)
        src_mask = fresh.bools(batch, 1, 1, t_src, p=0.7)
        src_mask[..., 0] = True  # every row keeps a source token
        src_mask[-1, ..., -1] = False  # and the last row ends in padding
        states = answer(layer, x, memory, src_mask, causal_mask(t_tgt, x.device))
        checks.compare_steps(fn, checks.case_from(layer, x, memory, src_mask, states))
    seed = 61 if norm_first else 71
    checks.compare_steps(fn, checks.step_case(seed, norm_first, batch=3, t_tgt=5, t_src=6))


def _end_from(model, src, src_mask, max_len: int, row: int) -> int:
    """An end symbol that the free decoding of ``row`` reaches at its third token."""
    return int(reference_greedy_decode(model, src, src_mask, max_len, checks.START)[row, 2])


@replayable
def hidden_cached_greedy_decode(fresh: Fresh, fn, with_end: bool) -> None:
    """Two fresh stand-in models (one Post-LN, one Pre-LN, each of one to three layers) and sources;
    a small reference Transformer with fresh weights; the fixed stand-in on which every known
    mistake shows. Each against the reference greedy_decode (full recomputation): the tokens, then
    the log-probabilities. Both variants on every seed: a step wrong only in Pre-LN fails for all."""
    cases = []
    for norm_first in (False, True):
        model, src, src_mask = checks.cached_case(
            int(fresh.size(0, 10**6)), batch=fresh.size(2, 4), t_src=fresh.size(3, 8),
            n_layers=fresh.size(1, 3), norm_first=norm_first, generator=fresh.generator,
        )  # fmt: skip
        max_len = fresh.size(4, 12)
        end = _end_from(model, src, src_mask, max_len, row=0) if with_end else None
        cases.append((model, src, src_mask, max_len, end))

    args = {"src_vocab": 9, "tgt_vocab": 10, "d_model": 8, "n_heads": 2, "d_ff": 16, "n_layers": 2}
    transformer = ReferenceTransformer(**args, dropout=0.0, max_len=20)
    transformer = randomize_(transformer.to(device=DEVICE, dtype=DTYPE), fresh.generator).eval()
    src = fresh.tokens(3, fresh.size(3, 7), vocab_size=9, low=1)
    src[-1, -1] = 0
    src_mask = (src != 0)[:, None, None, :]
    max_len = fresh.size(4, 10)
    end = _end_from(transformer, src, src_mask, max_len, row=1) if with_end else None
    cases.append((transformer, src, src_mask, max_len, end))

    fixed = (*checks.cached_case(checks.HIDDEN_SEED), checks.CACHED_MAX_LEN, checks.HIDDEN_END)
    decode_against_reference(checks.compare_cached, fn, cases, fixed, with_end)


@replayable
def hidden_blockwise_attention(fresh: Fresh, fn, masked: bool, trials: int = 3) -> None:
    """Fresh sizes (T_q != T_k, d_k != d_v) and a fresh block size, with T_k two to five full blocks
    and a shorter last one; the last trial's scores overflow exp. With ``masked``, masks of four
    broadcast shapes, one of key size 1, with queries that may attend to no key. Against the reference."""
    for trial in range(trials):
        block_size = fresh.size(2, 6)
        t_k = block_size * fresh.size(2, 5) + fresh.size(1, block_size - 1)
        b, h, t_q = fresh.size(2, 3), fresh.size(2, 4), fresh.size(3, 11)
        d_k = fresh.size(2, 8)
        d_v = d_k + fresh.size(1, 3)
        scale = checks.OVERFLOW_SCALE if trial == trials - 1 and not masked else 1.0
        q = fresh.tensor(b, h, t_q, d_k) * scale
        k, v = fresh.tensor(b, h, t_k, d_k), fresh.tensor(b, h, t_k, d_v)
        masks = [None]
        if masked:
            masks = [fresh.bools(*shape) for shape in ((b, 1, t_q, t_k), (b, 1, 1, t_k), (t_q, t_k))]
            for mask in masks:
                mask[..., 0] = True  # every query sees its first key ...
            masks[0][..., -1, :] = False  # ... but one query sees none
            queries = fresh.bools(b, 1, t_q, 1)  # a mask of key size 1: it broadcasts over the keys
            queries[0, :, 0, :] = True
            queries[-1, :, -1, :] = False
            masks.append(queries)
        for mask in masks:
            expected = answer(reference_blockwise, q, k, v, mask, block_size)
            checks.compare_blockwise(fn, q, k, v, mask, block_size, expected=expected)
