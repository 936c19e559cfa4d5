"""One training run wired up: settings, output folder, environment, model, sampler.

`trainer train`, the benchmarks and the tests all start runs here, so they share
one set-up: the output folder is checked before anything is loaded, the chat
template is tried on the environment's real first prompt, the LoRA weights are
drawn from --seed (two runs with one seed end with identical adapters), and the
sampler (the model itself, or vLLM) is built for the trained adapter.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factory.outputs import regular_file, staged, unwritable_as, write_text
from trainer import checkpoint, distributed, env_calls
from trainer.chat import ChatFormat
from trainer.envs import EnvHandle, resolve_envs
from trainer.errors import TrainerError
from trainer.grpo import Outcome
from trainer.rollout import Generator
from trainer.settings import RolloutLimits, TrainConfig
from trainer.trackers import require

# Written into every --out, so --force only ever starts over in a folder this tool wrote.
MARKER = ".trace-trainer"


def _written_by_trainer(out: Path) -> bool:
    """Whether `trainer train` wrote `out`: its marker or checkpoint is a regular file
    (a link to one could name any file)."""
    return regular_file(out / MARKER) or regular_file(out / "checkpoint" / "state.json")


def check_out(
    out: Path, resume: bool, force: bool, inputs: tuple[str, ...] = ()
) -> None:
    """Refuse an output folder that cannot take this run, before any model is loaded.

    It must be a plain, writable folder named in UTF-8, must not hold or sit
    inside an input (`--model`, `--env`), must hold no symlinks (writes would
    follow them out of it), and `--force` only starts over in a folder that
    `trainer train` wrote.
    """
    try:
        str(out).encode("utf-8")
    except UnicodeEncodeError:
        raise TrainerError(
            f"--out {str(out)!r} is not valid UTF-8; choose a plain folder name"
        ) from None
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise TrainerError(
            f"--out {out} is a file or a link; give a folder for the adapter"
        )
    target = out.resolve()
    for given in inputs:
        source = Path(given)
        if source.exists() and (
            target == source.resolve()
            or source.resolve() in target.parents
            or target in source.resolve().parents
        ):
            raise TrainerError(
                f"--out {out} overlaps the input {given}; write the adapter to its own folder"
            )
    found = list(out.iterdir()) if out.is_dir() else []
    entries = [p for p in found if p.name != MARKER]
    links = [p.name for p in found if p.is_symlink()]
    if links:
        raise TrainerError(
            f"--out {out} holds symbolic links ({', '.join(sorted(links)[:3])}); "
            "give a folder without links"
        )
    if entries:
        if not (resume or force):
            raise TrainerError(
                f"--out {out} is not empty; pass --resume to continue or --force to start over"
            )
        if not _written_by_trainer(out):
            raise TrainerError(
                f"--out {out} holds files `trainer train` did not write; --force only starts "
                "over in a folder it wrote: give an empty or new folder"
            )
    if resume and not checkpoint.resumable(out):
        raise TrainerError(f"--resume: no checkpoint in {out}; start without --resume")
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TrainerError(f"--out {out} is not writable; give a folder you can write")


def claim_out(out: Path) -> None:
    """Create `out` and mark it the trainer's, once every check has passed (a
    refused run leaves nothing, and no folder it did not write becomes its own)."""
    with unwritable_as(TrainerError, f"--out {out}"):
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / MARKER, "written by `trainer train`\n")


def check_prompt(
    handle: EnvHandle,
    tokenizer: Any,
    limits: RolloutLimits,
    tool_format: str,
    seed: int,
) -> None:
    """The chat template must render the environment's first prompt, within the token budget.

    Otherwise every episode would fail the same way and a run would "finish"
    having trained (or measured) nothing. An environment that fails here is
    left to the rollouts, where each failure costs one episode.
    """
    try:
        env = env_calls.make(
            lambda: handle.make(max_turns=limits.max_turns), limits.step_timeout
        )
        messages, tools = env_calls.reset(env, seed, limits.step_timeout)
    except env_calls.EnvFault:
        return
    try:
        prompt = ChatFormat(tokenizer, tools, tool_format).prompt(messages)
    except TrainerError as exc:
        raise TrainerError(
            f"the chat template (the model's own, or --chat-template) cannot render "
            f"{handle.env_id}'s prompts ({exc})"
        ) from None
    if not prompt:
        raise TrainerError(
            f"the chat template renders {handle.env_id}'s prompt as nothing; give a "
            "template that writes the messages (--chat-template)"
        )
    if len(prompt) + limits.max_new_tokens > limits.max_total_tokens:
        raise TrainerError(
            f"--max-total-tokens {limits.max_total_tokens} is too small: {handle.env_id}'s "
            f"first prompt is {len(prompt)} tokens, plus --max-new-tokens "
            f"{limits.max_new_tokens}; raise it or use --tool-format compact"
        )


def make_generator(
    config: TrainConfig, model: Any, tokenizer: Any, base: str
) -> Generator:
    """The sampler of the rollouts: the trained model itself, llama.cpp on the GGUF
    file `base`, or a vLLM engine."""
    from trainer.generation import TransformersGenerator, VLLMGenerator
    from trainer.settings import check_backend
    from trainer.vllm_adapter import legal_rank

    if config.backend == "transformers":
        return TransformersGenerator(model, tokenizer, config.generation_batch_size)
    if config.backend == "llamacpp":
        from trainer.llamacpp import open_generator

        return open_generator(base, tokenizer, sequences=config.generation_batch_size)
    check_backend(config.backend)
    from vllm import LLM

    engine = LLM(
        model=base,
        enable_lora=True,
        max_lora_rank=legal_rank(config.lora_rank),
        enable_prefix_caching=True,  # an episode's turns share all but the last answer
    )
    return VLLMGenerator(engine, {tokenizer.eos_token_id})


@dataclass
class Run:
    """Everything one `trainer train` needs, loaded and checked."""

    config: TrainConfig
    handle: EnvHandle
    model: Any
    tokenizer: Any
    generator: Generator
    out: Path
    base_model: str
    chat_template: str | None = None
    resume: bool = False

    def execute(
        self, on_iteration: Callable[[int, dict[str, Any]], None] | None = None
    ) -> tuple[Outcome, str | None]:
        """Train, then export the adapter (rank 0); the outcome and the `vllm serve` command."""
        from trainer import grpo
        from trainer.export import SFT_ONLY, export_adapter
        from trainer.models import mixed_precision
        from trainer.plots import plot_learning_curve
        from trainer.trackers import open_reporter

        main = distributed.rank() == 0
        reporter = open_reporter(
            self.config.report_to if main else "none", self.out, self.config.as_dict()
        )

        def after(iteration: int, row: dict[str, Any]) -> None:
            if iteration == 0 and main:  # the cold start alone: the SFT-only control
                with staged(self.out / SFT_ONLY) as staging:
                    export_adapter(
                        staging, self.model, self.tokenizer, self.handle,
                        self.base_model, self.config.as_dict(), [],
                        self.config.train_seed(0, 0), self.chat_template,
                    )  # fmt: skip
            reporter.log(iteration, row)
            if on_iteration is not None:
                on_iteration(iteration, row)

        try:
            with mixed_precision(self.config.precision, self.model):
                outcome = grpo.train(
                    self.config, self.handle, self.model, self.tokenizer, self.generator,
                    self.out, resume=self.resume, on_iteration=after,
                )  # fmt: skip
        finally:
            reporter.close()
        if not main:
            return outcome, None
        command = export_adapter(
            self.out, self.model, self.tokenizer, self.handle, self.base_model,
            self.config.as_dict(), outcome.metrics, self.config.train_seed(0, 0),
            self.chat_template,
        )  # fmt: skip
        if outcome.metrics:
            plot_learning_curve(outcome.metrics, self.out / "learning_curve.png")
        return outcome, command


def ending(outcome: Outcome, command: str | None, out: Path) -> tuple[int, str]:
    """`trainer train`'s exit code and last words: where the adapter is and how to
    serve it, or which signal stopped the run and whether `--resume` continues it."""
    code = 0 if outcome.stopped_by is None else 128 + outcome.stopped_by
    if command is None:  # not rank 0: rank 0 says it
        return code, ""
    if outcome.stopped_by is not None:
        done, kept = len(outcome.metrics), checkpoint.resumable(out)
        if checkpoint.exists(out):
            when = f"after iteration {done}"
        elif kept:
            when = "during the cold start, after an epoch"
        else:
            when = (
                f"before the first checkpoint: the adapter in {out} is untrained; "
                "run again without --resume"
            )
        if kept:
            when += f"; the checkpoint in {out} is complete: continue with --resume"
        return code, f"stopped by signal {outcome.stopped_by} {when}"
    return code, (
        f"adapter written to {out} ({len(outcome.metrics)} iterations); metrics in "
        f"{out / 'metrics.jsonl'}\nserve it with vLLM: {command}"
    )


def open_run(
    config: TrainConfig,
    env: str | list[str],
    model: str,
    out: Path,
    *,
    chat_template: str | None = None,
    resume: bool = False,
    force: bool = False,
    sampler_model: str | None = None,
) -> Run:
    """Check the output folder, resolve the environment, load and wrap the model;
    `sampler_model` is the GGUF file llama.cpp samples rollouts from (default
    `model`, which must then be one)."""
    from trainer.models import load_base, with_lora

    envs = [env] if isinstance(env, str) else list(env)
    check_out(out, resume, force, (*envs, model))
    require(config.report_to)
    distributed.init()
    if config.groups < distributed.world_size():
        raise TrainerError(
            f"--groups {config.groups} is below the number of ranks "
            f"({distributed.world_size()}): every rank needs at least one group"
        )
    handle = resolve_envs(envs)
    base, tokenizer = load_base(
        model, chat_template=chat_template, precision=config.precision
    )
    policy = with_lora(base, config)
    check_prompt(
        handle,
        tokenizer,
        config.rollout_limits(),
        config.tool_format,
        config.train_seed(0, 0),
    )
    generator = make_generator(config, policy, tokenizer, sampler_model or model)
    claim_out(out)
    return Run(
        config, handle, policy, tokenizer, generator, out, model, chat_template, resume
    )
