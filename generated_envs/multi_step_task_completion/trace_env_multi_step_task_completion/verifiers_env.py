"""verifiers taskset of the `multi_step_task_completion` environment (extra `verifiers`).

The package exports the taskset lazily, so verifiers finds it by the package's
name: `vf-validate trace_env_multi_step_task_completion --runtime.type subprocess`. Verifiers runs this
module as `python -m trace_env_multi_step_task_completion.verifiers_env` to serve the kit's tools; it
needs the `verifiers` library, unlike the rest of the package.
"""

from . import MultiStepTaskCompletionEnv
from ._runtime import verifiers_bridge

MultiStepTaskCompletionTaskset, MultiStepTaskCompletionToolset = (
    verifiers_bridge.verifiers_classes(
        MultiStepTaskCompletionEnv, "trace_env_multi_step_task_completion.verifiers_env"
    )
)

__all__ = ["MultiStepTaskCompletionTaskset"]

if __name__ == "__main__":
    MultiStepTaskCompletionToolset.run()
