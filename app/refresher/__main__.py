"""``python -m app.refresher``: the refresher's own entry point (see ``main.py``)."""

import signal
import sys

try:
    from app.refresher.main import main

    status = main()
except KeyboardInterrupt:
    # Ctrl-C before the refresher took SIGINT over (while importing, or --once): a stop,
    # not a crash, so no traceback; the status a shell gives a program ended by SIGINT.
    status = 128 + signal.SIGINT
sys.exit(status)
