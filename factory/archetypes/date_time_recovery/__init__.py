"""Date and time reasoning with tools: Resolving relative dates and times ('next Friday at 9', 'in 3 days', '5 hours from now') with the clock and date tools instead of guessing."""

from factory.archetypes.registry import Archetype

from .detector import detect, fit

ARCHETYPE = Archetype(
    id="date_time_recovery",
    title="Date and time reasoning with tools",
    description=(
        "Resolving relative dates and times ('next Friday at 9', 'in 3 days', '5 hours from now') with the clock and date tools instead of guessing."
    ),
    lacking_behaviour=(
        "computes the relative date in its head and gets it wrong (weekday numbering, time of day, or the day rollover)"
    ),
    detector=detect,
    fit=fit,
)
