"""The stand-in cut as a learner's model is (training_oracle.Relaid): what train_loop's check runs a
mistake on when the mistake depends on how the weights are cut into parameters, on the checks' side,
under the judge too (the kernel's model runs none of the checks' code)."""

import copy

import pytest
import torch

from autograder.checks import oracles, train_loop
from autograder.checks.device import exact_matmul
from autograder.checks.training_oracle import Relaid, arguments_for, stand_in_weights

CASE = train_loop.loop_case(clip=True)
LESSON_LAYOUT = [name for name in CASE.stand_in.course_state() if name != "positional.pe"]


def _loop(fn, model) -> tuple[list[float], dict[str, torch.Tensor]]:
    """``fn`` (a train_loop) on ``model`` over the case's batches: its losses, then the weights."""
    optimizer, scheduler = arguments_for(CASE, model, torch.optim)
    with exact_matmul(), oracles.fastpath_disabled(), torch.enable_grad():
        losses = fn(model, CASE.batches, optimizer, CASE.pad_id, CASE.smoothing, scheduler, CASE.clip)
    return losses, stand_in_weights(model, None)


def test_it_computes_the_stand_ins_output_from_one_parameter_per_name():
    relaid = Relaid(CASE.stand_in, LESSON_LAYOUT)
    assert len(list(relaid.parameters())) == len(LESSON_LAYOUT) > len(list(CASE.stand_in.parameters()))
    batch = CASE.batches[0]
    inputs = (batch["src"], batch["tgt_in"], batch["src_mask"], batch["tgt_mask"])
    with exact_matmul(), oracles.fastpath_disabled():
        assert torch.equal(relaid.generator(relaid(*inputs)), CASE.stand_in.generator(CASE.stand_in(*inputs)))


def test_the_oracles_loop_trains_it_as_it_trains_the_stand_in():
    here, there = (
        _loop(train_loop.oracle_loop, Relaid(CASE.stand_in, LESSON_LAYOUT)),
        _loop(train_loop.oracle_loop, copy.deepcopy(CASE.stand_in)),
    )
    assert here[0] == pytest.approx(there[0], rel=1e-12)
    assert all(torch.allclose(here[1][n], there[1][n], rtol=0, atol=1e-12) for n in there[1])


def test_a_clip_per_parameter_clips_the_pieces_it_names():
    """q, k and v clipped one by one (the lesson's layout) is another step than clipped together
    (the stand-in's packed in_proj_weight), and a weight left out of the layout is not trained."""
    each = next(m for m in train_loop.LOOP_MISTAKES if m.name == "gradients clipped per parameter")
    relaid = _loop(each.compute, Relaid(CASE.stand_in, LESSON_LAYOUT))
    packed = _loop(each.compute, copy.deepcopy(CASE.stand_in))
    assert relaid[0][0] == pytest.approx(packed[0][0], rel=1e-12)
    assert abs(relaid[0][-1] - packed[0][-1]) > 1e-3
    frozen = "generator.proj.bias"
    kept = _loop(each.compute, Relaid(CASE.stand_in, [n for n in LESSON_LAYOUT if n != frozen]))
    assert torch.equal(kept[1][frozen], CASE.stand_in.course_state()[frozen])
    assert not torch.equal(
        kept[1]["generator.proj.weight"], CASE.stand_in.course_state()["generator.proj.weight"]
    )


@pytest.mark.parametrize("layout", [["made.up.weight"], ["positional.pe"], LESSON_LAYOUT[:1] * 2])
def test_a_layout_of_other_names_is_refused(layout):
    with pytest.raises(ValueError, match="names each of the lesson's weights at most once"):
        Relaid(CASE.stand_in, layout)
