"""``python -m app.config``: check the settings in the environment (``load.main``)."""

import sys

from app.config.load import main

sys.exit(main())
