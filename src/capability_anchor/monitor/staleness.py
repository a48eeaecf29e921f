"""Step 6 of a monitor run (`follow.py`): the `checkpoint_stale` warning, a warning and not
an alarm: heads past the checkpoint are no evidence that the log misbehaved, only that its
witnesses lag or that it does not submit to them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.merkle import TILE_WIDTH
from capability_anchor.merkle.tilepath import entries_path
from capability_anchor.monitor import state as states

from .heads import leaf_claims
from .source import FolderSource, LogSource, split_bundle


def check(
    source: LogSource, state: states.MonitorState, *, now: float, max_lag: float, state_dir: Path
) -> dict[str, Any] | None:
    """The warning when the log's heads are past the checkpoint (one that met the quorum,
    with --policy) for longer than `max_lag`, else None. Measured from the first run that
    saw a head past this checkpoint (kept in the state), or from that head's `iat` when it
    is an unsealed head (signed when published); a sealed head's `iat` is the end of its day,
    before it was published, so it would overstate the lag."""
    leaf = leaf_past(source, state.size)
    behind = state.behind
    if leaf is None:
        behind = None
    elif behind is None or behind.size != state.size:
        behind = states.Behind(state.size, now)
        try:
            claims = leaf_claims(leaf)
        except CapabilityAnchorError:
            claims = None  # not a head: alarmed once a checkpoint covers it
        if claims is not None and not claims["sealed"]:
            behind.since = min(behind.since, float(claims["iat"]))
    if behind != state.behind:
        state.behind = behind
        states.save(state_dir, state, state.size)
    if behind is None or now - behind.since <= max_lag:
        return None
    since = dt.datetime.fromtimestamp(int(behind.since), dt.UTC)
    return {
        "warning": "checkpoint_stale",
        "size": state.size,
        "behind_since": since.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "lag_s": int(now - behind.since),
        "max_lag_s": int(max_lag),
        "detail": "the log's heads have grown past the newest checkpoint that meets "
        "the quorum: its witnesses lag, or the log does not submit to them",
    }


def leaf_past(source: LogSource, size: int) -> bytes | None:
    """History leaf `size`, the first past the checkpoint, when the log serves it. Every
    history size has its tiles over HTTP, so the next size's bundle answers; an export keeps
    only a tile's newest partial bundle, whatever its width."""
    index, at = divmod(size, TILE_WIDTH)
    widths = [at + 1, TILE_WIDTH]
    if isinstance(source, FolderSource):
        widths += range(at + 2, TILE_WIDTH)
    for width in widths:
        path = "history/" + entries_path(index, width)
        data = source.read(path)
        if data is not None:
            return split_bundle(f"{source.where}/{path}", data, at + 1)[at]
    return None
