"""The experiment machinery that lesson 08 imports (autograder/stack_experiments.py): the data-flow
figure draws every part of both sides, and the gradients it measures tell what the lesson says."""

from matplotlib import pyplot as plt
from matplotlib.patches import FancyBboxPatch

from autograder import stack_experiments as experiments
from solutions.encoder_decoder import Encoder
from solutions.feed_forward import PositionwiseFeedForward
from solutions.layer_norm import LayerNorm


def test_the_figure_draws_both_sides_with_their_residual_paths():
    figure = experiments.draw_data_flow()
    try:
        [ax] = figure.axes
        boxes = [patch for patch in ax.patches if isinstance(patch, FancyBboxPatch)]
        texts = [text.get_text() for text in ax.texts]
        gray_paths = [line for line in ax.lines if line.get_color() == "gray"]
    finally:
        plt.close(figure)
    # 6 boxes and a frame on the encoder's side, 10 boxes and a frame on the decoder's
    assert len(boxes) == 18
    assert texts.count("Add & Norm") == 5
    assert texts.count("final LayerNorm") == 2
    assert "memory [B, T_src, D]" in texts
    assert len(gray_paths) == 5  # a residual path round each of the 2 + 3 sub-layers


def test_only_the_residual_keeps_a_deep_stacks_first_layer_learning():
    plain, norm, residual = (
        experiments.first_layer_gradient(PositionwiseFeedForward, LayerNorm, 16, wiring)
        for wiring in ("plain", "norm", "residual")
    )
    shallow = experiments.first_layer_gradient(PositionwiseFeedForward, LayerNorm, 1, "residual")
    assert plain < 1e-6 < norm < residual
    assert 0.5 < residual / shallow < 5  # the same size at every depth


def test_post_ln_keeps_the_stream_at_unit_spread_and_pre_ln_lets_it_grow():
    shallow, deep = experiments.post_and_pre(Encoder, 2), experiments.post_and_pre(Encoder, 24)
    assert len(deep) == 6  # first-layer grad, last-layer grad, spread: Post-LN, then Pre-LN
    assert abs(deep[2] - 1.0) < 0.01  # Post-LN: each layer ends in a norm
    assert deep[5] > shallow[5] > 1.0  # Pre-LN: the residual stream grows with depth
    assert deep[0] < deep[1] / 2  # Post-LN's first layer gets far less gradient than its last
