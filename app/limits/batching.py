"""One Redis round trip for many concurrent rate-limit checks.

Every request to ``/latest`` runs one Lua script in Redis. Sent one by one, each costs a
send, a receive and a switch of greenlets in the worker, and a read in Redis; under load
those fixed costs dominate. ``ScriptBatcher`` queues the calls of concurrent requests and
sends whatever is queued as one pipeline while the previous pipeline is in flight, so the
fixed costs are shared by every call in a batch (one at a time: at most one round trip in
flight per worker). Alone, a call goes out at once: batching never waits for company.

The caller that finds nobody sending becomes the sender; when its batch is answered it
hands the role to the oldest call still queued, so no caller sends more than one batch
and none waits longer than the batch in flight plus its own.

The primitives are ``threading``'s: real locks under the development server's threads,
greenlet-aware ones under gunicorn's gevent workers (gevent patches them).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from redis import Redis
from redis.exceptions import NoScriptError


class _Call:
    """One queued script call and, once answered, its result or error."""

    __slots__ = ("args", "done", "error", "keys", "lead", "result")

    def __init__(self, keys: Sequence[str], args: Sequence[int | float | str]) -> None:
        self.keys = keys
        self.args = args
        self.done = threading.Event()
        self.lead = False
        self.result: Any = None
        self.error: BaseException | None = None


class ScriptBatcher:
    """Runs one Lua script for many callers, coalescing concurrent calls into pipelines."""

    def __init__(self, client: Redis, source: str) -> None:
        self._client = client
        self._source = source
        self._sha: str | None = None
        self._lock = threading.Lock()
        self._queue: list[_Call] = []
        self._sending = False

    def __call__(self, keys: Sequence[str], args: Sequence[int | float | str]) -> Any:
        """The script's reply for ``keys`` and ``args``; raises what Redis raised."""
        call = _Call(keys, args)
        with self._lock:
            self._queue.append(call)
            lead = not self._sending
            self._sending = True
        if not lead:
            call.done.wait()
            # Woken either with an answer or with the sender's role.
        if lead or call.lead:
            self._send_queued()
        if call.error is not None:
            raise call.error
        return call.result

    def _send_queued(self) -> None:
        with self._lock:
            batch, self._queue = self._queue, []
        try:
            results = self._run(batch)
        except BaseException as exc:  # every caller in the batch hears of the failure
            results = [exc] * len(batch)
        for call, result in zip(batch, results, strict=True):
            if isinstance(result, BaseException):
                call.error = result
            else:
                call.result = result
        with self._lock:
            successor = self._queue[0] if self._queue else None
            self._sending = successor is not None
        if successor is not None:
            successor.lead = True
            successor.done.set()
        for call in batch:
            call.done.set()

    def _run(self, batch: list[_Call]) -> list[Any]:
        """Send ``batch`` as one pipeline; loads the script once if Redis lost it."""
        if self._sha is None:
            self._sha = str(self._client.script_load(self._source))
        results = self._pipeline(batch, self._sha)
        lost = [i for i, result in enumerate(results) if isinstance(result, NoScriptError)]
        if lost:
            # Redis restarted or its script cache was flushed: load it and send again the
            # calls it refused (they did not run; the others did and must not run twice).
            self._sha = str(self._client.script_load(self._source))
            again = self._pipeline([batch[i] for i in lost], self._sha)
            for i, result in zip(lost, again, strict=True):
                results[i] = result
        return results

    def _pipeline(self, batch: list[_Call], sha: str) -> list[Any]:
        pipe = self._client.pipeline(transaction=False)
        for call in batch:
            pipe.evalsha(sha, len(call.keys), *call.keys, *call.args)
        return list(pipe.execute(raise_on_error=False))
