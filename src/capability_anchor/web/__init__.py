"""The HTTP edge both services stand behind (the log's API and `witness serve`).

`nodelay`: uvicorn's h11 protocol with TCP_NODELAY and a header deadline; `exchange`: the
Litestar app every exchange goes through (body deadline, HEAD, one spelling per path);
`errors`: `{v, error, note}` answers; `guards`: rate limit, body length, Bearer tokens and
`/metrics`; `accesslog`: the service's log lines. May import the kernel's `head`, `errors`,
`envvars` and `metrics/`; never the store, the log or `api/` (which imports it).
"""
