"""Lesson 10's capstone: toy sequence tasks, and the loop that trains a Transformer on one.

The lesson shows these definitions in its locked cells (one source: the notebook copies them
from here), and ``tests/benchmarks/bench_capstone.py`` runs the same code.

Tokens: ``<pad>`` = 0, ``<s>`` = 1, ``</s>`` = 2, then the letters ``a`` to ``j`` (3 to 12).
"""

import time
from dataclasses import dataclass, field

import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from solutions.output_layer import greedy_decode
from solutions.training import exact_match, make_batch, rate, train_loop

PAD, START, END = 0, 1, 2
VOCAB = ["<pad>", "<s>", "</s>", *"abcdefghij"]
TASKS = {
    "copy": lambda letters: list(letters),
    "reverse": lambda letters: letters[::-1],
    "sort": sorted,
}


def random_sources(n: int, lengths: tuple[int, int], generator: torch.Generator) -> list[list[int]]:
    """n sequences of letters, each of a length drawn uniformly from lengths = (shortest, longest)."""
    sizes = torch.randint(lengths[0], lengths[1] + 1, (n,), generator=generator).tolist()
    letters = torch.randint(3, len(VOCAB), (n, lengths[1]), generator=generator).tolist()
    return [row[:size] for row, size in zip(letters, sizes, strict=True)]


def held_out_set(task: str, n: int, lengths: tuple[int, int], seed: int) -> tuple[list, list]:
    """n distinct sources never to be trained on, and their targets."""
    generator = torch.Generator().manual_seed(seed)
    sources: dict[tuple[int, ...], None] = {}
    while len(sources) < n:
        sources.update(dict.fromkeys(map(tuple, random_sources(n - len(sources), lengths, generator))))
    return [list(s) for s in sources], [TASKS[task](list(s)) for s in sources]


def training_pairs(task: str, n: int, lengths: tuple[int, int], generator: torch.Generator,
                   excluded: set[tuple[int, ...]]) -> tuple[list, list]:  # fmt: skip
    """n fresh training sources (none of them in ``excluded``, the held-out set) and targets."""
    sources = [s for s in random_sources(n, lengths, generator) if tuple(s) not in excluded]
    while len(sources) < n:
        sources += [
            s for s in random_sources(n - len(sources), lengths, generator) if tuple(s) not in excluded
        ]
    return sources, [TASKS[task](s) for s in sources]


class LearnedPositions(torch.nn.Module):
    """x + table[:T]: one trained vector per position (lesson 10's alternative to lesson 02's
    sinusoids), initialised at the sinusoids' scale. x: [B, T, D] -> [B, T, D]."""

    def __init__(self, d_model: int, max_len: int):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(max_len, d_model) * 0.7)  # [max_len, D]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table[: x.size(1)]


@dataclass
class Config:
    """A training run: the model's size, the optimiser's schedule, the data and the budget."""

    task: str = "reverse"
    lengths: tuple[int, int] = (4, 10)
    d_model: int = 32
    n_heads: int = 2
    d_ff: int = 64
    n_layers: int = 1
    batch_size: int = 64
    warmup: int = 100
    factor: float = 2.0
    warm_up: bool = True  # False: no warm-up, the peak rate from step 1 and the same decay after `warmup`
    smoothing: float = 0.0
    clip: float | None = None  # the largest norm of all the gradients together (None: not clipped)
    average: float = 0.95  # held-out accuracy of an exponential moving average of the weights (0: of them)
    max_steps: int = 1500
    every: int = 25  # evaluate on the held-out set every this many steps
    seed: int = 0


@dataclass
class History:
    """What a training run measured: loss per step, held-out accuracy per evaluation."""

    losses: list[float] = field(default_factory=list)
    accuracy: dict[int, float] = field(default_factory=dict)  # step -> held-out exact match
    train_seconds: float = 0.0  # the training steps only, evaluations not counted
    solved_at: int | None = None  # the first evaluated step with 100% exact match


def evaluate(model, held: dict[str, torch.Tensor]) -> float:
    """Greedy decoding of every held-out source; the fraction decoded exactly right."""
    model.eval()
    longest = held["tgt_out"].size(1) + 1  # <s>, the answer and </s>
    decoded = greedy_decode(model, held["src"], held["src_mask"], longest, START, END)
    return exact_match(decoded, held["tgt_out"], START, END).float().mean().item()


def train(model, config: Config, held: dict[str, torch.Tensor], report=print) -> History:
    """Train ``model`` on fresh batches of ``config.task`` (never a held-out source) with Adam
    and the paper's schedule, ``config.every`` steps of ``train_loop`` at a time, evaluating after
    each; stop at 100% held-out exact match or after ``max_steps``.

    With ``config.average`` > 0 the held-out set judges an exponential moving average of the
    weights (each step's weight in it shrinks by the factor ``average`` per step: the last
    1 / (1 - average) steps hold about 64% of it), and ``model`` ends up holding that
    average: the weights that were judged."""
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(config.seed)
    excluded = {tuple(row[row != PAD].tolist()) for row in held["src"].cpu()}
    # the paper's Adam; fused: one kernel for all parameters (the step of a tiny model is mostly overhead)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, fused=True)
    first = 1 if config.warm_up else config.warmup  # without warm-up, the steps before the peak run at it
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda done: rate(max(done + 1, first), config.d_model, config.warmup, config.factor)
    )
    # a copy of the model whose weights follow the trained ones, each step a (1 - average) part of the way
    averaged = (
        AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(config.average)) if config.average else None
    )
    if averaged is not None:  # PyTorch calls this after every optimizer.step(), inside train_loop
        optimizer.register_step_post_hook(lambda *_: averaged.update_parameters(model))

    def batches(count: int):
        """``count`` fresh batches, each drawn and padded when the loop asks for it."""
        for _ in range(count):
            sources, targets = training_pairs(
                config.task, config.batch_size, config.lengths, generator, excluded
            )
            yield {name: t.to(device) for name, t in make_batch(sources, targets, PAD, START, END).items()}

    history = History()
    while len(history.losses) < config.max_steps:
        start = time.perf_counter()
        count = min(config.every, config.max_steps - len(history.losses))
        history.losses += train_loop(
            model, batches(count), optimizer, PAD, config.smoothing, schedule, config.clip
        )
        history.train_seconds += time.perf_counter() - start
        step = len(history.losses)
        history.accuracy[step] = accuracy = evaluate(model if averaged is None else averaged.module, held)
        if report:
            report(f"step {step:5d}: loss {history.losses[-1]:.3f}, held-out exact match {accuracy:6.1%}, "
                   f"{history.train_seconds:.1f} s of training")  # fmt: skip
        if accuracy == 1.0:
            history.solved_at = step
            break
    if averaged is not None:
        model.load_state_dict(averaged.module.state_dict())
    return history
