"""Check a package's verifiers taskset: `vf-validate`, then its MCP tools in process.

Run with an interpreter that has `verifiers` (see `tests/factory/test_ecosystem.py`):
`python check_verifiers.py PACKAGE_DIR`. Exit 0 when every check passes.
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import verifiers.v1 as vf
from package_under_test import load

TASKS = 6


def _vf_validate(package_dir: Path, name: str) -> list[str]:
    """`vf-validate NAME --runtime.type subprocess`: gold valid and no-op below 1 on every task."""
    with tempfile.TemporaryDirectory() as scratch:
        command = [
            str(Path(sys.executable).with_name("vf-validate")),
            name,
            "--runtime.type",
            "subprocess",
            "--rich",
            "false",
            "-o",
            scratch,
            "--run.name",
            "check",
            "--taskset.num-tasks",
            str(TASKS),
        ]
        environment = {**os.environ, "PYTHONPATH": str(package_dir)}
        run = subprocess.run(
            command,
            cwd=scratch,
            env=environment,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        summaries = list(Path(scratch).rglob("summary.json"))
        if run.returncode != 0 or not summaries:
            return [f"vf-validate failed (exit {run.returncode}): {run.stderr[-1500:]}"]
        summary = json.loads(summaries[0].read_text())
    # vf-validate exits 0 even when tasks are invalid: the summary says.
    print("vf-validate:", json.dumps({k: summary[k] for k in ("checks", "valid_rate")}))
    if summary["valid_rate"] != 1.0 or summary["total"] != TASKS:
        return [
            f"vf-validate: valid_rate {summary['valid_rate']} on {summary['total']} tasks"
        ]
    return []


async def _tools(package: object, verifiers_env: object) -> list[str]:
    """The toolset advertises the kit's schemas verbatim and plays the gold calls to the gold state."""
    runtime = importlib.import_module(f"{package.__name__}._runtime")
    family = package.FAMILY
    toolset_class = next(
        getattr(verifiers_env, n) for n in dir(verifiers_env) if n.endswith("Toolset")
    )
    toolset = toolset_class(vf.ToolsetConfig())
    advertised = {tool.name: tool.input_schema for tool in await toolset.list_tools()}
    wanted = {
        s["function"]["name"]: s["function"]["parameters"]
        for s in family.toolkit.schemas
    }
    problems = (
        [] if advertised == wanted else ["the toolset's schemas differ from the kit's"]
    )
    for seed in range(TASKS):
        task = family.generate(seed)
        toolset.state.world = copy.deepcopy(task.initial_state)
        said = []
        for turn in task.gold_turns:
            said.append({"role": "assistant", "content": turn.content})
            for call in turn.tool_calls:  # some gold calls are refused on purpose
                await toolset.call_tool(call.name, dict(call.arguments))
        verification = runtime.verify(task, family.toolkit, toolset.state.world, said)
        if not verification.success:
            problems.append(
                f"seed {seed}: gold calls through MCP do not reach the gold state"
            )
        before = copy.deepcopy(toolset.state.world)
        refused = await toolset.call_tool(family.toolkit.tool_names[0], {"no_such": 1})
        if not refused.is_error or toolset.state.world != before:
            problems.append(
                f"seed {seed}: a bad call was not refused, or changed the state"
            )
    print(f"toolset: {len(advertised)} tools, gold replayed on {TASKS} seeds")
    return problems


def main() -> None:
    package_dir, package, verifiers_env = load(sys.argv[1], "verifiers_env")
    failures = _vf_validate(package_dir, package.__name__) + asyncio.run(
        _tools(package, verifiers_env)
    )
    print("\n".join(failures) or "verifiers checks passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
