"""Multi-step task completion on the airline kit.

The user asks for several changes at once (add bags, change a passenger,
cancel an eligible reservation) on different reservations.

An agent without the capability does the first of the requested operations
and then closes the conversation as if it were done.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from factory.runtime import (
    Knob,
    State,
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
    airline_created_at,
    airline_person,
    airline_reservation,
    airline_state,
    airline_user,
)

TOOLKIT = airline.TOOLKIT
KNOBS = (
    Knob("operations", 2, 2, 4, "operations requested in one message"),
    Knob(
        "distractors",
        1,
        0,
        10,
        "unrelated reservations or orders (tau2: up to 13 a user)",
    ),
)


_ELIGIBLE_REASONS = ("recent", "business", "insurance")


def _other_person(rng: random.Random, taken: list[dict[str, str]]) -> dict[str, str]:
    names = {(p["first_name"], p["last_name"]) for p in taken}
    while True:
        person = airline_person(rng)
        if (person["first_name"], person["last_name"]) not in names:
            return person


def _cancellable(
    rng: random.Random, state: State, user: dict[str, Any], pay: str
) -> dict[str, Any]:
    reason = rng.choice(_ELIGIBLE_REASONS)
    cheap = rng.choice(("basic_economy", "economy"))
    return airline_reservation(
        rng,
        state,
        user,
        pay,
        cabin="business" if reason == "business" else cheap,
        created_at=airline_created_at(rng, recent=reason == "recent"),
        insurance="yes" if reason == "insurance" else "no",
        passengers=rng.randint(1, 3),
    )


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: world, request, gold and lacking turns, facts."""
    operations, distractors = knobs["operations"], knobs["distractors"]
    state = airline_state()
    airline_background(rng, state, users=1)
    user = airline_user(rng, state, sources=("gift_card", "credit_card"))
    gift, card_id = list(user["payment_methods"])
    card = user["payment_methods"][card_id]
    kinds = ["bags", "passenger", "cancel"]
    rng.shuffle(kinds)
    kinds = (kinds + [rng.choice(("bags", "passenger"))])[:operations]
    requests: list[str] = []
    writes: list[list[Turn]] = []
    facts: list[str] = []
    summaries: list[str] = []
    for kind in kinds:
        pay = rng.choice((gift, card_id))
        if kind == "cancel":
            reservation = _cancellable(rng, state, user, pay)
        else:
            size = rng.randint(2, 3) if kind == "passenger" else rng.randint(1, 3)
            reservation = airline_reservation(rng, state, user, pay, passengers=size)
        rid = reservation["reservation_id"]
        read = call("get_reservation_details", reservation_id=rid)
        if kind == "bags":
            count = rng.randint(1, 2)
            free = FREE_BAGS[user["membership"]][reservation["cabin"]]
            reservation["total_baggages"] = free * len(reservation["passengers"])
            fee = 50 * count
            write = call(
                "update_reservation_baggages",
                reservation_id=rid,
                total_baggages=reservation["total_baggages"] + count,
                nonfree_baggages=reservation["nonfree_baggages"] + count,
                payment_id=card_id,
            )
            requests.append(
                f"add {count} checked bag{'s' if count > 1 else ''} to reservation "
                f"{rid} (the free allowance is used up there, so charge them to my "
                f"credit card ending in {card['last_four']})"
            )
            facts.append(money(fee))
            summaries.append(f"added {count} paid bags to {rid} for ${money(fee)}")
        elif kind == "passenger":
            people = reservation["passengers"]
            index = rng.randint(1, len(people) - 1)
            new = _other_person(rng, people)
            old = people[index]
            updated = [dict(p) for p in people]
            updated[index] = new
            write = call(
                "update_reservation_passengers", reservation_id=rid, passengers=updated
            )
            name = f"{new['first_name']} {new['last_name']}"
            requests.append(
                f"on reservation {rid}, replace passenger {old['first_name']} "
                f"{old['last_name']} with {name}, born {new['dob']}"
            )
            facts.append(name)
            summaries.append(f"replaced {old['first_name']} with {name} on {rid}")
        else:
            refund = sum(p["amount"] for p in reservation["payment_history"])
            write = call("cancel_reservation", reservation_id=rid)
            requests.append(f"cancel reservation {rid}, my plans changed")
            facts.append(money(refund))
            summaries.append(
                f"cancelled {rid}; ${money(refund)} goes back to the original payment"
            )
        writes.append([read, write])
    for _ in range(distractors):
        airline_reservation(rng, state, user, rng.choice((gift, card_id)))
    rng.shuffle(user["reservations"])
    instruction = (
        f"Hi, my user id is {user['user_id']}. I need several changes, please: "
        + "; ".join(f"({n}) {r}" for n, r in enumerate(requests, 1))
        + ". Yes, I confirm all of them. Tell me what was done and the amounts."
    )
    opening = call("get_user_details", user_id=user["user_id"])
    gold = [opening, *(turn for pair in writes for turn in pair)]
    gold.append(say("All done: " + "; ".join(summaries) + "."))
    # Closes as if everything were done, without the details it never produced.
    lacking = [opening, *writes[0], say("All done, your requests are taken care of.")]
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=tuple(gold),
        required_facts=tuple(facts),
        lacking_turns=tuple(lacking),
    )
