"""Options derived from a settings model: typed, ranged, defaulted and helped by its
fields, with one error naming the option when a value or a combination is refused."""

from __future__ import annotations

import argparse

import pytest
from pydantic import BaseModel, model_validator

from factory.errors import FactoryError
from factory.settings import DefaultsFormatter, add_options, from_arguments, setting


class Knobs(BaseModel):
    runs: int = setting(10, "labelling runs", ge=1, le=1000)
    share: float = setting(0.1, "a share", ge=0, le=1)
    mode: str = setting("auto", "who writes", flag="--codegen")
    labeller: str | None = setting(None, "a model")
    verbose: bool = setting(False, "say more")
    needed: int = setting(..., "no default", ge=0)

    @model_validator(mode="after")
    def _fits(self) -> Knobs:
        if self.needed > self.runs:
            raise ValueError(
                f"needed ({self.needed}) must not exceed runs ({self.runs})"
            )
        return self


def parser() -> argparse.ArgumentParser:
    built = argparse.ArgumentParser(prog="knobs", formatter_class=DefaultsFormatter)
    add_options(built, Knobs)
    return built


def test_flags_types_and_defaults_come_from_the_fields():
    arguments = parser().parse_args(["--needed", "3", "--codegen", "llm", "--verbose"])
    assert from_arguments(Knobs, arguments) == Knobs(
        runs=10, share=0.1, mode="llm", labeller=None, verbose=True, needed=3
    )


@pytest.mark.parametrize(
    "argv, reason",
    [
        (["--runs", "0"], "argument --runs: must be greater than or equal to 1, not 0"),
        (["--share", "nan"], "argument --share: must be a finite number, not nan"),
        (["--runs", "2.5"], "argument --runs: not an integer: '2.5'"),
        ([], "the following arguments are required: --needed"),
    ],
)
def test_a_bad_value_is_refused_while_parsing(capsys, argv, reason):
    with pytest.raises(SystemExit) as stop:
        parser().parse_args(["--needed", "1", *argv] if argv else argv)
    assert stop.value.code == 2 and reason in capsys.readouterr().err


def test_a_refused_combination_is_one_error_naming_it():
    arguments = parser().parse_args(["--needed", "30"])
    with pytest.raises(
        FactoryError, match=r"^--needed \(30\) must not exceed --runs \(10\)$"
    ):
        from_arguments(Knobs, arguments)


def test_help_shows_each_set_default_once():
    text = " ".join(parser().format_help().split())
    assert text.count("(default: 10)") == 1 and "labelling runs (default: 10)" in text
    assert "(default: None)" not in text and "(default: False)" not in text
    assert "--codegen MODE " in text and "--backend" not in text
