"""Tool-calling precision on the airline kit.

The user asks to add paid checked bags to a reservation, charged to the card
that paid for that reservation; the profile lists other payment methods
first.

An agent without the capability calls the right tool with a wrong argument:
the first payment method on the profile (a gift card) instead of the
original credit card.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from factory.runtime import (
    Knob,
    Task,
    Turn,
    call,
    money,
    say,
)
from factory.runtime.kits import airline
from factory.runtime.kits.airline.world import (
    FREE_BAGS,
    airline_background,
    airline_payment_method,
    airline_reservation,
    airline_state,
    airline_user,
)

TOOLKIT = airline.TOOLKIT
KNOBS = (
    Knob("payment_methods", 3, 2, 5, "payment methods on the user profile"),
    Knob("items", 1, 1, 3, "bags to add or items to return"),
)


_OTHER_SOURCES = ("credit_card", "gift_card", "certificate")


def _describe(method: dict[str, Any]) -> str:
    if method["source"] == "credit_card":
        return f"{method['brand']} card ending in {method['last_four']}"
    kind = "gift card" if method["source"] == "gift_card" else "certificate"
    return f"{kind} {method['id']}"


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: world, request, gold and lacking turns, facts."""
    methods, bags = knobs["payment_methods"], knobs["items"]
    state = airline_state()
    airline_background(rng, state, users=1)
    user = airline_user(rng, state, sources=())
    first = airline_payment_method(rng, user, "gift_card", rng.randint(20, 60) * 10)
    middle = [rng.choice(_OTHER_SOURCES) for _ in range(methods - 2)]
    position = rng.randint(0, len(middle))
    original = ""
    for source in [*middle[:position], "original", *middle[position:]]:
        if source == "original":
            original = airline_payment_method(rng, user, "credit_card")
        else:
            airline_payment_method(rng, user, source)
    others = [
        key
        for key, method in user["payment_methods"].items()
        if key != original and method["source"] != "certificate"
    ]
    airline_reservation(rng, state, user, rng.choice(others))
    reservation = airline_reservation(
        rng, state, user, original, passengers=rng.randint(1, 2)
    )
    if rng.random() < 0.5:
        user["reservations"].reverse()
    free = FREE_BAGS[user["membership"]][reservation["cabin"]]
    reservation["total_baggages"] = free * len(reservation["passengers"])
    total = reservation["total_baggages"] + bags
    nonfree = reservation["nonfree_baggages"] + bags
    fee = 50 * bags
    card = user["payment_methods"][original]
    plural = "bag" if bags == 1 else "bags"
    instruction = (
        f"Hi, my user id is {user['user_id']}. On reservation "
        f"{reservation['reservation_id']} I want to add {bags} checked {plural}; "
        "the free allowance is already used up, so they are paid bags. Please charge "
        "them to the same credit card I paid that reservation with. Yes, I confirm; "
        "tell me how much I am charged."
    )

    def turns(payment_id: str, text: str) -> tuple[Turn, ...]:
        return (
            call(
                "get_reservation_details", reservation_id=reservation["reservation_id"]
            ),
            call("get_user_details", user_id=user["user_id"]),
            call(
                "update_reservation_baggages",
                reservation_id=reservation["reservation_id"],
                total_baggages=total,
                nonfree_baggages=nonfree,
                payment_id=payment_id,
            ),
            say(text),
        )

    gold_text = (
        f"Done: reservation {reservation['reservation_id']} now has {total} checked "
        f"bags. The {bags} extra {plural} cost ${money(fee)}, charged to your "
        f"{_describe(card)}."
    )
    # The lacking agent names no amount, so it earns no fact in partial mode either.
    lacking_text = "Done: the extra bags are added and charged to your gift card."
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=turns(original, gold_text),
        required_facts=(money(fee), card["last_four"]),
        lacking_turns=turns(first, lacking_text),
    )
