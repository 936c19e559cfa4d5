"""Tool-calling precision: Choosing every argument of a state-changing call exactly: the record the user means (the original payment method, the contact of the relationship named), the exact items, counts and words."""

from factory.archetypes.registry import Archetype

from .detector import detect

ARCHETYPE = Archetype(
    id="tool_calling_precision",
    title="Tool-calling precision",
    description=(
        "Choosing every argument of a state-changing call exactly: the record the user means (the original payment method, the contact of the relationship named), the exact items, counts and words."
    ),
    lacking_behaviour=(
        "calls the right tool with a wrong argument: the first record that looks right (a gift card listed first on the profile, a namesake contact) instead of the one the user means"
    ),
    detector=detect,
)
