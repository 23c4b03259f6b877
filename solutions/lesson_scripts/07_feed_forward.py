# %% [markdown]
# # Lesson 07: The position-wise feed-forward network
#
# Attention (lessons 03 to 05) moves information **between** positions: each output is a
# weighted average of values from the whole sequence. But an average of vectors is not
# much of a computation. Every Transformer layer therefore has a second part that works on
# each position **alone**: a small two-layer network, the same one at every position,
#
# $$\mathrm{FFN}(x) = \max(0,\; x W_1 + b_1)\, W_2 + b_2 .$$
#
# It widens each $D$-dimensional vector to $d_{ff}$ (4 times wider in the paper), applies
# a non-linearity, and projects back. It holds about two thirds of the layer's parameters.
#
# In this lesson you write it, check it against the feed-forward part of PyTorch's
# `nn.TransformerEncoderLayer`, and then ask: why must there be a non-linearity, why
# $d_{ff} = 4D$, and what changes when ReLU is replaced by GELU.
#
# **You will write:** `PositionwiseFeedForward(d_model, d_ff, dropout=0.0, activation="relu")`.

# %% install
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import feed_forward as checks
from autograder.checks.device import describe_devices
from autograder.timing import median_seconds
from solutions.feed_forward import ACTIVATIONS  # {"relu": F.relu, "gelu": F.gelu}
from solutions.multi_head import MultiHeadAttention  # lesson 05, for comparisons

torch.manual_seed(0)
print(describe_devices())

# %% [markdown]
# ## The formula, position by position
#
# For one position's vector $x \in \mathbb{R}^D$ (a row vector, as PyTorch stores it):
#
# $$h = \phi(x W_1 + b_1) \in \mathbb{R}^{d_{ff}}, \qquad y = h W_2 + b_2 \in \mathbb{R}^{D},$$
#
# where $\phi$ is the activation: ReLU, $\max(0, z)$, in the paper, or GELU (below). In
# PyTorch, $W_1$ and $b_1$ live in `linear1 = nn.Linear(D, d_ff)`, and $W_2$, $b_2$ in
# `linear2 = nn.Linear(d_ff, D)`, so the whole network is
#
# $$\mathrm{FFN}(x) = \texttt{linear2}(\phi(\texttt{linear1}(x))).$$
#
# **Position-wise** means that the same two layers are applied to every position of every
# sequence, independently: nothing flows between positions here. (It is a convolution with
# kernel size 1, as the paper remarks.) `nn.Linear` acts on the last dimension, so applying
# it to `[B, T, D]` does exactly that, with no loop.
#
# ## Shapes
#
# | tensor | shape | meaning |
# |---|---|---|
# | `x` | `[B, T, D]` | one vector per position |
# | `linear1.weight`, `linear1.bias` | `[d_ff, D]`, `[d_ff]` | widen: $D \to d_{ff}$ (nn.Linear stores $W_1^\top$) |
# | `h = activation(linear1(x))` | `[B, T, d_ff]` | the hidden layer, 4 times wider |
# | `linear2.weight`, `linear2.bias` | `[D, d_ff]`, `[D]` | narrow back: $d_{ff} \to D$ |
# | `y = linear2(h)` | `[B, T, D]` | same shape as the input |

# %% [markdown]
# ## Exercise: `PositionwiseFeedForward`
#
# In `__init__`:
#
# - If `activation` is not `"relu"` or `"gelu"`, raise a `ValueError` that names the
#   allowed values. `ACTIVATIONS`, imported above, maps these two names to `F.relu` and
#   `F.gelu`; `"gelu"` is the exact GELU, `F.gelu(x)` (not `approximate="tanh"`).
# - Create `self.linear1 = nn.Linear(d_model, d_ff)` first, then
#   `self.linear2 = nn.Linear(d_ff, d_model)`. These names are PyTorch's own, so the
#   weights of `nn.TransformerEncoderLayer` load into your module unchanged.
# - Keep a dropout layer, `nn.Dropout(dropout)`, and the activation function.
#
# In `forward`, return `linear2(dropout(activation(linear1(x))))`. Dropout changes no expected
# value: the checks compare with dropout 0, then once more with `dropout=0.3` after `.eval()`,
# where `nn.Dropout` drops nothing, and once after `.train()`, where it must drop some hidden
# units (an output equal to dropout 0's, or dropped entry by entry, tells a dropout missing or
# misplaced). Do not add `x` to the output: the residual connection comes in lesson 08.

# %% exercise solutions.feed_forward.PositionwiseFeedForward

# %% [markdown]
# ## Check your work
#
# The checks copy the weights of `nn.TransformerEncoderLayer`'s `linear1` and `linear2`
# into your module and compare with what that layer computes,
# `linear2(activation(linear1(x)))`, once with the default ReLU and once with GELU. They
# use $D = 8$ and $d_{ff} = 20$, so a hidden width hard-coded to $4D$ shows.

# %% test test_PositionwiseFeedForward_shapes points=1
checks.check_feed_forward_shapes(PositionwiseFeedForward)

# %% test test_PositionwiseFeedForward_relu points=2
checks.check_feed_forward_relu(PositionwiseFeedForward)
### BEGIN HIDDEN TESTS
from autograder.hidden.feed_forward import hidden_feed_forward

hidden_feed_forward(PositionwiseFeedForward, "relu")
### END HIDDEN TESTS

# %% test test_PositionwiseFeedForward_gelu points=2
checks.check_feed_forward_gelu(PositionwiseFeedForward)
### BEGIN HIDDEN TESTS
from autograder.hidden.feed_forward import hidden_feed_forward

hidden_feed_forward(PositionwiseFeedForward, "gelu")
### END HIDDEN TESTS

# %% test test_PositionwiseFeedForward_bad_activation points=1
checks.check_feed_forward_bad_activation(PositionwiseFeedForward)
### BEGIN HIDDEN TESTS
from autograder.hidden.feed_forward import hidden_bad_activation

hidden_bad_activation(PositionwiseFeedForward)
### END HIDDEN TESTS

# %% [markdown]
# ## Each position on its own
#
# Two quick facts about "position-wise". Shuffling the positions of the input shuffles
# the output the same way, and changing the input at one position changes the output at
# that position only.

# %% experiment
ffn = PositionwiseFeedForward(16, 64).double()  # float64, so rounding cannot blur the comparison
x = torch.randn(1, 6, 16, dtype=torch.float64)  # [B=1, T=6, D=16]
order = torch.randperm(6)
with torch.no_grad():
    out = ffn(x)
    print("shuffle, then FFN == FFN, then shuffle:", torch.allclose(ffn(x[:, order]), out[:, order]))
    nudged = x.clone()
    nudged[0, 2] += 1.0  # change position 2 only
    moved = (ffn(nudged) - out).abs().amax(-1)[0] > 0
    print("positions whose output moved:", moved.nonzero().flatten().tolist())

# %% [markdown]
# ## Why a non-linearity?
#
# Without $\phi$ the two layers are one. Since
#
# $$(x W_1 + b_1) W_2 + b_2 = x\,(W_1 W_2) + (b_1 W_2 + b_2),$$
#
# two linear layers compose into a single linear layer with weight $W_1 W_2$, a
# $D \times D$ matrix. All the width of the hidden layer buys nothing: $W_1 W_2$ has rank
# at most $D$, and the sub-layer is just one more linear map of each position on its own.
# (The attention's output projection $W^O$ could not simply absorb it: a residual addition
# and a LayerNorm sit between the two. But the softmax and the norm would be the layer's
# only non-linear steps.) Stacking more linear layers never gets out of this trap. The
# experiment builds that single layer from your module's weights and compares.

# %% experiment
D, d_ff = 16, 64
ffn = PositionwiseFeedForward(D, d_ff).double()  # float64: the difference below is pure rounding
x = torch.randn(4, 10, D, dtype=torch.float64)
merged = nn.Linear(D, D).double()  # one layer that should equal linear2(linear1(x))
with torch.no_grad():
    # nn.Linear stores W transposed: [D, d_ff] @ [d_ff, D] = [D, D]
    merged.weight.copy_(ffn.linear2.weight @ ffn.linear1.weight)
    merged.bias.copy_(ffn.linear2.weight @ ffn.linear1.bias + ffn.linear2.bias)
    no_activation = ffn.linear2(ffn.linear1(x))
    same = torch.allclose(no_activation, merged(x), rtol=0, atol=1e-12)
    print(f"without activation: max |two layers - one layer| < 1e-12: {same}")
    print(f"with ReLU:          max |FFN(x)     - one layer| = {(ffn(x) - merged(x)).abs().max():.2f}")
    rank = torch.linalg.matrix_rank(merged.weight)
    print(f"rank of the merged weight: {rank} (D = {D}, although d_ff = {d_ff})")

# %% [markdown]
# The ReLU is what makes the hidden width count. A tiny example: with $D = 1$ and just
# $d_{ff} = 2$ hidden units, a ReLU network computes $|x| = \max(0, x) + \max(0, -x)$
# exactly, a function that no linear map comes close to.

# %% experiment
absolute = PositionwiseFeedForward(1, 2)
with torch.no_grad():
    absolute.linear1.weight.copy_(torch.tensor([[1.0], [-1.0]]))  # h = (relu(x), relu(-x))
    absolute.linear1.bias.zero_()
    absolute.linear2.weight.copy_(torch.tensor([[1.0, 1.0]]))  # y = relu(x) + relu(-x)
    absolute.linear2.bias.zero_()
    xs = torch.linspace(-3, 3, 7)[:, None]  # seven positions, D = 1
    design = torch.cat([xs, torch.ones_like(xs)], 1)  # the best straight line a * x + b, least squares
    line = design @ torch.linalg.lstsq(design, xs.abs()).solution
    print("x        ", xs.flatten().tolist())
    print("|x|      ", xs.abs().flatten().tolist())
    print("ReLU FFN ", absolute(xs).flatten().tolist())
    print("best line", [round(v, 2) for v in line.flatten().tolist()])

# %% [markdown]
# ## Why $d_{ff} = 4D$?
#
# The paper uses $D = 512$ and $d_{ff} = 2048$, and most Transformers since keep the
# factor 4. There is no derivation behind it: it is an empirical trade-off. A wider hidden
# layer gives each position more units to respond with (one reading sees every hidden unit
# as a key that recognises a pattern in $x$ and a column of $W_2$ as the value it writes
# back), at a cost that grows linearly with $d_{ff}$. Count the parameters of one encoder
# layer with $D = 512$ and $h = 8$:

# %% experiment
D, heads = 512, 8


def count(module):
    return sum(p.numel() for p in module.parameters())


ffn = PositionwiseFeedForward(D, 4 * D)
attention = MultiHeadAttention(D, heads)
norms = 2 * count(nn.LayerNorm(D))
total = count(ffn) + count(attention) + norms
print(f"feed-forward  2*D*d_ff + d_ff + D = {count(ffn):>9,}  ({count(ffn) / total:.0%} of the layer)")
print(f"attention     4*D*D + 4*D         = {count(attention):>9,}  ({count(attention) / total:.0%})")
print(f"two LayerNorms 2 * 2*D            = {norms:>9,}  ({norms / total:.1%})")

# %% [markdown]
# Two thirds of the parameters sit in the feed-forward network. The arithmetic follows
# them. Per position, each linear layer costs $D d_{ff}$ multiply-adds, which are
# $2 D d_{ff}$ floating-point operations (FLOPs: a multiply and an add), so the two cost
# $4 D d_{ff} = 16 D^2$ FLOPs with $d_{ff} = 4D$. Counted the same way, attention
# costs $8 D^2$ for its four projections plus $4 T D$ for the scores and the weighted sum,
# which grows with the sequence length $T$. The feed-forward network does most of the
# work until $T$ reaches about $2D$ (here $D = 512$):

# %% experiment
print(f"{'T':>6} {'FFN 16 D^2':>12} {'attention 8 D^2 + 4 T D':>24} {'FFN share':>10}   (FLOPs per position)")
for length in (128, 512, 1024, 2048, 4096):
    ffn_flops, attention_flops = 16 * D * D, 8 * D * D + 4 * length * D
    share = ffn_flops / (ffn_flops + attention_flops)
    print(f"{length:>6} {ffn_flops:>12,} {attention_flops:>24,} {share:>10.0%}")

# %% [markdown]
# Inside the feed-forward network the two matrix products take almost all the time; the
# activation touches each hidden value once and is cheap. Measured on one batch:

# %% experiment
ffn = PositionwiseFeedForward(256, 1024)
x = torch.randn(4, 128, 256)
with torch.no_grad():
    hidden = ffn.linear1(x)
    times = {
        "linear1": median_seconds(ffn.linear1, x),
        "activation": median_seconds(F.relu, hidden),
        "linear2": median_seconds(ffn.linear2, hidden),
    }
for name, seconds in times.items():
    print(f"{name:>10}: {seconds * 1e3:6.2f} ms")

# %% [markdown]
# ## ReLU against GELU
#
# The paper uses ReLU, $\max(0, z)$: cheap, and its gradient is exactly 1 or 0. The 0 is
# its weak point: a hidden unit whose input is negative passes no gradient back at all,
# and a unit that is negative for every input stops learning (a "dead" unit).
#
# GELU (Hendrycks and Gimpel, 2016), used by BERT, GPT-2 and most later models, weights
# its input by the probability that a standard normal variable is below it:
#
# $$\mathrm{GELU}(z) = z\,\Phi(z) = \frac{z}{2}\left(1 + \operatorname{erf}\frac{z}{\sqrt 2}\right).$$
#
# It is smooth, close to ReLU away from 0, dips slightly below zero (its minimum is about
# $-0.17$ near $z = -0.75$), and its gradient is zero at a single point only. A faster
# tanh formula approximates it,
# $\frac{z}{2}\bigl(1 + \tanh(\sqrt{2/\pi}\,(z + 0.044715 z^3))\bigr)$; PyTorch's
# `F.gelu` computes the exact one unless you pass `approximate="tanh"`. The two differ by
# less than $10^{-3}$, which is invisible in a plot but not in a float64 check: that is
# why the checks can tell them apart.

# %% experiment
z = torch.linspace(-4, 4, 401, requires_grad=True)
curves = {
    "ReLU": F.relu,
    "GELU (exact)": F.gelu,
    "GELU (tanh approx.)": lambda z: F.gelu(z, approximate="tanh"),
}
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for (name, function), style in zip(curves.items(), ("-", "-", "--"), strict=True):
    value = function(z)
    (slope,) = torch.autograd.grad(value.sum(), z)
    axes[0].plot(z.detach(), value.detach(), style, label=name)
    axes[1].plot(z.detach(), slope, style, label=name)
axes[0].set_title("activation")
axes[0].set_ylabel("phi(z)")
axes[1].set_title("derivative (by autograd)")
axes[1].set_ylabel("d phi / dz")
for ax in axes:
    ax.set_xlabel("z (a hidden unit's input)")
    ax.axhline(0, color="gray", linewidth=0.5)
    ax.legend()
fig.tight_layout();

# %% experiment
with torch.no_grad():
    # in float64, and over z >= 0 only: the gap is the same at z and -z (both curves satisfy
    # f(z) - f(-z) = z), so on the whole grid its largest value is a tie between two points
    z64 = z.detach().double()
    gap = (F.gelu(z64) - F.gelu(z64, approximate="tanh")).abs()[z64 >= 0]
    at = z64[z64 >= 0][gap.argmax()]
    print(f"max |exact GELU - tanh GELU| on [-4, 4] = {gap.max():.1e}, at z = ±{at:.2f}")
    print(f"GELU's minimum: {F.gelu(z64).min():.3f} at z = {z64[F.gelu(z64).argmin()]:.2f}")

# one batch through a feed-forward network: how many hidden units pass no gradient back?
for activation in ("relu", "gelu"):
    ffn = PositionwiseFeedForward(64, 256, activation=activation)
    hidden = ffn.linear1(torch.randn(8, 32, 64)).detach().requires_grad_()
    (slope,) = torch.autograd.grad(ACTIVATIONS[activation](hidden).sum(), hidden)
    print(f"{activation}: {(slope == 0).float().mean():.0%} of the hidden values get exactly zero gradient")

# %% [markdown]
# Half of ReLU's hidden values pass no gradient on this batch; with GELU, every unit
# learns a little from every input. In practice both work; GELU tends to train slightly
# better in large language models, at a slightly higher cost per value.
#
# ## What it costs
#
# For an input `[B, T, D]` and hidden width $d_{ff}$:
#
# | step | time | memory |
# |---|---|---|
# | `linear1` | $O(B T D d_{ff})$ | $O(B T d_{ff})$ for the hidden layer |
# | activation (and dropout) | $O(B T d_{ff})$ | $O(B T d_{ff})$ |
# | `linear2` | $O(B T d_{ff} D)$ | $O(B T D)$ |
# | parameters | | $2 D d_{ff} + d_{ff} + D$ |
#
# Unlike attention, everything is **linear** in the sequence length $T$: each position is
# processed alone. The hidden layer `[B, T, d_ff]` is the largest tensor, 4 times the size
# of the input, and in training it is kept for the backward pass. Doubling $T$ should
# about double the time:

# %% experiment
ffn = PositionwiseFeedForward(256, 1024)
previous = None
with torch.no_grad():
    for length in (128, 256, 512):
        x = torch.randn(2, length, 256)
        seconds = median_seconds(ffn, x)
        ratio = "" if previous is None else f"  ({seconds / previous:.1f}x the previous)"
        mebibytes = 2 * length * 1024 * 4 / 2**20  # float32 hidden layer [B, T, d_ff]
        print(f"T={length:>4}: {seconds * 1e3:6.2f} ms, hidden layer {mebibytes:4.1f} MiB{ratio}")
        previous = seconds

# %% [markdown]
# ## Summary
#
# - The feed-forward network applies the same two linear layers, with a non-linearity
#   between them, to every position on its own: `linear2(activation(linear1(x)))`.
# - Without the non-linearity the two layers collapse into one linear map of rank at most
#   $D$; with it, the hidden width $d_{ff}$ buys real capacity.
# - $d_{ff} = 4D$ is an empirical choice; it puts about two thirds of a layer's parameters,
#   and most of its FLOPs for sequences shorter than about $2D$, in this network.
# - ReLU is the paper's activation; GELU is smooth and never switches a unit off
#   completely. `"gelu"` means the exact erf form, as in PyTorch.
# - Time is $O(B T D d_{ff})$ and memory $O(B T d_{ff})$: linear in $T$.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | position-wise feed-forward network | 逐位置前馈网络 |
# | hidden layer / hidden width | 隐藏层 / 隐藏层宽度 |
# | linear layer (fully connected) | 线性层（全连接层） |
# | activation function | 激活函数 |
# | non-linearity | 非线性 |
# | ReLU (rectified linear unit) | 修正线性单元 |
# | GELU (Gaussian error linear unit) | 高斯误差线性单元 |
# | tanh approximation | tanh 近似 |
# | dead unit | 死亡神经元 |
# | rank | 秩 |
# | parameter count | 参数量 |
# | FLOPs | 浮点运算次数 |
# | residual connection | 残差连接 |
