"""Hidden tests for lesson 10's train_step and train_loop: fresh sizes, weights, batches, pad_id
(not 0), learning rate, smoothing and gamma; train_step once with a StepLR scheduler and once
without one (scheduler=None), train_loop with a scheduler, with and without a clip."""

from autograder.checks import train_loop, train_step
from autograder.checks.output_layer import transformer_args
from autograder.hidden.core import Fresh, replayable


def _fresh_sizes(fresh: Fresh, smoothing: bool = True) -> tuple[dict, int, int, int, int, dict]:
    """A fresh Transformer's arguments, a batch size, source and target lengths, a pad_id that is
    not 0, and fresh learning rate, gamma and (when ``smoothing``, else 0) smoothing."""
    n_heads = (2, 4)[fresh.size(0, 1)]
    args = transformer_args(
        src_vocab=fresh.size(6, 14),
        tgt_vocab=fresh.size(6, 14),
        d_model=n_heads * fresh.size(2, 4),
        n_heads=n_heads,
        d_ff=fresh.size(8, 32),
        n_layers=fresh.size(1, 2),
        max_len=fresh.size(10, 20),
    )
    batch = fresh.size(2, 4)
    t_src, t_tgt = fresh.size(batch, 8), fresh.size(batch, 8)
    pad_id = fresh.size(1, min(args["src_vocab"], args["tgt_vocab"]) - 1)  # not 0
    settings = {
        "lr": 0.2 + 0.8 * fresh.size(0, 100) / 100,
        "gamma": 0.2 + 0.6 * fresh.size(0, 100) / 100,
        "smoothing": 0.05 + 0.25 * fresh.size(0, 100) / 100 if smoothing else 0.0,
    }
    return args, batch, t_src, t_tgt, pad_id, settings


@replayable
def hidden_train_step(fresh: Fresh, fn, model_class, optim) -> None:
    """Two cases, each two calls of train_step on the learner's model with fresh weights, against
    the check's oracle (PyTorch's modules, F.cross_entropy, SGD): the first with a scheduler and
    label smoothing, the second without a scheduler."""
    for with_scheduler in (True, False):
        args, batch, t_src, t_tgt, pad_id, settings = _fresh_sizes(fresh, smoothing=with_scheduler)
        settings["use_scheduler"] = with_scheduler
        case = train_step.make_case(args, batch, t_src, t_tgt, pad_id, fresh.generator, **settings)
        train_step.compare_train_step(fn, model_class, optim, case)


@replayable
def hidden_train_loop(fresh: Fresh, fn, model_class, optim, clip: bool) -> None:
    """One call of train_loop over two to four fresh batches on the learner's model with fresh
    weights, against the check's oracle (PyTorch's modules, F.cross_entropy, SGD): with a StepLR
    scheduler and label smoothing, and with ``clip``, a clip below the first gradients' norm."""
    args, batch, t_src, t_tgt, pad_id, settings = _fresh_sizes(fresh)
    n_batches = fresh.size(2, 4)
    case = train_loop.make_loop_case(
        args, n_batches, batch, t_src, t_tgt, pad_id, fresh.generator, clip, **settings
    )
    train_loop.compare_train_loop(fn, model_class, optim, case)
