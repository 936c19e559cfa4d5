"""What every stage of one run shares: its config, its folder, the target, the base model.

The base model is loaded once per process and shared by the stages that only
read it (collect, route, evaluate); training loads its own copy to wrap in LoRA.
Long jobs (one adapter each) are kept under `.jobs/<key>/` as they finish, so a
run killed in the middle of a stage redoes only the job it was in.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factory.outputs import staged, swap_in, write_json
from trace_pipeline.config import PipelineConfig
from trace_pipeline.errors import PipelineError
from trace_pipeline.store import DONE, RunFolder, contents, digest, intact
from trainer.envs import EnvHandle
from trainer.settings import RolloutLimits


@dataclass(frozen=True)
class TargetHandle(EnvHandle):
    """A gymnasium env handle that passes the target's knob values to every env it makes."""

    kwargs: dict[str, Any] = field(default_factory=dict)

    def make(self, **kwargs: Any) -> Any:
        """A fresh env with the target's knob values (and `kwargs`)."""
        return super().make(**self.kwargs, **kwargs)


def phone_target(difficulty: Mapping[str, int]) -> TargetHandle:
    """The built-in phone target's env handle with these knob values: served
    through the target contract (`phone.contract_target`) as a user's target is,
    which plays exactly as its own env (tests/trace_pipeline/test_phone_target.py)."""
    from trace_pipeline.targets import contract, phone

    return TargetHandle(
        contract.ENV_ID,
        "trace_pipeline.targets.contract",
        {"name": phone.CAPABILITY, "description": phone.family().description},
        {
            "entry": "trace_pipeline.targets.phone:contract_target",
            "settings": {"difficulty": dict(difficulty)},
        },
    )


def python_target(entry: str, settings: Mapping[str, Any]) -> TargetHandle:
    """The env handle of a target written through the contract (`target.entry`)."""
    from trace_pipeline.targets import contract

    return TargetHandle(
        contract.ENV_ID,
        "trace_pipeline.targets.contract",
        {"name": entry.rpartition(":")[0], "description": f"the target {entry}"},
        {"entry": entry, "settings": dict(settings)},
    )


def gym_target(env: str) -> EnvHandle:
    """A gym target's env handle: one built on a task family (a generated package)
    served through the target contract (`contract.package_target`), as the phone
    target and a user's are, episode for episode what its own env plays but judged
    by success alone; any other gymnasium text env as itself."""
    from trace_pipeline.targets import contract
    from trainer.envs import resolve_env

    handle = resolve_env(env)
    try:
        made = handle.make()
    except Exception as exc:  # noqa: BLE001 - any env's constructor, with its own kinds
        raise PipelineError(
            f"target.env {env}: gymnasium cannot make it ({type(exc).__name__}: "
            f"{str(exc)[:200]}); give an env that makes with no arguments"
        ) from None
    family = contract.family_of(made)
    made.close()
    if family is None:
        return handle
    return TargetHandle(
        contract.ENV_ID,
        "trace_pipeline.targets.contract",
        handle.capability,
        {
            "entry": "trace_pipeline.targets.contract:package_target",
            "settings": {"env": env},
        },
    )


@dataclass
class Context:
    """One run's shared state."""

    config: PipelineConfig
    folder: RunFolder
    config_file: Path
    replay_test: bool = (
        False  # `--replay-test`: a test split played before may be again
    )
    _base: tuple[Any, Any] | None = None
    loaded: dict[str, Any] = field(default_factory=dict)  # what a stage loads once

    def say(self, text: str) -> None:
        """One progress line on stderr."""
        print(f"trace: {text}", file=sys.stderr, flush=True)

    @property
    def model_path(self) -> str:
        """The base model's path (the tiny test model is built once in the run folder)."""
        if self.config.model != "tiny":
            return self.config.model
        folder = self.folder.root / ".tiny-model"
        if not (folder / DONE).is_file():
            from trainer.tiny import build_tiny_model, write_tiny_gguf

            shutil.rmtree(folder, ignore_errors=True)
            build_tiny_model(folder)
            write_tiny_gguf(folder)  # the same weights for `backend: llamacpp`
            (folder / DONE).write_text("", encoding="utf-8")
        return str(folder)

    @property
    def gguf_path(self) -> str:
        """The base model's GGUF file, which llama.cpp plays (the tiny test model's is
        written beside its weights)."""
        from trainer.tiny import TINY_GGUF

        if self.config.model != "tiny":
            return self.config.model
        return str(Path(self.model_path) / TINY_GGUF)

    def llama(self) -> tuple[Any, Any]:
        """llama.cpp on the base model's GGUF file, and the tokenizer, loaded once;
        each call (a job's start) gets it with no cache kept from earlier work, so a
        job's tokens depend on its inputs alone (`LlamaCppGenerator.forget`)."""
        if "llama" in self.loaded:
            self.loaded["llama"][0].forget()
        else:
            from trainer.llamacpp import open_generator
            from trainer.models import load_tokenizer

            tokenizer = load_tokenizer(self.model_path, self.config.chat_template)
            generator = open_generator(
                self.gguf_path, tokenizer, sequences=self.config.generation_batch_size
            )
            self.loaded["llama"] = (generator, tokenizer)
        return self.loaded["llama"]

    def base(self) -> tuple[Any, Any]:
        """The frozen base model and its tokenizer, loaded once."""
        if self._base is None:
            from trainer.models import load_base

            self._base = load_base(
                self.model_path,
                chat_template=self.config.chat_template,
                precision=self.config.precision,
            )
        return self._base

    def target(self) -> EnvHandle:
        """The target's env handle (the phone target with its knob values applied)."""
        if not self.config.target.playable:
            raise PipelineError(
                "target kind trajectories has no environment to play the agent on; "
                "use kind phone or gym to collect and evaluate"
            )
        if self.config.target.kind == "gym":
            if "gym" not in self.loaded:
                self.loaded["gym"] = gym_target(str(self.config.target.env))
            return self.loaded["gym"]
        if self.config.target.kind == "tau2":
            return self._tau2()
        if self.config.target.kind == "python":
            return python_target(
                str(self.config.target.entry), self.config.target.settings
            )
        return phone_target(self.config.target.difficulty)

    def _tau2(self) -> EnvHandle:
        from trace_pipeline.targets import tau2
        from trainer.settings import EVAL_SEED_BASE

        settings = self.config.target.tau2
        arguments: dict[str, Any] = {"temperature": 0.0}
        if settings.user_api_base is not None:
            arguments["api_base"] = settings.user_api_base
            arguments["api_key"] = os.environ.get(settings.user_api_key_env, "EMPTY")
        return TargetHandle(
            tau2.ENV_ID,
            "trace_pipeline.targets.tau2",
            {
                "name": f"tau2_{settings.domain}",
                "description": f"tau2-bench {settings.domain}",
            },
            {
                "domain": settings.domain,
                "analysis_split": settings.analysis_split,
                "heldout_split": settings.heldout_split,
                "heldout_from": EVAL_SEED_BASE,
                "user_model": settings.user_model,
                "user_llm_args": arguments,
                "max_steps": settings.max_steps,
            },
        )

    def needs(self, seed: int) -> list[str]:
        """What the target's task of `seed` truly needs, as its env states in
        `info["needs"]` (never shown to the agent); [] when it does not say."""
        needs = task_info(self.target().make(), seed).get("needs", [])
        return [str(n) for n in needs] if isinstance(needs, list) else []

    def limits(self) -> RolloutLimits:
        """Episode limits of collection and evaluation (greedy by default)."""
        r = self.config.rollout
        return RolloutLimits(**r.model_dump(exclude={"tool_format"}))

    def job(
        self,
        kind: str,
        inputs: dict[str, Any],
        work: Callable[[Path], None],
        resumable: bool = False,
    ) -> Path:
        """The folder of a finished job with these inputs: reused, or made by `work(folder)`.

        A job works in a private folder moved into place when it is done. A
        killed job's folder is removed, or, when it is `resumable`, kept as
        `<job>.partial` for the rerun's `work` to go on from (an adapter's
        checkpoint: a kill costs the iteration under way, not the training).
        """
        key = digest({"kind": kind, **inputs})[:20]
        final = self.folder.root / ".jobs" / f"{kind}-{key}"
        if (final / DONE).is_file():
            if intact(final):
                self.say(f"{kind}: reusing the finished job {final.name}")
                return final
            self.say(f"{kind}: a file of the finished job {final.name} was edited, "
                     "removed or added since; playing it again")  # fmt: skip

        def finish(folder: Path) -> None:
            self.say(f"{kind}: running job {final.name}")
            started = time.monotonic()
            work(folder)
            write_json(folder / "job.json", {"kind": kind, "inputs": inputs})
            write_json(folder / DONE, contents(folder))
            self.say(
                f"{kind}: job {final.name} done in {time.monotonic() - started:.0f} s"
            )

        if not resumable:
            with staged(final) as staging:  # a half-done one left by a kill is replaced
                finish(staging)
            return final
        partial = final.with_name(f"{final.name}.partial")
        if partial.is_symlink() or (partial.exists() and not partial.is_dir()):
            partial.unlink()  # not what a job leaves: nothing to go on from
        partial.mkdir(parents=True, exist_ok=True)
        if not (partial / DONE).is_file():  # else killed just before the move
            finish(partial)
        swap_in(partial, final)
        return final


def transcript(episode: Any) -> dict[str, Any]:
    """What is kept of a played episode (a job's `episodes.json` row; a trajectory
    record is made from it with the task's tools and expected actions)."""
    return {
        "seed": episode.seed,
        "success": bool(episode.success),
        "reward": float(episode.reward),
        "turns": episode.turns,
        "ending": episode.ending.value,
        "messages": episode.messages,
    }


def task_info(env: Any, seed: int) -> dict[str, Any]:
    """The info of the task of `seed`: the env's `describe(seed)` when it has one
    (a target whose reset is costly, like tau2's LLM user), else reset's info."""
    describe = getattr(env, "describe", None)
    return describe(seed) if callable(describe) else env.reset(seed=seed)[1]
