"""Static publication (SPEC §8, §12.4): the files an auditor needs, written create-or-identical
(temporary name, fsync, link; `index.json` last), the history's as the same bytes the API serves
(the files: docs/explanation/procedures.md; which tiles: decisions/19-verification.md)."""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from capability_anchor import head as heads
from capability_anchor.errors import (
    CapabilityAnchorError,
    ExportConflict,
    InvalidKey,
    MalformedJSON,
)
from capability_anchor.files import fsync_dir
from capability_anchor.keys import KeySet, trust
from capability_anchor.log import Log
from capability_anchor.merkle.tilepath import published_resources
from capability_anchor.note.proof import format_tlog_proof
from capability_anchor.progress import Progress, silent
from capability_anchor.read.history_proofs import size_of
from capability_anchor.store import HistoryLeaf, StampRow
from capability_anchor.strictjson import canonical

_TMP_MARK = ".tmp-"
Made = Callable[[], bytes]


@dataclass
class ExportReport:
    written: list[str] = field(default_factory=list)
    unchanged: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"written": self.written, "unchanged": self.unchanged}


def timestamps_document(day: str, stamps: list[StampRow]) -> dict[str, Any]:
    """`/roots/{day}/timestamps` and `<day>.timestamps.json` (SPEC §6, §8)."""
    return {
        "v": heads.VERSION,
        "day": day,
        "timestamps": [
            {"tsa": s.tsa, "token": base64.b64encode(s.token).decode(), "gen_time": s.gen_time}
            for s in stamps
        ],
    }


def _write_tmp(target: Path, data: bytes) -> Path:
    tmp = target.with_name(f".{target.name}{_TMP_MARK}{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def write_immutable(target: Path, data: bytes, report: ExportReport) -> None:
    """Create `target` with `data`, or do nothing if it already holds exactly `data`."""
    if target.exists():
        if target.read_bytes() != data:
            raise ExportConflict(
                f"{target} exists with different bytes; published files never change "
                "(restore it from the log, or export to a new folder)"
            )
        report.unchanged += 1
        return
    tmp = _write_tmp(target, data)
    try:
        os.link(tmp, target)
    except FileExistsError:
        # Another exporter won the race: fine if it wrote the same bytes.
        if target.read_bytes() != data:
            raise ExportConflict(f"{target} appeared with different bytes during export") from None
    finally:
        tmp.unlink()
    report.written.append(str(target))


def write_replaceable(target: Path, data: bytes, report: ExportReport) -> None:
    if target.exists() and target.read_bytes() == data:
        report.unchanged += 1
        return
    tmp = _write_tmp(target, data)
    os.replace(tmp, target)
    report.written.append(str(target))


def _merged_keys(existing_file: Path, log_keys: KeySet, published: KeySet) -> bytes:
    """keys.json is exactly `Log.published_keys()`. A key in the folder the log does not
    trust is refused, never carried on: one injected into the database and exported before
    it was caught would otherwise keep signing heads for the log."""
    if existing_file.exists():
        try:
            existing = KeySet.from_json(existing_file.read_bytes(), require_thumbprints=True)
        except (InvalidKey, MalformedJSON) as exc:
            raise ExportConflict(f"{existing_file} is not a valid JWK set: {exc}") from None
        untrusted = [k.kid for k in existing if k.kid not in log_keys]
        if untrusted:
            raise ExportConflict(
                f"{existing_file} publishes key(s) {untrusted} that the log does not trust "
                "(no endorsement chain from its key file's key); check how they got there and "
                "remove them from the folder; nothing was written"
            )
    return published.to_json()


def _merged_key_records(existing_file: Path, iss: str, tokens: list[str]) -> bytes | None:
    """key-records.json: the log's rotation records, once it has any; it only grows."""
    if existing_file.exists():
        try:
            _, published = trust.read_key_records(existing_file.read_bytes())
        except CapabilityAnchorError as exc:
            raise ExportConflict(f"{existing_file}: {exc}") from None
        if published != tokens[: len(published)]:
            raise ExportConflict(
                f"{existing_file} holds records the log does not have in that order; "
                "nothing was written"
            )
    return trust.key_records_document(iss, tokens) if tokens else None


def _made(data: bytes | Made) -> bytes:
    """A file's bytes: given, or made now (an export never holds every tile at once)."""
    return data if isinstance(data, bytes) else data()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale_tmp(outdir: Path) -> None:
    """Temporary files left by a crashed export; never a published name. A temp file of an
    exporter that is still running is left to it."""
    for stale in outdir.rglob(f".*{_TMP_MARK}*"):
        pid = stale.name.rsplit(_TMP_MARK, 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and _pid_alive(int(pid)):
            continue
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


def tile_files(log: Log, outdir: Path, day_tiles: bool) -> list[tuple[Path, Made]]:
    """(path, maker of its bytes) of every tile to write, all create-or-identical: made on
    demand, since a day's entry bundles hold the whole day again."""
    read = log.read
    files: list[tuple[Path, Made]] = []
    size = log.store.history_size()
    for request in published_resources(range(1, size + 1), size):
        files.append((outdir / "history" / request.path, partial(read.tiles.history, request)))
    if day_tiles:
        by_day: dict[str, list[int]] = {}
        for row in log.store.all_heads():
            by_day.setdefault(row.day, []).append(row.tree_size)
        for day, sizes in sorted(by_day.items()):
            for request in published_resources(sizes, max(sizes)):
                files.append((outdir / day / request.path, partial(read.tiles.day, day, request)))
    return files


def history_files(log: Log, outdir: Path) -> list[tuple[Path, Made]]:
    """(path, maker of its bytes) of the rewritten history files (see the module
    docstring); none before the first head."""
    history = log.read.history
    if log.store.history_size() == 0:
        return []
    served = history.served_checkpoint()
    files: list[tuple[Path, Made]] = [
        (outdir / "history" / "checkpoint", lambda: served),
        (outdir / "history" / "vkey", lambda: history.vkey().encode("utf-8") + b"\n"),
    ]
    policy = log.store.policy()
    if policy is not None:
        files.append((outdir / "history" / "policy", lambda: policy))
    newest = history.served_checkpoint(log.store.checkpoint_size())
    docs = {(r.day, r.sealed, r.tree_size): r.doc for r in log.store.all_heads()}

    def proof(leaf: HistoryLeaf) -> bytes:
        note = served if leaf.index < size_of(served) else newest
        path = history.inclusion(leaf.leaf_hash, size_of(note))
        token = heads.parse_document(docs[(leaf.day, leaf.sealed, leaf.tree_size)]).jws
        return format_tlog_proof(leaf.index, path, note, token.encode("ascii"))

    for leaf in log.store.iter_history():
        name = (
            f"{leaf.day}.tlog-proof" if leaf.sealed else f"{leaf.day}/{leaf.tree_size}.tlog-proof"
        )
        files.append((outdir / name, partial(proof, leaf)))
    return files


def export(
    log: Log, outdir: Path, progress: Progress = silent, *, tiles: bool = False
) -> ExportReport:
    """Write the folder. Every file that must never change is compared first: if any
    existing one differs, nothing at all is written (a half-published folder would list
    days that index.json does not, or the other way round). `tiles`: also each day's
    tlog-tiles under `<day>/tile/` (the history's are always written)."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp(outdir)
    # One snapshot: the heads, the history's tiles, its checkpoint and the tlog-proofs
    # against it are of one moment of the log, even with a writer publishing meanwhile.
    with log.store.read():
        return _export(log, outdir, progress, tiles)


def _export(log: Log, outdir: Path, progress: Progress, tiles: bool) -> ExportReport:
    store = log.store
    sealed = list(reversed(store.sealed_heads()))
    unsealed = [h for h in store.all_heads() if not h.sealed]
    immutable: list[tuple[Path, bytes | Made]] = []
    replaceable: list[tuple[Path, bytes | Made]] = []
    for row in sealed:
        parsed = heads.parse_document(row.doc)
        immutable.append((outdir / f"{row.day}.json", row.doc))
        immutable.append((outdir / f"{row.day}.jws", parsed.jws.encode("ascii")))
        stamps = store.stamps(row.day)
        if stamps:
            immutable.append((outdir / f"{row.day}.tsr", stamps[0].token))
        doc = canonical(timestamps_document(row.day, stamps))
        replaceable.append((outdir / f"{row.day}.timestamps.json", doc))
    for row in unsealed:
        immutable.append((outdir / row.day / f"{row.tree_size}.json", row.doc))
    immutable += tile_files(log, outdir, tiles)
    history = history_files(log, outdir)
    # The checkpoint last of all: a tlog-tiles client that reads it finds every tile,
    # bundle and proof it names already in place.
    checkpoint = [f for f in history if f[0] == outdir / "history" / "checkpoint"]
    replaceable += [f for f in history if f not in checkpoint]
    keys = _merged_keys(outdir / "keys.json", log.keyset(), log.published_keys())
    records = [token for _, _, _, token in store.key_records()]
    key_records = _merged_key_records(outdir / trust.KEY_RECORDS_FILE, log.iss, records)
    for path, data in immutable:
        if path.exists() and path.read_bytes() != _made(data):
            raise ExportConflict(
                f"{path} exists with different bytes; published files never change "
                "(restore it from the log, or export to a new folder); nothing was written"
            )
    report = ExportReport()
    total = len(immutable) + len(replaceable) + len(checkpoint)
    write_replaceable(outdir / "keys.json", keys, report)
    if key_records is not None:
        write_replaceable(outdir / trust.KEY_RECORDS_FILE, key_records, report)
    for done, (path, data) in enumerate(immutable, start=1):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_immutable(path, _made(data), report)
        progress(done, total, "export")
    for done, (path, data) in enumerate(replaceable, start=len(immutable) + 1):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_replaceable(path, _made(data), report)
        progress(done, total, "export")
    # Last: index.json never names a day whose files are not all in place.
    index = log.roots(limit=max(1, len(sealed)))
    write_replaceable(outdir / "index.json", canonical(index), report)
    for path, data in checkpoint:
        write_replaceable(path, _made(data), report)
        progress(total, total, "export")
    fsync_dir(outdir)
    return report
