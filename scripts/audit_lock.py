"""Known vulnerabilities in requirements.lock, from the advisory data the package index serves.

Runs pip-audit on the lock with ``--disable-pip`` (every pin is exact and hashed, so nothing
is installed or resolved): for each pinned release it asks PyPI's JSON API
(``https://pypi.org/pypi/<name>/<version>/json``), whose ``vulnerabilities`` list comes from
the Python Packaging Advisory Database and OSV. Exit 1 when a locked release has a known
vulnerability (pip-audit lists it with its advisory id and the versions that fix it).

When that API is not there (no network, a 404, or an index mirror that answers something
else than per-release JSON), the check is skipped, not passed: it says so, with the reason,
and exits 0, so ``make test`` still runs offline. ``AUDIT=require`` makes that an error
(exit 2). A service that is there but failing (429, 5xx, after three tries) and a missing
pip-audit are errors (exit 2) too: never mistaken for a clean audit.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
# pip-audit asks pypi.org itself; the probe's address can be changed for tests only.
SERVICE = os.environ.get("AUDIT_PROBE_URL", "https://pypi.org/pypi") + "/{name}/{version}/json"
PROBE_TIMEOUT_S = 5.0
# The pauses before the second and third tries; a test shortens them (their length is not
# what it checks), as it moves the probe.
RETRY_PAUSES_S = tuple(
    float(pause) for pause in os.environ.get("AUDIT_RETRY_PAUSES_S", "1,3").split(",")
)
AUDIT_TIMEOUT_S = 600
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)", re.MULTILINE)


def first_pin() -> tuple[str, str]:
    """The lock's first pinned release (name, version)."""
    found = PIN.search(LOCK.read_text())
    if found is None:
        sys.exit(f"audit: no pinned release in {LOCK}")
    return found.group(1), found.group(2)


class ServiceUnavailableError(Exception):
    """The advisory service is not there (offline, or a mirror without per-release JSON)."""


class ServiceFailingError(Exception):
    """The advisory service is there but keeps failing (rate limited, server errors)."""


def probe(url: str) -> None:
    """Ask ``url`` once for a release's JSON (raises when it cannot say)."""
    try:
        # https://pypi.org, or the loopback server of a test: never a file: URL.
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as reply:  # noqa: S310
            body = json.loads(reply.read())
    except urllib.error.HTTPError as error:
        if error.code == 429 or error.code >= 500:
            raise ServiceFailingError(f"{url} answered HTTP {error.code}") from None
        raise ServiceUnavailableError(f"{url} answered HTTP {error.code}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as error:
        raise ServiceUnavailableError(f"{url} could not be read ({error!r})") from None
    if not isinstance(body, dict) or "vulnerabilities" not in body:
        raise ServiceUnavailableError(f"{url} answered without a vulnerabilities list")


def check_service() -> None:
    """Probe the service for the lock's first release; a failing service gets two more
    tries, 1 s and 3 s later (``RETRY_PAUSES_S``), before it counts as failing."""
    name, version = first_pin()
    url = SERVICE.format(name=name, version=version)
    for pause in RETRY_PAUSES_S:
        try:
            probe(url)
            return
        except ServiceFailingError:
            time.sleep(pause)
    probe(url)


def main() -> int:
    """Audit the lock, or say why it cannot be audited from here."""
    if importlib.util.find_spec("pip_audit") is None:
        print(
            "audit: FAILED, pip-audit is not installed (make .venv/bin/activate)", file=sys.stderr
        )
        return 2
    try:
        check_service()
    except ServiceFailingError as error:
        print(f"audit: FAILED, the advisory service keeps failing: {error}", file=sys.stderr)
        return 2
    except ServiceUnavailableError as error:
        message = f"audit: SKIPPED, the advisory service cannot be reached: {error}"
        if os.environ.get("AUDIT") == "require":
            print(message.replace("SKIPPED", "FAILED"), file=sys.stderr)
            return 2
        print(message)
        return 0
    command = [
        sys.executable, "-m", "pip_audit", "--requirement", str(LOCK), "--require-hashes",
        "--disable-pip", "--progress-spinner", "off", "--desc", "on",
    ]  # fmt: skip
    print("audit:", " ".join(command[2:]), flush=True)
    try:
        done = subprocess.run(command, cwd=ROOT, timeout=AUDIT_TIMEOUT_S, check=False)  # noqa: S603
        return done.returncode
    except subprocess.TimeoutExpired:
        print(f"audit: FAILED, pip-audit did not finish in {AUDIT_TIMEOUT_S} s", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
