"""BFCL multi-turn as a TRACE target, through the target contract (extra `bfcl`).

The Berkeley Function Calling Leaderboard's multi-turn categories, with BFCL's
own API classes, task files, tool docs, initial configs, ground truth and
multi-turn checker, imported from `bfcl-eval` and never copied:

    target: {kind: python, entry: "trace_pipeline.targets.bfcl:make_target",
             settings: {categories: [multi_turn_base]}, kit: bfcl.json}

Install: `pip install --no-deps bfcl-eval==2026.3.23` and its runtime needs
(`pip install filelock tenacity tree_sitter==0.21.3 tree-sitter-java==0.21.0
tree-sitter-javascript==0.21.4 mpmath==1.3.0`); its declared dependencies pull a
CUDA torch and pin numpy 1.26, so they are left out on purpose.

- A task is one BFCL entry: its first user message is the instruction and its
  later ones the scripted user turns; its state is one instance of each
  involved class loaded from the entry's initial config. The tools it offers are
  its involved classes' (BFCL's convention), less the entry's excluded ones, as
  OpenAI schemas by BFCL's own `convert_to_tool`.
- Only those tools are callable: anything else is refused by the contract's
  toolkit before a BFCL class is touched (BFCL's executor `eval`s a call string).
- Success is BFCL's `multi_turn_checker` over the calls the agent made in each
  user turn (those the tools accepted), replayed by BFCL beside its ground truth
  from the initial config; each check's BFCL instances are released after it.
- Splits are by scenario index, across the categories (a `miss_param` entry is
  its base scenario's variant): indices ending in 0-5 analysis, 6-7 dev, 8-9 test.
- Expected actions are BFCL's ground truth, one turn after another.
- `miss_func`: a held-out tool is not offered until the turn BFCL adds it
  (`TargetTask.arriving`); that user turn is BFCL's own for a model that reads
  tools in its prompt (`DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING`,
  the new tools' OpenAI schemas in it), since the system prompt that lists the
  others is not rewritten mid-episode.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import uuid
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from trace_pipeline.targets.contract import Target, TargetTask

CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
SPLIT_OF_DIGIT = {
    **dict.fromkeys(range(6), "analysis"),
    6: "dev",
    7: "dev",
    8: "test",
    9: "test",
}
POLICY = (
    "- Carry out each request with the tools; call only the tools you are given.\n"
    "- When a request is done, or cannot be done, say so to the user in text."
)


def _bfcl() -> Any:
    """The bfcl_eval package, or an ImportError naming the install."""
    try:
        return importlib.import_module("bfcl_eval")
    except ImportError:
        raise ImportError(
            "BFCL needs `pip install --no-deps bfcl-eval==2026.3.23` and its runtime "
            "needs (docs/targets.md)"
        ) from None


def _rows(name: str) -> list[dict[str, Any]]:
    text = (resources.files(_bfcl()) / "data" / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@cache
def _entries(categories: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
    """Each split's entries (with their ground truth), by scenario index, then category."""
    split: dict[str, list[dict[str, Any]]] = {"analysis": [], "dev": [], "test": []}
    rows = []
    for category in categories:
        truth = {
            r["id"]: r["ground_truth"]
            for r in _rows(f"possible_answer/BFCL_v4_{category}.json")
        }
        for entry in _rows(f"BFCL_v4_{category}.json"):
            index = int(entry["id"].rsplit("_", 1)[1])
            rows.append(
                (
                    index,
                    categories.index(category),
                    entry | {"ground_truth": truth[entry["id"]]},
                )
            )
    for index, _, entry in sorted(rows, key=lambda r: r[:2]):
        split[SPLIT_OF_DIGIT[index % 10]].append(entry)
    return split


@cache
def _tools() -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Every multi-turn class's tools as OpenAI schemas, and each tool's class."""
    from bfcl_eval.constants.enums import ModelStyle
    from bfcl_eval.constants.executable_backend_config import (
        MULTI_TURN_FUNC_DOC_FILE_MAPPING,
    )
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.model_handler.utils import convert_to_tool

    schemas, owner = [], {}
    for class_name in ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI",
                       "TicketAPI", "TradingBot", "TravelAPI", "VehicleControlAPI"):  # fmt: skip
        docs = _rows(
            f"multi_turn_func_doc/{MULTI_TURN_FUNC_DOC_FILE_MAPPING[class_name]}"
        )
        for tool in convert_to_tool(
            docs, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS
        ):
            tool["function"].pop("response", None)
            schemas.append(tool)
            owner[tool["function"]["name"]] = class_name
    return schemas, owner


def tool_schemas(classes: Sequence[str]) -> list[dict[str, Any]]:
    """The OpenAI schemas of these BFCL classes' tools: a kit file for analysis and
    generation on BFCL (`target.kit`), which takes up to 64 tools."""
    schemas, owner = _tools()
    unknown = sorted(set(classes) - set(owner.values()))
    if unknown:
        raise ValueError(
            f"no BFCL multi-turn class {unknown}; known: {sorted(set(owner.values()))}"
        )
    return [s for s in schemas if owner[s["function"]["name"]] in classes]


def _instances(entry: dict[str, Any]) -> dict[str, Any]:
    """One fresh instance of each involved class, loaded from the entry's config."""
    from bfcl_eval.constants.executable_backend_config import (
        CLASS_FILE_PATH_MAPPING,
        STATELESS_CLASSES,
    )

    long_context = "long_context" in entry["id"]
    state = {}
    for class_name in entry["involved_classes"]:
        instance = getattr(
            importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name]), class_name
        )()
        if class_name not in STATELESS_CLASSES:
            config = copy.deepcopy(entry["initial_config"].get(class_name, {}))
            instance._load_scenario(config, long_context=long_context)
        state[class_name] = instance
    return state


def _function(name: str, class_name: str) -> Any:
    """The tool `name`: its class's method on the episode's instance; a result that
    is not JSON is its text, as BFCL's executor gives it."""

    def call(state: dict[str, Any], **arguments: Any) -> Any:
        result = getattr(state[class_name], name)(**arguments)
        if isinstance(result, str):
            return result
        try:
            return json.loads(json.dumps(result))
        except (TypeError, ValueError):
            return str(result)

    return call


def _call_string(name: str, arguments: dict[str, Any]) -> str:
    """A call as BFCL's checker reads one: `name(key=literal, ...)`."""
    return (
        f"{name}({', '.join(f'{key}={value!r}' for key, value in arguments.items())})"
    )


def _expected(entry: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """BFCL's ground truth as the contract's expected actions, turn after turn."""
    _, owner = _tools()
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    actions: list[dict[str, Any]] = []
    for turn in entry["ground_truth"]:
        for text in turn:
            call = ast.parse(text, mode="eval").body
            name = call.func.id
            class_ = getattr(
                importlib.import_module(CLASS_FILE_PATH_MAPPING[owner[name]]),
                owner[name],
            )
            parameters = list(inspect.signature(getattr(class_, name)).parameters)[1:]
            arguments = {
                parameters[i]: ast.literal_eval(a) for i, a in enumerate(call.args)
            }
            arguments |= {k.arg: ast.literal_eval(k.value) for k in call.keywords}
            actions.append({"name": name, "arguments": arguments})
        actions.append({"content": "Done."})
    return tuple(actions)


def _turns(messages: list[dict[str, Any]]) -> list[list[list[str]]]:
    """The agent's accepted calls per user turn and assistant message, as BFCL's
    checker takes them (a refused call never reaches BFCL)."""
    turns: list[list[list[str]]] = []
    replies = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    for message in messages:
        if message.get("role") == "user":
            turns.append([])
        elif message.get("role") == "assistant" and message.get("tool_calls") and turns:
            step = []
            for call in message["tool_calls"]:
                reply = replies.get(call.get("id"), {})
                if reply.get("error"):
                    continue
                function = call["function"]
                arguments = json.loads(function.get("arguments") or "{}")
                step.append(_call_string(function["name"], arguments))
            if step:
                turns[-1].append(step)
    return turns


def _check(entry: dict[str, Any]) -> Any:
    def check(state: dict[str, Any], messages: list[dict[str, Any]]) -> bool:
        """BFCL's multi-turn checker on the agent's calls, its instances released."""
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker as checker
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

        turns = _turns(messages)
        turns += [[] for _ in range(len(entry["ground_truth"]) - len(turns))]
        name = f"trace_{uuid.uuid4().hex}"
        try:
            result = checker.multi_turn_checker(
                turns[: len(entry["ground_truth"])], entry["ground_truth"], entry,
                entry["id"].rsplit("_", 1)[0], name,
            )  # fmt: skip
        except AssertionError:  # BFCL asserts where instances do not line up
            return False
        finally:
            for key in [k for k in vars(multi_turn_utils) if k.startswith(name)]:
                del vars(multi_turn_utils)[key]
        return bool(result.get("valid"))

    return check


def _arrival(names: Sequence[str]) -> str:
    """The user turn that brings held-out tools, as BFCL words it for a model that
    reads its tools in the prompt (their OpenAI schemas, as the system prompt's)."""
    from bfcl_eval.constants.default_prompts import (
        DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING as ARRIVAL,
    )

    schemas = {s["function"]["name"]: s for s in _tools()[0]}
    return ARRIVAL.format(functions=json.dumps([schemas[n] for n in names]))


def make_target(categories: Sequence[str] = ("multi_turn_base",)) -> Target:
    """BFCL's multi-turn `categories` (of CATEGORIES) as one target."""
    chosen = tuple(categories)
    if not chosen or any(c not in CATEGORIES for c in chosen):
        raise ValueError(f"categories must be some of {', '.join(CATEGORIES)}")
    schemas, owner = _tools()

    def task(split: str, index: int) -> TargetTask:
        entry = _entries(chosen)[split][index]
        excluded = set(entry.get("excluded_function") or ())
        offered = tuple(
            name for name, class_name in owner.items()
            if class_name in entry["involved_classes"] and name not in excluded
        )  # fmt: skip
        arriving = {
            int(turn): tuple(names)
            for turn, names in (entry.get("missed_function") or {}).items()
        }
        questions = [
            turn[0]["content"] if turn else _arrival(arriving[index])
            for index, turn in enumerate(entry["question"])
        ]
        return TargetTask(
            instruction=questions[0],
            state=_instances(entry),
            check=_check(entry),
            task_id=entry["id"],
            user_turns=tuple(questions[1:]),
            expected_actions=_expected(entry),
            tools=offered,
            arriving=arriving,
        )

    return Target(
        name="bfcl_multi_turn",
        tools=schemas,
        functions={
            name: _function(name, class_name) for name, class_name in owner.items()
        },
        policy=POLICY,
        task=task,
        max_turns=40,
    )
