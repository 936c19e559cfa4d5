"""Tool implementations of the Airline (tau2-bench) kit, named and typed as tau2-bench airline domain (sierra-research/tau2-bench).

Every tool checks its preconditions before it touches the state, so a call
that fails with `ToolError` never changes it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...schema import ToolError
from ...toolkit import State
from ..calculator import calculate

# State: "users", "reservations" and "flights" keyed by id, shaped like the
# tau2-bench airline database. A flight has a status per date; an "available"
# date lists seats left and the price of each cabin.

NOW = "2024-05-15T15:00:00"
CABINS = ("basic_economy", "economy", "business")
BAG_FEE = 50
INSURANCE_FEE = 30
MAX_PASSENGERS = 5
PAYMENT_LIMITS = {"certificate": 1, "credit_card": 1, "gift_card": 3}
AIRPORTS: list[dict[str, str]] = [
    {"iata": "SFO", "city": "San Francisco"},
    {"iata": "JFK", "city": "New York"},
    {"iata": "LAX", "city": "Los Angeles"},
    {"iata": "ORD", "city": "Chicago"},
    {"iata": "DFW", "city": "Dallas"},
    {"iata": "DEN", "city": "Denver"},
    {"iata": "SEA", "city": "Seattle"},
    {"iata": "ATL", "city": "Atlanta"},
    {"iata": "MIA", "city": "Miami"},
    {"iata": "BOS", "city": "Boston"},
    {"iata": "PHX", "city": "Phoenix"},
    {"iata": "IAH", "city": "Houston"},
    {"iata": "LAS", "city": "Las Vegas"},
    {"iata": "MCO", "city": "Orlando"},
    {"iata": "EWR", "city": "Newark"},
    {"iata": "CLT", "city": "Charlotte"},
    {"iata": "MSP", "city": "Minneapolis"},
    {"iata": "DTW", "city": "Detroit"},
    {"iata": "PHL", "city": "Philadelphia"},
    {"iata": "LGA", "city": "LaGuardia"},
]
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_ID_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _days_in_month(year: int, month: int) -> int:
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 29 if month == 2 and leap else _MONTH_DAYS[month - 1]


def _check_date(date: str, what: str = "date") -> None:
    """Raise ToolError unless `date` is a real calendar date 'YYYY-MM-DD'."""
    parts = date.split("-")
    shaped = [len(part) for part in parts] == [4, 2, 2] and all(
        part.isascii() and part.isdigit() for part in parts
    )
    if shaped:
        year, month, day = (int(part) for part in parts)
        if 1 <= month <= 12 and 1 <= day <= _days_in_month(year, month):
            return
    raise ToolError(f"{what} '{date}' is not a valid date in the format YYYY-MM-DD")


def _next_day(date: str) -> str:
    year, month, day = (int(part) for part in date.split("-"))
    if day < _days_in_month(year, month):
        return f"{year:04d}-{month:02d}-{day + 1:02d}"
    if month < 12:
        return f"{year:04d}-{month + 1:02d}-01"
    return f"{year + 1:04d}-01-01"


def _user(state: State, user_id: str) -> dict[str, Any]:
    user = state["users"].get(user_id)
    if user is None:
        raise ToolError(f"user '{user_id}' not found")
    return user


def _reservation(state: State, reservation_id: str) -> dict[str, Any]:
    reservation = state["reservations"].get(reservation_id)
    if reservation is None:
        raise ToolError(f"reservation '{reservation_id}' not found")
    return reservation


def _active_reservation(state: State, reservation_id: str) -> dict[str, Any]:
    reservation = _reservation(state, reservation_id)
    if reservation.get("status") == "cancelled":
        raise ToolError(f"reservation '{reservation_id}' is cancelled")
    return reservation


def _flight(state: State, flight_number: str) -> dict[str, Any]:
    flight = state["flights"].get(flight_number)
    if flight is None:
        raise ToolError(f"flight '{flight_number}' not found")
    return flight


def _bookable(
    state: State, flight_number: str, date: str, cabin: str, seats: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The flight and its date record, if `seats` seats of `cabin` can be sold."""
    _check_date(date)
    flight = _flight(state, flight_number)
    day = flight["dates"].get(date)
    if day is None:
        raise ToolError(f"flight '{flight_number}' does not fly on {date}")
    if day["status"] != "available":
        raise ToolError(
            f"flight '{flight_number}' on {date} is {day['status']}, not available"
        )
    if day["available_seats"][cabin] < seats:
        raise ToolError(
            f"not enough {cabin} seats on flight '{flight_number}' on {date}"
        )
    return flight, day


def _check_route(
    segments: list[dict[str, Any]], origin: str, destination: str, flight_type: str
) -> None:
    """Segments must chain from `origin` and reach `destination` (and back)."""
    if origin == destination:
        raise ToolError("origin and destination must differ")
    if segments[0]["origin"] != origin:
        raise ToolError(f"the first flight does not leave from {origin}")
    for index in range(1, len(segments)):
        before, after = segments[index - 1], segments[index]
        if before["destination"] != after["origin"]:
            raise ToolError(
                f"flight '{after['flight_number']}' does not leave from "
                f"{before['destination']}, where the previous flight lands"
            )
    if flight_type == "one_way" and segments[-1]["destination"] != destination:
        raise ToolError(f"a one-way trip must end at {destination}")
    if flight_type == "round_trip":
        if segments[-1]["destination"] != origin:
            raise ToolError(f"a round trip must return to {origin}")
        if all(segment["destination"] != destination for segment in segments):
            raise ToolError(f"the round trip never reaches {destination}")


def _check_passengers(passengers: list[dict[str, Any]]) -> None:
    if not 1 <= len(passengers) <= MAX_PASSENGERS:
        raise ToolError(f"a reservation has 1 to {MAX_PASSENGERS} passengers")
    for index, passenger in enumerate(passengers):
        if not passenger["first_name"].strip() or not passenger["last_name"].strip():
            raise ToolError(f"passenger {index + 1} needs a first and a last name")
        _check_date(passenger["dob"], f"passenger {index + 1} dob")


def _plan_segments(
    state: State,
    flights: list[dict[str, Any]],
    cabin: str,
    seats: int,
    kept: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Reservation segments for `flights`; segments in `kept` keep their price."""
    if not flights:
        raise ToolError("at least one flight is needed")
    segments, seen = [], set()
    for item in flights:
        key = (item["flight_number"], item["date"])
        if key in seen:
            raise ToolError(f"flight '{key[0]}' on {key[1]} is listed twice")
        seen.add(key)
        old = next(
            (
                segment
                for segment in kept or []
                if (segment["flight_number"], segment["date"]) == key
            ),
            None,
        )
        if old is not None:
            segments.append(dict(old))
            continue
        flight, day = _bookable(state, key[0], key[1], cabin, seats)
        segments.append(
            {
                "origin": flight["origin"],
                "destination": flight["destination"],
                "flight_number": key[0],
                "date": key[1],
                "price": day["prices"][cabin],
            }
        )
    return segments


def _move_seats(
    state: State, segments: list[dict[str, Any]], cabin: str, change: int
) -> None:
    """Take (change < 0) or give back seats on the dates still open for booking."""
    for segment in segments:
        flight = state["flights"].get(segment["flight_number"])
        day = flight["dates"].get(segment["date"]) if flight else None
        if day is not None and day["status"] == "available":
            day["available_seats"][cabin] += change


def _update_charge(user: dict[str, Any], payment_id: str, amount: int) -> None:
    """Check that `payment_id` can pay (or take back) `amount` for a change."""
    method = user["payment_methods"].get(payment_id)
    if method is None:
        raise ToolError(f"payment method '{payment_id}' is not in the user's profile")
    if method["source"] == "certificate":
        raise ToolError("a certificate cannot pay for a change to a reservation")
    if method["source"] == "gift_card" and method["amount"] < amount:
        raise ToolError(f"gift card '{payment_id}' balance is not enough")


def _apply_charge(
    user: dict[str, Any],
    reservation: dict[str, Any],
    payment_id: str,
    amount: int,
) -> None:
    if amount == 0:
        return
    method = user["payment_methods"][payment_id]
    if method["source"] == "gift_card":
        method["amount"] = round(method["amount"] - amount, 2)
    reservation["payment_history"].append({"payment_id": payment_id, "amount": amount})


def _new_reservation_id(state: State) -> str:
    """A six-character id derived from the number of reservations, unused so far."""
    counter = len(state["reservations"])
    while True:
        number = (counter * 2654435761 + 40591) % 36**6
        code = "".join(_ID_CHARS[number // 36**place % 36] for place in range(6))
        if code not in state["reservations"]:
            return code
        counter += 1


def book_reservation(
    state: State,
    user_id: str,
    origin: str,
    destination: str,
    flight_type: str,
    cabin: str,
    flights: list[dict[str, Any]],
    passengers: list[dict[str, Any]],
    payment_methods: list[dict[str, Any]],
    total_baggages: int,
    nonfree_baggages: int,
    insurance: str,
) -> dict[str, Any]:
    user = _user(state, user_id)
    _check_passengers(passengers)
    segments = _plan_segments(state, flights, cabin, len(passengers))
    _check_route(segments, origin, destination, flight_type)
    if not 0 <= nonfree_baggages <= total_baggages:
        raise ToolError("bags must satisfy 0 <= nonfree_baggages <= total_baggages")
    fares = sum(segment["price"] for segment in segments) * len(passengers)
    insured = INSURANCE_FEE * len(passengers) if insurance == "yes" else 0
    total = fares + insured + BAG_FEE * nonfree_baggages
    if not payment_methods:
        raise ToolError("at least one payment method is needed")
    used: dict[str, int] = {}
    for payment in payment_methods:
        payment_id, amount = payment["payment_id"], payment["amount"]
        method = user["payment_methods"].get(payment_id)
        if method is None:
            raise ToolError(
                f"payment method '{payment_id}' is not in the user's profile"
            )
        if payment_id in used:
            raise ToolError(f"payment method '{payment_id}' is listed twice")
        if amount <= 0:
            raise ToolError("every payment amount must be positive")
        if method["source"] != "credit_card" and method["amount"] < amount:
            raise ToolError(f"not enough balance on '{payment_id}'")
        used[payment_id] = amount
        kind = method["source"]
        count = sum(user["payment_methods"][other]["source"] == kind for other in used)
        if count > PAYMENT_LIMITS[kind]:
            raise ToolError(f"at most {PAYMENT_LIMITS[kind]} {kind} per booking")
    paid = sum(used.values())
    if paid != total:
        raise ToolError(f"payments add up to {paid}, but the total price is {total}")
    reservation_id = _new_reservation_id(state)
    for payment_id, amount in used.items():
        method = user["payment_methods"][payment_id]
        if method["source"] == "gift_card":
            method["amount"] = round(method["amount"] - amount, 2)
        elif method["source"] == "certificate":
            del user["payment_methods"][payment_id]
    _move_seats(state, segments, cabin, -len(passengers))
    reservation = {
        "reservation_id": reservation_id,
        "user_id": user_id,
        "origin": origin,
        "destination": destination,
        "flight_type": flight_type,
        "cabin": cabin,
        "flights": segments,
        "passengers": [dict(passenger) for passenger in passengers],
        "payment_history": [
            {"payment_id": payment_id, "amount": amount}
            for payment_id, amount in used.items()
        ],
        "created_at": NOW,
        "total_baggages": total_baggages,
        "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
    }
    state["reservations"][reservation_id] = reservation
    user["reservations"].append(reservation_id)
    return reservation


def cancel_reservation(state: State, reservation_id: str) -> dict[str, Any]:
    reservation = _active_reservation(state, reservation_id)
    refunds = [
        {"payment_id": payment["payment_id"], "amount": -payment["amount"]}
        for payment in reservation["payment_history"]
    ]
    reservation["payment_history"].extend(refunds)
    reservation["status"] = "cancelled"
    _move_seats(
        state,
        reservation["flights"],
        reservation["cabin"],
        len(reservation["passengers"]),
    )
    return reservation


def get_reservation_details(state: State, reservation_id: str) -> dict[str, Any]:
    return _reservation(state, reservation_id)


def get_user_details(state: State, user_id: str) -> dict[str, Any]:
    return _user(state, user_id)


def list_all_airports(state: State) -> list[dict[str, str]]:
    return AIRPORTS


def _direct(
    state: State,
    origin: str,
    destination: str | None,
    date: str,
    leave_after: str = "",
) -> list[dict[str, Any]]:
    found = []
    for flight in state["flights"].values():
        day = flight["dates"].get(date)
        if (
            flight["origin"] != origin
            or destination not in (None, flight["destination"])
            or day is None
            or day["status"] != "available"
            or flight["scheduled_departure_time_est"] < leave_after
        ):
            continue
        found.append(
            {
                "flight_number": flight["flight_number"],
                "origin": flight["origin"],
                "destination": flight["destination"],
                "status": "available",
                "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
                "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"],
                "date": date,
                "available_seats": dict(day["available_seats"]),
                "prices": dict(day["prices"]),
            }
        )
    return found


def search_direct_flight(
    state: State, origin: str, destination: str, date: str
) -> list[dict[str, Any]]:
    _check_date(date)
    return _direct(state, origin, destination, date)


def search_onestop_flight(
    state: State, origin: str, destination: str, date: str
) -> list[list[dict[str, Any]]]:
    _check_date(date)
    pairs = []
    for first in _direct(state, origin, None, date):
        if first["destination"] == destination:
            continue
        arrival = first["scheduled_arrival_time_est"]
        second_date = date
        if arrival.endswith("+1"):
            arrival, second_date = arrival[:-2], _next_day(date)
        for second in _direct(
            state, first["destination"], destination, second_date, arrival
        ):
            pairs.append([first, second])
    return pairs


def send_certificate(state: State, user_id: str, amount: int) -> str:
    user = _user(state, user_id)
    if amount <= 0:
        raise ToolError("the certificate amount must be positive")
    number = 7000000 + len(user["payment_methods"])
    while f"certificate_{number}" in user["payment_methods"]:
        number += 1
    certificate_id = f"certificate_{number}"
    user["payment_methods"][certificate_id] = {
        "source": "certificate",
        "id": certificate_id,
        "amount": float(amount),
    }
    return f"Certificate {certificate_id} of {amount} dollars added to {user_id}."


def transfer_to_human_agents(state: State, summary: str) -> str:
    return "Transfer successful"


def update_reservation_baggages(
    state: State,
    reservation_id: str,
    total_baggages: int,
    nonfree_baggages: int,
    payment_id: str,
) -> dict[str, Any]:
    reservation = _active_reservation(state, reservation_id)
    user = _user(state, reservation["user_id"])
    if not 0 <= nonfree_baggages <= total_baggages:
        raise ToolError("bags must satisfy 0 <= nonfree_baggages <= total_baggages")
    if (
        total_baggages < reservation["total_baggages"]
        or nonfree_baggages < reservation["nonfree_baggages"]
    ):
        raise ToolError("checked bags can be added but not removed")
    fee = BAG_FEE * (nonfree_baggages - reservation["nonfree_baggages"])
    _update_charge(user, payment_id, fee)
    _apply_charge(user, reservation, payment_id, fee)
    reservation["total_baggages"] = total_baggages
    reservation["nonfree_baggages"] = nonfree_baggages
    return reservation


def update_reservation_flights(
    state: State,
    reservation_id: str,
    cabin: str,
    flights: list[dict[str, Any]],
    payment_id: str,
) -> dict[str, Any]:
    reservation = _active_reservation(state, reservation_id)
    user = _user(state, reservation["user_id"])
    seats = len(reservation["passengers"])
    kept = reservation["flights"] if cabin == reservation["cabin"] else []
    segments = _plan_segments(state, flights, cabin, seats, kept)
    _check_route(
        segments,
        reservation["origin"],
        reservation["destination"],
        reservation["flight_type"],
    )
    old_total = sum(segment["price"] for segment in reservation["flights"]) * seats
    difference = sum(segment["price"] for segment in segments) * seats - old_total
    _update_charge(user, payment_id, difference)
    _apply_charge(user, reservation, payment_id, difference)
    _move_seats(state, reservation["flights"], reservation["cabin"], seats)
    _move_seats(state, segments, cabin, -seats)
    reservation["flights"] = segments
    reservation["cabin"] = cabin
    return reservation


def update_reservation_passengers(
    state: State, reservation_id: str, passengers: list[dict[str, Any]]
) -> dict[str, Any]:
    reservation = _active_reservation(state, reservation_id)
    _check_passengers(passengers)
    if len(passengers) != len(reservation["passengers"]):
        raise ToolError("the number of passengers cannot change")
    reservation["passengers"] = [dict(passenger) for passenger in passengers]
    return reservation


def get_flight_status(state: State, flight_number: str, date: str) -> str:
    _check_date(date)
    day = _flight(state, flight_number)["dates"].get(date)
    if day is None:
        raise ToolError(f"flight '{flight_number}' does not fly on {date}")
    return day["status"]


IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "book_reservation": book_reservation,
    "calculate": calculate,
    "cancel_reservation": cancel_reservation,
    "get_reservation_details": get_reservation_details,
    "get_user_details": get_user_details,
    "list_all_airports": list_all_airports,
    "search_direct_flight": search_direct_flight,
    "search_onestop_flight": search_onestop_flight,
    "send_certificate": send_certificate,
    "transfer_to_human_agents": transfer_to_human_agents,
    "update_reservation_baggages": update_reservation_baggages,
    "update_reservation_flights": update_reservation_flights,
    "update_reservation_passengers": update_reservation_passengers,
    "get_flight_status": get_flight_status,
}
