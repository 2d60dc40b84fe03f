"""Tapes: the recorder's file format, order and hours, and that it never holds the refresher.

The recorder is driven directly (a settable clock decides each line's ``t``), then through
a live source on the fake Polymarket upstreams (every exchange on the tape, as sent). A
recording replayed to the same boards: tests/integration/test_tape_replay.py.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import load_settings
from app.refresher import tape as tape_module
from app.refresher.main import main, with_tape
from app.refresher.tape import Tape, hour_name
from harness.fake_polymarket import SPOT_TOPIC, FakeMarket, FakePolymarket, running
from tests.support.live_source import Clock, first_row, poll, sources_on, wait_for

HOUR = 1_800_000_000 - 1_800_000_000 % 3600  # the start of an hour (UTC)


def lines_of(path: Path) -> list[dict[str, Any]]:
    """Every line of a tape file, parsed."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def all_lines(directory: Path) -> list[dict[str, Any]]:
    """Every line of every tape file in ``directory``, files in name order."""
    return [line for path in sorted(directory.glob("*.jsonl")) for line in lines_of(path)]


class SteppingClock:
    """Each read returns the next value: lines get strictly increasing times."""

    def __init__(self, start: float, step: float) -> None:
        self.now = start
        self.step = step
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self.now += self.step
            return self.now


def test_hour_names_are_the_utc_hour() -> None:
    assert hour_name(HOUR) == time.strftime("%Y-%m-%dT%H.jsonl", time.gmtime(HOUR))
    assert hour_name(HOUR + 3599.999) == hour_name(HOUR)
    assert hour_name(HOUR + 3600) != hour_name(HOUR)
    assert hour_name(1_800_000_000.5) == "2027-01-15T08.jsonl"


def test_each_kind_of_line_has_the_documented_fields(tmp_path: Path) -> None:
    tape = Tape(tmp_path, clock=SteppingClock(HOUR + 10, 0.25))
    tape.start()
    tape.event("clob-ws", "connect")
    tape.sent("clob-ws", '{"assets_ids":["1"],"type":"market"}')
    tape.received("clob-ws", "PONG")
    tape.received("rtds", '{"topic":"crypto_prices_chainlink"}')
    tape.exchange("gamma", "GET", "https://g/events?slug=x", None, 200, "[]")
    tape.exchange("site", "POST", "https://s/q", '{"a":1}', 0, "")
    tape.event("clob-ws", "disconnect")
    tape.close()
    lines = all_lines(tmp_path)
    assert lines == [
        {"t": HOUR + 10.25, "src": "clob-ws", "event": "connect"},
        {"t": HOUR + 10.5, "src": "clob-ws", "dir": "out",
         "frame": '{"assets_ids":["1"],"type":"market"}'},
        {"t": HOUR + 10.75, "src": "clob-ws", "frame": "PONG"},
        {"t": HOUR + 11.0, "src": "rtds", "frame": '{"topic":"crypto_prices_chainlink"}'},
        {"t": HOUR + 11.25, "src": "gamma", "method": "GET", "url": "https://g/events?slug=x",
         "body": None, "status": 200, "frame": "[]"},
        {"t": HOUR + 11.5, "src": "site", "method": "POST", "url": "https://s/q",
         "body": '{"a":1}', "status": 0, "frame": ""},
        {"t": HOUR + 11.75, "src": "clob-ws", "event": "disconnect"},
    ]  # fmt: skip


def test_lines_from_many_threads_are_in_time_order_in_hourly_files(tmp_path: Path) -> None:
    clock = SteppingClock(HOUR + 3600 - 1.0, 0.0001)  # crosses into the next hour
    tape = Tape(tmp_path, clock=clock)
    tape.start()

    def record(n: int) -> None:
        for i in range(5000):
            tape.received("rtds", f"{n}-{i}")

    threads = [threading.Thread(target=record, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    tape.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [hour_name(HOUR + 3599), hour_name(HOUR + 3600)]
    for name in names:
        hour = lines_of(tmp_path / name)
        assert all(hour_name(line["t"]) == name for line in hour)
    lines = all_lines(tmp_path)
    assert len(lines) == 20_000 and tape.written == 20_000 and tape.dropped == 0
    times = [line["t"] for line in lines]
    assert times == sorted(times)
    for n in range(4):  # and each thread's own lines in the order it recorded them
        mine = [line["frame"] for line in lines if line["frame"].startswith(f"{n}-")]
        assert mine == [f"{n}-{i}" for i in range(5000)]


def test_a_full_disk_pauses_recording_and_never_holds_the_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Writes to /dev/full fail with ENOSPC: recording pauses (logged once), callers carry
    on, and recording resumes by itself once the disk takes writes again."""
    monkeypatch.setattr(tape_module, "RETRY_S", 0.5)
    monkeypatch.setattr(tape_module, "FLUSH_S", 0.05)
    clock = Clock(HOUR + 5)
    name = tmp_path / hour_name(clock())
    os.symlink("/dev/full", name)
    tape = Tape(tmp_path, clock=clock)
    tape.start()
    caplog.set_level(logging.ERROR, logger=tape_module.__name__)
    for i in range(2000):
        tape.received("clob-ws", f"frame-{i}")

    def paused() -> list[str]:
        return [r.getMessage() for r in caplog.records if "recording paused" in r.getMessage()]

    # The writer counts the dropped line, then logs: wait for the log line itself.
    wait_for(lambda: bool(paused()), "the full disk to be noticed", timeout=10)
    assert tape.dropped > 0
    assert len(paused()) == 1, [r.getMessage() for r in caplog.records]
    name.unlink()  # the disk has room again
    time.sleep(0.6)  # the pause ends

    def resumed() -> bool:
        tape.received("clob-ws", "after")
        return name.exists() and "after" in name.read_text()

    wait_for(resumed, "recording to resume", timeout=10)
    tape.close()
    assert all(line["frame"] != "frame-0" for line in lines_of(name))  # lost, not late


def test_a_full_queue_drops_lines_and_counts_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tape_module, "QUEUE_SIZE", 10)
    tape = Tape(tmp_path, clock=Clock(HOUR))  # not started: nothing drains the queue
    for i in range(25):
        tape.received("rtds", str(i))
    assert tape.dropped == 15


# -- recording a live source on the fakes ---------------------------------------------------

T0 = 1_800_000_000


@pytest.fixture
def world() -> Iterator[FakePolymarket]:
    # Own fakes: the test makes their site endpoint hang.
    with running() as fake:
        yield fake


def test_a_live_source_records_every_exchange(world: FakePolymarket, tmp_path: Path) -> None:
    market = world.list_market(FakeMarket(T0))
    for second in range(-3, 3):
        world.rtds.push(SPOT_TOPIC, (T0 + second) * 1000, 100_000 + second)
    world.site.mode = "hang"  # a failed exchange (a timeout) is on the tape too
    tape = Tape(tmp_path)
    with sources_on(world, tape=tape) as make:
        clock = Clock(T0 + 100)
        source = make(clock)
        source.clob.ping_every_s = 0.2  # a PONG soon
        poll(source, clock, lambda r: r["up_bid"] is not None, "books")
        wait_for(lambda: world.clob_ws.pings > 0, "a PING")
        first_row(source, clock)
        time.sleep(0.5)
        with pytest.raises(httpx.HTTPError):
            source.http.get(world.site.url + "/never", timeout=0.3)  # the hang, cut short
    # sources_on closed the source, and with it the tape.
    lines = all_lines(tmp_path)
    times = [line["t"] for line in lines]
    assert times == sorted(times)
    clob = [line for line in lines if line["src"] == "clob-ws"]
    assert clob[0] == {"t": clob[0]["t"], "src": "clob-ws", "event": "connect"}
    subscription = json.loads(clob[1]["frame"])
    assert clob[1]["dir"] == "out" and set(subscription["assets_ids"]) == set(market.tokens)
    assert any(line.get("frame") == "PONG" and "dir" not in line for line in clob)
    assert any('"event_type"' in line.get("frame", "") and "dir" not in line for line in clob)
    assert clob[-1]["event"] == "disconnect"
    rtds = [line for line in lines if line["src"] == "rtds"]
    assert rtds[0]["event"] == "connect" and rtds[1]["dir"] == "out"
    assert any("crypto_prices" in line.get("frame", "") and "dir" not in line for line in rtds)
    gamma = [line for line in lines if line["src"] == "gamma"]
    assert gamma and all(line["method"] == "GET" and line["body"] is None for line in gamma)
    assert any(line["status"] == 200 and market.slug in line["frame"] for line in gamma)
    failed = [line for line in lines if line["src"] == "site" and line["url"].endswith("/never")]
    assert [line["status"] for line in failed] == [0]


def test_record_names_the_tape_folder_and_an_empty_one_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = load_settings({"BOARD_SOURCE": "polymarket", "REDIS_URL": "memory://"})
    assert settings.refresher_tape_dir == ""
    assert with_tape(settings, "/var/tapes").refresher_tape_dir == "/var/tapes"
    from_env = load_settings({"REFRESHER_TAPE_DIR": "/srv/t", "BOARD_SOURCE": "polymarket"})
    assert with_tape(from_env, None).refresher_tape_dir == "/srv/t"
    assert main(["--record", " "]) == 2
    assert "--record: needs a folder" in capsys.readouterr().err
