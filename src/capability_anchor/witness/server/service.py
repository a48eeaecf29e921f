"""One witness: its store, its cosigning key, and the `add-checkpoint` steps in order.

`add_checkpoint` verifies the log's signature outside any transaction (it needs no state,
and Ed25519 is the slow part), then runs the stateful checks and the insert as one
`WitnessStore.advance`: the check of the old size and the new row are one write.

A log's keys are read from the store at every request, so a `witness update-log` made while
the witness serves is adopted at once; the first request that sees a new key set logs it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from capability_anchor.keys import load_key_file
from capability_anchor.note import Cosigner
from capability_anchor.store import open as stores
from capability_anchor.store.witness import Cosigned, WitnessStore

from .protocol import Refusal, check_signature, check_state, cosign, parse_request

KEY_FILE = "witness-key.jwk"
log = logging.getLogger("capability_anchor.witness")


@dataclass
class Witness:
    store: WitnessStore
    cosigner: Cosigner
    clock: Callable[[], float] = field(default=time.time)
    _keys_seen: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def open(cls, data_dir: Path) -> Witness:
        store = stores.open_witness(data_dir)
        try:
            key = load_key_file(data_dir / KEY_FILE)
            return cls(store, Cosigner(store.name(), key))
        except BaseException:
            store.close()
            raise

    def add_checkpoint(self, body: bytes) -> str:
        """The cosignature line for a valid request, else a `Refusal`."""
        request = parse_request(body)
        origin = request.checkpoint.origin
        witnessed = self.store.log(origin)
        if witnessed is not None:
            self._note_keys(witnessed.origin, witnessed.vkeys)
        check_signature(request, witnessed)

        def step(latest: Cosigned | None) -> Cosigned:
            check_state(request, latest)
            return cosign(request, self.cosigner, int(self.clock()))

        return self.store.advance(origin, step).cosignature

    def _note_keys(self, origin: str, vkeys: tuple[str, ...]) -> None:
        before = self._keys_seen.get(origin)
        self._keys_seen[origin] = vkeys
        if before is not None and before != vkeys:
            log.info(
                "log %s: now verified with the key set [%s] (was [%s])",
                origin,
                ", ".join(vkeys),
                ", ".join(before),
            )

    def monitoring(self, hex_origin: str) -> bytes:
        """The latest cosigned checkpoint of the log whose origin hashes to `hex_origin`,
        with our cosignature; a Refusal(404) when there is none."""
        log = self.store.log_by_hash(hex_origin)
        latest = None if log is None else self.store.latest(log.origin)
        if latest is None:
            raise Refusal(404, "no checkpoint cosigned for that log")
        return latest.monitoring_note()

    def close(self) -> None:
        self.store.close()
