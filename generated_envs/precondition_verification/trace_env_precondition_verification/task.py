"""Precondition verification: the `precondition_verification` capability, on
the Airline (tau2-bench) tools.

Before cancelling a reservation, check that the policy allows it (booked
within the last 24 hours, business cabin, or travel insurance) and refuse
the ones it does not allow.

Each seed builds one task (precondition verification family): the user asks
to cancel several reservations; only those booked in the last 24 hours, in
business, or with insurance may be cancelled. An agent without the
capability runs every requested state-changing action without checking that
the policy allows it.

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
from ._runtime.kits import airline
from ._runtime.kits.airline.world import (
    airline_background,
    airline_created_at,
    airline_reservation,
    airline_state,
    airline_user,
)

TOOLKIT = airline.TOOLKIT
KNOBS = (
    Knob("requests", 2, 2, 4, "entities the user asks to act on"),
    Knob("ineligible", 1, 1, 3, "of those, how many the policy forbids"),
)


_REASONS = {
    "recent": "it was booked within the last 24 hours",
    "business": "it is in business",
    "insurance": "it has travel insurance",
}


def _request(
    rng: random.Random, state: State, user: dict[str, Any], eligible: bool
) -> tuple[dict[str, Any], str]:
    """A reservation of `user` and why it may be cancelled ('' when it may not)."""
    reason = rng.choice(sorted(_REASONS)) if eligible else ""
    cheap = rng.choice(("basic_economy", "economy"))
    reservation = airline_reservation(
        rng,
        state,
        user,
        next(iter(user["payment_methods"])),
        cabin="business" if reason == "business" else cheap,
        created_at=airline_created_at(rng, recent=reason == "recent"),
        insurance="yes" if reason == "insurance" else "no",
        passengers=rng.randint(1, 3),
    )
    return reservation, reason


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: world, request, gold and lacking turns, facts."""
    requests = knobs["requests"]
    ineligible = min(knobs["ineligible"], requests - 1)
    state = airline_state()
    airline_background(rng, state, users=1)
    user = airline_user(rng, state, sources=("credit_card",))
    flags = [False] * ineligible + [True] * (requests - ineligible)
    rng.shuffle(flags)
    asked = [_request(rng, state, user, flag) for flag in flags]
    airline_reservation(rng, state, user, next(iter(user["payment_methods"])))
    rng.shuffle(user["reservations"])
    ids = [reservation["reservation_id"] for reservation, _ in asked]
    instruction = (
        f"Hi, my user id is {user['user_id']}. My plans changed: please cancel my "
        f"reservations {', '.join(ids[:-1])} and {ids[-1]}. Yes, I confirm the "
        "cancellations. Tell me what was cancelled and what I get refunded."
    )
    opening = call("get_user_details", user_id=user["user_id"])
    gold: list[Turn] = [opening]
    lacking: list[Turn] = [opening]
    facts: list[str] = []
    done: list[str] = []
    refused: list[str] = []
    for reservation, reason in asked:
        rid = reservation["reservation_id"]
        read = call("get_reservation_details", reservation_id=rid)
        cancel = call("cancel_reservation", reservation_id=rid)
        refund = money(sum(p["amount"] for p in reservation["payment_history"]))
        gold.append(read)
        lacking.extend((read, cancel))
        if reason:
            gold.append(cancel)
            facts.append(refund)
            done.append(f"{rid} ({_REASONS[reason]}; ${refund} refunded)")
        else:
            refused.append(rid)
    gold.append(
        say(
            f"I cancelled {', '.join(done)}. The refunds go back to the original "
            f"payment method. I cannot cancel {', '.join(refused)}: booked more than "
            "24 hours ago, not in business and without travel insurance."
        )
    )
    lacking.append(
        say("I cancelled all the reservations you listed; refunds go to your card.")
    )
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=tuple(gold),
        required_facts=(*facts, *refused),
        lacking_turns=tuple(lacking),
    )
