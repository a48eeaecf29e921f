"""`audit`: re-derive everything the log has published and say what does not match.

Data dir (numbered as the report lists them; 0 and 5-7 are in `auditdb`, which opens the
database read-only and reads everything, these included, in one snapshot):
 0. the file: `PRAGMA integrity_check` first, each failure naming its table or index; a file
    SQLite cannot read (not a database, a zeroed or truncated page) is a finding, exit 1;
 1. every entry: indices contiguous from 0, leaf hash = SHA-256(0x00 || stored leaf bytes);
 2. every tile: full tiles and their roots, and the partial tiles of each head's size,
    recomputed from the entries;
 3. every head: its root recomputed from the entries at its size, its JWS verified with the
    log's keys, its claims equal to what is stored beside it, its `iss` the log's;
 4. the chain: every day from the first to the last sealed one is sealed, each `prev` is the
    digest of the previous day's sealed claims, the first day's is null, and a sealed day
    holds exactly as many entries as its head says;
 5. the schema: `sqlite_master` (tables, indexes, triggers, their SQL) equals what the
    migrations up to the stored schema version create;
 6. the indexes: each re-derived from its table (the dedupe index among them), the
    `/record` index also searched by key;
 7. the columns no signature covers: `heads.kid`, `entries.accepted_at`, and the stamps'
    TSA names, tokens (one per row, carried certificates signed) and `added`.
Folder (`--roots DIR`): each `<day>.json` against its own JWS and against `<day>.jws`, the
chain of days and `prev` links, `index.json`, `keys.json`, saved unsealed heads; with a data
dir too, every file byte for byte against the log.

Problems are collected, not raised: the report names all of them at once.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rfc8785

from . import head as heads
from . import logtrust
from .encoding import parse_day
from .errors import CapabilityAnchorError, InvalidKey, MalformedJSON, TimestampError
from .export import timestamps_document
from .keys import KeySet
from .log import Log, index_watermark, server_keys
from .merkle import TILE_WIDTH, TreeEdge, hash_leaf
from .progress import Progress, silent
from .stamping import TsaConfig
from .store import HeadRow

if TYPE_CHECKING:
    from cryptography.x509 import Certificate


@dataclass
class AuditReport:
    problems: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def count(self, what: str, n: int = 1) -> None:
        self.checked[what] = self.checked.get(what, 0) + n

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": self.problems, "checked": self.checked}


def _days(first: str, last: str) -> Iterable[str]:
    day = parse_day(first)
    end = parse_day(last)
    while day <= end:
        yield day.isoformat()
        day += dt.timedelta(days=1)


def _check_head(
    report: AuditReport, row: HeadRow, keys: KeySet, iss: str, root: bytes | None
) -> heads.Head | None:
    where = f"head {row.day} size {row.tree_size} {'sealed' if row.sealed else 'unsealed'}"
    try:
        checked = heads.verify_document(row.doc, keys)
    except CapabilityAnchorError as exc:
        report.problems.append(f"{where}: {exc}")
        return None
    verified = checked.head
    c = verified.claims
    if not checked.claims_match:
        report.problems.append(f"{where}: document claims differ from its signed claims")
    if (c["day"], c["tree_size"], c["sealed"], c["root"], c["iat"]) != (
        row.day,
        row.tree_size,
        row.sealed,
        row.root.hex(),
        row.iat,
    ):
        report.problems.append(f"{where}: signed claims differ from the stored head row")
    if c["iss"] != iss:
        report.problems.append(f"{where}: iss {c['iss']!r} is not the log's {iss!r}")
    if root is not None and root.hex() != c["root"]:
        report.problems.append(
            f"{where}: root recomputed from the entries is {root.hex()}, the head says {c['root']}"
        )
    report.count("heads")
    return verified


def trusted_keys(log: Log, extra: KeySet | None) -> KeySet:
    """What the data-dir audit trusts: the configured signing key and the keys rotation
    records lead to from it (`Log.keyset()`), plus `--keys`. Never the store's own keys
    table: whoever can write the database could add a key there."""
    by_kid = {k.kid: k for k in (extra or ())}
    by_kid.update((k.kid, k) for k in log.keyset())
    return KeySet(by_kid.values())


def audit_store(
    log: Log,
    progress: Progress = silent,
    keys: KeySet | None = None,
    tsa_ca: Sequence[Certificate] | None = None,
) -> AuditReport:
    """Re-derive and check everything in the data dir. Stamps are checked against `tsa_ca`
    (`--tsa-ca`), else the TSA CAs stored in the data dir's config, else only against the
    certificates they carry (signature, imprint, genTime; no trust)."""
    report = AuditReport()
    store = log.read
    if tsa_ca is None:
        tsa_ca = TsaConfig.resolve(log.config).cas() if log.config.get("tsa_ca") else []
    report.problems += logtrust.trust_problems(log)
    keys = trusted_keys(log, keys)
    all_heads = store.all_heads()
    entry_days = store.entry_days()
    last_sealed = store.last_sealed_day()
    candidates = [log.first_day, *entry_days, *(h.day for h in all_heads)]
    last_day = max(candidates)
    prev_digest: str | None = None
    for day in _days(log.first_day, last_day):
        if day < log.first_day:
            continue
        day_heads = sorted(
            (h for h in all_heads if h.day == day), key=lambda h: (h.tree_size, h.sealed)
        )
        sealed = [h for h in day_heads if h.sealed]
        size = _audit_day(report, log, day, day_heads, keys, progress)
        if last_sealed is not None and day <= last_sealed and not sealed:
            report.problems.append(f"day {day} is not sealed, but later day {last_sealed} is")
        for h in day_heads:
            claims = heads.parse_document(h.doc).claims if _parses(h) else None
            if claims is None:
                continue
            want_prev = None if day == log.first_day else prev_digest
            if claims["prev"] != want_prev:
                report.problems.append(
                    f"head {day} size {h.tree_size}: prev is {claims['prev']}, the previous "
                    f"day's sealed head digests to {want_prev}"
                )
        _audit_stored_stamps(report, log, day, sealed[0] if sealed else None, tsa_ca)
        prev_digest = None
        if sealed:
            if sealed[0].tree_size != size:
                report.problems.append(
                    f"day {day}: sealed at size {sealed[0].tree_size} but holds {size} entries"
                )
            if _parses(sealed[0]):
                prev_digest = heads.claims_digest(heads.parse_document(sealed[0].doc).claims)
        report.count("days")
    if any(h.day < log.first_day for h in all_heads) or any(d < log.first_day for d in entry_days):
        report.problems.append(f"data exists before the log's first day {log.first_day}")
    return report


def stamp_problems(
    token: bytes, jws: str, gen_time: str | None, cas: Sequence[Certificate]
) -> list[str]:
    """What is wrong with a stored RFC 3161 reply for a sealed head's compact JWS: it must
    be granted, stamp the SHA-256 of exactly that JWS, say the genTime listed beside it, and
    verify (signature, ESS binding, EKU) with a chain to `cas` at genTime; with no `cas`,
    to a self-signed certificate the token carries, which shows integrity but not trust."""
    from .timestamp import digest_of, read_reply, verify_reply

    try:
        parsed = read_reply(token)
    except TimestampError as exc:
        return [f"is not a granted SHA-256 time-stamp reply: {exc}"]
    problems: list[str] = []
    digest = digest_of(jws.encode("ascii"))
    if parsed.digest != digest:
        problems.append("stamps another message than the day's JWS")
    if gen_time is not None and parsed.gen_time != gen_time:
        problems.append(f"is listed with genTime {gen_time}, the token says {parsed.gen_time}")
    trust = list(cas) or list(parsed.self_signed)
    if trust and not problems:
        try:
            verify_reply(token, digest=digest, cas=trust, nonce=None)
        except TimestampError as exc:
            what = (
                "does not verify with a chain to a trusted TSA CA"
                if cas
                else ("does not verify against the certificates it carries")
            )
            problems.append(f"{what}: {exc}")
    return problems


def _audit_stored_stamps(
    report: AuditReport,
    log: Log,
    day: str,
    sealed: HeadRow | None,
    cas: Sequence[Certificate],
) -> None:
    for stamp in log.read.stamps(day):
        where = f"day {day}: the stamp by {stamp.tsa}"
        if sealed is None or not _parses(sealed):
            report.problems.append(f"{where} has no sealed head to stamp")
            continue
        jws = heads.parse_document(sealed.doc).jws
        for problem in stamp_problems(stamp.token, jws, stamp.gen_time, cas):
            report.problems.append(f"{where} {problem}")
        report.count("stamps")


def _keys_of(claims: bytes) -> tuple[str, ...]:
    try:
        return server_keys(json.loads(claims))
    except ValueError:
        return ()  # unreadable claims are reported by the leaf hash check


def _parses(row: HeadRow) -> bool:
    try:
        heads.parse_document(row.doc)
    except CapabilityAnchorError:
        return False
    return True


def _audit_day(
    report: AuditReport,
    log: Log,
    day: str,
    day_heads: list[HeadRow],
    keys: KeySet,
    progress: Progress,
) -> int:
    """Entries, tiles and heads of one day; returns the number of entries."""
    store = log.read
    stored_tiles = {(t.level, t.index, t.width): t for t in store.iter_tiles(day)}
    matched: set[tuple[int, int, int]] = set()
    edge = TreeEdge()
    head_sizes = sorted({h.tree_size for h in day_heads})
    roots: dict[int, bytes] = {}
    expected = 0
    pending = b""

    def check_partials() -> None:
        for tile, data in edge.partial_tiles():
            key = (tile.level, tile.index, tile.width)
            got = stored_tiles.get(key)
            if got is None or got.hashes != data:
                report.problems.append(
                    f"day {day}: tile {tile.path} at size {edge.size} "
                    f"{'is missing' if got is None else 'differs'}"
                )
            matched.add(key)

    def flush() -> None:
        nonlocal pending
        for full in edge.extend(pending):
            key = (full.tile.level, full.tile.index, TILE_WIDTH)
            got = stored_tiles.get(key)
            if got is None:
                report.problems.append(f"day {day}: full tile {full.tile.path} is missing")
            elif got.hashes != full.hashes or got.root != full.root:
                report.problems.append(f"day {day}: full tile {full.tile.path} differs")
            matched.add(key)
            report.count("tiles")
        pending = b""

    sizes = iter(head_sizes)
    next_size = next(sizes, None)
    while next_size == 0:
        roots[0] = edge.root()
        next_size = next(sizes, None)
    # The /record index must hold exactly the keys each stored server record implies, for
    # every entry below its watermark (log.index_watermark); above it, nothing or exactly those.
    watermark = index_watermark(max(head_sizes, default=0), store.day_size(day))
    indexed = store.iter_servers(day)
    pending_key = next(indexed, None)
    for entry in store.iter_entries(day):
        want = sorted(_keys_of(entry.claims))
        got: list[str] = []
        while pending_key is not None and pending_key[0] <= entry.leaf_index:
            if pending_key[0] < entry.leaf_index:
                report.problems.append(
                    f"day {day}: server index names entry {pending_key[0]}, which is not stored"
                )
            else:
                got.append(pending_key[1])
            pending_key = next(indexed, None)
        if got != want and (entry.leaf_index < watermark or got):
            report.problems.append(
                f"day {day}: entry {entry.leaf_index}: server index has {got}, expected {want}"
            )
        if entry.leaf_index != expected:
            report.problems.append(
                f"day {day}: entry index {entry.leaf_index} found where {expected} was expected"
            )
            expected = entry.leaf_index
        if hash_leaf(entry.claims) != entry.leaf_hash:
            report.problems.append(
                f"day {day}: entry {entry.leaf_index}: leaf hash does not match its stored bytes"
            )
        pending += entry.leaf_hash
        expected += 1
        report.count("entries")
        if next_size is not None and expected == next_size:
            flush()
            roots[next_size] = edge.root()
            check_partials()
            next_size = next(sizes, None)
        elif len(pending) >= 32 * 4096:
            flush()
        if expected % 100_000 == 0:
            progress(expected, None, f"audit {day}")
    flush()
    while pending_key is not None:
        report.problems.append(
            f"day {day}: server index names entry {pending_key[0]}, which is not stored"
        )
        pending_key = next(indexed, None)
    for size in [next_size, *sizes]:
        if size is not None and size not in roots:
            report.problems.append(f"day {day}: a head claims size {size}, the day has {expected}")
    for row in day_heads:
        _check_head(report, row, keys, log.iss, roots.get(row.tree_size))
    for key in sorted(set(stored_tiles) - matched):
        level, index, width = key
        report.problems.append(
            f"day {day}: stored tile {level}/{index} width {width} belongs to no published tree"
        )
    return expected


# --- an exported folder --------------------------------------------------------------------


def _read_json(report: AuditReport, path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        report.problems.append(f"{path} is missing")
    except (ValueError, UnicodeDecodeError) as exc:
        report.problems.append(f"{path} is not valid JSON: {exc}")
    return None


def audit_folder(
    folder: Path,
    keys: KeySet | None = None,
    log: Log | None = None,
    progress: Progress = silent,
    tsa_ca: Sequence[Certificate] = (),
) -> AuditReport:
    report = AuditReport()
    folder = Path(folder)
    if keys is None:
        try:
            keys = KeySet.from_json((folder / "keys.json").read_bytes())
        except FileNotFoundError:
            report.problems.append(f"{folder / 'keys.json'} is missing (or pass --keys)")
            return report
        except (InvalidKey, MalformedJSON) as exc:
            report.problems.append(f"{folder / 'keys.json'} is not a valid JWK set: {exc}")
            return report
    keys = logtrust.audit_key_records(report.problems, folder, keys)
    day_files = sorted(p for p in folder.glob("????-??-??.json") if _is_day(p.stem))
    prev: heads.Head | None = None
    sealed: dict[str, heads.Head] = {}
    for n, path in enumerate(day_files):
        day = path.stem
        checked = _verified_document(report, path, keys)
        if checked is None:
            prev = None
            continue
        _, verified = checked
        c = verified.claims
        if c["day"] != day or not c["sealed"]:
            report.problems.append(f"{path}: holds the head of {c['day']} (sealed={c['sealed']})")
        jws_file = folder / f"{day}.jws"
        if not jws_file.exists():
            report.problems.append(f"{jws_file} is missing")
        elif jws_file.read_bytes() != verified.jws.encode("ascii"):
            report.problems.append(f"{jws_file} differs from the JWS in {path.name}")
        _audit_stamps(report, folder, day, log, verified.jws, tsa_ca)
        if n == 0:
            if c["prev"] is not None:
                report.problems.append(
                    f"{path}: the earliest day has prev {c['prev']}: earlier days are missing"
                )
        elif prev is not None:
            expected_day = (parse_day(prev.day) + dt.timedelta(days=1)).isoformat()
            if day != expected_day:
                report.problems.append(f"days {expected_day}..{day} are missing before {path.name}")
            elif c["prev"] != heads.claims_digest(prev.claims):
                report.problems.append(f"{path}: prev does not match {prev.day}'s head")
        prev = verified
        sealed[day] = verified
        report.count("days")
        progress(n + 1, len(day_files), "audit roots")
    _audit_index(report, folder, sealed, log)
    _audit_saved_unsealed(report, folder, keys, sealed, log)
    _audit_records(report, folder, keys)
    if log is not None:
        _cross_check(report, folder, log, sealed)
        report.problems += logtrust.folder_trust_problems(folder, log)
    return report


def _is_day(text: str) -> bool:
    try:
        parse_day(text)
    except CapabilityAnchorError:
        return False
    return True


def _audit_stamps(
    report: AuditReport,
    folder: Path,
    day: str,
    log: Log | None,
    jws: str,
    cas: Sequence[Certificate],
) -> None:
    """`<day>.timestamps.json` and `<day>.tsr`: well formed, consistent with each other
    (the `.tsr` is the first listed stamp), each stamp of this day's JWS (`stamp_problems`;
    chained only with `--tsa-ca`), and with a data dir equal to the log's."""
    path = folder / f"{day}.timestamps.json"
    tsr = folder / f"{day}.tsr"
    doc = _read_json(report, path)
    if doc is None:
        return
    stamps = doc.get("timestamps") if isinstance(doc, dict) else None
    if (
        not isinstance(doc, dict)
        or doc.get("v") != heads.VERSION
        or doc.get("day") != day
        or not isinstance(stamps, list)
    ):
        report.problems.append(f"{path} is not the timestamps document of {day}")
        return
    tokens: list[bytes] = []
    for n, stamp in enumerate(stamps):
        try:
            token = base64.b64decode(stamp["token"], validate=True)
            if not isinstance(stamp["tsa"], str) or not isinstance(stamp["gen_time"], str):
                raise ValueError("tsa and gen_time must be strings")
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            report.problems.append(f"{path}: stamp {n} is malformed: {exc}")
            continue
        # Its shape (a DER TimeStampResp) first, then its content: stamp_problems.
        for problem in stamp_problems(token, jws, stamp["gen_time"], cas):
            report.problems.append(f"{path}: stamp {n} ({stamp['tsa']}) {problem}")
        report.count("stamps_chained" if cas else "stamps")
        tokens.append(token)
    if tsr.exists():
        if not tokens or tsr.read_bytes() != tokens[0]:
            report.problems.append(f"{tsr} is not the first stamp listed in {path.name}")
    elif tokens:
        report.problems.append(f"{tsr} is missing although {path.name} lists stamps")
    if log is not None:
        want = rfc8785.dumps(timestamps_document(day, log.read.stamps(day)))
        if path.read_bytes() != want:
            report.problems.append(f"{path} differs from the log's stamps of {day}")


def _audit_index(
    report: AuditReport, folder: Path, sealed: dict[str, heads.Head], log: Log | None
) -> None:
    index = _read_json(report, folder / "index.json")
    if index is None:
        return
    issuers = {h.claims["iss"] for h in sealed.values()}
    if (
        not isinstance(index, dict)
        or index.get("v") != heads.VERSION
        or (issuers and {index.get("iss")} != issuers)
    ):
        report.problems.append(f"{folder / 'index.json'}: v or iss disagree with the heads")
    if log is not None:
        want = rfc8785.dumps(log.roots(limit=max(1, len(log.read.sealed_heads()))))
        newest_file = max(sealed, default=None)
        newest_log = log.read.last_sealed_day()
        if newest_file == newest_log and (folder / "index.json").read_bytes() != want:
            report.problems.append(f"{folder / 'index.json'} differs from the log's listing")
    days = index.get("days") if isinstance(index, dict) else None
    if not isinstance(days, list):
        report.problems.append(f"{folder / 'index.json'} has no days list")
        return
    listed = [str(d.get("day")) for d in days if isinstance(d, dict)]
    if listed != sorted(sealed, reverse=True):
        missing = sorted(set(listed) - set(sealed))
        extra = sorted(set(sealed) - set(listed))
        report.problems.append(
            f"index.json does not list exactly the sealed days present "
            f"(listed but missing: {missing}; present but not listed: {extra})"
        )
    # The URL base is not signed anywhere; without a data dir all we can ask is that every
    # entry uses the same one.
    bases = {
        str(d.get("url"))[: -len(f"/roots/{d.get('day')}")] for d in days if isinstance(d, dict)
    }
    if len(bases) > 1:
        report.problems.append(f"index.json entries use different URL bases: {sorted(bases)}")
    for d in days:
        h = sealed.get(str(d.get("day"))) if isinstance(d, dict) else None
        if h is None:
            continue
        if (d.get("tree_size"), d.get("root")) != (h.tree_size, h.claims["root"]) or not str(
            d.get("url")
        ).endswith(f"/roots/{h.day}"):
            report.problems.append(f"index.json entry for {h.day} disagrees with {h.day}.json")


def _verified_document(
    report: AuditReport, path: Path, keys: KeySet
) -> tuple[bytes, heads.Head] | None:
    """A head document file whose JWS verifies and whose bytes are exactly the canonical
    document of the signed claims (so no unsigned byte can differ)."""
    doc = path.read_bytes()
    try:
        checked = heads.verify_document(doc, keys)
    except CapabilityAnchorError as exc:
        report.problems.append(f"{path}: {exc}")
        return None
    verified = checked.head
    if not checked.claims_match:
        report.problems.append(f"{path}: document claims differ from its signed claims")
    elif doc != verified.document():
        report.problems.append(f"{path}: not the canonical head document bytes")
    return doc, verified


def _audit_saved_unsealed(
    report: AuditReport,
    folder: Path,
    keys: KeySet,
    sealed: dict[str, heads.Head],
    log: Log | None,
) -> None:
    for path in sorted(folder.glob("????-??-??/*.json")):
        day = path.parent.name
        checked = _verified_document(report, path, keys)
        if checked is None:
            continue
        doc, verified = checked
        c = verified.claims
        if log is not None:
            row = log.read.head(c["day"], c["tree_size"], False)
            if row is None or row.doc != doc:
                report.problems.append(f"{path} differs from the log's head {day}/{path.stem}")
        if c["day"] != day or str(c["tree_size"]) != path.stem or c["sealed"]:
            report.problems.append(f"{path}: holds head {c['day']}/{c['tree_size']}")
        final = sealed.get(day)
        if final is not None:
            if c["tree_size"] > final.tree_size:
                report.problems.append(f"{path}: larger than the day's sealed head")
            if c["tree_size"] == final.tree_size and c["root"] != final.claims["root"]:
                report.problems.append(f"{path}: root differs from the sealed head of that size")
            if c["prev"] != final.claims["prev"]:
                report.problems.append(f"{path}: prev differs from the day's sealed head")
        report.count("saved_unsealed_heads")


def _audit_records(report: AuditReport, folder: Path, keys: KeySet) -> None:
    """Resolver-2 records kept beside the heads (`records/*.json`, as in the sample) go
    through the same verification as `verify-proof`, at the time each was issued (a token
    lives 48 h at most; what an audit can still establish is that it was valid then)."""
    # The verifying path: imported only when there are records.
    from .verify import Outcome, verify
    from .verify_sources import FolderSources

    sources = FolderSources(folder)

    for path in sorted(folder.glob("records/*.json")):
        data = path.read_bytes()
        try:
            issued = json.loads(data).get("iat")
        except (ValueError, AttributeError):
            issued = None
        at = issued if isinstance(issued, int) and not isinstance(issued, bool) else None
        try:
            result = verify(data, keys=keys, sources=sources, at=at)
        except CapabilityAnchorError as exc:
            report.problems.append(f"{path}: {exc}")
            continue
        for check in result.checks:
            if check.outcome is Outcome.FAIL:
                report.problems.append(f"{path}: {check.name}: {check.detail}")
        report.count("records")


def _cross_check(
    report: AuditReport, folder: Path, log: Log, sealed: dict[str, heads.Head]
) -> None:
    store_sealed = {h.day: h for h in log.read.sealed_heads()}
    newest_file = max(sealed, default=None)
    for day, row in sorted(store_sealed.items()):
        path = folder / f"{day}.json"
        if not path.exists():
            if newest_file is not None and day < newest_file:
                report.problems.append(f"{path} is missing (the log sealed {day})")
            continue
        if path.read_bytes() != row.doc:
            report.problems.append(f"{path} differs from the log's sealed head of {day}")
    for day in sealed:
        if day not in store_sealed:
            report.problems.append(
                f"{folder / (day + '.json')}: the log has no sealed head of {day}"
            )
    try:
        published = KeySet.from_json((folder / "keys.json").read_bytes())
    except (OSError, CapabilityAnchorError):
        return
    missing = [k.kid for k in log.keyset() if k.kid not in published]
    if missing:
        report.problems.append(f"keys.json lacks the log's key(s) {missing}")
