"""Multi-step task completion: the `multi_step_task_completion` capability, on
the Retail tools.

Carry out every part of a request that asks for several order and profile
changes at once, and only then close the conversation with a summary of each
change.

Each seed builds one task (multi-step task completion family): the user asks
for several changes at once (cancel a pending order, change a pending
order's address, return a delivered item, update the profile address). An
agent without the capability does the first of the requested operations and
then closes the conversation as if it were done.

Reward (`_runtime/verifier.py`): the gold final state is the initial state
with the gold tool calls replayed; reward mode `binary` pays 1.0 when the
final state matches the gold state and every required fact was told to the
user, else 0.0. Knob values come from capability.json
(generation.difficulty).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from ._runtime import (
    Knob,
    State,
    Task,
    Turn,
    call,
    money,
    say,
)
from ._runtime.kits import retail
from ._runtime.kits.retail.world import (
    PRODUCT_TYPES,
    add_bystanders,
    add_catalog,
    add_order,
    add_user,
    describe_address,
    new_world,
    order_total,
    random_address,
)

TOOLKIT = retail.TOOLKIT
KNOBS = (
    Knob("operations", 2, 2, 4, "operations requested in one message"),
    Knob(
        "distractors",
        1,
        0,
        7,
        "unrelated reservations or orders (tau2: up to 9 a user)",
    ),
)


_OPERATIONS = ("cancel", "order_address", "return", "user_address")
_REASONS = {
    "no longer needed": "I no longer need it",
    "ordered by mistake": "I ordered it by mistake",
}


def _authentication(rng: random.Random, user: Mapping[str, Any]) -> tuple[str, Turn]:
    """How the user identifies themself, and the gold lookup call for it."""
    if rng.random() < 0.5:
        return f"my email is {user['email']}", call(
            "find_user_id_by_email", email=user["email"]
        )
    name, zip_code = user["name"], user["address"]["zip"]
    text = f"I am {name['first_name']} {name['last_name']}, zip code {zip_code}"
    lookup = call(
        "find_user_id_by_name_zip",
        first_name=name["first_name"],
        last_name=name["last_name"],
        zip=zip_code,
    )
    return text, lookup


def _new_address(rng: random.Random, old: Mapping[str, str]) -> dict[str, str]:
    """A random address that differs from `old`."""
    while True:
        address = random_address(rng)
        if address != old:
            return address


def _items(rng: random.Random, state: State, count: int) -> list[str]:
    """`count` variants of different products of the catalog."""
    product_ids = rng.sample(sorted(state["products"]), count)
    return [
        rng.choice(sorted(state["products"][product_id]["variants"]))
        for product_id in product_ids
    ]


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: several changes in one request; every one of them must be carried out."""
    count, distractor_count = knobs["operations"], knobs["distractors"]
    state = new_world()
    add_catalog(state, rng, rng.sample(sorted(PRODUCT_TYPES), 5), 4)
    sources = ["credit_card", *rng.sample(["paypal", "gift_card"], rng.randint(0, 2))]
    rng.shuffle(sources)
    user_id = add_user(state, rng, sources)
    user = state["users"][user_id]
    method_ids = sorted(user["payment_methods"])
    add_bystanders(state, rng, 2)
    for _ in range(distractor_count):
        status = rng.choice(["pending", "processed", "delivered", "cancelled"])
        items = _items(rng, state, rng.randint(1, 2))
        add_order(state, rng, user_id, items, status, rng.choice(method_ids))

    requests: list[str] = []
    steps: list[tuple[Turn, ...]] = []
    reports: list[str] = []
    facts: list[str] = []
    for operation in rng.sample(_OPERATIONS, count):
        if operation == "user_address":
            address = _new_address(rng, user["address"])
            requests.append(f"update my default address to {describe_address(address)}")
            steps.append((call("modify_user_address", user_id=user_id, **address),))
            reports.append("your default address is updated")
            continue
        status = "delivered" if operation == "return" else "pending"
        items = _items(rng, state, rng.randint(1, 2))
        paid_with = rng.choice(method_ids)
        order_id = add_order(state, rng, user_id, items, status, paid_with)
        order = state["orders"][order_id]
        read = call("get_order_details", order_id=order_id)
        if operation == "cancel":
            reason = rng.choice(sorted(_REASONS))
            requests.append(
                f"cancel my pending order {order_id} because {_REASONS[reason]}"
            )
            write = call("cancel_pending_order", order_id=order_id, reason=reason)
            total = order_total(order)
            reports.append(
                f"order {order_id} is cancelled with ${money(total)} refunded"
            )
            facts.append(money(total))
        elif operation == "order_address":
            address = _new_address(rng, order["address"])
            requests.append(
                f"ship my pending order {order_id} to {describe_address(address)}"
            )
            write = call("modify_pending_order_address", order_id=order_id, **address)
            reports.append(f"order {order_id} will ship to the new address")
        else:
            item = rng.choice(order["items"])
            requests.append(
                f"return the {item['name']} from my delivered order {order_id}, "
                "with the refund to the original payment method"
            )
            write = call(
                "return_delivered_order_items",
                order_id=order_id,
                item_ids=[item["item_id"]],
                payment_method_id=paid_with,
            )
            reports.append(
                f"the return of the {item['name']} is requested with "
                f"${money(item['price'])} refunded"
            )
            facts.append(money(item["price"]))
        steps.append((read, write))
    rng.shuffle(user["orders"])

    who, lookup = _authentication(rng, user)
    numbered = "; ".join(f"({n}) {text}" for n, text in enumerate(requests, 1))
    instruction = (
        f"Hi, {who}. I need several things done: {numbered}. Please tell me the "
        "refund amounts, if any. Yes, I confirm all of these changes."
    )
    reads = (lookup, call("get_user_details", user_id=user_id))
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=(
            *reads,
            *(turn for step in steps for turn in step),
            say("All done: " + "; ".join(reports) + "."),
        ),
        required_facts=tuple(facts),
        lacking_turns=(
            *reads,
            *steps[0],
            say("All done: " + "; ".join(reports) + "."),
        ),
    )
