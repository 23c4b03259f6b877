# %% [markdown]
# # Lesson 08: The encoder and the decoder
#
# You have built every part of a Transformer layer: multi-head attention (lesson 05),
# LayerNorm (06), the position-wise feed-forward network (07), and the masks that say who
# may look at whom (04). This lesson assembles them. An **encoder layer** is self-attention
# followed by a feed-forward network, each wrapped in a residual connection and a
# LayerNorm. A **decoder layer** has the same two sub-layers with a third in between:
# **cross-attention**, where the target sequence reads the encoder's output. Stack $N$ of
# each and you have the model of *Attention Is All You Need*, short of the embeddings
# and the output layer (lesson 09).
#
# Along the way we answer the questions the design raises: why the residual
# connections, where the LayerNorm goes (Post-LN against Pre-LN), what the masked
# self-attention and the cross-attention do, what teacher forcing is, and which parts
# run in parallel in training but one step at a time at inference.
#
# **You will write:** `EncoderLayer`, `DecoderLayer`, `Encoder` and `Decoder`.

# %% install
import torch
from torch import nn

from autograder import stack_experiments as experiments  # the figure and the stacks' gradients
from autograder.checks import encoder_decoder as checks
from autograder.checks.device import describe_devices
from autograder.timing import median_seconds
from solutions.feed_forward import PositionwiseFeedForward
from solutions.layer_norm import LayerNorm
from solutions.masking import causal_mask, decoder_mask, padding_mask
from solutions.multi_head import MultiHeadAttention

torch.manual_seed(0)
print(describe_devices())

# %% [markdown]
# ## The whole picture
#
# Read the figure from the bottom. The **encoder** (left) turns the source tokens into
# vectors (embedding and positional encoding), then passes them through $N$ identical
# encoder layers. Its output, one $D$-dimensional vector per source position, is called
# the **memory**. The **decoder** (right) does the same to the target tokens, but each of
# its layers also looks at the memory (the red arrow) through cross-attention. A final
# linear layer and a softmax turn each decoder position into a probability for every
# word of the vocabulary: the prediction of the next token.
#
# The gray arrows are the **residual connections**: each sub-layer's input skips around
# it and is added to its output before the LayerNorm ("Add & Norm").


# %% experiment
experiments.draw_data_flow();

# %% [markdown]
# ## A sub-layer: residual connection and LayerNorm
#
# Every sub-layer (self-attention, cross-attention, feed-forward) is wrapped the same way.
# The paper writes it as
#
# $$\text{Post-LN:}\qquad x \leftarrow \mathrm{LayerNorm}\big(x + \mathrm{Dropout}(\mathrm{Sublayer}(x))\big).$$
#
# The sub-layer computes a *change* to $x$, and the **residual connection** adds that
# change to $x$ instead of replacing it. Many Transformers since GPT-2 (2019) move the
# norm to the sub-layer's input instead:
#
# $$\text{Pre-LN:}\qquad x \leftarrow x + \mathrm{Dropout}\big(\mathrm{Sublayer}(\mathrm{LayerNorm}(x))\big).$$
#
# In Pre-LN the running sum $x$, the **residual stream**, is never normalised inside the
# layer; only the copy handed to the sub-layer is. Both are in PyTorch:
# `nn.TransformerEncoderLayer(..., norm_first=False)` is Post-LN (the default) and
# `norm_first=True` is Pre-LN. Your layers take the same flag, and with the same weights
# they must give the same numbers as PyTorch's.
#
# Dropout sits on each sub-layer's output, before the addition. The checks compare with
# `dropout=0.0`, then once more with `dropout=0.3` after `.eval()`, where nothing may be
# dropped, so it changes no expected value; but do put it there: lesson 10 trains with it.
# `nn.Dropout` switches itself off after `.eval()`; `F.dropout(x, p)` does not, unless you pass
# `training=self.training`.
#
# ## The encoder layer
#
# $$\begin{aligned}
# x &\leftarrow \mathrm{Norm}_1\big(x + \mathrm{SelfAttn}(x, x, x, \text{src\_mask})\big)\\
# x &\leftarrow \mathrm{Norm}_2\big(x + \mathrm{FFN}(x)\big)
# \end{aligned}$$
#
# (Post-LN; for Pre-LN move each norm onto the sub-layer's input as above.) Shapes, with
# $B$ sequences of $T$ tokens, $D$ = `d_model`, $h$ heads and hidden width $d_{ff}$:
#
# | step | shape | note |
# |---|---|---|
# | `x` | `[B, T, D]` | one vector per token |
# | `src_mask` | `[B, 1, 1, T]` | padding mask: True at real tokens; broadcasts over heads and queries |
# | attention weights | `[B, h, T, T]` | kept in `self_attn.attn` |
# | `self_attn(x, x, x, src_mask)` | `[B, T, D]` | queries, keys and values all from `x` |
# | `norm1(x + ...)` | `[B, T, D]` | the residual needs the same shape on both sides |
# | inside `ffn` | `[B, T, d_ff]` | then back to `D` |
# | output | `[B, T, D]` | same shape as the input, so layers stack |
#
# Because a layer maps `[B, T, D]` to `[B, T, D]`, any number of them can be stacked.

# %% [markdown]
# ## Exercise: `EncoderLayer`
#
# `EncoderLayer(d_model, n_heads, d_ff, dropout=0.0, norm_first=False)`.
#
# In `__init__`, create, in this order and with exactly these names (the checks load
# PyTorch's weights by name):
#
# - `self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)`
# - `self.ffn = PositionwiseFeedForward(d_model, d_ff, dropout)`
# - `self.norm1`, `self.norm2`: two `LayerNorm(d_model)`
# - two `nn.Dropout(dropout)` for the sub-layers' outputs (no parameters, any names)
# - and keep `norm_first`.
#
# In `forward(x, src_mask=None)`, apply the self-attention sub-layer and then the
# feed-forward sub-layer, each with its residual connection, in the Post-LN or the Pre-LN
# form depending on `norm_first`. Pass `src_mask` to the self-attention. In Pre-LN, keep
# `x` for the residual: write `h = self.norm1(x)`, not `x = self.norm1(x)`.

# %% exercise solutions.encoder_decoder.EncoderLayer

# %% [markdown]
# ## Check your work
#
# The checks build PyTorch's `nn.TransformerEncoderLayer(batch_first=True, dropout=0.0)`
# with random weights, copy them into your layer (`self_attn.in_proj_weight` is split into
# `w_q`, `w_k`, `w_v`; `out_proj` becomes `w_o`; `linear1`, `linear2` go into `ffn`;
# `norm1.weight` becomes `norm1.gamma`, ...) and compare the outputs. Careful with masks when
# you call PyTorch yourself: its masks are True where attending is **not** allowed, ours
# where it is.

# %% test test_EncoderLayer_shapes points=1
checks.check_encoder_layer_shapes(EncoderLayer)

# %% test test_EncoderLayer_post_ln points=2
checks.check_encoder_layer_post_ln(EncoderLayer)
### BEGIN HIDDEN TESTS
from autograder.hidden.encoder_decoder import hidden_encoder_layer

hidden_encoder_layer(EncoderLayer, norm_first=False, masked=False)
### END HIDDEN TESTS

# %% test test_EncoderLayer_pre_ln points=2
checks.check_encoder_layer_pre_ln(EncoderLayer)
### BEGIN HIDDEN TESTS
from autograder.hidden.encoder_decoder import hidden_encoder_layer

hidden_encoder_layer(EncoderLayer, norm_first=True, masked=False)
### END HIDDEN TESTS

# %% test test_EncoderLayer_mask points=2
checks.check_encoder_layer_mask(EncoderLayer)
### BEGIN HIDDEN TESTS
from autograder.hidden.encoder_decoder import hidden_encoder_layer

hidden_encoder_layer(EncoderLayer, norm_first=False, masked=True)
hidden_encoder_layer(EncoderLayer, norm_first=True, masked=True)
### END HIDDEN TESTS

# %% [markdown]
# ## The decoder layer: masked self-attention and cross-attention
#
# The decoder produces the target one token after another, so position $i$ must not use
# the target tokens after it. Its self-attention is therefore **masked**: `tgt_mask` is the
# causal mask of lesson 04 (True where the key is not after the query), usually combined
# with the target's padding mask, `decoder_mask(tgt, pad_id)`.
#
# Its second sub-layer is **cross-attention**. It is the same `MultiHeadAttention` with its
# own weights, but its inputs come from two places:
#
# - the **queries** from the decoder, `x` [B, T_tgt, D]: each target position asks a question;
# - the **keys and values** from the encoder, `memory` [B, T_src, D]: the answers come from the
#   source sentence.
#
# The weights are `[B, h, T_tgt, T_src]`: one row per target position, one column per source
# position. This is the only place where the decoder sees the source, the way a translator
# looks back at the original sentence while writing each word. Its mask is `src_mask`, the
# source's padding mask `[B, 1, 1, T_src]`: no target position attends to source padding. No
# causal mask here: the whole source is known from the start.
#
# $$\begin{aligned}
# x &\leftarrow \mathrm{Norm}_1\big(x + \mathrm{SelfAttn}(x, x, x, \text{tgt\_mask})\big)\\
# x &\leftarrow \mathrm{Norm}_2\big(x + \mathrm{CrossAttn}(x, \text{memory}, \text{memory}, \text{src\_mask})\big)\\
# x &\leftarrow \mathrm{Norm}_3\big(x + \mathrm{FFN}(x)\big)
# \end{aligned}$$
#
# | step | shape | note |
# |---|---|---|
# | `x` | `[B, T_tgt, D]` | the target so far (shifted right, see teacher forcing below) |
# | `memory` | `[B, T_src, D]` | the encoder's output; $T_{src}$ and $T_{tgt}$ differ in general |
# | `tgt_mask` | `[B, 1, T_tgt, T_tgt]` | causal and target padding together |
# | `src_mask` | `[B, 1, 1, T_src]` | source padding |
# | self-attention weights | `[B, h, T_tgt, T_tgt]` | zero above the diagonal |
# | cross-attention weights | `[B, h, T_tgt, T_src]` | Q from `x`, K and V from `memory` |
# | output | `[B, T_tgt, D]` | one vector per target position |
#
# In Pre-LN (`norm_first=True`) each norm moves onto its sub-layer's input; in the
# cross-attention only the query side is normalised, `cross_attn(norm2(x), memory, memory, src_mask)`:
# the memory has been normalised by the encoder already.

# %% [markdown]
# ## Exercise: `DecoderLayer`
#
# `DecoderLayer(d_model, n_heads, d_ff, dropout=0.0, norm_first=False)`.
#
# In `__init__`, create in this order: `self_attn` and `cross_attn` (two
# `MultiHeadAttention(d_model, n_heads, dropout)`), `ffn`
# (`PositionwiseFeedForward(d_model, d_ff, dropout)`), `norm1`, `norm2`, `norm3`
# (`LayerNorm(d_model)`), three dropouts, and keep `norm_first`.
#
# In `forward(x, memory, src_mask=None, tgt_mask=None)`: masked self-attention with
# `tgt_mask` and `norm1`, cross-attention with `src_mask` and `norm2`, then the
# feed-forward network with `norm3`, each with its residual connection, Post-LN or Pre-LN.
# Mind the argument order: `src_mask` comes before `tgt_mask`, as in the contract of the
# course (and unlike PyTorch's keyword arguments).

# %% exercise solutions.encoder_decoder.DecoderLayer

# %% [markdown]
# The checks compare with `nn.TransformerDecoderLayer`, whose cross-attention is called
# `multihead_attn`. They use $T_{tgt} = 4 \ne T_{src} = 6$; if your layer crashes there
# because it mixes up the two sides, the check runs it again with equal lengths and tells
# you which mix-up it found.

# %% test test_DecoderLayer_shapes points=1
checks.check_decoder_layer_shapes(DecoderLayer)

# %% test test_DecoderLayer_post_ln points=2
checks.check_decoder_layer_post_ln(DecoderLayer)
### BEGIN HIDDEN TESTS
from autograder.hidden.encoder_decoder import hidden_decoder_layer

hidden_decoder_layer(DecoderLayer, norm_first=False, masked=False)
### END HIDDEN TESTS

# %% test test_DecoderLayer_pre_ln points=2
checks.check_decoder_layer_pre_ln(DecoderLayer)
### BEGIN HIDDEN TESTS
from autograder.hidden.encoder_decoder import hidden_decoder_layer

hidden_decoder_layer(DecoderLayer, norm_first=True, masked=False)
### END HIDDEN TESTS

# %% test test_DecoderLayer_masks points=3
checks.check_decoder_layer_masks(DecoderLayer)
### BEGIN HIDDEN TESTS
from autograder.hidden.encoder_decoder import hidden_decoder_layer

hidden_decoder_layer(DecoderLayer, norm_first=False, masked=True)
hidden_decoder_layer(DecoderLayer, norm_first=True, masked=True)
### END HIDDEN TESTS

# %% [markdown]
# ## The stacks
#
# The encoder is $N$ encoder layers applied one after the other, each taking the previous
# layer's output, followed by a final LayerNorm; the decoder likewise, every one of its
# layers reading the same `memory`. The paper uses $N = 6$.
#
# Why a final norm? In Pre-LN the residual stream is never normalised inside the layers, so
# its scale drifts with depth (measured below); the final norm brings the output back to
# mean 0 and variance 1 before the next stage reads it. In Post-LN the last layer already
# ends in a norm and the final one only rescales with its own $\gamma$ and $\beta$. The
# paper's Post-LN stacks have no final norm; the course keeps one in both cases, as PyTorch
# does when you pass `norm=nn.LayerNorm(D)` to `nn.TransformerEncoder`, and as Pre-LN
# models need.
#
# The layers must be **different objects with their own weights**, held in an
# `nn.ModuleList` so that PyTorch sees their parameters. `nn.ModuleList([layer] * n_layers)`
# repeats one object: it has $N$ entries but only one layer's weights.

# %% [markdown]
# ## Exercise: `Encoder` and `Decoder`
#
# `Encoder(d_model, n_heads, d_ff, n_layers, dropout=0.0, norm_first=False)`: create
# `self.layers`, an `nn.ModuleList` of `n_layers` new `EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first)`,
# then `self.norm = LayerNorm(d_model)`. `forward(x, src_mask=None)` runs the layers in
# order, passing `src_mask` to each, and returns the final norm of the result.
#
# `Decoder` is the same with `DecoderLayer`, and `forward(x, memory, src_mask=None,
# tgt_mask=None)` hands `memory` and both masks to every layer.

# %% exercise solutions.encoder_decoder.Encoder

# %% exercise solutions.encoder_decoder.Decoder

# %% [markdown]
# The checks compare with `nn.TransformerEncoder` and `nn.TransformerDecoder` with two
# layers and `norm=nn.LayerNorm(D)`.

# %% test test_Encoder_structure points=1
checks.check_encoder_structure(Encoder)

# %% test test_Encoder_values points=2
checks.check_encoder_values(Encoder)
### BEGIN HIDDEN TESTS
from autograder.hidden.encoder_decoder import hidden_encoder

hidden_encoder(Encoder)
### END HIDDEN TESTS

# %% test test_Decoder_structure points=1
checks.check_decoder_structure(Decoder)

# %% test test_Decoder_values points=2
checks.check_decoder_values(Decoder)
### BEGIN HIDDEN TESTS
from autograder.hidden.encoder_decoder import hidden_decoder

hidden_decoder(Decoder)
### END HIDDEN TESTS

# %% [markdown]
# ## Why residual connections?
#
# Without the residual, a layer *replaces* its input with the sub-layer's output, and the
# gradient that reaches the first layer is a product of one Jacobian per layer above it. A
# product of many factors smaller than 1 vanishes (larger than 1, it explodes), so the
# first layers stop learning. With the residual, $x_{l+1} = x_l + F(x_l)$, the Jacobian of
# each step is $I + \partial F / \partial x_l$: the identity gives the gradient a direct
# path from the loss to every layer, however deep the stack.
#
# The experiment stacks small feed-forward sub-layers (attention left out to keep it fast)
# and measures the gradient norm of the **first** layer's weights, for a plain stack
# $F(x)$, a stack with a LayerNorm but no residual $F(\mathrm{LN}(x))$, and the Pre-LN
# residual form $x + F(\mathrm{LN}(x))$.


# %% experiment
print(f"{'depth':>6} {'F(x)':>10} {'F(LN(x))':>10} {'x + F(LN(x))':>13}")
for depth in (1, 4, 16, 48):
    row = [
        experiments.first_layer_gradient(PositionwiseFeedForward, LayerNorm, depth, wiring)
        for wiring in ("plain", "norm", "residual")
    ]
    print(f"{depth:>6} {row[0]:>10.2e} {row[1]:>10.2e} {row[2]:>13.2e}")

# %% [markdown]
# Without the residual, the first layer's gradient shrinks by orders of magnitude as the
# stack deepens (the LayerNorm slows the decay but does not stop it); with it, the
# gradient stays of the same size at every depth. The residual has a second benefit: at
# initialisation a layer whose sub-layer outputs little is close to the identity, so a deep
# stack starts as a gentle refinement of its input rather than a scramble of it.
#
# ## Post-LN against Pre-LN
#
# In Post-LN every path from the loss back to layer 1 passes through the LayerNorm of each
# layer above; in Pre-LN the residual stream is a clean sum, $x_N = x_0 + \sum_l F_l(\cdot)$,
# and the gradient flows along it untouched. Xiong et al. (2020) showed that at
# initialisation Post-LN's gradients are large near the output and small near the input,
# which is why Post-LN needs a learning-rate warm-up and becomes hard to train when deep,
# while Pre-LN trains stably without warm-up. The price of Pre-LN is the growing residual
# stream (hence the final norm), and Post-LN, when it does train, often ends slightly better.
#
# The experiment builds your `Encoder` both ways and measures, at initialisation, the
# gradient norm of the first and last layers' feed-forward weights and the standard
# deviation of the residual stream before the final norm.


# %% experiment
print(f"{'':>6} {'--------- Post-LN ---------':>28}   {'--------- Pre-LN ----------':>28}")
print(f"{'depth':>6} {'grad L1':>8} {'grad LN':>8} {'std x':>8}   {'grad L1':>8} {'grad LN':>8} {'std x':>8}")
for depth in (2, 8, 24):
    r = experiments.post_and_pre(Encoder, depth)
    print(f"{depth:>6} {r[0]:>8.2f} {r[1]:>8.2f} {r[2]:>8.2f}   {r[3]:>8.2f} {r[4]:>8.2f} {r[5]:>8.2f}")

# %% [markdown]
# As the stack deepens, Post-LN's first layer gets a much smaller gradient than its last
# layer, and Pre-LN's gradients stay more even across the stack. Post-LN's residual stream
# has standard deviation 1 after every layer (each ends in a norm), while Pre-LN's grows
# with depth: that is what its final LayerNorm is for.
#
# ## Masked self-attention: no peeking
#
# With the causal `tgt_mask`, the output at target position $i$ depends only on positions
# $0..i$. The experiment changes the input at position 3 of a 6-token target and reports
# which output positions moved, with and without the mask.

# %% experiment
torch.manual_seed(0)
layer = DecoderLayer(16, 4, 32).double().eval()
y = torch.randn(2, 6, 16, dtype=torch.float64)  # the decoder's input, T_tgt = 6
memory = torch.randn(2, 9, 16, dtype=torch.float64)  # the encoder's output, T_src = 9
changed_y = y.clone()
changed_y[:, 3] += 1.0
for name, tgt_mask in (("causal tgt_mask", causal_mask(6)), ("no tgt_mask", None)):
    with torch.no_grad():
        change = layer(changed_y, memory, None, tgt_mask) - layer(y, memory, None, tgt_mask)  # [B, T_tgt, D]
    moved = change.abs().amax(dim=(0, 2))  # the largest change at each target position
    print(f"{name:>16}: output moved at positions {[i for i in range(6) if moved[i] > 1e-12]}")
with torch.no_grad():
    layer(y, memory, None, causal_mask(6))
print("self-attention weights:", list(layer.self_attn.attn.shape), "= [B, h, T_tgt, T_tgt]")
print("largest weight above the diagonal:", layer.self_attn.attn.triu(diagonal=1).max().item())

# %% [markdown]
# Only positions 3, 4 and 5 move with the mask: position 3 because its own input
# changed, 4 and 5 because they may look back at 3. Without the mask, positions 0 to 2
# would read a token that, at inference, does not exist yet.
#
# ## Cross-attention: queries from the decoder, keys and values from the encoder
#
# Give the source sentences different lengths (padding) and look at the cross-attention
# weights: one row per target position, one column per source position, every row a
# distribution over the real source tokens.

# %% experiment
src_tokens = torch.tensor([[5, 8, 3, 9, 4, 7, 6, 2, 2], [6, 3, 9, 2, 0, 0, 0, 0, 0]])  # 0 = padding
src_mask = padding_mask(src_tokens, pad_id=0)  # [B, 1, 1, T_src]
with torch.no_grad():
    out = layer(y, memory, src_mask, causal_mask(6))
cross_weights = layer.cross_attn.attn
print("cross-attention weights:", list(cross_weights.shape), "= [B, h, T_tgt, T_src]")
print("each row sums to 1:", torch.allclose(cross_weights.sum(-1), torch.ones(2, 4, 6, dtype=torch.float64)))
print("weight on sentence 1's padding:", cross_weights[1, :, :, 4:].abs().max().item())
print("output:", list(out.shape), "= [B, T_tgt, D]: one vector per target position, not per source position")

# %% [markdown]
# The output has the decoder's length, $T_{tgt}$: each target position gathers a weighted
# average of the encoder's value vectors, chosen by how well its query matches each source
# key. Swap the roles (queries from the memory) and the output would have the source's
# length, which cannot be added to the decoder's residual stream: that is why a swapped
# cross-attention crashes when $T_{src} \ne T_{tgt}$.
#
# ## Teacher forcing
#
# In training we know the whole target sentence. The decoder's input is the target
# **shifted right** by one position, starting with a begin-of-sequence token `<bos>`, and
# the label at each position is the next token:
#
# | position | 0 | 1 | 2 | 3 | 4 |
# |---|---|---|---|---|---|
# | decoder input | `<bos>` | the | cat | sat | down |
# | label | the | cat | sat | down | `<eos>` |
#
# Feeding the *true* previous tokens, rather than the model's own guesses, is **teacher
# forcing**: every position learns from a correct history, and all positions are computed
# in one pass, because the causal mask already stops each one from seeing its label.

# %% experiment
tgt = torch.tensor([[1, 11, 12, 13, 14, 2], [1, 15, 16, 2, 0, 0]])  # 1 = <bos>, 2 = <eos>, 0 = padding
decoder_input, labels = tgt[:, :-1], tgt[:, 1:]
print("decoder input:", decoder_input.tolist())
print("labels:       ", labels.tolist())
print("tgt_mask of sentence 1, [T_tgt, T_tgt] (1 = may attend):")
for row in decoder_mask(decoder_input, pad_id=0)[1, 0]:
    print("  ", row.int().tolist())

# %% [markdown]
# ## What runs in parallel, and what does not
#
# In training, one call of the decoder on the shifted target computes every position at
# once. At inference there is no target: the model must generate token $i$ before it can
# feed it back to produce token $i+1$, one call per token. With the causal mask the two
# give exactly the same vectors, which the experiment checks with your `Decoder`: it runs
# once on the full sequence, then once per prefix, keeping the last position of each call.

# %% experiment
torch.manual_seed(0)
encoder = Encoder(32, 4, 64, n_layers=2).double().eval()
decoder = Decoder(32, 4, 64, n_layers=2).double().eval()
src = torch.randn(2, 10, 32, dtype=torch.float64)  # embedded source [B, T_src, D]
tgt_in = torch.randn(2, 16, 32, dtype=torch.float64)  # embedded, shifted target [B, T_tgt, D]


def one_pass():  # training, teacher forcing: every position at once
    return decoder(tgt_in, memory, None, causal_mask(16))


def step_by_step():  # generation: one call per position, each on the prefix so far
    steps = [decoder(tgt_in[:, :t], memory, None, causal_mask(t))[:, -1] for t in range(1, 17)]
    return torch.stack(steps, dim=1)  # [B, T_tgt, D]


with torch.no_grad():
    memory = encoder(src)  # once, for the whole generation
    parallel, serial = one_pass(), step_by_step()
    unmasked = decoder(tgt_in, memory)  # the same single pass without the causal mask
    parallel_ms, serial_ms = median_seconds(one_pass) * 1e3, median_seconds(step_by_step) * 1e3
print("one pass equals 16 step-by-step passes:", torch.allclose(parallel, serial))
print("without the causal mask it does not:   ", torch.allclose(unmasked, serial))
print(f"one pass: {parallel_ms:.1f} ms, step by step: {serial_ms:.1f} ms")

# %% [markdown]
# | part | training (teacher forcing) | inference (generation) |
# |---|---|---|
# | encoder | all source positions in parallel, one pass | the same: one pass, `memory` reused for every step |
# | decoder self-attention | all target positions in parallel (causal mask) | **serial**: one call per generated token |
# | decoder cross-attention, FFN | in parallel over positions | serial with the steps; parallel within a step |
# | every step | parallel over the batch and the heads | parallel over the batch and the heads |
#
# This is the Transformer's advantage over a recurrent network in training: an RNN must
# walk through the sequence even when the target is known, a Transformer computes all
# positions as a few large matrix products. Generation stays sequential, and the loop
# above recomputes every earlier position at each step; lesson 11 caches the keys and
# values of earlier positions so that each step only computes the new one.
#
# ## What it costs
#
# Per layer, for $B$ sequences of length $T$ (decoder: $T_{tgt}$, $T_{src}$):
#
# | part | time | memory (activations) |
# |---|---|---|
# | Q, K, V and output projections | $O(B\,T\,D^2)$ | $O(B\,T\,D)$ |
# | self-attention scores and weights | $O(B\,T^2 D)$ | $O(B\,h\,T^2)$ |
# | cross-attention (decoder) | $O(B\,T_{tgt} T_{src} D)$ plus projections | $O(B\,h\,T_{tgt} T_{src})$ |
# | feed-forward | $O(B\,T\,D\,d_{ff})$ | $O(B\,T\,d_{ff})$ |
# | residuals and LayerNorms | $O(B\,T\,D)$ | $O(B\,T\,D)$ |
#
# A stack of $N$ layers costs $N$ times that. Parameters per layer: an encoder layer has
# $4(D^2 + D)$ in attention, $2 D\,d_{ff} + d_{ff} + D$ in the feed-forward network and
# $4D$ in its two norms; a decoder layer has a second attention and a third norm.

# %% experiment
D_base, h_base, d_ff_base = 512, 8, 2048
attention_params = 4 * (D_base**2 + D_base)
ffn_params = 2 * D_base * d_ff_base + d_ff_base + D_base
for name, module, formula in (
    ("EncoderLayer", EncoderLayer(D_base, h_base, d_ff_base), attention_params + ffn_params + 4 * D_base),
    ("DecoderLayer", DecoderLayer(D_base, h_base, d_ff_base), 2 * attention_params + ffn_params + 6 * D_base),
):
    counted = sum(p.numel() for p in module.parameters())
    print(f"{name} (D=512, h=8, d_ff=2048): {counted:,} parameters, formula {formula:,}")

D_small, d_ff_small = 64, 256
layer = EncoderLayer(D_small, 4, d_ff_small).eval()
linear_work = 4 * D_small**2 + 2 * D_small * d_ff_small  # per position: projections and feed-forward
print(f"per position: linear terms 4D^2 + 2D d_ff = {linear_work:,} multiply-adds, attention 2TD; "
      f"equal at T = 2D + d_ff = {2 * D_small + d_ff_small}")  # fmt: skip
previous = None
for length in (128, 256, 512):
    x = torch.randn(2, length, D_small)
    with torch.no_grad():
        elapsed = median_seconds(layer, x) * 1e3
    ratio = "" if previous is None else f"  ({elapsed / previous:.1f}x the previous)"
    mebibytes = layer.self_attn.attn.numel() * 4 / 2**20
    attention_share = 2 * length * D_small / (linear_work + 2 * length * D_small)
    print(f"T={length:>4}: {elapsed:6.1f} ms, attention weights {mebibytes:4.1f} MiB, "
          f"attention {attention_share:.0%} of the multiply-adds{ratio}")  # fmt: skip
    previous = elapsed
work = [length * (linear_work + 2 * length * D_small) for length in (128, 256, 512)]  # per sequence
print(f"by the count of multiply-adds alone, each doubling costs {work[1] / work[0]:.1f}x, "
      f"then {work[2] / work[1]:.1f}x")  # fmt: skip

# %% [markdown]
# The attention weights grow exactly 4x each time $T$ doubles ($B\,h\,T^2$ floats). The time
# grows roughly 2x per doubling where the projections and the feed-forward network (linear
# in $T$) dominate, and 4x where the $T^2$ scores do. Which one dominates is a count: per
# position, the projections and the feed-forward network cost $4D^2 + 2 D\, d_{ff}$
# multiply-adds, and the scores and the weighted sum of values $2 T D$. They are equal at
#
# $$T = 2D + d_{ff},$$
#
# which for this layer ($D = 64$, $d_{ff} = 256$) is $T = 384$, as the first line printed.
# So from $T = 128$ to $512$ the attention's share of the arithmetic only grows from 25% to
# 57%: by the count alone, a doubling costs 2.5x and then 2.8x (the last line), not yet 4x.
# Each time is the median of many calls after a warm-up, yet the milliseconds still depend
# on the machine and on what else it runs (the memory traffic of the $T \times T$ weights
# counts too, which the multiply-adds leave out): the memory is the exact measurement
# here, the time ratio the approximate one.
#
# ## Summary
#
# - A sub-layer is wrapped in a residual connection and a LayerNorm: Post-LN,
#   $\mathrm{LN}(x + F(x))$, as in the paper, or Pre-LN, $x + F(\mathrm{LN}(x))$, as in most
#   recent models (`norm_first=True`).
# - The residual gives the gradient a direct path through the stack; without it, deep
#   stacks stop learning in their first layers.
# - An encoder layer is self-attention then a feed-forward network. A decoder layer adds
#   cross-attention in between, its queries from the decoder and its keys and values from
#   the encoder's memory; its self-attention is masked with the causal `tgt_mask`, its
#   cross-attention with the source padding `src_mask`.
# - The stacks are an `nn.ModuleList` of $N$ independent layers and a final LayerNorm.
# - Teacher forcing feeds the true, shifted-right target, so training computes every
#   position in one pass; generation must go one token at a time.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | encoder / decoder | 编码器 / 解码器 |
# | encoder layer / decoder layer | 编码器层 / 解码器层 |
# | sub-layer | 子层 |
# | residual connection | 残差连接 |
# | residual stream | 残差流 |
# | layer normalization (Post-LN / Pre-LN) | 层归一化（后置 / 前置） |
# | masked self-attention | 掩码自注意力 |
# | cross-attention (encoder-decoder attention) | 交叉注意力（编码器-解码器注意力） |
# | memory (encoder output) | 记忆（编码器输出） |
# | causal mask / padding mask | 因果掩码 / 填充掩码 |
# | teacher forcing | 教师强制 |
# | shifted right | 右移 |
# | autoregressive generation | 自回归生成 |
# | vanishing gradient | 梯度消失 |
# | warm-up (learning rate) | 学习率预热 |
# | stack (of layers) | （层的）堆叠 |
