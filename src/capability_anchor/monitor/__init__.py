"""`capability-anchor monitor`: follow a log over time, as its users read it (HTTP or an export
folder): each run checks the newest checkpoint, its consistency with the last one seen, and every
SPEC §4 rule on the new heads. May import the kernel, `verify/`, `bounded/` and `read.source`;
never the store, the log or the service."""

from capability_anchor.read.source import LogSource, open_source

from .follow import Monitor, RunResult
from .state import MonitorOptions, MonitorState, acknowledge, compare_states

__all__ = [
    "LogSource",
    "Monitor",
    "MonitorOptions",
    "MonitorState",
    "RunResult",
    "acknowledge",
    "compare_states",
    "open_source",
]
