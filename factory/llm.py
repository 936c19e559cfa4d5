"""The OpenAI-compatible endpoint every LLM stage uses (analysis labelling, codegen).

Configured as the `openai` client reads it: OPENAI_BASE_URL and OPENAI_API_KEY
(any value for a local server), with the model named by a `--model` flag.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from factory.errors import FactoryError


def openai_client(purpose: str, fallback: str, timeout: float = 600.0) -> Any:
    """An `openai.OpenAI` client, or exit 2 naming the settings when none is configured."""
    import openai

    if not (os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")):
        raise FactoryError(
            f"{purpose} needs an OpenAI-compatible endpoint: set OPENAI_BASE_URL "
            "(e.g. http://127.0.0.1:8000/v1 for a local vLLM server) and OPENAI_API_KEY "
            f"(any value for a local server), and name the model with --model; {fallback}"
        )
    try:
        return openai.OpenAI(timeout=timeout, max_retries=1)
    except openai.OpenAIError as exc:
        raise FactoryError(
            f"cannot reach an LLM endpoint ({exc}); set OPENAI_BASE_URL and "
            f"OPENAI_API_KEY; {fallback}"
        ) from None


class EndpointTimeout(FactoryError):
    """The endpoint did not answer within the client's timeout."""


def chat(client: Any, **request: Any) -> Any:
    """One chat completion's message; endpoint failures as FactoryErrors naming the fix.

    A timeout is an `EndpointTimeout` (callers that retry may catch it); an
    unreachable endpoint or a refused request (bad model, bad key) exits 2.
    """
    import openai

    try:
        response = client.chat.completions.create(**request)
    except openai.APITimeoutError:
        raise EndpointTimeout(
            f"the endpoint did not answer within {client.timeout}s"
        ) from None
    except openai.APIConnectionError as exc:
        raise FactoryError(
            f"cannot reach the LLM endpoint at {client.base_url} ({exc}); check "
            "OPENAI_BASE_URL"
        ) from None
    except openai.APIStatusError as exc:
        raise FactoryError(
            f"the LLM endpoint refused the request ({exc.status_code}: "
            f"{str(exc.message)[:300]}); check --model and OPENAI_API_KEY"
        ) from None
    return response.choices[0].message


def json_payload(text: str) -> Any:
    """The JSON object in a model answer (code fences and prose around it tolerated)."""
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    candidate = fenced.group(1) if fenced else text
    start, end = candidate.find("{"), candidate.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the answer")
    return json.loads(candidate[start : end + 1])
