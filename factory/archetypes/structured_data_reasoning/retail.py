"""Structured data reasoning on the retail kit.

The user asks to switch an item of a pending order to the cheapest available
variant with a given option and to be told the price difference; the
cheapest matching variant is out of stock.

An agent without the capability misreads the nested record (the wrong
cabin's price, or a variant that is not available) and acts and reports on
the wrong value.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from typing import Any

from factory.runtime import (
    Knob,
    State,
    Task,
    call,
    money,
    say,
)
from factory.runtime.kits import retail
from factory.runtime.kits.retail import fails
from factory.runtime.kits.retail.world import (
    PRODUCT_TYPES,
    add_bystanders,
    add_catalog,
    add_order,
    add_product,
    add_user,
    describe_method,
    new_world,
    option_combinations,
)

TOOLKIT = retail.TOOLKIT
KNOBS = (
    Knob("options", 3, 2, 9, "candidate records to compare (tau2: up to 9)"),
    Knob("quantity", 1, 1, 3, "passengers or order items involved"),
)


def _distinct_prices(rng: random.Random, name: str, count: int) -> list[float]:
    """`count` different prices around the product type's base price, ascending."""
    base = PRODUCT_TYPES[name][0]
    cents = rng.sample(range(int(base * 60), int(base * 150)), count)
    return sorted(value / 100 for value in cents)


def _switch_target(
    rng: random.Random, state: State, name: str, candidates: int
) -> tuple[str, str, str, str, str]:
    """Add a product whose cheapest variant with the wanted option is out of stock.

    Returns (product id, current item id, gold item id, trap item id, request text).
    """
    dimensions = PRODUCT_TYPES[name][1]
    dimension = rng.choice(sorted(dimensions))
    wanted = rng.choice(dimensions[dimension])
    current_value = rng.choice([v for v in dimensions[dimension] if v != wanted])
    matching = rng.sample(option_combinations(name, {dimension: wanted}), candidates)
    prices = _distinct_prices(rng, name, candidates + 3)
    current_price = prices.pop(rng.randrange(len(prices)))
    # Two cheaper variants without the wanted option, then the matching ones:
    # the cheapest matching one is out of stock, the next one is the answer.
    others = rng.sample(option_combinations(name, {dimension: current_value}), 3)
    variants = [(others[0], prices[0], True), (others[1], prices[1], True)]
    variants.append((matching[0], prices[2], False))
    variants.append((matching[1], prices[3], True))
    for combo, price in zip(matching[2:], prices[4:], strict=True):
        variants.append((combo, price, rng.random() < 0.6))
    current = (others[2], current_price, True)
    order = list(range(len(variants) + 1))
    rng.shuffle(order)
    listed = [([*variants, current])[index] for index in order]
    product_id = add_product(state, rng, name, listed)
    by_options = {
        json.dumps(variant["options"], sort_keys=True): item_id
        for item_id, variant in state["products"][product_id]["variants"].items()
    }

    def item_of(combo: dict[str, str]) -> str:
        return by_options[json.dumps(combo, sort_keys=True)]

    request = (
        f"the {name} to the cheapest {dimension} '{wanted}' variant that is in stock"
    )
    return (
        product_id,
        item_of(current[0]),
        item_of(matching[1]),
        item_of(matching[0]),
        request,
    )


def _difference(
    variants: Mapping[str, Any], old_ids: list[str], new_ids: list[str]
) -> float:
    prices = [
        variants[new]["price"] - variants[old]["price"]
        for old, new in zip(old_ids, new_ids, strict=True)
    ]
    return round(sum(prices), 2)


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: world, request, gold and lacking turns, facts."""
    """Switch items to the cheapest in-stock variant with an option; say the difference."""
    candidates, quantity = knobs["options"], knobs["quantity"]
    state = new_world()
    names = rng.sample(sorted(PRODUCT_TYPES), quantity + 2)
    catalog = add_catalog(state, rng, names[quantity:], 4)
    sources = ["credit_card", *rng.sample(["paypal", "gift_card"], rng.randint(0, 2))]
    rng.shuffle(sources)
    user_id = add_user(state, rng, sources)
    add_bystanders(state, rng, 2)
    user = state["users"][user_id]
    methods = list(user["payment_methods"].values())
    card = next(m for m in methods if m["source"] == "credit_card")
    targets = [
        _switch_target(rng, state, name, candidates) for name in names[:quantity]
    ]
    extra_product = state["products"][catalog[rng.choice(names[quantity:])]]
    extra = rng.choice(sorted(extra_product["variants"]))
    item_ids = [target[1] for target in targets] + [extra]
    rng.shuffle(item_ids)
    paid_with = rng.choice(methods)["id"]
    order_id = add_order(state, rng, user_id, item_ids, "pending", paid_with)
    add_order(
        state, rng, user_id, [extra], rng.choice(["delivered", "processed"]), paid_with
    )

    old_ids = [target[1] for target in targets]
    new_ids = [target[2] for target in targets]
    trap_ids = [target[3] for target in targets]
    variants = {
        item_id: variant
        for product in state["products"].values()
        for item_id, variant in product["variants"].items()
    }
    difference = _difference(variants, old_ids, new_ids)
    requests = " and ".join(target[4] for target in targets)
    instruction = (
        f"Hi, my email is {user['email']}. In my pending order {order_id}, please "
        f"switch {requests}. Put any price difference on my {describe_method(card)}, "
        "and tell me how much the price difference is. Yes, I confirm this change."
    )
    reads = [
        call("find_user_id_by_email", email=user["email"]),
        call("get_user_details", user_id=user_id),
        call("get_order_details", order_id=order_id),
        *(call("get_product_details", product_id=target[0]) for target in targets),
    ]
    direction = "charged to" if difference > 0 else "refunded to"
    gold = call(
        "modify_pending_order_items",
        order_id=order_id,
        item_ids=old_ids,
        new_item_ids=new_ids,
        payment_method_id=card["id"],
    )
    lacking = call(
        "modify_pending_order_items",
        order_id=order_id,
        item_ids=old_ids,
        new_item_ids=trap_ids,
        payment_method_id=card["id"],
    )
    assert not fails(
        state, "modify_pending_order_items", **gold.tool_calls[0].arguments
    )
    assert fails(state, "modify_pending_order_items", **lacking.tool_calls[0].arguments)
    trap_difference = _difference(variants, old_ids, trap_ids)
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=(
            *reads,
            gold,
            say(
                f"Your order {order_id} now has the cheapest in-stock variants you "
                f"asked for. The price difference is ${money(abs(difference))}, "
                f"{direction} your {describe_method(card)}."
            ),
        ),
        required_facts=(money(abs(difference)),),
        lacking_turns=(
            *reads,
            lacking,
            say(
                f"Your order {order_id} now has the cheapest variants you asked for. "
                f"The price difference is ${money(abs(trap_difference))}."
            ),
        ),
    )
