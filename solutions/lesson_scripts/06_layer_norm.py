# %% [markdown]
# # Lesson 06: Layer normalization
#
# A Transformer stacks many layers, and each adds its result to a running sum (the
# residual stream, lesson 08). Without care the numbers flowing through that stack drift:
# some positions grow large, others shrink, and the next layer sees inputs whose scale
# depends on everything that came before. Training is fastest when every layer gets inputs
# of a predictable size. **Layer normalization** gives it that: it rescales each position's
# feature vector to mean 0 and variance 1, then lets the network choose its own scale and
# offset with two learned vectors, $\gamma$ and $\beta$.
#
# In this lesson you write `LayerNorm`, check it against PyTorch's `nn.LayerNorm`, and then
# look at the choices inside it: which axis it normalizes (and why not BatchNorm's), what
# $\gamma$ and $\beta$ give back, why the variance divides by $D$ and where $\varepsilon$ goes.
#
# **You will write:** `LayerNorm(d_model, eps=1e-5)`.

# %% install
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import layer_norm as checks
from autograder.checks.device import describe_devices
from autograder.timing import median_seconds

torch.manual_seed(0)
print(describe_devices())

# %% [markdown]
# ## The formula
#
# Take one position's feature vector $x \in \mathbb{R}^D$ (one token, at one place in one
# sequence). Layer normalization computes its mean and variance over the $D$ features,
#
# $$\mu = \frac{1}{D}\sum_{i=1}^{D} x_i, \qquad
# \sigma^2 = \frac{1}{D}\sum_{i=1}^{D} (x_i - \mu)^2,$$
#
# standardizes it, and then scales and shifts every feature with its own learned numbers:
#
# $$\hat{x}_i = \frac{x_i - \mu}{\sqrt{\sigma^2 + \varepsilon}}, \qquad
# y_i = \gamma_i\,\hat{x}_i + \beta_i .$$
#
# Three details matter, and the checks test each of them:
#
# - the statistics are taken over the **last** dimension, the $D$ features of one position;
# - the variance divides by $D$ (the *biased* variance), not by $D - 1$;
# - $\varepsilon$ (default $10^{-5}$) is added to the variance **inside** the square root.
#
# $\gamma$ starts as all ones and $\beta$ as all zeros, so a new LayerNorm only normalizes.
#
# ## Shapes
#
# The input may have any leading axes; in a Transformer it is `[B, T, D]`:
#
# | tensor | shape | meaning |
# |---|---|---|
# | `x` | `[B, T, D]` | one feature vector per position |
# | `mean = x.mean(-1, keepdim=True)` | `[B, T, 1]` | one mean per position |
# | `var` (biased) | `[B, T, 1]` | one variance per position |
# | `x_hat = (x - mean) / sqrt(var + eps)` | `[B, T, D]` | every position: mean 0, variance 1 |
# | `gamma`, `beta` | `[D]` | one scale and one shift per feature, shared by all positions |
# | `y = gamma * x_hat + beta` | `[B, T, D]` | the output, same shape as the input |
#
# `keepdim=True` keeps the reduced axis as size 1, so `x - mean` broadcasts `[B, T, 1]`
# against `[B, T, D]`. Without it `mean` is `[B, T]`, which lines up with the wrong axes.

# %% [markdown]
# ## Exercise: `LayerNorm`
#
# In `__init__`, create the parameters `self.gamma` (ones) and `self.beta` (zeros), both of
# shape `[d_model]` and wrapped in `nn.Parameter` so that they are trained and saved, and
# keep `eps` (for example as `self.eps`).
#
# In `forward`, compute the mean and the biased variance of `x` over its last dimension
# (keep that dimension), normalize with $\varepsilon$ inside the square root, then scale by
# `gamma` and shift by `beta`. Do not change `x` in place. The names `gamma` and `beta`
# matter: the checks load `nn.LayerNorm`'s `weight` into `gamma` and its `bias` into `beta`.

# %% exercise solutions.layer_norm.LayerNorm

# %% [markdown]
# ## Check your work
#
# Each check prints a ✓ line when it passes. When one fails, the message says what was
# expected and what came out, and names the mistake if your output matches a common one.
# The second check compares with `nn.LayerNorm` at the default $\varepsilon$ and at
# $\varepsilon = 0.1$, large enough that an $\varepsilon$ in the wrong place shows at once.
# The last one feeds rows that sit near $\pm 10^5$ with a spread below 1.

# %% test test_LayerNorm_parameters points=1
checks.check_layer_norm_parameters(LayerNorm)

# %% test test_LayerNorm_matches_torch points=2
checks.check_layer_norm_matches_torch(LayerNorm)
### BEGIN HIDDEN TESTS
from autograder.hidden.layer_norm import hidden_layer_norm

hidden_layer_norm(LayerNorm, shifted=False)
### END HIDDEN TESTS

# %% test test_LayerNorm_statistics points=1
checks.check_layer_norm_statistics(LayerNorm)

# %% test test_LayerNorm_large_mean points=1
checks.check_layer_norm_large_mean(LayerNorm)
### BEGIN HIDDEN TESTS
from autograder.hidden.layer_norm import hidden_layer_norm

hidden_layer_norm(LayerNorm, shifted=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Before and after
#
# Here are four positions whose features have drifted apart: different centres and very
# different spreads, as activations deep in an unnormalized network can. Each histogram
# shows the $D = 512$ features of one position. After your LayerNorm (with $\gamma = 1$,
# $\beta = 0$) all four lie on top of each other: centred at 0 with spread 1, whatever they
# looked like before.

# %% experiment
D = 512
centres, spreads = [-6.0, 0.0, 3.0, 10.0], [0.5, 1.0, 3.0, 6.0]
x = torch.stack([c + s * torch.randn(D) for c, s in zip(centres, spreads, strict=True)])  # [T=4, D]
with torch.no_grad():
    y = LayerNorm(D)(x)

fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for ax, values, bins in ((axes[0], x, torch.linspace(-10, 30, 81)), (axes[1], y, torch.linspace(-4, 4, 41))):
    for t in range(len(centres)):
        mean, std = round(values[t].mean().item(), 1) + 0.0, values[t].std().item()  # + 0.0: no "-0.0"
        label = f"position {t}: mean {mean:.1f}, std {std:.1f}"
        ax.hist(values[t], bins=bins, histtype="step", linewidth=1.5, label=label)
    ax.set_xlabel("feature value")
    ax.set_ylabel("number of features")
    ax.legend(fontsize=8, loc="upper left" if ax is axes[1] else "upper right")
axes[0].set_title("before LayerNorm: one histogram per position")
axes[1].set_title("after LayerNorm (gamma = 1, beta = 0)")
fig.tight_layout();

# %% [markdown]
# ## LayerNorm against BatchNorm
#
# Both subtract a mean and divide by a standard deviation; they differ in **which numbers
# share the statistics**. For an activation tensor `[B, T, D]`:
#
# | | statistics taken over | one mean per | depends on the other sequences in the batch? |
# |---|---|---|---|
# | BatchNorm | the batch and the positions, `dim=(0, 1)` | feature: `[D]` | yes |
# | LayerNorm | the features, `dim=-1` | position: `[B, T]` | no |
#
# BatchNorm (Ioffe and Szegedy, 2015) was made for images, where every example in a batch
# has the same size. In language it fits badly. A token's output would depend on which other
# sentences happen to share its batch, and on how many; padding tokens would leak into the
# statistics; and because a single sentence at inference time has no batch to average over,
# BatchNorm switches to running averages collected during training, so training and
# inference compute different things. LayerNorm (Ba, Kiros and Hinton, 2016) looks at one
# position at a time, so it computes the same thing for a batch of 1 and a batch of 1000, in
# training and at inference.
#
# The experiment puts one fixed sentence into batches of different sizes filled with other
# random sentences, and measures how far that sentence's normalized output moves compared
# with normalizing it alone (BatchNorm here in training mode, the way it normalizes with
# the batch's own statistics).

# %% experiment
T, D = 6, 32
layer_norm = LayerNorm(D)
sentence = torch.randn(1, T, D)  # the sentence we follow: [1, T, D]
with torch.no_grad():
    ln_alone = layer_norm(sentence)[0]
    bn_alone = F.batch_norm(sentence.transpose(1, 2), None, None, training=True).transpose(1, 2)[0]
    print(f"{'batch size':>10} {'LayerNorm moves by':>19} {'BatchNorm moves by':>19}")
    for batch_size in (2, 4, 16, 64):
        others = 3 * torch.randn(batch_size - 1, T, D) + 1  # other sentences, other statistics
        batch = torch.cat([sentence, others])  # [batch_size, T, D], our sentence first
        ln_out = layer_norm(batch)[0]
        # BatchNorm1d wants [B, D, T]: one mean and variance per feature, over batch and positions
        bn_out = F.batch_norm(batch.transpose(1, 2), None, None, training=True).transpose(1, 2)[0]
        ln_moved = (ln_out - ln_alone).abs().max()
        bn_moved = (bn_out - bn_alone).abs().max()
        print(f"{batch_size:>10} {ln_moved:>19.2e} {bn_moved:>19.2f}")

# %% [markdown]
# LayerNorm's output for the sentence does not move at all: its statistics come from that
# sentence alone. BatchNorm's output changes with every batch it is put in.
#
# ## What $\gamma$ and $\beta$ restore
#
# Normalizing throws something away: after $\hat{x}$, every position has mean 0 and variance
# 1, even if the next layer would have liked feature 7 to be large and feature 12 to sit
# around $-3$. $\gamma$ and $\beta$ give that freedom back: $y_i = \gamma_i \hat{x}_i +
# \beta_i$ can take each **feature** to any scale and offset the network learns. If the
# features had useful scales and offsets before, $\gamma$ and $\beta$ can learn them back,
# and in the extreme the layer can come close to undoing the normalization.
#
# What they cannot restore is each **position's** own mean and size: $\gamma$ and $\beta$
# are shared by all positions, while $\mu$ and $\sigma$ were one per position. That loss
# is the point of the layer. The experiment fits the best $\gamma$ and $\beta$ (least
# squares, one pair per feature) to map $\hat{x}$ back to $x$, first for inputs whose
# features have their own offsets and scales, then for the same inputs with every position
# also given its own random size.

# %% experiment
D, N = 256, 2000
feature_mean, feature_std = 2 * torch.randn(D), 0.5 + 2 * torch.rand(D)
inputs = {
    "per-feature offset and scale": feature_mean + feature_std * torch.randn(N, D),
    "... and a size per position": (feature_mean + feature_std * torch.randn(N, D)) * torch.rand(N, 1) * 3,
}
for name, x in inputs.items():
    norm = LayerNorm(D)
    with torch.no_grad():
        x_hat = norm(x)  # gamma = 1, beta = 0: just the normalization
        # least squares per feature: x[:, i] ~ gamma_i * x_hat[:, i] + beta_i
        centred_hat, centred_x = x_hat - x_hat.mean(0), x - x.mean(0)
        norm.gamma.copy_((centred_hat * centred_x).sum(0) / (centred_hat**2).sum(0))
        norm.beta.copy_(x.mean(0) - norm.gamma * x_hat.mean(0))
        error = (norm(x) - x).norm() / (x - x.mean(0)).norm()
    print(f"{name:>29}: relative error of the best gamma, beta = {error:.3f}")

# %% [markdown]
# With per-feature structure only, $\gamma$ and $\beta$ take $\hat{x}$ most of the way back
# to $x$; what is left is each position's own $\mu$ and $\sigma$ wobbling around their
# average. Once every position has a size of its own, that size is gone for good: no
# per-feature $\gamma$ can know which position was large.
#
# ## Biased variance: divide by $D$
#
# `torch.var` divides by $D - 1$ by default (Bessel's correction). That *unbiased* estimate
# is right when $D$ numbers are a sample and you want the variance of the population they
# came from. LayerNorm estimates nothing: it standardizes exactly these $D$ numbers, so it
# uses their own variance, the mean of the squared deviations, dividing by $D$. That is what
# `nn.LayerNorm` does, and only then does $\hat{x}$ come out with variance exactly 1 (up to
# $\varepsilon$). Write `x.var(-1, unbiased=False)` (or `correction=0`) or
# `((x - mean) ** 2).mean(-1)`. With $D - 1$ the output's variance is $(D - 1)/D$, wrong by a
# lot for small $D$ and by a little, but still wrong, for large $D$.

# %% experiment
print(f"{'D':>5} {'var of output, D':>17} {'var of output, D-1':>19} {'max |diff| vs nn.LayerNorm':>27}")
for size in (4, 16, 64, 512):
    x = torch.randn(100, size)
    reference = F.layer_norm(x, (size,))
    mean = x.mean(-1, keepdim=True)
    unbiased = (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5)  # torch.var divides by D - 1
    print(
        f"{size:>5} {reference.var(-1, unbiased=False).mean():>17.4f} "
        f"{unbiased.var(-1, unbiased=False).mean():>19.4f} {(unbiased - reference).abs().max():>27.4f}"
    )

# %% [markdown]
# ## Where $\varepsilon$ goes
#
# $\varepsilon$ keeps the division safe when a position's features are (nearly) all equal:
# then $\sigma^2 = 0$, $x - \mu = 0$, and without $\varepsilon$ the layer computes
# $0/0 = $ NaN. The LayerNorm paper (Ba et al., 2016) writes no $\varepsilon$ at all;
# adding it **under** the root, $\sqrt{\sigma^2 + \varepsilon}$, is the convention of
# BatchNorm (Ioffe and Szegedy, 2015), which `nn.LayerNorm` and this course follow. Adding it
# after the root,
# $\sigma + \varepsilon$, also avoids dividing by zero, but it is a different function:
#
# $$\text{std of the output} = \frac{\sigma}{\sqrt{\sigma^2 + \varepsilon}}
# \quad\text{(inside)} \qquad\text{against}\qquad \frac{\sigma}{\sigma + \varepsilon}
# \quad\text{(outside)} .$$
#
# With the default $\varepsilon = 10^{-5}$ and $\sigma$ near 1 the two differ only in the
# sixth digit, which is why a check with $\varepsilon = 0.1$ is so useful: there the
# difference is plain to see. The experiment compares your module with $\varepsilon = 0.1$,
# `nn.LayerNorm(eps=0.1)`, and $\varepsilon$ outside the root, for inputs of several spreads.

# %% experiment
D, eps = 256, 0.1
ours, theirs = LayerNorm(D, eps=eps), nn.LayerNorm(D, eps=eps)
print(f"{'input std':>9} {'yours':>7} {'nn.LayerNorm':>13} {'eps outside':>12}   (std of the output)")
for spread in (0.1, 0.3, 1.0, 3.0):
    x = spread * torch.randn(4, D)
    with torch.no_grad():
        mean, var = x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)
        outside = (x - mean) / (var.sqrt() + eps)
        stds = [out.std(-1, unbiased=False).mean() for out in (ours(x), theirs(x), outside)]
        print(f"{spread:>9} {stds[0]:>7.3f} {stds[1]:>13.3f} {stds[2]:>12.3f}")

# %% [markdown]
# There is a second reason to put $\varepsilon$ inside. The derivative of $\sqrt{v}$ is
# $1/(2\sqrt{v})$, which is infinite at $v = 0$. For a constant row, $\sqrt{\sigma^2}$ with
# $\varepsilon$ outside the root sends an infinite factor into the backward pass (multiplied
# by a zero, it becomes NaN), while $\sqrt{\sigma^2 + \varepsilon}$ stays finite.

# %% experiment
constant = torch.full((1, 8), 3.0)  # a position whose features are all equal: var = 0
for name, forward in (
    ("eps inside the root", lambda centred, var: centred / (var + 1e-5).sqrt()),
    ("eps outside the root", lambda centred, var: centred / (var.sqrt() + 1e-5)),
    ("no eps", lambda centred, var: centred / var.sqrt()),
):
    x = constant.clone().requires_grad_()
    out = forward(x - x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False))
    out.sum().backward()
    print(f"{name:>20}: output {out[0, :3].tolist()}, gradient {x.grad[0, :3].tolist()}")

# %% [markdown]
# ## Large means: subtract the mean first
#
# The variance has a well-known shortcut, $\sigma^2 = \overline{x^2} - \mu^2$, equal on paper
# to $\overline{(x - \mu)^2}$. In floating point it is a trap. When a row sits far from 0
# compared with its spread, $\overline{x^2}$ and $\mu^2$ are two huge, nearly equal numbers,
# and their difference keeps only the rounding noise (*catastrophic cancellation*); it can
# even come out negative, and then the square root gives NaN. Subtracting the mean first
# and squaring the small deviations keeps every digit. The last check uses rows near
# $\pm 10^5$ in float64; in float32, the usual training precision, a mean in the
# thousands is already enough, as the experiment shows.

# %% experiment
print(f"{'row mean':>9} {'true var':>9} {'mean((x-mu)^2)':>15} {'mean(x^2)-mu^2':>15}   (float32)")
for centre in (0.0, 100.0, 1000.0, 10000.0):
    x = centre + torch.randn(2, 64)  # spread 1 around the centre, in float32
    exact = x.double().var(-1, unbiased=False)[0]
    mean = x.mean(-1, keepdim=True)
    two_pass = ((x - mean) ** 2).mean(-1)[0]
    shortcut = ((x * x).mean(-1, keepdim=True) - mean**2)[0, 0]
    print(f"{centre:>9.0f} {exact:>9.4f} {two_pass:>15.4f} {shortcut:>15.4f}")

# %% [markdown]
# ## What it costs
#
# For an input `[B, T, D]`:
#
# | | time | memory |
# |---|---|---|
# | mean and variance per position | $O(BTD)$ | $O(BT)$ |
# | normalize, scale and shift | $O(BTD)$ | $O(BTD)$ for the output |
# | parameters $\gamma$, $\beta$ | | $2D$ |
#
# Everything is linear in the number of values: doubling $T$ doubles the work. LayerNorm
# has no matrix products, so it is cheap next to attention and the feed-forward layer, but
# it reads and writes every activation several times. That is why PyTorch's `F.layer_norm`
# fuses it into one pass, which the measurement shows beside your module. Each time is the
# median of many calls after a warm-up. Expect the fused function to be several times
# faster, and your module's time to grow by 2x per doubling or more: once the activations
# (8 MiB at $T = 1024$) outgrow the processor's caches, each of its passes over them costs
# more.

# %% experiment
norm = LayerNorm(256)
previous = None
with torch.no_grad():
    for length in (256, 512, 1024):
        x = torch.randn(8, length, 256)
        timings = [
            median_seconds(norm, x),
            median_seconds(F.layer_norm, x, (256,), norm.gamma, norm.beta),
        ]
        ratio = "" if previous is None else f"  ({timings[0] / previous:.1f}x the previous)"
        yours, fused = timings[0] * 1e3, timings[1] * 1e3
        print(f"T={length:>4}: yours {yours:6.2f} ms, F.layer_norm {fused:6.2f} ms{ratio}")
        previous = timings[0]

# %% [markdown]
# ## Summary
#
# - LayerNorm standardizes each position's $D$ features to mean 0 and variance 1, then
#   applies a learned per-feature scale $\gamma$ (starting at 1) and shift $\beta$ (at 0).
# - It normalizes over the features (`dim=-1`), so it does not depend on the batch, unlike
#   BatchNorm, which shares statistics across the batch and the positions.
# - $\gamma$ and $\beta$ give back each feature's scale and offset; each position's own mean
#   and size are deliberately gone.
# - The variance is the biased one (divide by $D$), and $\varepsilon$ goes inside the square
#   root, exactly as in `nn.LayerNorm`.
# - Time and memory are linear in $B \cdot T \cdot D$; the parameters are $2D$ numbers.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | layer normalization | 层归一化 |
# | batch normalization | 批归一化 |
# | normalize / standardize | 归一化 / 标准化 |
# | mean | 均值 |
# | variance (biased / unbiased) | 方差（有偏 / 无偏） |
# | standard deviation | 标准差 |
# | Bessel's correction | 贝塞尔校正 |
# | epsilon (numerical stability term) | ε（数值稳定项） |
# | scale and shift (gamma, beta) | 缩放与平移（γ, β） |
# | learnable parameter | 可学习参数 |
# | feature dimension | 特征维度 |
# | residual stream | 残差流 |
# | running statistics | 滑动统计量 |
# | catastrophic cancellation | 灾难性抵消 |
