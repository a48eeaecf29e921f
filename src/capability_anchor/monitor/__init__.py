"""`capability-anchor monitor`: follow a log over time, as its users read it (HTTP or an export
folder): each run checks the newest checkpoint, its consistency with the last one seen, and every
SPEC §4 rule on the new heads. May import the kernel, `verify/`, `bounded/` and `read.source`;
never the store, the log or the service."""

from capability_anchor.monitor import alarms
from capability_anchor.read.source import LogSource, open_source

from .compare import compare_states
from .follow import Monitor, MonitorOptions, RunResult
from .state import MonitorState

__all__ = [
    "LogSource",
    "Monitor",
    "MonitorOptions",
    "MonitorState",
    "RunResult",
    "alarms",
    "compare_states",
    "open_source",
]
