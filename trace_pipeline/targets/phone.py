"""The built-in phone target: one request surface, the capability each task needs latent.

Every task is one of two requests, phrased the same way whatever it needs:
`Send a message to NAME saying: "..."` or `Add a reminder "..." for WHEN`.
What the task truly needs is hidden in the world and the wording of WHEN:
- permission_error_recovery: the service the request needs (cellular for a
  message, location for a reminder "here") is off, so the first try fails and
  the agent must turn it on and retry;
- date_time_recovery: WHEN is relative ("in 3 days at 10:00", "this coming
  Friday at 09:30", "on Thanksgiving at 18:00") and must be resolved against
  the device clock with the date tools;
- nothing special: the service is on and WHEN is a plain date.
A router reading the first observation cannot see whether a setting is off;
it can see that a date is relative. That is TRACE's setting: one policy, one
request surface, capabilities latent.

Built on the phone kit and the runtime like any package, with its own task
generator; `needs(seed)` gives each task's true needs (for the oracle and for
scoring analysis and routing), never shown to the agent.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import gymnasium

from factory.runtime import Knob, Task, TaskEnv, TaskFamily, Toolkit, Turn, call, say
from factory.runtime.kits import phone
from factory.runtime.kits.phone.utilities import find_holiday
from factory.runtime.kits.phone.world import WEEKDAYS, moment, new_phone, other_contacts
from trace_pipeline.targets.contract import Target, from_family

ENV_ID = "trace/PhoneTarget-v0"
CAPABILITY = "phone_target"
PERMISSION = "permission_error_recovery"
DATE_TIME = "date_time_recovery"
NEEDS = (PERMISSION, DATE_TIME)
# Tools of the focused surface: what the requests need, their settings and the
# date tools (a small model given all 33 tends to call the first one listed).
FOCUSED = (
    "search_contacts", "send_message_with_phone_number", "get_cellular_service_status",
    "set_cellular_service_status", "get_location_service_status",
    "set_location_service_status", "set_low_battery_mode_status", "get_current_location",
    "add_reminder", "get_current_timestamp", "timestamp_to_datetime_info",
    "datetime_info_to_timestamp", "shift_timestamp", "search_holiday",
)  # fmt: skip
KNOBS = (
    Knob("share_off", 40, 0, 100, "percent of tasks whose needed service is off"),
    Knob("share_relative", 70, 0, 100, "percent of reminders with a relative date"),
    Knob("share_messages", 50, 0, 100, "percent of tasks that are messages"),
    Knob("blockers", 1, 1, 2, "2: low battery mode also blocks the service"),
    Knob("give_numbers", 0, 0, 1, "1: messages give the contact's number"),
    Knob("all_tools", 0, 0, 1, "1: expose all 33 phone tools, 0: the 14 focused ones"),
    Knob("contacts", 4, 2, 8, "contacts on the phone"),
    Knob(
        "say_done",
        0,
        0,
        1,
        "1: the policy says to answer the user once the request is done",
    ),
)
SAY_DONE = (
    "- Once the request is done, stop calling tools and tell the user in one sentence "
    "what you did."
)
MESSAGES = (
    "Running 10 minutes late, start without me",
    "Can you pick up milk on your way home?",
    "The meeting moved to Thursday at 3pm",
    "I left the keys under the blue flowerpot",
    "Call me when you land",
    "The tickets for Saturday are booked",
)
TOPICS = (
    "call the dentist",
    "water the plants",
    "pay the electricity bill",
    "renew the passport",
    "send the quarterly report",
    "buy printer ink",
)
HOLIDAYS = ("Christmas", "Thanksgiving", "Independence Day", "Labor Day", "Juneteenth")
SETTERS = {
    "cellular": "set_cellular_service_status",
    "location_service": "set_location_service_status",
}


def toolkit(all_tools: bool, say_done: bool = False) -> Toolkit:
    """The phone kit, or its focused subset, with the kit's policy (and the say-done rule)."""
    policy = phone.TOOLKIT.policy + ("\n" + SAY_DONE if say_done else "")
    if all_tools:
        return replace(phone.TOOLKIT, policy=policy)
    return replace(phone.TOOLKIT.subset(FOCUSED), id="phone-focused", policy=policy)


def _at(day: datetime.datetime, hour: int, minute: int) -> datetime.datetime:
    return day.replace(hour=hour, minute=minute, second=0, microsecond=0)


def _timestamp_turn(when: datetime.datetime) -> Turn:
    return call(
        "datetime_info_to_timestamp",
        year=when.year, month=when.month, day=when.day,
        hour=when.hour, minute=when.minute, second=0,
    )  # fmt: skip


def _when(
    rng: random.Random, now: datetime.datetime, relative: bool
) -> tuple[str, datetime.datetime, list[Turn]]:
    """(phrase, moment, gold turns that resolve it) of a reminder's time."""
    hour, minute = rng.randint(7, 20), rng.choice((0, 15, 30, 45))
    stamp = now.timestamp()
    if not relative:
        day = now + datetime.timedelta(days=rng.randint(2, 40))
        target = _at(day, hour, minute)
        return f"{target:%Y-%m-%d} at {target:%H:%M} (UTC)", target, []
    clock = [call("get_current_timestamp")]
    kind = rng.choice(("in_days", "weekday", "holiday"))
    if kind == "holiday":
        dates = {}
        for name in HOLIDAYS:
            date = find_holiday(name, now.year)
            if date is not None and date > now.date():
                dates[name] = (date, now.year)
            elif (later := find_holiday(name, now.year + 1)) is not None:
                dates[name] = (later, now.year + 1)
        name = rng.choice(sorted(dates))
        date, year = dates[name]
        midnight = datetime.datetime(
            date.year, date.month, date.day, tzinfo=datetime.timezone.utc
        )
        target = _at(midnight, hour, minute)
        turns = [*clock, call("search_holiday", holiday_name=name, year=year)]
        return f"{name} at {hour:02d}:{minute:02d}", target, turns
    if kind == "in_days":
        days = rng.randint(2, 12)
        phrase = f"{days} days from today at {hour:02d}:{minute:02d}"
    else:
        weekday = rng.choice([d for d in range(7) if d != now.weekday()])
        days = (weekday - now.weekday()) % 7
        phrase = f"this coming {WEEKDAYS[weekday]} at {hour:02d}:{minute:02d}"
    target = _at(now + datetime.timedelta(days=days), hour, minute)
    turns = [
        *clock,
        call("shift_timestamp", timestamp=stamp, days=days),
        call(
            "timestamp_to_datetime_info",
            timestamp=(now + datetime.timedelta(days=days)).timestamp(),
        ),
    ]
    return phrase, target, turns


def _switched_off(
    state: dict[str, Any], service: str, blockers: int
) -> tuple[list[Turn], list[Turn]]:
    """Turn `service` off (and low battery on with 2 blockers): (recovery, give-up) turns."""
    state["settings"][service] = False
    recover = [call(SETTERS[service], on=True)]
    if blockers >= 2:
        phone.run(state, "set_low_battery_mode_status", on=True)
        recover = [call("set_low_battery_mode_status", on=False), *recover]
    return recover, [say(f"Sorry, I can't do that: {service} is off.")]


def draw(
    rng: random.Random, knobs: Mapping[str, int], task_id: str
) -> tuple[Task, tuple[str, ...]]:
    """The task of one seed and the capabilities it truly needs."""
    state = new_phone(rng, knobs["contacts"])
    now = moment(state["clock"]["current_timestamp"])
    off = rng.random() * 100 < knobs["share_off"]
    if rng.random() * 100 < knobs["share_messages"]:
        contact = rng.choice(other_contacts(state))
        content = f"{rng.choice(MESSAGES)} ({rng.randint(2, 99)})"
        number = contact["phone_number"]
        who = contact["name"] + (f" ({number})" if knobs["give_numbers"] else "")
        instruction = f'Send a message to {who} saying: "{content}"'
        lookup = (
            []
            if knobs["give_numbers"]
            else [call("search_contacts", name=contact["name"])]
        )
        send = call(
            "send_message_with_phone_number", phone_number=number, content=content
        )
        done = say(f"Done: your message to {contact['name']} was sent.")
        if off:
            recover, give_up = _switched_off(state, "cellular", knobs["blockers"])
            gold = [*lookup, send, *recover, send, done]
            lacking = [*lookup, send, *give_up]
            return Task(task_id, instruction, state, tuple(gold), (), tuple(lacking)), (
                PERMISSION,
            )
        gold = [*lookup, send, done]
        return Task(task_id, instruction, state, tuple(gold), (), tuple(gold)), ()
    topic = rng.choice(TOPICS)
    here = rng.random() < 0.35  # a reminder "here" needs location service
    off = here and off
    relative = not here and rng.random() * 100 < knobs["share_relative"]
    phrase, target, resolve = _when(rng, now, relative)
    place = " here, at my current location," if here else ""
    instruction = f'Add a reminder "{topic}"{place} for {phrase}.'
    settings = state["settings"]
    where = (
        {"latitude": settings["latitude"], "longitude": settings["longitude"]}
        if here
        else {}
    )
    locate = [call("get_current_location")] if here else []
    add = call(
        "add_reminder", content=topic, reminder_timestamp=target.timestamp(), **where
    )
    finish = [_timestamp_turn(target), add, say(f"Done: reminder set for {phrase}.")]
    if off:
        recover, give_up = _switched_off(state, "location_service", knobs["blockers"])
        gold = [*locate, *recover, *locate, *finish]
        lacking = [*locate, *give_up]
        return Task(task_id, instruction, state, tuple(gold), (), tuple(lacking)), (
            PERMISSION,
        )
    gold = [*resolve, *locate, *finish]
    if not relative:
        return Task(task_id, instruction, state, tuple(gold), (), tuple(gold)), ()
    # Without the capability: today's date taken as the device's "now" is right,
    # but the relative part is computed in the head, one day off.
    wrong = call(
        "add_reminder",
        content=topic,
        reminder_timestamp=(target + datetime.timedelta(days=1)).timestamp(),
        **where,
    )
    lacking = [*locate, wrong, say(f"Done: reminder set for {phrase}.")]
    return Task(task_id, instruction, state, tuple(gold), (), tuple(lacking)), (
        DATE_TIME,
    )


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed (the runtime's task-module interface)."""
    return draw(rng, knobs, task_id)[0]


# The env truncates here; a rollout may stop sooner (`rollout.max_turns`).
MAX_TURNS = 10


def family(difficulty: Mapping[str, int] | None = None) -> TaskFamily:
    """The target's task family with `difficulty` knob values (checked)."""
    from factory.runtime.task import resolve_knobs

    knobs = resolve_knobs(KNOBS, difficulty, "target.difficulty")
    return TaskFamily(
        name=CAPABILITY,
        title="Phone assistant (built-in target)",
        description="Messages and reminders on a phone whose settings and dates hide what each task needs.",
        seed_prefix="phone_target",
        toolkit=toolkit(bool(knobs["all_tools"]), bool(knobs["say_done"])),
        knobs=KNOBS,
        build_task=build_task,
        difficulty=knobs,
        max_turns=MAX_TURNS,
    )


def needs(seed: int, difficulty: Mapping[str, int] | None = None) -> tuple[str, ...]:
    """What the task of `seed` truly needs (never shown to the agent)."""
    chosen = family(difficulty)
    rng = random.Random(f"{chosen.seed_prefix}/{seed}")
    return draw(rng, chosen.difficulty, f"{CAPABILITY}-{seed}")[1]


class PhoneTargetEnv(TaskEnv):
    """The phone target as a gymnasium env; `difficulty` sets its knobs."""

    family = family()

    def __init__(
        self, difficulty: Mapping[str, int] | None = None, **kwargs: Any
    ) -> None:
        self.family = family(difficulty)  # type: ignore[misc]
        super().__init__(difficulty=None, **kwargs)

    def _info(self) -> dict[str, Any]:
        return {**super()._info(), "needs": list(self.needs)}

    @property
    def needs(self) -> tuple[str, ...]:
        seed = int(self.task.task_id.rsplit("-", 1)[1])
        return needs(seed, self.family.difficulty)


if ENV_ID not in gymnasium.registry:
    gymnasium.register(ENV_ID, entry_point=PhoneTargetEnv, max_episode_steps=30)


def contract_target(difficulty: Mapping[str, int] | None = None) -> Target:
    """The phone target through the target contract (`trace check-target` checks
    it as it checks a user's target)."""
    chosen = family(difficulty)
    return from_family(chosen, lambda seed: needs(seed, chosen.difficulty))
