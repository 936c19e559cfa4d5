"""Structured data reasoning: Reading nested tool results correctly: picking the right field of a per-cabin price table, a variant's options and availability, or a location or clock reading, and computing totals from them."""

from factory.archetypes.registry import Archetype

from .detector import detect

ARCHETYPE = Archetype(
    id="structured_data_reasoning",
    title="Structured data reasoning",
    description=(
        "Reading nested tool results correctly: picking the right field of a per-cabin price table, a variant's options and availability, or a location or clock reading, and computing totals from them."
    ),
    lacking_behaviour=(
        "misreads the nested record (the wrong cabin's price, or a variant that is not available) and acts and reports on the wrong value"
    ),
    detector=detect,
)
