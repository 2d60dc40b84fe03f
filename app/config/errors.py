"""A bad setting: the error that names its variable, and the one line every program prints."""

from __future__ import annotations

import sys


class ConfigError(ValueError):
    """A configuration variable is missing or malformed; the message names it."""

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable}: {problem}")
        self.variable = variable


# Every program ends with this status on a bad setting: a usage error, as argparse and click say.
BAD_SETTING_STATUS = 2


def report_bad_setting(error: ConfigError) -> int:
    """Print the one line an operator needs on stderr (the variable and what it allows, no
    traceback); the exit status to end with. Every entry point reports through here."""
    print(f"probboard: {error}", file=sys.stderr, flush=True)
    return BAD_SETTING_STATUS
