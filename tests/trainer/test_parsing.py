"""Tool calls read in the forms models write; a turn ends where its call closes."""

from __future__ import annotations

import json

import pytest

from trainer.parsing import parse_tool_calls, to_action


def test_tool_calls_are_parsed_from_hermes_and_plain_json() -> None:
    text, calls = parse_tool_calls(
        'ok <tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
    )
    assert text == "ok" and calls == [{"name": "f", "arguments": {"a": 1}}]
    assert parse_tool_calls('{"name": "g", "arguments": "{\\"b\\": 2}"}')[1] == [
        {"name": "g", "arguments": {"b": 2}}
    ]
    assert parse_tool_calls("<tool_call>{broken</tool_call>") == (
        "<tool_call>{broken</tool_call>",
        [],
    )
    action, message = to_action(
        '<tool_call>{"name": "f", "arguments": {}}</tool_call>', 3
    )
    assert (
        json.loads(action)["tool_calls"][0]["id"] == "call_3_0"
        and message["role"] == "assistant"
    )
    assert to_action("plain reply", 1)[0] == "plain reply"


def test_a_turn_ends_where_its_tool_call_closes(tiny_tokenizer) -> None:
    from trainer.generation import STOP_STRINGS, cut_sample

    text = 'ok <tool_call>{"name": "f", "arguments": {}}</tool_call> and more'
    tokens = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    eos = tiny_tokenizer.eos_token_id
    sample = cut_sample(
        tokens + [eos], [-1.0] * (len(tokens) + 1), {eos}, tiny_tokenizer, STOP_STRINGS
    )
    assert tiny_tokenizer.decode(sample.tokens).endswith("</tool_call>")
    assert len(sample.logprobs) == len(sample.tokens) < len(tokens)
    plain = cut_sample(
        tokens[:2] + [eos, 5], [-1.0] * 4, {eos}, tiny_tokenizer, STOP_STRINGS
    )
    assert plain.tokens == tokens[:2] + [eos]


# What Qwen2.5-Coder-0.5B-Instruct wrote on the phone environments (greedy).
QWEN_FENCED = (
    '```json\n{\n  "name": "get_current_timestamp",\n  "arguments": {\n'
    '    "timestamp": 1639984000\n  }\n}\n```'
)


# What the demo's permission adapter (Qwen2.5-Coder-1.5B-Instruct + LoRA) wrote when it
# resent a message after turning cellular on: the call closed by the tag it last read.
QWEN_WRONG_CLOSER = (
    '<tool_call>\n{"name": "send_message_with_phone_number", "arguments": '
    '{"phone_number": "+18382435295", "content": "Call me when you land (82)"}}\n'
    "</tool_response>"
)


QWEN_BARE = (
    '{"name": "add_reminder", "arguments": {"content": "Pick up the dry cleaning", '
    '"reminder_timestamp": "1609459200", "latitude": "37.7749"}}'
)


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        (QWEN_FENCED, "get_current_timestamp", {"timestamp": 1639984000}),
        (QWEN_WRONG_CLOSER, "send_message_with_phone_number",
         {"phone_number": "+18382435295", "content": "Call me when you land (82)"}),
        ('<tool_call>{"name": "f", "arguments": {}}', "f", {}),
        (QWEN_BARE, "add_reminder", {"content": "Pick up the dry cleaning",
                                     "reminder_timestamp": "1609459200", "latitude": "37.7749"}),
        ('```\n{"name": "f", // the tool\n "arguments": {"url": "http://x/y",}}\n```',
         "f", {"url": "http://x/y"}),
        ('{"name": "f", /* note */ "arguments": "{\\"a\\": 1}"}', "f", {"a": 1}),
        ('send(phone_number="+1234", content="hi")', "send",
         {"phone_number": "+1234", "content": "hi"}),
        ('{"type": "function", "function": {"name": "g", "arguments": {}}}', "g", {}),
        # Qwen2.5-Coder-1.5B with a date-time adapter, copying its prompt's example
        ('<{{"name": "send_message_with_phone_number", "arguments": {"phone_number": '
         '"+18382435295", "content": "Call me when you land (82)"}}}>',
         "send_message_with_phone_number",
         {"phone_number": "+18382435295", "content": "Call me when you land (82)"}),
        ('{{"name": "f", "arguments": {"a": 1}}}', "f", {"a": 1}),
    ],
)  # fmt: skip
def test_tool_calls_are_read_in_the_forms_small_models_write(
    text: str, name: str, arguments: dict
) -> None:
    assert parse_tool_calls(text)[1] == [{"name": name, "arguments": arguments}]


def test_a_fenced_list_gives_every_call_and_prose_stays_text() -> None:
    text = 'Sure:\n```json\n[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 1}}]\n```'
    content, calls = parse_tool_calls(text)
    assert content == "Sure:" and [c["name"] for c in calls] == ["a", "b"]
    for prose in (
        "I will call you (later).",
        "```python\nprint(1)\n```",
        "f(1, 2)",
        "{" * 5000,
    ):
        assert parse_tool_calls(prose)[1] == []
