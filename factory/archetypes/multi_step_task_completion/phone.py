"""Multi-step task completion on the phone kit.

The user asks for the same text to go to several contacts, named one after
another in one request: each of them must get it, word for word.

An agent without the capability texts the first contact named and then tells the
user the request is done.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from factory.runtime import Knob, Task, call, say
from factory.runtime.kits import phone
from factory.runtime.kits.phone.world import new_phone, other_contacts

TOOLKIT = phone.TOOLKIT
KNOBS = (
    Knob("recipients", 3, 2, 4, "contacts who must each get the text"),
    Knob("contacts", 5, 4, 8, "contacts on the phone"),
)
NOTES = (
    "Book club moves to the café on Third Avenue",
    "The group photo is in the shared album now",
    "Bring a dish for the potluck, anything vegetarian",
    "The hike starts at the north trailhead",
    "Rehearsal is pushed back half an hour",
    "Please vote for the new logo by Friday",
)


def _listed(names: list[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: one text, sent to every contact the request names."""
    state = new_phone(rng, knobs["contacts"])
    people = rng.sample(other_contacts(state), knobs["recipients"])
    note = f"{rng.choice(NOTES)} ({rng.randint(2, 99)})"
    names = [row["name"] for row in people]
    instruction = (
        f'Could you send this same text to {_listed(names)}: "{note}"? '
        "Every one of them should get it."
    )
    sends = [
        turn
        for row in people
        for turn in (
            call("search_contacts", name=row["name"]),
            call(
                "send_message_with_phone_number",
                phone_number=row["phone_number"],
                content=note,
            ),
        )
    ]
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=(*sends, say(f"Your text went to {_listed(names)}.")),
        required_facts=(),
        lacking_turns=(*sends[:2], say("Your text is sent.")),
    )
