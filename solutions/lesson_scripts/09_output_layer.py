# %% [markdown]
# # Lesson 09: The output layer, the whole model, and greedy decoding
#
# The decoder of lesson 08 ends with a vector of $D = d_\text{model}$ numbers per target
# position. A translation is made of *words*, so one step is still missing: turn each
# vector into a probability for every word of the vocabulary, and pick one. This lesson
# adds that step and then puts every part of the course together:
#
# 1. the **output layer** (`Generator`): a linear projection to the vocabulary followed by
#    a log-softmax;
# 2. the **whole Transformer**: embeddings, positional encoding, encoder, decoder and
#    generator in one module, with `encode`, `decode` and `forward`;
# 3. **greedy decoding**: produce an output sentence one token at a time by always taking
#    the most likely next token.
#
# At the end you train a tiny model for a few seconds to copy sequences, watch its output
# distribution at each decoding step, and measure why decoding is the slow part of a
# Transformer.
#
# **You will write:** `Generator(d_model, vocab_size)`, `Transformer(...)` and
# `greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None)`.

# %% install
import copy
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import output_layer as checks
from autograder.checks.device import describe_devices
from autograder.timing import median_seconds
from solutions.embedding import Embedding
from solutions.encoder_decoder import Decoder, Encoder
from solutions.masking import causal_mask, padding_mask
from solutions.positional_encoding import PositionalEncoding

torch.manual_seed(0)
print(describe_devices())

# %% [markdown]
# ## From a vector to a word: projection, softmax, log-softmax
#
# Take one decoder state $x \in \mathbb{R}^D$. The output layer scores every word of a
# vocabulary of size $V$ with one linear map,
#
# $$z = x W^\top + b, \qquad W \in \mathbb{R}^{V \times D},\; b \in \mathbb{R}^{V},$$
#
# so $z_i$, the **logit** of word $i$, is the dot product of $x$ with row $i$ of $W$ plus a
# bias: row $i$ is a learned "template" for word $i$, and the decoder learns to produce a
# state close to the template of the word that should come next. Logits are any real
# numbers; a **softmax** turns them into a probability distribution:
#
# $$p_i = \mathrm{softmax}(z)_i = \frac{e^{z_i}}{\sum_{j=1}^{V} e^{z_j}}, \qquad p_i > 0,\quad \sum_i p_i = 1.$$
#
# Training minimises the negative log-likelihood of the right word $y$, $-\log p_y$, so
# what we really need is $\log p$. The paper's code (and ours) returns the
# **log-softmax**:
#
# $$\log p_i = z_i - \log \sum_{j} e^{z_j} = z_i - \operatorname{logsumexp}(z).$$
#
# Written this way it never computes a tiny $p_i$ and then its logarithm, which is what
# makes it safe for large logits (an experiment below shows the difference). PyTorch's
# `torch.log_softmax` computes $\operatorname{logsumexp}$ stably by subtracting the
# largest logit first: $\operatorname{logsumexp}(z) = m + \log\sum_j e^{z_j - m}$ with
# $m = \max_j z_j$, so every exponent is $\le 0$.
#
# | tensor | shape | meaning |
# |---|---|---|
# | `x` (decoder states) | `[B, T, D]` | one vector per target position |
# | `proj.weight` | `[V, D]` | one row per word of the target vocabulary |
# | `proj(x)` (logits) | `[B, T, V]` | one score per word at each position |
# | `log_softmax(proj(x), dim=-1)` | `[B, T, V]` | log-probabilities: `exp` of each row sums to 1 |
#
# The softmax runs over the **last** dimension, the vocabulary: every position gets its
# own distribution over words. The checks use $B = 2 \ne T = 5$ so that a softmax over
# the batch (`dim=0`) or over the positions (`dim=1`) shows.

# %% [markdown]
# ## Exercise: `Generator`
#
# In `__init__`, create `self.proj = nn.Linear(d_model, vocab_size)` (with its bias; the
# name `proj` lets the checks copy weights into it). In `forward`, return
# `torch.log_softmax(self.proj(x), dim=-1)`: log-probabilities, not probabilities and not
# raw logits. It must work for any number of leading dimensions (`[B, T, D]` and `[B, D]`).

# %% exercise solutions.output_layer.Generator

# %% [markdown]
# ## Check your work
#
# Each check prints a ✓ line when it passes. When it fails, its message says what it
# expected and what it got, and if your output matches a common mistake, it names it.

# %% test test_Generator_shapes points=1
checks.check_generator_shapes(Generator)

# %% test test_Generator_values points=2
checks.check_generator_values(Generator)
### BEGIN HIDDEN TESTS
from autograder.hidden.output_layer import hidden_generator

hidden_generator(Generator)
### END HIDDEN TESTS

# %% test test_Generator_large_logits points=1
checks.check_generator_large_logits(Generator)

# %% [markdown]
# ## Why log-softmax and not `log(softmax(...))`?
#
# On paper they are equal. In floating point they are not. Take three logits a thousand
# apart, as an over-confident model easily produces, in float32:
#
# - the naive softmax `exp(z) / exp(z).sum()` overflows: $e^{1000} = \infty$ and
#   $\infty / \infty$ is NaN;
# - `torch.softmax` subtracts the maximum first and gets $[1, 0, 0]$: the small
#   probabilities underflow to exactly 0, and `log` turns them into $-\infty$;
# - `torch.log_softmax` never forms those probabilities and returns the exact answer,
#   $[0, -1000, -2000]$.
#
# A loss of $-\log p_y = +\infty$ (and a gradient of NaN) ruins a training run in one
# step; that is why the Generator returns log-probabilities and the loss
# (`F.nll_loss`, or the label-smoothed loss of lesson 10) takes them as they are.

# %% experiment
logits = torch.tensor([1000.0, 0.0, -1000.0], requires_grad=True)
naive = logits.exp() / logits.exp().sum()
stable = torch.softmax(logits, dim=-1)
print("naive softmax:       ", naive.tolist())
print("torch.softmax:       ", stable.tolist())
print("log(torch.softmax):  ", stable.log().tolist())
print("torch.log_softmax:   ", torch.log_softmax(logits, dim=-1).tolist())
for name, log_probs in (
    ("log(softmax)", torch.softmax(logits, dim=-1).log()),
    ("log_softmax", torch.log_softmax(logits, dim=-1)),
):
    loss = -log_probs[1]  # the right word is word 1
    (gradient,) = torch.autograd.grad(loss, logits)
    print(f"{name:>13}: loss {loss.item():8.1f}, gradient {gradient.tolist()}")

# %% [markdown]
# With `log_softmax` the loss is large but finite, and its gradient, $p - \text{onehot}(y)$
# $= [1, -1, 0]$, says exactly what to do: lower the winning logit, raise the right one.
#
# ## Argmax decoding needs no softmax at all
#
# The softmax and the logarithm are both increasing functions, so they never change
# which word has the highest score:
#
# $$\arg\max_i z_i = \arg\max_i \mathrm{softmax}(z)_i = \arg\max_i \log \mathrm{softmax}(z)_i .$$
#
# Greedy decoding, which only needs the winner, could skip the softmax; we keep it because
# the same Generator feeds the loss, and because sampling and beam search (which compare
# probabilities across steps) need real log-probabilities.

# %% experiment
torch.manual_seed(1)
output_layer = Generator(8, 10)
states = torch.randn(4, 8)  # four decoder states [B, D]
with torch.no_grad():
    log_probs = output_layer(states)  # [B, V]
    same = torch.equal(log_probs.argmax(-1), output_layer.proj(states).argmax(-1))
print("argmax of log-probabilities:", log_probs.argmax(-1).tolist())
print("argmax of raw logits equal: ", same)
print("exp(log_probs) rows sum to: ", [round(s, 6) for s in log_probs.exp().sum(-1).tolist()])

# %% [markdown]
# ## The whole Transformer
#
# Every part exists now. The encoder-decoder model of the paper wires them like this:
#
# ```
# src [B, T_src] ─ src_embed ─ positional ─ encoder ─────────────┐ memory [B, T_src, D]
#                                                                 ▼
# tgt [B, T_tgt] ─ tgt_embed ─ positional ─ decoder (self-attn, cross-attn, FFN) ─ [B, T_tgt, D]
#                                                                 │
#                                                generator (only when needed) ─ [B, T_tgt, V_tgt]
# ```
#
# - `encode(src, src_mask)` embeds the source, adds the positional encoding and runs the
#   encoder: the **memory**, one vector per source token.
# - `decode(memory, src_mask, tgt, tgt_mask)` does the same for the target and runs the
#   decoder, whose cross-attention reads the memory.
# - `forward(src, tgt, src_mask, tgt_mask)` is `decode(encode(src, src_mask), src_mask, tgt, tgt_mask)`.
#
# `forward` returns the decoder's **states**, not log-probabilities: the caller applies
# `model.generator` where it needs words. The loss applies it to every position;
# `greedy_decode` only to the last one, which saves a `[T, V]` projection at every step.
# Keeping `encode` and `decode` separate matters at inference: the source is encoded
# **once**, and the decoder runs again and again on the growing output.
#
# ### Masks
#
# `src_mask` is the source padding mask, `padding_mask(src, pad) : [B, 1, 1, T_src]`. It
# is used twice: by the encoder's self-attention (no source token attends to padding) and
# by the decoder's cross-attention (no target token attends to source padding).
# `tgt_mask` is the target's padding mask *and* the causal mask, `[B, 1, T_tgt, T_tgt]`:
# a target position sees only itself and the positions before it.
#
# | tensor | shape |
# |---|---|
# | `src`, `src_mask` | `[B, T_src]`, `[B, 1, 1, T_src]` |
# | `tgt`, `tgt_mask` | `[B, T_tgt]`, `[B, 1, T_tgt, T_tgt]` (or `[T_tgt, T_tgt]`) |
# | `src_embed(src)`, after `positional` | `[B, T_src, D]` |
# | `encode(...)` = memory | `[B, T_src, D]` |
# | `decode(...)` = `forward(...)` | `[B, T_tgt, D]` |
# | `generator(forward(...))` | `[B, T_tgt, V_tgt]` |
#
# ### Names and initialisation
#
# Create the parts in `__init__` with exactly these names (the value check copies
# PyTorch's weights into your model by name, and the training code of lesson 10 loads
# weights the same way):
#
# | attribute | module |
# |---|---|
# | `src_embed` | `Embedding(src_vocab, d_model)` (lesson 01, already imported) |
# | `tgt_embed` | `Embedding(tgt_vocab, d_model)` |
# | `positional` | `PositionalEncoding(d_model, max_len, dropout)` (lesson 02): one, shared by both sides |
# | `encoder` | `Encoder(d_model, n_heads, d_ff, n_layers, dropout)` (lesson 08) |
# | `decoder` | `Decoder(d_model, n_heads, d_ff, n_layers, dropout)` |
# | `generator` | `Generator(d_model, tgt_vocab)` (yours, above) |
#
# One positional module serves both sides because it has no parameters: its table is a
# fixed buffer. Then, as in the paper's code, initialise every matrix (every parameter
# with more than one dimension) with `nn.init.xavier_uniform_`. Xavier keeps the variance
# of activations about the same from layer to layer: a good start for a deep stack.

# %% [markdown]
# ## Exercise: `Transformer`
#
# Fill in `__init__` (the six parts above, then the Xavier loop), `encode`, `decode` and
# `forward`. Each of the three methods is one line. Do not apply the generator in
# `forward`.
#
# The checks build a small model ($V_\text{src} = 11$, $V_\text{tgt} = 13$, $D = 16$,
# $h = 2$, $d_\text{ff} = 32$, two layers, no dropout). The first three use only how your
# model behaves: shapes, the parameter count, the spread of every matrix as built (Xavier's
# standard deviation is $\sqrt{2 / (\text{fan}_\text{in} + \text{fan}_\text{out})}$; PyTorch's
# default for `nn.Linear` is smaller), `forward` against `decode(encode(...))`, and
# what the masks and the positional encoding promise (a later target token or a padded
# source token must not move an output; the source and the token order must). The last
# one compares your model with PyTorch's own `nn.TransformerEncoder` and
# `nn.TransformerDecoder` between the paper's embeddings.

# %% exercise solutions.output_layer.Transformer

# %% test test_Transformer_shapes points=1
checks.check_transformer_shapes(Transformer)

# %% test test_Transformer_consistency points=1
checks.check_transformer_consistency(Transformer)

# %% test test_Transformer_properties points=2
checks.check_transformer_properties(Transformer)

# %% test test_Transformer_values points=2
checks.check_transformer_values(Transformer)
### BEGIN HIDDEN TESTS
from autograder.hidden.output_layer import hidden_transformer

hidden_transformer(Transformer)
### END HIDDEN TESTS

# %% [markdown]
# ## How many parameters?
#
# With $V_s$, $V_t$ the vocabulary sizes, $N$ layers per stack, and counting weights and
# biases:
#
# | part | parameters |
# |---|---|
# | two embeddings | $(V_s + V_t)\,D$ |
# | one attention block ($W_Q, W_K, W_V, W_O$) | $4(D^2 + D)$ |
# | one feed-forward block | $2 D\, d_\text{ff} + d_\text{ff} + D$ |
# | one LayerNorm ($\gamma$, $\beta$) | $2D$ |
# | encoder | $N\,[\,4(D^2{+}D) + (2Dd_\text{ff}{+}d_\text{ff}{+}D) + 2\cdot 2D\,] + 2D$ |
# | decoder | $N\,[\,2\cdot 4(D^2{+}D) + (2Dd_\text{ff}{+}d_\text{ff}{+}D) + 3\cdot 2D\,] + 2D$ |
# | generator | $D\,V_t + V_t$ |
#
# The positional table is a buffer: it is saved with the model but has no parameters.
# The cell counts a small model by part and compares with the formula, then applies the
# formula to the paper's base model ($D = 512$, $h = 8$, $d_\text{ff} = 2048$, $N = 6$,
# a shared vocabulary of about 37 000 tokens).


# %% experiment
def formula(src_vocab, tgt_vocab, d_model, d_ff, n_layers):
    attention = 4 * (d_model * d_model + d_model)
    ffn = 2 * d_model * d_ff + d_ff + d_model
    norm = 2 * d_model
    return {
        "src_embed + tgt_embed": (src_vocab + tgt_vocab) * d_model,
        "encoder": n_layers * (attention + ffn + 2 * norm) + norm,
        "decoder": n_layers * (2 * attention + ffn + 3 * norm) + norm,
        "generator": d_model * tgt_vocab + tgt_vocab,
    }


small = Transformer(11, 13, d_model=16, n_heads=2, d_ff=32, n_layers=2, dropout=0.0)
counted = {}
for name, parameter in small.named_parameters():
    part = name.split(".")[0]
    part = "src_embed + tgt_embed" if part in ("src_embed", "tgt_embed") else part
    counted[part] = counted.get(part, 0) + parameter.numel()
for part, number in formula(11, 13, 16, 32, 2).items():
    print(f"{part:>22}: counted {counted[part]:6d}, formula {number:6d}")

base = formula(37000, 37000, 512, 2048, 6)
print(f"\nbase model, nothing shared: {sum(base.values()) / 1e6:6.1f} M parameters")
for part, number in base.items():
    print(f"{part:>22}: {number / 1e6:6.1f} M")
shared = sum(base.values()) - 2 * 37000 * 512  # one matrix for both embeddings and the projection
print(f"base model, embeddings and projection shared: {shared / 1e6:6.1f} M (the paper reports 65 M)")

# %% [markdown]
# Two things stand out. In a small-vocabulary model almost everything is in the layers,
# but in the base model the vocabulary matrices are more than half of the parameters:
# three $37\,000 \times 512$ matrices are 57 M numbers. That is why the paper **shares**
# one matrix between the two embeddings and the output projection (section 3.4; the
# embedding is then scaled by $\sqrt{D}$, lesson 01), which brings the count to about the
# 65 M it reports. We keep them separate here, so the source and target vocabularies may
# differ.
#
# ## Generating a sentence: greedy decoding
#
# In training the whole target is known, so the decoder reads it all at once (teacher
# forcing, lesson 08) and the causal mask keeps each position from peeking ahead. At
# inference the target does not exist yet: it must be produced one token at a time, each
# new token fed back as input for the next. **Greedy** decoding always takes the single
# most likely token:
#
# 1. `memory = model.encode(src, src_mask)`, once.
# 2. `ys = [[start_symbol]] * B`, a `Long[B, 1]` tensor on `src`'s device.
# 3. Repeat `max_len - 1` times:
#    - `out = model.decode(memory, src_mask, ys, causal_mask(t, device))` with `t = ys.size(1)`;
#    - `log_probs = model.generator(out[:, -1])`: the **last** position predicts the next token;
#    - `next_token = log_probs.argmax(dim=-1)` and append it: `ys` becomes `[B, t + 1]`.
# 4. Return `ys`: `Long[B, L]`, `L <= max_len`, the first column all `start_symbol`.
#
# With an `end_symbol`, rows finish at different steps. A finished row keeps producing
# `end_symbol` (so the batch stays a rectangle, padded with it), and the loop stops as soon
# as **every** row has produced it, after appending that last token.
#
# | tensor | shape |
# |---|---|
# | `memory` | `[B, T_src, D]` |
# | `ys` at step $t$ | `[B, t]` |
# | `causal_mask(t)` | `[t, t]` |
# | `out = model.decode(...)` | `[B, t, D]` |
# | `out[:, -1]`, then `model.generator(...)` | `[B, D]`, then `[B, V]` |
# | `next_token` | `[B]` |
#
# Greedy is not the best sentence in general: a slightly less likely first word can lead
# to a much more likely sentence. Beam search keeps the $k$ best prefixes instead of one;
# the paper uses a beam of 4. Greedy is what you need to see a model work.

# %% [markdown]
# ## Exercise: `greedy_decode`
#
# Write the loop above. It works with any `model` that has `encode`, `decode` and
# `generator` (the checks use a small stand-in model, so they test your decoding even if
# your `Transformer` still has a bug). Build the causal mask with `causal_mask` from
# lesson 04 (imported), keep the tokens `torch.long`, and create new tensors on `src`'s
# device. The `@torch.no_grad()` line is given: decoding needs no gradients. Leave the
# model's mode alone: the caller puts it in eval mode before decoding, and the checks hand
# you a model in train mode (without dropout) to see that it comes back in train mode.

# %% exercise solutions.output_layer.greedy_decode

# %% test test_greedy_decode_shapes points=1
checks.check_greedy_shapes(greedy_decode)

# %% test test_greedy_decode_values points=2
checks.check_greedy_values(greedy_decode)
### BEGIN HIDDEN TESTS
from autograder.hidden.output_layer import hidden_greedy_decode

hidden_greedy_decode(greedy_decode, with_end=False)
### END HIDDEN TESTS

# %% test test_greedy_decode_end_symbol points=2
checks.check_greedy_end_symbol(greedy_decode)
### BEGIN HIDDEN TESTS
from autograder.hidden.output_layer import hidden_greedy_decode

hidden_greedy_decode(greedy_decode, with_end=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Watching a model decode
#
# An untrained model's predictions have nothing to do with the source. They are not
# uniform either: in the figure below, the untrained model gives its likeliest token
# between 0.28 and 0.44 of the probability (the numbers over the orange bars of the top
# row), where a uniform guess over 10 tokens would give 0.1, because random weights
# already prefer some tokens. To see what decoding
# looks like with a model that knows something, we train a tiny Transformer (one layer,
# $D = 32$) for a few seconds on the simplest task there is: **copy** the source. The
# vocabulary has 10 tokens: `<pad>` = 0, `<s>` = 1 (start), `</s>` = 2 (end) and seven
# letters `a` … `g`. The target is `<s>`, the source's letters, `</s>`.
#
# Training uses teacher forcing: the decoder reads the target without its last token and
# must predict the target without its first token, every position at once.

# %% experiment
PAD, START, END = 0, 1, 2
VOCAB = ["<pad>", "<s>", "</s>", "a", "b", "c", "d", "e", "f", "g"]
torch.manual_seed(0)
copier = Transformer(10, 10, d_model=32, n_heads=2, d_ff=64, n_layers=1, dropout=0.0, max_len=16)
untrained = copy.deepcopy(copier).eval()
optimizer = torch.optim.Adam(copier.parameters(), lr=3e-3)
data = torch.Generator().manual_seed(0)

start = time.perf_counter()
for step in range(101):
    src = torch.randint(3, 10, (64, 5), generator=data)  # [B, T_src] letters only
    tgt = torch.cat([torch.full((64, 1), START), src, torch.full((64, 1), END)], dim=1)  # [B, 7]
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # the decoder reads <s> a b ..., predicts a b ... </s>
    tgt_mask = padding_mask(tgt_in, PAD) & causal_mask(tgt_in.size(1))
    log_probs = copier.generator(copier(src, tgt_in, padding_mask(src, PAD), tgt_mask))  # [B, 6, V]
    loss = F.nll_loss(log_probs.reshape(-1, 10), tgt_out.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 25 == 0:
        print(f"step {step:3d}: loss {loss.item():.2f}")
print(f"trained in {time.perf_counter() - start:.1f} s")
copier.eval();

# %% [markdown]
# Now decode the source `c a f f e`. At every step the bars show the model's distribution
# over the vocabulary for the next token, given the tokens produced so far (its most likely
# token in orange). Top row: the untrained model; bottom row: after a few seconds of
# training. Both rows are given the same prefixes, the trained model's greedy output.

# %% experiment
source = torch.tensor([[5, 3, 8, 8, 7]])  # c a f f e
source_mask = padding_mask(source, PAD)
for model, label in ((untrained, "untrained"), (copier, "trained")):
    tokens = greedy_decode(model, source, source_mask, max_len=8, start_symbol=START, end_symbol=END)
    print(f"{label:>9} model, greedy output:", " ".join(VOCAB[i] for i in tokens[0].tolist()))
decoded = tokens  # the trained model's output: the prefixes below

steps = 4
fig, axes = plt.subplots(2, steps, figsize=(13, 5.5), sharey=True)
for row, (model, label) in enumerate(((untrained, "untrained"), (copier, "trained"))):
    with torch.no_grad():
        memory = model.encode(source, source_mask)
        states = model.decode(memory, source_mask, decoded[:, :steps], causal_mask(steps))
        probabilities = model.generator(states)[0].exp()  # [steps, V]
    for step in range(steps):
        ax = axes[row, step]
        best = int(probabilities[step].argmax())
        colors = ["tab:orange" if token == best else "tab:blue" for token in range(len(VOCAB))]
        ax.bar(range(len(VOCAB)), probabilities[step], color=colors)
        top = float(probabilities[step, best])
        ax.text(best, top + 0.02, f"{top:.2f}", ha="center")
        ax.set_xticks(range(len(VOCAB)), VOCAB, rotation=60)
        prefix = " ".join(VOCAB[i] for i in decoded[0, : step + 1].tolist())
        ax.set_title(f"{label}, step {step + 1}\nafter: {prefix}", fontsize=9)
        ax.set_ylim(0, 1.12)
    axes[row, 0].set_ylabel("probability of the next token")
fig.suptitle("The output distribution at each greedy decoding step (source: c a f f e)")
fig.tight_layout();

# %% [markdown]
# The untrained model spreads its probability over many tokens, and what it picks has
# nothing to do with the source. The trained one puts nearly all of the probability on the
# right letter at each step: the greedy choice copies the source and then ends with `</s>`.
#
# ## Decoding is serial
#
# In training, one `forward` call processes all $T$ target positions in parallel. At
# inference, step $t$ needs the token chosen at step $t - 1$, so the $L - 1$ decoder
# passes must run one after the other, and each re-reads the whole prefix: step $t$ costs
# a decoder pass over $t$ positions. The measurement times greedy decoding of an
# untrained model (no `end_symbol`, so every row runs to `max_len`) against one
# teacher-forced pass over a target of the same length.

# %% experiment
torch.manual_seed(2)
timing_model = Transformer(10, 10, d_model=32, n_heads=2, d_ff=64, n_layers=2, dropout=0.0).eval()
source = torch.randint(3, 10, (8, 10))  # [B, T_src]
previous = None
for length in (8, 16, 32, 64):
    serial = median_seconds(greedy_decode, timing_model, source, None, length, START)
    target = torch.randint(3, 10, (8, length))
    with torch.no_grad():
        parallel = median_seconds(timing_model, source, target, None, causal_mask(length))
    ratio = "" if previous is None else f"  ({serial / previous:.1f}x the previous)"
    print(
        f"L={length:3d}: greedy {serial * 1e3:7.1f} ms ({length - 1} decoder passes), "
        f"one teacher-forced pass {parallel * 1e3:5.1f} ms{ratio}"
    )
    previous = serial

# %% [markdown]
# Doubling the output length roughly doubles the time or worse: twice as many steps, and
# each step reads a longer prefix. The teacher-forced pass stays cheap, because all
# positions share one pass. Lesson 11 removes most of the repeated work with a key/value
# cache: the keys and values of earlier positions do not change, so each step only
# computes the new position.
#
# ## What it costs
#
# With $B$ sequences, $N$ layers, model size $D$, feed-forward size $d_\text{ff}$, target
# vocabulary $V$ and a source of $S = T_\text{src}$ positions:
#
# | operation | time | memory |
# |---|---|---|
# | `Generator` on `[B, T, D]` | $O(B\,T\,D\,V)$ | $O(B\,T\,V)$ for the log-probabilities |
# | `encode` (once per source) | $O(N\,B\,(S^2 D + S D^2 + S D\, d_\text{ff}))$ | $O(N\,B\,(h S^2 + S D))$ activations |
# | `decode`, one pass over $T$ target positions (training) | $O(N\,B\,(T^2 D + T S D + (T + S) D^2 + T D\, d_\text{ff}))$ | $O(N\,B\,(h T^2 + h T S + T D))$ activations |
# | greedy step $t$ (`decode` over $t$ positions, generator on 1) | $O(N\,B\,(t^2 D + t S D + (t + S) D^2 + t D\, d_\text{ff}) + B\,D\,V)$ | $O(N\,B\,(h t^2 + h t S + t D))$ |
# | `greedy_decode` to length $L$ (one `encode`, $L - 1$ steps) | $O(N\,B\,(L^3 D + L^2 S D + (L^2 + L S) D^2 + L^2 D\, d_\text{ff}) + B\,L\,D\,V)$ | that of the last step, $t = L$ |
#
# In each row of `decode`, $T^2 D$ is the masked self-attention, $T S D$ the
# cross-attention reading all $S$ source positions, $T D^2$ the projections of the target
# positions and $S D^2$ the projection of the memory into the cross-attention's keys and
# values. In greedy decoding that last term is paid again at every step, although the
# memory never changes. The sum over steps turns each term of a single pass into one
# power of $L$ higher, and the steps cannot run in parallel. This is why inference, not
# training, is usually the cost that engineers fight (lesson 11).
#
# ## Summary
#
# - The output layer is a linear map to the vocabulary followed by `log_softmax` over the
#   last dimension; log-probabilities stay finite where `log(softmax(...))` gives $-\infty$.
# - Argmax decoding does not need the softmax (it keeps the order), but the loss does.
# - The Transformer is `decode(encode(src))` with embeddings and one shared positional
#   encoding in front of each stack; `forward` returns states, the generator is applied by
#   the caller.
# - Most parameters of a large-vocabulary model sit in the vocabulary matrices, which the
#   paper shares.
# - Greedy decoding runs $L - 1$ decoder passes one after the other, each over the whole
#   prefix, with a causal mask, reading the prediction at the last position, and stops
#   when every row has produced `end_symbol`.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | output layer / generator | 输出层 / 生成器 |
# | logit (an unnormalised score) | logit（未归一化的分数） |
# | softmax / log-softmax | softmax / 对数 softmax |
# | log-sum-exp | 对数求和指数 |
# | numerical stability | 数值稳定性 |
# | underflow / overflow | 下溢 / 上溢 |
# | negative log-likelihood | 负对数似然 |
# | vocabulary | 词表 |
# | encoder-decoder | 编码器-解码器 |
# | memory (encoder output) | 记忆（编码器输出） |
# | parameter count | 参数量 |
# | weight tying (sharing) | 权重共享 |
# | Xavier initialisation | Xavier 初始化 |
# | greedy decoding | 贪心解码 |
# | beam search | 束搜索 |
# | start / end symbol | 起始符 / 结束符 |
# | teacher forcing | 教师强制 |
# | autoregressive | 自回归 |
# | key/value cache | 键值缓存 |
