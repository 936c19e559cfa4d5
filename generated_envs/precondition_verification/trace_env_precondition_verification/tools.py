"""Tools of the Airline (tau2-bench) target, for the `precondition_verification` training environment.

Tool names and parameters are those of tau2-bench airline domain (sierra-research/tau2-bench); the implementations
are this package's own and act on the JSON state built by `generator.py`. Every
tool checks its preconditions before it touches the state, so a call that fails
with `ToolError` never changes it.
"""

from __future__ import annotations

import ast
import json
import math
import operator
from collections.abc import Callable
from typing import Any

State = dict[str, Any]

POLICY = """\
The current time is 2024-05-15 15:00:00 EST. All times are EST.

You help users book, change and cancel flight reservations. Before any action that changes a reservation or a profile, state what you will do and get the user's explicit yes. Make one tool call at a time, and do not talk to the user in the same message as a tool call. Refuse requests the policy forbids. Transfer to a human agent only when the request is out of scope.

## Users and reservations
- A user is identified by a user id; the profile lists membership (regular, silver, gold), saved passengers, payment methods and reservation ids.
- Payment methods are credit cards, gift cards (with a balance) and travel certificates (with an amount). Every payment must come from the user's profile.
- A reservation has a cabin (basic_economy, economy or business; basic economy is a different cabin from economy), flights, passengers, payments, checked bags, travel insurance and the time it was booked (created_at).
- Only flights whose status on a date is "available" can be booked; search results show seats left and the price of every cabin separately.

## Booking
- The same cabin on every flight, at most five passengers.
- Price: the chosen cabin's fare of every flight times the number of passengers, plus travel insurance at $30 per passenger if bought, plus $50 per non-free checked bag.
- Free checked bags per passenger: regular members 0 (basic economy), 1 (economy), 2 (business); silver 1, 2, 3; gold 2, 3, 4.
- At most one certificate, one credit card and three gift cards per booking; the payments must add up to the total.

## Changing a reservation
- Checked bags can be added, never removed; each extra non-free bag is $50, paid with a credit card or gift card from the profile.
- Passenger details can be changed, the number of passengers cannot.
- Flight or cabin changes keep the origin, destination and trip type; basic economy flights cannot be changed. The fare difference is paid or refunded with a credit card or gift card from the profile.
- Certificates cannot pay for any change to an existing reservation.

## Cancelling
- A reservation can be cancelled only if none of its flights has been flown and at least one of these holds: it was booked within the last 24 hours (created_at on or after 2024-05-14 15:00:00), its cabin is business, or it has travel insurance.
- Otherwise refuse: the tools do not check these rules, you must.
- The refund goes back to the original payment methods.

## Compensation
- Only when the user asks, and only for silver or gold members, insured reservations or business cabins: a certificate of $100 per passenger for a flight the airline cancelled, $50 per passenger for a delay."""

TOOL_SCHEMAS: list[dict[str, Any]] = json.loads(
    r"""
[
    {
        "type": "function",
        "function": {
            "name": "book_reservation",
            "description": "Book a new reservation for a user. Prices come from the flights' current per-cabin prices; the payments must add up to the total (fares for every passenger, plus insurance and non-free bags).",
            "parameters": {
                "type": "object",
                "properties": {
                    "user_id": {
                        "type": "string",
                        "description": "Id of the booking user, e.g. 'ava_kim_1234'."
                    },
                    "origin": {
                        "type": "string",
                        "description": "IATA code of the trip's origin, e.g. 'JFK'."
                    },
                    "destination": {
                        "type": "string",
                        "description": "IATA code of the trip's destination, e.g. 'SEA'."
                    },
                    "flight_type": {
                        "type": "string",
                        "enum": [
                            "round_trip",
                            "one_way"
                        ],
                        "description": "'one_way' or 'round_trip'."
                    },
                    "cabin": {
                        "type": "string",
                        "enum": [
                            "business",
                            "economy",
                            "basic_economy"
                        ],
                        "description": "Cabin class: 'basic_economy', 'economy' or 'business'."
                    },
                    "flights": {
                        "type": "array",
                        "description": "Every flight segment of the trip, in order.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "flight_number": {
                                    "type": "string",
                                    "description": "Flight number, e.g. 'HAT101'."
                                },
                                "date": {
                                    "type": "string",
                                    "description": "Date of that flight, 'YYYY-MM-DD'."
                                }
                            },
                            "required": [
                                "flight_number",
                                "date"
                            ]
                        }
                    },
                    "passengers": {
                        "type": "array",
                        "description": "Every passenger of the reservation.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "first_name": {
                                    "type": "string",
                                    "description": "Passenger's first name."
                                },
                                "last_name": {
                                    "type": "string",
                                    "description": "Passenger's last name."
                                },
                                "dob": {
                                    "type": "string",
                                    "description": "Passenger's date of birth, 'YYYY-MM-DD'."
                                }
                            },
                            "required": [
                                "first_name",
                                "last_name",
                                "dob"
                            ]
                        }
                    },
                    "payment_methods": {
                        "type": "array",
                        "description": "How the total is paid: payment methods from the user's profile and the amount charged to each.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "payment_id": {
                                    "type": "string",
                                    "description": "Id of a payment method in the user's profile, e.g. 'credit_card_1234567'."
                                },
                                "amount": {
                                    "type": "integer",
                                    "description": "Amount in dollars charged to this payment method."
                                }
                            },
                            "required": [
                                "payment_id",
                                "amount"
                            ]
                        }
                    },
                    "total_baggages": {
                        "type": "integer",
                        "description": "Total number of checked bags on the reservation."
                    },
                    "nonfree_baggages": {
                        "type": "integer",
                        "description": "How many of those bags are paid ($50 each)."
                    },
                    "insurance": {
                        "type": "string",
                        "enum": [
                            "yes",
                            "no"
                        ],
                        "description": "'yes' to buy travel insurance ($30 per passenger), else 'no'."
                    }
                },
                "required": [
                    "user_id",
                    "origin",
                    "destination",
                    "flight_type",
                    "cabin",
                    "flights",
                    "passengers",
                    "payment_methods",
                    "total_baggages",
                    "nonfree_baggages",
                    "insurance"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "calculate",
            "description": "Evaluate an arithmetic expression with numbers, + - * /, parentheses and spaces; the result is rounded to 2 decimals.",
            "parameters": {
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "description": "The expression, e.g. '(120 + 95) * 2'."
                    }
                },
                "required": [
                    "expression"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "cancel_reservation",
            "description": "Cancel a whole reservation and refund its payments to the methods they came from.",
            "parameters": {
                "type": "object",
                "properties": {
                    "reservation_id": {
                        "type": "string",
                        "description": "Reservation id, e.g. 'Q7TR2K'."
                    }
                },
                "required": [
                    "reservation_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_reservation_details",
            "description": "Look up a reservation: flights, passengers, cabin, payments, bags, insurance and when it was booked.",
            "parameters": {
                "type": "object",
                "properties": {
                    "reservation_id": {
                        "type": "string",
                        "description": "Reservation id, e.g. 'Q7TR2K'."
                    }
                },
                "required": [
                    "reservation_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_user_details",
            "description": "Look up a user's profile: name, membership, saved passengers, payment methods and reservation ids.",
            "parameters": {
                "type": "object",
                "properties": {
                    "user_id": {
                        "type": "string",
                        "description": "User id, e.g. 'ava_kim_1234'."
                    }
                },
                "required": [
                    "user_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "list_all_airports",
            "description": "List the airports served, as IATA code and city.",
            "parameters": {
                "type": "object",
                "properties": {},
                "required": []
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "search_direct_flight",
            "description": "Find direct flights between two airports on a date that are open for booking, with seats left and prices per cabin.",
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {
                        "type": "string",
                        "description": "IATA code of the departure airport, e.g. 'JFK'."
                    },
                    "destination": {
                        "type": "string",
                        "description": "IATA code of the arrival airport, e.g. 'SEA'."
                    },
                    "date": {
                        "type": "string",
                        "description": "Travel date, 'YYYY-MM-DD'."
                    }
                },
                "required": [
                    "origin",
                    "destination",
                    "date"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "search_onestop_flight",
            "description": "Find itineraries with one connection between two airports starting on a date; each result is a pair of flights.",
            "parameters": {
                "type": "object",
                "properties": {
                    "origin": {
                        "type": "string",
                        "description": "IATA code of the departure airport, e.g. 'JFK'."
                    },
                    "destination": {
                        "type": "string",
                        "description": "IATA code of the final arrival airport, e.g. 'SEA'."
                    },
                    "date": {
                        "type": "string",
                        "description": "Date of the first flight, 'YYYY-MM-DD'."
                    }
                },
                "required": [
                    "origin",
                    "destination",
                    "date"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "send_certificate",
            "description": "Add a travel certificate of the given amount to a user's profile. Only when the policy allows compensation.",
            "parameters": {
                "type": "object",
                "properties": {
                    "user_id": {
                        "type": "string",
                        "description": "User id, e.g. 'ava_kim_1234'."
                    },
                    "amount": {
                        "type": "integer",
                        "description": "Certificate value in dollars."
                    }
                },
                "required": [
                    "user_id",
                    "amount"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "transfer_to_human_agents",
            "description": "Hand the conversation over to a human agent, with a summary of the user's issue. Only when the user asks for one or the request cannot be handled with these tools.",
            "parameters": {
                "type": "object",
                "properties": {
                    "summary": {
                        "type": "string",
                        "description": "Short summary of the user's issue."
                    }
                },
                "required": [
                    "summary"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "update_reservation_baggages",
            "description": "Set the checked bags of a reservation. Bags can only be added; each additional non-free bag costs $50, charged to the given payment method.",
            "parameters": {
                "type": "object",
                "properties": {
                    "reservation_id": {
                        "type": "string",
                        "description": "Reservation id, e.g. 'Q7TR2K'."
                    },
                    "total_baggages": {
                        "type": "integer",
                        "description": "New total number of checked bags."
                    },
                    "nonfree_baggages": {
                        "type": "integer",
                        "description": "New number of paid bags among them."
                    },
                    "payment_id": {
                        "type": "string",
                        "description": "Id of a payment method in the user's profile (credit card or gift card), e.g. 'credit_card_1234567'."
                    }
                },
                "required": [
                    "reservation_id",
                    "total_baggages",
                    "nonfree_baggages",
                    "payment_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "update_reservation_flights",
            "description": "Replace the flights (and possibly the cabin) of a reservation. List every segment of the new itinerary, kept ones included; the fare difference is charged or refunded to the payment method.",
            "parameters": {
                "type": "object",
                "properties": {
                    "reservation_id": {
                        "type": "string",
                        "description": "Reservation id, e.g. 'Q7TR2K'."
                    },
                    "cabin": {
                        "type": "string",
                        "enum": [
                            "business",
                            "economy",
                            "basic_economy"
                        ],
                        "description": "Cabin class: 'basic_economy', 'economy' or 'business'."
                    },
                    "flights": {
                        "type": "array",
                        "description": "Every flight segment of the updated reservation, in order.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "flight_number": {
                                    "type": "string",
                                    "description": "Flight number, e.g. 'HAT101'."
                                },
                                "date": {
                                    "type": "string",
                                    "description": "Date of that flight, 'YYYY-MM-DD'."
                                }
                            },
                            "required": [
                                "flight_number",
                                "date"
                            ]
                        }
                    },
                    "payment_id": {
                        "type": "string",
                        "description": "Id of a payment method in the user's profile (credit card or gift card), e.g. 'credit_card_1234567'."
                    }
                },
                "required": [
                    "reservation_id",
                    "cabin",
                    "flights",
                    "payment_id"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "update_reservation_passengers",
            "description": "Replace the passenger details of a reservation; the number of passengers cannot change.",
            "parameters": {
                "type": "object",
                "properties": {
                    "reservation_id": {
                        "type": "string",
                        "description": "Reservation id, e.g. 'Q7TR2K'."
                    },
                    "passengers": {
                        "type": "array",
                        "description": "Every passenger of the reservation.",
                        "items": {
                            "type": "object",
                            "properties": {
                                "first_name": {
                                    "type": "string",
                                    "description": "Passenger's first name."
                                },
                                "last_name": {
                                    "type": "string",
                                    "description": "Passenger's last name."
                                },
                                "dob": {
                                    "type": "string",
                                    "description": "Passenger's date of birth, 'YYYY-MM-DD'."
                                }
                            },
                            "required": [
                                "first_name",
                                "last_name",
                                "dob"
                            ]
                        }
                    }
                },
                "required": [
                    "reservation_id",
                    "passengers"
                ]
            }
        }
    },
    {
        "type": "function",
        "function": {
            "name": "get_flight_status",
            "description": "Status of a flight on a date (available, on time, delayed, flying, landed or cancelled).",
            "parameters": {
                "type": "object",
                "properties": {
                    "flight_number": {
                        "type": "string",
                        "description": "Flight number, e.g. 'HAT101'."
                    },
                    "date": {
                        "type": "string",
                        "description": "Date of the flight, 'YYYY-MM-DD'."
                    }
                },
                "required": [
                    "flight_number",
                    "date"
                ]
            }
        }
    }
]
"""
)


class ToolError(Exception):
    """A tool call the environment refuses; its message is sent back to the agent."""


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


_ARITHMETIC_CHARS = frozenset("0123456789+-*/(). ")
_OPERATORS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _arithmetic(node: ast.AST) -> float:
    """Evaluate a parsed + - * / expression; any other construct is refused."""
    if isinstance(node, ast.Expression):
        return _arithmetic(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _arithmetic(node.operand)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](
            _arithmetic(node.left), _arithmetic(node.right)
        )
    raise ToolError(
        "the expression may only combine numbers with + - * / and parentheses"
    )


def calculate(state: State, expression: str) -> str:
    """Evaluate an arithmetic expression, rounded to 2 decimals (no eval: ast only)."""
    if not expression.strip() or not set(expression) <= _ARITHMETIC_CHARS:
        raise ToolError(
            "the expression may contain only numbers, + - * /, parentheses and spaces"
        )
    try:
        value = _arithmetic(ast.parse(expression, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        raise ToolError(f"cannot evaluate the expression '{expression[:60]}'") from None
    if not math.isfinite(value):
        raise ToolError("the result is not a finite number")
    return str(round(value, 2))


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


_FUNCTIONS: dict[str, dict[str, Any]] = {
    schema["function"]["name"]: schema["function"] for schema in TOOL_SCHEMAS
}

# JSON-schema types of tool parameters. Checked by hand because the package
# depends on gymnasium only; the schemas use just these keywords.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _has_type(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(value, _JSON_TYPES[kind])


def check_value(value: Any, schema: dict[str, Any], path: str) -> None:
    """Raise `ToolError` naming `path` when `value` does not fit `schema`."""
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_has_type(value, k) for k in kinds):
            raise ToolError(
                f"argument '{path}' must be of type {' or '.join(kinds)}, "
                f"got {type(value).__name__}"
            )
    if "enum" in schema and value not in schema["enum"]:
        raise ToolError(f"argument '{path}' must be one of {schema['enum']}")
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            check_value(item, schema["items"], f"{path}[{index}]")
    if isinstance(value, dict) and "properties" in schema:
        check_object(value, schema, path)


def check_object(value: dict[str, Any], schema: dict[str, Any], path: str) -> None:
    """Check required, unknown and typed fields of a JSON object argument."""
    properties = schema.get("properties", {})
    prefix = f"{path}." if path else ""
    missing = [key for key in schema.get("required", []) if key not in value]
    if missing:
        raise ToolError(f"missing required argument(s): {prefix}{', '.join(missing)}")
    unknown = [key for key in value if key not in properties]
    if unknown:
        raise ToolError(
            f"unknown argument(s) {', '.join(prefix + key for key in unknown)}; "
            f"allowed: {', '.join(properties) or 'none'}"
        )
    for key, item in value.items():
        check_value(item, properties[key], prefix + key)


def call_tool(state: State, name: str, arguments: Any) -> Any:
    """Check a tool call against its schema, run it on `state`, return its raw result.

    `arguments` is the call's JSON string (as in an OpenAI tool call) or a dict.
    Raises `ToolError` for an unknown tool, bad arguments or a refused action.
    """
    function = _FUNCTIONS.get(name)
    if function is None:
        raise ToolError(f"unknown tool '{name}'; available: {', '.join(_FUNCTIONS)}")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise ToolError(f"arguments are not valid JSON: {exc.msg}") from None
    if not isinstance(arguments, dict):
        raise ToolError("arguments must be a JSON object")
    check_object(arguments, function["parameters"], "")
    return IMPLEMENTATIONS[name](state, **arguments)


def execute(state: State, name: str, arguments: Any) -> str:
    """Run one tool call and return the tool message content: text as is, else JSON."""
    result = call_tool(state, name, arguments)
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=True)
