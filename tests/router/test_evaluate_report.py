"""The evaluation report's tables: success by each task's true need, from the per-task outcomes."""

from __future__ import annotations

from router.evaluate import markdown, success_by_need
from trainer.evaluation import rate

PER_TASK = [
    {"truth": "base", "success": {"base model": True, "single: dates": False}},
    {"truth": "base", "success": {"base model": False, "single: dates": False}},
    {"truth": "dates", "success": {"base model": False, "single: dates": True}},
]


def test_success_by_need_counts_each_conditions_wins_among_each_needs_tasks() -> None:
    assert success_by_need(PER_TASK) == {
        "base model": {"base": (1, 2), "dates": (0, 1)},
        "single: dates": {"base": (0, 2), "dates": (1, 1)},
    }


def test_the_markdown_report_shows_success_by_need_with_each_needs_task_count() -> None:
    outcomes = {
        name: rate([t["success"][name] for t in PER_TASK]) | {"reward_mean": 0.0}
        for name in ("base model", "single: dates")
    }
    report = {
        "tasks": 3,
        "environments": ["Phone-v0"],
        "seeds": [7, 8, 9],
        "labels": {"A": "dates", "B": "unused", "C": "base"},
        "routing": {},
        "success": outcomes,
        "paired": {},
        "per_task": PER_TASK,
        "seconds_per_route": 0.01,
    }
    text = markdown(report)
    section = text[text.index("## Task success by the task's true need") :]
    assert "| condition | dates (1 task) | base (2 tasks) |" in section
    assert "| base model | 0/1 | 1/2 |" in section
    assert "| single: dates | 1/1 | 0/2 |" in section
    assert "unused" not in section  # a label no task has gets no column


def test_a_best_single_chosen_before_is_the_one_routing_is_compared_with() -> None:
    """On the test split the best single adapter is the one chosen on dev
    (`protocol.best_single`), not the one that happens to win on test."""
    from types import SimpleNamespace

    from router.evaluate import Plan, assemble
    from router.modes import Route

    env = SimpleNamespace(env_id="Phone-v0")
    tasks = [SimpleNamespace(env=env, seed=s, truth="base") for s in range(3)]
    weights = {"a": {"a": 1.0}, "b": {"b": 1.0}}
    keys = {n: Route("", "", w).key for n, w in weights.items()}
    routes = {"argmax": [Route("argmax", "a", weights["a"])] * 3}
    plan = Plan(
        tasks, ["a", "b"], routes, {}, 0.0,
        {keys[n]: (w, [0, 1, 2]) for n, w in weights.items()},
        {"single: a": [keys["a"]] * 3, "single: b": [keys["b"]] * 3,
         "routed: argmax": [keys["a"]] * 3},
        set(keys.values()),
    )  # fmt: skip
    outcomes = {
        keys["a"]: {i: (i == 0, 0.0) for i in range(3)},  # 1/3
        keys["b"]: {i: (True, 1.0) for i in range(3)},  # 3/3: best here
    }
    assert assemble(plan, outcomes, {})["best_single"] == "single: b"
    frozen = assemble(plan, outcomes, {}, "a")
    assert frozen["best_single"] == "single: a"
    assert set(frozen["paired"]) == {"routed: argmax vs single: a"}
