"""The read side of the history tree (SPEC §12.1): its size, its root at any size, and
inclusion and consistency proofs from the stored history tiles (every size is published,
so every size can be proven).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from capability_anchor import head as heads
from capability_anchor.errors import NotFound, StoreError, UsageError
from capability_anchor.merkle import (
    TileCache,
    TileNodes,
    consistency_nodes,
    root_from,
)
from capability_anchor.merkle.nodes import resolve
from capability_anchor.note import TYPE_ED25519, Policy, format_vkey, parse_policy
from capability_anchor.note.proof import format_tlog_proof
from capability_anchor.store import HISTORY_ORIGIN, CosignatureRow, HistoryLeaf, Store

from .tiles import stored_tiles

if TYPE_CHECKING:
    from capability_anchor.keys import KeySet, SigningKey


class NoteKeyHolder(Protocol):
    """Who signs the checkpoints: the log, whose head-signing key is its note key."""

    def signing_key(self) -> SigningKey: ...

    def published_keys(self) -> KeySet: ...


# The history's key in the shared tile cache: no day (`YYYY-MM-DD`) can be spelled so.
_NAMESPACE = "history"


class HistoryReader:
    """The history tree of one log, read from the store (`LogReader.history`)."""

    def __init__(
        self, store: Store, cache: TileCache | None = None, signer: NoteKeyHolder | None = None
    ) -> None:
        self.store = store
        self._cache = cache
        self._signer = signer
        # What `/history/checkpoint` served, by `Store.witnessed_marker`: finding the newest
        # checkpoint that meets a quorum may go back over every cosigned size (a witness of
        # the quorum down for a month), so it is found once per change, not per request.
        self._served: tuple[tuple[int, int, int], bytes] | None = None

    def _nodes(self, size: int, cached: bool = True) -> TileNodes:
        get = stored_tiles(self.store.history_tile, size, "the history")
        if not cached:
            return TileNodes(get)
        return TileNodes(get, cache=self._cache, namespace=_NAMESPACE)

    def _size(self, size: int | None, at_least: int = 0) -> int:
        """`size`, else the current size; refused unless at_least <= size <= current."""
        current = self.store.history_size()
        if size is None:
            size = current
        if not at_least <= size <= current:
            raise UsageError(
                f"history size must be {at_least}..{current} (the history's size), got {size}"
            )
        return size

    def root(self, size: int | None = None, *, cached: bool = True) -> bytes:
        """The history's root at `size` (default: now). `cached=False` inside a write
        transaction: rows read there must not outlive a rollback in the shared cache."""
        size = self._size(size)
        return root_from(self._nodes(size, cached), size)

    def leaf(self, leaf_hash: bytes) -> HistoryLeaf:
        found = self.store.history_leaf(leaf_hash)
        if found is None:
            raise NotFound(f"no published head has history leaf hash {leaf_hash.hex()}")
        return found

    def inclusion(self, leaf_hash: bytes, size: int | None = None) -> list[bytes]:
        """The inclusion path of the head whose history leaf hash is `leaf_hash`, in the
        history of `size` (default: now), which must already hold that head."""
        leaf = self.leaf(leaf_hash)
        size = self._size(size, at_least=leaf.index + 1)
        return self._nodes(size).inclusion_path(leaf.index, size)

    def consistency(self, first: int, second: int | None = None) -> list[bytes]:
        """The RFC 9162 consistency proof from history size `first` to `second` (default:
        now); 0 < first <= second, as SPEC §3 reads the RFC."""
        second = self._size(second, at_least=1)
        if not 0 < first <= second:
            raise UsageError(f"consistency needs 0 < first <= second, got {first} and {second}")
        return resolve(consistency_nodes(first, second), self._nodes(second).node)

    # --- checkpoints and cosignatures (SPEC §12.2-§12.4) ---------------------------------------

    def origin(self) -> str:
        origin = self.store.meta().get(HISTORY_ORIGIN)
        if origin is None:
            raise NotFound("this log has no history origin yet (no writer has opened it)")
        return origin

    def vkey(self) -> str:
        """The log's note key as a C2SP vkey (SPEC §12.2)."""
        if self._signer is None:
            raise UsageError("this reader has no log key")
        return format_vkey(self.origin(), TYPE_ED25519, self._signer.signing_key().public.raw)

    def vkeys(self) -> tuple[str, ...]:
        """The note keys a policy's `log` lines may name: the current one first, then every
        other key of the log that is not revoked (SPEC §13.2: both during an overlap)."""
        current = self.vkey()
        assert self._signer is not None
        origin = self.origin()
        others = (format_vkey(origin, TYPE_ED25519, k.raw) for k in self._signer.published_keys())
        return (current, *(v for v in others if v != current))

    def checkpoint(self, size: int) -> bytes:
        """The log-signed checkpoint note of `size`, without cosignatures."""
        note = self.store.checkpoint_note(size)
        if note is None:
            raise NotFound(
                f"no checkpoint of history size {size} (the history has "
                f"{self.store.checkpoint_size()})"
            )
        return note

    def parsed_policy(self) -> Policy | None:
        text = self.store.policy()
        return None if text is None else parse_policy(text)

    def served_checkpoint(self, size: int | None = None) -> bytes:
        """The checkpoint as `/history/checkpoint[/N]` serves it (SPEC §12.4): with `size`,
        that one with every stored cosignature; else the newest whose cosignatures meet the
        stored policy's quorum, with those witnesses' newest lines in policy order, or, with
        no policy, `quorum none` or no such checkpoint yet, the newest with all it has."""
        if size is not None:
            return _with_lines(self.checkpoint(size), self.store.cosignatures(size))
        marker = self.store.witnessed_marker()
        served = self._served
        if served is not None and served[0] == marker:
            return served[1]
        note = self._newest_served(marker[0])
        self._served = (marker, note)
        return note

    def _newest_served(self, newest: int) -> bytes:
        if newest == 0:
            raise NotFound("the history has no checkpoint yet (no head is published)")
        policy = self.parsed_policy()
        if policy is not None and policy.quorum != "none":
            met = _quorum_met(self.store, policy)
            if met is not None:
                return _with_lines(self.checkpoint(met[0]), list(met[1].values()))
        return _with_lines(self.checkpoint(newest), self.store.cosignatures(newest))

    def tlog_proof(self, leaf_hash: bytes, size: int | None = None) -> bytes:
        """The C2SP tlog-proof of the head whose history leaf hash is `leaf_hash` (SPEC
        §12.4): `extra` its compact JWS, its inclusion path, the checkpoint served for
        `size` (default: `/history/checkpoint`'s, or the newest when that one does not
        cover the head yet)."""
        leaf = self.leaf(leaf_hash)
        note = self.served_checkpoint(size)
        covered = size_of(note)
        if size is None and covered <= leaf.index:
            covered = self.store.checkpoint_size()
            note = self.served_checkpoint(covered)
        path = self.inclusion(leaf_hash, covered)
        row = self.store.head(leaf.day, leaf.tree_size, leaf.sealed)
        if row is None:  # pragma: no cover - the store's trigger keeps leaves heads
            raise StoreError(f"history leaf {leaf.index} is no stored head")
        token = heads.parse_document(row.doc).jws.encode("ascii")
        # Built unchecked: the note is our own stored checkpoint, the path our own tiles'.
        return format_tlog_proof(leaf.index, path, note, token)


def size_of(note: bytes) -> int:
    """The size line of a stored checkpoint note (its second line)."""
    return int(note.split(b"\n", 2)[1])


def _quorum_met(
    store: Store, policy: Policy, sizes: list[int] | None = None
) -> tuple[int, dict[str, CosignatureRow]] | None:
    """The newest cosigned size (of `sizes`, default all) whose policy witnesses' lines
    meet the quorum, and those lines; None when no size does."""
    for cosigned in store.cosigned_sizes() if sizes is None else sizes:
        lines = _policy_lines(policy, store.cosignatures(cosigned))
        if policy.satisfied_by(lines):
            return cosigned, lines
    return None


def quorum_met_size(store: Store, newest: int, limit: int) -> tuple[int | None, int | None]:
    """(the size of the newest checkpoint that meets the stored policy's quorum, or None;
    the oldest size looked at when none of the `limit` newest cosigned sizes did, so the one
    that meets it, if any, is older). `newest` with no policy or `quorum none`. Bounded: at
    most `limit` sizes are read (the metrics, at scrape time)."""
    text = store.policy()
    policy = None if text is None else parse_policy(text)
    if policy is None or policy.quorum == "none":
        return newest, None
    sizes = store.cosigned_sizes(limit)
    met = _quorum_met(store, policy, sizes)
    if met is not None:
        return met[0], None
    return None, (sizes[-1] if len(sizes) == limit else None)


def _policy_lines(policy: Policy, rows: list[CosignatureRow]) -> dict[str, CosignatureRow]:
    """Policy witness name -> its newest stored line for one size, in policy order (only
    rows whose key ID is that witness's key in the current policy)."""
    newest = {row.witness: row for row in rows}
    out: dict[str, CosignatureRow] = {}
    for witness in policy.witnesses:
        found = newest.get(witness.name)
        if found is not None and found.key_id == witness.verifier.key_id:
            out[witness.name] = found
    return out


def _with_lines(note: bytes, rows: list[CosignatureRow]) -> bytes:
    """A signed note with the cosignature lines appended (it stays a note)."""
    return note + b"".join(row.line.encode("utf-8") + b"\n" for row in rows)
