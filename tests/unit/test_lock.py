"""requirements.lock is the one set of versions: complete, hash-pinned, and what runs here.

``make run`` and ``make test`` install it with ``--require-hashes``; ``make release`` builds
its wheelhouse from it. These tests fail when the lock falls behind setup.cfg (a dependency
added to the ranges but not locked), when an entry lacks a hash, or when the environment the
tests run in holds another version of a locked package than the lock says.
"""

from __future__ import annotations

import configparser
import re
from importlib import metadata

from harness.processes import ROOT
from tests.support.lock import LOCK, PIN, canonical, locked


def declared() -> set[str]:
    """The names setup.cfg asks for (install_requires and every extra), without ranges."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options"]["install_requires"].splitlines()
    for extra in config["options.extras_require"].values():
        lines += extra.splitlines()
    names = {re.split(r"[\[<>=!~; ]", line.strip(), maxsplit=1)[0] for line in lines}
    return {canonical(name) for name in names if name}


def test_every_declared_dependency_is_locked() -> None:
    pins = locked()
    assert len(pins) > 50  # the parser read the file (92 pins today)
    assert declared() - set(pins) == set()


def test_every_pin_carries_a_hash() -> None:
    entries = re.split(r"\n(?=[A-Za-z0-9])", LOCK.read_text())
    pinned = [entry for entry in entries if PIN.match(entry)]
    assert len(pinned) == len(locked())
    unhashed = [entry.split()[0] for entry in pinned if "--hash=sha256:" not in entry]
    assert unhashed == []


def test_the_lock_names_no_index_of_this_machine() -> None:
    text = LOCK.read_text()
    assert "--index-url" not in text and "--find-links" not in text and "file://" not in text


def test_this_environment_runs_the_locked_versions() -> None:
    """Every locked package installed here has the lock's version (make's venv does)."""
    pins = locked()
    installed = {
        canonical(dist.metadata["Name"]): dist.version for dist in metadata.distributions()
    }
    assert "flask" in installed  # the environment was read
    differs = {
        name: (installed[name], version)
        for name, version in pins.items()
        if name in installed and installed[name] != version
    }
    assert differs == {}
