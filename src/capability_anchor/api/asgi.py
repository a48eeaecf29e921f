"""The production ASGI entry point: `uvicorn capability_anchor.api.asgi:app --workers N`.

Configuration comes from the environment (see `Settings.from_env`); the log must exist
(`capability-anchor init`). Importing this module opens the log and runs its self-check, so a
worker with a wrong key or data dir fails before it accepts a connection.
"""

import sys

from .. import metrics
from ..errors import CapabilityAnchorError
from .app import create_app
from .settings import Settings

try:
    # The workers of one uvicorn supervisor share a metrics folder (metrics.py), made before
    # the log opens anything that counts.
    metrics.prepare()
    app = create_app(Settings.from_env())
except CapabilityAnchorError as _exc:
    # One line saying why, not a traceback: uvicorn lets SystemExit through its import.
    print(f"capability-anchor: refusing to start: {_exc}", file=sys.stderr, flush=True)
    raise SystemExit(2) from None
