"""The production ASGI entry point: `uvicorn capability_anchor.api.asgi:app --workers N`,
configured from the environment (`Settings.from_env`). Importing it opens the log and runs
its self-check, so a wrong key or data dir fails before a connection is accepted.
"""

import multiprocessing
import sys

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.metrics import service as metrics
from capability_anchor.parentdeath import tie_to_parent

from .app import create_app
from .settings import Settings

if multiprocessing.parent_process() is not None:
    # A worker of `uvicorn --workers N`: it dies with uvicorn's supervisor, so a kill -9 of
    # the supervisor leaves no worker (nor its helpers) serving on or holding the log.
    tie_to_parent()

try:
    # The workers of one uvicorn supervisor share a metrics folder (metrics.py), made before
    # the log opens anything that counts.
    metrics.prepare()
    app = create_app(Settings.from_env())
except CapabilityAnchorError as _exc:
    # One line saying why, not a traceback: uvicorn lets SystemExit through its import.
    print(f"capability-anchor: refusing to start: {_exc}", file=sys.stderr, flush=True)
    raise SystemExit(2) from None
