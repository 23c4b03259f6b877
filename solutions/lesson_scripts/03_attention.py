# %% [markdown]
# # Lesson 03: Scaled dot-product attention
#
# Attention is how a Transformer lets one position gather information from the others.
# In this lesson you write the function at its heart,
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right) V,$$
#
# check it against PyTorch's own `F.scaled_dot_product_attention`, and then take it apart
# with small experiments: why the $\sqrt{d_k}$, why queries and keys need different
# matrices, and what the computation costs.
#
# **You will write:** `scaled_dot_product_attention(q, k, v, mask=None)`.

# %% install
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from autograder.checks import attention as checks
from autograder.checks.device import describe_devices
from autograder.timing import median_seconds
from solutions.validation import check_attention_inputs

torch.manual_seed(0)
print(describe_devices())

# %% [markdown]
# ## Queries, keys and values
#
# Think of a soft dictionary lookup. Each position asks a question, its **query** $q$.
# Every position also advertises what it holds with a **key** $k$, and carries a
# **value** $v$, the content it hands over. A query is compared with every key; the
# better the match, the more of that key's value flows back.
#
# - The match is a dot product, $q \cdot k$: large when the two vectors point the same way.
# - The scores of one query over all keys go through a softmax, so they become
#   **weights** that are positive and sum to 1.
# - The output for that query is the weighted average of the values.
#
# In self-attention $q$, $k$ and $v$ are three different linear maps of the same
# sequence; in cross-attention (lesson 08) the queries come from one sequence and the
# keys and values from another. This function does not care where they come from.
#
# ## Shapes
#
# Batch first, with any number of leading axes (batch, heads, ...) written as `...`:
#
# | tensor | shape | meaning |
# |---|---|---|
# | `q` | `[..., T_q, d_k]` | one query of size $d_k$ per query position |
# | `k` | `[..., T_k, d_k]` | one key per key position: same size as the queries |
# | `v` | `[..., T_k, d_v]` | one value per key position; $d_v$ may differ from $d_k$ |
# | `scores = q @ k.transpose(-2, -1) / sqrt(d_k)` | `[..., T_q, T_k]` | one score per (query, key) pair |
# | `weights = softmax(scores, dim=-1)` | `[..., T_q, T_k]` | each row sums to 1 |
# | `out = weights @ v` | `[..., T_q, d_v]` | one output per query |
#
# `T_q` and `T_k` differ in cross-attention, so keep them apart in your head; the
# checks use $T_q = 5 \ne T_k = 7$ and $d_k = 4 \ne d_v = 6$ so that a swapped axis shows.
#
# ## Masks
#
# A mask says which keys a query may look at. In this course a mask is **boolean and
# True means "may attend"**, the convention of `F.scaled_dot_product_attention`. It
# broadcasts against the scores `[..., T_q, T_k]`. Where the mask is False, set the
# score to $-\infty$ before the softmax, so that key gets weight exactly 0. Lesson 04
# builds the masks themselves.
#
# One corner case: if a query may attend to *no* key, its row of scores is all
# $-\infty$ and the softmax computes $0/0$ = NaN. This course (like PyTorch) returns
# all-zero weights and an all-zero output for such a row. After the softmax, set the
# weights at masked positions to 0.

# %% [markdown]
# ## Exercise: `scaled_dot_product_attention`
#
# Fill in the body. The first line, `check_attention_inputs(...)`, is given: it
# raises a clear error for a mask that is not boolean or does not broadcast.
#
# Steps: scores, scale, mask, softmax over the keys, zero the masked weights, multiply
# by `v`. Return the pair `(out, weights)`. Use `math.sqrt` or `** 0.5`, and do not
# change the inputs in place. Ignore `dropout_p` (it is used from lesson 05 on) or pass
# the weights through `F.dropout(weights, dropout_p)` when it is above 0.

# %% exercise solutions.attention.scaled_dot_product_attention

# %% [markdown]
# ## Check your work
#
# Each check prints a ✓ line when it passes. When it fails, its message says what it
# expected and what it got, and if your output matches a common mistake, it names it.

# %% test test_scaled_dot_product_attention_shapes points=1
checks.check_attention_shapes(scaled_dot_product_attention)

# %% test test_scaled_dot_product_attention_values points=2
checks.check_attention_values(scaled_dot_product_attention)
### BEGIN HIDDEN TESTS
from autograder.hidden.attention import hidden_scaled_dot_product_attention

hidden_scaled_dot_product_attention(scaled_dot_product_attention, masked=False)
### END HIDDEN TESTS

# %% test test_scaled_dot_product_attention_mask points=2
checks.check_attention_mask(scaled_dot_product_attention)
### BEGIN HIDDEN TESTS
from autograder.hidden.attention import hidden_scaled_dot_product_attention

hidden_scaled_dot_product_attention(scaled_dot_product_attention, masked=True)
### END HIDDEN TESTS

# %% test test_scaled_dot_product_attention_fully_masked points=1
checks.check_attention_fully_masked(scaled_dot_product_attention)
### BEGIN HIDDEN TESTS
from autograder.hidden.attention import hidden_attention_fully_masked

hidden_attention_fully_masked(scaled_dot_product_attention)
### END HIDDEN TESTS

# %% [markdown]
# ## Looking at attention
#
# Here is a toy sentence with random embeddings and random (untrained) query and key
# maps. The weights mean nothing yet, but the picture has the shape every attention
# map has: one row per query, one column per key, every row summing to 1. The right
# panel adds a causal mask (lesson 04): each word may look only at itself and the words
# before it, and the upper triangle becomes exactly 0.

# %% experiment
words = ["the", "cat", "sat", "on", "the", "mat"]
d_model, d_k = 16, 8
x = torch.randn(len(words), d_model)  # one embedding per word: [T, D]
w_q, w_k, w_v = (torch.randn(d_model, d_k) / math.sqrt(d_model) for _ in range(3))
q, k, v = x @ w_q, x @ w_k, x @ w_v  # [T, d_k] each
causal = torch.ones(len(words), len(words), dtype=torch.bool).tril()

fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for ax, mask, title in zip(axes, (None, causal), ("no mask", "causal mask"), strict=True):
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(words)), words)
    ax.set_yticks(range(len(words)), words)
    ax.set_xlabel("key")
    ax.set_title(f"attention weights, {title}")
axes[0].set_ylabel("query")
fig.colorbar(image, ax=axes, shrink=0.8);
# %% [markdown]
# ## Why divide by $\sqrt{d_k}$?
#
# Suppose the entries of $q$ and $k$ are independent with mean 0 and variance 1. Then
# $q \cdot k = \sum_{i=1}^{d_k} q_i k_i$ is a sum of $d_k$ terms, each of variance 1, so
#
# $$\operatorname{Var}(q \cdot k) = d_k, \qquad \operatorname{Var}\!\left(\frac{q \cdot k}{\sqrt{d_k}}\right) = 1.$$
#
# Without the scale, scores spread wider as $d_k$ grows. A softmax of widely spread
# scores puts almost all the weight on one key: it **saturates**, and its gradient
# with respect to the other scores almost vanishes, which stalls learning. Dividing
# by $\sqrt{d_k}$ keeps the scores at unit variance for every head size. The
# experiment measures both.

# %% experiment
print(f"{'d_k':>5} {'var(q.k)':>10} {'var scaled':>11} {'max weight':>11} {'max scaled':>11}")
for size in (4, 16, 64, 256, 1024):
    qs, ks = torch.randn(2000, size), torch.randn(2000, size)
    dots = (qs * ks).sum(-1)  # 2000 independent dot products
    rows = torch.randn(200, size) @ torch.randn(size, 64)  # 200 queries, each against 64 keys
    top = torch.softmax(rows, -1).amax(-1).mean()  # the largest weight of a row, on average
    top_scaled = torch.softmax(rows / math.sqrt(size), -1).amax(-1).mean()
    scaled_var = (dots / math.sqrt(size)).var()
    print(f"{size:>5} {dots.var():>10.0f} {scaled_var:>11.2f} {top:>11.2f} {top_scaled:>11.2f}")

# %% [markdown]
# The variance of the raw dot product grows like $d_k$ while the scaled one stays near 1.
# The largest of 64 unscaled weights, averaged over 200 queries, climbs towards 1 (a
# one-hot softmax), while the scaled weights stay spread out.
#
# ## Why separate $W_Q$ and $W_K$?
#
# If queries and keys came from the same matrix $W$, the score of position $i$ for
# $j$ would be $(x_i W)\cdot(x_j W)$, the same as the score of $j$ for $i$: the score
# matrix $S = X W W^\top X^\top$ would be **symmetric**. (The weights would not be: the
# softmax normalises each row on its own. But $i$'s raw preference for $j$ would always
# equal $j$'s for $i$.) With two matrices the scores are $x_i W_Q W_K^\top x_j^\top$, and
# $W_Q W_K^\top$ need not be symmetric.
#
# The deeper limit is that $S = (XW)(XW)^\top$ is a Gram matrix, **positive
# semi-definite**: by Cauchy-Schwarz, $S_{ij} \le \sqrt{S_{ii} S_{jj}}$, so no token
# scores another above the geometric mean of their two scores for themselves,
# $S_{ii} = \lVert x_i W \rVert^2$ and $S_{jj}$. Every token leans towards itself, and
# attention would find it hard to say "the verb looks at its subject, not at itself".
# The cell below counts, over 200 random tokens, how often a token's largest score is its
# own.

# %% experiment
w_shared = torch.randn(d_model, d_k)
scores_shared = (x @ w_shared) @ (x @ w_shared).T
scores_separate = (x @ w_q) @ (x @ w_k).T
weights_shared = torch.softmax(scores_shared / math.sqrt(d_k), dim=-1)
print("shared W:   max |S - S^T| =", f"{(scores_shared - scores_shared.T).abs().max():.2f}")
print("separate W: max |S - S^T| =", f"{(scores_separate - scores_separate.T).abs().max():.2f}")
print("shared W:   max |A - A^T| =", f"{(weights_shared - weights_shared.T).abs().max():.2f} (weights)")

tokens = torch.randn(200, d_model, dtype=torch.float64)  # float64: no near-ties to round
for name, w_left, w_right in (("shared W", w_shared, w_shared), ("separate W", w_q, w_k)):
    scores = (tokens @ w_left.double()) @ (tokens @ w_right.double()).T
    own = (scores.argmax(dim=-1) == torch.arange(200)).double().mean()
    print(f"{name:<11} a token's largest score is its own in {own:.0%} of rows (chance: 0.5%)")

# %% [markdown]
# ## Dot-product against additive attention
#
# Before the Transformer, attention was often **additive** (Bahdanau et al., 2015): the
# score is $w^\top \tanh(W_1 q + W_2 k)$, a small neural network applied to every
# (query, key) pair. It works as well for small $d_k$, but it builds a
# `[T_q, T_k, d]` tensor and cannot be written as one matrix product. Dot-product
# attention is a single `q @ k.T`, which GPUs and BLAS libraries run at full speed.
# The paper keeps the dot product and fixes its weakness at large $d_k$, the
# saturation above, with the $1/\sqrt{d_k}$ scale.


# %% experiment
def additive_scores(q, k, w1, w2, w):
    return torch.tanh((q @ w1)[:, None, :] + (k @ w2)[None, :, :]) @ w  # [T_q, T_k, d] -> [T_q, T_k]


size, length = 64, 256
qa, ka = torch.randn(length, size), torch.randn(length, size)
w1, w2, wa = torch.randn(size, size), torch.randn(size, size), torch.randn(size)
for name, score in (
    ("dot-product", lambda: qa @ ka.T / math.sqrt(size)),
    ("additive", lambda: additive_scores(qa, ka, w1, w2, wa)),
):
    print(f"{name:>12}: {median_seconds(score) * 1e3:.2f} ms for {length}x{length} scores")

# %% [markdown]
# ## What it costs
#
# For one head with $T_q$ queries, $T_k$ keys and sizes $d_k$, $d_v$:
#
# | step | time | memory |
# |---|---|---|
# | scores $QK^\top$ | $O(T_q T_k d_k)$ | $O(T_q T_k)$ |
# | softmax | $O(T_q T_k)$ | $O(T_q T_k)$ |
# | weights $\times V$ | $O(T_q T_k d_v)$ | $O(T_q d_v)$ |
#
# In self-attention $T_q = T_k = T$, so both time and memory grow like $T^2$: doubling
# the sequence quadruples the score matrix. Everything else in a Transformer layer is
# linear in $T$. The measurement below doubles $T$ twice. Each time is the median of
# many calls after a warm-up, on one CPU thread. The milliseconds depend on your machine;
# the ratio is what to look at, and it comes out near 4, sometimes a little above (a
# larger score matrix no longer fits in the processor's caches) or a little below (fixed
# costs per call weigh more at the small size).

# %% experiment
previous = None
for length in (256, 512, 1024):
    qt, kt, vt = (torch.randn(4, length, 64) for _ in range(3))
    elapsed = median_seconds(scaled_dot_product_attention, qt, kt, vt)
    ratio = "" if previous is None else f"  ({elapsed / previous:.1f}x the previous)"
    mebibytes = 4 * length * length * 4 / 2**20  # float32 weights [4, T, T]
    print(f"T={length:>5}: {elapsed * 1e3:7.1f} ms, weights take {mebibytes:5.1f} MiB{ratio}")
    previous = elapsed

# %% [markdown]
# ## Summary
#
# - Attention scores every (query, key) pair with a dot product, turns each query's
#   scores into weights with a softmax over the keys, and averages the values.
# - Dividing by $\sqrt{d_k}$ keeps the scores at unit variance, so the softmax does not
#   saturate as heads get wider.
# - Boolean masks (True = may attend) fill scores with $-\infty$; a fully masked query
#   gets zero weights, not NaN.
# - Time and memory are quadratic in the sequence length.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | attention | 注意力 |
# | scaled dot-product attention | 缩放点积注意力 |
# | query / key / value | 查询 / 键 / 值 |
# | attention weights | 注意力权重 |
# | score | 分数（打分） |
# | softmax | softmax（归一化指数函数） |
# | mask | 掩码 |
# | saturation | 饱和 |
# | additive attention | 加性注意力 |
# | self-attention / cross-attention | 自注意力 / 交叉注意力 |
# | quadratic complexity | 二次复杂度 |
