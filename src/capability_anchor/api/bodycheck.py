"""Checking a POST body: strict parse, shape, SPEC §2 validation, JCS and leaf hashes.

Pure and picklable both ways, so the HTTP service runs it in a worker process (see
`api/bodies.py`): that work is CPU-bound Python, and on the event loop, or on a thread under
the same GIL, it would stall every other request. The answer is plain data, never an
exception (exceptions with keyword arguments do not survive pickling): `("ok", value)`, or an
error code of SPEC §6 and the note to answer with.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from capability_anchor import leaf
from capability_anchor.errors import InvalidRecord
from capability_anchor.log import prepare_records
from capability_anchor.parentdeath import tie_to_parent
from capability_anchor.record.rule import OBSERVATION

Outcome = tuple[str, Any]

SHAPES = {"records": '{"records": [...]}', "record": '{"record": {...}}'}


def check_body(
    kind: str,
    body: bytes,
    iss: str,
    max_records: int,
    rule: str = OBSERVATION,
    now: float | None = None,
    namespace: str | None = None,
) -> Outcome:
    """`kind` "record" (`POST /prove`): the leaf hash. "records" (`POST /records`): the
    prepared batch, `(leaf_hash, leaf_bytes, server_keys)` per record, each checked against
    the log's record rule and id namespace (`record/rule.py`) as of the log's clock `now`
    (the service's, read before the body is sent; this process's clock when None). A bad
    record's note counts from 1, like the CLI's `line N`."""
    try:
        parsed = leaf.parse_json(body)
    except InvalidRecord as exc:
        return ("bad_request", str(exc))
    if (
        not isinstance(parsed, dict)
        or set(parsed) != {kind}
        or not isinstance(parsed[kind], list if kind == "records" else dict)
    ):
        return ("bad_request", f"the body must be {SHAPES[kind]}")
    try:
        if kind == "record":
            return ("ok", leaf.leaf_hash(parsed["record"]))
        records = parsed["records"]
        if not 1 <= len(records) <= max_records:
            return ("bad_request", f"send 1 to {max_records} records, not {len(records)}")
        # Every record is valid before any is stored.
        when = time.time() if now is None else now
        return ("ok", prepare_records(records, iss, rule, now=when, namespace=namespace))
    except InvalidRecord as exc:
        note = str(exc)
        return (
            "invalid_record",
            f"record {exc.position + 1}: {note}" if exc.position is not None else note,
        )
    except RecursionError:
        return ("bad_request", "the request is nested too deeply")


WORKER_NICENESS = 5


def start_worker() -> None:
    """Each worker dies with the service (`parentdeath`: a kill -9 of the service must not
    leave it holding the log open), and runs at a lower CPU priority than the service: on a
    busy machine the scheduler then serves the event loop (reads, /healthz) before body
    checks, which can wait (hostile bodies, above all)."""
    tie_to_parent()
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICENESS)


def warm_up() -> bool:
    """Run once when a worker starts, so the first request does not pay for the imports."""
    return True
