"""One witness: its store, its cosigning key, and the `add-checkpoint` steps in order.

`add_checkpoint` verifies the log's signature outside any transaction (it needs no state,
and Ed25519 is the slow part), then runs the stateful checks and the insert as one
`WitnessStore.advance`: the check of the old size and the new row are one write.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..keys import load_key_file
from ..note import Cosigner
from ..store.witness_interface import Cosigned, WitnessStore
from ..store.witness_sqlite import SqliteWitnessStore
from .protocol import Refusal, check_signature, check_state, cosign, parse_request

KEY_FILE = "witness-key.jwk"


@dataclass
class Witness:
    store: WitnessStore
    cosigner: Cosigner
    clock: Callable[[], float] = field(default=time.time)

    @classmethod
    def open(cls, data_dir: Path) -> Witness:
        store = SqliteWitnessStore.open(data_dir)
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
        check_signature(request, self.store.log(origin))

        def step(latest: Cosigned | None) -> Cosigned:
            check_state(request, latest)
            return cosign(request, self.cosigner, int(self.clock()))

        return self.store.advance(origin, step).cosignature

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
