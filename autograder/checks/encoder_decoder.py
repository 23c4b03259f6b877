"""Checks for lesson 08: EncoderLayer, DecoderLayer, Encoder and Decoder.

Oracles: nn.TransformerEncoderLayer / nn.TransformerDecoderLayer and nn.TransformerEncoder /
nn.TransformerDecoder with a final nn.LayerNorm (batch_first=True, dropout=0.0), their
parameters set to seeded random values (PyTorch starts biases at 0, LayerNorms at (1, 0) and a
stack's layers as copies of each other, which would hide a swapped norm or layer) and copied
into the learner's module by the contract's names. The torch modules run in train() mode with
dropout 0 and the "fast path" off, so they take their plain, exact code path.

Masks: ours are True where a query may attend; torch's attn_mask is True where it may NOT and
its key_padding_mask is True at padding, so the checks convert. Inputs: B=3, D=12, h=3,
d_ff=20, T=5 for the encoder, T_tgt=4 != T_src=6 for the decoder, sequences of different
lengths (padding), a causal mask.

A decoder that mixes up the decoder and encoder sides (queries from memory, tgt_mask in the
cross-attention, ...) usually crashes when T_tgt != T_src. The decoder checks then run it again
with T_tgt == T_src and name the mistake its output matches.
"""

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from autograder.checks import core, shape_errors
from autograder.checks.answers import Expected, torch_answer
from autograder.checks.device import DEVICE, exact_matmul, random_tensor
from autograder.checks.eval_mode import (
    EVAL_DROPOUT,
    dropped,
    expect_dropout_off_in_eval,
    expect_same_on_second_call,
)
from autograder.checks.layer_wiring import decoder_layer_variant, encoder_layer_variant
from autograder.checks.oracles import (
    causal,
    decoder_layer_state,
    encoder_layer_state,
    stack_state,
    torch_key_padding_mask,
    torch_layer,
    torch_stack,
)

D, H, D_FF = 12, 3, 20
B, T, T_SRC, T_TGT = 3, 5, 6, 4
N_LAYERS = 2
ENC_NAME, DEC_NAME = "EncoderLayer", "DecoderLayer"
ENC_OUT, DEC_OUT = "[B, T, D]", "[B, T_tgt, D]"
STEADY = (
    f"; a second call gives the same, and built with dropout = {EVAL_DROPOUT} it drops nothing in eval mode"
)

ENCODER_LAYER_MISTAKES = core.catalogue(ENC_NAME, variant=encoder_layer_variant)
DECODER_LAYER_MISTAKES = core.catalogue(DEC_NAME, variant=decoder_layer_variant)

LAYER_ORDERS = {
    "right": slice(None),
    "first only": slice(1),
    "last only": slice(-1, None),
    "reversed": slice(None, None, -1),
}


def _stack_variant(stack, x, *args, order="right", final=True, each=False, masks="right", eval_dropout=False):
    """Encoder.forward (args: src_mask) or Decoder.forward (args: memory, src_mask, tgt_mask) with one
    thing changed: which layers run (``order``), where the final norm goes, which masks the layers get,
    whether each layer's output is dropped in every mode (``eval_dropout``)."""
    if masks == "none":  # the encoder's (src_mask,) or the decoder's (memory, src_mask, tgt_mask)
        args = (None,) if len(args) == 1 else (args[0], None, None)
    elif masks == "swapped":
        args = (args[0], args[2], args[1])
    for layer in list(stack.layers)[LAYER_ORDERS[order]]:
        x = layer(x, *args)
        x = dropped(layer, x) if eval_dropout else x
        x = stack.norm(x) if each else x
    return stack.norm(x) if final else x


ENCODER_MISTAKES = core.catalogue("Encoder", variant=_stack_variant)
DECODER_MISTAKES = core.catalogue("Decoder", variant=_stack_variant)

# --- inputs and masks ----------------------------------------------------------------------------


def lengths_mask(lengths: list[int], size: int) -> torch.Tensor:
    """Right-padded sequences of these lengths -> Bool[B, 1, 1, size], True at real tokens."""
    positions = torch.arange(size, device=DEVICE)
    return (positions < torch.tensor(lengths, device=DEVICE)[:, None])[:, None, None, :]


SRC_LENGTHS, TGT_LENGTHS, ENC_LENGTHS = [6, 2, 4], [4, 3, 2], [5, 2, 3]

# --- running the learner's modules -----------------------------------------------------------------


class _AsBuilt:
    """The learner's layer as the check built it: its sub-modules by the contract's names, and the
    norm_first the check passed (the contract does not name the attribute that stores it)."""

    def __init__(self, layer: nn.Module, norm_first: bool):
        self._layer, self.norm_first = layer, norm_first

    def __getattr__(self, name: str) -> Any:
        return getattr(self._layer, name)


# what it likely means when a target-length axis meets a source-length one in a decoder's shape error
TARGET_MEETS_SOURCE = (
    "a tensor of the target's length met one of the source's. The masked self-attention "
    "takes tgt_mask [B, 1, T_tgt, T_tgt] and the cross-attention src_mask [B, 1, 1, T_src], in the "
    "order forward(x, memory, src_mask, tgt_mask); the cross-attention's queries come from x and its "
    "keys and values from memory"
)


def _output(exercise: str, module: nn.Module, *args: torch.Tensor | None) -> torch.Tensor:
    """Call the learner's module, check that it left its inputs alone and returned a tensor; a
    shape error names its sizes by the lesson's letters."""
    x = args[0]
    if exercise.startswith("Encoder"):
        names: tuple[str, ...] = ("x", "src_mask")
        letters = {"B": x.size(0), "T": x.size(1), "D": x.size(2)}
    else:
        names = ("x", "memory", "src_mask", "tgt_mask")
        letters = {"B": x.size(0), "T_tgt": x.size(1), "T_src": args[1].size(1), "D": x.size(2)}
    with shape_errors.sizes(letters, {("T_tgt", "T_src"): TARGET_MEETS_SOURCE}):
        return core.output(exercise, module, dict(zip(names, args, strict=True)))


def _run_decoder(exercise, module, target, mistakes, x, memory, src_mask=None, tgt_mask=None):
    """Run a decoder (layer or stack). If it crashes for T_tgt != T_src, run it again with
    T_tgt == T_src, and if it then matches a known mistake, name that mistake."""
    try:
        return _output(exercise, module, x, memory, src_mask, tgt_mask)
    except core.CheckFailure as failure:
        crash = failure.__cause__
        if crash is None or isinstance(crash, NotImplementedError) or x.size(1) == memory.size(1):
            raise
        square = memory.size(1)
        x2 = random_tensor(x.size(0), square, x.size(2), seed=99)
        lengths = [max(1, square - 2 * i) for i in range(x.size(0))]
        tgt2 = None if tgt_mask is None else causal(square, DEVICE) & lengths_mask(lengths, square)
        try:
            with exact_matmul():
                out = module(x2, memory, src_mask, tgt2)
        except Exception:  # noqa: BLE001 - any crash here: the first failure stands
            raise failure from crash
        for mistake, wrong in core.mistake_outputs(mistakes, target, x2, memory, src_mask, tgt2):
            if isinstance(wrong, torch.Tensor) and wrong.shape == out.shape and torch.allclose(out, wrong):
                raise core.CheckFailure(
                    f"{exercise} raised {type(crash).__name__} for T_tgt={x.size(1)} != "
                    f"T_src={memory.size(1)}; "
                    f"with T_tgt == T_src it runs, and its output matches a known mistake, {mistake.said()}. "
                    f"{mistake.hint}"
                ) from crash
        raise


def compare_encoder_layer(layer, norm_first: bool, x, src_mask, expected: Expected) -> None:
    """The learner's EncoderLayer (weights loaded) against ``expected()`` (computed after the
    learner's call), naming a known mistake."""
    out = _output("EncoderLayer", layer, x, src_mask)
    wrong = core.mistake_outputs(ENCODER_LAYER_MISTAKES, _AsBuilt(layer, norm_first), x, src_mask)
    core.expect_close("EncoderLayer", "the output", out, expected(), ENC_OUT, wrong)


def compare_decoder_layer(layer, norm_first: bool, x, memory, src_mask, tgt_mask, expected: Expected) -> None:
    """The learner's DecoderLayer (weights loaded) against ``expected()`` (computed after the
    learner's call), naming a known mistake."""
    target = _AsBuilt(layer, norm_first)
    out = _run_decoder("DecoderLayer", layer, target, DECODER_LAYER_MISTAKES, x, memory, src_mask, tgt_mask)
    wrong = core.mistake_outputs(DECODER_LAYER_MISTAKES, target, x, memory, src_mask, tgt_mask)
    core.expect_close("DecoderLayer", "the output", out, expected(), DEC_OUT, wrong)


def compare_encoder(stack, x, src_mask, expected: Expected) -> None:
    out = _output("Encoder", stack, x, src_mask)
    wrong = core.mistake_outputs(ENCODER_MISTAKES, stack, x, src_mask)
    core.expect_close("Encoder", "the output", out, expected(), ENC_OUT, wrong)


def compare_decoder(stack, x, memory, src_mask, tgt_mask, expected: Expected) -> None:
    out = _run_decoder("Decoder", stack, stack, DECODER_MISTAKES, x, memory, src_mask, tgt_mask)
    wrong = core.mistake_outputs(DECODER_MISTAKES, stack, x, memory, src_mask, tgt_mask)
    core.expect_close("Decoder", "the output", out, expected(), DEC_OUT, wrong)


def _layer(cls, exercise: str, norm_first: bool, state: dict) -> nn.Module:
    layer = core.build(exercise, cls, D, H, D_FF, dropout=0.0, norm_first=norm_first)
    core.load_weights(exercise, layer, state)
    return layer


def expect_steady(
    exercise: str, module, cls, args: tuple, norm_first: bool, state: dict, inputs: tuple, expected: Expected
) -> None:
    """``module`` (the learner's, dropout 0, ``state`` loaded), whose output on ``inputs`` was right,
    called twice more, and the learner's module built with ``args``, dropout = EVAL_DROPOUT and
    ``norm_first``, in eval mode, with ``state`` loaded, twice: every output is ``expected()``,
    dropout 0's (computed after the learner's calls). Torch's global random state is kept."""
    expect_same_on_second_call(exercise, functools.partial(_output, exercise, module, *inputs), expected)
    with torch.random.fork_rng(devices=[]):
        dropping = core.build(exercise, cls, *args, dropout=EVAL_DROPOUT, norm_first=norm_first)
        core.load_weights(exercise, dropping, state)
        run = functools.partial(_output, exercise, dropping, *inputs)
        letters = ENC_OUT if exercise.startswith("Encoder") else DEC_OUT
        expect_dropout_off_in_eval(exercise, CATALOGUE[exercise], run, expected, letters)


def _encoder_inputs(seed: int):
    return random_tensor(B, T, D, seed=seed), lengths_mask(ENC_LENGTHS, T)


def _decoder_inputs(seed: int):
    x, memory = random_tensor(B, T_TGT, D, seed=seed), random_tensor(B, T_SRC, D, seed=seed + 1)
    return x, memory, lengths_mask(SRC_LENGTHS, T_SRC), lengths_mask(TGT_LENGTHS, T_TGT)


def _expect_output(exercise: str, out: torch.Tensor, reference: torch.Tensor, letters: str, shape) -> None:
    core.expect_shape(exercise, "the output", out, letters, shape)
    core.expect_dtype(exercise, "the output", out, reference.dtype)
    core.expect_device(exercise, "the output", out, reference.device)


# --- EncoderLayer ----------------------------------------------------------------------------------


def _encoder_layer_against_torch(cls, norm_first: bool, seed: int, masked: bool) -> None:
    oracle = torch_layer(False, D, H, D_FF, norm_first, seed=seed)
    layer = _layer(cls, ENC_NAME, norm_first, encoder_layer_state(oracle))
    x, padding = _encoder_inputs(seed + 1)
    if masked:
        mask = padding & causal(T, DEVICE)  # [B, 1, T, T]
        torch_masks = {
            "src_mask": ~causal(T, DEVICE),
            "src_key_padding_mask": torch_key_padding_mask(padding),
        }
    else:
        mask, torch_masks = None, {}
    expected = torch_answer(oracle, x, **torch_masks)
    compare_encoder_layer(layer, norm_first, x, mask, expected)
    if not masked:
        state = encoder_layer_state(oracle)
        expect_steady(ENC_NAME, layer, cls, (D, H, D_FF), norm_first, state, (x, mask), expected)
    return layer, x, mask


def _equals_torchs(name: str, against_torch: Callable[..., Any], cls, norm_first: bool, seed: int) -> None:
    """``against_torch`` (the layer ``name`` against torch's, unmasked) for one ``norm_first``, then
    the line that says the layer equals torch's nn.Transformer<name>."""
    against_torch(cls, norm_first=norm_first, seed=seed, masked=False)
    layout = "Pre-LN" if norm_first else "Post-LN"
    core.passed(f"{name} ({layout}) equals torch's nn.Transformer{name}(norm_first={norm_first}){STEADY}")


def check_encoder_layer_shapes(cls) -> None:
    """Parameters by the contract's names; x [B, T, D] -> [B, T, D], float64 on the inputs' device."""
    oracle = torch_layer(False, D, H, D_FF, seed=0)
    layer = _layer(cls, ENC_NAME, False, encoder_layer_state(oracle))
    x, _ = _encoder_inputs(seed=1)
    _expect_output(ENC_NAME, _output(ENC_NAME, layer, x, None), x, ENC_OUT, (B, T, D))
    core.passed(
        f"{ENC_NAME} has self_attn, ffn, norm1, norm2 and maps x {ENC_OUT} to {ENC_OUT} = {[B, T, D]}"
    )


def check_encoder_layer_post_ln(cls) -> None:
    """Post-LN (norm_first=False): equal to nn.TransformerEncoderLayer with the same weights."""
    _equals_torchs(ENC_NAME, _encoder_layer_against_torch, cls, norm_first=False, seed=10)


def check_encoder_layer_pre_ln(cls) -> None:
    """Pre-LN (norm_first=True): equal to nn.TransformerEncoderLayer(norm_first=True)."""
    _equals_torchs(ENC_NAME, _encoder_layer_against_torch, cls, norm_first=True, seed=20)


def check_encoder_layer_mask(cls) -> None:
    """With a padding & causal src_mask [B, 1, T, T], both norm_first; with a padding mask
    [B, 1, 1, T], a padded token moves no other position."""
    for norm_first, seed in ((False, 30), (True, 40)):
        layer, x, _ = _encoder_layer_against_torch(cls, norm_first, seed, masked=True)
    padding = lengths_mask(ENC_LENGTHS, T)
    moved = x.clone()
    moved[1, 2:] += 10.0  # sequence 1 has 2 real tokens: positions 2 and after are padding
    out, out_moved = _output(ENC_NAME, layer, x, padding), _output(ENC_NAME, layer, moved, padding)
    if not torch.allclose(out[1, :2], out_moved[1, :2]):
        raise core.CheckFailure(
            f"{ENC_NAME}: with a padding mask [B, 1, 1, T], changing the padding tokens' inputs changed "
            "the outputs of the real tokens: pass src_mask to the self-attention."
        )
    core.passed(f"{ENC_NAME} applies src_mask (padding and causal) like torch, for Post-LN and Pre-LN")


# --- DecoderLayer ----------------------------------------------------------------------------------


def _decoder_layer_against_torch(cls, norm_first: bool, seed: int, masked: bool):
    oracle = torch_layer(True, D, H, D_FF, norm_first, seed=seed)
    layer = _layer(cls, DEC_NAME, norm_first, decoder_layer_state(oracle))
    x, memory, src_padding, tgt_padding = _decoder_inputs(seed + 1)
    if masked:
        src_mask, tgt_mask = (
            src_padding,
            tgt_padding & causal(T_TGT, DEVICE),
        )  # [B,1,1,T_src], [B,1,T_tgt,T_tgt]
        torch_masks = {
            "tgt_mask": ~causal(T_TGT, DEVICE),
            "tgt_key_padding_mask": torch_key_padding_mask(tgt_padding),
            "memory_key_padding_mask": torch_key_padding_mask(src_padding),
        }
    else:
        src_mask = tgt_mask = None
        torch_masks = {}
    expected = torch_answer(oracle, x, memory, **torch_masks)
    compare_decoder_layer(layer, norm_first, x, memory, src_mask, tgt_mask, expected)
    if not masked:
        state, inputs = decoder_layer_state(oracle), (x, memory, src_mask, tgt_mask)
        expect_steady(DEC_NAME, layer, cls, (D, H, D_FF), norm_first, state, inputs, expected)
    return layer, x, memory, src_mask, tgt_mask


def check_decoder_layer_shapes(cls) -> None:
    """Parameters by the contract's names; x [B, T_tgt, D], memory [B, T_src, D] -> [B, T_tgt, D]."""
    oracle = torch_layer(True, D, H, D_FF, seed=50)
    layer = _layer(cls, DEC_NAME, False, decoder_layer_state(oracle))
    x, memory, _, _ = _decoder_inputs(seed=51)
    out = _run_decoder(DEC_NAME, layer, _AsBuilt(layer, False), DECODER_LAYER_MISTAKES, x, memory)
    _expect_output(DEC_NAME, out, x, DEC_OUT, (B, T_TGT, D))
    core.passed(
        f"{DEC_NAME} has self_attn, cross_attn, ffn, norm1..3 and maps x {DEC_OUT} and memory "
        f"[B, T_src, D] to {DEC_OUT} = {[B, T_TGT, D]} for T_tgt={T_TGT} != T_src={T_SRC}"
    )


def check_decoder_layer_post_ln(cls) -> None:
    """Post-LN (norm_first=False): equal to nn.TransformerDecoderLayer with the same weights."""
    _equals_torchs(DEC_NAME, _decoder_layer_against_torch, cls, norm_first=False, seed=60)


def check_decoder_layer_pre_ln(cls) -> None:
    """Pre-LN (norm_first=True): equal to nn.TransformerDecoderLayer(norm_first=True)."""
    _equals_torchs(DEC_NAME, _decoder_layer_against_torch, cls, norm_first=True, seed=70)


def check_decoder_layer_masks(cls) -> None:
    """src_mask (source padding) and tgt_mask (causal and target padding), both norm_first; the
    future and padded source positions cannot move the output."""
    for norm_first, seed in ((False, 80), (True, 90)):
        layer, x, memory, src_mask, tgt_mask = _decoder_layer_against_torch(
            cls, norm_first, seed, masked=True
        )
    out = _output(DEC_NAME, layer, x, memory, src_mask, tgt_mask)
    future = x.clone()
    future[:, -1] += 10.0  # the last target position: in every earlier position's future
    if not torch.allclose(out[:, :-1], _output(DEC_NAME, layer, future, memory, src_mask, tgt_mask)[:, :-1]):
        raise core.CheckFailure(f"{DEC_NAME}: changing the last target token changed the outputs before it")
    padded = memory.clone()
    padded[1, -1] += 10.0  # source sequence 1 has 2 real tokens: its last position is padding
    if not torch.allclose(out, _output(DEC_NAME, layer, x, padded, src_mask, tgt_mask)):
        raise core.CheckFailure(f"{DEC_NAME}: changing a padded source position of memory changed the output")
    core.passed(
        f"{DEC_NAME} applies tgt_mask to the self-attention and src_mask to the cross-attention, like torch"
    )


# --- Encoder and Decoder stacks -----------------------------------------------------------------------


def check_stack_structure(exercise: str, stack: nn.Module, n_layers: int) -> None:
    """``layers``: an nn.ModuleList of n_layers different layers sharing no parameter; a ``norm``."""
    how = "a plain list hides the layers' parameters from .parameters(), .to() and the state_dict."
    layers = core.expect_attribute(exercise, stack, "layers", nn.ModuleList, "an nn.ModuleList", how)
    if len(layers) != n_layers:
        raise core.CheckFailure(
            f"{exercise}: expected n_layers = {n_layers} layers in `layers`, got {len(layers)}"
        )
    ids = [id(p) for layer in layers for p in layer.parameters()]
    if len({id(layer) for layer in layers}) < n_layers or len(set(ids)) < len(ids):
        raise core.CheckFailure(
            f"{exercise}: the layers share their parameters (`[layer] * n_layers` repeats one layer "
            f"object): build a new layer for each, e.g. nn.ModuleList(Layer(...) for _ in range(n_layers))."
        )
    if not isinstance(getattr(stack, "norm", None), nn.Module):
        raise core.CheckFailure(f"{exercise}: expected a final LayerNorm in an attribute `norm`")


def _check_structure(exercise: str, cls) -> None:
    for n_layers in (N_LAYERS, 3):
        stack = core.build(exercise, cls, D, H, D_FF, n_layers, dropout=0.0, norm_first=False)
        check_stack_structure(exercise, stack, n_layers)
    core.passed(f"{exercise}: `layers` is an nn.ModuleList of n_layers different layers, then a final `norm`")


def check_encoder_structure(cls) -> None:
    _check_structure("Encoder", cls)


def check_decoder_structure(cls) -> None:
    _check_structure("Decoder", cls)


def _first_layer_fails(exercise: str, layer_name: str, norm_first: bool, problem: str) -> core.CheckFailure:
    return core.CheckFailure(
        f"{exercise}: its first layer, layers[0], {problem} nn.Transformer{layer_name}(norm_first="
        f"{norm_first}) computes. Make {layer_name} pass its own checks first, and pass d_model, n_heads, "
        f"d_ff, dropout and norm_first on to every layer."
    )


def _matches(mine: Any, expected: Expected) -> bool:
    """Whether the learner's first layer gave what ``expected()`` gives (computed only now, and
    kept nowhere the learner's later calls could read it)."""
    first = expected()
    return isinstance(mine, torch.Tensor) and mine.shape == first.shape and torch.allclose(mine, first)


def check_encoder_values(cls) -> None:
    """Equal to nn.TransformerEncoder (2 layers, final nn.LayerNorm), Post-LN and Pre-LN, with src_mask."""
    for norm_first, seed in ((False, 100), (True, 110)):
        oracle = torch_stack(torch_layer(False, D, H, D_FF, norm_first, seed=None), N_LAYERS, seed=seed)
        stack = core.build("Encoder", cls, D, H, D_FF, N_LAYERS, dropout=0.0, norm_first=norm_first)
        check_stack_structure("Encoder", stack, N_LAYERS)
        core.load_weights("Encoder", stack, stack_state(oracle))
        x, padding = _encoder_inputs(seed + 1)
        torch_masks = {"src_key_padding_mask": torch_key_padding_mask(padding)}
        try:
            with torch.no_grad(), exact_matmul():
                mine = stack.layers[0](x, padding)
        except Exception as error:
            raise _first_layer_fails(
                "Encoder", "EncoderLayer", norm_first, "raises an error where"
            ) from error
        if not _matches(mine, torch_answer(oracle.layers[0], x, **torch_masks)):
            raise _first_layer_fails("Encoder", "EncoderLayer", norm_first, "does not compute what")
        expected = torch_answer(oracle, x, **torch_masks)
        compare_encoder(stack, x, padding, expected)
        args, state = (D, H, D_FF, N_LAYERS), stack_state(oracle)
        expect_steady("Encoder", stack, cls, args, norm_first, state, (x, padding), expected)
    core.passed(
        f"Encoder equals torch's nn.TransformerEncoder with a final LayerNorm, Post-LN and Pre-LN{STEADY}"
    )


def check_decoder_values(cls) -> None:
    """Equal to nn.TransformerDecoder (2 layers, final nn.LayerNorm), Post-LN and Pre-LN, with both masks."""
    for norm_first, seed in ((False, 120), (True, 130)):
        oracle = torch_stack(torch_layer(True, D, H, D_FF, norm_first, seed=None), N_LAYERS, seed=seed)
        stack = core.build("Decoder", cls, D, H, D_FF, N_LAYERS, dropout=0.0, norm_first=norm_first)
        check_stack_structure("Decoder", stack, N_LAYERS)
        core.load_weights("Decoder", stack, stack_state(oracle))
        x, memory, src_padding, tgt_padding = _decoder_inputs(seed + 1)
        src_mask, tgt_mask = src_padding, tgt_padding & causal(T_TGT, DEVICE)
        torch_masks = {
            "tgt_mask": ~causal(T_TGT, DEVICE),
            "tgt_key_padding_mask": torch_key_padding_mask(tgt_padding),
            "memory_key_padding_mask": torch_key_padding_mask(src_padding),
        }
        try:
            with torch.no_grad(), exact_matmul():
                mine = stack.layers[0](x, memory, src_mask, tgt_mask)
        except Exception as error:
            raise _first_layer_fails(
                "Decoder", "DecoderLayer", norm_first, "raises an error where"
            ) from error
        if not _matches(mine, torch_answer(oracle.layers[0], x, memory, **torch_masks)):
            raise _first_layer_fails("Decoder", "DecoderLayer", norm_first, "does not compute what")
        expected = torch_answer(oracle, x, memory, **torch_masks)
        compare_decoder(stack, x, memory, src_mask, tgt_mask, expected)
        args, state, inputs = (D, H, D_FF, N_LAYERS), stack_state(oracle), (x, memory, src_mask, tgt_mask)
        expect_steady("Decoder", stack, cls, args, norm_first, state, inputs, expected)
    core.passed(
        f"Decoder equals torch's nn.TransformerDecoder with a final LayerNorm, Post-LN and Pre-LN{STEADY}"
    )


CATALOGUE = {
    "EncoderLayer": ENCODER_LAYER_MISTAKES,
    "DecoderLayer": DECODER_LAYER_MISTAKES,
    "Encoder": ENCODER_MISTAKES,
    "Decoder": DECODER_MISTAKES,
}
