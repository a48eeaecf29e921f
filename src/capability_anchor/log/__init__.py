"""The log, in six stages: append -> checkpoint -> seal -> stamp -> publish -> verify.

These names are used with these meanings everywhere (code, comments, docs):

- *append*: a batch of records is validated (`log.batch`), given contiguous leaf indices in
  the current UTC day, and stored with the tiles it completed and the /record index runs it
  filled (`log.serverindex`), in one durable transaction (`log.writer`). An acknowledged
  append is never lost and its index never reused. (Sunlight and Tessera call this
  *sequence* + *integrate*.)
- *checkpoint*: an unsealed head of today is signed and stored when the tree has grown
  (`LogWriter.checkpoint`, `LogWriter.sign_head`). Past days are sealed first, so no head of
  day D exists before every earlier day is sealed.
- *seal*: every day before today that has no sealed head gets one (empty days included),
  chained by `prev` (`LogWriter.seal`). Sealed heads are dated the end of their day, so
  sealing is deterministic and a rerun after a crash produces the same bytes.
- *stamp*: RFC 3161 timestamps of sealed heads are fetched (`log.stamping`, `timestamp/`) and
  stored (`Log.add_stamp`).
- *publish*: what is stored is served as stored (`api/`, through the read side
  `read.reader.LogReader`) and written as files (`export`). Publishing never signs: a head is
  signed by *checkpoint* or *seal*, and is served from the next read after its commit.
- *verify*: anyone checks what was published, offline (`verify`, `cli/verify_proof.py`), and
  the operator re-derives the whole store (`audit`).

`Log` (`log.lifecycle`) is the object a Python resolver embeds: it opens and checks the log
and delegates each stage to its owner (`Log.writer`, `Log.read`, `log.issuance` for
resolver-2 records). The CLI and the HTTP service are thin edges over it. The clock is
injectable (tests), never from the CLI.

May import the kernel, `timestamp/`, `record/`, `read/` (`read.source` to read what was
published), the store's contract (engines only through `store.open`) and `metrics/`; never
`witness/`, `monitor/`, `api/`, `cli/`, `audit/` or `export/` (the layers:
docs/explanation/decisions/36-layers.md).
"""

from .batch import MAX_BATCH, AppendResult, Prepared, prepare_records
from .days import Clock, utc_day
from .lifecycle import KEY_FILE, Log
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
