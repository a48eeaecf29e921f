"""End-to-end tests: real processes (servers, the CLI as a user runs it, kills), browsers,
faketime, and third-party implementations (c2sp venvs, OpenSSL's TSA, promtool, nginx)."""
