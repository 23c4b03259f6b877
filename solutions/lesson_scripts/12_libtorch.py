# %% [markdown]
# # Lesson 12 (optional): The same modules in C++, with LibTorch
#
# Everything you have built so far runs in Python, but almost none of the arithmetic does:
# `x @ w`, `softmax` and `masked_fill` are calls into ATen, PyTorch's C++ tensor library. Python
# decides **which** operation runs next; C++ (and on a GPU, CUDA) does the work. LibTorch is the
# same library seen from C++: `torch::Tensor`, `torch::nn::Linear`, `torch::nn::Module`, with
# names that follow the Python ones closely.
#
# In this appendix you write three modules again, in C++: the embedding of lesson 01, the
# feed-forward network of lesson 07 and multi-head attention of lesson 05. The notebook compiles
# each one with `torch.utils.cpp_extension.load_inline` and hands it back to Python as an ordinary
# `nn.Module`, so the checks load the reference's weights into it by name and compare its output
# with PyTorch's own modules, as in the earlier lessons. Then you measure what C++ changes, and
# what it does not.
#
# **You will write:** `EmbeddingImpl`, `PositionwiseFeedForwardImpl` and `MultiHeadAttentionImpl`
# in C++, which become `CppEmbedding`, `CppPositionwiseFeedForward` and `CppMultiHeadAttention`
# in Python.
#
# **You need** a C++ compiler, `ninja` and Python's headers (`g++`, `ninja-build` and `python3-dev`
# on Debian or Ubuntu). The first code cell says what is missing, if anything. Each compile
# takes tens of seconds; a source that has not changed is not compiled again.
#
# **On Colab** you need the same three: `g++` and Python's headers come with Colab's runtime as a
# rule, and `ninja` with the course's install (its Python package); if one is missing, the first
# code cell names it and the command that installs it (`!apt-get install -y ...`). Each module's
# first build compiles LibTorch's large headers on the runtime's two CPUs: expect tens of
# seconds, up to about a minute, per exercise cell, and a fraction of a second when a cell runs
# again unchanged. A fresh runtime starts with an empty cache, so every module compiles again.

# %% install
import matplotlib.pyplot as plt
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from autograder.checks import libtorch as checks
from autograder.checks.device import describe_devices
from autograder.libtorch import compile_module, explain_missing, missing_tools
from autograder.timing import median_seconds
from solutions.embedding import Embedding  # lessons 01, 07 and 05: the Python twins
from solutions.feed_forward import PositionwiseFeedForward
from solutions.multi_head import MultiHeadAttention

torch.manual_seed(0)
print(describe_devices())
print(explain_missing(missing_tools()) if missing_tools() else "C++ compiler, ninja and Python.h: found")

# %% [markdown]
# ## From Python to C++
#
# A LibTorch module is a C++ `struct` that derives from `torch::nn::Module`. What Python does by
# assigning an attribute, C++ does by **registering**: `register_module("w_q", torch::nn::Linear(D, D))`
# gives the submodule its name, so that its parameters appear as `w_q.weight` and `w_q.bias`, the
# names the Python reference's weights load by. The struct is called `MultiHeadAttentionImpl`;
# `TORCH_MODULE(MultiHeadAttention)` would add the handle type `MultiHeadAttention` that C++ code
# passes around (a shared pointer, so that `w_q(x)` calls `w_q->forward(x)`), exactly what
# `torch::nn::Linear` is to `torch::nn::LinearImpl`.
#
# Why the `{nullptr}` in `torch::nn::Linear w_q{nullptr};`? A handle such as `torch::nn::Linear`
# has no constructor without arguments: `torch::nn::Linear w_q;` would have to build a layer
# without knowing its size. The C++ compiler says so, at length, in the first error nearly every
# LibTorch learner meets, something like *no matching function for call to
# 'torch::nn::Linear::Linear()'*, pointing at your struct's constructor rather than at the
# member. `{nullptr}` makes an empty handle, and the constructor fills it with
# `register_module`. (Calling an empty handle fails at run time, with a message that names it.)
#
# Where Python passes `dtype=` and `device=` to a factory such as `torch.zeros`, C++ passes one
# `torch::TensorOptions`, built with chained calls (`.dtype(...)`, `.device(...)`,
# `.requires_grad(...)`); `x.options()` gives the options of an existing tensor `x`, the C++
# way to make a new tensor "like" it, on its device.
#
# | Python | C++ (LibTorch) |
# |---|---|
# | `class M(nn.Module)` | `struct MImpl : torch::nn::Module { ... };` |
# | `self.w_q = nn.Linear(D, D)` | `w_q = register_module("w_q", torch::nn::Linear(D, D));` with a member `torch::nn::Linear w_q{nullptr};` |
# | `torch.zeros(B, T, dtype=torch.long, device=x.device)` | `torch::zeros({B, T}, torch::TensorOptions().dtype(torch::kLong).device(x.device()))`, or `x.options().dtype(torch::kLong)` |
# | `x.view(B, T, h, d_k).transpose(1, 2)` | `x.view({B, T, h, d_k}).transpose(1, 2)` (sizes go in braces) |
# | `q @ k.transpose(-2, -1)` | `torch::matmul(q, k.transpose(-2, -1))` |
# | `math.sqrt(d_k)` | `std::sqrt(static_cast<double>(d_k))` |
# | `float("-inf")` | `-std::numeric_limits<double>::infinity()` |
# | `mask=None`, `if mask is not None:` | `std::optional<torch::Tensor> mask`, `if (mask)`, then `*mask` or `mask->...` |
# | `~mask` | `mask->logical_not()` |
# | `torch.softmax(s, dim=-1)` | `torch::softmax(s, -1)` |
# | `raise ValueError(...)` | `TORCH_CHECK_VALUE(condition, "message", values...)` (Python sees a `ValueError`) |
# | `self.training` | `is_training()` |
#
# ## How your C++ reaches Python
#
# Each exercise cell calls `compile_module(name, source)`. It puts your struct into one C++ file
# after `#include <torch/extension.h>`, adds the binding code that tells Python the constructor's
# and `forward`'s arguments (the contract's names: `vocab_size`, `d_model`, `query`, `mask`, ...),
# and compiles it into a shared library that Python imports. The result is a Python class whose
# objects are real `nn.Module`s: their submodules `lut`, `linear1`, `w_q`, ... are `nn.Embedding`
# and `nn.Linear` objects that hold the **same tensors** as your C++ members, so `load_state_dict`,
# `.double()` and `.to(device)` change what your C++ computes with.
#
# The compiled library is kept in a folder named by a hash of the complete source: running a cell
# again without a change, or in a new kernel, loads it in a fraction of a second. A compile error
# stops the cell with the compiler's first error and its line, counted from the line of `r"""`.
# Until you write a body, it holds the two stub lines; the course reads them as C++ that raises
# `NotImplementedError`, so the cell compiles and the checks say "not implemented yet".

# %% [markdown]
# ## Exercise 1: `EmbeddingImpl`
#
# Lesson 01's embedding: a table `lut` of `vocab_size` rows of `d_model` numbers, and a forward
# that looks up each token's row and multiplies it by $\sqrt{d_{model}}$. `tokens` is
# `Long[B, T]`, the result `[B, T, D]`.
#
# - Register the table under the name `lut`, as a `torch::nn::Embedding`, so that the reference's
#   weights load into it.
# - The scale is yours to decide: when to compute it (once, in the constructor, into the member
#   `scale` that the stub declares, or at every call) and in which type. `d_model` is an
#   `int64_t`: think about what `std::sqrt` returns for it, and what integer division would do.
#   The checks compare outputs in float32 and float64, so a scale rounded to float32 on the way
#   shows in float64.

# %% exercise solutions.libtorch.CppEmbedding

# %% test test_CppEmbedding_values points=2
checks.check_cpp_embedding(CppEmbedding)
### BEGIN HIDDEN TESTS
from autograder.hidden.libtorch import hidden_cpp_embedding

hidden_cpp_embedding(CppEmbedding)
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise 2: `PositionwiseFeedForwardImpl`
#
# Lesson 07's network, with ReLU: $\mathrm{FFN}(x) = \max(0, x W_1 + b_1) W_2 + b_2$.
#
# - Register the two layers under the names `linear1` ($D \to d_{ff}$) and `linear2`
#   ($d_{ff} \to D$), and keep the dropout probability for `forward`.
# - `x` is `[B, T, D]`; the result is `[B, T, D]`. Lesson 07 put dropout in one place of this
#   network: decide where, with `torch::relu` and `torch::dropout(input, p, train)`. Its third
#   argument says whether to drop at all; a module knows whether it is training through
#   `is_training()`. The value checks run in eval mode, where dropout must return its input
#   unchanged; one more call after `.train()` checks that it then drops hidden units, in the
#   place lesson 07 chose.

# %% exercise solutions.libtorch.CppPositionwiseFeedForward

# %% test test_CppPositionwiseFeedForward_values points=2
checks.check_cpp_feed_forward(CppPositionwiseFeedForward)
### BEGIN HIDDEN TESTS
from autograder.hidden.libtorch import hidden_cpp_feed_forward

hidden_cpp_feed_forward(CppPositionwiseFeedForward)
### END HIDDEN TESTS

# %% [markdown]
# ## Exercise 3: `MultiHeadAttentionImpl`
#
# Lesson 05's module. In the constructor:
#
# - Check `d_model % n_heads == 0` with `TORCH_CHECK_VALUE`, then keep `h = n_heads`,
#   `d_k = d_model / n_heads` and `dropout_p`.
# - Register `w_q`, `w_k`, `w_v` and `w_o`, each a `torch::nn::Linear(d_model, d_model)`, in that
#   order.
#
# In `forward`, with `query` `[B, T_q, D]`, `key` and `value` `[B, T_k, D]` and an optional `mask`
# (true = may attend, broadcastable to `[B, h, T_q, T_k]`):
#
# 1. Project and split the heads: `[B, T, D]` → `view({B, T, h, d_k})` → `transpose(1, 2)` →
#    `[B, h, T, d_k]`. (A lambda, `auto split = [&](torch::Tensor x) { ... };`, saves writing it
#    three times.)
# 2. Scores `[B, h, T_q, T_k]`: $q k^\top / \sqrt{d_k}$. Where the mask is false, fill them with
#    $-\infty$; after the softmax over the keys, fill the weights there with 0, so that a query
#    that may attend to no key gets zeros, as in lesson 03.
# 3. Keep the weights in the member `attn` (Python reads it as `.attn`), multiply them by `v`,
#    merge the heads back (`transpose(1, 2)`, `contiguous()`, `view({B, T_q, D})`) and return
#    `w_o` of that, `[B, T_q, D]`.

# %% exercise solutions.libtorch.CppMultiHeadAttention

# %% test test_CppMultiHeadAttention_init points=1
checks.check_cpp_mha_init(CppMultiHeadAttention)

# %% test test_CppMultiHeadAttention_cross_attention points=2
checks.check_cpp_mha_cross_attention(CppMultiHeadAttention)
### BEGIN HIDDEN TESTS
from autograder.hidden.libtorch import hidden_cpp_multi_head_attention

hidden_cpp_multi_head_attention(CppMultiHeadAttention)
### END HIDDEN TESTS

# %% test test_CppMultiHeadAttention_mask points=2
checks.check_cpp_mha_mask(CppMultiHeadAttention)

# %% [markdown]
# ## The same kernels underneath
#
# Your C++ module and lesson 05's Python module ask ATen for the same operations. PyTorch can show
# this: a `TorchDispatchMode` sees every ATen operation that reaches PyTorch's dispatcher, whether
# Python or C++ asked for it. The experiment logs both modules on the same input, with the same
# weights.


# %% experiment
def operations(module, *inputs):
    """The names of the ATen operations that ``module(*inputs)`` dispatches, in order."""
    names = []

    class OperationLog(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            names.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), OperationLog():
        module(*inputs)
    return names


python_mha = MultiHeadAttention(16, 2).double().eval()
cpp_mha = CppMultiHeadAttention(16, 2).double().eval()
cpp_mha.load_state_dict(python_mha.state_dict())
x = torch.randn(2, 5, 16, dtype=torch.float64)
mask = torch.rand(2, 1, 5, 5) < 0.7
python_ops, cpp_ops = operations(python_mha, x, x, x, mask), operations(cpp_mha, x, x, x, mask)
print(f"Python MultiHeadAttention: {len(python_ops)} ATen operations")
print(f"C++ MultiHeadAttention:    {len(cpp_ops)} ATen operations")
print("the first projection, Python:", python_ops[:4])
print("the first projection, C++:   ", cpp_ops[:5])
print("operations only Python uses:", sorted(set(python_ops) - set(cpp_ops)))
print("operations only C++ uses:   ", sorted(set(cpp_ops) - set(python_ops)))
with torch.no_grad():
    agree = torch.allclose(cpp_mha(x, x, x, mask), python_mha(x, x, x, mask), rtol=0, atol=1e-12)
print(f"outputs within 1e-12 of each other (float64): {agree}")

# %% [markdown]
# The two lists differ in two places only. The projections: Python's `nn.Linear` on a 3-D input
# folds the bias into one `addmm`, while the C++ frontend's `torch::nn::Linear` computes a `mm` and
# then adds the bias in place (`add_`). And the mask's negation: lesson 05 writes `~mask`
# (`bitwise_not`), the C++ `mask->logical_not()`, which agree on booleans. Everything else, the
# reshapes, the two batched matrix products, the division, the masking and the softmax, is the same
# operations in the same order, and the outputs agree within $10^{-12}$ in float64 (the last line),
# the rounding of a few operations done in a different order.
#
# So C++ changes **who decides** which operation comes next, not **how** an operation computes.
# In Python each step costs the interpreter some microseconds: looking up `self.w_q`, calling
# `forward`, building the Python objects that wrap the arguments and the results. C++ skips
# the interpreter, but not the rest of the way to a kernel: each operation still passes through
# PyTorch's dispatcher, checks its arguments and allocates its result. Whether what C++ saves
# matters depends on how long the operation itself takes.

# %% [markdown]
# ## What the overhead is worth
#
# The experiment times both versions of each module (float32, inference mode, one thread) on a
# small input and on a large one. The times depend on your machine; the pattern should not.


# %% experiment output-varies
def twins(d_model):
    """(name, Python module, C++ module with the same weights, a builder of its inputs)."""
    pairs = (
        ("Embedding", Embedding(1000, d_model), CppEmbedding(1000, d_model)),
        (
            "PositionwiseFeedForward",
            PositionwiseFeedForward(d_model, 4 * d_model),
            CppPositionwiseFeedForward(d_model, 4 * d_model),
        ),
        ("MultiHeadAttention", MultiHeadAttention(d_model, 8), CppMultiHeadAttention(d_model, 8)),
    )
    for name, python, cpp in pairs:
        cpp.load_state_dict(python.state_dict())
        yield name, python.eval(), cpp.eval()


def inputs_for(name, batch, length, d_model):
    if name == "Embedding":
        return (torch.randint(0, 1000, (batch, length)),)
    x = torch.randn(batch, length, d_model)
    return (x,) if name == "PositionwiseFeedForward" else (x, x, x)


def seconds_of_both(python, cpp, args, rounds=5):
    """(Python, C++) seconds per call: timed in turns, so that a busy moment of the machine hits
    both alike, and the least disturbed round of each kept."""
    times = {"python": [], "cpp": []}
    for _ in range(rounds):
        times["python"].append(median_seconds(python, *args, min_run_time=0.02))
        times["cpp"].append(median_seconds(cpp, *args, min_run_time=0.02))
    return min(times["python"]), min(times["cpp"])


with torch.inference_mode():
    for batch, length, d_model in ((1, 8, 64), (8, 256, 512)):
        for name, python, cpp in twins(d_model):
            python_time, cpp_time = seconds_of_both(python, cpp, inputs_for(name, batch, length, d_model))
            print(
                f"[B, T, D] = [{batch}, {length}, {d_model}] {name:<24} Python {python_time * 1e6:8.1f} us"
                f"  C++ {cpp_time * 1e6:8.1f} us  Python / C++ = {python_time / cpp_time:.2f}"
            )

# %% [markdown]
# On the small input, where each operation finishes in a few microseconds, the Python version
# spends a visible share of its time deciding what to do next, and C++ is faster. On the large
# input the matrix products take milliseconds, the same ATen kernels run in both, and the ratio
# comes close to 1 (the run-to-run noise of the timer is then larger than the difference). That
# is the pattern on a quiet machine; on one that other programs keep busy, a ratio can stray far
# from it in either direction, as ratios below 1 in your output would show, and a second run of
# the cell tells noise from pattern.
#
# The embedding's two versions do not do the same work, and the comparison should say so:
# lesson 01's Python module first checks that every token id lies in the vocabulary (a minimum,
# a maximum, and two reads of their values back into Python), which the C++ version leaves out.
# The next cell times that check alone, on both inputs, beside the embedding's gap between
# Python and C++ (timed again). On the small input the check is a sizeable share of the gap,
# so not all of the embedding's gap is Python's interpreter; on the large one it is a small
# share of a forward that the copying of rows dominates.
#
# %% experiment output-varies
def token_check(tokens):
    """Lesson 01's guard alone: the smallest and largest id, read back into Python."""
    return tokens.min().item(), tokens.max().item()


with torch.inference_mode():
    for batch, length, d_model in ((1, 8, 64), (8, 256, 512)):
        python, cpp = next(twins(d_model))[1:]  # the embeddings
        tokens = inputs_for("Embedding", batch, length, d_model)[0]
        python_time, cpp_time = seconds_of_both(python, cpp, (tokens,))
        check_time = min(median_seconds(token_check, tokens, min_run_time=0.02) for _ in range(5))
        print(f"[B, T] = [{batch}, {length}]: the token-id check {check_time * 1e6:6.1f} us, "
              f"{check_time / python_time:.1%} of the Python forward; the gap Python - C++ "
              f"{(python_time - cpp_time) * 1e6:6.1f} us")  # fmt: skip

# %% [markdown]
# A fit makes the split explicit. For the attention module, the time of one call as the sequence
# grows is modelled as $t(T) = t_0 + c\,T + c_2 T^2$: $t_0$ is what a call costs whatever its size,
# the rest is the work on the data. The experiment fits the model to each version by least squares.

# %% experiment output-varies
lengths = [4, 8, 16, 32, 64, 128, 256]
d_model = 128
python_mha = MultiHeadAttention(d_model, 8).eval()
cpp_mha = CppMultiHeadAttention(d_model, 8).eval()
cpp_mha.load_state_dict(python_mha.state_dict())
measured = {"Python": [], "C++": []}
with torch.inference_mode():
    for length in lengths:
        x = torch.randn(1, length, d_model)
        python_time, cpp_time = seconds_of_both(python_mha, cpp_mha, (x, x, x), rounds=3)
        measured["Python"].append(python_time)
        measured["C++"].append(cpp_time)
t = torch.tensor(lengths, dtype=torch.float64)
design = torch.stack([torch.ones_like(t), t, t**2], dim=1)  # columns for t_0, c, c_2
fits = {}
for name, seconds in measured.items():
    y = torch.tensor(seconds, dtype=torch.float64)[:, None]
    # least squares on relative errors (each row divided by its time): small T counts as much as large
    fits[name] = torch.linalg.lstsq(design / y, torch.ones_like(y)).solution.flatten()
    t0, c, c2 = fits[name].tolist()
    print(f"{name:>6}: t_0 = {t0 * 1e6:6.1f} us per call, c = {c * 1e9:7.1f} ns per position, ", end="")
    print(f"c_2 = {c2 * 1e9:6.2f} ns")
print(f"fixed cost per call, Python / C++ = {fits['Python'][0] / fits['C++'][0]:.2f}: leaving Python "
      f"removes {1 - fits['C++'][0] / fits['Python'][0]:.0%} of it")  # fmt: skip
fit_ops = len(operations(cpp_mha, x, x, x))  # one call without a mask, as timed
print(f"C++'s fixed cost over the {fit_ops} ATen operations of one call: "
      f"{fits['C++'][0] / fit_ops * 1e6:.2f} us per operation")  # fmt: skip

fig, ax = plt.subplots(figsize=(6, 4))
for name, seconds in measured.items():
    ax.plot(lengths, [s * 1e6 for s in seconds], "o", label=f"{name}, measured")
    ax.plot(lengths, (design @ fits[name] * 1e6).tolist(), "-", label=f"{name}, fit")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("sequence length T (B = 1, D = 128, h = 8)")
ax.set_ylabel("one forward call (microseconds)")
ax.set_title("Multi-head attention: Python and C++")
ax.legend()
fig.tight_layout()
# %% [markdown]
# The fixed cost $t_0$ is where the two versions differ; the cost per position is nearly the same,
# because it is ATen's. That is the whole story of "C++ is faster": it removes part of a constant
# per operation, which matters when operations are many and small. Only part: the last lines
# print the share of the fixed cost that leaving Python removed, and what C++ still pays per
# operation, the dispatcher, the argument checks and the allocation of each result, which no
# choice of language removes. Fusing operations into fewer kernels (`torch.compile`) or
# replaying them (CUDA graphs) is how that remainder shrinks.
#
# ## Where C++ matters, and where it does not
#
# - **Tight loops of small operations.** Decoding one token at a time (lesson 11) with a batch of
#   1 runs many tiny operations per token; there the interpreter's share is large, and moving the
#   loop into C++ (or capturing it with `torch.compile` or CUDA graphs) pays.
# - **Deployment without Python.** A server, a phone or an embedded device may have no Python at
#   all. A LibTorch program links the same library and runs the same modules; the weights trained
#   in Python load by name, as they did here.
# - **Large tensors.** When each operation takes milliseconds, C++ gains nothing that the timer can
#   see: the kernels are the same, and so is the arithmetic. Training a large model in Python loses
#   little.
# - **The price.** A compile of tens of seconds for each change, error messages from templates,
#   and memory that you manage by hand once you leave `torch::Tensor`. The cell below prints how
#   this kernel got each of its three modules: "compiled in ..." with the time, when it built
#   the source, or "loaded from the cache in ..." when a build of the same source was there
#   already (then the time is that of loading the library, not of compiling it: this notebook
#   was built with a warm cache, so its saved output shows no compile time).

# %% experiment output-varies
builds = {"CppEmbedding": CppEmbedding, "CppPositionwiseFeedForward": CppPositionwiseFeedForward}
builds["CppMultiHeadAttention"] = CppMultiHeadAttention
for name, cls in builds.items():
    print(f"{name}: {cls.build_note}")  # "compiled in ...", or "loaded from the cache in ..."

# %% [markdown]
# ## Without Python: a program of your own
#
# The modules above still run inside Python. A deployed program is a plain C++ executable that
# links LibTorch and loads the trained weights from a file. Its shape, in outline (a sketch for
# you to build; the course does not compile it):
#
# ```cpp
# // main.cpp: #include <torch/torch.h>, then the struct MultiHeadAttentionImpl of exercise 3
# TORCH_MODULE(MultiHeadAttention);  // the handle type, as torch::nn::Linear
#
# int main() {
#   MultiHeadAttention attention(512, 8, 0.0);
#   torch::NoGradGuard no_grad;  // inference: no autograd graph
#   std::ifstream file("weights.pt", std::ios::binary);
#   std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
#   auto weights = torch::pickle_load(bytes).toGenericDict();  // {"w_q.weight": tensor, ...}
#   for (auto& item : attention->named_parameters()) {
#     item.value().copy_(weights.at(item.key()).toTensor());
#   }
#   attention->eval();
#   auto x = torch::randn({1, 10, 512});
#   std::cout << attention(x, x, x).sizes() << "\n";
# }
# ```
#
# The file comes from Python: `torch.save(dict(module.state_dict()), "weights.pt")` writes a
# plain dict of tensors in PyTorch's zip format, which `torch::pickle_load` reads (it reads
# tensors and plain containers, not arbitrary Python objects). A `CMakeLists.txt` of
# four lines builds it: `find_package(Torch REQUIRED)`, `add_executable(main main.cpp)`,
# `target_link_libraries(main "${TORCH_LIBRARIES}")` and a C++17 standard, configured with
# `cmake -DCMAKE_PREFIX_PATH=<the LibTorch folder>` (the unzipped download from pytorch.org, or
# `python -c "import torch; print(torch.utils.cmake_prefix_path)"`).
#
# **Exporting a whole model instead.** Writing every module again in C++ is what this lesson
# teaches, not what PyTorch recommends for deployment. The recommended route today starts from
# `torch.export`, which captures a Python model as a graph of ATen operations; **AOTInductor**
# compiles that graph ahead of time into a shared library that a C++ program loads and runs
# without Python, and **ExecuTorch** runs it on phones and embedded devices. TorchScript
# (`torch.jit.script`, `torch.jit.trace`), the older route that many tutorials still show, is
# deprecated and receives no new features.
#
# ## What each module costs
#
# The C++ modules compute what the Python ones compute, so their costs are the same. For an input
# of `B` sequences of `T` positions (`T_q` queries and `T_k` keys for attention):
#
# | module | parameters | time | memory beyond the input |
# |---|---|---|---|
# | embedding | $V D$ | $O(B T D)$ (a copy of rows) | $O(B T D)$ |
# | feed-forward | $2 D d_{ff} + d_{ff} + D$ | $O(B T D d_{ff})$ | $O(B T d_{ff})$ |
# | multi-head attention | $4 D^2 + 4 D$ | $O(B (T_q + T_k) D^2 + B T_q T_k D)$ | $O(B h T_q T_k + B (T_q + T_k) D)$ |
#
# The experiment counts the parameters of your C++ modules and compares them with the formulas.

# %% experiment
V, D, d_ff, h = 1000, 512, 2048, 8


def count(module):
    return sum(p.numel() for p in module.parameters())


for name, module, formula, text in (
    ("embedding", CppEmbedding(V, D), V * D, "V D"),
    ("feed-forward", CppPositionwiseFeedForward(D, d_ff), 2 * D * d_ff + d_ff + D, "2 D d_ff + d_ff + D"),
    ("multi-head attention", CppMultiHeadAttention(D, h), 4 * D * D + 4 * D, "4 D^2 + 4 D"),
):
    print(f"{name:>21}: {count(module):>9,} parameters, {text} = {formula:>9,}: {count(module) == formula}")

# %% [markdown]
# The attention weights `attn` are the one tensor that grows with $T_q T_k$: the experiment keeps
# the weights of the C++ module for growing sequences and checks that their size is $B h T^2$
# numbers.

# %% experiment
module = CppMultiHeadAttention(64, 4).eval()
with torch.no_grad():
    for length in (16, 32, 64):
        x = torch.randn(2, length, 64)
        module(x, x, x)
        kept = module.attn.numel()
        print(f"T = {length:>3}: attn holds {kept:>6,} numbers, B h T^2 = {2 * 4 * length**2:>6,}")

# %% [markdown]
# ## Summary
#
# - A LibTorch module is a `struct` deriving from `torch::nn::Module`; `register_module` gives each
#   submodule the name its weights load by, so one set of weights serves Python and C++.
# - `load_inline` compiles C++ from a string into a library Python imports; the course adds the
#   binding code and caches each build by the hash of its source.
# - C++ calls the same ATen kernels as Python: the outputs agree within the rounding of float64,
#   and the cost per element is the same. What C++ removes is part of a fixed cost per operation,
#   which shows on small inputs and vanishes on large ones; the dispatcher's share remains.
# - A member handle needs `{nullptr}` (no default constructor); `TensorOptions` carries dtype
#   and device; a standalone program loads weights with `torch::pickle_load` and builds with CMake.
# - For deployment, `torch.export` with AOTInductor (servers) or ExecuTorch (devices) exports a
#   whole model; TorchScript is deprecated.
# - C++ is worth its compile time where Python is absent (deployment) or where many small
#   operations run in a loop.
#
# ## Glossary
#
# | English | 中文 |
# |---|---|
# | LibTorch (PyTorch's C++ library) | LibTorch（PyTorch 的 C++ 库） |
# | ATen (the tensor library) | ATen（张量库） |
# | C++ frontend | C++ 前端 |
# | register a submodule | 注册子模块 |
# | compile / compiler | 编译 / 编译器 |
# | header file | 头文件 |
# | shared library | 共享库 |
# | binding (pybind11) | 绑定（pybind11） |
# | just-in-time compilation | 即时编译 |
# | cache | 缓存 |
# | hash | 哈希值 |
# | interpreter overhead | 解释器开销 |
# | dispatcher | 分发器 |
# | kernel (of an operation) | 算子内核 |
# | deployment | 部署 |
# | least-squares fit | 最小二乘拟合 |
# | tensor options | 张量选项 |
# | null handle (`{nullptr}`) | 空句柄（`{nullptr}`） |
# | default constructor | 默认构造函数 |
# | build system (CMake) | 构建系统（CMake） |
# | ahead-of-time compilation (AOTInductor) | 预先编译（AOTInductor） |
# | model export | 模型导出 |
