"""Inclusion and consistency proofs (SPEC §6 `/proof`, `/consistency`): the hot read path,
answered with `proof_json` (byte-identical to RFC 8785 for these documents, and faster)."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import FromQuery, QueryParameter

from ...encoding import hash_from_hex
from ...errors import UsageError
from ...reading import MAX_INT
from ..caching import cached, proof_json
from ..errors import READ_ERRORS
from ..models import ConsistencyAnswer, ProofAnswer, success
from ..service import day_param, service_of

_EITHER = "give either day and index, or leaf_hash (and optionally day)"


@get(
    "/proof",
    summary="Inclusion proof of an entry in a published head",
    responses={**success(ProofAnswer, "the proof and the head it is against"), **READ_ERRORS},
)
async def proof(
    request: Request[Any, Any, Any],
    day: Annotated[str | None, QueryParameter()] = None,
    index: Annotated[int | None, QueryParameter(ge=0, le=MAX_INT)] = None,
    tree_size: Annotated[int | None, QueryParameter(ge=0, le=MAX_INT)] = None,
    leaf_hash: Annotated[str | None, QueryParameter()] = None,
) -> Response[bytes]:
    reader = service_of(request).reader
    if leaf_hash is not None:
        if index is not None:
            raise UsageError(_EITHER)
        h = hash_from_hex(leaf_hash, "leaf_hash")
        answer = reader.proof_by_leaf_hash(
            h, day_param(day) if day is not None else None, tree_size
        )
    else:
        if day is None or index is None:
            raise UsageError(_EITHER)
        answer = reader.proof(day_param(day), index, tree_size)
    return cached(request, proof_json(answer), immutable=False)


@get(
    "/consistency",
    summary="Consistency proof between two sizes of a day",
    responses={**success(ConsistencyAnswer, "the consistency path"), **READ_ERRORS},
)
async def consistency(
    request: Request[Any, Any, Any],
    day: FromQuery[str],
    first: Annotated[int, QueryParameter(ge=0, le=MAX_INT)],
    second: Annotated[int, QueryParameter(ge=0, le=MAX_INT)],
) -> Response[bytes]:
    answer = service_of(request).reader.consistency(day_param(day), first, second)
    return cached(request, proof_json(answer), immutable=False)
