"""Checks for lesson 02: sinusoidal_encoding(max_len, d_model) and PositionalEncoding.

Oracles: the formula of the paper evaluated in float64 with Python's math
module (pe[pos, 2i] = sin(pos / 10000^(2i/D)), pe[pos, 2i+1] = cos(...)), and
x + pe[:T] for the module, with that table loaded into its buffer ``pe``.
Inputs: max_len=20 and D=10 for the table, so that every column pair and
position shows; for the module B=2, T=5, D=8, max_len=12, all different, so
that slicing the wrong axis cannot broadcast by accident. A float32 table is
compared with float32 tolerances.
"""

import math

import torch

from autograder.checks import core, shape_errors
from autograder.checks.answers import Expected, answer
from autograder.checks.device import DEVICE, DTYPE, random_tensor
from autograder.checks.eval_mode import dropped_pattern

TABLE = "sinusoidal_encoding"
MODULE = "PositionalEncoding"
MAX_LEN, D_TABLE = 20, 10  # the table's check
B, T, D, M = 2, 5, 8, 12  # the module's check: T < max_len = M, and B, T, D, M all different
PE_LETTERS, X_LETTERS = "[max_len, D]", "[B, T, D]"


# ---------------------------------------------------------------- the table


def formula(max_len: int, d_model: int) -> torch.Tensor:
    """The paper's table, entry by entry in float64 with Python's math: [max_len, D] on DEVICE."""
    rows = []
    for pos in range(max_len):
        row = []
        for column in range(d_model):
            angle = pos / 10000.0 ** ((column - column % 2) / d_model)  # column 2i and 2i+1 share 2i
            row.append(math.sin(angle) if column % 2 == 0 else math.cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64).reshape(max_len, d_model).to(DEVICE)


def _variant(
    max_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    start: int = 0,
    sign: float = -1.0,
    log=math.log,
    exponent: str = "2i",
    halves: bool = False,
    cos_first: bool = False,
    cos_next_column: bool = False,
) -> torch.Tensor:
    """The table written with one thing changed, in float32 as a learner's code computes it
    (``cos_next_column``: each cosine's exponent taken at its own column, i + 1, not its pair's)."""
    position = torch.arange(start, start + max_len, dtype=torch.float32).unsqueeze(1)  # [max_len, 1]
    pe = torch.zeros(max_len, d_model)
    if exponent == "column":  # 10000^(-j/D) for every column j: each column gets its own frequency
        angle = position * torch.exp(
            torch.arange(d_model, dtype=torch.float32) * (sign * log(base) / d_model)
        )
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle[:, 0::2]), torch.cos(angle[:, 1::2])
        return pe
    denominator = d_model
    if exponent == "2i":
        numerator = torch.arange(0, d_model, 2, dtype=torch.float32)  # 2i
    elif exponent == "4i":  # the 2 counted twice: 2 * (0, 2, 4, ...)
        numerator = 2 * torch.arange(0, d_model, 2, dtype=torch.float32)
    else:  # "i" or "i/(D/2-1)": the pair index without the 2, over D or over D/2 - 1
        numerator = torch.arange(d_model // 2, dtype=torch.float32)
        if exponent == "i/(D/2-1)":  # tensor2tensor's and fairseq's timescales
            denominator = max(d_model // 2 - 1, 1)
    angle = position * torch.exp(numerator * (sign * log(base) / denominator))  # [max_len, D/2]
    first, second = torch.sin(angle), torch.cos(angle)
    if cos_next_column:  # the numerator of column i + 1, counted as the sine's is
        step = numerator[1] - numerator[0] if numerator.numel() > 1 else 2.0
        second = torch.cos(position * torch.exp((numerator + step / 2) * (sign * log(base) / denominator)))
    if cos_first:
        first, second = second, first
    if halves:
        return torch.cat((first, second), dim=1)
    pe[:, 0::2], pe[:, 1::2] = first, second
    return pe


TABLE_MISTAKES = core.catalogue(
    TABLE,
    {
        "log10 instead of the natural log": lambda max_len, d_model: _variant(
            max_len, d_model, log=math.log10
        ),
        "the log is missing": lambda max_len, d_model: _variant(max_len, d_model, log=lambda base: base),
    },
    variant=_variant,
)


def _expect_float(exercise: str, what: str, table: torch.Tensor) -> None:
    if table.dtype not in (torch.float32, torch.float64):
        raise core.CheckFailure(
            f"{exercise}: expected {what} in float32 (PyTorch's default) or float64, got {table.dtype}; "
            "make the positions floats (torch.arange(max_len, dtype=torch.float32)) and do not convert."
        )


def _table_values(what: str, exercise: str, table, expected: torch.Tensor, mistakes) -> None:
    """A table against the formula, in float32 tolerances unless both are float64."""
    table = core.expect_tensor(exercise, what, table).detach()
    _expect_float(exercise, what, table)
    if table.dtype != torch.float64:
        expected = expected.to(torch.float32)  # float32 tolerances for a float32 table
    core.expect_close(exercise, what, table, expected, PE_LETTERS, mistakes)


def compare_table(fn, max_len: int, d_model: int, expected: Expected | None = None) -> None:
    """sinusoidal_encoding(max_len, d_model) against ``expected()`` (default: the formula),
    computed after the learner's call."""
    table = core.call(TABLE, fn, max_len, d_model)
    right = formula(max_len, d_model) if expected is None else expected()
    _table_values("the table", TABLE, table, right, core.mistake_outputs(TABLE_MISTAKES, max_len, d_model))


def check_sinusoidal_shape(fn) -> None:
    """A float tensor of shape [max_len, D]."""
    table = core.expect_tensor(TABLE, "the table", core.call(TABLE, fn, MAX_LEN, D_TABLE))
    core.expect_shape(TABLE, "the table", table, PE_LETTERS, (MAX_LEN, D_TABLE))
    _expect_float(TABLE, "the table", table)
    core.passed(f"{TABLE}(max_len={MAX_LEN}, d_model={D_TABLE}) returns a float tensor {PE_LETTERS}")


def check_sinusoidal_values(fn) -> None:
    """Equal to the formula evaluated with Python's math in float64."""
    compare_table(fn, MAX_LEN, D_TABLE)
    core.passed(f"{TABLE} equals the paper's formula: sin in the even columns, cos in the odd ones")


def expect_odd_raises(fn, max_len: int, d_model: int) -> None:
    """An odd d_model must raise ValueError."""
    try:
        table = core.call(TABLE, fn, max_len, d_model)
    except core.CheckFailure as failure:
        if isinstance(failure.__cause__, ValueError):
            return
        if failure.__cause__ is None or isinstance(failure.__cause__, NotImplementedError):
            raise
        raise core.CheckFailure(
            f"{TABLE}(max_len={max_len}, d_model={d_model}) raised {type(failure.__cause__).__name__}: "
            f"{failure.__cause__}. An odd d_model must raise a ValueError that says why (sin and cos "
            "come in pairs): check `d_model % 2` first."
        ) from failure.__cause__
    shape = list(table.shape) if isinstance(table, torch.Tensor) else type(table).__name__
    raise core.CheckFailure(
        f"{TABLE}(max_len={max_len}, d_model={d_model}) returned {shape} instead of raising ValueError: "
        "an odd d_model has no partner cos column for its last sin column; check `d_model % 2` first."
    )


def check_sinusoidal_odd(fn) -> None:
    """An odd d_model is a ValueError."""
    expect_odd_raises(fn, 6, 7)
    core.passed(f"{TABLE} raises ValueError for an odd d_model")


# ---------------------------------------------------------------- the module


def _length(self) -> int:
    return self.pe.size(0)


def _too_long(self, x):
    if x.size(1) > _length(self):
        raise ValueError(f"T={x.size(1)} > max_len={_length(self)}")


def _length_check_ge(self, x):
    if x.size(1) >= _length(self):
        raise ValueError(f"T={x.size(1)} >= max_len={_length(self)}")
    return self.dropout(x + self.pe[: x.size(1)])


def _checked(self, x):
    """x itself, after the length check every dropout mistake keeps."""
    _too_long(self, x)
    return x


def _add_in_place(self, x):
    _too_long(self, x)
    x += self.pe[: x.size(1)]
    return x


FORWARD_MISTAKES = core.catalogue(
    MODULE,
    {
        "pe multiplied, not added": lambda self, x: x * self.pe[: x.size(1)],
        "pe offset by one position": lambda self, x: x + self.pe[1 : x.size(1) + 1],
        "pe sliced on the wrong axis": lambda self, x: x + self.pe[:, : x.size(1)],
        "the whole table added": lambda self, x: x + self.pe,
        "T taken from the batch axis": lambda self, x: x + self.pe[: x.size(0)],
        "rows picked by the batch index": lambda self, x: x + self.pe[: x.size(0)].unsqueeze(1),
        "T taken from the feature axis": lambda self, x: x + self.pe[: x.size(-1)],
        "x changed in place": _add_in_place,
    },
)
LENGTH_MISTAKES = core.catalogue(
    MODULE,
    {
        "no check that T <= max_len": lambda self, x: self.dropout(x + self.pe[: x.size(1)]),
        "T == max_len rejected": _length_check_ge,
    },
)
DROPOUT_MISTAKES = core.catalogue(
    MODULE,
    {
        "no dropout": lambda self, x: _checked(self, x) + self.pe[: x.size(1)],
        "dropout before the addition": lambda self, x: self.dropout(_checked(self, x)) + self.pe[: x.size(1)],
        "dropout also in eval mode": lambda self, x: torch.nn.functional.dropout(
            _checked(self, x) + self.pe[: x.size(1)], self.dropout.p, training=True
        ),
    },
)
MODULE_MISTAKES = FORWARD_MISTAKES + LENGTH_MISTAKES + DROPOUT_MISTAKES


def _outcomes(module, x, mistakes) -> list[tuple[core.Mistake, object]]:
    """Each mistake with its output on its own copy of x (one of them changes x in place), or
    the exception it raises."""
    return [outcome for mistake in mistakes for outcome in core.mistake_outputs([mistake], module, x.clone())]


def _forward(module, x: torch.Tensor, mistakes=FORWARD_MISTAKES) -> torch.Tensor:
    """The learner's forward on x: a crash that a known mistake makes too is named; so is
    an x changed in place."""
    before = x.clone()
    try:
        out = core.call(MODULE, module, x)
    except core.CheckFailure as failure:
        error = failure.__cause__
        if error is None or isinstance(error, NotImplementedError):
            raise
        for mistake, outcome in _outcomes(module, before, mistakes):
            # only a failed broadcast is specific enough to name a mistake by its error
            if (
                isinstance(outcome, RuntimeError)
                and shape_errors.mismatched_sizes(outcome)
                and (shape_errors.error_key(outcome) == shape_errors.error_key(error))
            ):
                raise core.CheckFailure(
                    f"{MODULE}: your code fails like a known mistake, {mistake.said()}. {mistake.hint}"
                ) from error
        if shape_errors.mismatched_sizes(error):
            raise core.CheckFailure(
                f"{failure} Adding the table did not broadcast: x is {X_LETTERS} = {list(x.shape)} and "
                f"pe is {PE_LETTERS} = {list(module.pe.shape)}; add its first T rows, self.pe[:T]."
            ) from error
        raise
    if not torch.equal(before, x):
        in_place = core.named(FORWARD_MISTAKES, "x changed in place")
        raise core.CheckFailure(f"{MODULE} changed its input `x` in place. {in_place.hint}")
    return core.expect_tensor(MODULE, "the output", out).detach()


def compare_module(module, x: torch.Tensor, expected: Expected) -> None:
    """The learner's forward against ``expected()`` (computed after the learner's call), naming a
    known mistake when it matches one."""
    out = _forward(module, x)
    wrong = [(m, o) for m, o in _outcomes(module, x, FORWARD_MISTAKES) if isinstance(o, torch.Tensor)]
    core.expect_close(MODULE, "the output", out, expected(), X_LETTERS, wrong)


def table_of(module) -> torch.Tensor:
    """The module's buffer `pe`: a registered, persistent buffer, not a parameter."""
    parameters = dict(module.named_parameters())
    if "pe" in parameters:
        raise core.CheckFailure(
            f"{MODULE}: pe is an nn.Parameter, so an optimizer would train it; the table is fixed. "
            "Register it as a buffer: self.register_buffer('pe', sinusoidal_encoding(max_len, d_model))."
        )
    if "pe" not in dict(module.named_buffers()):
        found = type(getattr(module, "pe", None)).__name__ if hasattr(module, "pe") else "no attribute pe"
        raise core.CheckFailure(
            f"{MODULE}: expected a buffer named pe, found {found}. A plain tensor attribute does not "
            "move with .to(device) and is not saved with the model: "
            "self.register_buffer('pe', sinusoidal_encoding(max_len, d_model))."
        )
    if "pe" not in module.state_dict():
        raise core.CheckFailure(
            f"{MODULE}: the buffer pe is not in the state_dict (persistent=False); register it with "
            "self.register_buffer('pe', ...), which keeps it persistent."
        )
    if parameters:
        raise core.CheckFailure(
            f"{MODULE}: expected no trainable parameters, found {sorted(parameters)}; the table is a buffer."
        )
    return module.pe


def _module_with_table(cls, d_model: int, max_len: int, dropout: float = 0.0):
    """The learner's module (float64, DEVICE, eval) with the formula's table loaded into pe."""
    module = core.build(MODULE, cls, d_model, max_len=max_len, dropout=dropout)
    table_of(module)
    core.load_weights(MODULE, module, {"pe": formula(max_len, d_model)})
    return module


def check_positional_encoding_buffer(cls) -> None:
    """pe is a buffer [max_len, D] holding the sinusoidal table, and moves with .to()."""
    module = core.call(MODULE, cls, D, max_len=M)
    table = table_of(module)
    core.expect_tensor(MODULE, "pe", table)
    core.expect_shape(MODULE, "the buffer pe", table, PE_LETTERS, (M, D))
    expected = formula(M, D)
    wrong = core.mistake_outputs(TABLE_MISTAKES, M, D)
    try:
        _table_values("the buffer pe", MODULE, table.to(DEVICE), expected, wrong)
    except core.CheckFailure as failure:
        detail = str(failure).removeprefix(f"{MODULE}: ").replace("your output", "the table")
        raise core.CheckFailure(
            f"{MODULE}: the buffer pe should hold sinusoidal_encoding(max_len, d_model); check {TABLE} "
            f"first. {detail[:1].upper()}{detail[1:]}"
        ) from None
    moved = module.to(device=DEVICE, dtype=DTYPE)
    core.expect_device(MODULE, "the buffer pe after .to(device)", moved.pe, DEVICE)
    core.passed(f"{MODULE} keeps the sinusoidal table in a buffer pe {PE_LETTERS}, not a parameter")


def check_positional_encoding_values(cls) -> None:
    """forward(x) = x + pe[:T] for T < max_len, in eval mode, with the formula's table in pe."""
    module = _module_with_table(cls, D, M)
    x = random_tensor(B, T, D, seed=3)
    compare_module(module, x, answer(lambda: x + formula(M, D)[:T]))
    core.passed(f"{MODULE} returns x + pe[:T] of shape {X_LETTERS} = [{B}, {T}, {D}] (max_len = {M})")


def expect_length_handling(module, d_model: int, max_len: int, batch: int, seed: int) -> None:
    """T == max_len works; T == max_len + 1 raises ValueError."""
    x = random_tensor(batch, max_len, d_model, seed=seed)
    try:
        out = core.call(MODULE, module, x)
    except core.CheckFailure as failure:
        if isinstance(failure.__cause__, ValueError):
            hint = core.named(LENGTH_MISTAKES, "T == max_len rejected").hint
            raise core.CheckFailure(
                f"{MODULE} raised ValueError for T = max_len = {max_len}. {hint}"
            ) from failure.__cause__
        raise
    out = core.expect_tensor(MODULE, "the output", out).detach()
    core.expect_close(MODULE, "the output for T = max_len", out, x + module.pe, X_LETTERS)
    longer = random_tensor(batch, max_len + 1, d_model, seed=seed + 1)
    hint = core.named(LENGTH_MISTAKES, "no check that T <= max_len").hint
    try:
        out = core.call(MODULE, module, longer)
    except core.CheckFailure as failure:
        error = failure.__cause__
        if isinstance(error, ValueError):
            return
        if error is None or isinstance(error, NotImplementedError):
            raise
        raise core.CheckFailure(
            f"{MODULE} raised {type(error).__name__} for T = {max_len + 1} > max_len = {max_len}: "
            f"{error}. {hint}"
        ) from error
    raise core.CheckFailure(
        f"{MODULE} returned an output for T = {max_len + 1} > max_len = {max_len}. {hint}"
    )


def check_positional_encoding_too_long(cls) -> None:
    """T == max_len fits; T > max_len is a ValueError."""
    module = _module_with_table(cls, D, M)
    expect_length_handling(module, D, M, B, seed=4)
    core.passed(f"{MODULE} accepts T = max_len and raises ValueError for T > max_len")


def expect_dropout(module, x: torch.Tensor, p: float, seed: int) -> None:
    """With dropout p: eval mode adds the table and drops nothing; train mode zeroes entries of
    x + pe[:T] and scales the rest by 1 / (1 - p)."""
    table = module.pe[: x.size(1)].detach().clone()  # the module's own, as it was before the call
    module.eval()
    out = _forward(module, x, [])
    target = x + table
    if not torch.allclose(out, target):
        if dropped_pattern(out, target):
            hint = core.named(DROPOUT_MISTAKES, "dropout also in eval mode").hint
            raise core.CheckFailure(f"{MODULE}: in eval mode some outputs are zeroed. {hint}")
        core.expect_close(MODULE, f"the output in eval mode with dropout={p}", out, target, X_LETTERS)
    module.train()
    try:
        with torch.random.fork_rng(devices=[x.device] if x.device.type == "cuda" else []):
            torch.manual_seed(seed)
            out = _forward(module, x, [])
    finally:
        module.eval()
    if dropped_pattern(out, target, p):
        return
    if torch.allclose(out, target):
        raise core.CheckFailure(
            f"{MODULE}: in training mode nothing is dropped out. "
            + core.named(DROPOUT_MISTAKES, "no dropout").hint
        )
    pe = module.pe[: x.size(1)]
    if dropped_pattern(out - pe, x, p):
        hint = core.named(DROPOUT_MISTAKES, "dropout before the addition").hint
        raise core.CheckFailure(f"{MODULE}: in training mode the output is wrong. {hint}")
    raise core.CheckFailure(
        f"{MODULE}: in training mode with dropout={p}, every output entry must be 0 (dropped) or "
        f"(x + pe[:T]) / (1 - p) (kept and rescaled); yours are not. Apply nn.Dropout(dropout) "
        "to the sum x + self.pe[:T]."
    )


def check_positional_encoding_dropout(cls) -> None:
    """dropout=0.5: nothing dropped in eval mode; in train mode, dropout on x + pe[:T]."""
    module = _module_with_table(cls, D, M, dropout=0.5)
    expect_dropout(module, random_tensor(B, T, D, seed=5), 0.5, seed=6)
    core.passed(f"{MODULE} applies dropout to x + pe[:T] in training mode only")


CATALOGUE = {TABLE: TABLE_MISTAKES, MODULE: MODULE_MISTAKES}
