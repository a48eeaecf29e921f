"""The test suite, in three tiers by what a test runs (issue 22): `unit/` (pure, in process),
`integration/` (real SQLite files, the in-process app and CLI), `e2e/` (real processes,
browsers, faked clocks, third-party implementations). `kit/` holds what they share.

A package, so pytest imports every test as `tests.<tier>.test_x` from the repository root
and the kits as `tests.kit.x`: no `sys.path` insert anywhere."""
