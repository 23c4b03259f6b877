"""Checks for lesson 09: Generator and Transformer (greedy_decode: see greedy.py).

Generator(d_model, vocab_size), forward(x [B, T, D]) -> log_softmax(proj(x), -1) [B, T, V].
    Oracle: F.log_softmax of an nn.Linear whose weights are copied into ``proj``.
    Inputs: B=2 != T=5, D=6, V=11, and a second input whose logits differ by
    thousands, where log(softmax(...)) underflows to -inf.

Transformer(src_vocab, tgt_vocab, d_model, n_heads, d_ff, n_layers, dropout, max_len)
    with encode / decode / forward / generator.
    The shape, consistency and property checks use only that behaviour, so they work
    whatever the learner calls the parts; the shape check also reads the spread of every
    matrix the model was built with (Xavier's, uniform or normal). The value check copies PyTorch's own
    nn.TransformerEncoder / nn.TransformerDecoder / nn.Embedding / nn.Linear weights
    (and the sinusoidal table from its formula) into the model by name, so it needs
    the lesson's names: src_embed, tgt_embed, positional, encoder, decoder, generator.
    Sizes: V_src=11 != V_tgt=13, D=16, h=2, d_ff=32, two layers, T_src=7 != T_tgt=5,
    padding in the source and in the target.

greedy_decode's checks are in autograder/checks/greedy.py; the lesson's test cells call them here.
"""

import contextlib
import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import core, greedy, shape_errors
from autograder.checks.answers import Expected, answer
from autograder.checks.device import DEVICE, DTYPE, random_tensor
from autograder.checks.initialisation import expect_xavier
from autograder.checks.oracles import (
    prefixed,
    randomize_,
    sinusoidal_table,
    stack_state,
    torch_layer,
    torch_stack,
)

# ---------------------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------------------

GENERATOR = "Generator"
G_B, G_T, G_D, G_V = 2, 5, 6, 11
LOG_PROBS = "[B, T, V]"

GENERATOR_MISTAKES = core.catalogue(
    GENERATOR,
    {
        "softmax instead of log_softmax": lambda self, x: torch.softmax(self.proj(x), dim=-1),
        "raw logits": lambda self, x: self.proj(x),
        "log_softmax over the batch (dim=0)": lambda self, x: torch.log_softmax(self.proj(x), dim=0),
        "log_softmax over the positions (dim=1)": lambda self, x: torch.log_softmax(self.proj(x), dim=1),
        "log of a softmax": lambda self, x: torch.log(torch.softmax(self.proj(x), dim=-1)),
    },
)


def generator_module(cls, d_model: int, vocab_size: int):
    """The learner's Generator, with ``proj`` an nn.Linear(d_model, vocab_size) with a bias."""
    module = core.build(GENERATOR, cls, d_model, vocab_size)
    how = "create it in __init__ with self.proj = nn.Linear(d_model, vocab_size)."
    proj = core.expect_attribute(GENERATOR, module, "proj", nn.Linear, "an nn.Linear", how)
    if (proj.in_features, proj.out_features) != (d_model, vocab_size) or proj.bias is None:
        raise core.CheckFailure(
            f"{GENERATOR}: expected proj = nn.Linear(d_model, vocab_size) = nn.Linear({d_model}, "
            f"{vocab_size}) with a bias, got nn.Linear({proj.in_features}, {proj.out_features}"
            f"{'' if proj.bias is not None else ', bias=False'})"
        )
    return module


def compare_generator(module, x, expected: Expected) -> None:
    """The learner's log-probabilities against ``expected()`` (computed after the learner's call),
    naming a known mistake."""
    out = core.output(GENERATOR, module, {"x": x})
    wrong = core.mistake_outputs(GENERATOR_MISTAKES, module, x)
    core.expect_close(GENERATOR, "the log-probabilities", out, expected(), LOG_PROBS, wrong)
    sums = out.exp().sum(-1)
    if not torch.allclose(sums, torch.ones_like(sums)):
        raise core.CheckFailure(
            f"{GENERATOR}: exp of each row must sum to 1, got {sums.flatten()[:4].tolist()}"
        )


def _linear_oracle(d_model: int, vocab_size: int, seed: int, scale: float = 1.0) -> nn.Linear:
    oracle = nn.Linear(d_model, vocab_size).to(device=DEVICE, dtype=DTYPE)
    with torch.no_grad():
        oracle.weight.copy_(random_tensor(vocab_size, d_model, seed=seed, scale=scale / math.sqrt(d_model)))
        oracle.bias.copy_(random_tensor(vocab_size, seed=seed + 1, scale=0.5 * scale))
    return oracle


def _generator_with(cls, oracle: nn.Linear):
    """The learner's Generator with the oracle's weights in ``proj``."""
    module = generator_module(cls, oracle.in_features, oracle.out_features)
    state = {"proj.weight": oracle.weight.detach().clone(), "proj.bias": oracle.bias.detach().clone()}
    core.load_weights(GENERATOR, module, state, names="proj, an nn.Linear")
    return module


def check_generator_shapes(cls) -> None:
    """proj is nn.Linear(D, V); x [B, T, D] -> [B, T, V] in the input's dtype and device."""
    module = _generator_with(cls, _linear_oracle(G_D, G_V, seed=0))
    x = random_tensor(G_B, G_T, G_D, seed=1)
    out = core.output(GENERATOR, module, {"x": x})
    core.expect_shape(GENERATOR, "the output", out, LOG_PROBS, (G_B, G_T, G_V))
    core.expect_dtype(GENERATOR, "the output", out, x.dtype)
    core.expect_device(GENERATOR, "the output", out, x.device)
    core.passed(
        f"{GENERATOR} has proj = nn.Linear(D, V) and maps [B, T, D] to {LOG_PROBS} = [{G_B}, {G_T}, {G_V}]"
    )


def _check_generator_against_oracle(cls, seed: int, scale: float = 1.0) -> torch.Tensor:
    """The learner's Generator against F.log_softmax(nn.Linear(x)) with the same weights (scaled
    by ``scale``); returns the expected log-probabilities."""
    oracle = _linear_oracle(G_D, G_V, seed=seed, scale=scale)
    module = _generator_with(cls, oracle)
    x = random_tensor(G_B, G_T, G_D, seed=seed + 1)
    expected = answer(lambda: F.log_softmax(oracle(x), dim=-1))
    compare_generator(module, x, expected)
    return expected()


def check_generator_values(cls) -> None:
    """Equal to F.log_softmax(nn.Linear(x), -1) with the same weights; exp of every row sums to 1."""
    _check_generator_against_oracle(cls, seed=10)
    core.passed(
        f"{GENERATOR} equals F.log_softmax(nn.Linear(x), dim=-1) (same weights); exp of each row sums to 1"
    )


def check_generator_large_logits(cls) -> None:
    """Logits thousands apart: log_softmax stays finite where log(softmax) gives -inf."""
    expected = _check_generator_against_oracle(cls, seed=20, scale=300.0)
    core.passed(
        f"{GENERATOR} stays finite for logits thousands apart "
        f"(smallest log-probability {float(expected.min()):.0f})"
    )


# ---------------------------------------------------------------------------------------
# Transformer
# ---------------------------------------------------------------------------------------

TRANSFORMER = "Transformer"
SRC_VOCAB, TGT_VOCAB, D_MODEL, N_HEADS, D_FF, N_LAYERS, MAX_LEN = 11, 13, 16, 2, 32, 2, 40
B, T_SRC, T_TGT, PAD = 2, 7, 5, 0
MEMORY, STATES, TGT_LOG_PROBS = "[B, T_src, D]", "[B, T_tgt, D]", "[B, T_tgt, V_tgt]"
PARTS = ("src_embed", "tgt_embed", "positional", "encoder", "decoder", "generator")


def _transformer_states(
    self,
    src,
    tgt,
    src_mask,
    tgt_mask,
    *,
    src_pe=True,
    tgt_pe=True,
    encoder_mask=True,
    cross_mask=True,
    self_mask=True,
    zero_memory=False,
    swap_masks=False,
    tgt_through_src=False,
):
    """The model's forward, built from its own parts (the lesson's names), with one thing switched off."""
    x = self.src_embed(src)
    memory = self.encoder(self.positional(x) if src_pe else x, src_mask if encoder_mask else None)
    if zero_memory:
        memory = torch.zeros_like(memory)
    y = (self.src_embed if tgt_through_src else self.tgt_embed)(tgt)
    masks = (src_mask if cross_mask else None, tgt_mask if self_mask else None)
    return self.decoder(self.positional(y) if tgt_pe else y, memory, *(masks[::-1] if swap_masks else masks))


TRANSFORMER_MISTAKES = core.catalogue(
    TRANSFORMER,
    {
        "generator applied in forward": lambda self, src, tgt, sm, tm: self.generator(
            _transformer_states(self, src, tgt, sm, tm)
        ),
        "dropout also in eval mode": lambda self, src, tgt, sm, tm: F.dropout(
            _transformer_states(self, src, tgt, sm, tm), self.positional.dropout.p, training=True
        ),
    },
    variant=_transformer_states,
)


def transformer_args(src_vocab=SRC_VOCAB, tgt_vocab=TGT_VOCAB, d_model=D_MODEL, n_heads=N_HEADS,
                     d_ff=D_FF, n_layers=N_LAYERS, max_len=MAX_LEN) -> dict:  # fmt: skip
    return {
        "src_vocab": src_vocab,
        "tgt_vocab": tgt_vocab,
        "d_model": d_model,
        "n_heads": n_heads,
        "d_ff": d_ff,
        "n_layers": n_layers,
        "dropout": 0.0,
        "max_len": max_len,
    }


def transformer_module(cls, args: dict):
    """The learner's Transformer (dropout 0, eval, float64, DEVICE) with a ``generator`` module."""
    module = core.build(TRANSFORMER, cls, **args)
    how = "create it in __init__ with self.generator = Generator(d_model, tgt_vocab)."
    core.expect_attribute(TRANSFORMER, module, "generator", nn.Module, "a module (your Generator)", how)
    return module


def transformer_inputs(batch, t_src, t_tgt, src_vocab, tgt_vocab, generator: torch.Generator):
    """src [B, T_src] and tgt [B, T_tgt] without padding ids, then the last rows padded at the end;
    src_mask [B, 1, 1, T_src] (padding) and tgt_mask [B, 1, T_tgt, T_tgt] (padding and causal)."""
    src = torch.randint(1, src_vocab, (batch, t_src), generator=generator)
    tgt = torch.randint(1, tgt_vocab, (batch, t_tgt), generator=generator)
    src[-1, t_src - max(1, t_src // 3) :] = PAD
    tgt[-1, t_tgt - max(1, t_tgt // 3) :] = PAD
    src, tgt = src.to(DEVICE), tgt.to(DEVICE)
    src_mask = (src != PAD)[:, None, None, :]
    causal = torch.ones(t_tgt, t_tgt, dtype=torch.bool, device=DEVICE).tril()
    tgt_mask = (tgt != PAD)[:, None, None, :] & causal
    return src, tgt, src_mask, tgt_mask


# what it likely means when a source-length axis meets a target-length one in a shape error
SOURCE_MEETS_TARGET = (
    "a tensor of the source's length met one of the target's. encode takes src_mask, and "
    "the decoder takes (y, memory, src_mask, tgt_mask) in that order: the masked self-attention gets "
    "tgt_mask [B, 1, T_tgt, T_tgt], the cross-attention src_mask [B, 1, 1, T_src]"
)


def _letters(batch: int, t_src: int, t_tgt: int | None = None):
    """Shape errors inside the model name these sizes by the lesson's letters."""
    letters = {"B": batch, "T_src": t_src} | ({} if t_tgt is None else {"T_tgt": t_tgt})
    return shape_errors.sizes(letters, {("T_src", "T_tgt"): SOURCE_MEETS_TARGET})


def call_model(what: str, fn, *args) -> torch.Tensor:
    """encode(src, src_mask), decode(memory, src_mask, tgt, tgt_mask) or generator(states)."""
    if len(args) == 4:  # decode: memory [B, T_src, D], tgt [B, T_tgt]
        context = _letters(args[0].size(0), args[0].size(1), args[2].size(1))
    elif len(args) == 2:  # encode: src [B, T_src]
        context = _letters(args[0].size(0), args[0].size(1))
    else:
        context = contextlib.nullcontext()
    with context:
        out = core.call(TRANSFORMER, fn, *args)
    return core.expect_tensor(TRANSFORMER, what, out).detach()


def decode_states(module, memory, src, tgt, src_mask, tgt_mask) -> torch.Tensor:
    """decode's output; a crash that a known mistake's forward on ``src`` and ``tgt`` makes too
    (the target looked up in the source's table) is named after it."""
    inputs = (module, src, tgt, src_mask, tgt_mask)
    with core.crashes_named(
        TRANSFORMER, functools.partial(core.mistake_outputs, TRANSFORMER_MISTAKES, *inputs)
    ):
        return call_model("decode's output", module.decode, memory, src_mask, tgt, tgt_mask)


def transformer_forward(module, src, tgt, src_mask, tgt_mask) -> torch.Tensor:
    """forward's output; a crash that a known mistake makes too is named after it."""
    inputs = {"src": src, "tgt": tgt, "src_mask": src_mask, "tgt_mask": tgt_mask}
    outcomes = functools.partial(core.mistake_outputs, TRANSFORMER_MISTAKES, module, *inputs.values())
    with core.crashes_named(TRANSFORMER, outcomes), _letters(src.size(0), src.size(1), tgt.size(1)):
        return core.output(TRANSFORMER, module, inputs, "forward's output")


def compare_transformer(
    module, src, tgt, src_mask, tgt_mask, expected: Expected, what="forward's output"
) -> None:
    """forward against ``expected()`` [B, T_tgt, D] (computed after the learner's call), naming a
    known mistake when the output matches one."""
    out = transformer_forward(module, src, tgt, src_mask, tgt_mask)
    wrong = core.mistake_outputs(TRANSFORMER_MISTAKES, module, src, tgt, src_mask, tgt_mask)
    core.expect_close(TRANSFORMER, what, out, expected(), STATES, wrong)


def expected_parameter_count(src_vocab, tgt_vocab, d_model, n_heads, d_ff, n_layers) -> dict[str, int]:
    """The parameters of each part, from the sizes alone."""
    attention = 4 * (d_model * d_model + d_model)  # w_q, w_k, w_v, w_o with biases
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model
    norm = 2 * d_model
    return {
        "embeddings": (src_vocab + tgt_vocab) * d_model,
        "encoder": n_layers * (attention + ffn + 2 * norm) + norm,
        "decoder": n_layers * (2 * attention + ffn + 3 * norm) + norm,
        "generator": d_model * tgt_vocab + tgt_vocab,
    }


def check_transformer_shapes(cls) -> None:
    """A generator; encode -> [B, T_src, D]; decode and forward -> [B, T_tgt, D]; generator ->
    [B, T_tgt, V_tgt]; the parameter count of the paper's model (nothing shared, no trained table)."""
    args = transformer_args()
    module = transformer_module(cls, args)
    src, tgt, src_mask, tgt_mask = transformer_inputs(
        B, T_SRC, T_TGT, SRC_VOCAB, TGT_VOCAB, torch.Generator().manual_seed(0)
    )
    with torch.no_grad():
        memory = call_model("encode's output", module.encode, src, src_mask)
        core.expect_shape(TRANSFORMER, "encode's output (the memory)", memory, MEMORY, (B, T_SRC, D_MODEL))
        states = decode_states(module, memory, src, tgt, src_mask, tgt_mask)
        core.expect_shape(TRANSFORMER, "decode's output", states, STATES, (B, T_TGT, D_MODEL))
        out = transformer_forward(module, src, tgt, src_mask, tgt_mask)
        if tuple(out.shape) == (B, T_TGT, TGT_VOCAB):
            raise core.CheckFailure(
                core.named(TRANSFORMER_MISTAKES, "generator applied in forward").message(TRANSFORMER)
            )
        core.expect_shape(TRANSFORMER, "forward's output", out, STATES, (B, T_TGT, D_MODEL))
        core.expect_dtype(TRANSFORMER, "forward's output", out, DTYPE)
        core.expect_device(TRANSFORMER, "forward's output", out, src.device)
        log_probs = call_model("generator's output", module.generator, out)
        shape = (B, T_TGT, TGT_VOCAB)
        core.expect_shape(TRANSFORMER, "generator(forward(...))", log_probs, TGT_LOG_PROBS, shape)
    parts = expected_parameter_count(SRC_VOCAB, TGT_VOCAB, D_MODEL, N_HEADS, D_FF, N_LAYERS)
    count = sum(p.numel() for p in module.parameters())
    if count != sum(parts.values()):
        listed = ", ".join(f"{name} {number}" for name, number in parts.items())
        raise core.CheckFailure(
            f"{TRANSFORMER}: expected {sum(parts.values())} parameters ({listed}), got {count}. Each part "
            "is created once (two embeddings, one encoder, one decoder, one generator, nothing shared), "
            "and the positional table is a buffer, not a parameter."
        )
    expect_xavier(TRANSFORMER, module)
    core.passed(
        f"{TRANSFORMER}: encode -> {MEMORY}, decode and forward -> {STATES}, generator -> {TGT_LOG_PROBS}; "
        f"{count} parameters, every matrix Xavier-initialised"
    )


def check_transformer_consistency(cls) -> None:
    """forward(src, tgt, src_mask, tgt_mask) == decode(encode(src, src_mask), src_mask, tgt, tgt_mask)."""
    module = transformer_module(cls, transformer_args())
    src, tgt, src_mask, tgt_mask = transformer_inputs(
        B, T_SRC, T_TGT, SRC_VOCAB, TGT_VOCAB, torch.Generator().manual_seed(1)
    )
    with torch.no_grad():
        memory = call_model("encode's output", module.encode, src, src_mask)
        states = decode_states(module, memory, src, tgt, src_mask, tgt_mask)
    # the learner's own decode(encode(...)), not an answer of the checks'
    compare_transformer(
        module, src, tgt, src_mask, tgt_mask, lambda: states, "forward's output (against decode(encode(...)))"
    )
    core.passed(
        f"{TRANSFORMER}: forward(src, tgt, ...) equals decode(encode(src, src_mask), src_mask, tgt, tgt_mask)"
    )


def _named_or(module, args, names: list[str], fallback: str) -> str:
    """The message of the known mistake (among ``names``) that forward matches, or ``fallback``."""
    out = transformer_forward(module, *args)
    candidates = [core.named(TRANSFORMER_MISTAKES, name) for name in names]
    for mistake, output in core.mistake_outputs(candidates, module, *args):
        if isinstance(output, torch.Tensor) and output.shape == out.shape:
            if core.same(out, output):
                return mistake.message(TRANSFORMER)
    return f"{TRANSFORMER}: {fallback}"


def check_transformer_properties(cls) -> None:
    """What the masks and the positional encoding promise, whatever the parts are called:
    a later target token cannot move an earlier output; a padded source token cannot move any
    output; a real source token does move it; position changes the output on both sides."""
    module = transformer_module(cls, transformer_args())
    src, tgt, src_mask, tgt_mask = transformer_inputs(
        B, T_SRC, T_TGT, SRC_VOCAB, TGT_VOCAB, torch.Generator().manual_seed(2)
    )
    args = (src, tgt, src_mask, tgt_mask)
    out = transformer_forward(module, *args)
    causal = torch.ones(T_TGT, T_TGT, dtype=torch.bool, device=DEVICE).tril()

    # 1. the last target token changes: positions before it must not move (tgt_mask is causal only)
    changed = tgt.clone()
    changed[:, -1] = tgt[:, -1] % (TGT_VOCAB - 1) + 1  # another non-padding id
    before = transformer_forward(module, src, tgt, src_mask, causal)
    after = transformer_forward(module, src, changed, src_mask, causal)
    if not core.same(before[:, :-1], after[:, :-1]):
        raise core.CheckFailure(
            _named_or(
                module,
                (src, tgt, src_mask, causal),
                ["tgt_mask ignored"],
                "changing the last target token changed the outputs at earlier positions. "
                + core.named(TRANSFORMER_MISTAKES, "tgt_mask ignored").hint,
            )
        )

    # 2. a padded source token changes (the mask stays): nothing may move
    padded = src.clone()
    padded[~src_mask[:, 0, 0, :]] = SRC_VOCAB - 1
    if not core.same(out, transformer_forward(module, padded, tgt, src_mask, tgt_mask)):
        raise core.CheckFailure(
            _named_or(
                module,
                args,
                ["src_mask not given to the encoder", "src_mask not given to the decoder"],
                "changing a padding token of the source (where src_mask is False) changed the output. "
                "Pass src_mask to the encoder (self-attention) and to the decoder (cross-attention).",
            )
        )

    # 3. a real source token changes: the output must move
    real = src.clone()
    real[:, 0] = src[:, 0] % (SRC_VOCAB - 2) + 1
    if core.same(out, transformer_forward(module, real, tgt, src_mask, tgt_mask)):
        raise core.CheckFailure(
            _named_or(
                module,
                args,
                ["encoder output not passed to the decoder"],
                "changing a source token did not change the output. "
                + core.named(TRANSFORMER_MISTAKES, "encoder output not passed to the decoder").hint,
            )
        )

    # 4. positions: reversing the (unpadded) source, or a target of one repeated token
    full = torch.ones_like(src_mask)
    reversed_same = core.same(
        transformer_forward(module, src, tgt, full, tgt_mask),
        transformer_forward(module, src.flip(1), tgt, full, tgt_mask),
    )
    repeated = torch.full_like(tgt, 3)
    rows = transformer_forward(module, src, repeated, src_mask, causal)
    rows_same = core.same(rows, rows[:, :1].expand_as(rows))
    if reversed_same or rows_same:
        name = (
            "no positional encoding" if reversed_same and rows_same else
            "no positional encoding on the source" if reversed_same else
            "no positional encoding on the target"
        )  # fmt: skip
        hint = core.named(TRANSFORMER_MISTAKES, name).hint
        what = (
            "reversing the source does not change the output" if reversed_same else
            "a target of one repeated token gives the same output at every position"
        )  # fmt: skip
        raise core.CheckFailure(_named_or(module, args, [name], f"{what}. {hint}"))
    core.passed(
        f"{TRANSFORMER}: later target tokens and source padding cannot move an output; the source and the "
        "positions do"
    )


def check_transformer_values(cls) -> None:
    """Equal to PyTorch's nn.TransformerEncoder / nn.TransformerDecoder between the paper's embeddings
    (nn.Embedding times sqrt(D), plus the sinusoidal table), with the same weights copied in by name."""
    generator = torch.Generator().manual_seed(3)
    encoder, decoder = (
        torch_stack(torch_layer(is_decoder, D_MODEL, N_HEADS, D_FF, seed=None), N_LAYERS, seed=generator)
        for is_decoder in (False, True)
    )
    src_lut = nn.Embedding(SRC_VOCAB, D_MODEL, device=DEVICE, dtype=DTYPE)
    tgt_lut = nn.Embedding(TGT_VOCAB, D_MODEL, device=DEVICE, dtype=DTYPE)
    projection = nn.Linear(D_MODEL, TGT_VOCAB, device=DEVICE, dtype=DTYPE)
    for oracle in (src_lut, tgt_lut, projection):
        randomize_(oracle, generator)
    pe = sinusoidal_table(MAX_LEN, D_MODEL).to(DEVICE)
    state = {
        "src_embed.lut.weight": src_lut.weight.detach().clone(),
        "tgt_embed.lut.weight": tgt_lut.weight.detach().clone(),
        "positional.pe": pe,
        **prefixed("encoder", stack_state(encoder)),
        **prefixed("decoder", stack_state(decoder)),
        "generator.proj.weight": projection.weight.detach().clone(),
        "generator.proj.bias": projection.bias.detach().clone(),
    }
    module = transformer_module(cls, transformer_args())
    load_transformer(module, state)

    src, tgt, src_mask, tgt_mask = transformer_inputs(B, T_SRC, T_TGT, SRC_VOCAB, TGT_VOCAB, generator)
    src_padding, tgt_padding = ~src_mask[:, 0, 0, :], tgt == PAD
    causal = torch.ones(T_TGT, T_TGT, dtype=torch.bool, device=DEVICE).tril()

    def oracle_memory() -> torch.Tensor:
        return encoder(src_lut(src) * math.sqrt(D_MODEL) + pe[:T_SRC], src_key_padding_mask=src_padding)

    def oracle_states() -> torch.Tensor:
        return decoder(
            tgt_lut(tgt) * math.sqrt(D_MODEL) + pe[:T_TGT],
            oracle_memory(),
            tgt_mask=~causal,
            tgt_key_padding_mask=tgt_padding,
            memory_key_padding_mask=src_padding,
        )

    expected = answer(oracle_states)
    compare_transformer(module, src, tgt, src_mask, tgt_mask, expected)
    with torch.no_grad():
        mine = call_model("encode's output", module.encode, src, src_mask)
    core.expect_close(TRANSFORMER, "encode's output (the memory)", mine, answer(oracle_memory)(), MEMORY)
    expect_no_dropout_in_eval(cls, transformer_args(), state, (src, tgt, src_mask, tgt_mask), expected)
    core.passed(
        f"{TRANSFORMER} equals torch's nn.TransformerEncoder/Decoder between nn.Embedding * sqrt(D) + the "
        f"sinusoidal table (same weights), and with dropout = {EVAL_DROPOUT} in eval mode too"
    )


EVAL_DROPOUT = 0.3  # a model built with dropout must drop nothing after .eval()


def expect_no_dropout_in_eval(cls, args: dict, state: dict, inputs: tuple, expected: Expected) -> None:
    """The model built with ``args`` but dropout > 0, in eval mode, gives ``expected()`` (dropout 0's
    output, computed after the learner's calls) on two calls in a row: nothing dropped, nothing random."""
    module = transformer_module(cls, args | {"dropout": EVAL_DROPOUT})
    load_transformer(module, state)
    outputs = [transformer_forward(module, *inputs) for _ in range(2)]
    right = expected()
    if not all(core.same(out, right) for out in outputs):
        changed = "the two calls differ" if not core.same(*outputs) else "both calls differ from dropout 0's"
        mistake = core.named(TRANSFORMER_MISTAKES, "dropout also in eval mode")
        raise core.CheckFailure(
            f"{TRANSFORMER}: built with dropout = {EVAL_DROPOUT} and in eval mode, forward's output is not "
            f"the output with dropout 0 ({changed}): {mistake.said()}. {mistake.hint}"
        )


def load_transformer(module: nn.Module, state: dict) -> None:
    """Load weights by the lesson's names, or say which top-level names differ."""
    expected, found = sorted(state), sorted(module.state_dict())
    if expected != found:
        tops = sorted({name.split(".")[0] for name in found})
        missing = sorted({name.split(".")[0] for name in expected} - set(tops))
        extra = sorted(set(tops) - {name.split(".")[0] for name in expected})
        if not missing and not extra:  # the parts are right but something inside differs
            inner_missing = [name for name in expected if name not in found][:4]
            inner_extra = [name for name in found if name not in expected][:4]
            detail = f"missing {inner_missing or 'none'}, not expected {inner_extra or 'none'}"
        else:
            detail = (
                f"your model's parts are {tops}; missing {missing or 'none'}, not expected {extra or 'none'}"
            )
        raise core.CheckFailure(
            f"{TRANSFORMER}: this check copies PyTorch's weights into your model by name, so the parts must "
            f"be called {', '.join(PARTS)} (one PositionalEncoding shared by both sides), as the exercise "
            f"asks: {detail}."
        )
    module.load_state_dict(state, strict=True)


# lesson 09's test cells call every check as checks.<name>, greedy_decode's too
check_greedy_shapes, check_greedy_values = greedy.check_greedy_shapes, greedy.check_greedy_values
check_greedy_end_symbol = greedy.check_greedy_end_symbol

CATALOGUE = {GENERATOR: GENERATOR_MISTAKES, TRANSFORMER: TRANSFORMER_MISTAKES}
