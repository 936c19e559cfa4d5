"""`router serve` with concurrent conversations: batched vs one at a time, in the same run.

N conversations of T turns each talk to the served base model at once through
the `openai` client, greedily; the same conversations then talk to a server
that decodes one request at a time (`--generation-batch-size 1`, the old server). Prints
each server's wall time and completion tokens per second, their ratio, whether
every reply is the same (tool-call ids aside), and the most requests each of
the batched server's streams decoded at once.
    python experiments/inference_speed/serve_concurrency.py --model models/qwen2.5-coder-0.5b-instruct.gguf
    python experiments/inference_speed/serve_concurrency.py --model tiny   # a tiny random model, seconds

With `--adapters DIR` the server is the routed one over that adapter bank, and
conversation i is pinned (`model`) to the base model or an adapter in turn; a
third server keeps one stream per route (how the routed server batched before
rows carried their own configuration), beside the one that mixes routes in a
stream.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import openai

from factory.settings import add_options
from router.backends import BaseModelBackend, TransformersBackend
from router.serve import RoutedChat, make_server
from trainer.models import load_base
from trainer.settings import TrainConfig

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city today.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
CITIES = ("Paris", "Lagos", "Lima", "Oslo", "Hanoi", "Quito", "Perth", "Cairo")


def conversation(
    client: openai.OpenAI, index: int, turns: int, tokens: int, model: str = "base"
) -> tuple[list[str], int]:
    """One conversation (a question, then the tool's answer or a follow-up each
    turn): its replies and how many tokens they took."""
    city = CITIES[index % len(CITIES)]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a helpful assistant with tools."},
        {
            "role": "user",
            "content": f"Should I take an umbrella in {city} today? ({index})",
        },
    ]
    replies, generated = [], 0
    for turn in range(turns):
        answer = client.chat.completions.create(
            model=model,
            messages=messages,
            tools=TOOLS,
            temperature=0,
            max_tokens=tokens,
        )
        message = answer.choices[0].message
        generated += answer.usage.completion_tokens
        reply = message.model_dump(exclude_none=True)
        for call in reply.get("tool_calls", []):
            call.pop("id")  # a fresh random id each time: not part of the comparison
        replies.append(json.dumps(reply, sort_keys=True))
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "name": call.function.name,
                    "content": f"Rain, {10 + turn} mm, in {city}.",
                }  # fmt: skip
            )
        if not message.tool_calls:
            messages.append({"role": "user", "content": f"And tomorrow? ({turn})"})
    return replies, generated


class PerRoute(TransformersBackend):
    """The routed backend as it batched before: one stream per route, made live."""

    mixes_routes = False

    def __init__(self, bank: Any, tokenizer: Any, batch_size: int) -> None:
        super().__init__(bank, None, tokenizer, "json", "argmax", batch_size)
        self.decoder.configure = None

    def open(self, route: Any, chat: bool) -> Any:
        self.bank.activate(route)
        return self.decoder.open(route, chat)


def served(
    model: Any, tokenizer: Any, batch_size: int, args: argparse.Namespace,
    bank: Any = None, per_route: bool = False,
) -> dict:  # fmt: skip
    """Every conversation at once against a server of this batch size (routed over
    `bank` if given, one stream per route with `per_route`)."""
    if bank is None:
        backend: Any = BaseModelBackend(model, tokenizer, "json", batch_size)
        models = ["base"]
    else:
        backend = (
            PerRoute(bank, tokenizer, batch_size)
            if per_route
            else TransformersBackend(
                bank, None, tokenizer, "json", "argmax", batch_size
            )
        )
        models = ["base", *bank.capabilities.names]
    chat = RoutedChat(backend, batch_size)
    server = make_server(chat, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = openai.OpenAI(
        base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
        api_key="x",
        max_retries=0,
        timeout=3600,
    )
    replies: dict[int, tuple[list[str], int]] = {}

    def run(index: int) -> None:
        replies[index] = conversation(
            client, index, args.turns, args.max_tokens, models[index % len(models)]
        )

    began = time.perf_counter()
    threads = [
        threading.Thread(target=run, args=(i,)) for i in range(args.conversations)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    server.shutdown()
    server.server_close()
    return {
        "batch_size": batch_size,
        "streams": "per route" if per_route else "mixed",
        "seconds": seconds,
        "requests": sum(len(r) for r, _ in replies.values()),
        "completion_tokens": sum(n for _, n in replies.values()),
        "replies": [replies[i][0] for i in range(args.conversations)],
        "batches": chat.batcher.batches,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a model path, or tiny")
    parser.add_argument("--conversations", type=int, default=8)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--adapters",
        default=None,
        help="serve this adapter bank, routes pinned in turn",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="write the figures here as JSON"
    )
    add_options(parser, TrainConfig, ("precision",))
    args = parser.parse_args()
    path = args.model
    if path == "tiny":
        from trainer.tiny import build_tiny_model

        path = str(build_tiny_model(Path(tempfile.mkdtemp()) / "tiny"))
    bank = None
    if args.adapters is not None:
        from router.adapters import AdapterBank

        bank, tokenizer = AdapterBank.load(args.adapters, path, args.precision)
        model = bank.model
    else:
        model, tokenizer = load_base(path, precision=args.precision)
    runs = [
        served(model, tokenizer, size, args, bank) for size in (1, args.conversations)
    ]
    if bank is not None:
        runs.append(served(model, tokenizer, args.conversations, args, bank, True))
    one, batched = runs[:2]
    for run in runs:
        print(
            f"batch size {run['batch_size']:>2} ({run['streams']} streams): "
            f"{run['seconds']:7.1f} s, "
            f"{run['completion_tokens'] / run['seconds']:7.1f} completion tokens/s, "
            f"{run['requests']} requests"
        )
    same = all(run["replies"] == one["replies"] for run in runs)
    rate = [run["completion_tokens"] / run["seconds"] for run in runs]
    print(
        f"throughput batched / one at a time = {rate[1] / rate[0]:.2f}; "
        f"greedy replies identical: {same}; most rows per stream: {batched['batches']}"
    )
    if len(runs) == 3:
        print(
            f"mixed-route streams / one stream per route = {rate[1] / rate[2]:.2f} "
            f"(most rows per stream: {runs[2]['batches']})"
        )
    if args.out is not None:
        args.out.write_text(json.dumps({"model": args.model, **vars(args), "model_path": path,
                                        "runs": runs, "identical": same}, default=str, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
