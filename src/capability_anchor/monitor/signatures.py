"""Rule 2 of `heads.py` (the head's document is served, its JWS verifies, its payload is the leaf,
the document is the SPEC §4 form) for a chunk of heads: a large chunk over HTTP by WORKERS processes
(one is bound by its interpreter lock), a small one inline, with the same verdicts in the same
order."""

from __future__ import annotations

import multiprocessing
from collections.abc import Generator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor

from capability_anchor import jws, strictjson
from capability_anchor.errors import CapabilityAnchorError, InputError
from capability_anchor.keys import KeySet
from capability_anchor.keys.trust import Revocation, voided
from capability_anchor.parentdeath import watch_parent
from capability_anchor.read.source import LogSource, open_source
from capability_anchor.strictjson import is_int

Problem = tuple[str, str, bytes | None] | None  # (alarm, detail, what was served) or None
Item = tuple[str, bytes]  # the head document's path, the history leaf

POOL_MIN = 2048  # heads in a chunk from which worker processes pay for their start
WORKERS = 2
BATCH = 256


def problem_of(
    where: str,
    path: str,
    leaf: bytes,
    data: bytes | None,
    keys: KeySet,
    revoked: Mapping[str, Revocation] | None = None,
) -> Problem:
    """The verdict on one head from the bytes served at `path`; no head document: InputError."""
    if data is None:
        return "head_missing", f"{path}: the log does not serve this head", None
    no_jws = "not a head document (no `jws` member)"
    doc = strictjson.load_object(
        data,
        f"{where}/{path}",
        error=InputError,
        invalid="{what}: not a head document ({detail})",
        not_object="{what}: " + no_jws,
    )
    if not isinstance(doc.get("jws"), str):
        raise InputError(f"{where}/{path}: {no_jws}")
    token = doc.pop("jws")
    try:
        verified = jws.verify(token, keys, jws.HEAD_TYP)
    except CapabilityAnchorError as exc:
        return "bad_head_signature", f"{path}: {exc}", data
    if verified.payload != leaf:
        return "head_not_leaf", f"{path}: the signed head is not the history leaf", data
    if revoked and verified.kid in revoked:
        iat = strictjson.loads(leaf).get("iat")
        gone = voided(revoked, verified.kid, iat if is_int(iat) else 0)
        if gone is not None:
            detail = f"{path}: signed at iat {iat}, after its key's revocation: {gone.describe()}"
            return "key_revoked_signature", detail, data
    if data != _document(leaf, token):
        return "head_document_mismatch", f"{path}: {_misstated(doc, leaf)}", data
    return None


def _document(leaf: bytes, token: str) -> bytes:
    """`head.document` for the claims JCS'd in `leaf`, without parsing them (`jws` before prev)."""
    at = leaf.index(b',"prev":')
    return leaf[:at] + b',"jws":"' + token.encode("ascii") + b'"' + leaf[at:]


def _misstated(doc: dict[str, object], leaf: bytes) -> str:
    signed = strictjson.loads(leaf)
    differ = sorted(k for k in signed.keys() | doc.keys() if doc.get(k, ...) != signed.get(k, ...))
    if differ:
        return f"the document's {', '.join(differ)} differ from its signed claims"
    return "the document is not the JCS bytes of its claims and jws (SPEC §4)"


def _inline(
    source: LogSource, keys: KeySet, items: list[Item], revoked: Mapping[str, Revocation]
) -> Generator[Problem, None, None]:
    ahead = source.read_ahead([path for path, _ in items])
    try:
        for path, leaf in items:
            yield problem_of(source.where, path, leaf, ahead.take(path), keys, revoked)
    finally:
        ahead.close()


# In a worker process, set by its initializer: its source, the keys, the revocations.
_worker: tuple[LogSource, KeySet, Mapping[str, Revocation]] | None = None


def _start_worker(
    where: str, keys: KeySet, deadline: float, revoked: Mapping[str, Revocation]
) -> None:
    global _worker
    # A kill -9 of the monitor must not leave its workers waiting on their queue for ever
    # (the parent-sentinel watch only: the pool may be started from any thread of it).
    watch_parent()
    _worker = open_source(where, deadline=deadline), keys, revoked


def _check_batch(items: list[Item]) -> list[Problem]:
    if _worker is None:
        raise RuntimeError("_check_batch runs only in a worker started by Signatures")
    source, keys, revoked = _worker
    return list(_inline(source, keys, items, revoked))


class Signatures:
    """Verdicts for the heads of each chunk, in order; `close` stops the workers."""

    def __init__(
        self, source: LogSource, keys: KeySet, revoked: Mapping[str, Revocation] | None = None
    ) -> None:
        self._source = source
        self._keys = keys
        self._revoked = dict(revoked or {})
        self._pool: ProcessPoolExecutor | None = None

    def check(self, items: list[Item]) -> Generator[Problem, None, None]:
        if len(items) < POOL_MIN:
            return _inline(self._source, self._keys, items, self._revoked)
        if self._pool is None:
            # spawn, not fork: this process runs reader threads, which a fork would copy
            # mid-request.
            self._pool = ProcessPoolExecutor(
                WORKERS,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(self._source.where, self._keys, self._source.deadline, self._revoked),
            )
        batches = [items[at : at + BATCH] for at in range(0, len(items), BATCH)]
        return _collect([self._pool.submit(_check_batch, batch) for batch in batches])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


def _collect(futures: list[Future[list[Problem]]]) -> Generator[Problem, None, None]:
    try:
        for future in futures:
            yield from future.result()
    finally:
        for future in futures:
            future.cancel()
