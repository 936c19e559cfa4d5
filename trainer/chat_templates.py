"""Chat templates for base models that ship none (e.g. Gemma 3 270M pretrained).

`--chat-template gemma|chatml|FILE` sets one; a built-in one also names the
token that ends a turn, which becomes the tokenizer's end-of-sequence token so
generation stops at the end of the assistant's turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.errors import TrainerError

BUILTIN: dict[str, tuple[str, str]] = {
    # name: (jinja template, end-of-turn token)
    "gemma": (
        "{{ bos_token }}{% for m in messages %}"
        "{% if m.role not in ['system', 'user', 'assistant'] %}"
        "{{ raise_exception('only system, user and assistant roles') }}{% endif %}"
        "<start_of_turn>{{ 'model' if m.role == 'assistant' else 'user' }}\n"
        "{{ m.content }}<end_of_turn>\n{% endfor %}"
        "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}",
        "<end_of_turn>",
    ),
    "chatml": (
        "{% for m in messages %}"
        "{% if m.role not in ['system', 'user', 'assistant'] %}"
        "{{ raise_exception('only system, user and assistant roles') }}{% endif %}"
        "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        "<|im_end|>",
    ),
}


def apply_chat_template(tokenizer: Any, choice: str) -> None:
    """Give `tokenizer` the built-in template `choice`, or the jinja file at that path."""
    if not isinstance(choice, str) or not choice.strip():
        raise TrainerError(
            f"--chat-template must be a built-in name ({', '.join(BUILTIN)}) or a jinja "
            f"file, not {str(choice)[:80]!r}"
        )
    if choice in BUILTIN:
        template, end = BUILTIN[choice]
        if end not in tokenizer.get_vocab():
            tokenizer.add_special_tokens({"additional_special_tokens": [end]})
        tokenizer.eos_token = end
    else:
        template = template_file(choice, "--chat-template")
    tokenizer.chat_template = template


def template_file(choice: str, name: str) -> str:
    """The jinja template in the file `choice` names (a TrainerError naming the
    option or key `name` if it is not a readable, non-empty text file of at most
    1 MB): checked before any model loads."""
    path = Path(choice)
    try:
        if not path.is_file():
            raise TrainerError(
                f"{name}: '{choice}' is neither a built-in "
                f"({', '.join(BUILTIN)}) nor a file"
            )
        if path.stat().st_size > 1_000_000:
            raise TrainerError(f"{name}: {path} is larger than 1 MB")
        template = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainerError(
            f"{name}: cannot read {path} as UTF-8 text ({exc})"
        ) from None
    if not template.strip():
        raise TrainerError(f"{name}: {path} is empty; give a jinja chat template")
    return template
