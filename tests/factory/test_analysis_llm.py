"""The LLM labeller through the real openai client against a local scripted server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from factory.analyze.simulate import simulate
from factory.cli import main
from tests.conftest import ROOT
from tests.scripted_endpoint import scripted_endpoint

PACKAGES = [
    ROOT / "generated_envs" / n
    for n in ("precondition_verification", "tool_calling_precision")
]
DISCOVERY = {
    "capabilities": [
        {
            "name": "Policy check",
            "description": "Check eligibility under the policy before cancelling.",
            "archetype": "precondition_verification",
        },
        {
            "name": "politeness",
            "description": "Greets the user warmly before acting.",
            "archetype": None,
        },
    ]
}


def _answer(state: dict[str, int]):
    """Discovery (malformed once, then fenced JSON) and per-run labels."""

    def answer(body: dict) -> str:
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if "list the capabilities" in system:
            if state["malformed_left"]:
                state["malformed_left"] -= 1
                return "Sure! Here they are: {capabilities: [oops"
            return "```json\n" + json.dumps(DISCOVERY) + "\n```"
        task, outcome = re.match(r"task (\S+) \((\w+)\)", user).groups()
        lacking = outcome == "FAILURE" and task.startswith("precondition_verification")
        return json.dumps(
            {
                "labels": {
                    "policy_check": {
                        "label": "LACKING" if lacking else "PRESENT",
                        "reason": "scripted",
                    },
                    # a bare label, without its reason, as small models write it
                    "politeness": "LACKING",
                }
            }
        )

    return answer


@dataclass
class Endpoint:
    requests: list[dict]


@pytest.fixture
def endpoint(monkeypatch) -> Iterator[Endpoint]:
    with scripted_endpoint(monkeypatch, _answer({"malformed_left": 1})) as requests:
        yield Endpoint(requests)


def test_llm_discovery_labelling_selection_and_cache(
    tmp_path, endpoint, capsys
) -> None:
    runs = tmp_path / "runs.json"
    runs.write_text(
        json.dumps(simulate(PACKAGES, {"precondition_verification": 0.8}, 30, seed=7))
    )
    command = [
        "analyze",
        str(runs),
        "--target",
        "airline",
        "--llm-model",
        "scripted",
        "--runs",
        "3",
        "--min-runs",
        "2",
        "--out",
        str(tmp_path / "out"),
    ]
    assert main(command) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    retained = {r["capability"] for r in report["capabilities"] if r["retained"]}
    assert retained == {"policy_check"}  # "politeness" is lacking everywhere: gap 0
    spec = json.loads(
        (tmp_path / "out" / "capabilities" / "policy_check.json").read_text()
    )
    assert spec["archetype"] == "precondition_verification"
    assert report["settings"]["labeller"] == "LLM scripted"
    # One malformed discovery answer was retried; then 1 discovery + 3 runs x 30 labels.
    assert len(endpoint.requests) == 2 + 3 * 30
    assert "not valid" in endpoint.requests[1]["messages"][-1]["content"]
    # Every request says how long an answer may be (a server's default may be short).
    assert {r["max_tokens"] for r in endpoint.requests} == {2048}
    # A rerun is served from the cache: no new request.
    assert main([*command, "--force"]) == 0
    assert len(endpoint.requests) == 2 + 3 * 30


def test_missing_endpoint_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(simulate(PACKAGES, {}, 4, seed=1)))
    code = main(
        [
            "analyze",
            str(runs),
            "--target",
            "airline",
            "--llm-model",
            "m",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2 and "OPENAI_API_KEY" in capsys.readouterr().err
