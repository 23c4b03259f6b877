# %% [markdown]
# # Lesson 05: Multi-head attention
#
# One attention head gives every query **one** set of weights over the keys, so it
# hands back one weighted average. A word often needs several things at once: its
# verb, the noun before it, the start of the sentence. Averaging all of those into one
# vector blurs them. **Multi-head attention** runs $h$ attention heads side by side,
# each in its own small subspace of the model dimension, and lets each head look
# somewhere else. The surprise is the price: $h$ heads of size $d_k = D/h$ cost the
# same as one head of size $D$.
#
# In this lesson you write the two reshapes that cut the model dimension into heads and
# glue it back together, then the module itself, and check it against PyTorch's own
# `nn.MultiheadAttention`.
#
# **You will write:** `split_heads(x, n_heads)`, `merge_heads(x)` and
# `MultiHeadAttention(d_model, n_heads, dropout=0.0)`.

# %% install
import matplotlib.pyplot as plt
import torch
from torch import nn

from autograder.checks import multi_head as checks
from autograder.checks.device import describe_devices
from autograder.timing import median_seconds
from solutions.attention import scaled_dot_product_attention

torch.manual_seed(0)
print(describe_devices())

# %% [markdown]
# ## The math
#
# The paper (Vaswani et al., 2017) writes multi-head attention as
#
# $$\mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\, W^O,
# \qquad \mathrm{head}_i = \mathrm{Attention}(Q W_i^Q,\; K W_i^K,\; V W_i^V),$$
#
# with $W_i^Q, W_i^K, W_i^V \in \mathbb{R}^{D \times d_k}$, $W^O \in \mathbb{R}^{h d_k \times D}$
# and $d_k = D / h$. $\mathrm{Attention}$ is the scaled dot-product attention of lesson 03.
#
# Nobody builds $3h$ small matrices. Put the $h$ matrices $W_1^Q, \dots, W_h^Q$ side by side
# and you get one $D \times D$ matrix $W^Q$: one `nn.Linear(D, D)` computes the queries of
# all heads at once, and **head $i$'s query is simply columns $i d_k$ to $(i+1) d_k - 1$** of
# its output. So the recipe is
#
# 1. project: `w_q(query)`, `w_k(key)`, `w_v(value)`, each `[B, T, D]`;
# 2. **split** the last axis into $h$ blocks of $d_k$ and move the heads in front of the
#    positions: `[B, h, T, d_k]`;
# 3. run attention once: the heads are just one more batch axis for `@`;
# 4. **merge** the heads back side by side: `[B, T, D]`;
# 5. mix the heads with the output projection `w_o`.
#
# ## Shapes
#
# Queries come from a sequence of length $T_q$, keys and values from one of length $T_k$
# (equal in self-attention, different in the decoder's cross-attention, lesson 08).
#
# | step | tensor | shape |
# |---|---|---|
# | inputs | `query` / `key`, `value` | `[B, T_q, D]` / `[B, T_k, D]` |
# | project | `w_q(query)` | `[B, T_q, D]` |
# | split: view | `.view(B, T_q, h, d_k)` | `[B, T_q, h, d_k]` |
# | split: transpose | `.transpose(1, 2)` | `[B, h, T_q, d_k]` |
# | same for keys and values | `k`, `v` | `[B, h, T_k, d_k]` |
# | attention | `weights` (kept in `self.attn`) | `[B, h, T_q, T_k]` |
# | | `out` | `[B, h, T_q, d_k]` |
# | merge: transpose | `.transpose(1, 2)` | `[B, T_q, h, d_k]` |
# | merge: view | `.contiguous().view(B, T_q, D)` | `[B, T_q, D]` |
# | output projection | `w_o(...)` | `[B, T_q, D]` |
#
# A mask of shape `[B, 1, 1, T_k]` (padding) or `[T_q, T_k]` (causal) broadcasts against
# `[B, h, T_q, T_k]`: every head gets the same mask.

# %% [markdown]
# ## Exercise 1: `split_heads`
#
# Turn `x` of shape `[B, T, D]` into `[B, h, T, d_k]` with `d_k = D // n_heads`, where head
# `i` holds features `i*d_k ... (i+1)*d_k - 1` of every position. Two steps, **in this
# order**: `view` the last axis as `(h, d_k)`, giving `[B, T, h, d_k]`, then `transpose(1, 2)`.
# Both steps only change how the same memory is read: nothing is copied.

# %% exercise solutions.multi_head.split_heads

# %% [markdown]
# Each check prints a ✓ line when it passes; when it fails, its message says what it
# expected and, if your output matches a common mistake, which one.

# %% test test_split_heads points=2
checks.check_split_heads(split_heads)
### BEGIN HIDDEN TESTS
from autograder.hidden.multi_head import hidden_split_heads

hidden_split_heads(split_heads)
### END HIDDEN TESTS

# %% test test_split_heads_blocks points=1
checks.check_split_heads_blocks(split_heads)

# %% [markdown]
# ## Exercise 2: `merge_heads`
#
# The inverse: `[B, h, T, d_k]` back to `[B, T, D]`, with head 0's features first, then
# head 1's, and so on. Again two steps in order: `transpose(1, 2)` back to `[B, T, h, d_k]`,
# then join the last two axes into `D = h * d_k`.
#
# One trap: after a `transpose` the numbers are no longer laid out row by row in memory
# (the tensor is not **contiguous**), and `.view` refuses to work on it. Call
# `.contiguous()` first (it copies the data into the new order), or use `.reshape`, which
# does that for you when needed. The check gives you a contiguous `[B, h, T, d_k]`
# tensor, just as attention's output is.

# %% exercise solutions.multi_head.merge_heads

# %% test test_merge_heads points=2
checks.check_merge_heads(merge_heads)
### BEGIN HIDDEN TESTS
from autograder.hidden.multi_head import hidden_merge_heads

hidden_merge_heads(merge_heads)
### END HIDDEN TESTS

# %% test test_merge_heads_round_trip points=1
checks.check_merge_heads_round_trip(merge_heads)

# %% [markdown]
# ## View against transpose: why the order matters
#
# Both `view(B, h, T, d_k)` and `view(B, T, h, d_k).transpose(1, 2)` give a tensor of shape
# `[B, h, T, d_k]`, so a shape check cannot tell them apart. Only one is right. `view`
# never moves data: it reads the numbers in memory order, position 0's $D$ features,
# then position 1's, and cuts that stream into pieces of the new shape. Going straight
# to `[B, h, T, d_k]` cuts it into "head 0" = the first $T \cdot d_k$ numbers, which are
# whole positions, not one block of features from every position.
#
# To see it, fill a tensor with labels: the entry for position $t$ and feature $f$ holds
# $100\,t + f$, so the hundreds digit is the position.

# %% experiment
T_demo, D_demo, h_demo = 4, 6, 2
labels = (100 * torch.arange(T_demo)[:, None] + torch.arange(D_demo)).reshape(1, T_demo, D_demo)
print("x[0] (row = position, 100*t + f):")
print(labels[0])
print("\nright: view(B, T, h, d_k).transpose(1, 2), head 0 then head 1:")
print(split_heads(labels, h_demo)[0])
print("\nwrong: view(B, h, T, d_k), head 0 then head 1:")
print(labels.view(1, h_demo, T_demo, D_demo // h_demo)[0])

# %% [markdown]
# With the right order, head 0 holds features 0 to 2 of every position (rows 0, 100, 200,
# 300) and head 1 holds features 3 to 5. With the wrong order, "head 0" holds all six
# features of positions 0 and 1, folded into four rows that it treats as four positions:
# its row 1 is really the second half of position 0. Attention would then compare pieces
# of different words as if they were different positions. The shapes are fine, the
# numbers are nonsense, and training just gets worse without any error. That is why the
# checks compare values, not only shapes.
#
# The same holds in reverse for merging: transpose back first, then view. And the
# `.contiguous()` is needed because a transposed tensor reads memory with jumps:

# %% experiment
heads = torch.randn(2, 3, 5, 4)  # [B, h, T, d_k], as attention returns it
moved = heads.transpose(1, 2)  # [B, T, h, d_k]
print("contiguous after transpose:", moved.is_contiguous(), "| strides:", moved.stride())
try:
    moved.view(2, 5, 12)
except RuntimeError as error:
    print("view on it fails:", str(error).split(".")[0])
print("contiguous().view works:", list(moved.contiguous().view(2, 5, 12).shape))

# %% [markdown]
# ## Exercise 3: `MultiHeadAttention`
#
# Write the module. In `__init__`:
#
# - raise a `ValueError` with a clear message if `d_model % n_heads != 0` (the heads must
#   share $D$ equally);
# - create `w_q`, `w_k`, `w_v`, `w_o`, each `nn.Linear(d_model, d_model)` with its bias,
#   **in this order and with these names** (the checks load weights by name);
# - keep `n_heads` and `dropout` (a float) for `forward`, and set `self.attn = None`.
#
# In `forward(query, key, value, mask=None)`:
#
# - project the query with `w_q`, the key with `w_k` and the value with `w_v`, and split
#   each into heads with your `split_heads`;
# - call `scaled_dot_product_attention(q, k, v, mask, dropout_p)` from lesson 03 (already
#   imported), with `dropout_p = self.dropout` in training mode and 0 otherwise (after
#   `.eval()` nothing may be dropped: a check builds your module with `dropout=0.3` and
#   compares it in eval mode, then runs it once after `.train()`, where some attention
#   weights must be dropped); keep its weights in `self.attn`, shape `[B, h, T_q, T_k]`;
# - merge the heads with your `merge_heads` and return `w_o` of the result, `[B, T_q, D]`.
#
# The checks copy the weights of PyTorch's `nn.MultiheadAttention` into your module and
# compare on cross-attention inputs, $T_q = 5 \ne T_k = 7$, with `key` and `value` different.
# PyTorch keeps the three input projections in one matrix `in_proj_weight` of shape
# `[3D, D]` (rows for q, then k, then v) and calls `w_o` `out_proj`. Its `attn_mask` uses the
# **opposite** convention (True = may *not* attend), so the checks pass it `~mask`.

# %% exercise solutions.multi_head.MultiHeadAttention

# %% test test_MultiHeadAttention_init points=1
checks.check_mha_init(MultiHeadAttention)

# %% test test_MultiHeadAttention_cross_attention points=3
checks.check_mha_cross_attention(MultiHeadAttention)
### BEGIN HIDDEN TESTS
from autograder.hidden.multi_head import hidden_multi_head_attention

hidden_multi_head_attention(MultiHeadAttention, masked=False)
### END HIDDEN TESTS

# %% test test_MultiHeadAttention_mask points=2
checks.check_mha_mask(MultiHeadAttention)
### BEGIN HIDDEN TESTS
from autograder.hidden.multi_head import hidden_multi_head_attention

hidden_multi_head_attention(MultiHeadAttention, masked=True)
### END HIDDEN TESTS

# %% test test_MultiHeadAttention_attn points=1
checks.check_mha_attn(MultiHeadAttention)

# %% [markdown]
# ## Looking at the heads
#
# A toy sentence with random embeddings through your module with $h = 4$ heads, and the
# four maps of `self.attn` side by side. The weights are untrained, so the patterns mean
# nothing yet; what matters is that **every head has its own map**: the same query
# spreads its attention differently in each head. (The embeddings are scaled up so the
# random maps are not all nearly uniform.) The causal mask of lesson 04 is applied, so
# every map is zero above the diagonal.

# %% experiment
torch.manual_seed(0)
words = ["the", "cat", "sat", "on", "the", "mat"]
d_model, n_heads = 16, 4
mha = MultiHeadAttention(d_model, n_heads).eval()
sentence = 3.0 * torch.randn(1, len(words), d_model)  # [B=1, T, D]
causal = torch.ones(len(words), len(words), dtype=torch.bool).tril()
with torch.no_grad():
    mha(sentence, sentence, sentence, causal)
maps = mha.attn[0]  # [h, T, T]

fig, axes = plt.subplots(1, n_heads, figsize=(13, 3.6), sharey=True, layout="constrained")
for head, ax in enumerate(axes):
    image = ax.imshow(maps[head], cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(words)), words, rotation=45)
    ax.set_yticks(range(len(words)), words)
    ax.set_xlabel("key")
    ax.set_ylabel("query" if head == 0 else "")
    ax.set_title(f"head {head}")
fig.suptitle("self.attn[0]: one attention map per head (untrained, causal mask)")
fig.colorbar(image, ax=axes, shrink=0.8);

# %% [markdown]
# Which key each query looks at most, head by head (a column per head):

# %% experiment
favourite = maps.argmax(dim=-1)  # [h, T]
print("query   " + "  ".join(f"head {head}" for head in range(n_heads)))
for t, word in enumerate(words):
    print(f"{t} {word:>4}: " + "  ".join(f"{words[favourite[head, t]]:>6}" for head in range(n_heads)))

# %% [markdown]
# ## Why split the model dimension into heads?
#
# **Several subspaces.** One head turns each query's scores into a single softmax, one
# weighted average of the values. If a word needs information from two places, a single
# head must either pick one or blur both together. With $h$ heads, each head compares
# queries and keys in its own $d_k$-dimensional projection (one head can match on
# "is this my subject?", another on "what came just before me?") and returns its own
# average; $W^O$ then mixes the $h$ results. The maps above already differ from head
# to head, before any training.
#
# **Same cost.** Splitting does not buy those extra views with extra parameters or
# arithmetic. Count, for one sequence of $T$ positions:
#
# | part | one head of size $D$ | $h$ heads of size $d_k = D/h$ |
# |---|---|---|
# | parameters of $W^Q, W^K, W^V, W^O$ | $4(D^2 + D)$ | $4(D^2 + D)$: the same matrices, cut into blocks |
# | projections (multiply-adds) | $4 T D^2$ | $4 T D^2$ |
# | scores $QK^\top$ | $T^2 D$ | $h \cdot T^2 d_k = T^2 D$ |
# | weights $\times V$ | $T^2 D$ | $h \cdot T^2 d_k = T^2 D$ |
# | attention weights kept | $T^2$ | $h T^2$ (the one thing that grows) |
#
# The only extra cost is the $h$ weight maps, $h \cdot T^2$ numbers instead of $T^2$. The
# experiment builds the module for several $h$ at the same $D$: the parameter count does
# not move, and the time stays in the same range (each time is the median of many calls
# after a warm-up, on one CPU thread). Small heads use the hardware a little less well:
# $h$ small matrix products cost somewhat more than one large one, so the time creeps up
# with $h$ while the arithmetic stays the same.


# %% experiment
D_cost, T_cost = 128, 128
x_cost = torch.randn(4, T_cost, D_cost)
print(f"{'h':>3} {'d_k':>4} {'parameters':>11} {'score mult-adds':>16} {'time':>9}")
for h_cost in (1, 2, 4, 8):
    module = MultiHeadAttention(D_cost, h_cost).eval()
    params = sum(p.numel() for p in module.parameters())
    flops = h_cost * T_cost * T_cost * (D_cost // h_cost)
    with torch.no_grad():
        elapsed = median_seconds(module, x_cost, x_cost, x_cost)
    print(f"{h_cost:>3} {D_cost // h_cost:>4} {params:>11,} {flops:>16,} {elapsed * 1e3:.2f} ms")

# %% [markdown]
# ## The parameter count
#
# Each of the four projections is an `nn.Linear(D, D)`: a $D \times D$ weight and $D$
# biases. So
#
# $$\#\text{params} = 4 \cdot D^2 + 4 \cdot D,$$
#
# independent of $h$. For the paper's base model, $D = 512$ and $h = 8$, that is
# $4 \cdot 262\,144 + 2\,048 = 1\,050\,624$ per attention block. PyTorch's
# `nn.MultiheadAttention` holds exactly as many (its `in_proj_weight` is our three
# matrices stacked).

# %% experiment
D_base, h_base = 512, 8
ours = MultiHeadAttention(D_base, h_base)
counted = sum(p.numel() for p in ours.parameters())
theirs = sum(p.numel() for p in nn.MultiheadAttention(D_base, h_base, batch_first=True).parameters())
print(f"formula 4*D^2 + 4*D        = {4 * D_base**2 + 4 * D_base:,}")
print(f"sum of p.numel(), ours     = {counted:,}")
print(f"nn.MultiheadAttention      = {theirs:,}")
for name, parameter in ours.named_parameters():
    print(f"  {name:<10} {list(parameter.shape)}")

# %% [markdown]
# ## What it costs
#
# For a batch of $B$ sequences, self-attention with $T_q = T_k = T$:
#
# | step | time | memory |
# |---|---|---|
# | projections $W^Q, W^K, W^V, W^O$ | $O(B T D^2)$ | $O(B T D)$ activations, $O(D^2)$ weights |
# | split / merge heads | $O(1)$ / $O(B T D)$ (a view; merging copies once) | $O(B T D)$ |
# | scores and weights $\times V$, all heads | $O(B h T^2 d_k) = O(B T^2 D)$ | $O(B h T^2)$ for the weights |
#
# Counted in multiply-adds per sequence, the four projections take $4 T D^2$ and the two
# $T^2$ products take $2 T^2 D$ (the counting table above). They are equal at
# $T = 2D$: for shorter sequences the projections cost more, for longer ones the $T^2$
# terms do, and the weights `[B, h, T, T]` become the biggest tensor in the layer. The
# measurement doubles $T$ at $D = 64$, $h = 4$, so the crossover is at $T = 128$; each time
# is the median of many calls after a warm-up (the milliseconds depend on your machine;
# look at the ratio and at the memory column).

# %% experiment
module = MultiHeadAttention(64, 4).eval()
previous = None
for length in (64, 128, 256, 512):
    x_time = torch.randn(2, length, 64)
    with torch.no_grad():
        elapsed = median_seconds(module, x_time, x_time, x_time)
    kib = module.attn.numel() * module.attn.element_size() / 2**10
    ratio = "" if previous is None else f"  ({elapsed / previous:.1f}x the previous)"
    shape = list(module.attn.shape)
    print(f"T={length:>4}: {elapsed * 1e3:.1f} ms, self.attn {shape} takes {kib:,.0f} KiB{ratio}")
    previous = elapsed

# %% [markdown]
# Each doubling of $T$ quadruples the memory of `self.attn`. The time grows by about 2x
# per doubling while the projections dominate ($T$ below $2D = 128$) and towards 4x once
# the $T^2$ terms do (more when the weights no longer fit in the processor's cache).
#
# ## Summary
#
# - Multi-head attention runs $h$ scaled dot-product attentions in parallel, each on a
#   $d_k = D/h$ slice of the projected queries, keys and values, and mixes the results
#   with $W^O$.
# - One `nn.Linear(D, D)` per projection computes all heads at once; `split_heads`
#   (view to `[B, T, h, d_k]`, then transpose) and `merge_heads` (transpose back, then
#   contiguous view) only rearrange it.
# - Order matters: a view straight to `[B, h, T, d_k]` has the right shape and scrambles
#   positions across heads.
# - Same parameters ($4D^2 + 4D$) and the same arithmetic as one big head; the only extra
#   is $h$ attention maps instead of one.
# - Time $O(B T D^2 + B T^2 D)$, memory $O(B T D + B h T^2)$.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | multi-head attention | 多头注意力 |
# | head | 头（注意力头） |
# | subspace | 子空间 |
# | model dimension $D$ ($d_{model}$) | 模型维度 |
# | head dimension $d_k$ | 每头维度 |
# | split heads / merge heads | 拆分多头 / 合并多头 |
# | projection (linear map) | 投影（线性映射） |
# | output projection $W^O$ | 输出投影 |
# | concatenate | 拼接 |
# | view / reshape | 视图 / 重塑形状 |
# | transpose | 转置 |
# | contiguous (memory) | 连续（内存） |
# | stride | 步长 |
# | cross-attention | 交叉注意力 |
# | parameter count | 参数量 |
