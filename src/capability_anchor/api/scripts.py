"""The two scripts a record lookup on `/` runs (decisions/38-explorer.md): `/verify.js`, the
exact bytes of the JavaScript verifier `src/verify-js/verify.mjs` (beside the package in a
checkout or an editable install; a wheel carries it as `api/verify.mjs`), and `/explorer.js`,
the lookup's page script beside this module. Read once per process; `no-cache` with an ETag.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from litestar import Request, get

from capability_anchor.errors import NotFound

from .caching import Answer, cached

HERE = Path(__file__).resolve().parent
VERIFIER_PLACES = (HERE.parent.parent / "verify-js" / "verify.mjs", HERE / "verify.mjs")
EXPLORER = HERE / "explorer.js"
JAVASCRIPT = "text/javascript"


@functools.cache
def _script(name: str) -> bytes:
    places = VERIFIER_PLACES if name == "verify" else (EXPLORER,)
    for place in places:
        if place.is_file():
            return place.read_bytes()
    raise NotFound(f"{name}.js is not installed with this service")


@get("/verify.js", include_in_schema=False)
async def verify_js(request: Request[Any, Any, Any]) -> Answer:
    return cached(request, _script("verify"), immutable=False, media_type=JAVASCRIPT)


@get("/explorer.js", include_in_schema=False)
async def explorer_js(request: Request[Any, Any, Any]) -> Answer:
    return cached(request, _script("explorer"), immutable=False, media_type=JAVASCRIPT)
