"""Mistakes whose output has a telling shape or content are told so, not only "wrong shape" or
"wrong values" (issue 33, held-out round 6): attention weights averaged over the heads (lesson 05),
the scores kept where the weights belong (lesson 12), and T without its + 1 (lesson 10)."""

import pytest
import torch

from autograder import libtorch
from autograder.checks import CheckFailure, multi_head, training
from autograder.checks import libtorch as cpp_checks
from solutions import libtorch as cpp_reference
from solutions.multi_head import MultiHeadAttention
from solutions.training import make_batch


class AveragedAttn(MultiHeadAttention):
    def forward(self, query, key, value, mask=None):
        out = super().forward(query, key, value, mask)
        self.attn = self.attn.mean(dim=1)  # [B, T_q, T_k], as nn.MultiheadAttention's default
        return out


def test_weights_averaged_over_the_heads_are_told_so():
    multi_head.check_mha_attn(MultiHeadAttention)  # the reference passes
    with pytest.raises(CheckFailure, match="the weights averaged over the h heads"):
        multi_head.check_mha_attn(AveragedAttn)


def _short_batch(sources, targets, pad_id, start_id, end_id):
    batch = make_batch(sources, targets, pad_id, start_id, end_id)
    return {**batch, "tgt_in": batch["tgt_in"][:, :-1], "tgt_out": batch["tgt_out"][:, :-1]}


def test_a_batch_one_position_short_is_told_why_t_has_its_plus_one():
    training.check_make_batch_shapes(make_batch)
    with pytest.raises(CheckFailure, match=r"T is that length \+ 1 = 7") as failure:
        training.check_make_batch_shapes(_short_batch)
    assert "batch['tgt_in'] and batch['tgt_out'] are [B, 6]" in str(failure.value)


def test_cpp_scores_kept_in_attn_are_told_so():
    if libtorch.missing_tools():
        pytest.skip(libtorch.explain_missing(libtorch.missing_tools()))
    source = cpp_reference.CppMultiHeadAttention.source
    scores_line = "auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d_k));"
    assert scores_line in source and "attn = weights;" in source
    kept = source.replace(scores_line, scores_line + "\n    attn = scores;").replace("attn = weights;", "")
    with torch.random.fork_rng(devices=[]):
        with pytest.raises(CheckFailure, match="attn holds the scores q kᵀ / sqrt\\(d_k\\)"):
            cpp_checks.check_cpp_mha_cross_attention(libtorch.compile_module("MultiHeadAttention", kept))
