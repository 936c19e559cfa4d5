"""`factory calibrate`: how hard a package is for a given model, against TRACE's band.

N seeds x K samples per seed, played by a model through an OpenAI-compatible
endpoint (tools passed as OpenAI schemas) or by a local transformers model
(optionally with a PEFT adapter; the trainer registers that player, see
`PLAYERS`, so factory never imports it). Reported:
mean reward, success rate with its 95% Wilson interval, the share of
informative groups (a seed's K rewards not all equal: GRPO learns only from
those), and unbiased pass@k. TRACE trains where mean success is 0.2 to 0.6 and
at least half the groups are informative; outside that band it warns.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from factory.analyze.statistics import wilson
from factory.errors import FactoryError
from factory.outputs import unwritable_as, write_json, write_text
from factory.runtime import Knob
from factory.settings import BACKEND, MAX_NEW_TOKENS_SETTING, Backend, setting

BAND = (0.2, 0.6)
MIN_INFORMATIVE = 0.5
PASS_AT = (1, 4, 8, 16)  # pass@k reported for each k up to the samples per seed


@dataclass(frozen=True)
class Criterion:
    """One figure of the TRACE authors' calibration band, its bounds and the fix
    when the figure is below them and when above."""

    name: str
    figure: Callable[[Calibration], float]
    low: float
    high: float
    below: str
    above: str = ""

    def holds(self, result: Calibration) -> bool:
        return self.low <= self.figure(result) <= self.high

    def warning(self, result: Calibration) -> str:
        """What the figure misses and the fix."""
        value = self.figure(result)
        side, fix = (
            ("above", self.above) if value > self.high else ("below", self.below)
        )
        return f"{self.name} {value:.2f} is {side} TRACE's band [{self.low:g}, {self.high:g}]: {fix}"


def _group_share(result: Calibration, test: Callable[[list[float]], bool]) -> float:
    return sum(map(test, result.rewards)) / max(len(result.rewards), 1)


EASIER = "lower the difficulty knobs in capability.json (generation.difficulty)"
HARDER = "raise the difficulty knobs in capability.json (generation.difficulty)"
# The band of the authors' calibrate_environment.py: a package is trained where all hold.
CRITERIA = (
    Criterion("success rate", lambda r: r.success_rate, *BAND, EASIER, HARDER),
    Criterion("mean reward", lambda r: r.mean_reward, *BAND,
              f"{EASIER} (or grade it: generation.reward_mode partial)", HARDER),
    Criterion("reward std", lambda r: r.reward_std, 0.05, math.inf,
              "rewards barely vary: GRPO's advantages would be noise"),
    Criterion("informative groups", lambda r: r.informative_share, MIN_INFORMATIVE, 1.0,
              "GRPO learns only from groups whose rewards differ: change difficulty, "
              "temperature or samples"),
    Criterion("all-success groups", lambda r: _group_share(r, lambda g: min(g) >= 1.0),
              0.0, 0.2, "", f"too easy on many seeds: {HARDER}"),
    Criterion("all-zero groups", lambda r: _group_share(r, lambda g: max(g) <= 0.0),
              0.0, 0.2, "", f"hopeless on many seeds: {EASIER}"),
)  # fmt: skip


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c successes (Chen et al. 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@dataclass
class Calibration:
    """The band figures of one package for one model."""

    model: str
    seeds: list[int]
    samples: int
    rewards: list[list[float]]  # per seed, K rewards
    successes: list[list[bool]]
    failures: int = 0  # episodes that ended in an error (counted as reward 0)
    warnings: list[str] = field(default_factory=list)

    @property
    def episodes(self) -> int:
        return sum(len(group) for group in self.successes)

    @property
    def success_rate(self) -> float:
        return sum(map(sum, self.successes)) / max(self.episodes, 1)

    @property
    def mean_reward(self) -> float:
        return sum(map(sum, self.rewards)) / max(self.episodes, 1)

    @property
    def reward_std(self) -> float:
        """Population standard deviation of every episode's reward."""
        flat = [r for group in self.rewards for r in group]
        mean = sum(flat) / max(len(flat), 1)
        return math.sqrt(sum((r - mean) ** 2 for r in flat) / max(len(flat), 1))

    @property
    def informative_share(self) -> float:
        informative = [len(set(group)) > 1 for group in self.rewards]
        return sum(informative) / max(len(informative), 1)

    def pass_at(self, k: int) -> float:
        return sum(
            pass_at_k(len(group), sum(group), k) for group in self.successes
        ) / max(len(self.successes), 1)

    def ks(self) -> list[int]:
        """The k of pass@k reported: those of PASS_AT up to the samples per seed, and K."""
        return sorted({k for k in PASS_AT if k <= self.samples} | {self.samples})

    def check_band(self) -> None:
        """Fill `warnings` with every criterion of the band the figures miss."""
        self.warnings = [c.warning(self) for c in CRITERIA if not c.holds(self)]
        if self.failures:
            self.warnings.append(f"{self.failures} episode(s) ended in an error")

    def as_dict(self) -> dict[str, Any]:
        low, high = wilson(sum(map(sum, self.successes)), self.episodes)
        return {
            **asdict(self),
            "episodes": self.episodes,
            "success_rate": self.success_rate,
            "success_ci95": [low, high],
            "mean_reward": self.mean_reward,
            "reward_std": self.reward_std,
            "informative_share": self.informative_share,
            **{f"pass_at_{k}": self.pass_at(k) for k in self.ks()},
            "band": {c.name: c.holds(self) for c in CRITERIA},
        }

    def summary(self) -> str:
        low, high = wilson(sum(map(sum, self.successes)), self.episodes)
        lines = [
            f"calibration of {self.model} on {len(self.seeds)} seeds x {self.samples} samples",
            f"  success            {self.success_rate:.2f}  (95% CI {low:.2f}-{high:.2f})",
            *(
                f"  {c.name:<18} {c.figure(self):.2f}  "
                f"{'ok' if c.holds(self) else 'OUT'} [{c.low:g}, {c.high:g}]"
                for c in CRITERIA[1:]
            ),
            "  " + "   ".join(f"pass@{k} {self.pass_at(k):.2f}" for k in self.ks()),
            "  band               " + ("inside" if not self.warnings else "OUTSIDE"),
        ]
        return "\n".join(lines + [f"    - {w}" for w in self.warnings])


def _episode_openai(
    env: Any, seed: int, client: Any, model: str, temperature: float, max_tokens: int
) -> tuple[float, bool]:
    """One episode through chat completions: the env's messages and tools in, messages out."""
    from factory.llm import chat

    observation, info = env.reset(seed=seed)
    messages = json.loads(observation)
    while True:
        reply = chat(
            client,
            model=model,
            messages=messages,
            tools=info["tools"],
            temperature=temperature,
            max_tokens=max_tokens,
        )
        message = reply.model_dump(exclude_none=True)
        message = {
            k: message[k] for k in ("role", "content", "tool_calls") if k in message
        }
        messages.append(message)
        observation, reward, terminated, truncated, info = env.step(json.dumps(message))
        messages.extend(json.loads(observation))
        if terminated or truncated:
            return float(reward), bool(info.get("success", False))


def package_env(package_dir: Path) -> type:
    """The Env class of the package in `package_dir` (imported from its folder)."""
    from factory.package_layout import PackageNames
    from factory.spec import load_spec

    if not (package_dir / "capability.json").is_file():
        raise FactoryError(
            f"{package_dir} is not a generated package (no capability.json)"
        )
    names = PackageNames(load_spec(package_dir / "capability.json").name)
    sys.path.insert(0, str(package_dir.resolve()))
    try:
        module = importlib.import_module(names.package)
    except Exception as exc:  # noqa: BLE001 - any import failure is the package's
        raise FactoryError(
            f"{package_dir}: cannot import {names.package} ({exc!r}); run `factory "
            "validate` on it"
        ) from None
    finally:
        sys.path.pop(0)
    return getattr(module, f"{names.camel}Env")


def calibrate_openai(
    env_class: type,
    model: str,
    seeds: Sequence[int],
    samples: int,
    temperature: float,
    max_new_tokens: int,
    client: Any = None,
    difficulty: dict[str, int] | None = None,
    concurrent: int = 1,  # 0: all at once
) -> Calibration:
    """Play K episodes per seed through an OpenAI-compatible endpoint, up to
    `concurrent` conversations at once (a batching server decodes them together);
    each episode has its own env, and the figures do not depend on the order."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from tqdm import tqdm

    from factory.llm import openai_client

    client = client or openai_client(
        "factory calibrate", "or pass a local model folder"
    )

    def episode(seed: int) -> tuple[float, bool]:
        env = env_class(difficulty=difficulty)
        return _episode_openai(env, seed, client, model, temperature, max_new_tokens)

    played = [seed for seed in seeds for _ in range(samples)]
    results: list[tuple[float, bool]] = [(0.0, False)] * len(played)
    bar = tqdm(total=len(played), desc="calibrate", unit="episode")
    pool = ThreadPoolExecutor(max_workers=concurrent or len(played))
    try:
        futures = {pool.submit(episode, seed): i for i, seed in enumerate(played)}
        for future in as_completed(futures):
            results[futures[future]] = future.result()
            bar.update(1)
    finally:  # a failed episode (an endpoint error) stops the others waiting
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    groups = [results[i : i + samples] for i in range(0, len(results), samples)]
    rewards = [[r for r, _ in group] for group in groups]
    successes = [[s for _, s in group] for group in groups]
    return Calibration(model, list(seeds), samples, rewards, successes)


# A local model is played by the side that owns models: the trainer registers its
# player under this entry-point group (pyproject.toml), so factory never imports it.
PLAYERS = "trace_factory.players"


def local_player() -> Callable[..., Calibration]:
    """The installed player of local models (`trainer.calibration.calibrate_local`)."""
    from importlib.metadata import entry_points

    found = entry_points(group=PLAYERS, name="local")
    if not found:
        raise FactoryError(
            "calibrating a local model needs the trainer's player: install the "
            "project with its train extra (`pip install -e '.[train]'`), or give "
            "--model an OpenAI-compatible endpoint's model name"
        )
    return next(iter(found)).load()


def _grid(knob: Knob) -> list[int]:
    """Up to five values across a knob's range: its ends, default and quartiles."""
    low, high = knob.minimum, knob.maximum
    values = {low, high, knob.default, (low + high) // 2}
    values |= {low + (high - low) // 4, high - (high - low) // 4}
    return sorted(values)


def _distance(result: Calibration) -> float:
    """How far from the band's middle, plus 1 for each other criterion that fails."""
    middle = sum(BAND) / 2
    misses = sum(not c.holds(result) for c in CRITERIA[1:])
    return abs(result.success_rate - middle) + misses


def tune(
    play: Callable[[dict[str, int]], Calibration],
    knobs: Sequence[Knob],
    start: dict[str, int],
) -> tuple[dict[str, int], Calibration, list[tuple[dict[str, int], Calibration]]]:
    """Coordinate search over the knobs for the figures nearest the band's middle.

    Each knob in turn tries its grid with the others held at the best so far;
    returns (best knob values, their calibration, every setting tried).
    """
    best, best_result = dict(start), play(dict(start))
    tried = [(dict(start), best_result)]
    for knob in knobs:
        for value in _grid(knob):
            if value == best[knob.name]:
                continue
            candidate = {**best, knob.name: value}
            result = play(candidate)
            tried.append((candidate, result))
            if _distance(result) < _distance(best_result):
                best, best_result = candidate, result
    return best, best_result, tried


def tuned_spec(spec_path: Path, package_name: str) -> Any:
    """The spec `--tune` will update, checked to be the calibrated package's."""
    from factory.spec import load_spec

    spec = load_spec(spec_path)
    if spec.name != package_name:
        raise FactoryError(
            f"--spec: {spec_path} is the spec of '{spec.name}', not of the calibrated "
            f"package '{package_name}'"
        )
    return spec


def write_difficulty(
    spec_path: Path, package_name: str, difficulty: dict[str, int]
) -> str:
    """Write tuned knob values into the spec (atomically); the spec's text as written."""
    spec = tuned_spec(spec_path, package_name)
    spec.generation.difficulty = dict(difficulty)
    text = spec.to_json()
    with unwritable_as(FactoryError, f"--spec {spec_path}", "give a writable file"):
        write_text(spec_path, text)
    return text


class CalibrationSettings(BaseModel):
    """How `factory calibrate` plays a package, declared once (the CLI derives its
    options from these fields); K, the temperature and the turn's tokens default to
    the trainer's, so the figures describe the groups GRPO will see."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seeds: int = setting(20, "seeds played", ge=1, le=10_000)
    first_seed: int = setting(
        10_000, "first seed (apart from the training seeds)", ge=0, le=2**31 - 1
    )
    group_size: int = setting(8, "samples per seed, K", ge=1, le=64)
    temperature: float = setting(1.0, "sampling temperature", ge=0.01, le=2.0)
    max_new_tokens: int = MAX_NEW_TOKENS_SETTING
    concurrent_episodes: int = setting(
        64,
        "episodes played together through an endpoint (`router serve` and vLLM "
        "decode them in batches; 0: all at once)",
        ge=0,
        le=10**6,
    )
    backend: Backend = setting(
        BACKEND,
        "what plays a local --model: transformers, or llamacpp on its .gguf file "
        "(the llamacpp extra; several times faster on a CPU); a vLLM server is "
        "calibrated through its endpoint (--model http://...)",
    )

    @field_validator("backend")
    @classmethod
    def _local(cls, value: str) -> str:
        if value == "vllm":
            raise ValueError(
                "vllm: serve the model with vLLM and give its endpoint as --model "
                "(http://host:port/v1), or use transformers or llamacpp"
            )
        return value

    @property
    def seed_range(self) -> range:
        """The seeds played."""
        return range(self.first_seed, self.first_seed + self.seeds)


def calibrate_package(
    package: Path,
    model: str,
    settings: CalibrationSettings,
    *,
    adapter: str | None = None,
    spec: Path | None = None,
    tune_knobs: bool = False,
    report: Path | None = None,
    say: Callable[[str], None] = print,
) -> Calibration:
    """`factory calibrate`: play a package with a local model or an endpoint's.

    With `tune_knobs`, search the package's difficulty knobs for the band's middle
    and write the best into `spec`; the returned calibration is checked against
    the band either way, then written as JSON to `report` when given.
    """
    env_class = package_env(package)
    local = Path(model).is_dir() or model.endswith(".gguf")
    if settings.backend == "llamacpp" and not model.endswith(".gguf"):
        raise FactoryError(
            f"--backend llamacpp plays a .gguf model file; {model} is not one "
            "(`trace model NAME` writes one), or use --backend transformers"
        )
    if adapter and not local:
        raise FactoryError(
            "--adapter needs a local model folder as --model; an endpoint serves "
            "its adapters by model name"
        )
    if tune_knobs and spec is None:
        raise FactoryError(
            "--tune writes the knobs into a spec: pass --spec capability.json"
        )

    def play(difficulty: dict[str, int] | None) -> Calibration:
        seeds, samples = settings.seed_range, settings.group_size
        temperature, max_new_tokens = settings.temperature, settings.max_new_tokens
        if local:
            return local_player()(
                str(package), model, seeds, samples, adapter, temperature,
                max_new_tokens, difficulty, backend=settings.backend,
            )  # fmt: skip
        return calibrate_openai(
            env_class, model, seeds, samples, temperature, max_new_tokens,
            difficulty=difficulty, concurrent=settings.concurrent_episodes,
        )  # fmt: skip

    if tune_knobs and spec is not None:
        family = env_class.family
        tuned_spec(spec, family.name)
        best, result, tried = tune(play, family.knobs, family.difficulty)
        for setting, figures in tried:
            say(
                f"  {json.dumps(setting)}: success {figures.success_rate:.2f}, "
                f"informative {figures.informative_share:.0%}"
            )
        write_difficulty(spec, family.name, best)
        say(
            f"wrote generation.difficulty={json.dumps(best)} into {spec}; "
            f"rebuild and validate: factory generate {spec} --force"
        )
    else:
        result = play(None)
    result.check_band()
    if report is not None:
        with unwritable_as(FactoryError, f"--json {report}", "give a writable file"):
            write_json(report, result.as_dict())
    return result
