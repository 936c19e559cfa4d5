"""The capability spec (`capability.json`): a versioned pydantic model.

It is the output of `factory analyze` and the input of `factory generate`; a bad
file is rejected with errors that name the field, the bad value and what is allowed.
"""

from __future__ import annotations

import json
import keyword
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from factory.errors import FactoryError
from factory.runtime.family import MAX_SPEC_BYTES

SCHEMA_VERSION = "1.0"
MAX_TOOLS_BYTES = 5 << 20
NAME_PATTERN = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class ToolParameters(BaseModel):
    """A tool's `parameters`: a JSON-schema object whose property names are identifiers."""

    model_config = ConfigDict(extra="allow")
    type: Literal["object"] = "object"
    properties: dict[str, dict[str, Any]] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=list)

    @field_validator("properties")
    @classmethod
    def _identifiers(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            if not re.match(IDENTIFIER, name) or keyword.iskeyword(name):
                raise ValueError(f"parameter '{name[:40]}' must be a Python identifier")
        return value


class ToolFunction(BaseModel):
    """The `function` part of an OpenAI tool schema."""

    model_config = ConfigDict(extra="allow")
    name: str = Field(pattern=IDENTIFIER)
    description: str = ""
    parameters: ToolParameters = Field(default_factory=ToolParameters)


class ToolSchema(BaseModel):
    """One OpenAI tool schema (`{"type": "function", "function": {...}}`)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["function"] = "function"
    function: ToolFunction


class InlineTarget(_Model):
    """A custom target: its tools (OpenAI schemas), policy text, state description and samples."""

    tools: list[ToolSchema] = Field(min_length=1, max_length=64)
    policy: str = Field(min_length=1, max_length=100_000)
    state: str = Field(
        min_length=1, max_length=20_000, description="what the target's state holds"
    )
    samples: list[dict[str, Any]] = Field(
        default_factory=list, max_length=20, description="sample state records"
    )

    @field_validator("tools")
    @classmethod
    def _unique(cls, value: list[ToolSchema]) -> list[ToolSchema]:
        names = [tool.function.name for tool in value]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"tool names must be unique, repeated: {duplicated}")
        if any(keyword.iskeyword(n) for n in names):
            raise ValueError("tool names may not be Python keywords")
        return value

    def schemas(self) -> list[dict[str, Any]]:
        """The tools as plain OpenAI schemas (what kit.json holds)."""
        return [tool.model_dump(exclude_unset=False) for tool in self.tools]


class FailurePattern(_Model):
    """Where the analysis saw the capability lacking."""

    task_id: str
    run: str = ""  # the source's ids: tau2 simulation and trial, ToolSandbox scenario
    note: str = ""


class Evidence(_Model):
    """The contrastive statistics that retained the capability (paper section 3.3)."""

    er_pos: float = Field(ge=0, le=1, description="lacking rate among successes")
    er_neg: float = Field(ge=0, le=1, description="lacking rate among failures")
    delta: float = Field(ge=-1, le=1, description="er_neg - er_pos")
    coverage: float = Field(ge=0, le=1, description="share of failures lacking it")
    runs_selected: int = Field(ge=0)
    runs_total: int = Field(ge=1)
    n_failed: int = Field(ge=0)
    n_passed: int = Field(ge=0)


class Generation(_Model):
    """How the environment is generated: episode length, difficulty, reward."""

    max_turns: int = Field(default=30, ge=2, le=200)
    difficulty: dict[str, int] = Field(default_factory=dict)
    reward_mode: Literal["binary", "partial"] = "binary"
    validation_seeds: int = Field(default=50, ge=1, le=10_000)
    tools: list[Annotated[str, Field(pattern=IDENTIFIER)]] | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="the kit's tools the package exposes (default: all of them)",
    )
    policy: str | None = Field(
        default=None,
        min_length=1,
        max_length=100_000,
        description="the policy text the package's system prompt shows (default: the "
        "kit's): a target's own, so an adapter trains on the prompt it is used with",
    )


class CapabilitySpec(_Model):
    """One capability the agent lacks, and how to build its training environment."""

    schema_version: Literal["1.0"] = SCHEMA_VERSION
    name: str = Field(min_length=2, max_length=48, pattern=NAME_PATTERN)
    title: str = Field(min_length=1, max_length=120)
    description: str = Field(min_length=10)
    archetype: str | None = None
    target: str | InlineTarget
    failure_patterns: list[FailurePattern] = Field(default_factory=list)
    evidence: Evidence | None = None
    generation: Generation = Field(default_factory=Generation)

    @field_validator("name")
    @classmethod
    def _not_a_keyword(cls, value: str) -> str:
        if keyword.iskeyword(value):
            raise ValueError(f"'{value}' is a Python keyword")
        return value

    @field_validator("title", "description")
    @classmethod
    def _printable(cls, value: str) -> str:
        if (
            '"""' in value
            or "\\" in value
            or any(ord(c) < 32 and c != "\n" for c in value)
        ):
            raise ValueError(
                "may not contain triple quotes, backslashes or control characters"
            )
        return value

    def to_json(self) -> str:
        """Canonical JSON text (2-space indent, trailing newline); `generation.tools`
        and `generation.policy` only when set (without them: the kit's own)."""
        unset = {n for n in ("tools", "policy") if getattr(self.generation, n) is None}
        dumped = self.model_dump_json(indent=2, exclude={"generation": unset})
        return dumped + "\n"


def describe_error(error: dict[str, Any]) -> str:
    """One of pydantic's errors as `field: what is wrong (got value)`."""
    field = ".".join(str(part) for part in error["loc"]) or "(top level)"
    value = error.get("input")
    shown = json.dumps(value)[:80] if not isinstance(value, dict) else "{...}"
    message = error["msg"]
    if error["type"] == "string_pattern_mismatch" and field == "name":
        message = "must be snake_case: lower-case letters, digits and single underscores, starting with a letter"
    return f"{field}: {message} (got {shown})"


def _tools_from_file(data: dict[str, Any], base: Path, source: str) -> None:
    """An inline target's `tools` given as a path: read the JSON list beside the spec."""
    target = data.get("target")
    if not (isinstance(target, dict) and isinstance(target.get("tools"), str)):
        return
    path = base / target["tools"]
    try:
        if path.stat().st_size > MAX_TOOLS_BYTES:
            raise FactoryError(f"{source}: target.tools file {path} is over 5 MB")
        target["tools"] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FactoryError(
            f"{source}: target.tools names {path}, which is not a readable JSON list of "
            f"OpenAI tool schemas ({exc})"
        ) from None


def parse_spec(
    text: str, source: str = "capability spec", base: Path | None = None
) -> CapabilitySpec:
    """Validate spec JSON text; raise FactoryError listing every bad field.

    `base`: the spec's folder, against which an inline target's `tools` path is read.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FactoryError(
            f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise FactoryError(f"{source} is nested too deeply") from None
    if not isinstance(data, dict):
        raise FactoryError(f"{source} must be a JSON object with the spec's fields")
    if base is not None:
        _tools_from_file(data, base, source)
    try:
        spec = CapabilitySpec.model_validate(data)
    except ValidationError as exc:
        lines = [f"  - {describe_error(error)}" for error in exc.errors()]
        raise FactoryError(
            f"{source} is not a valid capability spec ({len(lines)} problem(s)):\n"
            + "\n".join(lines)
            + "\nRun `factory schema` for the full JSON Schema."
        ) from None
    text = spec.to_json()
    size = len(text.encode("utf-8"))
    if (
        size > MAX_SPEC_BYTES
    ):  # the package's runtime would refuse its own capability.json
        written = json.loads(text)
        largest = max(written, key=lambda key: len(json.dumps(written[key])))
        raise FactoryError(
            f"{source}: as a package's capability.json it would be {size:,} bytes, over "
            f"the {MAX_SPEC_BYTES:,} a package reads; shorten '{largest}'"
        )
    return spec


def load_spec(path: str | Path) -> CapabilitySpec:
    """Read and validate a capability.json file."""
    path = Path(path)
    if not path.is_file():
        raise FactoryError(f"capability spec not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FactoryError(
            f"cannot read capability spec {path} ({exc}); it must be UTF-8 JSON"
        ) from None
    return parse_spec(text, str(path), path.parent)


def json_schema() -> dict[str, Any]:
    """The spec's JSON Schema, for `factory schema`."""
    return CapabilitySpec.model_json_schema()
