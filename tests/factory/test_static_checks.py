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
        ('"""Doc."""\nprint("hi")\n', 'top-level code runs at import: `print("hi")`'),
        ('"""Doc."""\nif True:\n    x = 1\n', "top-level statement runs at import"),
        ('"""Doc."""\nregister_env()\n', "top-level code runs at import"),
        # Import-time side effects in every place Python evaluates code on import.
        ('"""Doc."""\nX = print("hi")\n', "top-level code runs at import: `X = print"),
        (
            '"""Doc."""\nX: int = len(open("f").read())\n',
            "top-level code runs at import",
        ),
        (
            '"""Doc."""\nimport os\nX: int = 1\nY: os.remove("f") = 1\n',
            "runs at import",
        ),
        (
            '"""Doc."""\nimport atexit\n\n\n@atexit.register\ndef f():\n    pass\n',
            "decorator runs at import: `@atexit.register`",
        ),
        (
            '"""Doc."""\nimport os\n\n\ndef f(x=os.getcwd()):\n    pass\n',
            "default argument runs at import: `os.getcwd()`",
        ),
        (
            '"""Doc."""\nimport os\n\n\nclass A:\n    home = os.listdir("/")\n',
            'top-level code runs at import: `home = os.listdir("/")`',
        ),
        (
            '"""Doc."""\n\n\nclass A:\n    for i in range(3):\n        pass\n',
            "class body runs code",
        ),
        ('"""Doc."""\n\n\nclass A(metaclass=M):\n    pass\n', "takes keywords"),
        (
            '"""Doc."""\n\n\n@make\nclass A:\n    pass\n',
            "class decorator runs at import",
        ),
        # Process, network and foreign-code modules, even where only a function uses them.
        ('"""Doc."""\nimport subprocess\n', "imports `subprocess`"),
        ('"""Doc."""\nfrom socket import socket\n', "imports `socket`"),
        ('"""Doc."""\n\n\ndef f():\n    import ctypes\n', "imports `ctypes`"),
        (
            '"""Doc."""\nimport os\n\n\ndef f():\n    os.system("id")\n',
            "calls `os.system`",
        ),
        (
            '"""Doc."""\nimport os\n\n\ndef f():\n    os.execv("/bin/sh", [])\n',
            "starts a process",
        ),
    ],
)
def test_violations_are_reported(source: str, expected: str) -> None:
    assert any(expected in problem for problem in problems(source)), problems(source)


def test_register_call_is_allowed_only_in_init() -> None:
    source = '"""Doc."""\n\n\ndef register_env():\n    pass\n\n\nregister_env()\n'
    assert check_module(source, "__init__.py", "trace_env_x", {}) == []


def test_the_packages_own_code_and_constant_builders_may_run_at_import() -> None:
    """What generated packages run on import (their runtime's classes, `Knob(...)`,
    a main guard, pytest's decorators in their tests) stays allowed."""
    source = (
        '"""Doc."""\nfrom . import task\nfrom ._runtime import TaskFamily, Knob\n'
        "from trace_env_x._runtime import bridge\n"
        "FAMILY = TaskFamily.from_module(task)\nKNOBS = (Knob('a', 1, 0, 2, 'a'),)\n"
        "A, B = bridge.classes(FAMILY)\n\n\nclass E:\n    family = FAMILY\n\n\n"
        "if __name__ == '__main__':\n    B.run()\n"
    )
    assert problems(source) == []
    test = (
        '"""Doc."""\nimport pytest\n\nfrom trace_env_x import E\n\n\n'
        "@pytest.mark.parametrize('p', [1], ids=lambda p: str(p))\n"
        "def test_p(p: int) -> None:\n    assert E\n"
    )
    assert check_module(test, "test_x.py", "trace_env_x", {}, {"pytest"}) == []
    assert problems(test)  # pytest is no package's own code outside its tests


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
