"""The paper's six capability archetypes: seeded task families with difficulty knobs.

Each archetype has a task-builder template per supported kit
(templates/archetypes/<archetype>/<kit>.py.j2) and a capability-lacking policy
that makes the paper's typical mistake.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Knob:
    """A difficulty knob: an integer the task builder reads from `difficulty`."""

    name: str
    default: int
    minimum: int
    maximum: int
    help: str


@dataclass(frozen=True)
class Archetype:
    """A capability family the template backend can generate environments for."""

    id: str
    title: str
    description: str
    lacking_behaviour: str
    task_summary: dict[str, str]
    knobs: tuple[Knob, ...]

    @property
    def kits(self) -> tuple[str, ...]:
        return tuple(self.task_summary)

    def template(self, kit: str) -> str:
        return f"archetypes/{self.id}/{kit}.py.j2"

    def default_difficulty(self) -> dict[str, int]:
        return {knob.name: knob.default for knob in self.knobs}


ARCHETYPES: dict[str, Archetype] = {
    archetype.id: archetype
    for archetype in (
        Archetype(
            id="structured_data_reasoning",
            title="Structured data reasoning",
            description=(
                "Reading nested tool results correctly: picking the right field of a "
                "per-cabin price table or a variant's options and availability, and "
                "computing totals from them."
            ),
            lacking_behaviour=(
                "misreads the nested record (the wrong cabin's price, or a variant "
                "that is not available) and acts and reports on the wrong value"
            ),
            task_summary={
                "airline": (
                    "the user asks to book the cheapest direct flight in a given cabin "
                    "for one or more saved passengers and to be told the total; the "
                    "search returns several flights whose per-cabin prices rank them "
                    "differently."
                ),
                "retail": (
                    "the user asks to switch an item of a pending order to the cheapest "
                    "available variant with a given option and to be told the price "
                    "difference; the cheapest matching variant is out of stock."
                ),
            },
            knobs=(
                Knob("options", 3, 2, 6, "candidate records to compare"),
                Knob("quantity", 1, 1, 3, "passengers or order items involved"),
            ),
        ),
        Archetype(
            id="tool_calling_precision",
            title="Tool-calling precision",
            description=(
                "Choosing every argument of a state-changing call exactly: the payment "
                "method the user named (the original one), the exact items and counts."
            ),
            lacking_behaviour=(
                "calls the right tool with a wrong argument: the first payment method "
                "on the profile (a gift card) instead of the original credit card"
            ),
            task_summary={
                "airline": (
                    "the user asks to add paid checked bags to a reservation, charged to "
                    "the card that paid for that reservation; the profile lists other "
                    "payment methods first."
                ),
                "retail": (
                    "the user asks to return items of a delivered order with the refund "
                    "to the original payment method; the profile lists a gift card first."
                ),
            },
            knobs=(
                Knob("payment_methods", 3, 2, 5, "payment methods on the user profile"),
                Knob("items", 1, 1, 3, "bags to add or items to return"),
            ),
        ),
        Archetype(
            id="multi_step_task_completion",
            title="Multi-step task completion",
            description=(
                "Carrying out every operation of a request with several parts before "
                "closing the conversation."
            ),
            lacking_behaviour=(
                "does the first of the requested operations and then closes the "
                "conversation as if it were done"
            ),
            task_summary={
                "airline": (
                    "the user asks for several changes at once (add bags, change a "
                    "passenger, cancel an eligible reservation) on different reservations."
                ),
                "retail": (
                    "the user asks for several changes at once (cancel a pending order, "
                    "change a pending order's address, return a delivered item, update "
                    "the profile address)."
                ),
            },
            knobs=(
                Knob("operations", 2, 2, 4, "operations requested in one message"),
                Knob("distractors", 1, 0, 3, "unrelated reservations or orders"),
            ),
        ),
        Archetype(
            id="precondition_verification",
            title="Precondition verification",
            description=(
                "Checking that the policy allows a state-changing action (eligibility, "
                "ownership) before running it, and refusing when it does not."
            ),
            lacking_behaviour=(
                "runs every requested state-changing action without checking that the "
                "policy allows it"
            ),
            task_summary={
                "airline": (
                    "the user asks to cancel several reservations; only those booked in "
                    "the last 24 hours, in business, or with insurance may be cancelled."
                ),
                "retail": (
                    "the user asks to cancel several pending orders; some belong to "
                    "another customer and must not be touched."
                ),
            },
            knobs=(
                Knob("requests", 2, 2, 4, "entities the user asks to act on"),
                Knob("ineligible", 1, 1, 3, "of those, how many the policy forbids"),
            ),
        ),
        Archetype(
            id="permission_error_recovery",
            title="Permission error recovery",
            description=(
                "Recovering when a tool fails because a device setting is off: reading "
                "the error, enabling the setting (and what blocks it), and retrying."
            ),
            lacking_behaviour=(
                "gives up after the tool's error and tells the user it cannot be done"
            ),
            task_summary={
                "phone": (
                    "the user asks to text a contact, or to get the current location for "
                    "a reminder, while cellular service or location service is off "
                    "(and low battery mode may block turning it on)."
                ),
            },
            knobs=(
                Knob(
                    "blockers",
                    1,
                    1,
                    2,
                    "1: a service is off; 2: low battery mode blocks it too",
                ),
                Knob("contacts", 4, 2, 8, "contacts on the phone"),
            ),
        ),
        Archetype(
            id="date_time_recovery",
            title="Date and time reasoning with tools",
            description=(
                "Resolving relative dates and times ('next Friday at 9', 'in 3 days', "
                "'5 hours from now') with the clock and date tools instead of guessing."
            ),
            lacking_behaviour=(
                "computes the relative date in its head and gets it wrong (weekday "
                "numbering, time of day, or the day rollover)"
            ),
            task_summary={
                "phone": (
                    "the user asks for a reminder at a relative date and time and to be "
                    "told the date it was set for."
                ),
            },
            knobs=(
                Knob("horizon_days", 10, 2, 30, "how far ahead the reminder may be"),
                Knob("expression_kinds", 3, 1, 3, "kinds of relative expression drawn"),
            ),
        ),
    )
}


def supported_pairs() -> list[tuple[str, str]]:
    """Every (archetype, kit) pair the template backend generates."""
    return [(a.id, kit) for a in ARCHETYPES.values() for kit in a.kits]
