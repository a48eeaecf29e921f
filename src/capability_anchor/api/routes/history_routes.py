"""The history tree and its witnesses' view of it (SPEC §12.4 `/history/...`)
(which reads leave the loop: docs/explanation/api-reads.md).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from litestar import Request, get

from capability_anchor.api.caching import Answer, cached
from capability_anchor.api.models import documented, success
from capability_anchor.api.openapi import LeafHash, TilePath, count, path_count
from capability_anchor.api.service import service_of
from capability_anchor.encoding import hash_from_hex
from capability_anchor.errors import NotFound, UsageError
from capability_anchor.merkle.tilepath import parse_tile_path
from capability_anchor.read.reader import MAX_INT

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


def tile_response(request: Request[Any, Any, Any], body: bytes) -> Answer:
    """Tiles never change once a published size makes them (SPEC §12.4: immutable)."""
    return cached(request, body, immutable=True, media_type=OCTETS)


@get(
    "/history/tile/{tile:path}",
    summary="A tile or entry bundle of the history tree (C2SP tlog-tiles)",
    description=f"The tile path after tile/: {TILE_PATH}. 404 past the history's size.",
    responses={**TILE, **documented(304, 404)},
)
async def history_tile(request: Request[Any, Any, Any], tile: TilePath) -> Answer:
    wanted = parse_tile_path(tile.removeprefix("/"))
    return tile_response(request, service_of(request).reader.read.tiles.history(wanted))


# --- checkpoints, proofs, keys (SPEC §12.4) ------------------------------------------------

TEXT = "text/plain"  # Litestar adds "; charset=utf-8" to text types
_SIZE = re.compile(r"[1-9][0-9]{0,18}")


def text_response(request: Request[Any, Any, Any], body: bytes) -> Answer:
    """A moving text answer (`no-cache`, ETag): checkpoints gain cosignatures."""
    return cached(request, body, immutable=False, media_type=TEXT)


def _text(description: str) -> dict[int, Any]:
    return success(str, description, "text/plain")


@get(
    "/history/checkpoint",
    summary="The newest checkpoint that meets the witness policy's quorum (C2SP checkpoint)",
    description=(
        "A signed note: the log's checkpoint of the history with the policy witnesses' "
        "cosignature lines, in policy order. With no policy, quorum none, or while no "
        "checkpoint meets the quorum, the newest checkpoint with every stored cosignature."
    ),
    responses={**_text("a C2SP checkpoint note with its cosignatures"), **documented(304, 404)},
)
async def history_checkpoint(request: Request[Any, Any, Any]) -> Answer:
    service = service_of(request)
    note = await service.read(service.reader.read.history.served_checkpoint)
    return text_response(request, note)


@get(
    "/history/checkpoint/{size:str}",
    summary="The checkpoint of one history size, with every stored cosignature",
    responses={**_text("a C2SP checkpoint note with its cosignatures"), **documented(304, 404)},
)
async def history_checkpoint_size(
    request: Request[Any, Any, Any], size: Annotated[str, path_count(1)]
) -> Answer:
    if _SIZE.fullmatch(size) is None:
        raise UsageError("the history size is a positive integer written in digits")
    if int(size) > MAX_INT:
        raise UsageError(f"the history size is at most {MAX_INT}")
    service = service_of(request)
    note = await service.read(service.reader.read.history.served_checkpoint, int(size))
    return text_response(request, note)


@get(
    "/history/proof",
    summary="A C2SP tlog-proof of a head in the history",
    description=(
        "leaf_hash: the history leaf hash (SHA-256 of 0x00 and the head's JWS payload) of a "
        "published head. The proof's extra is the head's compact JWS; its checkpoint is the "
        "one /history/checkpoint serves (or the newest, while that does not cover the head "
        "yet), or the checkpoint of `size`."
    ),
    responses={**_text("a C2SP tlog-proof"), **documented(304, 404)},
)
async def history_proof(
    request: Request[Any, Any, Any],
    leaf_hash: LeafHash,
    size: Annotated[int | None, count(1)] = None,
) -> Answer:
    h = hash_from_hex(leaf_hash, "leaf_hash")
    service = service_of(request)
    proof = await service.read(service.reader.read.history.tlog_proof, h, size)
    return text_response(request, proof)


@get(
    "/history/vkey",
    summary="The log's note verifier key (C2SP vkey), one line",
    responses={**_text("<origin>+<key id>+<base64 key>, and a newline"), **documented(304)},
)
async def history_vkey(request: Request[Any, Any, Any]) -> Answer:
    service = service_of(request)
    vkey = await service.read(service.reader.read.history.vkey)
    return text_response(request, vkey.encode("utf-8") + b"\n")


@get(
    "/history/policy",
    summary="The log's witness policy (C2SP tlog-policy), as stored",
    responses={**_text("the tlog-policy file"), **documented(304, 404)},
)
async def history_policy(request: Request[Any, Any, Any]) -> Answer:
    policy = service_of(request).reader.store.policy()
    if policy is None:
        raise NotFound("this log has no witness policy")
    return text_response(request, policy)
