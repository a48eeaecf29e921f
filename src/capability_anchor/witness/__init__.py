"""Both sides of c2sp.org/tlog-witness (SPEC §12.3).

`client/`: the log asking the witnesses of its policy to cosign its checkpoints (rounds,
schedule, answers, episodes); `server/`: `capability-anchor witness`, a witness that
cosigns any C2SP log it is configured for. Both share the note and cosignature code of the
kernel's `note/`; the server keeps its state through the store's `WitnessStore` interface.

`client/` may import the kernel, the store's contract, `log/`, `metrics/` and `bounded/`;
`server/` the kernel, the store's witness contract, `metrics/` and the HTTP edge `web/`.
Neither imports the other, nor `api/` (`tests/integration/test_layering.py`).
"""
