"""`router serve`'s HTTP surface with a scripted backend: routes kept, pins, bad requests."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import openai
import pytest

from router.batching import Completion, OneShot
from router.modes import Route
from router.prompt import BASE
from router.serve import MAX_BODY, ChatRequest, RoutedChat, make_server


class ScriptedBackend:
    """Routes by a keyword of the first user message; answers with a fixed text."""

    def __init__(self) -> None:
        self.routed = 0
        self.text = '<tool_call>{"name": "lookup", "arguments": {"q": 1}}</tool_call>'
        self.seen: list[tuple[str, list[dict]]] = []
        self.batches: list[int] = []

    def names(self) -> list[str]:
        return ["alpha", "beta"]

    def route(self, messages: list[dict]) -> Route:
        self.routed += 1
        user = next(m["content"] for m in messages if m["role"] == "user")
        target = "beta" if "beta" in user else "alpha"
        return Route("argmax", target, {target: 1.0})

    def open(self, route, chat):
        return OneShot(self.complete, route)

    def complete(self, batch, route):
        self.batches.append(len(batch))
        for pending in batch:
            self.seen.append((route.key, pending.messages))
        return [Completion(self.text, 7, 3, "stop") for _ in batch]


@pytest.fixture
def served() -> Iterator[tuple[ScriptedBackend, RoutedChat, int]]:
    backend = ScriptedBackend()
    chat = RoutedChat(backend)
    server = make_server(chat, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield backend, chat, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _client(port: int) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0
    )


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"q": {"type": "integer"}}},
        },
    }
]


def test_routes_are_kept_per_conversation_and_pins_win(served) -> None:
    backend, chat, port = served
    client = _client(port)
    opening = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "please beta"},
    ]
    first = client.chat.completions.create(
        model="trace-router", messages=opening, tools=TOOLS
    )
    assert first.model_extra["route"]["target"] == "beta"
    message = first.choices[0].message
    assert message.tool_calls[0].function.name == "lookup"
    later = [
        *opening,
        message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "42"},
        {"role": "user", "content": "now alpha please"},
    ]
    client.chat.completions.create(model="trace-router", messages=later, tools=TOOLS)
    assert backend.routed == 1 and backend.seen[-1][0] == "beta"
    pinned = client.chat.completions.create(model="alpha", messages=later)
    assert pinned.model_extra["route"]["target"] == "alpha"
    assert client.chat.completions.create(model=BASE, messages=later).model_extra[
        "route"
    ] == {"mode": "pinned", "target": BASE, "adapters": {}, "probabilities": {}}
    # tau2's solo agent: the ticket in a system message, no user message
    solo = client.chat.completions.create(
        model=BASE, messages=[{"role": "system", "content": "ticket: fix the data"}]
    )
    assert solo.choices[0].message.content == backend.text
    # tool_choice "none" (or no tools): the text is the answer, nothing is parsed.
    plain = client.chat.completions.create(
        model="trace-router", messages=opening, tools=TOOLS, tool_choice="none"
    )
    assert plain.choices[0].message.tool_calls is None
    assert plain.choices[0].message.content == backend.text


@pytest.mark.parametrize(
    "body, message",
    [
        ({"messages": [{"role": "wizard", "content": "x"}]}, "unknown role"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "a system or a user"),
        (
            {"messages": [{"role": "user", "content": "x"}], "tools": [{"x": 1}]},
            "tools.0",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}], "max_tokens": 0},
            "max_tokens",
        ),
        ({"messages": "hello"}, "messages"),
        ({"messages": [{"role": "user", "content": "x"}], "stream": True}, "stream"),
        (
            {
                "messages": [
                    {"role": "user", "content": "x"},
                    {"role": "assistant", "tool_calls": [{"function": {"name": 3}}]},
                ]
            },
            "tool_calls.0",
        ),
    ],
)
def test_bad_requests_get_openai_errors(served, body, message) -> None:
    _, _, port = served
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/chat/completions", json.dumps(body))
    response = connection.getresponse()
    answer = json.loads(response.read())
    assert response.status == 400
    assert message in answer["error"]["message"]


def test_malformed_transport_and_paths(served) -> None:
    _, _, port = served
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    deep = "[" * 100_000 + "]" * 100_000
    for payload, status in [(b"{not json", 400), (deep.encode(), 400)]:
        connection.request("POST", "/v1/chat/completions", payload)
        response = connection.getresponse()
        response.read()
        assert response.status == status
    connection.putrequest("POST", "/v1/chat/completions")
    connection.putheader("Content-Length", str(MAX_BODY + 1))
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 413
    response.read()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/v2/anything")
    assert connection.getresponse().status == 404


def test_odd_unicode_is_served(served) -> None:
    backend, _, port = served
    # A lone surrogate is legal in JSON (escaped), not in UTF-8.
    body = {"messages": [{"role": "user", "content": "beta \ud800 \u202e\U0001f600"}]}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/chat/completions", json.dumps(body))
    response = connection.getresponse()
    answer = json.loads(response.read())
    assert response.status == 200, answer
    assert answer["route"]["target"] == "beta"
    assert "\ud800" not in backend.seen[-1][1][0]["content"]


def test_a_hundred_concurrent_clients_are_all_answered(served) -> None:
    _, _, port = served
    body = json.dumps(
        {"model": "trace-router", "messages": [{"role": "user", "content": "hi alpha"}]}
    )
    statuses: list[int] = []
    start = threading.Barrier(100)

    def ask() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        start.wait()  # all connect at once: the listen backlog must hold them
        connection.request("POST", "/v1/chat/completions", body,
                           {"Content-Type": "application/json"})  # fmt: skip
        statuses.append(connection.getresponse().status)
        connection.close()

    threads = [threading.Thread(target=ask) for _ in range(100)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert statuses == [200] * 100


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_get_405_with_allow(served, method) -> None:
    _, _, port = served
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, "/v1/chat/completions", "{}")
    response = connection.getresponse()
    assert response.status == 405 and response.getheader("Allow") == "GET, POST"
    assert json.loads(response.read())["error"]["code"] == 405


def test_a_request_that_stops_mid_way_is_dropped_within_the_timeout(
    monkeypatch,
) -> None:
    import socket
    import time

    import router.serve

    monkeypatch.setattr(router.serve, "READ_TIMEOUT_S", 0.5)
    server = make_server(RoutedChat(ScriptedBackend()), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for opening in (b"POST /v1/chat/completions HTTP/1.1\r\n", b"GET /"):
            with socket.create_connection(server.server_address, timeout=10) as client:
                client.sendall(opening)  # no blank line: the headers never end
                began = time.monotonic()
                answer = client.recv(4096)  # b"" once the server drops it
                assert time.monotonic() - began < 5, answer
    finally:
        server.shutdown()
        server.server_close()


def test_every_request_is_one_escaped_log_line(served, capsys) -> None:
    _, _, port = served
    _client(port).chat.completions.create(
        model="trace-router", messages=[{"role": "user", "content": "alpha"}]
    )
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        raw.sendall(b"GET /v1/\x1b[31mred HTTP/1.1\r\nHost: x\r\n\r\n")
        raw.recv(4096)
    time.sleep(0.2)  # the handler thread logs after it answers
    lines = [
        line
        for line in capsys.readouterr().err.splitlines()
        if line.startswith("router serve:")
    ]
    assert any('"POST /v1/chat/completions HTTP/1.1" 200' in line for line in lines), (
        lines
    )
    assert any("\\x1b[31mred" in line for line in lines) and not any(
        "\x1b" in line for line in lines
    )


def test_a_port_in_use_is_refused_before_anything_loads(tmp_path, capsys) -> None:
    from router.cli import main as router

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        began = time.monotonic()
        code = router(["serve", "--adapters", str(tmp_path / "none"), "--model",
                       str(tmp_path / "none"), "--port", str(port)])  # fmt: skip
    assert code == 2 and time.monotonic() - began < 10
    assert "cannot listen" in capsys.readouterr().err


def test_a_plain_base_model_is_served_without_adapters(tiny_model_dir) -> None:
    """No adapters: the local LLM that codegen, labelling and a user simulator talk to."""
    from router.backends import BaseModelBackend
    from trainer.models import load_base

    model, tokenizer = load_base(str(tiny_model_dir))
    server = make_server(
        RoutedChat(BaseModelBackend(model, tokenizer, "json", 4)), "127.0.0.1", 0
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = _client(server.server_address[1])
        asked = {"model": "trace-router", "temperature": 0, "max_tokens": 5}
        messages = [{"role": "user", "content": "hello"}]
        first = client.chat.completions.create(messages=messages, tools=TOOLS, **asked)
        again = client.chat.completions.create(messages=messages, tools=TOOLS, **asked)
        assert first.choices[0].message.content == again.choices[0].message.content
        assert first.usage.completion_tokens <= 5
        assert [m.id for m in client.models.list().data][:2] == ["trace-router", "base"]
    finally:
        server.shutdown()
        server.server_close()


def test_serving_a_base_model_refuses_routing_settings(tmp_path, capsys) -> None:
    from router.cli import main as router

    for extra in (
        ["--backend", "vllm"],
        ["--mode", "top-p"],
        ["--calibration", "none"],
        ["--backend", "vllm", "--precision", "bf16", "--adapters", str(tmp_path)],
    ):
        code = router(["serve", "--model", str(tmp_path), "--port", "0", *extra])
        assert code == 2
    err = capsys.readouterr().err
    assert "vllm serve MODEL" in err and err.count("routing settings") == 2
    assert "set its --dtype there" in err


def test_served_weights_are_kept_in_the_precision_asked(
    tiny_model_dir, adapters
) -> None:
    """The plain base model and the routed adapter bank alike; LoRA stays float32."""
    import torch

    from router.build import served_backend
    from router.settings import RouterSettings

    plain = RouterSettings(model=str(tiny_model_dir))
    routed = RouterSettings(model=str(tiny_model_dir), adapters=str(adapters))
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        backend = served_backend(plain, "transformers", precision)
        assert next(backend.decoder.model.parameters()).dtype == dtype
        model = served_backend(routed, "transformers", precision).decoder.model
        kinds = {"lora_" in n: p.dtype for n, p in model.named_parameters()}
        assert kinds == {False: dtype, True: torch.float32}
        chat = RoutedChat(served_backend(routed, "transformers", precision))
        request = ChatRequest(messages=[{"role": "user", "content": "hi"}],
                              max_tokens=3, temperature=0)  # fmt: skip
        answer = chat.complete(request)
        assert answer["choices"][0]["message"]["role"] == "assistant"


class HeldBackend(ScriptedBackend):
    """Holds its first batch until `release` is set, so that requests queue behind it."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.started = threading.Event()

    def complete(self, batch, route):
        self.started.set()
        self.release.wait(timeout=30)
        return super().complete(batch, route)


def _post(port: int, content: str, **fields) -> http.client.HTTPConnection:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = {"messages": [{"role": "user", "content": content}], **fields}
    connection.request("POST", "/v1/chat/completions", json.dumps(body),
                       {"Content-Type": "application/json"})  # fmt: skip
    return connection


def _serve(chat: RoutedChat) -> tuple[int, Callable[[], None]]:
    server = make_server(chat, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def stop() -> None:
        server.shutdown()
        server.server_close()

    return server.server_address[1], stop


def test_requests_that_arrive_together_are_decoded_in_one_batch() -> None:
    backend = HeldBackend()
    chat = RoutedChat(backend, batch_size=8)
    port, stop = _serve(chat)
    try:
        first = _post(port, "hi alpha")
        assert backend.started.wait(10)
        waiting = [  # greedy and sampled requests share a stream
            _post(port, f"hi {name} {i}", temperature=i % 2)
            for i in range(3)
            for name in ("alpha", "beta")
        ]
        time.sleep(0.5)  # all six queue behind the held batch
        backend.release.set()
        for connection in (first, *waiting):
            assert connection.getresponse().status == 200
    finally:
        stop()
    # the held request alone; then the other alpha requests join its stream
    # between steps, and the betas make the next stream
    assert backend.batches == [1, 3, 3], backend.batches
    assert list(chat.batcher.batches) == [3, 3]


def test_a_full_queue_answers_503_with_retry_after() -> None:
    backend = HeldBackend()
    port, stop = _serve(RoutedChat(backend, batch_size=1, max_queue=1))
    try:
        first = _post(port, "hi alpha")
        assert backend.started.wait(10)
        queued = _post(port, "hi alpha, second")
        time.sleep(0.3)
        refused = _post(port, "hi alpha, third").getresponse()
        assert refused.status == 503 and refused.getheader("Retry-After") == "1"
        assert "busy" in json.loads(refused.read())["error"]["message"]
        backend.release.set()
        assert first.getresponse().status == 200
        assert queued.getresponse().status == 200
    finally:
        backend.release.set()
        stop()


def test_a_client_that_leaves_before_its_batch_is_never_decoded() -> None:
    backend = HeldBackend()
    port, stop = _serve(RoutedChat(backend, batch_size=8))
    try:
        first = _post(port, "hi alpha")
        assert backend.started.wait(10)
        gone = _post(port, "hi alpha, I will leave")
        time.sleep(0.3)
        gone.sock.shutdown(socket.SHUT_RDWR)  # the client gives up
        gone.close()
        time.sleep(1.5)  # a waiting request notices within POLL_S
        backend.release.set()
        assert first.getresponse().status == 200
        after = _post(port, "hi alpha, later").getresponse()
        assert after.status == 200
    finally:
        stop()
    contents = [messages[0]["content"] for _, messages in backend.seen]
    assert contents == ["hi alpha", "hi alpha, later"]


def test_n_choices_and_stop_strings(served) -> None:
    backend, _, port = served
    backend.text = "first part STOP second part"
    answer = _client(port).chat.completions.create(
        model="trace-router",
        messages=[{"role": "user", "content": "hi alpha"}],
        n=3,
        stop=["STOP"],
    )
    assert [c.index for c in answer.choices] == [0, 1, 2]
    assert {c.message.content for c in answer.choices} == {"first part "}
    assert {c.finish_reason for c in answer.choices} == {"stop"}
    assert answer.usage.completion_tokens == 9 and answer.usage.prompt_tokens == 7
    with pytest.raises(openai.BadRequestError, match="stop"):
        _client(port).chat.completions.create(
            model="trace-router",
            messages=[{"role": "user", "content": "hi"}],
            stop=["a", "b", "c", "d", "e"],
        )


def _six_conversations(
    port: int, models: tuple[str, ...] = ("trace-router",)
) -> dict[int, list[str]]:
    """Six concurrent three-turn conversations, greedy, each its own lengths;
    conversation i asks for model `models[i % len(models)]`."""
    client = _client(port)
    got: dict[int, list[str]] = {}

    def converse(index: int) -> None:
        messages = [{"role": "user", "content": f"chat {index}: " + "hello " * index}]
        got[index] = []
        for turn in range(3):
            answer = client.chat.completions.create(
                model=models[index % len(models)], messages=messages, tools=TOOLS,
                temperature=0, max_tokens=6 + index,
            )  # fmt: skip
            text = answer.choices[0].message.content or ""
            got[index].append(text)
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": f"turn {turn} " * (index + 1)}]  # fmt: skip

    threads = [threading.Thread(target=converse, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return got


def test_batched_decoding_gives_the_one_at_a_time_replies(tiny_model_dir) -> None:
    """Greedy replies of concurrent multi-turn conversations are the same whether the
    server decodes them together (kept caches and all) or one at a time."""
    from router.backends import BaseModelBackend
    from trainer.models import load_base

    model, tokenizer = load_base(str(tiny_model_dir))
    replies, batches = {}, {}
    for batch_size in (1, 8):
        backend = BaseModelBackend(model, tokenizer, "json", batch_size)
        chat = RoutedChat(backend, batch_size)
        port, stop = _serve(chat)
        try:
            replies[batch_size] = _six_conversations(port)
        finally:
            stop()
        batches[batch_size] = chat.batcher.batches
    assert max(batches[8]) > 1 and max(batches[1]) == 1, batches
    assert replies[8] == replies[1]
    assert sorted(replies[1]) == list(range(6))
    assert all(len(r) == 3 for r in replies[1].values())


def test_routed_requests_of_every_route_decode_in_one_batch(
    tiny_model_dir, adapters
) -> None:
    """The adapter bank's server batches conversations pinned to the base model and
    to each adapter together, each row under its own route, and answers as one at a
    time does."""
    from router.adapters import AdapterBank
    from router.backends import TransformersBackend
    from router.capabilities import load_capabilities
    from trainer.models import load_base

    capabilities = load_capabilities(adapters, str(tiny_model_dir))
    base, tokenizer = load_base(str(tiny_model_dir))
    bank = AdapterBank(base, capabilities)
    models = (BASE, *capabilities.names)
    replies, batches = {}, {}
    for batch_size in (1, 8):
        backend = TransformersBackend(
            bank, None, tokenizer, "json", "argmax", batch_size
        )
        chat = RoutedChat(backend, batch_size)
        port, stop = _serve(chat)
        try:
            replies[batch_size] = _six_conversations(port, models)
        finally:
            stop()
        batches[batch_size] = chat.batcher.batches
    assert max(batches[8]) > len(models), batches  # more rows than one route has
    assert replies[8] == replies[1]
    assert all(len(r) == 3 for r in replies[1].values())


class FailingOpen(ScriptedBackend):
    """Its first stream cannot be opened (an adapter that fails to load)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    def open(self, route, chat):
        if not self.failed:
            self.failed = True
            raise RuntimeError("the adapter would not load")
        return super().open(route, chat)


def test_a_stream_that_cannot_open_fails_its_request_and_serving_goes_on() -> None:
    port, stop = _serve(RoutedChat(FailingOpen()))
    try:
        failed = _post(port, "hi alpha").getresponse()
        assert failed.status == 500 and "would not load" in failed.read().decode()
        assert _post(port, "hi alpha again").getresponse().status == 200
    finally:
        stop()


def test_a_route_kept_waiting_stops_other_requests_joining(monkeypatch) -> None:
    import router.batching

    monkeypatch.setattr(router.batching, "HOLD_S", 0.3)
    backend = HeldBackend()
    port, stop = _serve(RoutedChat(backend, batch_size=2))
    try:
        first = _post(port, "hi alpha 0")
        assert backend.started.wait(10)
        others = [_post(port, f"hi alpha {i}") for i in range(1, 8)]
        time.sleep(0.2)
        late = _post(port, "hi beta")  # queued behind seven alpha requests
        time.sleep(0.6)  # it has waited past HOLD_S before the worker is free
        backend.release.set()
        for connection in (first, *others, late):
            assert connection.getresponse().status == 200
    finally:
        stop()
    routes = [route for route, _ in backend.seen]
    # beta goes after the stream it stopped, not after every alpha request
    assert routes.index("beta") < len(routes) - 2, routes


def test_stop_strings_never_cut_the_echoed_prompt_and_n_is_bounded(
    tiny_model_dir,
) -> None:
    from router.backends import BaseModelBackend
    from trainer.models import load_base

    model, tokenizer = load_base(str(tiny_model_dir))
    port, stop = _serve(RoutedChat(BaseModelBackend(model, tokenizer, "json", 4), 4, 8))
    try:
        client = _client(port)
        echoed = client.completions.create(
            model="base", prompt="say STOP now", max_tokens=2, echo=True, stop=["STOP"]
        )
        assert echoed.choices[0].text.startswith("say STOP now")
        with pytest.raises(openai.BadRequestError, match="at most 8 choices"):
            client.chat.completions.create(
                model="trace-router", messages=[{"role": "user", "content": "hi"}], n=9
            )
    finally:
        stop()


@pytest.mark.parametrize("method", ["HEAD", "TRACE", "CONNECT", "BREW"])
def test_methods_the_stdlib_answers_501_get_405_too(served, method) -> None:
    _, _, port = served
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, "/v1/chat/completions")
    response = connection.getresponse()
    assert response.status == 405 and response.getheader("Allow") == "GET, POST"
    body = response.read()
    assert body == b"" if method == "HEAD" else json.loads(body)["error"]["code"] == 405


@pytest.mark.parametrize("line", [b"GET /health\r\n", b"BREW\r\n"])
def test_a_request_line_without_a_version_gets_400_at_once(served, line) -> None:
    _, _, port = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
        client.sendall(line)
        began = time.monotonic()
        answer = b""
        while chunk := client.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert b"METHOD PATH HTTP/1.1" in answer
    assert time.monotonic() - began < 5  # answered, not left to the read deadline


def _rss_kib() -> int:
    """This process's resident memory (the server's threads live in it)."""
    for line in open("/proc/self/status", encoding="ascii"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def test_slow_clients_are_dropped_at_the_deadline_beside_normal_traffic(
    monkeypatch,
) -> None:
    """50 clients dribbling a byte every 0.2 s (the request line, the headers, or the
    body) are dropped once the whole-request deadline passes, although each read
    comes well inside it; normal requests meanwhile are answered; threads stay
    bounded by the connection cap."""
    import router.serve

    monkeypatch.setattr(router.serve, "READ_TIMEOUT_S", 2.0)
    server = make_server(RoutedChat(ScriptedBackend()), "127.0.0.1", 0, 60)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    before = threading.active_count()
    held: list[float] = []
    openings = [
        b"POST /v1/chat/completions HTTP/1.1\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100000\r\n\r\n",
        b"",  # the request line itself, a byte at a time
    ]

    def dribble(index: int) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            began = time.monotonic()
            client.sendall(openings[index % 3])
            client.settimeout(0.2)
            try:
                for _ in range(300):  # at most a minute of dribbling
                    client.sendall(b"x" if index % 3 else b"G")
                    try:
                        if client.recv(4096) == b"":
                            break  # dropped
                    except TimeoutError:
                        continue
            except OSError:
                pass  # reset: dropped too
            held.append(time.monotonic() - began)

    slow = [threading.Thread(target=dribble, args=(i,)) for i in range(50)]
    for thread in slow:
        thread.start()
    time.sleep(0.5)
    peak = threading.active_count()
    statuses = []
    for index in range(10):
        connection = _post(port, f"hi alpha {index}")
        statuses.append(connection.getresponse().status)
        connection.close()
    for thread in slow:
        thread.join(timeout=60)
    server.shutdown()
    server.server_close()
    assert statuses == [200] * 10
    assert len(held) == 50 and max(held) < 10, sorted(held)[-5:]
    # the 50 clients' threads, the test's own 50, and the serving thread
    assert peak - before <= 50 + 50 + 2


def test_three_hundred_concurrent_clients_are_answered_or_refused() -> None:
    """Past the connection cap a client gets 503 with Retry-After at once (no thread
    is started for it); every other one its answer; five rounds leave the process's
    memory where it was after the first."""
    server = make_server(RoutedChat(ScriptedBackend()), "127.0.0.1", 0, 32)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    body = json.dumps({"messages": [{"role": "user", "content": "hi alpha"}]})

    def ask(start: threading.Barrier, statuses: list[tuple[int, str | None]]) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        start.wait()
        connection.request("POST", "/v1/chat/completions", body,
                           {"Content-Type": "application/json"})  # fmt: skip
        response = connection.getresponse()
        response.read()
        statuses.append((response.status, response.getheader("Retry-After")))
        connection.close()

    rss, refused = [], []
    try:
        for _ in range(5):
            statuses: list[tuple[int, str | None]] = []
            start = threading.Barrier(300)
            threads = [
                threading.Thread(target=ask, args=(start, statuses)) for _ in range(300)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            assert len(statuses) == 300
            assert {s for s in statuses if s[0] != 200} <= {(503, "1")}
            assert sum(s[0] == 200 for s in statuses) >= 32
            refused.append(sum(s[0] == 503 for s in statuses))
            rss.append(_rss_kib())
    finally:
        server.shutdown()
        server.server_close()
    print(f"RSS after each round (KiB): {rss}; refused per round: {refused}")
    assert rss[-1] - rss[0] < 64 * 1024, rss


def test_a_refused_client_sending_a_large_body_reads_its_503() -> None:
    """The 503 past the cap is sent at accept, before the client has sent its
    request; the server then reads and drops what the client still sends for a
    while before closing (RFC 9112 9.6's lingering close): closed at once, the
    client's next bytes draw a reset and its upload fails without its 503."""
    server = make_server(RoutedChat(ScriptedBackend()), "127.0.0.1", 0, 1)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        holder = socket.create_connection(("127.0.0.1", port))  # takes the one place
        time.sleep(0.2)
        refused = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        refused.connect()
        time.sleep(0.3)  # the 503 is sent and the server's side shut meanwhile
        body = json.dumps({"messages": [{"role": "user", "content": "x" * 4_000_000}]})
        refused.request("POST", "/v1/chat/completions", body)
        response = refused.getresponse()
        assert response.status == 503 and response.getheader("Retry-After") == "1"
        assert b"connections open" in response.read()
        refused.close()
        holder.close()
    finally:
        server.shutdown()
        server.server_close()


def test_llamacpp_serves_the_adapter_banks_replies_and_routes(
    tiny_model_dir, adapters, tmp_path, capsys
) -> None:
    """`router serve --backend llamacpp`: on the tiny model written as a GGUF file,
    the label log-probs are the transformers scorer's, and greedy replies of
    concurrent conversations pinned to the base model, to each adapter and routed
    are the adapter bank's on transformers, tool list and all; raw completions, the
    probe and --precision are refused by name."""
    pytest.importorskip("llama_cpp")
    import shutil

    import torch

    from router.backends import TransformersBackend
    from router.build import llamacpp_backend, load
    from router.cli import main as router
    from router.settings import RouterSettings
    from trainer.tiny import write_tiny_gguf

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    gguf = write_tiny_gguf(folder)
    served = tmp_path / "adapters"  # the same adapters, on the GGUF file's weights
    shutil.copytree(adapters, served)
    for trace in served.glob("*/trace.json"):
        data = json.loads(trace.read_text())
        trace.write_text(json.dumps({**data, "base_model": str(gguf)}))
    settings = RouterSettings(model=str(gguf), adapters=str(served))
    llama = llamacpp_backend(settings)
    loaded = load(RouterSettings(model=str(tiny_model_dir), adapters=str(adapters)))
    for index in range(4):
        messages = [{"role": "user", "content": "hello " * index + "there"}]
        torch.testing.assert_close(
            llama.router.scorer.logprobs(messages),
            loaded.router.scorer.logprobs(messages),
            atol=1e-3,
            rtol=1e-3,
        )
    models = ("trace-router", BASE, *loaded.capabilities.names)
    replies = {}
    for name, backend in (
        ("transformers", TransformersBackend(
            loaded.bank, loaded.router, loaded.tokenizer, "json", "argmax", 4)),
        ("llamacpp", llama),
    ):  # fmt: skip
        port, stop = _serve(RoutedChat(backend))
        try:
            replies[name] = _six_conversations(port, models)
            if name == "llamacpp":
                with pytest.raises(openai.BadRequestError, match="chat/completions"):
                    _client(port).completions.create(model=BASE, prompt="hi")
        finally:
            stop()
    assert replies["llamacpp"] == replies["transformers"]
    assert all(len(r) == 3 for r in replies["llamacpp"].values())
    assert sum(map(any, replies["llamacpp"].values())) >= 4  # text, not just stops
    for extra in (["--mode", "probe"], ["--precision", "bf16"]):
        code = router(["serve", "--model", str(gguf), "--adapters", str(served),
                       "--port", "0", "--backend", "llamacpp", *extra])  # fmt: skip
        assert code == 2
    err = capsys.readouterr().err
    assert "--mode probe reads the base model's hidden states" in err
    assert "drop --precision" in err and "Traceback" not in err
