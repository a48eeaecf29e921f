"""The log, in six stages: append -> checkpoint -> seal -> stamp -> publish -> verify
(docs/explanation/procedures.md). `Log` (`log.lifecycle`) is what a Python resolver embeds.
May import the kernel, `timestamp/`, `record/`, `read/`, the store's contract and
`metrics/`; never `witness/`, `monitor/`, `api/`, `cli/`, `audit/` or `export/`.
"""

from .batch import MAX_BATCH, AppendResult, Prepared, prepare_records
from .datafiles import KEY_FILE
from .days import Clock, utc_day
from .lifecycle import Log
from .serverindex import INDEX_CHUNK, SERVER_MEMBERS, index_watermark, server_keys
from .writer import LogWriter

__all__ = [
    "INDEX_CHUNK",
    "KEY_FILE",
    "MAX_BATCH",
    "SERVER_MEMBERS",
    "AppendResult",
    "Clock",
    "Log",
    "LogWriter",
    "Prepared",
    "index_watermark",
    "prepare_records",
    "server_keys",
    "utc_day",
]
