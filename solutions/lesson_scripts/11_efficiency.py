# %% [markdown]
# # Lesson 11: Efficiency: a key/value cache for decoding, and what attention costs
#
# Lesson 09 ended with a measurement: greedy decoding gets slow as the output grows,
# because step $t$ runs the decoder over the whole prefix of $t$ tokens again, although
# only the newest token is new. This lesson removes that repeated work, and then looks at
# the other cost every Transformer pays, the $n \times n$ attention matrix:
#
# 1. **a key/value cache**: each decoder layer keeps the keys and values of the positions
#    it has already seen, so a step computes only the newest position;
# 2. **incremental greedy decoding** built on it, which must give the same tokens as
#    lesson 09's `greedy_decode`;
# 3. **measurements**: decoding time against the output length with and without the cache,
#    and the time and memory of attention against the sequence length, beside PyTorch's
#    fused `F.scaled_dot_product_attention`;
# 4. **attention without the score matrix**: the *online softmax*, the idea inside fused
#    kernels, which walks the keys in blocks and never holds more than one block of scores;
#    and two ways to make the cache itself cheaper.
#
# **You will write:** `decoder_layer_step(layer, x, memory_kv, src_mask, cache)`,
# `cached_greedy_decode(model, src, src_mask, max_len, start_symbol, end_symbol=None)` and
# `blockwise_attention(q, k, v, mask=None, block_size=64)`.
#
# Letters, as in every lesson: $B$ batch, $T$ target length ($t$ the current step), $S$
# source length, $D = d_\text{model}$, $h$ heads, $d_k = D / h$, $N$ layers, $L$ the
# output length, $V$ the vocabulary.

# %% install
import math

import torch
import torch.nn.functional as F

from autograder import efficiency_measures as measures  # the experiments' clocks, counters and fits
from autograder.checks import efficiency as checks
from autograder.checks.device import describe_devices
from solutions.attention import scaled_dot_product_attention
from solutions.masking import causal_mask
from solutions.multi_head import merge_heads, split_heads
from solutions.output_layer import Transformer, greedy_decode

torch.manual_seed(0)
torch.set_num_threads(1)  # one CPU thread: steadier timings, and no threads waiting for each other
print(describe_devices())

# %% [markdown]
# ## Why the past does not change
#
# Take one decoder layer at step $t$ of greedy decoding, reading the prefix
# $y_1, \dots, y_t$. Its masked self-attention gives position $i$ the output
#
# $$\text{out}_i = \sum_{j \le i} \operatorname{softmax}_j\!\left(\frac{q_i \cdot k_j}{\sqrt{d_k}}\right) v_j,
# \qquad q_i = x_i W_Q,\; k_j = x_j W_K,\; v_j = x_j W_V .$$
#
# The causal mask is the whole story: position $i$ reads only positions $j \le i$, so its
# output, and everything the layer computes from it, depends on $y_1, \dots, y_i$ only.
# Appending $y_{t+1}$ changes nothing at positions $1, \dots, t$, in this layer or in any
# layer above (by induction over the layers). Lesson 09's loop recomputed all of them at
# every step and threw away everything but the last position.
#
# What the newest position $t$ needs from the past is exactly $k_1, \dots, k_{t-1}$ and
# $v_1, \dots, v_{t-1}$ of each layer's self-attention. Keep them, and a step is:
#
# 1. compute $q_t, k_t, v_t$ from the newest position's input $x_t$ (`[B, 1, D]`);
# 2. **append** $k_t, v_t$ to the cache: it now holds $k_1..k_t$ and $v_1..v_t$, `[B, h, t, d_k]`;
# 3. attend with the one query $q_t$ over all $t$ cached keys. **No causal mask**: the cache
#    holds only the past and the present, there is no future to hide.
#
# Cross-attention is even simpler: its keys and values are projections of the encoder's
# memory, which does not change while decoding. Compute $K_\text{mem} = \text{memory}\,W_K$
# and $V_\text{mem} = \text{memory}\,W_V$ once per layer, before the first step.
#
# | tensor | shape | |
# |---|---|---|
# | `x` (the newest position's input to the layer) | `[B, 1, D]` | |
# | `q`, and the new `k`, `v` | `[B, h, 1, d_k]` | `split_heads(layer.self_attn.w_q(x), h)`, ... (pre-LN: of `layer.norm1(x)`) |
# | `cache["k"]`, `cache["v"]` before the step | `[B, h, t-1, d_k]` | absent at the first step (`{}`) |
# | `cache["k"]`, `cache["v"]` after the step | `[B, h, t, d_k]` | `torch.cat([old, new], dim=2)` |
# | self-attention scores | `[B, h, 1, t]` | one row: no mask |
# | `memory_kv = (k_mem, v_mem)` | `[B, h, S, d_k]` each | once per layer |
# | cross-attention scores | `[B, h, 1, S]` | with `src_mask` `[B, 1, 1, S]` |
# | the step's output | `[B, 1, D]` | |
#
# The residual connections, the LayerNorms and the feed-forward network act on each
# position on its own, so they apply to the one new position exactly as in lesson 08:
#
# - **Post-LN** (`layer.norm_first` is False): $x \leftarrow \text{norm}_1(x + \text{SelfAttn}(x))$,
#   $x \leftarrow \text{norm}_2(x + \text{CrossAttn}(x))$, $x \leftarrow \text{norm}_3(x + \text{FFN}(x))$;
# - **Pre-LN** (`layer.norm_first` is True): $x \leftarrow x + \text{SelfAttn}(\text{norm}_1(x))$, and so on;
#   the query, key and value all come from $\text{norm}_1(x)$.

# %% [markdown]
# ## Exercise: `decoder_layer_step`
#
# Apply one `DecoderLayer` (lesson 08) to the newest position only. Use the layer's parts
# by their lesson 08 names: `layer.self_attn` and `layer.cross_attn` (each with `w_q`,
# `w_k`, `w_v`, `w_o`), `layer.ffn`, `layer.norm1`, `layer.norm2`, `layer.norm3`,
# `layer.dropout1` to `layer.dropout3` (they do nothing in eval mode; you may leave them
# out) and `layer.norm_first`. The number of heads is `k_mem.size(1)` (or
# `layer.self_attn.n_heads`). `split_heads`, `merge_heads` (lesson 05) and
# `scaled_dot_product_attention` (lesson 03) are imported.
#
# - `cache` is a dict: empty (`{}`) at the first step, then holding `"k"` and `"v"`.
# - Return a pair: the output `[B, 1, D]` **and the updated cache**. (Updating the dict you
#   were given is fine too, but return it: the grader may hand you a copy.)
#
# The checks run your function position by position over a target of $T$ positions,
# feeding back the cache it returns, and compare the stacked outputs `[B, T, D]` with
# PyTorch's own `nn.TransformerDecoderLayer` run over all $T$ positions at once with a
# causal mask (the same weights): Post-LN and Pre-LN, $B = 2$ and $3$, a source with
# padding.

# %% exercise solutions.efficiency.decoder_layer_step

# %% [markdown]
# ## Check your work
#
# Each check prints a ✓ line when it passes. When it fails, its message says what it
# expected and what it got, and if your output matches a common mistake, it names it.

# %% test test_decoder_layer_step_cache points=1
checks.check_step_cache(decoder_layer_step)

# %% test test_decoder_layer_step_post_ln points=2
checks.check_step_post_ln(decoder_layer_step)
### BEGIN HIDDEN TESTS
from autograder.hidden.efficiency import hidden_decoder_layer_step

hidden_decoder_layer_step(decoder_layer_step, norm_first=False)
### END HIDDEN TESTS

# %% test test_decoder_layer_step_pre_ln points=2
checks.check_step_pre_ln(decoder_layer_step)
### BEGIN HIDDEN TESTS
from autograder.hidden.efficiency import hidden_decoder_layer_step

hidden_decoder_layer_step(decoder_layer_step, norm_first=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Incremental greedy decoding
#
# Now the whole decoder. Lesson 09's `greedy_decode` called `model.decode` on the whole
# prefix at every step; `cached_greedy_decode` does the same work one position at a time:
#
# 1. `memory = model.encode(src, src_mask)`, once: `[B, S, D]`.
# 2. For every layer of `model.decoder.layers`, its `memory_kv`:
#    `split_heads(layer.cross_attn.w_k(memory), h)` and the same with `w_v`, once.
# 3. One cache per layer, `{}` each (a list of dicts: *not* `[{}] * N`, which is one dict
#    $N$ times).
# 4. At step $t = 0, 1, \dots, \text{max\_len} - 2$ the newest token `ys[:, -1:]` sits at
#    position $t$ (the start symbol is position 0). Embed it with
#    `model.tgt_embed(ys[:, -1:])` and add **its own row** of the positional table,
#    `model.positional.pe[t]`: `[B, 1, D]`. (Calling `model.positional` on a `[B, 1, D]`
#    input would add row 0, the start symbol's.)
# 5. Run it through every layer with `decoder_layer_step`, keeping each layer's cache.
# 6. `model.decoder.norm`, then `model.generator`, then the argmax: the next token, handled
#    exactly as in lesson 09 (a row that has produced `end_symbol` keeps producing it, and
#    decoding stops when every row has).
#
# The result must agree with `greedy_decode`'s: the same tokens (`torch.equal`), and
# log-probabilities equal up to rounding. Rounding is all that may differ: the cached
# decoder adds the same numbers in another order, so its log-probabilities can differ in
# their last bits. That changes a token only at a near-tie, where the two likeliest
# tokens are closer than the rounding: there the argmax could flip, and the two decodings
# would part from that step on. The checks use a small Transformer built by
# the grader (two layers, $D = 8$, a source with padding, rows that finish at different
# steps), compare your tokens with full recomputation, and read the log-probabilities
# your calls of `model.generator` return.
#
# | tensor | shape |
# |---|---|
# | `memory` | `[B, S, D]` |
# | `memory_kv[l]` | two `[B, h, S, d_k]` |
# | `caches[l]["k"]`, `caches[l]["v"]` after step $t$ | `[B, h, t + 1, d_k]` |
# | newest token, its embedding plus `pe[t]` | `[B, 1]`, `[B, 1, D]` |
# | after the layers, `decoder.norm`, `generator` | `[B, 1, D]`, `[B, 1, D]`, `[B, 1, V]` |
# | `ys` after step $t$ | `[B, t + 2]` |

# %% [markdown]
# ## Exercise: `cached_greedy_decode`
#
# Write it with your `decoder_layer_step`. The `@torch.no_grad()` line is given. Keep the
# tokens `torch.long` and create new tensors on `src`'s device.
#
# The checks look at *how* you compute, not only at what: right tokens from a loop that
# recomputes the prefix would pass lesson 09's checks but miss this lesson's point. They
# count, with hooks on the model's modules, what one decoding calls: the encoder must run
# once; each layer's `cross_attn.w_k` and `w_v` on the memory once; each layer's
# `self_attn.w_q` once per step, on one position; and no decoder layer's own `forward`
# (which would run over the whole prefix) at all. A failure names which of these it saw.

# %% exercise solutions.efficiency.cached_greedy_decode

# %% test test_cached_greedy_decode_shapes points=1
checks.check_cached_shapes(cached_greedy_decode)

# %% test test_cached_greedy_decode_values points=2
checks.check_cached_values(cached_greedy_decode)
### BEGIN HIDDEN TESTS
from autograder.hidden.efficiency import hidden_cached_greedy_decode

hidden_cached_greedy_decode(cached_greedy_decode, with_end=False)
### END HIDDEN TESTS

# %% test test_cached_greedy_decode_end_symbol points=2
checks.check_cached_end_symbol(cached_greedy_decode)
### BEGIN HIDDEN TESTS
from autograder.hidden.efficiency import hidden_cached_greedy_decode

hidden_cached_greedy_decode(cached_greedy_decode, with_end=True)
### END HIDDEN TESTS

# %% [markdown]
# ## The same tokens, for real
#
# On a model of the course's own `Transformer` (lesson 09) with random weights, in float32,
# both decoders give the same tokens; their log-probabilities differ only by rounding,
# because the cached one adds the same numbers in another order (one query row instead of
# a masked matrix). The last line measures how far this example is from a near-tie: the
# smallest gap, over every row and step, between the two likeliest tokens'
# log-probabilities, against the rounding difference of less than $10^{-5}$.

# %% experiment
torch.manual_seed(1)
same_model = Transformer(10, 10, d_model=32, n_heads=4, d_ff=64, n_layers=2, dropout=0.0).eval()
same_src = torch.randint(3, 10, (4, 7))  # [B, S]
full = greedy_decode(same_model, same_src, None, 20, 1)
step_log_probs = []  # what the cached decoder's generator returns at each step, [B, V] each
hook = same_model.generator.register_forward_hook(
    lambda module, args, out: step_log_probs.append(out.reshape(4, -1))
)
cached = cached_greedy_decode(same_model, same_src, None, 20, 1)
hook.remove()
print("same tokens:", torch.equal(full, cached), "shape", tuple(cached.shape))
with torch.no_grad():
    prefix = cached[:, :-1]  # [B, L - 1]: the input of each step
    states = same_model.decode(same_model.encode(same_src, None), None, prefix, causal_mask(prefix.size(1)))
    full_log_probs = same_model.generator(states)  # [B, L - 1, V]
difference = (torch.stack(step_log_probs, dim=1) - full_log_probs).abs().max().item()
print("log-probabilities differ by less than 1e-5:", difference < 1e-5)
top_two = full_log_probs.topk(2, dim=-1).values  # [B, L - 1, 2]
gap = (top_two[..., 0] - top_two[..., 1]).min().item()
print(f"smallest gap between the two likeliest tokens: {gap:.3f}")
