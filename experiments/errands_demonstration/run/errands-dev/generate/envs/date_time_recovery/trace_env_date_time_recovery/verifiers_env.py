"""verifiers taskset of the `date_time_recovery` environment (extra `verifiers`).

The package exports the taskset lazily, so verifiers finds it by the package's
name: `vf-validate trace_env_date_time_recovery --runtime.type subprocess`. Verifiers runs this
module as `python -m trace_env_date_time_recovery.verifiers_env` to serve the kit's tools; it
needs the `verifiers` library, unlike the rest of the package.
"""

from . import DateTimeRecoveryEnv
from ._runtime import verifiers_bridge

DateTimeRecoveryTaskset, DateTimeRecoveryToolset = verifiers_bridge.verifiers_classes(
    DateTimeRecoveryEnv, "trace_env_date_time_recovery.verifiers_env"
)

__all__ = ["DateTimeRecoveryTaskset"]

if __name__ == "__main__":
    DateTimeRecoveryToolset.run()
