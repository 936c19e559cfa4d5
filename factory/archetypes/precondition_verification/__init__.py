"""Precondition verification: Checking that the policy or the user's condition allows a state-changing action (eligibility, ownership, a time not yet passed) before running it, and refusing when it does not."""

from factory.archetypes.registry import Archetype

from .detector import detect

ARCHETYPE = Archetype(
    id="precondition_verification",
    title="Precondition verification",
    description=(
        "Checking that the policy or the user's condition allows a state-changing action (eligibility, ownership, a time not yet passed) before running it, and refusing when it does not."
    ),
    lacking_behaviour=(
        "runs every requested state-changing action without checking that the policy allows it"
    ),
    detector=detect,
)
