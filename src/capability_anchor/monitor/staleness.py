"""A log or mirror that lags: a missing checkpoint (exit 2, `checkpoint_missing` past `max_lag`), an
older one of the log's own history (the `checkpoint_older` warning), and heads past the checkpoint
(the `checkpoint_stale` warning): none is evidence that the log misbehaved."""

from __future__ import annotations

from pathlib import Path

from capability_anchor.encoding import utc_second
from capability_anchor.errors import CapabilityAnchorError, InputError
from capability_anchor.merkle import HASH_SIZE, TILE_WIDTH, TreeEdge
from capability_anchor.merkle.tilepath import entries_path
from capability_anchor.monitor import state as states
from capability_anchor.note import Checkpoint
from capability_anchor.note.signed import b64decode
from capability_anchor.read.source import FolderSource, LogSource, split_bundle, where_of

from .heads import Finding, leaf_claims


def missing(
    source: LogSource,
    state: states.MonitorState,
    options: states.MonitorOptions,
    findings: list[Finding],
) -> None:
    """No checkpoint served (404, no file): exit 2 naming where, until it lasted past `max_lag`
    since the first run that found it so; then `checkpoint_missing`. Before any checkpoint was seen
    there is nothing to miss."""
    if not state.size:
        return
    now, max_lag, state_dir = options.now(), options.max_lag, options.state_dir
    if state.missing_since is None:
        state.missing_since = now
        states.save(state_dir, state, state.size)
    since, lasted = utc_second(int(state.missing_since)), now - state.missing_since
    if lasted > max_lag:
        findings.append(
            {
                "alarm": "checkpoint_missing",
                "old_size": state.size,
                "missing_since": since,
                "lag_s": int(lasted),
                "max_lag_s": int(max_lag),
                "detail": "the log has not served history/checkpoint (HTTP 404) for longer "
                "than --max-lag, after it served one of this size",
            }
        )
        return
    where = where_of(source, "history/checkpoint")
    if isinstance(source, FolderSource):
        where += ": not found"
    else:
        where = f"GET {where}: HTTP 404"
    raise InputError(
        f"{where}: no checkpoint, since {since} (the last seen had size {state.size}); "
        f"nothing committed: `checkpoint_missing` if it lasts longer than --max-lag "
        f"({int(max_lag)} s)"
    )


def older(
    state: states.MonitorState,
    checkpoint: Checkpoint,
    state_dir: Path,
    findings: list[Finding],
) -> bool:
    """Whether `checkpoint` is smaller than the last seen and its root is that of the first `size`
    leaves this monitor proved (a lagging mirror: `checkpoint_older`); any other smaller one: False
    (`follow` alarms `checkpoint_rollback`)."""
    served_again = state.missing_since is not None
    state.missing_since = None  # committed with the run: the next 404 starts a new wait
    size = checkpoint.size
    if size >= state.size:
        return False
    seen = {int(n): root for n, root in state.seen}
    if size in seen:
        root = b64decode(seen[size], "a root in the state")
    else:
        edge = TreeEdge()
        edge.extend(bytes(state.leaf_hashes[: size * HASH_SIZE]))
        root = edge.root()
    if root != checkpoint.root:
        return False
    findings.append(
        {
            "warning": "checkpoint_older",
            "size": size,
            "seen_size": state.size,
            "detail": "an older checkpoint of the log's own history, consistent with what "
            "this monitor saw (a mirror or cache that lags); nothing committed",
        }
    )
    if served_again:
        states.save(state_dir, state, state.size)
    return True


def check(
    source: LogSource, state: states.MonitorState, options: states.MonitorOptions
) -> Finding | None:
    """The warning when the heads are past the checkpoint for longer than `max_lag`, else None;
    measured from the first run that saw it (or an unsealed head's `iat`; a sealed head's would
    overstate the lag)."""
    now, max_lag = options.now(), options.max_lag
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
        states.save(options.state_dir, state, state.size)
    if behind is None or now - behind.since <= max_lag:
        return None
    return {
        "warning": "checkpoint_stale",
        "size": state.size,
        "behind_since": utc_second(int(behind.since)),
        "lag_s": int(now - behind.since),
        "max_lag_s": int(max_lag),
        "detail": "the log's heads have grown past the newest checkpoint that meets "
        "the quorum: its witnesses lag, or the log does not submit to them",
    }


def leaf_past(source: LogSource, size: int) -> bytes | None:
    """History leaf `size`, the first past the checkpoint, when the log serves it."""
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
