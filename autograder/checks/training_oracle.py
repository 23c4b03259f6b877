"""What lesson 10's train_step and train_loop checks compare with: the stand-in model (PyTorch's
own modules behind the course's interface), the oracle step and train_step's known mistakes, the
cases (a model, a batch, SGD and StepLR) and what a call leaves behind, and how two outcomes are
compared (autograder/checks/train_step.py says which stage shows which mistake)."""

import contextlib
import copy
import math
import numbers
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks import core, memo, oracles
from autograder.checks.device import DEVICE, DTYPE, exact_matmul

TRAIN_STEP = "train_step"
SIGNATURE = "train_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None)"
# the visible check's sizes: a small model, one layer, a batch whose last rows are padded
V_SRC, V_TGT, D_MODEL, N_HEADS, D_FF, N_LAYERS, MAX_LEN = 11, 11, 16, 2, 32, 1, 20
B, T_SRC, T_TGT = 3, 6, 5
PAD, LR, GAMMA, SMOOTHING = 0, 0.5, 0.5, 0.1
SEED = 10


# ---------------------------------------------------------------------------------------
# The stand-in: PyTorch's own modules behind the course's interface
# ---------------------------------------------------------------------------------------


class _Generator(nn.Module):
    def __init__(self, projection: nn.Linear):
        super().__init__()
        self.proj = projection

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.proj(x), dim=-1)


def _key_padding(mask: torch.Tensor | None) -> torch.Tensor | None:
    """Our padding mask Bool[B, 1, 1, T] (True = real) -> PyTorch's Bool[B, T] (True = padding)."""
    return None if mask is None else oracles.torch_key_padding_mask(mask)


class StandIn(nn.Module):
    """The course's Transformer interface, forward(src, tgt, src_mask, tgt_mask) -> [B, T, D] and
    generator, made of PyTorch's nn.TransformerEncoder / nn.TransformerDecoder between the paper's
    embeddings (nn.Embedding * sqrt(D) + the sinusoidal table), with seeded random weights."""

    def __init__(self, args: dict, generator: torch.Generator):
        super().__init__()
        d_model, n_heads, d_ff, n_layers = (args[k] for k in ("d_model", "n_heads", "d_ff", "n_layers"))
        self.encoder, self.decoder = (
            oracles.torch_stack(
                oracles.torch_layer(is_decoder, d_model, n_heads, d_ff, seed=None), n_layers, seed=generator
            )
            for is_decoder in (False, True)
        )
        self.src_lut = nn.Embedding(args["src_vocab"], d_model, device=DEVICE, dtype=DTYPE)
        self.tgt_lut = nn.Embedding(args["tgt_vocab"], d_model, device=DEVICE, dtype=DTYPE)
        projection = nn.Linear(d_model, args["tgt_vocab"], device=DEVICE, dtype=DTYPE)
        for part in (self.src_lut, self.tgt_lut, projection):
            oracles.randomize_(part, generator)
        self.generator = _Generator(projection)
        self.register_buffer("pe", oracles.sinusoidal_table(args["max_len"], d_model).to(DEVICE))
        self.n_heads, self.scale = n_heads, math.sqrt(d_model)

    def forward(self, src, tgt, src_mask, tgt_mask):
        memory = self.encoder(
            self.src_lut(src) * self.scale + self.pe[: src.size(1)],
            src_key_padding_mask=_key_padding(src_mask),
        )
        attn_mask = None
        if tgt_mask is not None:  # ours [B, 1, T, T] (True = may attend) -> PyTorch's [B * h, T, T]
            mask = tgt_mask.expand(tgt.size(0), 1, tgt.size(1), tgt.size(1))
            attn_mask = oracles.torch_attn_mask(mask.repeat_interleave(self.n_heads, dim=1).flatten(0, 1))
        return self.decoder(
            self.tgt_lut(tgt) * self.scale + self.pe[: tgt.size(1)],
            memory,
            tgt_mask=attn_mask,
            memory_key_padding_mask=_key_padding(src_mask),
        )

    def course_state(self) -> dict[str, torch.Tensor]:
        """Its weights under the lesson's names (src_embed, tgt_embed, positional, encoder, ...)."""
        return {
            "src_embed.lut.weight": self.src_lut.weight.detach().clone(),
            "tgt_embed.lut.weight": self.tgt_lut.weight.detach().clone(),
            "positional.pe": self.pe.clone(),
            **oracles.prefixed("encoder", oracles.stack_state(self.encoder)),
            **oracles.prefixed("decoder", oracles.stack_state(self.decoder)),
            "generator.proj.weight": self.generator.proj.weight.detach().clone(),
            "generator.proj.bias": self.generator.proj.bias.detach().clone(),
        }


class Relaid(nn.Module):
    """A StandIn whose weights are cut into parameters as another model cuts them: one parameter
    for each of ``layout``'s names (the lesson's names, which a learner's Transformer holds), so
    that code treating each parameter on its own (a clip per parameter) treats the same pieces as
    on that model. It computes what the StandIn computes, from these pieces; a weight that
    ``layout`` leaves out stays fixed, as a buffer does. Built on the checks' side from names
    alone, it stands in for a model that cannot run such code here (the kernel's, under the judge)."""

    def __init__(self, stand_in: StandIn, layout: Sequence[str]):
        super().__init__()
        state = stand_in.course_state()
        odd = [name for name in layout if name not in state or name == "positional.pe"]
        if odd or len(set(layout)) != len(layout):
            raise ValueError(f"a layout names each of the lesson's weights at most once; got {odd or layout}")
        self.layout = list(layout)
        self.pieces = nn.ParameterList(nn.Parameter(state[name].clone()) for name in self.layout)
        self.fixed = {name: value.clone() for name, value in state.items() if name not in self.layout}
        self.template = [copy.deepcopy(stand_in)]  # in a list: its own parameters are not this module's
        self.order = [name for name in state if name != "positional.pe"]
        self.places = _places(stand_in, self.order)

    def course_state(self) -> dict[str, torch.Tensor]:
        """Its weights under the lesson's names, as StandIn.course_state gives them."""
        held = {name: piece.detach().clone() for name, piece in zip(self.layout, self.pieces, strict=True)}
        return {
            name: held[name] if name in held else self.fixed[name].clone()
            for name in [*self.order, "positional.pe"]
        }

    def _stand_in_parameters(self) -> dict[str, torch.Tensor]:
        """The StandIn's parameters, each gathered from the pieces (and the fixed weights)."""
        held = dict(zip(self.layout, self.pieces, strict=True))
        flat = torch.cat(
            [(held[name] if name in held else self.fixed[name]).reshape(-1) for name in self.order]
        )
        return {name: flat[where] for name, where in self.places.items()}

    def forward(self, src, tgt, src_mask, tgt_mask):
        template = self.template[0].train(self.training)
        return torch.func.functional_call(
            template, self._stand_in_parameters(), (src, tgt, src_mask, tgt_mask), strict=False
        )

    def generator(self, states: torch.Tensor) -> torch.Tensor:
        """The StandIn's generator on ``states``, with the pieces' projection."""
        proj = {key.removeprefix("generator."): value for key, value in self._stand_in_parameters().items()
                if key.startswith("generator.")}  # fmt: skip
        return torch.func.functional_call(self.template[0].generator, proj, (states,))


def _places(stand_in: StandIn, order: list[str]) -> dict[str, torch.Tensor]:
    """For each of the StandIn's parameters, where each of its numbers lies among the lesson's
    weights laid end to end in ``order``: its course_state read from a copy whose every number is
    its own position."""
    numbered = copy.deepcopy(stand_in)
    shapes, start = {}, 0
    with torch.no_grad():
        for name, parameter in numbered.named_parameters():
            parameter.copy_(
                torch.arange(start, start + parameter.numel(), dtype=torch.float64).view_as(parameter)
            )
            shapes[name], start = (start, parameter.shape), start + parameter.numel()
    state = numbered.course_state()
    positions = torch.cat([state[name].reshape(-1) for name in order]).long().cpu()
    if not torch.equal(positions.sort().values, torch.arange(start)):
        raise ValueError("the lesson's weights are not the StandIn's numbers, each once")
    inverse = torch.empty(start, dtype=torch.long)
    inverse[positions] = torch.arange(start)
    return {
        name: inverse[first : first + shape.numel()].view(shape).to(DEVICE)
        for name, (first, shape) in shapes.items()
    }


# ---------------------------------------------------------------------------------------
# The oracle and the known mistakes
# ---------------------------------------------------------------------------------------


def oracle_step(model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None, clip=None) -> float:
    """The check's own train step: F.cross_entropy with ignore_index and label_smoothing; with
    ``clip`` (train_loop's), clip_grad_norm_ between backward and the optimizer's step."""
    model.train()
    log_probs = model.generator(model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"]))
    loss = F.cross_entropy(
        log_probs.reshape(-1, log_probs.size(-1)),
        batch["tgt_out"].reshape(-1),
        ignore_index=pad_id,
        label_smoothing=smoothing,
    )
    optimizer.zero_grad()
    loss.backward()
    if clip is not None:
        nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()


def loss_of(log_probs, target, pad_id, smoothing, ignore_padding=True):
    """The label-smoothed negative log-likelihood, as the lesson's sequence_loss computes it."""
    nll = -log_probs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # [B, T]
    loss = (1.0 - smoothing) * nll + smoothing * -log_probs.mean(dim=-1)
    keep = target != pad_id if ignore_padding else torch.ones_like(target, dtype=torch.bool)
    return loss[keep].sum() / keep.sum()


def _variant(
    model, batch, optimizer, pad_id, smoothing=0.0, scheduler=None, *,
    train=True, decoder_input="tgt_in", masks=True, swap_masks=False, generator=True, target="tgt_out",
    shift_again=False, use_smoothing=True, ignore_padding=True, zero_grad="before_backward", step=True,
    scheduler_first=False, use_scheduler=True, item=True, clip=None,
):  # fmt: skip
    """train_step with one thing done wrong, as a learner might write it."""
    if train:
        model.train()
    src_mask, tgt_mask = (batch["src_mask"], batch["tgt_mask"]) if masks else (None, None)
    if swap_masks:
        src_mask, tgt_mask = tgt_mask, src_mask
    states = model(batch["src"], batch[decoder_input], src_mask, tgt_mask)  # [B, T, D]
    log_probs = model.generator(states) if generator else states
    log_probs, wanted = shifted(log_probs, batch[target], shift_again)
    loss = loss_of(log_probs, wanted, pad_id, smoothing if use_smoothing else 0.0, ignore_padding)
    if zero_grad == "before_backward":
        optimizer.zero_grad()
    loss.backward()
    if zero_grad == "after_backward":
        optimizer.zero_grad()
    if clip is not None:  # the loop's option, written into the one plain step
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    if scheduler is not None and use_scheduler and scheduler_first:
        scheduler.step()
    if step:
        optimizer.step()
    if scheduler is not None and use_scheduler and not scheduler_first:
        scheduler.step()
    if zero_grad == "after_step":
        optimizer.zero_grad()
    return loss.item() if item else loss


def shifted(log_probs, target, again: bool) -> tuple:
    """(log_probs, target), or, ``again``, shifted once more as code written for an unshifted
    target does: the predictions but the last against the target but the first."""
    return (log_probs[:, :-1], target[:, 1:]) if again else (log_probs, target)


MISTAKES = core.catalogue(TRAIN_STEP, variant=_variant)


# ---------------------------------------------------------------------------------------
# One case: a model, a batch, SGD and StepLR; what two calls of a train_step leave behind
# ---------------------------------------------------------------------------------------


@dataclass
class Settings:
    """How a run trains: SGD's rate, StepLR's gamma, the label smoothing, whether a scheduler is
    passed (train_step's cases and train_loop's)."""

    lr: float = LR
    gamma: float = GAMMA
    smoothing: float = SMOOTHING
    use_scheduler: bool = True


@dataclass(kw_only=True)
class Case(Settings):
    """Everything a run needs: the model's sizes, its initial weights (a StandIn), the batch."""

    args: dict
    stand_in: StandIn
    batch: dict[str, torch.Tensor]
    pad_id: int


@dataclass
class Outcome:
    """What a train_step left after each of two calls: returned values, mode, weights, lr."""

    returned: list
    training: list[bool]
    weights: list[dict[str, torch.Tensor]]
    rates: list[float | None]
    gradients_left: bool = False  # after the second call: whether any .grad holds a number but 0


def make_case(args: dict, batch: int, t_src: int, t_tgt: int, pad_id: int, generator: torch.Generator,
              **settings) -> Case:  # fmt: skip
    """A StandIn with seeded weights and a batch in make_batch's format: src [B, T_src] and the
    target <s> y ... </s> padded with pad_id (the last rows shorter), tgt_in / tgt_out shifted."""
    stand_in = StandIn(args, generator)
    batch_made = random_batch(args, batch, t_src, t_tgt, pad_id, generator)
    return Case(args=args, stand_in=stand_in, batch=batch_made, pad_id=pad_id, **settings)


def random_batch(args: dict, batch: int, t_src: int, t_tgt: int, pad_id: int,
                 generator: torch.Generator) -> dict[str, torch.Tensor]:  # fmt: skip
    """A batch in make_batch's format, its rows after the first padded with pad_id at the end."""
    real = [t for t in range(args["tgt_vocab"]) if t != pad_id]
    src_real = [t for t in range(args["src_vocab"]) if t != pad_id]

    def tokens(choices, *shape):
        index = torch.randint(0, len(choices), shape, generator=generator)
        return torch.tensor(choices)[index]

    src = tokens(src_real, batch, t_src)
    target = tokens(real, batch, t_tgt + 1)  # <s> y_1 ... y_n </s>
    for row in range(1, batch):  # every row but the first ends early (padding after it)
        src[row, t_src - min(row, t_src - 1) :] = pad_id
        target[row, t_tgt + 1 - min(row, t_tgt - 1) :] = pad_id  # <s> and y_1 stay
    # contiguous, as make_batch's tensors are: an honest batch["tgt_out"].view(-1) must work here
    tgt_in, tgt_out = target[:, :-1].contiguous().to(DEVICE), target[:, 1:].contiguous().to(DEVICE)
    src = src.to(DEVICE)
    causal = oracles.causal(t_tgt, DEVICE)
    return {
        "src": src,
        "src_mask": (src != pad_id)[:, None, None, :],
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "tgt_mask": (tgt_in != pad_id)[:, None, None, :] & causal,
    }


def arguments_for(case: Case, model, optim) -> tuple:
    optimizer = optim.SGD(model.parameters(), lr=case.lr)
    scheduler = (
        optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=case.gamma) if case.use_scheduler else None
    )
    return optimizer, scheduler


def current_rate(scheduler, optimizer) -> float:
    if scheduler is not None:
        return float(scheduler.get_last_lr()[0])
    return float(optimizer.param_groups[0]["lr"])


def weights_of(model, names) -> dict[str, torch.Tensor]:
    state = model.state_dict()
    return {name: state[name].detach().clone() for name in names}


def stale_gradients(model, batch: dict[str, torch.Tensor], optim) -> None:
    """Give ``model`` the gradients of another loss, as an earlier backward leaves them (a step
    must clear them first): the mean log-probability of every position's first token. Each
    operation is ``optim``'s own torch's, where the model lives: under the judge, the kernel's, so
    that the backward reaches the kernel's model. A model that cannot run is left as it is: the
    step's own call will say why."""
    torch_of_model = getattr(getattr(optim, "swa_utils", None), "torch", torch)  # torch.optim imports it
    try:
        with torch.enable_grad(), exact_matmul():
            states = model(batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
            first = torch_of_model.select(model.generator(states), -1, 0)
            torch_of_model.autograd.backward(torch_of_model.mean(first))
    except Exception:  # noqa: BLE001 - the learner's model; its crash is reported by the step's call
        model.zero_grad(set_to_none=True)


def gradients_left(model, optimizer, read, names) -> bool:
    """Whether the call left gradients that would move a weight: one more step of the call's own
    SGD (no momentum), taken after all else was read, changes a weight only where a ``.grad`` holds
    a number other than 0. Asked of the optimizer, not of the parameters' ``.grad``: under the
    judge the model and its optimizer live in the kernel, and a parameter comes back as a copy
    without its gradient, so reading ``.grad`` there would always say "none"."""
    if float(optimizer.param_groups[0]["lr"]) == 0.0:
        return False
    before = read(model, names)
    optimizer.step()
    after = read(model, names)
    return any(not torch.equal(value, after[name]) for name, value in before.items())


def two_calls(call, case: Case, model, optim, read, names) -> Outcome:
    """``call(*arguments)`` twice on ``model`` with a fresh SGD (and StepLR), the model holding
    stale gradients before the first (``stale_gradients``); record the outcome."""
    optimizer, scheduler = arguments_for(case, model, optim)
    stale_gradients(model, case.batch, optim)
    outcome = Outcome([], [], [], [])
    for _ in range(2):
        args = (model, case.batch, optimizer, case.pad_id, case.smoothing)
        with torch.enable_grad():
            returned = call(*args, scheduler) if case.use_scheduler else call(*args)
        outcome.returned.append(returned)
        outcome.training.append(bool(model.training))
        outcome.weights.append(read(model, names))
        outcome.rates.append(current_rate(scheduler, optimizer))
    outcome.gradients_left = gradients_left(model, optimizer, read, names)
    return outcome


def stand_in_weights(model: StandIn, names: object) -> dict[str, torch.Tensor]:
    """A StandIn's weights under the lesson's names, its positional table left out (``names``,
    which a learner's model needs to be read, is not used)."""
    return {name: value for name, value in model.course_state().items() if name != "positional.pe"}


def stand_in_outcome(fn, case: Case) -> Outcome:
    """``fn`` run on a copy of the case's StandIn (its weights under the lesson's names)."""
    model = copy.deepcopy(case.stand_in).eval()

    with exact_matmul(), oracles.fastpath_disabled():
        return two_calls(fn, case, model, torch.optim, stand_in_weights, None)


def expected_outcome(case: Case) -> Outcome:
    return stand_in_outcome(oracle_step, case)


def outcomes_of(mistakes: list[core.Mistake], run, case) -> list[tuple[core.Mistake, object | None]]:
    """Each of ``mistakes`` with what ``run(mistake.compute, case)`` leaves (None when it crashes);
    the same case again (a class's visible checks) is not run again (``memo``)."""
    return memo.remembered(_outcomes_of, tuple(mistakes), run, case)


def _outcomes_of(mistakes: tuple[core.Mistake, ...], run, case) -> list[tuple[core.Mistake, object | None]]:
    outcomes = []
    for mistake in mistakes:
        try:
            with warnings.catch_warnings():  # PyTorch's warning about the scheduler's order: expected
                warnings.simplefilter("ignore")
                outcomes.append((mistake, run(mistake.compute, case)))
        except Exception:  # noqa: BLE001 - a mistake that crashes here matches nothing
            outcomes.append((mistake, None))
    return outcomes


def mistake_outcomes(case: Case) -> list[tuple[core.Mistake, Outcome | None]]:
    """Each of train_step's known mistakes with its outcome on this case (None when it crashes here)."""
    return outcomes_of(MISTAKES, stand_in_outcome, case)


# ---------------------------------------------------------------------------------------
# Comparing the learner's outcome with the oracle's, stage by stage
# ---------------------------------------------------------------------------------------

# PyTorch's warnings that name a mistake of the step: a failure quotes them, so the learner reads them
TELLING_WARNINGS = ("lr_scheduler.step()",)


@contextlib.contextmanager
def telling_warnings_quoted() -> Iterator[None]:
    """A CheckFailure raised inside the block ends with the telling warnings (``TELLING_WARNINGS``)
    that PyTorch gave inside it, each once: 'PyTorch warned while your code ran: "Detected call
    of `lr_scheduler.step()` before `optimizer.step()` ..."'. Other warnings pass as usual."""
    failure = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except core.CheckFailure as raised:
            failure = raised
    telling = [w for w in caught if any(words in str(w.message) for words in TELLING_WARNINGS)]
    for w in caught:
        if w not in telling:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if failure is None:
        return
    told = dict.fromkeys(str(w.message).split(" See more")[0][:300] for w in telling)
    if not told:
        raise failure
    quoted = " ".join(f'"{text}"' for text in told)
    raise core.CheckFailure(f"{failure} PyTorch warned while your code ran: {quoted}") from failure.__cause__


def number(value) -> float:
    """A returned loss as a number (a one-element tensor's value), NaN when it is none."""
    if isinstance(value, torch.Tensor):
        return float(value.detach().reshape(-1)[0]) if value.numel() == 1 else math.nan
    return float(value) if isinstance(value, numbers.Real) else math.nan


def same_loss(a, b) -> bool:
    return math.isclose(number(a), number(b), rel_tol=1e-7, abs_tol=1e-9)


def same_weights(a: dict, b: dict) -> bool:
    return all(core.same(a[name], b[name]) for name in b)


def largest_change(a: dict, b: dict) -> tuple[str, float]:
    """The parameter where ``a`` and ``b`` differ most, and by how much."""
    gaps = {name: float((a[name].double() - b[name].double().to(a[name].device)).abs().max()) for name in b}
    name = max(gaps, key=gaps.get)
    return name, gaps[name]
