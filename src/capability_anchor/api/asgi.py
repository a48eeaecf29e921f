"""The production ASGI entry point: `uvicorn capability_anchor.api.asgi:app --workers N`.

Configuration comes from the environment (see `Settings.from_env`); the log must exist
(`capability-anchor init`). Importing this module opens the log and runs its self-check, so a
worker with a wrong key or data dir fails before it accepts a connection.
"""

from .app import create_app
from .settings import Settings

app = create_app(Settings.from_env())
