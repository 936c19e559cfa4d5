"""`factory validate`: static checks, the package's own tests, check_env, calibration.

The package's tests and the calibration probe run confined (`sandbox.py`) on a
private copy of the package with a time limit, so nothing needs installing,
nothing is cached between a temporary build and its final place, and whatever
the package's code tries outside its contract is refused and reported.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factory.errors import FactoryError
from factory.package_layout import PackageNames
from factory.spec import load_spec
from factory.validate import probe
from factory.validate.sandbox import SandboxRun, run_sandboxed
from factory.validate.static_checks import check_package


class ValidationFailed(FactoryError):
    """The package was built but does not meet the contract; the report says why."""

    exit_code = 1  # not a bad input (2): the CLIs tell the two apart


@dataclass
class ValidationReport:
    """Everything `factory validate` measured on one package."""

    package_dir: Path
    static_problems: list[str] = field(default_factory=list)
    tests_passed: bool = False
    tests_summary: str = ""
    tests_output: str = ""
    calibration: dict[str, Any] = field(default_factory=dict)
    blocked: list[dict[str, str]] = field(default_factory=list)
    confinement: tuple[str, ...] = ()
    seconds: float = 0.0

    def _episodes(self, which: str) -> list[dict[str, Any]]:
        return self.calibration.get(which, {}).get("episodes", [])

    def success_rate(self, which: str) -> float:
        episodes = self._episodes(which)
        return sum(bool(e.get("success")) for e in episodes) / max(len(episodes), 1)

    def crashes(self, which: str) -> list[dict[str, Any]]:
        return [e for e in self._episodes(which) if "error" in e]

    @property
    def problems(self) -> list[str]:
        """Why the package fails validation (empty when it passes)."""
        found = list(self.static_problems)
        found += [
            f"its code tried to {b['what']} ({b['event']}: {b['detail']}); the sandbox refused"
            for b in self.blocked
        ]
        if not self.tests_passed:
            found.append(f"its property tests failed: {self.tests_summary}")
        if self.calibration.get("check_env") != "ok":
            found.append(
                f"gymnasium check_env failed: {self.calibration.get('check_env')}"
            )
        for which in ("gold", "lacking"):
            for crash in self.crashes(which)[:1]:
                found.append(
                    f"{which} policy crashed on seed {crash['seed']}: {crash['error']}"
                )
        if self.calibration and self.success_rate("gold") < 1.0:
            found.append(
                f"gold policy succeeds on {self.success_rate('gold'):.0%} of seeds, needs 100%"
            )
        if self.calibration and self.success_rate("lacking") > 0.0:
            found.append(
                f"capability-lacking policy succeeds on {self.success_rate('lacking'):.0%} "
                "of seeds, needs 0%"
            )
        return found

    def summary(self) -> str:
        """A short human-readable table of the figures."""
        lines = [f"validation of {self.package_dir}"]
        lines.append(
            f"  static checks      {'ok' if not self.static_problems else f'{len(self.static_problems)} problem(s)'}"
        )
        lines.append(f"  property tests     {self.tests_summary}")
        lines.append(
            f"  check_env          {'ok' if self.calibration.get('check_env') == 'ok' else 'FAILED'}"
        )
        for which in ("gold", "lacking"):
            episodes = [e for e in self._episodes(which) if "error" not in e]
            if not episodes:
                continue
            rewards = Counter(round(e["reward"], 2) for e in episodes)
            lines.append(
                f"  {which:<8} policy    success {self.success_rate(which):6.1%} on "
                f"{len(self._episodes(which))} seeds, mean turns "
                f"{statistics.fmean(e['turns'] for e in episodes):.1f}, rewards "
                + ", ".join(f"{r}: {n}" for r, n in sorted(rewards.items()))
                + f" ({self.calibration[which]['seconds']:.2f}s)"
            )
        lines.append(f"  sandbox            {', '.join(self.confinement)}")
        lines.append(f"  time               {self.seconds:.1f}s")
        lines.append(
            "  result             " + ("PASS" if not self.problems else "FAIL")
        )
        lines += [f"    - {problem}" for problem in self.problems]
        return "\n".join(lines)


def _run(
    target: list[str], package_dir: Path, timeout: float, extra: tuple[Path, ...] = ()
) -> SandboxRun:
    run = run_sandboxed(target, package_dir, timeout, extra_files=extra)
    if run.timed_out:
        raise ValidationFailed(
            f"`{' '.join(target[-3:])}` did not finish within {timeout:.0f}s; "
            "raise --timeout or lower the package's difficulty"
        )
    return run


def validate_package(
    package_dir: Path, seeds: int | None = None, timeout: float = 600
) -> ValidationReport:
    """Validate the package at `package_dir`; the report lists problems (raises only on timeouts)."""
    started = time.perf_counter()
    package_dir = Path(package_dir).resolve()
    spec_path = package_dir / "capability.json"
    if not spec_path.is_file():
        raise FactoryError(
            f"{package_dir} is not a generated package (no capability.json); "
            "generate one with `factory generate SPEC`"
        )
    spec = load_spec(spec_path)
    names = PackageNames(spec.name)
    report = ValidationReport(package_dir)
    report.static_problems = check_package(package_dir, names.package, names.camel)
    tests = _run(
        ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], package_dir, timeout
    )
    report.tests_passed = tests.returncode == 0
    tail = [line for line in tests.stdout.strip().splitlines() if line.strip()]
    report.tests_summary = (
        re.sub(r"=+", "", tail[-1]).strip() if tail else tests.stderr.strip()[-300:]
    )
    report.tests_output = tests.stdout[-5000:] + tests.stderr[-2000:]
    calibration = _run(
        [
            Path(probe.__file__).name,
            names.package,
            "--seeds",
            str(seeds or spec.generation.validation_seeds),
        ],
        package_dir,
        timeout,
        (Path(probe.__file__),),
    )
    try:
        report.calibration = json.loads(calibration.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        report.calibration = {
            "check_env": f"the calibration probe crashed: {calibration.stderr[-2000:]}"
        }
    report.blocked = tests.blocked + [
        b for b in calibration.blocked if b not in tests.blocked
    ]
    report.confinement = tests.confinement
    report.seconds = time.perf_counter() - started
    return report
