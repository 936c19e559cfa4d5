"""The optimizer step: warm-up, micro-batches and the shared-prefix pass."""

from __future__ import annotations

import pytest
import torch

from trainer.settings import TrainConfig


def test_warm_up_raises_the_learning_rate_linearly_and_continues_after_a_resume() -> (
    None
):
    from trainer.optimize import warm_up

    def steps(optimizer: torch.optim.Optimizer, weight: torch.Tensor, n: int) -> list:
        rates = []
        for _ in range(n):
            weight.grad = torch.ones(2)
            warm_up(optimizer, 4)
            rates.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
        return rates

    weight = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.AdamW([weight], lr=0.1, weight_decay=0.0)
    assert steps(optimizer, weight, 2) == pytest.approx([0.025, 0.05])
    assert float(weight.detach()[0]) == pytest.approx(
        1 - 0.025 - 0.05, abs=1e-4
    )  # Adam: ~lr
    resumed = torch.optim.AdamW([weight], lr=0.1, weight_decay=0.0)
    resumed.load_state_dict(optimizer.state_dict())  # as checkpoint.load does
    assert steps(resumed, weight, 3) == pytest.approx([0.075, 0.1, 0.1])
    weight.grad = torch.ones(2)
    plain = torch.optim.AdamW([weight], lr=0.1)
    warm_up(plain, 0)  # no warmup: the learning rate as given
    assert plain.param_groups[0]["lr"] == 0.1


def test_micro_batches_take_the_same_optimizer_step_as_one_pass(tiny_model_dir) -> None:
    """--micro-batch-size lowers peak memory only: the same step, loss and gradient norm."""
    import random

    from trainer.losses import grpo_loss
    from trainer.models import load_base, with_lora
    from trainer.optimize import Row, batch_logprobs, optimize

    generator = torch.Generator().manual_seed(0)
    rows = []
    for length, advantage in ((9, 1.0), (14, -0.5), (6, 0.7), (11, -1.2), (8, 0.3)):
        tokens = torch.randint(0, 200, (length,), generator=generator).tolist()
        mask = [0] * 3 + [1] * (length - 3)  # different trained lengths per row
        old = (-torch.rand(length, generator=generator)).tolist()
        rows.append(Row(tokens, mask, old, advantage))
    results = {}
    for micro in (0, 2):
        base, _ = load_base(str(tiny_model_dir))
        model = with_lora(base, TrainConfig(lora_rank=4))
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=1e-2
        )

        def objective(batch, model=model):
            logprobs = batch_logprobs(model, batch, 1.0)
            return grpo_loss(
                logprobs, batch.old_logprobs, batch.mask, batch.advantages, 0.2
            )

        stats = optimize(
            model, optimizer, rows, objective, minibatch_size=5, epochs=1,
            max_grad_norm=1.0, pad=0, rng=random.Random(0), desc="test",
            micro_batch_size=micro,
        )  # fmt: skip
        weights = [p.detach().clone() for p in model.parameters() if p.requires_grad]
        results[micro] = (stats, weights)
    (whole, whole_weights), (micro, micro_weights) = results[0], results[2]
    assert micro["loss"] == pytest.approx(whole["loss"], abs=1e-6)
    assert micro["grad_norm"] == pytest.approx(whole["grad_norm"], rel=1e-4)
    assert 0 <= micro["clip_fraction"] <= 1  # averaged over passes by row share
    for one, other in zip(whole_weights, micro_weights, strict=True):
        torch.testing.assert_close(one, other, rtol=1e-4, atol=1e-6)


def _rows_sharing_a_prefix(seed: int) -> list:
    """Four rows after a 20-token prefix, trained on their last tokens, with the
    sampler's log-probs and advantages."""
    from trainer.optimize import Row

    generator = torch.Generator().manual_seed(seed)
    prefix = torch.randint(0, 200, (20,), generator=generator).tolist()
    rows = []
    for extra, trained, advantage in (
        (3, 6, 1.0),
        (5, 9, -0.5),
        (2, 4, 0.7),
        (0, 7, -1.2),
    ):
        tail = torch.randint(0, 200, (extra + trained,), generator=generator).tolist()
        mask = [0] * (len(prefix) + extra) + [1] * trained
        old = (-torch.rand(len(prefix) + len(tail), generator=generator)).tolist()
        rows.append(Row(prefix + tail, mask, old, advantage))
    return rows


@pytest.mark.parametrize(
    ("sliding_window", "checkpointing", "micro"),
    [(None, True, 0), (None, False, 2), (6, True, 2), (6, False, 0)],
)
def test_a_shared_prefix_encoded_once_gives_every_row_its_own_gradient(
    tmp_path, sliding_window, checkpointing, micro
) -> None:
    """The update's shared-prefix pass (trainer.shared_prefix) is exact: the same loss,
    gradient and step as running every row whole, with sliding-window layers (the
    prefix longer than the window), checkpointed or not, in one pass or several."""
    import random

    from trainer.losses import grpo_loss
    from trainer.models import load_base, with_lora
    from trainer.optimize import batch_logprobs, optimize
    from trainer.shared_prefix import shared_length
    from trainer.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "m", layers=4, sliding_window=sliding_window)
    rows = _rows_sharing_a_prefix(1)
    assert shared_length([(r.tokens, r.mask) for r in rows]) == 19
    results = {}
    for share in (False, True):
        base, _ = load_base(str(folder))
        model = with_lora(
            base, TrainConfig(lora_rank=4, gradient_checkpointing=checkpointing)
        )
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=1e-2
        )
        used = []

        def objective(batch, model=model, used=used):
            used.append(batch.prefix is not None)
            logprobs = batch_logprobs(model, batch, 0.9)
            reference = batch_logprobs(model, batch, 0.9, prefix=False)
            loss, extra = grpo_loss(
                logprobs, batch.old_logprobs, batch.mask, batch.advantages, 0.2,
                reference.detach(), 0.1,
            )  # fmt: skip
            return loss, extra

        stats = optimize(
            model, optimizer, rows, objective, minibatch_size=4, epochs=2,
            max_grad_norm=1.0, pad=0, rng=random.Random(0), desc="test",
            micro_batch_size=micro, share_prefix=share,
        )  # fmt: skip
        assert set(used) == {share}
        weights = [p.detach().clone() for p in model.parameters() if p.requires_grad]
        results[share] = (stats, weights)
    (whole, whole_weights), (shared, shared_weights) = results[False], results[True]
    assert shared["epoch_losses"] == pytest.approx(whole["epoch_losses"], abs=1e-5)
    assert shared["grad_norm"] == pytest.approx(whole["grad_norm"], rel=1e-4)
    for one, other in zip(whole_weights, shared_weights, strict=True):
        torch.testing.assert_close(one, other, rtol=1e-4, atol=1e-6)


def test_the_shared_prefix_stops_before_the_first_trained_token() -> None:
    from trainer.shared_prefix import shared_length

    assert (
        shared_length(
            [([1, 2, 3, 4, 5], [0, 0, 0, 1, 1]), ([1, 2, 3, 4, 6], [0, 0, 0, 0, 1])]
        )
        == 2
    )
    assert (
        shared_length([([1, 2, 3, 4], [0, 0, 0, 1]), ([1, 9, 3, 4], [0, 0, 0, 1])]) == 1
    )
    assert shared_length([([1, 2], [1, 1]), ([1, 2], [1, 1])]) == 0
    assert shared_length([([1, 2, 3], [0, 0, 0]), ([1, 2, 3], [0, 0, 0])]) == 2


def test_rows_run_whole_where_transformers_would_drop_the_prefix_cache(
    tiny_model_dir, monkeypatch
) -> None:
    """Before `_can_checkpoint_with_cache`, checkpointed layers drop any cache: the
    suffixes would attend to nothing, so the prefix is not shared there."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    from trainer.models import load_base, with_lora
    from trainer.shared_prefix import supported

    base, _ = load_base(str(tiny_model_dir))
    checkpointed = with_lora(base, TrainConfig(lora_rank=4))
    assert supported(checkpointed)
    monkeypatch.delattr(GradientCheckpointingLayer, "_can_checkpoint_with_cache")
    assert not supported(checkpointed)
    base, _ = load_base(str(tiny_model_dir))
    plain = with_lora(base, TrainConfig(lora_rank=4, gradient_checkpointing=False))
    assert supported(plain)


def test_the_old_policys_log_probs_encode_the_shared_prefix_once_and_match_whole_rows(
    tmp_path, monkeypatch
) -> None:
    """`with_current_logprobs` (a separate sampler's episodes scored by the trainer)
    encodes a chunk's shared prefix once: every row's log-probs are those of the row
    run whole, 0 on the prefix, and the prefix pass was taken."""
    from trainer import optimize
    from trainer.models import load_base, with_lora
    from trainer.optimize import Batch, Row, batch_logprobs, with_current_logprobs
    from trainer.tiny import build_tiny_model

    encoded = []
    prefix_of = optimize._prefix
    monkeypatch.setattr(
        optimize, "_prefix", lambda *a: encoded.append(prefix_of(*a)) or encoded[-1]
    )
    base, _ = load_base(str(build_tiny_model(tmp_path / "m", layers=3)))
    model = with_lora(base, TrainConfig(lora_rank=4))
    generator = torch.Generator().manual_seed(2)
    prefix = torch.randint(0, 200, (24,), generator=generator).tolist()
    rows = []
    for extra, trained in ((3, 6), (0, 9), (5, 2)):
        tokens = prefix + torch.randint(0, 200, (extra + trained,)).tolist()
        rows.append(Row(tokens, [0] * (24 + extra) + [1] * trained, None, 1.0))
    scored = with_current_logprobs(model, rows, 0.8, pad=0, batch_size=3)
    for row, mine in zip(rows, scored, strict=True):
        with torch.no_grad():
            whole = batch_logprobs(model, Batch.of([row], 0, "cpu"), 0.8)[0]
        assert len(mine.old_logprobs) == len(row.tokens)
        assert mine.old_logprobs[:24] == [0.0] * 24
        torch.testing.assert_close(
            torch.tensor(mine.old_logprobs), whole, rtol=1e-4, atol=1e-5
        )
        assert (mine.tokens, mine.mask, mine.advantage) == (row.tokens, row.mask, 1.0)
    assert [p.length for p in encoded] == [23]  # one chunk, its prefix encoded once


@pytest.mark.parametrize(
    ("sliding_window", "share", "micro"),
    [(None, True, 0), (None, False, 0), (6, True, 2), (6, False, 2)],
)
def test_kept_frozen_layers_give_the_same_scores_and_steps_as_whole_passes(
    tmp_path, monkeypatch, sliding_window, share, micro
) -> None:
    """With LoRA on the top layers, the frozen layers' outputs kept from scoring the
    old policy and from the first epoch (trainer.frozen_trunk) give the same old
    log-probs, losses, KL reference and steps as every pass run whole, and the
    later passes did skip the frozen layers."""
    import random

    from trainer import frozen_trunk
    from trainer.losses import grpo_loss
    from trainer.models import load_base, with_lora
    from trainer.optimize import batch_logprobs, optimize, with_current_logprobs
    from trainer.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "m", layers=4, sliding_window=sliding_window)
    skipped = []
    skipping = frozen_trunk.Trunk.skipping
    monkeypatch.setattr(
        frozen_trunk.Trunk,
        "skipping",
        lambda self: skipped.append(self.lowest) or skipping(self),
    )
    results = {}
    for budget in (0, 1024):
        base, _ = load_base(str(folder))
        model = with_lora(
            base, TrainConfig(lora_rank=4, lora_layers=2, trunk_cache_mib=budget)
        )
        assert (frozen_trunk.of(model) is not None) == (budget > 0)
        optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=1e-2
        )
        rows = with_current_logprobs(model, _rows_sharing_a_prefix(1), 0.9, 0, 4)

        def objective(batch, model=model):
            logprobs = batch_logprobs(model, batch, 0.9)
            reference = batch_logprobs(model, batch, 0.9, prefix=False)
            return grpo_loss(
                logprobs, batch.old_logprobs, batch.mask, batch.advantages, 0.2,
                reference.detach(), 0.1,
            )  # fmt: skip

        skipped.clear()
        stats = optimize(
            model, optimizer, rows, objective, minibatch_size=2, epochs=2,
            max_grad_norm=1.0, pad=0, rng=random.Random(0), desc="test",
            micro_batch_size=micro, share_prefix=share,
        )  # fmt: skip
        weights = [p.detach().clone() for p in model.parameters() if p.requires_grad]
        results[budget] = ([r.old_logprobs for r in rows], stats, weights, len(skipped))
    (old, whole, whole_weights, none), (kept_old, kept, kept_weights, used) = (
        results[0],
        results[1024],
    )
    assert none == 0 and used >= 4  # every update pass ran from the kept rows
    for one, other in zip(old, kept_old, strict=True):
        assert other == pytest.approx(one, abs=1e-6)
    assert kept["epoch_losses"] == pytest.approx(whole["epoch_losses"], abs=1e-5)
    assert kept["grad_norm"] == pytest.approx(whole["grad_norm"], rel=1e-4)
    # A kept h_k was computed in another batch shape (last-bit differences), and
    # AdamW moves a weight whose gradient is near 0 by up to the learning rate
    # (1e-2) whatever its size: such a weight may differ by ~1e-4 after 4 steps.
    for one, other in zip(whole_weights, kept_weights, strict=True):
        torch.testing.assert_close(one, other, rtol=1e-4, atol=3e-4)


def test_a_decoder_that_cannot_run_from_kept_rows_runs_whole_after_one_warning(
    tmp_path, monkeypatch
) -> None:
    """The first pass from kept rows is checked against the whole pass: when they
    differ (here: kept rows corrupted), keeping stops for the run, with one
    warning, and the scores are the whole passes'."""
    from trainer import frozen_trunk
    from trainer.models import load_base, with_lora
    from trainer.optimize import with_current_logprobs
    from trainer.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "m", layers=4)
    base, _ = load_base(str(folder))
    model = with_lora(base, TrainConfig(lora_rank=4, lora_layers=1))
    rows = _rows_sharing_a_prefix(2)
    expected = with_current_logprobs(model, rows, 1.0, 0, 1)  # before any is kept
    rows_of = frozen_trunk.Trunk.rows
    monkeypatch.setattr(
        frozen_trunk.Trunk, "rows", lambda self, *a: rows_of(self, *a) + 1.0
    )
    model = with_lora(
        load_base(str(folder))[0], TrainConfig(lora_rank=4, lora_layers=1)
    )
    with pytest.warns(RuntimeWarning, match="cannot be run from its lowest adapted"):
        first = with_current_logprobs(model, rows, 1.0, 0, 2)
    assert frozen_trunk.of(model) is None
    again = with_current_logprobs(model, rows, 1.0, 0, 2)
    for one, other, third in zip(expected, first, again, strict=True):
        assert other.old_logprobs == pytest.approx(one.old_logprobs, abs=1e-6)
        assert third.old_logprobs == pytest.approx(one.old_logprobs, abs=1e-6)


def test_kept_rows_stay_within_the_budget_the_oldest_dropped_first() -> None:
    from trainer.frozen_trunk import Trunk

    trunk = Trunk(decoder=None, lowest=1, budget_bytes=3 * 4 * 8)  # three rows of 4 x 2
    for i in range(5):
        trunk.keep((i,), torch.full((4, 2), float(i)))
    assert list(trunk.kept) == [(2,), (3,), (4,)] and trunk.used == 96
    trunk.keep((9,), torch.zeros(40, 2))  # larger than the whole budget: not kept
    assert list(trunk.kept) == [(2,), (3,), (4,)]
    assert trunk.has([(3,), (4,)]) and not trunk.has([(1,), (4,)]) and not trunk.has([])
