"""World builders of the Airline (tau2-bench) kit: seeded synthetic states shaped like tau2-bench airline domain (sierra-research/tau2-bench)."""

from __future__ import annotations

import random
from typing import Any

from ...toolkit import State

AIRLINE_NOW = "2024-05-15T15:00:00"
RECENT_SINCE = "2024-05-14T15:00:00"
AIRPORT_CODES = (
    "SFO", "JFK", "LAX", "ORD", "DFW", "DEN", "SEA", "ATL", "MIA", "BOS",
    "PHX", "IAH", "LAS", "MCO", "EWR", "CLT", "MSP", "DTW", "PHL", "LGA",
)  # fmt: skip
FIRST_NAMES = (
    "Ava", "Liam", "Mia", "Noah", "Emma", "Omar", "Yusuf", "Sofia", "Raj", "Chen",
    "Amelia", "Ethan", "Fatima", "Lucas", "Aarav", "Isabella", "Mei", "Ivan",
    "Harper", "Daiki", "Nora", "Mateo", "Zoe", "Kwame", "Lena", "Hugo",
)  # fmt: skip
LAST_NAMES = (
    "Kim", "Li", "Patel", "Garcia", "Smith", "Khan", "Rossi", "Nguyen", "Brown",
    "Silva", "Ahmed", "Muller", "Cohen", "Lopez", "Jackson", "Sato", "Novak",
    "Okafor", "Hansen", "Moreau", "Ito", "Wilson", "Taylor", "Martin",
)  # fmt: skip
FREE_BAGS = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
CARD_BRANDS = ("visa", "mastercard", "amex", "discover")


def airline_code(rng: random.Random) -> str:
    """A six-character reservation code."""
    return "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(6))


def airline_state() -> State:
    """An empty airline database."""
    return {"flights": {}, "users": {}, "reservations": {}}


def airline_person(rng: random.Random) -> dict[str, str]:
    """A passenger record: first and last name, date of birth."""
    return {
        "first_name": rng.choice(FIRST_NAMES),
        "last_name": rng.choice(LAST_NAMES),
        "dob": f"{rng.randint(1950, 2005)}-{rng.randint(1, 12):02d}-"
        f"{rng.randint(1, 28):02d}",
    }


def airline_future_date(rng: random.Random) -> str:
    """A travel date after today (2024-05-15)."""
    return f"2024-05-{rng.randint(17, 30):02d}"


def airline_created_at(rng: random.Random, recent: bool) -> str:
    """A booking time: within the last 24 hours, or days before that."""
    if recent:
        hour = rng.randint(16, 23)
        day = 14
        if rng.random() < 0.5:
            day, hour = 15, rng.randint(0, 14)
    else:
        day, hour = rng.randint(1, 13), rng.randint(0, 23)
    return f"2024-05-{day:02d}T{hour:02d}:{rng.randint(0, 59):02d}:00"


def airline_prices(rng: random.Random) -> dict[str, int]:
    """Per-cabin prices; basic economy < economy < business on every flight."""
    return {
        "basic_economy": rng.randint(50, 99),
        "economy": rng.randint(100, 299),
        "business": rng.randint(300, 999),
    }


def airline_available(
    rng: random.Random, prices: dict[str, int] | None = None
) -> dict[str, Any]:
    """A date record open for booking, with seats left and per-cabin prices."""
    return {
        "status": "available",
        "available_seats": {
            "basic_economy": rng.randint(5, 20),
            "economy": rng.randint(5, 20),
            "business": rng.randint(5, 15),
        },
        "prices": prices or airline_prices(rng),
    }


def airline_flight(
    rng: random.Random,
    state: State,
    origin: str,
    destination: str,
    dates: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Add a flight with a fresh number and the given per-date records."""
    number = f"HAT{rng.randint(1, 999):03d}"
    while number in state["flights"]:
        number = f"HAT{rng.randint(1, 999):03d}"
    departure = rng.randint(5, 17)
    flight = {
        "flight_number": number,
        "origin": origin,
        "destination": destination,
        "scheduled_departure_time_est": f"{departure:02d}:{rng.choice([0, 30]):02d}:00",
        "scheduled_arrival_time_est": f"{departure + rng.randint(1, 5):02d}:"
        f"{rng.choice([0, 15, 45]):02d}:00",
        "dates": dates,
    }
    state["flights"][number] = flight
    return flight


def airline_payment_method(
    rng: random.Random, user: dict[str, Any], source: str, amount: float = 0.0
) -> str:
    """Add a payment method of `source` to `user`'s profile and return its id."""
    method_id = f"{source}_{rng.randint(1000000, 9999999)}"
    while method_id in user["payment_methods"]:
        method_id = f"{source}_{rng.randint(1000000, 9999999)}"
    method: dict[str, Any] = {"source": source, "id": method_id}
    if source == "credit_card":
        method["brand"] = rng.choice(CARD_BRANDS)
        method["last_four"] = f"{rng.randint(0, 9999):04d}"
    else:
        method["amount"] = float(amount or rng.randint(1, 30) * 10)
    user["payment_methods"][method_id] = method
    return method_id


def airline_user(
    rng: random.Random,
    state: State,
    membership: str | None = None,
    sources: tuple[str, ...] = ("credit_card",),
    saved: int = 0,
) -> dict[str, Any]:
    """Add a user with payment methods of `sources` (in that order)."""
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    user_id = f"{first.lower()}_{last.lower()}_{rng.randint(1000, 9999)}"
    while user_id in state["users"]:
        user_id = f"{first.lower()}_{last.lower()}_{rng.randint(1000, 9999)}"
    user: dict[str, Any] = {
        "user_id": user_id,
        "name": {"first_name": first, "last_name": last},
        "address": {
            "address1": f"{rng.randint(10, 999)} {rng.choice(LAST_NAMES)} Street",
            "address2": None,
            "city": rng.choice(("Austin", "Denver", "Boston", "Phoenix", "Miami")),
            "country": "USA",
            "state": rng.choice(("TX", "CO", "MA", "AZ", "FL")),
            "zip": f"{rng.randint(10000, 99999)}",
        },
        "email": f"{first.lower()}.{last.lower()}{rng.randint(10, 99)}@example.com",
        "dob": airline_person(rng)["dob"],
        "payment_methods": {},
        "saved_passengers": [airline_person(rng) for _ in range(saved)],
        "membership": membership or rng.choice(("regular", "silver", "gold")),
        "reservations": [],
    }
    for source in sources:
        airline_payment_method(rng, user, source)
    state["users"][user_id] = user
    return user


def airline_route(rng: random.Random, state: State) -> tuple[str, str]:
    """Two different airports, with no flight between them yet."""
    while True:
        origin, destination = rng.sample(AIRPORT_CODES, 2)
        if not any(
            (flight["origin"], flight["destination"]) == (origin, destination)
            for flight in state["flights"].values()
        ):
            return origin, destination


def airline_reservation(
    rng: random.Random,
    state: State,
    user: dict[str, Any],
    payment_id: str,
    cabin: str | None = None,
    passengers: int = 1,
    created_at: str | None = None,
    insurance: str = "no",
    round_trip: bool | None = None,
) -> dict[str, Any]:
    """Add a reservation of `user` on new flights, paid in full with `payment_id`."""
    cabin = cabin or rng.choice(("basic_economy", "economy", "business"))
    origin, destination = airline_route(rng, state)
    round_trip = rng.random() < 0.5 if round_trip is None else round_trip
    legs = [(origin, destination)] + ([(destination, origin)] if round_trip else [])
    date = airline_future_date(rng)
    segments = []
    for leg_origin, leg_destination in legs:
        day = airline_available(rng)
        flight = airline_flight(rng, state, leg_origin, leg_destination, {date: day})
        segments.append(
            {
                "flight_number": flight["flight_number"],
                "origin": leg_origin,
                "destination": leg_destination,
                "date": date,
                "price": day["prices"][cabin],
            }
        )
    people = [airline_person(rng) for _ in range(passengers - 1)]
    people.insert(0, {**user["name"], "dob": user["dob"]})
    free = FREE_BAGS[user["membership"]][cabin] * passengers
    total_bags = rng.randint(0, free)
    price = sum(segment["price"] for segment in segments) * passengers
    price += 30 * passengers if insurance == "yes" else 0
    reservation_id = airline_code(rng)
    while reservation_id in state["reservations"]:
        reservation_id = airline_code(rng)
    reservation = {
        "reservation_id": reservation_id,
        "user_id": user["user_id"],
        "origin": origin,
        "destination": destination,
        "flight_type": "round_trip" if round_trip else "one_way",
        "cabin": cabin,
        "flights": segments,
        "passengers": people,
        "payment_history": [{"payment_id": payment_id, "amount": price}],
        "created_at": created_at or airline_created_at(rng, recent=False),
        "total_baggages": total_bags,
        "nonfree_baggages": 0,
        "insurance": insurance,
        "status": None,
    }
    state["reservations"][reservation_id] = reservation
    user["reservations"].append(reservation_id)
    return reservation


def airline_background(rng: random.Random, state: State, users: int = 2) -> None:
    """Unrelated users with a reservation each, so lookups must pick the right one."""
    for _ in range(users):
        user = airline_user(rng, state)
        airline_reservation(rng, state, user, next(iter(user["payment_methods"])))
