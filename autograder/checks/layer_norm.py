"""Checks for lesson 06: LayerNorm(d_model, eps=1e-5), parameters gamma [D] and beta [D].

Oracle: torch.nn.LayerNorm with random weight and bias copied in (weight -> gamma,
bias -> beta), at the default eps and at eps = 0.1, where an eps in the wrong place
shows clearly. Properties: with gamma = 1 and beta = 0 every position comes out with
mean 0 and biased variance 1; inputs with a large mean and a small spread are
normalized as precisely as nn.LayerNorm does it. Inputs: [B, T, D] = [2, 5, 8]
(B, T and D all different, so a statistic over the wrong dimension shows).
"""

from types import SimpleNamespace

import torch
from torch import nn

from autograder.checks import core
from autograder.checks.answers import Expected, answer
from autograder.checks.device import DEVICE, DTYPE, random_tensor
from autograder.checks.oracles import layer_norm_state

EXERCISE = "LayerNorm"
B, T, D = 2, 5, 8
X = "[B, T, D]"


# The mistakes' outputs. ``ln`` is the learner's module (or a stand-in holding its
# gamma, beta and the eps it was built with); ``x`` is the input [..., D].
def _normalized(x, dims=-1, eps=1e-5, unbiased=False):
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=unbiased)
    return (x - mean) / torch.sqrt(var + eps)


def _affine(ln, x_hat):
    return ln.gamma * x_hat + ln.beta


def _eps_outside(ln, x):
    mean = x.mean(dim=-1, keepdim=True)
    return _affine(ln, (x - mean) / (x.var(dim=-1, keepdim=True, unbiased=False).sqrt() + ln.eps))


def _std_under_root(ln, x):
    mean = x.mean(dim=-1, keepdim=True)
    std = x.var(dim=-1, keepdim=True, unbiased=False).sqrt()
    return _affine(ln, (x - mean) / torch.sqrt(std + ln.eps))


def _cancellation(ln, x):
    mean = x.mean(dim=-1, keepdim=True)
    var = (x * x).mean(dim=-1, keepdim=True) - mean**2  # loses every digit when |mean| >> std
    return _affine(ln, (x - mean) / torch.sqrt(var + ln.eps))


MISTAKES = core.catalogue(
    EXERCISE,
    {
        "unbiased variance": lambda ln, x: _affine(ln, _normalized(x, eps=ln.eps, unbiased=True)),
        "eps outside the square root": _eps_outside,
        "eps missing": lambda ln, x: _affine(ln, _normalized(x, eps=0.0)),
        "the eps argument ignored": lambda ln, x: _affine(ln, _normalized(x, eps=1e-5)),
        "standard deviation under the square root": _std_under_root,
        "normalized over the batch (dim 0)": lambda ln, x: _affine(ln, _normalized(x, dims=0, eps=ln.eps)),
        "normalized over the positions (dim -2)": lambda ln, x: _affine(
            ln, _normalized(x, dims=-2, eps=ln.eps)
        ),
        "normalized over batch and positions (BatchNorm)": lambda ln, x: _affine(
            ln, _normalized(x, dims=(0, 1), eps=ln.eps)
        ),
        "gamma and beta not applied": lambda ln, x: _normalized(x, eps=ln.eps),
        "gamma and beta swapped": lambda ln, x: ln.beta * _normalized(x, eps=ln.eps) + ln.gamma,
        "variance as mean(x²) - mean(x)²": _cancellation,
    },
)


# --- oracle and inputs ---------------------------------------------------------------------


def torch_layer_norm(d_model: int, eps: float, seed: int | None) -> nn.LayerNorm:
    """nn.LayerNorm on DEVICE in float64; with a seed, a random weight (around 1) and bias."""
    norm = nn.LayerNorm(d_model, eps=eps).to(device=DEVICE, dtype=DTYPE)
    if seed is not None:
        with torch.no_grad():
            norm.weight.copy_(1.0 + 0.5 * random_tensor(d_model, seed=seed))
            norm.bias.copy_(random_tensor(d_model, seed=seed + 1))
    return norm


def shifted_input(shape, generator: torch.Generator) -> torch.Tensor:
    """x [..., D] whose rows have means of size 1e5 to 2e5 (either sign) and spreads of 0.2 to 1."""
    rows = (*shape[:-1], 1)
    mean = (1e5 + 1e5 * torch.rand(rows, generator=generator, dtype=DTYPE)) * torch.randn(
        rows, generator=generator, dtype=DTYPE
    ).sign()
    std = 0.2 + 0.8 * torch.rand(rows, generator=generator, dtype=DTYPE)
    return (mean + std * torch.randn(shape, generator=generator, dtype=DTYPE)).to(DEVICE)


def _stand_in(module, eps: float) -> SimpleNamespace:
    """What the mistakes need from a module: its gamma and beta, and the eps it was built with."""
    return SimpleNamespace(gamma=module.gamma, beta=module.beta, eps=eps)


def compare(module, x, expected: Expected, eps: float, what: str = "the output") -> None:
    """The learner's module on x against ``expected()`` (computed after the learner's call),
    naming the mistake the output matches."""
    out = core.output(EXERCISE, module, {"x": x})
    wrong = core.mistake_outputs(MISTAKES, _stand_in(module, eps), x)
    core.expect_close(EXERCISE, what, out, expected(), X, wrong)


def build_with(cls, d_model: int, eps: float | None, state=None):
    """The learner's LayerNorm(d_model[, eps]) in float64 on DEVICE, with ``state`` loaded."""
    args = {} if eps is None else {"eps": eps}
    module = core.build(EXERCISE, cls, d_model, **args)
    if state is not None:
        core.load_weights(EXERCISE, module, state)
    return module


# --- the checks ----------------------------------------------------------------------------


def check_layer_norm_parameters(cls) -> None:
    """gamma (ones) and beta (zeros) of shape [D] as parameters; output [B, T, D], float64, same device."""
    module = core.build(EXERCISE, cls, D)
    parameters = dict(module.named_parameters())
    for name, value in (("gamma", 1.0), ("beta", 0.0)):
        if name not in parameters:
            raise core.CheckFailure(
                f"{EXERCISE}: no parameter named `{name}`; create it in __init__ as "
                f"self.{name} = nn.Parameter(...) (found: {sorted(parameters) or 'none'})."
            )
        tensor = parameters[name]
        core.expect_shape(EXERCISE, name, tensor, "[D]", (D,))
        if not torch.all(tensor == value):
            raise core.CheckFailure(
                f"{EXERCISE}: `{name}` must start as all {'ones' if value else 'zeros'} (so that a new "
                f"LayerNorm only normalizes), got {tensor.detach().flatten()[:4].tolist()}..."
            )
    core.load_weights(EXERCISE, module, layer_norm_state(torch_layer_norm(D, 1e-5, seed=None)))
    x = random_tensor(B, T, D, seed=0)
    out = core.output(EXERCISE, module, {"x": x})
    core.expect_output_like(EXERCISE, out, X, (B, T, D), x)
    core.passed(f"{EXERCISE} has parameters gamma [D] (ones) and beta [D] (zeros) and returns {X}")


def check_layer_norm_matches_torch(cls) -> None:
    """Equal to nn.LayerNorm with random weight -> gamma and bias -> beta, at eps = 1e-5 and 0.1."""
    x = random_tensor(B, T, D, seed=10, scale=2.0) + random_tensor(B, T, 1, seed=11)
    for eps, seed in ((None, 12), (0.1, 14)):
        norm = torch_layer_norm(D, 1e-5 if eps is None else eps, seed=seed)
        module = build_with(cls, D, eps, layer_norm_state(norm))
        compare(module, x, answer(norm, x), norm.eps, what=f"the output (eps={norm.eps:g})")
    core.passed(
        f"{EXERCISE} equals torch's nn.LayerNorm (weight -> gamma, bias -> beta) at eps=1e-5 and eps=0.1"
    )


def check_layer_norm_statistics(cls) -> None:
    """With gamma = 1 and beta = 0: each position's D outputs have mean 0 and biased variance 1."""
    shape = (3, 4, 16)
    scale = torch.tensor([0.5, 2.0, 10.0, 50.0], dtype=DTYPE, device=DEVICE)[:, None]  # one per position
    x = random_tensor(*shape, seed=20) * scale + 100 * random_tensor(3, 4, 1, seed=21)
    module = build_with(cls, shape[-1], None)
    out = core.output(EXERCISE, module, {"x": x})
    core.expect_shape(EXERCISE, "the output", out, X, shape)
    mean = out.mean(dim=-1)
    var = out.var(dim=-1, unbiased=False)
    expected_var = x.var(dim=-1, unbiased=False) / (x.var(dim=-1, unbiased=False) + 1e-5)  # 1 up to eps
    bad_mean = (mean.abs() > 1e-6).nonzero()
    bad_var = ((var - expected_var).abs() > 1e-6).nonzero()
    if len(bad_mean) or len(bad_var):
        with torch.no_grad():
            wrong = core.mistake_outputs(MISTAKES, _stand_in(module, 1e-5), x)
            expected = nn.functional.layer_norm(x, shape[-1:], eps=1e-5)
        core.expect_close(EXERCISE, "the output", out, expected, X, wrong)
        what, index, value = (
            ("mean", bad_mean[0].tolist(), mean) if len(bad_mean) else ("variance", bad_var[0].tolist(), var)
        )
        raise core.CheckFailure(
            f"{EXERCISE}: with gamma = 1 and beta = 0 every position's D outputs should have mean 0 and "
            f"(biased) variance 1; at position [b, t] = {index} the {what} is "
            f"{float(value[tuple(index)]):.6g}."
        )
    core.passed(
        f"{EXERCISE} with gamma=1, beta=0 gives every position mean 0 and variance 1 over its D features"
    )


def check_layer_norm_large_mean(cls) -> None:
    """Inputs whose rows sit near ±1e5 with a spread below 1: as precise as nn.LayerNorm."""
    x = shifted_input((B, T, D), torch.Generator().manual_seed(30))
    norm = torch_layer_norm(D, 1e-5, seed=31)
    module = build_with(cls, D, None, layer_norm_state(norm))
    compare(module, x, answer(norm, x), 1e-5)
    core.passed(f"{EXERCISE} stays exact for inputs with a large mean (~1e5) and a small spread (< 1)")


CATALOGUE = {EXERCISE: MISTAKES}
