# %% [markdown]
# # Lesson 01: Token embeddings
#
# A Transformer reads numbers, not words. Its input is a sequence of **token ids**,
# integers that index a vocabulary ("the" = 5, "cat" = 912, ...). An id is only a
# name: 912 is not "bigger" than 5 in any useful sense. The first layer of the model
# replaces every id with a vector of $D = d_\text{model}$ learned numbers, its
# **embedding**, and everything after works on those vectors.
#
# In this lesson you write that layer as the paper does, including its small twist:
# the looked-up vectors are multiplied by $\sqrt{d_\text{model}}$,
#
# $$\mathrm{Embedding}(t) = \sqrt{D}\; W[t], \qquad W \in \mathbb{R}^{V \times D},$$
#
# where $V$ is the vocabulary size and $W[t]$ is row $t$ of the table. Then you will
# see why a lookup is the same thing as a matrix product with a one-hot vector, and why
# the $\sqrt{D}$ is there.
#
# **You will write:** the module `Embedding(vocab_size, d_model)`.

# %% install
import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import embedding as checks
from autograder.checks.device import describe_devices
from autograder.timing import median_seconds
from solutions.validation import check_token_ids

torch.manual_seed(0)
print(describe_devices())

# %% [markdown]
# ## A lookup table
#
# `nn.Embedding(V, D)` holds one parameter matrix, `weight`, of shape $[V, D]$: row
# $t$ is the vector of token $t$. Calling it on a tensor of ids picks those rows.
# The rows start random and are trained like any other weight, so tokens that behave
# alike end up with similar vectors.
#
# ## A lookup is a one-hot matrix product
#
# Write token $t$ as a **one-hot** vector $e_t \in \{0, 1\}^V$: all zeros except a 1
# at position $t$. Multiplying it by the table picks out exactly row $t$:
#
# $$e_t^\top W = W[t].$$
#
# So an embedding layer is a linear layer without bias whose input is one-hot. Nobody
# computes it that way, because the product would spend $V \cdot D$ multiplications on
# zeros for every token; indexing the row is the same result for the cost of a copy.
# Let us check that the three forms agree.

# %%
vocab_size, d_model = 10, 4
table = nn.Embedding(vocab_size, d_model)
tokens = torch.tensor([[3, 1, 4, 1], [5, 9, 2, 6]])  # [B, T] = [2, 4]; token 1 appears twice

by_module = table(tokens)  # [B, T, D]
by_indexing = table.weight[tokens]  # rows 3, 1, 4, 1, ... of the [V, D] table
one_hot = F.one_hot(tokens, vocab_size).float()  # [B, T, V]
by_matmul = one_hot @ table.weight  # [B, T, V] @ [V, D] -> [B, T, D]

print("one-hot rows of the first sequence:\n", one_hot[0].int())
print("module == indexing:", torch.equal(by_module, by_indexing))
print("module == one-hot matmul:", torch.allclose(by_module, by_matmul))

# %% [markdown]
# Because the lookup is a product with a one-hot matrix, its gradient says the same
# thing: only the rows that were used receive a gradient. A batch that mentions 7 of
# 10 tokens updates 7 rows of the table; the other rows are not touched.

# %% experiment
by_module.sum().backward()
rows_with_gradient = table.weight.grad.abs().sum(dim=1).nonzero().flatten()
print("tokens in the batch:    ", sorted(set(tokens.flatten().tolist())))
print("rows with a gradient:   ", rows_with_gradient.tolist())
print("gradient of row 1 (used twice):", table.weight.grad[1].tolist())

# %% [markdown]
# ## Shapes
#
# | tensor | shape | meaning |
# |---|---|---|
# | `tokens` | `[B, T]`, integer (`torch.long`) | $B$ sequences of $T$ token ids, each in $[0, V)$ |
# | `self.lut.weight` | `[V, D]` | the table: one learned row per vocabulary entry |
# | `self.lut(tokens)` | `[B, T, D]` | one row per token: a new last axis of size $D$ |
# | output `self.lut(tokens) * sqrt(D)` | `[B, T, D]` | the same, scaled |
#
# The lookup adds an axis; it never mixes positions or batch entries.

# %% [markdown]
# ## Exercise: `Embedding`
#
# Write the module:
#
# - In `__init__`, create the table as an attribute named exactly `lut` ("look-up
#   table"): `nn.Embedding(vocab_size, d_model)`. The name matters: the checks (and
#   later lessons) load weights into `lut.weight`. Keep `d_model` too, you need it in
#   `forward`. Create no other parameters.
# - In `forward`, look the tokens up and multiply by $\sqrt{d_\text{model}}$ (use
#   `math.sqrt`). Return a `[B, T, D]` tensor.
#
# The first line of `forward`, `check_token_ids(...)`, is given: it raises a clear
# error for ids that are not integers or fall outside $[0, V)$.

# %% exercise solutions.embedding.Embedding

# %% [markdown]
# ## Check your work
#
# Each check prints a ✓ line when it passes. When it fails, its message says what it
# expected and what it got, and if your output matches a common mistake, it names it.
# The second check copies the weights of PyTorch's own `nn.Embedding` into your
# `lut` and compares your output with that module's output times $\sqrt{D}$.

# %% test test_Embedding_shapes points=1
checks.check_embedding_shapes(Embedding)

# %% test test_Embedding_values points=2
checks.check_embedding_values(Embedding)
### BEGIN HIDDEN TESTS
from autograder.hidden.embedding import hidden_embedding

hidden_embedding(Embedding)
### END HIDDEN TESTS

# %% [markdown]
# ## Using it
#
# A toy vocabulary and one sentence. The same word gets the same vector wherever it
# appears ("the" at positions 0 and 4): an embedding knows *which* token it sees, not
# *where*. Lesson 02 adds the position.

# %% experiment
vocab = ["<pad>", "the", "cat", "sat", "on", "mat", "dog", "ran"]
sentence = ["the", "cat", "sat", "on", "the", "mat"]
ids = torch.tensor([[vocab.index(word) for word in sentence]])  # [1, T]
embed = Embedding(len(vocab), 8)
vectors = embed(ids)  # [1, T, D]
print("ids:", ids.tolist())
print("output shape [B, T, D]:", list(vectors.shape))
print("rows 0 and 4 ('the') equal:", torch.equal(vectors[0, 0], vectors[0, 4]))
print("row norm / table row norm:", f"{(vectors[0, 0].norm() / embed.lut.weight[1].norm()).item():.4f}")
print("sqrt(d_model):", f"{math.sqrt(8):.4f}")

# %% [markdown]
# ## Why multiply by $\sqrt{d_\text{model}}$?
#
# The paper says only that it multiplies the embedding weights by $\sqrt{d_\text{model}}$
# (section 3.4). The reason is in what the embeddings are added to, and in how the
# table is initialised.
#
# - **What they are added to.** The next layer adds a positional encoding (lesson 02)
#   to each embedding. Its row for one position is $D/2$ pairs
#   $(\sin\theta, \cos\theta)$, and $\sin^2\theta + \cos^2\theta = 1$, so every row has
#   length exactly $\|PE_\text{pos}\| = \sqrt{D/2}$. It grows like $\sqrt{D}$.
# - **How the table starts.** The paper shares one matrix between the embedding and
#   the output projection to the vocabulary (lesson 09). A common initialisation for the
#   weights of a linear layer gives its entries variance $1/D$, one over the number of
#   inputs (LeCun's rule; the paper does not say which one it used). An embedding row
#   with $D$ such entries has length about $\sqrt{D \cdot 1/D} = 1$, whatever $D$ is.
#
# Unscaled, a token's vector (length 1) would be swamped by its position's vector
# (length $\sqrt{D/2} = 16$ for $D = 512$): the model would see mostly *where* a word is
# and hardly *which* word it is. Multiplying by $\sqrt{D}$ gives the embedding entries
# variance 1 and length $\sqrt{D}$, the same order as the positional encoding, for
# every model size. In symbols, for entries of variance $\sigma^2$:
#
# $$\mathbb{E}\,\|W[t]\|^2 = D\sigma^2, \qquad
# \sigma^2 = \tfrac{1}{D} \;\Rightarrow\; \|\sqrt{D}\,W[t]\| \approx \sqrt{D}.$$
#
# The experiment measures the mean row length for several $D$: positional-encoding
# rows, and embedding rows unscaled and scaled, for LeCun's initialisation (variance
# $1/D$, the common choice for a table shared with the output layer, though not one the
# paper names) and for `nn.Embedding`'s default (variance 1).


# %% experiment
def positional_rows(length, size):
    """The sinusoidal table of lesson 02, written out in three lines: [length, size]."""
    angle = torch.arange(length)[:, None] * torch.exp(torch.arange(0, size, 2) * (-math.log(1e4) / size))
    return torch.stack((angle.sin(), angle.cos()), dim=-1).flatten(1)


torch.manual_seed(0)
sizes = [16, 64, 256, 512, 1024]
norms = {name: [] for name in ("PE", "1/D init", "1/D init, scaled", "N(0,1) init", "N(0,1) init, scaled")}
print(f"{'D':>5} {'|PE|':>6} {'1/D init':>9} {'scaled':>7} {'N(0,1)':>7} {'scaled':>7}")
for size in sizes:
    pe = positional_rows(100, size)
    lecun = torch.randn(1000, size) / math.sqrt(size)  # variance 1/D, like a tied output layer
    default = nn.Embedding(1000, size).weight.detach()  # nn.Embedding's default: N(0, 1)
    row = [
        pe.norm(dim=1).mean(),
        lecun.norm(dim=1).mean(),
        (lecun * math.sqrt(size)).norm(dim=1).mean(),
        default.norm(dim=1).mean(),
        (default * math.sqrt(size)).norm(dim=1).mean(),
    ]
    for name, value in zip(norms, row, strict=True):
        norms[name].append(float(value))
    print(f"{size:>5} " + " ".join(f"{float(v):>{w}.1f}" for v, w in zip(row, (6, 9, 7, 7, 7), strict=True)))

# %% experiment
fig, ax = plt.subplots(figsize=(6.5, 4))
styles = {
    "PE": "k-",
    "1/D init": "C0--",
    "1/D init, scaled": "C0-o",
    "N(0,1) init": "C1--x",
    "N(0,1) init, scaled": "C1-o",
}
for name, style in styles.items():
    ax.plot(sizes, norms[name], style, label=name)
ax.set_xscale("log", base=2)
ax.set_yscale("log", base=2)
ax.set_xlabel("d_model (D)")
ax.set_ylabel("mean row length ||row||")
ax.legend()
ax.set_title("Row lengths: embeddings against positional encoding");

# %% [markdown]
# Read the blue lines against the black one. With variance $1/D$ the unscaled rows stay
# at length 1 while the positional rows grow like $\sqrt{D}$; scaled, they run parallel
# to the positional rows, at a fixed ratio of $\sqrt{D} / \sqrt{D/2} = \sqrt{2}$, for
# every $D$.
#
# The orange lines are a caution. `nn.Embedding` starts its rows at variance 1, so they
# already have length $\sqrt{D}$ (the dashed orange line lies on the blue dots), and
# the scale pushes them to length $D$, far above the positional encoding. Your
# `Embedding` keeps that default, and it still trains, because the model can learn to
# shrink the table.
#
# Another common choice gives a third answer. Glorot's rule (PyTorch's
# `nn.init.xavier_uniform_`) sets the variance from both sides of the matrix,
# $2 / (V + D)$ for a $V \times D$ table, so it shrinks as the vocabulary grows. This
# course's `Transformer` (lesson 09), like The Annotated Transformer, re-initialises
# every matrix that way, the embedding tables included. Scaled by $\sqrt{D}$, a row then
# has length $D\sqrt{2/(V+D)}$, and its ratio to the positional row is
# $2\sqrt{D/(V+D)}$: not $\sqrt{2}$, and not the same for every vocabulary. The scale and
# the initialisation belong together: what matters is the ratio between the token's
# vector and the position's vector.

# %% experiment
d_model = 512
print("Glorot-initialised table, scaled by sqrt(D), at D = 512:")
print(f"{'V':>6} {'row / PE row, measured':>23} {'2 sqrt(D / (V + D))':>20}")
for vocab_size in (1000, 8000, 32000):
    glorot = nn.init.xavier_uniform_(torch.empty(vocab_size, d_model))
    measured = (glorot * math.sqrt(d_model)).norm(dim=1).mean() / math.sqrt(d_model / 2)
    formula = 2 * math.sqrt(d_model / (vocab_size + d_model))
    print(f"{vocab_size:>6} {float(measured):>23.2f} {formula:>20.2f}")

# %% [markdown]
# ## What it costs
#
# For a batch of $B$ sequences of $T$ tokens:
#
# | | time | memory |
# |---|---|---|
# | parameters (the table) | | $O(V D)$ |
# | lookup `lut(tokens)` | $O(B T D)$: one row copied per token | $O(B T D)$ output |
# | the same as a one-hot product | $O(B T V D)$ | $O(B T V)$ for the one-hot matrix |
# | backward | $O(B T D)$, into the rows used | a gradient the size of the table, $O(V D)$ |
#
# The table is often the largest single weight of a small model: the paper's shared
# vocabulary of about 37,000 tokens at $D = 512$ is 19 million parameters. The
# measurement runs the lookup and the one-hot product on the same tokens. Each time is
# the median of many calls after a warm-up, on one CPU thread: your milliseconds will not
# be the same as another machine's, but the one-hot product comes out many times slower
# on any of them, because it multiplies by $V$ zeros for every token.

# %% experiment
print(f"parameters of a 37000 x 512 table: {37000 * 512 / 1e6:.1f} million")
vocab_size, d_model = 8000, 256
table = nn.Embedding(vocab_size, d_model).requires_grad_(False)
tokens = torch.randint(0, vocab_size, (8, 64))  # B * T = 512 tokens
previous = None
for name, lookup in (
    ("lookup", lambda: table(tokens)),
    ("one-hot matmul", lambda: F.one_hot(tokens, vocab_size).float() @ table.weight),
):
    elapsed = median_seconds(lookup)
    ratio = "" if previous is None else f"  ({elapsed / previous:.1f}x the previous)"
    print(f"{name:>15}: {elapsed * 1e3:8.3f} ms for {tokens.numel()} tokens{ratio}")
    previous = elapsed

# %% [markdown]
# ## Summary
#
# - An embedding layer is a learned table $W \in \mathbb{R}^{V \times D}$; looking up a
#   token id returns its row. The lookup equals a product with a one-hot vector, and
#   only the rows used receive gradient.
# - The course's `Embedding` keeps the table in `lut` and returns
#   `lut(tokens) * sqrt(d_model)`: `[B, T]` ids become `[B, T, D]` vectors.
# - The $\sqrt{D}$ scale brings rows initialised with variance $1/D$ (length about 1)
#   up to length about $\sqrt{D}$, the same order as the positional encoding's rows
#   ($\sqrt{D/2}$) that are added to them next.
# - Time is linear in the number of tokens; memory is dominated by the $V \times D$
#   table.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | token / token id | 词元 / 词元编号 |
# | vocabulary | 词表 |
# | embedding | 嵌入（词嵌入） |
# | embedding table (lookup table) | 嵌入表（查找表） |
# | one-hot vector | 独热向量 |
# | d_model (model dimension) | 模型维度 |
# | positional encoding | 位置编码 |
# | initialisation | 初始化 |
# | weight tying (shared embedding and output matrix) | 权重共享（嵌入与输出层共享矩阵） |
# | norm (length of a vector) | 范数（向量长度） |
