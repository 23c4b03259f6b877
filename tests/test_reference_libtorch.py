"""Reference package, lesson 12: the C++ twins against the Python reference and PyTorch's modules.

The three builds of ``solutions.libtorch.build`` are the lesson notebook's own (cached by the hash
of their source, so whichever runs first builds them for the rest). Float64 throughout: the same
ATen kernels run under both, so the outputs agree to the last bits or nearly.
"""

import math

import pytest
import torch
from torch import nn

from autograder import libtorch
from autograder.checks.oracles import fastpath_disabled
from solutions import libtorch as reference
from solutions.embedding import Embedding
from solutions.feed_forward import PositionwiseFeedForward
from solutions.multi_head import MultiHeadAttention

F64 = torch.float64
TIGHT = {"rtol": 1e-12, "atol": 1e-12}


@pytest.fixture(scope="module")
def cpp():
    if libtorch.missing_tools():
        pytest.skip(libtorch.explain_missing(libtorch.missing_tools()))
    return reference.build()


def twin(cpp_class, python_module):
    """The C++ module with the Python module's weights, both in float64."""
    python_module = python_module.to(F64).eval()
    module = cpp_class(*python_module.contract_args).to(F64).eval()
    module.load_state_dict(python_module.state_dict(), strict=True)
    return module, python_module


def with_args(module, *args):
    module.contract_args = args
    return module


def test_parameter_names_and_order_match_the_python_reference(cpp):
    pairs = [
        (cpp["Embedding"](11, 6), Embedding(11, 6)),
        (cpp["PositionwiseFeedForward"](8, 20), PositionwiseFeedForward(8, 20)),
        (cpp["MultiHeadAttention"](8, 2), MultiHeadAttention(8, 2)),
    ]
    for ours, python in pairs:
        assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == [
            (n, tuple(p.shape)) for n, p in python.named_parameters()
        ]


def test_children_are_python_modules_over_the_cpp_tensors(cpp):
    module = cpp["MultiHeadAttention"](8, 2)
    assert all(isinstance(getattr(module, name), nn.Linear) for name in ("w_q", "w_k", "w_v", "w_o"))
    assert isinstance(cpp["Embedding"](5, 4).lut, nn.Embedding)
    cpp_weight = dict(module.cpp.named_parameters())["w_q.weight"]
    assert module.w_q.weight is cpp_weight  # the same tensor, not a copy
    module.double()
    assert dict(module.cpp.named_parameters())["w_q.weight"].dtype == F64
    with torch.no_grad():  # written from Python, read by the C++ forward
        module.w_o.weight.zero_()
        module.w_o.bias.fill_(3.0)
    x = torch.zeros(1, 2, 8, dtype=F64)
    torch.testing.assert_close(module(x, x, x), torch.full((1, 2, 8), 3.0, dtype=F64))


def test_embedding_equals_the_python_reference_and_torch(cpp):
    torch.manual_seed(0)
    ours, python = twin(cpp["Embedding"], with_args(Embedding(11, 6), 11, 6))
    tokens = torch.randint(0, 11, (2, 5))
    torch.testing.assert_close(ours(tokens), python(tokens), rtol=0, atol=0)
    torch.testing.assert_close(ours(tokens), nn.functional.embedding(tokens, ours.lut.weight) * math.sqrt(6))


def test_feed_forward_equals_the_python_reference(cpp):
    torch.manual_seed(1)
    ours, python = twin(cpp["PositionwiseFeedForward"], with_args(PositionwiseFeedForward(8, 20), 8, 20))
    x = torch.randn(2, 5, 8, dtype=F64)
    torch.testing.assert_close(ours(x), python(x), **TIGHT)


@pytest.mark.parametrize("masked", [False, True])
def test_multi_head_attention_equals_the_python_reference_and_torch(cpp, masked):
    torch.manual_seed(2)
    ours, python = twin(cpp["MultiHeadAttention"], with_args(MultiHeadAttention(8, 2), 8, 2))
    query, key = torch.randn(2, 4, 8, dtype=F64), torch.randn(2, 6, 8, dtype=F64)
    value = torch.randn(2, 6, 8, dtype=F64)
    mask = None
    if masked:
        mask = torch.rand(2, 1, 4, 6, generator=torch.Generator().manual_seed(3)) > 0.4
        mask[0, 0, 1] = False  # a query that may attend to no key: zeros, never NaN
    out = ours(query, key, value, mask)
    torch.testing.assert_close(out, python(query, key, value, mask), **TIGHT)
    torch.testing.assert_close(ours.attn, python.attn, **TIGHT)
    if masked:
        assert not out.isnan().any() and ours.attn[0, :, 1].eq(0).all()
        return
    theirs = nn.MultiheadAttention(8, 2, batch_first=True).to(F64).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.w_q.weight, ours.w_k.weight, ours.w_v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.w_q.bias, ours.w_k.bias, ours.w_v.bias]))
        theirs.out_proj.weight.copy_(ours.w_o.weight)
        theirs.out_proj.bias.copy_(ours.w_o.bias)
    with fastpath_disabled():
        expected, _ = theirs(query, key, value, need_weights=False)
    torch.testing.assert_close(out, expected, **TIGHT)


def test_bad_heads_raise_value_error(cpp):
    with pytest.raises(ValueError, match="divisible"):
        cpp["MultiHeadAttention"](6, 4)


def test_the_reference_is_imported_once_per_process(cpp):
    for exercise in reference.SOURCES:
        parts = [libtorch.Part(exercise.name, exercise.name, exercise.source)]
        assert libtorch.compile_parts(parts) is libtorch.compile_parts(list(parts))
        assert libtorch.build_note(parts) == "already imported in this process"


def test_nbgrader_stub_lines_read_as_cpp():
    source = "  int f() {\n    # YOUR CODE HERE\n    raise NotImplementedError()\n  }"
    assert libtorch.translate_stubs(source).split("\n")[1:3] == [
        "    // YOUR CODE HERE",
        '    TORCH_CHECK_NOT_IMPLEMENTED(false, "not implemented yet");',
    ]


def test_first_compile_error_names_the_line_in_the_learners_source():
    sources = {"Embedding": "\nstruct EmbeddingImpl : torch::nn::Module {\n  int x = y;\n};\n"}
    log = (
        "ninja: build stopped\nEmbedding/your_cell.cpp: In constructor ...\n"
        "Embedding/your_cell.cpp:3:11: error: 'y' was not declared in this scope\n"
        "Embedding/your_cell.cpp:9:1: error: something later\n"
    )
    message = libtorch.first_error(log, sources)
    assert "line 3" in message and "int x = y;" in message and "'y' was not declared" in message
    assert "later" not in message


def test_exercise_cells_compile_their_own_source():
    cell = reference.CppEmbedding.cell("CppEmbedding")
    assert cell.startswith('CppEmbedding = compile_module("Embedding", r"""\nstruct EmbeddingImpl')
    assert cell.endswith('};\n""")')
