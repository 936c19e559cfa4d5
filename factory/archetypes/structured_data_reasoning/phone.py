"""Structured data reasoning on the phone kit.

The user asks to text a contact a reading of the phone, in a given shape: the
position (latitude, then longitude, from the location record) or the clock's
time (hour and minute, from the date record the clock's timestamp converts to).
The text must carry the right fields of the record, in the order asked.

An agent without the capability reads the wrong field of the record: it writes
the longitude where the latitude belongs, or takes the day of the month for the
hour.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from factory.runtime import Knob, Task, Turn, call, say
from factory.runtime.kits import phone
from factory.runtime.kits.phone.world import moment, new_phone, other_contacts

TOOLKIT = phone.TOOLKIT
KNOBS = (
    Knob(
        "share_clock",
        50,
        0,
        100,
        "percent of tasks that text the time, not the position",
    ),
    Knob("contacts", 4, 2, 8, "contacts on the phone"),
)
HOUR = 3600


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: a contact texted the position or the time, shaped as asked."""
    state = new_phone(rng, knobs["contacts"])
    contact = rng.choice(other_contacts(state))
    first = contact["name"].split()[0]
    if rng.randrange(100) < knobs["share_clock"]:
        clock = state["clock"]
        now = moment(clock["current_timestamp"])
        if now.day == now.hour:  # the misread must differ from the reading
            clock["current_timestamp"] += HOUR
            now = moment(clock["current_timestamp"])
        right, wrong = f"{now:%H:%M}", f"{now.day:02d}:{now:%M}"
        ask = "the time on my phone's clock, written HH:MM in 24-hour form"
        reads = (
            call("get_current_timestamp"),
            call("timestamp_to_datetime_info", timestamp=clock["current_timestamp"]),
        )
    else:
        settings = state["settings"]
        right = f"{settings['latitude']}, {settings['longitude']}"
        wrong = f"{settings['longitude']}, {settings['latitude']}"
        ask = "where I am: latitude first, then longitude, comma-separated, as the phone reports them"
        reads = (call("get_current_location"),)

    def texting(content: str) -> tuple[Turn, ...]:
        return (
            call("search_contacts", name=contact["name"]),
            *reads,
            call(
                "send_message_with_phone_number",
                phone_number=contact["phone_number"],
                content=content,
            ),
            say(f"{first} has it: {content}."),
        )

    return Task(
        task_id=task_id,
        instruction=f"Text {contact['name']} {ask}, nothing else in the message.",
        initial_state=state,
        gold_turns=texting(right),
        required_facts=(),
        lacking_turns=texting(wrong),
    )
