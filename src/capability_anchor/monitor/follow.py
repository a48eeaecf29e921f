"""One monitor run (docs/how-to/monitor.md), in order: (0) a pending alarm is repeated, nothing
read; (1) the checkpoint's origin and signature (exit 2 otherwise); (2) no rollback, consistent with
the last one; (3) the new leaves give its root; (4) a policy's quorum; (5) the head rules
(`heads.py`); (6) `checkpoint_stale`. A checkpoint alarm commits nothing; then the checkpoint and
each chunk of heads that passed are committed."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from capability_anchor.errors import CapabilityAnchorError, InputError
from capability_anchor.keys.trust import TrustChain
from capability_anchor.merkle import (
    TiledTree,
    TileNodes,
    consistency_nodes,
    hash_leaf,
    verify_consistency,
)
from capability_anchor.merkle.nodes import resolve
from capability_anchor.merkle.tiles import tiles_for_size
from capability_anchor.monitor import staleness
from capability_anchor.monitor import state as states
from capability_anchor.monitor.state import MonitorOptions
from capability_anchor.note import Checkpoint, Policy, check_cosignatures, open_checkpoint
from capability_anchor.note.checkpoint import origin_from_url, parse_checkpoint
from capability_anchor.note.signed import b64encode, parse_note
from capability_anchor.read.source import LogSource, read_leaves, read_tile
from capability_anchor.verify.history_checks import log_verifiers

from .heads import (
    Finding,
    HeadRules,
    changed,
    check_chunk,
    checkpoint_alarm,
    follow_keys,
    parse_leaves,
)
from .signatures import Signatures

CHUNK_BUNDLES = 64  # 16,384 heads held at once during a catch-up


@dataclass
class RunResult:
    findings: list[Finding] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, bytes] = field(default_factory=dict, repr=False)  # `state.raise_alarm`
    pending: list[str] = field(default_factory=list)  # IDs repeated, not raised by this run

    @property
    def alarmed(self) -> bool:
        return any("alarm" in f for f in self.findings)


class Monitor:
    def __init__(self, source: LogSource, options: MonitorOptions) -> None:
        self.source, self.options = source, options
        self.chain = TrustChain(options.keys)  # with what the key records add: `follow_keys`

    def run_once(self) -> RunResult:
        folder = self.options.state_dir
        waiting = states.pending(folder)
        state = states.load(folder)
        result = RunResult()
        if waiting:  # never committed past: repeated until acknowledged, the log not read
            for alarm in waiting:
                result.findings += [{**f, "alarm_id": alarm.id} for f in alarm.findings]
            result.pending = [alarm.id for alarm in waiting]
            result.summary = {**self._summary(state, state.size, 0), "pending": result.pending}
            return result
        self._run(state, result)
        if result.alarmed:
            self._raise(state, result)
        return result

    def _raise(self, state: states.MonitorState, result: RunResult) -> None:
        """Keep the evidence and record the alarm (`state.py`); each line names its ID."""
        evidence = dict(result.evidence)
        if state.checkpoint is not None:
            last = state.checkpoint.encode("utf-8")
            if evidence.get("checkpoint") == last:
                del evidence["checkpoint"]
            evidence["checkpoint.last"] = last
        ident = states.raise_alarm(self.options.state_dir, result.findings, evidence)
        result.findings = [{**f, "alarm_id": ident} if "alarm" in f else f for f in result.findings]
        result.summary["alarm_id"] = ident

    def _run(self, state: states.MonitorState, result: RunResult) -> None:
        old_size = state.size
        if state.checked < state.size:  # a catch-up that was cut short: finish it first
            self.chain = follow_keys(self.source, self.options.keys, state, result.findings)
            self._check_heads(state, result)
            if result.alarmed:
                result.summary = self._summary(state, old_size, 0)
                return
        data = self.source.read("history/checkpoint")
        if data is None:
            staleness.missing(self.source, state, self.options, result.findings)
            result.summary = self._summary(state, old_size, 0)
            return
        result.evidence["checkpoint"] = data
        self.chain = follow_keys(self.source, self.options.keys, state, result.findings)
        checkpoint = self._checkpoint(state, data)
        if staleness.older(state, checkpoint, self.options.state_dir, result.findings):
            result.summary = self._summary(state, old_size, state.size)
            return
        if self._consistent(state, checkpoint, result):
            self._new_leaves(state, checkpoint, result)
            if old_size == 0 and not result.alarmed:
                self._first_tiles(state, result)
            if not result.alarmed and self.chain.revocations and checkpoint.size:
                _revoked(self.source, self.chain, state, (data, checkpoint.size), result)
        if not result.alarmed:
            _unwitnessed(self.source.where, self.options.policy, data)
            # The checkpoint and its leaves are proven: commit them, then check the heads.
            state.checkpoint = data.decode("utf-8")
            if not state.seen or state.seen[-1][0] != checkpoint.size:
                state.seen.append([checkpoint.size, b64encode(checkpoint.root)])
            states.save(self.options.state_dir, state, old_size)
            self._check_heads(state, result)
            if not result.alarmed:
                stale = staleness.check(self.source, state, self.options)
                if stale is not None:
                    result.findings.append(stale)
        result.summary = self._summary(state, old_size, 0 if result.alarmed else state.size)

    def _summary(self, state: states.MonitorState, old: int, new: int) -> dict[str, Any]:
        return {"monitor": self.source.where, "origin": state.origin, "old_size": old, "size": new}

    def _expected(self, state: states.MonitorState) -> tuple[tuple[str, ...], str] | None:
        """The origins the checkpoint may have, and whence (None: its own origin line)."""
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

    def _checkpoint(self, state: states.MonitorState, data: bytes) -> Checkpoint:
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
        verifiers = log_verifiers(origin, self.chain.keys, self.options.policy)
        try:
            opened = open_checkpoint(note, verifiers, origin=origin)
        except CapabilityAnchorError as exc:
            # Not signed by the log: no statement of the log's, so no evidence against it.
            raise InputError(
                f"{where}: not signed by a trusted key of {origin} ({exc}); check that --keys "
                "is the log's key set (its /keys) and that this is the log"
            ) from None
        state.origin = origin
        return opened.checkpoint

    def _consistent(
        self, state: states.MonitorState, checkpoint: Checkpoint, result: RunResult
    ) -> bool:
        old, new = state.size, checkpoint.size

        def alarm(name: str, detail: str) -> bool:
            result.findings.append({"alarm": name, "old_size": old, "size": new, "detail": detail})
            return False

        if new < old:  # `staleness.older` found it is not a prefix of what the monitor saw
            return alarm(
                "checkpoint_rollback",
                "the log shows a smaller checkpoint than before, whose root is not the root "
                "of the leaves this monitor proved at that size",
            )
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
            leaves = _chunk(self.source, index, checkpoint.size)
            hashed = b"".join(hash_leaf(leaf) for leaf in leaves)
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

    def _first_tiles(self, state: states.MonitorState, result: RunResult) -> None:
        """First run: every history tile at this size is the proven leaves' tree."""
        tree = TiledTree()
        tree.extend_concatenated(bytes(state.leaf_hashes))
        ids = list(tiles_for_size(state.size))
        paths = ["history/" + tid.path for tid in ids]
        ahead = self.source.read_ahead(paths)
        try:
            for tid, path in zip(ids, paths, strict=True):
                want = tree.tile(tid.level, tid.index)
                data = ahead.take(path)
                if data is None or len(data) != len(want):  # the full tile, or the error
                    data = read_tile(self.source, "history/", state.size, tid.level, tid.index)
                if data != want:
                    result.findings.append(
                        {
                            "alarm": "tile_mismatch",
                            "size": state.size,
                            "tile": path,
                            "detail": "the hash tile is not the tree the entry bundles give "
                            "(the signed checkpoint's root)",
                        }
                    )
                    result.evidence["tile-" + path.replace("/", "-")] = data
                    return
        finally:
            ahead.close()

    def _check_heads(self, state: states.MonitorState, result: RunResult) -> None:
        """The head rules on leaves `checked`..`size`, committing each clean chunk."""
        rules = HeadRules(self.source, state, entries=self.options.entries)
        signatures = Signatures(self.source, self.chain.keys, self.chain.revocations)
        found = result.findings, result.evidence
        try:
            while state.checked < state.size:
                start = state.checked
                leaves = _chunk(self.source, start, state.size)
                parsed, rules.targets, items = parse_leaves(leaves)
                verdicts = signatures.check(items)
                try:
                    check_chunk(state, start, (leaves, parsed), verdicts, rules, *found)
                finally:
                    verdicts.close()
                if result.alarmed:
                    return
                state.checked = start + len(leaves)
                states.save(self.options.state_dir, state, state.size)
        finally:
            signatures.close()


def _unwitnessed(where: str, policy: Policy | None, data: bytes) -> None:
    """A checkpoint short of the policy's quorum is exit 2, not an alarm (witnesses may lag)."""
    if policy is None:
        return
    try:
        check_cosignatures(parse_note(data), policy, at=int(time.time())).require()
    except CapabilityAnchorError as exc:
        raise InputError(
            f"{where}/history/checkpoint: not witnessed as --policy requires "
            f"({exc}); nothing committed: its witnesses lag, or --policy is not the "
            "log's (its /history/policy)"
        ) from None


def _chunk(source: LogSource, start: int, size: int) -> list[bytes]:
    """The leaves from `start`, up to CHUNK_BUNDLES entry bundles (bounded memory)."""
    return [
        leaf
        for bundle in read_leaves(source, "history/", start, size, CHUNK_BUNDLES)
        for leaf in bundle
    ]


def _revoked(
    source: LogSource,
    chain: TrustChain,
    state: states.MonitorState,
    checkpoint: tuple[bytes, int],
    result: RunResult,
) -> None:
    """`key_revoked_signature` for this run's checkpoint (`heads.checkpoint_alarm`)."""
    note, size = checkpoint
    (leaf,) = _chunk(source, size - 1, size)[:1]
    if not changed(state, size - 1, leaf, result.findings, result.evidence):
        found = checkpoint_alarm(chain, parse_note(note), size, leaf)
        if found is not None:
            result.findings.append(found[0])
            result.evidence.update(found[1])
