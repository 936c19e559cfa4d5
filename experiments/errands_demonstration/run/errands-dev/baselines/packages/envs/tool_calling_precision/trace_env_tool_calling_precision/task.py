"""Tool-calling precision: the `tool_calling_precision` capability, on the
Phone (ToolSandbox) tools.

Choosing every argument of a state-changing call exactly: the record the
user means (the original payment method, the contact of the relationship
named), the exact items, counts and words.

Each seed builds one task (tool-calling precision family): several contacts
share a first name, and the user asks for a different text to two of them,
each named by relationship ("tell my sister Sofia ..., and my coworker Sofia
..."): each text must go to the number of the contact with that
relationship, word for word. An agent without the capability calls the right
tool with wrong arguments: it pairs the texts with the contacts in the order
the search lists them, so each text goes to the other namesake.

Reward (`_runtime/verifier.py`): the gold final state is the initial state
with the gold tool calls replayed; reward mode `partial` pays the mean of
the state's progress (the share of the fields the agent or the gold policy
changed that end as gold has them) and of each required fact's check; 1.0
exactly when the episode succeeds. Knob values come from capability.json
(generation.difficulty).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from ._runtime import Knob, Task, Turn, call, say
from ._runtime.kits import phone
from ._runtime.kits.phone import run
from ._runtime.kits.phone.world import (
    FIRST_NAMES,
    LAST_NAMES,
    RELATIONSHIPS,
    new_phone,
    phone_number,
)

TOOLKIT = phone.TOOLKIT
KNOBS = (
    Knob("namesakes", 2, 2, 4, "contacts who share the first name (two are texted)"),
    Knob("contacts", 3, 1, 6, "other contacts on the phone"),
)
TEXTS = (
    "Saved you a seat in the second row",
    "The spare key is with the neighbour at number 12",
    "Bring the blue folder tomorrow, please",
    "Flight lands at 6:40, no need to pick me up",
    "Thanks for the book, I finished it in two days",
    "Practice is cancelled this week",
)


def _texts(rows: list[Mapping[str, str]], texts: list[str], closing: str) -> list[Turn]:
    """One send per (contact, text), then the closing reply."""
    sends = [
        call(
            "send_message_with_phone_number",
            phone_number=row["phone_number"],
            content=text,
        )
        for row, text in zip(rows, texts, strict=True)
    ]
    return [*sends, say(closing)]


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """The task of one seed: two texts, each to the namesake of the relationship named."""
    state = new_phone(rng, knobs["contacts"])
    taken = {row["name"].split()[0] for row in state["contacts"].values()}
    first = rng.choice([name for name in FIRST_NAMES if name not in taken])
    relationships = rng.sample(RELATIONSHIPS, knobs["namesakes"])
    namesakes = [
        state["contacts"][
            run(
                state,
                "add_contact",
                name=f"{first} {last}",
                phone_number=phone_number(rng),
                relationship=relationship,
            )
        ]
        for last, relationship in zip(
            rng.sample(LAST_NAMES, knobs["namesakes"]), relationships, strict=True
        )
    ]
    # The request names the second one listed first: the search's order is wrong.
    meant = [namesakes[1], namesakes[0]]
    texts = [f"{text} ({rng.randint(2, 99)})" for text in rng.sample(TEXTS, 2)]
    asks = [
        f'my {row["relationship"]} {first} "{text}"'
        for row, text in zip(meant, texts, strict=True)
    ]
    instruction = f"Please text {asks[0]}, and {asks[1]}. Word for word, both."
    closing = (
        f"Both texts are sent: one to your {meant[0]['relationship']} and one to your "
        f"{meant[1]['relationship']}."
    )
    lookup = call("search_contacts", name=first)
    return Task(
        task_id=task_id,
        instruction=instruction,
        initial_state=state,
        gold_turns=(lookup, *_texts(meant, texts, closing)),
        required_facts=(),
        lacking_turns=(lookup, *_texts(namesakes[:2], texts, closing)),
    )
