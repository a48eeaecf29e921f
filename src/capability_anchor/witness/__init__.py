"""Both sides of c2sp.org/tlog-witness (SPEC §12.3): `client/`, the log asking the witnesses of its
policy to cosign its checkpoints; `server/`, a witness for any C2SP log. Neither imports the other
nor `api/` (`tests/integration/test_layering.py`)."""
