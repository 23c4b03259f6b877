"""Lesson 10's experiment machinery: the model factory, the timing of one step, the runs that
compare clipping, learning rates and layer norms, and the figures.

The lesson's experiment cells call these so that what a learner reads there is the experiment
itself (which runs, what is compared, what is printed), not the plumbing around it. Each
function takes the notebook's own definitions (the learner's ``Transformer``, ``train``,
``make_batch``, ...) as arguments, so the capstone's experiments still run the learner's parts.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
import torch
from torch import nn

from autograder.timing import median_seconds
from solutions.capstone import END, PAD, START, VOCAB, Config, History, training_pairs

Batch = dict[str, torch.Tensor]


def model_maker(
    transformer: type[nn.Module], encoder: type[nn.Module], decoder: type[nn.Module], device: torch.device
) -> Callable[..., nn.Module]:
    """``new_model(setup, norm_first=False)``: a fresh Transformer of ``transformer``'s class for
    ``setup`` (seeded with ``setup.seed``), post-LN or pre-LN, on ``device``. The pre-LN model is
    the post-LN one with its stacks rebuilt by ``encoder`` and ``decoder`` with ``norm_first=True``,
    the same initial weights loaded into them (lesson 08 gives both layouts the same names)."""

    def new_model(setup: Config, norm_first: bool = False) -> nn.Module:
        torch.manual_seed(setup.seed)
        sizes = (setup.d_model, setup.n_heads, setup.d_ff, setup.n_layers)
        model = transformer(len(VOCAB), len(VOCAB), *sizes, dropout=0.0, max_len=64)
        if norm_first:
            pre_encoder, pre_decoder = (
                encoder(*sizes, 0.0, norm_first=True),
                decoder(*sizes, 0.0, norm_first=True),
            )
            pre_encoder.load_state_dict(model.encoder.state_dict())
            pre_decoder.load_state_dict(model.decoder.state_dict())
            model.encoder, model.decoder = pre_encoder, pre_decoder
        return model.to(device)

    return new_model


def plot_schedules(rate: Callable[..., float], setup: Config) -> None:
    """The paper's learning-rate schedule beside ``setup``'s, both computed with ``rate``."""
    steps = torch.arange(1, 20_001)
    paper = [rate(int(s), 512, 4000) for s in steps]
    ours = [rate(int(s), setup.d_model, setup.warmup, setup.factor) for s in steps[:1000]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    axes[0].plot(steps, paper)
    axes[0].axvline(4000, color="gray", linestyle=":")
    axes[0].set_title("the paper: D = 512, warm-up 4000, factor 1")
    axes[1].plot(steps[:1000], ours, color="tab:orange")
    axes[1].axvline(setup.warmup, color="gray", linestyle=":")
    axes[1].set_title(f"this lesson: D = {setup.d_model}, warm-up {setup.warmup}, factor {setup.factor:g}")
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_ylabel("learning rate")
    fig.tight_layout()


def train_step_seconds(
    train_step: Callable[..., float],
    new_model: Callable[..., nn.Module],
    make_batch: Callable[..., Batch],
    setup: Config,
) -> float:
    """The median time of one ``train_step`` on a fresh model of ``setup`` (timing trains it), with
    the paper's Adam, on one batch made in advance, on as many threads as torch uses now."""
    probe = new_model(setup)
    optimizer = torch.optim.Adam(probe.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    device = next(probe.parameters()).device
    pairs = training_pairs(
        "reverse", setup.batch_size, setup.lengths, torch.Generator().manual_seed(1), set()
    )
    batch = {name: t.to(device) for name, t in make_batch(*pairs, PAD, START, END).items()}
    return median_seconds(train_step, probe, batch, optimizer, PAD, threads=torch.get_num_threads())


def plot_training(history: History) -> None:
    """The training loss at every step beside the held-out exact match at every evaluation."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.4))
    axes[0].plot(range(1, len(history.losses) + 1), history.losses)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("step")
    axes[0].set_ylabel("training loss")
    axes[1].plot(list(history.accuracy), [100 * a for a in history.accuracy.values()], marker="o")
    axes[1].set_xlabel("step")
    axes[1].set_ylabel("held-out exact match (%)")
    axes[1].set_ylim(-3, 103)
    fig.suptitle("Training your Transformer to reverse sequences")
    fig.tight_layout()


def plot_losses(runs: dict[str, list[float]]) -> None:
    """Each run's training loss against the step, one line a run, on a log scale."""
    fig, ax = plt.subplots(figsize=(11, 3.4))
    for label, losses in runs.items():
        ax.plot(range(1, len(losses) + 1), losses, label=label, alpha=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.legend()
    fig.tight_layout()


def spikes(losses: list[float], window: int = 10) -> list[int]:
    """The steps (from 1) where a spike starts: a loss more than twice the median of the ``window``
    steps before it, after a step that was not one."""
    high = [
        i >= window and loss > 2 * torch.tensor(losses[i - window : i]).median().item()
        for i, loss in enumerate(losses)
    ]
    return [i + 1 for i in range(len(losses)) if high[i] and not (i and high[i - 1])]


def record_gradient_norms(model: nn.Module) -> list[float]:
    """A list that receives, at every backward pass, the norm of all of model's gradients together
    (before any clipping: PyTorch calls the hook as ``backward`` finishes each parameter's gradient)."""
    norms, squares = [], []
    parameters = [p for p in model.parameters() if p.requires_grad]

    def add(parameter: torch.Tensor) -> None:
        squares.append(parameter.grad.detach().pow(2).sum())
        if len(squares) == len(parameters):  # every gradient of this backward pass is in
            norms.append(torch.stack(squares).sum().sqrt().item())
            squares.clear()

    for parameter in parameters:
        parameter.register_post_accumulate_grad_hook(add)
    return norms


def spike_runs(
    losses: list[float],
    setup: Config,
    new_model: Callable[..., nn.Module],
    train: Callable[..., History],
    held: Batch,
) -> dict[str, list[float]]:
    """The first ``len(losses)`` steps of ``setup``'s run (``losses``), then the same steps trained
    again from the same weights on the same batches, once with ``clip = 1.0`` and once with a rate
    four times smaller, each printing how often its gradients' norm was above 1.0; then every
    run's spikes. Returns each run's losses under its label."""
    steps = len(losses)
    runs = {f"factor {setup.factor:g}, no clip (the run above)": losses}
    for label, change in (("clip = 1.0", {"clip": 1.0}), ("no clip", {"factor": setup.factor / 4})):
        run = Config(max_steps=steps, every=steps, average=0.0, **{"factor": setup.factor, **change})
        run_model = new_model(run)
        norms = record_gradient_norms(run_model)
        runs[f"factor {run.factor:g}, {label}"] = train(run_model, run, held, report=None).losses
        above = sum(norm > 1.0 for norm in norms)
        engaged = ": the clip engaged there" if "clip" in change else ""
        print(
            f"factor {run.factor:g}, {label}: the gradients' norm was above 1.0 at {above} of {len(norms)} "
            f"steps{engaged} (the median norm {torch.tensor(norms).median():.2f})"
        )
    for label, run_losses in runs.items():
        found = spikes(run_losses)
        print(
            f"{label}: {len(found)} spikes in {len(run_losses)} steps (starting at steps {found or 'none'}), "
            f"the largest loss after step 100 {max(run_losses[100:]):.2f}, "
            f"the mean of the last 10 steps {sum(run_losses[-10:]) / 10:.3f}"
        )
    return runs


def plot_attention(
    cross: torch.Tensor, self_attention: torch.Tensor, source_words: list[str], answer_words: list[str]
) -> None:
    """Every head's cross-attention ``[h, T_tgt, S]`` (top row) and decoder self-attention
    ``[h, T_tgt, T_tgt]`` (bottom row) of one decoded example, labelled with its tokens."""
    n_heads = cross.size(0)
    fig, axes = plt.subplots(2, n_heads, figsize=(4.6 * n_heads, 8.4), squeeze=False)
    for head in range(n_heads):
        for row, (weights, keys, title) in enumerate(
            (
                (cross, source_words, "cross-attention"),
                (self_attention, answer_words, "decoder self-attention"),
            )
        ):
            ax = axes[row, head]
            ax.imshow(weights[head], cmap="Blues", vmin=0, vmax=1)
            ax.set_xticks(range(len(keys)), keys)
            ax.set_yticks(range(len(answer_words)), [f"reads {w}" for w in answer_words])
            ax.set_title(f"{title}, head {head + 1}")
            ax.set_xlabel("source token" if row == 0 else "answer token so far")
    fig.tight_layout()


def loss_at(history: History, step: int, window: int = 10) -> float:
    """The mean training loss of the ``window`` steps up to ``step`` (one step's loss spikes)."""
    return sum(history.losses[step - window : step]) / window


@dataclass
class LayerNormComparison:
    """Experiment 1: post-LN against pre-LN, from the same initial weights (``new_model``), on the
    same batches, ``steps`` steps for each seed, in each setting (its changes to ``Config``). The
    weights themselves are judged (``average=0.0``): a moving average would smooth over the very
    instabilities compared."""

    new_model: Callable[..., nn.Module]
    train: Callable[..., History]
    held: Batch
    settings: dict[str, dict[str, float | bool]]
    seeds: tuple[int, ...] = (0, 1)
    steps: int = 150
    runs: dict[tuple[bool, str, int], History] = field(default_factory=dict)

    def losses(self, norm_first: bool, setting: str) -> str:
        """The loss at ``steps`` (the mean of the last 10) of each seed's run, as printed."""
        return ", ".join(
            f"{loss_at(self.runs[norm_first, setting, seed], self.steps):.2f}" for seed in self.seeds
        )

    def run(self, norm_first: bool, setting: str) -> None:
        """Train post-LN or pre-LN in one setting, every seed, and print the loss of each."""
        for seed in self.seeds:
            config = Config(
                seed=seed, max_steps=self.steps, every=self.steps, average=0.0, **self.settings[setting]
            )
            trained = self.train(self.new_model(config, norm_first), config, self.held, report=None)
            self.runs[norm_first, setting, seed] = trained
        layout = "pre-LN " if norm_first else "post-LN"
        print(
            f"{layout}, {setting:<20}: loss at step {self.steps} per seed {self.losses(norm_first, setting)}"
        )

    def plot(self, plateau: float, peak: Callable[[float], float]) -> None:
        """Every run's training loss, one panel a setting, with the ``plateau`` dashed; each panel's
        title gives its setting's peak rate, ``peak(factor)``."""
        fig, axes = plt.subplots(1, len(self.settings), figsize=(11, 3.6), sharey=True)
        for ax, setting in zip(axes, self.settings, strict=True):
            for norm_first, color in ((False, "tab:blue"), (True, "tab:orange")):
                for seed in self.seeds:
                    losses = self.runs[norm_first, setting, seed].losses
                    label = ("pre-LN" if norm_first else "post-LN") if seed == self.seeds[0] else None
                    ax.plot(range(1, len(losses) + 1), losses, color=color, alpha=0.7, label=label)
            ax.axhline(plateau, color="gray", linestyle="--", linewidth=1)
            ax.set_yscale("log")
            ax.set_title(f"{setting} (peak rate {peak(self.settings[setting]['factor']):.1e})")
            ax.set_xlabel("step")
        axes[0].set_ylabel("training loss")
        axes[0].legend()
        fig.tight_layout()

    def print_table(self) -> None:
        """Each setting's losses at ``steps``, post-LN and pre-LN on one line."""
        print(f"the loss at step {self.steps} per seed {self.seeds}:")
        for setting in self.settings:
            print(
                f"{setting:>20}: post-LN {self.losses(False, setting)}; pre-LN {self.losses(True, setting)}"
            )
