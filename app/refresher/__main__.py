"""``python -m app.refresher``: the refresher's own entry point (see ``main.py``)."""

import sys

from app.refresher.main import main

sys.exit(main())
