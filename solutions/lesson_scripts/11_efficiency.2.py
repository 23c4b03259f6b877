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
torch.manual_seed(2)
timed = Transformer(10, 10, d_model=64, n_heads=4, d_ff=256, n_layers=2, dropout=0.0).eval()
timed_src = torch.randint(3, 10, (4, 16))  # [B, S]
lengths = [32, 64, 128, 256]
without_cache, with_cache = measures.decoding_seconds(
    greedy_decode, cached_greedy_decode, timed, timed_src, lengths
)
p_slow, p_fast = (measures.fitted_exponent(lengths, seconds) for seconds in (without_cache, with_cache))
print(f"fitted exponents: without cache L^{p_slow:.2f}, with cache L^{p_fast:.2f}")
at_512 = without_cache[-1] * 2**p_slow / (with_cache[-1] * 2**p_fast)
print(f"extrapolated to L=512: about {at_512:.0f}x faster (tests/benchmarks/bench_kv_cache.py measures it)")
measures.plot_decoding_seconds(lengths, without_cache, with_cache)

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
print(
    f"{'n':>6} {'formula 4(3nD + n^2 h)':>24} {'lesson 03 keeps':>16} "
    f"{'F.scaled_dot_product_attention keeps':>38}"
)
for n in (128, 256, 512, 1024, 2048):
    formula = 4 * (3 * n * 128 + n * n * 4)
    ours = measures.saved_bytes(measures.course_attention, n)
    fused = measures.saved_bytes(F.scaled_dot_product_attention, n)
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
sizes = [256, 512, 1024, 2048]
ours_seconds, fused_seconds = measures.attention_seconds(sizes)
print(
    f"fitted exponents: lesson 03 n^{measures.fitted_exponent(sizes, ours_seconds):.2f}, "
    f"F.scaled_dot_product_attention n^{measures.fitted_exponent(sizes, fused_seconds):.2f}"
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
print(f"a [1, 4, 2048, 2048] float32 tensor fills {4 * 4 * 2048 * 2048 // 4096:,} pages of 4 KiB")
local = {}
for n in (1024, 2048):
    q, k, v = (torch.randn(1, 4, n, 32) for _ in range(3))  # [B, h, n, d_k]
    buffers = (torch.empty(1, 4, n, n), torch.empty(1, 4, n, 32))
    with torch.no_grad():
        for name, fn in (
            ("lesson 03", measures.course_attention),
            ("preallocated buffers", measures.preallocated(buffers)),
            ("F.scaled_dot_product_attention", F.scaled_dot_product_attention),
        ):
            faults, seconds = measures.faults_and_seconds(fn, q, k, v)
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
# | the block's slice of the mask | `mask[..., start:end]`, broadcasting against `[..., T_q, b]`; a last axis of size 1 is used whole |
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
#   scores; cut each block's part out of its last axis with `mask[..., start:end]`, unless
#   that axis has size 1: such a mask broadcasts over every key, and each block uses it whole;
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
memory_sizes, blockwise_counts, full_counts = [256, 512, 1024, 2048], [], []
for n in memory_sizes:
    x = torch.randn(1, 4, n, 32)  # q, k and v: [B, h, n, d_k]
    blockwise_counts.append(measures.largest_count(blockwise_attention, x, x, x, None, 64))
    full_counts.append(measures.largest_count(measures.course_attention, x, x, x))
    print(f"n={n:5d}: blockwise {blockwise_counts[-1]:>9,} numbers, lesson 03 {full_counts[-1]:>10,} numbers")
print(
    f"fitted exponents: blockwise n^{measures.fitted_exponent(memory_sizes, blockwise_counts):.2f}, "
    f"lesson 03 n^{measures.fitted_exponent(memory_sizes, full_counts):.2f}"
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
