"""``python -m app.alerts [worker]``: the alerts program, or a delivery worker (``program.py``)."""

import signal
import sys

try:
    from app.alerts.program import main

    status = main()
except KeyboardInterrupt:
    status = 128 + signal.SIGINT  # Ctrl-C before the signals were taken over: a stop
sys.exit(status)
