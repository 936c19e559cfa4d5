"""The codegen's static checks accept every built-in task module and refuse hostile code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory.generate.code_checks import check_task_module

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = json.loads((ROOT / "factory/runtime/kits/phone/kit.json").read_text())[
    "tools"
]
GOOD = '''"""A task module."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping

from factory.runtime import Knob, Task, call, say
from factory.runtime.kits import phone

TOOLKIT = phone.TOOLKIT
KNOBS = (Knob("contacts", 3, 1, 9, "how many contacts"),)
PATTERN = re.compile(r"\\d+")


def build_task(rng: random.Random, knobs: Mapping[str, int], task_id: str) -> Task:
    """Build one task."""
    gold = [call("search_contacts", name="Ana"), say("done")]
    return Task(task_id, "hi", {}, gold, ("done",), [say("no")])
'''


def test_every_builtin_task_module_passes() -> None:
    modules = [
        p
        for p in sorted((ROOT / "factory/archetypes").glob("*/*.py"))
        if p.stem not in ("__init__", "detector")
    ]
    assert len(modules) >= 10
    for path in modules:
        kit = json.loads(
            (ROOT / f"factory/runtime/kits/{path.stem}/kit.json").read_text()
        )
        assert check_task_module(path.read_text(), kit["tools"]) == [], path


def test_a_clean_module_passes() -> None:
    assert check_task_module(GOOD, SCHEMAS) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ("import os", "imports `os`"),
        ("from subprocess import run", "imports from `subprocess`"),
        ("import importlib", "imports `importlib`"),
        ("from .tools import x", "relative import"),
        ("from json import *", "star import"),
        ("X = eval('1')", "uses `eval`"),
        ("X = open('f')", "uses `open`"),
        ("X = __import__('os')", "uses `__import__`"),
        ("X = getattr(re, 'compile')", "uses `getattr`"),
        ("X = ().__class__.__bases__", "dunder attribute `__class__`"),
        ("print('hello')", "runs at import"),
        ("X = sorted(PATTERN.findall(input()))", "uses `input`"),
        ("X = random.random()", "runs at import"),
        ("for i in range(3):\n    pass", "top-level statement runs at import"),
        ("if True:\n    X = 1", "top-level statement runs at import"),
        ("with re:\n    pass", "top-level statement runs at import"),
        ("@re.compile\ndef f():\n    pass", "decorator runs at import"),
        ("def f(a=random.random()):\n    pass", "default argument runs at import"),
        ("class A(metaclass=re):\n    pass", "takes keywords"),
        ("class A:\n    x = random.random()", "runs at import"),
        ("class A(random.choice([object])):\n    pass", "class base is computed"),
        ("@random.seed\nclass A:\n    pass", "class decorator runs at import"),
        ("X = [i for i in range(3) if random.random()]", "runs at import"),
        ("X = lambda: 1", "runs at import"),
        ("def g():\n    global X", "uses `global X`"),
        ("Y = call('no_such_tool')", "not a target tool"),
        ("Y = call('search_contacts', nickname='x')", "has no parameter `nickname`"),
    ],
)
def test_hostile_changes_are_refused(change: str, problem: str) -> None:
    problems = check_task_module(GOOD + "\n" + change + "\n", SCHEMAS)
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            "def build_task(rng: random.Random, knobs",
            "def build_task(knobs: int, rng",
            "must take (rng, knobs, task_id)",
        ),
        ("KNOBS = ", "KNOBZ = ", "does not define `KNOBS`"),
        ('"""A task module."""\n', "", "no module docstring"),
        ("TOOLKIT = phone.TOOLKIT", "TOOLKIT = phone.TOOLKIT(", "does not parse"),
    ],
)
def test_contract_is_enforced(old: str, new: str, problem: str) -> None:
    problems = check_task_module(GOOD.replace(old, new, 1), SCHEMAS)
    assert any(problem in p for p in problems), problems
