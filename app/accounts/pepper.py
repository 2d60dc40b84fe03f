"""Where the API-key pepper comes from: ``API_KEY_PEPPER``, or a file in the instance folder.

The pepper must live outside the database and be the same for every process that creates
or checks keys. Outside the embedded shape ``API_KEY_PEPPER`` is required
(``app.config.require_web_secrets``: the web service and its CLI refuse to start without it),
because a pepper made up here would differ between releases and hosts. Only the embedded
shape (one process on one machine) falls back to a random pepper created once in
``instance/api-key-pepper`` (mode 0600) and reused.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

log = logging.getLogger(__name__)

PEPPER_FILE = "api-key-pepper"


def load_pepper(configured: str, instance_path: str) -> bytes:
    """The configured pepper, else the instance file's (created on first use)."""
    if configured:
        return configured.encode("utf-8")
    path = Path(instance_path) / PEPPER_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process created it first: read theirs
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(32))
        log.warning("API_KEY_PEPPER is not set (embedded shape): using the pepper in %s", path)
    value = path.read_text().strip()
    if len(value) < 16:
        raise RuntimeError(f"{path} holds no usable pepper; delete it or set API_KEY_PEPPER")
    return value.encode("utf-8")
