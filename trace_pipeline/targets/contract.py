"""The target contract: what any target gives TRACE, and the gymnasium env that plays it.

A target is the user's: their tools, their tasks, their success check. It is a
`Target` returned by a function the config names (`target.kind: python`,
`target.entry: "my_pkg.targets:make_target"`, `target.settings` passed to it as
keyword arguments):

- `tools`: OpenAI function schemas, and `functions`: one Python function per
  tool, called as `function(state, **arguments)` after the arguments are checked
  against its schema; it returns the tool's result (text, or anything JSON) and
  raises `ToolError` to refuse a call (a refused or crashing call leaves the
  state as it was);
- `policy`: the text the agent is told to follow;
- `task(split, index)`: the task of that index in split `analysis`, `dev` or
  `test` (never the same task in two splits): a `TargetTask` with the user's
  instruction, later scripted user turns, the initial state, the target's own
  success check over the final state and the conversation, and optionally the
  expected actions (what analysis contrasts failures with, and what `trace
  check-target` replays) and the capabilities the task truly needs (for the
  oracle and for scoring analysis and routing, never shown to the agent).

`ContractEnv` plays any such target through the same runtime every generated
package uses (action parsing, schema-checked tool calls, snapshots that undo a
refused call), so collect, evaluate and the trainer drive it like any env. A
seed names a split and an index: the pipeline's analysis seeds 0, 1, ... are the
`analysis` split, `DEV_SEED_BASE + i` the `dev` split and `EVAL_SEED_BASE + i`
(the held-out seeds `evaluate` plays) the `test` split. docs/targets.md has a
worked example; `trace check-target CONFIG` checks a target before any run.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import string
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import gymnasium
from gymnasium import spaces

from factory.runtime import State, ToolError, Toolkit
from factory.runtime.actions import MAX_ACTION_CHARS, parse_action
from factory.runtime.env import MAX_OBSERVATION_CHARS, STOP_MESSAGE, run_call, snapshot
from factory.runtime.family import TaskFamily
from trainer.settings import DEV_SEED_BASE, EVAL_SEED_BASE

ENV_ID = "trace/ContractTarget-v0"
SPLITS = ("analysis", "dev", "test")
SYSTEM_PROMPT = (
    "You are a helpful assistant. Use the tools to carry out the user's request; "
    "answer the user in text when you are done."
)
Check = Callable[[State, list[dict[str, Any]]], bool]

__all__ = [
    "DEV_SEED_BASE",
    "SPLITS",
    "ContractEnv",
    "Target",
    "TargetError",
    "TargetTask",
    "ToolError",
    "load_target",
    "split_of",
]


class TargetError(Exception):
    """A target that does not keep the contract: the message names what and the fix."""


@dataclass(frozen=True)
class TargetTask:
    """One task of a target, as the target states it."""

    instruction: str  # the user's opening message
    state: State  # the initial state the tools act on
    check: Check  # the target's own success check: (final state, messages) -> bool
    task_id: str = ""
    user_turns: tuple[
        str, ...
    ] = ()  # what the user says next, each time the agent answers
    # [{"name": tool, "arguments": {...}} or {"content": what the agent says}, ...]:
    # a path that succeeds (optional; check-target replays it)
    expected_actions: tuple[dict[str, Any], ...] | None = None
    needs: tuple[str, ...] | None = None  # the capabilities it truly needs (optional)
    hidden: tuple[str, ...] = ()  # what the instruction must not give away
    tools: tuple[str, ...] | None = (
        None  # the target's tools this task offers (None: all)
    )
    # tools that arrive mid-episode: {n: names} become callable when the user says
    # their n-th later turn (user_turns[n - 1], which presents them); until then the
    # task does not offer them, and the system prompt never lists them
    arriving: Mapping[int, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Target:
    """A target: its tools and their code, its policy, and its tasks per split."""

    name: str
    tools: Sequence[dict[str, Any]]
    functions: Mapping[str, Callable[..., Any]]
    policy: str
    task: Callable[[str, int], TargetTask]
    reads: frozenset[str] = frozenset()  # tools that never change the state
    system_prompt: str = SYSTEM_PROMPT
    max_turns: int = 30
    toolkit: Toolkit = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kit = Toolkit(
            id=self.name,
            title=self.name,
            benchmark=self.name,
            system_prompt=self.system_prompt,
            policy=self.policy,
            schemas=tuple(self.tools),
            implementations=dict(self.functions),
            reads=frozenset(self.reads),
        )
        object.__setattr__(self, "toolkit", kit)


def _is_file(name: str) -> bool:
    """Whether an entry's module is named by file path (`path/to/file.py`, from the
    current folder) rather than by import path."""
    return name.endswith(".py")


def module_file(name: str) -> Path | None:
    """The file that holds an entry's module (`_is_file`: the path as given), found
    without importing it; None where the import system cannot find one."""
    if _is_file(name):
        return Path(name).resolve()
    try:
        origin = getattr(importlib.util.find_spec(name), "origin", None)
    except (ImportError, ValueError):  # a parent package that fails, an empty name
        return None
    return Path(origin) if origin else None


def _module(name: str) -> ModuleType:
    """A module by import path, or by file path (`_is_file`), imported once per
    process."""
    if not _is_file(name):
        return importlib.import_module(name)
    path = Path(name).resolve()
    key = "trace_target_" + hashlib.sha256(str(path).encode()).hexdigest()[:16]
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, path)
        if spec is None or spec.loader is None or not path.is_file():
            raise FileNotFoundError(f"no Python file at {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]


def load_target(entry: str, settings: Mapping[str, Any] | None = None) -> Target:
    """The target `entry` ("module:function" or "path/file.py:function") makes with
    `settings`; a TargetError naming the fix when it cannot be imported, fails, or
    returns something else."""
    module_name, colon, function_name = entry.rpartition(":")
    if not colon or not module_name or not function_name.isidentifier():
        raise TargetError(
            f"target.entry {entry!r:.120}: write it as 'module:function' or "
            "'path/to/file.py:function' (e.g. my_pkg.targets:make_target)"
        )
    try:
        make = getattr(_module(module_name), function_name)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module runs on import
        raise TargetError(
            f"target.entry {entry}: cannot import it ({type(exc).__name__}: "
            f"{str(exc)[:200]}); install the package that holds it or put it on "
            "PYTHONPATH"
        ) from None
    try:
        target = make(**dict(settings or {}))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code
        raise TargetError(
            f"target.entry {entry} failed with target.settings {dict(settings or {})!r:.200}: "
            f"{type(exc).__name__}: {str(exc)[:300]}"
        ) from None
    if not isinstance(target, Target):
        raise TargetError(
            f"target.entry {entry} returned a {type(target).__name__}, not a "
            "trace_pipeline.targets.contract.Target"
        )
    return target


def from_family(
    family: TaskFamily,
    needs: Callable[[int], Sequence[str]] | None = None,
    difficulty: Mapping[str, int] | None = None,
    max_turns: int | None = None,
) -> Target:
    """A task family (what every generated package and the built-in phone target
    play, `factory.runtime`) as a contract target, so `trace check-target` checks
    them as it checks a user's and `trace run` plays them as it plays a user's: the
    same tasks per seed (the split's) at these knob values, the kit's tools and
    policy, the gold turns as the expected actions, the family's own verifier as the
    check (success: the target's reward is binary whatever the family's reward
    mode), and `needs(seed)` where the family states them. A package's family is
    its own runtime copy's: its own runtime's verifier judges."""
    toolkit = family.toolkit
    runtime = importlib.import_module(type(family).__module__.rpartition(".")[0])
    verify = runtime.verify
    knobs = family.knob_values(difficulty)
    functions = {
        name: _refusing(function, runtime.ToolError)
        for name, function in toolkit.implementations.items()
    }

    def task(split: str, index: int) -> TargetTask:
        seed = seed_of(split, index)
        drawn = family.generate(seed, knobs)
        expected = [
            {"name": call.name, "arguments": dict(call.arguments)}
            if turn.tool_calls
            else {"content": turn.content}
            for turn in drawn.gold_turns
            for call in (turn.tool_calls or (None,))
        ]

        def check(state: State, messages: list[dict[str, Any]]) -> bool:
            """The family's verifier: the gold final state, and its facts told."""
            return verify(drawn, toolkit, state, messages).success

        return TargetTask(
            instruction=drawn.instruction,
            state=drawn.initial_state,
            check=check,
            task_id=drawn.task_id,
            user_turns=tuple(drawn.user_replies),
            expected_actions=tuple(expected),
            needs=None if needs is None else tuple(needs(seed)),
        )

    return Target(
        name=family.name,
        tools=list(toolkit.schemas),
        functions=functions,
        policy=toolkit.policy,
        task=task,
        reads=frozenset(toolkit.reads),
        system_prompt=toolkit.system_prompt,
        max_turns=max_turns or family.max_turns,
    )


def _refusing(
    function: Callable[..., Any], error: type[Exception]
) -> Callable[..., Any]:
    """`function` raising the contract's ToolError where it raises `error` (a
    package's own runtime copy refuses calls with its own ToolError class, which
    the contract would take for a crash)."""
    if error is ToolError:
        return function

    @functools.wraps(function)
    def call(state: State, /, **arguments: Any) -> Any:  # a tool may take `state`
        try:
            return function(state, **arguments)
        except error as exc:
            raise ToolError(str(exc)) from exc

    return call


def family_of(env: gymnasium.Env) -> TaskFamily | None:
    """The task family a made env plays (a generated package's, in its own runtime
    copy's class), or None for an env not built on one."""
    family = getattr(env, "family", None)
    return family if callable(getattr(family, "generate", None)) else None


def package_target(env: str) -> Target:
    """A generated package (a folder, an installed package or its gymnasium id), or
    any env built on a task family, through the contract (`from_family`), at the
    knob values and turn limit its gymnasium registration gives it."""
    from trainer.envs import resolve_env

    made = resolve_env(env).make()
    try:  # only its registration's values are read: the contract plays its own
        family = family_of(made)
        knobs = getattr(made, "difficulty", None), getattr(made, "max_turns", None)
    finally:
        made.close()
    if family is None:
        raise TypeError(
            f"{env} is not built on a task family (factory.runtime); write it "
            "through the target contract (docs/targets.md) to check it"
        )
    return from_family(family, difficulty=knobs[0], max_turns=knobs[1])


def split_of(seed: int) -> tuple[str, int]:
    """(split, index) of a pipeline seed."""
    if seed >= EVAL_SEED_BASE:
        return "test", seed - EVAL_SEED_BASE
    if seed >= DEV_SEED_BASE:
        return "dev", seed - DEV_SEED_BASE
    return "analysis", seed


def seed_of(split: str, index: int) -> int:
    """The pipeline seed of a split's task `index`."""
    return {"analysis": 0, "dev": DEV_SEED_BASE, "test": EVAL_SEED_BASE}[split] + index


def _dumps(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=True)


class ContractEnv(gymnasium.Env[str, str]):
    """A contract target as a text gymnasium env: actions are assistant messages
    (any form the runtime reads), observations the JSON of the new messages, and
    the last step's reward 1.0 where the target's check passes, else 0.0."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        entry: str,
        settings: Mapping[str, Any] | None = None,
        max_turns: int | None = None,
    ) -> None:
        self.target = load_target(entry, settings)
        self.toolkit = self.target.toolkit
        self.max_turns = max_turns or self.target.max_turns
        self.observation_space = spaces.Text(
            max_length=MAX_OBSERVATION_CHARS, min_length=0, charset=string.printable
        )
        self.action_space = spaces.Text(
            max_length=MAX_ACTION_CHARS, min_length=0, charset=string.printable
        )
        self._task: TargetTask | None = None
        self._seed = 0
        self._state: State = {}
        self._messages: list[dict[str, Any]] = []
        self._turns = self._said = 0
        self._done = False

    def task_of(self, seed: int) -> TargetTask:
        """The target's task of a pipeline seed (a TargetError if it fails)."""
        split, index = split_of(seed)
        try:
            task = self.target.task(split, index)
        except Exception as exc:  # noqa: BLE001 - the user's code
            raise TargetError(
                f"{self.target.name}: task({split!r}, {index}) failed: "
                f"{type(exc).__name__}: {str(exc)[:300]}"
            ) from None
        if not isinstance(task, TargetTask):
            raise TargetError(
                f"{self.target.name}: task({split!r}, {index}) returned a "
                f"{type(task).__name__}, not a TargetTask"
            )
        return task

    def toolkit_of(self, task: TargetTask, said: int = 0) -> Toolkit:
        """The tools `task` offers once the user has said `said` later turns: the
        target's, or the subset it names, less those still to arrive."""
        late = {name for names in task.arriving.values() for name in names}
        arrived = {
            name
            for turn, names in task.arriving.items()
            if turn <= said
            for name in names
        }
        if any(
            isinstance(turn, bool) or not isinstance(turn, int)
            or not 1 <= turn <= len(task.user_turns)
            for turn in task.arriving
        ):  # fmt: skip
            raise TargetError(
                f"{self.target.name}: task {task.task_id}: arriving is keyed by a "
                f"later user turn, 1 to {len(task.user_turns)}; it has "
                f"{sorted(map(repr, task.arriving))}"
            )
        offered = self.target.toolkit.tool_names if task.tools is None else task.tools
        if task.tools is None and not late:
            return self.target.toolkit
        try:
            return self.target.toolkit.subset(
                [n for n in {*offered, *late} if n not in late or n in arrived]
            )
        except ValueError as exc:
            raise TargetError(
                f"{self.target.name}: task {task.task_id}: {exc}"
            ) from None

    def describe(self, seed: int) -> dict[str, Any]:
        """The info of the task of `seed` without playing it."""
        return self._describe(seed, self.task_of(seed))

    def _describe(self, seed: int, task: TargetTask) -> dict[str, Any]:
        split, index = split_of(seed)
        info: dict[str, Any] = {
            "task_id": task.task_id or f"{self.target.name}-{split}-{index}",
            "tools": list(self.toolkit_of(task).schemas),
            "split": split,
        }
        if task.needs is not None:
            info["needs"] = list(task.needs)
        if task.expected_actions is not None:  # the tool calls (trajectory records')
            info["expected_actions"] = [
                {"name": a["name"], "arguments": a.get("arguments", {})}
                for a in task.expected_actions
                if "name" in a
            ]
        return info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start the task of `seed` (analysis index 0 when none is given)."""
        super().reset(seed=seed)
        self._seed = 0 if seed is None else int(seed)
        self._task = self.task_of(self._seed)
        self.toolkit = self.toolkit_of(self._task)
        self._state = snapshot(self._task.state)
        opening = [
            {
                "role": "system",
                "content": f"{self.target.system_prompt}\n\n# Policy\n\n{self.target.policy}",
            },
            {"role": "user", "content": self._task.instruction},
        ]
        self._messages = list(opening)
        self._turns = self._said = 0
        self._done = False
        return _dumps(opening), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one assistant message; the episode ends when the user has no more
        to say or at `max_turns`, judged by the target's check."""
        if self._task is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        if self._done:
            return _dumps([]), 0.0, True, False, self._info()
        self._turns += 1
        message, problem = parse_action(action, self._turns, self.toolkit.tool_names)
        if message is None:
            replies = [
                {
                    "role": "tool",
                    "tool_call_id": f"invalid_{self._turns}",
                    "name": "invalid_action",
                    "content": f"Error: {problem}",
                    "error": True,
                }
            ]
        else:
            self._messages.append(message)
            replies = self._respond(message)
        self._messages.extend(replies)
        terminated = any(m.get("content") == STOP_MESSAGE for m in replies)
        truncated = not terminated and self._turns >= self.max_turns
        info = self._info()
        reward = 0.0
        if terminated or truncated:
            self._done = True
            success, error = self.judge(self._task, self._state, self._messages)
            reward = float(success)
            info["success"] = success
            info["verification"] = {"success": success, "check_error": error}
        return _dumps(replies), reward, terminated, truncated, info

    def judge(
        self, task: TargetTask, state: State, messages: list[dict[str, Any]]
    ) -> tuple[bool, str | None]:
        """The target's check of an episode: (success, the check's own error)."""
        try:
            return bool(task.check(snapshot(state), list(messages))), None
        except Exception as exc:  # noqa: BLE001 - the user's check: a crash is a failure
            return False, f"{type(exc).__name__}: {str(exc)[:300]}"

    def _respond(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        calls = message.get("tool_calls", [])
        if calls:
            replies = []
            for call in calls:
                reply, self._state, _ = run_call(self.toolkit, self._state, call)
                replies.append(reply)
            return replies
        assert self._task is not None
        if self._said < len(self._task.user_turns):
            self._said += 1
            self.toolkit = self.toolkit_of(self._task, self._said)
            return [{"role": "user", "content": self._task.user_turns[self._said - 1]}]
        return [{"role": "user", "content": STOP_MESSAGE}]

    def _info(self) -> dict[str, Any]:
        assert self._task is not None
        return {
            **self._describe(self._seed, self._task),
            "messages": list(self._messages),
            "turn": self._turns,
        }


if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point=f"{__name__}:ContractEnv")
