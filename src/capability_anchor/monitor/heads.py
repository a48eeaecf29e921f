"""The SPEC §4/§12.1 rules on each new history leaf, in order: (1) `invalid_head_leaf`; (2) the head
document (`signatures.py`); (3) `two_sealed_heads`, `head_after_seal`; (4) `order`; (5)
`prev_broken`; (6) `day_head_shrinks`, `root_conflict`; (7) `day_inconsistent`, by proofs from the
day's tiles; (8) with `--entries`, `day_root_mismatch`. A leaf failing (1) is no head; one failing
(2) still is. Before them, the log's key records (SPEC §13.2): an endorsed rotation is followed
(noted once, `key_rotation`) and revocations reach the rules (`key_revoked_signature`)."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from capability_anchor import head as heads
from capability_anchor import strictjson
from capability_anchor.errors import (
    CapabilityAnchorError,
    InputError,
    VerificationError,
)
from capability_anchor.keys import KeySet, trust
from capability_anchor.merkle import (
    HASH_SIZE,
    TileCache,
    TileNodes,
    TreeEdge,
    consistency_nodes,
    hash_leaf,
    verify_consistency,
)
from capability_anchor.merkle.nodes import resolve
from capability_anchor.read.source import LogSource, read_leaves, read_tile
from capability_anchor.strictjson import canonical
from capability_anchor.verify.history_checks import revoked_checkpoint

from .signatures import Item, Problem
from .state import DayEdge, LastHead, MonitorState

if TYPE_CHECKING:
    from capability_anchor.note import Note

Finding = dict[str, Any]
Evidence = dict[str, bytes]  # file name -> bytes as served (`state.raise_alarm`)
MEMO_NODES = 1 << 16  # about 6 MB of node hashes and their keys


def leaf_claims(leaf: bytes) -> dict[str, Any]:
    """Head claims whose JCS bytes are exactly `leaf`; raises VerificationError."""
    try:
        claims = heads.check_claims(strictjson.loads(leaf))
    except CapabilityAnchorError as exc:
        raise VerificationError(str(exc)) from None
    if canonical(claims) != leaf:
        raise VerificationError("the leaf is not the JCS bytes of its claims")
    return claims


class HeadRules:
    def __init__(self, source: LogSource, state: MonitorState, *, entries: bool) -> None:
        self.source = source
        self.state = state
        self.entries = entries
        self.targets: dict[str, tuple[int, bytes]] = {}  # day -> its newest head in this run
        # Shared across heads: the full tiles of a day serve every later proof. Soundness
        # does not rest on where a hash came from: each proof is checked against both roots.
        self._tiles = TileCache()
        self._day_nodes: tuple[tuple[str, int], Callable[[int, int], bytes]] | None = None

    def check(
        self, index: int, leaf: bytes, claims: dict[str, Any] | None, signed: Problem
    ) -> list[Finding]:
        """The rules on one leaf, given its claims (None: not a head) and rule 2's verdict."""
        found: list[Finding] = []

        def alarm(name: str, detail: str, **extra: Any) -> None:
            found.append({"alarm": name, "index": index, "detail": detail, **extra})

        if claims is None:
            try:
                leaf_claims(leaf)
            except VerificationError as exc:
                alarm("invalid_head_leaf", str(exc))
            return found
        where = {"day": claims["day"], "tree_size": claims["tree_size"], "sealed": claims["sealed"]}
        if signed is not None:
            alarm(signed[0], signed[1], **where)
        for name, detail in self._rules(claims):
            alarm(name, detail, **where)
        self._advance(claims, leaf)
        return found

    def _rules(self, claims: dict[str, Any]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        last = self.state.last
        day, size, sealed = claims["day"], claims["tree_size"], claims["sealed"]
        if last is not None and last.day == day and last.sealed:
            name = "two_sealed_heads" if sealed else "head_after_seal"
            out.append((name, f"day {day} was already sealed at size {last.tree_size}"))
        elif last is not None and (day, sealed, size) <= (last.day, last.sealed, last.tree_size):
            out.append(("order", f"follows ({last.day}, {last.sealed}, {last.tree_size})"))
        out += self._chain(claims)
        if last is not None and last.day == day:
            out += self._same_day(last, size, bytes.fromhex(claims["root"]))
        if self.entries:
            out += self._entries(day, size, bytes.fromhex(claims["root"]))
        return out

    def _chain(self, claims: dict[str, Any]) -> list[tuple[str, str]]:
        state, last, day = self.state, self.state.last, claims["day"]
        expected = state.sealed_before if day == state.sealed_day else state.sealed_digest
        out = []
        if claims["prev"] != expected:
            out.append(("prev_broken", f"prev is {claims['prev']}, expected {expected}"))
        if last is not None and day > last.day:
            following = (dt.date.fromisoformat(last.day) + dt.timedelta(days=1)).isoformat()
            if not last.sealed or day != following:
                out.append(("prev_broken", f"day {day} follows day {last.day} not sealed"))
        return out

    def _same_day(self, last: LastHead, size: int, root: bytes) -> list[tuple[str, str]]:
        if size < last.tree_size:
            return [("day_head_shrinks", f"size {size} after {last.tree_size}")]
        if size == last.tree_size:
            if root.hex() != last.root:
                return [("root_conflict", f"root {root.hex()} at size {size}, was {last.root}")]
            return []
        if last.tree_size == 0:
            return []
        # Each previous head is proved a prefix of the day's newest head in this run, not of
        # the next head: prefixes of one tree are prefixes of each other, so every pair is
        # consistent, and every proof reads the tiles of one size (a fetch per 256 heads).
        target_size, target_root = self.targets.get(last.day, (size, root))
        if target_size < size:
            target_size, target_root = size, root
        first, first_root = last.tree_size, bytes.fromhex(last.root)
        try:
            path = resolve(
                consistency_nodes(first, target_size), self._nodes(last.day, target_size)
            )
            verify_consistency(first, target_size, first_root, target_root, path)
        except InputError:
            raise
        except CapabilityAnchorError as exc:
            return [("day_inconsistent", f"{first} -> {target_size}: {exc}")]
        return []

    def _nodes(self, day: str, size: int) -> Callable[[int, int], bytes]:
        """Memoized node lookups in the day's tree at `size`, shared by one target's proofs."""
        if self._day_nodes is None or self._day_nodes[0] != (day, size):
            prefix = f"roots/{day}/"
            nodes = TileNodes(
                lambda level, i: read_tile(self.source, prefix, size, level, i),
                cache=self._tiles,
                namespace=(day, size),
            )
            self._day_nodes = (day, size), functools.lru_cache(maxsize=MEMO_NODES)(nodes.node)
        return self._day_nodes[1]

    def _entries(self, day: str, size: int, root: bytes) -> list[tuple[str, str]]:
        saved = self.state.day_edge
        edge = saved.edge() if saved is not None and saved.day == day else TreeEdge()
        if size < edge.size:
            edge = TreeEdge()  # the shrink is alarmed above; re-derive this head alone
        for entries in read_leaves(self.source, f"roots/{day}/", edge.size, size):
            edge.extend(b"".join(hash_leaf(e) for e in entries))
        self._day_edge = DayEdge.of(day, edge)
        if edge.root() != root:
            return [("day_root_mismatch", f"the day's entries give root {edge.root().hex()}")]
        return []

    def _advance(self, claims: dict[str, Any], leaf: bytes) -> None:
        self.state.last = LastHead(
            claims["day"], claims["sealed"], claims["tree_size"], claims["root"]
        )
        if claims["sealed"]:
            if claims["day"] != self.state.sealed_day:
                self.state.sealed_before = self.state.sealed_digest
            self.state.sealed_digest = hashlib.sha256(leaf).hexdigest()
            self.state.sealed_day = claims["day"]
        if self.entries:
            self.state.day_edge = self._day_edge


def changed(
    state: MonitorState, index: int, leaf: bytes, findings: list[Finding], evidence: Evidence
) -> bool:
    """Whether leaf `index`, read again, is not the one whose hash gave the root (alarmed)."""
    stored = state.leaf_hashes[index * HASH_SIZE : (index + 1) * HASH_SIZE]
    if hash_leaf(leaf) == stored:
        return False
    findings.append(
        {
            "alarm": "entries_mismatch",
            "index": index,
            "detail": "the entry bundle changed since it gave the root",
        }
    )
    evidence[f"leaf-{index}"] = leaf
    return True


def check_chunk(
    state: MonitorState,
    start: int,
    chunk: tuple[list[bytes], list[dict[str, Any] | None]],
    verdicts: Iterator[Problem],
    rules: HeadRules,
    findings: list[Finding],
    evidence: Evidence,
) -> None:
    """The head rules on one chunk of leaves, each first matched against its proven hash."""
    for index, (leaf, claims) in enumerate(zip(*chunk, strict=True), start):
        if changed(state, index, leaf, findings, evidence):
            return
        signed = None if claims is None else next(verdicts)
        found = rules.check(index, leaf, claims, signed)
        if found:
            evidence[f"leaf-{index}"] = leaf
            if signed is not None and signed[2] is not None:
                evidence[f"head-{index}.json"] = signed[2]
            findings += found


def parse_leaves(
    leaves: list[bytes],
) -> tuple[list[dict[str, Any] | None], dict[str, tuple[int, bytes]], list[Item]]:
    """Each leaf's head claims, each day's last head, and each head's document path and leaf."""
    parsed: list[dict[str, Any] | None] = []
    targets: dict[str, tuple[int, bytes]] = {}
    items: list[Item] = []
    for leaf in leaves:
        try:
            claims = leaf_claims(leaf)
        except CapabilityAnchorError:
            parsed.append(None)
            continue
        parsed.append(claims)
        targets[claims["day"]] = (claims["tree_size"], bytes.fromhex(claims["root"]))
        path = f"roots/{claims['day']}"  # the sealed head's, or the unsealed head's of its size
        items.append((path if claims["sealed"] else f"{path}/{claims['tree_size']}", leaf))
    return parsed, targets, items


KEY_RECORDS_PATH = "keys/records"


def follow_keys(
    source: LogSource, keys: KeySet, state: MonitorState, findings: list[dict[str, Any]]
) -> trust.TrustChain:
    """The closure of `keys` over the log's records; a note for each key followed the first time."""
    data = source.read(KEY_RECORDS_PATH)
    if data is None:
        return trust.TrustChain(keys)
    chain = trust.published_closure(keys, data, f"{source.where}/{KEY_RECORDS_PATH}")
    notes = findings
    for _, record in sorted(chain.records.items()):
        kid = record.key.kid
        if kid in keys or kid in state.rotations:
            continue
        state.rotations.append(kid)
        notes.append(
            {
                "note": "key_rotation",
                "kid": kid,
                "endorsed_by": record.signer,
                "detail": f"the log's key records endorse key {kid} (signed by "
                f"{record.signer}): followed as one of the log's keys",
            }
        )
    for kid, revocation in chain.revocations.items():
        mark = f"revoked:{kid}"
        if mark not in state.rotations:
            state.rotations.append(mark)
            notes.append(
                {
                    "note": "key_revoked",
                    "kid": kid,
                    "revoked_at": revocation.revoked_at,
                    "detail": revocation.describe(),
                }
            )
    return chain


def checkpoint_alarm(
    chain: trust.TrustChain, note: Note, size: int, leaf: bytes
) -> tuple[Finding, Evidence] | None:
    """SPEC §13.2 as `verify-proof` has it: a checkpoint is dated by `leaf`, the newest head it
    covers; after a revocation it needs a signature by a key not revoked. The alarm and its
    evidence, or None."""
    try:
        iat: int = leaf_claims(leaf)["iat"]
    except CapabilityAnchorError:
        return None  # not a head: the head rules name why (`invalid_head_leaf`)
    gone = revoked_checkpoint(note, iat, chain.keys, chain.revocations)
    if not gone:
        return None
    finding: Finding = {
        "alarm": "key_revoked_signature",
        "size": size,
        "detail": f"history/checkpoint: covers a head signed at iat {iat} (index {size - 1}) "
        "but carries no signature by a key that is not revoked: "
        + "; ".join(r.describe() for r in gone),
    }
    evidence = {f"leaf-{size - 1}": leaf}
    evidence.update({f"revocation-{r.kid}.jws": r.token.encode("ascii") for r in gone})
    return finding, evidence
