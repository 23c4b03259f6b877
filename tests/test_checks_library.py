"""The checks library works in a learner's copy of the course without the solution package."""

import subprocess
import sys

BLOCK_SOLUTIONS = """
import importlib, pkgutil, sys
sys.modules["solutions"] = None  # any `import solutions...` now fails
import autograder.checks
for info in pkgutil.iter_modules(autograder.checks.__path__):
    importlib.import_module(f"autograder.checks.{info.name}")
print("imported", sorted(m for m in sys.modules if m.startswith("autograder.checks.")))
"""


def test_checks_import_without_the_solution_package():
    result = subprocess.run(
        [sys.executable, "-c", BLOCK_SOLUTIONS], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert (
        "autograder.checks.attention" in result.stdout and "autograder.checks.output_layer" in result.stdout
    )


def test_a_missing_optional_parameter_is_named_with_the_signature_to_keep():
    import pytest
    import torch

    from autograder.checks import CheckFailure, masking

    def causal_mask(size):  # right values, but no `device` parameter
        return torch.ones(size, size, dtype=torch.bool).tril()

    masking.check_causal_mask_shape(causal_mask)  # called with the contract's own arguments: passes
    with pytest.raises(
        CheckFailure, match=r"Keep the exercise's signature, `def causal_mask\(size, device=None\):`"
    ):
        masking.check_causal_mask_values(causal_mask)


def _failure(actual, expected, letters="[B, T, D]") -> str:
    import pytest

    from autograder.checks import CheckFailure
    from autograder.checks.core import expect_close

    with pytest.raises(CheckFailure) as failure:
        expect_close("X", "the output", actual, expected, letters)
    return str(failure.value)


def test_an_unnamed_wrong_output_says_where_and_how_it_is_wrong():
    import torch

    expected = torch.randn(2, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    assert "every entry is 2 times the expected one" in _failure(expected * 2, expected)
    assert "every entry is off by the same 0.5" in _failure(expected + 0.5, expected)
    assert "the right values, in the wrong places" in _failure(expected.flip(1), expected)
    last_position = expected.clone()
    last_position[:, -1] += 1
    message = _failure(last_position, expected)
    assert "wrong values, only at T = 4 (at T = 0, 1, 2, 3 they are right)." in message, message
    first_position_right = expected + 1
    first_position_right[:, 0] -= 1
    assert "everywhere but at T = 0, where they are right" in _failure(first_position_right, expected)
    noise = expected + torch.randn(2, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert "but wrong values. The largest difference" in _failure(noise, expected)  # no pattern: none claimed


def test_crashes_a_learner_can_fix_get_their_own_message():
    import pytest
    import torch

    from autograder.checks import CheckFailure, multi_head
    from solutions import MultiHeadAttention

    def merge_heads(x):  # .view on the transposed tensor: not contiguous
        return x.transpose(1, 2).view(x.size(0), x.size(2), -1)

    with pytest.raises(CheckFailure, match=r"not contiguous .* Call \.contiguous\(\) before"):
        multi_head.check_merge_heads(merge_heads)

    def split_heads(x, n_heads):
        raise NotImplementedError()

    class CallsAStub(MultiHeadAttention):
        def forward(self, query, key, value, mask=None):
            return split_heads(self.w_q(query), self.n_heads)

    with pytest.raises(
        CheckFailure, match="calls split_heads, which is not implemented yet: write split_heads"
    ):
        multi_head.check_mha_cross_attention(CallsAStub)

    def merge_in_place(x):
        x.mul_(1.0).add_(1.0)
        return torch.cat(x.unbind(1), dim=-1)

    with pytest.raises(CheckFailure, match=r"merge_heads changed its input `x` in place"):
        multi_head.check_merge_heads(merge_in_place)


def test_a_wrong_output_after_right_weights_says_where_to_look():
    import pytest

    from autograder.checks import CheckFailure, attention, multi_head
    from solutions import MultiHeadAttention, scaled_dot_product_attention

    def values_reversed(q, k, v, mask=None):  # right weights, applied to v with its features reversed
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        return weights @ v.flip(-1), weights

    with pytest.raises(CheckFailure, match=r"Your weights are right, so look at how they are applied to v"):
        attention.check_attention_values(values_reversed)

    class NoOutputBias(MultiHeadAttention):  # self.attn right, w_o's bias left out
        def forward(self, query, key, value, mask=None):
            out = super().forward(query, key, value, mask)
            return out - self.w_o.bias

    with pytest.raises(CheckFailure, match=r"Your self.attn weights are right, so look at what comes after"):
        multi_head.check_mha_cross_attention(NoOutputBias)


def test_a_failure_message_never_breaks_inside_a_code_span():
    from autograder.checks import CheckFailure, core

    span = "`raise NotImplementedError()`"
    message = f"attention is not implemented yet: replace {'x ' * 25}{span} in its cell"
    for width in range(40, 101, 3):
        lines = core.wrap_message(message, width=width)
        assert any(span in line for line in lines), (width, lines)
        assert all(len(line) <= width for line in lines), (width, lines)
    rendered = CheckFailure(message)._render_traceback_()
    assert any(span in line for line in rendered), rendered
