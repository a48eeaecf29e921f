"""Inclusion and consistency proofs (SPEC §6 `/proof`, `/consistency`): the hot read path
(which reads leave the loop: docs/explanation/api-reads.md).
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get

from capability_anchor.api.caching import answer, cached
from capability_anchor.api.errors import documented
from capability_anchor.api.models import ConsistencyAnswer, ProofAnswer, success
from capability_anchor.api.openapi import OptionalDay, OptionalLeafHash, QueryDay, count
from capability_anchor.api.service import day_param, service_of
from capability_anchor.encoding import hash_from_hex
from capability_anchor.errors import UsageError

_EITHER = "give either day and index, or leaf_hash (and optionally day)"


@get(
    "/proof",
    summary="Inclusion proof of an entry in a published head",
    responses={
        **success(ProofAnswer, "the proof and the head it is against"),
        **documented(304, 404),
    },
)
async def proof(
    request: Request[Any, Any, Any],
    day: OptionalDay = None,
    index: Annotated[int | None, count(0)] = None,
    tree_size: Annotated[int | None, count(0)] = None,
    leaf_hash: OptionalLeafHash = None,
) -> Response[bytes]:
    service = service_of(request)
    reader = service.reader
    if leaf_hash is not None:
        if index is not None:
            raise UsageError(_EITHER)
        h = hash_from_hex(leaf_hash, "leaf_hash")
        in_day = day_param(day) if day is not None else None
        found = await service.read(reader.proof_by_leaf_hash, h, in_day, tree_size)
    else:
        if day is None or index is None:
            raise UsageError(_EITHER)
        found = reader.proof(day_param(day), index, tree_size)
    return cached(request, answer(ProofAnswer, found), immutable=False)


@get(
    "/consistency",
    summary="Consistency proof between two sizes of a day",
    responses={**success(ConsistencyAnswer, "the consistency path"), **documented(304, 404)},
)
async def consistency(
    request: Request[Any, Any, Any],
    day: QueryDay,
    first: Annotated[int, count(1)],
    second: Annotated[int, count(1)],
) -> Response[bytes]:
    found = service_of(request).reader.consistency(day_param(day), first, second)
    return cached(request, answer(ConsistencyAnswer, found), immutable=False)
