"""Errands: a phone-interface target written through TRACE's target contract.

A worked example of a user's own target (docs/targets.md): it shows the agent
the phone kit's tools, with the kit's own code behind them, but its requests,
its worlds, its need mixes and its success check are its own, written here and
nowhere in the project's packages. Name it in a config as

    target: {kind: python, entry: "examples/targets/errands/errands.py:make_target", kit: phone}

(a file path, from the folder `trace` runs in), or as `errands:make_target` with
this folder on PYTHONPATH.

Each task is an errand: text a contact, set a nudge (a reminder), or both in
one request. What it truly needs is latent: the phone may be in low battery
mode or have cellular off (the first text is refused, and the agent must turn
the blocker off: permission_error_recovery), and a nudge's timestamp must come
from the date tools (date_time_recovery), its time sometimes relative ("the day
after tomorrow at 08:00", to be resolved against the device clock). A
both-errand can need both, and needs each errand done before the agent closes
(multi_step_task_completion). A text's request may give the contact's number
(`share_numbered`); otherwise the number must come from the contact tools, a
step no capability label names (so the truth labels are complete only at 100).
No request template and no gold tool sequence is an archetype module's
(tests/trace_pipeline/test_errands_overlap.py).
"""

from __future__ import annotations

import datetime
import random
import string
from typing import Any

from factory.runtime.kits.phone import TOOLKIT
from trace_pipeline.targets.contract import Target, TargetTask

TOOLS = (
    "search_contacts", "send_message_with_phone_number", "get_cellular_service_status",
    "set_cellular_service_status", "get_low_battery_mode_status",
    "set_low_battery_mode_status", "get_location_service_status",
    "set_location_service_status", "get_current_location", "add_reminder",
    "get_current_timestamp", "timestamp_to_datetime_info", "datetime_info_to_timestamp",
    "shift_timestamp",
)  # fmt: skip
READS = frozenset(
    {"search_contacts", "get_cellular_service_status", "get_low_battery_mode_status",
     "get_location_service_status", "get_current_location", "get_current_timestamp",
     "timestamp_to_datetime_info", "datetime_info_to_timestamp", "shift_timestamp"}
)  # fmt: skip
POLICY = """- Find a contact's number with the contact tools; never guess a number.
- If a tool refuses because of a phone setting, fix the setting and try again.
- Work out dates and times with the clock and date tools, never in your head.
- When every errand is done, tell the user in one sentence."""
PEOPLE = (
    "Ingrid Solberg", "Marco Bellini", "Aiko Moriyama", "Ruth Adeyemi", "Pavel Novak",
    "Lucia Ferreira", "Samir Qureshi", "Greta Holm", "Noah Castillo", "Zara Whitfield",
)  # fmt: skip
NOTES = (
    "the plumber comes at nine tomorrow",
    "I found your umbrella in my car",
    "dinner is at the Lebanese place on Elm Street",
    "the train is delayed by twenty minutes",
    "I still have your extension cord",
    "the kids' recital starts at six",
)
CHORES = (
    "renew the fishing licence",
    "book the car service",
    "order the birthday cake",
    "cancel the gym trial",
    "defrost the freezer",
    "check the smoke alarms",
)
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August",
    "September", "October", "November", "December",
)  # fmt: skip


def _phone_number(rng: random.Random) -> str:
    return f"+44{rng.randint(7000000000, 7999999999)}"


def _world(rng: random.Random, people: int) -> tuple[dict[str, Any], list[str]]:
    """A phone with the user and `people` contacts; (state, the contacts' names)."""
    now = datetime.datetime(2026, 1, 5, 8, 0, tzinfo=datetime.timezone.utc)
    now += datetime.timedelta(minutes=rng.randint(0, 2 * 365 * 24 * 60))
    state: dict[str, Any] = {
        "settings": {
            "device_id": "".join(rng.choices(string.hexdigits.lower(), k=12)),
            "cellular": True,
            "wifi": True,
            "location_service": True,
            "low_battery_mode": False,
            "latitude": 51.5072,
            "longitude": -0.1276,
        },
        "contacts": {},
        "messages": {},
        "reminders": {},
        "clock": {"current_timestamp": now.timestamp()},
    }
    names = rng.sample(PEOPLE, people)
    TOOLKIT.run(
        state, "add_contact", name="Me", phone_number=_phone_number(rng), is_self=True
    )
    for name in names:
        TOOLKIT.run(state, "add_contact", name=name, phone_number=_phone_number(rng))
    return state, names


def _nudge_time(
    rng: random.Random, now: datetime.datetime, relative: bool
) -> tuple[str, datetime.datetime]:
    """(how the user says when, the moment it means)."""
    hour, minute = rng.choice(((8, 0), (12, 30), (17, 45), (19, 15)))
    if not relative:
        day = now + datetime.timedelta(days=rng.randint(3, 40))
        when = day.replace(hour=hour, minute=minute, second=0, microsecond=0)
        return (
            f"on {MONTHS[when.month - 1]} {when.day}, {when.year} at {hour:02d}:{minute:02d}",
            when,
        )
    kind = rng.randrange(3)
    if kind == 0:
        when = (now + datetime.timedelta(days=2)).replace(
            hour=hour, minute=minute, second=0, microsecond=0
        )
        return f"the day after tomorrow at {hour:02d}:{minute:02d}", when
    if kind == 1:
        hours = rng.choice((6, 30, 36, 50))
        return f"{hours} hours from now", now + datetime.timedelta(hours=hours)
    when = (now + datetime.timedelta(weeks=1)).replace(
        hour=hour, minute=minute, second=0, microsecond=0
    )
    return f"a week from today at {hour:02d}:{minute:02d}", when


def _task(
    split: str, index: int, share_blocked: int, share_relative: int, share_numbered: int
) -> TargetTask:
    rng = random.Random(f"errands/{split}/{index}")
    state, names = _world(rng, 5)
    now = datetime.datetime.fromtimestamp(
        state["clock"]["current_timestamp"], tz=datetime.timezone.utc
    )
    kind = rng.choice(("text", "text", "nudge", "nudge", "both"))
    asks, needs, hidden = [], [], []
    expected: list[dict[str, Any]] = []
    wanted_message = wanted_reminder = None
    if kind in ("text", "both"):
        name, note = rng.choice(names), rng.choice(NOTES)
        number = next(c for c in state["contacts"].values() if c["name"] == name)[
            "phone_number"
        ]
        if share_numbered and rng.randrange(100) < share_numbered:  # 0: no draw
            asks.append(f"text {name.split()[0]} at {number} that {note}")
        else:
            asks.append(f"let {name.split()[0]} know that {note}")
            expected.append({"name": "search_contacts", "arguments": {"name": name}})
            hidden.append(number)
        if rng.randrange(100) < share_blocked:
            needs.append("permission_error_recovery")
            if rng.random() < 0.5:  # low battery mode, which also turned cellular off
                TOOLKIT.run(state, "set_low_battery_mode_status", on=True)
                expected.append(
                    {"name": "set_low_battery_mode_status", "arguments": {"on": False}}
                )
            else:
                TOOLKIT.run(state, "set_cellular_service_status", on=False)
            expected.append(
                {"name": "set_cellular_service_status", "arguments": {"on": True}}
            )
        expected.append(
            {
                "name": "send_message_with_phone_number",
                "arguments": {"phone_number": number, "content": note},
            }
        )
        wanted_message = (number, note)
    if kind in ("nudge", "both"):
        chore = rng.choice(CHORES)
        relative = rng.randrange(100) < share_relative
        said, when = _nudge_time(rng, now, relative)
        asks.append(f"nudge me to {chore} {said}")
        needs.append("date_time_recovery")  # its timestamp must come from the tools
        if relative:
            hidden.append(f"{MONTHS[when.month - 1]} {when.day}")
            expected.append({"name": "get_current_timestamp", "arguments": {}})
        expected += [
            {
                "name": "datetime_info_to_timestamp",
                "arguments": {
                    "year": when.year,
                    "month": when.month,
                    "day": when.day,
                    "hour": when.hour,
                    "minute": when.minute,
                    "second": 0,
                },
            },  # fmt: skip
            {
                "name": "add_reminder",
                "arguments": {"content": chore, "reminder_timestamp": when.timestamp()},
            },
        ]
        wanted_reminder = (chore, when.timestamp())
    if kind == "both":  # two errands in one request: both done before closing
        needs.append("multi_step_task_completion")
    expected.append({"content": "Done: " + " and ".join(asks) + "."})

    def check(final: dict[str, Any], messages: list[dict[str, Any]]) -> bool:
        """The errands are done: one text sent, to that number, saying the note (in
        any words around it); the nudge set for that moment (within a minute),
        about that chore."""
        if wanted_message is not None:
            sent = list(final["messages"].values())
            if (
                len(sent) != 1
                or sent[0]["recipient_phone_number"] != wanted_message[0]
                or wanted_message[1].lower()
                not in " ".join(sent[0]["content"].lower().split())
            ):
                return False
        if wanted_reminder is not None:
            chore, moment = wanted_reminder
            if not any(
                chore in r["content"].lower()
                and abs(r["reminder_timestamp"] - moment) <= 60
                for r in final["reminders"].values()
            ):
                return False
        return True

    opening = rng.choice(("Hey, could you", "Please", "Quick favour:", "When you can,"))
    return TargetTask(
        instruction=f"{opening} {' and also '.join(asks)}.",
        state=state,
        check=check,
        task_id=f"errands-{split}-{index}",
        expected_actions=tuple(expected),
        needs=tuple(needs),
        hidden=tuple(hidden),
    )


def make_target(
    share_blocked: int = 40, share_relative: int = 60, share_numbered: int = 0
) -> Target:
    """The errands target; `share_blocked`, `share_relative` and `share_numbered`
    are the percent of texts a phone setting blocks, of nudges given a relative
    time, and of texts whose request gives the number."""
    for name, value in (
        ("share_blocked", share_blocked),
        ("share_relative", share_relative),
        ("share_numbered", share_numbered),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value <= 100
        ):
            raise ValueError(f"{name} must be a whole percent from 0 to 100")
    return Target(
        name="errands",
        tools=[{"type": "function", "function": TOOLKIT.function(n)} for n in TOOLS],
        functions={name: TOOLKIT.implementations[name] for name in TOOLS},
        policy=POLICY,
        task=lambda split, index: _task(
            split, index, share_blocked, share_relative, share_numbered
        ),
        reads=READS,
        max_turns=12,
    )
