"""Offline verification (SPEC §9, §12.5): the checks `verify-proof` runs, trusting nothing it did
not check, and the sources of what a record does not carry. On the verifying path: it imports only
the kernel, `bounded.read` and, lazily, `timestamp`; never the store, the log, the service or an
HTTP client (tests/integration/test_layering.py)."""
