"""Fault suite, stopping (issue 34, point 5): the refresher ends within 5 s of SIGTERM or SIGINT
in every state, without a traceback.

``python -m app.refresher`` runs as its own process group (as from a terminal: SIGINT at its
default) and is signalled in each state: while it starts, while it publishes, while Redis
refuses, while Redis accepts and then answers nothing (a paused proxy), while Redis stalls
mid-publish, while the Redis Sentinels it asks for the primary stall, and while the live source
cannot reach its upstream (refused, or accepted and stalled; recording a tape too, whose close
waits for the sockets). The 5 s bound is the behaviour under test; nothing else is timed. A
clean stop exits 0: the watchdog's exit (status 1) fails these tests.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.processes import BIN, RedisServer, free_port, service_env, wait_until
from harness.proxy import TcpProxy
from tests.support.process_group import ProcessGroup, process_group

STOP_WITHIN_S = 5.0  # docs/operations.md: the refresher ends within 5 s of SIGTERM or SIGINT
SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGINT": signal.SIGINT}
# ``-X importtime`` prints a line as each module's import ends. A module under ``app`` other than
# the packages ``app`` and ``app.refresher`` is imported by ``__main__.py``'s ``try``: the
# interpreter's start-up (``site``) and runpy's own work (importing the two packages, compiling
# ``__main__.py``) are over, and Ctrl-C there is ours to handle. Before it, a SIGINT breaks
# CPython's own code with its own traceback, before any line of ours runs (the mark was
# ``| app`` until a CI run signalled inside runpy's compile, 2026-11-30).
# Whole lines only (``\n``, not ``$``, which matches at the end of a half-written line too).
# It rests on ``app/__init__.py`` and ``app/refresher/__init__.py`` importing nothing of ours.
OUR_IMPORTS_STARTED = re.compile(r"^import time:.*\|\s+app\.(?!refresher\n)[\w.]+\n", re.MULTILINE)


@dataclass
class World:
    """What a state needs: the session's Redis, proxies stopped at the end, a scratch dir."""

    redis: RedisServer
    stack: ExitStack
    tmp_path: Path
    redis_proxy: TcpProxy | None = None  # in front of ``redis``, when a state wants one

    def proxy(self, target_port: int, paused: bool) -> TcpProxy:
        """A proxy to ``target_port`` on loopback; ``paused``: it accepts and then stalls."""
        # Own proxy: a state pauses it (a stalled Redis or upstream).
        proxy = self.stack.enter_context(TcpProxy(target_port))
        if paused:
            proxy.pause()
        return proxy


def _upstreams(port: int) -> dict[str, str]:
    """The live source pointed at ``127.0.0.1:port`` for every upstream."""
    http, ws = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"
    return {
        "BOARD_SOURCE": "polymarket",
        "POLYMARKET_GAMMA_URL": http,
        "POLYMARKET_CLOB_URL": http,
        "POLYMARKET_SITE_URL": http,
        "POLYMARKET_CLOB_WS_URL": ws,
        "POLYMARKET_RTDS_URL": ws,
    }


@dataclass(frozen=True)
class State:
    """How to put the refresher in a state: its settings, then what shows it is there."""

    settings: Callable[[World], dict[str, str]]
    reached: str | None  # a line of its log; None: signal it while it is still starting
    then: Callable[[World, ProcessGroup], None] | None = None


def _redis_through_proxy(world: World) -> dict[str, str]:
    """Redis through a forwarding proxy (paused later by ``_stall_redis``)."""
    world.redis_proxy = world.proxy(world.redis.port, paused=False)
    return {"REDIS_URL": f"redis://127.0.0.1:{world.redis_proxy.port}/0"}


def _stall_redis(world: World, group: ProcessGroup) -> None:
    """Pause the proxy in front of Redis and wait until a publish has failed on it."""
    assert world.redis_proxy is not None
    world.redis_proxy.pause()
    assert wait_until(lambda: "refresher tick failed" in group.output(), 20), group.output()


STATES = {
    "starting": State(lambda w: {"REDIS_URL": w.redis.url}, None),
    "publishing": State(lambda w: {"REDIS_URL": w.redis.url}, "leading: this refresher"),
    "redis refusing": State(
        lambda w: {"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"},
        "leader lease: Redis did not answer",
    ),
    "redis stalled from the start": State(
        lambda w: {"REDIS_URL": f"redis://127.0.0.1:{w.proxy(w.redis.port, True).port}/0"},
        "leader lease: Redis did not answer (TimeoutError)",
    ),
    "redis stalled mid-publish": State(
        _redis_through_proxy, "leading: this refresher", _stall_redis
    ),
    # The sentinels accept and answer nothing: every new connection asks them for the primary.
    "sentinel stalled": State(
        lambda w: {
            "REDIS_URL": f"redis+sentinel://127.0.0.1:{w.proxy(w.redis.port, True).port}/main/0"
        },
        "refresher started",
    ),
    "upstream refusing": State(
        lambda w: {"REDIS_URL": w.redis.url, **_upstreams(free_port())}, "Connection refused"
    ),
    "upstream stalled": State(
        lambda w: {"REDIS_URL": w.redis.url, **_upstreams(w.proxy(free_port(), True).port)},
        "timed out",
    ),
    "upstream stalled, recording": State(
        lambda w: {
            "REDIS_URL": w.redis.url,
            "REFRESHER_TAPE_DIR": str(w.tmp_path / "tapes"),
            **_upstreams(w.proxy(free_port(), True).port),
        },
        "timed out",
    ),
}


@pytest.fixture
def world(fresh_redis: RedisServer, tmp_path: Path) -> Iterator[World]:
    """The session's Redis and this test's proxies (stopped at the end, even on failure)."""
    with ExitStack() as stack:
        yield World(fresh_redis, stack, tmp_path)


@pytest.mark.parametrize("signame", list(SIGNALS))
@pytest.mark.parametrize("state", list(STATES))
def test_the_refresher_ends_within_5_s_of_a_stop_signal(
    state: str, signame: str, world: World
) -> None:
    how = STATES[state]
    env = service_env(
        DATABASE_URL=f"sqlite:///{world.tmp_path / 'record.sqlite3'}", **how.settings(world)
    )
    reached = how.reached
    importing = reached is None
    argv = [
        str(BIN / "python"),
        *(["-X", "importtime"] if importing else []),
        "-m",
        "app.refresher",
    ]

    with process_group(argv, env, world.tmp_path / "refresher.log") as group:
        if reached is None:
            # Signalled as soon as our imports begin: long before the first board.
            assert wait_until(lambda: OUR_IMPORTS_STARTED.search(group.output()), 30), (
                group.output()
            )
            assert "refresher started" not in group.output(), group.output()
        else:
            assert wait_until(lambda: reached in group.output(), 30), group.output()
        if how.then is not None:
            how.then(world, group)

        group.interrupt(SIGNALS[signame])
        took = group.wait_all_gone(STOP_WITHIN_S)

        after = group.output_after_signal()
        assert took is not None, f"still running {STOP_WITHIN_S} s after {signame}:\n{after}"
        assert "Traceback" not in after, after
        if not importing:
            assert group.returncode == 0, after
        else:
            # While importing: a clean stop (0), SIGTERM's default action (killed by it) or
            # Ctrl-C's quiet 130; never the watchdog's 1 or a crash.
            signum = SIGNALS[signame]
            quiet = {0, -signum} | ({130} if signum == signal.SIGINT else set())
            assert group.returncode in quiet, (group.returncode, after)


# A main thread that never looks at the stop request (it sleeps for an hour after taking the
# signals over): what a wait without a timeout would do to the refresher.
_HANGS = (
    "import logging, time\n"
    "from app.refresher.stopping import Stopping\n"
    "logging.basicConfig(format='%(levelname)s %(message)s')\n"
    "Stopping().install()\n"
    "print('ready', flush=True)\n"
    "time.sleep(3600)\n"
)


@pytest.mark.parametrize("signame", list(SIGNALS))
def test_a_wait_without_a_timeout_cannot_hold_the_stop(signame: str, tmp_path: Path) -> None:
    """The backstop: the watchdog ends a process whose main thread does not return, says so,
    and exits with status 1, within the bound."""
    argv = [str(BIN / "python"), "-c", _HANGS]

    with process_group(argv, service_env(), tmp_path / "hangs.log") as group:
        assert wait_until(lambda: "ready" in group.output(), 30), group.output()
        group.interrupt(SIGNALS[signame])
        took = group.wait_all_gone(STOP_WITHIN_S)

        after = group.output_after_signal()
        assert took is not None, after
        assert group.returncode == 1, after
        assert "ERROR not stopped 4.5 s after the signal: exiting now" in after, after
