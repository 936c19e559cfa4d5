"""Precondition verification on the retail kit.

The user asks to cancel several pending orders; some belong to another
customer and must not be touched.

An agent without the capability runs every requested state-changing action
without checking that the policy allows it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from factory.runtime import (
    Knob,
    State,
    Task,
    Turn,
    call,
    money,
    say,
)
from factory.runtime.kits import retail
from factory.runtime.kits.retail.world import (
    FIRST_NAMES,
    PRODUCT_TYPES,
    add_bystanders,
    add_catalog,
    add_order,
    add_user,
    new_world,
    order_total,
)

TOOLKIT = retail.TOOLKIT
KNOBS = (
    Knob("requests", 2, 2, 4, "entities the user asks to act on"),
    Knob("ineligible", 1, 1, 3, "of those, how many the policy forbids"),
)


_REASONS = {
    "no longer needed": "I no longer need them",
    "ordered by mistake": "I ordered them by mistake",
}


def _pending_order(
    rng: random.Random, state: State, user_id: str, method_ids: list[str]
) -> str:
    """A pending order of one or two catalog items for `user_id`."""
    product_ids = rng.sample(sorted(state["products"]), rng.randint(1, 2))
    items = [
        rng.choice(sorted(state["products"][product_id]["variants"]))
        for product_id in product_ids
    ]
    return add_order(state, rng, user_id, items, "pending", rng.choice(method_ids))


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: cancel the requested pending orders that belong to the user, and only those."""
    request_count = knobs["requests"]
    foreign_count = min(knobs["ineligible"], request_count - 1)
    state = new_world()
    add_catalog(state, rng, rng.sample(sorted(PRODUCT_TYPES), 5), 4)
    user_id = add_user(state, rng, ["credit_card", "gift_card"][: rng.randint(1, 2)])
    user = state["users"][user_id]
    # The other customer shares the user's last name (a relative, say).
    other_first = rng.choice(
        [n for n in FIRST_NAMES if n != user["name"]["first_name"]]
    )
    other_id = add_user(
        state,
        rng,
        [rng.choice(["credit_card", "paypal", "gift_card"])],
        name=(other_first, user["name"]["last_name"]),
    )
    add_bystanders(state, rng, 2)
    own_methods = sorted(user["payment_methods"])
    other_methods = sorted(state["users"][other_id]["payment_methods"])
    own = [
        _pending_order(rng, state, user_id, own_methods)
        for _ in range(request_count - foreign_count)
    ]
    foreign = [
        _pending_order(rng, state, other_id, other_methods)
        for _ in range(foreign_count)
    ]
    # One more order of the user that is not part of the request.
    _pending_order(rng, state, user_id, own_methods)
    rng.shuffle(user["orders"])
    requested = own + foreign
    rng.shuffle(requested)
    reason = rng.choice(sorted(_REASONS))

    instruction = (
        f"Hi, my email is {user['email']}. Please cancel my pending orders "
        f"{', '.join(requested)} because {_REASONS[reason]}. Tell me how much each "
        "cancelled order refunds. Yes, I confirm the cancellations."
    )
    reads = (
        call("find_user_id_by_email", email=user["email"]),
        call("get_user_details", user_id=user_id),
    )
    gold: list[Turn] = []
    lacking: list[Turn] = []
    reports: list[str] = []
    for order_id in requested:
        cancel = call("cancel_pending_order", order_id=order_id, reason=reason)
        gold.append(call("get_order_details", order_id=order_id))
        lacking.append(cancel)
        if order_id in own:
            gold.append(cancel)
            total = order_total(state["orders"][order_id])
            reports.append(f"order {order_id} is cancelled, refund ${money(total)}")
        else:
            reports.append(
                f"order {order_id} is not on your account, so I cannot cancel it"
            )
    facts = tuple(money(order_total(state["orders"][order_id])) for order_id in own)
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=(*reads, *gold, say("Done: " + "; ".join(reports) + ".")),
        required_facts=facts,
        lacking_turns=(
            *reads,
            *lacking,
            say(
                "All cancelled: "
                + "; ".join(
                    f"order {order_id}, refund "
                    f"${money(order_total(state['orders'][order_id]))}"
                    for order_id in requested
                )
                + "."
            ),
        ),
    )
