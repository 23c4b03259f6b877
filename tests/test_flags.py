"""Shortcuts are flagged by name; the reference and the alternative correct answers are not."""

import inspect
import re

import nbformat
import pytest

from autograder.capstone import learner_code
from autograder.engine.flags import OFF_LIMITS, CppCell, cpp_cell, cpp_reasons, flags, shortcuts_in
from autograder.lessons import EXERCISES, ROOT
from tests.alternatives import ALTERNATIVES

MODULES = {"torch", "F", "nn", "checks", "math"}

# (exercise, what the learner wrote, a piece of the reason it must be flagged for)
SHORTCUTS = [
    (
        "scaled_dot_product_attention",
        "from solutions.attention import scaled_dot_product_attention",
        "imports solutions.attention (the course's reference",
    ),
    (
        "scaled_dot_product_attention",
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    import solutions\n    return solutions.scaled_dot_product_attention(q, k, v, mask)",
        "imports solutions (the course's reference",
    ),
    (
        "scaled_dot_product_attention",
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None",
        "uses .scaled_dot_product_attention, which this exercise rebuilds",
    ),
    (
        "scaled_dot_product_attention",
        "from torch.nn.functional import scaled_dot_product_attention as fast",
        "imports torch.nn.functional.scaled_dot_product_attention, which this exercise rebuilds",
    ),
    ("LayerNorm", "class LayerNorm(nn.LayerNorm):\n    pass", "uses .LayerNorm, which this exercise"),
    (
        "LayerNorm",
        "def forward(self, x):\n    return F.layer_norm(x, x.shape[-1:], self.gamma, self.beta)",
        "uses .layer_norm",
    ),
    ("MultiHeadAttention", "self.inner = nn.MultiheadAttention(8, 2)", "uses .MultiheadAttention"),
    ("EncoderLayer", "layer = nn.TransformerEncoderLayer(8, 2)", "uses .TransformerEncoderLayer"),
    ("causal_mask", "m = nn.Transformer.generate_square_subsequent_mask(4)", ".generate_square_subsequent"),
    (
        "sequence_loss",
        "def sequence_loss(log_probs, target, pad_id, smoothing=0.0):\n"
        "    return F.cross_entropy(log_probs.flatten(0, 1), target.flatten(), ignore_index=pad_id,\n"
        "                           label_smoothing=smoothing)",
        "uses .cross_entropy, which this exercise rebuilds",
    ),
    (
        "sequence_loss",
        "from torch.nn.functional import nll_loss",
        "imports torch.nn.functional.nll_loss, which this exercise rebuilds",
    ),
    (
        "Embedding",
        "checks.check_embedding_values = lambda cls: None",
        "changes checks.check_embedding_values, an attribute of an imported module",
    ),
    ("Embedding", "torch.allclose = lambda *args, **kwargs: True", "changes torch.allclose"),
    ("Embedding", "import sys\nsys.modules['x'] = None", "uses sys.modules"),
    ("Embedding", "get_ipython().set_custom_exc((Exception,), None)", "uses get_ipython"),
    ("Embedding", "import builtins", "imports builtins (the kernel's machinery)"),
    ("Embedding", "m = __import__('solut' + 'ions')", "uses __import__"),
    ("Embedding", "code = open('../../solutions/embedding.py').read()", "names the course's code"),
    ("Embedding", "from autograder.hidden.embedding import hidden_embedding", "imports autograder.hidden"),
    # the way to a check's answer while it runs (tests/test_hostile_replay.py)
    (
        "scaled_dot_product_attention",
        "import sys\nseen = sys._getframe(1).f_locals",
        "uses ._getframe (reads the frames or globals of the code calling it)",
    ),
    ("scaled_dot_product_attention", "caller = frame.f_back", "uses .f_back"),
    ("scaled_dot_product_attention", "answer = fn.__globals__['expected_attention']", "uses .__globals__"),
]


@pytest.mark.parametrize(("exercise", "code", "reason"), SHORTCUTS, ids=[s[2][:40] for s in SHORTCUTS])
def test_a_shortcut_is_flagged_by_name(exercise, code, reason):
    found = shortcuts_in(code, OFF_LIMITS[exercise], MODULES)
    assert any(reason in flag for flag in found), found


# Alternatives that compute the right numbers through the off-limits function: the checks accept
# them (the values are right), and the flag tells the instructor how they were computed.
FLAGGED_ALTERNATIVES = {"LayerNormFunctional", "sequence_loss_cross_entropy", "sequence_loss_nll"}


CPP_SHORTCUTS = [
    (
        'm = compile_module("MultiHeadAttention", r"""\nreturn torch::nn::MultiheadAttention(o);""")',
        "uses Multihead",
    ),
    (
        'm = compile_module("MultiHeadAttention", r"""\nF::multi_head_attention_forward(q);""")',
        "uses multi_head",
    ),
]


@pytest.mark.parametrize(("code", "reason"), CPP_SHORTCUTS, ids=[c[1] for c in CPP_SHORTCUTS])
def test_a_cpp_shortcut_is_flagged_by_name(code, reason):
    found = shortcuts_in(code, OFF_LIMITS["CppMultiHeadAttention"], MODULES)
    assert any(flag.startswith(reason) and "in its C++" in flag for flag in found), found


def test_a_lesson_12_cell_must_compile_its_cpp():
    reference = learner_code("CppEmbedding")
    assert cpp_reasons("CppEmbedding", reference) == []
    for wrong in (
        "from solutions.embedding import Embedding as CppEmbedding",
        "CppEmbedding = compile_module('Embedding', source)",  # built elsewhere
        "class CppEmbedding(nn.Module):\n    pass",
        reference.replace('"Embedding"', '"MultiHeadAttention"'),  # another exercise's module
        reference.replace('""")', '""", verbose=print)'),
    ):
        shape = 'one assignment CppEmbedding = compile_module("Embedding", r"""<C++>""")'
        assert cpp_reasons("CppEmbedding", wrong) == [f"does not compile C++ with {shape}"], wrong
    assert not shortcuts_in(
        "raise ValueError('no nn.MultiheadAttention here')", OFF_LIMITS["MultiHeadAttention"], set()
    )


def test_one_reading_of_the_lesson_12_cell_with_or_without_verbose():
    reference = learner_code("CppEmbedding")
    read = cpp_cell(reference)
    assert read is not None and (read.exercise, read.binding) == ("CppEmbedding", "Embedding")
    assert reference.endswith(f'r"""{read.source}""")')
    for verbose in ("True", "False"):
        assert cpp_cell(reference.replace('""")', f'""", verbose={verbose})')) == read
    assert cpp_cell(reference.replace("CppEmbedding =", "Embedding =")) is None  # no exercise of lesson 12
    assert cpp_cell(reference + "\nprint(CppEmbedding)") is None
    assert isinstance(read, CppCell)


def _lesson_12(*added: str) -> nbformat.NotebookNode:
    """Lesson 12's exercise cells as a learner hands in the reference, then ``added`` cells."""
    cells = [
        nbformat.v4.new_code_cell(
            learner_code(exercise), metadata={"nbgrader": {"grade_id": exercise, "solution": True}}
        )
        for exercise in EXERCISES["12_libtorch"]
    ]
    return nbformat.v4.new_notebook(cells=cells + [nbformat.v4.new_code_cell(cell) for cell in added])


@pytest.mark.parametrize(
    "added",
    [
        "CppEmbedding = Embedding",
        "from solutions.embedding import Embedding as CppEmbedding",
        "def CppEmbedding(vocab_size, d_model):\n    return Embedding(vocab_size, d_model)",
        "for CppEmbedding in [Embedding]:\n    pass",
        "class CppEmbedding(Embedding):\n    pass",
    ],
)
def test_an_exercise_bound_in_an_added_cell_is_flagged(added):
    assert flags(_lesson_12()) == []  # the exercise cells alone: nothing to flag
    found = [(flag.cell, flag.reason) for flag in flags(_lesson_12(added)) if "binds" in flag.reason]
    assert found == [
        (
            "cell 4 (added by the learner)",
            "binds CppEmbedding outside its exercise cell, where lesson 12 asks for C++",
        )
    ]


def test_using_an_exercise_in_an_added_cell_is_not_flagged():
    assert flags(_lesson_12("print(CppEmbedding(11, 4))", "x = CppEmbedding")) == []


@pytest.mark.parametrize("exercise", [e for lesson in EXERCISES.values() for e in lesson])
def test_the_reference_and_the_alternatives_are_not_flagged(exercise):
    assert shortcuts_in(learner_code(exercise), OFF_LIMITS[exercise], MODULES) == []
    for alternative in ALTERNATIVES.get(exercise, []):
        found = shortcuts_in(inspect.getsource(alternative), OFF_LIMITS[exercise], MODULES)
        assert bool(found) == (alternative.__name__ in FLAGGED_ALTERNATIVES), (alternative.__name__, found)


def test_every_exercise_has_its_off_limits_in_the_contract():
    contract = (ROOT / "docs" / "contract.md").read_text()
    assert set(OFF_LIMITS) == {e for lesson in EXERCISES.values() for e in lesson}
    for exercise, names in OFF_LIMITS.items():
        line = re.search(rf"^\| `{exercise}` \| (.*) \|$", contract, re.M)
        assert line, f"docs/contract.md has no off-limits row for {exercise}"
        listed = re.findall(r"`([\w.:]+)`", line[1])  # Python's torch.nn.X, or C++'s torch::nn::X
        assert sorted(re.split(r"\.|::", name)[-1] for name in listed) == sorted(names), (exercise, listed)
