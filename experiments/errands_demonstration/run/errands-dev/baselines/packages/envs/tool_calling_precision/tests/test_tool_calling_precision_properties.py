"""Property tests of the `tool_calling_precision` environment: the runtime's suite on this package.

Each property (`_runtime/properties.py`) runs over hypothesis-drawn seeds: the
gold policy succeeds and the capability-lacking policy fails on every seed, any
missing or altered gold action fails, the state hash is canonical, no malformed
action raises or changes the state, `check_env` passes, and the gymnasium
registration works with `make` and `make_vec`.
"""

from collections.abc import Callable

import pytest

from trace_env_tool_calling_precision import ENV_ID, ToolCallingPrecisionEnv
from trace_env_tool_calling_precision._runtime.properties import (
    PROPERTIES,
    registration_works,
)


@pytest.mark.parametrize("prop", PROPERTIES, ids=lambda prop: prop.__name__)
def test_property(prop: Callable[[type[ToolCallingPrecisionEnv]], None]) -> None:
    prop(ToolCallingPrecisionEnv)


def test_registration_works() -> None:
    registration_works(ENV_ID, ToolCallingPrecisionEnv)
