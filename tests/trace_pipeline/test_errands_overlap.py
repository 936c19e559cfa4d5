"""The example phone-interface targets (errands, handover) were not written from
the archetypes: none of their request templates (slot-abstracted) and none of
their gold tool sequences is an archetype module's, and few of their word 3-grams
are (the built-in phone target, which shares the permission archetype's requests,
is measured beside them)."""

from __future__ import annotations

import random
import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from factory.archetypes import archetypes
from trace_pipeline.targets.contract import load_target

ROOT = Path(__file__).resolve().parents[2]
TASKS = 300


def abstract(text: str) -> str:
    """A request with its slots abstracted: quoted text Q, numbers #, names X."""
    text = re.sub(r'"[^"]*"', " Q ", text)
    text = re.sub(r"\d+", "#", text)
    text = re.sub(r"\b[A-Z][a-z]+\b", "X", text)
    return " ".join(re.findall(r"[a-zA-Z#]+|[^\sa-zA-Z#]", text.lower()))


def grams(text: str) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def _tasks(target: str, settings: dict[str, int]) -> list[Any]:
    """The example target's first TASKS // 3 tasks of each split at `settings`."""
    made = load_target(
        f"{ROOT}/examples/targets/{target}/{target}.py:make_target", settings
    )
    return [
        made.task(split, index)
        for split in ("analysis", "dev", "test")
        for index in range(TASKS // 3)
    ]


@cache
def archetype_phone_tasks() -> tuple[set[str], set[tuple[str, ...]]]:
    """(templates, gold tool sequences) of every archetype's phone task module."""
    templates, scripts = set(), set()
    for archetype in archetypes().values():
        if "phone" not in archetype.kits:
            continue
        module = archetype.task_module("phone")
        knobs = {knob.name: knob.default for knob in module.KNOBS}
        for seed in range(TASKS):
            task = module.build_task(random.Random(seed), knobs, f"t{seed}")
            templates.add(abstract(task.instruction))
            scripts.add(tuple(call.name for call in task.gold_actions))
    return templates, scripts


@pytest.mark.parametrize(
    ("target", "variants"),
    [
        # at the defaults and with every text's number given (the demonstration's
        # `share_numbered: 100`)
        ("errands", ({}, {"share_numbered": 100})),
        ("handover", ({}, {"share_numbered": 0, "share_blocked": 100})),
    ],
)
def test_an_example_target_shares_no_template_or_gold_script_with_any_archetype(
    target: str, variants: tuple[dict[str, int], ...]
) -> None:
    templates, scripts = archetype_phone_tasks()
    tasks = [task for settings in variants for task in _tasks(target, settings)]
    mine = {abstract(task.instruction) for task in tasks}
    my_scripts = {
        tuple(a["name"] for a in task.expected_actions or () if "name" in a)
        for task in tasks
    }
    assert not mine & templates, sorted(mine & templates)[:5]
    assert not my_scripts & scripts, sorted(my_scripts & scripts)[:5]
    archetype_grams = set().union(*map(grams, templates))
    my_grams = set().union(*map(grams, mine))
    coverage = len(my_grams & archetype_grams) / len(my_grams)
    from trace_pipeline.targets.phone import family

    phone = family()
    built_in = {
        abstract(phone.generate(s, phone.knob_values({})).instruction)
        for s in range(TASKS)
    }
    phone_grams = set().union(*map(grams, built_in))
    phone_coverage = len(phone_grams & archetype_grams) / len(phone_grams)
    print(
        f"3-gram coverage by the archetypes' phone modules: {target} {coverage:.2f}, "
        f"the built-in phone target {phone_coverage:.2f}"
    )
    assert coverage < 0.25 < phone_coverage


def test_handover_is_worded_apart_from_errands() -> None:
    """`trace eval` of an errands run on handover asks about other wordings: no
    request template in common, and few word 3-grams."""
    errands = {
        abstract(t.instruction) for t in _tasks("errands", {"share_numbered": 100})
    }
    handover = {abstract(t.instruction) for t in _tasks("handover", {})}
    assert not errands & handover, sorted(errands & handover)[:5]
    errands_grams = set().union(*map(grams, errands))
    handover_grams = set().union(*map(grams, handover))
    assert len(handover_grams & errands_grams) / len(handover_grams) < 0.25
