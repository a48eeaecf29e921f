"""`capability-anchor monitor`: follow a log over time (issue #14).

Each run reads the log's newest checkpoint (HTTP or an export folder), checks it against
the trusted keys (and a witness policy's quorum), proves it consistent with the last one
this monitor saw, then reads the new history leaves (the heads, SPEC §12.1) from the entry
bundles and checks every §4 rule on them. Findings are JSON lines; an alarm is named.

Reads a log only as its users do (HTTP or an export folder): may import the kernel,
`verify/`, `bounded/` and `read.source` (the fetcher of a published log, shared with the
log's recovery); never the store, the log or the service.
"""

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
