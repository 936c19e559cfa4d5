"""Date and time reasoning with tools: the `date_time_recovery` capability, on
the Phone (ToolSandbox) tools.

Resolving relative dates and times ('next Friday at 9', 'in 3 days', '5
hours from now') with the clock and date tools instead of guessing.

Each seed builds one task (date and time reasoning with tools family): the
user asks for a reminder at a relative date and time and to be told the date
it was set for, or (the holiday family, the paper's own example) how many
days are left until a holiday, or to text a contact a message holding a
relative date (so the capability is not learnt as "every request is a
reminder"). An agent without the capability computes the relative date in
its head and gets it wrong (weekday numbering, time of day, the day
rollover, or counting today as day one), or takes the current year from its
training data instead of the device clock.

Reward (`_runtime/verifier.py`): the gold final state is the initial state
with the gold tool calls replayed; reward mode `partial` pays the mean of
the state's progress (the share of the fields the agent or the gold policy
changed that end as gold has them) and of each required fact's check; 1.0
exactly when the episode succeeds. Knob values come from capability.json
(generation.difficulty).
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Mapping

from ._runtime import Knob, Task, Turn, call, say
from ._runtime.kits import phone
from ._runtime.kits.phone.utilities import find_holiday
from ._runtime.kits.phone.world import (
    WEEKDAYS,
    moment,
    new_phone,
    other_contacts,
    spoken,
)

TOOLKIT = phone.TOOLKIT
# fmt: off
KNOBS = (
    Knob("horizon_days", 10, 2, 30, "how many days ahead a relative date may be"),
    Knob("expression_kinds", 3, 1, 4,
         "kinds of relative expression drawn (4 adds days until a holiday)"),
    Knob("share_messages", 50, 0, 100,
         "percent of tasks that text a contact a relative date instead of a reminder"),
)
TOPICS = (
    "call the dentist", "water the plants", "pay the electricity bill",
    "book a table for dinner", "renew the passport", "send the quarterly report",
    "take the cake out of the oven", "join the team call",
)
KINDS = ("in_days", "weekday", "hours", "holiday")
# Messages that carry a date; DATE is what the agent resolves and writes in.
NOTES = (
    "Dinner at our place on DATE, 7pm", "The plumber is coming on DATE",
    "Your parcel should arrive on DATE", "The team offsite is on DATE",
    "I am back from the trip on DATE",
)
# Holidays as users name them; each matches one name `search_holiday` knows.
HOLIDAYS = (
    "Christmas", "Thanksgiving", "Independence Day", "New Year's Day", "Labor Day",
    "Memorial Day", "Veterans Day", "Juneteenth",
)
# fmt: on
STALE_YEAR = 2024  # the year an agent without the clock takes from its training data


def _at(day: datetime.datetime, hour: int, minute: int) -> datetime.datetime:
    return day.replace(hour=hour, minute=minute, second=0, microsecond=0)


def _clock(now: datetime.datetime) -> list[Turn]:
    """Gold turns that read the device clock and the date it gives."""
    return [
        call("get_current_timestamp"),
        call("timestamp_to_datetime_info", timestamp=now.timestamp()),
    ]


def _day(
    rng: random.Random, kind: str, now: datetime.datetime, horizon: int
) -> tuple[str, int, int]:
    """(phrase, days ahead, days ahead as a lacking agent counts them) of a relative day."""
    if kind == "in_days":
        days = rng.randint(2, horizon)
        return f"{days} days from today", days, days - 1  # counts today as day one
    weekday = rng.choice([d for d in range(7) if d != now.weekday()])
    # Numbers weekdays from Sunday = 0 while Python's weekday() starts Monday = 0.
    wrong = ((weekday + 1) % 7 - now.weekday()) % 7 or 7
    return f"this coming {WEEKDAYS[weekday]}", (weekday - now.weekday()) % 7, wrong


def _shift(now: datetime.datetime, days: int) -> list[Turn]:
    """Gold turns that move the clock's moment `days` ahead and read its date."""
    shifted = now + datetime.timedelta(days=days)
    return [
        call("shift_timestamp", timestamp=now.timestamp(), days=days),
        call("timestamp_to_datetime_info", timestamp=shifted.timestamp()),
    ]


def _resolve(
    rng: random.Random, kind: str, now: datetime.datetime, horizon: int
) -> tuple[str, datetime.datetime, datetime.datetime, list[Turn]]:
    """(phrase, gold moment, the lacking agent's moment, gold tool turns before adding)."""
    if kind == "hours":
        hours = rng.randint(24 - now.hour, 23)
        target = now + datetime.timedelta(hours=hours)
        # Mental arithmetic that forgets the day rollover: same date, later hour.
        wrong = target - datetime.timedelta(days=1)
        turns = [
            call("get_current_timestamp"),
            call("shift_timestamp", timestamp=now.timestamp(), hours=hours),
            # The date and time it says come from the tools, not from mental
            # arithmetic on an epoch (which the demonstrations could not teach).
            call("timestamp_to_datetime_info", timestamp=target.timestamp()),
        ]
        return f"{hours} hours from now", target, wrong, turns
    hour, minute = rng.randint(6, 21), rng.choice((0, 10, 15, 30, 45))
    if (hour, minute) == (now.hour, now.minute):
        hour += 1
    phrase, days, wrong_days = _day(rng, kind, now, horizon)
    target = _at(now + datetime.timedelta(days=days), hour, minute)
    if kind == "in_days":  # adds the days to now and keeps the current time of day
        wrong = now + datetime.timedelta(days=days)
    else:
        wrong = _at(now + datetime.timedelta(days=wrong_days), hour, minute)
    at = dict(year=target.year, month=target.month, day=target.day, hour=hour)
    turns = [
        *_clock(now),
        *_shift(now, days),
        call("datetime_info_to_timestamp", **at, minute=minute, second=0),
    ]
    return f"{phrase} at {hour:02d}:{minute:02d}", target, wrong, turns


def _holiday_task(rng: random.Random, state: dict, task_id: str) -> Task:
    """A reminder on a holiday, and how many days away it is: the year must come
    from the device clock, not from memory."""
    now = moment(state["clock"]["current_timestamp"])
    found = {name: find_holiday(name, now.year) for name in HOLIDAYS}
    dates = {n: d for n, d in found.items() if d is not None and d != now.date()}
    name = rng.choice(sorted(dates))
    hour, minute = rng.randint(7, 20), rng.choice((0, 15, 30, 45))
    topic = rng.choice(TOPICS)
    search = [call("search_holiday", holiday_name=name, year=now.year)]
    date = dates[name]
    if date < now.date():  # passed this year: next year's
        date = find_holiday(name, now.year + 1)
        search.append(call("search_holiday", holiday_name=name, year=now.year + 1))
    assert date is not None
    midnight = datetime.datetime.combine(date, datetime.time(), datetime.timezone.utc)
    target = _at(midnight, hour, minute)
    stale = find_holiday(name, STALE_YEAR)
    assert stale is not None
    wrong = _at(datetime.datetime.combine(stale, target.timetz()), hour, minute)
    days = (date - now.date()).days

    def remind(when: datetime.datetime) -> list[Turn]:
        count = (when.date() - now.date()).days
        return [
            call("add_reminder", content=topic, reminder_timestamp=when.timestamp()),
            say(
                f"Done: I will remind you to {topic} on {spoken(when)} (UTC), "
                f"{count} day{'' if abs(count) == 1 else 's'} from today."
            ),
        ]

    return Task(
        task_id=task_id,
        instruction=(
            f"Remind me to {topic} on {name} at {hour:02d}:{minute:02d}, and tell me "
            "the date and how many days from today that is."
        ),
        initial_state=state,
        gold_turns=(
            *_clock(now),
            *search,
            call(
                "timestamp_diff",
                timestamp_0=now.timestamp(),
                timestamp_1=midnight.timestamp(),
            ),
            *remind(target),
        ),
        required_facts=(f"{target:%Y-%m-%d}", f"{days} day"),
        lacking_turns=(
            call("search_holiday", holiday_name=name, year=STALE_YEAR),
            *remind(wrong),
        ),
    )


def _message_task(
    rng: random.Random, state: dict, task_id: str, knobs: Mapping[str, int]
) -> Task:
    """A message to a contact holding a relative date, written as YYYY-MM-DD."""
    now = moment(state["clock"]["current_timestamp"])
    contact = rng.choice(other_contacts(state))
    kind = KINDS[rng.randrange(min(knobs["expression_kinds"], 2))]
    phrase, days, wrong_days = _day(rng, kind, now, knobs["horizon_days"])
    note = rng.choice(NOTES)

    def send(days: int) -> list[Turn]:
        day = now + datetime.timedelta(days=days)
        return [
            call("search_contacts", name=contact["name"]),
            call(
                "send_message_with_phone_number",
                phone_number=contact["phone_number"],
                content=note.replace("DATE", f"{day:%Y-%m-%d}"),
            ),
            say(f"Done: your message to {contact['name']} was sent."),
        ]

    return Task(
        task_id=task_id,
        instruction=(
            f'Send a message to {contact["name"]} saying: "{note}", with DATE the '
            f"date {phrase}, written as YYYY-MM-DD."
        ),
        initial_state=state,
        gold_turns=(*_clock(now), *_shift(now, days), *send(days)),
        required_facts=(),
        lacking_turns=(call("get_current_timestamp"), *send(wrong_days)),
    )


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: a reminder at a relative time (or a holiday), or a message
    holding a relative date; either way the date tools must resolve it."""
    state = new_phone(rng, 3)
    if rng.random() * 100 < knobs["share_messages"]:
        return _message_task(rng, state, task_id, knobs)
    kind = KINDS[rng.randrange(knobs["expression_kinds"])]
    if kind == "holiday":
        return _holiday_task(rng, state, task_id)
    now = moment(state["clock"]["current_timestamp"])
    if kind == "hours":  # late in the day, so that the hours cross midnight
        now = now.replace(hour=rng.randint(13, 23))
        state["clock"]["current_timestamp"] = now.timestamp()
    phrase, target, wrong, resolve = _resolve(rng, kind, now, knobs["horizon_days"])
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
