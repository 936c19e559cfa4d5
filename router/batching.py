"""Batching for `router serve`: requests decoded together, joining as others finish.

One worker thread owns the model. Each request waits in a bounded queue; the
worker routes it and opens a stream for its kind: its endpoint (chat or raw
text), and its route unless the backend decodes each row under its own route
(`mixes_routes`: the local adapter bank). The requests of the same kind
arriving within a short window join. While the stream decodes, one token a
step, a request that stops is answered at once, and a new request of the same
kind joins between steps (continuous batching) up to the batch size; a request
of another kind waits until the stream drains, and once it has waited HOLD_S
no more requests join the stream. A full queue is refused at once
(`Overloaded`, which the server answers 503 with Retry-After), and a request
whose client has gone before its decoding starts is dropped unread
(`Pending.cancel`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from router.errors import RouterError
from router.modes import Route

WINDOW_S = 0.02  # how long the worker waits for more requests after the first
HOLD_S = 2.0  # a request of another route waits at most this long before joining stops


class Overloaded(Exception):
    """The queue is full: try again shortly."""


@dataclass(frozen=True)
class Completion:
    """One generated reply: its text, token counts and why it ended ("stop" or "length")."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish: str
    logprobs: dict[str, Any] | None = None  # a text completion's, in OpenAI's form
    echoed: int = 0  # characters of `text` that are the echoed prompt


@dataclass
class Pending:
    """One request waiting for its batch."""

    request: Any  # router.serve.ChatRequest, or TextRequest with no messages
    messages: list[dict[str, Any]]
    future: Future = field(default_factory=Future)
    arrived: float = field(default_factory=time.monotonic)
    route: Route | None = None  # set when the worker routes it

    @property
    def temperature(self) -> float:
        """The sampling temperature (OpenAI's default is 1)."""
        t = self.request.temperature
        return 1.0 if t is None else float(t)

    def cancel(self) -> bool:
        """Drop the request if its decoding has not started (its client has gone)."""
        return self.future.cancel()


Finished = list[tuple[Pending, "Completion | Exception"]]


class Stream(Protocol):
    """Requests decoded together under one route: admitted between steps, each
    returned as soon as it is done."""

    @property
    def live(self) -> int:
        """Requests admitted and not yet returned."""
        ...

    def admit(self, batch: list[Pending]) -> Finished:
        """Add requests; those finished at once (refused ones) are returned."""
        ...

    def step(self) -> Finished:
        """Decode a step; return the requests that finished."""
        ...

    def pendings(self) -> list[Pending]:
        """The requests admitted and not yet returned."""
        ...

    def close(self) -> None:
        """The stream is drained (a backend may tidy its caches)."""
        ...


Open = Callable[[Route, bool], Stream]  # (route, chat?) -> stream
# what requests decoded together share: (route key or "", chat?)
Kind = tuple[str, bool]


class OneShot:
    """A stream over a backend that completes whole batches at once: each step
    completes every request admitted since the last (a vLLM server batches them)."""

    def __init__(
        self, complete: Callable[[list[Pending], Route], list[Any]], route: Route
    ) -> None:
        self.complete = complete
        self.route = route
        self.waiting: list[Pending] = []

    @property
    def live(self) -> int:
        return len(self.waiting)

    def admit(self, batch: list[Pending]) -> Finished:
        self.waiting += batch
        return []

    def step(self) -> Finished:
        batch, self.waiting = self.waiting, []
        return list(zip(batch, self.complete(batch, self.route), strict=True))

    def pendings(self) -> list[Pending]:
        return list(self.waiting)

    def close(self) -> None:
        pass


class Batcher:
    """The worker thread and its queue; `submit` blocks a request's thread until done.

    A stream runs one kind of request at a time (its endpoint, and its route
    unless `by_route` is off): requests of that kind that arrive while it decodes
    join between steps, up to the batch size; one of another kind waits (and
    stops further joining) until the stream drains, then starts the next stream.
    """

    def __init__(
        self,
        route: Callable[[Pending], Route],
        open_stream: Open,
        batch_size: int,
        max_queue: int,
        by_route: bool = True,
    ) -> None:
        if batch_size < 1 or max_queue < 1:
            raise RouterError(
                "--generation-batch-size and --max-queue must be at least 1"
            )
        self.route = route
        self.by_route = by_route
        self.open_stream = open_stream
        self.batch_size = batch_size
        self.queue: queue.Queue[Pending] = queue.Queue(maxsize=max_queue)
        self.held: deque[Pending] = deque()  # taken from the queue, not yet decoding
        self.batches: deque[int] = deque(maxlen=1000)  # most rows per stream, recent
        threading.Thread(target=self._work, daemon=True, name="batcher").start()

    def submit(self, pending: Pending) -> Pending:
        """Queue `pending` (its `future` holds `(route, Completion)` when done)."""
        try:
            self.queue.put_nowait(pending)
        except queue.Full:
            raise Overloaded(
                f"{self.queue.maxsize} requests are already waiting"
            ) from None
        return pending

    def _routed(self, timeout: float | None) -> Pending | None:
        """The next request still wanted, routed (None if none came within
        `timeout`; None waits); a request whose routing fails gets that error."""
        while True:
            try:
                pending = self.queue.get(timeout=timeout)
            except queue.Empty:
                return None
            if pending.future.cancelled():
                continue  # its client left
            try:
                pending.route = self.route(pending)
                return pending
            except Exception as exc:  # noqa: BLE001 - the request's error, not the worker's
                if pending.future.set_running_or_notify_cancel():
                    pending.future.set_exception(exc)

    def _kind(self, pending: Pending) -> Kind:
        """What requests decoded together share: endpoint, and route if `by_route`
        (each samples at its own temperature, so a greedy request joins a sampled
        one's stream)."""
        assert pending.route is not None
        return pending.route.key if self.by_route else "", bool(pending.messages)

    def _overdue(self, key: Kind) -> Pending | None:
        """The oldest held request of another kind that has waited HOLD_S, if any."""
        now = time.monotonic()
        return next(
            (
                p
                for p in self.held
                if self._kind(p) != key and now - p.arrived >= HOLD_S
            ),
            None,
        )

    def _gather(
        self, key: Kind, joining: list[Pending], live: int, until: float | None
    ) -> None:
        """Move requests of `key` (held ones first, then the queue's, waiting for
        more until `until`) into `joining` while the stream has room and no request
        of another kind has waited HOLD_S; hold every other request taken."""

        def room() -> bool:
            return live + len(joining) < self.batch_size and self._overdue(key) is None

        for pending in list(self.held):
            if self._kind(pending) == key and room():
                self.held.remove(pending)
                joining.append(pending)
        while len(self.held) < self.queue.maxsize:
            wait = 0.0 if until is None else max(0.0, until - time.monotonic())
            pending = self._routed(wait)
            if pending is None:
                return
            if self._kind(pending) == key and room():
                joining.append(pending)
            else:
                self.held.append(pending)

    def _first(self, last: Kind | None) -> Pending:
        """The request that opens the next stream: one of another kind than the
        stream just ended if it waited HOLD_S (it stopped that stream), else the
        oldest held, else the next from the queue."""
        while True:
            overdue = self._overdue(last) if last is not None else None
            if overdue is not None:
                self.held.remove(overdue)
                first = overdue
            elif self.held:
                first = self.held.popleft()
            else:
                first = self._routed(None)
                assert first is not None  # waiting without a timeout
            if not first.future.cancelled():
                return first

    def _work(self) -> None:
        last = None
        while True:
            first = self._first(last)
            last = self._kind(first)
            try:
                stream = self.open_stream(first.route, bool(first.messages))  # type: ignore[arg-type]
            except Exception as exc:  # noqa: BLE001 - the request's error, the worker stays up
                if first.future.set_running_or_notify_cancel():
                    first.future.set_exception(exc)
                continue
            joining = [first]
            # clients sending at once land in one batch
            self._gather(last, joining, 0, time.monotonic() + WINDOW_S)
            most = 0
            while joining or stream.live:
                started = [
                    p for p in joining if p.future.set_running_or_notify_cancel()
                ]
                joining = []
                try:
                    _settle(stream.admit(started))
                    most = max(most, stream.live)
                    if stream.live:
                        _settle(stream.step())
                except Exception as exc:  # noqa: BLE001 - the stream fails, the worker stays up
                    _fail(stream, started, exc)
                    break
                self._gather(last, joining, stream.live, None)
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - tidying a cache must not stop serving
                pass
            self.batches.append(most)


def _settle(finished: Finished) -> None:
    """Give each finished request its route and completion, or its own error."""
    for pending, result in finished:
        if isinstance(result, Exception):
            pending.future.set_exception(result)
        else:
            pending.future.set_result((pending.route, result))


def _fail(stream: Stream, joining: list[Pending], error: Exception) -> None:
    """A stream that raised: every request in it (or being admitted) gets the error."""
    for pending in [*stream.pendings(), *joining]:
        if not pending.future.done():
            pending.future.set_exception(error)
