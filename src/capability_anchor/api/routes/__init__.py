"""The API's operations (SPEC §6): the reads, the history tree's reads and the writes; the
pages are in `api/pages.py` and `api/home.py`. May import what `api/` may; the routes reach
the log only through the `Service` on the app's state."""

from __future__ import annotations

from typing import Any

from capability_anchor.api.routes import history_routes, reads, writes

ROUTES: list[Any] = [
    reads.healthz,
    reads.roots,
    reads.roots_latest,
    reads.roots_day,
    reads.roots_day_size,
    reads.roots_timestamps,
    reads.roots_timestamp,
    reads.roots_day_tile,
    history_routes.history_checkpoint,
    history_routes.history_checkpoint_size,
    history_routes.history_tile,
    history_routes.history_proof,
    history_routes.history_vkey,
    history_routes.history_policy,
    reads.proof,
    reads.consistency,
    reads.entries,
    reads.keys,
    reads.key_records,
    reads.record,
    writes.prove,
    writes.post_records,
    writes.post_checkpoint,
    reads.metrics_page,
]
