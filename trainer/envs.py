"""Find a generated environment by gymnasium id, installed package, or folder.

Packages declare an entry point in the group `trace.envs` (name: the capability,
value: the package's ENV_ID); importing a package registers its gymnasium id.
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import gymnasium

from trainer.errors import TrainerError

GROUP = "trace.envs"


@dataclass(frozen=True)
class EnvHandle:
    """A resolved environment: its gymnasium id, package and capability spec."""

    env_id: str
    package: str
    capability: dict[str, Any]

    def make(self, **kwargs: Any) -> gymnasium.Env:
        """A fresh, unwrapped environment (the trainer drives it directly)."""
        return gymnasium.make(self.env_id, **kwargs).unwrapped


def _read_capability(path: Path) -> dict[str, Any]:
    """A package's capability.json as a dict with a string `name`, or a TrainerError."""
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise TrainerError(
            f"--env: {path} is not readable JSON ({exc}); regenerate the package with "
            "`factory generate`"
        ) from None
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise TrainerError(
            f"--env: {path} has no capability 'name'; regenerate the package"
        )
    return spec


def _capability_of(module: Any) -> dict[str, Any]:
    root = Path(module.__file__).resolve().parent.parent
    path = root / "capability.json"
    if path.is_file():
        return _read_capability(path)
    return {"name": getattr(module, "CAPABILITY", module.__name__), "description": ""}


def _from_module(name: str) -> EnvHandle:
    """The handle of an environment package; any failure to import it is a TrainerError."""
    try:
        module = importlib.import_module(name)
        env_id = module.ENV_ID
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # noqa: BLE001 - package code runs on import
        raise TrainerError(
            f"--env: cannot import the environment package {name} ({type(exc).__name__}: "
            f"{exc}); install it with `pip install -e generated_envs/<cap>` or pass its folder"
        ) from None
    return EnvHandle(str(env_id), name, _capability_of(module))


def installed() -> dict[str, str]:
    """Installed environment packages: capability name -> entry point value."""
    return {e.name: e.value for e in entry_points(group=GROUP)}


def _import_from(folder: Path, module: str) -> str:
    """Make `module` the package in `folder`, even where a package of that name was
    loaded from elsewhere (a run's own copy of an installed package): the last
    folder resolved is the one this process plays."""
    loaded = sys.modules.get(module)
    origin = getattr(loaded, "__file__", None)
    if loaded is not None and (
        origin is None or folder not in Path(origin).resolve().parents
    ):
        for name in [
            m for m in sys.modules if m == module or m.startswith(f"{module}.")
        ]:
            del sys.modules[name]
    if str(folder) in sys.path:
        sys.path.remove(str(folder))
    sys.path.insert(0, str(folder))
    importlib.invalidate_caches()
    return module


def resolve_env(env: str) -> EnvHandle:
    """A gymnasium id, an installed package (or capability) name, or a package folder."""
    path = Path(env)
    if (path / "capability.json").is_file():
        spec = _read_capability(path / "capability.json")
        return _from_module(_import_from(path.resolve(), f"trace_env_{spec['name']}"))
    found = installed()
    name = env.replace("-", "_").removeprefix("trace_env_")
    if name in found:
        return _from_module(found[name].split(":")[0])
    for value in found.values():
        try:
            handle = _from_module(value.split(":")[0])
        except TrainerError:  # a broken package elsewhere is not this environment
            continue
        if handle.env_id == env:
            return handle
    if env in gymnasium.registry:
        return EnvHandle(env, "", {"name": env, "description": ""})
    listing = ", ".join(sorted(found)) or "none installed"
    raise TrainerError(
        f"unknown environment '{env}': not a package folder (with capability.json), "
        f"an installed TRACE environment ({listing}) or a gymnasium id. "
        "Install one with `pip install -e generated_envs/<cap>` or pass its folder."
    )


class MixtureEnv(gymnasium.Env[str, str]):
    """Episodes drawn uniformly from several environments: seed s plays member s mod n.

    The paper's multi-capability baseline trains one adapter on such a mixture.
    It delegates to the member playing the current episode, so gold-policy
    helpers (`task`, `max_turns`) work on it as on any package's env.
    """

    def __init__(self, handles: list[EnvHandle], **kwargs: Any) -> None:
        self.members = [handle.make(**kwargs) for handle in handles]
        self.observation_space = self.members[0].observation_space
        self.action_space = self.members[0].action_space
        self.active = self.members[0]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        pick = seed if seed is not None else int(self.np_random.integers(0, 2**31 - 1))
        self.active = self.members[pick % len(self.members)]
        return self.active.reset(seed=pick, options=options)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return self.active.step(action)

    def __getattr__(
        self, name: str
    ) -> Any:  # task, max_turns, toolkit of the active member
        if name in ("members", "active"):
            raise AttributeError(name)
        return getattr(self.active, name)


@dataclass(frozen=True)
class MixtureHandle(EnvHandle):
    """Several environments played as one (`--env` given more than once)."""

    members: tuple[EnvHandle, ...] = ()

    def make(self, **kwargs: Any) -> gymnasium.Env:
        return MixtureEnv(list(self.members), **kwargs)


def resolve_envs(envs: str | list[str] | tuple[str, ...]) -> EnvHandle:
    """One environment, or the uniform mixture of several (each resolved like `resolve_env`)."""
    names = [envs] if isinstance(envs, str) else list(envs)
    if len(names) == 1:
        return resolve_env(names[0])
    members = tuple(resolve_env(name) for name in names)
    capabilities = [str(m.capability.get("name")) for m in members]
    if len(set(capabilities)) < len(capabilities):
        raise TrainerError(
            f"--env names the same environment twice ({', '.join(names)})"
        )
    return MixtureHandle(
        env_id="mixture(" + ",".join(m.env_id for m in members) + ")",
        package=members[0].package,
        capability={
            "name": "mixture",
            "title": "Mixture of " + ", ".join(capabilities),
            "description": "one adapter trained on a uniform mixture of: "
            + "; ".join(
                f"{c}: {m.capability.get('description', '')}"
                for c, m in zip(capabilities, members, strict=True)
            ),
            "envs": capabilities,
        },
        members=members,
    )
