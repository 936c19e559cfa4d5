"""LLM labeller: discovery and labelling through any OpenAI-compatible endpoint.

Discovery shows the model failed and successful trajectories and asks for a
dictionary of capabilities (validated JSON); labelling asks, for each trajectory,
NA / PRESENT / LACKING for every capability of that fixed dictionary. Answers
that are not valid JSON are retried with the error; requests run concurrently;
answers are cached by a hash of (model, run, prompt), so a rerun costs nothing.
The endpoint comes from OPENAI_BASE_URL / OPENAI_API_KEY, as the openai client reads them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator
from tqdm import tqdm

from factory.analyze.specs import snake_name
from factory.archetypes import archetypes
from factory.errors import FactoryError
from factory.llm import chat, json_payload, openai_client
from factory.outputs import write_text
from factory.trajectory.labels import Capability, Judgement, Label
from factory.trajectory.records import Trajectory

DISCOVERY_PROMPT = """\
You analyse an LLM agent's trajectories on a tool-using environment to find the
capabilities it lacks. A capability is one or more actions in a trajectory that
are necessary to solve a subset of tasks (for example: verifying a policy
precondition before a state-changing action). Compare the FAILED and the
SUCCESSFUL trajectories below and list the capabilities whose absence explains
the failures. Map each to one of these built-in archetypes when it fits, else null:
{archetypes}

Answer with JSON only:
{{"capabilities": [{{"name": "snake_case_name", "description": "one sentence",
"archetype": "<archetype id or null>"}}]}}"""

LABEL_PROMPT = """\
For the agent trajectory below, judge each capability of this fixed dictionary:
{dictionary}

For each capability answer NA (the task did not need it), PRESENT (needed and
exercised correctly) or LACKING (needed and not exercised, or done wrong), with a
one-sentence reason. Answer with JSON only:
{{"labels": {{"<capability name>": {{"label": "NA|PRESENT|LACKING", "reason": "..."}}}}}}"""


class _Discovered(BaseModel):
    name: str = Field(min_length=2, max_length=60)
    description: str = Field(min_length=5)
    archetype: str | None = None


class _DiscoveryAnswer(BaseModel):
    capabilities: list[_Discovered] = Field(min_length=1)


class _LabelAnswer(BaseModel):
    label: Literal["NA", "PRESENT", "LACKING"]
    reason: str = ""


class _LabellingAnswer(BaseModel):
    labels: dict[str, _LabelAnswer]

    @field_validator("labels", mode="before")
    @classmethod
    def _bare(cls, labels: Any) -> Any:
        """A label without its reason (`"name": "NA"`), as small models write it
        (Qwen2.5-Coder-0.5B does on every run), is the label with no reason."""
        if isinstance(labels, dict):
            return {
                k: {"label": v} if isinstance(v, str) else v for k, v in labels.items()
            }
        return labels


def transcript(
    trajectory: Trajectory, limit: int = 12_000, per_message: int = 600
) -> str:
    """A compact text rendering of a trajectory for prompts."""
    lines = [
        f"task {trajectory.task_id} ({'SUCCESS' if trajectory.success else 'FAILURE'})"
    ]
    for message in trajectory.messages:
        role = str(message.get("role", "?")).upper()
        content = str(message.get("content") or "")
        if content:
            lines.append(f"{role}: {content[:per_message]}")
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            lines.append(
                f"TOOL CALL {function.get('name')}({str(function.get('arguments'))[:per_message]})"
            )
    text = "\n".join(lines)
    return text if len(text) <= limit else text[:limit] + "\n[... truncated]"


# Tokens an answer may take, sent with each request: a server's own default can be
# short (`router serve` gives a chat reply 256 tokens, too few for a label and a
# reason per capability, which a small model then cuts off as invalid JSON).
ANSWER_TOKENS = 2048
TEMPERATURE = 0.7  # labels vary a little between the bootstrap's runs


class LLMLabeller:
    """Discovery and labelling runs against one model of an OpenAI-compatible endpoint."""

    def __init__(
        self,
        model: str,
        cache_dir: Path,
        client: Any = None,
        concurrency: int = 4,
        max_retries: int = 3,
        temperature: float = TEMPERATURE,
    ) -> None:
        self.client = client or openai_client(
            "LLM labelling", "or drop --llm-model to use the offline detectors"
        )
        self.model = model
        self.cache_dir = Path(cache_dir)
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.temperature = temperature

    def _ask(
        self, system: str, user: str, run: int, schema: type[BaseModel]
    ) -> BaseModel:
        """One validated answer, from the cache or the endpoint (retried on bad JSON)."""
        key = hashlib.sha256(
            json.dumps([self.model, run, system, user]).encode()
        ).hexdigest()
        cached = self.cache_dir / f"{key}.json"
        if cached.is_file():
            return schema.model_validate_json(cached.read_text(encoding="utf-8"))
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": user},
        ]
        problem = ""
        for _ in range(self.max_retries):
            reply = chat(
                self.client,
                model=self.model,
                messages=messages,
                temperature=self.temperature,
                max_tokens=ANSWER_TOKENS,
            )
            text = reply.content or ""
            try:
                answer = schema.model_validate(json_payload(text))
            except (ValueError, ValidationError) as exc:
                problem = str(exc).splitlines()[0]
                messages += [
                    {"role": "assistant", "content": text},
                    {
                        "role": "user",
                        "content": f"That was not valid: {problem}. Answer with the JSON only.",
                    },
                ]
                continue
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            write_text(cached, answer.model_dump_json())
            return answer
        raise FactoryError(
            f"model {self.model} gave no valid JSON after {self.max_retries} tries: {problem}"
        )

    def discover(
        self, trajectories: Sequence[Trajectory], sample: int = 8
    ) -> list[Capability]:
        """Build the fixed capability dictionary from failed and successful examples."""
        failed = [t for t in trajectories if not t.success][:sample]
        passed = [t for t in trajectories if t.success][: max(2, sample // 2)]
        listing = "\n".join(f"- {a.id}: {a.description}" for a in archetypes().values())
        user = "FAILED:\n\n" + "\n\n".join(transcript(t, 4000) for t in failed)
        user += "\n\nSUCCESSFUL:\n\n" + "\n\n".join(transcript(t, 4000) for t in passed)
        answer = self._ask(
            DISCOVERY_PROMPT.format(archetypes=listing), user, 0, _DiscoveryAnswer
        )
        dictionary: dict[str, Capability] = {}
        for found in answer.capabilities:  # type: ignore[attr-defined]
            name = snake_name(found.name)
            archetype = found.archetype if found.archetype in archetypes() else None
            dictionary.setdefault(name, Capability(name, found.description, archetype))
        return list(dictionary.values())

    def label_run(
        self,
        trajectories: Sequence[Trajectory],
        capabilities: Sequence[Capability],
        run: int,
    ) -> list[dict[str, Judgement]]:
        """One labelling run over every trajectory (concurrent requests)."""
        dictionary = "\n".join(f"- {c.name}: {c.description}" for c in capabilities)
        system = LABEL_PROMPT.format(dictionary=dictionary)

        def label(trajectory: Trajectory) -> dict[str, Judgement]:
            answer = self._ask(system, transcript(trajectory), run, _LabellingAnswer)
            given = answer.labels  # type: ignore[attr-defined]
            return {
                c.name: Judgement(Label(given[c.name].label), given[c.name].reason)
                if c.name in given
                else Judgement(Label.NA, "the model gave no label")
                for c in capabilities
            }

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(
                tqdm(
                    pool.map(label, trajectories),
                    total=len(trajectories),
                    desc=f"LLM labelling run {run + 1}",
                    leave=False,
                )
            )
