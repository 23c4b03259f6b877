"""autograder.engine.remote: the judge reaches the learner's objects as data, and only as data."""

import inspect
import json
import pickle
import re
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from autograder.checks import CheckFailure, core
from autograder.engine.remote import Channel, Endpoint, Refused, RemoteError, models_read_only


class Learner(nn.Module):
    """What a learner's module looks like from the judge: sub-modules, a buffer, a forward."""

    def __init__(self, d_model: int, n_heads: int = 2):
        super().__init__()
        self.w_q = nn.Linear(d_model, d_model)
        self.register_buffer("pe", torch.zeros(3, d_model))
        self.n_heads = n_heads

    def forward(self, x, mask=None):
        self.attn = x.sum(-1)
        return self.w_q(x) if mask is None else self.w_q(x).masked_fill(~mask, 0)


class Stub(Exception):
    pass


def not_written(*args):
    raise NotImplementedError()


def own_error(*args):
    raise Stub("a learner's own exception")


def echo(*args, **kwargs):
    return args, kwargs


def is_kernel_weight(module, tensor):
    return tensor is module.w_q.weight


def greedy(model, src):
    """A learner's function that uses a model the judge hands it."""
    return model.encode(src) + model(src)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)

    def encode(self, src):
        return src * 2

    def forward(self, src):
        return src + 1


class ClaimsParameter:
    """A learner's class that names itself after torch's Parameter."""


ClaimsParameter.__module__, ClaimsParameter.__qualname__ = "torch.nn.parameter", "Parameter"


class LyingClass:
    """A learner's object whose ``__class__`` says that it is a parameter."""

    @property
    def __class__(self):  # noqa: D105
        return nn.Parameter

    def detach(self):
        raise AssertionError("read as a tensor, by the __class__ it claims")


class KernelTensor(torch.Tensor):
    """A subclass of torch.Tensor defined in the learner's kernel."""


def kernel_tensor():
    return torch.arange(3.0).as_subclass(KernelTensor)


@pytest.fixture
def judge():
    """The judge's endpoint, and the kernel's serving the names above in a thread."""
    ours, theirs = socket.socketpair()
    namespace = {"Learner": Learner, "not_written": not_written, "own_error": own_error, "echo": echo}
    namespace |= {"greedy": greedy, "shared": nn.Linear(2, 2), "is_kernel_weight": is_kernel_weight}
    namespace["twice"] = nn.ModuleList([namespace["shared"], namespace["shared"]])
    namespace |= {
        "ClaimsParameter": ClaimsParameter,
        "LyingClass": LyingClass,
        "kernel_tensor": kernel_tensor,
    }
    kernel = Endpoint(Channel(theirs), namespace)
    thread = threading.Thread(target=kernel.serve, daemon=True)
    thread.start()
    endpoint = Endpoint(Channel(ours), guard=models_read_only)
    yield endpoint
    endpoint.say_goodbye()
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_values_cross_intact(judge):
    x = torch.randn(2, 3, dtype=torch.float64)
    values = (
        x,
        torch.tensor(True),
        torch.arange(6).reshape(2, 3).t(),  # not contiguous: arrives contiguous, same values
        torch.empty(0, 4),
        torch.ones(2, requires_grad=True),
        nn.Parameter(torch.ones(3)),
        torch.float16,
        torch.device("cpu"),
        torch.Size([2, 3]),
        slice(1, None, 2),
        Ellipsis,
        {"a": [1, 2.5, None, "s"], 3: (True,)},
    )
    (back, kwargs) = judge.request("get", name="echo")(*values, key=x)
    assert len(back) == len(values)
    for sent, received in zip(values, back, strict=True):
        if isinstance(sent, torch.Tensor):
            assert type(received) is type(sent) and received.dtype == sent.dtype
            assert torch.equal(received.detach(), sent.detach())
            assert received.requires_grad == sent.requires_grad
        else:
            assert received == sent
    assert kwargs["key"] is back[0]  # one tensor sent twice arrives as one object


def test_a_module_is_used_as_if_it_were_here(judge):
    module = judge.request("get", name="Learner")(4)
    assert isinstance(module, nn.Module) and isinstance(module.w_q, nn.Linear)
    assert not isinstance(module, nn.Linear)
    assert module.n_heads == 2 and sorted(module.state_dict()) == ["pe", "w_q.bias", "w_q.weight"]
    weights = {"w_q.weight": torch.eye(4), "w_q.bias": torch.zeros(4), "pe": torch.ones(3, 4)}
    module.load_state_dict(weights)
    x = torch.randn(2, 4)
    assert torch.allclose(module(x), x) and torch.equal(module.attn, x.sum(-1))
    assert torch.equal(module.pe, torch.ones(3, 4))
    assert getattr(module, "missing", "default") == "default" and not hasattr(module, "missing")
    assert [name for name, _ in module.named_parameters()] == ["w_q.weight", "w_q.bias"]
    assert list(inspect.signature(module.forward).parameters) == ["x", "mask"]


def test_identity_is_kept_for_modules_and_parameters(judge):
    twice = judge.request("get", name="twice")
    layers = list(twice)
    assert len(layers) == 2 and layers[0] is layers[1]
    ids = [id(p) for layer in layers for p in layer.parameters()]
    assert len(set(ids)) == 2  # the same two parameters, seen through both layers
    separate = [judge.request("get", name="Learner")(4) for _ in range(2)]
    assert len({id(p) for module in separate for p in module.parameters()}) == 4


def test_the_kernel_takes_back_its_own_unchanged_tensors_as_themselves(judge):
    """So that an optimiser the judge builds in the kernel (optim.SGD(model.parameters())) holds
    the kernel model's own parameters; a changed copy, or the judge's own tensor, stays a copy."""
    module = judge.request("get", name="Learner")(4)
    weight = module.w_q.weight  # a copy, here in the judge
    assert judge.request("get", name="echo")(module.w_q.weight)[0][0] is weight
    kernel_is = judge.request("get", name="is_kernel_weight")
    assert kernel_is(module, weight)  # went back as the kernel's parameter itself
    assert not kernel_is(module, torch.zeros(4, 4))
    before = weight.detach().clone()
    with torch.no_grad():
        weight.add_(1)  # changed here: it goes back as a new tensor, and the kernel's stays as it was
    assert not kernel_is(module, weight)
    assert torch.equal(module.w_q.weight, before)
    mine = torch.ones(3)
    assert judge.request("get", name="echo")(mine)[0][0] is not mine  # the judge never takes back


def test_errors_cross_by_name(judge):
    with pytest.raises(NotImplementedError):
        judge.request("get", name="not_written")()
    with pytest.raises(RemoteError, match="Stub: a learner's own exception"):
        judge.request("get", name="own_error")()
    with pytest.raises(NameError):
        judge.request("get", name="undefined")


def test_the_learners_code_may_only_run_the_judges_models_forward(judge):
    model = Model()
    src = torch.ones(2, 4)
    assert torch.equal(judge.request("get", name="greedy")(model, src), src * 2 + src + 1)

    # what the learner's side can do with the judge's model, through its own endpoint
    kernel_view = _kernel_view_of(model)
    assert torch.equal(kernel_view.proj.weight, model.proj.weight)  # public attributes: read
    with pytest.raises(PermissionError, match="private"):
        kernel_view.__dict__  # noqa: B018
    with pytest.raises(PermissionError, match="private"):
        kernel_view._modules  # noqa: B018
    with pytest.raises(PermissionError, match="cannot be changed"):
        kernel_view.proj = None
    with pytest.raises(PermissionError, match="cannot be called"):
        kernel_view.load_state_dict({})
    with pytest.raises(PermissionError, match="cannot be called"):
        kernel_view.register_forward_hook(print)
    kernel_view.eval()  # what an honest decoder does first
    assert not model.training and torch.equal(kernel_view.encode(src), src * 2)


def _kernel_view_of(model: nn.Module):
    """The judge's ``model`` as the kernel's code sees it: a RemoteObject served by the judge."""
    ours, theirs = socket.socketpair()
    judge_side = Endpoint(Channel(ours), {"model": model}, guard=models_read_only)
    kernel_side = Endpoint(Channel(theirs))
    thread = threading.Thread(target=judge_side.serve, daemon=True)
    thread.start()
    return kernel_side._decode(judge_side._export(model), [])


def test_a_handle_that_names_a_tensor_class_is_refused(judge):
    """Only plain data and real tensors come back: a handle naming nn.Parameter once stood in for
    one, and the judge, sending it back as a tensor, recursed until Python stopped it."""
    with pytest.raises(Refused, match=r"claims to be a torch\.nn\.parameter\.Parameter: only plain data"):
        judge.request("get", name="ClaimsParameter")()
    assert judge.request("get", name="echo")(1) == ((1,), {})  # the connection goes on


CLAIMS = ["torch.Tensor", "torch._C.TensorBase", "torch.nn.parameter.Buffer", "torch.nn.parameter.Parameter"]


@pytest.mark.parametrize("claim", CLAIMS)
def test_a_forged_handle_that_names_a_tensor_class_is_refused(claim):
    endpoint = Endpoint(Channel(socket.socketpair()[0]))
    with pytest.raises(Refused, match=f"claims to be a {re.escape(claim)}: .* never trusted"):
        endpoint._decode({"mine": 1, "kinds": ["x.Forged", claim, "builtins.object"], "name": "Forged"}, [])


def test_an_object_is_what_its_type_says_not_what_its_class_attribute_claims(judge):
    value = judge.request("get", name="LyingClass")()
    assert type(value).__name__ == "LyingClass" and not isinstance(value, torch.Tensor)
    with pytest.raises(CheckFailure, match="expected the output to be a torch.Tensor, got LyingClass"):
        core.expect_tensor("exercise", "the output", value)


def test_a_tensor_subclass_from_the_kernel_arrives_as_a_plain_tensor(judge):
    value = judge.request("get", name="kernel_tensor")()
    assert type(value) is torch.Tensor and torch.equal(value, torch.arange(3.0))


def test_nothing_received_is_unpickled(tmp_path):
    """A pickle that would write a file when loaded arrives as plain bytes in a uint8 tensor."""
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (Path.write_text, (marker, "x"))

    payload = pickle.dumps(Exploit())
    ours, theirs = socket.socketpair()
    header = {
        "value": {"tensor": 0, "dtype": "uint8", "shape": [len(payload)], "id": 1},
        "blobs": [len(payload)],
    }
    text = json.dumps(header).encode()
    theirs.sendall(struct.pack(">II", len(text), len(payload)) + text + payload)
    endpoint = Endpoint(Channel(ours))
    message, blobs = endpoint.channel.receive()
    tensor = endpoint._decode(message["value"], blobs)
    assert tensor.dtype == torch.uint8 and bytes(tensor.tolist()) == payload
    assert not marker.exists()


@pytest.mark.parametrize(
    ("header", "blob", "error"),
    [
        (
            {"value": {"tensor": 0, "dtype": "float64", "shape": [4], "id": 1}},
            b"\0" * 8,
            "8 bytes for a tensor",
        ),
        ({"value": {"tensor": 0, "dtype": "no_such_dtype", "shape": [1], "id": 1}}, b"\0", "no_such_dtype"),
        ({"value": {"mystery": 1}}, b"", "unknown value kind"),
    ],
)
def test_malformed_messages_are_refused(header, blob, error):
    ours, theirs = socket.socketpair()
    text = json.dumps({**header, "blobs": [len(blob)]}).encode()
    theirs.sendall(struct.pack(">II", len(text), len(blob)) + text + blob)
    endpoint = Endpoint(Channel(ours))
    message, blobs = endpoint.channel.receive()
    with pytest.raises((ValueError, KeyError), match=error):
        endpoint._decode(message["value"], blobs)


def test_an_oversized_message_is_refused_before_it_is_read():
    ours, theirs = socket.socketpair()
    theirs.sendall(struct.pack(">II", 10, 2**31))
    with pytest.raises(ValueError, match="over"):
        Channel(ours).receive()


def test_a_silent_kernel_times_out():
    ours, _theirs = socket.socketpair()
    channel = Channel(ours)
    channel.deadline = time.monotonic() + 0.2
    with pytest.raises(TimeoutError):
        Endpoint(channel).request("get", name="anything")


def test_a_flood_of_data_is_cut_off(monkeypatch):
    """Many messages under the size limit each still cannot fill the grader's memory."""
    import autograder.engine.remote

    monkeypatch.setattr(autograder.engine.remote, "MAX_SESSION_BYTES", 10_000)
    ours, theirs = socket.socketpair()
    channel = Channel(ours)
    text = json.dumps({"value": None, "blobs": [4000]}).encode()
    for _ in range(3):
        theirs.sendall(struct.pack(">II", len(text), 4000) + text + b"\0" * 4000)
    channel.receive()
    channel.receive()
    with pytest.raises(ValueError, match="more than 10000 bytes"):
        channel.receive()
