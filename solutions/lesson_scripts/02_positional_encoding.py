# %% [markdown]
# # Lesson 02: Positional encoding
#
# After lesson 01 every token is a vector, but nothing in that vector says *where* the
# token stands: "dog bites man" and "man bites dog" hold the same three vectors. This
# lesson first shows that attention cannot recover the order by itself, then adds it
# the way the paper does: a fixed table of sines and cosines, one row per position,
# added to the embeddings,
#
# $$PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/D}}\right), \qquad
# PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/D}}\right).$$
#
# Then you will see why sines and cosines (a shift in position is a rotation) and why
# the frequencies are computed through `exp` and `log`.
#
# **You will write:** the function `sinusoidal_encoding(max_len, d_model)` and the module
# `PositionalEncoding(d_model, max_len=5000, dropout=0.0)`.

# %% install
import math

import matplotlib.pyplot as plt
import torch
from torch import nn

from autograder.checks import positional_encoding as checks
from autograder.checks.device import describe_devices
from autograder.timing import median_seconds
from solutions.attention import scaled_dot_product_attention
from solutions.embedding import Embedding

torch.manual_seed(0)
print(describe_devices())

# %% [markdown]
# ## Why positions are needed at all
#
# Self-attention (lesson 03) computes, for each position, a weighted average of all
# values, with weights from query-key dot products. Nothing in that computation looks at
# the index of a position. Shuffle the input rows with a permutation matrix $P$ and the
# queries, keys and values are shuffled the same way; the score matrix becomes
# $P S P^\top$, the softmax works row by row, and so
#
# $$\mathrm{Attention}(PX) = P\,\mathrm{Attention}(X).$$
#
# Attention is **permutation-equivariant**: the outputs move with the inputs, but each
# output does not change. To attention, a sentence is a *bag* of tokens. The experiment
# shuffles a random input and checks the identity, then runs "dog bites man" and
# "man bites dog" through the same attention layer.

# %%
d_model = 16
w_q, w_k, w_v = (torch.randn(d_model, d_model) / math.sqrt(d_model) for _ in range(3))


def self_attention(x):
    """One head of self-attention with fixed random projections: [..., T, D] -> [..., T, D]."""
    out, _ = scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v)
    return out


x = torch.randn(6, d_model)  # [T, D]
perm = torch.randperm(6)
print("permutation:", perm.tolist())
same = torch.allclose(self_attention(x[perm]), self_attention(x)[perm], atol=1e-6)
print("Attention(x[perm]) == Attention(x)[perm]:", same)

vocab = ["<pad>", "dog", "bites", "man"]
embed = Embedding(len(vocab), d_model)
dog_bites_man = torch.tensor([[1, 2, 3]])  # [B, T] = [1, 3]
man_bites_dog = torch.tensor([[3, 2, 1]])
with torch.no_grad():
    out_1, out_2 = self_attention(embed(dog_bites_man)), self_attention(embed(man_bites_dog))
print("output for 'dog', subject or object, identical:", torch.allclose(out_1[0, 0], out_2[0, 2]))

# %% [markdown]
# The word "dog" gets exactly the same output whether it bites or is bitten. The cure is
# to put the position into the input itself: add to each token's vector a vector that
# depends only on its position. Then "dog at position 0" and "dog at position 2" are
# different inputs.
#
# ## The sinusoidal table
#
# The paper's table has one row per position $pos = 0, 1, \dots$ and pairs its $D$
# columns: columns $2i$ and $2i+1$ hold the sine and the cosine of the same angle
# $pos \cdot \omega_i$, with frequency
#
# $$\omega_i = 10000^{-2i/D} = \exp\!\left(-\frac{2i}{D}\,\ln 10000\right), \qquad i = 0, 1, \dots, \tfrac{D}{2} - 1.$$
#
# The first pair turns fast (one radian per position, a wavelength of $2\pi$); the last
# turns slowly (wavelength close to $10000 \cdot 2\pi$). Like the hands of a clock, the
# fast pairs tell nearby positions apart and the slow pairs tell far-apart ones apart.
# Every entry lies in $[-1, 1]$, whatever the length of the sequence.
#
# ## Shapes
#
# | tensor | shape | meaning |
# |---|---|---|
# | `position` | `[max_len, 1]` | $0, 1, \dots, \text{max\_len} - 1$ as floats, a column |
# | `two_i` | `[D/2]` | $0, 2, 4, \dots, D - 2$ |
# | `frequency` | `[D/2]` | $\omega_i$, one per column pair |
# | `position * frequency` | `[max_len, D/2]` | the angles, by broadcasting a column against a row |
# | `pe` | `[max_len, D]` | sines in the even columns `pe[:, 0::2]`, cosines in the odd ones `pe[:, 1::2]` |
#
# ## Exercise: `sinusoidal_encoding`
#
# Return the table as a float32 tensor `[max_len, D]`:
#
# 1. If `d_model` is odd, raise a `ValueError` that says why (sin and cos come in pairs).
# 2. Make the positions, a float column `[max_len, 1]`, and the exponents $2i$ with
#    `torch.arange(0, d_model, 2)`.
# 3. Compute the frequencies as `torch.exp(two_i * (-math.log(10000.0) / d_model))`.
# 4. Fill a `torch.zeros(max_len, d_model)` table: the sines into the even columns, the
#    cosines into the odd columns.

# %% exercise solutions.positional_encoding.sinusoidal_encoding

# %% [markdown]
# ## Check your work
#
# The checks compare your table with the formula evaluated entry by entry in float64
# with Python's `math` module (with float32 tolerances for a float32 table). When your
# output matches a common mistake, the message names it.

# %% test test_sinusoidal_encoding_shape points=1
checks.check_sinusoidal_shape(sinusoidal_encoding)

# %% test test_sinusoidal_encoding_values points=2
checks.check_sinusoidal_values(sinusoidal_encoding)
### BEGIN HIDDEN TESTS
from autograder.hidden.positional_encoding import hidden_sinusoidal_encoding

hidden_sinusoidal_encoding(sinusoidal_encoding)
### END HIDDEN TESTS

# %% test test_sinusoidal_encoding_odd points=1
checks.check_sinusoidal_odd(sinusoidal_encoding)

# %% [markdown]
# ## Looking at the table
#
# Each row is a position, each column a dimension. On the left, the first columns
# change colour every few positions while the last ones barely change over 100
# positions: frequency falls from left to right. On the right, single columns as curves:
# columns 4 and 5 are one pair, the same wave (wavelength about 11 positions) as sine and
# as cosine, a quarter period apart; column 16 has a wavelength of about 63 positions and
# column 32 of about 628, so 100 positions cover only a sixth of its period.

# %%
table = sinusoidal_encoding(100, 64)  # [max_len, D]
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
image = left.imshow(table, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
left.set_xlabel("dimension (column)")
left.set_ylabel("position")
left.set_title("sinusoidal_encoding(100, 64)")
fig.colorbar(image, ax=left, label="PE value")
for column in (4, 5, 16, 32):
    kind = "sin" if column % 2 == 0 else "cos"
    right.plot(table[:, column], label=f"column {column} ({kind}, i = {column // 2})")
right.set_xlabel("position")
right.set_ylabel("PE value")
right.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
right.set_title("a few columns over position");

# %% [markdown]
# ## Why sines and cosines: a shift is a rotation
#
# The paper chose this table because "for any fixed offset $k$, $PE_{pos+k}$ can be
# represented as a linear function of $PE_{pos}$". Take one pair, with angle
# $a = pos\,\omega_i$ and shift $b = k\,\omega_i$. The angle-addition formulas give
#
# $$\begin{pmatrix} \sin(a + b) \\ \cos(a + b) \end{pmatrix}
# = \begin{pmatrix} \cos b & \sin b \\ -\sin b & \cos b \end{pmatrix}
# \begin{pmatrix} \sin a \\ \cos a \end{pmatrix}.$$
#
# The matrix is a **rotation** by the angle $b = k\,\omega_i$, and it depends on the offset
# $k$ but not on the position $pos$. Stacking one such $2 \times 2$ block per pair gives a
# block-diagonal matrix $M_k$ with
#
# $$PE_{pos+k} = M_k\, PE_{pos} \quad \text{for every } pos.$$
#
# So "the token three places back" is one fixed linear map, the same everywhere in the
# sequence, which a layer with linear projections can learn to use. A consequence: the
# dot product $PE_{pos} \cdot PE_{pos+k} = \sum_i \cos(k\,\omega_i)$ depends only on the
# distance $k$. Let us check both numerically on your table.

# %%
def bound(error):
    """A small error as its order of magnitude, '< 1e-05': the last digits vary between CPUs."""
    error = float(error)
    if error >= 0.1:
        return f"{error:.1f}"
    return "0" if error == 0 else f"< 1e{math.ceil(math.log10(error)):+03d}"


max_len, size, shift = 100, 64, 3
table = sinusoidal_encoding(max_len, size).double()  # [max_len, D]
frequency = torch.exp(torch.arange(0, size, 2, dtype=torch.float64) * (-math.log(10000.0) / size))
blocks = []
for angle in shift * frequency:
    c, s = math.cos(angle), math.sin(angle)
    blocks.append(torch.tensor([[c, s], [-s, c]], dtype=torch.float64))
rotation = torch.block_diag(*blocks)  # M_k: [D, D]

shifted = table[:-shift] @ rotation.T  # M_k PE_pos for every pos at once: [max_len - k, D]
shift_error = (shifted - table[shift:]).abs().max()
print(f"max |M_k PE(pos) - PE(pos + k)| over all pos, k = {shift}: {bound(shift_error)}")
orthogonal = torch.allclose(rotation @ rotation.T, torch.eye(size, dtype=torch.float64))
print("M_k is orthogonal (a rotation), M_k M_k^T = I:", orthogonal)
for pos in (0, 10, 50):
    print(f"PE({pos:>2}) . PE({pos + shift:>2}) = {float(table[pos] @ table[pos + shift]):.4f}")
print(f"sum_i cos(k w_i)  = {float(torch.cos(shift * frequency).sum()):.4f}")

# %% [markdown]
# The differences are float32 rounding of your table (printed as orders of magnitude,
# since the last digits depend on the CPU), and the dot products are the same
# number at every position. A learned table of position vectors (which the paper also
# tried, with nearly identical results) has no such structure; the sinusoids also give
# values for positions longer than any seen in training.
#
# ## Why `exp` and `log` for the frequencies
#
# The frequencies $\omega_i = 10000^{-2i/D}$ form a **geometric** progression: each is the
# previous one times the constant $10000^{-2/D}$. Taking logs turns it into an arithmetic
# one, $\ln \omega_i = -\frac{2i}{D} \ln 10000$, a straight line in $i$. So the code makes
# the evenly spaced exponents with one `arange`, multiplies them by a constant and takes
# one `exp`, exactly the formula on the log scale. The same code works for any base, and
# its every intermediate value stays small: the exponents lie between $-\ln 10000 \approx
# -9.2$ and 0, and the power $10000^{2i/D}$, up to 10000, is never formed.
#
# Does it change the numbers? In float32 the three ways of writing it agree to about one
# part in a million (the table is the same to the eye and to the checks). The difference
# shows in half precision with a larger base, as some later models use (for example
# 500000): float16 cannot even hold 500000 (its largest value is 65504), so the power
# forms break, while the exp/log form never needs the base itself.

# %% experiment
size = 64
two_i = torch.arange(0, size, 2)
for base, dtype in ((10000.0, torch.float32), (10000.0, torch.float16), (500000.0, torch.float16)):
    truth = torch.tensor([base ** (-k / size) for k in two_i.tolist()], dtype=torch.float64)
    exponents = two_i.to(dtype)
    forms = {
        "exp/log": torch.exp(exponents * (-math.log(base) / size)),
        "base**(-2i/D)": torch.pow(torch.tensor(base, dtype=dtype), -exponents / size),
        "1/base**(2i/D)": 1 / torch.pow(torch.tensor(base, dtype=dtype), exponents / size),
    }
    errors = "  ".join(
        f"{name} {bound(((value.double() - truth).abs() / truth).max()):>7}" for name, value in forms.items()
    )
    print(f"base {base:>8.0f}, {str(dtype).removeprefix('torch.'):>7}: max relative error  {errors}")

# %% [markdown]
# A relative error of 1 means the frequencies came out as 0 or infinity: the table is
# broken. Note what the experiment does *not* say: exp/log is not the most precise form
# (rounding the exponent costs it a few units in the last place). It is chosen for its
# shape, a line on the log scale with small intermediates, not for accuracy. (For the sin and cos of large angles float32 has its own limit: at position 5000
# an angle is known to about $5000 \times 6 \cdot 10^{-8} \approx 3 \cdot 10^{-4}$ radians. The
# table is computed once, in float32, and that is accurate enough for training.)
#
# ## Adding the table to the embeddings
#
# The module `PositionalEncoding` computes the table once, for every position up to
# `max_len`, and in `forward` adds its first $T$ rows to a batch of embeddings, then
# applies dropout (the paper uses $P_\text{drop} = 0.1$ on these sums):
#
# $$\mathrm{PositionalEncoding}(x) = \mathrm{Dropout}(x + PE_{[0:T]}).$$
#
# | tensor | shape |
# |---|---|
# | `x` | `[B, T, D]`, usually `Embedding(tokens)` from lesson 01 |
# | `self.pe` | `[max_len, D]` |
# | `self.pe[:T]` | `[T, D]`, broadcast over the batch |
# | output | `[B, T, D]` |
#
# The table is not learned, but it belongs to the module: it must move with
# `module.to(device)` and be saved in `state_dict()`. That is what a **buffer** is:
# `self.register_buffer("pe", table)` makes `self.pe` a tensor that `.to()`, `.cuda()` and
# `state_dict()` know about, and that `parameters()` (what an optimizer trains) leaves
# out.
#
# ## Exercise: `PositionalEncoding`
#
# - In `__init__`: register the table of your `sinusoidal_encoding(max_len, d_model)` as
#   the buffer `pe`, and make `self.dropout = nn.Dropout(dropout)`. No parameters.
# - In `forward(x)`: with `T = x.size(1)`, raise a `ValueError` that says so if
#   `T > max_len`; otherwise return `self.dropout(x + self.pe[:T])`. Do not change `x` in
#   place.

# %% exercise solutions.positional_encoding.PositionalEncoding

# %% [markdown]
# ## Check your work
#
# The first check looks at the buffer itself; the next ones load the formula's table into
# `pe` (so that they test `forward` even if your table is off) and compare
# `forward(x)` with `x + pe[:T]`, with $B = 2$, $T = 5$, $D = 8$ and max_len $= 12$.

# %% test test_PositionalEncoding_buffer points=1
checks.check_positional_encoding_buffer(PositionalEncoding)

# %% test test_PositionalEncoding_values points=2
checks.check_positional_encoding_values(PositionalEncoding)
### BEGIN HIDDEN TESTS
from autograder.hidden.positional_encoding import hidden_positional_encoding

hidden_positional_encoding(PositionalEncoding)
### END HIDDEN TESTS

# %% test test_PositionalEncoding_too_long points=1
checks.check_positional_encoding_too_long(PositionalEncoding)

# %% test test_PositionalEncoding_dropout points=1
checks.check_positional_encoding_dropout(PositionalEncoding)
### BEGIN HIDDEN TESTS
from autograder.hidden.positional_encoding import hidden_positional_encoding_length_and_dropout

hidden_positional_encoding_length_and_dropout(PositionalEncoding)
### END HIDDEN TESTS

# %% [markdown]
# ## A buffer, not a parameter
#
# The table is in the `state_dict` and follows `.to()`, but an optimizer never sees it.

# %% experiment
encoding = PositionalEncoding(d_model, max_len=50)
print("parameters:", [name for name, _ in encoding.named_parameters()])
print("buffers:   ", [(name, list(buffer.shape)) for name, buffer in encoding.named_buffers()])
print("state_dict:", list(encoding.state_dict()))
print("after .double(), pe is", encoding.double().pe.dtype)
encoding = encoding.float()

# %% [markdown]
# ## Order, restored
#
# Back to the two sentences. With the positional encoding added, "dog" as the subject and
# "dog" as the object are different inputs, and attention gives them different outputs.
# Shuffling the input now changes each output too: the identity of the first experiment no
# longer holds.

# %% experiment
with torch.no_grad():
    out_1 = self_attention(encoding(embed(dog_bites_man)))
    out_2 = self_attention(encoding(embed(man_bites_dog)))
    print("output for 'dog', subject or object, identical:", torch.allclose(out_1[0, 0], out_2[0, 2]))
    x_pe = encoding(x[None])[0]  # the random [T, D] input of the first experiment, plus positions
    x_perm_pe = encoding(x[perm][None])[0]
    same = torch.allclose(self_attention(x_perm_pe), self_attention(x_pe)[perm], atol=1e-6)
    print("with positions: Attention(x[perm]) == Attention(x)[perm]:", same)

# %% [markdown]
# ## What it costs
#
# | step | time | memory |
# |---|---|---|
# | building the table (once, in `__init__`) | $O(\text{max\_len} \cdot D)$ | $O(\text{max\_len} \cdot D)$ buffer |
# | `forward`: one addition (and dropout) | $O(B T D)$ | $O(B T D)$ output |
#
# There are no parameters. The default table, $5000 \times 512$ in float32, takes about
# 10 MB; `forward` is a single broadcast addition, linear in the number of tokens, so
# doubling $T$ roughly doubles its time. Each time below is the median of many calls
# after a warm-up, on one CPU thread; the milliseconds depend on your machine, and the
# ratio between two rows, close to 2, much less.

# %% experiment
build = median_seconds(PositionalEncoding, 512, 5000)
big = PositionalEncoding(512, max_len=5000)
mebibytes = big.pe.numel() * big.pe.element_size() / 2**20
print(f"table [5000, 512]: {build * 1e3:.1f} ms to build, {mebibytes:.1f} MiB")
previous = None
for length in (512, 1024, 2048):
    batch = torch.randn(4, length, 512)
    elapsed = median_seconds(big, batch)
    ratio = "" if previous is None else f"  ({elapsed / previous:.1f}x the previous)"
    print(f"T={length:>5}: {elapsed * 1e3:7.2f} ms{ratio}")
    previous = elapsed

# %% [markdown]
# ## Summary
#
# - Attention is permutation-equivariant: without position information it treats a
#   sequence as a bag of tokens. Adding a position-dependent vector to each embedding
#   breaks that symmetry.
# - The sinusoidal table puts $\sin(pos\,\omega_i)$ and $\cos(pos\,\omega_i)$ in columns
#   $2i$ and $2i+1$, with frequencies $\omega_i = 10000^{-2i/D}$ falling geometrically.
# - A shift by $k$ positions is a fixed rotation $M_k$ of every pair: $PE_{pos+k} = M_k
#   PE_{pos}$, and $PE_{pos} \cdot PE_{pos+k}$ depends only on $k$.
# - The frequencies are computed as $\exp(-2i \ln(10000)/D)$: a straight line on the log
#   scale, with small intermediate values in any precision.
# - `PositionalEncoding` keeps the table in a buffer `pe` (saved and moved, not trained)
#   and returns `dropout(x + pe[:T])`, in $O(BTD)$ time.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | positional encoding | 位置编码 |
# | sinusoidal | 正弦（的） |
# | position / offset | 位置 / 偏移量 |
# | frequency / wavelength | 频率 / 波长 |
# | geometric progression | 等比数列 |
# | permutation-equivariant | 置换等变 |
# | rotation matrix | 旋转矩阵 |
# | block-diagonal matrix | 分块对角矩阵 |
# | buffer (registered, not trained) | 缓冲区（注册但不训练的张量） |
# | dropout | 随机失活（dropout） |
# | half precision (float16) | 半精度（float16） |
