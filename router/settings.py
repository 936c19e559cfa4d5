"""The router's settings, declared once: the `router` commands derive their options
from these fields, and `trace run`'s `route` section is `RoutingSettings`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from factory.settings import setting
from router.prompt import EXAMPLE_TOKENS, TASK_TOKENS
from router.serve import MAX_CONNECTIONS, MAX_QUEUE
from trainer.settings import ToolFormat

# Why batch calibration is refused where no batch of requests exists.
BATCH_NEEDS_REQUESTS = (
    "--calibration batch averages over a batch of requests, which only `router eval` "
    "(its tasks) and `trace run` (the analysis split) have; use content-free or none"
)
# How label routing removes the prompt's prior for one label from its log-probs.
Calibration = Literal["content-free", "batch", "none"]


class RoutingSettings(BaseModel):
    """How the router chooses adapters for a task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    top_p: float = setting(0.9, "probability mass of top-p routing", gt=0, le=1)
    calibration: Calibration = setting(
        "content-free",
        "what label routing subtracts from its label log-probs: a content-free task's "
        "(Zhao et al. 2021), their mean over a batch of unlabelled requests (Zhou et "
        "al. 2024; `router eval`: the evaluated tasks, `trace run`: the analysis "
        "split's), or nothing",
    )
    example_tokens: int = setting(
        EXAMPLE_TOKENS, "token budget of each example trajectory in the routing prompt", ge=0,
        le=100_000,
    )  # fmt: skip
    task_tokens: int = setting(
        TASK_TOKENS,
        "token budget of the task part of the routing prompt",
        ge=16,
        le=100_000,
    )
    prompt_format: Literal["text", "chat"] = setting(
        "text",
        "how the routing prompt reaches the base model: as plain text, or through its "
        "chat template (instructions as the system message, the task as the user's, "
        "the label as the first token of the answer)",
    )


class RouterSettings(RoutingSettings):
    """The options the `router` commands' builders read (a command gives those it has)."""

    model: str = setting(..., "the base model the adapters were trained on")
    adapters: str | None = setting(
        None,
        "folder of adapters/<cap>/ written by `trainer train` (serve without it: the "
        "plain base model)",
    )
    mode: Literal["argmax", "top-p", "probe", "text"] = setting(
        "argmax",
        "routing mode (probe, text: fitted by `router fit`; text reads the request's "
        "words alone)",
    )
    env: tuple[str, ...] = setting(
        (),
        "an adapter's environment (given once per environment); if none, each "
        "adapter's own (installed)",
    )
    base_env: tuple[str, ...] = setting(
        (),
        "an environment whose tasks need no adapter, label base (given once per "
        "environment)",
    )
    tool_format: ToolFormat = setting(
        "json",
        "how tools are listed for a plain base model whose chat template has no tool "
        "role (adapters use the format they were trained with)",
    )
    vllm_url: str | None = setting(
        None, "vLLM server address, e.g. http://127.0.0.1:8001/v1"
    )
    max_queue: int = setting(
        MAX_QUEUE, "requests that may wait; more are answered 503 with Retry-After", ge=1,
        le=100_000,
    )  # fmt: skip
    max_connections: int = setting(
        MAX_CONNECTIONS,
        "connections served at once (a thread each); one more is answered 503 with "
        "Retry-After at accept",
        ge=1,
        le=10_000,
    )
