"""The pieces every lesson's checks are made of.

A check calls the learner's code on inputs chosen so that bugs cannot hide,
compares the result with an oracle (PyTorch's own modules or a formula), and
when the result is wrong, compares it with the outputs of the known mistakes
so that the message can name the mistake. Failures raise ``CheckFailure``,
whose message is written for the learner.
"""

import contextlib
import contextvars
import functools
import inspect
import math
import tomllib
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from autograder.checks.device import DEVICE, DTYPE, exact_matmul, tolerance
from autograder.checks.failure import CheckFailure
from autograder.checks.shape_errors import error_key, not_contiguous, sizes_clause
from autograder.lessons import CPP_EXERCISES, EXERCISES

EXERCISE_NAMES = {name for lesson in EXERCISES.values() for name in lesson}


@dataclass(frozen=True)
class Mistake:
    """A common wrong answer: its name, the hint a learner gets, and how to compute its output.

    ``compute`` takes the same arguments as the exercise (for a module, the
    learner's module comes first, so its parameters can be used) and returns
    what the mistaken code would return.
    """

    name: str
    hint: str
    compute: Callable[..., Any]

    def message(self, exercise: str) -> str:
        return f"{exercise}: your output matches a known mistake, {self.said()}. {self.hint}"

    def said(self) -> str:
        """The name, for a message that names this mistake; noted where ``naming_noted`` listens
        (the judge records which catalogued mistakes a wrong answer made, from the entries)."""
        noted = _NAMED.get()
        if noted is not None and self.name not in noted:
            noted.append(self.name)
        return self.name


_NAMED: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("named", default=None)


@contextlib.contextmanager
def naming_noted() -> Iterator[list[str]]:
    """The names of the catalogued mistakes that the checks name inside the block, in order."""
    noted: list[str] = []
    token = _NAMED.set(noted)
    try:
        yield noted
    finally:
        _NAMED.reset(token)


CATALOGUE_FOLDER = Path(__file__).with_name("catalogue")
ENTRY_KEYS = {"name", "hint", "hint_cpp", "switch", "shared_with"}


@functools.cache
def catalogue_data() -> dict[str, tuple[dict, ...]]:
    """exercise -> its mistakes as catalogue/*.toml writes them (name, hint, maybe a switch), in order.

    An entry with ``shared_with = "<exercise>"`` instead of a hint is that exercise's mistake of
    the same name, written once there: it takes that entry's hint, or, for an exercise written in
    C++ (``CPP_EXERCISES``), that entry's ``hint_cpp`` where it has one: the same mistake told in
    the learner's language."""
    data: dict[str, tuple[dict, ...]] = {}
    for path in sorted(CATALOGUE_FOLDER.glob("*.toml")):
        with path.open("rb") as file:
            for exercise, entries in tomllib.load(file).items():
                odd = [e for e in entries if _entry_odd(e)]
                if exercise in data or odd:
                    raise ValueError(
                        f"{path.name}: {exercise} is catalogued twice, or an entry lacks its name and its "
                        f"hint (or shared_with), or has other keys than name, hint, switch and "
                        f"shared_with (and hint_cpp beside a hint): {odd}"
                    )
                data[exercise] = tuple(entries)
    return {
        exercise: tuple(_shared(data, entry, exercise in CPP_EXERCISES) for entry in entries)
        for exercise, entries in data.items()
    }


def _entry_odd(entry: dict) -> bool:
    """Whether a catalogue entry lacks its name, has both or neither of hint and shared_with, has
    a hint_cpp without a hint, or has a key of its own."""
    hint_or_shared = ("hint" in entry) != ("shared_with" in entry)
    cpp_alone = "hint_cpp" in entry and "hint" not in entry
    return "name" not in entry or not hint_or_shared or cpp_alone or bool(entry.keys() - ENTRY_KEYS)


def _shared(data: dict[str, tuple[dict, ...]], entry: dict, in_cpp: bool) -> dict:
    """``entry`` with the hint of the mistake it shares, when it shares one: its C++ words
    (``hint_cpp``), where it has them, for an exercise written in C++ (``in_cpp``)."""
    owner = entry.get("shared_with")
    if owner is None:
        return entry
    found = [e for e in data.get(owner, ()) if e["name"] == entry["name"] and "hint" in e]
    if not found:
        raise ValueError(f"no mistake {entry['name']!r} of {owner} to share (shared_with = {owner!r})")
    return {**entry, "hint": found[0].get("hint_cpp", found[0]["hint"]) if in_cpp else found[0]["hint"]}


def catalogue(
    exercise: str,
    computes: Mapping[str, Callable[..., Any]] | None = None,
    variant: Callable[..., Any] | None = None,
) -> list[Mistake]:
    """The exercise's mistakes, with their names and hints from its data file (catalogue/*.toml).

    Each is computed by ``computes[name]``, or, for an entry with a ``switch``, by
    ``variant(*args, **switch)``: the reference written with that one switch flipped. The
    result keeps the file's order. A compute without an entry is a ValueError; which entries
    a module computes where is proven complete by tests/test_catalogue.py.
    """
    computes = dict(computes or {})
    entries = catalogue_data().get(exercise)
    if not entries:
        raise ValueError(f"{exercise}: no mistakes in {CATALOGUE_FOLDER} (are its .toml files installed?)")
    mistakes = []
    for entry in entries:
        switch = entry.get("switch")
        if switch is not None and variant is not None:
            mistakes.append(Mistake(entry["name"], entry["hint"], functools.partial(variant, **switch)))
        elif entry["name"] in computes:
            mistakes.append(Mistake(entry["name"], entry["hint"], computes.pop(entry["name"])))
    if computes:
        raise ValueError(f"{exercise}: no entry in {CATALOGUE_FOLDER.name}/ for {sorted(computes)}")
    return mistakes


def named(mistakes: Sequence[Mistake], name: str) -> Mistake:
    """The mistake called ``name``; a KeyError names it when the catalogue has none such."""
    for mistake in mistakes:
        if mistake.name == name:
            return mistake
    raise KeyError(f"no mistake called {name!r} in this catalogue")


def passed(message: str) -> None:
    """Tell the learner what just passed, in one line."""
    print(f"✓ {message}")


def call(exercise: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the learner's code; an unimplemented stub or a crash becomes a message."""
    try:
        with exact_matmul():
            return fn(*args, **kwargs)
    except NotImplementedError as error:
        helper = _raised_in(error)
        if helper != exercise and helper in EXERCISE_NAMES:  # another exercise's stub, called here
            raise CheckFailure(
                f"{exercise} calls {helper}, which is not implemented yet: write {helper} "
                "(the exercise above) and run its cell, then run this check again."
            ) from error
        raise CheckFailure(
            f"{exercise} is not implemented yet: replace `raise NotImplementedError()` "
            "in its cell with your code, run that cell, then run this check again."
        ) from error
    except CheckFailure:
        raise
    except Exception as error:
        if isinstance(error, RuntimeError) and "view size is not compatible" in str(error):
            raise CheckFailure(not_contiguous(exercise, error)) from error
        clause = sizes_clause(error)
        text = str(error).rstrip(".") if clause else str(error)
        raise CheckFailure(
            f"{exercise} raised {type(error).__name__}: {text}{clause} (where: see below)"
        ) from error


def crash_of(failure: CheckFailure) -> Exception | None:
    """The learner's own exception behind ``failure``: None for a stub or a failure of a check."""
    cause = failure.__cause__
    if isinstance(cause, Exception) and not isinstance(cause, NotImplementedError):
        return cause
    return None


@contextlib.contextmanager
def crashes_named(exercise: str, outcomes: Callable[[], Sequence[tuple[Mistake, Any]]]) -> Iterator[None]:
    """A crash of the learner's code inside the block is named after the known mistake whose
    computation (``outcomes()``, computed only then) raises the same error, when one does."""
    try:
        yield
    except CheckFailure as failure:
        error = crash_of(failure)
        if error is None:
            raise
        for mistake, outcome in outcomes():
            if isinstance(outcome, Exception) and error_key(outcome) == error_key(error):
                raise CheckFailure(
                    f"{exercise}: your code fails like a known mistake, {mistake.said()}. {mistake.hint}"
                ) from error
        raise


def _raised_in(error: BaseException) -> str | None:
    """The name of the function in which ``error`` was raised (its innermost frame)."""
    frames = traceback.extract_tb(error.__traceback__)
    return frames[-1].name if frames else None


def output(exercise: str, fn: Callable[..., Any], inputs: Mapping[str, Any], what: str = "the output") -> Any:
    """``fn(*inputs.values())``, which must return a tensor and change none of its inputs in place
    (``inputs`` names them for the messages); the result, detached."""
    tensors = {name: value for name, value in inputs.items() if isinstance(value, torch.Tensor)}
    with unchanged(exercise, **tensors), torch.no_grad():
        result = call(exercise, fn, *inputs.values())
    return expect_tensor(exercise, what, result).detach()


def expect_parameter(exercise: str, fn: Callable[..., Any], name: str, signature: str) -> None:
    """Fail, naming the signature to keep, when ``fn`` takes no optional parameter ``name``."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): let the call itself tell
        return
    if not any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        raise CheckFailure(
            f"{exercise}: this check passes `{name}=...`, and your definition has no `{name}` "
            f"parameter. Keep the exercise's signature, `{signature}`, and use `{name}` in the body."
        )


@contextlib.contextmanager
def unchanged(exercise: str, **tensors: torch.Tensor) -> Iterator[None]:
    """Fail if the code run inside changed any of the named input tensors in place."""
    before = {name: tensor.detach().clone() for name, tensor in tensors.items()}
    yield
    for name, tensor in tensors.items():
        if not torch.equal(before[name], tensor.detach()):
            raise CheckFailure(
                f"{exercise} changed its input `{name}` in place (an in-place operation such as "
                "`+=`, `masked_fill_` or `div_`); compute a new tensor and leave the input as it was."
            )


def shape_text(letters: str, shape: Sequence[int]) -> str:
    """'[B, h, T_q, T_k]', (2, 4, 5, 7) -> '[B, h, T_q, T_k] = [2, 4, 5, 7]'"""
    return f"{letters} = {list(shape)}"


def same(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    """Same shape and values within the tolerance of the least precise dtype (``tolerance``)."""
    if actual.shape != expected.shape:
        return False
    actual, expected = actual.detach(), expected.detach().to(actual.device)
    common = torch.promote_types(actual.dtype, expected.dtype)
    return torch.allclose(
        actual.to(common), expected.to(common), equal_nan=True, **tolerance(actual, expected)
    )


def _matching_mistake(actual: torch.Tensor, mistakes: Sequence[tuple[Mistake, Any]]) -> Mistake | None:
    for mistake, output in mistakes:
        if isinstance(output, torch.Tensor) and same(actual, output):
            return mistake
    return None


def expect_attribute(exercise: str, module: Any, name: str, kind: type, what: str, how: str) -> Any:
    """``module.<name>``, which must be a ``kind`` (``what`` names it: 'an nn.Linear'); else the
    message says what was found and ``how`` to make it."""
    value = getattr(module, name, None)
    if not isinstance(value, kind):
        found = f"no attribute {name}" if value is None else type(value).__name__
        raise CheckFailure(f"{exercise}: expected an attribute `{name}` that is {what}, got {found}; {how}")
    return value


def expect_tensor(exercise: str, what: str, actual: Any) -> torch.Tensor:
    if not isinstance(actual, torch.Tensor):
        raise CheckFailure(f"{exercise}: expected {what} to be a torch.Tensor, got {type(actual).__name__}")
    return actual


def expect_shape(exercise: str, what: str, actual: torch.Tensor, letters: str, shape: Sequence[int]) -> None:
    if tuple(actual.shape) != tuple(shape):
        raise CheckFailure(
            f"{exercise}: expected {what} of shape {shape_text(letters, shape)}, got {list(actual.shape)}"
        )


def expect_dtype(exercise: str, what: str, actual: torch.Tensor, dtype: torch.dtype) -> None:
    if actual.dtype != dtype:
        raise CheckFailure(f"{exercise}: expected {what} of dtype {dtype}, got {actual.dtype}")


def expect_device(exercise: str, what: str, actual: torch.Tensor, device: torch.device) -> None:
    if actual.device.type != device.type:
        raise CheckFailure(
            f"{exercise}: expected {what} on the same device as the inputs ({device.type}), "
            f"got {actual.device.type}; create new tensors with device=... from an input"
        )


def expect_output_like(
    exercise: str, out: torch.Tensor, letters: str, shape: Sequence[int], x: torch.Tensor
) -> None:
    """The output's shape, and the dtype and device of the input ``x`` it was computed from."""
    expect_shape(exercise, "the output", out, letters, shape)
    expect_dtype(exercise, "the output", out, x.dtype)
    expect_device(exercise, "the output", out, x.device)


@dataclass(frozen=True)
class Cause:
    """A likely cause of a wrong result, known by the relation it leaves between the learner's
    result and the expected one: ``relation`` "offset" (yours = expected + ``value``) or
    "ratio" (yours = expected * ``value``), ``text`` what would do it, in the lesson's words
    ('the mean taken over all B·T positions, padding included')."""

    relation: str
    value: float
    text: str

    def __post_init__(self) -> None:
        if self.relation not in ("offset", "ratio"):
            raise ValueError(f"a Cause's relation is 'offset' or 'ratio', got {self.relation!r}")

    def fits(self, relation: str, value: float) -> bool:
        return relation == self.relation and math.isclose(value, self.value, rel_tol=1e-4, abs_tol=1e-6)


def _because(causes: Sequence[Cause], relations: Mapping[str, float]) -> str:
    """' (what <cause> gives)' for the first cause that fits one of the relations that hold."""
    for cause in causes:
        if any(cause.fits(relation, value) for relation, value in relations.items()):
            return f", which is what {cause.text} gives"
    return ""


def expect_close(
    exercise: str,
    what: str,
    actual: Any,
    expected: torch.Tensor,
    letters: str,
    mistakes: Sequence[tuple[Mistake, Any]] = (),
    where: str = "",
    causes: Sequence[Cause] = (),
) -> None:
    """Compare ``actual`` with ``expected``; on a mismatch, name the known mistake it matches.

    ``mistakes`` pairs each known mistake with its output on the same inputs.
    The order of the messages: a known mistake first (its hint is the most
    useful thing to say), then NaN, then the shape, then the size of the error.
    ``where`` ends a message that names no mistake: what is known to be right, where to look.
    ``causes``: the exercise's likely causes of an offset or a ratio (see ``Cause``).
    """
    actual = expect_tensor(exercise, what, actual)
    if same(actual, expected):
        return
    mistake = _matching_mistake(actual, mistakes)
    if mistake is not None:
        raise CheckFailure(mistake.message(exercise))
    if torch.isnan(actual).any() and not torch.isnan(expected).any():
        count = int(torch.isnan(actual).sum())
        raise CheckFailure(
            f"{exercise}: {what} contains NaN in {count} of {actual.numel()} entries. "
            "NaN usually comes from a softmax over a row that is all -inf, or from a "
            "square root or log of a negative number."
        )
    expect_shape(exercise, what, actual, letters, expected.shape)
    actual, expected = actual.detach(), expected.detach().to(actual.device)
    if actual.is_floating_point() and expected.is_floating_point():
        error = (actual.double() - expected.double()).abs()  # in float64, whatever the learner's dtype
        index = tuple(int(i) for i in torch.unravel_index(error.argmax(), error.shape))
        pattern = wrong_pattern(actual, expected, letters, causes)
        raise CheckFailure(
            f"{exercise}: {what} has the right shape {letters} but wrong values{pattern}. The largest "
            f"difference is {float(error.max()):.3g}, at index {list(index)}, where the expected "
            f"value is {float(expected[index]):.6g} and yours is {float(actual[index]):.6g}.{where}"
        )
    wrong = (actual != expected).nonzero()
    raise CheckFailure(
        f"{exercise}: {what} has the right shape {letters} but {len(wrong)} wrong entries, "
        f"the first at index {wrong[0].tolist()}: expected {expected[tuple(wrong[0])].item()}, "
        f"got {actual[tuple(wrong[0])].item()}.{where}"
    )


def _axis_names(letters: str, dims: int) -> list[str]:
    """'[B, h, T_q, T_k]' -> ['B', 'h', 'T_q', 'T_k']; positions when the letters do not fit."""
    names = [name.strip() for name in letters.strip("[]").split(",")]
    return names if len(names) == dims else [f"axis {axis}" for axis in range(dims)]


def _indices(flags: torch.Tensor) -> str:
    found = flags.nonzero().flatten().tolist()
    return ", ".join(map(str, found[:6])) + (", ..." if len(found) > 6 else "")


def wrong_pattern(
    actual: torch.Tensor, expected: torch.Tensor, letters: str, causes: Sequence[Cause] = ()
) -> str:
    """Where and how a float output of the right shape is wrong, as a clause for a message
    (', only at T = 1, 3 ...'), or '' when no simple pattern shows. In order: the right values
    in the wrong places, one offset or one factor everywhere (only the relation that holds is
    described; a single number, or a constant expected tensor, cannot tell them apart), wrong
    only at some indices of an axis (the others are right). ``causes``: the exercise's likely
    causes, named when the relation that holds is one of theirs."""
    a, e = actual.double(), expected.double()
    # loose on purpose: this describes a failure that ``same`` has already found
    close = torch.isclose(a, e, rtol=1e-4, atol=1e-5)
    if a.numel() > 1 and torch.allclose(a.flatten().sort().values, e.flatten().sort().values):
        return ": the right values, in the wrong places (an axis swapped, flipped or shuffled?)"
    relations: dict[str, float] = {}
    difference = a - e
    if torch.allclose(difference, difference.flatten()[0].expand_as(difference), atol=1e-5):
        relations["offset"] = float(difference.flatten()[0])
    nonzero = e.abs() > 1e-6
    if nonzero.any():
        ratio = a[nonzero] / e[nonzero]
        if torch.allclose(ratio, ratio[0].expand_as(ratio), rtol=1e-4) and torch.allclose(
            a[~nonzero], e[~nonzero]
        ):
            relations["ratio"] = float(ratio[0])
    because = _because(causes, relations)
    one = a.numel() == 1
    subject = "your number is" if one else "every entry is"
    if len(relations) == 2:
        return (
            f": {subject} off by {relations['offset']:+.4g}, or {relations['ratio']:.4g} times the expected "
            f"value (one expected value cannot tell an added constant from a scale){because}"
        )
    if "offset" in relations:
        offset = relations["offset"]
        same = "" if one else " the same"
        return f": {subject} off by{same} {offset:.4g} (a constant added or left out?){because}"
    if "ratio" in relations:
        factor = relations["ratio"]
        return f": {subject} {factor:.4g} times the expected one (a scale missing or extra?){because}"
    names = _axis_names(letters, a.dim())
    for axis in range(a.dim() - 1, -1, -1):
        others = [d for d in range(a.dim()) if d != axis]
        bad = ~close.all(dim=others) if others else ~close
        if a.size(axis) > 1 and bad.any() and not bad.all():
            name = names[axis]
            if int(bad.sum()) > int((~bad).sum()):
                return f", everywhere but at {name} = {_indices(~bad)}, where they are right"
            return f", only at {name} = {_indices(bad)} (at {name} = {_indices(~bad)} they are right)"
    return ""


class Outcomes(Sequence[tuple[Mistake, Any]]):
    """Each known mistake with what it would return on some arguments, or the exception it
    raises, computed at the first look: a check whose learner's output is right never pays for
    them (each may run the learner's own sub-modules, in the judge through the kernel)."""

    def __init__(self, mistakes: Sequence[Mistake], args: tuple[Any, ...]):
        self.mistakes, self.args = mistakes, args
        self.computed: list[tuple[Mistake, Any]] | None = None

    def _outcomes(self) -> list[tuple[Mistake, Any]]:
        if self.computed is None:
            self.computed = []
            with torch.no_grad(), exact_matmul():
                for mistake in self.mistakes:
                    try:
                        self.computed.append((mistake, mistake.compute(*self.args)))
                    except Exception as error:  # noqa: BLE001 - the mistake's own crash, kept as its outcome
                        self.computed.append((mistake, error))
        return self.computed

    def __getitem__(self, index):  # noqa: ANN001, ANN204 - Sequence's own signature
        return self._outcomes()[index]

    def __len__(self) -> int:
        return len(self._outcomes())


def mistake_outputs(mistakes: Sequence[Mistake], *args: Any) -> Outcomes:
    """Each known mistake with what it would return on these arguments, or the exception it
    raises (``Outcomes``: computed only when a check looks at them, after the learner's output
    was found wrong): one that crashes matches no output, and a check may still name it by its
    error. The arguments must not change before then."""
    return Outcomes(mistakes, args)


def build(exercise: str, cls: type, *args: Any, **kwargs: Any) -> Any:
    """Construct the learner's module (stub and crash turned into messages), in eval mode, float64."""
    module = call(exercise, cls, *args, **kwargs)
    return module.to(device=DEVICE, dtype=DTYPE).eval()


def load_weights(
    exercise: str, module: torch.nn.Module, state: dict[str, torch.Tensor], names: str | None = None
) -> None:
    """Load oracle weights into the learner's module by the contract's names, strictly;
    ``names`` says in a few words which attributes the lesson asks for."""
    expected, found = sorted(state), sorted(module.state_dict())
    if expected != found:
        missing = [name for name in expected if name not in found]
        extra = [name for name in found if name not in expected]
        asked = f" ({names})" if names else ""
        raise CheckFailure(
            f"{exercise}: the parameters do not have the names the lesson asks for{asked}. "
            f"Missing: {missing or 'none'}; not expected: {extra or 'none'}. "
            "Use the attribute names given in the exercise (they let reference weights load)."
        )
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as error:
        raise CheckFailure(f"{exercise}: the parameters have the wrong shapes: {error}") from None
