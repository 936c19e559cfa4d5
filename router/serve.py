"""`router serve`: the routed agent behind an OpenAI-compatible chat-completions endpoint.

`POST /v1/chat/completions` (messages, tools, tool_choice, temperature, stop, n,
max_tokens), `POST /v1/completions` (a raw prompt; echo and logprobs give the
prompt's log-probs, which routing through an endpoint reads), `GET /v1/models`
and `GET /health`. A conversation is routed on its first
observation (system and first user message) and keeps that route on later
turns; `model` set to an adapter's name (or "base") pins that configuration
instead. The route is reported in the response (`route`) and the
`X-Trace-Route` header. Requests that arrive together are decoded in one
batch per route (`router.batching`). Written on the standard library's
threading HTTP server: a thread per connection waits for its batch, and no web
framework is needed. What a slow or hostile client can hold is bounded: each
request must arrive whole (request line, headers and body) within
`READ_TIMEOUT_S` of its first byte being awaited, and at most `max_connections`
connections are served at once (one more is answered 503 at accept, with no
thread of its own, and closed by one lingering thread after its late bytes).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import queue
import select
import selectors
import socket
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from factory.errors import printable
from router.batching import Batcher, Completion, Overloaded, Pending, Stream
from router.errors import RouterError
from router.modes import Route
from router.prompt import BASE
from trainer.parsing import parse_tool_calls
from trainer.settings import GENERATION_BATCH_SIZE

ROUTER_MODEL = "trace-router"
MAX_BODY = 8_000_000
LISTEN_BACKLOG = 1024  # connections the kernel queues before the server takes them (the kernel caps it at net.core.somaxconn)
READ_TIMEOUT_S = (
    30.0  # a request (line, headers, body) not read whole within this is dropped
)
WRITE_TIMEOUT_S = (
    30.0  # a client that takes no more of its answer within this is dropped
)
MAX_CONNECTIONS = 128  # connections served at once; one more is answered 503 at accept
LINGER_S = (
    2.0  # how long a refused connection's late bytes are read before it is closed
)
MAX_LINGERING = 1024  # refused connections lingering at once; more are closed at once
MAX_ROUTES = 10_000
CHAT_MAX_TOKENS = 256  # a chat reply's tokens when the request gives no max_tokens
MAX_QUEUE = 256  # requests waiting beyond it are answered 503 with Retry-After
POLL_S = 0.5  # how often a waiting request checks that its client is still there


class Sampling(BaseModel):
    """What both endpoints read besides the prompt (other fields are accepted and ignored)."""

    model_config = ConfigDict(extra="allow")

    temperature: float | None = Field(default=None, ge=0, le=2)
    stop: str | list[str] | None = Field(default=None)
    n: int = Field(default=1, ge=1, le=16)
    stream: Literal[False] | None = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, value: str | list[str] | None) -> list[str]:
        stops = [value] if isinstance(value, str) else list(value or [])
        if len(stops) > 4 or not all(0 < len(s) <= 200 for s in stops):
            raise ValueError("up to 4 stop strings of 1 to 200 characters")
        return stops


class ChatRequest(Sampling):
    """`POST /v1/chat/completions`: a conversation, routed unless `model` pins a route."""

    model: str = ROUTER_MODEL
    messages: list[dict[str, Any]] = Field(min_length=1, max_length=10_000)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_tokens: int | None = Field(default=None, ge=1, le=32_768)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=32_768)

    @property
    def budget(self) -> int:
        """Tokens the reply may take."""
        return self.max_completion_tokens or self.max_tokens or CHAT_MAX_TOKENS


class TextRequest(Sampling):
    """`POST /v1/completions`: a raw prompt (text or token ids) continued under the
    route `model` names (the base model unless an adapter is named); with `echo`
    and `logprobs` the prompt's own log-probs too, which routing through an
    endpoint reads."""

    model: str = BASE
    prompt: str | list[int] = Field(min_length=1)
    max_tokens: int = Field(default=16, ge=0, le=32_768)
    echo: bool = False
    logprobs: int | None = Field(default=None, ge=0, le=5)

    @property
    def budget(self) -> int:
        """Tokens the continuation may take (0: only the echoed prompt)."""
        return self.max_tokens


def _text(content: Any) -> str:
    """OpenAI message content (a string or a list of text parts) as valid UTF-8 text."""
    if isinstance(content, str):
        # Lone surrogates (legal in JSON, not in UTF-8) would break tokenizers.
        return content.encode("utf-8", "replace").decode("utf-8")
    if isinstance(content, list):
        return _text(
            "".join(
                p.get("text", "")
                for p in content
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            )
        )
    return ""


def _call(index: int, call: Any) -> dict[str, Any]:
    """One assistant tool call in OpenAI's form, its arguments a JSON object string."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise RouterError(f"tool_calls.{index}: needs function.name")
    arguments = function.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        raise RouterError(
            f"tool_calls.{index}: function.arguments must be a JSON object"
        )
    return {
        "id": _text(str(call.get("id", f"call_{index}"))),
        "type": "function",
        "function": {"name": _text(function["name"]), "arguments": json.dumps(parsed)},
    }


def normalise(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with string content and well-formed tool calls (what chat templates expect)."""
    out = []
    for message in messages:
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise RouterError(f"messages: unknown role {role!r:.40}")
        item: dict[str, Any] = {
            "role": "system" if role == "developer" else role,
            "content": _text(message.get("content")),
        }
        calls = message.get("tool_calls")
        if role == "assistant" and isinstance(calls, list) and calls:
            item["tool_calls"] = [_call(i, c) for i, c in enumerate(calls)]
        if role == "tool":
            item["tool_call_id"] = _text(str(message.get("tool_call_id", "")))
            item["name"] = _text(str(message.get("name") or "tool"))
        out.append(item)
    return out


def check_tools(tools: list[dict[str, Any]]) -> None:
    """Tools must be OpenAI function schemas: `{"type": "function", "function": {"name", ...}}`."""
    for index, tool in enumerate(tools):
        function = tool.get("function")
        if (
            tool.get("type", "function") != "function"
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("parameters", {}), dict)
            or not isinstance(
                function.get("parameters", {}).get("properties", {}), dict
            )
        ):
            raise RouterError(
                f"tools.{index}: must be {{'type': 'function', 'function': {{'name': ..., "
                "'parameters': {...}}}}"
            )


def conversation_key(messages: list[dict[str, Any]]) -> str:
    """A conversation's identity: its system message and first user message."""
    system = next((m["content"] for m in messages if m["role"] == "system"), "")
    user = next((m["content"] for m in messages if m["role"] == "user"), "")
    return hashlib.sha256(json.dumps([system, user]).encode()).hexdigest()


class Backend(Protocol):
    """What the server needs from a model: names, routing, and streams that decode
    requests together under one route (or, where `mixes_routes` is true, each
    request under its own route)."""

    def names(self) -> list[str]: ...

    def route(self, messages: list[dict[str, Any]]) -> Route: ...

    def open(self, route: Route, chat: bool) -> Stream:
        """A stream decoding requests of this route and endpoint (each request at
        its own temperature)."""
        ...


def pinned(name: str, names: list[str]) -> Route | None:
    """The route a request's `model` pins, or None to let the router choose."""
    if name == BASE:
        return Route("pinned", BASE, {})
    if name in names:
        return Route("pinned", name, {name: 1.0})
    return None


class ClientGone(Exception):
    """The client closed its connection before its reply was decoded."""


class RoutedChat:
    """Routes conversations, remembers their routes, batches their decoding, and
    answers in OpenAI's format."""

    def __init__(
        self,
        backend: Backend,
        batch_size: int = GENERATION_BATCH_SIZE,
        max_queue: int = MAX_QUEUE,
    ) -> None:
        self.backend = backend
        self.routes: OrderedDict[str, Route] = OrderedDict()  # the worker's alone
        self.batcher = Batcher(
            self._route, backend.open, batch_size, max_queue,
            by_route=not getattr(backend, "mixes_routes", False),
        )  # fmt: skip

    def models(self) -> dict[str, Any]:
        created = int(time.time())
        names = [ROUTER_MODEL, BASE, *self.backend.names()]
        return {
            "object": "list",
            "data": [
                {
                    "id": n,
                    "object": "model",
                    "created": created,
                    "owned_by": "trace-factory",
                }
                for n in names
            ],
        }

    def _route(self, pending: Pending) -> Route:
        """The conversation's route (run in the batcher's thread, which owns the model)."""
        fixed = pinned(pending.request.model, self.backend.names())
        if fixed is not None:
            return fixed
        if not pending.messages:  # a raw prompt has no observation to route on
            return Route("pinned", BASE, {})
        key = conversation_key(pending.messages)
        if key in self.routes:
            self.routes.move_to_end(key)
            return self.routes[key]
        route = self.backend.route(pending.messages)
        self.routes[key] = route
        if len(self.routes) > MAX_ROUTES:
            self.routes.popitem(last=False)
        return route

    def _wait(
        self,
        request: ChatRequest | TextRequest,
        messages: list[dict[str, Any]],
        alive: Callable[[], bool],
    ) -> list[tuple[Route, Completion]]:
        """The request's `n` completions once their batch is decoded (ClientGone if
        `alive` says its client left before)."""
        if request.n > self.batcher.queue.maxsize:
            raise RouterError(
                f"n: at most {self.batcher.queue.maxsize} choices (--max-queue)"
            )
        waiting: list[Pending] = []
        try:
            for _ in range(request.n):
                waiting.append(self.batcher.submit(Pending(request, messages)))
        except Overloaded:
            for pending in waiting:
                pending.cancel()
            raise
        results: list[tuple[Route, Completion]] = []
        for pending in waiting:
            while True:
                try:
                    results.append(pending.future.result(timeout=POLL_S))
                    break
                except FutureTimeout:
                    if not alive():
                        for left in waiting:
                            left.cancel()  # those already decoding finish unread
                        raise ClientGone() from None
        return results

    def complete(
        self, request: ChatRequest, alive: Callable[[], bool] = lambda: True
    ) -> dict[str, Any]:
        """The chat completion of `request`; `alive` says whether its client is
        still there."""
        messages = normalise(request.messages)
        check_tools(request.tools or [])
        # tau2's solo agent sends its ticket as the system message alone, which
        # OpenAI's API and vLLM answer; a conversation with neither is refused.
        if not any(m["role"] in ("system", "user") for m in messages):
            raise RouterError(
                "messages: a conversation needs a system or a user message"
            )
        results = self._wait(request, messages, alive)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [
                _choice(index, request, done) for index, (_, done) in enumerate(results)
            ],
            "usage": _usage(results),
            "route": results[0][0].as_dict(),
        }

    def complete_text(
        self, request: TextRequest, alive: Callable[[], bool] = lambda: True
    ) -> dict[str, Any]:
        """The text completion of `request` (legacy `/v1/completions`)."""
        if request.model not in (ROUTER_MODEL, BASE, *self.backend.names()):
            raise RouterError(
                f"model: {request.model!r:.60} is not served; GET /v1/models lists them"
            )
        if not request.echo and request.max_tokens == 0:
            raise RouterError("max_tokens: 0 needs echo: true (nothing to return)")
        results = self._wait(request, [], alive)
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": request.model,
            "choices": [
                {
                    "index": index,
                    "text": _cut(request, done)[0],
                    "logprobs": done.logprobs,
                    "finish_reason": _cut(request, done)[1],
                }
                for index, (_, done) in enumerate(results)
            ],
            "usage": _usage(results),
            "route": results[0][0].as_dict(),
        }


def _usage(results: list[tuple[Route, Completion]]) -> dict[str, int]:
    """Token counts: the prompt once, every choice's completion."""
    prompt = results[0][1].prompt_tokens
    completion = sum(done.completion_tokens for _, done in results)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _cut(request: ChatRequest | TextRequest, done: Completion) -> tuple[str, str]:
    """The text up to the first stop string, and the finish reason."""
    cuts = [
        done.text.index(s, done.echoed)
        for s in request.stop or []
        if s in done.text[done.echoed :]
    ]
    if cuts:
        return done.text[: min(cuts)], "stop"
    return done.text, done.finish


def _choice(index: int, request: ChatRequest, done: Completion) -> dict[str, Any]:
    """One choice: the text cut at the first stop string, tool calls in OpenAI's form."""
    text, finish = _cut(request, done)
    content, calls = (
        (text, [])
        if not request.tools or request.tool_choice == "none"
        else parse_tool_calls(text)
    )
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content or (None if calls else ""),
    }
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": json.dumps(c["arguments"]),
                },
            }
            for c in calls
        ]
        finish = "tool_calls"
    return {
        "index": index,
        "message": message,
        "finish_reason": finish,
        "logprobs": None,
    }


def _error(
    status: int, message: str, kind: str = "invalid_request_error"
) -> tuple[int, dict[str, Any]]:
    return status, {
        "error": {"message": message, "type": kind, "param": None, "code": status}
    }


def _validation_message(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    hint = (
        " (streaming is not supported; send stream: false)" if where == "stream" else ""
    )
    return f"{where}: {first['msg']}{hint}"


class _DeadlineReader(io.RawIOBase):
    """A connection's bytes, each read waiting only for what is left of the request's
    deadline: socketserver's `timeout` bounds one read, so a client sending a byte
    at a time would otherwise hold its thread for as long as it likes."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.deadline = math.inf

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request was not read whole in time")
        self.connection.settimeout(left)
        return self.connection.recv_into(buffer)


def make_handler(chat: RoutedChat) -> type[BaseHTTPRequestHandler]:
    """A request handler class bound to `chat`."""
    deadline_s = READ_TIMEOUT_S

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            self.reader = _DeadlineReader(self.connection)
            self.rfile = io.BufferedReader(self.reader)

        def handle_one_request(self) -> None:
            """One request, read whole (idle wait included) before its deadline; the
            stdlib's handler closes the connection on the TimeoutError past it."""
            self.reader.deadline = time.monotonic() + deadline_s
            super().handle_one_request()

        def parse_request(self) -> bool:
            """The stdlib's parser, less HTTP/0.9: a request line without a version
            gets 400 at once instead of a wait for headers that never come."""
            words = str(self.raw_requestline, "iso-8859-1").split()
            if 0 < len(words) < 3:
                self.requestline = printable(" ".join(words))[:200]
                self.request_version, self.command = self.protocol_version, None
                self.close_connection = True
                self._send(
                    *_error(400, "a request line is METHOD PATH HTTP/1.1"),
                    headers={"Connection": "close"},
                )
                return False
            return super().parse_request()

        def __getattr__(self, name: str) -> Any:
            """Every method that is not GET or POST (HEAD, TRACE, CONNECT, made-up
            ones) answers 405 with Allow, not the stdlib's 501."""
            if name.startswith("do_"):
                return self._not_allowed
            raise AttributeError(name)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            """One line per request on stderr: client, request line, status (escaped:
            the request line is the client's text)."""
            line = printable(format % args)[:300]
            print(f"router serve: {self.client_address[0]} {line}", file=sys.stderr)

        def _send(
            self,
            status: int,
            body: dict[str, Any],
            route: Route | None = None,
            headers: dict[str, str] | None = None,
        ) -> None:
            data = json.dumps(body).encode()
            self.connection.settimeout(
                WRITE_TIMEOUT_S
            )  # reads left it at their deadline
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if route is not None:
                self.send_header("X-Trace-Route", route.key)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":  # a HEAD answer has headers only
                self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, chat.models())
            elif self.path.rstrip("/") in ("/health", ""):
                self._send(200, {"status": "ok"})
            else:
                self._send(
                    *_error(
                        404,
                        f"no route {self.path}; use POST /v1/chat/completions or GET /v1/models",
                        "not_found",
                    )
                )

        def _connected(self) -> bool:
            """Whether the client is still there: a closed socket reads as empty
            (poll, unlike select, takes any descriptor number)."""
            poller = select.poll()
            poller.register(self.connection, select.POLLIN)
            try:
                if not poller.poll(0):
                    return True
                return self.connection.recv(1, socket.MSG_PEEK) != b""
            except OSError:
                return False

        def _not_allowed(self) -> None:
            self.close_connection = True  # its body, if any, is not read
            self._send(
                *_error(
                    405, f"{self.command} is not served; use POST or GET", "not_allowed"
                ),
                headers={"Allow": "GET, POST"},
            )

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            endpoint = ENDPOINTS.get(self.path.rstrip("/").removeprefix("/v1"))
            if endpoint is None:
                self._send(
                    *_error(
                        404,
                        f"no route {self.path}; use POST /v1/chat/completions or "
                        "/v1/completions",
                        "not_found",
                    )
                )
                return
            kind, answer = endpoint
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 < length <= MAX_BODY:
                self.close_connection = True
                self._send(
                    *_error(
                        413 if length > MAX_BODY else 400,
                        f"the body must be JSON of 1 to {MAX_BODY} bytes with a Content-Length",
                    )
                )
                return
            body = self.rfile.read(length)
            if len(body) < length:  # the client closed before its body was whole
                self.close_connection = True
                return
            self.reader.deadline = math.inf  # read whole: decoding may take its time
            try:
                # The stdlib parser: it accepts what JSON allows (lone surrogates too).
                payload = json.loads(body)
            except (ValueError, RecursionError) as exc:
                self._send(*_error(400, f"body: invalid JSON ({str(exc)[:200]})"))
                return
            try:
                request = kind.model_validate(payload)
            except ValidationError as exc:
                self._send(*_error(400, _validation_message(exc)))
                return
            try:
                response = answer(chat, request, self._connected)
            except RouterError as exc:
                self._send(*_error(400, str(exc)))
                return
            except Overloaded as exc:
                self._send(
                    *_error(503, f"the server is busy ({exc}); retry", "overloaded"),
                    headers={"Retry-After": "1"},
                )
                return
            except ClientGone:
                self.close_connection = True
                return
            except Exception as exc:  # noqa: BLE001 - a failed generation answers 500, the server stays up
                self._send(
                    *_error(
                        500,
                        f"generation failed: {type(exc).__name__}: {exc}"[:500],
                        "server_error",
                    )
                )
                return
            self._send(
                200,
                response,
                Route(
                    **{k: response["route"][k] for k in ("mode", "target")},
                    weights=response["route"]["adapters"],
                ),
            )

    return Handler


# POST paths (with or without /v1): the request they read, the method that answers
ENDPOINTS: dict[str, tuple[type[Sampling], Callable[..., dict[str, Any]]]] = {
    "/chat/completions": (ChatRequest, RoutedChat.complete),
    "/completions": (TextRequest, RoutedChat.complete_text),
}


# What a connection over `max_connections` is told before it is closed.
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Retry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
)


class _Lingerer:
    """Closes refused connections the way HTTP servers do a "lingering close": the
    503 is sent and our side shut, then what the client still sends (its request
    often arrives after the accept) is read and dropped for up to LINGER_S. Closing
    at once would answer those bytes with a reset, and a reset makes the client's
    kernel discard the 503 before the client reads it. One thread holds them all,
    at most MAX_LINGERING; the accept loop never waits on any of them."""

    def __init__(self) -> None:
        self.arrivals: queue.SimpleQueue[socket.socket | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def close_later(self, connection: socket.socket) -> None:
        """Hand a connection whose answer is sent to the lingering thread."""
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_WR)
        self.arrivals.put(connection)

    def stop(self) -> None:
        """Close what lingers and end the thread."""
        self.arrivals.put(None)
        self.thread.join(timeout=LINGER_S + 1)

    def _run(self) -> None:
        held = selectors.DefaultSelector()
        deadlines: dict[socket.socket, float] = {}
        stopping = False
        while not stopping or deadlines:
            # block for the next connection only while none lingers
            arrivals = [] if deadlines or stopping else [self.arrivals.get()]
            with contextlib.suppress(queue.Empty):
                while True:
                    arrivals.append(self.arrivals.get_nowait())
            for arrival in arrivals:
                if arrival is None:
                    stopping = True
                elif stopping or len(deadlines) >= MAX_LINGERING:
                    arrival.close()
                else:
                    held.register(arrival, selectors.EVENT_READ)
                    deadlines[arrival] = time.monotonic() + LINGER_S
            for key, _ in (
                held.select(timeout=0.05) if deadlines and not stopping else ()
            ):
                connection: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    closed = not connection.recv(65536)
                except OSError:
                    closed = True
                if closed:  # nothing left to linger for
                    deadlines[connection] = 0.0
            now = time.monotonic()
            for connection, deadline in list(deadlines.items()):
                if stopping or deadline <= now:
                    held.unregister(connection)
                    connection.close()
                    del deadlines[connection]
        held.close()


class Server(ThreadingHTTPServer):
    """The threading server with its connections bounded (socketserver starts a
    thread for each without limit); its listen backlog is LISTEN_BACKLOG, not
    socketserver's 5, so a burst of clients is not reset before a thread takes it."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: Any, max_connections: int
    ) -> None:
        self.lingerer = _Lingerer()  # first: a failed bind calls server_close
        super().__init__(address, handler)
        self.max_connections = max_connections
        self.open_connections = 0
        self.counting = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection, or 503 at once when `max_connections` are open."""
        with self.counting:
            full = self.open_connections >= self.max_connections
            self.open_connections += not full
        if not full:
            super().process_request(request, client_address)
            return
        body = json.dumps(
            _error(503, f"the server has {self.max_connections} connections open; "
                   "retry", "overloaded")[1]
        ).encode()  # fmt: skip
        request.setblocking(False)  # the accept loop never waits on this client
        with contextlib.suppress(OSError):
            request.sendall(BUSY % (len(body), body))
        self.lingerer.close_later(request)

    def server_close(self) -> None:
        super().server_close()
        self.lingerer.stop()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.counting:
                self.open_connections -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, not socketserver's traceback: a client that resets its
        connection (a closed keep-alive pool) is routine."""
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError):
            print(
                f"router serve: {client_address[0]} connection failed: "
                f"{type(error).__name__}: {printable(str(error))[:200]}",
                file=sys.stderr,
            )


def make_server(
    chat: RoutedChat | None,
    host: str,
    port: int,
    max_connections: int = MAX_CONNECTIONS,
) -> ThreadingHTTPServer:
    """The HTTP server (not yet serving); port 0 picks a free one; at most
    `max_connections` connections are served at once.

    With `chat` None the port is taken before the model loads (a port in use is
    refused in a second, not after minutes of loading); `serve(server, chat)`
    then attaches the routed agent.
    """
    try:
        server = Server(
            (host, port),
            make_handler(chat) if chat is not None else None,
            max_connections,
        )
    except OSError as exc:
        raise RouterError(
            f"cannot listen on {host}:{port} ({exc}); choose another --port"
        ) from None
    return server


def attach(server: ThreadingHTTPServer, chat: RoutedChat) -> None:
    """Give a server made before the model loaded its routed agent."""
    server.RequestHandlerClass = make_handler(chat)
