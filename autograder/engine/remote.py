"""Calls between two processes that share no memory, as data only.

The judge (autograder/engine/judge.py) grades a submission without running any of its code: the
learner's definitions stay in the grading kernel, and the judge reaches them through this
module. Both ends hold an ``Endpoint`` on one connected Unix socket. An end asks the other
to look up a name, read or set an attribute, call an object, index it, take its length or
iterate it; the answer comes back as a value or as the other end's error.

What crosses the socket is data: JSON for the structure (numbers, strings, lists, tuples,
dicts, dtypes, devices, slices) and each tensor's raw bytes, rebuilt from its dtype and
shape (never a pickle, so nothing received can run code). Any other object stays where it
lives and crosses as a handle: the far end sees a ``RemoteObject`` and uses it as if it
were local (``module.w_q.weight``, ``layer(x)``, ``isinstance(layer, nn.Linear)``).

Only plain data and real tensors cross as values. What kind of object a value is, is read from
its type, never from the ``__class__`` it claims; a handle may stand in for a ``torch.nn`` module
class (so that ``isinstance`` holds), which it names, but never for a tensor: an end that sends a
handle naming a tensor class is refused (``Refused``), as no honest end sends one.

Each end decides what the other may do with its objects (``Guard``): the kernel's end allows
everything (it is the learner's own code); the judge's end lets the learner's code call only
the forward methods of the models it was handed.

Shapes are whatever the callers pass; a tensor keeps its dtype, shape and requires_grad (not
its strides: it arrives contiguous), and arrives on the CPU, where the checks compute, whatever
device it left (so no tensor a kernel sends can reach a GPU of the judge's). A tensor that
crosses twice arrives as the same object with its latest values, so identity checks (two layers
sharing one parameter) see what the sending end has. The kernel's end takes back a tensor of its
own that returns unchanged as that very object, so that ``optim.SGD(model.parameters(), ...)``
asked for by the judge updates the kernel's model.
"""

import builtins
import contextlib
import functools
import inspect
import json
import socket
import struct
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

MAX_MESSAGE_BYTES = 256 * 2**20  # far above any tensor a lesson passes; a bigger one is refused
MAX_SESSION_BYTES = 2**30  # all messages of one connection together (one test cell's calls)
MAX_ITEMS = 10_000  # an iterator longer than this is refused, not materialised
_FRAME = struct.Struct(">II")  # header length, tensor blob length

_DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in vars(torch).values()
    if isinstance(dtype, torch.dtype)
}


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# the torch classes a handle may stand in for, so that isinstance(handle, nn.Linear) holds: modules
# only, whose every use goes through the handle's attributes (a tensor crosses as its data)
_STAND_INS = {
    _name(cls): cls for cls in vars(nn).values() if isinstance(cls, type) and issubclass(cls, nn.Module)
}
_STAND_INS["torch.nn.modules.module.Module"] = nn.Module
# a parameter's kind crosses as its number, 0 to 4
_KINDS = [
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.VAR_POSITIONAL,
    inspect.Parameter.KEYWORD_ONLY,
    inspect.Parameter.VAR_KEYWORD,
]


class RemoteError(Exception):
    """The other end raised an exception that has no builtin counterpart here."""


class ChannelClosed(ConnectionError):
    """The other end went away (its process ended, or it closed the connection)."""


class Refused(BaseException):
    """The other end sent what no honest end sends (a handle that names a tensor class).

    Not an ``Exception``: no ``except Exception`` on the way (a check's, around the learner's
    code) takes it for the learner's code raising; it ends the request that received it."""


def _tensor_classes() -> set[str]:
    """The names of every tensor class known here: torch.Tensor, its base and its subclasses."""
    found, waiting = {_name(cls) for cls in torch.Tensor.__mro__ if cls is not object}, [torch.Tensor]
    while waiting:
        cls = waiting.pop()
        found.add(_name(cls))
        waiting += cls.__subclasses__()
    return found


def _error(kind: str, message: str) -> Exception:
    """The other end's exception as one of ours: a builtin of that name, else RemoteError."""
    cls = getattr(builtins, kind, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls(message)
    return RemoteError(f"{kind}: {message}")


class Channel:
    """Length-framed messages on a connected socket: a JSON header and raw byte blobs."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.deadline: float | None = None  # time.monotonic() after which receiving gives up
        self.received_bytes = 0  # a connection that sends more than MAX_SESSION_BYTES is cut off

    def send(self, header: dict, blobs: list[bytes]) -> None:
        text = json.dumps({**header, "blobs": [len(blob) for blob in blobs]}).encode()
        size = sum(len(blob) for blob in blobs)
        if len(text) + size > MAX_MESSAGE_BYTES:
            raise ValueError(f"a message of {len(text) + size} bytes is over {MAX_MESSAGE_BYTES}")
        self.sock.sendall(b"".join([_FRAME.pack(len(text), size), text, *blobs]))

    def _exactly(self, size: int) -> bytes:
        chunks, left = [], size
        while left:
            if self.deadline is not None:
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("no answer in time")
                self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(min(left, 2**20))
            except TimeoutError:
                raise TimeoutError("no answer in time") from None
            if not chunk:
                raise ChannelClosed("the other end closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def receive(self) -> tuple[dict, list[bytes]]:
        text_size, size = _FRAME.unpack(self._exactly(_FRAME.size))
        if text_size + size > MAX_MESSAGE_BYTES:
            raise ValueError(f"a message of {text_size + size} bytes is over {MAX_MESSAGE_BYTES}")
        self.received_bytes += text_size + size
        if self.received_bytes > MAX_SESSION_BYTES:
            raise ValueError(f"the other end sent more than {MAX_SESSION_BYTES} bytes on one connection")
        header = json.loads(self._exactly(text_size))
        data = self._exactly(size)
        if not isinstance(header, dict) or sum(header.get("blobs", [])) != size:
            raise ValueError("a message's header must be a JSON object that sizes its blobs")
        blobs, start = [], 0
        for length in header.pop("blobs"):
            blobs.append(data[start : start + length])
            start += length
        return header, blobs


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    return tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _same_values(original: torch.Tensor, copy: torch.Tensor) -> bool:
    """``copy`` holds exactly ``original``'s kind, dtype, shape and values."""
    return (
        type(original) is type(copy)
        and original.dtype == copy.dtype
        and original.shape == copy.shape
        and torch.equal(original.detach(), copy.detach().to(original.device))
    )


def _tensor_from(raw: bytes, dtype: torch.dtype, shape: list[int]) -> torch.Tensor:
    numel = 1
    for n in shape:
        numel *= int(n)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(raw) != numel * itemsize:
        raise ValueError(f"{len(raw)} bytes for a tensor of shape {shape} and dtype {dtype}")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)


Guard = Callable[[str, Any, str | None], None]  # (operation, object, attribute name) -> raise PermissionError


def allow_all(operation: str, target: Any, name: str | None) -> None:
    """The kernel's guard: the judge may do anything with the learner's objects."""


# what the learner's code may call on a model the judge hands it (greedy_decode's model): its
# forward passes, the ways to read it, and the mode and device switches an honest decoder uses
MODEL_METHODS = {
    "forward", "encode", "decode",
    "parameters", "named_parameters", "buffers", "named_buffers", "state_dict",
    "modules", "named_modules", "children", "named_children",
    "eval", "train", "to",
}  # fmt: skip


def models_read_only(operation: str, target: Any, name: str | None) -> None:
    """The judge's guard for objects it hands to the learner's code (a model for greedy_decode):
    public attributes may be read; modules may be called, and the ``MODEL_METHODS`` of modules.
    Nothing can be set, loaded or hooked: the model the judge compares against stays as it was."""
    if operation in {"setattr", "get"}:
        raise PermissionError(f"the grader's objects cannot be changed here ({operation} {name!r})")
    if operation == "getattr" and (name is None or name.startswith("_")):
        raise PermissionError(f"the grader's objects do not show private attributes ({name!r})")
    if operation == "call":
        method_of = getattr(target, "__self__", None)
        if isinstance(target, nn.Module):
            return
        if isinstance(method_of, nn.Module) and getattr(target, "__name__", None) in MODEL_METHODS:
            return
        raise PermissionError(f"the grader's {type(target).__name__} cannot be called here")


class Endpoint:
    """One end of the connection: answers the other end's requests and makes its own."""

    def __init__(
        self,
        channel: Channel,
        namespace: dict | None = None,
        guard: Guard = allow_all,
        calls_within: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    ):
        self.channel = channel
        self.calls_within = calls_within  # how every call asked of this end runs (the checks' precision)
        self.namespace = namespace if namespace is not None else {}
        self.guard = guard
        self._exported: dict[int, Any] = {}  # handle -> object, for the other end
        self._handles: dict[int, int] = {}  # id(object) -> handle
        self._proxies: dict[int, RemoteObject] = {}  # the other end's handle -> our stand-in
        # every tensor sent, by its id, kept for the session so that its id names only it
        self._sent: dict[int, torch.Tensor] = {}
        # the other end's tensor id -> ours, held for the connection (MAX_SESSION_BYTES bounds it)
        self._received: dict[int, torch.Tensor] = {}
        self._origins: dict[int, int] = {}  # id of a tensor received -> its id at the other end
        # only the trusting end (the kernel's) takes back its own tensors as themselves: the judge
        # never lets the learner's code hand it one of the judge's own objects
        self.takes_back_originals = guard is allow_all

    # --- values ----------------------------------------------------------------------------

    def _encode(self, value: Any, tensors: list[bytes]) -> Any:
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if issubclass(type(value), RemoteObject) and value._endpoint is self:  # by type: see __class__
            return {"yours": value._handle}
        if issubclass(type(value), torch.Tensor):  # its type: an object's __class__ may claim one
            tensors.append(_tensor_bytes(value))
            self._sent[id(value)] = value  # alive for the session, so that its id names only it
            return {
                "tensor": len(tensors) - 1,
                "dtype": str(value.dtype).removeprefix("torch."),
                "shape": list(value.shape),
                "id": id(value),
                "parameter": isinstance(value, nn.Parameter),
                "requires_grad": value.requires_grad,
                "origin": self._origins.get(id(value)),  # where it came from, if from the other end
            }
        if isinstance(value, torch.dtype):
            return {"dtype": str(value).removeprefix("torch.")}
        if isinstance(value, torch.device):
            return {"device": str(value)}
        if isinstance(value, torch.Size):
            return {"size": list(value)}
        if isinstance(value, tuple | list):
            key = "tuple" if isinstance(value, tuple) else "list"
            return {key: [self._encode(item, tensors) for item in value]}
        if isinstance(value, dict):
            return {"dict": [[self._encode(k, tensors), self._encode(v, tensors)] for k, v in value.items()]}
        if isinstance(value, slice):
            return {"slice": [self._encode(part, tensors) for part in (value.start, value.stop, value.step)]}
        if value is Ellipsis:
            return {"ellipsis": True}
        if inspect.isgenerator(value) or type(value).__name__ in {"dict_keys", "dict_values", "dict_items"}:
            items = []
            for item in value:
                items.append(item)
                if len(items) > MAX_ITEMS:
                    raise ValueError(f"an iterator of more than {MAX_ITEMS} items")
            return {"list": [self._encode(item, tensors) for item in items]}
        return self._export(value)

    def _export(self, value: Any) -> dict:
        handle = self._handles.get(id(value))
        if handle is None:
            handle = len(self._exported) + 1
            self._exported[handle] = value
            self._handles[id(value)] = handle
        kinds = [_name(cls) for cls in type(value).__mro__]
        return {"mine": handle, "kinds": kinds, "name": type(value).__name__}

    def _decode(self, data: Any, tensors: list[bytes]) -> Any:
        if data is None or isinstance(data, bool | int | float | str):
            return data
        if isinstance(data, list):
            raise ValueError("a bare list in a message")
        key = next(iter(data))
        body = data[key]
        if key == "tensor":
            tensor = _tensor_from(tensors[body], _DTYPES[data["dtype"]], data["shape"])
            if data.get("parameter"):
                tensor = nn.Parameter(tensor, requires_grad=bool(data.get("requires_grad")))
            elif data.get("requires_grad") and (tensor.is_floating_point() or tensor.is_complex()):
                tensor.requires_grad_(True)
            original = self._sent.get(int(data["origin"])) if data.get("origin") is not None else None
            if self.takes_back_originals and original is not None and _same_values(original, tensor):
                return original  # ours, come back as it left: the same object again (its grad too)
            # the same tensor over there is the same tensor here, with its latest values
            known = self._received.get(int(data["id"]))
            if known is None or type(known) is not type(tensor):
                self._received[int(data["id"])] = tensor
                self._origins[id(tensor)] = int(data["id"])
                return tensor
            known.data = tensor.data
            return known
        if key == "dtype":
            return _DTYPES[body]
        if key == "device":
            return torch.device(body)
        if key == "size":
            return torch.Size(int(n) for n in body)
        if key in {"tuple", "list"}:
            items = [self._decode(item, tensors) for item in body]
            return tuple(items) if key == "tuple" else items
        if key == "dict":
            return {self._decode(k, tensors): self._decode(v, tensors) for k, v in body}
        if key == "slice":
            return slice(*(self._decode(part, tensors) for part in body))
        if key == "ellipsis":
            return Ellipsis
        if key == "yours":
            return self._exported[int(body)]
        if key == "mine":
            handle = int(body)
            if handle not in self._proxies:
                tensor_classes = _tensor_classes()
                claimed = next((kind for kind in data["kinds"] if kind in tensor_classes), None)
                if claimed is not None:
                    raise Refused(
                        f"a handle to a {data['name']} that claims to be a {claimed}: only plain data "
                        "and real tensors come back, a tensor as its data, and a type claimed by name "
                        "is never trusted"
                    )
                stand_in = next((_STAND_INS[kind] for kind in data["kinds"] if kind in _STAND_INS), None)
                self._proxies[handle] = _proxy_class(str(data["name"]))(
                    self, handle, str(data["name"]), stand_in
                )
            return self._proxies[handle]
        raise ValueError(f"unknown value kind {key!r}")

    # --- requests --------------------------------------------------------------------------

    def request(self, operation: str, **fields: Any) -> Any:
        """Ask the other end; answer its own requests (callbacks) until our answer comes."""
        tensors: list[bytes] = []
        header = {"op": operation, **{name: self._encode(value, tensors) for name, value in fields.items()}}
        self.channel.send(header, tensors)
        while True:
            message, received = self.channel.receive()
            if "op" in message:
                self._answer(message, received)
            elif "error" in message:
                error = message["error"]
                raise _error(str(error.get("type")), str(error.get("message")))
            else:
                return self._decode(message.get("value"), received)

    def serve(self) -> None:
        """Answer requests until the other end says goodbye or goes away."""
        while True:
            try:
                message, received = self.channel.receive()
            except ChannelClosed:
                return
            if message.get("op") == "bye":
                return
            self._answer(message, received)

    def _answer(self, message: dict, received: list[bytes]) -> None:
        try:
            tensors: list[bytes] = []
            value = self._perform(message, received)
            self.channel.send({"value": self._encode(value, tensors)}, tensors)
        except (ChannelClosed, TimeoutError, BrokenPipeError):
            raise
        except Exception as error:  # noqa: BLE001 - every other error goes back to the asker
            self.channel.send({"error": {"type": type(error).__name__, "message": str(error)[:4000]}}, [])

    def _perform(self, message: dict, received: list[bytes]) -> Any:
        operation = message["op"]
        field = {name: self._decode(value, received) for name, value in message.items() if name != "op"}
        if operation == "get":
            name = field["name"]
            self.guard("get", None, name)
            if name not in self.namespace:
                raise NameError(f"name {name!r} is not defined")
            return self.namespace[name]
        target = field["target"]
        name = field.get("name")
        self.guard(operation, target, name)
        if operation == "getattr":
            return getattr(target, name)
        if operation == "setattr":
            setattr(target, name, field["value"])
            return None
        if operation == "call":
            with torch.set_grad_enabled(bool(field.get("grad", False))), self.calls_within():
                return target(*field["args"], **field["kwargs"])
        if operation == "getitem":
            return target[field["key"]]
        if operation == "len":
            return len(target)
        if operation == "bool":
            return bool(target)
        if operation == "iter":
            return list(_limited(iter(target)))
        if operation == "signature":
            return [
                [p.name, int(p.kind), p.default is not inspect.Parameter.empty]
                for p in inspect.signature(target).parameters.values()
            ]
        raise ValueError(f"unknown operation {operation!r}")

    def say_goodbye(self) -> None:
        self.channel.send({"op": "bye"}, [])


def _limited(items: Iterator) -> Iterator:
    for count, item in enumerate(items):
        if count >= MAX_ITEMS:
            raise ValueError(f"an iterator of more than {MAX_ITEMS} items")
        yield item


class RemoteObject:
    """An object that lives at the other end, used as if it were here.

    Attribute reads, calls, indexing, ``len``, ``iter`` and ``inspect.signature`` are
    forwarded; ``isinstance`` sees the nearest ``torch.nn`` module class of the real object.
    """

    __slots__ = ("_endpoint", "_handle", "_name", "_stand_in")

    def __init__(self, endpoint: Endpoint, handle: int, name: str, stand_in: type | None):
        object.__setattr__(self, "_endpoint", endpoint)
        object.__setattr__(self, "_handle", handle)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_stand_in", stand_in)

    def _ask(self, operation: str, **fields: Any) -> Any:
        return self._endpoint.request(operation, target=self, **fields)

    @property
    def __class__(self):  # noqa: D105 - isinstance(handle, nn.Module) holds for a remote module
        return self._stand_in or RemoteObject

    @property
    def __signature__(self) -> inspect.Signature:
        parameters = [
            inspect.Parameter(
                str(name), _KINDS[kind], default=None if has_default else inspect.Parameter.empty
            )
            for name, kind, has_default in self._ask("signature")
        ]
        return inspect.Signature(parameters)

    def __getattr__(self, name: str) -> Any:
        return self._ask("getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._ask("setattr", name=name, value=value)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._ask("call", args=args, kwargs=kwargs, grad=torch.is_grad_enabled())

    def __getitem__(self, key: Any) -> Any:
        return self._ask("getitem", key=key)

    def __len__(self) -> int:
        return self._ask("len")

    def __bool__(self) -> bool:
        return self._ask("bool")

    def __iter__(self) -> Iterator:
        return iter(self._ask("iter"))

    def __repr__(self) -> str:
        return f"<{self._name} in the other process>"


@functools.cache
def _proxy_class(name: str) -> type:
    """A RemoteObject subclass named like the remote object's type, so that messages that
    quote ``type(obj).__name__`` name the learner's class ("got Sequential")."""
    return type(name if name.isidentifier() else "RemoteObject", (RemoteObject,), {"__slots__": ()})


def serve(
    path: str,
    namespace: dict,
    calls_within: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
) -> None:
    """The kernel's side: answer the judge at ``path`` about the names in ``namespace``, each call
    made within ``calls_within()``."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    endpoint = Endpoint(Channel(sock), namespace, calls_within=calls_within)
    try:
        endpoint.serve()
    finally:
        endpoint.channel.sock.close()
