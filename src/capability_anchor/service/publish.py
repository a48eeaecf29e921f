"""`serve --publish DIR`: the static read path (SPEC §13.6) exported again whenever the log
signed or stored something new, by the leader or a standby (it reads what the leader
signed). Immutable files first, the checkpoint last (`export.days`)."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio

from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.export.days import export
from capability_anchor.log import Log
from capability_anchor.log.marks import behind_state

log = logging.getLogger("capability_anchor.background")


class Publisher:
    def __init__(self, writer: Log, folder: Path) -> None:
        self.writer = writer
        self.folder = folder
        self._published: tuple[object, ...] | None = None

    async def run_once(self) -> None:
        """Export into the folder if anything changed since the last export (a failure is
        logged once, and tried again at the next tick). Nothing while the log is behind what
        was published: the folder may hold more than this data dir (a restored copy's
        `--publish` folder), and an export would write an older checkpoint over a newer one."""
        if behind_state(self.writer.data_dir) is not None:
            return
        try:
            mark = await anyio.to_thread.run_sync(self._mark)
            if mark == self._published:
                return
            await anyio.to_thread.run_sync(lambda: export(self.writer, self.folder, tiles=True))
            self._published = mark
        except (CapabilityAnchorError, OSError) as exc:
            if self._published != ("failed", str(exc)):
                log.error("publish to %s failed, retrying at the next tick: %s", self.folder, exc)
            self._published = ("failed", str(exc))

    def _mark(self) -> tuple[object, ...]:
        """What a publish would change, cheaply: the history, the newest checkpoint and its
        cosignatures, the newest sealed day and its stamps."""
        store = self.writer.store
        with store.read():
            size = store.checkpoint_size()
            day = store.last_sealed_day()
            return (
                store.history_size(),
                size,
                len(store.cosignatures(size)),
                day,
                len(store.stamps(day)) if day else 0,
            )
