"""Task generator of the `date_time_recovery` environment: Date and time reasoning with tools.

Resolve relative dates and times such as 'this coming Friday at 9:00', 'in 3
days' or '5 hours from now' with the clock and date tools instead of mental
arithmetic, and tell the user the resolved date.

Every seed builds one task deterministically on a fresh synthetic
Phone (ToolSandbox) world (Date and time reasoning with tools family): the initial state, the
user's request, the gold assistant turns, the facts the agent must tell the
user, and the turns of an agent that lacks the capability
(computes the relative date in its head and gets it wrong (weekday numbering, time of day, or the day rollover)).
"""

from __future__ import annotations

import copy
import datetime
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .tools import State, ToolError, call_tool, execute

ARCHETYPE = "date_time_recovery"
KIT = "phone"
MAX_TURNS = 30
DIFFICULTY_RANGES: dict[str, tuple[int, int]] = {
    "horizon_days": (2, 30),
    "expression_kinds": (1, 3),
}
DEFAULT_DIFFICULTY: dict[str, int] = {
    "horizon_days": 10,
    "expression_kinds": 3,
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


# Task family: Date and time reasoning with tools on Phone (ToolSandbox).

TOPICS = (
    "call the dentist",
    "water the plants",
    "pay the electricity bill",
    "book a table for dinner",
    "renew the passport",
    "send the quarterly report",
    "take the cake out of the oven",
    "join the team call",
)
KINDS = ("in_days", "weekday", "hours")


def _at(day: datetime.datetime, hour: int, minute: int) -> datetime.datetime:
    return day.replace(hour=hour, minute=minute, second=0, microsecond=0)


def _resolve(
    rng: random.Random, kind: str, now: datetime.datetime, horizon: int
) -> tuple[str, datetime.datetime, datetime.datetime, list[Turn]]:
    """(phrase, gold moment, the lacking agent's moment, gold tool turns before adding)."""
    stamp = now.timestamp()
    clock = [
        call("get_current_timestamp"),
        call("timestamp_to_datetime_info", timestamp=stamp),
    ]
    if kind == "hours":
        hours = rng.randint(24 - now.hour, 23)
        target = now + datetime.timedelta(hours=hours)
        # Mental arithmetic that forgets the day rollover: same date, later hour.
        wrong = target - datetime.timedelta(days=1)
        return (
            f"{hours} hours from now",
            target,
            wrong,
            [*clock[:1], call("shift_timestamp", timestamp=stamp, hours=hours)],
        )
    hour, minute = rng.randint(6, 21), rng.choice((0, 10, 15, 30, 45))
    if (hour, minute) == (now.hour, now.minute):
        hour += 1
    if kind == "in_days":
        days = rng.randint(2, horizon)
        phrase = f"in {days} days at {hour:02d}:{minute:02d}"
        # Adds the days to now and keeps the current time of day.
        wrong = now + datetime.timedelta(days=days)
    else:
        weekday = rng.choice([d for d in range(7) if d != now.weekday()])
        days = (weekday - now.weekday()) % 7
        phrase = f"this coming {WEEKDAYS[weekday]} at {hour:02d}:{minute:02d}"
        # Numbers weekdays from Sunday = 0 while Python's weekday() starts Monday = 0.
        wrong_days = ((weekday + 1) % 7 - now.weekday()) % 7 or 7
        wrong = _at(now + datetime.timedelta(days=wrong_days), hour, minute)
    target = _at(now + datetime.timedelta(days=days), hour, minute)
    shifted = (now + datetime.timedelta(days=days)).timestamp()
    turns = [
        *clock,
        call("shift_timestamp", timestamp=stamp, days=days),
        call("timestamp_to_datetime_info", timestamp=shifted),
        call(
            "datetime_info_to_timestamp",
            year=target.year,
            month=target.month,
            day=target.day,
            hour=hour,
            minute=minute,
            second=0,
        ),
    ]
    return phrase, target, wrong, turns


def build_task(rng: random.Random, difficulty: Mapping[str, int], task_id: str) -> Task:
    """A reminder at a relative time; the agent must resolve it with the date tools."""
    state = new_phone(rng, 3)
    kind = KINDS[rng.randrange(difficulty["expression_kinds"])]
    if kind == "hours":
        late = moment(state["clock"]["current_timestamp"]).replace(
            hour=rng.randint(13, 23)
        )
        state["clock"]["current_timestamp"] = late.timestamp()
    now = moment(state["clock"]["current_timestamp"])
    phrase, target, wrong, resolve = _resolve(
        rng, kind, now, difficulty["horizon_days"]
    )
    topic = rng.choice(TOPICS)

    def remind(when: datetime.datetime) -> list[Turn]:
        return [
            call("add_reminder", content=topic, reminder_timestamp=when.timestamp()),
            say(f"Done: I will remind you to {topic} on {spoken(when)} (UTC)."),
        ]

    return Task(
        task_id=task_id,
        instruction=f"Remind me to {topic} {phrase}, and tell me the date it is set for.",
        initial_state=state,
        gold_turns=(*resolve, *remind(target)),
        required_facts=(f"{target:%Y-%m-%d}", f"{target:%H:%M}"),
        lacking_turns=(call("get_current_timestamp"), *remind(wrong)),
    )


def generate_task(seed: int, difficulty: Mapping[str, int] | None = None) -> Task:
    """Build the task of `seed`; the same seed and difficulty give the same task."""
    knobs = resolve_difficulty(difficulty)
    rng = random.Random(f"{ARCHETYPE}/{KIT}/{seed}")
    return build_task(rng, knobs, task_id=f"date_time_recovery-{seed}")
