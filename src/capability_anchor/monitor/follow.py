"""One monitor run, in order (each step's alarm is named in the findings):

1. read `history/checkpoint`; `checkpoint_signature`: it is signed by a trusted key under
   the origin (the state's, else `--origin`, else the policy's `log` vkey, else the URL's
   §12.2 origin, else, for a folder, the checkpoint's own origin line, then pinned);
2. with a policy, `quorum`: its cosignatures meet the quorum (`note.check_cosignatures`);
3. `checkpoint_rollback` / `checkpoint_inconsistent`: it is not smaller than the last one
   seen, and is consistent with it (a proof built from the history's hash tiles and
   verified with `merkle`; the same size must have the same root);
4. `entries_mismatch`: the new leaves from the entry bundles, appended to the stored tree
   edge, give the checkpoint's root;
5. every new leaf obeys the head rules (`heads.py`).

A checkpoint alarm (1-4) commits nothing. Once 1-4 pass, the checkpoint and its leaves are
committed, then each chunk of heads whose rules pass (`state.py`); a head alarm stops the
run before its chunk is committed. Either way every later run repeats the alarm until
someone acts, and a crashed catch-up goes on from its last chunk.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CapabilityAnchorError, InputError
from ..keys import KeySet
from ..merkle import HASH_SIZE, TILE_WIDTH, TileNodes, consistency_nodes, verify_consistency
from ..merkle.nodes import resolve
from ..note import Checkpoint, Policy, check_cosignatures, open_checkpoint
from ..note.checkpoint import origin_from_url, parse_checkpoint
from ..note.signed import b64encode, parse_note
from ..verify_history import log_verifiers
from . import state as states
from .heads import Finding, HeadRules, head_path, leaf_claims
from .signatures import Item, Problem, Signatures
from .source import LogSource, read_bundles, read_tile

CHUNK_BUNDLES = 64  # 16,384 heads held at once during a catch-up


@dataclass(frozen=True)
class MonitorOptions:
    keys: KeySet
    state_dir: Path
    policy: Policy | None = None
    origin: str | None = None
    entries: bool = False


@dataclass
class RunResult:
    findings: list[Finding] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def alarmed(self) -> bool:
        return any("alarm" in f for f in self.findings)


class Monitor:
    def __init__(self, source: LogSource, options: MonitorOptions) -> None:
        self.source = source
        self.options = options

    def run_once(self) -> RunResult:
        state = states.load(self.options.state_dir)
        result = RunResult()
        old_size = state.size
        if state.checked < state.size:  # a catch-up that was cut short: finish it first
            self._check_heads(state, result)
            if result.alarmed:
                result.summary = self._summary(state, old_size, 0)
                return result
        data = self.source.read("history/checkpoint")
        if data is None:
            if state.size:  # a log that signed a checkpoint never unpublishes it
                result.findings.append(
                    {
                        "alarm": "checkpoint_missing",
                        "old_size": state.size,
                        "detail": "the log no longer serves history/checkpoint (HTTP 404)",
                    }
                )
            result.summary = self._summary(state, old_size, 0)
            return result
        checkpoint = self._checkpoint(state, data, result)
        if checkpoint is not None and self._consistent(state, checkpoint, result):
            self._new_leaves(state, checkpoint, result)
        if not result.alarmed and checkpoint is not None:
            # The checkpoint and its leaves are proven: commit them, then check the heads.
            state.checkpoint = data.decode("utf-8")
            if not state.seen or state.seen[-1][0] != checkpoint.size:
                state.seen.append([checkpoint.size, b64encode(checkpoint.root)])
            states.save(self.options.state_dir, state, old_size)
            self._check_heads(state, result)
        result.summary = self._summary(state, old_size, 0 if result.alarmed else state.size)
        return result

    def _summary(self, state: states.MonitorState, old: int, new: int) -> dict[str, Any]:
        return {"monitor": self.source.where, "origin": state.origin, "old_size": old, "size": new}

    def _expected(self, state: states.MonitorState) -> tuple[tuple[str, ...], str] | None:
        """The origins the checkpoint may have, and where that comes from (None: a folder
        with nothing else to go by takes the checkpoint's own origin line)."""
        given = self.options.origin
        if state.origin is not None:
            if given is not None and given != state.origin:
                raise InputError(
                    f"--origin {given} but {self.options.state_dir} follows {state.origin}: "
                    "use another --state for another log"
                )
            return (state.origin,), f"pinned in {self.options.state_dir}"
        if given is not None:
            return (given,), "--origin"
        policy = self.options.policy
        if policy is not None and policy.logs:
            return tuple(log.verifier.name for log in policy.logs), "the policy's log line"
        where = self.source.where
        if where.startswith(("http://", "https://")):
            return (origin_from_url(where),), f"the URL {where}"
        return None

    def _checkpoint(
        self, state: states.MonitorState, data: bytes, result: RunResult
    ) -> Checkpoint | None:
        where = f"{self.source.where}/history/checkpoint"
        try:  # bytes that are no checkpoint at all: a broken transfer looks the same (I/O)
            note = parse_note(data)
            origin = parse_checkpoint(note.text).origin
        except CapabilityAnchorError as exc:
            raise InputError(f"{where}: not a checkpoint ({exc})") from None
        expected = self._expected(state)
        if expected is not None and origin not in expected[0]:
            # Another name is a question of which log this is, not evidence against it.
            names = " or ".join(expected[0])
            raise InputError(
                f"{where}: the checkpoint's origin is {origin}, expected {names} (from "
                f"{expected[1]}); pass --origin {origin} if this is the log to follow"
                + (" (with a new --state)" if state.origin is not None else "")
            )
        verifiers = log_verifiers(origin, self.options.keys, self.options.policy)
        try:
            opened = open_checkpoint(note, verifiers, origin=origin)
        except CapabilityAnchorError as exc:
            result.findings.append({"alarm": "checkpoint_signature", "detail": str(exc)})
            return None
        state.origin = origin
        policy = self.options.policy
        if policy is not None:
            try:
                check_cosignatures(note, policy, at=int(time.time())).require()
            except CapabilityAnchorError as exc:
                result.findings.append({"alarm": "quorum", "detail": str(exc)})
        return opened.checkpoint

    def _consistent(
        self, state: states.MonitorState, checkpoint: Checkpoint, result: RunResult
    ) -> bool:
        old, new = state.size, checkpoint.size

        def alarm(name: str, detail: str) -> bool:
            result.findings.append({"alarm": name, "old_size": old, "size": new, "detail": detail})
            return False

        if new < old:
            return alarm("checkpoint_rollback", "the log shows a smaller checkpoint than before")
        if old == 0:
            return True
        old_root = state.edge().root()
        if new == old:
            if checkpoint.root != old_root:
                return alarm("checkpoint_inconsistent", "the same size with another root")
            return True
        nodes = TileNodes(lambda level, i: read_tile(self.source, "history/", new, level, i))
        try:
            path = resolve(consistency_nodes(old, new), nodes.node)
            verify_consistency(old, new, old_root, checkpoint.root, path)
        except InputError:
            raise
        except CapabilityAnchorError as exc:
            return alarm("checkpoint_inconsistent", str(exc))
        return True

    def _new_leaves(
        self, state: states.MonitorState, checkpoint: Checkpoint, result: RunResult
    ) -> None:
        """Append the new leaf hashes; they must give the checkpoint's root."""
        edge = state.edge()
        index = state.size
        while index < checkpoint.size:
            leaves = self._chunk(index, checkpoint.size)
            hashed = b"".join(hashlib.sha256(b"\x00" + leaf).digest() for leaf in leaves)
            edge.extend(hashed)
            state.leaf_hashes += hashed
            index += len(leaves)
        if edge.root() != checkpoint.root:
            result.findings.append(
                {
                    "alarm": "entries_mismatch",
                    "size": checkpoint.size,
                    "detail": "the entry bundles do not give the checkpoint's root",
                }
            )
        state.size = checkpoint.size

    def _check_heads(self, state: states.MonitorState, result: RunResult) -> None:
        """The head rules on leaves `checked`..`size`, a chunk at a time; each clean chunk is
        committed, so a crash costs at most one chunk (`state.py`)."""
        rules = HeadRules(self.source, state, entries=self.options.entries)
        signatures = Signatures(self.source, self.options.keys)
        try:
            while state.checked < state.size:
                start = state.checked
                leaves = self._chunk(start, state.size)
                parsed, rules.targets, items = _parse_leaves(leaves)
                verdicts = signatures.check(items)
                try:
                    _check_chunk(state, start, (leaves, parsed), verdicts, rules, result)
                finally:
                    verdicts.close()
                if result.alarmed:
                    return
                state.checked = start + len(leaves)
                states.save(self.options.state_dir, state, state.size)
        finally:
            signatures.close()

    def _chunk(self, start: int, size: int) -> list[bytes]:
        """The leaves from `start`, up to CHUNK_BUNDLES entry bundles (bounded memory)."""
        first = start // TILE_WIDTH
        indices = list(range(first, (size - 1) // TILE_WIDTH + 1)[:CHUNK_BUNDLES])
        leaves: list[bytes] = []
        for n, bundle in enumerate(read_bundles(self.source, "history/", size, indices)):
            leaves += bundle[start - first * TILE_WIDTH :] if n == 0 else bundle
        return leaves


def _check_chunk(
    state: states.MonitorState,
    start: int,
    chunk: tuple[list[bytes], list[dict[str, Any] | None]],
    verdicts: Iterator[Problem],
    rules: HeadRules,
    result: RunResult,
) -> None:
    """The head rules on one chunk of leaves, each first matched against its proven hash."""
    for index, (leaf, claims) in enumerate(zip(*chunk, strict=True), start):
        stored = state.leaf_hashes[index * HASH_SIZE : (index + 1) * HASH_SIZE]
        if hashlib.sha256(b"\x00" + leaf).digest() != stored:
            result.findings.append(
                {
                    "alarm": "entries_mismatch",
                    "index": index,
                    "detail": "the entry bundle changed since it gave the root",
                }
            )
            return
        signed = None if claims is None else next(verdicts)
        result.findings += rules.check(index, leaf, claims, signed)


def _parse_leaves(
    leaves: list[bytes],
) -> tuple[list[dict[str, Any] | None], dict[str, tuple[int, bytes]], list[Item]]:
    """Each leaf's head claims (None when it is not a head: `check` names why); each day's
    last head among `leaves` (history order), the target of the day's proofs; and each
    head's document path with its leaf, for rule 2, in the order they are checked."""
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
        items.append((head_path(claims), leaf))
    return parsed, targets, items
