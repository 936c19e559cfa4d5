"""The routing prompt (jinja2, `templates/router/prompt.j2`) and its single-token labels.

The static part (instructions, each capability with its label, description and
one successful trajectory compacted to a token budget, the base label) comes
first so its KV cache serves every task; the task part follows: its policy (the
system message, shared by every task of an environment, cached as well) and its
request (the first user message) with the answer cue. A label is
usable only if, right after the cue, it is exactly one token of the model's
vocabulary; others from the pool are tried until every candidate has one.

In the `chat` format the same text goes through the model's chat template, as
an instruct model is asked things: the static part is the system message, the
task part the user message, and the cue ends with the template's start of the
assistant's turn, so the label is the first token of its answer.
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass
from typing import Any

import jinja2

from factory.paths import templates_dir
from router.capabilities import CapabilitySet
from router.errors import RouterError

POOL = string.ascii_uppercase + string.digits
# Stand-ins for the two messages, where the chat template is split around them.
SYSTEM_MARK, USER_MARK = "\x00system\x00", "\x00user\x00"
BASE = "base"  # the target of the base label: no adapter
# Token budgets: each example trajectory, and a task's first observation.
EXAMPLE_TOKENS = 800
TASK_TOKENS = 512


@dataclass(frozen=True)
class Label:
    """A label shown in the prompt, the token that answers it, and what it routes to."""

    text: str
    token_id: int
    target: str  # a capability name, or BASE


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir() / "router"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def chat_frame(tokenizer: Any) -> tuple[str, str, str]:
    """The chat template's text before the system message, between it and the user
    message, and after the user message (the start of the assistant's turn)."""
    if not getattr(tokenizer, "chat_template", None):
        raise RouterError(
            "--prompt-format chat needs the model's chat template, and this tokenizer "
            "has none; use --prompt-format text"
        )
    text = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": SYSTEM_MARK},
            {"role": "user", "content": USER_MARK},
        ],
        add_generation_prompt=True,
        tokenize=False,
    )
    head, system, rest = text.partition(SYSTEM_MARK)
    between, user, tail = rest.partition(USER_MARK)
    if not (system and user) or SYSTEM_MARK in rest or USER_MARK in tail:
        raise RouterError(
            "the model's chat template does not show a system message then a user "
            "message once each; use --prompt-format text"
        )
    return head, between, tail


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _compact_message(message: dict[str, Any]) -> str:
    """One line of a trajectory: who said what, tool calls as `name(arguments)`."""
    role = message.get("role")
    if role == "assistant":
        calls = [
            f"{c['function'].get('name', '?')}({c['function'].get('arguments', '')})"
            for c in message.get("tool_calls") or []
            if isinstance(c, dict) and isinstance(c.get("function"), dict)
        ]
        text = " ".join([_content(message), *calls]).strip()
        return f"Agent: {text}"
    if role == "tool":
        return f"Tool: {_content(message)[:200]}"
    if role == "user":
        return f"User: {_content(message)}"
    return ""


class RoutingPrompt:
    """Token ids of the static prefix, of a task, and the label token of each candidate."""

    def __init__(
        self,
        capabilities: CapabilitySet,
        tokenizer: Any,
        example_tokens: int = EXAMPLE_TOKENS,
        task_tokens: int = TASK_TOKENS,
        prompt_format: str = "text",
    ) -> None:
        if example_tokens < 0 or task_tokens < 16:
            raise RouterError("--example-tokens must be >= 0 and --task-tokens >= 16")
        self.tokenizer = tokenizer
        self.task_tokens = task_tokens
        self.module = _environment().get_template("prompt.j2").module
        # The text around the static part and after the request: the chat template's
        # turns, or nothing (the template carries any start token, so none is added).
        chat = prompt_format == "chat"
        self.head, self.between, self.tail = (
            chat_frame(tokenizer) if chat else ("", "", "")
        )
        self.labels = self._choose_labels([c.name for c in capabilities.capabilities])
        candidates = [
            {
                "label": label.text,
                "name": capability.name,
                "title": capability.title,
                "description": capability.description,
                "example": self.compact_trajectory(capability.example, example_tokens),
            }
            for label, capability in zip(
                self.labels, capabilities.capabilities, strict=False
            )
        ]
        self.static = (
            self.head
            + str(self.module.static(candidates, self.labels[-1].text))
            + self.between
        )
        self.prefix_ids = tokenizer(self.static, add_special_tokens=not chat)[
            "input_ids"
        ]

    @property
    def choices(self) -> str:
        return ", ".join(label.text for label in self.labels)

    @property
    def label_ids(self) -> list[int]:
        return [label.token_id for label in self.labels]

    @property
    def targets(self) -> list[str]:
        return [label.target for label in self.labels]

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _clip(self, text: str, budget: int) -> str:
        ids = self._encode(text)
        if len(ids) <= budget:
            return text
        return self.tokenizer.decode(ids[: max(budget - 2, 1)]) + " ..."

    def _choose_labels(self, names: list[str]) -> list[Label]:
        """One single-token label per capability, then the base label."""
        cue = str(self.module.request("y", "A, B")) + self.tail
        before = self._encode(cue)
        labels: list[Label] = []
        pool = iter(POOL)
        for target in [*names, BASE]:
            for text in pool:
                token = self._single_token(cue, before, text)
                if token is not None:
                    labels.append(Label(text, token, target))
                    break
            else:
                raise RouterError(
                    f"the tokenizer has single-token labels for only {len(labels)} of "
                    f"{len(names) + 1} candidates; route fewer adapters at once"
                )
        return labels

    def _single_token(self, cue: str, before: list[int], text: str) -> int | None:
        # After a colon a label reads " A"; at the start of a turn (a newline), "A".
        forms = (text, " " + text) if cue[-1:].isspace() else (" " + text, text)
        for form in forms:
            ids = self._encode(cue + form)
            if len(ids) == len(before) + 1 and ids[:-1] == before:
                return ids[-1]
        return None

    def compact_trajectory(
        self, messages: tuple[dict[str, Any], ...], budget: int
    ) -> str:
        """The trajectory as `User:/Agent:/Tool:` lines, cut at `budget` tokens."""
        lines, used = [], 0
        for message in messages:
            line = _compact_message(message)
            if not line:
                continue
            cost = len(self._encode(line + "\n"))
            if used + cost > budget:
                lines.append(
                    self._clip(line, max(budget - used, 0)) if used < budget else "..."
                )
                break
            lines.append(line)
            used += cost
        return "\n".join(lines) or "(no example)"

    def _parts(self, messages: list[dict[str, Any]]) -> tuple[str, str]:
        """The policy and request texts of a first observation, clipped to the budget."""
        system = next((_content(m) for m in messages if m.get("role") == "system"), "")
        user = next((_content(m) for m in messages if m.get("role") == "user"), "")
        user = self._clip(user, self.task_tokens // 2)
        system = self._clip(system, self.task_tokens - len(self._encode(user)))
        return str(self.module.policy(system)), (
            str(self.module.request(user, self.choices)) + self.tail
        )

    def task_text(self, messages: list[dict[str, Any]]) -> str:
        """The task part for a first observation: system policy and first user message."""
        return "".join(self._parts(messages))

    def task_parts(self, messages: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
        """Token ids of the policy part and of the request part (which ends with the cue)."""
        policy, request = self._parts(messages)
        return self._encode(policy), self._encode(request)

    def task_ids(self, messages: list[dict[str, Any]]) -> list[int]:
        policy, request = self.task_parts(messages)
        return policy + request

    def fingerprint(self) -> str:
        """Identifies the prompt and labels (a fitted probe is valid only for the same)."""
        payload = json.dumps(
            [self.static, self.label_ids, self.targets, self.task_tokens]
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]
