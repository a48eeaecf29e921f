"""Crash safety with real processes: run the `capability-anchor` CLI, SIGKILL it at a random
moment, and check what survived.

Shared by `tests/e2e/test_crash.py` (a few dozen kills) and `tools/crash_soak.py` (thousands).

What a killed run promises, and what is checked after every kill:
- each complete JSON line printed by `append` is an acknowledged entry: it is stored, at that
  day and index, with that leaf hash; re-appending the same input answers `duplicate: true`
  at the same index and fills in the rest, in input order, indices contiguous;
- each complete line printed by `checkpoint` or `seal` is a published head document, and
  the stored head of that (day, tree_size, sealed) has exactly those bytes; sealed heads are
  an unbroken `prev` chain from the first day, byte for byte the heads an uninterrupted run
  makes from the same inputs;
- `export` never leaves a published file with other bytes than the log's, and a re-run
  completes the folder;
- the audit of the data dir finds nothing, and the next command carries on.

Kills are aimed with a `Timing` per kind of run (`seal` of a fresh copy, `seal` resuming,
...): the median duration of the last runs of that kind that finished, and delays spread
over it, most near its end where the work happens (Python start-up is most of a short run).
`Stats` counts where the kills landed: before any trace, during the work, after the end.

Every check raises `CrashCheckFailed` (an AssertionError) naming the run it was about; a
scenario that sees the UTC day change under it raises `CrossedMidnight` instead (its
expectations were computed for the old day), which the test skips and the soak counts apart.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import random
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capability_anchor import head as heads
from capability_anchor import leaf
from capability_anchor.audit import audit_store
from capability_anchor.encoding import b64url_decode
from capability_anchor.errors import CapabilityAnchorError
from capability_anchor.log import MAX_BATCH, Log, utc_day
from capability_anchor.merkle import TiledTree
from capability_anchor.merkle.tilepath import entry_bundle, parse_tile_path, published_resources

CLI = Path(sys.executable).parent / "capability-anchor"
ISS = "https://resolver.example"
COMMANDS = ("append", "checkpoint", "seal", "export")
EMPTY_ROOT = hashlib.sha256(b"").hexdigest()

HeadKey = tuple[str, int, bool]  # (day, tree_size, sealed)
# Where in a run (as a fraction of its duration) most kills are aimed: `append` validates the
# whole input before its first batch, so its commits come in the last ~15%.
FOCUS = {"append": (0.83, 1.02)}


class CrashCheckFailed(AssertionError):
    """Something a killed (or the following) run promised does not hold."""


class CrossedMidnight(Exception):
    """The UTC day changed while a scenario ran: its expectations are for the old day."""


def check(condition: object, message: str) -> None:
    # Not `assert`: the soak tool must check under `python -O` too.
    if not condition:
        raise CrashCheckFailed(message)


@contextmanager
def context(what: str) -> Iterator[None]:
    """Prefix any failed check inside with `what` (which run, which seed)."""
    try:
        yield
    except CrashCheckFailed as exc:
        raise CrashCheckFailed(f"{what}: {exc}") from exc


# --- days and clocks ---------------------------------------------------------------------------


def today() -> str:
    return utc_day(time.time())


def shift_day(day: str, n: int) -> str:
    return (dt.date.fromisoformat(day) + dt.timedelta(days=n)).isoformat()


def day_start(day: str) -> float:
    """The epoch time of 00:00:00 UTC of `day`."""
    return dt.datetime.combine(dt.date.fromisoformat(day), dt.time(), dt.UTC).timestamp()


def last_microsecond(day: str) -> float:
    """23:59:59.999999 UTC of `day`."""
    end = dt.datetime.combine(dt.date.fromisoformat(day), dt.time(23, 59, 59, 999_999), dt.UTC)
    return end.timestamp()


def days_from(first: str, count: int) -> list[str]:
    return [shift_day(first, n) for n in range(count)]


class Clock:
    """An injectable clock the caller moves (Log takes any `() -> float`)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def at(self, day: str, seconds: float = 0.0) -> Clock:
        self.t = day_start(day) + seconds
        return self


# --- records -----------------------------------------------------------------------------------


def record(tag: str, n: int) -> dict[str, Any]:
    """A Capability Resolution-like server record of about 300 bytes, unique per (tag, n)."""
    digest = hashlib.sha256(f"{tag}/{n}".encode()).hexdigest()
    return {
        "v": "0.2",
        "iss": ISS,
        "sub": f"https://mcp-{tag}-{n}.example/server",
        "url": f"https://mcp-{tag}-{n}.example/server",
        "status": "ok",
        "checked_at": "2026-03-01T12:00:00Z",
        "evidence": {"method": "tools/list", "tools": n % 17, "sha256": digest},
    }


def leaf_hex(rec: dict[str, Any]) -> str:
    return leaf.leaf_hash(rec).hex()


def write_jsonl(path: Path, records: Sequence[dict[str, Any] | None]) -> None:
    """JSON Lines; a None item becomes a blank line (skipped by `append`, but counted)."""
    text = "".join(
        "\n" if r is None else json.dumps(r, separators=(",", ":")) + "\n" for r in records
    )
    path.write_text(text, encoding="utf-8")


# --- running the CLI ---------------------------------------------------------------------------


@dataclass
class Run:
    argv: list[str]
    delay: float | None  # when the kill was due (None: never killed)
    returncode: int
    elapsed: float
    lines: list[bytes]  # complete stdout lines, without the newline
    tail: bytes  # an incomplete last line: the process died while printing it
    stderr: bytes

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    def describe(self) -> str:
        what = " ".join([Path(self.argv[0]).name, *self.argv[1:]])
        if self.killed:
            how = f"SIGKILL after {1000 * (self.delay or 0):.0f} ms"
        else:
            how = f"exit {self.returncode} after {1000 * self.elapsed:.0f} ms"
            if self.delay is not None:
                how += f" (kill due at {1000 * self.delay:.0f} ms)"
        err = self.stderr.decode("utf-8", "replace").strip().splitlines()
        note = f"; stderr: {err[-1][:300]}" if err else ""
        return f"`{what}` [{how}, {len(self.lines)} lines printed{note}]"

    def json_lines(self) -> list[Any]:
        out = []
        for n, line in enumerate(self.lines, start=1):
            try:
                out.append(json.loads(line))
            except ValueError:
                raise CrashCheckFailed(f"stdout line {n} is not JSON: {line[:120]!r}") from None
        return out


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("CAPABILITY_ANCHOR_DATA", "CAPABILITY_ANCHOR_TOKEN"):
        env.pop(name, None)
    return env


def run_cli(
    command: str,
    data: Path,
    *args: str | Path,
    kill_after: float | None = None,
    stdin: Path | None = None,
    timeout: float = 120.0,
) -> Run:
    """Run `capability-anchor COMMAND --data DATA ARGS`; with `kill_after`, SIGKILL it that
    many seconds after start unless it finished first. stdout and stderr go to files, so a
    process is never blocked on a full pipe while the kill is pending."""
    argv = [str(CLI), command, "--data", str(data), *(str(a) for a in args)]
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        open(stdin, "rb") if stdin is not None else nullcontext(subprocess.DEVNULL) as inp,
    ):
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdin=inp, stdout=out, stderr=err, env=_env())
        exited = _wait_without_reaping(proc, timeout if kill_after is None else kill_after)
        elapsed = time.monotonic() - start
        if not exited:
            # Not reaped yet, so the pid is still this child's (at worst a zombie).
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if not exited and kill_after is None:
            raise CrashCheckFailed(f"`{' '.join(argv)}` hung for {timeout} s")
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    *lines, tail = stdout.split(b"\n")
    return Run(argv, kill_after, proc.returncode, elapsed, lines, tail, stderr)


def _wait_without_reaping(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether the child exited within `timeout`, waking the moment it does (a pidfd on
    Linux; `Popen.wait(timeout)` polls at up to 50 ms, which would blur the timings).
    The child is not reaped, so its pid cannot be reused before the caller kills it."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            fd = pidfd_open(proc.pid)
        except OSError:
            pass
        else:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            try:
                return bool(poller.poll(max(0, int(timeout * 1000))))
            finally:
                os.close(fd)
    deadline = time.monotonic() + timeout
    while proc.poll() is None:  # reaps on exit, but then no kill is sent
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(remaining, 0.002))
    return True


def require_ok(run: Run) -> Run:
    check(run.returncode == 0, f"{run.describe()} failed")
    check(run.tail == b"", f"{run.describe()}: stdout does not end with a newline")
    return run


class Timing:
    """How long an uninterrupted run of one kind takes (the median of the last runs that
    finished), and kill delays spread over it: most land in its `focus`, the last part of the
    run, where the work is (Python start-up, and for `append` validating every record before
    the first batch, take the rest); some land early, some after the end."""

    def __init__(self, guess: float, focus: tuple[float, float] = (0.75, 1.02)) -> None:
        self.samples: list[float] = []
        self.guess = guess
        self.focus = focus

    @property
    def estimate(self) -> float:
        if not self.samples:
            return self.guess
        return statistics.median(self.samples)

    def observe(self, run: Run) -> None:
        if run.returncode == 0:
            self.samples = [*self.samples[-14:], run.elapsed]

    def delay(self, rng: random.Random) -> float:
        lo, hi = self.focus
        u = rng.random()
        if u < 0.12:
            f = rng.uniform(0.0, lo)  # mostly still starting: nothing may change
        elif u < 0.85:
            f = rng.uniform(lo, hi)  # the end of the run, where the work is
        else:
            f = rng.uniform(hi, 1.3)  # likely after it finished
        return f * self.estimate


@dataclass
class Stats:
    """Kill iterations per command and where the kills landed: `before` (killed, no trace),
    `during` (killed with something stored, written or printed), `after` (it finished)."""

    iterations: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, command: str, run: Run, traced: bool) -> None:
        outcome = "after" if not run.killed else "during" if traced else "before"
        self.iterations[command] += 1
        self.outcomes[command, outcome] += 1

    @property
    def total(self) -> int:
        return sum(self.iterations.values())

    def lines(self) -> list[str]:
        return [
            f"{c:<10} {self.iterations[c]:>6} kills: "
            + ", ".join(f"{o} {self.outcomes[c, o]}" for o in ("before", "during", "after"))
            for c in COMMANDS
        ]


# --- reading the log back ----------------------------------------------------------------------


@dataclass
class Snapshot:
    first_day: str
    entries: dict[str, list[str]]  # day -> leaf hashes (hex), in index order
    heads: dict[HeadKey, bytes]  # (day, tree_size, sealed) -> head document
    problems: list[str]  # what audit_store found

    @property
    def sealed(self) -> dict[str, bytes]:
        return {day: doc for (day, _, sealed), doc in self.heads.items() if sealed}

    def size(self, day: str) -> int:
        return len(self.entries.get(day, []))


def snapshot(data: Path) -> Snapshot:
    """Everything stored, through the library, plus an audit of it."""
    with Log.open(data) as log:
        store = log.store
        entries: dict[str, list[str]] = {}
        for day in store.entry_days():
            rows = list(store.iter_entries(day))
            indices = [r.leaf_index for r in rows]
            check(indices == list(range(len(rows))), f"day {day}: indices are not 0..n-1")
            hashes = [r.leaf_hash.hex() for r in rows]
            check(len(set(hashes)) == len(hashes), f"day {day}: a leaf hash is stored twice")
            entries[day] = hashes
        found = {(h.day, h.tree_size, h.sealed): h.doc for h in store.all_heads()}
        return Snapshot(log.first_day, entries, found, audit_store(log).problems)


def check_audit(snap: Snapshot) -> None:
    check(not snap.problems, f"audit of the data dir found: {snap.problems[:5]}")


def check_heads_kept(before: Snapshot, after: Snapshot) -> dict[HeadKey, bytes]:
    """Published heads never change or vanish; returns the new ones."""
    for key, doc in before.heads.items():
        check(after.heads.get(key) == doc, f"published head {key} changed or vanished")
    return {k: d for k, d in after.heads.items() if k not in before.heads}


def check_entries_kept(before: Snapshot, after: Snapshot) -> None:
    for day, hashes in before.entries.items():
        check(after.entries.get(day, [])[: len(hashes)] == hashes, f"entries of {day} changed")


def check_sealed_chain(snap: Snapshot, reference: dict[str, bytes]) -> list[str]:
    """Sealed days are a contiguous run from the first day, chained by `prev`, each exactly
    the head an uninterrupted run sealed. Returns the sealed days."""
    sealed = snap.sealed
    days = sorted(sealed)
    check(
        days == days_from(snap.first_day, len(days)),
        f"sealed days are not a contiguous run from the first day {snap.first_day}: {days}",
    )
    prev: str | None = None
    for day in days:
        doc = sealed[day]
        check(
            doc == reference.get(day),
            f"the sealed head of {day} differs from the uninterrupted reference",
        )
        claims = heads.parse_document(doc).claims
        check(claims["prev"] == prev, f"{day}: prev {claims['prev']} is not {prev}")
        check(claims["tree_size"] == snap.size(day), f"{day}: sealed size != stored entries")
        if claims["tree_size"] == 0:
            check(claims["root"] == EMPTY_ROOT, f"{day}: empty day's root is {claims['root']}")
        check(claims["iat"] == heads.sealed_iat(day), f"{day}: sealed iat is not the day's end")
        prev = heads.claims_digest(claims)
    return days


def head_key(doc: bytes) -> HeadKey:
    try:
        c = heads.parse_document(doc).claims
    except Exception as exc:
        raise CrashCheckFailed(f"printed line is not a head document: {exc}") from None
    return (c["day"], c["tree_size"], c["sealed"])


def check_printed_heads(run: Run, snap: Snapshot) -> None:
    """Every printed head document is, byte for byte, the stored head of its key."""
    for line in run.lines:
        if line == b"null":
            continue
        key = head_key(line)
        check(snap.heads.get(key) == line, f"printed head {key} is not the stored one")


# --- the workbench: inputs built once, copied per scenario --------------------------------------


@dataclass
class AppendInput:
    path: Path
    hashes: list[str]  # leaf hashes of its records, in order (blank lines left out)


@dataclass
class Workbench:
    root: Path
    today: str
    append_inputs: list[AppendInput]
    checkpoint_base: Path  # 30 past days, some with entries, none sealed; today empty
    checkpoint_reference: dict[str, bytes]  # its past days sealed without interruption
    seal_base: Path  # 90 days of history, most empty, the first 5 sealed
    seal_base_sealed: dict[str, bytes]  # the days sealed in seal_base
    seal_reference: Snapshot  # seal_base sealed by an uninterrupted `capability-anchor seal`
    export_base: Path  # seal_base sealed up to 21 days ago
    timings: dict[str, Timing]
    stats: Stats

    def same_day(self) -> None:
        if today() != self.today:
            raise CrossedMidnight(f"the UTC day changed from {self.today} during the scenario")

    def timing(self, key: str) -> Timing:
        """The timing of one kind of run (`command` or `command:variant`): a new variant
        starts from its command's estimate."""
        if key not in self.timings:
            command = key.partition(":")[0]
            if command == key:
                self.timings[key] = Timing(0.3, FOCUS.get(command, (0.75, 1.02)))
            else:
                parent = self.timing(command)
                self.timings[key] = Timing(parent.estimate, parent.focus)
        return self.timings[key]

    def timed(self, key: str, run: Run) -> Run:
        self.timing(key).observe(run)
        return run

    @classmethod
    def build(
        cls, root: Path, timings: dict[str, Timing] | None = None, stats: Stats | None = None
    ) -> Workbench:
        root.mkdir(parents=True, exist_ok=True)
        now = today()
        timings = {} if timings is None else timings

        def calibrate(key: str, run: Run, inherit: bool = True) -> None:
            """A first measurement, for the run's kind and (`inherit`) for its command's other
            kinds."""
            for k in {key, key.partition(":")[0]} if inherit else {key}:
                focus = FOCUS.get(k.partition(":")[0], (0.75, 1.02))
                timings.setdefault(k, Timing(0.3, focus)).observe(require_ok(run))

        # append: 2500 records (batches of 1000, 1000, 500), and an overlapping second file
        # with a duplicate inside it (the same leaf: `iat` is not part of it) and a blank line.
        a = [record("a", n) for n in range(2500)]
        b_records: list[dict[str, Any] | None] = [*a[2000:], *(record("b", n) for n in range(700))]
        b_records.insert(600, None)
        b_records.append({**record("b", 0), "iat": 1_700_000_000})
        write_jsonl(root / "a.jsonl", a)
        write_jsonl(root / "b.jsonl", b_records)
        inputs = [
            AppendInput(root / "a.jsonl", [leaf_hex(r) for r in a]),
            AppendInput(root / "b.jsonl", [leaf_hex(r) for r in b_records if r is not None]),
        ]
        scratch = root / "scratch"
        _init(scratch)
        for inp in inputs:
            timed = require_ok(run_cli("append", scratch, inp.path))
            calibrate(f"append:{inp.path.name}", timed)

        # checkpoint: first day 30 days ago (5 entries and a checkpoint), 260 entries 20 days
        # ago, 3 yesterday, the other days empty; nothing sealed, so the first checkpoint
        # seals 30 days.
        cp = root / "checkpoint-base"
        clock = Clock(0).at(shift_day(now, -30), 3600)
        with Log.init(cp, iss=ISS, clock=clock) as log:
            log.append([record("cp30", n) for n in range(5)])
            log.checkpoint()
            clock.at(shift_day(now, -20), 7200)
            log.append([record("cp20", n) for n in range(260)])
            clock.at(shift_day(now, -1), 7200)
            log.append([record("cp1", n) for n in range(3)])
        shutil.copytree(cp, root / "checkpoint-ref")
        with Log.open(root / "checkpoint-ref") as log:
            log.seal()
            cp_ref = {r.day: r.doc for r in log.store.sealed_heads()}
        # A timed run that seals the same days through the CLI (same bytes as the library).
        shutil.copytree(cp, root / "checkpoint-scratch")
        with Log.open(root / "checkpoint-scratch") as log:
            log.append([record("cp0", n) for n in range(10)])
        timed = require_ok(run_cli("checkpoint", root / "checkpoint-scratch"))
        calibrate("checkpoint:seal", timed, inherit=False)
        check(
            snapshot(root / "checkpoint-scratch").sealed == cp_ref,
            "the CLI sealed other bytes than the library",
        )
        with Log.open(root / "checkpoint-scratch") as log:
            log.append([record("cp0", n) for n in range(10, 20)])
        # The kind that only publishes a head.
        calibrate("checkpoint", run_cli("checkpoint", root / "checkpoint-scratch"))

        # seal: 90 days, entries on a few of them, a checkpoint 85 days ago that sealed the
        # first 5 days; 85 past days left to seal, most of them empty.
        sb = root / "seal-base"
        first = shift_day(now, -90)
        clock = Clock(0).at(first, 600)
        with Log.init(sb, iss=ISS, clock=clock) as log:
            log.append([record("s90", n) for n in range(3)])
            log.checkpoint()
            log.append([record("s90", n) for n in range(3, 7)])
            clock.at(shift_day(now, -85), 600)
            log.append([record("s85", n) for n in range(2)])
            log.checkpoint()
            for ago, count in ((60, 300), (30, 10), (2, 3)):
                clock.at(shift_day(now, -ago), 43_200)
                log.append([record(f"s{ago}", n) for n in range(count)])
        shutil.copytree(sb, root / "seal-ref")
        ref_run = require_ok(run_cli("seal", root / "seal-ref"))
        calibrate("seal:fresh", ref_run)
        seal_ref = snapshot(root / "seal-ref")
        check_audit(seal_ref)
        check(
            len(seal_ref.sealed) == 90 and check_sealed_chain(seal_ref, seal_ref.sealed),
            "the reference seal did not seal 90 days",
        )
        want = [seal_ref.sealed[d] for d in days_from(shift_day(now, -85), 85)]
        check(ref_run.lines == want, "the reference seal did not print the 85 heads it sealed")

        # export: seal_base sealed up to 21 days ago (70 sealed days, 2 unsealed heads).
        eb = root / "export-base"
        shutil.copytree(sb, eb)
        with Log.open(eb, clock=Clock(0).at(shift_day(now, -20), 600)) as log:
            log.seal()
        timed = require_ok(run_cli("export", eb, root / "export-scratch"))
        calibrate("export:fresh", timed)
        return cls(
            root,
            now,
            inputs,
            cp,
            cp_ref,
            sb,
            snapshot(sb).sealed,
            seal_ref,
            eb,
            timings,
            stats or Stats(),
        )


def _init(data: Path) -> None:
    with Log.init(data, iss=ISS):
        pass


def _tag(rng: random.Random) -> str:
    return f"{rng.getrandbits(48):012x}"


# --- append ------------------------------------------------------------------------------------


def _expected_append(
    stored: list[str], hashes: list[str], day: str
) -> tuple[list[dict[str, Any]], list[str], list[tuple[int, int]]]:
    """What an uninterrupted `append` prints and stores: (lines, the day's hashes afterwards,
    [(lines printed, day size)] after each committed batch, starting with none)."""
    index = {h: i for i, h in enumerate(stored)}
    sequence = list(stored)
    lines: list[dict[str, Any]] = []
    bounds = [(0, len(stored))]
    for start in range(0, len(hashes), MAX_BATCH):
        for h in hashes[start : start + MAX_BATCH]:
            duplicate = h in index
            if not duplicate:
                index[h] = len(sequence)
                sequence.append(h)
            lines.append(
                {"day": day, "leaf_index": index[h], "leaf_hash": h, "duplicate": duplicate}
            )
        bounds.append((len(lines), len(sequence)))
    return lines, sequence, bounds


def check_append(
    run: Run, inp: AppendInput, stored: list[str], after: list[str], acked: dict[str, int], day: str
) -> bool:
    """Check one `append` run against the model; returns whether it left a trace."""
    lines, sequence, bounds = _expected_append(stored, inp.hashes, day)
    check(after[: len(stored)] == stored, "entries stored before this run changed or vanished")
    sizes = [size for _, size in bounds]
    check(
        len(after) in sizes and after == sequence[: len(after)],
        f"the day holds {len(after)} entries, not the entries of whole batches {sizes} "
        "of this input in order",
    )
    committed = max(n for n, size in bounds if size == len(after))
    acks = run.json_lines()
    check(
        len(acks) <= committed,
        f"{len(acks)} entries acknowledged but only {committed} lines' batches are stored",
    )
    for n, (got, want) in enumerate(zip(acks, lines, strict=False)):
        check(got == want, f"acknowledgement {n} is {got}, expected {want}")
    for got in acks:
        h = got["leaf_hash"]
        if h in acked:
            check(
                got["duplicate"] and got["leaf_index"] == acked[h],
                f"{h} was acknowledged at index {acked[h]} before, now {got}",
            )
    if not run.killed:
        require_ok(run)
        check(len(acks) == len(lines) and after == sequence, "an uninterrupted append fell short")
    for got in acks:
        acked[got["leaf_hash"]] = got["leaf_index"]
    for h, i in acked.items():
        check(i < len(after) and after[i] == h, f"acknowledged entry {i} ({h}) is not stored")
    return bool(acks) or bool(run.tail) or after != stored


def append_scenario(bench: Workbench, rng: random.Random, work: Path, kills: int) -> None:
    """Kill `append` of 2500 records (or an overlapping 1200) `kills` times on one log, then
    re-append everything without interruption, checkpoint and audit."""
    data = work / "data"
    _init(data)
    day = bench.today
    stored: list[str] = []
    acked: dict[str, int] = {}
    for i in range(kills):
        inp = rng.choice(bench.append_inputs)
        via_stdin = rng.random() < 0.25
        key = f"append:{inp.path.name}"
        delay = bench.timing(key).delay(rng)
        run = bench.timed(
            key,
            run_cli(
                "append",
                data,
                "-" if via_stdin else inp.path,
                stdin=inp.path if via_stdin else None,
                kill_after=delay,
            ),
        )
        bench.same_day()
        with context(f"append kill {i}: {run.describe()}"):
            after = snapshot(data)
            check_audit(after)
            traced = check_append(run, inp, stored, after.entries.get(day, []), acked, day)
        bench.stats.add("append", run, traced)
        stored = after.entries.get(day, [])
    # The next runs carry on: everything ends up stored once, in input order.
    for inp in bench.append_inputs:
        run = bench.timed(f"append:{inp.path.name}", run_cli("append", data, inp.path))
        bench.same_day()
        with context(f"append after the kills: {run.describe()}"):
            after = snapshot(data)
            check_append(run, inp, stored, after.entries.get(day, []), acked, day)
        stored = after.entries.get(day, [])
    with context("checkpoint and audit after the append kills"):
        want = len({h for inp in bench.append_inputs for h in inp.hashes})
        check(len(stored) == want, f"{len(stored)} entries stored, {want} distinct records")
        run = require_ok(run_cli("checkpoint", data))
        check(head_key(run.lines[0]) == (day, want, False), "checkpoint is not of the whole day")
        final = snapshot(data)
        check_printed_heads(run, final)
        check_audit(final)
        require_ok(run_cli("audit", data))


# --- checkpoint --------------------------------------------------------------------------------


def check_checkpoint(
    run: Run, before: Snapshot, after: Snapshot, reference: dict[str, bytes], day: str
) -> bool:
    check_audit(after)
    check_entries_kept(before, after)
    new = check_heads_kept(before, after)
    sealed_days = check_sealed_chain(after, reference)
    new_unsealed = [k for k in new if not k[2]]
    check(
        all(k[2] or k[0] == day for k in new) and len(new_unsealed) <= 1,
        f"checkpoint published unexpected heads: {sorted(new)}",
    )
    if new_unsealed:
        check(new_unsealed[0][1] == after.size(day), "the new head is not of the day's size")
        check(sealed_days[-1:] == [shift_day(day, -1)], "a head of today before past days sealed")
    check(len(run.lines) <= 1, f"checkpoint printed {len(run.lines)} lines")
    if run.lines:
        printed = run.lines[0]
        if printed == b"null":
            check(after.size(day) == 0, "checkpoint printed null but today has entries")
        else:
            key = head_key(printed)
            check(after.heads.get(key) == printed, f"printed head {key} is not the stored one")
            check(key == (day, after.size(day), False), f"printed head {key} is not the newest")
            check(not new_unsealed or new_unsealed[0] == key, "a new head that was not printed")
    if not run.killed:
        require_ok(run)
        check(len(run.lines) == 1, "an uninterrupted checkpoint printed no head")
        check(sealed_days[-1:] == [shift_day(day, -1)], "checkpoint did not seal the past days")
    return bool(new) or bool(run.lines) or bool(run.tail)


def checkpoint_scenario(bench: Workbench, rng: random.Random, work: Path, kills: int) -> None:
    """Kill `checkpoint` `kills` times on a log with 30 unsealed past days (a fresh copy, now
    and then, once they are sealed), appending a few entries (through the library) before
    most kills; then append through the CLI, checkpoint without interruption and audit."""
    day = bench.today
    tag = _tag(rng)
    count = copies = 0
    data = work / "data0"
    after: Snapshot | None = None
    acked: list[tuple[str, int, str]] = []
    printed: dict[HeadKey, bytes] = {}
    for i in range(kills):
        if after is None or (shift_day(day, -1) in after.sealed and rng.random() < 0.5):
            copies += 1
            data = work / f"data{copies}"
            shutil.copytree(bench.checkpoint_base, data)
            acked, printed = [], {}
        if not acked or rng.random() < 0.7:
            n = rng.randint(1, 40)
            with Log.open(data) as log:
                results = log.append([record(tag, count + k) for k in range(n)])
            acked += [(r.day, r.leaf_index, r.leaf_hash.hex()) for r in results]
            count += n
        before = snapshot(data)
        key = "checkpoint" if shift_day(day, -1) in before.sealed else "checkpoint:seal"
        delay = bench.timing(key).delay(rng)
        run = bench.timed(key, run_cli("checkpoint", data, kill_after=delay))
        bench.same_day()
        with context(f"checkpoint kill {i} (copy {copies}): {run.describe()}"):
            after = snapshot(data)
            traced = check_checkpoint(run, before, after, bench.checkpoint_reference, day)
            for d, index, h in acked:
                check(after.entries[d][index] == h, f"library append {d}/{index} vanished")
            printed.update((head_key(doc), doc) for doc in run.lines if doc != b"null")
        bench.stats.add("checkpoint", run, traced)
    # Carry on: append through the CLI, checkpoint without interruption, audit.
    if after is None:
        shutil.copytree(bench.checkpoint_base, data)
    more = work / "more.jsonl"
    write_jsonl(more, [record(tag, count + k) for k in range(5)])
    with context("append and checkpoint after the checkpoint kills"):
        before = snapshot(data)
        require_ok(run_cli("append", data, more))
        run = require_ok(run_cli("checkpoint", data))
        after = snapshot(data)
        check_checkpoint(run, before, after, bench.checkpoint_reference, day)
        check(after.size(day) == before.size(day) + 5, "the CLI append was not stored")
        for key, doc in printed.items():
            check(after.heads.get(key) == doc, f"printed head {key} is not stored as printed")
        require_ok(run_cli("audit", data))


# --- seal --------------------------------------------------------------------------------------


def check_seal(run: Run, before: Snapshot, after: Snapshot, reference: Snapshot) -> bool:
    check_audit(after)
    check(after.entries == before.entries, "seal changed the entries")
    new = check_heads_kept(before, after)
    check(all(k[2] for k in new), f"seal published unsealed heads: {sorted(new)}")
    check_sealed_chain(after, reference.sealed)
    newly = sorted(k[0] for k in new)
    want = [reference.sealed[d] for d in newly]
    # `[]` alone, after the run: it sealed nothing (a head line and `[]` never mix).
    heads_printed = [] if run.lines == [b"[]"] else run.lines
    check(run.lines != [b"[]"] or not new, "seal printed [] but sealed days")
    check(
        heads_printed == want[: len(heads_printed)],
        "seal printed other heads than the ones it sealed, in order",
    )
    # Each head is printed as its day's transaction commits, so a killed seal has printed a
    # prefix (possibly empty) of what it sealed; every printed line is a published head.
    everything = after.sealed.keys() == reference.sealed.keys()
    if not run.killed:
        require_ok(run)
        check(everything and heads_printed == want, "an uninterrupted seal left days unsealed")
    return bool(new) or bool(heads_printed) or bool(run.tail)


def seal_scenario(bench: Workbench, rng: random.Random, work: Path, kills: int) -> None:
    """Kill `seal` of 85 past days `kills` times (a fresh copy whenever one is fully sealed),
    then seal without interruption: every head equals the uninterrupted reference's bytes."""
    reference = bench.seal_reference
    copies = 0
    data = work / "data0"
    before: Snapshot | None = None
    for i in range(kills):
        if before is None or before.sealed.keys() == reference.sealed.keys():
            copies += 1
            data = work / f"data{copies}"
            shutil.copytree(bench.seal_base, data)
            before = snapshot(data)
        key = "seal:fresh" if before.sealed == bench.seal_base_sealed else "seal:resume"
        delay = bench.timing(key).delay(rng)
        run = bench.timed(key, run_cli("seal", data, kill_after=delay))
        bench.same_day()
        with context(f"seal kill {i} (copy {copies}): {run.describe()}"):
            after = snapshot(data)
            traced = check_seal(run, before, after, reference)
        bench.stats.add("seal", run, traced)
        before = after
    with context("seal after the seal kills"):
        if before is None:
            shutil.copytree(bench.seal_base, data)
            before = snapshot(data)
        run = bench.timed("seal:resume", run_cli("seal", data))
        after = snapshot(data)
        check_seal(run, before, after, reference)
        check(after.heads == reference.heads, "the resumed log's heads differ from the reference")
        again = require_ok(run_cli("seal", data))
        check(again.lines == [b"[]"], "a second seal printed heads, not []")
        require_ok(run_cli("audit", data))


# --- export ------------------------------------------------------------------------------------


def _folder(out: Path) -> dict[str, bytes]:
    if not out.exists():
        return {}
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}


def _history_tiles(snap: Snapshot, names: Iterable[str]) -> dict[str, bytes]:
    """The history's tiles (SPEC §12.4) rebuilt from the snapshot's heads: every one export
    writes at this size, and those of `names` (written by an earlier export at a smaller size)
    that this history has."""
    keyed = sorted(snap.heads.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1]))
    payloads = [b64url_decode(heads.parse_document(d).jws.split(".")[1]) for _, d in keyed]
    tree = TiledTree(hashlib.sha256(b"\x00" + p).digest() for p in payloads)
    size = len(payloads)
    wanted = set(published_resources(range(1, size + 1), size))
    for name in names:
        if name.startswith("history/tile/"):
            with contextlib.suppress(CapabilityAnchorError):
                wanted.add(parse_tile_path(name.removeprefix("history/tile/")))
    out: dict[str, bytes] = {}
    for request in wanted:
        first = request.index * 256
        shift = 8 * (0 if request.level is None else request.level)
        if size >> shift < first + request.width:
            continue  # past this history: reported as a file export should not have written
        if request.level is None:
            data = entry_bundle(payloads[first : first + request.width])
        else:
            data = tree.tile(request.level, request.index)[: 32 * request.width]
        out[f"history/{request.path}"] = data
    return out


def check_export(out: Path, snap: Snapshot, complete: bool) -> dict[str, bytes]:
    """Every published file present holds the log's bytes; with `complete`, every file is
    there and no temporary file is left. Returns the folder's files."""
    files = _folder(out)
    immutable: dict[str, bytes] = _history_tiles(snap, files) if snap.heads else {}
    rewritten = {"keys.json", "index.json"}
    if snap.heads:
        rewritten |= {"history/checkpoint", "history/vkey"}
    for (day, size, sealed), doc in snap.heads.items():
        if sealed:
            immutable[f"{day}.json"] = doc
            immutable[f"{day}.jws"] = heads.parse_document(doc).jws.encode("ascii")
            rewritten.add(f"{day}.timestamps.json")
            rewritten.add(f"{day}.tlog-proof")
        else:
            immutable[f"{day}/{size}.json"] = doc
            rewritten.add(f"{day}/{size}.tlog-proof")
    for name, data in sorted(files.items()):
        if Path(name).name.startswith("."):
            check(not complete, f"{name}: a temporary file left after a completed export")
        elif name in immutable:
            check(data == immutable[name], f"{name} differs from the log's bytes")
        elif name in rewritten and (name.startswith("history/") or name.endswith(".tlog-proof")):
            # Rewritten with os.replace: whole, whatever the kill; their content is the
            # final audit's to check against the folder's heads.
            check(bool(data), f"{name} is empty")
        elif name in rewritten:
            try:
                json.loads(data)
            except ValueError:
                raise CrashCheckFailed(f"{name} is not whole JSON") from None
            if name.endswith(".timestamps.json"):
                day = name.removesuffix(".timestamps.json")
                want = {"v": heads.VERSION, "day": day, "timestamps": []}
                check(json.loads(data) == want, f"{name} is not the day's (empty) stamps")
        else:
            raise CrashCheckFailed(f"{name}: a file export should not have written")
    if complete:
        missing = sorted((set(immutable) | rewritten) - set(files))
        check(not missing, f"a completed export lacks {missing[:5]}")
    return files


def _grow(data: Path, tag: str) -> None:
    """The log moves on: a few entries today and a checkpoint, which seals the past days."""
    with Log.open(data) as log:
        log.append([record(tag, n) for n in range(3)])
        log.checkpoint()


def export_scenario(bench: Workbench, rng: random.Random, work: Path, kills: int) -> None:
    """Kill `export OUTDIR` `kills` times into one folder (the log grows at a random point),
    then export without interruption, audit the folder, and export again (nothing changes)."""
    data = work / "data"
    out = work / "out"
    shutil.copytree(bench.export_base, data)
    tag = _tag(rng)
    grow_at = rng.randrange(kills + 1)
    for i in range(kills):
        if i == grow_at:
            _grow(data, tag)
        snap = snapshot(data)
        files = _folder(out)
        key = "export:resume" if files else "export:fresh"
        delay = bench.timing(key).delay(rng)
        run = bench.timed(key, run_cli("export", data, out, kill_after=delay))
        bench.same_day()
        with context(f"export kill {i}: {run.describe()}"):
            if not run.killed:
                require_ok(run)
            traced = check_export(out, snap, complete=not run.killed) != files
        bench.stats.add("export", run, traced)
    with context("export after the export kills"):
        if grow_at == kills:
            _grow(data, tag)
        snap = snapshot(data)
        check_audit(snap)
        run = bench.timed("export:resume", require_ok(run_cli("export", data, out)))
        files = check_export(out, snap, complete=True)
        audit = run_cli("audit", data, "--roots", out)
        check(audit.returncode == 0, f"{audit.describe()} failed")
        require_ok(run_cli("export", data, out))
        check(_folder(out) == files, "a second export changed the folder")


SCENARIOS: dict[str, Callable[[Workbench, random.Random, Path, int], None]] = {
    "append": append_scenario,
    "checkpoint": checkpoint_scenario,
    "seal": seal_scenario,
    "export": export_scenario,
}

__all__ = [
    "CLI",
    "COMMANDS",
    "EMPTY_ROOT",
    "ISS",
    "SCENARIOS",
    "Clock",
    "CrashCheckFailed",
    "CrossedMidnight",
    "Run",
    "Snapshot",
    "Stats",
    "Timing",
    "Workbench",
    "check_sealed_chain",
    "day_start",
    "last_microsecond",
    "record",
    "run_cli",
    "shift_day",
    "snapshot",
    "today",
]
