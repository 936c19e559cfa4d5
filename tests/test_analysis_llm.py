"""The LLM labeller through the real openai client against a local scripted server."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from factory.analyze.simulate import simulate
from factory.cli import main
from tests.conftest import ROOT

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


class ScriptedModel(BaseHTTPRequestHandler):
    """An OpenAI-compatible /chat/completions with scripted answers."""

    requests: list[dict] = []
    malformed_left = 1

    def do_POST(self) -> None:  # noqa: N802 - http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        system, user = body["messages"][0]["content"], body["messages"][1]["content"]
        if "list the capabilities" in system:
            if type(self).malformed_left:
                type(self).malformed_left -= 1
                content = "Sure! Here they are: {capabilities: [oops"
            else:
                content = "```json\n" + json.dumps(DISCOVERY) + "\n```"
        else:
            task, outcome = re.match(r"task (\S+) \((\w+)\)", user).groups()
            lacking = outcome == "FAILURE" and task.startswith(
                "precondition_verification"
            )
            content = json.dumps(
                {
                    "labels": {
                        "policy_check": {
                            "label": "LACKING" if lacking else "PRESENT",
                            "reason": "scripted",
                        },
                        "politeness": {"label": "LACKING", "reason": "never greets"},
                    }
                }
            )
        answer = {
            "id": "cmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint(monkeypatch) -> Iterator[type[ScriptedModel]]:
    ScriptedModel.requests, ScriptedModel.malformed_left = [], 1
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(
        "OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1"
    )
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield ScriptedModel
    server.shutdown()


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
        "--output",
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
            "--output",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2 and "OPENAI_API_KEY" in capsys.readouterr().err
