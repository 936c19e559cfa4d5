"""The protocol: a test split is played once per frozen config; another config's play
of the same test seeds is refused unless --replay-test, and recorded as a replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trace_pipeline.config import PipelineConfig
from trace_pipeline.errors import PipelineError
from trace_pipeline.protocol import PROTOCOL, first_seed, frozen_digest, guard, record
from trace_pipeline.store import MARKED, MARKER, RunFolder
from trainer.settings import DEV_SEED_BASE, EVAL_SEED_BASE


def _folder(root: Path) -> RunFolder:
    root.mkdir(parents=True)
    (root / MARKER).write_text(MARKED)
    return RunFolder(root)


def _config(ledger: Path | None = None, **sections) -> PipelineConfig:
    data = {"model": "tiny", "protocol": {"ledger": str(ledger) if ledger else None}}
    return PipelineConfig.model_validate({**data, **sections})


def test_a_test_split_is_played_once_per_frozen_config(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger" / "plays.jsonl"
    first, second = _folder(tmp_path / "a"), _folder(tmp_path / "b")
    frozen = _config(ledger)
    kept = record(first, frozen, False)
    assert kept["plays"][0]["seeds"] == [EVAL_SEED_BASE, 40] and not kept["replay"]
    assert json.loads((first.root / PROTOCOL).read_text())["config_digest"] == (
        frozen_digest(frozen)
    )
    guard(first, frozen, False)  # the same play, resumed
    record(first, frozen, False)
    assert len(ledger.read_text().splitlines()) == 1  # not a second play
    # where jobs run does not change an outcome: the same frozen config
    guard(second, _config(ledger, executor="ray"), False)
    tuned = _config(ledger, train={"iterations": 3})
    for folder in (first, second):  # in this folder, or in another sharing the ledger
        with pytest.raises(PipelineError, match="would be a replay.*--replay-test"):
            guard(folder, tuned, False)
    guard(_folder(tmp_path / "c"), _config(None, train={"iterations": 3}), False)
    guard(second, tuned, True)
    again = record(second, tuned, True)
    assert again["replay"] and len(again["plays"]) == 2 and len(again["configs"]) == 2
    # another target, or the dev split, is no replay of this test split
    guard(second, _config(ledger, target={"difficulty": {"share_off": 10}}), False)
    dev = _config(ledger, train={"iterations": 5}, protocol={"split": "dev"})
    guard(first, dev, False)
    assert first_seed(dev) == DEV_SEED_BASE and first_seed(frozen) == EVAL_SEED_BASE
    # the best single adapter, chosen on dev, is frozen with the rest: choosing
    # another after seeing the test split replays it
    chosen = _config(ledger, protocol={"ledger": str(ledger), "best_single": "a"})
    assert frozen_digest(chosen) != frozen_digest(frozen)
    with pytest.raises(PipelineError, match="would be a replay"):
        guard(first, chosen, False)
    # so are the comparisons pre-registered on dev
    primary = {"ledger": str(ledger), "best_single": "a", "primary": ["a vs b"]}
    assert frozen_digest(_config(ledger, protocol=primary)) != frozen_digest(chosen)


def test_a_ledger_that_is_a_link_or_holds_garbage(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "run")
    garbage = tmp_path / "plays.jsonl"
    garbage.write_text('not json\n[1, 2]\n{"seeds": "x"}\n')
    record(folder, _config(garbage), False)  # lines that are no plays are skipped
    assert len(garbage.read_text().splitlines()) == 4
    precious = tmp_path / "notes.txt"
    precious.write_text("mine\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(precious)
    with pytest.raises(PipelineError, match="symbolic link"):
        record(_folder(tmp_path / "other"), _config(link), False)
    assert precious.read_text() == "mine\n"


def test_a_dev_split_with_a_tau2_target_is_refused() -> None:
    with pytest.raises(ValueError, match="tau2 target has its own splits"):
        _config(None, target={"kind": "tau2"}, protocol={"split": "dev"})
