"""Integration tests: real SQLite stores in tmp dirs, the in-process Litestar TestClient, CLI
`main()` calls in process (a fresh `python -c` only where a clean `sys.modules` is the point)."""
