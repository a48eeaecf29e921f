#!/usr/bin/env python3
"""The floor of `bench_edge.py` (issue #37): a minimal Litestar app, `GET /healthz` answering
`{"status":"ok"}`, on the service's own HTTP server stack. Run as a script it serves through
`serve`'s `run_on` (the same uvicorn config, protocol class and loop); as `edgefloor:app` it
is what the ASGI form's uvicorn argv (tests/kit/serverkit.py) serves with `--workers N`. So
the floor follows whatever edge the service uses, with no protocol named here.

    .venv/bin/python tools/edgefloor.py --port 8080
"""

from __future__ import annotations

import argparse

from litestar import Litestar, get

from capability_anchor.cli.serve import bind, run_on

HEADER_TIMEOUT_S = 10.0  # serve's default; it does not change the figures


@get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


app = Litestar([healthz])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    run_on(bind(args.host, args.port), app, header_timeout=HEADER_TIMEOUT_S, prog="floor")


if __name__ == "__main__":
    main()
