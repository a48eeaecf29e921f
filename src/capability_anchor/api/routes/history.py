"""The history tree and its witnesses' view of it (SPEC §12.4 `/history/...`): C2SP
tlog-tiles of the history, and (with the checkpoints) the signed checkpoint, tlog-proofs,
the log's note key and the witness policy."""

from __future__ import annotations

from typing import Any

from litestar import Request, Response, get
from litestar.params import FromPath

from ...merkle.tilepath import parse_tile_path
from ..caching import cached
from ..errors import READ_ERRORS
from ..models import success
from ..service import service_of

OCTETS = "application/octet-stream"
TILE = success(
    bytes,
    "a C2SP tlog-tiles hash tile (concatenated 32-byte hashes) or entry bundle (each leaf "
    "prefixed by its big-endian uint16 length)",
    OCTETS,
)
TILE_PATH = (
    "`<L>/<N>[.p/<W>]` (a hash tile, L 0..63) or `entries/<N>[.p/<W>]` (an entry bundle); "
    "N in groups of three digits, all but the last prefixed with x (x001/x234/067), W 1..255"
)


def tile_response(request: Request[Any, Any, Any], body: bytes) -> Response[bytes]:
    """Tiles never change once a published size makes them (SPEC §12.4: immutable)."""
    return cached(request, body, immutable=True, media_type=OCTETS)


@get(
    "/history/tile/{tile:path}",
    summary="A tile or entry bundle of the history tree (C2SP tlog-tiles)",
    description=f"The tile path after tile/: {TILE_PATH}. 404 past the history's size.",
    responses={**TILE, **READ_ERRORS},
)
async def history_tile(request: Request[Any, Any, Any], tile: FromPath[str]) -> Response[bytes]:
    wanted = parse_tile_path(tile.removeprefix("/"))
    return tile_response(request, service_of(request).reader.read.tiles.history(wanted))
