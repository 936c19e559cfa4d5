"""The protocol: choices made on the dev split, the test split played once per frozen config.

`evaluate` plays the split `protocol.split` names: `dev` while choosing (knobs,
budgets, routing), `test` once the config is frozen. Before the test split is
played, the run writes `protocol.json`: the frozen config's digest, the code
version, the target and its test seeds, and every play of those seeds it knows
of (this run folder's, and those of any run sharing `protocol.ledger`, an
append-only JSON-lines file). Playing the same test seeds of the same target
under another config digest is a replay: it is refused before any stage runs
unless `--replay-test` is given, and then it is recorded and reported as one.
A rerun under the same config (after a kill) is the same play.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from factory.outputs import open_own, write_json
from factory.version import project_version
from trace_pipeline.config import PipelineConfig, tasks
from trace_pipeline.errors import PipelineError
from trace_pipeline.store import RunFolder, digest
from trainer.settings import DEV_SEED_BASE, EVAL_SEED_BASE

PROTOCOL = "protocol.json"
# What does not change an evaluation's outcome: where jobs run, where plays are kept.
UNFROZEN = ("executor", "ray", "protocol")


def first_seed(config: PipelineConfig) -> int:
    """The first seed of the split `evaluate` plays."""
    return EVAL_SEED_BASE if config.protocol.split == "test" else DEV_SEED_BASE


def frozen_digest(config: PipelineConfig) -> str:
    """The digest of everything in the config that shapes an evaluation's outcome or
    what its report compares (the best single adapter and the pre-registered
    comparisons, chosen on dev)."""
    data = config.as_json()
    frozen = {key: value for key, value in data.items() if key not in UNFROZEN}
    for key in ("best_single", "primary"):  # absent: earlier digests still hold
        if getattr(config.protocol, key):
            frozen[key] = getattr(config.protocol, key)
    return digest(frozen)


def _play(config: PipelineConfig, run: Path, replay: bool) -> dict[str, Any]:
    return {
        "target": digest(config.section(*tasks(config))),
        "seeds": [EVAL_SEED_BASE, config.target.heldout_episodes],
        "config": frozen_digest(config),
        "run": str(run.resolve()),
        "version": project_version(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "replay": replay,
    }


def _overlap(play: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two plays are of the same target and share a test seed."""
    try:
        (first, count), (other_first, other_count) = play["seeds"], other["seeds"]
        return play["target"] == other["target"] and (
            first < other_first + other_count and other_first < first + count
        )
    except (KeyError, TypeError, ValueError):
        return False


def _ledger(path: Path) -> list[dict[str, Any]]:
    """The plays a ledger holds (lines that are not plays are skipped, not trusted)."""
    try:
        with os.fdopen(open_own(path, write=False), encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise PipelineError(
            f"protocol.ledger {path}: cannot read it ({exc.strerror or exc})"
        ) from None
    plays = []
    for line in lines:
        try:
            play = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(play, dict):
            plays.append(play)
    return plays


def plays(folder: RunFolder, config: PipelineConfig) -> list[dict[str, Any]]:
    """Every known play of this config's test seeds (this folder's, the ledger's)."""
    here = _play(config, folder.root, False)
    known = []
    try:
        recorded = json.loads((folder.root / PROTOCOL).read_text(encoding="utf-8"))
        known += [p for p in recorded.get("plays", []) if isinstance(p, dict)]
    except (OSError, ValueError, RecursionError, AttributeError):
        pass
    if config.protocol.ledger is not None:
        known += _ledger(Path(config.protocol.ledger))
    unique = {(p.get("run"), p.get("config")): p for p in known if _overlap(here, p)}
    return list(unique.values())


def guard(folder: RunFolder, config: PipelineConfig, replay: bool) -> None:
    """Refuse, before any stage runs, to play test seeds already played under another
    frozen config, unless `replay` (`--replay-test`)."""
    if config.protocol.split != "test" or replay:
        return
    mine, known = frozen_digest(config), plays(folder, config)
    here = str(folder.root.resolve())
    if any(p.get("run") == here and p.get("config") == mine for p in known):
        return  # this play itself, resumed or rerun
    others = sorted({str(p.get("config"))[:12] for p in known} - {mine[:12]})
    if others:
        raise PipelineError(
            f"the test split (seeds {EVAL_SEED_BASE}.. x {config.target.heldout_episodes}) "
            f"of this target was played under config {', '.join(others)}; this config "
            f"({mine[:12]}) would be a replay: choose on protocol.split dev, or pass "
            "--replay-test (the report says so), or give another target's test split"
        )


def record(folder: RunFolder, config: PipelineConfig, replay: bool) -> dict[str, Any]:
    """Write protocol.json (and append to the ledger) as the test split is about to be
    played; return what the report shows of the protocol."""
    play = _play(config, folder.root, replay)
    known = plays(folder, config)
    if not any(
        p.get("run") == play["run"] and p.get("config") == play["config"] for p in known
    ):
        known.append(play)
        if config.protocol.ledger is not None:
            _append(Path(config.protocol.ledger), play)
    protocol = {
        "config_digest": play["config"],
        "version": play["version"],
        "target": config.section(*tasks(config)),
        "test_seeds": {
            "first": EVAL_SEED_BASE,
            "count": config.target.heldout_episodes,
        },
        "ledger": config.protocol.ledger,
        "plays": known,
        "configs": sorted({p["config"] for p in known}),
        "replay": replay or len({p["config"] for p in known}) > 1,
    }
    write_json(folder.root / PROTOCOL, protocol)
    return protocol


def _append(path: Path, play: dict[str, Any]) -> None:
    """One line added to the ledger, under its lock (runs may share it)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = open_own(path, write=True)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0, os.SEEK_END)  # after what others added while we waited
            handle.write(json.dumps(play, sort_keys=True) + "\n")
    except OSError as exc:
        raise PipelineError(
            f"protocol.ledger {path}: cannot append to it ({exc.strerror or exc}); "
            "give a file you can write"
        ) from None
