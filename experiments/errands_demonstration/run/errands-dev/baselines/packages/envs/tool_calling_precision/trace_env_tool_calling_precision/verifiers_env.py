"""verifiers taskset of the `tool_calling_precision` environment (extra `verifiers`).

The package exports the taskset lazily, so verifiers finds it by the package's
name: `vf-validate trace_env_tool_calling_precision --runtime.type subprocess`. Verifiers runs this
module as `python -m trace_env_tool_calling_precision.verifiers_env` to serve the kit's tools; it
needs the `verifiers` library, unlike the rest of the package.
"""

from . import ToolCallingPrecisionEnv
from ._runtime import verifiers_bridge

ToolCallingPrecisionTaskset, ToolCallingPrecisionToolset = (
    verifiers_bridge.verifiers_classes(
        ToolCallingPrecisionEnv, "trace_env_tool_calling_precision.verifiers_env"
    )
)

__all__ = ["ToolCallingPrecisionTaskset"]

if __name__ == "__main__":
    ToolCallingPrecisionToolset.run()
