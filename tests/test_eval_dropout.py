"""Dropout that stays on in eval mode, and a forward that changes its module, written as learners
write them, lose their points (issue 33).

Each module below passes for a right answer whenever dropout is 0, where every other check builds
it. Without the eval-mode step (``expect_dropout_off_in_eval`` made a no-op in the lessons' check
modules) each passes every visible check and hidden test of its exercise, full marks; with it, a
visible check names the shared mistake with its hint and a hidden test fails. A module that scales
by 1 - p in eval mode (dropout as first published, not PyTorch's inverted dropout) gives one
wrong output twice: it is told what the ratio is, not the random mistake. A MultiHeadAttention
that folds 1/sqrt(d_k) into w_q in place on every call is right once: without the second-call step
(``expect_same_on_second_call``) the module built with dropout answers differently on its second
call and is told the dropout mistake, which it did not make; with it, it is told what it did.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import solutions
from autograder import grading
from autograder.checks import CheckFailure, encoder_decoder, feed_forward, multi_head
from autograder.checks.eval_mode import DROPOUT_IN_EVAL
from autograder.lessons import EXERCISES
from solutions.attention import scaled_dot_product_attention


class AttentionDropsAlways(solutions.MultiHeadAttention):
    """Lesson 03's dropout_p passed in every mode (its F.dropout defaults to training=True)."""

    def forward(self, query, key, value, mask=None):
        q, k, v = (
            solutions.split_heads(w(x), self.n_heads)
            for w, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        out, self.attn = scaled_dot_product_attention(q, k, v, mask, self.dropout)
        return self.w_o(solutions.merge_heads(out))


class FeedForwardDropsByHand(solutions.PositionwiseFeedForward):
    """A dropout mask drawn by hand, with no look at self.training."""

    def forward(self, x):
        h = self.activation(self.linear1(x))
        keep = (torch.rand_like(h) >= self.dropout.p).to(h.dtype)
        return self.linear2(h * keep / (1 - self.dropout.p))


class FeedForwardScaledInEval(solutions.PositionwiseFeedForward):
    """Dropout as first published: scaled by 1 - p at test time, though nn.Dropout already rescales."""

    def forward(self, x):
        out = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return out if self.training else out * (1 - self.dropout.p)


class EncoderLayerFunctionalDropout(solutions.EncoderLayer):
    """F.dropout(x, p) without training=self.training, on both sub-layers."""

    def forward(self, x, src_mask=None):
        p = self.dropout1.p
        if self.norm_first:
            h = self.norm1(x)
            x = x + F.dropout(self.self_attn(h, h, h, src_mask), p)
            return x + F.dropout(self.ffn(self.norm2(x)), p)
        x = self.norm1(x + F.dropout(self.self_attn(x, x, x, src_mask), p))
        return self.norm2(x + F.dropout(self.ffn(x), p))


class AttentionFoldsScaleInPlace(solutions.MultiHeadAttention):
    """1/sqrt(d_k) folded into w_q's weights and bias, in place, on every call: right once."""

    def forward(self, query, key, value, mask=None):
        d_k = query.size(-1) // self.n_heads
        with torch.no_grad():
            self.w_q.weight /= math.sqrt(d_k)
            self.w_q.bias /= math.sqrt(d_k)
        q, k, v = (
            solutions.split_heads(w(x), self.n_heads)
            for w, x in ((self.w_q, query), (self.w_k, key), (self.w_v, value))
        )
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, -math.inf)
        weights = torch.softmax(scores, dim=-1)
        self.attn = weights if mask is None else weights.masked_fill(~mask, 0.0)
        return self.w_o(solutions.merge_heads(self.attn @ v))


CASES = {
    "MultiHeadAttention": AttentionDropsAlways,
    "PositionwiseFeedForward": FeedForwardDropsByHand,
    "EncoderLayer": EncoderLayerFunctionalDropout,
}


def _cells(exercise: str) -> list:
    lesson = next(lesson for lesson, names in EXERCISES.items() if exercise in names)
    return [test for test in grading.table(lesson) if test.exercise == exercise]


def _failures(exercise: str, implementation) -> tuple[str | None, bool]:
    """The first visible check's failure (None: all passed), and whether a hidden test failed."""
    first, hidden_failed = None, False
    for test in _cells(exercise):
        try:
            grading.run(test, test.visible, implementation)
        except CheckFailure as failure:
            first = first or str(failure)
        if test.hidden:
            try:
                grading.run(test, test.hidden, implementation)
            except CheckFailure:
                hidden_failed = True
    return first, hidden_failed


@pytest.mark.parametrize("exercise", sorted(CASES))
def test_dropout_in_eval_gets_full_marks_without_the_eval_step(exercise, monkeypatch):
    for checks in (multi_head, feed_forward, encoder_decoder):
        monkeypatch.setattr(checks, "expect_dropout_off_in_eval", lambda *args, **kwargs: None)
    assert _failures(exercise, CASES[exercise]) == (None, False)


@pytest.mark.parametrize("exercise", sorted(CASES))
def test_dropout_in_eval_is_named_and_fails_a_hidden_test(exercise):
    message, hidden_failed = _failures(exercise, CASES[exercise])
    hint = next(m.hint for m in multi_head.MHA_MISTAKES if m.name == DROPOUT_IN_EVAL)
    assert message is not None and DROPOUT_IN_EVAL in message and hint in message, message
    assert "self.training" in message and "is_training()" not in message, "told in Python's words, not C++'s"
    assert "two different outputs for the same input" in message
    assert hidden_failed


def test_one_wrong_output_given_twice_is_described_not_called_random():
    message, hidden_failed = _failures("PositionwiseFeedForward", FeedForwardScaledInEval)
    assert message is not None and DROPOUT_IN_EVAL not in message, message
    assert "with dropout = 0.3 in eval mode" in message
    assert "0.7 times the expected one" in message, message
    assert "passed on in another argument's place" in message
    assert hidden_failed


def test_a_forward_that_changes_its_module_is_told_so_not_called_dropout(monkeypatch):
    message, hidden_failed = _failures("MultiHeadAttention", AttentionFoldsScaleInPlace)
    assert message is not None and "its forward changes the module" in message, message
    assert DROPOUT_IN_EVAL not in message
    assert hidden_failed
    monkeypatch.setattr(multi_head, "expect_same_on_second_call", lambda *args, **kwargs: None)
    message, _ = _failures("MultiHeadAttention", AttentionFoldsScaleInPlace)
    assert message is not None and DROPOUT_IN_EVAL in message, message
