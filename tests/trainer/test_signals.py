"""Signals during training: an iteration dropped cleanly or finished, never half-applied."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from trainer import grpo
from trainer.errors import Interrupted


def _moved_then(event):
    """A model, and work that moves its weights, then `event()` (a signal, say)."""
    model = torch.nn.Linear(2, 2)
    before = [p.detach().clone() for p in model.parameters()]

    def work() -> str:
        with torch.no_grad():
            for weight in model.parameters():
                weight.add_(1.0)
        event()
        return "finished"

    return model, before, work


def _sigterm() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


def _swallowed_sigterm() -> None:
    try:  # environment code with a bare except
        _sigterm()
    except BaseException:  # noqa: BLE001, S110 - what careless user code does
        pass


@pytest.mark.parametrize("event", [_sigterm, _swallowed_sigterm])
def test_a_first_signal_during_an_iteration_drops_it_and_puts_the_weights_back(
    event,
) -> None:
    model, before, work = _moved_then(event)
    with grpo._Stop(droppable=True) as stop:
        assert stop.unless_stopped(model, work) is None
    assert stop.signal == signal.SIGTERM
    for weight, saved in zip(model.parameters(), before, strict=True):
        assert torch.equal(weight, saved)


def test_a_signal_that_came_before_the_iteration_drops_it_before_it_starts() -> None:
    model, _, work = _moved_then(lambda: None)
    ran = []
    with grpo._Stop(droppable=True) as stop:
        _sigterm()
        assert stop.unless_stopped(model, lambda: ran.append(work())) is None
    assert ran == []


def test_with_several_ranks_a_signal_lets_the_iteration_finish() -> None:
    model, before, work = _moved_then(_sigterm)
    with grpo._Stop(droppable=False) as stop:
        assert stop.unless_stopped(model, work) == "finished"
    assert stop.signal == signal.SIGTERM
    assert not torch.equal(next(model.parameters()), before[0])


def test_a_second_signal_stops_at_once() -> None:
    with grpo._Stop(droppable=True), pytest.raises(Interrupted):
        _sigterm()
        _sigterm()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
