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
    from autograder.checks import CheckFailure, failure

    span = "`raise NotImplementedError()`"
    message = f"attention is not implemented yet: replace {'x ' * 25}{span} in its cell"
    for width in range(40, 101, 3):
        lines = failure.wrap_message(message, width=width)
        assert any(span in line for line in lines), (width, lines)
        assert all(len(line) <= width for line in lines), (width, lines)
    rendered = CheckFailure(message)._render_traceback_()
    assert any(span in line for line in rendered), rendered


def test_an_offset_and_a_ratio_are_told_apart_and_matched_with_the_exercise_causes():
    import pytest
    import torch

    from autograder.checks import CheckFailure
    from autograder.checks.core import Cause, expect_close

    expected = torch.randn(2, 5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    offset = _failure(expected + 0.25, expected)
    assert "every entry is off by the same 0.25 (a constant added or left out?)" in offset, offset
    assert "times the expected" not in offset
    ratio = _failure(expected * 0.75, expected)
    assert "every entry is 0.75 times the expected one" in ratio and "off by" not in ratio, ratio

    def scalar_failure(actual: float, causes) -> str:
        with pytest.raises(CheckFailure) as failure:
            expect_close("loss", "the loss", torch.tensor(actual), torch.tensor(2.0), "[]", causes=causes)
        return str(failure.value)

    causes = [
        Cause("ratio", 17 / 24, "the mean over all B·T positions, padding included"),
        Cause("offset", 0.5, "a smoothing term without its 1/V"),
    ]
    # one number: both relations hold, and the message says so instead of claiming a scale
    added = scalar_failure(2.5, causes)
    assert "your number is off by +0.5, or 1.25 times the expected value" in added, added
    assert "cannot tell an added constant from a scale), which is what a smoothing term" in added, added
    counted = scalar_failure(2.0 * 17 / 24, causes)
    assert "which is what the mean over all B·T positions, padding included gives" in counted, counted
    assert "which is what" not in scalar_failure(3.0, causes)  # no cause fits: none is claimed
    with pytest.raises(ValueError, match="'offset' or 'ratio'"):
        Cause("scale", 2.0, "x")


def test_a_shape_error_names_its_sizes_by_the_lessons_letters_and_its_likely_cause():
    import pytest
    import torch

    from autograder.checks import CheckFailure, core, shape_errors

    def swapped(scores, mask):  # a [B, h, T_tgt, T_src] score met a [B, 1, T_tgt, T_tgt] mask
        return scores.masked_fill(~mask, 0.0)

    scores, mask = torch.zeros(2, 3, 5, 7), torch.ones(2, 1, 5, 5, dtype=torch.bool)
    causes = {("T_src", "T_tgt"): "check the order of src_mask and tgt_mask"}
    with (
        shape_errors.sizes({"B": 2, "h": 3, "T_tgt": 5, "T_src": 7}, causes),
        pytest.raises(CheckFailure) as failure,
    ):
        core.call("DecoderLayer", swapped, scores, mask)
    message = str(failure.value)
    assert "In this check 7 is T_src and 5 is T_tgt" in message or "5 is T_tgt and 7 is T_src" in message
    assert "check the order of src_mask and tgt_mask" in message, message
    with pytest.raises(CheckFailure) as outside:  # outside the block: PyTorch's words only
        core.call("DecoderLayer", swapped, scores, mask)
    assert "In this check" not in str(outside.value)
    # 5 and 7 are no letter here
    with shape_errors.sizes({"B": 2, "T": 4}), pytest.raises(CheckFailure) as unknown:
        core.call("DecoderLayer", swapped, scores, mask)
    assert "In this check" not in str(unknown.value)
    refused = ValueError(
        "mask of shape [2, 1, 1, 7] does not broadcast to the scores [..., T_q, T_k] = [2, 2, 5, 5]"
    )
    # lesson 03's attention refusing a mask: the mask's size, then the scores'
    assert shape_errors.mismatched_sizes(refused) == (7, 5)
    shapes = RuntimeError(
        "Attempting to broadcast a dimension of length 7 at -1! Mismatching argument at index 1 had "
        "torch.Size([2, 7]); but expected shape should be broadcastable to [2, 5]"
    )
    assert shape_errors.mismatched_sizes(shapes) == (7, 5)  # torch.broadcast_shapes


def test_a_crash_is_named_after_the_known_mistake_that_crashes_the_same_way():
    import pytest
    import torch

    from autograder.checks import CheckFailure, core

    def add_rows(x, table):  # the whole [8, D] table added to x [B, 5, D]: a broadcast error
        return x + table

    def multiply(x, table):  # another crash: x [B, 5, D] @ [8, D]
        return x @ table

    mistakes = [core.Mistake("whole table", "Add table[:T].", add_rows)]
    x, table = torch.zeros(2, 5, 4), torch.zeros(8, 4)
    with pytest.raises(CheckFailure, match=r"fails like a known mistake, whole table\. Add table\[:T\]\."):
        with core.crashes_named("PE", lambda: core.mistake_outputs(mistakes, table, x)):  # operands swapped
            core.call("PE", add_rows, x, table)
    with pytest.raises(CheckFailure, match="PE raised RuntimeError") as other:
        with core.crashes_named("PE", lambda: core.mistake_outputs(mistakes, x, table)):
            core.call("PE", multiply, x, table)
    assert "known mistake" not in str(other.value)


def test_greedy_decoding_written_for_one_sentence_is_named_whether_it_crashes_or_returns_one_row():
    import pytest
    import torch

    from autograder.checks import CheckFailure, greedy
    from autograder.checks.device import DEVICE, DTYPE
    from solutions import Transformer, greedy_decode
    from solutions.masking import causal_mask

    def first_row_only(model, src, src_mask, max_len, start_symbol, end_symbol=None):
        memory = model.encode(src, src_mask)
        ys = torch.full((1, 1), start_symbol, dtype=torch.long, device=src.device)
        for _ in range(max_len - 1):
            out = model.decode(memory, src_mask, ys, causal_mask(ys.size(1), src.device))
            next_word = model.generator(out[:, -1]).argmax(dim=-1)[0]  # [B] broadcast from ys: row 0
            ys = torch.cat([ys, next_word.view(1, 1)], dim=1)
        return ys

    torch.manual_seed(0)
    model = Transformer(9, 10, d_model=8, n_heads=2, d_ff=16, n_layers=1, dropout=0.0)
    model = model.to(device=DEVICE, dtype=DTYPE).eval()
    src = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 0], [8, 1, 0, 0]], device=DEVICE)
    src_mask = (src != 0)[:, None, None, :]
    with pytest.raises(
        CheckFailure, match=r"returned one row for a batch of B = 3 .* written for a batch of one"
    ):

        def expected():  # the answer, computed only after the learner's call (checks/answers.py)
            return greedy_decode(model, src, src_mask, 6, 1)

        greedy.compare_greedy(first_row_only, model, src, src_mask, 6, 1, expected=expected)
    with pytest.raises(CheckFailure, match=r"greedy_decode raised RuntimeError for a batch of B = 3"):
        greedy.check_greedy_values(first_row_only)  # the stand-in model cannot broadcast [1, t] to B rows
    with pytest.raises(CheckFailure) as other:  # wrong for one source as well: no batch-of-one claim
        greedy.check_greedy_values(lambda *args: first_row_only(*args)[:, :-1])
    assert "batch of one" not in str(other.value)
