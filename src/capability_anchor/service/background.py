"""The service's background work: checkpoints, sealing after 00:00 UTC, stamps, witnessing,
publishing (`serve --publish`) and the scrub, by the one process of a data dir holding
`DIR/background.lock`.

Failures, the clock guard and shutdown: docs/explanation/write-path.md#background-work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from pathlib import Path

import anyio

from capability_anchor.errors import CapabilityAnchorError, LeaseLost, StoreBusy, StoreDamaged
from capability_anchor.export.days import export
from capability_anchor.log import Log, utc_day
from capability_anchor.log.clockguard import ClockGuard
from capability_anchor.log.datafiles import try_lock
from capability_anchor.log.marks import Behind, behind_state
from capability_anchor.log.published import LEARN_DEADLINE_S, learn
from capability_anchor.log.stamping import Stamper
from capability_anchor.metrics.service import observe, set_state
from capability_anchor.store import Scrub
from capability_anchor.store.damage import Damage, describe, found
from capability_anchor.witness.client import Witnessing
from capability_anchor.witness.client.schedule import FAILED

log = logging.getLogger("capability_anchor.background")
TICK_S = 1.0
# What a submission cancelled at shutdown may still take: the store step it is in finishes.
_CANCEL_GRACE_S = 2.0


class Background:
    def __init__(
        self,
        writer: Log,
        data_dir: Path,
        checkpoint_interval: float,
        stamper: Stamper | None = None,
        guard: ClockGuard | None = None,
        witnessing: Witnessing | None = None,
        *,
        published: str | None = None,
        learn_deadline: float = LEARN_DEADLINE_S,
        scrubber: Scrub | None = None,
        publish: Path | None = None,
    ) -> None:
        self.writer = writer
        self.publisher = None if publish is None else Publisher(writer, publish)
        self.data_dir = data_dir
        self.published = published
        self.learn_deadline = learn_deadline
        self.scrubber = scrubber
        self._scrubbing: asyncio.Task[None] | None = None
        self.witnessing = witnessing
        self._witness_tasks: dict[str, asyncio.Task[object]] = {}
        self.guard = guard
        self.stamper = stamper
        self._stamping: asyncio.Task[object] | None = None
        self.lock_path = data_dir / "background.lock"
        self.interval = checkpoint_interval
        self._fd: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._last_checkpoint = 0.0
        self.ticks = 0
        self.standby = False
        """Whether the last signature was refused because another replica leads (LeaseLost)."""
        self.stopped_by: CapabilityAnchorError | None = None
        """The fatal error that stopped the background work, if one did."""

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="capability-anchor-background")

    async def stop(self) -> None:
        self._stopping.set()
        if self._task is not None:
            # A checkpoint or seal in progress finishes: it runs in a thread and is awaited.
            await self._task
        if self._stamping is not None:
            # At most one TSA deadline: the exchange in progress ends, the rest waits.
            await asyncio.gather(self._stamping, return_exceptions=True)
        if self._scrubbing is not None and self.scrubber is not None:
            self.scrubber.interrupt()
            await asyncio.gather(self._scrubbing, return_exceptions=True)
        await self._stop_witnessing()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    async def _run(self) -> None:
        while not self._stopping.is_set() and self.stopped_by is None:
            if self._fd is None:
                self._fd = try_lock(self.lock_path)
            if self._fd is not None and self._clock_agrees():
                await self._tick()
                if self.publisher is not None and self.stopped_by is None:
                    await self.publisher.run_once()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), TICK_S)

    async def _tick(self) -> None:
        self.ticks += 1
        self._maybe_scrub()
        if self.stopped_by is not None:
            return
        if behind_state(self.data_dir) is not None:
            # Nothing is signed or submitted until `recover` (the state was logged once when
            # it was entered; a line per tick would say nothing new).
            return
        try:
            writer = self.writer
            last = writer.store.last_sealed_day()
            yesterday_or_later = last is not None and last >= utc_day(writer.clock() - 86400)
            need_seal = not yesterday_or_later and writer.first_day < writer.today()
            now = time.monotonic()
            due = now - self._last_checkpoint >= self.interval
            if due:
                self._last_checkpoint = now
            # Before anything is signed: has the world seen more than this data dir holds?
            # Asked only when something would be signed (a past day to seal, a grown tree).
            if (need_seal or (due and await anyio.to_thread.run_sync(_grew, writer))) and (
                await anyio.to_thread.run_sync(self._learn) is not None
            ):
                return
            sealed: list[bytes] = []
            if need_seal:
                sealed = await anyio.to_thread.run_sync(writer.seal)
            if sealed and self.stamper is not None:
                self.stamper.wake()
            self._maybe_stamp()
            if self.stopped_by is not None:
                return
            if due:
                # checkpoint() signs a head only when the tree grew (and seals past days first).
                await anyio.to_thread.run_sync(writer.checkpoint)
        except CapabilityAnchorError as exc:
            self._failed(exc)
            return
        if due:
            self.standby = False  # a checkpoint went through: the next refusal is news again
        self._witness_now()

    def _failed(self, exc: CapabilityAnchorError) -> None:
        if isinstance(exc, LeaseLost):
            # A standby replica: another one signs. Asked again at the next tick (not the
            # next interval), so the lease is taken within a tick of the leader's end.
            self._last_checkpoint = 0.0
            if not self.standby:
                self.standby = True
                log.info("standby: %s; heads are signed there until it stops", exc)
        elif not exc.retryable:
            self._stop_for(exc)
        else:
            if isinstance(exc, StoreBusy):
                observe().store_busy.inc()  # the store raises; who handles it counts
            log.warning("background work failed, retrying at the next tick: %s", exc)

    def _witness_now(self, ended: object = None) -> None:
        """At every tick, and as soon as a submission ENDED (its place in flight goes to the
        next witness at once, not at the next tick)."""
        if ended is not None and not self._clock_agrees():
            return  # the tick says so, once
        try:
            self._maybe_witness()
        except CapabilityAnchorError as exc:
            # Never fatal to the background work: a busy store must not stop checkpoints,
            # seals or stamps. Logged once per episode, not once per tick.
            if self.witnessing is not None:
                self.witnessing.problems.seen("", FAILED, f"witnessing skipped: {exc}")
        if self.witnessing is not None:
            problems = self.witnessing.problems.snapshot()
            set_state("witnessing_problem", float(any(p.active for p in problems)))

    def _learn(self) -> Behind | None:
        # At start-up every witness is asked (api/app.py); here, not those in their backoff.
        folder = None if self.publisher is None else self.publisher.folder
        return learn(
            self.writer,
            self.published,
            publish=folder,
            deadline=self.learn_deadline,
            skip_failing=True,
        )

    def _stop_for(self, exc: CapabilityAnchorError) -> None:
        """A fatal error: say once what the operator must do, and do no more background work
        (retrying a damaged database every second would only repeat the same line)."""
        if self.stopped_by is None:
            self.stopped_by = exc
            log.error(
                "background work stopped (no checkpoints, seals or stamps until the service "
                "restarts): %s; operator: %s",
                exc,
                exc.action,
            )

    def _maybe_scrub(self) -> None:
        """Start a scrub (`store.open.scrubber`) in a thread when one is due."""
        scrubber = self.scrubber
        if scrubber is None or self._stopping.is_set():
            return
        if self._scrubbing is not None and not self._scrubbing.done():
            return
        if scrubber.due():
            self._scrubbing = asyncio.create_task(
                self._scrub(scrubber), name="capability-anchor-scrub"
            )

    async def _scrub(self, scrubber: Scrub) -> None:
        """A scrub that found damage (now the data dir's damage mark) stops the background
        work at once, saying so."""
        finding = await anyio.to_thread.run_sync(scrubber.run_once)
        if finding is not None:
            data_dir = self.writer.data_dir
            damage = found(data_dir) or Damage("the last scrub", finding)
            self._stop_for(StoreDamaged(describe(data_dir, damage)))

    async def _stop_witnessing(self) -> None:
        """One witness deadline at most, whatever the number of witnesses: none starts, the
        submissions in flight get the deadline to end, then are cancelled."""
        tasks = [t for t in self._witness_tasks.values() if not t.done()]
        if tasks and self.witnessing is not None:
            _, pending = await asyncio.wait(tasks, timeout=self.witnessing.deadline)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=_CANCEL_GRACE_S)
        await asyncio.gather(*self._witness_tasks.values(), return_exceptions=True)
        if self.witnessing is not None:
            await self.witnessing.aclose()

    def _clock_agrees(self) -> bool:
        """No background work while the clocks disagree (the guard logs the episode once)."""
        return self.guard is None or self.guard.agrees()

    def _maybe_stamp(self) -> None:
        stamper = self.stamper
        if stamper is None or self._stopping.is_set() or self.stopped_by is not None:
            return
        if self._stamping is not None and not self._stamping.done():
            return
        failed = self._stamping.exception() if self._stamping is not None else None
        self._stamping = None
        if isinstance(failed, CapabilityAnchorError) and not failed.retryable:
            self._stop_for(failed)
            return
        if failed is not None:
            log.warning("stamping failed, retrying later: %s", failed)
        if stamper.due():
            self._stamping = asyncio.create_task(
                anyio.to_thread.run_sync(stamper.run_once), name="capability-anchor-stamping"
            )

    def _maybe_witness(self) -> None:
        """Start a submission, a task of its own, for each witness that is due."""
        witnessing = self.witnessing
        if witnessing is None or self._stopping.is_set() or self.stopped_by is not None:
            return
        for name, task in list(self._witness_tasks.items()):
            if task.done():
                del self._witness_tasks[name]
                if not task.cancelled():
                    task.exception()  # counted as a problem episode by Witnessing.run
        for witness in witnessing.due():
            task = asyncio.create_task(
                witnessing.run(witness), name=f"capability-anchor-witness-{witness.name}"
            )
            self._witness_tasks[witness.name] = task
            task.add_done_callback(self._witness_now)
        witnessing.problems.cleared("", FAILED)


def _grew(writer: Log) -> bool:
    """Whether today's tree is larger than its newest head (a checkpoint would sign)."""
    day = writer.today()
    with writer.store.read():
        size = writer.store.day_size(day)
        newest = writer.store.newest_unsealed(day)
    return size > (0 if newest is None else newest.tree_size)


class Publisher:
    """`serve --publish DIR`: the static read path (SPEC §13.6) exported again whenever the
    log signed or stored something new, by the leader or a standby (it reads what the leader
    signed). Immutable files first, the checkpoint last (`export.days`)."""

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
