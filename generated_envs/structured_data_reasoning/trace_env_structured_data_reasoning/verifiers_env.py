"""verifiers taskset of the `structured_data_reasoning` environment (extra `verifiers`).

The package exports the taskset lazily, so verifiers finds it by the package's
name: `vf-validate trace_env_structured_data_reasoning --runtime.type subprocess`. Verifiers runs this
module as `python -m trace_env_structured_data_reasoning.verifiers_env` to serve the kit's tools; it
needs the `verifiers` library, unlike the rest of the package.
"""

from . import StructuredDataReasoningEnv
from ._runtime import verifiers_bridge

StructuredDataReasoningTaskset, StructuredDataReasoningToolset = (
    verifiers_bridge.verifiers_classes(
        StructuredDataReasoningEnv, "trace_env_structured_data_reasoning.verifiers_env"
    )
)

__all__ = ["StructuredDataReasoningTaskset"]

if __name__ == "__main__":
    StructuredDataReasoningToolset.run()
