"""The API's operations, one module per resource (SPEC §6); the pages are in `api/pages.py`.
May import what `api/` may; the routes reach the log only through the `Service` on the
app's state.
"""

from __future__ import annotations

from typing import Any

from capability_anchor.api.routes import (
    entries,
    history_routes,
    keys,
    metrics,
    proofs,
    roots,
    writes,
)

ROUTES: list[Any] = [
    keys.healthz,
    roots.roots,
    roots.roots_latest,
    roots.roots_day,
    roots.roots_day_size,
    roots.roots_timestamps,
    roots.roots_timestamp,
    roots.roots_day_tile,
    history_routes.history_checkpoint,
    history_routes.history_checkpoint_size,
    history_routes.history_tile,
    history_routes.history_proof,
    history_routes.history_vkey,
    history_routes.history_policy,
    proofs.proof,
    proofs.consistency,
    entries.entries,
    keys.keys,
    keys.key_records,
    entries.record,
    writes.prove,
    writes.post_records,
    writes.post_checkpoint,
    metrics.metrics_page,
]

__all__ = ["ROUTES"]
