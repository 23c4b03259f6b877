"""Lesson 08's layers written with one thing changed: how a layer's sub-layers can be wired, the
right way (Post-LN, Pre-LN) and the known wrong ones. The checks' catalogue computes each
mistake of EncoderLayer and DecoderLayer from these variants and a switch (catalogue/*.toml).
"""

import functools

import torch

from autograder.checks.eval_mode import dropped


def _sublayer(x, norm, fn, style: str, residual: bool = True, base=None):
    """One sub-layer with its residual connection and its norm, wired in one of these styles:

    post: norm(x + fn(x))   pre: x + fn(norm(x))   and two wrong ones,
    from-norm: norm(x) + fn(norm(x))   norm-output: x + norm(fn(x)).
    ``base`` (post and pre): what the residual adds instead of x, a mistake.
    """
    base = x if base is None else base
    if style == "post":
        y = fn(x)
        return norm(base + y) if residual else norm(y)
    if style == "pre":
        y = fn(norm(x))
        return base + y if residual else y
    if style == "from-norm":
        h = norm(x)
        return h + fn(h)
    if style == "norm-output":
        return x + norm(fn(x))
    raise ValueError(style)


WIRINGS = {  # wiring -> (style when norm_first=False, style when norm_first=True)
    "right": ("post", "pre"),
    "always post": ("post", "post"),
    "inverted": ("pre", "post"),
    "pre from norm": ("post", "from-norm"),
    "pre norm on output": ("post", "norm-output"),
    "post norm on output": ("norm-output", "pre"),
}


def _style(layer, wiring: str) -> str:
    """The style of every sub-layer, from the wiring and the norm_first the layer was built with."""
    return WIRINGS[wiring][bool(layer.norm_first)]


def _kept(x: torch.Tensor) -> torch.Tensor:
    """A sub-layer's output as the right layer leaves it in eval mode: nothing dropped."""
    return x


def encoder_layer_variant(
    layer,
    x,
    src_mask=None,
    *,
    wiring: str = "right",
    residual: tuple[bool, bool] = (True, True),
    mask: bool = True,
    norms: tuple[str, str] = ("norm1", "norm2"),
    ffn_first: bool = False,
    eval_dropout: bool = False,
    ffn_residual_from_input: bool = False,
):
    """EncoderLayer.forward with one thing changed (the defaults compute the right answer);
    ``eval_dropout``: each sub-layer's output dropped in every mode; ``ffn_residual_from_input``:
    the feed-forward's residual adds the layer's input, not the self-attention block's output."""
    style = _style(layer, wiring)
    used = src_mask if mask else None
    attn_norm, ffn_norm = getattr(layer, norms[0]), getattr(layer, norms[1])
    drop = functools.partial(dropped, layer) if eval_dropout else _kept

    def attention(h):
        return _sublayer(h, attn_norm, lambda z: drop(layer.self_attn(z, z, z, used)), style, residual[0])

    def feed_forward(h):
        base = x if ffn_residual_from_input else None
        return _sublayer(h, ffn_norm, lambda z: drop(layer.ffn(z)), style, residual[1], base)

    return attention(feed_forward(x)) if ffn_first else feed_forward(attention(x))


def decoder_layer_variant(
    layer,
    x,
    memory,
    src_mask=None,
    tgt_mask=None,
    *,
    wiring: str = "right",
    residual: tuple[bool, bool, bool] = (True, True, True),
    self_mask: str = "tgt",
    cross_mask: str = "src",
    cross: str = "right",
    norms: tuple[str, str, str] = ("norm1", "norm2", "norm3"),
    eval_dropout: bool = False,
    ffn_residual_from_input: bool = False,
):
    """DecoderLayer.forward with one thing changed (the defaults compute the right answer).

    cross: "right" = cross_attn(x, memory, memory), "swapped" = cross_attn(memory, x, x),
    "self" = cross_attn(x, x, x), "normed memory" = Pre-LN with norm2 on the memory too.
    Masks by name: "src", "tgt" or "none". ``eval_dropout``: each sub-layer's output dropped in
    every mode; ``ffn_residual_from_input``: the feed-forward's residual adds the layer's input.
    """
    style = _style(layer, wiring)
    masks = {"src": src_mask, "tgt": tgt_mask, "none": None}
    n1, n2, n3 = (getattr(layer, name) for name in norms)
    drop = functools.partial(dropped, layer) if eval_dropout else _kept

    def cross_attention(z):
        if cross == "swapped":
            return layer.cross_attn(memory, z, z, masks[cross_mask])
        if cross == "self":
            return layer.cross_attn(z, z, z, masks[cross_mask])
        if cross == "normed memory" and style == "pre":
            return layer.cross_attn(z, n2(memory), n2(memory), masks[cross_mask])
        return layer.cross_attn(z, memory, memory, masks[cross_mask])

    def self_attention(z):
        return drop(layer.self_attn(z, z, z, masks[self_mask]))

    given = x
    x = _sublayer(x, n1, self_attention, style, residual[0])
    x = _sublayer(x, n2, lambda z: drop(cross_attention(z)), style, residual[1])
    base = given if ffn_residual_from_input else None
    return _sublayer(x, n3, lambda z: drop(layer.ffn(z)), style, residual[2], base)
