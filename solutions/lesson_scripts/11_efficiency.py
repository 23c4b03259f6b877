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
import time

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

try:
    import resource  # page-fault counts: Linux and macOS
except ImportError:  # Windows
    resource = None

from autograder.checks import efficiency as checks
from autograder.checks.device import describe_devices
from autograder.timing import median_seconds
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

# %% [markdown]
# ## How much faster? Time against the output length
#
# Count the work of one step at position $t$ for one sequence, in multiply-adds, for $N$
# layers ($d_\text{ff} = 4D$; per position, the self-attention's four projections are
# $4D^2$, the cross-attention's query and output projections $2D^2$, the feed-forward
# network $8D^2$):
#
# | | without a cache (lesson 09) | with a cache |
# |---|---|---|
# | projections and feed-forward | $N \cdot 14\, t D^2$ | $N \cdot 14 D^2$ |
# | self-attention scores and weighted sum | $N \cdot 2 t^2 D$ | $N \cdot 2 t D$ |
# | cross-attention | $N (2 t S D + 2 S D^2)$: the memory is projected again | $N \cdot 2 S D$ (and $2 N S D^2$ once) |
# | the whole decoding, $L$ steps (large $L$) | $\approx N (7 L^2 D^2 + \tfrac{2}{3} L^3 D)$ | $\approx N (14 L D^2 + L^2 D)$ |
#
# So without a cache, the time of a whole decoding grows like $L^2$ while the $D^2$ terms
# dominate and like $L^3$ for long outputs; with it, like $L$, then $L^2$. A fit of
# $\text{time} \approx c\, L^p$ to the measurements, a straight line in log-log axes,
# estimates the exponent $p$. The measurement uses the CPU, $D = 64$, $h = 4$, two layers,
# $B = 4$, and no `end_symbol`, so every row runs to $L$ tokens. Timings on a shared
# machine are noisy, and a point here is often a single run: `median_seconds` (with
# `blocked_autorange(min_run_time=0.2)` inside) takes the median of blocks of calls that
# fill 0.2 s, but a call that alone takes longer than 0.2 s, as most of these do, is timed
# once, after a warm-up call.


# %% experiment output-varies
def fitted_exponent(sizes, seconds):
    """The slope p of log(seconds) = p log(size) + c, by least squares."""
    x, y = torch.tensor(sizes, dtype=torch.float64).log(), torch.tensor(seconds, dtype=torch.float64).log()
    x = x - x.mean()
    return float((x * (y - y.mean())).sum() / (x * x).sum())


torch.manual_seed(2)
timed = Transformer(10, 10, d_model=64, n_heads=4, d_ff=256, n_layers=2, dropout=0.0).eval()
timed_src = torch.randint(3, 10, (4, 16))  # [B, S]
lengths, without_cache, with_cache = [32, 64, 128, 256], [], []
for length in lengths:
    slow = median_seconds(greedy_decode, timed, timed_src, None, length, 1, min_run_time=0.2)
    fast = median_seconds(cached_greedy_decode, timed, timed_src, None, length, 1, min_run_time=0.2)
    without_cache.append(slow)
    with_cache.append(fast)
    print(
        f"L={length:4d}: without cache {slow * 1e3:8.1f} ms, with cache {fast * 1e3:7.1f} ms, "
        f"{slow / fast:5.1f}x faster"
    )
p_slow, p_fast = fitted_exponent(lengths, without_cache), fitted_exponent(lengths, with_cache)
print(f"fitted exponents: without cache L^{p_slow:.2f}, with cache L^{p_fast:.2f}")
at_512 = without_cache[-1] * 2**p_slow / (with_cache[-1] * 2**p_fast)
print(f"extrapolated to L=512: about {at_512:.0f}x faster (tests/benchmarks/bench_kv_cache.py measures it)")

fig, ax = plt.subplots(figsize=(6, 4))
ax.loglog(lengths, without_cache, "o-", label=f"without cache (L^{p_slow:.1f})")
ax.loglog(lengths, with_cache, "o-", label=f"with cache (L^{p_fast:.1f})")
ax.set_xlabel("output length L (tokens)")
ax.set_ylabel("seconds per decoding (B = 4)")
ax.set_title("Greedy decoding on the CPU, D = 64, two layers")
ax.legend();

# %% [markdown]
# Beside the measurement, the ratio of multiply-adds that the table's last row predicts for
# the same lengths, $D = 64$: what the cache would gain if arithmetic alone set the time.

# %% experiment
D_timed = 64
for length in [32, 64, 128, 256]:  # the table's last row: multiply-adds without a cache over with one
    arithmetic = (7 * length**2 * D_timed**2 + 2 / 3 * length**3 * D_timed) / (
        14 * length * D_timed**2 + length**2 * D_timed
    )
    print(f"L={length:4d}: multiply-adds without cache / with cache = {arithmetic:5.1f}x")
print(f"the L^3 term overtakes the L^2 D^2 term at L = 10.5 D = {10.5 * D_timed:.0f}")

# %% [markdown]
# The cached decoder's time grows about linearly: at this size each step costs about the
# same, a few dozen small operations whose fixed overhead outweighs the arithmetic. The
# uncached one grows faster, but more slowly than its arithmetic: compare the fitted
# exponents and the speed-ups in the timing output with the ratios of multiply-adds above.
# On the 2-core CPUs this course is built on, the uncached exponent has come out between
# 1.4 and 1.9 from build to build, and the speed-up at $L = 256$ between 6 and 10 times,
# where the multiply-adds predict 137.5x. On the CPU, at this size, **fixed per-step
# costs, not arithmetic, set the time**: every step of either decoder launches dozens of
# small operations whose cost (Python, dispatch, allocation) does not depend on $L$, and
# the uncached decoder's growing matrices are still small. Nor has the arithmetic reached
# its $L^3$ regime: the $\tfrac{2}{3} L^3 D$ term overtakes $7 L^2 D^2$ only at
# $L = 10.5\,D$, 672 tokens here (the ratios' last line). The gap still widens with every token;
# `tests/benchmarks/bench_kv_cache.py` measures the ratio at $L = 512$ directly.
#
# Fixed costs can be removed without touching the arithmetic. `torch.compile` traces a
# step into fewer, larger kernels and takes Python out of the loop, and on a GPU **CUDA
# graphs** (`torch.compile(mode="reduce-overhead")`, or `torch.cuda.graphs` by hand) record
# a whole step's kernel launches once and replay them with one call. Serving systems
# decode with both; they need the cache preallocated (below), since a graph replays
# tensors of fixed shapes.
#
# **These figures are a CPU's; on a GPU expect a different picture.** This lesson's
# experiments run on the CPU (the first cell's line says so), so what you see here, also on
# Colab, is the CPU of the machine. Run the same decoders on a GPU and the cache gains far
# less at this size: a GPU runs the uncached decoder's growing matrices, still small for
# it, in about the time of the cached decoder's tiny ones, so both decoders are limited by
# launching their kernels, one after another, and their times grow about linearly in $L$
# alike. The cache wins on a GPU once the recomputed work fills the device: large $B$
# (many sequences decoded together), large $D$ and many layers, and long outputs, where
# recomputation's $L^2 D^2$ and $L^3 D$ terms dominate. No GPU figures are quoted here:
# none were measured for this lesson; run the cell on one to see yours.
#
# What the cache costs is **memory**: two tensors `[B, h, t, d_k]` per layer, that is
# $2 \cdot N \cdot B \cdot t \cdot D$ numbers (plus the memory's keys and values,
# $2 \cdot N \cdot B \cdot S \cdot D$, computed once). For the paper's base model ($N = 6$,
# $D = 512$) in float32 that is $24\,\text{KiB}$ per token and sequence, $12\,\text{MiB}$
# for one sequence of 512 tokens, and $1.5\,\text{GiB}$ for a batch of 128 such sequences:
# in large language models serving many users, the key/value cache, not the weights, is
# often what fills the accelerator's memory.
#
# ## What attention costs: the $n \times n$ matrix
#
# Training and encoding have no cache to help: every position attends to every other, and
# lesson 03's attention builds the whole score matrix. For one layer with $h$ heads over
# $n$ positions of width $D$ (batch 1):
#
# - time: $Q K^\top$ and the weighted sum of values are $2 n^2 D$ multiply-adds: $O(n^2 D)$;
# - memory: besides $Q$, $K$, $V$ ($3 n D$ numbers), the weights `[h, n, n]`: $n^2 h$ numbers.
#
# In float32 that is $4\,(3 n D + n^2 h)$ bytes. With $D = 128$, $h = 4$: at $n = 1024$ the
# matrix takes 16 MiB against 1.5 MiB for $Q, K, V$; at sixteen times that length, 4 GiB. The quadratic
# term wins from $n = 3D/h = 96$ on.
#
# Which memory? The score matrix exists while the forward pass runs, and in training,
# autograd **keeps** it until the backward pass (the softmax's gradient needs its output).
# The measurement below counts exactly what autograd keeps, with
# `torch.autograd.graph.saved_tensors_hooks`, each tensor's storage once, on the CPU and
# in float32. That is a count, not a timing, so it is the same on every machine. (On a
# GPU, `torch.cuda.max_memory_allocated()` gives the peak of everything allocated.)


# %% experiment
def saved_bytes(attention_fn, n, d_model=128, n_heads=4):
    """The bytes of the tensors autograd keeps for the backward pass of one attention call."""
    q, k, v = (torch.randn(1, n_heads, n, d_model // n_heads, requires_grad=True) for _ in range(3))
    storages = {}

    def keep(tensor):
        storages[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        attention_fn(q, k, v)
    return sum(storages.values())


def course_attention(q, k, v):
    return scaled_dot_product_attention(q, k, v)[0]


print(
    f"{'n':>6} {'formula 4(3nD + n^2 h)':>24} {'lesson 03 keeps':>16} "
    f"{'F.scaled_dot_product_attention keeps':>38}"
)
for n in (128, 256, 512, 1024, 2048):
    formula = 4 * (3 * n * 128 + n * n * 4)
    ours, fused = saved_bytes(course_attention, n), saved_bytes(F.scaled_dot_product_attention, n)
    print(f"{n:6d} {formula / 2**20:20.2f} MiB {ours / 2**20:12.2f} MiB {fused / 2**20:34.2f} MiB")

# %% [markdown]
# Lesson 03's attention keeps exactly the formula: $Q$, $K$, $V$ and the weights (the
# softmax's output, which the weighted sum of values also needs). Doubling $n$ multiplies
# it by almost 4. PyTorch's `F.scaled_dot_product_attention` keeps $Q$, $K$, $V$, its
# output and one number per query row (the log-sum-exp of the scores): $4 n D + n h$
# numbers, **linear** in $n$. It never stores the matrix: on the CPU it runs a
# *flash-attention* kernel that walks over blocks of keys, keeping for each query a
# running maximum, a running sum of exponentials and a running weighted sum of values, and
# rescales them when a larger score appears (the "online softmax"). It tiles the queries
# too: each block of queries is one task, with its running quantities held in the
# processor's registers and cache, and the tasks run in parallel. FlashAttention
# (Dao et al., 2022) has a **backward pass** of the same kind: it recomputes each block of
# scores from $Q$, $K$ and the saved log-sum-exp instead of reading a stored matrix back,
# more arithmetic for far less memory traffic.
#
# Now the time, for the same shapes, on one CPU thread (noisy on a shared machine): each
# point is the median of blocks of calls filling 0.3 s, so the largest size, whose call
# takes over 0.1 s, is the median of very few calls. The last column is lesson 03's time
# over the fused kernel's.


# %% experiment output-varies
sizes, ours_seconds, fused_seconds = [256, 512, 1024, 2048], [], []
for n in sizes:
    q, k, v = (torch.randn(1, 4, n, 32) for _ in range(3))  # [B, h, n, d_k], D = 128
    with torch.no_grad():
        ours_seconds.append(median_seconds(scaled_dot_product_attention, q, k, v, min_run_time=0.3))
        fused_seconds.append(median_seconds(F.scaled_dot_product_attention, q, k, v, min_run_time=0.3))
    print(
        f"n={n:5d}: lesson 03 {ours_seconds[-1] * 1e3:8.2f} ms, "
        f"F.scaled_dot_product_attention {fused_seconds[-1] * 1e3:8.2f} ms, "
        f"{ours_seconds[-1] / fused_seconds[-1]:5.2f}x"
    )
print(
    f"fitted exponents: lesson 03 n^{fitted_exponent(sizes, ours_seconds):.2f}, "
    f"F.scaled_dot_product_attention n^{fitted_exponent(sizes, fused_seconds):.2f}"
)

# %% [markdown]
# Both do $O(n^2 D)$ arithmetic, yet their fits differ: the fused kernel's exponent is near
# the arithmetic's 2, and lesson 03's is above it, its time growing faster than its
# arithmetic (the output's last line; on the course's 2-core CPUs lesson 03's exponent has
# come out between 2.3 and 2.8, and the fused one's between 1.8 and 2.0). Where does the
# extra time go? The weights `[h, n, n]` take $4 h n^2$ bytes, 64 MiB at $n = 2048$, and
# lesson 03 makes several tensors that size at every call: the scores, the scaled scores,
# the softmax's weights. A tensor that large is not taken from memory the process already
# holds: the allocator asks the operating system for fresh pages, and gives them back when
# the tensor is freed. The system maps each fresh 4 KiB page only when it is first
# written, a **page fault** that also fills the page with zeros, so every call pays for
# about 16,000 faults per tensor, work that grows with $n^2$ and is not arithmetic at all.
# The next cell counts them (`resource.getrusage`, on Linux and macOS) for one call at
# $n = 1024$ and $n = 2048$, on one thread, beside the same arithmetic written into
# buffers allocated once (`out=` and in-place operations) and the fused kernel.


# %% experiment output-varies
def faults_and_seconds(fn, *args, calls: int = 3) -> tuple[float, float]:
    """Page faults and seconds per call of fn(*args), after one warm-up call (NaN faults where the
    system cannot count them)."""
    fn(*args)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else 0
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    seconds = (time.perf_counter() - start) / calls
    after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else math.nan
    return (after - before) / calls, seconds


def preallocated(buffers):
    """Lesson 03's arithmetic, written into buffers made once: no fresh [h, n, n] tensor per call."""
    scores, out = buffers

    def attend(q, k, v):
        torch.matmul(q, k.transpose(-2, -1), out=scores)  # [B, h, n, n]
        scores.mul_(1 / math.sqrt(q.size(-1)))
        scores.sub_(scores.amax(dim=-1, keepdim=True)).exp_()  # the softmax, in place
        scores.div_(scores.sum(dim=-1, keepdim=True))
        return torch.matmul(scores, v, out=out)  # [B, h, n, d_k]

    return attend


print(f"a [1, 4, 2048, 2048] float32 tensor fills {4 * 4 * 2048 * 2048 // 4096:,} pages of 4 KiB")
local = {}
for n in (1024, 2048):
    q, k, v = (torch.randn(1, 4, n, 32) for _ in range(3))  # [B, h, n, d_k]
    buffers = (torch.empty(1, 4, n, n), torch.empty(1, 4, n, 32))
    with torch.no_grad():
        for name, fn in (
            ("lesson 03", course_attention),
            ("preallocated buffers", preallocated(buffers)),
            ("F.scaled_dot_product_attention", F.scaled_dot_product_attention),
        ):
            faults, seconds = faults_and_seconds(fn, q, k, v)
            local.setdefault(name, []).append(seconds)
            print(f"n={n:5d}, {name:>30}: {seconds * 1e3:7.1f} ms and {faults:8,.0f} page faults per call")
for name, (small, large) in local.items():
    print(f"{name:>30}: time x{large / small:.1f} from n = 1024 to 2048, a local exponent of "
          f"{math.log2(large / small):.2f}")

# %% [markdown]
# Read the counts first. On Linux, at $n = 2048$, lesson 03's attention faults on about as
# many pages per call as three of its large tensors fill (the first line gives one's count):
# the scores, the scaled scores and the weights are fresh memory at every call. At
# $n = 1024$ it faults on fewer, since the allocator keeps and reuses some blocks of that
# smaller size, and the preallocated version and the fused kernel fault on almost none.
# The preallocated version does the very same arithmetic as lesson 03's and keeps the
# score matrix in memory like it; what it saves is the operating system's work: compare its
# time with lesson 03's at $n = 2048$. Timings on a busy machine are noisy, so read the
# local exponents of one run with care; the fault counts do not depend on the load. The rest is
# memory traffic: 64 MiB is far more than a CPU's caches, so each of the several passes
# over the scores (the scale, the softmax, the second product) travels to main memory and
# back, where the fused kernel's blocks stay in cache. On a GPU the first effect is absent (PyTorch's CUDA allocator keeps freed
# blocks and hands them out again) and the second is larger: a GPU's arithmetic is so fast
# that reading and writing the score matrix is most of the cost, which is why FlashAttention
# was written for GPUs first. But a fused kernel does **the same arithmetic**, $O(n^2 D)$:
# fusing changes where the numbers live, not how many there are to compute.
#
# | | lesson 03's attention | a fused (flash) kernel |
# |---|---|---|
# | multiply-adds | $2 n^2 D$ | $2 n^2 D$ (and some more in the backward pass, which recomputes scores) |
# | memory kept for backward | $3 n D + h n^2$: $O(n^2)$ | $4 n D + h n$: $O(n)$ |
# | passes over the scores in memory | several (matmul, scale, mask, softmax, matmul) | none: blocks stay in cache or registers |
#
# To make attention itself cheaper than $O(n^2)$ one has to change the model (local or
# sparse attention, linear attention), and then the results change too; the cache and the
# fused kernels change only the cost, never a single output token.

# %% [markdown]
# ## Attention without the score matrix: the online softmax
#
# How can a kernel avoid storing the scores, when the softmax of a row divides by the sum
# over *all* of that row's scores? Take one query row, with scores
# $s_j = q \cdot k_j / \sqrt{d_k}$ for the keys $j = 1, \dots, T_k$. For **any** number $m$,
#
# $$\text{out} = \frac{\sum_j e^{s_j}\, v_j}{\sum_j e^{s_j}}
# = \frac{\sum_j e^{s_j - m}\, v_j}{\sum_j e^{s_j - m}},$$
#
# because the factor $e^{-m}$ cancels. The output is a ratio of two sums, and a sum can be
# built one piece at a time. So walk the keys in blocks and keep three running quantities
# per query row: the largest score seen so far, $m$; the running sum
# $\ell = \sum_{\text{seen}} e^{s_j - m}$; and the running output
# $a = \sum_{\text{seen}} e^{s_j - m}\, v_j$. A new block $J$ of keys updates them to
#
# $$m' = \max\!\big(m, \max_{j \in J} s_j\big), \qquad
# \ell' = e^{m - m'}\, \ell + \sum_{j \in J} e^{s_j - m'}, \qquad
# a' = e^{m - m'}\, a + \sum_{j \in J} e^{s_j - m'}\, v_j ,$$
#
# starting from $m = -\infty$, $\ell = 0$, $a = 0$; after the last block,
# $\text{out} = a / \ell$. The factor $e^{m - m'}$ turns each old term $e^{s_j - m}$ into
# $e^{s_j - m'}$, so that old and new terms share one reference point: it is 1 when the
# block left the maximum where it was, and smaller than 1 when the block raised it.
#
# Why keep $m$ at all, if any $m$ gives the same ratio? Because $e^{s}$ overflows, and
# then the ratio is $\infty / \infty$, NaN. The next cell shows where. With $m$ the running
# maximum, every exponent $s_j - m'$ is at most 0, so no term is larger than 1.
#
# A mask needs nothing new: a masked key gets the score $-\infty$, and $e^{-\infty} = 0$.
# One row needs care. While a row has seen no allowed key, its maximum is still $-\infty$,
# and $e^{-\infty - (-\infty)}$ is NaN: subtract 0 there instead. A row that may attend to
# no key at all ends with $\ell = 0$ and $a = 0$: divide by 1 there, and its output is
# zeros, as lesson 03 asks.
#
# | tensor | shape |
# |---|---|
# | `q` | `[..., T_q, d_k]` |
# | `k`, `v` | `[..., T_k, d_k]`, `[..., T_k, d_v]` |
# | one block of keys, of values | `[..., b, d_k]`, `[..., b, d_v]`, $b \le$ `block_size` (the last block may be shorter) |
# | the block's scores, and their weights $e^{s_j - m'}$ | `[..., T_q, b]` |
# | the block's slice of the mask | `mask[..., start:end]`, broadcasting against `[..., T_q, b]` |
# | running maximum $m$, running sum $\ell$ | `[..., T_q, 1]` each |
# | running output $a$ | `[..., T_q, d_v]` |
#
# The largest of these is one block of scores: $T_q \cdot b$ numbers per head instead of
# $T_q \cdot T_k$, memory that grows linearly with the length. The arithmetic is what it
# was, $2 T_q T_k d_k$ multiply-adds when $d_v = d_k$, plus the rescaling.

# %% experiment
for dtype in (torch.float32, torch.float64):
    edge = math.log(torch.finfo(dtype).max)  # the largest s with a finite e^s
    small, large = (torch.tensor(s, dtype=dtype).exp().item() for s in (89.0, 710.0))
    print(f"{dtype}: e^s overflows past s = {edge:.2f}; e^89 = {small:.3g}, e^710 = {large:.3g}")
row = torch.tensor([3.0, 800.0, 805.0], dtype=torch.float64)  # one query's scores
print("softmax from raw exponentials:", (row.exp() / row.exp().sum()).tolist())
shifted = (row - row.max()).exp()
print("with the maximum subtracted:  ", [round(w, 4) for w in (shifted / shifted.sum()).tolist()])

# %% [markdown]
# ## Exercise: `blockwise_attention`
#
# Write `blockwise_attention(q, k, v, mask=None, block_size=64)`, which returns the same
# `out [..., T_q, d_v]` as lesson 03's `scaled_dot_product_attention` (and no weights:
# never building them is the point):
#
# - walk the keys with `start` in `range(0, T_k, block_size)`; a block ends at
#   `min(start + block_size, T_k)`, so the last one may be shorter;
# - keep $m$, $\ell$ and $a$ for every query row (the table above), and update them with
#   the three formulas; `torch.maximum`, `scores.amax(dim=-1, keepdim=True)`,
#   `masked_fill` and `torch.exp` are all you need;
# - a mask means what it meant in lesson 03 (True: may attend) and broadcasts against the
#   scores; cut each block's part out of its last axis with `mask[..., start:end]`;
# - a row that may attend to no key gets zeros, never NaN.
#
# Do not call `F.scaled_dot_product_attention` or lesson 03's attention, and never compute
# `q` against all the keys at once: an experiment after the checks measures the largest
# tensor your function creates.

# %% exercise solutions.efficiency.blockwise_attention

# %% test test_blockwise_attention_shapes points=1
checks.check_blockwise_shapes(blockwise_attention)

# %% test test_blockwise_attention_values points=2
checks.check_blockwise_values(blockwise_attention)
### BEGIN HIDDEN TESTS
from autograder.hidden.efficiency import hidden_blockwise_attention

hidden_blockwise_attention(blockwise_attention, masked=False)
### END HIDDEN TESTS

# %% test test_blockwise_attention_large_scores points=1
checks.check_blockwise_large_scores(blockwise_attention)

# %% test test_blockwise_attention_mask points=2
checks.check_blockwise_mask(blockwise_attention)
### BEGIN HIDDEN TESTS
from autograder.hidden.efficiency import hidden_blockwise_attention

hidden_blockwise_attention(blockwise_attention, masked=True)
### END HIDDEN TESTS

# %% [markdown]
# ## Memory against the length
#
# The checks above judge your values. Memory is measured here, in your own notebook:
# `checks.largest_tensor(fn, *args)` watches every operation PyTorch runs during the call
# and returns the shape of the largest tensor one of them creates (a slice, a transpose or
# an `expand` is a view of another tensor's memory and does not count). That is a count
# of numbers, the same on every machine. The cell measures your `blockwise_attention`
# (`block_size = 64`) and lesson 03's attention for $T_q = T_k = n$, $B = 1$, $h = 4$,
# $d_k = 32$, fits $\text{count} \approx c\, n^p$ to each, and ends with a check that names
# the mistake if your function builds the whole score matrix. This cell gives no points:
# the grader's judge reaches your function only through its inputs and outputs, so it
# could not see the tensors inside.


# %% experiment
def largest_count(attention_fn, *args):
    """How many numbers the largest tensor created by attention_fn(*args) holds."""
    return math.prod(checks.largest_tensor(attention_fn, *args))


memory_sizes, blockwise_counts, full_counts = [256, 512, 1024, 2048], [], []
for n in memory_sizes:
    x = torch.randn(1, 4, n, 32)  # q, k and v: [B, h, n, d_k]
    blockwise_counts.append(largest_count(blockwise_attention, x, x, x, None, 64))
    full_counts.append(largest_count(course_attention, x, x, x))
    print(f"n={n:5d}: blockwise {blockwise_counts[-1]:>9,} numbers, lesson 03 {full_counts[-1]:>10,} numbers")
print(
    f"fitted exponents: blockwise n^{fitted_exponent(memory_sizes, blockwise_counts):.2f}, "
    f"lesson 03 n^{fitted_exponent(memory_sizes, full_counts):.2f}"
)
checks.check_blockwise_memory(blockwise_attention);

# %% [markdown]
# The reference's largest tensor is one block of scores, `[B, h, n, 64]`, and lesson 03's
# is the weights, `[B, h, n, n]`: the fitted exponents above say linear against
# quadratic. This is the memory half of what a fused kernel changes. The other half, speed,
# needs the loop to run inside one compiled function, where each block of scores stays in
# the processor's cache or registers; written in Python, each block costs several separate
# operations, each of them reading and writing its tensors in memory.
#
# ## Two ways to make the cache cheaper
#
# **A preallocated cache: less copying, more memory.** `decoder_layer_step` grows its
# cache with `torch.cat`, which allocates a new tensor at every step and copies all $t$
# positions into it: over $L$ steps, $1 + 2 + \dots + L = L(L + 1)/2$ positions copied per
# tensor and layer, traffic that grows like $L^2$ for a cache that grows like $L$. Serving
# code allocates the cache once, `[B, h, max_len, d_k]`, writes step $t$ into its row in
# place (`cache_k[:, :, t] = k_new`), and attends over the view `cache_k[:, :, : t + 1]`:
# one position copied per step, and fixed shapes that a CUDA graph can replay. This does
# not make the cache smaller: it reserves `max_len` positions from the first step on, more
# than a short answer ever uses. (Paged caches, as in vLLM, reserve memory in small blocks
# as a sequence grows, to waste less of it.)
#
# **Fewer key and value heads: a smaller cache.** The cache holds keys and values for every head:
# $2 N B t D$ numbers, $D = h\, d_k$. *Multi-query attention* (MQA) keeps $h$ query heads
# but only one key head and one value head, shared by all of them: $k$ and $v$ are
# `[B, 1, t, d_k]`, and broadcasting in $q k^\top$ gives every query head the same keys.
# *Grouped-query attention* (GQA) sits in between: $g$ groups of $h / g$ query heads, each
# group sharing one key head and one value head, `[B, g, t, d_k]`. The cache shrinks by
# the factor $h$ (MQA) or $h / g$ (GQA), and so do $W_K$ and $W_V$, from $D \times D$ to
# $D \times g\, d_k$. Unlike the cache itself, this changes the model: it has to be trained
# (or converted and fine-tuned) that way. The next cell computes the cache's size for the
# paper's base model ($N = 6$, $D = 512$, $h = 8$, float32), and runs both with lesson 03's
# attention, whose `@` broadcasts the shared heads.

# %% experiment
n_layers_base, d_model_base, n_heads_base, number_bytes = 6, 512, 8, 4
d_k_base = d_model_base // n_heads_base
cache_kinds = (("multi-head, 8 key heads", 8), ("grouped-query, g = 2", 2), ("multi-query, 1 key head", 1))
for name, kv_heads in cache_kinds:
    per_token = 2 * n_layers_base * kv_heads * d_k_base * number_bytes  # keys and values, every layer
    print(
        f"{name:24}: {per_token / 2**10:5.1f} KiB per token and sequence, "
        f"{per_token * 128 * 512 / 2**20:7.1f} MiB for 128 sequences of 512 tokens"
    )
steps = 512
print(f"torch.cat over {steps} steps copies {steps * (steps + 1) // 2:,} positions per tensor and layer")

q_heads = torch.randn(2, 8, 5, 64)  # [B, h, T, d_k]
k_one, v_one = torch.randn(2, 1, 5, 64), torch.randn(2, 1, 5, 64)  # MQA: [B, 1, T, d_k]
out_mqa, _ = scaled_dot_product_attention(q_heads, k_one, v_one)
k_two, v_two = torch.randn(2, 2, 5, 64), torch.randn(2, 2, 5, 64)  # GQA, g = 2: [B, g, T, d_k]
grouped = q_heads.view(2, 2, 4, 5, 64)  # [B, g, h / g, T, d_k]: heads 0-3 in group 0, 4-7 in group 1
out_gqa, _ = scaled_dot_product_attention(grouped, k_two[:, :, None], v_two[:, :, None])
print("MQA out", tuple(out_mqa.shape), "| GQA out", tuple(out_gqa.view(2, 8, 5, 64).shape))

# %% [markdown]
# ## Summary
#
# - With a causal mask, the states of earlier positions never change, so a decoder only
#   needs each layer's **keys and values** of the past: the key/value cache, `[B, h, t, d_k]`
#   per layer, growing by one position per step.
# - A cached step computes one query, appends one key and one value, and attends over all
#   $t$ cached positions **without a mask**; cross-attention's keys and values come from
#   the memory, computed once per layer.
# - The newest token needs the positional encoding of **its own** position, `pe[t]`.
# - Cached decoding gives the same tokens as full recomputation (up to rounding, which
#   could flip only a near-tie); its time grows about linearly with the output length,
#   while full recomputation does $O(L^2 D^2 + L^3 D)$ work. At small sizes, fixed
#   per-step costs, not arithmetic, decide how much faster it is (on a GPU even more than
#   on a CPU); `torch.compile` and CUDA graphs remove much of them. It costs $2 N B t D$
#   numbers of memory.
# - Attention's score matrix costs $O(n^2)$ time and, stored, $O(n^2)$ memory:
#   $4(3nD + n^2 h)$ bytes in float32. Fused kernels such as
#   `F.scaled_dot_product_attention` keep $O(n)$ memory but do the same $O(n^2 D)$ work.
#   On a CPU, much of lesson 03's extra time at large $n$ is the operating system mapping
#   fresh pages for its large tensors at every call (page faults), the rest memory traffic.
# - The **online softmax** computes attention block by block: a running maximum, sum and
#   output per query row, rescaled by $e^{m - m'}$ when the maximum grows, divided once at
#   the end. It never holds more than one block of scores, and the maximum keeps every
#   exponent at most 0, so nothing overflows.
# - A **preallocated cache** copies one position per step instead of the whole cache, and
#   reserves memory for `max_len` positions from the start; **multi-query** and
#   **grouped-query attention** share key and value heads, so the cache holds $h$ or
#   $h / g$ times fewer numbers.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | key/value cache (KV cache) | 键值缓存（KV 缓存） |
# | incremental decoding | 增量解码 |
# | full recomputation | 完全重算 |
# | autoregressive decoding | 自回归解码 |
# | causal mask | 因果掩码 |
# | cross-attention | 交叉注意力 |
# | encoder memory | 编码器记忆 |
# | post-LN / pre-LN | 后置层归一化 / 前置层归一化 |
# | positional encoding | 位置编码 |
# | time complexity | 时间复杂度 |
# | memory footprint | 内存占用 |
# | log-log plot / exponent fit | 双对数图 / 指数拟合 |
# | least squares | 最小二乘 |
# | fused kernel | 融合算子 |
# | flash attention | FlashAttention（一般不译） |
# | online softmax | 在线 softmax |
# | saved tensors (for backward) | 保存的张量（用于反向传播） |
# | memory bandwidth | 内存带宽 |
# | floating-point operations (FLOPs) | 浮点运算次数 |
# | blockwise attention | 分块注意力 |
# | running maximum / running sum | 运行最大值 / 运行和 |
# | rescaling | 重新缩放 |
# | overflow | 溢出 |
# | log-sum-exp | 对数求和指数（log-sum-exp） |
# | preallocated cache | 预分配缓存 |
# | page fault | 缺页异常 |
# | memory allocator | 内存分配器 |
# | kernel launch overhead | 内核启动开销 |
# | CUDA graph | CUDA 图 |
# | tiling (over queries and keys) | 分块（按查询和键） |
# | multi-query attention (MQA) | 多查询注意力 |
# | grouped-query attention (GQA) | 分组查询注意力 |
