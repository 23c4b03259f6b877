# %% [markdown]
# # Lesson 04: Masks
#
# Attention, as you wrote it in lesson 03, lets every query look at every key. Two
# situations forbid some of those looks:
#
# - **Padding.** Sentences in a batch have different lengths, but a tensor is a
#   rectangle, so the short ones are filled up with a padding token. Pad tokens are not
#   words: no query should gather anything from them.
# - **The future.** A decoder learns to predict token $i+1$ from tokens $0 \dots i$. In
#   training it sees the whole target sentence at once (teacher forcing), so without a
#   rule, position $i$ could simply read the answer at position $i+1$.
#
# A **mask** encodes such a rule as a boolean tensor next to the attention scores. In
# this lesson you build the three masks a Transformer needs, look at them, and find out
# what their shapes, their fill value and their corner cases do.
#
# **You will write:** `causal_mask(size, device=None)`, `padding_mask(tokens, pad_id)` and
# `decoder_mask(tokens, pad_id)`.

# %% install
import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap
from matplotlib.patches import Patch

from autograder.checks import masking as checks
from autograder.checks.device import describe_devices
from autograder.timing import median_seconds
from solutions.attention import scaled_dot_product_attention

torch.manual_seed(0)
print(describe_devices())

# %% [markdown]
# ## What a mask does
#
# In this course a mask $M$ is **boolean and True means "may attend"**, the convention
# of `F.scaled_dot_product_attention` (`nn.MultiheadAttention` uses the opposite one:
# be careful when you mix them). Where $M$ is False, the score is replaced by
# $-\infty$ before the softmax:
#
# $$\tilde s_{ij} = \begin{cases} \dfrac{q_i \cdot k_j}{\sqrt{d_k}} & \text{if } M_{ij} \\[4pt] -\infty & \text{otherwise} \end{cases}
# \qquad a_{ij} = \frac{e^{\tilde s_{ij}}}{\sum_{j'} e^{\tilde s_{ij'}}}$$
#
# Since $e^{-\infty} = 0$, a blocked key gets weight exactly 0 and its value cannot
# reach the output. Row $i$ of a mask belongs to query $i$, column $j$ to key $j$.
#
# Here is the small batch this lesson uses: three sentences of different lengths,
# padded on the right to $T = 7$. The pad id is **1** here, not 0 (fairseq's
# dictionaries, for one, put `<pad>` at 1): a mask must use the `pad_id` it is given.

# %%
vocab = ["<s>", "<pad>", "</s>", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "home"]
PAD = vocab.index("<pad>")
sentences = ["<s> the cat sat on the mat", "<s> a dog ran", "<s> the dog ran home"]
T = max(len(s.split()) for s in sentences)
tokens = torch.tensor(
    [[vocab.index(w) for w in s.split()] + [PAD] * (T - len(s.split())) for s in sentences]
)  # [B, T]
labels = [[vocab[i] for i in row] for row in tokens.tolist()]
print("pad id:", PAD)
print("tokens [B, T] =", list(tokens.shape))
print(tokens)

# %% [markdown]
# ## The causal mask
#
# Query $i$ may attend to key $j$ only if $j$ is not in its future:
#
# $$M^{\text{causal}}_{ij} = [\, j \le i \,], \qquad M^{\text{causal}} \in \{0, 1\}^{T \times T}.$$
#
# That is the lower triangle of a $T \times T$ matrix, **diagonal included** (a
# position may look at itself). It depends only on $T$, not on the sentence, so its
# shape is `[T, T]`; broadcasting repeats it over the batch and the heads.
#
# ## Exercise: `causal_mask`
#
# Return a boolean `[size, size]` tensor, True where key index <= query index, created
# on `device` (the default `None` means the CPU). `torch.ones(..., dtype=torch.bool)`
# with `torch.tril`, or a comparison of two `torch.arange`s, both work. Make sure the
# result is boolean, not float.

# %% exercise solutions.masking.causal_mask

# %% [markdown]
# ### Check your work
#
# Each check prints a ✓ line when it passes. When it fails, its message says what it
# expected and what it got, and if your mask matches a common mistake, it names it. The
# oracle is PyTorch's own causal mask, `nn.Transformer.generate_square_subsequent_mask(T)`,
# a float mask with $-\infty$ where attending is not allowed: `== 0` turns it into ours.

# %% test test_causal_mask_shape points=1
checks.check_causal_mask_shape(causal_mask)

# %% test test_causal_mask_values points=2
checks.check_causal_mask_values(causal_mask)
### BEGIN HIDDEN TESTS
from autograder.hidden.masking import hidden_causal_mask

hidden_causal_mask(causal_mask)
### END HIDDEN TESTS

# %% [markdown]
# ## The padding mask
#
# A pad token must be invisible as a **key**: no query may gather from it. For
# sentence $b$ with tokens $x_{b,0}, \dots, x_{b,T-1}$:
#
# $$M^{\text{pad}}_{b,j} = [\, x_{b,j} \ne \text{pad\_id} \,].$$
#
# It depends on the data (where each sentence ends) but not on the query, so it has one
# entry per sentence and key, and singleton axes for the heads and the queries:
#
# | tensor | shape | broadcasts over |
# |---|---|---|
# | `tokens` | `[B, T]` | |
# | `tokens != pad_id` | `[B, T]` | |
# | `padding_mask(tokens, pad_id)` | `[B, 1, 1, T]` | heads `h` and queries `T_q` |
# | `causal_mask(T)` | `[T, T]` | batch `B` and heads `h` |
# | `decoder_mask(tokens, pad_id)` | `[B, 1, T, T]` | heads `h` |
# | scores, weights | `[B, h, T_q, T_k]` | |
#
# Broadcasting lines two shapes up **from the right**, and an axis of size 1 is
# repeated to match the other. So `[B, 1, 1, T]` meets `[B, h, T_q, T_k]` as
# B↔B, 1↔h, 1↔T_q, T↔T_k: the same key row for every head and every query. The
# same mask serves cross-attention, where the keys come from the padded source and
# `T_q` (target length) differs from `T_k` (source length).
#
# ## Exercise: `padding_mask`
#
# Return a boolean `[B, 1, 1, T]` tensor, True where the token is **not** `pad_id`.
# Compare with the `pad_id` argument, never a fixed number, and add the two singleton
# axes with `[:, None, None, :]` (or `unsqueeze` or `view`).

# %% exercise solutions.masking.padding_mask

# %% test test_padding_mask_shape points=1
checks.check_padding_mask_shape(padding_mask)

# %% test test_padding_mask_values points=2
checks.check_padding_mask_values(padding_mask)
### BEGIN HIDDEN TESTS
from autograder.hidden.masking import hidden_padding_mask

hidden_padding_mask(padding_mask)
### END HIDDEN TESTS

# %% [markdown]
# ## The decoder mask: both rules at once
#
# The decoder's self-attention needs both rules: query $i$ of sentence $b$ may attend
# to key $j$ only if $j$ is not in its future **and** token $j$ is not padding:
#
# $$M^{\text{dec}}_{b,i,j} = [\, j \le i \,] \wedge [\, x_{b,j} \ne \text{pad\_id} \,].$$
#
# With the two masks you already have this is one `&`, and broadcasting does the rest:
# `[B, 1, 1, T] & [T, T]` lines up as `[B, 1, 1, T] & [1, 1, T, T]` and gives
# `[B, 1, T, T]`.
#
# ## Exercise: `decoder_mask`
#
# Return the boolean `[B, 1, T, T]` mask above. Call your `padding_mask` and
# `causal_mask` (create the causal one on `tokens.device`) and combine them with `&`:
# AND, not OR, since a key must pass both rules.

# %% exercise solutions.masking.decoder_mask

# %% test test_decoder_mask_shape points=1
checks.check_decoder_mask_shape(decoder_mask)

# %% test test_decoder_mask_values points=2
checks.check_decoder_mask_values(decoder_mask)
### BEGIN HIDDEN TESTS
from autograder.hidden.masking import hidden_decoder_mask

hidden_decoder_mask(decoder_mask)
### END HIDDEN TESTS

# %% [markdown]
# ## Looking at the masks
#
# First the padding mask of the batch, drawn as `[B, T]` (its two singleton axes
# dropped): each row is a sentence, each cell a token. Blue cells may be attended to,
# grey ones (the pads) may not.

# %% experiment
allowed = ListedColormap(["#d9d9d9", "#3182bd"])  # False: grey (blocked), True: blue (may attend)
legend = [Patch(color="#3182bd", label="True: may attend"), Patch(color="#d9d9d9", label="False: blocked")]

pad = padding_mask(tokens, PAD)  # [B, 1, 1, T]
fig, ax = plt.subplots(figsize=(8, 3), constrained_layout=True)
ax.imshow(pad[:, 0, 0, :], cmap=allowed, vmin=0, vmax=1)
for b, row in enumerate(labels):
    for j, word in enumerate(row):
        ax.text(j, b, word, ha="center", va="center", color="white" if pad[b, 0, 0, j] else "black")
ax.set_xticks(range(T), [f"key {j}" for j in range(T)])
ax.set_yticks(range(len(sentences)), [f"sentence {b}" for b in range(len(sentences))])
ax.set_xlabel("key position j")
fig.legend(handles=legend, loc="outside lower center", ncols=2)
ax.set_title(f"padding_mask(tokens, pad_id={PAD}): shape [B, 1, 1, T] = {list(pad.shape)}, drawn as [B, T]");

# %% [markdown]
# Now every sentence as a query × key picture. Left: the padding mask broadcast over
# the queries (whole columns blocked). Middle: the causal mask, the same for every
# sentence. Right: the decoder mask, their AND. Pad tokens are marked in red on the axes.
# Note the rows of the pad *queries* in the right column: they still see the real
# tokens before them. Their outputs are meaningless, but harmless: nothing attends to
# them as keys, and the loss (lesson 10) ignores them.

# %% experiment
causal = causal_mask(T)  # [T, T]
dec = decoder_mask(tokens, PAD)  # [B, 1, T, T]
fig, axes = plt.subplots(len(sentences), 3, figsize=(11, 11), constrained_layout=True)
for b in range(len(sentences)):
    panels = (
        (pad[b, 0].expand(T, T), "padding (broadcast over queries)"),
        (causal, "causal"),
        (dec[b, 0], "decoder = padding & causal"),
    )
    for ax, (mask, title) in zip(axes[b], panels, strict=True):
        ax.imshow(mask, cmap=allowed, vmin=0, vmax=1)
        ax.set_xticks([j - 0.5 for j in range(T + 1)], minor=True)  # white lines between the entries
        ax.set_yticks([i - 0.5 for i in range(T + 1)], minor=True)
        ax.grid(which="minor", color="white", linewidth=1)
        ax.tick_params(which="minor", length=0)
        ax.set_xticks(range(T), labels[b], rotation=90)
        ax.set_yticks(range(T), labels[b])
        for tick in (*ax.get_xticklabels(), *ax.get_yticklabels()):
            tick.set_color("red" if tick.get_text() == "<pad>" else "black")
        ax.set_title(f"sentence {b}: {title}", fontsize=10)
        ax.set_xlabel("key")
        ax.set_ylabel("query")
fig.legend(handles=legend, loc="outside lower center", ncols=2);

# %% [markdown]
# ## Causal against padding
#
# | | causal mask | padding mask |
# |---|---|---|
# | hides | the future: key $j > i$ | pad tokens as keys |
# | depends on | only the length $T$ | the data: where each sentence ends |
# | shape | `[T, T]` | `[B, 1, 1, T]` |
# | same for every sentence? | yes | no |
# | used in | decoder self-attention | encoder self-attention, cross-attention (the source's pads), decoder self-attention |
#
# Both only ever hide **keys**. A mask works because a blocked key's value cannot move
# the output. The experiment checks this with the reference attention from lesson 03:
# change the embedding of a future token, then the embeddings at the pad positions, and
# see which query outputs move.

# %% experiment
x = torch.randn(len(sentences), 1, T, 8)  # one head, an embedding of size 8 per token: [B, h=1, T, d_k]
out, _ = scaled_dot_product_attention(x, x, x, dec)

future = x.clone()
future[:, :, 4] = torch.randn(len(sentences), 1, 8)  # a new token at position 4
out_future, _ = scaled_dot_product_attention(future, future, future, dec)
print("token 4 changed, sentence 0, change of each query's output:")
print("  ", [round(float(d), 3) for d in (out_future - out)[0, 0].abs().amax(-1)])

pads = x.clone()
pads[(tokens == PAD)[:, None]] = 100.0  # garbage at every pad position
out_pads, _ = scaled_dot_product_attention(pads, pads, pads, dec)
real = (tokens != PAD)[:, None]  # [B, 1, T]
print("pads changed: largest change at a real token's query:", float((out_pads - out)[real].abs().max()))

# %% [markdown]
# Queries 0 to 3 of sentence 0 do not move when token 4 changes: they cannot see it.
# Queries 4 to 6 may see it, and move (here $q = k = v = x$, so query 4's own query
# vector changed too). And garbage at the pad positions changes no real token's output
# at all.
#
# ## Shapes and broadcasting
#
# The same `[B, 1, 1, T]` padding mask fits self-attention scores `[B, h, T, T]` and
# cross-attention scores `[B, h, T_q, T_k]`; the causal mask `[T, T]` fits any
# `[..., T, T]`. `torch.broadcast_shapes` shows what a mask grows into. A mask of
# shape `[B, T]` lines its `B` up with `T_q`: with luck that is an error, without luck
# (`B == T_q`) it broadcasts silently into the wrong mask.

# %% experiment
B, h, T_q = len(sentences), 4, 5  # 4 heads, 5 target (query) positions, T_k = T = 7 source keys
cross_scores = torch.zeros(B, h, T_q, T)  # [B, h, T_q, T_k]
self_scores = torch.zeros(B, h, T, T)  # [B, h, T, T]
print("padding", list(pad.shape), "against cross-attention scores", list(cross_scores.shape), "->",
      list(torch.broadcast_shapes(pad.shape, cross_scores.shape)))
print("causal ", list(causal.shape), "      against self-attention scores ", list(self_scores.shape), "->",
      list(torch.broadcast_shapes(causal.shape, self_scores.shape)))
print("decoder", list(dec.shape), "against self-attention scores ", list(self_scores.shape), "->",
      list(torch.broadcast_shapes(dec.shape, self_scores.shape)))

flat = tokens != PAD  # [B, T]: the singleton axes forgotten
try:
    torch.broadcast_shapes(flat.shape, cross_scores.shape)
except RuntimeError:
    print("[B, T] =", list(flat.shape), "against", list(cross_scores.shape), "-> error (B = 3 meets T_q = 5)")
square = torch.zeros(B, h, B, T)  # the unlucky case: T_q == B == 3
wrong = flat.expand(square.shape)  # broadcasts without complaint...
right = pad.expand(square.shape)
print(f"[B, T] against {list(square.shape)} broadcasts, but {int((wrong != right).sum())} of "
      f"{right.numel()} entries are wrong: query i of every sentence uses sentence i's padding")

# %% [markdown]
# ## $-10^9$ against $-\infty$
#
# Many implementations fill masked scores with a large negative number such as
# $-10^9$ instead of $-\infty$. For a row that keeps at least one key the two are the
# same: $e^{-10^9}$ underflows to exactly 0 in float32. They differ in two places.
#
# - **A fully masked row.** With $-\infty$ the softmax is $0/0$ = NaN. With $-10^9$
#   every score is the same, so the softmax is uniform: the query averages the values
#   of keys it was told not to see. That is not NaN, but it is silently wrong.
# - **Half precision.** The largest float16 is 65504. $-10^9$ does not fit:
#   `masked_fill` refuses it, and a cast turns it into $-\infty$ anyway. Even
#   `torch.finfo(torch.float16).min` = $-65504$ is fragile. Near it, float16 numbers are
#   32 apart, so adding $-1$ or $-15$ rounds back to $-65504$; but from $-16$ on, the sum
#   rounds past the largest float16 and overflows to $-\infty$, and a later subtraction
#   of two such scores gives NaN.

# %% experiment
row = torch.tensor([1.5, -0.3, 0.8, 2.0])  # four scores of one query
some = torch.tensor([True, True, False, False])  # the last two keys masked
none = torch.zeros(4, dtype=torch.bool)  # every key masked
for name, fill in (("-1e9", -1e9), ("-inf", float("-inf"))):
    partly = torch.softmax(row.masked_fill(~some, fill), -1)
    fully = torch.softmax(row.masked_fill(~none, fill), -1)
    print(f"fill {name}: partly masked {partly.numpy().round(3)}, fully masked {fully.numpy().round(3)}")

half = row.half()
try:
    half.masked_fill(~some, -1e9)
except RuntimeError as error:
    print("float16 masked_fill(-1e9):", error)
print("-1e9 cast to float16:", float(torch.tensor(-1e9).half()))
lowest = torch.tensor(torch.finfo(torch.float16).min, dtype=torch.float16)
for step in (1.0, 15.0, 16.0):
    print(f"float16 min {float(lowest):.0f} - {step:.0f} = {float(lowest - torch.tensor(step).half())}")
print("fully masked row in float16, -1e9 filled in float32 then cast:",
      torch.softmax(row.masked_fill(~none, -1e9).half().float(), -1).numpy())

# %% [markdown]
# So this course fills with $-\infty$, which is exact in every dtype, and handles the
# fully masked row explicitly, as your lesson-03 function does: after the softmax, the
# weights at masked positions are set to 0, so such a row gives weights 0 and output 0.
#
# ## Fully masked rows
#
# When does a query have no key at all to attend to?
#
# - a sentence that is **all padding** (an empty example in a batch): every row of its
#   padding mask is blocked;
# - **left padding** with a causal mask: the pad queries at the start see only keys at
#   or before them, and those are all pads;
# - a padding mask wrongly put on the **queries** blocks whole rows (one of the known
#   mistakes above).
#
# One NaN row is worse than it looks: in the next layer that row's output is a key and
# value of every other query, and even a weight of 0 does not help, since $0 \cdot
# \text{NaN} = \text{NaN}$. The experiment pads a batch on the left and runs two
# layers of attention, once with a naive softmax and once with the lesson-03 function.


# %% experiment
def naive_attention(q, k, v, mask):
    """Lesson 03 without the last step: a fully masked row stays NaN."""
    scores = (q @ k.transpose(-2, -1) / q.size(-1) ** 0.5).masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, -1) @ v


left = torch.tensor([[3, 4, 5, 6, 3, 7], [PAD, PAD, 8, 9, 10, 11]])  # the second sentence padded on the left
left_mask = decoder_mask(left, PAD)  # [B, 1, T, T]
print("fully masked query rows:", int((~left_mask.any(-1)).sum()), "(the two leading pads of sentence 1)")
h0 = torch.randn(2, 1, 6, 8)  # [B, h=1, T, d_k]
def lesson_03_attention(q, k, v, mask):
    return scaled_dot_product_attention(q, k, v, mask)[0]


for name, attend in (("naive", naive_attention), ("lesson 03", lesson_03_attention)):
    h1 = attend(h0, h0, h0, left_mask)
    h2 = attend(h1, h1, h1, left_mask)
    print(f"{name:>9}: NaN outputs after layer 1: {int(h1.isnan().any(-1).sum()):>2} of 12, "
          f"after layer 2: {int(h2.isnan().any(-1).sum()):>2} of 12")

# %% [markdown]
# After one layer only the two fully masked rows are NaN; after the second, every
# position of that sentence is (the other sentence is untouched: masks never mix
# sentences). With zeros for the empty rows nothing spreads. PyTorch's
# `F.scaled_dot_product_attention` also returns zeros for such rows. Right padding (as
# in this lesson's batch) avoids the problem for decoder self-attention, since position
# 0 is always a real token.
#
# ## Build a mask once
#
# A mask depends on the tokens and on $T$, and on nothing a layer computes. A
# six-layer decoder therefore needs the same mask six times: build it **once** in the
# model's forward pass and hand it to every layer, instead of rebuilding it inside
# each layer. That saves the work and the memory of five copies, and guarantees that
# every layer sees the same rule. (A causal mask can even be built once for the
# longest sequence and sliced, `big[:T, :T]`.) The measurement builds the decoder mask
# of a batch of 32 sentences of length 256, once and then once per layer, each timed as
# the median of many calls after a warm-up: expect close to 6x.

# %% experiment
n_layers, batch, length = 6, 32, 256
big = torch.randint(2, len(vocab), (batch, length))
big[torch.arange(length) >= torch.randint(length // 2, length + 1, (batch, 1))] = PAD


def build_per_layer():
    for _ in range(n_layers):
        decoder_mask(big, PAD)


once = median_seconds(decoder_mask, big, PAD)
per_layer = median_seconds(build_per_layer)
print(f"built once:      {once * 1e3:.2f} ms")
print(f"built per layer: {per_layer * 1e3:.2f} ms  ({per_layer / once:.1f}x the previous)")
cached = causal_mask(1024)  # built once, for the longest sequence
print("cached causal mask sliced to T:", torch.equal(cached[:length, :length], causal_mask(length)))

# %% [markdown]
# ## What it costs
#
# | mask | time | memory (bool, 1 byte an entry) |
# |---|---|---|
# | `causal_mask(T)` | $O(T^2)$ | $T^2$ bytes |
# | `padding_mask(tokens, pad_id)` | $O(BT)$ | $BT$ bytes |
# | `decoder_mask(tokens, pad_id)` | $O(BT^2)$ | $BT^2$ bytes |
# | for comparison: float32 scores | $O(BhT^2 d_k)$ | $4BhT^2$ bytes |
#
# Thanks to the singleton head axis a mask is $4h$ times smaller than the scores it
# masks, and the padding mask is only linear in $T$: broadcasting never materialises
# its repeats. Like the scores, the decoder mask grows like $T^2$: doubling $T$
# quadruples it. The sizes below are computed; the times are measured, each the median
# of many calls after a warm-up. The milliseconds depend on your machine; the ratio is
# what to look at, and for masks this small it often stays below 4, because a fixed cost
# per call weighs as much as the $T^2$ entries.

# %% experiment
previous = None
for length in (256, 512, 1024):
    sample = torch.randint(2, len(vocab), (8, length))
    mask = decoder_mask(sample, PAD)
    elapsed = median_seconds(decoder_mask, sample, PAD)
    ratio = "" if previous is None else f"  ({elapsed / previous:.1f}x the previous)"
    scores_mib = 8 * 8 * length * length * 4 / 2**20  # float32 scores [B=8, h=8, T, T]
    print(f"T={length:>5}: decoder mask {mask.numel() / 2**20:5.1f} MiB, scores {scores_mib:6.1f} MiB, "
          f"{elapsed * 1e3:6.2f} ms{ratio}")
    previous = elapsed

# %% [markdown]
# ## Summary
#
# - Masks are boolean, True = may attend; a blocked score becomes $-\infty$ and its
#   key gets weight 0.
# - The **causal** mask `[T, T]` hides the future: True where key $j \le$ query $i$,
#   the lower triangle with its diagonal. It depends only on $T$.
# - The **padding** mask `[B, 1, 1, T]` hides pad keys: True where the token is not
#   `pad_id`. Its singleton axes broadcast over heads and queries, for self- and
#   cross-attention alike.
# - The **decoder** mask `[B, 1, T, T]` is their AND.
# - Broadcasting lines shapes up from the right: a mask with its axes in the wrong
#   place raises an error at best and is silently wrong at worst.
# - Fill with $-\infty$, not $-10^9$ ($-10^9$ overflows float16 and averages a fully
#   masked row), and give a fully masked row zero weights instead of NaN, which would
#   spread through the next layer.
# - Build a mask once per batch and pass it to every layer.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | mask | 掩码 |
# | causal mask (look-ahead mask) | 因果掩码（前瞻掩码） |
# | padding / pad token | 填充 / 填充符 |
# | padding mask | 填充掩码 |
# | decoder mask | 解码器掩码 |
# | teacher forcing | 教师强制 |
# | broadcasting | 广播 |
# | singleton axis | 长度为 1 的维度（单例维） |
# | lower triangular matrix | 下三角矩阵 |
# | fully masked row | 全被掩盖的行 |
# | overflow / underflow | 上溢 / 下溢 |
# | half precision (float16) | 半精度 |
# | left / right padding | 左填充 / 右填充 |
