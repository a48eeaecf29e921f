"""The HTTP edge both services stand behind (the log's API and `witness serve`): the uvicorn
protocol (`nodelay`), the exchange (`exchange`), error answers, guards and the access log.
May import the kernel's `head`, `errors`, `envvars` and `metrics/`; never the store, the
log or `api/` (which imports it)."""
