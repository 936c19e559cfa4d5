"""Tool-calling precision: the `tool_calling_precision` capability, on the
Retail tools.

Fill every argument of a state-changing call exactly as the user and the
records say: refund a return to the original payment method of the order,
not to whichever method the profile lists first.

Each seed builds one task (tool-calling precision family): the user asks to
return items of a delivered order with the refund to the original payment
method; the profile lists a gift card first. An agent without the capability
calls the right tool with a wrong argument: the first payment method on the
profile (a gift card) instead of the original credit card.

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
    add_payment_method,
    add_user,
    describe_method,
    new_world,
)

TOOLKIT = retail.TOOLKIT
KNOBS = (
    Knob("payment_methods", 3, 2, 5, "payment methods on the user profile"),
    Knob("items", 1, 1, 3, "bags to add or items to return"),
)


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


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: world, request, gold and lacking turns, facts."""
    """Return delivered items with the refund to the original method, not the gift card."""
    method_count, item_count = knobs["payment_methods"], knobs["items"]
    state = new_world()
    kept = rng.randint(1, 2)
    names = rng.sample(sorted(PRODUCT_TYPES), item_count + kept + 1)
    catalog = add_catalog(state, rng, names, 5)
    original_source = rng.choice(["credit_card", "paypal"])
    others = [rng.choice(["credit_card", "gift_card"]) for _ in range(method_count - 2)]
    rng.shuffle(others)
    user_id = add_user(state, rng, ["gift_card", *others])
    user = state["users"][user_id]
    original = add_payment_method(state, rng, user_id, original_source)
    if others:
        # Put the original method somewhere after the first gift card.
        methods = list(user["payment_methods"].items())
        position = rng.randint(1, len(methods) - 1)
        methods.insert(position, methods.pop())
        user["payment_methods"] = dict(methods)
    gift_card = next(iter(user["payment_methods"]))
    add_bystanders(state, rng, 2)

    def pick(name: str) -> str:
        variants = state["products"][catalog[name]]["variants"]
        return rng.choice(sorted(variants))

    returned = [pick(name) for name in names[:item_count]]
    ordered = returned + [pick(name) for name in names[item_count : item_count + kept]]
    rng.shuffle(ordered)
    order_id = add_order(state, rng, user_id, ordered, "delivered", original)
    add_order(state, rng, user_id, [pick(names[-1])], "pending", gift_card)

    prices = {
        item["item_id"]: item["price"] for item in state["orders"][order_id]["items"]
    }
    refund = round(sum(prices[item_id] for item_id in returned), 2)
    wanted = " and ".join(f"the {name}" for name in names[:item_count])
    who, lookup = _authentication(rng, user)
    instruction = (
        f"Hello, {who}. I want to return {wanted} from my delivered order "
        f"{order_id}. Please send the refund to the original payment method I paid "
        "that order with, and tell me how much will be refunded. Yes, I confirm "
        "the return."
    )
    reads = (
        lookup,
        call("get_user_details", user_id=user_id),
        call("get_order_details", order_id=order_id),
    )
    method = user["payment_methods"][original]
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=(
            *reads,
            call(
                "return_delivered_order_items",
                order_id=order_id,
                item_ids=returned,
                payment_method_id=original,
            ),
            say(
                f"The return of {wanted} from order {order_id} is requested. "
                f"${money(refund)} will be refunded to your {describe_method(method)}, "
                "the original payment method; you will get an email on how to "
                "send the items back."
            ),
        ),
        required_facts=(money(refund),),
        lacking_turns=(
            *reads,
            call(
                "return_delivered_order_items",
                order_id=order_id,
                item_ids=returned,
                payment_method_id=gift_card,
            ),
            say(
                f"The return of {wanted} from order {order_id} is requested. "
                f"${money(refund)} will be refunded to your payment method."
            ),
        ),
    )
