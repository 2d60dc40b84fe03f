"""A program started as a terminal starts it: its own process group, Ctrl-C delivered to all.

``ProcessGroup`` runs a command in a new session (so it and every child it starts share one
process group) with SIGINT at its default action, as a shell in a terminal leaves it. A test
runner started in the background inherits SIGINT ignored, and a child keeps an ignored signal
across exec: without the reset a "Ctrl-C" test would prove nothing. ``interrupt`` sends a
signal to the whole group, as the terminal does on Ctrl-C; ``kill`` ends whatever is left
(tests call it in a ``finally``), by process group, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from harness.processes import ROOT

# Reset SIGINT to its default, then become the command: what a terminal's shell does.
_AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execvpe(sys.argv[1], sys.argv[1:], os.environ)"
)


class ProcessGroup:
    """``argv`` in a process group of its own, its output (stdout and stderr) in a file."""

    def __init__(
        self, argv: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path = ROOT
    ) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in kill()
        self.popen = subprocess.Popen(
            [sys.executable, "-c", _AS_FROM_A_TERMINAL, *argv],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.signalled_at: float | None = None
        self._mark = 0  # how much output there was when the signal went

    @property
    def pgid(self) -> int:
        """The group's id (the leader's pid: it started a session)."""
        return self.popen.pid

    def members(self) -> list[int]:
        """The pids still in the group (zombies excluded)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[2]) == self.pgid and fields[0] != "Z":
                    found.append(int(entry.name))
        return found

    def interrupt(self, signum: int = signal.SIGINT, only: int | None = None) -> None:
        """Send ``signum`` to every process of the group (Ctrl-C: SIGINT), or to the one
        process ``only``, noting when."""
        self._mark = len(self.output())
        self.signalled_at = time.monotonic()
        if only is not None:
            os.kill(only, signum)
        else:
            os.killpg(self.pgid, signum)

    def wait_all_gone(self, timeout: float) -> float | None:
        """Seconds from the signal until the leader exited and the group is empty; None
        when something still runs after ``timeout``."""
        assert self.signalled_at is not None, "interrupt() first"
        deadline = self.signalled_at + timeout
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(max(0.0, deadline - time.monotonic()))
        while time.monotonic() < deadline and self.members():
            time.sleep(0.05)
        if self.popen.poll() is None or self.members():
            return None
        return time.monotonic() - self.signalled_at

    @property
    def returncode(self) -> int | None:
        """The leader's exit status (negative: the signal that ended it)."""
        return self.popen.poll()

    def output(self) -> str:
        """Everything the group wrote so far."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def output_after_signal(self) -> str:
        """What the group wrote from the signal on."""
        return self.output()[self._mark :]

    def kill(self) -> None:
        """SIGKILL whatever is left of the group (idempotent)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(10)
        self._log.close()


@contextlib.contextmanager
def process_group(
    argv: Sequence[str], env: Mapping[str, str], log_path: Path, cwd: Path = ROOT
) -> Iterator[ProcessGroup]:
    """A ``ProcessGroup``, killed at the end whatever happened."""
    group = ProcessGroup(argv, env, log_path, cwd)
    try:
        yield group
    finally:
        group.kill()
