"""The worker class gunicorn runs (``gunicorn.conf.py``): gevent, with JSON error answers.

Some requests never reach the app: gunicorn itself refuses a malformed request line (400),
a request line over its limit (414), too many or too large headers (431) and a few others,
and writes a small HTML page. Clients of an API expect its error shape, so in this worker
gunicorn's error writer is replaced by one that sends the ErrorResponse body. gunicorn
chooses the status and closes the connection as before; only the body changes. Errors that
happen before gunicorn has a worker (a refused connection, a full backlog) and TLS
handshake failures send nothing an app could shape.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import gevent
from gunicorn import util
from gunicorn.workers.ggevent import GeventWorker

from app.errors import gunicorn_error_bytes


def write_json_error(sock: socket.socket, status: int, reason: str, message: str) -> None:
    """gunicorn's ``util.write_error`` with an ErrorResponse body instead of HTML."""
    util.write_nonblock(sock, gunicorn_error_bytes(status, reason))


class JsonErrorGeventWorker(GeventWorker):  # type: ignore[misc]  # gunicorn is untyped
    """gunicorn's gevent worker, answering its own errors with ErrorResponse JSON."""

    # gunicorn's wait between turning ``alive`` off and exiting, for worker_int and a request
    # in hand; an attribute so that tests order events without waiting.
    quit_wait_s = 0.1
    _quitting = False
    _loop_ended = False

    def init_process(self) -> Any:
        """Swap the error writer in this worker process, then run as gunicorn does."""
        util.write_error = write_json_error
        return super().init_process()

    def run(self) -> None:
        """gunicorn's loop; afterwards a quit still waiting must not exit (see ``_quit``)."""
        try:
            super().run()
        finally:
            self._loop_ended = True

    def handle_quit(self, sig: int, frame: Any) -> None:
        """Quit once. Ctrl-C reaches a worker twice (the terminal's SIGINT to the group, then
        the master's SIGQUIT): the second exit would be thrown into the first one's exit
        hooks (``worker_exit``: streams' goodbyes, key uses) and cut them short."""
        if self._quitting:
            return
        self._quitting = True
        # Out of the signal handler, as gunicorn's gevent worker does: worker_int may block.
        gevent.spawn(self._quit)

    def _quit(self) -> None:
        """gunicorn's quit (alive off, worker_int, a short wait, exit), except that the exit
        is skipped when the worker's loop has ended meanwhile: it saw ``alive`` off by
        itself, and the worker is already on its way out (exit hooks, then the
        interpreter's shutdown, where a late SystemExit printed "Exception ignored")."""
        self.alive = False
        self.cfg.worker_int(self)
        gevent.sleep(self.quit_wait_s)
        if not self._loop_ended:
            sys.exit(0)
