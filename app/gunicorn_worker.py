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
from typing import Any

from gunicorn import util
from gunicorn.workers.ggevent import GeventWorker

from app.errors import gunicorn_error_bytes


def write_json_error(sock: socket.socket, status: int, reason: str, message: str) -> None:
    """gunicorn's ``util.write_error`` with an ErrorResponse body instead of HTML."""
    util.write_nonblock(sock, gunicorn_error_bytes(status, reason))


class JsonErrorGeventWorker(GeventWorker):  # type: ignore[misc]  # gunicorn is untyped
    """gunicorn's gevent worker, answering its own errors with ErrorResponse JSON."""

    _quitting = False

    def init_process(self) -> Any:
        """Swap the error writer in this worker process, then run as gunicorn does."""
        util.write_error = write_json_error
        return super().init_process()

    def handle_quit(self, sig: int, frame: Any) -> None:
        """Quit once. Ctrl-C reaches a worker twice (the terminal's SIGINT to the group, then
        the master's SIGQUIT): the second exit would be thrown into the first one's exit
        hooks (``worker_exit``: streams' goodbyes, key uses) and cut them short."""
        if self._quitting:
            return
        self._quitting = True
        super().handle_quit(sig, frame)
