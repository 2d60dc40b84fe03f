"""The two delivery loops of a stream after its first event: the generator's (each new frame
yielded to the WSGI server) and the direct one (the broker writes to gunicorn's socket
itself, and this loop only waits, drains a slow client and heartbeats)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from app.metrics.web import STREAM_EVENTS
from app.stream import events
from app.stream.client import Client
from app.stream.fanout import FanOut
from app.stream.writer import DirectWriter, chunk

HEARTBEAT_S = 15.0


def yield_loop(fan: FanOut, client: Client) -> Iterator[bytes]:
    """Every new frame's event for ``client`` (the newest only: a slow client skips boards),
    and a keep-alive after ``HEARTBEAT_S`` quiet, until the stream ends or the worker stops."""
    last_write = time.monotonic()
    while True:
        changed = fan.changed
        frame = fan.frame
        if client.ended is not None or fan.closing:
            return
        if frame is not None and frame.generation != client.seen:
            client.seen = frame.generation
            if frame.seq < client.last_seq:
                continue  # the replay already gave this client a newer board
            last_write = time.monotonic()
            STREAM_EVENTS.inc()
            views = frame.by_view
            yield views.get(client.view) or fan.filtered(frame, client, views)
            continue
        quiet = time.monotonic() - last_write
        if quiet >= HEARTBEAT_S:
            last_write = time.monotonic()
            yield events.comment("keep-alive")
            continue
        changed.wait(HEARTBEAT_S - quiet)


def direct_loop(fan: FanOut, client: Client, writer: DirectWriter) -> None:
    """Hand ``client`` to the fan-out's direct writes through ``writer``, then wait: drain what
    a slow socket left, heartbeat, until the stream ends, the worker stops or the socket dies."""
    client.writer = writer
    frame = fan.frame
    if frame is not None and frame.generation != client.seen and frame.seq >= client.last_seq:
        # A board arrived while the first event was being sent.
        views = frame.chunked_by_view if writer.chunked else frame.by_view
        writer.offer(views.get(client.view) or fan.filtered(frame, client, views))
        client.seen = frame.generation
    with fan.lock:
        fan.direct.add(client)
    heartbeat = events.comment("keep-alive")
    if writer.chunked:
        heartbeat = chunk(heartbeat)
    while not (client.ended is not None or fan.closing or writer.dead):
        quiet = time.monotonic() - writer.last_write
        if quiet >= HEARTBEAT_S:
            writer.offer(heartbeat)
            continue
        writer.wake.wait(HEARTBEAT_S - quiet)
        writer.wake.clear()
        writer.drain()
    with fan.lock:
        fan.direct.discard(client)
    if writer.dead:
        return
    writer.drain()  # finish a partial event before gunicorn writes the last one
