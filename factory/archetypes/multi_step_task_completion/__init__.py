"""Multi-step task completion: Carrying out every operation of a request with several parts before closing the conversation."""

from factory.archetypes.registry import Archetype

from .detector import detect

ARCHETYPE = Archetype(
    id="multi_step_task_completion",
    title="Multi-step task completion",
    description=(
        "Carrying out every operation of a request with several parts before closing the conversation."
    ),
    lacking_behaviour=(
        "does the first of the requested operations and then closes the conversation as if it were done"
    ),
    detector=detect,
)
