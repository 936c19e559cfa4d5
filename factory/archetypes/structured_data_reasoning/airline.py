"""Structured data reasoning on the airline kit.

The user asks to book the cheapest direct flight in a given cabin for one or
more saved passengers and to be told the total; the search returns several
flights whose per-cabin prices rank them differently.

An agent without the capability misreads the nested record (the wrong
cabin's price, or a variant that is not available) and acts and reports on
the wrong value.
"""

from __future__ import annotations

import copy
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
from factory.runtime.kits.airline import run
from factory.runtime.kits.airline.world import (
    airline_available,
    airline_background,
    airline_flight,
    airline_future_date,
    airline_person,
    airline_route,
    airline_state,
    airline_user,
)

TOOLKIT = airline.TOOLKIT
KNOBS = (
    Knob("options", 3, 2, 9, "candidate records to compare (tau2: up to 9)"),
    Knob("quantity", 1, 1, 3, "passengers or order items involved"),
)


_CABIN_NAMES = {
    "basic_economy": "basic economy",
    "economy": "economy",
    "business": "business",
}
_PRICE_RANGES = {
    "basic_economy": (50, 99),
    "economy": (100, 299),
    "business": (300, 999),
}


def _distinct_people(rng: random.Random, count: int) -> list[dict[str, str]]:
    people: list[dict[str, str]] = []
    while len(people) < count:
        person = airline_person(rng)
        names = {(p["first_name"], p["last_name"]) for p in people}
        if (person["first_name"], person["last_name"]) not in names:
            people.append(person)
    return people


def _price_table(
    rng: random.Random, options: int, cabin: str, wrong: str
) -> list[dict[str, int]]:
    """Per-flight prices where the cheapest in `cabin` and in `wrong` differ."""
    columns = {
        name: rng.sample(range(low, high + 1), options)
        for name, (low, high) in _PRICE_RANGES.items()
    }
    best = columns[cabin].index(min(columns[cabin]))
    if columns[wrong].index(min(columns[wrong])) == best:
        other = rng.choice([i for i in range(options) if i != best])
        column = columns[wrong]
        column[best], column[other] = column[other], column[best]
    return [{name: columns[name][i] for name in columns} for i in range(options)]


def _names(people: list[dict[str, str]]) -> str:
    names = [f"{p['first_name']} {p['last_name']}" for p in people]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: world, request, gold and lacking turns, facts."""
    options, quantity = knobs["options"], knobs["quantity"]
    state = airline_state()
    airline_background(rng, state, users=1)
    extra = rng.choice(("gift_card", "certificate"))
    sources = ("credit_card", extra) if rng.random() < 0.5 else (extra, "credit_card")
    user = airline_user(rng, state, sources=sources)
    user["saved_passengers"] = _distinct_people(rng, quantity + 1)
    travellers = rng.sample(user["saved_passengers"], quantity)
    card_id = next(
        key
        for key, method in user["payment_methods"].items()
        if method["source"] == "credit_card"
    )
    card = user["payment_methods"][card_id]
    cabin, wrong = rng.sample(sorted(_CABIN_NAMES), 2)
    origin, destination = airline_route(rng, state)
    date = airline_future_date(rng)
    flights = [
        airline_flight(
            rng, state, origin, destination, {date: airline_available(rng, prices)}
        )
        for prices in _price_table(rng, options, cabin, wrong)
    ]
    later = f"2024-05-{int(date[-2:]) + 1:02d}"
    airline_flight(rng, state, origin, destination, {later: airline_available(rng)})

    def cheapest(by: str) -> dict[str, Any]:
        return min(flights, key=lambda f: f["dates"][date]["prices"][by])

    def booking(flight: dict[str, Any]) -> dict[str, Any]:
        total = flight["dates"][date]["prices"][cabin] * quantity
        return {
            "user_id": user["user_id"],
            "origin": origin,
            "destination": destination,
            "flight_type": "one_way",
            "cabin": cabin,
            "flights": [{"flight_number": flight["flight_number"], "date": date}],
            "passengers": [dict(person) for person in travellers],
            "payment_methods": [{"payment_id": card_id, "amount": total}],
            "total_baggages": 0,
            "nonfree_baggages": 0,
            "insurance": "no",
        }

    def turns(flight: dict[str, Any], facts: tuple[str, ...] = ()) -> tuple[Turn, ...]:
        arguments = booking(flight)
        total = arguments["payment_methods"][0]["amount"]
        booked = run(copy.deepcopy(state), "book_reservation", **arguments)
        text = (
            f"Your reservation {booked['reservation_id']} is booked on flight "
            f"{flight['flight_number']} ({_CABIN_NAMES[cabin]}), the cheapest "
            f"direct {_CABIN_NAMES[cabin]} fare, for {_names(travellers)}. "
            f"The total is ${money(total)}, charged to your card ending in "
            f"{card['last_four']}."
        )
        said = text.lower().replace(",", "")
        if any(fact.lower() in said for fact in facts):
            text = "Your trip is booked and charged to your credit card."
        return (
            call("get_user_details", user_id=user["user_id"]),
            call(
                "search_direct_flight",
                origin=origin,
                destination=destination,
                date=date,
            ),
            call("book_reservation", **arguments),
            say(text),
        )

    right = cheapest(cabin)
    total = right["dates"][date]["prices"][cabin] * quantity
    instruction = (
        f"Hi, my user id is {user['user_id']}. Please book a one-way trip from "
        f"{origin} to {destination} on {date} in {_CABIN_NAMES[cabin]} for "
        f"{_names(travellers)} (saved in my profile), on the direct flight that is "
        f"cheapest in {_CABIN_NAMES[cabin]}. No checked bags and no travel "
        f"insurance. Charge everything to my {card['brand']} card ending in "
        f"{card['last_four']}. Yes, I confirm the booking; tell me the total price."
    )
    facts = (right["flight_number"], money(total))
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=turns(right),
        required_facts=facts,
        lacking_turns=turns(cheapest(wrong), facts),
    )
