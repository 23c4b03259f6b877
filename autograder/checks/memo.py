"""What the checks' own code computed on the checks' own cases, kept for the next check that asks.

A wrong answer is named by running each catalogued mistake on the case the learner's code ran
on: train_loop's mistakes train fourteen small models, cached_greedy_decode's decode with
eighteen variants. The visible checks' cases are the same for every learner (fixed seeds), so a
grader's judge, which runs the checks for a whole class, and a test run, which runs them for every
catalogued mistake, would compute the same outcomes again and again.

``remembered`` keeps what such a computation returned, keyed by everything it reads
(``fingerprint``): the functions by name, their defaults and the contents of their closures, and
the data down to every tensor's bytes, strides and device and every module's attributes. Code is
named only where it is the course's own or torch's (``OWN_CODE``): a learner's class, which a
notebook may define again under the same name with another forward, is never part of a key. A case
that anyone changed in place (a learner's code that writes into its batches) reads as another
case; anything the fingerprint cannot read (an object of a type it does not know, a module with a
hook on it) is never kept, nor is a result whose computation changed its arguments or drew from
torch's global random numbers: a later call that finds the result kept must leave everything as
the computation would have. On a GPU the same holds: a key reads each tensor back to the CPU (a
case is a few KB) and each GPU's random state is compared too. The results kept are only ever
read: a check compares the learner's result with them and names the mistake that matches.
"""

import dataclasses
import functools
import hashlib
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import nn
from torch.nn.modules import module as torch_module

KEPT = 32  # computations kept, the least recently used dropped first (a few MB at most)
_HOOK_PREFIXES = ("_forward_", "_backward_", "_state_dict_", "_load_state_dict_")
_SCALARS = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device)

# the modules whose code a key may name: what a name stands for there does not change during a run
OWN_CODE = ("autograder", "torch")

T = TypeVar("T")


class _Unreadable(Exception):
    """Something in the key that the fingerprint cannot read in full."""


def fingerprint(value: Any) -> bytes | None:
    """A digest of everything ``value`` holds, or None when some part of it cannot be read in full
    (then nothing computed from it may be kept)."""
    digest = hashlib.blake2b(digest_size=32)
    try:
        _write(value, digest, {})
    except _Unreadable:
        return None
    return digest.digest()


def _write(value: Any, digest, seen: dict[int, int]) -> None:
    """``value`` into ``digest``; ``seen`` numbers the containers written so far, in order."""
    kind = type(value)  # never value.__class__, which an object may pretend
    digest.update(f"<{kind.__module__}.{kind.__qualname__}>".encode())
    if kind in _SCALARS:
        digest.update(repr(value).encode())
        return
    if id(value) in seen:  # a module shared by two parents: written once, then referred to by number
        digest.update(f"<again {seen[id(value)]}>".encode())
        return
    if kind in (torch.Tensor, nn.Parameter):
        _write_tensor(value, digest, seen)
        return
    seen[id(value)] = len(seen)
    if kind in (tuple, list):
        digest.update(str(len(value)).encode())
        for item in value:
            _write(item, digest, seen)
    elif kind in (dict, OrderedDict):
        digest.update(str(len(value)).encode())
        for key, item in value.items():
            _write(key, digest, seen)
            _write(item, digest, seen)
    elif kind in (set, frozenset):
        items = sorted(value, key=repr)
        _write(items, digest, seen)
    elif issubclass(kind, nn.Module):
        _expect_own(kind)
        _write_module(value, digest, seen)
    elif dataclasses.is_dataclass(kind):
        _expect_own(kind)
        for field in dataclasses.fields(kind):
            _write(field.name, digest, seen)
            _write(getattr(value, field.name), digest, seen)
    elif kind is functools.partial:
        _write((value.func, value.args, value.keywords), digest, seen)
    elif kind is types.FunctionType:
        _write_function(value, digest, seen)
    elif kind in (types.BuiltinFunctionType, type):
        _expect_own(value)
        digest.update(f"{value.__module__}.{value.__qualname__}".encode())
    else:
        raise _Unreadable(kind)


def _expect_own(code: Any) -> None:
    """``code`` (a function or a class) is the course's own or torch's, and is what its name says
    it is (a function made inside another is named by where it was made, and its closure)."""
    module = getattr(code, "__module__", None)
    if not isinstance(module, str) or module.split(".")[0] not in OWN_CODE:
        raise _Unreadable(f"code from {module}")
    qualname = getattr(code, "__qualname__", "")
    if "<locals>" in qualname:
        return
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is not code:
        raise _Unreadable(f"{module}.{qualname} is not what that name holds")


def _write_tensor(tensor: torch.Tensor, digest, seen: dict[int, int]) -> None:
    """Its dtype, device, shape, strides, whether it asks for gradients, its bytes, and the gradient
    a parameter holds (an optimizer's step reads it)."""
    if tensor.is_conj() or tensor.is_neg() or tensor.layout != torch.strided:
        raise _Unreadable("a tensor with a lazy view or another layout")
    shape = (tensor.dtype, tensor.device, tuple(tensor.shape), tensor.stride(), tensor.requires_grad)
    digest.update(repr(shape).encode())
    data = tensor.detach().to("cpu").contiguous().reshape(-1)
    digest.update(data.view(torch.uint8).numpy().tobytes())
    _write(tensor.grad if tensor.is_leaf else None, digest, seen)


def _write_module(module: nn.Module, digest, seen: dict[int, int]) -> None:
    """A module's attributes, its parameters, buffers and submodules among them; a hook on it, or
    on every module, would run code when it is called that no attribute shows."""
    if torch_module._has_any_global_hook():
        raise _Unreadable("a global module hook")
    attributes = vars(module)
    for name in sorted(attributes):
        if name.startswith(_HOOK_PREFIXES) and isinstance(attributes[name], dict):
            if attributes[name]:
                raise _Unreadable(f"a hook ({name})")
            continue
        _write(name, digest, seen)
        _write(attributes[name], digest, seen)


def _write_function(function: types.FunctionType, digest, seen: dict[int, int]) -> None:
    """Where it is defined, its defaults and what its closure holds: what it computes (the
    globals it reads are the checks' own modules')."""
    _expect_own(function)
    digest.update(f"{function.__module__}.{function.__qualname__}".encode())
    _write(function.__defaults__, digest, seen)
    _write(function.__kwdefaults__, digest, seen)
    _write([cell.cell_contents for cell in function.__closure__ or ()], digest, seen)


class Memo:
    """At most ``kept`` results, the least recently used dropped first."""

    def __init__(self, kept: int = KEPT):
        self.kept = kept
        self.results: OrderedDict[bytes, Any] = OrderedDict()
        self.lock = threading.Lock()

    def remembered(self, compute: Callable[..., T], *arguments: Any) -> T:
        """``compute(*arguments)``, or what it returned when last called with arguments that hold
        the same (``fingerprint``)."""
        key = fingerprint((compute, arguments))
        if key is None:
            return compute(*arguments)
        with self.lock:
            if key in self.results:
                self.results.move_to_end(key)
                return self.results[key]
        random_state = _random_state()
        result = compute(*arguments)
        if fingerprint((compute, arguments)) != key or not _same_random_state(random_state):
            return result
        with self.lock:
            self.results[key] = result
            while len(self.results) > self.kept:
                self.results.popitem(last=False)
        return result


def _random_state() -> list[torch.Tensor]:
    """torch's global random number generators' states: the CPU's, each GPU's once CUDA is up, and
    Apple's GPU's where it has one."""
    states = [torch.random.get_rng_state()]
    if torch.cuda.is_initialized():
        states += torch.cuda.get_rng_state_all()
    if torch.backends.mps.is_available():
        states.append(torch.mps.get_rng_state())
    return states


def _same_random_state(before: list[torch.Tensor]) -> bool:
    after = _random_state()
    return len(after) == len(before) and all(torch.equal(a, b) for a, b in zip(after, before, strict=True))


MEMO = Memo()
remembered = MEMO.remembered
