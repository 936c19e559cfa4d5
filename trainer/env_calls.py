"""Calls into an environment the trainer does not trust: time-limited, checked, contained.

An environment is user code: its constructor, `reset` or `step` may raise, call
`sys.exit`, hang, or answer in the wrong shape. Each call here turns every such
fault into an `EnvFault` naming what went wrong, so the rollout engine costs the
episode and the run goes on. A call that runs past its time limit is interrupted
with SIGALRM on the main thread (a hung Python loop or sleep stops there); on
other threads it is abandoned to a daemon thread, since Python cannot kill one.
"""

from __future__ import annotations

import json
import math
import numbers
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from trainer.errors import Interrupted

T = TypeVar("T")


class EnvFault(Exception):
    """The environment raised, exited, hung or answered malformed output."""


def _on_main_thread(call: Callable[[], T], seconds: float, what: str) -> T:
    def expire(number: int, frame: Any) -> None:
        raise EnvFault(f"{what} took longer than {seconds:g} s (--step-timeout)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _on_a_thread(call: Callable[[], T], seconds: float, what: str) -> T:
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - carried back to the caller
            outcome["error"] = exc

    worker = threading.Thread(target=target, daemon=True, name=f"env {what}")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise EnvFault(f"{what} took longer than {seconds:g} s (--step-timeout)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def guarded(call: Callable[[], T], seconds: float, what: str) -> T:
    """`call()`, with any exception, `sys.exit` or overrun raised as an EnvFault."""
    run = (
        _on_main_thread
        if threading.current_thread() is threading.main_thread()
        else _on_a_thread
    )
    try:
        return run(call, seconds, what)
    except (EnvFault, KeyboardInterrupt, Interrupted):  # the user's stop, not the env's
        raise
    except BaseException as exc:  # noqa: BLE001 - SystemExit included: user code
        raise EnvFault(f"{what} raised {exc!r}") from None


def _messages(observation: Any, what: str) -> list[dict[str, Any]]:
    """The observation as a list of chat messages (a JSON string, as the contract says)."""
    if not isinstance(observation, str):
        raise EnvFault(
            f"{what} returned a {type(observation).__name__} observation; "
            "a TRACE environment answers a JSON string of chat messages"
        )
    try:
        messages = json.loads(observation)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise EnvFault(
            f"{what} returned an observation that is not JSON ({exc})"
        ) from None
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages
    ):
        raise EnvFault(
            f"{what} returned an observation that is not a list of chat messages "
            "(objects with a 'role')"
        )
    return messages


def make(factory: Callable[[], Any], seconds: float) -> Any:
    """A new environment, or EnvFault if its constructor fails."""
    return guarded(factory, seconds, "the environment's constructor")


def reset(
    env: Any, seed: int, seconds: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(opening messages, tool schemas) of a new episode."""
    answer = guarded(lambda: env.reset(seed=seed), seconds, "reset")
    if not isinstance(answer, tuple) or len(answer) != 2:
        raise EnvFault("reset did not return (observation, info)")
    observation, info = answer
    if not isinstance(info, dict) or not isinstance(info.get("tools"), list):
        raise EnvFault(
            "reset's info is not a dict with a 'tools' list (OpenAI tool schemas)"
        )
    for tool in info["tools"]:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise EnvFault(
                "reset's info['tools'] holds an entry that is not an OpenAI tool schema "
                "({'type': 'function', 'function': {'name': ...}})"
            )
        parameters = function.get("parameters", {})
        if not isinstance(parameters, dict) or not isinstance(
            parameters.get("properties", {}), dict
        ):
            raise EnvFault(
                f"tool {function['name']!r} has parameters that are not an object"
            )
    return _messages(observation, "reset"), info["tools"]


@dataclass(frozen=True)
class Step:
    """One checked environment step."""

    messages: list[dict[str, Any]]
    reward: float
    done: bool
    info: dict[str, Any]


def step(env: Any, action: str, seconds: float) -> Step:
    """The environment's answer to `action`, checked against gymnasium's step contract."""
    answer = guarded(lambda: env.step(action), seconds, "step")
    if not isinstance(answer, tuple) or len(answer) != 5:
        raise EnvFault(
            "step did not return (observation, reward, terminated, truncated, info)"
        )
    observation, reward, terminated, truncated, info = answer
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real):
        raise EnvFault(
            f"step returned a {type(reward).__name__} reward; it must be a number"
        )
    if not math.isfinite(reward):
        raise EnvFault(f"step returned the reward {reward}; it must be finite")
    if not isinstance(info, dict):
        raise EnvFault(f"step returned a {type(info).__name__} info; it must be a dict")
    return Step(
        _messages(observation, "step"),
        float(reward),
        bool(terminated or truncated),
        info,
    )
