"""Offline verification (SPEC §9, §12.5): the checks `verify-proof` runs, trusting nothing it
did not check.

`record`: one resolver-2 record's anchor and proof, check by check; `checks`: the checks'
names and results; `anchor`: what the record's signed claims say about the tree; `sources`:
where the head, tiles and history come from (files named on the command line, never the
input itself); `stamps`: check 7, the RFC 3161 stamp; `history`: checks 8 and 9;
`members`: a record file's plain members against its signed claims.

This package is on the verifying path: it imports only the kernel (`merkle`, `leaf`,
`head`, `jws`, `keys`, `note`, `errors`, `encoding`, `strictjson`), `bounded.read` and,
lazily, `timestamp`; never the store, the log, the service or an HTTP client
(`tests/integration/test_layering.py`).
"""
