"""verifiers taskset of the `precondition_verification` environment (extra `verifiers`).

The package exports the taskset lazily, so verifiers finds it by the package's
name: `vf-validate trace_env_precondition_verification --runtime.type subprocess`. Verifiers runs this
module as `python -m trace_env_precondition_verification.verifiers_env` to serve the kit's tools; it
needs the `verifiers` library, unlike the rest of the package.
"""

from . import PreconditionVerificationEnv
from ._runtime import verifiers_bridge

PreconditionVerificationTaskset, PreconditionVerificationToolset = (
    verifiers_bridge.verifiers_classes(
        PreconditionVerificationEnv, "trace_env_precondition_verification.verifiers_env"
    )
)

__all__ = ["PreconditionVerificationTaskset"]

if __name__ == "__main__":
    PreconditionVerificationToolset.run()
