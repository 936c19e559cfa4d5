"""`trace check-target`: a target checked against its contract before any run,
as gymnasium's `check_env` checks an env.

Each check is one function over a sample of every split's tasks; a failure is a
`Problem` naming the task, the check and the fix. `trace run` runs the same
checks on a smaller sample before collect, so a target that cannot work fails in
seconds instead of after hours of collect and train.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from factory.runtime.env import run_call, snapshot
from factory.spec import ToolSchema
from trace_pipeline.targets.contract import (
    SPLITS,
    ContractEnv,
    Target,
    TargetError,
    TargetTask,
    seed_of,
)


@dataclass(frozen=True)
class Problem:
    """One failed check: where (a task or the tools), which check, what, and the fix."""

    where: str
    check: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.where}: {self.check}: {self.problem}; {self.fix}"


def _plain(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    """`value` as plain JSON data: an object as its class and public attributes (a
    state may hold a target's own objects; their private ones, such as a file's
    wall-clock stamp, are how they work, not what they hold, as BFCL's checker
    also reads them), a reference back up a cycle as a marker."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if id(value) in seen:
        return "<cycle>"
    inner = seen | {id(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v, inner) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [_plain(v, inner) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if hasattr(value, "__dict__"):
        public = {k: v for k, v in vars(value).items() if not k.startswith("_")}
        return {"__class__": type(value).__name__, **_plain(public, inner)}
    return repr(value)


def _fingerprint(task: TargetTask) -> str:
    """What makes a task the task it is (its check is code, and is left out)."""
    return json.dumps(
        _plain(
            [
                task.instruction,
                task.state,
                list(task.user_turns),
                task.expected_actions,
                task.needs,
                task.tools,
                sorted((turn, list(names)) for turn, names in task.arriving.items()),
            ]
        ),
        sort_keys=True,
    )


def _state(state: Any) -> str:
    return json.dumps(_plain(state), sort_keys=True)


def schema_problems(target: Target) -> Iterable[Problem]:
    """Every tool is an OpenAI function schema with a function of the same name."""
    names = []
    for index, tool in enumerate(target.tools):
        try:
            names.append(ToolSchema.model_validate(tool).function.name)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(p) for p in error["loc"])
            yield Problem(
                "tools",
                "schemas",
                f"tools[{index}].{where}: {error['msg']}",
                "give {'type': 'function', 'function': {'name', 'description', "
                "'parameters': {'type': 'object', 'properties': {...}}}}",
            )
    if len(set(names)) != len(names):
        yield Problem("tools", "schemas", "two tools share a name", "rename one")
    missing = sorted(set(names) - set(target.functions))
    extra = sorted(set(target.functions) - set(names))
    if missing or extra:
        yield Problem(
            "tools",
            "schemas",
            f"schemas without a function {missing}, functions without a schema {extra}",
            "give one function per tool schema, named as the tool",
        )
    if unknown := sorted(target.reads - set(names)):
        yield Problem("tools", "schemas", f"reads names no tool {unknown}", "fix reads")


def _call(call_id: str, name: Any, arguments: Any) -> dict[str, Any]:
    """An OpenAI tool call as `run_call` takes it (arguments: JSON text, or a value
    written as JSON)."""
    text = (
        arguments if isinstance(arguments, str) else json.dumps(arguments, default=repr)
    )
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


def replay(env: ContractEnv, task: TargetTask) -> tuple[Any, list[dict[str, Any]], str]:
    """The expected actions played on the task's state: (final state, messages, the
    first refusal or ""). A call the tools refuse is played on, as a path may show
    a recovery (a call a setting refuses, the setting fixed, the call again); one
    of a tool not offered there ends the replay."""
    refused = ""
    state, toolkit = snapshot(task.state), env.toolkit_of(task)
    messages: list[dict[str, Any]] = [{"role": "user", "content": task.instruction}]
    said = 0
    for number, action in enumerate(task.expected_actions or ()):
        if "content" in action and "name" not in action:  # what the agent says
            messages.append({"role": "assistant", "content": str(action["content"])})
            if said < len(task.user_turns):  # and the user's next turn
                said += 1
                messages.append({"role": "user", "content": task.user_turns[said - 1]})
                toolkit = env.toolkit_of(task, said)  # with the tools it brings
            continue
        call = _call(
            f"expected_{number}", action.get("name"), action.get("arguments", {})
        )
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        reply, state, succeeded = run_call(toolkit, state, call)
        messages.append(reply)
        if not succeeded and not refused:
            refused = f"action {number} ({action.get('name')}): {reply['content']}"
        if action.get("name") not in toolkit.tool_names:
            break
    return state, messages, refused


def task_problems(env: ContractEnv, where: str, task: TargetTask) -> Iterable[Problem]:
    """The checks of one task: its expected actions pass, doing nothing fails,
    refused calls and read-only tools change nothing, the instruction leaks nothing."""
    if task.expected_actions is not None:
        state, messages, refused = replay(env, task)
        success, error = env.judge(task, state, messages)
        if not success and refused:
            yield Problem(
                where, "expected actions", f"refused: {refused}",
                "correct the expected action or the tool",
            )  # fmt: skip
        elif not success:
            yield Problem(
                where, "expected actions",
                "they do not pass the target's check"
                + (f" (the check raised {error})" if error else ""),
                "correct the expected actions or the check",
            )  # fmt: skip
    opening = [{"role": "user", "content": task.instruction}]
    if env.judge(task, snapshot(task.state), opening)[0]:
        yield Problem(
            where, "doing nothing fails",
            "the untouched task passes its own check, so it measures nothing",
            "make the check require what the instruction asks",
        )  # fmt: skip
    toolkit = env.toolkit_of(task, len(task.user_turns))  # every tool, arrived or not
    before = _state(task.state)
    for tool in toolkit.tool_names:
        state = snapshot(task.state)
        for arguments in ("[1]", '{"__not_a_parameter__": 1}', "{"):
            _, state, succeeded = run_call(
                toolkit, state, _call("bad", tool, arguments)
            )
            if succeeded or _state(state) != before:
                yield Problem(
                    where, "refusals change nothing",
                    f"{tool} with malformed arguments {arguments} "
                    + ("succeeded" if succeeded else "changed the state"),
                    "check arguments before touching the state (raise ToolError)",
                )  # fmt: skip
                break
    # A read-only tool runs without the snapshot that undoes a refused call, so
    # it must leave the state as it was whatever it answers.
    tries = [(name, {}) for name in sorted(toolkit.reads)] + [
        (a["name"], a.get("arguments", {}))
        for a in task.expected_actions or ()
        if a.get("name") in toolkit.reads
    ]
    for name, arguments in tries:
        call = _call("read", name, arguments)
        _, state, _ = run_call(toolkit, snapshot(task.state), call)
        if _state(state) != before:
            yield Problem(
                where, "refusals change nothing",
                f"{name}({json.dumps(arguments, default=repr)[:80]}) is declared "
                "read-only (reads) but changed the state",
                "drop it from reads, or make it change nothing",
            )  # fmt: skip
            break
    for secret in task.hidden:
        if secret and str(secret).lower() in task.instruction.lower():
            yield Problem(
                where, "no leak",
                f"the instruction gives away {str(secret)[:80]!r}",
                "reword the instruction (or drop it from hidden)",
            )  # fmt: skip


def check_target(env: ContractEnv, per_split: int = 5) -> list[Problem]:
    """Every problem of the target `env` plays, on `per_split` tasks of each split."""
    problems = list(schema_problems(env.target))
    seen: dict[str, str] = {}
    for split in SPLITS:
        for index in range(per_split):
            where = f"{split} task {index}"
            try:
                task = env.task_of(seed_of(split, index))
                again = env.task_of(seed_of(split, index))
            except TargetError as exc:
                problems.append(Problem(where, "tasks", str(exc), "fix task()"))
                continue
            if _fingerprint(task) != _fingerprint(again):
                problems.append(
                    Problem(
                        where,
                        "same index, same task",
                        "two calls gave different tasks",
                        "build each task from its split and index alone (a seeded "
                        "random.Random, no global state)",
                    )  # fmt: skip
                )
            other = seen.setdefault(_fingerprint(task), where)
            if other != where and other.split()[0] != split:
                problems.append(
                    Problem(
                        where,
                        "disjoint splits",
                        f"the same task as {other}",
                        "give each split its own tasks",
                    )  # fmt: skip
                )
            try:
                problems += list(task_problems(env, where, task))
            except TargetError as exc:  # tools it cannot offer (arriving, tools)
                problems.append(Problem(where, "tasks", str(exc), "fix task()"))
    return problems
