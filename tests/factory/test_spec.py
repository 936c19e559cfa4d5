"""The capability spec model: valid examples load, bad fields are named."""

from __future__ import annotations

import json

import pytest

from factory.errors import FactoryError
from factory.spec import CapabilitySpec, json_schema, load_spec, parse_spec
from tests.conftest import EXAMPLES


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.json")), ids=lambda p: p.stem)
def test_every_example_spec_is_valid_and_canonical(path) -> None:
    spec = load_spec(path)
    assert spec.name == path.stem
    assert spec.to_json() == path.read_text()


def test_defaults_fill_optional_fields() -> None:
    spec = CapabilitySpec(
        name="x_cap",
        title="X",
        description="A capability.",
        archetype=None,
        target="phone",
    )
    assert spec.schema_version == "1.0"
    assert spec.generation.max_turns == 30 and spec.generation.reward_mode == "binary"
    assert spec.evidence is None and spec.failure_patterns == []


@pytest.mark.parametrize(
    ("change", "field", "hint"),
    [
        ({"name": "Bad-Name"}, "name", "snake_case"),
        ({"name": "class"}, "name", "keyword"),
        ({"name": "../escape"}, "name", "snake_case"),
        ({"schema_version": "9"}, "schema_version", "'1.0'"),
        ({"generation": {"reward_mode": "dense"}}, "generation.reward_mode", "binary"),
        (
            {"generation": {"max_turns": 1}},
            "generation.max_turns",
            "greater than or equal to 2",
        ),
        ({"evidence": {"er_pos": 2}}, "evidence.er_pos", "less than or equal to 1"),
        ({"surprise": 1}, "surprise", "Extra inputs"),
        ({"title": 'bad """ title'}, "title", "triple quotes"),
    ],
)
def test_bad_fields_are_named_with_the_fix(example_spec, change, field, hint) -> None:
    example_spec.update(change)
    with pytest.raises(FactoryError) as error:
        parse_spec(json.dumps(example_spec), "spec.json")
    message = str(error.value)
    assert f"- {field}" in message and hint in message


def test_missing_field_is_named(example_spec) -> None:
    del example_spec["description"]
    with pytest.raises(FactoryError, match=r"- description: Field required"):
        parse_spec(json.dumps(example_spec))


def test_malformed_json_names_the_position() -> None:
    with pytest.raises(FactoryError, match=r"not valid JSON: .* line 1 column"):
        parse_spec('{"name": ', "spec.json")


def test_non_object_json_is_rejected() -> None:
    with pytest.raises(FactoryError, match="must be a JSON object"):
        parse_spec("[1, 2]")


def test_missing_file_is_named(tmp_path) -> None:
    with pytest.raises(FactoryError, match="not found"):
        load_spec(tmp_path / "nope.json")


def test_json_schema_lists_the_contract_fields() -> None:
    properties = json_schema()["properties"]
    for name in (
        "schema_version",
        "name",
        "title",
        "description",
        "archetype",
        "target",
        "failure_patterns",
        "evidence",
        "generation",
    ):
        assert name in properties
