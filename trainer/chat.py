"""Prompts from the model's own chat template, and the tokens of each new turn.

A conversation is kept as token ids: the sampled tokens of every assistant turn
exactly as generated, and between them the template's rendering of the tool and
user messages that followed (the suffix of the rendered conversation after the
assistant's end-of-turn marker). Templates without a tool role (e.g. Gemma's) get
tool results as user turns and the tool schemas in the system prompt.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from trainer.errors import TrainerError
from trainer.settings import TOOL_FORMATS

TOOL_INSTRUCTIONS = (
    "\n\n# Tools\nYou may call these tools. To call one, answer with "
    '<tool_call>{"name": <tool name>, "arguments": <JSON object>}</tool_call>\n'
)


def _signature(tool: dict[str, Any]) -> str:
    """One line per tool: `- name(arg: type, optional?: type): description`."""
    function = tool["function"]
    parameters = function.get("parameters") or {}
    listed = parameters.get("required")
    required = (
        {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
    )
    arguments = ", ".join(
        f"{name}{'' if name in required else '?'}: "
        f"{schema.get('type', 'any') if isinstance(schema, dict) else 'any'}"
        for name, schema in (parameters.get("properties") or {}).items()
    )
    return f"- {function['name']}({arguments}): {function.get('description', '')}"


def tool_listing(tools: list[dict[str, Any]], tool_format: str) -> str:
    """The tools as the system prompt lists them when the template has no tool support.

    `json`: the OpenAI schemas, one per line, exactly. `compact`: one signature
    line per tool without parameter descriptions, about a third of the tokens,
    for small models on CPU where prompt length sets the speed.
    """
    if tool_format == "compact":
        return "\n".join(_signature(t) for t in tools)
    return "\n".join(json.dumps(t) for t in tools)


def _text(content: Any) -> str:
    """Message content as text (environments may send None, parts lists or numbers)."""
    if isinstance(content, str):
        return content
    return "" if content is None else json.dumps(content)


def _as_text_message(message: dict[str, Any]) -> dict[str, Any]:
    """A tool-role or tool-calling message rewritten as plain chat text."""
    if message["role"] == "tool":
        name = message.get("name") or "tool"
        return {
            "role": "user",
            "content": f"Tool result ({name}): {_text(message.get('content'))}",
        }
    if message["role"] == "assistant" and message.get("tool_calls"):
        calls = "".join(
            "<tool_call>"
            + json.dumps(
                {
                    "name": c["function"]["name"],
                    "arguments": json.loads(c["function"]["arguments"] or "{}"),
                }
            )
            + "</tool_call>"
            for c in message["tool_calls"]
        )
        return {"role": "assistant", "content": _text(message.get("content")) + calls}
    return {"role": message["role"], "content": _text(message.get("content"))}


def _with_argument_objects(message: dict[str, Any]) -> dict[str, Any]:
    """An assistant message whose tool calls carry their arguments as JSON objects.

    OpenAI messages hold `arguments` as a JSON string; templates that write
    `arguments | tojson` (Qwen's, Llama's) would double-encode it into an escaped
    string that no model writes, and demonstrations would teach that form.
    """
    calls = message.get("tool_calls")
    if message.get("role") != "assistant" or not calls:
        return message
    rewritten = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments or "{}")
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict):
                call = {**call, "function": {**function, "arguments": parsed}}
        rewritten.append(call)
    return {**message, "tool_calls": rewritten}


def _merged(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive messages of one role joined (templates that need alternation)."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {
                **merged[-1],
                "content": merged[-1]["content"] + "\n\n" + message["content"],
            }
        else:
            merged.append(dict(message))
    return merged


class ChatFormat:
    """Renders conversations with a tokenizer's chat template, natively or by fallback."""

    def __init__(
        self, tokenizer: Any, tools: list[dict[str, Any]], tool_format: str = "json"
    ) -> None:
        if tool_format not in TOOL_FORMATS:
            raise TrainerError(
                f"--tool-format must be one of {', '.join(TOOL_FORMATS)}, not '{tool_format}'"
            )
        if getattr(tokenizer, "chat_template", None) is None:
            raise TrainerError(
                "the tokenizer has no chat template; use an instruct/chat model"
            )
        self.tokenizer = tokenizer
        self.tools = tools
        self.tool_format = tool_format
        self.end_marker = tokenizer.decode([tokenizer.eos_token_id])
        probe = [
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c",
                        "type": "function",
                        "function": {"name": "f", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c", "name": "f", "content": "y"},
        ]
        try:
            rendered = self._template(probe, tools, True)
            self.native = "y" in rendered and "f" in rendered
        except Exception:  # noqa: BLE001 - any template error means: use the fallback
            self.native = False
        # Templates that write `arguments | tojson` want a JSON object (a string would
        # come out double-encoded); those that write `arguments` as is want the string.
        self.argument_objects = False
        if self.native:
            probe[1]["tool_calls"][0]["function"]["arguments"] = {"probe_key": 1}
            with contextlib.suppress(Exception):  # then keep the strings
                rendered = self._template(probe, tools, True)
                self.argument_objects = '{"probe_key": 1}' in rendered

    def _template(
        self, messages: list[dict[str, Any]], tools: Any, generation: bool
    ) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=tools, tokenize=False, add_generation_prompt=generation
        )

    def _checked(
        self, messages: list[dict[str, Any]], tools: Any, generation: bool
    ) -> str:
        """The template's rendering; any failure of the template is a TrainerError."""
        try:
            text = self._template(messages, tools, generation)
        except Exception as exc:  # noqa: BLE001 - jinja and templates raise anything
            raise TrainerError(
                f"the chat template failed: {type(exc).__name__}: {exc}"
            ) from None
        if not isinstance(text, str):
            raise TrainerError("the chat template did not render text")
        return text

    def render(self, messages: list[dict[str, Any]], generation: bool) -> str:
        """The conversation as the template renders it (with the generation prompt)."""
        if self.native:
            if self.argument_objects:
                messages = [_with_argument_objects(m) for m in messages]
            return self._checked(messages, self.tools, generation)
        plain = [_as_text_message(m) for m in messages]
        if plain and plain[0]["role"] == "system":
            plain[0]["content"] += TOOL_INSTRUCTIONS + tool_listing(
                self.tools, self.tool_format
            )
        return self._checked(_merged(plain), None, generation)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def spelled(self, text: str) -> list[int]:
        """Token ids of `text` with the tokenizer's added markup tokens (`<tool_call>`,
        `</tool_call>`, ...) written in ordinary tokens, as a demonstration's target.

        An added token's output row can be untrained: in Qwen2.5-Coder-1.5B-Instruct
        `<tool_call>` has log-prob -20 where a call starts and a row that is a copy of
        unused special tokens' (cosine 0.99999) and close to `<|im_end|>`'s (0.95),
        so supervised steps toward it raised `<|im_end|>` instead and every reply came
        out empty. Spelled out, the same text is reachable with trained rows, and every
        parser (ours, vLLM's hermes) reads it alike.
        """
        markup = sorted(
            (
                token.content
                for token in getattr(
                    self.tokenizer, "added_tokens_decoder", {}
                ).values()
                if len(token.content) > 1 and token.content in text
            ),
            key=len,
            reverse=True,
        )
        if not markup:
            return self.encode(text)
        ids: list[int] = []
        for piece in re.split("(" + "|".join(map(re.escape, markup)) + ")", text):
            if piece in markup:  # two pieces, neither of which is the added token
                ids += self.encode(piece[:-1]) + self.encode(piece[-1])
            elif piece:
                ids += self.encode(piece)
        return ids

    def prompt(self, messages: list[dict[str, Any]]) -> list[int]:
        """Token ids of the opening messages plus the generation prompt."""
        return self.encode(self.render(messages, True))

    def turn(self, history: list[dict[str, Any]], message: dict[str, Any]) -> str:
        """The text a model writes for assistant `message` after `history`, up to the
        end marker: its tool calls in this format's own call syntax."""
        before = self.render(history, True)
        after = self.render(history + [message], False)
        if not after.startswith(before):
            raise TrainerError(
                "the chat template renders an assistant turn differently from its "
                "generation prompt, so demonstrations cannot be tokenized as sampled turns"
            )
        text = after[len(before) :]
        end = text.find(self.end_marker)
        return text if end < 0 else text[:end]

    def reply(
        self, history: list[dict[str, Any]], message: dict[str, Any]
    ) -> list[int]:
        """Tokens a model would sample for assistant `message` after `history`: its turn
        up to the end marker, then the end-of-turn token (a demonstration's target)."""
        return self.spelled(self.turn(history, message)) + [self.tokenizer.eos_token_id]

    def continuation(
        self, history: list[dict[str, Any]], new: list[dict[str, Any]]
    ) -> list[int]:
        """Tokens after the last assistant turn's end marker: `new` messages + generation prompt.

        `history` ends with that assistant message.
        """
        before = self.render(history, False)
        after = self.render(history + new, True)
        cut = before.rfind(self.end_marker)
        if cut < 0 or not after.startswith(before[: cut + len(self.end_marker)]):
            raise TrainerError(
                "the chat template re-renders earlier turns differently as the conversation "
                "grows, so turns cannot be concatenated token by token; use a model whose "
                "template is prefix-stable (Qwen, Llama, Gemma and most chat models are)"
            )
        return self.encode(after[cut + len(self.end_marker) :])
