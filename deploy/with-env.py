"""Run a command with the variables of a systemd EnvironmentFile (KEY=value per line).

The file's values may contain spaces (``GUEST_RATE_LIMIT=24 per minute``), which a shell
``source`` would split; this reads them the way systemd does and execs the command.

    python3 with-env.py /etc/probboard/probboard.env COMMAND [ARG ...]
    python3 with-env.py /etc/probboard/probboard.env --value NAME   # NAME's value, or ""
"""

import os
import sys


def read_env_file(path: str) -> dict[str, str]:
    """KEY=value lines; blank lines and # comments skipped; one pair of quotes stripped."""
    values: dict[str, str] = {}
    with open(path, encoding="utf-8") as handle:
        for raw in handle:
            line = raw.strip()
            if not line or line.startswith("#") or "=" not in line:
                continue
            key, value = line.split("=", 1)
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            values[key.strip()] = value
    return values


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: with-env.py ENV_FILE COMMAND [ARG ...] | ENV_FILE --value NAME")
    if sys.argv[2] == "--value" and len(sys.argv) == 4:
        print(read_env_file(sys.argv[1]).get(sys.argv[3], "").strip())
        sys.exit(0)
    environment = dict(os.environ)
    environment.update(read_env_file(sys.argv[1]))
    os.execvpe(sys.argv[2], sys.argv[2:], environment)  # noqa: S606 - the operator's command
