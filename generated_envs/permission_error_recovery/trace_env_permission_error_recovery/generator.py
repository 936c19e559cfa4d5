"""Task generator of the `permission_error_recovery` environment: Permission error recovery.

When a phone tool fails because a setting is off (cellular service, location
service, or low battery mode blocking them), read the error, enable exactly
what is needed and retry instead of giving up.

Every seed builds one task deterministically on a fresh synthetic
Phone (ToolSandbox) world (Permission error recovery family): the initial state, the
user's request, the gold assistant turns, the facts the agent must tell the
user, and the turns of an agent that lacks the capability
(gives up after the tool's error and tells the user it cannot be done).
"""

from __future__ import annotations

import copy
import datetime
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .tools import State, ToolError, call_tool, execute

ARCHETYPE = "permission_error_recovery"
KIT = "phone"
MAX_TURNS = 30
DIFFICULTY_RANGES: dict[str, tuple[int, int]] = {
    "blockers": (1, 2),
    "contacts": (2, 8),
}
DEFAULT_DIFFICULTY: dict[str, int] = {
    "blockers": 1,
    "contacts": 4,
}


@dataclass(frozen=True)
class ToolCall:
    """One tool call: the tool's name and its JSON arguments."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Turn:
    """One assistant message of a scripted policy: tool calls, or a text reply."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class Task:
    """A seeded task: what the user asks, the world, and the gold outcome."""

    task_id: str
    instruction: str
    initial_state: State
    gold_turns: tuple[Turn, ...]
    required_facts: tuple[str, ...]
    lacking_turns: tuple[Turn, ...]
    user_replies: tuple[str, ...] = ()

    @property
    def gold_actions(self) -> tuple[ToolCall, ...]:
        """The gold tool calls in order; replayed, they give the gold final state."""
        return tuple(call for turn in self.gold_turns for call in turn.tool_calls)


def call(tool: str, /, **arguments: Any) -> Turn:
    """A turn with a single tool call."""
    return Turn(tool_calls=(ToolCall(tool, arguments),))


def say(content: str) -> Turn:
    """A turn that only talks to the user."""
    return Turn(content=content)


def run(state: State, tool: str, /, **arguments: Any) -> Any:
    """Run a tool on `state` while building a task; return a copy of its result."""
    return copy.deepcopy(call_tool(state, tool, arguments))


def fails(state: State, tool: str, /, **arguments: Any) -> bool:
    """True when the tool refuses the call (used to check a built task)."""
    try:
        execute(copy.deepcopy(state), tool, arguments)
    except ToolError:
        return True
    return False


def money(amount: float) -> str:
    """An amount as the agent should state it: no cents when whole."""
    return f"{amount:.0f}" if float(amount).is_integer() else f"{amount:.2f}"


def resolve_difficulty(overrides: Mapping[str, int] | None = None) -> dict[str, int]:
    """Defaults updated with `overrides`; unknown knobs and out-of-range values fail."""
    knobs = dict(DEFAULT_DIFFICULTY)
    for key, value in (overrides or {}).items():
        if key not in DIFFICULTY_RANGES:
            raise ValueError(
                f"unknown difficulty knob '{key}'; known: {', '.join(DIFFICULTY_RANGES)}"
            )
        low, high = DIFFICULTY_RANGES[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not low <= value <= high
        ):
            raise ValueError(
                f"difficulty '{key}' must be an integer in [{low}, {high}]"
            )
        knobs[key] = value
    return knobs


# World: a synthetic Phone (ToolSandbox) state shaped like ToolSandbox (apple/ToolSandbox).

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
    run(
        state,
        "add_contact",
        name=names[0],
        phone_number=phone_number(rng),
        is_self=True,
    )
    for name in names[1:]:
        run(
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


# Task family: Permission error recovery on Phone (ToolSandbox).

MESSAGES = (
    "Running 10 minutes late, start without me",
    "Can you pick up milk on your way home?",
    "The meeting moved to Thursday at 3pm",
    "Happy birthday! Dinner is on me this week",
    "I left the keys under the blue flowerpot",
    "Call me when you land",
    "The tickets for Saturday are booked",
)
SETTERS = {
    "cellular": "set_cellular_service_status",
    "location_service": "set_location_service_status",
}
ERRANDS = (
    "buy printer ink",
    "return the library books",
    "pick up the dry cleaning",
    "check the tire pressure",
    "drop off the package",
)


def _recover(service: str, low_battery: bool) -> list[Turn]:
    """Gold turns after a tool failed because `service` is off."""
    setter = SETTERS[service]
    turns = [call(setter, on=True)]
    if low_battery:
        turns += [call("set_low_battery_mode_status", on=False), call(setter, on=True)]
    return turns


def _give_up(rng: random.Random, failing: Turn, reason: str) -> list[Turn]:
    """The lacking agent either stops at once or retries the same call blindly."""
    retries = [failing] * rng.randint(0, 2)
    return [*retries, say(f"Sorry, I can't do that right now: {reason}.")]


def build_task(rng: random.Random, difficulty: Mapping[str, int], task_id: str) -> Task:
    """Text a contact with cellular off, or a location reminder with location off."""
    state = new_phone(rng, difficulty["contacts"])
    low_battery = difficulty["blockers"] >= 2
    if rng.random() < 0.5:
        service = "cellular"
        contact = rng.choice(other_contacts(state))
        content = f"{rng.choice(MESSAGES)} ({rng.randint(2, 99)})"
        instruction = f'Send a message to {contact["name"]} saying: "{content}"'
        send = call(
            "send_message_with_phone_number",
            phone_number=contact["phone_number"],
            content=content,
        )
        lookup = [call("search_contacts", name=contact["name"]), send]
        finish = [send, say(f"Done: your message to {contact['name']} was sent.")]
        reason = "cellular service is off"
    else:
        service = "location_service"
        errand = rng.choice(ERRANDS)
        when = moment(state["clock"]["current_timestamp"]) + datetime.timedelta(
            days=rng.randint(1, 20)
        )
        when = when.replace(hour=rng.randint(7, 20), minute=rng.choice((0, 15, 30, 45)))
        instruction = (
            f"Remind me to {errand} here, at my current location, on "
            f"{when:%Y-%m-%d} at {when:%H:%M} (UTC)."
        )
        settings = state["settings"]
        lookup = [call("get_current_location")]
        finish = [
            call("get_current_location"),
            call(
                "datetime_info_to_timestamp",
                year=when.year,
                month=when.month,
                day=when.day,
                hour=when.hour,
                minute=when.minute,
                second=0,
            ),
            call(
                "add_reminder",
                content=errand,
                reminder_timestamp=when.timestamp(),
                latitude=settings["latitude"],
                longitude=settings["longitude"],
            ),
            say(f"Done: I will remind you to {errand} here on {spoken(when)}."),
        ]
        reason = "location service is off"
    state["settings"][service] = False
    if low_battery:
        run(state, "set_low_battery_mode_status", on=True)
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=(*lookup, *_recover(service, low_battery), *finish),
        required_facts=(),
        lacking_turns=(*lookup, *_give_up(rng, lookup[-1], reason)),
    )


def generate_task(seed: int, difficulty: Mapping[str, int] | None = None) -> Task:
    """Build the task of `seed`; the same seed and difficulty give the same task."""
    knobs = resolve_difficulty(difficulty)
    rng = random.Random(f"{ARCHETYPE}/{KIT}/{seed}")
    return build_task(rng, knobs, task_id=f"permission_error_recovery-{seed}")
