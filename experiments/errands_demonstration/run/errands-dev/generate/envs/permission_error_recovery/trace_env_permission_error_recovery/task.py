"""Permission error recovery: the `permission_error_recovery` capability, on
the Phone (ToolSandbox) tools.

Recovering when a tool fails because a device setting is off: reading the
error, enabling the setting (and what blocks it), and retrying.

Each seed builds one task (permission error recovery family): the user asks
to text a contact, or to get the current location for a reminder, while
cellular service or location service is off (and low battery mode may block
turning it on). An agent without the capability gives up after the tool's
error and tells the user it cannot be done.

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

from ._runtime import (
    Knob,
    Task,
    Turn,
    call,
    say,
)
from ._runtime.kits import phone
from ._runtime.kits.phone import run
from ._runtime.kits.phone.world import moment, new_phone, other_contacts, spoken

TOOLKIT = phone.TOOLKIT
KNOBS = (
    Knob("blockers", 1, 1, 2, "1: a service is off; 2: low battery mode blocks it too"),
    Knob("contacts", 4, 2, 8, "contacts on the phone"),
)


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


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: text a contact with cellular off, or a location reminder with location off."""
    state = new_phone(rng, knobs["contacts"])
    low_battery = knobs["blockers"] >= 2
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
