"""Serve a package with OpenEnv on loopback, run `openenv validate`, play episodes over /ws.

Run with an interpreter that has `openenv` (see `tests/factory/test_ecosystem.py`):
`python check_openenv.py PACKAGE_DIR`. Exit 0 when every check passes.
"""

from __future__ import annotations

import importlib
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import uvicorn
from openenv.core.generic_client import GenericEnvClient
from package_under_test import load

SEEDS = range(4)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve(app: object, port: int) -> uvicorn.Server:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return server
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the OpenEnv server did not come up within 30 s")


def _play(url: str, package: object, which: str, seed: int) -> tuple[float, bool]:
    """One scripted episode over the WebSocket session; (final reward, done)."""
    runtime = importlib.import_module(f"{package.__name__}._runtime")
    env = package.FAMILY
    task = env.generate(seed)
    policy = (runtime.gold_policy if which == "gold" else runtime.lacking_policy)(task)
    with GenericEnvClient(base_url=url).sync() as client:
        result = client.reset(seed=seed)
        assert result.observation["tools"], "reset must carry the tool schemas"
        observation = json.dumps(result.observation["messages"])
        for _ in range(env.max_turns):
            result = client.step(json.loads(policy(observation)))
            observation = json.dumps(result.observation["messages"])
            if result.done:
                return float(result.reward or 0.0), True
    return 0.0, False


def main() -> None:
    _, package, integrations = load(sys.argv[1], "integrations")
    port = _free_port()
    server = _serve(integrations.openenv_app(), port)
    url = f"http://127.0.0.1:{port}"
    try:
        validate = subprocess.run(
            [str(Path(sys.executable).with_name("openenv")), "validate", "--url", url],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        print(validate.stdout[-2000:], validate.stderr[-1000:])
        failures = [] if validate.returncode == 0 else ["openenv validate failed"]
        for seed in SEEDS:
            for which, wanted in (("gold", 1.0), ("lacking", 0.0)):
                reward, done = _play(url, package, which, seed)
                print(f"{which} seed {seed}: reward {reward} done {done}")
                if not done or reward != wanted:
                    failures.append(
                        f"{which} seed {seed}: reward {reward}, done {done}"
                    )
    finally:
        server.should_exit = True
    print("\n".join(failures) or "openenv checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
