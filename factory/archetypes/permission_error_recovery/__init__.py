"""Permission error recovery: Recovering when a tool fails because a device setting is off: reading the error, enabling the setting (and what blocks it), and retrying."""

from factory.archetypes.registry import Archetype

from .detector import detect

ARCHETYPE = Archetype(
    id="permission_error_recovery",
    title="Permission error recovery",
    description=(
        "Recovering when a tool fails because a device setting is off: reading the error, enabling the setting (and what blocks it), and retrying."
    ),
    lacking_behaviour=(
        "gives up after the tool's error and tells the user it cannot be done"
    ),
    detector=detect,
)
