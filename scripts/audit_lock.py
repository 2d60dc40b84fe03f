"""Known vulnerabilities in requirements.lock, from the advisory data the package index serves.

Runs pip-audit on the lock with ``--disable-pip`` (every pin is exact and hashed, so nothing
is installed or resolved): for each pinned release it asks PyPI's JSON API
(``https://pypi.org/pypi/<name>/<version>/json``), whose ``vulnerabilities`` list comes from
the Python Packaging Advisory Database and OSV. Exit 1 when a locked release has a known
vulnerability (pip-audit lists it with its advisory id and the versions that fix it).

When that API cannot be reached (no network, or an index mirror that does not serve
per-release JSON), the check is skipped, not passed: it says so, with the reason, and exits
0, so ``make test`` still runs offline. ``AUDIT=require`` makes an unreachable API an error
(exit 2) instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
# pip-audit asks pypi.org itself; the probe's address can be changed for tests only.
SERVICE = os.environ.get("AUDIT_PROBE_URL", "https://pypi.org/pypi") + "/{name}/{version}/json"
PROBE_TIMEOUT_S = 5.0
AUDIT_TIMEOUT_S = 600
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)", re.MULTILINE)


def first_pin() -> tuple[str, str]:
    """The lock's first pinned release (name, version)."""
    found = PIN.search(LOCK.read_text())
    if found is None:
        sys.exit(f"audit: no pinned release in {LOCK}")
    return found.group(1), found.group(2)


def service_problem() -> str | None:
    """Why the advisory service cannot answer for a locked release (None: it can)."""
    name, version = first_pin()
    url = SERVICE.format(name=name, version=version)
    try:
        # https://pypi.org, or the loopback server of a test: never a file: URL.
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as reply:  # noqa: S310
            body = json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return f"{url} answered HTTP {error.code}"
    except (urllib.error.URLError, OSError, ValueError) as error:
        return f"{url} could not be read ({error})"
    if not isinstance(body, dict) or "vulnerabilities" not in body:
        return f"{url} answered without a vulnerabilities list"
    return None


def main() -> int:
    """Audit the lock, or say why it cannot be audited from here."""
    problem = service_problem()
    if problem is not None:
        message = f"audit: SKIPPED, the advisory service cannot be reached: {problem}"
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
