"""Lesson 08's experiment machinery: the data-flow figure of the encoder and the decoder, and the
gradients measured through deep stacks.

The lesson's experiment cells call these, so that what a learner reads there is the experiment
(which stacks are compared, what is printed), not the drawing and the plumbing around it. A
function that builds the learner's own modules takes their classes as arguments.
"""

import torch
from matplotlib import pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch
from torch import nn

COLORS = {
    "emb": "#f8cecc",
    "attn": "#fde2b8",
    "norm": "#fff2a8",
    "ffn": "#cfe2f3",
    "linear": "#d9d2e9",
    "softmax": "#d5e8d4",
}
Span = tuple[float, float]  # a box's bottom and top y
ENC, DEC, HALF = 2.5, 7.5, 1.55  # the two columns' centres; half a box's width with its padding


def _box(ax: Axes, x: float, y: float, text: str, kind: str, width: float = 3.0) -> tuple[float, float]:
    """A rounded box centred at (x, y), 0.6 high; returns its bottom and top y."""
    corner = (x - width / 2, y - 0.3)
    patch = FancyBboxPatch(corner, width, 0.6, boxstyle="round,pad=0.05", fc=COLORS[kind], ec="black")
    ax.add_patch(patch)
    ax.text(x, y, text, ha="center", va="center", fontsize=9.5)
    return y - 0.35, y + 0.35


def _arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], color: str = "black") -> None:
    ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "color": color, "lw": 1.3})


def _skip(ax: Axes, x: float, sublayer: Span, add: Span, side: int) -> None:
    """A residual path: leaves below the sub-layer, goes round it, enters its Add & Norm."""
    y0, edge, y1 = sublayer[0] - 0.12, x + side * 1.85, (add[0] + add[1]) / 2
    ax.plot([x, edge, edge], [y0, y0, y1], color="gray", lw=1.1)
    _arrow(ax, (edge, y1), (x + side * HALF, y1), color="gray")


def _repeat(ax: Axes, x: float, y0: float, y1: float, label: str) -> None:
    """The dashed frame of a layer that is stacked N times."""
    frame = FancyBboxPatch(
        (x - 2.1, y0), 4.2, y1 - y0, boxstyle="round,pad=0.1", facecolor="#f2f2f2", edgecolor="gray", ls="--"
    )
    ax.add_patch(frame)
    left = x < 5
    where = (x - 2.35 if left else x + 2.35, (y0 + y1) / 2)
    ax.text(*where, label, ha="right" if left else "left", va="center", weight="bold")


Box = tuple[float, str, str, float]  # a box's y, text, kind (its colour) and width


def _column(
    ax: Axes, x: float, tokens: str, frame: tuple[float, str], sublayers: list[Box], tops: list[Box]
) -> list[Span]:
    """One side, bottom to top: the tokens, their embedding, the frame of the stacked layer (its
    top and label), each sub-layer with its Add & Norm 1.1 above and its residual path (left of
    the encoder's column, right of the decoder's), then ``tops``, every box joined to the one
    below by an arrow; the spans of all the boxes, the embedding's first."""
    ax.text(x, -0.1, tokens, ha="center", fontsize=9.5)
    spans = [_box(ax, x, 0.9, "Embedding ×√D + positional enc.", "emb", width=3.4)]
    _arrow(ax, (x, 0.25), (x, spans[0][0]))
    _repeat(ax, x, 1.65, *frame)
    residuals = []  # (a sub-layer, its Add & Norm)
    for y, text, kind, width in sublayers:
        residuals.append((_box(ax, x, y, text, kind, width), _box(ax, x, y + 1.1, "Add & Norm", "norm")))
        spans += residuals[-1]
    spans += [_box(ax, x, y, text, kind, width) for y, text, kind, width in tops]
    for lower, upper in zip(spans[:-1], spans[1:], strict=True):
        _arrow(ax, (x, lower[1]), (x, upper[0]))
    side = -1 if x < 5 else 1  # the encoder's paths go round on the left, the decoder's on the right
    for sublayer, add in residuals:
        _skip(ax, x, sublayer, add, side)
    return spans


def draw_data_flow() -> Figure:
    """The encoder and the decoder side by side, bottom to top, with the residual paths (gray)
    and the memory that feeds every decoder layer's cross-attention (red)."""
    fig, ax = plt.subplots(figsize=(10, 8.6))
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.35, 12.6)
    ax.axis("off")

    # encoder, bottom to top
    encoder_sublayers = [(2.4, "Multi-head self-attention", "attn", 3.0), (4.5, "Feed-forward", "ffn", 3.0)]
    encoder_top = [(7.0, "final LayerNorm", "norm", 3.0)]
    frame = (6.25, "N ×\nencoder\nlayer")
    final = _column(ax, ENC, "source tokens [B, T_src]", frame, encoder_sublayers, encoder_top)[-1]

    # decoder, bottom to top
    decoder_sublayers = [
        (2.4, "Masked multi-head self-attention", "attn", 3.3),
        (4.6, "Multi-head cross-attention", "attn", 3.0),
        (6.7, "Feed-forward", "ffn", 3.0),
    ]
    decoder_top = [
        (9.2, "final LayerNorm", "norm", 3.0),
        (10.2, "Linear  D → vocabulary", "linear", 3.0),
        (11.2, "Softmax", "softmax", 3.0),
    ]
    frame = (8.45, "N ×\ndecoder\nlayer")
    spans = _column(ax, DEC, "target tokens, shifted right [B, T_tgt]", frame, decoder_sublayers, decoder_top)
    cross, softmax = spans[3], spans[-1]
    _arrow(ax, (DEC, softmax[1]), (DEC, 12.15))
    ax.text(DEC, 12.25, "next-token probabilities [B, T_tgt, V]", ha="center", fontsize=9.5)

    # the memory: the encoder's output gives the keys and values of every decoder layer's cross-attention
    middle = (cross[0] + cross[1]) / 2
    ax.plot([ENC, ENC, 4.95, 4.95], [final[1], 7.75, 7.75, middle], color="tab:red", lw=2)
    _arrow(ax, (4.95, middle), (DEC - HALF, middle), color="tab:red")
    ax.text(3.75, 7.87, "memory [B, T_src, D]", color="tab:red", fontsize=9.5, ha="center")
    ax.text(5.25, middle + 0.12, "K, V", color="tab:red", fontsize=9)
    ax.text(DEC - 0.12, cross[0] - 0.25, "Q", fontsize=9, ha="right")
    ax.set_title(
        "Encoder-decoder data flow: Post-LN layers as in the paper, plus this course's final LayerNorms\n"
        "(the paper has none); gray arrows: residual connections",
        fontsize=10,
    )
    return fig


def first_layer_gradient(
    feed_forward: type[nn.Module],
    layer_norm: type[nn.Module],
    depth: int,
    wiring: str,
    d_model: int = 16,
    d_ff: int = 64,
) -> float:
    """Gradient norm of the first block's weights in a stack of ``depth`` feed-forward blocks
    (``feed_forward(d_model, d_ff)``), wired "plain" F(x), "norm" F(LN(x)) or "residual" x + F(LN(x))."""
    torch.manual_seed(1)
    blocks = nn.ModuleList(feed_forward(d_model, d_ff) for _ in range(depth)).double()
    norms = nn.ModuleList(layer_norm(d_model) for _ in range(depth)).double()
    h = torch.randn(2, 6, d_model, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for block, norm in zip(blocks, norms, strict=True):
        if wiring == "plain":
            h = block(h)
        elif wiring == "norm":
            h = block(norm(h))
        else:
            h = h + block(norm(h))
    direction = torch.randn(h.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    (h * direction).sum().backward()  # a fixed random "loss"
    return blocks[0].linear1.weight.grad.norm().item()


def post_and_pre(encoder: type[nn.Module], depth: int) -> list[float]:
    """[first-layer grad, last-layer grad, residual std] of ``encoder(16, 2, 32, n_layers=depth)``
    at initialisation, for Post-LN, then for Pre-LN."""
    row = []
    for norm_first in (False, True):
        torch.manual_seed(1)
        stack = encoder(16, 2, 32, n_layers=depth, norm_first=norm_first).double()
        h = torch.randn(2, 8, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        for layer in stack.layers:
            h = layer(h)
        out = stack.norm(h)
        direction = torch.randn(out.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        (out * direction).sum().backward()  # a fixed random "loss"
        first, last = (stack.layers[i].ffn.linear1.weight.grad.norm().item() for i in (0, -1))
        row += [first, last, h.std().item()]
    return row
