"""TRACE environment runtime: what every generated package shares.

A package copies this folder verbatim into `trace_env_<cap>/_runtime/` with its
kit under `kits/`; its `task.py` imports `Task`, `Turn`, `Knob`, `call`, `say`
and `money` from here and its kit's `TOOLKIT`. Depends on gymnasium only
(`properties` also needs hypothesis, for tests).
"""

from .env import TaskEnv
from .family import TaskFamily, find_capability
from .policies import Episode, gold_policy, lacking_policy, run_episode
from .schema import ToolError
from .task import Knob, Task, ToolCall, Turn, call, money, say
from .toolkit import State, Toolkit
from .verifier import Verification, state_hash, verify

RUNTIME_VERSION = "2.2.0"

__all__ = [
    "RUNTIME_VERSION",
    "Episode",
    "Knob",
    "State",
    "Task",
    "TaskEnv",
    "TaskFamily",
    "ToolCall",
    "ToolError",
    "Toolkit",
    "Turn",
    "Verification",
    "call",
    "find_capability",
    "gold_policy",
    "lacking_policy",
    "money",
    "run_episode",
    "say",
    "state_hash",
    "verify",
]
