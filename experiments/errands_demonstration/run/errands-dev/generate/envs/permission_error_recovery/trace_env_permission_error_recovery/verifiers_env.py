"""verifiers taskset of the `permission_error_recovery` environment (extra `verifiers`).

The package exports the taskset lazily, so verifiers finds it by the package's
name: `vf-validate trace_env_permission_error_recovery --runtime.type subprocess`. Verifiers runs this
module as `python -m trace_env_permission_error_recovery.verifiers_env` to serve the kit's tools; it
needs the `verifiers` library, unlike the rest of the package.
"""

from . import PermissionErrorRecoveryEnv
from ._runtime import verifiers_bridge

PermissionErrorRecoveryTaskset, PermissionErrorRecoveryToolset = (
    verifiers_bridge.verifiers_classes(
        PermissionErrorRecoveryEnv, "trace_env_permission_error_recovery.verifiers_env"
    )
)

__all__ = ["PermissionErrorRecoveryTaskset"]

if __name__ == "__main__":
    PermissionErrorRecoveryToolset.run()
