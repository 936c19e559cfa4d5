"""Batching for `router serve`: requests that arrive together are decoded together.

One worker thread owns the model. Each request waits in a bounded queue; the
worker takes what is queued (up to the batch size, after a short window so
that clients sending at once land in one batch), routes each conversation,
and decodes every group that shares a route, a temperature and an endpoint
(chat or raw text) as one batch.
Rows leave the batch as they finish (the generator drops them from the
cache); a request that arrives meanwhile waits for the next batch. A full
queue is refused at once (`Overloaded`, which the server answers 503 with
Retry-After), and a request whose client has gone before its batch starts
is dropped unread (`Pending.cancel`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from router.errors import RouterError
from router.modes import Route

WINDOW_S = 0.02  # how long the worker waits for more requests after the first


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


@dataclass
class Pending:
    """One request waiting for its batch."""

    request: Any  # router.serve.ChatRequest, or TextRequest with no messages
    messages: list[dict[str, Any]]
    future: Future = field(default_factory=Future)

    @property
    def temperature(self) -> float:
        """The sampling temperature (OpenAI's default is 1)."""
        t = self.request.temperature
        return 1.0 if t is None else float(t)

    def cancel(self) -> bool:
        """Drop the request if its batch has not started (its client has gone)."""
        return self.future.cancel()


Decode = Callable[[list[Pending], Route], list[Completion | RouterError]]


class Batcher:
    """The worker thread and its queue; `submit` blocks a request's thread until done."""

    def __init__(
        self,
        route: Callable[[Pending], Route],
        decode: Decode,
        batch_size: int,
        max_queue: int,
    ) -> None:
        if batch_size < 1 or max_queue < 1:
            raise RouterError("--batch-size and --max-queue must be at least 1")
        self.route = route
        self.decode = decode
        self.batch_size = batch_size
        self.queue: queue.Queue[Pending] = queue.Queue(maxsize=max_queue)
        self.batches: list[int] = []  # the size of every batch decoded (for benchmarks)
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

    def _take(self) -> list[Pending]:
        """The next batch: the first request, and what arrives within the window."""
        batch = [self.queue.get()]
        deadline = time.monotonic() + WINDOW_S
        while len(batch) < self.batch_size:
            try:
                batch.append(
                    self.queue.get(timeout=max(0.0, deadline - time.monotonic()))
                )
            except queue.Empty:
                break
        return [p for p in batch if p.future.set_running_or_notify_cancel()]

    def _work(self) -> None:
        while True:
            routed: list[tuple[Route, Pending]] = []
            for pending in self._take():
                try:
                    routed.append((self.route(pending), pending))
                except Exception as exc:  # noqa: BLE001 - the request's error, not the worker's
                    pending.future.set_exception(exc)

            def key(item: tuple[Route, Pending]) -> tuple[str, float, bool]:
                return item[0].key, item[1].temperature, bool(item[1].messages)

            for _, group in groupby(sorted(routed, key=key), key=key):
                items = list(group)
                route = items[0][0]
                try:
                    results = self.decode([p for _, p in items], route)
                except Exception as exc:  # noqa: BLE001 - the batch fails, the worker stays up
                    results = [exc] * len(items)
                for (_, pending), result in zip(items, results, strict=True):
                    if isinstance(result, Exception):
                        pending.future.set_exception(result)
                    else:
                        pending.future.set_result((route, result))
                self.batches.append(len(items))
