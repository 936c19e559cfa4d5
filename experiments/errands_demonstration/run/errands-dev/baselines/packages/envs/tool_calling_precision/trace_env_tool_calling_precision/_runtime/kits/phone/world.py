"""World builders of the Phone (ToolSandbox) kit: seeded synthetic states shaped like ToolSandbox (apple/ToolSandbox)."""

from __future__ import annotations

import datetime
import random
from typing import Any

from ...toolkit import State
from . import TOOLKIT

FIRST_NAMES = (
    "Tomas", "Fredrik", "John", "Homer", "Alice", "Priya", "Mateo", "Yuki", "Amara",
    "Lars", "Sofia", "Kwame", "Elena", "Omar", "Mei", "Diego", "Hannah", "Ravi",
)  # fmt: skip
LAST_NAMES = (
    "Haake", "Thordendal", "Petrucci", "Simpson", "Nguyen", "Okafor", "Rossi",
    "Tanaka", "Kowalski", "Silva", "Fischer", "Haddad", "Lindqvist", "Mensah",
)  # fmt: skip
RELATIONSHIPS = ("friend", "boss", "sister", "brother", "coworker", "mother", "father")
WEEKDAYS = (
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
)  # fmt: skip


def phone_number(rng: random.Random) -> str:
    """A US number in international format."""
    return f"+1{rng.randint(200, 989)}{rng.randint(0, 9999999):07d}"


def new_phone(rng: random.Random, contacts: int) -> State:
    """A phone with every service on, the user's own contact and `contacts` others."""
    start = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
    now = start + datetime.timedelta(minutes=rng.randint(0, 3 * 365 * 24 * 60))
    state: State = {
        "settings": {
            "device_id": f"device-{rng.randint(0, 10**8):08d}",
            "cellular": True,
            "wifi": True,
            "location_service": True,
            "low_battery_mode": False,
            "latitude": round(rng.uniform(-60, 60), 6),
            "longitude": round(rng.uniform(-170, 170), 6),
        },
        "contacts": {},
        "messages": {},
        "reminders": {},
        "clock": {"current_timestamp": now.timestamp()},
    }
    names = rng.sample(
        [f"{f} {last}" for f in FIRST_NAMES for last in LAST_NAMES], contacts + 1
    )
    TOOLKIT.run(
        state,
        "add_contact",
        name=names[0],
        phone_number=phone_number(rng),
        is_self=True,
    )
    for name in names[1:]:
        TOOLKIT.run(
            state,
            "add_contact",
            name=name,
            phone_number=phone_number(rng),
            relationship=rng.choice(RELATIONSHIPS),
        )
    return state


def contact_named(state: State, name: str) -> dict[str, Any]:
    """The contact row with exactly this name."""
    return next(row for row in state["contacts"].values() if row["name"] == name)


def other_contacts(state: State) -> list[dict[str, Any]]:
    """Every contact but the user's own."""
    return [row for row in state["contacts"].values() if not row["is_self"]]


def moment(timestamp: float) -> datetime.datetime:
    """A POSIX time as an aware UTC datetime."""
    return datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)


def spoken(when: datetime.datetime) -> str:
    """How the agent states a date and time: 'Friday 2025-03-14 at 09:00'."""
    return f"{WEEKDAYS[when.weekday()]} {when:%Y-%m-%d} at {when:%H:%M}"
