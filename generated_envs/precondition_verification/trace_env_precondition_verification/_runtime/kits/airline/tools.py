"""Tool implementations of the Airline (tau2-bench) kit, named and typed as tau2-bench airline domain (sierra-research/tau2-bench).

Each tool does what tau2-bench's own airline tool does, with its error
messages, result fields and new ids: tests/factory/test_tau2_differential.py runs the
same calls through both. Like tau2, the tools check data (ids, seats, balances,
totals) but not policy (who may cancel, cabin and passenger limits): that is
the agent's job, stated in the policy. Every tool checks before it touches the
state, so a call that fails with `ToolError` never changes it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from ...schema import ToolError
from ...toolkit import State
from ..calculator import calculate

# State: "users", "reservations" and "flights" keyed by id, shaped like the
# tau2-bench airline database. A flight has a status per date; an "available"
# date lists seats left and the price of each cabin.

NOW = "2024-05-15T15:00:00"
BAG_FEE = 50
INSURANCE_FEE = 30
RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
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


def _user(state: State, user_id: str) -> dict[str, Any]:
    user = state["users"].get(user_id)
    if user is None:
        raise ToolError(f"User {user_id} not found")
    return user


def _reservation(state: State, reservation_id: str) -> dict[str, Any]:
    reservation = state["reservations"].get(reservation_id)
    if reservation is None:
        raise ToolError(f"Reservation {reservation_id} not found")
    return reservation


def _flight(state: State, flight_number: str) -> dict[str, Any]:
    flight = state["flights"].get(flight_number)
    if flight is None:
        raise ToolError(f"Flight {flight_number} not found")
    return flight


def _flight_date(state: State, flight_number: str, date: str) -> dict[str, Any]:
    day = _flight(state, flight_number)["dates"].get(date)
    if day is None:
        raise ToolError(f"Flight {flight_number} not found on date {date}")
    return day


def _segment(
    state: State, flight_number: str, date: str, cabin: str, seats: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A new reservation segment and its date record, if `seats` seats can be sold."""
    flight = _flight(state, flight_number)
    day = _flight_date(state, flight_number, date)
    if day["status"] != "available":
        raise ToolError(f"Flight {flight_number} not available on date {date}")
    if day["available_seats"][cabin] < seats:
        raise ToolError(f"Not enough seats on flight {flight_number}")
    segment = {
        "flight_number": flight_number,
        "origin": flight["origin"],
        "destination": flight["destination"],
        "date": date,
        "price": day["prices"][cabin],
    }
    return segment, day


def _charge_for_update(
    user: dict[str, Any], reservation: dict[str, Any], payment_id: str, amount: int
) -> None:
    """Pay (amount > 0) or refund (amount < 0) a change with a card from the profile."""
    method = user["payment_methods"].get(payment_id)
    if method is None:
        raise ToolError("Payment method not found")
    if method["source"] == "certificate":
        raise ToolError("Certificate cannot be used to update reservation")
    if method["source"] == "gift_card":
        if method["amount"] < amount:
            raise ToolError("Gift card balance is not enough")
        method["amount"] -= amount
    if amount != 0:
        reservation["payment_history"].append(
            {"payment_id": payment_id, "amount": amount}
        )


def _new_id(taken: Any, candidates: tuple[str, ...], problem: str) -> str:
    """The first candidate id not taken yet (tau2 allows three new ids per task)."""
    for candidate in candidates:
        if candidate not in taken:
            return candidate
    raise ToolError(problem)


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
    reservation_id = _new_id(
        state["reservations"], RESERVATION_IDS, "Too many reservations"
    )
    segments, days = [], []
    for item in flights:
        segment, day = _segment(
            state, item["flight_number"], item["date"], cabin, len(passengers)
        )
        segments.append(segment)
        days.append(day)
    total = sum(segment["price"] for segment in segments) * len(passengers)
    total += INSURANCE_FEE * len(passengers) if insurance == "yes" else 0
    total += BAG_FEE * nonfree_baggages
    listed: set[str] = set()
    for payment in payment_methods:
        payment_id, amount = payment["payment_id"], payment["amount"]
        method = user["payment_methods"].get(payment_id)
        if method is None:
            raise ToolError(f"Payment method {payment_id} not found")
        # tau2 checks each entry alone, so a repeated gift card could go negative
        # and a repeated certificate crashes it half-way: refused here instead.
        if payment_id in listed:
            raise ToolError(f"Payment method {payment_id} is listed twice")
        listed.add(payment_id)
        if method["source"] != "credit_card" and method["amount"] < amount:
            raise ToolError(f"Not enough balance in payment method {payment_id}")
    paid = sum(payment["amount"] for payment in payment_methods)
    if paid != total:
        raise ToolError(
            f"Payment amount does not add up, total price is {total}, but paid {paid}"
        )
    for payment in payment_methods:
        method = user["payment_methods"][payment["payment_id"]]
        if method["source"] == "gift_card":
            method["amount"] -= payment["amount"]
        elif method["source"] == "certificate":
            del user["payment_methods"][payment["payment_id"]]
    for day in days:
        day["available_seats"][cabin] -= len(passengers)
    reservation = {
        "reservation_id": reservation_id,
        "user_id": user_id,
        "origin": origin,
        "destination": destination,
        "flight_type": flight_type,
        "cabin": cabin,
        "flights": segments,
        "passengers": [_passenger(passenger) for passenger in passengers],
        "payment_history": [
            {"payment_id": payment["payment_id"], "amount": payment["amount"]}
            for payment in payment_methods
        ],
        "created_at": NOW,
        "total_baggages": total_baggages,
        "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
        "status": None,
    }
    state["reservations"][reservation_id] = reservation
    user["reservations"].append(reservation_id)
    return reservation


def _passenger(passenger: dict[str, Any]) -> dict[str, Any]:
    """A passenger record with tau2's fields only, in its order."""
    return {key: passenger[key] for key in ("first_name", "last_name", "dob")}


def cancel_reservation(state: State, reservation_id: str) -> dict[str, Any]:
    # As in tau2, seats are not released and the cancellation rules are the
    # agent's to check (see the policy).
    reservation = _reservation(state, reservation_id)
    reservation["payment_history"].extend(
        [
            {"payment_id": payment["payment_id"], "amount": -payment["amount"]}
            for payment in reservation["payment_history"]
        ]
    )
    reservation["status"] = "cancelled"
    return reservation


def get_reservation_details(state: State, reservation_id: str) -> dict[str, Any]:
    return _reservation(state, reservation_id)


def get_user_details(state: State, user_id: str) -> dict[str, Any]:
    return _user(state, user_id)


def list_all_airports(state: State) -> list[dict[str, str]]:
    return AIRPORTS


def _direct(
    state: State,
    date: str,
    origin: str | None,
    destination: str | None,
    leave_after: str | None = None,
) -> list[dict[str, Any]]:
    found = []
    for flight in state["flights"].values():
        day = flight["dates"].get(date)
        if (
            origin not in (None, flight["origin"])
            or destination not in (None, flight["destination"])
            or day is None
            or day["status"] != "available"
            or (
                leave_after is not None
                and flight["scheduled_departure_time_est"] < leave_after
            )
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
                "date": None,
                "available_seats": dict(day["available_seats"]),
                "prices": dict(day["prices"]),
            }
        )
    return found


def search_direct_flight(
    state: State, origin: str, destination: str, date: str
) -> list[dict[str, Any]]:
    return _direct(state, date, origin, destination)


def _next_day(date: str) -> str:
    """The calendar day after `date` ('YYYY-MM-DD'), or '' when `date` is no date."""
    try:
        return (
            datetime.date.fromisoformat(date) + datetime.timedelta(days=1)
        ).isoformat()
    except ValueError:
        return ""


def search_onestop_flight(
    state: State, origin: str, destination: str, date: str
) -> list[list[dict[str, Any]]]:
    pairs = []
    for first in _direct(state, date, origin, None):
        first["date"] = date
        arrival = first["scheduled_arrival_time_est"]
        # tau2 writes f"2024-05-{day + 1}" here; the calendar's next day is used.
        second_date = _next_day(date) if "+1" in arrival else date
        for second in _direct(
            state, second_date, first["destination"], destination, arrival
        ):
            second["date"] = second_date
            pairs.append([first, second])
    return pairs


def send_certificate(state: State, user_id: str, amount: int) -> str:
    user = _user(state, user_id)
    certificate_id = _new_id(
        user["payment_methods"], CERTIFICATE_IDS, "Too many certificates"
    )
    user["payment_methods"][certificate_id] = {
        "source": "certificate",
        "id": certificate_id,
        "amount": float(amount),
    }
    return f"Certificate {certificate_id} added to user {user_id} with amount {amount}."


def transfer_to_human_agents(state: State, summary: str) -> str:
    return "Transfer successful"


def update_reservation_baggages(
    state: State,
    reservation_id: str,
    total_baggages: int,
    nonfree_baggages: int,
    payment_id: str,
) -> dict[str, Any]:
    reservation = _reservation(state, reservation_id)
    user = _user(state, reservation["user_id"])
    fee = BAG_FEE * max(0, nonfree_baggages - reservation["nonfree_baggages"])
    _charge_for_update(user, reservation, payment_id, fee)
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
    # As in tau2, seats are not moved: the flight database is updated later.
    reservation = _reservation(state, reservation_id)
    user = _user(state, reservation["user_id"])
    seats = len(reservation["passengers"])
    segments = []
    for item in flights:
        kept = next(
            (
                segment
                for segment in reservation["flights"]
                if (segment["flight_number"], segment["date"])
                == (item["flight_number"], item["date"])
                and cabin == reservation["cabin"]
            ),
            None,
        )
        if kept is None:
            kept, _ = _segment(state, item["flight_number"], item["date"], cabin, seats)
        segments.append(kept)
    difference = sum(segment["price"] for segment in segments) * seats
    difference -= sum(segment["price"] for segment in reservation["flights"]) * seats
    _charge_for_update(user, reservation, payment_id, difference)
    reservation["flights"] = segments
    reservation["cabin"] = cabin
    return reservation


def update_reservation_passengers(
    state: State, reservation_id: str, passengers: list[dict[str, Any]]
) -> dict[str, Any]:
    reservation = _reservation(state, reservation_id)
    if len(passengers) != len(reservation["passengers"]):
        raise ToolError("Number of passengers does not match")
    reservation["passengers"] = [_passenger(passenger) for passenger in passengers]
    return reservation


def get_flight_status(state: State, flight_number: str, date: str) -> str:
    return _flight_date(state, flight_number, date)["status"]


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
