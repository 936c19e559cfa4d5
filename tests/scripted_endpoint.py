"""A local OpenAI-compatible `/v1/chat/completions` server with scripted answers.

Tests reach it through the real `openai` client (OPENAI_BASE_URL points at it).
`answer(body)` returns the assistant's text or whole message (a dict, e.g. with
`tool_calls`), or None to stall (a timeout).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

Answer = Callable[[dict[str, Any]], str | dict[str, Any] | None]


def completion(model: str, content: str | dict[str, Any]) -> dict[str, Any]:
    """A chat.completion object holding one assistant message (text, or the message)."""
    message = (
        content
        if isinstance(content, dict)
        else {"role": "assistant", "content": content}
    )
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                "message": message,
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


@contextmanager
def scripted_endpoint(
    monkeypatch: pytest.MonkeyPatch, answer: Answer, stall_s: float = 5.0
) -> Iterator[list[dict[str, Any]]]:
    """Serve `answer` on loopback; yield the list of request bodies received."""
    requests: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append(body)
            content = answer(body)
            if content is None:
                time.sleep(stall_s)
                return
            data = json.dumps(completion(body["model"], content)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(
        "OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1"
    )
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    try:
        yield requests
    finally:
        server.shutdown()
        server.server_close()
