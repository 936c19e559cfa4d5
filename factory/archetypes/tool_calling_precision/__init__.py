"""Tool-calling precision: Choosing every argument of a state-changing call exactly: the payment method the user named (the original one), the exact items and counts."""

from factory.archetypes.registry import Archetype

from .detector import detect

ARCHETYPE = Archetype(
    id="tool_calling_precision",
    title="Tool-calling precision",
    description=(
        "Choosing every argument of a state-changing call exactly: the payment method the user named (the original one), the exact items and counts."
    ),
    lacking_behaviour=(
        "calls the right tool with a wrong argument: the first payment method on the profile (a gift card) instead of the original credit card"
    ),
    detector=detect,
)
