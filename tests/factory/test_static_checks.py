"""libcst static checks catch what a generated module must not do."""

from __future__ import annotations

import pytest

from factory.validate.static_checks import check_module, check_tool_signatures

GOOD = '''"""Doc."""

import json

import gymnasium

from .tools import execute

LIMIT = 3


def state_hash(state):
    return json.dumps(state)
'''


def problems(source: str, required=None, filename: str = "verifier.py") -> list[str]:
    return check_module(source, filename, "trace_env_x", required or {})


def test_a_clean_module_passes() -> None:
    assert problems(GOOD, {"state_hash": ("state",), "LIMIT": None}) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def broken(:\n", "does not parse"),
        ("import json\n", "no module docstring"),
        ('"""Doc."""\nimport numpy\n', "imports 'numpy'"),
        ('"""Doc."""\nfrom requests import get\n', "imports 'requests'"),
        ('"""Doc."""\nprint("hi")\n', 'top-level side effect `print("hi")`'),
        ('"""Doc."""\nif True:\n    x = 1\n', "top-level statement not allowed"),
        ('"""Doc."""\nregister_env()\n', "top-level side effect"),
    ],
)
def test_violations_are_reported(source: str, expected: str) -> None:
    assert any(expected in problem for problem in problems(source)), problems(source)


def test_register_call_is_allowed_only_in_init() -> None:
    source = '"""Doc."""\n\n\ndef register_env():\n    pass\n\n\nregister_env()\n'
    assert check_module(source, "__init__.py", "trace_env_x", {}) == []


def test_missing_symbols_and_wrong_signatures() -> None:
    found = problems(GOOD, {"verify": ("task",), "state_hash": ("value",)})
    assert "does not define `verify`" in found
    assert "`state_hash` must take (value), takes (state)" in found


def test_tool_signatures_follow_the_schemas() -> None:
    source = '"""Doc."""\n\n\ndef get_user(state, user_id):\n    pass\n'
    schema = lambda name, *params: {  # noqa: E731
        "function": {
            "name": name,
            "parameters": {"properties": {p: {} for p in params}},
        }
    }
    assert check_tool_signatures(source, [schema("get_user", "user_id")]) == []
    found = check_tool_signatures(source, [schema("get_user", "id"), schema("cancel")])
    assert any("takes (state, user_id)" in p for p in found)
    assert any("`cancel` has no implementation" in p for p in found)


def test_lint_finds_undefined_and_unused_names(tmp_path) -> None:
    from factory.validate.static_checks import lint_problems

    (tmp_path / "module.py").write_text(
        '"""Doc."""\n\nimport os\n\n\ndef f():\n    return json.dumps(1)\n'
    )
    found = "\n".join(lint_problems(tmp_path))
    assert "F821" in found and "json" in found
    assert "F401" in found and "os" in found
