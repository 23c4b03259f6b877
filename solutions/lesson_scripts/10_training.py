# %% [markdown]
# # Lesson 10: Train your Transformer
#
# Nine lessons built every part of the Transformer; nothing has learned anything yet. In
# this lesson the model you built learns a task, from random weights to a perfect score on
# sequences it has never seen, in well under a minute on a laptop's CPU.
#
# The task is **reversing** a sequence of letters: given `c a f e b`, answer
# `b e f a c`. It is small enough to train in seconds, yet it needs everything an
# encoder-decoder has: the answer's first letter is the source's *last* one, so output
# position $i$ must find source position $n - 1 - i$ through cross-attention, for lengths
# $n$ that change from one example to the next, and the decoder must know when to stop.
#
# Training needs six small pieces, which you write first:
#
# 1. `make_batch`: pad a list of sequences into tensors, shift the target for teacher
#    forcing, and build the masks of lesson 04;
# 2. `sequence_loss`: the cross-entropy that ignores padding, with optional label smoothing;
# 3. `rate`: the paper's learning-rate schedule, warm-up then decay;
# 4. `train_step`: one step of gradient descent;
# 5. `exact_match`: which greedy decodings are exactly right;
# 6. `train_loop`: the training loop, one step per batch, with optional gradient clipping.
#
# Then you train, watch the loss and the held-out accuracy, look inside the trained model's
# attention, and run two controlled experiments: post-LN against pre-LN, and sinusoidal
# against learned positions.
#
# **Your own model.** The capstone trains the Transformer *you* wrote: it takes each part
# from your saved notebooks of lessons 01 to 09 and uses it when it passes its lesson's
# checks. A part that is missing or still fails is replaced by the reference, and a table
# says which is which. (While your notebook is graded, the reference parts are used, so
# lesson 10's grade depends only on lesson 10.)

# %% install
import math
import time

import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from autograder import training_runs as runs  # the experiments' machinery: runs, timings, figures
from autograder.capstone import own_parts, training_parts
from autograder.checks import train_step as step_checks  # train_step's and train_loop's checks
from autograder.checks import training as checks
from autograder.checks.device import LESSON_DEVICE, describe_devices
from solutions.capstone import END, PAD, START, TASKS, VOCAB, Config, History, held_out_set, training_pairs
from solutions.masking import decoder_mask, padding_mask
from solutions.output_layer import Transformer

torch.manual_seed(0)
torch.set_num_threads(1)  # one CPU thread: this lesson's operations are too small to share out
print(describe_devices(LESSON_DEVICE))

# %% [markdown]
# ## The task and its data
#
# The vocabulary has 13 tokens: `<pad>` = 0, `<s>` = 1 (start), `</s>` = 2 (end) and ten
# letters `a` to `j`. A source is 4 to 10 random letters; its target is the same letters
# in reverse order (`copy` and `sort` are the same kind of task, for you to try).
#
# Two sets of examples, kept apart:
#
# - a **held-out set** of 1,000 distinct sources, drawn once with a fixed seed;
# - **training batches**, drawn fresh at every step, from which every held-out source is
#   removed. The model never trains on an example it is tested on, so a perfect held-out
#   score means it learned the rule, not the examples.
#
# There are $\sum_{n=4}^{10} 10^n \approx 1.1 \times 10^{10}$ possible sources. Training
# draws 64 fresh ones at every step. Seeds 0, 1 and 2 stopped after 375 to 450 steps
# when they were measured, having seen about 24,000 to 29,000 sources (the training run
# below prints its own count), and even the cap of 1,500 steps allows only 96,000, a
# fraction of $8.6 \times 10^{-6}$ of them all (the cell prints these counts). Memorising
# is not an option.

# %%
held_sources, held_targets = held_out_set("reverse", 1000, (4, 10), seed=10_000)


def spell(tokens) -> str:
    return " ".join(VOCAB[t] for t in tokens)


for source, target in zip(held_sources[:3], held_targets[:3], strict=True):
    print(f"{spell(source):>24}  ->  {spell(target)}")
print("other tasks on the first source:", {task: spell(fn(held_sources[0])) for task, fn in TASKS.items()})
possible = sum(10**n for n in range(4, 11))
defaults = Config()
for steps in (375, 450, defaults.max_steps):
    seen = steps * defaults.batch_size
    print(f"{steps:5d} steps of {defaults.batch_size} sources: {seen:7,} seen, "
          f"{seen / possible:.1e} of the {possible:.2e} possible")  # fmt: skip

# %% [markdown]
# ## Batches: padding, shifting, masks
#
# A batch is a rectangle, so sequences of different lengths are **padded** with `<pad>` up
# to the longest. The decoder is trained with **teacher forcing** (lesson 08): it reads
# the right answer shifted by one position and predicts each next token, at every position
# at once. For a target $y_1 \dots y_n$:
#
# | position | 0 | 1 | … | $n-1$ | $n$ | after |
# |---|---|---|---|---|---|---|
# | `tgt_in` (what the decoder reads) | `<s>` | $y_1$ | … | $y_{n-1}$ | $y_n$ | `<pad>` |
# | `tgt_out` (what it must predict) | $y_1$ | $y_2$ | … | $y_n$ | `</s>` | `<pad>` |
#
# Position $t$ reads `<s>` $y_1 \dots y_t$ (the causal mask hides the rest) and must
# predict $y_{t+1}$; the last real position must predict `</s>`, which is how the model
# learns to stop. Both rows have $T = n_\text{max} + 1$ columns.
#
# | key | shape | what it holds |
# |---|---|---|
# | `src` | `Long[B, S]` | the sources, padded with `pad_id` to the longest, $S$ |
# | `src_mask` | `Bool[B, 1, 1, S]` | `padding_mask(src, pad_id)`: True at real tokens |
# | `tgt_in` | `Long[B, T]` | `<s>` and the target, padded |
# | `tgt_out` | `Long[B, T]` | the target and `</s>`, padded |
# | `tgt_mask` | `Bool[B, 1, T, T]` | `decoder_mask(tgt_in, pad_id)`: padding and causal |
#
# ## Exercise: `make_batch`
#
# Return the dict above from `sources` and `targets`, two lists of $B$ lists of token ids.
# `padding_mask` and `decoder_mask` of lesson 04 are imported. Keep the tokens
# `torch.long`; the training loop moves the batch to the device.

# %% exercise solutions.training.make_batch

# %% [markdown]
# ## Check your work
#
# Each check prints a ✓ line when it passes. When it fails, its message says what it
# expected and what it got, and if your output matches a common mistake, it names it.

# %% test test_make_batch_shapes points=1
checks.check_make_batch_shapes(make_batch)

# %% test test_make_batch_values points=2
checks.check_make_batch_values(make_batch)
### BEGIN HIDDEN TESTS
from autograder.hidden.training import hidden_make_batch

hidden_make_batch(make_batch)
### END HIDDEN TESTS

# %% [markdown]
# ## The loss: cross-entropy over the real tokens
#
# For each target position the model gives log-probabilities $\log p_{b,t} \in
# \mathbb{R}^V$ (the `Generator` of lesson 09). The loss of a position whose right token is
# $y = y_{b,t}$ is the negative log-likelihood $-\log p_{b,t,y}$, and the loss of a batch
# is its mean over the positions that hold a real token:
#
# $$\mathcal{L} = \frac{1}{N} \sum_{(b,t)\,:\, y_{b,t} \ne \text{pad}} -\log p_{b,t,y_{b,t}}, \qquad N = \#\{(b,t) : y_{b,t} \ne \text{pad}\}.$$
#
# Padding positions are left out of the sum *and* of the count: otherwise a batch with a
# long sequence would teach the model to predict `<pad>` after every short one, and the
# loss would depend on how the batch happened to be padded.
#
# ### Label smoothing
#
# The paper trains with **label smoothing** $\varepsilon = 0.1$ (section 5.4): the target
# distribution is not the one-hot vector of $y$, but
#
# $$q_i = (1 - \varepsilon)\,[i = y] + \frac{\varepsilon}{V},$$
#
# and the loss of a position is the cross-entropy $-\sum_i q_i \log p_i$:
#
# $$-\sum_i q_i \log p_i = (1 - \varepsilon)\,(-\log p_y) + \varepsilon \cdot \frac{1}{V} \sum_{i=1}^{V} (-\log p_i).$$
#
# The second term punishes a distribution that gives some tokens almost no probability, so
# the logits cannot grow without bound to make $p_y$ exactly 1: the best the model can do
# is $p = q$. The paper reports that this hurts perplexity (the model is less sure) but
# improves BLEU. This convention, $\varepsilon / V$ on every token including the right
# one, is PyTorch's: `F.cross_entropy(..., label_smoothing=ε)`. Others exist: The
# Annotated Transformer spreads $\varepsilon$ over the $V - 2$ tokens that are neither
# the right one nor `<pad>`. All of them differ only in where the small mass goes.
#
# | tensor | shape |
# |---|---|
# | `log_probs` | `[B, T, V]` |
# | `target` (`tgt_out`) | `Long[B, T]` |
# | the loss | a scalar tensor `[]` |
#
# ## Exercise: `sequence_loss`
#
# Compute $\mathcal{L}$ with smoothing $\varepsilon$ = `smoothing` (0 gives the plain
# negative log-likelihood). `log_probs.gather(-1, target.unsqueeze(-1))` picks
# $\log p_{b,t,y_{b,t}}$; a boolean mask `target != pad_id` picks the real positions. The
# result must equal `F.cross_entropy(log_probs.reshape(-1, V), target.reshape(-1),
# ignore_index=pad_id, label_smoothing=smoothing)`, which the checks use as one of their
# oracles; write it yourself here (the grader flags a call of `F.cross_entropy` or
# `F.nll_loss` in this cell to your instructor, as the contract lists).

# %% exercise solutions.training.sequence_loss

# %% test test_sequence_loss_values points=2
checks.check_sequence_loss_values(sequence_loss)
### BEGIN HIDDEN TESTS
from autograder.hidden.training import hidden_sequence_loss

hidden_sequence_loss(sequence_loss, smoothing=False)
### END HIDDEN TESTS

# %% test test_sequence_loss_smoothing points=1
checks.check_sequence_loss_smoothing(sequence_loss)
### BEGIN HIDDEN TESTS
from autograder.hidden.training import hidden_sequence_loss

hidden_sequence_loss(sequence_loss, smoothing=True)
### END HIDDEN TESTS

# %% [markdown]
# With smoothing, even a perfect prediction has a positive loss, and the loss is lowest
# at $p = q$, not at the one-hot vector. The cell evaluates one position ($V = 13$, the
# right token is 5) for three predictions: $q$ itself, a confident one and a one-hot-like
# one.

# %% experiment
five = torch.tensor([[5]])  # the target [B, T] = [1, 1]: token 5
epsilon = 0.1
smoothed = torch.full((13,), epsilon / 13)
smoothed[5] += 1 - epsilon
for label, p in (
    ("p = q (the smoothed target)", smoothed),
    ("p(right) = 0.99", torch.full((13,), 0.01 / 12).index_fill(0, torch.tensor([5]), 0.99)),
    ("p(right) = 0.99999", torch.full((13,), 1e-5 / 12).index_fill(0, torch.tensor([5]), 1 - 1e-5)),
):
    log_p = p.log()[None, None]  # [1, 1, V]
    plain = sequence_loss(log_p, five, PAD).item()
    with_smoothing = sequence_loss(log_p, five, PAD, epsilon).item()
    print(f"{label:>28}: loss {plain:.3f} without smoothing, {with_smoothing:.3f} with ε = {epsilon}")

# %% [markdown]
# Without smoothing, the more confident the better, without limit. With it, the loss
# rises again when the model becomes too sure: the other tokens' $\varepsilon / V$ share
# costs $-\frac{\varepsilon}{V} \log p_i$ each, which grows as $p_i \to 0$.
#
# ## The learning-rate schedule
#
# The paper trains with Adam ($\beta_1 = 0.9$, $\beta_2 = 0.98$, $\epsilon = 10^{-9}$)
# and a learning rate that changes at every step $s$ (section 5.3):
#
# $$\text{lr}(s) = \text{factor} \cdot d_\text{model}^{-0.5} \cdot \min\left(s^{-0.5},\; s \cdot w^{-1.5}\right).$$
#
# For the first $w$ **warm-up** steps the second argument is the smaller: the rate grows
# linearly, $s \cdot d^{-0.5} w^{-1.5}$. After step $w$ it decays like $1/\sqrt{s}$. The
# two meet at $s = w$, the peak, $\text{factor} \cdot d^{-0.5} w^{-0.5}$. The paper uses
# $w = 4000$ and factor 1 with $D = 512$: a peak of about $7 \times 10^{-4}$.
#
# Why warm up at all? At the start, Adam divides each gradient by a running estimate of
# its size made from very few steps, so its first updates are large and noisy; and in a
# post-LN Transformer the gradients of the last layers are largest at initialisation
# (Xiong et al., 2020). Small steps at first keep these from throwing the weights into a
# bad region.
#
# Why $d^{-0.5}$? The paper gives no reason; it is a choice, and the factor and the
# warm-up are tuned per model anyway. What is known points the same way, more steeply.
# Adam divides each gradient by a running estimate of its size, so whatever the
# gradient's scale, each weight moves by about the learning rate per step. A unit that
# sums $D$ inputs, whose weights all move in a correlated direction, then changes by
# about $D$ times that: for every width to change its units by the same amount, the rate
# of such a matrix must fall like $1/D$. That is the rule of μP (Yang et al., 2021,
# "Tensor Programs V"), which scales Adam's rate for hidden matrices as $1/D$ so that a
# rate tuned on a small model carries over to a wide one; $d^{-0.5}$ falls more slowly.
#
# ## Exercise: `rate`
#
# Return $\text{lr}(s)$ for `step` $= s \ge 1$. Steps count from 1 (at $s = 0$ the
# formula divides by zero): raise a `ValueError` for a step below 1. The training loop
# hands it to PyTorch's `LambdaLR`, which counts the steps already taken from 0, as
# `rate(done + 1, ...)`.

# %% exercise solutions.training.rate

# %% test test_rate points=1
checks.check_rate(rate)
### BEGIN HIDDEN TESTS
from autograder.hidden.training import hidden_rate

hidden_rate(rate)
### END HIDDEN TESTS

# %% [markdown]
# The schedule of the paper, and the one this lesson trains with ($D = 32$, a warm-up of
# 100 steps, factor 2): the same shape, squeezed into the few hundred steps a small task
# needs, and a peak fifty times higher. A tiny model on a tiny task takes, and needs, much
# larger steps; the price is shown below.

# %% experiment
setup = Config()
runs.plot_schedules(rate, setup)

# %% [markdown]
# ## One training step
#
# A step of gradient descent on one batch, in this order:
#
# 1. `model.train()`: training mode (dropout on, if the model has any);
# 2. the forward pass with teacher forcing: `model(src, tgt_in, src_mask, tgt_mask)` gives
#    states `[B, T, D]`, and `model.generator(...)` log-probabilities `[B, T, V]`;
# 3. `sequence_loss` against `tgt_out`;
# 4. `optimizer.zero_grad()`: PyTorch **adds** each new gradient to `.grad`, so the last
#    step's gradients must be cleared before `backward`;
# 5. `loss.backward()`, then `optimizer.step()`;
# 6. `scheduler.step()` when a scheduler is given: after the optimizer, so that step $s$
#    uses $\text{lr}(s)$ and the next one $\text{lr}(s + 1)$.
#
# Return `loss.item()`, a Python float. The caller logs and plots it, which needs a
# number, not a tensor. And a tensor that still belongs to autograd's graph invites a
# quiet mistake: `total += loss` over many steps does not add numbers, it builds a new
# graph node per step that links to all the earlier ones, a graph that grows for as long
# as training runs. (The large part of each step's graph, the tensors saved for the
# backward pass, `backward()` has already freed.)
#
# ## Exercise: `train_step`
#
# Write the step. The check builds a small `Transformer` and a plain SGD optimizer, and
# compares the weights after your step with the weights after the same step taken by
# PyTorch's own modules.

# %% exercise solutions.training.train_step

# %% test test_train_step points=2
step_checks.check_train_step(train_step, Transformer, torch.optim)
### BEGIN HIDDEN TESTS
from autograder.hidden.train_step import hidden_train_step

hidden_train_step(train_step, Transformer, torch.optim)
### END HIDDEN TESTS

# %% [markdown]
# ## Measuring success: exact match
#
# The loss says how much probability the model gives to the right tokens under teacher
# forcing. What we want is that the model, left alone, *produces* the right answer: greedy
# decoding (lesson 09) from `<s>` until `</s>`, every token right, and nothing extra. That
# is **exact match**: a row counts only if it is entirely right.
#
# `greedy_decode` returns `Long[B, L]`: `<s>`, the answer, `</s>`, then more `</s>` for
# rows that finished early (or no `</s>` at all for a row that never finished). The target
# is `tgt_out`: the answer, `</s>`, then padding. A row is right when the tokens after
# `<s>`, up to and including its first `</s>`, equal the target up to and including its
# `</s>`.
#
# | tensor | shape |
# |---|---|
# | `predicted` | `Long[B, L]` |
# | `target` | `Long[B, T]` |
# | the result | `Bool[B]` |
#
# ## Exercise: `exact_match`
#
# Return a `Bool[B]` tensor on `predicted`'s device. A loop over the rows with
# `.tolist()` is fine (the held-out set has 1,000 rows); a vectorised version is a nice
# extra. `exact_match(...).float().mean()` is the accuracy.

# %% exercise solutions.training.exact_match

# %% test test_exact_match points=2
checks.check_exact_match(exact_match)
### BEGIN HIDDEN TESTS
from autograder.hidden.training import hidden_exact_match

hidden_exact_match(exact_match)
### END HIDDEN TESTS

# %% [markdown]
# ## The training loop
#
# Training is `train_step` over and over, one batch after another. The loop has one job
# of its own besides: an option that `train_step` deliberately lacks, **gradient
# clipping**. When `clip` is a number $c$, the gradients of *all* the parameters, taken
# together as one long vector $g$, are scaled down whenever their norm exceeds $c$:
#
# $$g \leftarrow g \cdot \min\left(1, \frac{c}{\lVert g \rVert}\right), \qquad \lVert g \rVert = \sqrt{\textstyle\sum_{p} \sum_{i} g_{p,i}^2},$$
#
# the sum running over every parameter $p$ and every entry $i$ of it. The direction of the
# step is kept; only its length is bounded. This is `nn.utils.clip_grad_norm_(model.parameters(), c)`
# (which adds $10^{-6}$ to the norm in the denominator). It must run after `loss.backward()`,
# which computes $g$, and before `optimizer.step()`, which uses it. Clipping each entry to
# $[-c, c]$ separately (`clip_grad_value_`) is a different operation: it changes the
# direction of $g$.
#
# | argument | what it is |
# |---|---|
# | `batches` | an iterable of `make_batch` dicts, each on the model's device; maybe a generator, with no length |
# | `optimizer`, `scheduler` | as for `train_step`; `scheduler` may be `None` |
# | `clip` | `None` (no clipping) or the largest norm $c$ of all the gradients together |
# | the result | a list with the loss of every step, Python floats, in order |
#
# ## Exercise: `train_loop`
#
# For each batch in turn take the steps of `train_step`, adding the clipping between
# `loss.backward()` and `optimizer.step()` when `clip` is not `None`, and collect each
# step's loss with `.item()`. (Calling your `train_step` when `clip` is `None` is fine.) The
# checks run your loop for three batches with SGD and a scheduler, without and then with a
# clip, and compare every step's loss, the final weights and the learning rate with the
# same loop run by PyTorch's own modules.

# %% exercise solutions.training.train_loop

# %% test test_train_loop_steps points=2
step_checks.check_train_loop(train_loop, Transformer, torch.optim)
### BEGIN HIDDEN TESTS
from autograder.hidden.train_step import hidden_train_loop

hidden_train_loop(train_loop, Transformer, torch.optim, clip=False)
### END HIDDEN TESTS

# %% test test_train_loop_clip points=1
step_checks.check_train_loop_clip(train_loop, Transformer, torch.optim)
### BEGIN HIDDEN TESTS
from autograder.hidden.train_step import hidden_train_loop

hidden_train_loop(train_loop, Transformer, torch.optim, clip=True)
### END HIDDEN TESTS
