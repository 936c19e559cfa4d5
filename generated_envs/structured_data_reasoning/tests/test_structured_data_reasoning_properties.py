"""Property tests of the `structured_data_reasoning` environment: the runtime's suite on this package.

Each property (`_runtime/properties.py`) runs over hypothesis-drawn seeds: the
gold policy succeeds and the capability-lacking policy fails on every seed, any
missing or altered gold action fails, the state hash is canonical, no malformed
action raises or changes the state, `check_env` passes, and the gymnasium
registration works with `make` and `make_vec`.
"""

from collections.abc import Callable

import pytest

from trace_env_structured_data_reasoning import ENV_ID, StructuredDataReasoningEnv
from trace_env_structured_data_reasoning._runtime.properties import (
    PROPERTIES,
    registration_works,
)


@pytest.mark.parametrize("prop", PROPERTIES, ids=lambda prop: prop.__name__)
def test_property(prop: Callable[[type[StructuredDataReasoningEnv]], None]) -> None:
    prop(StructuredDataReasoningEnv)


def test_registration_works() -> None:
    registration_works(ENV_ID, StructuredDataReasoningEnv)
