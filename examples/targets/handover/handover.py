"""Handover: a second phone-interface target, for judging a finished run elsewhere.

`trace eval` asks whether a run's adapters help on a target they were not made
from. This target shows the agent a subset of the phone kit's tools, with the
kit's code behind them, but everything else is its own: telling someone a date
the agent must work out ("the viewing is in 9 days; put the date in the
message"), a reminder pinned to where the user stands (its coordinates from the
location tool, which a setting may block), plain texts, and a date text with a
pinned reminder in one request. Its needs mix differently from the errands
target's (a relative date inside a message, a location blocker on a reminder,
low battery mode blocking both), and no request template or gold tool sequence
is an archetype module's (tests/trace_pipeline/test_errands_overlap.py). Name it as

    target: {kind: python, entry: "examples/targets/handover/handover.py:make_target", kit: phone}
"""

from __future__ import annotations

import datetime
import random
import re
import string
from typing import Any

from factory.runtime.kits.phone import TOOLKIT
from trace_pipeline.targets.contract import Target, TargetTask

TOOLS = (
    "search_contacts", "send_message_with_phone_number", "get_cellular_service_status",
    "set_cellular_service_status", "get_low_battery_mode_status",
    "set_low_battery_mode_status", "get_location_service_status",
    "set_location_service_status", "get_current_location", "add_reminder",
    "get_current_timestamp", "shift_timestamp", "timestamp_to_datetime_info",
    "datetime_info_to_timestamp",
)  # fmt: skip
POLICY = """- A date the user gives relative to today is worked out from the device clock with the date tools.
- A reminder the user wants "here" carries the coordinates the location tool reports.
- A phone setting that refuses an action is changed, and the action tried again.
- Reply to the user in one short sentence once everything is handed over."""
PEOPLE = (
    "Oskar Lindqvist", "Fatima Haddad", "Kenji Watanabe", "Bronwyn Price",
    "Mateus Carvalho", "Yelena Petrova", "Desmond Okafor", "Chiara Romano",
    "Tomasz Wrobel", "Priya Raman",
)  # fmt: skip
EVENTS = (
    "the flat viewing",
    "the school play",
    "the boiler inspection",
    "our tasting menu booking",
    "the charity run",
    "the piano tuner visit",
)
NOTES = (
    "the spare key is under the blue pot",
    "I left the charger at reception",
    "your parcel went to the neighbour",
    "the meeting room moved to floor three",
)
CHORES = (
    "collect the dry cleaning",
    "water the allotment",
    "return the library books",
    "pick up the prescription",
)
CITIES = (
    (38.7223, -9.1393),
    (59.9139, 10.7522),
    (43.6532, -79.3832),
    (-33.8688, 151.2093),
)
# by hand, not calendar.month_name, which follows the machine's locale: a task
# must read the same everywhere
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December",
)  # fmt: skip
SETTERS = {
    "cellular": "set_cellular_service_status",
    "location_service": "set_location_service_status",
}


def _phone(rng: random.Random) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A phone somewhere, its clock in 2027-2028, the user and six contacts;
    (state, [(name, number)])."""
    start = datetime.datetime(2027, 3, 1, 7, 30, tzinfo=datetime.timezone.utc)
    now = start + datetime.timedelta(minutes=rng.randint(0, 500 * 24 * 60))
    latitude, longitude = rng.choice(CITIES)
    state: dict[str, Any] = {
        "settings": {
            "device_id": "".join(rng.choices(string.hexdigits.lower(), k=12)),
            "cellular": True,
            "wifi": True,
            "location_service": True,
            "low_battery_mode": False,
            "latitude": latitude,
            "longitude": longitude,
        },
        "contacts": {},
        "messages": {},
        "reminders": {},
        "clock": {"current_timestamp": now.timestamp()},
    }
    people = []
    for index, name in enumerate(["Me", *rng.sample(PEOPLE, 6)]):
        number = f"+1{rng.randint(2000000000, 9899999999)}"
        TOOLKIT.run(
            state, "add_contact", name=name, phone_number=number, is_self=index == 0
        )
        people.append((name, number))
    return state, people[1:]


def _date_text(
    rng: random.Random, now: datetime.datetime
) -> tuple[str, str, datetime.datetime, list[dict[str, Any]]]:
    """(the event, how the user says when, the day it falls on, the date calls)."""
    days = rng.choice((3, 4, 9, 11, 14))
    said = "two weeks from today" if days == 14 else f"in {days} days"
    shifted = now + datetime.timedelta(days=days)
    calls = [
        {"name": "get_current_timestamp", "arguments": {}},
        {
            "name": "shift_timestamp",
            "arguments": {"timestamp": now.timestamp(), "days": days},
        },
        {
            "name": "timestamp_to_datetime_info",
            "arguments": {"timestamp": shifted.timestamp()},
        },
    ]
    return rng.choice(EVENTS), said, shifted, calls


def _says_date(text: str, day: datetime.datetime) -> bool:
    """Whether a message names that day, as "March 14", "14 March", "March 14th",
    "14th of March" or "2027-03-14" (whole numbers: "March 4" is not "March 14")."""
    month = MONTHS[day.month - 1].lower()
    number = rf"0?{day.day}(?:st|nd|rd|th)?"
    forms = (
        rf"\b{month} {number}\b",
        rf"\b{number} (?:of )?{month}\b",
        rf"\b{day.date().isoformat()}\b",
    )
    text = " ".join(text.lower().replace(",", " ").split())
    return any(re.search(form, text) for form in forms)


def _block(
    rng: random.Random, state: dict[str, Any], uses: set[str]
) -> list[dict[str, Any]]:
    """Turn off a service the task uses, or turn on low battery mode (which turns
    every service off); the calls that undo it."""
    blocker = rng.choice([*sorted(uses), "low_battery_mode"])
    if blocker == "low_battery_mode":
        TOOLKIT.run(state, "set_low_battery_mode_status", on=True)
        undo = [("set_low_battery_mode_status", False)]
        undo += [(SETTERS[service], True) for service in sorted(uses)]
    else:
        TOOLKIT.run(state, SETTERS[blocker], on=False)
        undo = [(SETTERS[blocker], True)]
    return [{"name": name, "arguments": {"on": on}} for name, on in undo]


def _task(
    split: str, index: int, share_blocked: int, share_numbered: int
) -> TargetTask:
    rng = random.Random(f"handover/{split}/{index}")
    state, people = _phone(rng)
    now = datetime.datetime.fromtimestamp(
        state["clock"]["current_timestamp"], tz=datetime.timezone.utc
    )
    kind = rng.choice(("note", "note", "date", "date", "pin", "date+pin"))
    texts, pins = kind != "pin", "pin" in kind
    asks: list[str] = []
    needs: list[str] = []
    hidden: list[str] = []
    expected: list[dict[str, Any]] = []
    if rng.randrange(100) < share_blocked:
        uses = {"cellular"} if texts else set()
        expected += _block(rng, state, uses | ({"location_service"} if pins else set()))
        needs.append("permission_error_recovery")
    wanted_text = wanted_pin = None
    if texts:
        name, number = rng.choice(people)
        if kind == "note":
            words = content = ask = rng.choice(NOTES)
            day = None
        else:
            words, said, day, calls = _date_text(rng, now)
            needs.append("date_time_recovery")  # the day must come from the clock
            hidden.append(f"{MONTHS[day.month - 1]} {day.day}")
            expected += calls
            content = f"{words} is on {MONTHS[day.month - 1]} {day.day}"
            ask = f"{words} is {said}, and put the date in the message"
        if share_numbered and rng.randrange(100) < share_numbered:  # 0: no draw
            asks.append(f"message {name.split()[0]} on {number}: {ask}")
        else:
            asks.append(f"message {name}: {ask}")
            hidden.append(number)
            expected.insert(0, {"name": "search_contacts", "arguments": {"name": name}})
        expected.append(
            {
                "name": "send_message_with_phone_number",
                "arguments": {"phone_number": number, "content": content},
            }
        )
        wanted_text = (number, words, day)
    if pins:
        chore = rng.choice(CHORES)
        hour, minute = rng.choice(((7, 45), (13, 0), (18, 30)))
        when = (now + datetime.timedelta(days=rng.randint(2, 30))).replace(
            hour=hour, minute=minute, second=0, microsecond=0
        )
        asks.append(
            f"pin a reminder here to {chore}, "
            f"{when.day:02d}.{when.month:02d}.{when.year} at {hour:02d}:{minute:02d}"
        )
        if "date_time_recovery" not in needs:  # its timestamp must come from the tools
            needs.append("date_time_recovery")
        latitude = state["settings"]["latitude"]
        longitude = state["settings"]["longitude"]
        hidden.append(str(latitude))
        expected += [
            {"name": "get_current_location", "arguments": {}},
            {
                "name": "datetime_info_to_timestamp",
                "arguments": {
                    "year": when.year,
                    "month": when.month,
                    "day": when.day,
                    "hour": hour,
                    "minute": minute,
                    "second": 0,
                },
            },  # fmt: skip
            {
                "name": "add_reminder",
                "arguments": {
                    "content": chore,
                    "reminder_timestamp": when.timestamp(),
                    "latitude": latitude,
                    "longitude": longitude,
                },
            },
        ]
        wanted_pin = (chore, when.timestamp(), latitude, longitude)
    if texts and pins:
        needs.append("multi_step_task_completion")
    expected.append({"content": "All handed over."})

    def check(final: dict[str, Any], messages: list[dict[str, Any]]) -> bool:
        """One message, to that number, with its note (a date text: the event and
        the day, in any words); the reminder about that chore, within a minute of
        that moment, pinned within about 10 m of where the phone is."""
        if wanted_text is not None:
            number, words, day = wanted_text
            sent = list(final["messages"].values())
            if len(sent) != 1 or sent[0]["recipient_phone_number"] != number:
                return False
            body = " ".join(sent[0]["content"].lower().split())
            if words.lower() not in body or (day and not _says_date(body, day)):
                return False
        if wanted_pin is not None:
            chore, moment, latitude, longitude = wanted_pin
            if not any(
                chore in r["content"].lower()
                and abs(r["reminder_timestamp"] - moment) <= 60
                and r["latitude"] is not None
                and r["longitude"] is not None
                and abs(r["latitude"] - latitude) <= 1e-4
                and abs(r["longitude"] - longitude) <= 1e-4
                for r in final["reminders"].values()
            ):
                return False
        return True

    opening = rng.choice(("Can you", "I need you to", "Before I forget,", "Right,"))
    return TargetTask(
        instruction=f"{opening} {'; then '.join(asks)}.",
        state=state,
        check=check,
        task_id=f"handover-{split}-{index}",
        expected_actions=tuple(expected),
        needs=tuple(needs),
        hidden=tuple(hidden),
    )


def make_target(share_blocked: int = 40, share_numbered: int = 100) -> Target:
    """The handover target; `share_blocked` is the percent of tasks a phone setting
    blocks, `share_numbered` the percent of texts whose request gives the number
    (100 by default: a contact lookup is a need no capability label names)."""
    for name, value in (
        ("share_blocked", share_blocked),
        ("share_numbered", share_numbered),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value <= 100
        ):
            raise ValueError(f"{name} must be a whole percent from 0 to 100")
    return Target(
        name="handover",
        tools=[{"type": "function", "function": TOOLKIT.function(n)} for n in TOOLS],
        functions={name: TOOLKIT.implementations[name] for name in TOOLS},
        policy=POLICY,
        task=lambda split, index: _task(split, index, share_blocked, share_numbered),
        reads=TOOLKIT.reads & frozenset(TOOLS),
        max_turns=12,
    )
